//! Resumable upload sessions, as the official uploader speaks them: a session is named by a
//! key the client chooses, its bytes are appended at an offset the client must know, and it
//! answers with an opaque handle that later names it in a finish call.
//!
//! Invariants: the stored offset is the size of the session's file, so whatever reached the
//! disk survives a restart; a session handed to a job takes no more bytes; sessions are per
//! user (the same photo gives the same key to everyone).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use streetlevel_db::{Database, DbError, Location, params};
use streetlevel_store::Store;

use crate::ImportError;
use crate::tables;

/// The folder of upload sessions in the data directory.
pub const UPLOADS_DIR: &str = "uploads";

/// Bounds on what one user may upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// The largest session (one image, a manifest, or a zip of a whole sequence).
    pub max_session_bytes: u64,
    /// The most bytes a user's sessions may hold while they wait to be processed.
    pub max_pending_bytes_per_user: u64,
}

impl Default for UploadLimits {
    fn default() -> Self {
        UploadLimits {
            max_session_bytes: 4 << 30,
            max_pending_bytes_per_user: 16 << 30,
        }
    }
}

/// Upload sessions and the job queue of one data directory.
#[derive(Debug)]
pub struct Uploads {
    pub(crate) data_dir: PathBuf,
    db: Database,
    pub(crate) limits: UploadLimits,
    /// Set when a job is submitted; the worker waits on it.
    work: (Mutex<bool>, Condvar),
    /// Whether the job a crash left `processing` was looked for (see `process_next`).
    pub(crate) recovered: std::sync::atomic::AtomicBool,
}

/// Appends the bytes of one upload request to its session.
#[derive(Debug)]
pub struct Appender {
    file: Option<File>,
    handle: String,
    written: u64,
    /// How many more bytes this request may add, and which limit says so.
    allowance: u64,
    limit: Limit,
}

/// What stops an [`Appender`] from taking more bytes.
#[derive(Debug, Clone)]
enum Limit {
    /// [`UploadLimits::max_session_bytes`].
    Session(u64),
    /// [`UploadLimits::max_pending_bytes_per_user`].
    User(u64),
    /// The session was handed to a job (its key).
    Finished(String),
}

impl Limit {
    fn error(&self) -> ImportError {
        match self {
            Limit::Session(limit) => ImportError::SessionTooLarge { limit: *limit },
            Limit::User(limit) => ImportError::QuotaExceeded { limit: *limit },
            Limit::Finished(key) => ImportError::SessionFinished(key.clone()),
        }
    }
}

impl Uploads {
    /// The sessions and jobs of `data_dir` (its database file is created if needed).
    pub fn open(data_dir: &Path, limits: UploadLimits) -> Result<Self, ImportError> {
        Self::open_location(
            data_dir,
            &Location::Sqlite(Store::database_path(data_dir)),
            limits,
        )
    }

    /// The sessions of `data_dir` (whose `uploads/` holds their bytes) with their tables in
    /// `location`, which must be where the store's tables are.
    pub fn open_location(
        data_dir: &Path,
        location: &Location,
        limits: UploadLimits,
    ) -> Result<Self, ImportError> {
        let db = tables::open(location)?;
        Ok(Uploads {
            data_dir: data_dir.to_path_buf(),
            db,
            limits,
            work: (Mutex::new(true), Condvar::new()),
            recovered: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    pub(crate) fn session_path(&self, user_id: u64, key: &str) -> PathBuf {
        self.data_dir
            .join(UPLOADS_DIR)
            .join(user_id.to_string())
            .join(key)
    }

    /// The bytes stored for a session: 0 for one never seen.
    pub fn offset(&self, user_id: u64, key: &str) -> Result<u64, ImportError> {
        check_key(key)?;
        self.stored(user_id, key)
    }

    /// The session file's size, or once a job processed (and deleted) it, the size it had.
    fn stored(&self, user_id: u64, key: &str) -> Result<u64, ImportError> {
        let path = self.session_path(user_id, key);
        if path.exists() {
            return file_size(&path);
        }
        let size: Option<i64> = self
            .db
            .read(|connection| {
                connection.query_value::<Option<i64>>(
                    "SELECT size FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                    params![user_id as i64, key],
                )
            })?
            .flatten();
        Ok(size.map_or(0, |size| size as u64))
    }

    /// Starts appending to a session at `offset`, which must be the bytes stored; creates the
    /// session (and its handle) on first use.
    pub fn append(&self, user_id: u64, key: &str, offset: u64) -> Result<Appender, ImportError> {
        check_key(key)?;
        let path = self.session_path(user_id, key);
        let stored = self.stored(user_id, key)?;
        if offset != stored {
            return Err(ImportError::OffsetMismatch {
                given: offset,
                stored,
            });
        }
        let (handle, job) = self.session_row(user_id, key)?;
        if job.is_some() {
            // Finished: the client may still ask for its handle with an empty body.
            return Ok(Appender {
                file: None,
                handle,
                written: 0,
                allowance: 0,
                limit: Limit::Finished(key.to_owned()),
            });
        }
        let pending = directory_size(path.parent().unwrap_or(&path))?;
        let by_session = self.limits.max_session_bytes.saturating_sub(stored);
        let by_user = self
            .limits
            .max_pending_bytes_per_user
            .saturating_sub(pending);
        let (allowance, limit) = if by_session <= by_user {
            (by_session, Limit::Session(self.limits.max_session_bytes))
        } else {
            (by_user, Limit::User(self.limits.max_pending_bytes_per_user))
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Appender {
            file: Some(file),
            handle,
            written: 0,
            allowance,
            limit,
        })
    }

    /// The session's handle and the job that took it, creating the row if new.
    fn session_row(&self, user_id: u64, key: &str) -> Result<(String, Option<i64>), ImportError> {
        let handle = new_handle();
        self.db.write(|connection| {
            connection.execute(
                "INSERT INTO import_sessions (user_id, key, handle, created_at)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![user_id as i64, key, &handle, tables::now_millis()],
            )?;
            connection
                .query_row(
                    "SELECT handle, job FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                    params![user_id as i64, key],
                    |row| Ok::<_, DbError>((row.get(0)?, row.get(1)?)),
                )?
                .ok_or_else(|| ImportError::Database(DbError::Statement("no session row".into())))
        })
    }

    /// The key of the caller's session with `handle`.
    pub(crate) fn key_of(&self, user_id: u64, handle: &str) -> Result<String, ImportError> {
        self.db
            .read(|connection| {
                connection.query_value::<String>(
                    "SELECT key FROM import_sessions WHERE user_id = ?1 AND handle = ?2",
                    params![user_id as i64, handle],
                )
            })?
            .ok_or_else(|| ImportError::UnknownHandle(handle.to_owned()))
    }

    /// Tells the worker that a job waits.
    pub(crate) fn notify(&self) {
        let (flag, condvar) = &self.work;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        condvar.notify_all();
    }

    /// Waits until a job is submitted or `timeout` passes.
    pub fn wait_for_work(&self, timeout: Duration) {
        let (flag, condvar) = &self.work;
        let guard = flag.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, _) = condvar
            .wait_timeout_while(guard, timeout, |pending| !*pending)
            .unwrap_or_else(PoisonError::into_inner);
        *guard = false;
    }
}

impl Appender {
    /// Appends one piece of the request body.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), ImportError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let total = self.written + bytes.len() as u64;
        let Some(file) = self.file.as_mut().filter(|_| total <= self.allowance) else {
            return Err(self.limit.error());
        };
        file.write_all(bytes)?;
        self.written = total;
        Ok(())
    }

    /// Makes the appended bytes durable and returns the session's handle.
    pub fn finish(self) -> Result<String, ImportError> {
        if let Some(file) = self.file {
            file.sync_data()?;
        }
        Ok(self.handle)
    }

    /// How many bytes this request appended.
    pub fn written(&self) -> u64 {
        self.written
    }
}

/// Session keys are file names: the uploader's are `mly_tools_<md5>.jpg` and `uuid_<hex>.json`.
fn check_key(key: &str) -> Result<(), ImportError> {
    let valid = (1..=200).contains(&key.len())
        && !key.starts_with('.')
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(ImportError::InvalidKey(key.chars().take(64).collect()))
    }
}

fn file_size(path: &Path) -> Result<u64, ImportError> {
    match std::fs::metadata(path) {
        Ok(metadata) => Ok(metadata.len()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(error) => Err(error.into()),
    }
}

fn directory_size(directory: &Path) -> Result<u64, ImportError> {
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error.into()),
    };
    let mut total = 0;
    for entry in entries {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// An opaque, unguessable handle (handles are also checked against the caller's sessions).
fn new_handle() -> String {
    let bytes: [u8; 18] = rand::random();
    format!("h1.{}", hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::check_key;

    #[test]
    fn keys_are_plain_file_names() {
        for good in ["mly_tools_0123abcd.jpg", "uuid_ab12.json", "a", "x-y_z.zip"] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        let long = "a".repeat(201);
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a b",
            "ä.jpg",
            long.as_str(),
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }
}
