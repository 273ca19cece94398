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
