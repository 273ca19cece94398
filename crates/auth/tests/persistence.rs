//! The `SQLite` file: a restart loses nothing, and nothing secret is stored in clear.

mod common;

use std::path::PathBuf;

use common::{CALLBACK, PASSWORD, START, config};
use streetlevel_auth::{AuthError, AuthStore, FakeClock, Scopes, SeededRandom};
use streetlevel_db::MigrationError;

fn database(name: &str) -> PathBuf {
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("auth-tests");
    std::fs::create_dir_all(&directory).expect("temporary directory");
    let path = directory.join(format!("{name}.sqlite"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

fn open(path: &std::path::Path, clock: &FakeClock, seed: u64) -> AuthStore {
    AuthStore::open(path, config(), clock.clone(), SeededRandom::new(seed)).expect("store opens")
}

#[test]
fn a_restart_loses_no_app_user_token_or_unexpired_code() {
    let path = database("restart");
    let clock = FakeClock::new(START);
    let (app, user, user_token, session, code, embed) = {
        let store = open(&path, &clock, 1);
        let user = store.create_user("alice", PASSWORD).unwrap();
        let app = store.create_app("Demo", CALLBACK, Scopes::ALL).unwrap();
        let request = common::prompt(
            store
                .authorization_request(Some(&format!("client_id={}", app.client_id)))
                .unwrap(),
        )
        .unwrap();
        let first =
            common::query_value(&store.approve(&request, user.id).unwrap(), "code").unwrap();
        let body = serde_json::json!({"grant_type": "authorization_code", "client_id": app.client_id.0, "code": first});
        let user_token = store
            .exchange(
                Some(&format!("OAuth {}", app.client_secret)),
                Some("application/json"),
                body.to_string().as_bytes(),
            )
            .unwrap()
            .access_token;
        let code = common::query_value(&store.approve(&request, user.id).unwrap(), "code").unwrap();
        let session = store.create_session(user.id).unwrap();
        let embed = store.create_embed_token(app.client_id).unwrap();
        (app, user, user_token, session, code, embed)
    };

    // A different random seed proves nothing is re-derived from the generator.
    let store = open(&path, &clock, 2);
    assert_eq!(store.apps().unwrap()[0].client_id, app.client_id);
    assert_eq!(store.verify_password("alice", PASSWORD).unwrap(), user);
    assert_eq!(
        store.check_token(&app.client_token).unwrap().client_id,
        app.client_id
    );
    assert_eq!(store.check_token(&user_token).unwrap().user, Some(user.id));
    assert_eq!(store.check_token(&embed).unwrap().client_id, app.client_id);
    assert_eq!(store.session_user(&session).unwrap(), user);
    let body = serde_json::json!({"grant_type": "authorization_code", "client_id": app.client_id.0, "code": code});
    let exchanged = store.exchange(
        Some(&format!("OAuth {}", app.client_secret)),
        Some("application/json"),
        body.to_string().as_bytes(),
    );
    assert!(exchanged.is_ok(), "{exchanged:?}");
}

#[test]
fn the_auth_tables_share_the_file_with_others() {
    let path = database("shared");
    {
        let other = rusqlite::Connection::open(&path).unwrap();
        other
            .execute_batch(
                "CREATE TABLE images (id INTEGER PRIMARY KEY); INSERT INTO images VALUES (7);",
            )
            .unwrap();
    }
    let clock = FakeClock::new(START);
    drop(open(&path, &clock, 1));
    drop(open(&path, &clock, 1));
    let other = rusqlite::Connection::open(&path).unwrap();
    let images: i64 = other
        .query_row("SELECT count(*) FROM images", [], |row| row.get(0))
        .unwrap();
    assert_eq!(images, 1);
    let version: i64 = other
        .query_row("SELECT version FROM auth_schema_version", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(version, 4);
    let mode: String = other
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    other
        .execute("UPDATE auth_schema_version SET version = 99", [])
        .unwrap();
    drop(other);
    let newer = AuthStore::open(&path, config(), clock, SeededRandom::new(1)).unwrap_err();
    assert!(matches!(
        newer,
        AuthError::Migration(MigrationError::SchemaTooNew {
            found: 99,
            supported: 4,
            ..
        })
    ));
}

#[test]
fn no_secret_or_token_is_stored_in_clear() {
    let path = database("clear");
    let clock = FakeClock::new(START);
    let mut secrets = vec![PASSWORD.to_owned()];
    {
        let store = open(&path, &clock, 3);
        let user = store.create_user("alice", PASSWORD).unwrap();
        let app = store.create_app("Demo", CALLBACK, Scopes::ALL).unwrap();
        let request = common::prompt(
            store
                .authorization_request(Some(&format!("client_id={}", app.client_id)))
                .unwrap(),
        )
        .unwrap();
        let code = common::query_value(&store.approve(&request, user.id).unwrap(), "code").unwrap();
        let body = serde_json::json!({"grant_type": "authorization_code", "client_id": app.client_id.0, "code": code});
        let auth = format!("OAuth {}", app.client_secret);
        let user_token = store
            .exchange(
                Some(&auth),
                Some("application/json"),
                body.to_string().as_bytes(),
            )
            .unwrap()
            .access_token;
        let refresh = serde_json::json!({"grant_type": "refresh_token", "client_id": app.client_id.0, "refresh_token": user_token});
        let refreshed = store
            .exchange(
                Some(&auth),
                Some("application/json"),
                refresh.to_string().as_bytes(),
            )
            .unwrap()
            .access_token;
        let pending =
            common::query_value(&store.approve(&request, user.id).unwrap(), "code").unwrap();
        let session = store.create_session(user.id).unwrap();
        let embed = store.create_embed_token(app.client_id).unwrap();
        let rotated = store.rotate_client_secret(app.client_id).unwrap();
        secrets.extend([
            app.client_secret,
            app.client_token,
            code,
            user_token,
            refreshed,
            pending,
            session,
            embed,
            rotated,
        ]);
    }
    let mut bytes = std::fs::read(&path).unwrap();
    if let Ok(wal) = std::fs::read(format!("{}-wal", path.display())) {
        bytes.extend(wal);
    }
    // The scan can find things: the username and callback are there in clear.
    assert!(contains(&bytes, b"alice"));
    assert!(contains(&bytes, CALLBACK.as_bytes()));
    for secret in &secrets {
        // The random part without its prefix, too.
        let random_part = secret
            .split_once('_')
            .map_or(secret.as_str(), |(_, rest)| rest);
        assert!(
            !contains(&bytes, secret.as_bytes()),
            "{secret} is stored in clear"
        );
        assert!(
            !contains(&bytes, random_part.as_bytes()),
            "{secret} is stored in clear"
        );
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// A data directory written before apps had owners opens, keeps its apps (ownerless), and
/// can give them owners.
#[test]
fn a_version_one_database_upgrades_in_place() {
    let path = database("upgrade-v1");
    let client_id: i64 = 1_234_567_890_123_456;
    {
        let version_one = [include_str!("data/schema_v1.sql")];
        let database =
            streetlevel_db::Database::from_sqlite(rusqlite::Connection::open(&path).unwrap())
                .unwrap();
        database
            .migrate(
                "auth",
                &streetlevel_db::Migrations {
                    sqlite: &version_one,
                    postgres: &version_one,
                },
            )
            .unwrap();
        database
            .write(|connection| {
                connection.execute(
                    "INSERT INTO auth_apps (client_id, name, callback_url, scopes, secret_digest, created_at)
                     VALUES (?1, 'Old app', ?2, 'read', x'00', 0)",
                    streetlevel_db::params![client_id, CALLBACK],
                )
            })
            .unwrap();
    }
    let clock = FakeClock::new(START);
    let store = open(&path, &clock, 1);
    let client_id = streetlevel_auth::ClientId(u64::try_from(client_id).unwrap());
    let app = store.app(client_id).unwrap().unwrap();
    assert_eq!((app.name.as_str(), app.owner), ("Old app", None));
    assert!(!app.require_pkce);
    let user = store.create_user("alice", PASSWORD).unwrap();
    store.set_app_owner(client_id, Some(user.id)).unwrap();
    drop(store);
    let store = open(&path, &clock, 2);
    let owned = store.apps_owned_by(user.id).unwrap();
    assert_eq!(owned.len(), 1);
    assert_eq!(owned[0].client_id, client_id);
    assert_eq!(owned[0].owner, Some(user.id));
}

/// A pending code keeps its PKCE challenge across a restart.
#[test]
fn a_codes_challenge_survives_a_restart() {
    let path = database("pkce");
    let clock = FakeClock::new(START);
    let (app, code) = {
        let store = open(&path, &clock, 1);
        let user = store.create_user("alice", PASSWORD).unwrap();
        let app = store.create_app("Demo", CALLBACK, Scopes::ALL).unwrap();
        let query = format!(
            "client_id={}&code_challenge={}&code_challenge_method=S256",
            app.client_id,
            common::CHALLENGE
        );
        let request = common::prompt(store.authorization_request(Some(&query)).unwrap()).unwrap();
        let code = common::query_value(&store.approve(&request, user.id).unwrap(), "code").unwrap();
        (app, code)
    };
    let store = open(&path, &clock, 2);
    let exchange = |verifier: Option<&str>| {
        let mut body = serde_json::json!({"grant_type": "authorization_code", "client_id": app.client_id.0, "code": code});
        if let Some(verifier) = verifier {
            body["code_verifier"] = serde_json::json!(verifier);
        }
        store.exchange(
            Some(&format!("OAuth {}", app.client_secret)),
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    };
    assert!(exchange(None).is_err());
    assert!(exchange(Some(common::VERIFIER)).is_ok());
}
