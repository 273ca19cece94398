#![doc = include_str!("../README.md")]

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior};

mod backup;

pub use backup::{backup, integrity_problems, open_file_alone};

/// How long a connection waits for another one's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens (creating if needed) the database file every crate shares: [`BUSY_TIMEOUT`] for
/// locks, and write-ahead logging, so readers never wait for a writer.
///
/// Switching a new file to WAL needs the file to itself, and `SQLite` answers "database is
/// locked" at once instead of waiting when another connection holds it (processes starting
/// at the same moment on a new data directory): that switch is retried until
/// [`BUSY_TIMEOUT`] has passed.
///
/// # Errors
///
/// The `SQLite` error of opening the file or of setting it up.
pub fn open(path: &Path) -> Result<Connection, rusqlite::Error> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let started = Instant::now();
    loop {
        match connection.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == ErrorCode::DatabaseBusy && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            result => return result.map(|()| connection),
        }
    }
}

/// Why a schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationError {
    /// The database was written by a newer build that knows more migrations.
    #[error("{prefix} schema version {found} is newer than the supported version {supported}")]
    SchemaTooNew {
        /// The table prefix, e.g. `store`.
        prefix: String,
        /// The version found in `<prefix>_schema_version`.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The prefix is not a plain identifier (a programming error of the caller).
    #[error("schema prefix {0:?} is not made of ASCII letters, digits and underscores")]
    InvalidPrefix(String),
    /// `SQLite` failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Brings the tables of `prefix` to the newest version: migration `n` (1-based) takes the
/// schema from version `n - 1` to `n`. The version check and all missing steps run in one
/// immediate transaction, so two processes opening the same database cannot both migrate,
/// and a failing step leaves the schema as it was.
///
/// # Errors
///
/// [`MigrationError::SchemaTooNew`] when the database holds a newer version than
/// `migrations.len()`, and [`MigrationError::Sqlite`] when a statement fails.
pub fn migrate(
    connection: &mut Connection,
    prefix: &str,
    migrations: &[&str],
) -> Result<(), MigrationError> {
    let table = version_table(prefix)?;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (version INTEGER NOT NULL)"
    ))?;
    let found = read_version(&transaction, &table)?.unwrap_or(0);
    let supported = i64::try_from(migrations.len()).unwrap_or(i64::MAX);
    if found > supported {
        return Err(MigrationError::SchemaTooNew {
            prefix: prefix.to_owned(),
            found,
            supported,
        });
    }
    for migration in migrations.iter().skip(usize::try_from(found).unwrap_or(0)) {
        transaction.execute_batch(migration)?;
    }
    transaction.execute(&format!("DELETE FROM {table}"), [])?;
    transaction.execute(
        &format!("INSERT INTO {table} (version) VALUES (?1)"),
        [supported],
    )?;
    transaction.commit()?;
    Ok(())
}

/// The schema version of `prefix`'s tables, `None` when they were never migrated.
///
/// # Errors
///
/// [`MigrationError::Sqlite`] when the query fails.
pub fn schema_version(
    connection: &Connection,
    prefix: &str,
) -> Result<Option<i64>, MigrationError> {
    let table = version_table(prefix)?;
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [&table],
        |row| row.get(0),
    )?;
    if !exists {
        return Ok(None);
    }
    read_version(connection, &table)
}

fn read_version(connection: &Connection, table: &str) -> Result<Option<i64>, MigrationError> {
    Ok(connection
        .query_row(&format!("SELECT MAX(version) FROM {table}"), [], |row| {
            row.get::<_, Option<i64>>(0)
        })
        .optional()?
        .flatten())
}

fn version_table(prefix: &str) -> Result<String, MigrationError> {
    let plain = !prefix.is_empty()
        && prefix
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
    if plain {
        Ok(format!("{prefix}_schema_version"))
    } else {
        Err(MigrationError::InvalidPrefix(prefix.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "CREATE TABLE t_a (id INTEGER PRIMARY KEY)";
    const V2: &str = "ALTER TABLE t_a ADD COLUMN name TEXT";

    fn columns(connection: &Connection) -> Vec<String> {
        let mut statement = connection
            .prepare("SELECT name FROM pragma_table_info('t_a')")
            .unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn applies_only_the_missing_steps() {
        let mut connection = Connection::open_in_memory().unwrap();
        assert_eq!(schema_version(&connection, "t").unwrap(), None);
        migrate(&mut connection, "t", &[V1]).unwrap();
        assert_eq!(schema_version(&connection, "t").unwrap(), Some(1));
        assert_eq!(columns(&connection), ["id"]);
        // Running V1 again would fail ("table already exists"): only V2 may run.
        migrate(&mut connection, "t", &[V1, V2]).unwrap();
        assert_eq!(schema_version(&connection, "t").unwrap(), Some(2));
        assert_eq!(columns(&connection), ["id", "name"]);
        migrate(&mut connection, "t", &[V1, V2]).unwrap();
        assert_eq!(schema_version(&connection, "t").unwrap(), Some(2));
    }

    #[test]
    fn refuses_a_newer_schema_and_changes_nothing() {
        let mut connection = Connection::open_in_memory().unwrap();
        migrate(&mut connection, "t", &[V1, V2]).unwrap();
        let error = migrate(&mut connection, "t", &[V1]).unwrap_err();
        assert!(
            matches!(
                error,
                MigrationError::SchemaTooNew {
                    found: 2,
                    supported: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "t schema version 2 is newer than the supported version 1"
        );
        assert_eq!(schema_version(&connection, "t").unwrap(), Some(2));
    }

    #[test]
    fn a_failing_step_rolls_back_every_step_of_the_run() {
        let mut connection = Connection::open_in_memory().unwrap();
        let error = migrate(&mut connection, "t", &[V1, "THIS IS NOT SQL"]).unwrap_err();
        assert!(matches!(error, MigrationError::Sqlite(_)), "{error:?}");
        assert_eq!(schema_version(&connection, "t").unwrap(), None);
        let tables: i64 = connection
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 't_a'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0);
    }

    #[test]
    fn prefixes_are_kept_apart() {
        let mut connection = Connection::open_in_memory().unwrap();
        migrate(&mut connection, "t", &[V1]).unwrap();
        migrate(
            &mut connection,
            "u",
            &["CREATE TABLE u_b (id INTEGER)", "SELECT 1"],
        )
        .unwrap();
        assert_eq!(schema_version(&connection, "t").unwrap(), Some(1));
        assert_eq!(schema_version(&connection, "u").unwrap(), Some(2));
    }

    /// Connections opening a new file at the same moment all get it in WAL mode (the switch
    /// failed with "database is locked" in about one run in seven before it was retried).
    #[test]
    fn a_new_file_opened_at_once_from_many_threads_is_wal_for_all() {
        let directory =
            std::env::temp_dir().join(format!("streetlevel-sqlite-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("shared.sqlite");
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        let connection = open(&path)?;
                        connection
                            .query_row("PRAGMA journal_mode", [], |row| row.get::<_, String>(0))
                    })
                })
                .collect();
            for opener in openers {
                assert_eq!(opener.join().unwrap().unwrap(), "wal");
            }
        });
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn rejects_a_prefix_that_is_not_an_identifier() {
        let mut connection = Connection::open_in_memory().unwrap();
        for prefix in ["", "a b", "x; DROP TABLE y", "é"] {
            let error = migrate(&mut connection, prefix, &[V1]).unwrap_err();
            assert!(
                matches!(error, MigrationError::InvalidPrefix(_)),
                "{prefix:?}: {error:?}"
            );
        }
    }
}
