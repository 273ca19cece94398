#![doc = include_str!("../README.md")]

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod clock;
mod migrate;
mod notify;
mod postgres;
mod sqlite;
pub mod sqlite_file;
mod testing;
mod tls;
mod value;

pub use migrate::{MigrationError, Migrations};
pub use notify::Notifications;
pub use sqlite::SqliteConn;
pub use testing::test_postgres_database;
pub use tls::SslMode;
/// The `?N` to `$N` rewriting, public for its fuzz target (`fuzz/`).
pub use value::dollar_placeholders;
pub use value::{FromValue, Param, Row, ValueRef, id_from_sql, id_to_sql};

/// Which engine a [`Database`] runs on, for the few statements that must differ (schema DDL,
/// upserts a crate prefers to write twice rather than bend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default: one file in the data directory.
    Sqlite,
    /// A PostgreSQL server (with PostGIS for the store's geometries), shared by replicas.
    Postgres,
}

/// Where the data lives: the data directory's `SQLite` file, or a PostgreSQL URL.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// The `SQLite` file at this path.
    Sqlite(PathBuf),
    /// A `postgres://` URL (it may carry a password: [`fmt::Debug`] leaves it out).
    Postgres(String),
}

impl Location {
    /// The backend this location needs.
    #[must_use]
    pub fn backend(&self) -> Backend {
        match self {
            Location::Sqlite(_) => Backend::Sqlite,
            Location::Postgres(_) => Backend::Postgres,
        }
    }

    /// Whether `text` is a PostgreSQL URL (`postgres://` or `postgresql://`).
    #[must_use]
    pub fn is_postgres_url(text: &str) -> bool {
        text.starts_with("postgres://") || text.starts_with("postgresql://")
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => formatter.debug_tuple("Sqlite").field(path).finish(),
            Location::Postgres(url) => formatter
                .debug_tuple("Postgres")
                .field(&redact(url))
                .finish(),
        }
    }
}

/// A URL with any password replaced by `***`, for logs and errors.
#[must_use]
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Why a database call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// `SQLite` failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL answered with an error, or the connection to it broke.
    #[error("postgres: {}", postgres_message(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// No connection to PostgreSQL could be made; the server may be restarting.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A column was missing or of another type than the code reads.
    #[error("column {index}: {message}")]
    Column {
        /// The column's index.
        index: usize,
        /// What was wrong.
        message: String,
    },
    /// A statement that cannot run on this backend as written (a programming error).
    #[error("statement: {0}")]
    Statement(String),
    /// A caller's row callback stopped the iteration with its own error (see
    /// [`Conn::for_each`]); never seen by callers of the helpers.
    #[error("stopped by the caller")]
    Stopped,
}

/// tokio-postgres says only "db error" for a server's error: its code and message are in
/// the source, which logs need.
pub(crate) fn postgres_message(error: &tokio_postgres::Error) -> String {
    if let Some(server) = error.as_db_error() {
        return format!("{} ({})", server.message(), server.code().code());
    }
    // Its own message names the step ("error performing TLS handshake"); the causes say why
    // ("invalid peer certificate: UnknownIssuer").
    let mut message = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(reason) = cause {
        message.push_str(": ");
        message.push_str(&reason.to_string());
        cause = reason.source();
    }
    message
}

impl DbError {
    /// Whether a `UNIQUE` or primary-key constraint refused the write.
    #[must_use]
    pub fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => matches!(
                error.extended_code,
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            ),
            DbError::Postgres(error) => {
                error.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
            }
            _ => false,
        }
    }

    /// Whether a constraint of any kind (unique, foreign key, not null, check) refused it.
    #[must_use]
    pub fn is_constraint_violation(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => {
                error.code == rusqlite::ErrorCode::ConstraintViolation
            }
            DbError::Postgres(error) => error
                .code()
                .is_some_and(|code| code.code().starts_with("23")),
            _ => false,
        }
    }

    /// Whether the database could not be reached, the connection broke, or another writer's
    /// lock was not released in time, so that a retry later may succeed (an HTTP layer answers
    /// 503, not 500). A statement the server refuses for what it says is not.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        match self {
            DbError::Unavailable(_) => true,
            DbError::Postgres(error) => {
                error.is_closed()
                    || match error.code() {
                        // Class 08 (connection exception), 57P (shutting down, starting up)
                        // and 55P03 (lock_timeout, as SQLite's busy timeout).
                        Some(code) => {
                            let code = code.code();
                            code.starts_with("08") || code.starts_with("57P") || code == "55P03"
                        }
                        // No answer from the server: reading or writing the socket failed.
                        // Errors of our own making (a parameter that does not convert) carry
                        // no I/O error.
                        None => std::error::Error::source(error)
                            .is_some_and(<dyn std::error::Error>::is::<std::io::Error>),
                    }
            }
            DbError::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => {
                error.code == rusqlite::ErrorCode::DatabaseBusy
            }
            _ => false,
        }
    }
}

/// One connection (or transaction) on either backend. Statements are written once, with
/// `?1`, `?2`, … placeholders, in the SQL both engines share; the backend adapts placeholders
/// and parameter types. Statements are prepared once per connection and cached.
pub trait Conn {
    /// The engine behind this connection.
    fn backend(&self) -> Backend;

    /// Runs one statement and returns how many rows it changed.
    ///
    /// # Errors
    ///
    /// The engine's error.
    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<usize, DbError>;

    /// Runs statements separated by `;`, without parameters (schema changes).
    ///
    /// # Errors
    ///
    /// The engine's error.
    fn execute_batch(&mut self, sql: &str) -> Result<(), DbError>;

    /// Runs a query and calls `each` for every row, in order, without collecting them (the
    /// store loads millions of rows through this). `each` returning an error stops the query
    /// and the error is returned.
    ///
    /// # Errors
    ///
    /// The engine's error, or the first error of `each`.
    fn for_each(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), DbError>,
    ) -> Result<(), DbError>;
}

impl dyn Conn + '_ {
    /// The rows of a query, each turned into a `T` by `map`, which may fail with the caller's
    /// own error type.
    ///
    /// # Errors
    ///
    /// The engine's error, or the first error of `map`.
    pub fn query_map<T, E: From<DbError>>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        mut map: impl FnMut(&dyn Row) -> Result<T, E>,
    ) -> Result<Vec<T>, E> {
        let mut out = Vec::new();
        self.each(sql, params, |row| -> Result<(), E> {
            out.push(map(row)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// Runs a query and calls `each` for every row, in order, without collecting them, with
    /// the caller's own error type: the first error of `each` stops the query and is returned
    /// as it was.
    ///
    /// # Errors
    ///
    /// The engine's error, or the first error of `each`.
    pub fn each<E: From<DbError>>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        mut each: impl FnMut(&dyn Row) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut failed = None;
        let result = self.for_each(sql, params, &mut |row| {
            each(row).map_err(|error| {
                failed = Some(error);
                DbError::Stopped
            })
        });
        match failed {
            Some(error) => Err(error),
            None => result.map_err(E::from),
        }
    }

    /// The first row of a query turned into a `T`, or `None` when it has none.
    ///
    /// # Errors
    ///
    /// The engine's error, or the error of `map`.
    pub fn query_row<T, E: From<DbError>>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        map: impl FnOnce(&dyn Row) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        let mut map = Some(map);
        let mut found = None;
        let mut failed = None;
        let result = self.for_each(sql, params, &mut |row| {
            if let Some(map) = map.take() {
                match map(row) {
                    Ok(value) => found = Some(value),
                    Err(error) => {
                        failed = Some(error);
                        return Err(DbError::Stopped);
                    }
                }
            }
            Ok(())
        });
        match (result, failed) {
            (_, Some(error)) => Err(error),
            (Err(error), None) => Err(error.into()),
            (Ok(()), None) => Ok(found),
        }
    }

    /// The first column of the first row, or `None` when there is no row.
    ///
    /// # Errors
    ///
    /// The engine's error, or [`DbError::Column`] when it does not convert to `T`.
    pub fn query_value<T: FromValue>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<T>, DbError> {
        self.query_row(sql, params, |row| row.get(0))
    }
}

/// How many connections to PostgreSQL a [`Database`] holds, and how long a caller waits for
/// one when they are all in use before it gets [`DbError::Unavailable`] (a 503 with
/// `Retry-After` over HTTP). The `SQLite` file's handle keeps a few connections of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// The most connections open at once (at least 1).
    pub max_connections: usize,
    /// The longest a caller waits for a connection to come free.
    pub wait: Duration,
}

impl Default for PoolOptions {
    /// 16 connections (one handle serves every crate of a process), a wait of 3 s.
    fn default() -> Self {
        PoolOptions {
            max_connections: 16,
            wait: Duration::from_secs(3),
        }
    }
}

enum Engine {
    Sqlite(sqlite::SqliteDb),
    Postgres(Box<postgres::PgDb>),
}

struct Shared {
    engine: Engine,
    location: Location,
}

/// The handle to a database: thread-safe, and cloned (each clone the same handle, with the same
/// connections) into every crate of the process that keeps tables there, so that a process
/// holds one pool, however many crates it runs. Reads run on a connection in autocommit;
/// writes run in [`Database::write`]'s one transaction, which excludes every other writer
/// (`SQLite`: `BEGIN IMMEDIATE`; PostgreSQL: a transaction-scoped advisory lock all streetlevel
/// processes take), so code that reads then writes behaves the same on both engines and on any
/// number of replicas.
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

impl fmt::Debug for Database {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Database")
            .field("location", &self.shared.location)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Opens `location` with the default [`PoolOptions`] (see [`Database::open_with`]).
    ///
    /// # Errors
    ///
    /// See [`Database::open_with`].
    pub fn open(location: &Location) -> Result<Self, DbError> {
        Self::open_with(location, PoolOptions::default())
    }

    /// Opens `location`: the `SQLite` file (created if needed, WAL, busy timeout; see
    /// [`sqlite_file::open`]) or a pool of connections to PostgreSQL, with TLS as the
    /// URL's `sslmode` says ([`SslMode`]), after checking that the server's PostgreSQL and
    /// PostGIS are recent enough. A process opens one and clones it into every crate.
    ///
    /// # Errors
    ///
    /// The engine's error; [`DbError::Unavailable`] when PostgreSQL cannot be reached, its
    /// certificate is refused, or its versions are too old (the message says which).
    pub fn open_with(location: &Location, options: PoolOptions) -> Result<Self, DbError> {
        let engine = match location {
            Location::Sqlite(path) => Engine::Sqlite(sqlite::SqliteDb::open(path)?),
            Location::Postgres(url) => {
                Engine::Postgres(Box::new(postgres::PgDb::connect(url, options)?))
            }
        };
        Ok(Self::new(engine, location.clone()))
    }

    fn new(engine: Engine, location: Location) -> Self {
        Self {
            shared: Arc::new(Shared { engine, location }),
        }
    }

    /// Whether `other` is this very handle (a clone of it), not another one to the same place.
    #[must_use]
    pub fn is_same_handle(&self, other: &Database) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// A `SQLite` database in memory, for tests.
    ///
    /// # Errors
    ///
    /// `SQLite`'s error.
    pub fn open_in_memory() -> Result<Self, DbError> {
        Ok(Self::new(
            Engine::Sqlite(sqlite::SqliteDb::in_memory()?),
            Location::Sqlite(PathBuf::from(":memory:")),
        ))
    }

    /// Wraps an open `SQLite` connection (tests that prepare a file by hand), with the
    /// settings every connection gets (foreign keys on, `synchronous = NORMAL`).
    ///
    /// # Errors
    ///
    /// `SQLite`'s error of applying them.
    pub fn from_sqlite(connection: rusqlite::Connection) -> Result<Self, DbError> {
        Ok(Self::new(
            Engine::Sqlite(sqlite::SqliteDb::from_connection(connection)?),
            Location::Sqlite(PathBuf::from(":memory:")),
        ))
    }

    /// The engine.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.shared.location.backend()
    }

    /// Where the database is.
    #[must_use]
    pub fn location(&self) -> &Location {
        &self.shared.location
    }

    /// Runs reads: `work` on a connection in autocommit mode, where each statement sees the
    /// newest committed data. Only reads: on `SQLite` a statement that would write is refused
    /// ([`DbError::Statement`]) before it runs, so a write under this name fails in the tests
    /// (which run on `SQLite`); writes go through [`Database::autocommit`] or
    /// [`Database::write`].
    ///
    /// # Errors
    ///
    /// The error of `work`, or [`DbError`] when no connection could be had.
    pub fn read<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        match self.engine() {
            Engine::Sqlite(db) => db.read(work),
            Engine::Postgres(db) => db.read(work),
        }
    }

    /// Runs `work` on a connection in autocommit mode, where each statement commits by
    /// itself: for a write that is one statement (a row inserted, updated or deleted on its
    /// own), which needs neither a transaction nor the exclusion of [`Database::write`], and
    /// for statements that cannot run in a transaction (`CREATE DATABASE`).
    ///
    /// # Errors
    ///
    /// The error of `work`, or [`DbError`] when no connection could be had.
    pub fn autocommit<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        match self.engine() {
            Engine::Sqlite(db) => db.autocommit(work),
            Engine::Postgres(db) => db.autocommit(work),
        }
    }

    /// Runs `work` in one read transaction: every statement sees one snapshot. Only reads (a
    /// write is refused: PostgreSQL's transaction is `READ ONLY`, and `SQLite` checks every
    /// statement as [`Database::read`] does).
    ///
    /// # Errors
    ///
    /// The error of `work`, or [`DbError`].
    pub fn snapshot<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        match self.engine() {
            Engine::Sqlite(db) => db.snapshot(work),
            Engine::Postgres(db) => db.snapshot(work),
        }
    }

    /// Runs `work` in one write transaction that excludes every other writer of this
    /// database, from this process or another; commits when `work` succeeds and rolls back
    /// when it fails, so a failed write changes nothing.
    ///
    /// # Errors
    ///
    /// The error of `work`, or [`DbError`] (the commit included).
    pub fn write<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        match self.engine() {
            Engine::Sqlite(db) => db.write(work),
            Engine::Postgres(db) => db.write(work),
        }
    }

    /// Whether a write transaction can begin within `patience` (a readiness probe): begins one
    /// and rolls it back. On `SQLite` `patience` is this attempt's busy timeout; on PostgreSQL
    /// the wait is the server's `lock_timeout`, and a connection that cannot be had within the
    /// pool's wait fails.
    ///
    /// # Errors
    ///
    /// [`DbError`]: the lock was not had in time, or no connection could be had.
    pub fn check_writable(&self, patience: Duration) -> Result<(), DbError> {
        match self.engine() {
            Engine::Sqlite(db) => db.check_writable(patience),
            Engine::Postgres(db) => db.write(|_| Ok(())),
        }
    }

    /// Brings the tables of `prefix` to the newest version (see [`Migrations`]).
    ///
    /// # Errors
    ///
    /// [`MigrationError`].
    pub fn migrate(&self, prefix: &str, migrations: &Migrations<'_>) -> Result<(), MigrationError> {
        migrate::migrate(self, prefix, migrations)
    }

    /// The schema version of `prefix`'s tables, `None` when they were never migrated.
    ///
    /// # Errors
    ///
    /// [`MigrationError`].
    pub fn schema_version(&self, prefix: &str) -> Result<Option<i64>, MigrationError> {
        migrate::schema_version(self, prefix)
    }

    /// Wakes a follower when another process writes: PostgreSQL's `LISTEN` on `channel`
    /// (writers call `pg_notify` in their transaction, see [`Database::notify`]); on `SQLite`, a
    /// timer, since other processes cannot signal.
    ///
    /// # Errors
    ///
    /// [`DbError`] when the listening connection cannot be made.
    pub fn notifications(&self, channel: &str) -> Result<Notifications, DbError> {
        match self.engine() {
            Engine::Sqlite(_) => Ok(Notifications::polling()),
            Engine::Postgres(db) => db.listen(channel),
        }
    }

    /// Within a write transaction, tells every [`Database::notifications`] listener of
    /// `channel` (delivered when the transaction commits; nothing on `SQLite`).
    ///
    /// # Errors
    ///
    /// The engine's error.
    pub fn notify(connection: &mut dyn Conn, channel: &str) -> Result<(), DbError> {
        if connection.backend() == Backend::Postgres {
            connection.execute("SELECT pg_notify(?1, '')", params![channel])?;
        }
        Ok(())
    }

    /// One of the `SQLite` connections' own handle, for what only `SQLite` has (the online
    /// backup, a busy timeout of its own); `None` on PostgreSQL.
    ///
    /// # Errors
    ///
    /// [`DbError::Unavailable`] when no connection could be had.
    pub fn with_sqlite<R>(
        &self,
        work: impl FnOnce(&mut rusqlite::Connection) -> R,
    ) -> Result<Option<R>, DbError> {
        match self.engine() {
            Engine::Sqlite(db) => db.with_connection(work).map(Some),
            Engine::Postgres(_) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_password_in_logs() {
        assert_eq!(
            redact("postgres://sl:secret@db.example:5432/streetlevel"),
            "postgres://sl:***@db.example:5432/streetlevel"
        );
        assert_eq!(redact("postgres://sl@db/x"), "postgres://sl@db/x");
        assert_eq!(
            format!("{:?}", Location::Postgres("postgres://a:b@h/d".into())),
            "Postgres(\"postgres://a:***@h/d\")"
        );
    }

    fn round_trip(database: &Database) {
        database
            .write(|connection| {
                connection.execute_batch(
                    "CREATE TABLE IF NOT EXISTS demo_things (id BIGINT PRIMARY KEY, name TEXT, \
                     weight DOUBLE PRECISION, data BYTEA)",
                )?;
                connection.execute(
                    "INSERT INTO demo_things (id, name, weight, data) VALUES (?1, ?2, ?3, ?4)",
                    params![1_i64, "one", 1.5_f64, &[1_u8, 2][..]],
                )?;
                connection.execute(
                    "INSERT INTO demo_things (id, name, weight, data) VALUES (?1, ?2, ?3, ?4)",
                    params![2_i64, None::<&str>, None::<f64>, None::<&[u8]>],
                )?;
                Ok::<_, DbError>(())
            })
            .unwrap();
        let rows = database
            .read(|connection| {
                connection.query_map(
                    "SELECT id, name, weight, data FROM demo_things ORDER BY id",
                    params![],
                    |row| {
                        Ok::<_, DbError>((
                            row.get::<i64>(0)?,
                            row.get::<Option<String>>(1)?,
                            row.get::<Option<f64>>(2)?,
                            row.get::<Option<Vec<u8>>>(3)?,
                        ))
                    },
                )
            })
            .unwrap();
        assert_eq!(
            rows,
            [
                (1, Some("one".to_owned()), Some(1.5), Some(vec![1, 2])),
                (2, None, None, None)
            ]
        );
        let failed: Result<(), DbError> = database.write(|connection| {
            connection.execute("DELETE FROM demo_things", params![])?;
            connection.execute(
                "INSERT INTO demo_things (id) VALUES (?1), (?1)",
                params![7_i64],
            )?;
            Ok(())
        });
        assert!(failed.unwrap_err().is_unique_violation());
        let count: Option<i64> = database
            .read(|connection| {
                connection.query_value("SELECT COUNT(*) FROM demo_things", params![])
            })
            .unwrap();
        assert_eq!(count, Some(2), "a failed write changes nothing");
        crate::clock::tests::database_clock_is_the_hosts_to_a_second(database);
    }

    /// A write run as a read is refused before it runs, on `SQLite` (where every test runs),
    /// so a misnamed call fails in the tests; the same write runs through `autocommit`.
    #[test]
    fn a_write_in_a_read_is_refused_and_changes_nothing() {
        let database = Database::open_in_memory().unwrap();
        database
            .write(|connection| {
                connection.execute_batch("CREATE TABLE demo_rows (id BIGINT PRIMARY KEY)")
            })
            .unwrap();
        let insert = "INSERT INTO demo_rows (id) VALUES (?1)";
        let refused = database
            .read(|connection| connection.execute(insert, params![1_i64]))
            .unwrap_err();
        assert!(
            refused.to_string().contains("Database::autocommit"),
            "{refused}"
        );
        let returning = database.snapshot(|connection| {
            connection.query_value::<i64>(
                "INSERT INTO demo_rows (id) VALUES (2) RETURNING id",
                params![],
            )
        });
        assert!(
            matches!(returning, Err(DbError::Statement(_))),
            "{returning:?}"
        );
        assert!(
            database
                .read(|connection| connection.execute_batch("DELETE FROM demo_rows"))
                .is_err()
        );
        let count = |database: &Database| -> Option<i64> {
            database
                .read(|connection| {
                    connection.query_value("SELECT COUNT(*) FROM demo_rows", params![])
                })
                .unwrap()
        };
        assert_eq!(count(&database), Some(0));
        assert_eq!(
            database
                .autocommit(|connection| connection.execute(insert, params![3_i64]))
                .unwrap(),
            1
        );
        assert_eq!(count(&database), Some(1));
    }

    /// Every `u64` ID is stored and read back bit for bit, also above `i64::MAX`, and the
    /// database orders and compares it as the `i64` it is kept as.
    #[test]
    fn ids_round_trip_bit_for_bit() {
        let database = Database::open_in_memory().unwrap();
        let ids = [0_u64, 1, 1 << 62, i64::MAX as u64, 1 << 63, u64::MAX];
        database
            .write(|connection| {
                connection.execute_batch("CREATE TABLE demo_ids (id BIGINT PRIMARY KEY)")?;
                for id in ids {
                    connection.execute("INSERT INTO demo_ids (id) VALUES (?1)", params![id])?;
                }
                Ok::<_, DbError>(())
            })
            .unwrap();
        let mut read: Vec<u64> = database
            .read(|connection| {
                connection.query_map("SELECT id FROM demo_ids", params![], |row| row.get(0))
            })
            .unwrap();
        read.sort_unstable();
        assert_eq!(read, ids);
        assert_eq!(id_to_sql(u64::MAX), -1);
        assert_eq!(id_from_sql(-1), u64::MAX);
        let found: Option<i64> = database
            .read(|connection| {
                connection.query_value(
                    "SELECT COUNT(*) FROM demo_ids WHERE id = ?1",
                    params![1_u64 << 63],
                )
            })
            .unwrap();
        assert_eq!(found, Some(1));
    }

    #[test]
    fn sqlite_reads_what_it_wrote_and_rolls_back_a_failed_write() {
        round_trip(&Database::open_in_memory().unwrap());
    }

    #[test]
    fn postgres_reads_what_it_wrote_and_rolls_back_a_failed_write() {
        let Some(location) = crate::test_postgres_database("round_trip") else {
            return;
        };
        let database = Database::open(&location).unwrap();
        round_trip(&database);
    }
}
