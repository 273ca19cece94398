//! The server remembers valid tokens for a moment (`streetlevel-auth`'s token cache), and a
//! revoked token still stops working: at once when the server revoked it, and within the
//! cache's lifetime (1 s) when another process sharing the database did.

use std::path::Path;
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
