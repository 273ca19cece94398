//! The `SQLite` engine: one connection behind a mutex, statements from rusqlite's cache.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::types::{ToSqlOutput, ValueRef as SqliteValue};
use rusqlite::{Connection, ToSql, TransactionBehavior};

use crate::value::{Param, Row, ValueRef};
use crate::{Backend, Conn, DbError};

/// How many prepared statements each connection keeps.
const STATEMENT_CACHE: usize = 128;

pub(crate) struct SqliteDb {
    connection: Mutex<Connection>,
}

impl SqliteDb {
    pub(crate) fn open(path: &Path) -> Result<Self, DbError> {
        Ok(Self::from_connection(streetlevel_sqlite::open(path)?))
    }

    pub(crate) fn in_memory() -> Result<Self, DbError> {
        Ok(Self::from_connection(Connection::open_in_memory()?))
    }

    pub(crate) fn from_connection(connection: Connection) -> Self {
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Self {
            connection: Mutex::new(connection),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn with_connection<R>(&self, work: impl FnOnce(&mut Connection) -> R) -> R {
        work(&mut self.lock())
    }

    pub(crate) fn read<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let connection = self.lock();
        work(&mut SqliteConn(&connection))
    }

    pub(crate) fn snapshot<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.transaction(TransactionBehavior::Deferred, work)
    }

    pub(crate) fn write<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.transaction(TransactionBehavior::Immediate, work)
    }

    fn transaction<R, E: From<DbError>>(
        &self,
        behavior: TransactionBehavior,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut connection = self.lock();
        let transaction = connection
            .transaction_with_behavior(behavior)
            .map_err(DbError::from)?;
        let result = work(&mut SqliteConn(&transaction))?;
        transaction.commit().map_err(DbError::from)?;
        Ok(result)
    }
}

/// A [`Conn`] over a rusqlite connection or transaction (which dereferences to its
/// connection), for code that opens a `SQLite` file itself (a second reader, a tool).
pub struct SqliteConn<'a>(pub &'a Connection);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Null => SqliteValue::Null,
            Param::Int(number) => SqliteValue::Integer(number),
            Param::Real(number) => SqliteValue::Real(number),
            Param::Text(text) => SqliteValue::Text(text.as_bytes()),
            Param::Blob(bytes) => SqliteValue::Blob(bytes),
        }))
    }
}

struct SqliteRow<'a, 'b>(&'a rusqlite::Row<'b>);

impl Row for SqliteRow<'_, '_> {
    fn value(&self, index: usize) -> Result<ValueRef<'_>, DbError> {
        let value = self.0.get_ref(index).map_err(|error| DbError::Column {
            index,
            message: error.to_string(),
        })?;
        Ok(match value {
            SqliteValue::Null => ValueRef::Null,
            SqliteValue::Integer(number) => ValueRef::Int(number),
            SqliteValue::Real(number) => ValueRef::Real(number),
            SqliteValue::Text(bytes) => {
                ValueRef::Text(std::str::from_utf8(bytes).map_err(|error| DbError::Column {
                    index,
                    message: format!("text is not UTF-8: {error}"),
                })?)
            }
            SqliteValue::Blob(bytes) => ValueRef::Blob(bytes),
        })
    }
}

impl Conn for SqliteConn<'_> {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<usize, DbError> {
        let mut statement = self.0.prepare_cached(sql)?;
        Ok(statement.execute(rusqlite::params_from_iter(params))?)
    }

    fn execute_batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.0.execute_batch(sql)?)
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let mut statement = self.0.prepare_cached(sql)?;
        let mut rows = statement.query(rusqlite::params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            each(&SqliteRow(row))?;
        }
        Ok(())
    }
}
