//! Two processes writing the auth tables at once (the server exchanging codes while
//! `streetlevel apps create` runs): every call succeeds or fails for its own reason, never
//! with "database is locked".
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Barrier};

use common::{CALLBACK, PASSWORD, START, config, prompt, query_value};
use streetlevel_auth::{AuthStore, FakeClock, Scopes, SeededRandom, TokenErrorCode};

fn database(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-auth-concurrency-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("streetlevel.sqlite")
}

fn open(path: &std::path::Path, seed: u64) -> AuthStore {
    AuthStore::open(
        path,
        config(),
        FakeClock::new(START),
        SeededRandom::new(seed),
    )
    .unwrap()
}

/// A fresh code for `client_id`, approved by user 1.
fn code(store: &AuthStore, client_id: u64) -> String {
    let request = prompt(
        store
            .authorization_request(Some(&format!("client_id={client_id}&response_type=code")))
            .unwrap(),
    )
    .unwrap();
    let user = store.users().unwrap()[0].id;
    query_value(&store.approve(&request, user).unwrap(), "code").unwrap()
}

fn exchange(
    store: &AuthStore,
    secret: &str,
    client_id: u64,
    code: &str,
) -> Result<(), TokenErrorCode> {
    store
        .exchange(
            Some(&format!("OAuth {secret}")),
            Some("application/json"),
            serde_json::json!({"grant_type": "authorization_code", "client_id": client_id, "code": code})
                .to_string()
                .as_bytes(),
        )
        .map(drop)
        .map_err(|error| error.code)
}

#[test]
fn a_server_and_the_cli_write_at_once_without_failures() {
    let path = database("writers");
    let server = open(&path, 1);
    server.create_user("alice", PASSWORD).unwrap();
    let app = server
        .create_app("Demo", CALLBACK, Scopes::parse("read").unwrap())
        .unwrap();
    let cli = open(&path, 2);
    let start = Barrier::new(2);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            start.wait();
            for index in 0..60 {
                cli.create_app(
                    &format!("app {index}"),
                    CALLBACK,
                    Scopes::parse("read").unwrap(),
                )
                .unwrap_or_else(|error| panic!("apps create {index}: {error}"));
            }
        });
        scope.spawn(|| {
            start.wait();
            for index in 0..60 {
                let code = code(&server, app.client_id.0);
                exchange(&server, &app.client_secret, app.client_id.0, &code)
                    .unwrap_or_else(|error| panic!("exchange {index}: {error:?}"));
            }
        });
    });
    assert_eq!(cli.apps().unwrap().len(), 61);
}

#[test]
fn a_code_replayed_to_another_process_at_once_is_invalid_grant_not_an_error() {
    let path = database("replay");
    let first = open(&path, 3);
    first.create_user("alice", PASSWORD).unwrap();
    let app = Arc::new(
        first
            .create_app("Demo", CALLBACK, Scopes::parse("read").unwrap())
            .unwrap(),
    );
    let second = open(&path, 4);
    for _ in 0..20 {
        let code = code(&first, app.client_id.0);
        let start = Barrier::new(2);
        let results: Vec<Result<(), TokenErrorCode>> = std::thread::scope(|scope| {
            let handles: Vec<_> = [&first, &second]
                .into_iter()
                .map(|store| {
                    let (start, code, app) = (&start, &code, &app);
                    scope.spawn(move || {
                        start.wait();
                        exchange(store, &app.client_secret, app.client_id.0, code)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .collect()
        });
        let successes = results.iter().filter(|result| result.is_ok()).count();
        assert_eq!(successes, 1, "{results:?}");
        assert!(
            results.contains(&Err(TokenErrorCode::InvalidGrant)),
            "{results:?}"
        );
    }
}
