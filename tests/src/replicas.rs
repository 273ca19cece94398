//! Several `streetlevel serve` processes on one shared backend, behind the round-robin
//! [`Balancer`], addressed like a single server.
//!
//! The backend is chosen in one place, `replica_setup`: the replicas share one `SQLite`
//! file ([`Backend::Sqlite`]), or a `PostgreSQL` database ([`Backend::Postgres`]: the fixture is
//! copied there with `streetlevel migrate` and every replica gets `STREETLEVEL_DATABASE_URL`),
//! and every replica test runs on either unchanged.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::balancer::Balancer;
use crate::{Response, Server};

/// What issue 17 promises: a write through one replica (a token issued, refreshed or
/// revoked, an image added) is seen by every other within a second. A replica keeps a token
/// it validated in memory for at most that long, so a revocation elsewhere may take it.
pub const WRITES_VISIBLE_WITHIN: Duration = Duration::from_secs(1);

/// How the `replicas` example announces, before its `listening on` line, the `PostgreSQL`
/// database the replicas use (`database at postgres://...`); [`Server::database`] reads it.
pub const DATABASE_LINE: &str = "database at ";

/// How the `replicas` example announces each replica's own address (`replica at
/// http://127.0.0.1:PORT`), before its `listening on` line; [`Server::processes`] reads them.
pub const REPLICA_LINE: &str = "replica at http://";

/// What the replicas share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// One data directory's `SQLite` file, opened by every replica. Each replica serves a
    /// directory of its own whose entries are symbolic links into the shared one: the
    /// server refuses a data directory another server holds (`streetlevel.lock`), and `SQLite`
    /// resolves the links, so the write-ahead log and its lock are the shared file's. The
    /// store follows other processes' image writes through `store_writes` (within about a
    /// second), auth reads its tables on every request.
    Sqlite,
    /// An empty `PostgreSQL` database (`postgres://USER@HOST:PORT/DB`): the fixture is copied
    /// into it with `streetlevel migrate`, and every replica gets it as
    /// `STREETLEVEL_DATABASE_URL`, the upload sessions and the import queue included (their
    /// bytes stay in the shared data directory's `uploads/`).
    Postgres(String),
}

impl Backend {
    /// The backend `STREETLEVEL_TEST_BACKEND` names: `sqlite` (the default), `postgres` (a new
    /// database named after `name` on the server `STREETLEVEL_TEST_DATABASE_URL` names, as
    /// `cargo xtask test` sets it), or a `postgres://` URL of an empty database.
    pub fn from_env(name: &str) -> Backend {
        match std::env::var("STREETLEVEL_TEST_BACKEND") {
            Ok(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Backend::Postgres(url)
            }
            Ok(value) if value == "postgres" => {
                match streetlevel_db::test_postgres_database(name) {
                    Some(streetlevel_db::Location::Postgres(url)) => Backend::Postgres(url),
                    _ => panic!(
                        "STREETLEVEL_TEST_BACKEND=postgres needs STREETLEVEL_TEST_DATABASE_URL"
                    ),
                }
            }
            Ok(value) if !value.is_empty() && value != "sqlite" => panic!(
                "STREETLEVEL_TEST_BACKEND={value:?}: expected `sqlite`, `postgres` or a \
                 postgres:// URL"
            ),
            _ => Backend::Sqlite,
        }
    }

    /// Where the auth, web and store tables of a data set served this way live.
    pub fn location(&self, shared: &Path) -> streetlevel_db::Location {
        match self {
            Backend::Sqlite => streetlevel_db::Location::Sqlite(shared.join("streetlevel.sqlite")),
            Backend::Postgres(url) => streetlevel_db::Location::Postgres(url.clone()),
        }
    }
}

/// Prepares replica `index`'s data directory `replica_dir` (created empty by the caller) over
/// `shared`, the data directory `streetlevel fixtures` wrote, and returns the environment the
/// replica needs. **This is the one function to change for the `PostgreSQL` backend.**
fn replica_setup(backend: &Backend, shared: &Path, replica_dir: &Path) -> Vec<(String, String)> {
    // The lock is per directory; SQLite finds its journal and WAL next to the file the link
    // resolves to, never next to the link. On PostgreSQL the file still holds the upload
    // sessions and the import queue, which the replicas share with the uploads' files.
    link_entries(shared, replica_dir, |name| {
        name != "streetlevel.lock"
            && !name.ends_with("-wal")
            && !name.ends_with("-shm")
            && !name.ends_with("-journal")
    });
    match backend {
        Backend::Sqlite => Vec::new(),
        Backend::Postgres(url) => vec![(String::from("STREETLEVEL_DATABASE_URL"), url.clone())],
    }
}

/// Links every entry of `shared` that `keep` accepts into `dir`. The directories and the
/// media key a server would create on its first start (and `unblurred/`, which the blurring or
/// a test creates later) are created in `shared` first, so that the replicas share them instead
/// of each making its own: an erasure on one replica must find every file.
fn link_entries(shared: &Path, dir: &Path, keep: impl Fn(&str) -> bool) {
    for name in ["media", "uploads", "unblurred"] {
        std::fs::create_dir_all(shared.join(name)).expect("create a shared directory");
    }
    let key = shared.join("media.key");
    if !key.exists() {
        std::fs::write(&key, random_hex_key()).expect("write the shared media key");
    }
    let shared = shared
        .canonicalize()
        .expect("the shared data directory exists");
    for entry in std::fs::read_dir(&shared).expect("read the shared data directory") {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name();
        if keep(&name.to_string_lossy()) {
            std::os::unix::fs::symlink(entry.path(), dir.join(&name)).expect("link a shared entry");
        }
    }
}

/// 32 bytes in hex from the standard library's per-process random hash keys: the replicas
/// must sign media URLs with one key, and a test needs no better randomness than this.
fn random_hex_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut key = String::with_capacity(64);
    for _ in 0..4 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos()),
        );
        let _ = write!(key, "{:016x}", hasher.finish());
    }
    key
}

/// N replicas behind a balancer. Dropping it stops them and the balancer; the replicas'
/// own directories are removed, the shared one is left to its owner.
#[derive(Debug)]
pub struct Replicas {
    // Replicas first: they stop before the balancer does.
    servers: Vec<Option<Server>>,
    balancer: Balancer,
    root: PathBuf,
}

impl Replicas {
    /// Starts `count` replicas of `binary` serving the data directory `shared` on `backend`,
    /// each with `extra` flags, and a balancer in front, whose address is every replica's
    /// public URL (unless `extra` sets `--public-url`): the URLs they hand out (media,
    /// tiles) lead back through the balancer.
    pub fn start(
        binary: &Path,
        shared: &Path,
        count: usize,
        backend: &Backend,
        extra: &[&str],
    ) -> Replicas {
        Replicas::start_with_env(binary, shared, count, backend, extra, &[])
    }

    /// [`Replicas::start`] with environment variables `env` set for every replica (a public
    /// URL among them, `STREETLEVEL_PUBLIC_URL` or `STREETLEVEL_BASE_URL`, is kept too); the
    /// backend's own (`STREETLEVEL_DATABASE_URL` on `PostgreSQL`) come after them.
    pub fn start_with_env(
        binary: &Path,
        shared: &Path,
        count: usize,
        backend: &Backend,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Replicas {
        assert!(count > 0, "at least one replica");
        let shared_name = shared
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let root = shared.with_file_name(format!("{shared_name}.replicas"));
        let _ = std::fs::remove_dir_all(&root);
        let balancer = Balancer::bind();
        let public_url = format!("http://{}", balancer.addr());
        let mut flags: Vec<&str> = extra.to_vec();
        let public_url_given = extra
            .iter()
            .any(|flag| flag.starts_with("--public-url") || flag.starts_with("--base-url"))
            || env.iter().any(|(name, _)| {
                *name == "STREETLEVEL_PUBLIC_URL" || *name == "STREETLEVEL_BASE_URL"
            });
        if !public_url_given {
            flags.extend(["--public-url", &public_url]);
        }
        if let Backend::Postgres(url) = backend {
            crate::run(
                binary,
                &["migrate", "--from", &shared.to_string_lossy(), "--to", url],
            );
        }
        let mut servers = Vec::with_capacity(count);
        for index in 0..count {
            let dir = root.join(format!("replica-{index}"));
            std::fs::create_dir_all(&dir).expect("create a replica's directory");
            let backend_env = replica_setup(backend, shared, &dir);
            let env: Vec<(&str, &str)> = env
                .iter()
                .copied()
                .chain(
                    backend_env
                        .iter()
                        .map(|(name, value)| (name.as_str(), value.as_str())),
                )
                .collect();
            servers.push(Some(Server::start_replica(binary, &dir, &flags, &env)));
        }
        for index in 0..count {
            let log = root.join(format!("replica-{index}/streetlevel.sqlite-wal"));
            // Were it there, this replica would have a write-ahead log of its own: the
            // database would not be shared.
            assert!(
                !log.exists(),
                "SQLite did not follow the link to the shared database: {} exists",
                log.display()
            );
        }
        let addrs: Vec<SocketAddr> = servers.iter().flatten().map(|server| server.addr).collect();
        balancer.set_backends(&addrs);
        Replicas {
            servers,
            balancer,
            root,
        }
    }

    /// The balancer's address: where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.balancer.addr()
    }

    /// `http://<balancer>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The balancer, for its counts.
    pub fn balancer(&self) -> &Balancer {
        &self.balancer
    }

    /// How many replicas were started.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether there are none (never: [`Replicas::start`] starts at least one).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Replica `index`, to address it directly; panics if it was killed.
    pub fn replica(&self, index: usize) -> &Server {
        self.servers[index]
            .as_ref()
            .unwrap_or_else(|| panic!("replica {index} was killed"))
    }

    /// `kill -9` of replica `index`, waiting until it is gone. The balancer keeps its address
    /// and skips it from then on, since its port refuses connections.
    pub fn kill(&mut self, index: usize) {
        let server = self.servers[index]
            .take()
            .unwrap_or_else(|| panic!("replica {index} was killed already"));
        let status = Command::new("kill")
            .args(["-KILL", &server.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -KILL {} failed", server.pid());
        // Dropping reaps it.
        drop(server);
    }

    /// SIGTERM to every running replica at once, as a supervisor stopping the service sends
    /// it, then waits for them to exit: whether every one stopped gracefully (exited with
    /// success). The balancer stops when this is dropped.
    pub fn terminate(&mut self) -> bool {
        let servers: Vec<Server> = self.servers.drain(..).flatten().collect();
        std::thread::scope(|scope| {
            let stopping: Vec<_> = servers
                .into_iter()
                .map(|mut server| scope.spawn(move || server.terminate()))
                .collect();
            let stopped: Vec<bool> = stopping
                .into_iter()
                .map(|stopping| stopping.join().unwrap_or(false))
                .collect();
            stopped.into_iter().all(|graceful| graceful)
        })
    }

    /// Sends a request through the balancer.
    pub fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        crate::request(self.addr(), method, target, headers, body)
    }

    /// `GET target` through the balancer.
    pub fn get(&self, target: &str) -> Response {
        self.request("GET", target, &[], b"")
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        self.servers.clear();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// [`crate::request`] that reports a failed exchange (refused, reset, closed before a whole
/// response) as `None` instead of panicking: under a replica's `kill -9` some requests fail,
/// and a load test counts them rather than stopping at the first.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<Response> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .ok()?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    if !body.is_empty() || method == "POST" {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let end = raw.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let body = raw[end + 4..].to_vec();
    // A response cut short by the kill is not an answer.
    let complete = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .is_none_or(|length| length == body.len());
    complete.then_some(Response {
        status,
        headers,
        body,
    })
}
