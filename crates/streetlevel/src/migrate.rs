//! `streetlevel migrate --from DIR --to postgres://…`: copies a data directory's `SQLite`
//! tables (store, auth, web, import, sfm) into an empty PostgreSQL database, in one transaction, so
//! a data set made on one machine can be served by replicas.
//!
//! Both sides are first brought to the newest schema by opening them as `serve` would, so the
//! copy is a plain column-by-column transfer of the tables both hold. The files stay in the
//! data directory (`media/`, `uploads/`): replicas share them on a shared file system.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use streetlevel_auth::{AuthStore, Config as AuthConfig, OsRandom};
use streetlevel_db::{Conn, Database, DbError, Location, Param, Row, ValueRef, params};
use streetlevel_import::Uploads;
use streetlevel_model::SystemClock;
use streetlevel_store::Store;
use streetlevel_web::Registry;

use crate::data_lock::lock_data_dir;

/// The prefixes of the tables that move: every crate's.
const PREFIXES: [&str; 5] = ["store_", "auth_", "web_", "import_", "sfm_"];

/// The most parameters one PostgreSQL statement may carry.
const MAX_PARAMETERS: usize = 65_535;

/// `streetlevel migrate` arguments.
#[derive(clap::Args)]
pub struct MigrateArgs {
    /// The data directory whose `SQLite` database to copy (no server may be running on it).
    #[arg(long)]
    from: PathBuf,
    /// The PostgreSQL database to copy into (with PostGIS); it must hold no streetlevel rows.
    #[arg(long, env = "STREETLEVEL_DATABASE_URL", hide_env_values = true)]
    to: String,
}

/// One value read from `SQLite`, kept until its batch is written.
enum Owned {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Owned {
    fn read(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Owned::Null,
            ValueRef::Int(number) => Owned::Int(number),
            ValueRef::Real(number) => Owned::Real(number),
            ValueRef::Text(text) => Owned::Text(text.to_owned()),
            ValueRef::Blob(bytes) => Owned::Blob(bytes.to_vec()),
        }
    }

    fn param(&self) -> Param<'_> {
        match self {
            Owned::Null => Param::Null,
            Owned::Int(number) => Param::Int(*number),
            Owned::Real(number) => Param::Real(*number),
            Owned::Text(text) => Param::Text(text),
            Owned::Blob(bytes) => Param::Blob(bytes),
        }
    }
}

/// Runs `streetlevel migrate`.
///
/// # Errors
///
/// A target that is not PostgreSQL or not empty, a source a server is running on, or a
/// failure of either database (then nothing was written to the target).
pub fn run(args: &MigrateArgs) -> anyhow::Result<()> {
    if !Location::is_postgres_url(&args.to) {
        anyhow::bail!(
            "--to {:?} is not a postgres:// URL",
            streetlevel_db::redact(&args.to)
        );
    }
    let shown = streetlevel_db::redact(&args.to);
    let database = Store::database_path(&args.from);
    if !database.is_file() {
        anyhow::bail!("{} holds no streetlevel database", args.from.display());
    }
    let _lock = lock_data_dir(&args.from, ": stop it before migrating")?;
    let started = Instant::now();
    let target_location = Location::Postgres(args.to.clone());
    // Both sides at the newest schema, and the web surface's old owners handed to auth.
    {
        let source = Location::Sqlite(database.clone());
        let auth = AuthStore::open_location(&source, AuthConfig::default(), SystemClock, OsRandom)
            .context("cannot open the source's auth tables")?;
        Registry::open_location(&source)
            .and_then(|registry| registry.hand_owners_to(&auth).map(drop))
            .context("cannot open the source's web tables")?;
        Store::open(&args.from).context("cannot open the source's store")?;
        AuthStore::open_location(
            &target_location,
            AuthConfig::default(),
            SystemClock,
            OsRandom,
        )
        .with_context(|| format!("cannot create the auth tables in {shown}"))?;
        Registry::open_location(&target_location)
            .with_context(|| format!("cannot create the web tables in {shown}"))?;
        Store::open_location(&target_location)
            .with_context(|| format!("cannot create the store's tables in {shown}"))?;
        let limits = streetlevel_import::UploadLimits::default();
        Uploads::open(&args.from, limits).context("cannot open the source's upload tables")?;
        Uploads::open_location(&args.from, &target_location, limits)
            .with_context(|| format!("cannot create the upload tables in {shown}"))?;
        let source_database = Database::open(&Location::Sqlite(database.clone()))?;
        streetlevel_sfm::migrate(&source_database)
            .context("cannot open the source's reconstruction tables")?;
        streetlevel_sfm::migrate(&Database::open(&target_location)?)
            .with_context(|| format!("cannot create the reconstruction tables in {shown}"))?;
    }
    let source = Database::open(&Location::Sqlite(database))?;
    let target = Database::open(&target_location)?;
    let tables = source_tables(&source)?;
    let copied = target.write(|to| -> anyhow::Result<Vec<(String, u64)>> {
        for table in &tables {
            let rows: Option<i64> =
                to.query_value(&format!("SELECT COUNT(*) FROM {table}"), params![])?;
            if rows.unwrap_or(0) > 0 {
                anyhow::bail!(
                    "{shown} is not empty ({table} holds {} rows): migrate into a new database",
                    rows.unwrap_or(0)
                );
            }
        }
        let mut copied = Vec::new();
        for table in &tables {
            let identities = identity_columns(to, table)?;
            let count = copy_table(&source, to, table, !identities.is_empty())?;
            reset_identities(to, table, &identities)?;
            copied.push((table.clone(), count));
        }
        Ok(copied)
    })?;
    let rows: u64 = copied.iter().map(|(_, count)| count).sum();
    let mut out = std::io::stdout().lock();
    for (table, count) in &copied {
        writeln!(out, "{table}: {count}")?;
    }
    writeln!(
        out,
        "copied {rows} rows of {} tables into {shown} in {:.1} s",
        copied.len(),
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// The source's tables that move, in the order they were created (so a table comes after
/// those its foreign keys name).
fn source_tables(source: &Database) -> Result<Vec<String>, DbError> {
    let names: Vec<String> = source.read(|connection| {
        connection.query_map(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid",
            params![],
            |row| row.get::<String>(0),
        )
    })?;
    Ok(names
        .into_iter()
        .filter(|name| PREFIXES.iter().any(|prefix| name.starts_with(prefix)))
        .filter(|name| !name.ends_with("_schema_version"))
        .collect())
}

/// Copies every row of `table`, in batches as large as PostgreSQL takes; returns how many.
fn copy_table(
    source: &Database,
    to: &mut dyn Conn,
    table: &str,
    has_identity: bool,
) -> anyhow::Result<u64> {
    let columns: Vec<String> = source.read(|connection| {
        connection.query_map(
            &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
            params![],
            |row| row.get::<String>(0),
        )
    })?;
    let wanted: Vec<String> = to.query_map(
        "SELECT column_name::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = ?1 AND is_generated = 'NEVER'",
        params![table],
        |row| row.get::<String>(0),
    )?;
    if let Some(missing) = columns.iter().find(|column| !wanted.contains(column)) {
        anyhow::bail!("the target's {table} has no column {missing}: is it the same version?");
    }
    let per_batch = (MAX_PARAMETERS / columns.len().max(1)).clamp(1, 1_000);
    let list = columns.join(", ");
    let mut batch: Vec<Owned> = Vec::with_capacity(per_batch * columns.len());
    let mut count = 0_u64;
    let flush = |to: &mut dyn Conn, batch: &mut Vec<Owned>| -> Result<(), DbError> {
        let rows = batch.len() / columns.len();
        if rows == 0 {
            return Ok(());
        }
        let mut sql = insert_statement(table, &list, columns.len(), rows);
        if has_identity {
            // The copied numbers, not new ones, even where PostgreSQL numbers ALWAYS.
            sql = sql.replacen(" VALUES ", " OVERRIDING SYSTEM VALUE VALUES ", 1);
        }
        let params: Vec<Param<'_>> = batch.iter().map(Owned::param).collect();
        to.execute(&sql, &params)?;
        batch.clear();
        Ok(())
    };
    source.read(|from| {
        from.for_each(
            &format!("SELECT {list} FROM {table}"),
            params![],
            &mut |row: &dyn Row| {
                for index in 0..columns.len() {
                    batch.push(Owned::read(row.value(index)?));
                }
                count += 1;
                if batch.len() >= per_batch * columns.len() {
                    flush(&mut *to, &mut batch)?;
                }
                Ok(())
            },
        )
    })?;
    flush(to, &mut batch)?;
    Ok(count)
}

/// `INSERT INTO table (list) VALUES (?1, …), (…)` for `rows` rows of `width` columns.
fn insert_statement(table: &str, list: &str, width: usize, rows: usize) -> String {
    let mut sql = format!("INSERT INTO {table} ({list}) VALUES ");
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..width {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push('?');
            sql.push_str(&(row * width + column + 1).to_string());
        }
        sql.push(')');
    }
    sql
}

/// The columns of `table` PostgreSQL numbers itself.
fn identity_columns(to: &mut dyn Conn, table: &str) -> Result<Vec<String>, DbError> {
    to.query_map(
        "SELECT column_name::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = ?1 AND is_identity = 'YES'",
        params![table],
        |row| row.get::<String>(0),
    )
}

/// Moves each identity column's sequence past the copied values, so the next row PostgreSQL
/// numbers does not collide with one copied.
fn reset_identities(to: &mut dyn Conn, table: &str, identities: &[String]) -> Result<(), DbError> {
    for column in identities {
        to.execute(
            &format!(
                "SELECT setval(pg_get_serial_sequence(?1, ?2), \
                 COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
            ),
            params![table, column],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::insert_statement;

    #[test]
    fn a_batch_numbers_its_parameters_row_after_row() {
        assert_eq!(
            insert_statement("t", "a, b", 2, 2),
            "INSERT INTO t (a, b) VALUES (?1, ?2), (?3, ?4)"
        );
    }
}
