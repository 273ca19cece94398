//! A real `PostgreSQL` 15 server with `PostGIS` for one test: `initdb` into a temporary
//! directory, `postgres` on a free port of 127.0.0.1 with its socket in that directory, one
//! database with the `postgis` extension. It stops and its directory goes when dropped.
//!
//! It speaks TLS (`ssl=on`) with a self-signed certificate made here with `rcgen` for
//! `localhost` and 127.0.0.1 ([`Postgres::certificate`]), and its [`Postgres::url`] asks for
//! TLS (`sslmode=require`), so every test on it runs over TLS as a managed PostgreSQL would
//! be reached; [`Postgres::start_without_tls`] starts one that has none.
//!
//! `PostgreSQL` refuses to run as root, and CI runs the tests as root: then `initdb` and
//! `postgres` run as `nobody` (through `setpriv`, which execs, so the child is the server
//! itself), and the directory is handed to that user. As any other user they run as that user.
//!
//! The binaries are Debian's `postgresql-15` (`/usr/lib/postgresql/15/bin`, or the directory
//! `STREETLEVEL_POSTGRES_BIN` names), with `postgresql-15-postgis-3` for `PostGIS`; `.ci/run`
//! installs both.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where Debian puts `PostgreSQL` 15's server binaries.
const DEFAULT_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The superuser `initdb` creates, and the role in the URL.
const USER: &str = "streetlevel";
/// The database created for the test.
const DATABASE: &str = "streetlevel";
/// How long a start or a stop may take before the test fails (a bound, not a measurement).
const DEADLINE: Duration = Duration::from_secs(60);
/// The unprivileged account the server runs as when the tests run as root.
const UNPRIVILEGED: &str = "nobody";

/// A running `PostgreSQL` server (see the module documentation).
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    root: PathBuf,
    port: u16,
    /// `uid:gid` to run as, when the tests run as root.
    run_as: Option<(u32, u32)>,
    /// Whether it was started with TLS.
    tls: bool,
    child: Option<Child>,
}

impl Postgres {
    /// Initialises a cluster in a temporary directory named after `name`, starts it on a free
    /// port, and creates the database with `PostGIS`. Panics, saying what to install, when the
    /// binaries are missing.
    pub fn start(name: &str) -> Postgres {
        Self::start_with(name, true)
    }

    /// [`Postgres::start`] without TLS (`ssl=off`): a client that requires TLS is refused.
    pub fn start_without_tls(name: &str) -> Postgres {
        Self::start_with(name, false)
    }

    fn start_with(name: &str, tls: bool) -> Postgres {
        let bin = std::env::var_os("STREETLEVEL_POSTGRES_BIN")
            .map_or_else(|| PathBuf::from(DEFAULT_BIN), PathBuf::from);
        assert!(
            bin.join("initdb").is_file() && bin.join("postgres").is_file(),
            "PostgreSQL 15 is not installed in {} (Debian: `apt-get install postgresql-15 \
             postgresql-15-postgis-3`, or set STREETLEVEL_POSTGRES_BIN to its bin directory)",
            bin.display()
        );
        let root = std::env::temp_dir().join(format!(
            "streetlevel-postgres-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("create the PostgreSQL directory");
        let run_as = running_as_root().then(unprivileged_ids);
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&root, Some(uid), Some(gid))
                .expect("hand the PostgreSQL directory to the unprivileged user");
        }
        let mut server = Postgres {
            bin,
            root,
            port: 0,
            run_as,
            tls,
            child: None,
        };
        server.initdb();
        if tls {
            server.make_certificate();
        }
        // Another process may take the free port between the probe and the bind: try anew.
        for attempt in 1..=3 {
            server.port = free_port();
            match server.launch() {
                Ok(()) => break,
                Err(log) if attempt == 3 => panic!("PostgreSQL did not start:\n{log}"),
                Err(_) => {}
            }
        }
        server.psql("postgres", &format!("CREATE DATABASE {DATABASE}"));
        server.psql(DATABASE, "CREATE EXTENSION postgis");
        server
    }

    /// `postgres://streetlevel@127.0.0.1:PORT/streetlevel?sslmode=require` (trust
    /// authentication: no password; TLS required, the certificate not checked), or without
    /// the `sslmode` when the server has no TLS.
    pub fn url(&self) -> String {
        if self.tls {
            format!("{}?sslmode=require", self.plain_url())
        } else {
            self.plain_url()
        }
    }

    /// [`Postgres::url`] without any `sslmode` (the client's default, `prefer`).
    pub fn plain_url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The server's self-signed certificate (PEM), to trust with `sslrootcert`.
    pub fn certificate(&self) -> PathBuf {
        self.root.join("server.crt")
    }

    /// A self-signed certificate for `localhost` and 127.0.0.1 and its key, readable by the
    /// server alone (it refuses a key others may read).
    fn make_certificate(&self) {
        let certified = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .expect("a self-signed certificate");
        let key = self.root.join("server.key");
        std::fs::write(self.certificate(), certified.cert.pem()).expect("write the certificate");
        std::fs::write(&key, certified.signing_key.serialize_pem()).expect("write the key");
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("make the key private");
        if let Some((uid, gid)) = self.run_as {
            for path in [self.certificate(), key] {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                    .expect("hand the certificate to the unprivileged user");
            }
        }
    }

    /// The port it listens on (the same across [`Postgres::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server with a fast shutdown (SIGINT: sessions are ended, the data is kept)
    /// and waits for it to exit. Stopping a stopped server does nothing.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let started = Instant::now();
        while matches!(child.try_wait(), Ok(None)) {
            if started.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "PostgreSQL did not stop within {DEADLINE:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server and starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(log) = self.launch() {
            panic!("PostgreSQL did not start again:\n{log}");
        }
    }

    /// Whether the server process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Runs `sql` in the test database with `psql` and returns its unaligned, tuples-only
    /// output (`psql -At`); panics with psql's error when it fails.
    pub fn query(&self, sql: &str) -> String {
        self.psql(DATABASE, sql)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("postgres.log")).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// A command for a server binary, run as the unprivileged user when we are root.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match self.run_as {
            Some((uid, gid)) => {
                let mut command = Command::new("setpriv");
                command
                    .arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn initdb(&self) {
        let output = self
            .command("initdb")
            .arg("--pgdata")
            .arg(self.data_dir())
            .args(["--username", USER, "--auth", "trust", "--encoding", "UTF8"])
            .args(["--locale", "C", "--no-instructions", "--no-sync"])
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .expect("initdb runs");
        assert_success("initdb", &output);
    }

    /// Starts `postgres` on `self.port` and waits until it accepts connections; the log on
    /// failure.
    fn launch(&mut self) -> Result<(), String> {
        let log = File::create(self.root.join("postgres.log")).expect("create the server log");
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(self.root.join("postgres.log"), Some(uid), Some(gid))
                .expect("hand the log to the unprivileged user");
        }
        let stderr = log.try_clone().expect("clone the log file");
        let mut command = self.command("postgres");
        if self.tls {
            command
                .args(["-c", "ssl=on"])
                .arg("-c")
                .arg(format!("ssl_cert_file={}", self.certificate().display()))
                .arg("-c")
                .arg(format!(
                    "ssl_key_file={}",
                    self.root.join("server.key").display()
                ));
        }
        let child = command
            .arg("-D")
            .arg(self.data_dir())
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(&self.root)
            .args(["-c", "listen_addresses=127.0.0.1"])
            // A test's data need not survive a crash of the machine.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!("postgres exited with {status}:\n{}", self.log()));
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
                .args(["-d", "postgres", "-t", "1"])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return Ok(());
            }
            if started.elapsed() > DEADLINE {
                self.stop();
                return Err(format!(
                    "postgres did not accept connections within {DEADLINE:?}:\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn psql(&self, database: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args([
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-X",
                "-A",
                "-t",
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .expect("psql runs");
        assert_success(&format!("psql -c {sql:?}"), &output);
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A fast shutdown lets the server remove its shared memory; a server that does
            // not go within the deadline is killed.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let started = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && started.elapsed() < DEADLINE {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn assert_success(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective user).
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|metadata| metadata.uid() == 0)
}

/// The user and group IDs of [`UNPRIVILEGED`].
fn unprivileged_ids() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let output = Command::new("id")
            .args([flag, UNPRIVILEGED])
            .output()
            .expect("id runs");
        assert_success(&format!("id {flag} {UNPRIVILEGED}"), &output);
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .expect("a numeric ID")
    };
    (id("-u"), id("-g"))
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The owner of `path`.
    fn owner(path: &Path) -> u32 {
        std::fs::metadata(path).map_or(u32::MAX, |metadata| metadata.uid())
    }

    #[test]
    fn a_started_server_has_postgis_and_survives_a_restart() {
        let mut server = Postgres::start("harness");
        let version = server.query("SELECT postgis_version()");
        assert!(
            version.starts_with('3'),
            "postgis_version() answered {version:?}"
        );
        assert!(
            server
                .url()
                .starts_with("postgres://streetlevel@127.0.0.1:"),
            "{}",
            server.url()
        );
        if running_as_root() {
            assert_ne!(owner(&server.data_dir()), 0, "the data belongs to root");
        }
        server.query("CREATE TABLE kept (id integer)");
        server.query("INSERT INTO kept VALUES (7)");
        let port = server.port();
        server.restart();
        assert_eq!(server.port(), port);
        assert_eq!(server.query("SELECT id FROM kept"), "7");
        server.stop();
        assert!(!server.is_running());
        let root = server.root.clone();
        drop(server);
        assert!(!root.exists(), "the directory is removed");
    }

    /// Whether the session `url` opens (through `streetlevel-db`, as streetlevel connects)
    /// runs over TLS, by the server's own account (`pg_stat_ssl`); the error when it does not
    /// open.
    fn session_uses_tls(url: &str) -> Result<bool, streetlevel_db::DbError> {
        let database =
            streetlevel_db::Database::open(&streetlevel_db::Location::Postgres(url.to_owned()))?;
        let ssl: Option<i64> = database.read(|connection| {
            connection.query_value(
                "SELECT CAST(ssl AS INTEGER) FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
        })?;
        Ok(ssl == Some(1))
    }

    /// On a server with TLS, each `sslmode` does what libpq's does: `disable` talks plain,
    /// `prefer` (the default), `require` and `verify-full` (with the server's certificate as
    /// the root) talk TLS, and `verify-full` refuses a certificate no trusted root signed.
    #[test]
    fn sslmode_chooses_tls_on_a_server_that_has_it() {
        let server = Postgres::start("tls-on");
        let plain = server.plain_url();
        assert!(!session_uses_tls(&format!("{plain}?sslmode=disable")).unwrap());
        assert!(session_uses_tls(&plain).unwrap(), "prefer, the default");
        assert!(session_uses_tls(&format!("{plain}?sslmode=prefer")).unwrap());
        assert!(session_uses_tls(&server.url()).unwrap(), "require");
        let trusted = format!(
            "{plain}?sslmode=verify-full&sslrootcert={}",
            server.certificate().display()
        );
        assert!(session_uses_tls(&trusted).unwrap(), "verify-full");
        let localhost = trusted.replace("127.0.0.1", "localhost");
        assert!(session_uses_tls(&localhost).unwrap(), "verify-full by name");
        let untrusted = session_uses_tls(&format!("{plain}?sslmode=verify-full")).unwrap_err();
        assert!(untrusted.is_unavailable(), "{untrusted}");
        assert!(
            untrusted.to_string().contains("certificate"),
            "the refusal says why: {untrusted}"
        );
    }

    /// On a server without TLS, `prefer` falls back to plain and `require` is refused with
    /// PostgreSQL's own refusal, as a database that cannot be reached.
    #[test]
    fn sslmode_require_refuses_a_server_without_tls() {
        let server = Postgres::start_without_tls("tls-off");
        assert!(!server.url().contains("sslmode"), "{}", server.url());
        assert!(!session_uses_tls(&server.plain_url()).unwrap(), "prefer");
        let refused =
            session_uses_tls(&format!("{}?sslmode=require", server.plain_url())).unwrap_err();
        assert!(refused.is_unavailable(), "{refused}");
        assert!(
            refused.to_string().to_lowercase().contains("tls")
                || refused.to_string().to_lowercase().contains("ssl"),
            "the refusal says why: {refused}"
        );
    }
}
