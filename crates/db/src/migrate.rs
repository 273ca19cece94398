//! The one schema-migration runner, for both engines: each crate owns a table prefix and a
//! list of steps; `<prefix>_schema_version` holds how many ran.

use crate::{Backend, Conn, Database, DbError, params};

/// A crate's schema steps, one list per engine, step `n` of each taking the schema from
/// version `n - 1` to `n`. The two lists describe the same tables in each engine's types
/// (`SQLite`'s `INTEGER`/`REAL`/`BLOB`, PostgreSQL's `BIGINT`/`DOUBLE PRECISION`/`BYTEA`, plus
/// PostGIS columns where the store has geometries), so every other statement is written once.
#[derive(Debug, Clone, Copy)]
pub struct Migrations<'a> {
    /// The steps for `SQLite`.
    pub sqlite: &'a [&'a str],
    /// The steps for PostgreSQL; as many as for `SQLite`.
    pub postgres: &'a [&'a str],
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
    /// The prefix is not a plain identifier, or the two engines' lists differ in length (a
    /// programming error of the caller).
    #[error("migrations for {0:?} are malformed: {1}")]
    Malformed(String, &'static str),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

pub(crate) fn migrate(
    database: &Database,
    prefix: &str,
    migrations: &Migrations<'_>,
) -> Result<(), MigrationError> {
    let table = version_table(prefix)?;
    if migrations.sqlite.len() != migrations.postgres.len() {
        return Err(MigrationError::Malformed(
            prefix.to_owned(),
            "the SQLite and PostgreSQL lists differ in length",
        ));
    }
    let steps = match database.backend() {
        Backend::Sqlite => migrations.sqlite,
        Backend::Postgres => migrations.postgres,
    };
    database.write(|connection| {
        connection.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (version BIGINT NOT NULL)"
        ))?;
        let found = read_version(connection, &table)?.unwrap_or(0);
        let supported = i64::try_from(steps.len()).unwrap_or(i64::MAX);
        if found > supported {
            return Err(MigrationError::SchemaTooNew {
                prefix: prefix.to_owned(),
                found,
                supported,
            });
        }
        for step in steps.iter().skip(usize::try_from(found).unwrap_or(0)) {
            connection.execute_batch(step)?;
        }
        connection.execute(&format!("DELETE FROM {table}"), params![])?;
        connection.execute(
            &format!("INSERT INTO {table} (version) VALUES (?1)"),
            params![supported],
        )?;
        Ok(())
    })
}

pub(crate) fn schema_version(
    database: &Database,
    prefix: &str,
) -> Result<Option<i64>, MigrationError> {
    let table = version_table(prefix)?;
    database.read(|connection| {
        let exists_sql = match connection.backend() {
            Backend::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() \
                 AND tablename = ?1"
            }
        };
        let exists: Option<i64> = connection.query_value(exists_sql, params![&table])?;
        if exists.unwrap_or(0) == 0 {
            return Ok(None);
        }
        read_version(connection, &table)
    })
}

fn read_version(connection: &mut dyn Conn, table: &str) -> Result<Option<i64>, MigrationError> {
    Ok(connection
        .query_value::<Option<i64>>(&format!("SELECT MAX(version) FROM {table}"), params![])?
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
        Err(MigrationError::Malformed(
            prefix.to_owned(),
            "a prefix is ASCII letters, digits and underscores",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "CREATE TABLE t_a (id INTEGER PRIMARY KEY)";
    const V2: &str = "ALTER TABLE t_a ADD COLUMN name TEXT";

    fn columns(database: &Database) -> Vec<String> {
        database
            .read(|connection| {
                connection.query_map(
                    "SELECT name FROM pragma_table_info('t_a')",
                    params![],
                    |row| row.get::<String>(0),
                )
            })
            .unwrap()
    }

    fn both<'a>(steps: &'a [&'a str]) -> Migrations<'a> {
        Migrations {
            sqlite: steps,
            postgres: steps,
        }
    }

    #[test]
    fn applies_only_the_missing_steps() {
        let database = Database::open_in_memory().unwrap();
        assert_eq!(database.schema_version("t").unwrap(), None);
        database.migrate("t", &both(&[V1])).unwrap();
        assert_eq!(database.schema_version("t").unwrap(), Some(1));
        assert_eq!(columns(&database), ["id"]);
        // Running V1 again would fail ("table already exists"): only V2 may run.
        database.migrate("t", &both(&[V1, V2])).unwrap();
        assert_eq!(database.schema_version("t").unwrap(), Some(2));
        assert_eq!(columns(&database), ["id", "name"]);
    }

    #[test]
    fn refuses_a_newer_schema_and_changes_nothing() {
        let database = Database::open_in_memory().unwrap();
        database.migrate("t", &both(&[V1, V2])).unwrap();
        let error = database.migrate("t", &both(&[V1])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "t schema version 2 is newer than the supported version 1"
        );
        assert_eq!(database.schema_version("t").unwrap(), Some(2));
    }

    #[test]
    fn a_failing_step_rolls_back_every_step_of_the_run() {
        let database = Database::open_in_memory().unwrap();
        let error = database
            .migrate("t", &both(&[V1, "THIS IS NOT SQL"]))
            .unwrap_err();
        assert!(matches!(error, MigrationError::Db(_)), "{error:?}");
        assert_eq!(database.schema_version("t").unwrap(), None);
        let tables: Option<i64> = database
            .read(|connection| {
                connection.query_value(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name = 't_a'",
                    params![],
                )
            })
            .unwrap();
        assert_eq!(tables, Some(0));
    }

    #[test]
    fn prefixes_are_kept_apart() {
        let database = Database::open_in_memory().unwrap();
        database.migrate("t", &both(&[V1])).unwrap();
        database
            .migrate("u", &both(&["CREATE TABLE u_b (id INTEGER)", "SELECT 1"]))
            .unwrap();
        assert_eq!(database.schema_version("t").unwrap(), Some(1));
        assert_eq!(database.schema_version("u").unwrap(), Some(2));
    }

    #[test]
    fn refuses_lists_of_different_lengths_and_odd_prefixes() {
        let database = Database::open_in_memory().unwrap();
        let uneven = Migrations {
            sqlite: &[V1, V2],
            postgres: &[V1],
        };
        assert!(matches!(
            database.migrate("t", &uneven),
            Err(MigrationError::Malformed(..))
        ));
        assert!(matches!(
            database.migrate("t; DROP", &both(&[V1])),
            Err(MigrationError::Malformed(..))
        ));
        assert_eq!(database.schema_version("t").unwrap(), None);
    }
}
