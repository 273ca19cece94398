//! Serves a data directory with several replicas behind the test balancer, for suites that
//! start "a server" by command line (the Python SDK suite with
//! `STREETLEVEL_TEST_TOPOLOGY=replicas`), and for trying the topology by hand:
//!
//! ```text
//! replicas -- /path/to/streetlevel serve --data DIR [--addr 127.0.0.1:0] [SERVE FLAGS...]
//! ```
//!
//! It starts `STREETLEVEL_TEST_REPLICAS` replicas (default 2) of that command on the backend
//! `STREETLEVEL_TEST_BACKEND` names (see `streetlevel_tests::replicas::Backend::from_env`),
//! prints `listening on http://<balancer>` like `streetlevel serve` does, and runs until it is
//! killed. The replicas exit with it: each reads its standard input from this process, and
//! they are started with `--exit-on-stdin-eof`.
#![allow(clippy::print_stdout, clippy::panic, clippy::expect_used)]

use std::io::Write as _;
use std::path::PathBuf;

use streetlevel_tests::replicas::{Backend, Replicas};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match args.split_first() {
        Some((dashes, command)) if dashes == "--" => command,
        _ => panic!("usage: replicas -- STREETLEVEL serve --data DIR [SERVE FLAGS...]"),
    };
    let (binary, data, extra) = parse(command);
    let exit_on_stdin_eof = command.iter().any(|arg| arg == "--exit-on-stdin-eof");
    let count = std::env::var("STREETLEVEL_TEST_REPLICAS")
        .ok()
        .map_or(2, |count| {
            count
                .parse()
                .expect("STREETLEVEL_TEST_REPLICAS is a number")
        });
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let replicas = Replicas::start(
        &binary,
        &data,
        count,
        &Backend::from_env("sdk_replicas"),
        &extra,
    );
    println!("listening on {}", replicas.base());
    std::io::stdout().flush().expect("flush standard output");
    if exit_on_stdin_eof {
        // As `serve --exit-on-stdin-eof`: the test harness closes our input to stop us, and a
        // harness that dies closes it too, so no replica outlives its test.
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        drop(replicas);
        return;
    }
    loop {
        std::thread::park();
    }
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
