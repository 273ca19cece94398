#![doc = include_str!("../README.md")]

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

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
}
