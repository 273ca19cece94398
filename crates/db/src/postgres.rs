//! The PostgreSQL engine: one `deadpool-postgres` pool of `tokio-postgres` connections (TLS
//! with rustls as the URL's `sslmode` asks, see `tls.rs`) whose I/O runs on a small private
//! runtime, so that the synchronous callers of [`crate::Database`] (request handlers on the
//! async workers as well as plain threads) wait on a channel, never on a runtime of their own
//! (`postgres`, the synchronous client, panics when called inside one).
//!
//! The pool holds at most [`crate::PoolOptions::max_connections`]; a caller that finds them all
//! leased waits at most [`crate::PoolOptions::wait`] and then gets [`DbError::Unavailable`] (an
//! HTTP layer answers 503 with `Retry-After`). A connection that broke (PostgreSQL restarted)
//! is dropped when it comes back, or found closed when it is next taken, and a new one is
//! made, so a restarted server is picked up without restarting streetlevel.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use deadpool::managed::TimeoutType;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use futures_util::StreamExt;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::tls::{self, TlsSettings};
use crate::value::{Param, Row, ValueRef, dollar_placeholders};
use crate::{Backend, Conn, DbError, Notifications, PoolOptions, params};

/// How long connecting may take before the database counts as unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write waits for another writer's lock, as `SQLite`'s busy timeout.
const LOCK_TIMEOUT_MS: u64 = 5_000;

/// The advisory lock every streetlevel write transaction takes ("STREETLV" in ASCII), so
/// that writers exclude each other as they do on `SQLite`.
const WRITE_LOCK: i64 = 0x5354_5245_4554_4C56;

/// The oldest PostgreSQL the schema runs on: generated columns came with 12.
const MIN_SERVER_VERSION: i64 = 120_000;

/// The oldest PostGIS the store's geometries are tested with.
const MIN_POSTGIS: (u32, u32) = (3, 0);

/// A tokio runtime that may be dropped anywhere (a plain drop blocks, which panics on an
/// async worker).
pub(crate) struct PgRuntime(Option<tokio::runtime::Runtime>);

impl PgRuntime {
    fn new() -> Result<Self, DbError> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
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

/// The connection settings of `url` (without the TLS options, which [`tls::split_url`] takes
/// out), with streetlevel's session settings.
fn parse_config(url: &str, tls: &TlsSettings) -> Result<Config, DbError> {
    let mut config = Config::from_str(url)
        .map_err(|error| DbError::Unavailable(format!("bad PostgreSQL URL: {error}")))?;
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .application_name("streetlevel")
        .ssl_mode(tls.pg_mode())
        .options(format!(
            "-c lock_timeout={LOCK_TIMEOUT_MS} -c idle_in_transaction_session_timeout=30000"
        ));
    Ok(config)
}

pub(crate) struct PgDb {
    config: Config,
    tls: MakeRustlsConnect,
    runtime: Arc<PgRuntime>,
    pool: Pool,
    options: PoolOptions,
}

impl PgDb {
    /// Makes the pool, takes its first connection (so an unreachable server or a refused
    /// certificate is reported here) and checks the server's versions.
    pub(crate) fn connect(url: &str, options: PoolOptions) -> Result<Self, DbError> {
        let (url, tls_settings) = tls::split_url(url)?;
        let config = parse_config(&url, &tls_settings)?;
        let tls = tls_settings.connector()?;
        let runtime = Arc::new(PgRuntime::new()?);
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.wait))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|error| DbError::Unavailable(format!("no PostgreSQL pool: {error}")))?;
        let database = Self {
            config,
            tls,
            runtime,
            pool,
            options,
        };
        let (server, postgis) = database.read(|connection| {
            let server: Option<i64> = connection.query_value(
                "SELECT CAST(current_setting('server_version_num') AS BIGINT)",
                params![],
            )?;
            let postgis: Option<String> = connection.query_value(
                "SELECT COALESCE((SELECT extversion FROM pg_extension WHERE extname = 'postgis'), \
                 (SELECT default_version FROM pg_available_extensions WHERE name = 'postgis'))",
                params![],
            )?;
            Ok::<_, DbError>((server.unwrap_or(0), postgis))
        })?;
        check_versions(server, postgis.as_deref())?;
        tracing::debug!(server, postgis, tls = ?tls_settings.mode, "PostgreSQL connected");
        Ok(database)
    }

    fn take(&self) -> Result<PgConn, DbError> {
        let pool = self.pool.clone();
        let object = self
            .runtime
            .run(async move { pool.get().await })?
            .map_err(|error| self.unavailable(error))?;
        Ok(PgConn(object))
    }

    fn unavailable(&self, error: PoolError) -> DbError {
        DbError::Unavailable(match error {
            PoolError::Timeout(TimeoutType::Wait) => format!(
                "all {} connections to PostgreSQL are in use and none came free within {} ms",
                self.options.max_connections,
                self.options.wait.as_millis()
            ),
            PoolError::Timeout(TimeoutType::Create | TimeoutType::Recycle) => {
                "connecting to PostgreSQL timed out".into()
            }
            PoolError::Backend(error) => crate::postgres_message(&error),
            other => other.to_string(),
        })
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
            connection.discard();
            return Err(error.into());
        }
        let result = work(&mut connection);
        match (&result, begin) {
            (_, None) => {}
            (Ok(_), Some(_)) => {
                if let Err(error) = connection.batch("COMMIT") {
                    connection.discard();
                    return Err(error.into());
                }
            }
            (Err(_), Some(_)) => {
                if connection.batch("ROLLBACK").is_err() {
                    connection.discard();
                }
            }
        }
        result
    }

    pub(crate) fn read<R, E: From<DbError>>(
        &self,
        work: impl FnOnce(&mut dyn Conn) -> Result<R, E>,
    ) -> Result<R, E> {
        self.with(None, work)
    }

    pub(crate) fn autocommit<R, E: From<DbError>>(
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
        Notifications::listen(
            Arc::clone(&self.runtime),
            self.config.clone(),
            self.tls.clone(),
            channel,
        )
    }
}

/// Refuses a server older than the schema needs, or one without PostGIS, saying what to do.
fn check_versions(server: i64, postgis: Option<&str>) -> Result<(), DbError> {
    if server < MIN_SERVER_VERSION {
        return Err(DbError::Unavailable(format!(
            "PostgreSQL {}.{} is too old: streetlevel needs PostgreSQL {} or newer",
            server / 10_000,
            server % 10_000,
            MIN_SERVER_VERSION / 10_000
        )));
    }
    let Some(postgis) = postgis else {
        return Err(DbError::Unavailable(format!(
            "PostgreSQL {} has no PostGIS: install PostGIS {}.{} or newer on the server \
             (Debian: postgresql-{}-postgis-3)",
            server / 10_000,
            MIN_POSTGIS.0,
            MIN_POSTGIS.1,
            server / 10_000
        )));
    };
    let mut parts = postgis
        .split(|character: char| !character.is_ascii_digit())
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < MIN_POSTGIS {
        return Err(DbError::Unavailable(format!(
            "PostGIS {postgis} is too old: streetlevel needs PostGIS {}.{} or newer",
            MIN_POSTGIS.0, MIN_POSTGIS.1
        )));
    }
    Ok(())
}

/// A pooled connection; dropped, it goes back to the pool.
struct PgConn(Object);

impl PgConn {
    /// Closes the connection instead of handing it back (its transaction's state is unknown).
    fn discard(self) {
        drop(Object::take(self.0));
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(futures_executor::block_on(self.0.batch_execute(sql))?)
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, DbError> {
        let translated = dollar_placeholders(sql)?;
        Ok(futures_executor::block_on(
            self.0.prepare_cached(&translated),
        )?)
    }
}

impl Conn for PgConn {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<usize, DbError> {
        let statement = self.statement(sql)?;
        let changed = futures_executor::block_on(self.0.execute_raw(&statement, params.iter()))?;
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
        let rows = futures_executor::block_on(self.0.query_raw(&statement, params.iter()))?;
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
                #[allow(clippy::cast_precision_loss)] // the nearest f64, as PostgreSQL's own cast
                Type::FLOAT8 => (number as f64).to_sql(ty, out),
                _ => Err(format!("an integer parameter where {ty} is wanted").into()),
            },
            Param::Real(number) => match *ty {
                Type::FLOAT8 => number.to_sql(ty, out),
                #[allow(clippy::cast_possible_truncation)] // the nearest f32, as PostgreSQL's cast
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_servers_and_missing_postgis_are_refused_with_what_to_do() {
        assert!(check_versions(150_004, Some("3.3.4")).is_ok());
        assert!(check_versions(120_000, Some("3.0.0")).is_ok());
        let old = check_versions(110_022, Some("3.1"))
            .unwrap_err()
            .to_string();
        assert!(old.contains("PostgreSQL 11.22 is too old"), "{old}");
        let missing = check_versions(150_004, None).unwrap_err().to_string();
        assert!(missing.contains("no PostGIS"), "{missing}");
        assert!(missing.contains("postgresql-15-postgis-3"), "{missing}");
        let postgis = check_versions(150_004, Some("2.5.5"))
            .unwrap_err()
            .to_string();
        assert!(postgis.contains("PostGIS 2.5.5 is too old"), "{postgis}");
    }
}
