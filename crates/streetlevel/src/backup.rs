//! `streetlevel backup` and `streetlevel restore`: a consistent copy of a data directory's
//! database taken while the server runs, and its installation into a data directory no server
//! holds. Media files, upload sessions and `media.key` are files the operator copies (see
//! docs/DEPLOY.md): originals are written before the database rows that name them, so a copy
//! of `media/` made after the backup holds every image the backup knows.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use streetlevel_store::DATABASE_FILE;

/// `streetlevel backup` arguments.
#[derive(clap::Args)]
pub struct BackupArgs {
    /// The data directory whose database to copy (a server may be running on it).
    #[arg(long)]
    data: PathBuf,
    /// The backup file to write (a single `SQLite` file).
    #[arg(long)]
    out: PathBuf,
    /// Replace `--out` if it exists.
    #[arg(long)]
    force: bool,
}

/// `streetlevel restore` arguments.
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The backup file made by `streetlevel backup`.
    #[arg(long)]
    from: PathBuf,
    /// The data directory to install it into (created if missing); no server may be running
    /// on it.
    #[arg(long)]
    data: PathBuf,
    /// Replace the database the data directory already holds (it is kept next to it as
    /// `streetlevel.sqlite.replaced-<unix time>`).
    #[arg(long)]
    force: bool,
}

pub fn run_backup(args: &BackupArgs) -> anyhow::Result<()> {
    let database = args.data.join(DATABASE_FILE);
    if !database.is_file() {
        anyhow::bail!("{} holds no {DATABASE_FILE}", args.data.display());
    }
    if args.out.exists() && !args.force {
        anyhow::bail!(
            "{} exists: choose another file, or pass --force to replace it",
            args.out.display()
        );
    }
    // Written next to its final place and renamed when verified, so `--out` is never a
    // half-written or unchecked copy, even when the copy fails or the process is killed.
    let partial = with_suffix(&args.out, ".partial");
    remove_if_present(&partial)?;
    // The database holds password hashes and token digests: the copy is for its owner alone.
    create_private(&partial)?;
    let copied = streetlevel_db::sqlite_file::backup(&database, &partial).with_context(|| {
        format!(
            "cannot copy {} to {}",
            database.display(),
            partial.display()
        )
    });
    let verified = copied.and_then(|()| verify(&partial));
    if let Err(error) = verified {
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    sync(&partial)?;
    std::fs::rename(&partial, &args.out).with_context(|| {
        format!(
            "cannot rename {} to {}",
            partial.display(),
            args.out.display()
        )
    })?;
    let bytes = std::fs::metadata(&args.out).map_or(0, |metadata| metadata.len());
    writeln!(
        std::io::stdout(),
        "backed up {} to {} ({bytes} bytes, integrity checked)",
        database.display(),
        args.out.display()
    )?;
    writeln!(
        std::io::stdout(),
        "not in the backup: media/, uploads/ and media.key of {}; copy them now (docs/DEPLOY.md)",
        args.data.display()
    )?;
    Ok(())
}

pub fn run_restore(args: &RestoreArgs) -> anyhow::Result<()> {
    // Only the file is installed: writes still in a log beside it would be lost.
    let log = with_suffix(&args.from, "-wal");
    if std::fs::metadata(&log).is_ok_and(|metadata| metadata.len() > 0) {
        anyhow::bail!(
            "{} has a write-ahead log beside it ({}) whose writes the file alone lacks: restore \
             a file made by `streetlevel backup`, or copy a database only after every process \
             using it has stopped",
            args.from.display(),
            log.display()
        );
    }
    // Checked before anything in the data directory changes.
    verify(&args.from)?;
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("cannot create data directory {}", args.data.display()))?;
    // Held until the restore ends: no server can start on a half-restored directory.
    let _lock = crate::data_lock::lock_data_dir(&args.data, ": stop it before restoring")?;
    let database = args.data.join(DATABASE_FILE);
    let occupied = std::fs::metadata(&database).is_ok_and(|metadata| metadata.len() > 0);
    if occupied && !args.force {
        anyhow::bail!(
            "{} already holds a database: restore into an empty data directory, or pass --force \
             to replace it (it is kept as {DATABASE_FILE}.replaced-<unix time>)",
            args.data.display()
        );
    }
    let staging = with_suffix(&database, ".restoring");
    remove_if_present(&staging)?;
    std::fs::copy(&args.from, &staging).with_context(|| {
        format!(
            "cannot copy {} to {}",
            args.from.display(),
            staging.display()
        )
    })?;
    sync(&staging)?;
    // What is installed is the copy, so the copy is what is checked.
    if let Err(error) = verify(&staging) {
        let _ = std::fs::remove_file(&staging);
        return Err(error);
    }
    let wal = with_suffix(&database, "-wal");
    if occupied {
        // The old log moves with its database: left behind, SQLite would replay it into the
        // restored file.
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let replaced = with_suffix(&database, &format!(".replaced-{seconds}"));
        std::fs::rename(&database, &replaced)
            .with_context(|| format!("cannot move {} aside", database.display()))?;
        if wal.exists() {
            std::fs::rename(&wal, with_suffix(&replaced, "-wal"))
                .with_context(|| format!("cannot move {} aside", wal.display()))?;
        }
        writeln!(
            std::io::stdout(),
            "the replaced database is kept as {}",
            replaced.display()
        )?;
    } else {
        remove_if_present(&wal)?;
    }
    remove_if_present(&with_suffix(&database, "-shm"))?;
    std::fs::rename(&staging, &database)
        .with_context(|| format!("cannot install {}", database.display()))?;
    sync_directory(&args.data);
    writeln!(
        std::io::stdout(),
        "restored {} into {} (integrity checked); copy media/ and media.key back if they are \
         not there (docs/DEPLOY.md)",
        args.from.display(),
        database.display()
    )?;
    Ok(())
}

/// Refuses a file that fails `PRAGMA integrity_check` or is not a streetlevel database.
fn verify(path: &Path) -> anyhow::Result<()> {
    if !path.is_file() {
        anyhow::bail!("{} is not a file", path.display());
    }
    let problems = match streetlevel_db::sqlite_file::integrity_problems(path) {
        Ok(problems) => problems,
        Err(error) => {
            return Err(error)
                .with_context(|| format!("{} is not a readable SQLite database", path.display()));
        }
    };
    if let Some(first) = problems.first() {
        anyhow::bail!(
            "{} fails PRAGMA integrity_check ({} problems, the first: {first})",
            path.display(),
            problems.len()
        );
    }
    let connection = streetlevel_db::sqlite_file::open_file_alone(path)
        .with_context(|| format!("cannot open {}", path.display()))?;

    let version = streetlevel_db::Database::from_sqlite(connection)
        .with_context(|| format!("cannot read {}", path.display()))?
        .schema_version("store")
        .with_context(|| format!("cannot read {}", path.display()))?;
    if version.is_none() {
        anyhow::bail!(
            "{} is an SQLite database but not a streetlevel one (it has no store tables)",
            path.display()
        );
    }
    Ok(())
}

/// Creates `path` empty, readable and writable by its owner only (`SQLite` takes an empty
/// file for a new database and keeps its mode).
fn create_private(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map(drop)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(error).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Flushes a file to the disk, so a rename never installs a name for bytes still in memory.
fn sync(path: &Path) -> anyhow::Result<()> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("cannot flush {} to disk", path.display()))
}

/// Flushes a directory's entries (the renames); a failure only loses durability, so it is
/// not an error.
fn sync_directory(path: &Path) {
    if let Ok(directory) = std::fs::File::open(path) {
        let _ = directory.sync_all();
    }
}
