//! The server remembers valid tokens for a moment (`streetlevel-auth`'s token cache), and a
//! revoked token still stops working: at once when the server revoked it, and within the
//! cache's lifetime (1 s) when another process sharing the database did. A revoking write
//! that failed changed nothing and keeps the cache, so cached tokens go on working through a
//! database outage.
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use streetlevel_tests::{Fixture, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
/// An authenticated request that the fixture answers with 200.
const SEARCH: &str = "/images?bbox=13,55,14,56&limit=1&fields=id";

fn status(server: &Server, token: &str) -> u16 {
    server.get(&format!("{SEARCH}&access_token={token}")).status
}

/// An auth store on the fixture's database, as the CLI opens it: another process's view.
fn other_process(fixture: &Fixture) -> streetlevel_auth::AuthStore {
    streetlevel_auth::AuthStore::open(
        &fixture.database(),
        streetlevel_auth::Config::insecure_fast(),
        streetlevel_auth::SystemClock,
        streetlevel_auth::OsRandom,
    )
    .expect("the auth tables open")
}

fn post_token(server: &Server, fixture: &Fixture, body: &serde_json::Value) -> serde_json::Value {
    let secret = format!("OAuth {}", fixture.client_secret);
    let response = server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &secret),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

#[test]
fn revocations_stop_cached_tokens() {
    let fixture = Fixture::generate(Path::new(BINARY), "token-cache", 20);
    let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
    let client_id = fixture.client_id.parse::<u64>().unwrap();

    // Revoked by the server itself (a refresh rotates the old token away): at once.
    let other = other_process(&fixture);
    let user = other.create_user("token-cache-user", "a password").unwrap();
    let streetlevel_auth::Authorization::Prompt(request) = other
        .authorization_request(Some(&format!("client_id={client_id}&response_type=code")))
        .unwrap()
    else {
        panic!("the fixture app's authorization request is refused");
    };
    let location = other.approve(&request, user.id).unwrap();
    let code = location
        .split_once("code=")
        .map(|(_, rest)| rest.split('&').next().unwrap().to_owned())
        .unwrap();
    let issued = post_token(
        &server,
        &fixture,
        &serde_json::json!({"grant_type": "authorization_code", "client_id": client_id, "code": code}),
    );
    let first = issued["access_token"].as_str().unwrap().to_owned();
    assert_eq!(status(&server, &first), 200);
    assert_eq!(status(&server, &first), 200);
    let refreshed = post_token(
        &server,
        &fixture,
        &serde_json::json!({"grant_type": "refresh_token", "client_id": client_id, "refresh_token": first}),
    );
    let second = refreshed["access_token"].as_str().unwrap().to_owned();
    assert_eq!(status(&server, &first), 401);
    assert_eq!(status(&server, &second), 200);

    // Revoked by another process on the same database file: within the cache's lifetime.
    assert_eq!(status(&server, &fixture.client_token), 200);
    assert_eq!(status(&server, &fixture.client_token), 200);
    assert!(other.revoke_token(&fixture.client_token).unwrap());
    // No speed is asserted: the deadline only keeps a cache that never expires from hanging.
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&server, &fixture.client_token) == 200 {
        assert!(
            Instant::now() < deadline,
            "the server kept accepting a token another process revoked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status(&server, &fixture.client_token), 401);
    assert_eq!(status(&server, &second), 200);
    drop(server);
    let _ = std::fs::remove_dir_all(&fixture.dir);
}

/// `POST /token` with the fixture app's secret, whatever it answers.
fn try_post_token(
    server: &Server,
    fixture: &Fixture,
    body: &serde_json::Value,
) -> streetlevel_tests::Response {
    let secret = format!("OAuth {}", fixture.client_secret);
    server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &secret),
        ],
        body.to_string().as_bytes(),
    )
}

/// Holds the write lock of every auth token row from a connection of its own (as another
/// writer would) until the returned sender is dropped or sent to; returns once it holds it.
fn hold_the_token_rows(
    location: &streetlevel_db::Location,
) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let database = streetlevel_db::Database::open(location).unwrap();
    let (held, holding) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        let _ = database.write(|connection| {
            // A change of nothing that still locks each row (PostgreSQL) or the file (SQLite).
            connection.execute(
                "UPDATE auth_tokens SET revoked_reason = revoked_reason",
                &[],
            )?;
            held.send(()).unwrap();
            let _ = released.recv();
            Ok::<_, streetlevel_db::DbError>(())
        });
    });
    holding.recv().expect("the rows are locked");
    (release, holder)
}

/// A revoking write that fails keeps the token cache: a refresh (which revokes the token it
/// replaces) that waits out the lock of another writer answers 503 `temporarily_unavailable`
/// and changes nothing, and when `PostgreSQL` then stops, tokens in the cache, that one too,
/// go on working on every process. Once it is back the same refresh succeeds (had the failed
/// one taken effect, this would be a reuse, refused) and revokes the token then.
#[test]
fn a_failed_revocation_keeps_cached_tokens_working_through_an_outage_and_changes_nothing() {
    let fixture = Fixture::generate(Path::new(BINARY), "token-cache-outage", 10);
    let mut postgres = streetlevel_tests::postgres::Postgres::start("token-cache-outage");
    let server = Server::start_on_postgres(
        Path::new(BINARY),
        &fixture.dir,
        &postgres.url(),
        &["--token-cache-seconds", "600"],
    );
    let client_id = fixture.client_id.parse::<u64>().unwrap();
    let code = streetlevel_tests::auth::approved_code(
        server.database(),
        &fixture.client_id,
        "token-cache-outage-user",
    );
    let issued = post_token(
        &server,
        &fixture,
        &serde_json::json!({"grant_type": "authorization_code", "client_id": client_id, "code": code}),
    );
    let user_token = issued["access_token"].as_str().unwrap().to_owned();
    let on_every_process = |token: &str| -> Vec<u16> {
        server
            .processes()
            .iter()
            .map(|process| {
                streetlevel_tests::request(
                    *process,
                    "GET",
                    &format!("{SEARCH}&access_token={token}"),
                    &[],
                    b"",
                )
                .status
            })
            .collect()
    };
    // Every process checks both tokens once, so each has them in its cache.
    let all_ok = vec![200; server.processes().len()];
    assert_eq!(on_every_process(&user_token), all_ok);
    assert_eq!(on_every_process(&fixture.client_token), all_ok);

    let refresh = serde_json::json!({"grant_type": "refresh_token", "client_id": client_id, "refresh_token": user_token});
    let (release, holder) = hold_the_token_rows(server.database());
    // The refresh waits out PostgreSQL's lock_timeout (5 s) and gives up.
    let failed = try_post_token(&server, &fixture, &refresh);
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(failed.status, 503, "{failed:?}");
    assert_eq!(failed.header("retry-after"), Some("5"));
    assert_eq!(failed.json()["error"], "temporarily_unavailable");

    postgres.stop();
    assert_eq!(
        on_every_process(&user_token),
        all_ok,
        "the token the failed refresh would have revoked, from the cache"
    );
    assert_eq!(on_every_process(&fixture.client_token), all_ok);

    postgres.restart();
    // The first request after the restart may still find a connection broken.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refreshed = loop {
        let response = try_post_token(&server, &fixture, &refresh);
        if response.status != 503 || Instant::now() > deadline {
            break response;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        refreshed.status, 200,
        "the refresh that failed did not rotate the token away: {refreshed:?}"
    );
    let next = refreshed.json()["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(status(&server, &next), 200);
    // The process that refreshed refuses the replaced token at once; another replica, which
    // has it in its cache, within `--token-cache-seconds` (docs/API.md).
    assert!(
        on_every_process(&user_token).contains(&401),
        "the refresh that succeeded revoked the token it replaced"
    );
}
