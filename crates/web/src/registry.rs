//! [`Registry`]: what the web surface itself remembers, in `web_*` tables of the data
//! directory's `SQLite` file or of PostgreSQL: the embed page's token.
//!
//! The embed token is kept in clear: it is published in every embed page anyway, and it can
//! only read. App owners lived here too (`web_app_owners`) until the auth crate's apps got an
//! owner; [`Registry::hand_owners_to`] moves any left in an older database over to auth.

use std::path::Path;

use streetlevel_auth::{AuthError, AuthStore, ClientId, Scopes, UserId};
use streetlevel_db::{Backend, Database, DbError, Location, Migrations, params};

use crate::WebError;

const SQLITE_MIGRATIONS: &[&str] = &[r"
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

/// PostgreSQL came after app owners moved to auth: it has the embed table only.
const POSTGRES_MIGRATIONS: &[&str] = &[r"
CREATE TABLE web_embed (
    singleton BIGINT PRIMARY KEY CHECK (singleton = 1),
    client_id BIGINT NOT NULL,
    token TEXT NOT NULL
);
"];

const MIGRATIONS: Migrations<'static> = Migrations {
    sqlite: SQLITE_MIGRATIONS,
    postgres: POSTGRES_MIGRATIONS,
};

/// The name of the app the embed page's token belongs to.
pub(crate) const EMBED_APP_NAME: &str = "streetlevel embed page";
/// The embed app never takes part in the authorization flow: its callback is not a web URL.
const EMBED_APP_CALLBACK: &str = "urn:streetlevel:embed";

/// The embed token, persisted in `web_*` tables.
pub struct Registry {
    db: Database,
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
        Self::open_location(&Location::Sqlite(path.to_owned()))
    }

    /// Opens the `web_*` tables wherever `location` says (see [`Registry::open`]).
    pub fn open_location(location: &Location) -> Result<Self, WebError> {
        Self::from_database(Database::open(location)?)
    }

    /// A registry in memory, for tests.
    pub fn open_in_memory() -> Result<Self, WebError> {
        Self::from_database(Database::open_in_memory()?)
    }

    /// Opens the `web_*` tables in `db`, the process's one handle (a clone of it, shared with
    /// the other crates; see [`Registry::open`]).
    pub fn open_database(db: Database) -> Result<Self, WebError> {
        Self::from_database(db)
    }

    fn from_database(db: Database) -> Result<Self, WebError> {
        db.migrate("web", &MIGRATIONS)?;
        Ok(Self { db })
    }

    /// Moves app owners recorded by older versions (table `web_app_owners`) to the auth
    /// crate's apps, then drops the table. Owners of apps or users that no longer exist are
    /// dropped with it. Safe to repeat: an interrupted move is finished on the next start.
    pub fn hand_owners_to(&self, auth: &AuthStore) -> Result<usize, WebError> {
        if self.db.backend() == Backend::Postgres {
            return Ok(0);
        }
        let owners = self.db.read(|connection| {
            let legacy: Option<bool> = connection.query_value(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'web_app_owners')",
                params![],
            )?;
            if legacy != Some(true) {
                return Ok(None);
            }
            connection
                .query_map(
                    "SELECT client_id, user_id FROM web_app_owners ORDER BY client_id",
                    params![],
                    |row| Ok::<_, DbError>((row.get::<i64>(0)?, row.get::<i64>(1)?)),
                )
                .map(Some)
        })?;
        let Some(owners) = owners else {
            return Ok(0);
        };
        let mut moved = 0;
        for (client_id, user_id) in owners {
            let owner = Some(UserId(from_sql(user_id)));
            match auth.set_app_owner(ClientId(from_sql(client_id)), owner) {
                Ok(()) => moved += 1,
                Err(AuthError::UnknownApp(_) | AuthError::UnknownUser(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        self.db
            .autocommit(|connection| connection.execute_batch("DROP TABLE web_app_owners"))?;
        Ok(moved)
    }

    /// The embed page's app and read-only token: the stored one while auth still accepts it,
    /// else a new app named `EMBED_APP_NAME` with a new embed token.
    pub fn embed_token(&self, auth: &AuthStore) -> Result<(ClientId, String), WebError> {
        let stored: Option<(i64, String)> = self.db.read(|connection| {
            connection.query_row(
                "SELECT client_id, token FROM web_embed WHERE singleton = 1",
                params![],
                |row| Ok::<_, DbError>((row.get(0)?, row.get(1)?)),
            )
        })?;
        if let Some((client_id, token)) = stored
            && auth.check_token(&token).is_ok()
        {
            return Ok((ClientId(from_sql(client_id)), token));
        }
        let credentials = auth.create_app(EMBED_APP_NAME, EMBED_APP_CALLBACK, Scopes::READ)?;
        let token = auth.create_embed_token(credentials.client_id)?;
        self.db.autocommit(|connection| {
            connection.execute(
                "INSERT INTO web_embed (singleton, client_id, token) VALUES (1, ?1, ?2)
                 ON CONFLICT (singleton) DO UPDATE
                 SET client_id = excluded.client_id, token = excluded.token",
                params![to_sql(credentials.client_id.0), &token],
            )
        })?;
        Ok((credentials.client_id, token))
    }
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
            .db
            .autocommit(|connection| {
                connection.execute(
                    "INSERT INTO web_app_owners (client_id, user_id) VALUES (?1, ?2), (42, ?2)",
                    params![to_sql(app.client_id.0), to_sql(user.id.0)],
                )
            })
            .unwrap();

        // The row for app 42, which no longer exists, is dropped, not an error.
        assert_eq!(registry.hand_owners_to(&auth).unwrap(), 1);
        let owned = auth.apps_owned_by(user.id).unwrap();
        assert_eq!(owned.len(), 1);
        assert_eq!(owned[0].client_id, app.client_id);
        let left: Option<i64> = registry
            .db
            .read(|connection| {
                connection.query_value(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name = 'web_app_owners'",
                    params![],
                )
            })
            .unwrap();
        assert_eq!(left, Some(0));
        assert_eq!(registry.hand_owners_to(&auth).unwrap(), 0);
    }

    #[test]
    fn the_embed_token_is_kept_and_replaced_on_postgresql_too() {
        let Some(location) = streetlevel_db::test_postgres_database("web_registry") else {
            return;
        };
        let auth = AuthStore::open_location(
            &location,
            Config::insecure_fast(),
            FakeClock::new(Timestamp(1_700_000_000_000)),
            SeededRandom::new(7),
        )
        .unwrap();
        let registry = Registry::open_location(&location).unwrap();
        let (client_id, token) = registry.embed_token(&auth).unwrap();
        assert_eq!(
            registry.embed_token(&auth).unwrap(),
            (client_id, token.clone())
        );
        assert!(auth.revoke_token(&token).unwrap());
        let (_, replaced) = Registry::open_location(&location)
            .unwrap()
            .embed_token(&auth)
            .unwrap();
        assert_ne!(replaced, token);
        assert!(auth.check_token(&replaced).is_ok());
        assert_eq!(registry.hand_owners_to(&auth).unwrap(), 0);
    }
}
