//! CONFIG GET|SET|RESETSTAT|REWRITE: the command side of `config.rs`.

use super::*;
use crate::config::{find_option, OPTIONS};

// ---- CONFIG ----

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// `CONFIG GET|SET|RESETSTAT|REWRITE|HELP`
pub fn config(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    match sub {
        "help" => reply_help(c, CONFIG_HELP),
        "get" => {
            let mut pairs: Vec<(String, String)> = Vec::new();
            let mut seen: Vec<&str> = Vec::new();
            for pattern in &argv[2..] {
                let literal = !pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
                for opt in OPTIONS {
                    if !literal && crate::config::HIDDEN_OPTIONS.contains(&opt.name) {
                        continue;
                    }
                    for name in std::iter::once(opt.name).chain(opt.alias) {
                        if seen.contains(&name) {
                            continue;
                        }
                        if glob_match(pattern, name.as_bytes(), true) {
                            seen.push(name);
                            // A literal name is echoed as the client typed it.
                            let shown = if literal {
                                String::from_utf8_lossy(pattern).into_owned()
                            } else {
                                name.to_string()
                            };
                            pairs.push((shown, (opt.get)(&c.srv.config)));
                        }
                    }
                }
            }
            c.cl.reply.map(pairs.len());
            for (n, v) in pairs {
                c.cl.reply.bulk(n.as_bytes());
                c.cl.reply.bulk(v.as_bytes());
            }
        }
        "set" => config_set(c, argv),
        "resetstat" => {
            c.srv.stats = Default::default();
            c.srv.snapshot.forks = 0;
            crate::db::lazyfree::reset_freed_objects();
            c.srv.command_stats.clear();
            c.srv.subcommand_stats.clear();
            c.cl.reply.ok();
        }
        _ => match c.srv.config.rewrite(&super::acl::config_user_lines(c.srv)) {
            Ok(()) => c.cl.reply.ok(),
            Err(e) => {
                tracing::warn!("CONFIG REWRITE failed: {e}");
                c.cl.reply.error(&format!("ERR {e}"));
            }
        },
    }
}

/// The smallest backlog CONFIG SET leaves (Redis's
/// CONFIG_REPL_BACKLOG_MIN_SIZE).
const REPL_BACKLOG_MIN_SIZE: u64 = 16 * 1024;

/// Options CONFIG SET refuses while a dataset loads.
const DENY_WHILE_LOADING: &[&str] = &["appendonly", "repl-diskless-load", "dir"];

/// A CONFIG SET failed after the working directory changed: every
/// option goes back, and so does the directory (Redis's
/// restoreBackupConfig applies the old values again).
fn roll_back(srv: &mut Server, backup: crate::config::Config) {
    if srv.config.dir != backup.dir {
        let _ = std::env::set_current_dir(&backup.dir);
    }
    srv.config = backup;
}

fn config_set(c: &mut Ctx, argv: &[&[u8]]) {
    if !argv.len().is_multiple_of(2) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    // While a dataset loads, the options that would change what is being
    // loaded or where are refused with -LOADING (Redis's
    // DENY_LOADING_CONFIG), unless an earlier argument fails first.
    if c.srv.loading.is_some() {
        for pair in argv[2..].chunks(2) {
            let Some(opt) = find_option(&String::from_utf8_lossy(pair[0])) else {
                break;
            };
            if !opt.mutable
                || opt.protected && !c.srv.config.enable_protected_configs.allows(c.cl.is_local)
            {
                break;
            }
            if DENY_WHILE_LOADING.contains(&opt.name) {
                return c
                    .cl
                    .reply
                    .error("LOADING Redis is loading the dataset in memory");
            }
        }
    }
    let backup = c.srv.config.clone();
    let mut seen: Vec<&str> = Vec::new();
    for pair in argv[2..].chunks(2) {
        let name = String::from_utf8_lossy(pair[0]).to_string();
        let Some(opt) = find_option(&name) else {
            c.srv.config = backup;
            return c.cl.reply.error(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        };
        let fail = |why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
        };
        // An alias is a config of its own to Redis 7.0: naming an option
        // and its alias in one call is no duplicate (the last one wins).
        let named = match opt.alias {
            Some(alias) if alias.eq_ignore_ascii_case(&name) => alias,
            _ => opt.name,
        };
        if seen.contains(&named) {
            c.srv.config = backup;
            return c.cl.reply.error(&fail("duplicate parameter"));
        }
        seen.push(named);
        if !opt.mutable {
            // kvstore's own immutable options (not Redis's, so no Redis
            // tool skips them) take the value they have: a tool setting
            // every option of CONFIG GET * to itself (Redis's "CONFIG
            // sanity" test) works.
            let value = String::from_utf8_lossy(pair[1]);
            let unchanged = crate::config::KVSTORE_ONLY_OPTIONS.contains(&opt.name)
                && (opt.get)(&c.srv.config).eq_ignore_ascii_case(&value);
            if unchanged {
                continue;
            }
            c.srv.config = backup;
            return c.cl.reply.error(&fail("can't set immutable config"));
        }
        // Protected configs decide where the server writes files: only
        // where `enable-protected-configs` lets this client change them.
        if opt.protected && !backup.enable_protected_configs.allows(c.cl.is_local) {
            c.srv.config = backup;
            return c.cl.reply.error(&fail("can't set protected config"));
        }
        let value = String::from_utf8_lossy(pair[1]).to_string();
        if let Err(why) = (opt.set)(&mut c.srv.config, &value) {
            c.srv.config = backup;
            return c.cl.reply.error(&fail(&why));
        }
    }
    // Like Redis's chdir: the directory must exist; nothing is created.
    if c.srv.config.dir != backup.dir {
        if let Err(e) = std::env::set_current_dir(&c.srv.config.dir) {
            let msg = format!(
                "ERR CONFIG SET failed (possibly related to argument 'dir') - {}",
                crate::config::os_error_text(&e)
            );
            c.srv.config = backup;
            return c.cl.reply.error(&msg);
        }
    }
    // More clients need more descriptors (Redis's updateMaxclients).
    if c.srv.config.maxclients > backup.maxclients {
        let wanted = c.srv.config.maxclients;
        if let Ok(fits) = crate::process::adjust_open_files_limit(wanted) {
            if fits != wanted {
                roll_back(c.srv, backup);
                return c.cl.reply.error(&format!("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {fits}"));
            }
        }
    }
    // A backlog set smaller than 16 KB gets 16 KB (Redis's
    // resizeReplicationBacklog, run when CONFIG SET changes the size).
    if c.srv.config.repl_backlog_size != backup.repl_backlog_size {
        c.srv.config.repl_backlog_size = c.srv.config.repl_backlog_size.max(REPL_BACKLOG_MIN_SIZE);
    }
    if c.srv.config.maxmemory != backup.maxmemory {
        c.srv.update_growth_ceiling();
        // A new limit is enforced before the loop sleeps, outside this
        // command (Redis 7.0's updateMaxmemory starts its eviction time
        // event): not in the middle of an EXEC, and the DELs go out on
        // their own, not wrapped with the command's.
        let max = c.srv.config.maxmemory;
        if max != 0 {
            let used = c
                .srv
                .used_memory()
                .saturating_sub(c.srv.memory_not_counted_for_evict());
            if max < used as u64 {
                tracing::warn!("WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.");
            }
        }
        // Without a limit the pass only ends a spell over the old one
        // (INFO current_eviction_exceeded_time).
        c.srv.evictor.pending = true;
    }
    // TLS: certificates and settings load again whenever a tls- option is
    // set (Redis's applyTlsCfg), and a new tls-port is listened on; what
    // fails leaves everything as it was.
    if let Some(first_tls) = seen.iter().find(|n| n.starts_with("tls-")) {
        let fail = |arg: &str, why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}")
        };
        let tls_port_only = seen
            .iter()
            .all(|n| !n.starts_with("tls-") || *n == "tls-port");
        // A new tls-port alone needs a configuration (made now if there is
        // none); any other tls- option makes a new one.
        if c.srv.config.tls.in_use() && (!tls_port_only || c.srv.tls.is_none()) {
            match crate::tls::configure(&c.srv.config.tls) {
                Ok(ctx) => c.srv.tls = Some(ctx),
                Err(e) => {
                    tracing::warn!("Failed to configure TLS: {e}");
                    roll_back(c.srv, backup);
                    return c.cl.reply.error(&fail(
                        first_tls,
                        "Unable to update TLS configuration. Check server logs.",
                    ));
                }
            }
        }
    }
    // A new port, tls-port or bind list is listened on before the reply
    // (Redis's changeListenPort and changeBindAddr): what cannot be bound
    // leaves everything as it was. Addresses listened on already are kept.
    let bind_changed = c.srv.config.bind != backup.bind;
    if c.srv.config.tls.port != backup.tls.port || (bind_changed && c.srv.config.tls.port != 0) {
        if let Err(msg) = listen_again(c.srv, &backup, true) {
            roll_back(c.srv, backup);
            return c.cl.reply.error(&msg);
        }
    }
    if c.srv.config.port != backup.port || bind_changed {
        if let Err(msg) = listen_again(c.srv, &backup, false) {
            roll_back(c.srv, backup);
            // TLS listeners bound for this call go too.
            c.srv.new_tls_listeners = None;
            return c.cl.reply.error(&msg);
        }
    }
    // The OOM score follows its options at once (Redis's updateOOMScoreAdj);
    // one the kernel refuses leaves every option as it was.
    let cfg = &c.srv.config;
    if cfg.oom_score_adj != backup.oom_score_adj
        || cfg.oom_score_adj_values != backup.oom_score_adj_values
    {
        let class = crate::process::server_oom_class(cfg);
        if crate::process::set_oom_score_adj(cfg, class).is_err() {
            let name = if cfg.oom_score_adj != backup.oom_score_adj {
                "oom-score-adj"
            } else {
                "oom-score-adj-values"
            };
            roll_back(c.srv, backup);
            let _ = crate::process::set_oom_score_adj(&c.srv.config, class);
            return c.cl.reply.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - Failed to set current oom_score_adj. Check server logs."
            ));
        }
    }
    // Redis sets the title on this change even with set-proc-title no;
    // kvstore leaves the title alone then, as at startup.
    if c.srv.config.proc_title_template != backup.proc_title_template
        && c.srv.config.set_proc_title
        && crate::process::apply_proc_title(&c.srv.config, None).is_err()
    {
        roll_back(c.srv, backup);
        return c.cl.reply.error(
            "ERR CONFIG SET failed (possibly related to argument 'proc-title-template') - failed to set process title",
        );
    }
    // appendonly: start (a rewrite makes the first base) or stop the AOF;
    // the last step that can fail, so that no rollback has an AOF to undo.
    if c.srv.config.appendonly != backup.appendonly {
        if c.srv.config.appendonly {
            if let Err(e) = c.srv.start_aof() {
                tracing::warn!("Unable to turn on AOF: {e}");
                roll_back(c.srv, backup);
                return c.cl.reply.error(
                    "ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.",
                );
            }
        } else {
            c.srv.stop_aof();
        }
    }
    c.srv.apply_lazyfree_config();
    let cfg = &c.srv.config;
    if cfg.loglevel != backup.loglevel {
        crate::logging::set_level(&cfg.loglevel);
    }
    if cfg.hz != backup.hz {
        c.srv.hz = cfg.hz;
    }
    if cfg.jemalloc_bg_thread != backup.jemalloc_bg_thread {
        crate::memory::set_background_thread(cfg.jemalloc_bg_thread);
    }
    crate::logging::CRASH_LOG_ENABLED
        .store(cfg.crash_log_enabled, std::sync::atomic::Ordering::Relaxed);
    // History files kept while auto-gc was off go now.
    if !cfg.aof_disable_auto_gc && backup.aof_disable_auto_gc {
        c.srv.delete_aof_history();
    }
    // `requirepass` is the default user's only password (Redis's
    // ACLUpdateDefaultUserPassword), once nothing can undo the change.
    if seen.contains(&"requirepass") {
        let pass = c.srv.config.requirepass.clone();
        if let Some(d) = c.srv.acl.user_mut(crate::state::acl::DEFAULT_USER) {
            d.set_only_password(pass.as_bytes());
            d.refresh();
        }
    }
    c.cl.reply.ok();
}

/// Bind the listeners of `port` (or `tls-port`) at the `bind` addresses
/// after CONFIG SET changed either; the loop swaps them in. A new list
/// overlapping what is listened on (`127.0.0.1` → `*`): as Redis, the old
/// listeners close first, then the new list is bound, and if it cannot be
/// the old one is bound again. The error is CONFIG SET's reply.
fn listen_again(srv: &mut Server, backup: &crate::config::Config, tls: bool) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let bind = |cfg: &crate::config::Config, open: &[_]| match tls {
        true => crate::net::bind_tls_listeners(cfg, open),
        false => crate::net::bind_tcp_listeners(cfg, open),
    };
    let (port, port_changed, option) = match tls {
        true => (
            srv.config.tls.port,
            srv.config.tls.port != backup.tls.port,
            "tls-port",
        ),
        false => (srv.config.port, srv.config.port != backup.port, "port"),
    };
    let (current, pending) = match tls {
        true => (&srv.tls_listeners, &mut srv.new_tls_listeners),
        false => (&srv.tcp_listeners, &mut srv.new_tcp_listeners),
    };
    let mut open = current.clone();
    for l in pending.iter().flatten() {
        if let Ok(at) = l.local_addr() {
            open.push((at, l.as_raw_fd()));
        }
    }
    let mut bound = bind(&srv.config, &open);
    if !port_changed
        && bound
            .as_ref()
            .is_err_and(|e| e.raw_os_error() == Some(libc::EADDRINUSE))
    {
        let fds: Vec<_> = open.iter().map(|&(_, fd)| fd).collect();
        if let Err(e) = crate::net::release_listeners(&fds) {
            tracing::warn!("Closing the old listening sockets: {e}");
        }
        bound = bind(&srv.config, &[]);
        if bound.is_err() {
            tracing::warn!("Failed to bind, trying to restore old listening sockets.");
            match bind(backup, &[]) {
                Ok(old) => *pending = Some(old),
                Err(e) => {
                    tracing::error!("Failed to restore old listening sockets: {e}");
                    *pending = Some(Vec::new());
                }
            }
        }
    }
    match bound {
        Ok(listeners) => {
            *pending = Some(listeners);
            Ok(())
        }
        Err(e) if port_changed => {
            tracing::warn!("Failed listening on port {port}: {e}");
            Err(format!("ERR CONFIG SET failed (possibly related to argument '{option}') - Unable to listen on this port. Check server logs."))
        }
        Err(e) => {
            tracing::warn!("Failed to bind: {e}");
            Err("ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.".into())
        }
    }
}
