//! [`Registry`]: what the web surface itself remembers, in `web_*` tables of the data
//! directory's `SQLite` file: the embed page's token.
//!
//! The embed token is kept in clear: it is published in every embed page anyway, and it can
//! only read. App owners lived here too (`web_app_owners`) until the auth crate's apps got an
//! owner; [`Registry::hand_owners_to`] moves any left in an older database over to auth.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};
use streetlevel_auth::{AuthError, AuthStore, ClientId, Scopes, UserId};

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

/// The embed token, persisted in `web_*` tables.
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
        Self::from_connection(streetlevel_sqlite::open(path)?)
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

    /// Moves app owners recorded by older versions (table `web_app_owners`) to the auth
    /// crate's apps, then drops the table. Owners of apps or users that no longer exist are
    /// dropped with it. Safe to repeat: an interrupted move is finished on the next start.
    pub fn hand_owners_to(&self, auth: &AuthStore) -> Result<usize, WebError> {
        let connection = self.connection();
        let legacy: bool = connection.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'web_app_owners')",
            [],
            |row| row.get(0),
        )?;
        if !legacy {
            return Ok(0);
        }
        let owners = connection
            .prepare("SELECT client_id, user_id FROM web_app_owners ORDER BY client_id")?
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        let mut moved = 0;
        for (client_id, user_id) in owners {
            let owner = Some(UserId(from_sql(user_id)));
            match auth.set_app_owner(ClientId(from_sql(client_id)), owner) {
                Ok(()) => moved += 1,
                Err(AuthError::UnknownApp(_) | AuthError::UnknownUser(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        connection.execute_batch("DROP TABLE web_app_owners")?;
        Ok(moved)
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
    Ok(streetlevel_sqlite::migrate(connection, "web", MIGRATIONS)?)
}

#[cfg(test)]
mod tests {
    use streetlevel_auth::{Config, FakeClock, SeededRandom};
    use streetlevel_model::Timestamp;

    use super::*;

    #[test]
    fn owners_kept_by_older_versions_move_to_auth_once() {
        let auth = AuthStore::open_in_memory(
            Config::insecure_fast(),
            FakeClock::new(Timestamp(1_700_000_000_000)),
            SeededRandom::new(7),
        )
        .unwrap();
        let user = auth.create_user("alice", "correct horse battery").unwrap();
        let app = auth
            .create_app("Old app", "https://app.example/cb", Scopes::READ)
            .unwrap();
        let registry = Registry::open_in_memory().unwrap();
        registry
            .connection()
            .execute(
                "INSERT INTO web_app_owners (client_id, user_id) VALUES (?1, ?2), (42, ?2)",
                params![to_sql(app.client_id.0), to_sql(user.id.0)],
            )
            .unwrap();

        // The row for app 42, which no longer exists, is dropped, not an error.
        assert_eq!(registry.hand_owners_to(&auth).unwrap(), 1);
        let owned = auth.apps_owned_by(user.id).unwrap();
        assert_eq!(owned.len(), 1);
        assert_eq!(owned[0].client_id, app.client_id);
        let left: i64 = registry
            .connection()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'web_app_owners'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(left, 0);
        assert_eq!(registry.hand_owners_to(&auth).unwrap(), 0);
    }
}
