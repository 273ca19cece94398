//! The `SQLite` engine: a few connections to the file (an unmanaged `deadpool` pool), so that
//! readers run at once as write-ahead logging allows while one writer writes; statements from
//! rusqlite's cache.

use std::path::Path;
use std::sync::{Condvar, Mutex, PoisonError};

use deadpool::unmanaged::{Object, Pool};
use rusqlite::types::{ToSqlOutput, ValueRef as SqliteValue};
use rusqlite::{Connection, ToSql, TransactionBehavior};

use crate::value::{Param, Row, ValueRef};
use crate::{Backend, Conn, DbError};

/// How many prepared statements each connection keeps.
const STATEMENT_CACHE: usize = 128;

/// How many connections a file's handle opens: the process's one handle serves every crate,
/// and a reader must not wait for another crate's write transaction.
const FILE_CONNECTIONS: usize = 4;

pub(crate) struct SqliteDb {
    pool: Pool<Connection>,
    /// Writers of this process take turns here, in arrival order, rather than in `SQLite`'s
    /// busy handler, which polls; one that waits longer than the busy timeout goes on to
    /// `SQLite`, which decides (so a nested write fails as before instead of waiting for ever).
    writing: Mutex<bool>,
    written: Condvar,
}

impl SqliteDb {
    pub(crate) fn open(path: &Path) -> Result<Self, DbError> {
        let mut connections = Vec::with_capacity(FILE_CONNECTIONS);
        for _ in 0..FILE_CONNECTIONS {
            connections.push(crate::sqlite_file::open(path)?);
        }
        Self::from_connections(connections)
    }

    pub(crate) fn in_memory() -> Result<Self, DbError> {
        Self::from_connections(vec![Connection::open_in_memory()?])
    }

    pub(crate) fn from_connection(connection: Connection) -> Result<Self, DbError> {
        Self::from_connections(vec![connection])
    }

    /// Every connection gets the same settings: foreign keys enforced (the auth tables have
    /// them) and `synchronous = NORMAL` (durable in WAL mode but for the last commits before a
    /// power loss; the store's imports need the speed).
    fn from_connections(connections: Vec<Connection>) -> Result<Self, DbError> {
        let pool = Pool::new(connections.len());
        for connection in connections {
            connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
            connection.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL")?;
            pool.try_add(connection)
                .map_err(|(_, error)| DbError::Unavailable(format!("SQLite pool: {error}")))?;
        }
        Ok(Self {
            pool,
            writing: Mutex::new(false),
            written: Condvar::new(),
        })
    }

    fn take(&self) -> Result<Object<Connection>, DbError> {
        futures_executor::block_on(self.pool.get())
            .map_err(|error| DbError::Unavailable(format!("SQLite pool: {error}")))
    }

    pub(crate) fn with_connection<R>(
        &self,
        work: impl FnOnce(&mut Connection) -> R,
    ) -> Result<R, DbError> {
        Ok(work(&mut *self.take()?))
    }

    pub(crate) fn read<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let connection = self.take()?;
        work(&mut SqliteConn::reading(&connection))
    }

    pub(crate) fn autocommit<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let connection = self.take()?;
        work(&mut SqliteConn::new(&connection))
    }

    pub(crate) fn snapshot<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.transaction(TransactionBehavior::Deferred, true, work)
    }

    pub(crate) fn write<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let _turn = self.wait_for_turn().then_some(Turn(self));
        self.transaction(TransactionBehavior::Immediate, false, work)
    }

    /// Begins a write transaction within `patience` (this attempt's busy timeout) and rolls
    /// it back.
    pub(crate) fn check_writable(&self, patience: std::time::Duration) -> Result<(), DbError> {
        self.with_connection(|connection| {
            connection.busy_timeout(patience)?;
            let result = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .and_then(rusqlite::Transaction::rollback);
            connection.busy_timeout(crate::sqlite_file::BUSY_TIMEOUT)?;
            result
        })?
        .map_err(DbError::from)
    }

    /// Waits until no other writer of this process writes, at most the busy timeout; whether
    /// this writer now has the turn (and must give it back: [`Turn`]).
    fn wait_for_turn(&self) -> bool {
        let writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut writing, waited) = self
            .written
            .wait_timeout_while(writing, crate::sqlite_file::BUSY_TIMEOUT, |writing| {
                *writing
            })
            .unwrap_or_else(PoisonError::into_inner);
        if waited.timed_out() {
            return false;
        }
        *writing = true;
        true
    }

    fn transaction<R, E: From<DbError>>(
        &self,
        behavior: TransactionBehavior,
        read_only: bool,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut connection = self.take()?;
        let transaction = connection
            .transaction_with_behavior(behavior)
            .map_err(DbError::from)?;
        let result = work(&mut SqliteConn {
            connection: &transaction,
            read_only,
        })?;
        transaction.commit().map_err(DbError::from)?;
        Ok(result)
    }
}

/// A writer's turn, given back when it ends (also when its work panicked).
struct Turn<'a>(&'a SqliteDb);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self
            .0
            .writing
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = false;
        self.0.written.notify_one();
    }
}

/// A [`Conn`] over a rusqlite connection or transaction (which dereferences to its
/// connection), for code that opens a `SQLite` file itself (a second reader, a tool).
pub struct SqliteConn<'a> {
    connection: &'a Connection,
    /// Opened by a read ([`crate::Database::read`], [`crate::Database::snapshot`]): a
    /// statement that would write is refused before it runs.
    read_only: bool,
}

impl<'a> SqliteConn<'a> {
    /// A connection (or transaction) that may read and write.
    #[must_use]
    pub fn new(connection: &'a Connection) -> Self {
        Self {
            connection,
            read_only: false,
        }
    }

    /// A connection that may only read: `SQLite` says of every prepared statement whether it
    /// writes (`sqlite3_stmt_readonly`), so a write under a read's name fails at once
    /// instead of running.
    pub(crate) fn reading(connection: &'a Connection) -> Self {
        Self {
            connection,
            read_only: true,
        }
    }

    fn check(&self, statement: &rusqlite::Statement<'_>, sql: &str) -> Result<(), DbError> {
        if self.read_only && !statement.readonly() {
            return Err(writes_in_a_read(sql));
        }
        Ok(())
    }
}

/// The error of a statement that writes, run where only reads may run.
fn writes_in_a_read(sql: &str) -> DbError {
    let start: String = sql.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
    DbError::Statement(format!(
        "`{start}` writes, in a read: run it through Database::autocommit or Database::write"
    ))
}

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
        let mut statement = self.connection.prepare_cached(sql)?;
        self.check(&statement, sql)?;
        Ok(statement.execute(rusqlite::params_from_iter(params))?)
    }

    fn execute_batch(&mut self, sql: &str) -> Result<(), DbError> {
        // A batch is schema work or a transaction's own statements: never a read's.
        if self.read_only {
            return Err(writes_in_a_read(sql));
        }
        Ok(self.connection.execute_batch(sql)?)
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let mut statement = self.connection.prepare_cached(sql)?;
        self.check(&statement, sql)?;
        let mut rows = statement.query(rusqlite::params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            each(&SqliteRow(row))?;
        }
        Ok(())
    }
}
