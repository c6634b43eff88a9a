//! Allocator truth for INFO memory and `maxmemory`.
//!
//! jemalloc is the global allocator. `used_memory` reads the calling thread's
//! allocation counters, which jemalloc keeps anyway, so it costs two loads and
//! can be checked before every write command. INFO refreshes the full
//! statistics (allocated, active, resident) with an epoch advance.

use std::cell::OnceCell;

use tikv_jemalloc_ctl::{epoch, stats, thread};

thread_local! {
    static COUNTERS: OnceCell<Option<(thread::ThreadLocal<u64>, thread::ThreadLocal<u64>)>> = const { OnceCell::new() };
}

/// Net bytes allocated by the event-loop thread (all state lives there),
/// less what the lazyfree thread freed of it, plus the keyspace bucket
/// arrays mapped outside the allocator.
pub fn used_memory() -> usize {
    let freed_elsewhere = crate::db::lazyfree::freed_bytes() as usize;
    crate::db::table::mapped_bucket_bytes() + thread_allocated().saturating_sub(freed_elsewhere)
}

/// What the allocator really hands out for a buffer of `capacity` bytes
/// (jemalloc's size class: up to a quarter more for large buffers), so that
/// buffers are counted at what they cost in `used_memory`.
pub fn allocation_size(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    // SAFETY: nallocx only computes a size class; it allocates nothing.
    match unsafe { tikv_jemalloc_sys::nallocx(capacity, 0) } {
        0 => capacity,
        n => n,
    }
}

/// Net bytes allocated by this thread so far (jemalloc's thread counters).
pub(crate) fn thread_allocated() -> usize {
    COUNTERS.with(|c| {
        let counters = c.get_or_init(|| {
            Some((
                thread::allocatedp::read().ok()?,
                thread::deallocatedp::read().ok()?,
            ))
        });
        match counters {
            Some((a, d)) => a.get().saturating_sub(d.get()) as usize,
            None => 0,
        }
    })
}

/// A snapshot of jemalloc's global statistics.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllocatorStats {
    pub allocated: usize,
    pub active: usize,
    pub resident: usize,
    pub mapped: usize,
}

/// The keyspace's bucket arrays, mapped outside jemalloc, count in every
/// figure (allocated, active, resident, mapped) as jemalloc's own large
/// allocations would, so that active is never below allocated.
pub fn allocator_stats() -> AllocatorStats {
    let _ = epoch::advance();
    let buckets = crate::db::table::mapped_bucket_bytes();
    AllocatorStats {
        allocated: stats::allocated::read().unwrap_or(0) + buckets,
        active: stats::active::read().unwrap_or(0) + buckets,
        resident: stats::resident::read().unwrap_or(0) + buckets,
        mapped: stats::mapped::read().unwrap_or(0) + buckets,
    }
}

/// Resident set size of the process, from /proc/self/statm.
pub fn rss_bytes() -> usize {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * page_size()
}

/// The sum of one field over every mapping in /proc/self/smaps, in bytes
/// (Redis's zmalloc_get_smap_bytes_by_field): `AnonHugePages:` says whether
/// transparent huge pages back the process. 0 where there is no smaps.
pub fn smap_bytes_by_field(field: &str) -> usize {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    text.lines()
        .filter_map(|line| line.strip_prefix(field))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
        .map(|kb| kb * 1024)
        .sum()
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

pub fn total_system_memory() -> usize {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages > 0 {
        pages as usize * page_size()
    } else {
        0
    }
}

/// Redis's `bytesToHuman`: 1.23K, 4.56M, …
pub fn bytes_to_human(n: usize) -> String {
    let n = n as f64;
    const K: f64 = 1024.0;
    if n < K {
        format!("{}B", n as u64)
    } else if n < K * K {
        format!("{:.2}K", n / K)
    } else if n < K * K * K {
        format!("{:.2}M", n / (K * K))
    } else if n < K * K * K * K {
        format!("{:.2}G", n / (K * K * K))
    } else {
        format!("{:.2}T", n / (K * K * K * K))
    }
}

/// jemalloc's own statistics report (MEMORY MALLOC-STATS), as its
/// malloc_stats_print writes it.
pub fn malloc_stats_text() -> String {
    unsafe extern "C" fn append(opaque: *mut libc::c_void, text: *const libc::c_char) {
        // SAFETY: `opaque` is the `Vec<u8>` passed below, alive for the
        // whole call; jemalloc hands a NUL-terminated string.
        unsafe {
            let out = &mut *(opaque as *mut Vec<u8>);
            out.extend_from_slice(std::ffi::CStr::from_ptr(text).to_bytes());
        }
    }
    let mut out: Vec<u8> = Vec::new();
    // SAFETY: the callback only appends to `out`, which outlives the call.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(append),
            &mut out as *mut Vec<u8> as *mut libc::c_void,
            std::ptr::null(),
        );
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Turn jemalloc's background purging thread on or off
/// (`jemalloc-bg-thread`, Redis's set_jemalloc_bg_thread). Returns whether
/// jemalloc took it.
pub fn set_background_thread(on: bool) -> bool {
    let mut value = on;
    // SAFETY: "background_thread" takes a bool, given by pointer with its
    // size; nothing is read back.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"background_thread".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut value as *mut bool as *mut libc::c_void,
            std::mem::size_of::<bool>(),
        )
    };
    rc == 0
}

/// Hand every arena's dirty pages back to the kernel (MEMORY PURGE, as
/// Redis's jemalloc_purge does); false when jemalloc refuses.
pub fn purge() -> bool {
    // "arena.<MALLCTL_ARENAS_ALL>.purge": 4096 names every arena.
    let name = c"arena.4096.purge";
    // SAFETY: a control with no input or output, named by a C string.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}

/// A C string of `bytes` up to their first NUL, as C code would read them.
fn c_string(bytes: &[u8]) -> std::ffi::CString {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::ffi::CString::new(&bytes[..end]).expect("no NUL before the end")
}

/// What DEBUG MALLCTL and MALLCTL-STR answer.
#[derive(Debug, PartialEq, Eq)]
pub enum MallctlReply {
    Int(i64),
    Str(Vec<u8>),
    Ok,
    /// An errno, for Redis's `strerror` reply.
    Errno(i32),
}

/// DEBUG MALLCTL <name> [value]: read (and write) an integer control,
/// trying 8, then 4, 2 and 1 bytes as Redis's mallctl_int does.
pub fn mallctl_int(name: &[u8], new: Option<i64>) -> MallctlReply {
    let name = c_string(name);
    let mut old: i64 = 0;
    let mut val: i64 = new.unwrap_or(0);
    let mut sz = std::mem::size_of::<i64>();
    while sz > 0 {
        let (newp, newlen) = match new {
            Some(_) => (&mut val as *mut i64 as *mut libc::c_void, sz),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: `old` and `val` are 8 bytes and the sizes given never
        // exceed that; jemalloc reads and writes at most those sizes.
        let mut ret = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                &mut old as *mut i64 as *mut libc::c_void,
                &mut sz,
                newp,
                newlen,
            )
        };
        if ret == 0 {
            return MallctlReply::Int(old);
        }
        if ret == libc::EPERM && new.is_some() {
            // A write-only control: just write it.
            // SAFETY: as above, `val` holds `sz` ≤ 8 bytes.
            ret = unsafe {
                tikv_jemalloc_sys::mallctl(
                    name.as_ptr(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    &mut val as *mut i64 as *mut libc::c_void,
                    sz,
                )
            };
            if ret == 0 {
                return MallctlReply::Ok;
            }
        }
        if ret != libc::EINVAL {
            return MallctlReply::Errno(ret);
        }
        // The size may be wrong: try a smaller one.
        sz /= 2;
    }
    MallctlReply::Errno(libc::EINVAL)
}

/// DEBUG MALLCTL-STR <name> [value|VOID]: read (and write) a string
/// control, as Redis's mallctl_string.
pub fn mallctl_str(name: &[u8], new: Option<&[u8]>) -> MallctlReply {
    let name = c_string(name);
    let mut old: *const libc::c_char = std::ptr::null();
    let mut sz = std::mem::size_of::<*const libc::c_char>();
    // SAFETY: a string control hands back a pointer to a string jemalloc
    // keeps for the process's life; `old` has a pointer's size.
    let rret = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            &mut old as *mut *const libc::c_char as *mut libc::c_void,
            &mut sz,
            std::ptr::null_mut(),
            0,
        )
    };
    if rret != 0 && !(rret == libc::EPERM && new.is_some()) {
        return MallctlReply::Errno(rret);
    }
    let mut wret = 0;
    if let Some(value) = new {
        let value = c_string(value);
        let mut valp = value.as_ptr();
        let (newp, newlen) = if value.as_bytes() == b"VOID" {
            (std::ptr::null_mut(), 0)
        } else {
            (
                &mut valp as *mut *const libc::c_char as *mut libc::c_void,
                sz,
            )
        };
        // SAFETY: `valp` points at `value`, alive for the call; a string
        // control takes a pointer to a C string.
        wret = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                newp,
                newlen,
            )
        };
    }
    if rret == 0 {
        if old.is_null() {
            return MallctlReply::Str(Vec::new());
        }
        // SAFETY: jemalloc answered with a NUL-terminated string.
        return MallctlReply::Str(unsafe { std::ffi::CStr::from_ptr(old) }.to_bytes().to_vec());
    }
    if wret != 0 {
        MallctlReply::Errno(wret)
    } else {
        MallctlReply::Ok
    }
}

/// The C library's text for an errno, as `strerror` gives it.
pub fn strerror(errno: i32) -> String {
    // SAFETY: strerror returns a NUL-terminated static or thread-local
    // string, copied at once.
    unsafe { std::ffi::CStr::from_ptr(libc::strerror(errno)) }
        .to_string_lossy()
        .into_owned()
}
