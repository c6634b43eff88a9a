//! `kvstore [path/to/kvstore.conf] [--option value ...]`

use std::process::ExitCode;

use kvstore::config::{default_config_text, Config};
use kvstore::process;
use kvstore::server::EventLoop;
use std::sync::atomic::Ordering;
use tracing::{error, info, warn};

fn main() -> ExitCode {
    // First, while there is one thread: room for long process titles.
    process::make_title_room();
    let Ok(args) = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<Vec<String>, _>>()
    else {
        eprintln!("*** FATAL CONFIG FILE ERROR ***\nAn argument is not valid UTF-8");
        return ExitCode::FAILURE;
    };
    match args.first().map(String::as_str) {
        Some("-v") | Some("--version") => {
            println!(
                "kvstore v={} (Redis {} compatible)",
                kvstore::KVSTORE_VERSION,
                kvstore::REDIS_VERSION
            );
            return ExitCode::SUCCESS;
        }
        Some("-h") | Some("--help") => {
            println!("Usage: kvstore [/path/to/kvstore.conf] [--option value ...]");
            println!("       kvstore --print-default-config");
            println!("Example: kvstore --port 7777 --save \"\" --maxmemory 1gb");
            return ExitCode::SUCCESS;
        }
        Some("--print-default-config") => {
            print!("{}", default_config_text());
            return ExitCode::SUCCESS;
        }
        Some("check-rdb") => return check_rdb(args.get(1)),
        _ => {}
    }
    let config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("*** FATAL CONFIG FILE ERROR ***\n{e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = kvstore::commands::install_renames(&config.rename_commands) {
        eprintln!("*** FATAL CONFIG FILE ERROR ***\n{e}");
        return ExitCode::FAILURE;
    }
    let syslog = config.syslog_enabled.then(|| kvstore::logging::Syslog {
        ident: &config.syslog_ident,
        facility: &config.syslog_facility,
    });
    // Data files are relative to `dir`, as in Redis, and so is the log
    // file (Redis changes directory while it reads its configuration);
    // the directory must exist (a typo must not make the server write
    // somewhere new).
    if let Err(e) = std::env::set_current_dir(&config.dir) {
        let why = kvstore::config::os_error_text(&e);
        eprintln!(
            "*** FATAL CONFIG FILE ERROR ***\nCan't chdir to '{}': {why}",
            config.dir.display()
        );
        return ExitCode::FAILURE;
    }
    if let Err(e) = kvstore::logging::init(&config.loglevel, &config.logfile, syslog) {
        eprintln!("Can't open the log file '{}': {e}", config.logfile);
        return ExitCode::FAILURE;
    }
    kvstore::logging::install_crash_hook();
    kvstore::logging::install_fatal_signal_handlers();
    kvstore::logging::CRASH_LOG_ENABLED.store(config.crash_log_enabled, Ordering::Relaxed);
    kvstore::logging::USE_EXIT_ON_PANIC.store(config.use_exit_on_panic, Ordering::Relaxed);
    let exec_name = std::env::args_os().next().unwrap_or_default();
    process::remember_exec_name(&exec_name.to_string_lossy());
    // Before anything listens, as Redis (upstart stops the process here).
    let supervised = process::start_supervision(config.supervised);
    let mut config = config;
    let background = config.daemonize && !supervised;
    if background {
        process::daemonize();
        // Redis's createPidFile: a daemon always has one.
        if config.pidfile.is_empty() {
            config.pidfile = "/var/run/redis.pid".to_string();
        }
    }
    if !config.pidfile.is_empty() {
        if let Err(e) = std::fs::write(&config.pidfile, format!("{}\n", std::process::id())) {
            error!("Failed to write PID file '{}': {e}", config.pidfile);
        }
    }
    info!(
        "kvstore {} starting (Redis {} compatible), pid={}",
        kvstore::KVSTORE_VERSION,
        kvstore::REDIS_VERSION,
        std::process::id()
    );
    if config.io_threads > 1 {
        warn!(
            "io-threads {}: kvstore serves every client from its single event loop thread; the setting has no effect",
            config.io_threads
        );
    }
    kvstore::memory::set_background_thread(config.jemalloc_bg_thread);
    process::set_bio_cpulist(&config.bio_cpulist);
    let mut event_loop = match EventLoop::bind(config) {
        Ok(l) => l,
        Err(e) => {
            error!("Could not create server listening socket: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = &event_loop.srv.config;
    if config.set_proc_title {
        if let Err(e) = process::apply_proc_title(config, None) {
            warn!("Can't set the process title: {e}");
        }
    }
    log_banner(config);
    process::disable_transparent_huge_pages(config);
    if let Err(e) = kvstore::state::snapshot::begin_startup_load(&mut event_loop.srv) {
        error!("{e}");
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    // `replicaof` in the configuration: follow that master from the start.
    if let Some((host, port)) = event_loop.srv.config.replicaof.clone() {
        event_loop.srv.replicate_from(host, port);
    }
    // Nothing to load: open the AOF now (the loop does it after a load).
    if event_loop.srv.loading.is_none() {
        if let Err(e) = kvstore::state::aof::open_after_load(&mut event_loop.srv) {
            error!("{e}");
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    }
    let config = &event_loop.srv.config;
    process::set_cpu_affinity(&config.server_cpulist);
    let _ = process::set_oom_score_adj(config, process::server_oom_class(config));
    match event_loop.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("Event loop failed: {e}");
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The startup banner (Redis's redisAsciiArt): a small logo when the log
/// is a terminal or `always-show-logo` says so, else one line.
fn log_banner(config: &Config) {
    use std::io::IsTerminal;
    let port = config.port;
    let pid = std::process::id();
    if config.always_show_logo || (config.logfile.is_empty() && std::io::stdout().is_terminal()) {
        info!(
            "\n  _              _\n | | ____   __ __| |_ ___  _ __ ___    kvstore {} (Redis {} compatible) 64 bit\n | |/ /\\ \\ / / __| __/ _ \\| '__/ _ \\   Running in standalone mode\n |   <  \\ V /\\__ \\ || (_) | | |  __/   Port: {port}\n |_|\\_\\  \\_/ |___/\\__\\___/|_|  \\___|   PID: {pid}\n",
            kvstore::KVSTORE_VERSION,
            kvstore::REDIS_VERSION,
        );
    } else {
        info!("Running mode=standalone, port={port}.");
    }
}

/// `kvstore check-rdb FILE`: validate a dump the way redis-check-rdb does and
/// print what it holds.
fn check_rdb(path: Option<&String>) -> ExitCode {
    let Some(path) = path else {
        eprintln!("Usage: kvstore check-rdb <rdb-file-name>");
        return ExitCode::FAILURE;
    };
    println!("[offset 0] Checking RDB file {path}");
    // Accept any database index a dump may use.
    let config = Config {
        databases: 1 << 16,
        ..Default::default()
    };
    use kvstore::persistence::rdb;
    let opts = rdb::LoadOptions::from_config(&config);
    let seed = kvstore::util::random_u64();
    let mut dbs: Vec<kvstore::db::Db> = (0..config.databases)
        .map(|i| kvstore::db::Db::new(i, seed))
        .collect();
    match rdb::load_file(&mut dbs, &opts, std::path::Path::new(path)) {
        Ok(stats) => {
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            println!("[info] RDB version {}, {} bytes", stats.version, size);
            println!("[info] {} keys read", stats.keys);
            let names = ["strings", "lists", "sets", "sorted sets", "hashes"];
            for (n, name) in stats.per_type.iter().zip(names) {
                println!("[info]   {n} {name}");
            }
            println!("[info] {} expires", stats.with_expire);
            println!("[info] {} already expired", stats.expired_skipped);
            println!("\\o/ RDB looks OK! \\o/");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("--- RDB ERROR DETECTED ---");
            println!("[{e}]");
            ExitCode::FAILURE
        }
    }
}
