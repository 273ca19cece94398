//! The PostgreSQL engine: `tokio-postgres` connections whose I/O runs on a small private
//! runtime, so that the synchronous callers of [`crate::Database`] (request handlers on
//! the async workers as well as plain threads) wait on a channel, never on a runtime of their
//! own (`postgres`, the synchronous client, panics when called inside one).
//!
//! Connections are pooled (at most [`MAX_CONNECTIONS`] per database handle); a connection that
//! broke (PostgreSQL restarted) is dropped and the next call opens a new one, so a restarted
//! server is picked up without restarting streetlevel.

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::StreamExt;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::value::{Param, Row, ValueRef, dollar_placeholders};
use crate::{Backend, Conn, DbError, Notifications};

/// The most connections one handle opens; callers beyond wait for one to come back.
pub(crate) const MAX_CONNECTIONS: usize = 6;

/// How long connecting may take before the database counts as unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write waits for another writer's lock, as `SQLite`'s busy timeout.
const LOCK_TIMEOUT_MS: u64 = 5_000;

/// The advisory lock every streetlevel write transaction takes ("STREETLV" in ASCII), so
/// that writers exclude each other as they do on `SQLite`.
const WRITE_LOCK: i64 = 0x5354_5245_4554_4C56;

/// A tokio runtime that may be dropped anywhere (a plain drop blocks, which panics on an
/// async worker).
pub(crate) struct PgRuntime(Option<tokio::runtime::Runtime>);

impl PgRuntime {
    fn new() -> Result<Self, DbError> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("streetlevel-postgres")
            .enable_all()
            .build()
            .map(|runtime| Self(Some(runtime)))
            .map_err(|error| DbError::Unavailable(format!("no runtime for PostgreSQL: {error}")))
    }

    /// Runs `future` on the private runtime and waits for it from any thread.
    pub(crate) fn run<F>(&self, future: F) -> Result<F::Output, DbError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = self
            .0
            .as_ref()
            .ok_or_else(|| DbError::Unavailable("shut down".into()))?;
        futures_executor::block_on(runtime.spawn(future))
            .map_err(|error| DbError::Unavailable(format!("PostgreSQL task failed: {error}")))
    }
}

impl Drop for PgRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Opens one connection; its I/O task runs on `runtime` until the client is dropped or the
/// server goes away.
pub(crate) fn connect(runtime: &PgRuntime, config: &Config) -> Result<Client, DbError> {
    let config = config.clone();
    runtime.run(async move {
        let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
            .await
            .map_err(|_| DbError::Unavailable("connecting to PostgreSQL timed out".into()))?
            .map_err(|error| DbError::Unavailable(error.to_string()))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "PostgreSQL connection closed");
            }
        });
        Ok::<_, DbError>(client)
    })?
}

pub(crate) fn parse_config(url: &str) -> Result<Config, DbError> {
    let mut config = Config::from_str(url)
        .map_err(|error| DbError::Unavailable(format!("bad PostgreSQL URL: {error}")))?;
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .application_name("streetlevel")
        .options(format!(
            "-c lock_timeout={LOCK_TIMEOUT_MS} -c idle_in_transaction_session_timeout=30000"
        ));
    Ok(config)
}

struct PgConn {
    client: Client,
    statements: HashMap<String, Statement>,
}

struct Pool {
    idle: Vec<PgConn>,
    open: usize,
}

pub(crate) struct PgDb {
    config: Config,
    runtime: Arc<PgRuntime>,
    pool: Mutex<Pool>,
    returned: Condvar,
}

impl PgDb {
    pub(crate) fn connect(url: &str) -> Result<Self, DbError> {
        let config = parse_config(url)?;
        let runtime = Arc::new(PgRuntime::new()?);
        let first = connect(&runtime, &config)?;
        Ok(Self {
            config,
            runtime,
            pool: Mutex::new(Pool {
                idle: vec![PgConn {
                    client: first,
                    statements: HashMap::new(),
                }],
                open: 1,
            }),
            returned: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) -> Result<PgConn, DbError> {
        let mut pool = self.lock();
        loop {
            while let Some(connection) = pool.idle.pop() {
                if !connection.client.is_closed() {
                    return Ok(connection);
                }
                pool.open -= 1;
            }
            if pool.open < MAX_CONNECTIONS {
                pool.open += 1;
                drop(pool);
                return match connect(&self.runtime, &self.config) {
                    Ok(client) => Ok(PgConn {
                        client,
                        statements: HashMap::new(),
                    }),
                    Err(error) => {
                        self.lock().open -= 1;
                        self.returned.notify_one();
                        Err(error)
                    }
                };
            }
            pool = self
                .returned
                .wait_timeout(pool, CONNECT_TIMEOUT)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn give_back(&self, connection: PgConn, healthy: bool) {
        let mut pool = self.lock();
        if healthy && !connection.client.is_closed() {
            pool.idle.push(connection);
        } else {
            pool.open -= 1;
        }
        drop(pool);
        self.returned.notify_one();
    }

    fn with<R, E: From<DbError>>(
        &self,
        begin: Option<&str>,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut connection = self.take()?;
        if let Some(begin) = begin
            && let Err(error) = connection.batch(begin)
        {
            self.give_back(connection, false);
            return Err(error.into());
        }
        let result = work(&mut connection);
        let healthy = match (&result, begin) {
            (_, None) => true,
            (Ok(_), Some(_)) => match connection.batch("COMMIT") {
                Ok(()) => true,
                Err(error) => {
                    self.give_back(connection, false);
                    return Err(error.into());
                }
            },
            (Err(_), Some(_)) => connection.batch("ROLLBACK").is_ok(),
        };
        self.give_back(connection, healthy);
        result
    }

    pub(crate) fn read<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with(None, work)
    }

    pub(crate) fn snapshot<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with(
            Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            work,
        )
    }

    pub(crate) fn write<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with(
            Some(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
            )),
            work,
        )
    }

    pub(crate) fn listen(&self, channel: &str) -> Result<Notifications, DbError> {
        Notifications::listen(Arc::clone(&self.runtime), self.config.clone(), channel)
    }
}

impl PgConn {
    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(futures_executor::block_on(self.client.batch_execute(sql))?)
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, DbError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let translated = dollar_placeholders(sql)?;
        let statement = futures_executor::block_on(self.client.prepare(&translated))?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

impl Conn for PgConn {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<usize, DbError> {
        let statement = self.statement(sql)?;
        let changed =
            futures_executor::block_on(self.client.execute_raw(&statement, params.iter()))?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    fn execute_batch(&mut self, sql: &str) -> Result<(), DbError> {
        self.batch(sql)
    }

    fn for_each(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let statement = self.statement(sql)?;
        let rows = futures_executor::block_on(self.client.query_raw(&statement, params.iter()))?;
        let mut rows = std::pin::pin!(rows);
        while let Some(row) = futures_executor::block_on(rows.next()) {
            each(&PgRow(&row?))?;
        }
        Ok(())
    }
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Param::Null => Ok(IsNull::Yes),
            Param::Int(number) => match *ty {
                Type::INT8 => number.to_sql(ty, out),
                Type::INT4 => i32::try_from(number)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(number)?.to_sql(ty, out),
                Type::BOOL => (number != 0).to_sql(ty, out),
                #[allow(clippy::cast_precision_loss)]
                Type::FLOAT8 => (number as f64).to_sql(ty, out),
                _ => Err(format!("an integer parameter where {ty} is wanted").into()),
            },
            Param::Real(number) => match *ty {
                Type::FLOAT8 => number.to_sql(ty, out),
                #[allow(clippy::cast_possible_truncation)]
                Type::FLOAT4 => (number as f32).to_sql(ty, out),
                _ => Err(format!("a real parameter where {ty} is wanted").into()),
            },
            Param::Text(text) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    text.to_sql(&Type::TEXT, out)
                }
                _ => Err(format!("a text parameter where {ty} is wanted").into()),
            },
            Param::Blob(bytes) => match *ty {
                Type::BYTEA => bytes.to_sql(ty, out),
                _ => Err(format!("a blob parameter where {ty} is wanted").into()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

struct PgRow<'a>(&'a tokio_postgres::Row);

impl Row for PgRow<'_> {
    fn value(&self, index: usize) -> Result<ValueRef<'_>, DbError> {
        let row = self.0;
        let column = row.columns().get(index).ok_or_else(|| DbError::Column {
            index,
            message: "no such column".into(),
        })?;
        let wrong = |error: tokio_postgres::Error| DbError::Column {
            index,
            message: error.to_string(),
        };
        let ty = column.type_();
        let value = match *ty {
            Type::INT8 => row
                .try_get::<_, Option<i64>>(index)
                .map_err(wrong)?
                .map(ValueRef::Int),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(index)
                .map_err(wrong)?
                .map(|number| ValueRef::Int(i64::from(number))),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(index)
                .map_err(wrong)?
                .map(|number| ValueRef::Int(i64::from(number))),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(index)
                .map_err(wrong)?
                .map(|flag| ValueRef::Int(i64::from(flag))),
            Type::FLOAT8 => row
                .try_get::<_, Option<f64>>(index)
                .map_err(wrong)?
                .map(ValueRef::Real),
            Type::FLOAT4 => row
                .try_get::<_, Option<f32>>(index)
                .map_err(wrong)?
                .map(|number| ValueRef::Real(f64::from(number))),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => row
                .try_get::<_, Option<&str>>(index)
                .map_err(wrong)?
                .map(ValueRef::Text),
            Type::BYTEA => row
                .try_get::<_, Option<&[u8]>>(index)
                .map_err(wrong)?
                .map(ValueRef::Blob),
            _ => {
                return Err(DbError::Column {
                    index,
                    message: format!(
                        "type {ty} is none of the five the seam reads: cast it in the SQL"
                    ),
                });
            }
        };
        Ok(value.unwrap_or(ValueRef::Null))
    }
}
