//! The shared `SQLite` file: how every connection to it is opened (a busy timeout, write-ahead
//! logging, the switch to WAL retried while another process holds a new file), and its online
//! backup (`streetlevel backup`: one consistent snapshot while other connections write) with
//! the integrity check of a file read alone. Schema migrations are not here: they are
//! [`crate::Migrations`], one runner for both engines.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, ErrorCode, OpenFlags};

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

/// Copies the database at `source` into a new file at `out`: one snapshot of the source, as
/// of the moment the copy started, whatever other connections write meanwhile. The copy is a
/// single self-contained file (rollback journal, not WAL), so it can be moved and opened
/// read-only. `out` must not exist; `source` must.
///
/// The whole copy is one backup step: in WAL mode a reader never blocks a writer, so the
/// server keeps writing while it runs, and a copy in many small steps would restart on
/// every write of another connection and might never finish under a steady stream of them.
///
/// # Errors
///
/// The `SQLite` error of opening either file or of copying (a missing source is
/// `SQLITE_CANTOPEN`).
pub fn backup(source: &Path, out: &Path) -> Result<(), rusqlite::Error> {
    let source = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    source.busy_timeout(BUSY_TIMEOUT)?;
    let mut copy = Connection::open_with_flags(
        out,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    copy.busy_timeout(BUSY_TIMEOUT)?;
    copy_all(&source, &mut copy)?;
    copy.pragma_update(None, "journal_mode", "DELETE")?;
    copy.close().map_err(|(_, error)| error)
}

/// Copies every page of `from` into `to` in one step, retrying while a lock is in the way
/// (the busy handler has already waited [`BUSY_TIMEOUT`] each time).
fn copy_all(from: &Connection, to: &mut Connection) -> Result<(), rusqlite::Error> {
    let backup = Backup::new(from, to)?;
    let mut attempts = 0;
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::Busy | StepResult::Locked if attempts < 3 => attempts += 1,
            // `More` cannot follow a step of every page; treat it like a lock that stays.
            _ => {
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    Some(String::from("the database stayed locked during the copy")),
                ));
            }
        }
    }
}

/// Opens the database file at `path` read-only as it is on disk, without locks and without the
/// `-wal` and `-shm` files: nothing is created beside it, and a write-ahead log beside it is not
/// read (for a file about to be copied elsewhere, the file alone is what counts).
///
/// # Errors
///
/// The `SQLite` error of opening the file; `InvalidPath` when the path is not UTF-8.
pub fn open_file_alone(path: &Path) -> Result<Connection, rusqlite::Error> {
    let text = path
        .to_str()
        .ok_or_else(|| rusqlite::Error::InvalidPath(path.to_owned()))?;
    let mut uri = String::from("file:");
    for character in text.chars() {
        match character {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            other => uri.push(other),
        }
    }
    uri.push_str("?immutable=1");
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// What `PRAGMA integrity_check` finds wrong in the database file at `path`, read as
/// [`open_file_alone`] does: empty when the file is sound; a file damaged beyond reading
/// (`SQLITE_CORRUPT`) is one problem, `SQLite`'s message.
///
/// # Errors
///
/// The `SQLite` error of opening or reading the file: a file that is not a database at all
/// is `SQLITE_NOTADB`.
pub fn integrity_problems(path: &Path) -> Result<Vec<String>, rusqlite::Error> {
    match check_integrity(path) {
        Err(error) if error.sqlite_error_code() == Some(ErrorCode::DatabaseCorrupt) => {
            Ok(vec![error.to_string()])
        }
        result => result,
    }
}

fn check_integrity(path: &Path) -> Result<Vec<String>, rusqlite::Error> {
    let connection = open_file_alone(path)?;
    let mut statement = connection.prepare("PRAGMA integrity_check")?;
    let messages = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(messages
        .into_iter()
        .filter(|message| message != "ok")
        .collect())
}

/// A second connection to a `SQLite` file that only reads, in one read transaction whose
/// snapshot its first read fixes (write-ahead logging): for a load that reads one table in
/// two halves on two cores (the store's), where a pooled connection would hold the pool.
pub struct Reader {
    connection: Connection,
}

impl Reader {
    /// Opens the file at `path` read-only, with [`BUSY_TIMEOUT`], and begins the read
    /// transaction.
    ///
    /// # Errors
    ///
    /// The `SQLite` error of opening the file or of beginning.
    pub fn open(path: &Path) -> Result<Self, crate::DbError> {
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        connection.execute_batch("BEGIN")?;
        Ok(Self { connection })
    }

    /// The connection, for reads only (a statement that would write is refused).
    #[must_use]
    pub fn conn(&self) -> crate::SqliteConn<'_> {
        crate::SqliteConn::reading(&self.connection)
    }

    /// Ends the read transaction and closes the connection.
    ///
    /// # Errors
    ///
    /// The `SQLite` error of ending or closing.
    pub fn finish(self) -> Result<(), crate::DbError> {
        self.connection.execute_batch("COMMIT")?;
        self.connection
            .close()
            .map_err(|(_, error)| crate::DbError::from(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn directory(name: &str) -> std::path::PathBuf {
        let directory = std::env::temp_dir().join(format!(
            "streetlevel-sqlite-backup-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        directory
    }

    fn count(path: &Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM t_rows", [], |row| row.get(0))
            .unwrap()
    }

    /// Rows still in the write-ahead log (never checkpointed into the main file) are in the
    /// copy, and the copy stands alone: no `-wal` file goes with it.
    #[test]
    fn the_copy_holds_what_the_log_holds_and_stands_alone() {
        let directory = directory("wal");
        let source = directory.join("source.sqlite");
        let writer = super::open(&source).unwrap();
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer
            .execute_batch("CREATE TABLE t_rows (id INTEGER PRIMARY KEY)")
            .unwrap();
        for id in 0..100 {
            writer
                .execute("INSERT INTO t_rows (id) VALUES (?1)", [id])
                .unwrap();
        }
        let out = directory.join("copy.sqlite");
        backup(&source, &out).unwrap();
        // Written after the copy: not in it.
        writer
            .execute("INSERT INTO t_rows (id) VALUES (1000)", [])
            .unwrap();
        assert!(!directory.join("copy.sqlite-wal").exists());
        assert_eq!(integrity_problems(&out).unwrap(), Vec::<String>::new());
        assert_eq!(count(&out), 100);
        assert_eq!(count(&source), 101);
        std::fs::remove_dir_all(&directory).unwrap();
    }

    /// A WAL-mode file with an odd name is read alone: nothing appears beside it.
    #[test]
    fn a_file_is_checked_alone_and_nothing_is_created_beside_it() {
        let directory = directory("alone");
        let path = directory.join("odd ?#% name.sqlite");
        let writer = super::open(&path).unwrap();
        writer
            .execute_batch("CREATE TABLE t_rows (id INTEGER PRIMARY KEY)")
            .unwrap();
        drop(writer);
        let before: Vec<_> = std::fs::read_dir(&directory).unwrap().collect();
        assert_eq!(before.len(), 1, "{before:?}");
        assert!(integrity_problems(&path).unwrap().is_empty());
        let tables: i64 = open_file_alone(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| row.get(0))
            .unwrap();
        assert_eq!(tables, 1);
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 1);
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn a_missing_source_creates_nothing() {
        let directory = directory("missing");
        let out = directory.join("copy.sqlite");
        assert!(backup(&directory.join("absent.sqlite"), &out).is_err());
        assert!(!directory.join("absent.sqlite").exists());
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn damage_is_reported_and_garbage_is_an_error() {
        let directory = directory("damage");
        let path = directory.join("damaged.sqlite");
        let connection = Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "CREATE TABLE t_rows (id INTEGER PRIMARY KEY, text TEXT);
                 CREATE INDEX t_rows_text ON t_rows (text);",
            )
            .unwrap();
        connection.execute_batch("BEGIN").unwrap();
        for id in 0..2000 {
            connection
                .execute(
                    "INSERT INTO t_rows (id, text) VALUES (?1, ?2)",
                    rusqlite::params![id, format!("row number {id} of the test")],
                )
                .unwrap();
        }
        connection.execute_batch("COMMIT").unwrap();
        drop(connection);
        assert!(integrity_problems(&path).unwrap().is_empty());
        // Overwrite the middle of the file (page 1, the header, stays intact).
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle..middle + 8192].fill(0xa5);
        std::fs::write(&path, &bytes).unwrap();
        let found = integrity_problems(&path);
        assert!(
            found.as_ref().map_or(true, |problems| !problems.is_empty()),
            "{found:?}"
        );

        let garbage = directory.join("garbage.sqlite");
        std::fs::write(&garbage, b"this is not a database, not even close to one").unwrap();
        assert!(integrity_problems(&garbage).is_err());
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
