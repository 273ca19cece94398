//! One `serve` process holds one pool of PostgreSQL connections, shared by the store, the
//! auth tables, the web pages and the upload queue (`streetlevel-db`), and a request that
//! finds every connection of it in use waits a bounded time, then is answered 503 with
//! `Retry-After`, not left waiting for ever. The PostgreSQL here speaks TLS and the server is
//! told to require it (`sslmode=require`).
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use streetlevel_db::{Database, DbError, Location};
use streetlevel_tests::postgres::Postgres;
use streetlevel_tests::{Fixture, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
/// An authenticated request that the fixture answers with 200.
const SEARCH: &str = "/images?bbox=13,55,14,56&limit=1&fields=id";

/// How long the test waits for the server's write to queue behind the held lock: a bound on
/// a hung test, not a measurement.
const PATIENCE: Duration = Duration::from_secs(30);

fn search(server: &Server, token: &str) -> streetlevel_tests::Response {
    server.get(&format!("{SEARCH}&access_token={token}"))
}

/// Sessions the server holds open to the test's database (psql's own is named `psql`).
fn streetlevel_sessions(postgres: &Postgres) -> u32 {
    postgres
        .query("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'streetlevel'")
        .parse()
        .unwrap()
}

#[test]
fn a_saturated_pool_answers_503_with_retry_after_and_a_process_holds_one_pool() {
    let fixture = Fixture::generate(Path::new(BINARY), "database-pool", 10);
    let postgres = Postgres::start("database-pool");
    let url = postgres.url();
    assert!(url.contains("sslmode=require"), "{url}");
    streetlevel_tests::migrate(Path::new(BINARY), &fixture.dir, &url);
    // One connection, a short wait, and every token read from the database.
    let server = Server::start_captured(
        Path::new(BINARY),
        &fixture.dir,
        &[
            "--database-connections",
            "1",
            "--database-wait-ms",
            "200",
            "--token-cache-seconds",
            "0",
        ],
        &[("STREETLEVEL_DATABASE_URL", &url)],
    );
    assert_eq!(search(&server, &fixture.client_token).status, 200);
    // Four crates' tables, one pool of one connection, and at most one listening for other
    // replicas' writes (four handles held at least four).
    let sessions = streetlevel_sessions(&postgres);
    assert!(
        (1..=2).contains(&sessions),
        "{sessions} sessions from one server with a pool of one"
    );
    let location = Location::Postgres(url.clone());
    let code =
        streetlevel_tests::auth::approved_code(&location, &fixture.client_id, "database-pool-user");

    // Another writer holds streetlevel's write lock, so the server's next write waits for it
    // on the pool's one connection.
    let holder = Database::open(&location).unwrap();
    let (held, holding) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        holder.write(|_| {
            held.send(()).unwrap();
            let _ = released.recv();
            Ok::<_, DbError>(())
        })
    });
    holding.recv().unwrap();
    std::thread::scope(|scope| {
        let exchange = scope.spawn(|| {
            let secret = format!("OAuth {}", fixture.client_secret);
            let body = serde_json::json!({
                "grant_type": "authorization_code",
                "client_id": fixture.client_id,
                "code": code,
            });
            server.request(
                "POST",
                "/token",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", &secret),
                ],
                body.to_string().as_bytes(),
            )
        });
        let started = Instant::now();
        while postgres
            .query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            != "1"
        {
            assert!(
                started.elapsed() < PATIENCE,
                "the server's token exchange never waited for the write lock"
            );
            std::thread::sleep(Duration::from_millis(20));
        }

        // The pool's one connection is leased: a request that needs the database is told to
        // come back, instead of waiting for ever.
        let refused = search(&server, &fixture.client_token);
        assert_eq!(refused.status, 503, "{refused:?}");
        assert_eq!(refused.header("retry-after"), Some("5"), "{refused:?}");

        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
        let exchanged = exchange.join().unwrap();
        assert_eq!(
            exchanged.status, 200,
            "the waiting write went on once the lock was released: {exchanged:?}"
        );
    });
    // The connection came back: the same request succeeds.
    assert_eq!(search(&server, &fixture.client_token).status, 200);
    drop(server);
    let _ = std::fs::remove_dir_all(&fixture.dir);
}
