//! [`Registry`]: what the web surface itself remembers, in `web_*` tables of the data
//! directory's `SQLite` file: which user owns which app, and the embed page's token.
//!
//! The auth crate's apps have no owner, so the dashboard keeps the owner here. The embed token
//! is kept in clear: it is published in every embed page anyway, and it can only read.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use streetlevel_auth::{AuthStore, ClientId, Scopes, UserId};

use crate::WebError;

const MIGRATIONS: &[&str] = &[r"
CREATE TABLE web_app_owners (
    client_id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL
);
CREATE INDEX web_app_owners_by_user ON web_app_owners(user_id);
CREATE TABLE web_embed (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    client_id INTEGER NOT NULL,
    token TEXT NOT NULL
);
"];

/// The name of the app the embed page's token belongs to.
pub(crate) const EMBED_APP_NAME: &str = "streetlevel embed page";
/// The embed app never takes part in the authorization flow: its callback is not a web URL.
const EMBED_APP_CALLBACK: &str = "urn:streetlevel:embed";

/// App owners and the embed token, persisted in `web_*` tables.
pub struct Registry {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Registry").finish_non_exhaustive()
    }
}

fn to_sql(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

fn from_sql(id: i64) -> u64 {
    u64::try_from(id).unwrap_or(0)
}

impl Registry {
    /// Opens (creating if needed) the `web_*` tables in the `SQLite` file at `path`, usually
    /// the data directory's `streetlevel.sqlite`.
    pub fn open(path: &Path) -> Result<Self, WebError> {
        let connection = Connection::open(path)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        Self::from_connection(connection)
    }

    /// A registry in memory, for tests.
    pub fn open_in_memory() -> Result<Self, WebError> {
        Self::from_connection(Connection::open_in_memory()?)
    }

    fn from_connection(mut connection: Connection) -> Result<Self, WebError> {
        migrate(&mut connection)?;
        Ok(Self {
            connection: Mutex::new(connection),
        })
    }

    fn connection(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `user_id` owns the app `client_id`.
    pub fn set_owner(&self, client_id: ClientId, user_id: UserId) -> Result<(), WebError> {
        self.connection().execute(
            "INSERT OR REPLACE INTO web_app_owners (client_id, user_id) VALUES (?1, ?2)",
            params![to_sql(client_id.0), to_sql(user_id.0)],
        )?;
        Ok(())
    }

    /// The apps `user_id` owns, by client ID.
    pub fn apps_of(&self, user_id: UserId) -> Result<Vec<ClientId>, WebError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT client_id FROM web_app_owners WHERE user_id = ?1 ORDER BY client_id",
        )?;
        let ids = statement
            .query_map([to_sql(user_id.0)], |row| row.get::<_, i64>(0))?
            .map(|id| id.map(|id| ClientId(from_sql(id))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ids)
    }

    /// Whether `user_id` owns the app `client_id`.
    pub fn owns(&self, user_id: UserId, client_id: ClientId) -> Result<bool, WebError> {
        let owner: Option<i64> = self
            .connection()
            .query_row(
                "SELECT user_id FROM web_app_owners WHERE client_id = ?1",
                [to_sql(client_id.0)],
                |row| row.get(0),
            )
            .optional()?;
        Ok(owner.is_some_and(|owner| from_sql(owner) == user_id.0))
    }

    /// The embed page's app and read-only token: the stored one while auth still accepts it,
    /// else a new app named [`EMBED_APP_NAME`] with a new embed token.
    pub fn embed_token(&self, auth: &AuthStore) -> Result<(ClientId, String), WebError> {
        let stored: Option<(i64, String)> = self
            .connection()
            .query_row(
                "SELECT client_id, token FROM web_embed WHERE singleton = 1",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        if let Some((client_id, token)) = stored
            && auth.check_token(&token).is_ok()
        {
            return Ok((ClientId(from_sql(client_id)), token));
        }
        let credentials = auth.create_app(EMBED_APP_NAME, EMBED_APP_CALLBACK, Scopes::READ)?;
        let token = auth.create_embed_token(credentials.client_id)?;
        self.connection().execute(
            "INSERT OR REPLACE INTO web_embed (singleton, client_id, token) VALUES (1, ?1, ?2)",
            params![to_sql(credentials.client_id.0), token],
        )?;
        Ok((credentials.client_id, token))
    }
}

fn migrate(connection: &mut Connection) -> Result<(), WebError> {
    let transaction =
        connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    transaction.execute_batch(
        "CREATE TABLE IF NOT EXISTS web_schema_version (version INTEGER NOT NULL)",
    )?;
    let found: Option<i64> = transaction
        .query_row("SELECT version FROM web_schema_version", [], |row| {
            row.get(0)
        })
        .optional()?;
    let supported = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
    let found = if let Some(version) = found {
        version
    } else {
        transaction.execute("INSERT INTO web_schema_version (version) VALUES (0)", [])?;
        0
    };
    if found > supported {
        return Err(WebError::SchemaTooNew { found, supported });
    }
    for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
        transaction.execute_batch(migration)?;
    }
    transaction.execute("UPDATE web_schema_version SET version = ?1", [supported])?;
    transaction.commit()?;
    Ok(())
}
