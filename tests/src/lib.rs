#![doc = include_str!("../README.md")]
// Test support: failing loudly is how it reports a failed test.
#![allow(clippy::panic, clippy::expect_used, clippy::missing_panics_doc)]

pub mod auth;
pub mod balancer;
pub mod garage;
pub mod postgres;
pub mod redis;
pub mod replicas;

use std::fmt::Write as _;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// A data directory made by `streetlevel fixtures` plus an app registered with
/// `streetlevel apps create`.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The data directory.
    pub dir: PathBuf,
    /// The registered app's client ID.
    pub client_id: String,
    /// Its client access token.
    pub client_token: String,
    /// Its client secret.
    pub client_secret: String,
}

/// The one switch that turns blurring off for what this crate starts (servers, imports,
/// admin commands), set before the caller's environment and flags, which win over it: the
/// synthetic fixtures have no faces, and the tests of blurring turn it on with `--blur true`
/// and the models of [`test_models_dir`].
pub const BLUR_OFF: (&str, &str) = ("STREETLEVEL_BLUR", "false");

/// The one switch that keeps the servers this crate starts from reconstructing the real
/// photos other tests import (structure from motion costs about a minute of CPU for the Lund
/// walk), set before the caller's environment and flags, which win over it: the tests of
/// reconstruction turn it on with `--sfm-workers 1`.
pub const SFM_OFF: (&str, &str) = ("STREETLEVEL_SFM_WORKERS", "0");

/// The folder with ONNX Runtime and the default face model: `STREETLEVEL_TEST_MODELS`
/// (which `cargo xtask test` sets), else where `cargo xtask models` installs them. Under CI a
/// missing folder fails the test that asks; elsewhere it is `None`, and the test says it
/// skipped.
pub fn test_models_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("STREETLEVEL_TEST_MODELS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/streetlevel-models"),
        PathBuf::from,
    );
    if dir.join("libonnxruntime.so.1.32.0").is_file() && dir.join("centerface.onnx").is_file() {
        return Some(dir);
    }
    assert!(
        !in_ci(),
        "the blur models are not in {}: `cargo xtask test` installs them",
        dir.display()
    );
    eprintln!(
        "skipped: the blur models are not in {} (run `cargo xtask models`)",
        dir.display()
    );
    None
}

/// The folder of the structure-from-motion engine's virtual environment: `STREETLEVEL_TEST_SFM`
/// (which `cargo xtask test` sets), else where `cargo xtask models` installs it. Under CI a
/// missing engine fails the test that asks; elsewhere it is `None`, and the test says it
/// skipped.
pub fn test_sfm_engine_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("STREETLEVEL_TEST_SFM").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/streetlevel-sfm"),
        PathBuf::from,
    );
    if dir.join("venv/bin/python").exists() {
        return Some(dir);
    }
    assert!(
        !in_ci(),
        "the structure-from-motion engine is not in {}: `cargo xtask test` installs it",
        dir.display()
    );
    eprintln!(
        "skipped: the structure-from-motion engine is not in {} (run `cargo xtask models`)",
        dir.display()
    );
    None
}

/// Runs `binary args...` and returns its standard output; panics with its error output when it
/// fails (test support: a failure here is a failed test).
pub fn run(binary: &Path, args: &[&str]) -> String {
    run_with_env(binary, args, &[])
}

/// [`run`] with environment variables set, such as [`Server::admin_env`] for an admin
/// command on the tables a server uses.
pub fn run_with_env(binary: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let output = Command::new(binary)
        .args(args)
        .env(BLUR_OFF.0, BLUR_OFF.1)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("the streetlevel binary runs");
    assert!(
        output.status.success(),
        "streetlevel {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Copies the data directory `dir` into the empty PostgreSQL database `url` with
/// `streetlevel migrate` (a server then serves it with `STREETLEVEL_DATABASE_URL`).
pub fn migrate(binary: &Path, dir: &Path, url: &str) {
    run(
        binary,
        &["migrate", "--from", &dir.to_string_lossy(), "--to", url],
    );
}

impl Fixture {
    /// A fresh data set of `images` images (media rendered lazily by the server) in a
    /// directory named after `name` under the system temp directory.
    pub fn generate(binary: &Path, name: &str, images: usize) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("streetlevel-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dir_text = dir.to_string_lossy().into_owned();
        let images = images.to_string();
        run(
            binary,
            &[
                "fixtures", "--out", &dir_text, "--images", &images, "--media", "lazy",
            ],
        );
        let created = run(
            binary,
            &[
                "apps",
                "create",
                "--data",
                &dir_text,
                "--name",
                "black-box tests",
                "--callback",
                "http://127.0.0.1/callback",
                "--scopes",
                "read",
            ],
        );
        let field = |name: &str| {
            created
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name}: ")))
                .map_or_else(
                    || panic!("no {name} in {created:?}"),
                    |value| value.trim().to_owned(),
                )
        };
        Fixture {
            client_id: field("client_id"),
            client_token: field("client_token"),
            client_secret: field("client_secret"),
            dir,
        }
    }

    /// A copy of this data directory under a new directory named after `name`, with the same
    /// app and tokens: one server serves one data directory (it holds a lock on it), so tests
    /// that start several servers on the same data give each its copy. Copy a fixture before
    /// any server writes to it.
    #[must_use]
    pub fn copy(&self, name: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("streetlevel-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&self.dir, &dir);
        Fixture {
            dir,
            ..self.clone()
        }
    }

    /// The path of the store's database.
    pub fn database(&self) -> PathBuf {
        self.dir.join("streetlevel.sqlite")
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("read the fixture directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// Registers an app in `data` with `scopes` (`read`, `read,upload`, ...) through
/// `streetlevel apps create` and returns its client token ([`auth::create_app`] gives all its
/// credentials).
pub fn create_app(binary: &Path, data: &Path, scopes: &str) -> String {
    auth::create_app(binary, data, scopes).token
}

/// Creates a user in `data` with an email address through `streetlevel users create`, the
/// password on standard input.
pub fn create_user(binary: &Path, data: &Path, username: &str, email: &str, password: &str) {
    let mut create = Command::new(binary)
        .args(["users", "create", "--data"])
        .arg(data)
        .args(["--username", username, "--email", email])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("streetlevel users create starts");
    create
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(format!("{password}\n").as_bytes())
        .expect("the password is written");
    assert!(
        create.wait().expect("users create exits").success(),
        "streetlevel users create {username} failed"
    );
}

/// A running `streetlevel serve` on `127.0.0.1:0`. It stops when dropped, and also when the
/// test process dies (it is started with `--exit-on-stdin-eof`).
///
/// With `STREETLEVEL_TEST_TOPOLOGY=replicas` it is two replicas behind a balancer (the
/// `replicas` example), used the same way: [`Server::addr`] is the balancer's,
/// [`Server::processes`] each replica's, and [`Server::database`] where they keep their
/// tables.
#[derive(Debug)]
pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The bound address.
    pub addr: SocketAddr,
    /// The lines the server printed to standard output before `listening on`.
    pub announced: Vec<String>,
    /// Standard error, when started with [`Server::start_captured`].
    stderr: Option<std::sync::Arc<std::sync::Mutex<String>>>,
    /// Where its auth, web and store tables live.
    database: streetlevel_db::Location,
    /// Each serving process's own address: `addr`, or every replica's.
    processes: Vec<SocketAddr>,
    /// Whether it runs as replicas behind a balancer.
    replicated: bool,
}

impl Server {
    /// Starts the binary on `dir` with `extra` arguments and waits for its "listening on" line.
    pub fn start(binary: &Path, dir: &Path, extra: &[&str]) -> Server {
        Server::start_at(binary, dir, "127.0.0.1:0", extra)
    }

    /// [`Server::start`] listening on `addr` (`HOST:PORT`) instead of `127.0.0.1:0`.
    pub fn start_at(binary: &Path, dir: &Path, addr: &str, extra: &[&str]) -> Server {
        Server::start_with_env(binary, dir, addr, extra, &[])
    }

    /// [`Server::start_at`] with environment variables set for the server (for every replica,
    /// with `STREETLEVEL_TEST_TOPOLOGY=replicas`). No other `STREETLEVEL_*` variable reaches
    /// it, whatever the developer's shell has set.
    pub fn start_with_env(
        binary: &Path,
        dir: &Path,
        addr: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        Server::spawn(
            binary,
            dir,
            addr,
            extra,
            env,
            false,
            Topology::FromEnvironment,
        )
    }

    /// [`Server::start_with_env`] on `127.0.0.1:0`, keeping the server's standard error for
    /// [`Server::stderr`] instead of passing it through.
    pub fn start_captured(
        binary: &Path,
        dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        Server::spawn(
            binary,
            dir,
            "127.0.0.1:0",
            extra,
            env,
            true,
            Topology::FromEnvironment,
        )
    }

    /// [`Server::start_captured`] as replicas behind the balancer (the `replicas` example,
    /// built next to `binary`'s directory in `examples/`), whatever `STREETLEVEL_TEST_TOPOLOGY`
    /// says: for tests of that wrapper itself.
    pub fn start_as_replicas(
        binary: &Path,
        dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        Server::spawn(
            binary,
            dir,
            "127.0.0.1:0",
            extra,
            env,
            true,
            Topology::Replicas,
        )
    }

    /// [`Server::start_captured`] on the empty `PostgreSQL` database `url`, for a test that
    /// stops and starts that database itself: the tables of `dir` are copied there first, by
    /// `streetlevel migrate` here or, with `STREETLEVEL_TEST_TOPOLOGY=replicas`, by the
    /// replicas wrapper, whose backend is `url` too.
    pub fn start_on_postgres(binary: &Path, dir: &Path, url: &str, extra: &[&str]) -> Server {
        let replicated =
            std::env::var("STREETLEVEL_TEST_TOPOLOGY").is_ok_and(|topology| topology == "replicas");
        if !replicated {
            migrate(binary, dir, url);
        }
        Server::start_captured(
            binary,
            dir,
            extra,
            &[
                ("STREETLEVEL_DATABASE_URL", url),
                ("STREETLEVEL_TEST_BACKEND", url),
            ],
        )
    }

    /// Standard error ([`Server::start_captured`] only) once it contains `text`, which a log
    /// line written by the server's logging thread may take a moment to; panics with what
    /// was written if `text` does not appear within 20 s.
    pub fn stderr_once_it_contains(&self, text: &str) -> String {
        let started = std::time::Instant::now();
        loop {
            let stderr = self.stderr();
            if stderr.contains(text) {
                return stderr;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "the server did not log {text:?}:\n{stderr}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The server's process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote to standard error so far ([`Server::start_captured`] only).
    pub fn stderr(&self) -> String {
        self.stderr
            .as_ref()
            .map(|text| {
                text.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .unwrap_or_default()
    }

    /// One replica of [`replicas::Replicas`]: always the binary itself, whatever
    /// `STREETLEVEL_TEST_TOPOLOGY` says (the replicas wrapper may inherit it).
    pub(crate) fn start_replica(
        binary: &Path,
        dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        Server::spawn(
            binary,
            dir,
            "127.0.0.1:0",
            extra,
            env,
            false,
            Topology::Single,
        )
    }

    fn spawn(
        binary: &Path,
        dir: &Path,
        addr: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        capture_stderr: bool,
        topology: Topology,
    ) -> Server {
        // `STREETLEVEL_TEST_TOPOLOGY=replicas`: the same command as two replicas behind the
        // test balancer (the `replicas` example next to the binary's `examples/`), on the
        // backend `STREETLEVEL_TEST_BACKEND` names, which only that wrapper reads. The wrapper
        // hands `env` on to every replica.
        let replicas = topology.is_replicas();
        let mut command = if replicas {
            let wrapper = binary
                .parent()
                .expect("the binary is in a directory")
                .join("examples")
                .join("replicas");
            let mut command = Command::new(wrapper);
            command.arg("--").arg(binary);
            command
        } else {
            Command::new(binary)
        };
        for (name, _) in std::env::vars_os() {
            let name_text = name.to_string_lossy();
            let for_the_wrapper = replicas
                && (name_text == "STREETLEVEL_TEST_BACKEND"
                    || name_text == "STREETLEVEL_TEST_DATABASE_URL");
            if name_text.starts_with("STREETLEVEL_") && !for_the_wrapper {
                command.env_remove(name);
            }
        }
        let mut child = command
            .arg("serve")
            .arg("--data")
            .arg(dir)
            .args(["--addr", addr, "--exit-on-stdin-eof"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .env(BLUR_OFF.0, BLUR_OFF.1)
            .env(SFM_OFF.0, SFM_OFF.1)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if capture_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("streetlevel serve starts");
        let stderr = child.stderr.take().map(|pipe| {
            let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let sink = std::sync::Arc::clone(&text);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut sink = sink
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    sink.push_str(&line);
                    sink.push('\n');
                }
            });
            text
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut announced = Vec::new();
        let addr = loop {
            let line = lines
                .next()
                .expect("the server prints its address before exiting")
                .expect("readable stdout");
            if let Some(url) = line.strip_prefix("listening on http://") {
                break url.trim().parse().expect("a socket address");
            }
            announced.push(line);
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let database = announced
            .iter()
            .find_map(|line| line.strip_prefix(replicas::DATABASE_LINE))
            .map(str::to_owned)
            .or_else(|| database_url_given(extra, env))
            .map_or_else(
                || streetlevel_db::Location::Sqlite(dir.join("streetlevel.sqlite")),
                streetlevel_db::Location::Postgres,
            );
        let mut processes: Vec<SocketAddr> = announced
            .iter()
            .filter_map(|line| line.strip_prefix(replicas::REPLICA_LINE))
            .map(|replica| replica.trim().parse().expect("a replica's socket address"))
            .collect();
        if processes.is_empty() {
            processes.push(addr);
        }
        Server {
            child,
            stdin: Some(stdin),
            addr,
            announced,
            stderr,
            database,
            processes,
            replicated: replicas,
        }
    }

    /// Where the server keeps its auth, web and store tables: the `PostgreSQL` database the
    /// replicas wrapper announced or `--database-url` named, else the data directory's
    /// `SQLite` file. A test that writes there directly (a user's consent, a token issued
    /// in the past) writes where the server reads.
    pub fn database(&self) -> &streetlevel_db::Location {
        &self.database
    }

    /// The environment an admin command (`streetlevel apps ...`) needs to work on this
    /// server's tables: `STREETLEVEL_DATABASE_URL` when they are in `PostgreSQL`.
    pub fn admin_env(&self) -> Vec<(&'static str, &str)> {
        match &self.database {
            streetlevel_db::Location::Postgres(url) => vec![("STREETLEVEL_DATABASE_URL", url)],
            streetlevel_db::Location::Sqlite(_) => Vec::new(),
        }
    }

    /// The address of every process serving: this server's, or each replica's behind the
    /// balancer, to ask each directly.
    pub fn processes(&self) -> &[SocketAddr] {
        &self.processes
    }

    /// Whether the server runs as replicas behind a balancer
    /// (`STREETLEVEL_TEST_TOPOLOGY=replicas`).
    pub fn is_replicated(&self) -> bool {
        self.replicated
    }

    /// `GET target` with `headers` on every process serving ([`Server::processes`]), until
    /// each response is `settled`: one request to a single server, whose own writes it reads
    /// at once; on replicas, which learn of each other's writes within
    /// [`replicas::WRITES_VISIBLE_WITHIN`], each is asked again until all are settled or that
    /// time has passed. Returns the last responses, one per process, for the test to check.
    pub fn get_on_every_process(
        &self,
        target: &str,
        headers: &[(&str, &str)],
        settled: impl Fn(&Response) -> bool,
    ) -> Vec<Response> {
        let deadline = std::time::Instant::now() + replicas::WRITES_VISIBLE_WITHIN;
        self.get_on_every_process_by(target, headers, settled, deadline)
    }

    /// [`Server::get_on_every_process`] asking again only until `deadline` (for a check of
    /// "within a second of the write", the write's answer plus that second): past it, the
    /// processes are asked once and their answers returned as they are.
    pub fn get_on_every_process_by(
        &self,
        target: &str,
        headers: &[(&str, &str)],
        settled: impl Fn(&Response) -> bool,
        deadline: std::time::Instant,
    ) -> Vec<Response> {
        loop {
            let responses: Vec<Response> = self
                .processes
                .iter()
                .map(|addr| request(*addr, "GET", target, headers, b""))
                .collect();
            if !self.replicated
                || responses.iter().all(&settled)
                || std::time::Instant::now() >= deadline
            {
                return responses;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends a request and returns the response.
    pub fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        request(self.addr, method, target, headers, body)
    }

    /// `GET target` with no extra headers.
    pub fn get(&self, target: &str) -> Response {
        self.request("GET", target, &[], b"")
    }

    /// Sends SIGTERM (through `kill -TERM <pid>`) and waits for the process to exit; returns
    /// whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
        self.child.wait().expect("the server exits").success()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.replicated {
            // The replicas wrapper stops its replicas and its Redis when its input closes;
            // killed, it could not, and its redis-server would outlive the test.
            drop(self.stdin.take());
        } else {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// What a [`Server`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// Replicas if `STREETLEVEL_TEST_TOPOLOGY=replicas`, else the binary itself.
    FromEnvironment,
    /// The binary itself.
    Single,
    /// The `replicas` wrapper.
    Replicas,
}

impl Topology {
    /// Whether this starts the `replicas` wrapper.
    fn is_replicas(self) -> bool {
        match self {
            Topology::Single => false,
            Topology::Replicas => true,
            Topology::FromEnvironment => {
                std::env::var("STREETLEVEL_TEST_TOPOLOGY").is_ok_and(|t| t == "replicas")
            }
        }
    }
}

/// The URL `--database-url`, `--database` or `STREETLEVEL_DATABASE_URL` gives a server.
fn database_url_given(extra: &[&str], env: &[(&str, &str)]) -> Option<String> {
    let mut flags = extra.iter();
    while let Some(flag) = flags.next() {
        for name in ["--database-url", "--database"] {
            if *flag == name {
                return flags.next().map(|url| (*url).to_owned());
            }
            if let Some(url) = flag
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
            {
                return Some(url.to_owned());
            }
        }
    }
    env.iter()
        .find(|(name, _)| *name == "STREETLEVEL_DATABASE_URL")
        .map(|(_, url)| (*url).to_owned())
}

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body as received (not decompressed).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header (name in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body parsed as JSON; panics with the body if it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A minimal HTTP/1.1 client: one request per connection (`Connection: close`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let stream = TcpStream::connect(addr).expect("connect to the server");
    request_over(stream, addr, method, target, headers, body)
}

/// [`request`] over `stream`, a connection to `addr` the caller opened (from a local address
/// of its choice, say).
pub fn request_over(
    mut stream: TcpStream,
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    if !body.is_empty() || method == "POST" {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send head");
    stream.write_all(body).expect("send body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    parse_response(&raw)
}

/// The response in `raw`, the bytes of an HTTP/1.1 answer as a server sent them.
pub fn parse_response(raw: &[u8]) -> Response {
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// What `streetlevel serve` printed and how it exited, for runs that must fail before serving.
#[derive(Debug, Clone)]
pub struct Failed {
    /// Whether it exited successfully (a failed start does not).
    pub success: bool,
    /// Its exit code, `None` if a signal ended it.
    pub code: Option<i32>,
    /// Its standard output (a server that started prints `listening on` here).
    pub stdout: String,
    /// Its error output, where the reason is.
    pub stderr: String,
}

/// Runs `streetlevel serve --data dir` with `extra` arguments on `127.0.0.1:0` and waits for it
/// to exit. Standard input is closed and `--exit-on-stdin-eof` given, so a server that starts
/// anyway stops at once instead of hanging the test; its `listening on` line then shows it.
pub fn serve_expecting_failure(binary: &Path, dir: &Path, extra: &[&str]) -> Failed {
    serve_at_expecting_failure(binary, dir, "127.0.0.1:0", extra)
}

/// [`serve_expecting_failure`] listening on `addr` (`HOST:PORT`) instead of `127.0.0.1:0`.
pub fn serve_at_expecting_failure(binary: &Path, dir: &Path, addr: &str, extra: &[&str]) -> Failed {
    let output = Command::new(binary)
        .arg("serve")
        .arg("--data")
        .arg(dir)
        .args(["--addr", addr, "--exit-on-stdin-eof"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env(BLUR_OFF.0, BLUR_OFF.1)
        .stdin(Stdio::null())
        .output()
        .expect("the streetlevel binary runs");
    Failed {
        success: output.status.success(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A kept-alive HTTP/1.1 connection: several requests, one after another, on one socket.
/// Every read gives up after `deadline` (a bound against hanging, not a measurement).
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    addr: SocketAddr,
    buffered: Vec<u8>,
}

impl Connection {
    /// Connects to `addr`; reads fail after `deadline` without data.
    pub fn open(addr: SocketAddr, deadline: Duration) -> Connection {
        let stream = TcpStream::connect(addr).expect("connect to the server");
        stream.set_read_timeout(Some(deadline)).expect("timeout");
        Connection {
            stream,
            addr,
            buffered: Vec::new(),
        }
    }

    /// The socket, for raw writes and reads.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Sends `GET target` (keep-alive) without waiting for the answer.
    pub fn send_get(&mut self, target: &str, headers: &[(&str, &str)]) {
        let mut head = format!("GET {target} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (name, value) in headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        head.push_str("\r\n");
        self.stream
            .write_all(head.as_bytes())
            .expect("send the request");
    }

    /// Reads one response whose body has a `Content-Length` (every response of this server).
    pub fn read_response(&mut self) -> Response {
        let head_end = loop {
            if let Some(end) = self
                .buffered
                .windows(4)
                .position(|window| window == b"\r\n\r\n")
            {
                break end + 4;
            }
            self.fill();
        };
        let head = parse_response(&self.buffered[..head_end]);
        let length: usize = head
            .header("content-length")
            .map_or(0, |value| value.parse().expect("a numeric Content-Length"));
        while self.buffered.len() < head_end + length {
            self.fill();
        }
        let rest = self.buffered.split_off(head_end + length);
        let body = self.buffered[head_end..].to_vec();
        self.buffered = rest;
        Response { body, ..head }
    }

    /// `GET target` and its response.
    pub fn get(&mut self, target: &str, headers: &[(&str, &str)]) -> Response {
        self.send_get(target, headers);
        self.read_response()
    }

    /// Whether response bytes have arrived and wait to be read, looking without blocking.
    pub fn has_unread_data(&mut self) -> bool {
        if !self.buffered.is_empty() {
            return true;
        }
        self.stream.set_nonblocking(true).expect("non-blocking");
        let mut probe = [0_u8; 1];
        let peeked = self.stream.peek(&mut probe);
        self.stream.set_nonblocking(false).expect("blocking");
        match peeked {
            Ok(read) => read > 0,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(error) => panic!("cannot look at the socket: {error}"),
        }
    }

    /// Reads until the server closes the connection and returns what arrived before; a reset
    /// counts as closed. `Err` (`WouldBlock` or `TimedOut`) when the deadline passes with the
    /// connection still open.
    pub fn read_until_closed(&mut self) -> std::io::Result<Vec<u8>> {
        let mut received = std::mem::take(&mut self.buffered);
        let mut chunk = [0_u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(received),
                Ok(read) => received.extend_from_slice(&chunk[..read]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Ok(received);
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn fill(&mut self) {
        let mut chunk = [0_u8; 16 * 1024];
        let read = self
            .stream
            .read(&mut chunk)
            .expect("the response arrives before the deadline");
        assert!(read > 0, "the server closed the connection mid-response");
        self.buffered.extend_from_slice(&chunk[..read]);
    }
}

/// Whether the tests run under CI (`CI` set, not empty, not `false`), where a test whose tool
/// or data is missing fails instead of being skipped, as in xtask.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|value| !value.is_empty() && value != "false")
}
