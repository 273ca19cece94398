//! The key that signs media URLs: from the configuration (`media_key_hex`), else from the
//! database when it is PostgreSQL (every replica reads the same key from the table
//! `media_signing_key`, so no file needs sharing), else the data directory's `media.key`
//! (one machine, created on first start).
//!
//! A PostgreSQL database without a key takes the data directory's `media.key` when there is
//! one (media URLs handed out before keep working after the move to replicas), else a new
//! random key; replicas starting together agree on the one that is inserted first.

use std::path::Path;

use anyhow::Context as _;
use streetlevel_db::{Backend, Database, Migrations, params};

const MIGRATIONS: Migrations<'static> = Migrations {
    sqlite: &[r"
CREATE TABLE media_signing_key (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    key_hex TEXT NOT NULL
);
"],
    postgres: &[r"
CREATE TABLE media_signing_key (
    singleton BIGINT PRIMARY KEY CHECK (singleton = 1),
    key_hex TEXT NOT NULL
);
"],
};

/// The key given in the configuration as hexadecimal, `None` when none was given.
pub(crate) fn from_config(from_config: Option<&str>) -> anyhow::Result<Option<Vec<u8>>> {
    from_config
        .map(|text| hex::decode(text.trim()).context("media_key_hex is not hexadecimal"))
        .transpose()
}

/// The media signing key of a data set whose tables are `database` and whose data directory
/// is `data`, when the configuration gives none: the database's on PostgreSQL, else
/// `DATA/media.key`.
pub(crate) fn of_data_set(data: &Path, database: &Database) -> anyhow::Result<Vec<u8>> {
    match database.backend() {
        Backend::Sqlite => from_file(data),
        Backend::Postgres => from_database(data, database),
    }
}

/// The key in the table `media_signing_key`, inserted first if there is none: the data
/// directory's `media.key` when it has one, else a new random key.
fn from_database(data: &Path, database: &Database) -> anyhow::Result<Vec<u8>> {
    database
        .migrate("media_key", &MIGRATIONS)
        .context("cannot create the media signing key's table")?;
    let candidate = match read_file(&data.join("media.key"))? {
        Some(key) => key,
        None => rand::random::<[u8; 32]>().to_vec(),
    };
    let stored: Option<String> = database
        .write(|connection| {
            connection.execute(
                "INSERT INTO media_signing_key (singleton, key_hex) VALUES (1, ?1)
                 ON CONFLICT (singleton) DO NOTHING",
                params![&hex::encode(&candidate)],
            )?;
            connection.query_value::<String>(
                "SELECT key_hex FROM media_signing_key WHERE singleton = 1",
                params![],
            )
        })
        .context("cannot read the media signing key from the database")?;
    let stored = stored.context("the database has no media signing key")?;
    hex::decode(stored.trim()).context("the database's media signing key is not hexadecimal")
}

/// `DATA/media.key`, created with a new random key on first start.
fn from_file(data: &Path) -> anyhow::Result<Vec<u8>> {
    let path = data.join("media.key");
    if let Some(key) = read_file(&path)? {
        return Ok(key);
    }
    let key: [u8; 32] = rand::random();
    write_private(&path, hex::encode(key).as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(key.to_vec())
}

/// The key in the file `path`, `None` when there is no such file.
fn read_file(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read_to_string(path) {
        Ok(text) => hex::decode(text.trim())
            .map(Some)
            .with_context(|| format!("{} is not hexadecimal", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes a secret readable by its owner only (mode 0600 on Unix).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}
