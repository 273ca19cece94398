//! The in-memory cache of valid tokens never outlives what the database says: this store's
//! revocations apply at once, another process's within the cache lifetime, expiry on every
//! use by the store's clock.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{config, fixture, fixture_with};
use streetlevel_auth::{AuthError, AuthStore, Config, FakeClock, Scopes, SeededRandom};

/// Checks `token` twice, so that the second check is answered from the cache.
fn check_twice(store: &AuthStore, token: &str) {
    store.check_token(token).expect("valid");
    store.check_token(token).expect("still valid");
}

fn assert_invalid(store: &AuthStore, token: &str) {
    let result = store.check_token(token);
    assert!(
        matches!(result, Err(AuthError::InvalidToken)),
        "expected an invalid token, got {result:?}"
    );
}

#[test]
fn a_revoked_token_fails_at_once() {
    let f = fixture();
    let embed = f.store.create_embed_token(f.app.client_id).unwrap();
    check_twice(&f.store, &embed);
    check_twice(&f.store, &f.app.client_token);
    assert!(f.store.revoke_token(&embed).unwrap());
    assert_invalid(&f.store, &embed);
    // Other tokens keep working (after one more read).
    check_twice(&f.store, &f.app.client_token);
}

#[test]
fn a_rotated_client_token_fails_at_once() {
    let f = fixture();
    check_twice(&f.store, &f.app.client_token);
    let new_token = f.store.rotate_client_token(f.app.client_id).unwrap();
    assert_invalid(&f.store, &f.app.client_token);
    check_twice(&f.store, &new_token);
}

#[test]
fn a_refreshed_token_fails_at_once_and_a_replayed_refresh_ends_the_grant_at_once() {
    let f = fixture();
    let first = f.user_token();
    check_twice(&f.store, &first);
    let refresh = |token: &str| {
        f.exchange_json(&serde_json::json!({
            "grant_type": "refresh_token",
            "client_id": f.app.client_id.0,
            "refresh_token": token,
        }))
    };
    let second = refresh(&first).unwrap().access_token;
    assert_invalid(&f.store, &first);
    check_twice(&f.store, &second);
    assert!(refresh(&first).is_err());
    assert_invalid(&f.store, &second);
}

#[test]
fn a_replayed_code_ends_its_tokens_at_once() {
    let f = fixture();
    let code = f.code();
    let exchange = || {
        f.exchange_json(&serde_json::json!({
            "grant_type": "authorization_code",
            "client_id": f.app.client_id.0,
            "code": code,
        }))
    };
    let token = exchange().unwrap().access_token;
    check_twice(&f.store, &token);
    assert!(exchange().is_err());
    assert_invalid(&f.store, &token);
}

#[test]
fn a_cached_token_expires_by_the_store_clock() {
    let f = fixture_with(Config {
        // Longer than the clock moves, so only the expiry check can refuse the token.
        token_cache_ttl: Duration::from_secs(3600),
        ..config()
    });
    let token = f.user_token();
    check_twice(&f.store, &token);
    f.clock.advance(Duration::from_secs(3599));
    check_twice(&f.store, &token);
    f.clock.advance(Duration::from_secs(1));
    assert!(matches!(
        f.store.check_token(&token),
        Err(AuthError::ExpiredToken)
    ));
}

#[test]
fn purging_forgets_what_it_deleted() {
    let f = fixture();
    let token = f.user_token();
    check_twice(&f.store, &token);
    // Past expiry and the refresh grace: the purge deletes the row.
    f.clock.advance(Duration::from_secs(3600 + 600));
    assert_eq!(f.store.purge_expired().unwrap().tokens, 1);
    assert_invalid(&f.store, &token);
}

fn database(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-auth-token-cache-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir.join("streetlevel.sqlite")
}

/// A token found valid is not read again while its entry lives: here the row is deleted
/// behind the store's back (as no writer of ours does) and the token is still accepted.
#[test]
fn a_repeated_token_is_answered_from_memory() {
    let path = database("from-memory");
    let clock = FakeClock::new(common::START);
    let long = Config {
        token_cache_ttl: Duration::from_secs(3600),
        ..config()
    };
    let store = AuthStore::open(&path, long, clock, SeededRandom::new(1)).unwrap();
    let app = store
        .create_app("Demo", common::CALLBACK, Scopes::READ)
        .unwrap();
    let embed = store.create_embed_token(app.client_id).unwrap();
    store.check_token(&embed).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(
        other
            .execute("DELETE FROM auth_tokens WHERE kind = 'embed'", [])
            .unwrap(),
        1
    );
    assert_eq!(store.check_token(&embed).unwrap().client_id, app.client_id);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Another store on the same file stands for another process: it cannot reach this store's
/// cache, so its revocation is seen once the cached entry has lived its (short) lifetime.
#[test]
fn a_revocation_by_another_process_applies_within_the_lifetime() {
    let path = database("other-process");
    let clock = FakeClock::new(common::START);
    let short = Config {
        token_cache_ttl: Duration::from_millis(50),
        ..config()
    };
    let server = AuthStore::open(&path, short, clock.clone(), SeededRandom::new(1)).unwrap();
    let cli = AuthStore::open(&path, config(), clock, SeededRandom::new(2)).unwrap();
    let app = server
        .create_app("Demo", common::CALLBACK, Scopes::READ)
        .unwrap();
    let embed = server.create_embed_token(app.client_id).unwrap();
    check_twice(&server, &embed);
    assert!(cli.revoke_token(&embed).unwrap());
    // No timing is asserted: the deadline only keeps a broken cache from hanging the test.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.check_token(&embed).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the other process's revocation was never seen"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_invalid(&server, &embed);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn without_a_cache_another_process_revocation_applies_at_once() {
    let path = database("no-cache");
    let clock = FakeClock::new(common::START);
    let uncached = Config {
        token_cache_ttl: Duration::ZERO,
        ..config()
    };
    let server = AuthStore::open(&path, uncached, clock.clone(), SeededRandom::new(1)).unwrap();
    let cli = AuthStore::open(&path, config(), clock, SeededRandom::new(2)).unwrap();
    let app = server
        .create_app("Demo", common::CALLBACK, Scopes::READ)
        .unwrap();
    check_twice(&server, &app.client_token);
    cli.rotate_client_token(app.client_id).unwrap();
    assert_invalid(&server, &app.client_token);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
