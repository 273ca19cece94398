//! Serves a data directory with several replicas behind the test balancer, for suites that
//! start "a server" by command line (the Python SDK suite, and every `Server` of the Rust
//! black-box tests, with `STREETLEVEL_TEST_TOPOLOGY=replicas`), and for trying the topology by
//! hand:
//!
//! ```text
//! replicas -- /path/to/streetlevel serve --data DIR [--addr 127.0.0.1:0] [SERVE FLAGS...]
//! ```
//!
//! It starts `STREETLEVEL_TEST_REPLICAS` replicas (default 2) of that command on the backend
//! `STREETLEVEL_TEST_BACKEND` names (see `streetlevel_tests::replicas::Backend::from_env`),
//! sharing their quotas through a `redis-server` of its own (Debian's package, see
//! `streetlevel_tests::redis`) unless the flags or the environment name one (`--redis-url`,
//! `STREETLEVEL_REDIS_URL`): the topology docs/SCALING.md recommends. Every replica gets the
//! `STREETLEVEL_*` variables (but the harness's `STREETLEVEL_TEST_*`) and `RUST_LOG` of this
//! process, as the command alone would, so a test's environment reaches the replicas. It
//! prints what each replica printed before listening (`metrics on ...`) and `replica at
//! http://<addr>` for each replica and, on `PostgreSQL`, `database at <url>`, then
//! `listening on http://<balancer>` like `streetlevel serve` does. SIGTERM stops every replica
//! gracefully, and it exits with success when all of them did; with `--exit-on-stdin-eof` it
//! also stops when its standard input closes. The replicas and the Redis exit with it whatever
//! happens, SIGKILL included: each replica reads its standard input from this process and is
//! started with `--exit-on-stdin-eof`, and the Redis gets the parent-death signal.
#![allow(clippy::print_stdout, clippy::panic, clippy::expect_used)]

use std::io::Write as _;
use std::path::PathBuf;

use streetlevel_tests::redis::RedisServer;
use streetlevel_tests::replicas::{Backend, DATABASE_LINE, REPLICA_LINE, Replicas};

/// Why the wrapper stops.
enum Stop {
    /// SIGTERM: a graceful stop of every replica.
    Terminated,
    /// Standard input closed (`--exit-on-stdin-eof`): the test that started it is done.
    StdinClosed,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match args.split_first() {
        Some((dashes, command)) if dashes == "--" => command,
        _ => panic!("usage: replicas -- STREETLEVEL serve --data DIR [SERVE FLAGS...]"),
    };
    let (binary, data, mut extra) = parse(command);
    let exit_on_stdin_eof = command.iter().any(|arg| arg == "--exit-on-stdin-eof");
    let count = std::env::var("STREETLEVEL_TEST_REPLICAS")
        .ok()
        .map_or(2, |count| {
            count
                .parse()
                .expect("STREETLEVEL_TEST_REPLICAS is a number")
        });
    // Installed before anything is announced, as `serve` does: a SIGTERM right after the
    // `listening on` line is a graceful stop, not the default disposition's kill.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the signal handler");
    let mut terminate = {
        let _entered = runtime.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler")
    };
    let env = forwarded_environment();
    // Started on this, the main, thread: the Redis dies when it ends (its parent-death
    // signal), so a SIGKILL of this process leaves none behind.
    let redis = (!names_redis(&extra, &env)).then(RedisServer::start);
    if let Some(redis) = &redis {
        extra.extend([String::from("--redis-url"), redis.url()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let backend = Backend::from_env("replicas");
    let mut replicas = Replicas::start_with_env(&binary, &data, count, &backend, &extra, &env);
    for index in 0..replicas.len() {
        let replica = replicas.replica(index);
        for line in &replica.announced {
            println!("{line}");
        }
        println!("{REPLICA_LINE}{}", replica.addr);
    }
    if let Backend::Postgres(url) = &backend {
        println!("{DATABASE_LINE}{url}");
    }
    println!("listening on {}", replicas.base());
    std::io::stdout().flush().expect("flush standard output");

    let (stop, stopped) = std::sync::mpsc::channel();
    if exit_on_stdin_eof {
        // As `serve --exit-on-stdin-eof`: the test harness closes our input to stop us, and a
        // harness that dies closes it too, so no replica outlives its test.
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
            let _ = stop.send(Stop::StdinClosed);
        });
    }
    std::thread::spawn(move || {
        runtime.block_on(terminate.recv());
        let _ = stop.send(Stop::Terminated);
    });
    let graceful = match stopped.recv() {
        Ok(Stop::Terminated) => replicas.terminate(),
        Ok(Stop::StdinClosed) | Err(_) => true,
    };
    // The replicas stop before the Redis they use.
    drop(replicas);
    drop(redis);
    std::process::exit(i32::from(!graceful));
}

/// The variables of this process every replica gets: `streetlevel serve`'s own
/// (`STREETLEVEL_*`, but the test harness's `STREETLEVEL_TEST_*`) and `RUST_LOG`. A replica
/// inherits the rest; the harness sets these two kinds for each process it starts.
fn forwarded_environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| {
            (name.starts_with("STREETLEVEL_") && !name.starts_with("STREETLEVEL_TEST_"))
                || name == "RUST_LOG"
        })
        .collect()
}

/// Whether the serve flags or the forwarded environment name a Redis server already.
fn names_redis(extra: &[String], env: &[(String, String)]) -> bool {
    extra.iter().any(|flag| {
        ["--redis-url", "--redis"]
            .iter()
            .any(|name| flag == name || flag.starts_with(&format!("{name}=")))
    }) || env.iter().any(|(name, _)| name == "STREETLEVEL_REDIS_URL")
}

/// The binary, the data directory and the other flags of `STREETLEVEL serve --data DIR ...`;
/// `--addr` is dropped (each replica listens on a port of its own), and so is
/// `--exit-on-stdin-eof`, which every replica gets anyway.
fn parse(command: &[String]) -> (PathBuf, PathBuf, Vec<String>) {
    let [binary, serve, rest @ ..] = command else {
        panic!("expected STREETLEVEL serve ..., got {command:?}");
    };
    assert_eq!(serve, "serve", "only `serve` runs as replicas");
    let mut data = None;
    let mut extra = Vec::new();
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--data" => data = rest.next().map(PathBuf::from),
            "--addr" => {
                rest.next();
            }
            _ if arg.starts_with("--data=") => data = Some(PathBuf::from(&arg[7..])),
            _ if arg.starts_with("--addr=") => {}
            // Each replica is started with it already (see `Server::spawn`).
            "--exit-on-stdin-eof" => {}
            _ => extra.push(arg.clone()),
        }
    }
    (
        PathBuf::from(binary),
        data.expect("serve needs --data DIR"),
        extra,
    )
}
