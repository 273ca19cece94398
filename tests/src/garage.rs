//! A real S3 server for the tests of media on object storage: Garage 2.5.0 (AGPL-3.0, a test
//! tool run as a separate process, never shipped), single node, on free `127.0.0.1` ports in a
//! temporary directory, with one bucket and one key, stopped when dropped.
//!
//! The binary is the one `cargo xtask test` (and `cargo xtask models`) builds once per
//! machine into the tools cache (`~/.cache/streetlevel/garage-2.5.0-sqlite/bin/garage`, or
//! under `STREETLEVEL_TOOLS_CACHE` or `XDG_CACHE_HOME/streetlevel`); `STREETLEVEL_GARAGE`
//! names another. Like [`crate::redis::RedisServer`] it is started through `setpriv
//! --pdeathsig KILL`, so it dies with the thread that started it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The Garage release the tests run, and the cache folder it is installed in.
pub const GARAGE_CACHE_KEY: &str = "garage-2.5.0-sqlite";

/// The bucket the server is started with.
pub const BUCKET: &str = "streetlevel";
/// The key's ID (at least 8 characters of `[A-Za-z0-9._-]`, Garage's rule).
pub const ACCESS_KEY: &str = "GKstreetleveltest";
/// The key's secret (at least 16 printable characters).
pub const SECRET_KEY: &str = "streetlevel-test-secret-0123456789";
/// The region Garage signs with (`s3_region`).
pub const REGION: &str = "garage";

/// The Garage binary the tests use, `None` when it is not installed.
pub fn garage_binary() -> Option<PathBuf> {
    if let Some(binary) = std::env::var_os("STREETLEVEL_GARAGE") {
        return Some(PathBuf::from(binary));
    }
    let cache = if let Some(dir) = std::env::var_os("STREETLEVEL_TOOLS_CACHE") {
        PathBuf::from(dir)
    } else if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(dir).join("streetlevel")
    } else {
        PathBuf::from(std::env::var_os("HOME")?)
            .join(".cache")
            .join("streetlevel")
    };
    Some(cache.join(GARAGE_CACHE_KEY).join("bin").join("garage")).filter(|path| path.is_file())
}

/// A running Garage, or `None` outside CI when it is not installed (the test is skipped and
/// says so); in CI a missing Garage fails the test.
pub fn start_or_skip() -> Option<Garage> {
    match garage_binary() {
        Some(binary) => Some(Garage::start(&binary)),
        None if crate::in_ci() => {
            panic!("Garage is not installed: `cargo xtask test` builds it into the tools cache")
        }
        None => {
            eprintln!(
                "skipped: Garage is not installed (`cargo xtask test` builds it into the tools \
                 cache, ~/.cache/streetlevel/{GARAGE_CACHE_KEY})"
            );
            None
        }
    }
}

/// A running single-node Garage with [`BUCKET`], killed (and its directory removed) when
/// dropped.
#[derive(Debug)]
pub struct Garage {
    child: Option<Child>,
    binary: PathBuf,
    dir: PathBuf,
    /// The port of its S3 API, on 127.0.0.1.
    pub s3_port: u16,
    admin_port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

impl Garage {
    /// Starts Garage and returns once its S3 API answers; panics, with its log, if it does
    /// not within 30 s.
    pub fn start(binary: &std::path::Path) -> Garage {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "streetlevel-garage-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create Garage's directory");
        let (rpc, s3, admin) = (free_port(), free_port(), free_port());
        let config = format!(
            "metadata_dir = \"{dir}/meta\"\n\
             data_dir = \"{dir}/data\"\n\
             db_engine = \"sqlite\"\n\
             replication_factor = 1\n\
             compression_level = \"none\"\n\
             rpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
             rpc_public_addr = \"127.0.0.1:{rpc}\"\n\
             [s3_api]\n\
             s3_region = \"{REGION}\"\n\
             api_bind_addr = \"127.0.0.1:{s3}\"\n\
             [admin]\n\
             api_bind_addr = \"127.0.0.1:{admin}\"\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("garage.toml"), config).expect("write Garage's configuration");
        let mut garage = Garage {
            child: None,
            binary: binary.to_owned(),
            dir,
            s3_port: s3,
            admin_port: admin,
        };
        garage.start_again();
        garage
    }

    /// Kills Garage, keeping its directory, as a store that went down.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts Garage (again, after [`Garage::stop`]) on the same directory and ports, and
    /// returns once its S3 API answers.
    pub fn start_again(&mut self) {
        self.stop();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("garage.log"))
            .expect("open Garage's log");
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(&self.binary)
            .arg("-c")
            .arg(self.dir.join("garage.toml"))
            .args(["server", "--single-node", "--default-bucket"])
            .env("GARAGE_RPC_SECRET", "0".repeat(32) + &"1".repeat(32))
            .env("GARAGE_DEFAULT_ACCESS_KEY", ACCESS_KEY)
            .env("GARAGE_DEFAULT_SECRET_KEY", SECRET_KEY)
            .env("GARAGE_DEFAULT_BUCKET", BUCKET)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", self.binary.display()));
        self.child = Some(child);
        self.wait_ready(self.admin_port);
    }

    /// Waits until the admin API's `/health` says the node is up and the S3 API answers.
    fn wait_ready(&mut self, admin: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let admin: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().expect("an address");
        let s3: std::net::SocketAddr = format!("127.0.0.1:{}", self.s3_port)
            .parse()
            .expect("an address");
        while Instant::now() < deadline {
            let listening = |address| {
                std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
            };
            if listening(admin)
                && listening(s3)
                && crate::request(admin, "GET", "/health", &[], b"").status == 200
            {
                return;
            }
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("Garage exited with {status}: {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("Garage did not start within 30 s: {}", self.log());
    }

    /// What Garage wrote to its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("garage.log")).unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`, its S3 endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// The environment a streetlevel process needs to use the bucket: the standard `AWS_*`
    /// variables.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", String::from(REGION)),
            ("AWS_ACCESS_KEY_ID", String::from(ACCESS_KEY)),
            ("AWS_SECRET_ACCESS_KEY", String::from(SECRET_KEY)),
            ("AWS_ALLOW_HTTP", String::from("true")),
        ]
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
