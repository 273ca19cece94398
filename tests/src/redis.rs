//! A real `redis-server` (Debian's package) for the tests of shared quotas: on a free
//! `127.0.0.1` port, in a temporary directory, persisting nothing, stopped when dropped.
//!
//! It also dies with the thread that started it, even when that process is killed with
//! SIGKILL and nothing is dropped (the `replicas` wrapper under a harness's timeout): it is
//! started through util-linux's `setpriv --pdeathsig KILL`, which sets Linux's parent-death
//! signal and then execs the server, so the child is `redis-server` itself (the workspace
//! forbids the `unsafe` a `prctl` before `exec` would need). Linux sends that signal when the
//! starting *thread* ends, so keep a [`RedisServer`] on the thread that started it.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the Debian package installs the server; `REDIS_SERVER` overrides it.
const DEFAULT_BINARY: &str = "/usr/bin/redis-server";

/// A running `redis-server`, killed (and its directory removed) when dropped, or when the
/// thread that started it ends.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free port and returns once it accepts connections (it says so
    /// on standard output). Panics, with what it printed, if it cannot start.
    pub fn start() -> RedisServer {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "streetlevel-redis-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the Redis directory");
        // Another process may take the port between this probe and Redis binding it: then
        // Redis exits, and another port is tried.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port();
            let mut server = RedisServer {
                child: None,
                port,
                dir: dir.clone(),
            };
            if server.spawn().is_ok() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (as a crash or a network cut would look to its clients) and waits
    /// for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty (it persists nothing); panics if it
    /// cannot.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(output) = self.spawn() {
            panic!(
                "redis-server did not restart on port {}: {output}",
                self.port
            );
        }
    }

    /// Starts `redis-server` on `self.port` and waits for its ready line; `Err` holds what
    /// it printed when it exits before that.
    fn spawn(&mut self) -> Result<(), String> {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| String::from(DEFAULT_BINARY));
        let mut child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(&binary)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run setpriv {binary} (install Debian's util-linux and redis-server): \
                     {error}"
                )
            });
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut printed = String::new();
        for line in lines.by_ref() {
            let line = line.unwrap_or_default();
            printed.push_str(&line);
            printed.push('\n');
            if line.contains("Ready to accept connections") {
                // Keep draining its log so it never blocks on a full pipe.
                std::thread::spawn(move || for _ in lines {});
                self.child = Some(child);
                return Ok(());
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(printed)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
