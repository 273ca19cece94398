//! Black-box tests of how `streetlevel serve` holds up against hostile clients (issue 15):
//! slow request bodies, one address holding many connections, and sign-in floods; and how it
//! answers while another writer holds its `SQLite` file. Everything binds to 127.0.0.1 with a
//! handful of connections and bounded waits.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use streetlevel_tests::{Response, Server, create_app, create_user};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-hardening-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A data directory with user erin (password "correct horse", email erin@example.com) and an
/// app that may upload, served with the config `json`: the server, the app's client token and
/// the data directory.
fn world(name: &str, json: &str) -> (Server, String, PathBuf) {
    let root = scratch(name);
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = create_app(Path::new(BINARY), &data, "read,upload");
    create_user(
        Path::new(BINARY),
        &data,
        "erin",
        "erin@example.com",
        "correct horse",
    );
    let config = root.join("config.json");
    std::fs::write(&config, json).unwrap();
    let server = Server::start(
        Path::new(BINARY),
        &data,
        &["--config", config.to_str().unwrap()],
    );
    (server, token, data)
}

/// A request that must be answered promptly while an attack runs.
fn answered(server: &Server, token: &str) -> Response {
    let response = server.request(
        "GET",
        "/images?bbox=13.1,55.6,13.3,55.8&limit=1",
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response
}

/// Waits (at most `within`) until a request is [`answered`] again after an attack ends.
fn answered_again(server: &Server, token: &str, within: Duration) {
    let started = Instant::now();
    while std::panic::catch_unwind(|| answered(server, token)).is_err() {
        assert!(started.elapsed() < within, "never served again");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads what the server sends until it closes (or `limit` passes): the bytes and how long.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => break,
            Err(error) => panic!("the server neither answered nor closed: {error}"),
        }
    }
    (received, started.elapsed())
}

#[test]
fn a_slow_or_missing_body_is_answered_408_and_others_are_served_meanwhile() {
    let (server, token, _) = world("slow", r#"{"body_read_timeout_seconds": 1}"#);
    // Headers promising ten bytes, then nothing.
    let mut silent = TcpStream::connect(server.addr).unwrap();
    silent
        .write_all(b"POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        .unwrap();
    // A body trickling in a byte at a time.
    let mut trickle = TcpStream::connect(server.addr).unwrap();
    trickle
        .write_all(b"POST /token HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(600) {
        trickle.write_all(b"a").unwrap();
        answered(&server, &token);
        std::thread::sleep(Duration::from_millis(100));
    }
    for stream in [&mut silent, &mut trickle] {
        let (received, waited) = read_until_closed(stream, Duration::from_secs(20));
        let text = String::from_utf8_lossy(&received);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("did not arrive within 1 s"), "{text}");
        assert!(waited < Duration::from_secs(20));
    }
    answered(&server, &token);
}

/// A client that asks for many large answers and stops reading is cut off after the send
/// timeout, instead of holding its connection and the unsent answers forever. (The pause is
/// the attack: the client not reading; the server is not waited for.)
#[test]
fn a_client_that_stops_reading_is_dropped_after_the_send_timeout() {
    let fixture = streetlevel_tests::Fixture::generate(Path::new(BINARY), "send-timeout", 300);
    let server = Server::start(
        Path::new(BINARY),
        &fixture.dir,
        &["--send-timeout-seconds", "1"],
    );
    let target = format!(
        "/images?bbox=-180,-90,180,90&limit=2000&fields=id,geometry,captured_at,compass_angle,sequence,make,model&access_token={}",
        fixture.client_token
    );
    let one = server.get(&target);
    assert_eq!(one.status, 200);
    // Far more than the kernel buffers on both ends hold (a few MiB each).
    let requests = (64 << 20) / one.body.len() + 1;
    let mut stream = TcpStream::connect(server.addr).unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
    for _ in 0..requests {
        stream.write_all(request.as_bytes()).unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    let (received, waited) = read_until_closed(&mut stream, Duration::from_secs(60));
    assert!(
        received.len() < requests * one.body.len(),
        "all {requests} answers were sent to a client that did not read for 3 s"
    );
    assert!(
        waited < Duration::from_secs(60),
        "the connection stayed open"
    );
    // Others are still served.
    assert_eq!(server.get(&target).status, 200);
}

/// Out of file descriptors, the server sheds the connections that completed no request,
/// answers one connection it could not otherwise accept 503 with `Retry-After` and the error
/// body (through a descriptor kept in reserve), keeps serving a client whose request
/// completed before, backs off and logs once per interval with a count instead of spinning,
/// and serves new clients again while the idle attackers still hold their sockets.
#[test]
fn running_out_of_file_descriptors_sheds_idle_connections_and_recovers() {
    let root = scratch("descriptors");
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = create_app(Path::new(BINARY), &data, "read");
    let server = Server::start_captured(Path::new(BINARY), &data, &[], &[("RUST_LOG", "warn")]);
    answered(&server, &token);
    // A client whose request completed, kept alive through the attack.
    let mut regular = streetlevel_tests::Connection::open(server.addr, Duration::from_secs(20));
    let auth = format!("OAuth {token}");
    let target = "/images?bbox=13.1,55.6,13.3,55.8&limit=1";
    assert_eq!(regular.get(target, &[("Authorization", &auth)]).status, 200);
    // Lower the running server's descriptor limit (util-linux's prlimit).
    let Ok(status) = std::process::Command::new("prlimit")
        .args(["--pid", &server.pid().to_string(), "--nofile=40:40"])
        .status()
    else {
        assert!(std::env::var_os("CI").is_none(), "prlimit is missing");
        eprintln!("skipped: prlimit (util-linux) is not installed");
        return;
    };
    assert!(status.success());
    // Far more idle connections than descriptors (and under the per-address cap of 64).
    let mut held: Vec<TcpStream> = (0..60)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    server.stderr_once_it_contains("accept failed");
    // The attack lasts a while; a spinning loop would log thousands of lines meanwhile.
    std::thread::sleep(Duration::from_secs(2));
    let failures = server.stderr().matches("accept failed").count();
    assert!(
        failures <= 3,
        "{failures} lines in 2 s:\n{}",
        server.stderr()
    );
    // The client whose request completed before is served on its kept-alive connection
    // while the attackers' sockets are still open on their side.
    assert_eq!(regular.get(target, &[("Authorization", &auth)]).status, 200);
    // Every idle connection is either shed (closed without a word) or was told to come back:
    // at least one got 503 with Retry-After and the error body.
    let mut refusals = Vec::new();
    for stream in &mut held {
        let (received, _) = read_until_closed(stream, Duration::from_secs(20));
        if !received.is_empty() {
            refusals.push(String::from_utf8_lossy(&received).into_owned());
        }
    }
    assert!(!refusals.is_empty(), "no connection was answered 503");
    for refusal in &refusals {
        let (head, body) = refusal.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503"), "{refusal}");
        assert!(
            head.to_ascii_lowercase().contains("\r\nretry-after: 1"),
            "{refusal}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["type"], "OAuthException", "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
    }
    // New clients are served again.
    answered_again(&server, &token, Duration::from_secs(20));
    drop(held);
}

/// The soft and hard "Max open files" of process `pid`, as /proc shows them.
fn open_files_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("no open files limit in {limits}"));
    let mut fields = line["Max open files".len()..].split_whitespace();
    (
        fields.next().unwrap().to_owned(),
        fields.next().unwrap().to_owned(),
    )
}

/// A server started with the common soft limit on open files far below the hard one raises
/// it to the hard one (as Go's runtime and nginx do), so that descriptors are not what runs
/// out first.
#[test]
fn the_soft_limit_on_open_files_is_raised_to_the_hard_limit_at_start() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let own = getrlimit(Resource::Nofile);
    let hard = own.maximum.unwrap_or(1 << 20);
    assert!(
        hard > 256,
        "the hard limit of {hard} leaves nothing to raise"
    );
    // Started with a soft limit of 256: the server inherits it. (Other tests of this binary
    // that start a server meanwhile inherit it too, and raise it as well.)
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(256),
            maximum: own.maximum,
        },
    )
    .unwrap();
    let started = std::panic::catch_unwind(|| world("nofile", "{}"));
    setrlimit(Resource::Nofile, own).unwrap();
    let (server, token, _) = started.unwrap();
    let (soft, hard_seen) = open_files_limits(server.pid());
    let expected = own
        .maximum
        .map_or_else(|| String::from("1048576"), |hard| hard.to_string());
    assert_eq!(soft, expected, "hard limit {hard_seen}");
    answered(&server, &token);
}

#[test]
fn one_address_cannot_hold_every_connection() {
    let (server, token, _) = world("per-address", r#"{"max_connections_per_address": 3}"#);
    let idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // The fourth connection from the same address is closed without an answer ...
    let started = Instant::now();
    let refused = loop {
        let mut fourth = TcpStream::connect(server.addr).unwrap();
        let _ = fourth.write_all(b"GET /images HTTP/1.1\r\nHost: x\r\n\r\n");
        let (received, _) = read_until_closed(&mut fourth, Duration::from_secs(10));
        if received.is_empty() {
            break true;
        }
        // The three idle ones may not all be accepted yet: try again.
        assert!(started.elapsed() < Duration::from_secs(10), "never refused");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(refused);
    // ... and once they close, requests are served again.
    drop(idle);
    answered_again(&server, &token, Duration::from_secs(10));
}

fn uploader_sign_in(server: &Server, token: &str, password: &str) -> Response {
    server.request(
        "POST",
        "/login",
        &[
            ("Authorization", &format!("OAuth {token}")),
            ("Content-Type", "application/json"),
        ],
        json!({"email": "erin@example.com", "password": password})
            .to_string()
            .as_bytes(),
    )
}

#[test]
fn guessing_a_password_is_throttled_before_any_hashing() {
    let (server, token, _) = world("throttle", "{}");
    for _ in 0..5 {
        assert_eq!(uploader_sign_in(&server, &token, "wrong").status, 401);
    }
    let throttled = uploader_sign_in(&server, &token, "wrong");
    assert_eq!(throttled.status, 429);
    let wait: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=31).contains(&wait), "{wait}");
    assert_eq!(throttled.json()["error"]["code"], 4);
    // The right password is refused too while the throttle holds: guessing gains nothing.
    assert_eq!(
        uploader_sign_in(&server, &token, "correct horse").status,
        429
    );
    // The API itself is not affected.
    answered(&server, &token);
}

#[test]
fn a_second_server_on_the_same_data_is_refused_and_an_empty_database_too() {
    let (server, token, data) = world("lock", "{}");
    let second = streetlevel_tests::serve_expecting_failure(Path::new(BINARY), &data, &[]);
    assert!(!second.success);
    assert!(!second.stdout.contains("listening on"), "{}", second.stdout);
    assert!(
        second
            .stderr
            .contains("another streetlevel server is serving"),
        "{}",
        second.stderr
    );
    answered(&server, &token);

    let empty = scratch("empty-database");
    std::fs::write(empty.join("streetlevel.sqlite"), b"").unwrap();
    let refused = streetlevel_tests::serve_expecting_failure(Path::new(BINARY), &empty, &[]);
    assert!(!refused.success);
    assert!(
        refused.stderr.contains("is empty (0 bytes)"),
        "{}",
        refused.stderr
    );
}

#[cfg(unix)]
#[test]
fn secrets_on_disk_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (_server, _, data) = world("permissions", "{}");
    let mode = std::fs::metadata(data.join("media.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "media.key mode {mode:o}");
    let fixture = streetlevel_tests::Fixture::generate(Path::new(BINARY), "permissions", 5);
    let mode = std::fs::metadata(fixture.dir.join("credentials.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "credentials.json mode {mode:o}");
}

#[test]
fn health_and_readiness_answer_without_a_token_and_say_why_not_ready() {
    let (server, token, data) = world("probes", "{}");
    let health = server.get("/health");
    assert_eq!(health.status, 200);
    assert_eq!(health.json(), json!({"status": "ok"}));
    assert_eq!(health.header("cache-control"), Some("no-store"));
    assert_eq!(server.request("HEAD", "/health", &[], b"").status, 200);
    assert_eq!(server.request("POST", "/health", &[], b"").status, 405);
    assert_eq!(server.get("/ready").json(), json!({"status": "ready"}));
    // Another writer holds the database: not ready, with the reason, and back once it lets go.
    let blocker = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let blocked = server.get("/ready");
    assert_eq!(blocked.status, 503);
    let body = blocked.json();
    assert_eq!(body["status"], "unavailable");
    assert!(
        body["reason"].as_str().unwrap().contains("not writable"),
        "{body}"
    );
    // Probes charge no quota and need no token; the API still answers reads meanwhile.
    answered(&server, &token);
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(server.get("/ready").status, 200);
}

/// A write that waits out `SQLite`'s busy timeout (5 s) behind another writer answers 503 with
/// `Retry-After` in its endpoint's shape, as docs/API.md says of an unreachable database, and
/// works once the other writer lets go. The timeout is a constant of the product, so this
/// test takes those 5 s (its writes wait in parallel).
#[test]
fn a_write_that_waits_out_the_sqlite_busy_timeout_answers_503_with_retry_after() {
    let root = scratch("busy");
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = create_app(Path::new(BINARY), &data, "read,upload");
    create_user(
        Path::new(BINARY),
        &data,
        "erin",
        "erin@example.com",
        "correct horse",
    );
    // On SQLite whatever the topology: two replicas would share this file. Captured: the
    // server warns of each refusal, which the test reads.
    let server = Server::start_captured(
        Path::new(BINARY),
        &data,
        &[],
        &[("STREETLEVEL_TEST_BACKEND", "sqlite")],
    );
    let signed_in = uploader_sign_in(&server, &token, "correct horse");
    assert_eq!(signed_in.status, 200, "{signed_in:?}");
    let user = format!(
        "OAuth {}",
        signed_in.json()["access_token"].as_str().unwrap()
    );
    let append = || {
        server.request(
            "POST",
            "/upload/busy.jpg",
            &[("Authorization", &user), ("Offset", "0")],
            b"jpeg bytes",
        )
    };

    let blocker = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (sign_in, upload) = std::thread::scope(|scope| {
        let sign_in = scope.spawn(|| uploader_sign_in(&server, &token, "correct horse"));
        let upload = scope.spawn(append);
        (sign_in.join().unwrap(), upload.join().unwrap())
    });
    blocker.execute_batch("ROLLBACK").unwrap();
    for (response, what) in [(&sign_in, "the uploader's sign-in"), (&upload, "an upload")] {
        assert_eq!(response.status, 503, "{what}: {response:?}");
        assert_eq!(response.header("retry-after"), Some("5"), "{what}");
        assert_eq!(
            response.json()["error"]["message"],
            "The service is temporarily unavailable: try again in a few seconds",
            "{what}"
        );
    }
    assert_eq!(sign_in.json()["error"]["code"], 2);
    let log = server.stderr_once_it_contains("request refused for now");
    assert!(
        log.lines()
            .filter(|line| line.contains("request refused for now"))
            .all(|line| line.contains("WARN")),
        "a refusal for now is a warning, not an error: {log}"
    );
    assert_eq!(
        (
            upload.json()["debug_info"]["type"].as_str(),
            upload.json()["debug_info"]["retriable"].as_bool()
        ),
        (Some("ServiceUnavailableError"), Some(true)),
        "the uploader waits and retries"
    );

    assert_eq!(
        uploader_sign_in(&server, &token, "correct horse").status,
        200
    );
    // At offset 0 still: the refused append stored nothing.
    assert_eq!(append().status, 200);
}
