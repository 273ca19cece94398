//! [`AuthStore`]: the `SQLite` tables of the auth crate, and their migrations.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use rusqlite::Connection;
use streetlevel_model::Timestamp;
use streetlevel_model::clock::duration_millis;

use crate::token_cache::TokenCache;
use crate::{AuthError, Clock, Config, RandomSource};

/// Schema migrations, applied in order; `auth_schema_version` holds how many ran.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE auth_users (
    user_id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE auth_sessions (
    digest BLOB PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES auth_users(user_id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE auth_apps (
    client_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    callback_url TEXT NOT NULL,
    scopes TEXT NOT NULL,
    secret_digest BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE auth_codes (
    digest BLOB PRIMARY KEY,
    client_id INTEGER NOT NULL REFERENCES auth_apps(client_id),
    user_id INTEGER NOT NULL REFERENCES auth_users(user_id),
    redirect_uri TEXT NOT NULL,
    redirect_uri_given INTEGER NOT NULL,
    scopes TEXT NOT NULL,
    grant_id BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
) WITHOUT ROWID;
CREATE TABLE auth_tokens (
    digest BLOB PRIMARY KEY,
    kind TEXT NOT NULL,
    client_id INTEGER NOT NULL REFERENCES auth_apps(client_id),
    user_id INTEGER REFERENCES auth_users(user_id),
    scopes TEXT NOT NULL,
    grant_id BLOB,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER,
    revoked_reason TEXT
) WITHOUT ROWID;
CREATE INDEX auth_tokens_by_grant ON auth_tokens(grant_id);
CREATE INDEX auth_tokens_by_client ON auth_tokens(client_id, kind);
",
    // 2: apps get an optional owner, so a user's dashboard lists the apps they registered.
    r"
ALTER TABLE auth_apps ADD COLUMN owner_id INTEGER REFERENCES auth_users(user_id);
CREATE INDEX auth_apps_by_owner ON auth_apps(owner_id);
",
    // 3: users get an optional email: the official uploader signs in with email and password.
    r"
ALTER TABLE auth_users ADD COLUMN email TEXT;
CREATE UNIQUE INDEX auth_users_by_email ON auth_users(email);
",
    // 4: PKCE (RFC 7636): a code keeps its request's challenge; an app may require one.
    r"
ALTER TABLE auth_codes ADD COLUMN code_challenge TEXT;
ALTER TABLE auth_codes ADD COLUMN code_challenge_method TEXT;
ALTER TABLE auth_apps ADD COLUMN require_pkce INTEGER NOT NULL DEFAULT 0;
",
];

/// Users, sessions, apps, codes and tokens, persisted in `SQLite` tables prefixed `auth_`.
///
/// Thread-safe: share one instance (in an `Arc`) between requests. Every operation takes a
/// short lock on one `SQLite` connection.
pub struct AuthStore {
    connection: Mutex<Connection>,
    pub(crate) config: Config,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Box<dyn RandomSource>,
    /// A password hash to verify against when the username is unknown, so a login takes as
    /// long for an unknown user as for a wrong password.
    pub(crate) dummy_hash: OnceLock<String>,
    /// Tokens found valid a moment ago. Every write that revokes, rotates or deletes a token
    /// (or anything a [`Principal`](crate::Principal) is read from) must call
    /// `token_cache.invalidate()` once it has committed; see `token_cache.rs`.
    pub(crate) token_cache: TokenCache,
}

impl std::fmt::Debug for AuthStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AuthStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How many expired rows [`AuthStore::purge_expired`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Authorization codes past their expiry.
    pub codes: usize,
    /// Browser sessions past their expiry.
    pub sessions: usize,
    /// User tokens past expiry and the refresh grace, so useless even for refreshing.
    pub tokens: usize,
}

impl AuthStore {
    /// Opens (creating if needed) the auth tables in the `SQLite` file at `path`, usually the
    /// data directory's `streetlevel.sqlite` shared with the store crate, migrates them, and
    /// purges expired codes and sessions.
    pub fn open(
        path: &Path,
        config: Config,
        clock: impl Clock + 'static,
        random: impl RandomSource + 'static,
    ) -> Result<Self, AuthError> {
        let connection = streetlevel_sqlite::open(path)?;
        Self::from_connection(connection, config, Arc::new(clock), Box::new(random))
    }

    /// A store in memory, for tests.
    pub fn open_in_memory(
        config: Config,
        clock: impl Clock + 'static,
        random: impl RandomSource + 'static,
    ) -> Result<Self, AuthError> {
        let connection = Connection::open_in_memory()?;
        Self::from_connection(connection, config, Arc::new(clock), Box::new(random))
    }

    fn from_connection(
        mut connection: Connection,
        config: Config,
        clock: Arc<dyn Clock>,
        random: Box<dyn RandomSource>,
    ) -> Result<Self, AuthError> {
        connection.pragma_update(None, "foreign_keys", true)?;
        migrate(&mut connection)?;
        let token_cache = TokenCache::new(config.token_cache_entries, config.token_cache_ttl);
        let store = Self {
            connection: Mutex::new(connection),
            token_cache,
            config,
            clock,
            random,
            dummy_hash: OnceLock::new(),
        };
        store.purge_expired()?;
        Ok(store)
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn connection(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The clock the store reads, to share with what must agree with it (the sign-in
    /// throttle of the same users, for one).
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Deletes expired authorization codes and sessions, and user tokens that can no longer
    /// be used even as refresh tokens. Runs on open; the server may call it daily.
    pub fn purge_expired(&self) -> Result<Purged, AuthError> {
        let now = self.now().0;
        let grace = duration_millis(self.config.refresh_grace);
        let connection = self.connection();
        let codes = connection.execute("DELETE FROM auth_codes WHERE expires_at <= ?1", [now])?;
        let sessions =
            connection.execute("DELETE FROM auth_sessions WHERE expires_at <= ?1", [now])?;
        let tokens = connection.execute(
            "DELETE FROM auth_tokens WHERE expires_at IS NOT NULL AND expires_at + ?2 <= ?1",
            [now, grace],
        )?;
        self.token_cache.invalidate();
        Ok(Purged {
            codes,
            sessions,
            tokens,
        })
    }
}

fn migrate(connection: &mut Connection) -> Result<(), AuthError> {
    Ok(streetlevel_sqlite::migrate(connection, "auth", MIGRATIONS)?)
}

/// A transaction that takes the database's write lock at once (waiting up to the busy
/// timeout for another process's writer), rather than at its first write: a deferred one that
/// read first fails at once with "database is locked" when another connection wrote meanwhile,
/// which surfaced as 500s and failed CLI runs while the server and `streetlevel apps` wrote
/// together.
pub(crate) fn write_transaction(
    connection: &mut Connection,
) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
}
