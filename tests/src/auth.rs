//! Writes a test makes through the auth crate, on the tables a server reads
//! ([`crate::Server::database`]: the data directory's `SQLite` file or the replicas'
//! `PostgreSQL` database): a user's consent, which only a signed-in browser gives over HTTP,
//! and tokens issued at a time other than now.

use streetlevel_auth::{AuthStore, Authorization, Config, FakeClock, OsRandom};
use streetlevel_db::Location;
use streetlevel_model::Timestamp;

/// The system clock's time, in the auth crate's milliseconds.
pub fn now() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    Timestamp(i64::try_from(since_epoch.as_millis()).expect("milliseconds fit an i64"))
}

/// An auth store on `location` whose clock reads `now`, as a server's would at that time.
pub fn store_at(location: &Location, now: Timestamp) -> AuthStore {
    AuthStore::open_location(
        location,
        Config::insecure_fast(),
        FakeClock::new(now),
        OsRandom,
    )
    .unwrap_or_else(|error| panic!("the auth tables at {location:?} open: {error}"))
}

/// A new user `username` approves the app `client_id` at `now`, as the consent page would:
/// the authorization code, for `POST /token` to redeem.
pub fn approved_code_at(
    location: &Location,
    client_id: &str,
    username: &str,
    now: Timestamp,
) -> String {
    let store = store_at(location, now);
    let user = store
        .create_user(username, "a password")
        .unwrap_or_else(|error| panic!("create the user {username}: {error}"));
    let query = format!("client_id={client_id}&response_type=code");
    let Ok(Authorization::Prompt(request)) = store.authorization_request(Some(&query)) else {
        panic!("the app {client_id}'s authorization request is refused");
    };
    let location = store
        .approve(&request, user.id)
        .unwrap_or_else(|error| panic!("approve the app {client_id}: {error}"));
    location
        .split_once("code=")
        .and_then(|(_, rest)| rest.split('&').next())
        .unwrap_or_else(|| panic!("no code in the redirect {location}"))
        .to_owned()
}

/// [`approved_code_at`] now.
pub fn approved_code(location: &Location, client_id: &str, username: &str) -> String {
    approved_code_at(location, client_id, username, now())
}

/// An app's credentials, from `streetlevel apps create`.
#[derive(Debug, Clone)]
pub struct App {
    /// Its client ID.
    pub id: String,
    /// Its client token (`OAuth <token>` for reads).
    pub token: String,
    /// Its client secret (for `POST /token`).
    pub secret: String,
}

/// Registers an app in `data` with `scopes` (`read`, `read,write`, ...) through `binary`'s
/// `apps create`.
pub fn create_app(binary: &std::path::Path, data: &std::path::Path, scopes: &str) -> App {
    let created = crate::run(
        binary,
        &[
            "apps",
            "create",
            "--data",
            &data.to_string_lossy(),
            "--name",
            "test app",
            "--callback",
            "http://127.0.0.1/callback",
            "--scopes",
            scopes,
        ],
    );
    let field = |name: &str| {
        created
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {created:?}"))
            .trim()
            .to_owned()
    };
    App {
        id: field("client_id"),
        token: field("client_token"),
        secret: field("client_secret"),
    }
}

/// A new user `username` approves `app`; their access token, exchanged at `server`.
pub fn user_token(server: &crate::Server, app: &App, username: &str) -> String {
    let code = approved_code(server.database(), &app.id, username);
    let body = serde_json::json!({
        "grant_type": "authorization_code",
        "code": code,
        "client_id": app.id.parse::<u64>().expect("a numeric client ID"),
    });
    let response = server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &format!("OAuth {}", app.secret)),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned()
}
