//! Resumable upload sessions, as the official uploader speaks them: a session is named by a
//! key the client chooses, its bytes are appended at an offset the client must know, and it
//! answers with an opaque handle that later names it in a finish call.
//!
//! Invariants: the stored offset is the size of the session's bytes (its file, or its
//! segments on an object store: `session_bytes.rs`), so whatever was stored survives a
//! restart; a session handed to a job takes no more bytes; sessions are per
//! user (the same photo gives the same key to everyone); one request at a time writes to a
//! session (a lease in the database, so also across replicas), and every byte written was
//! reserved first against the user's pending limit in a database write transaction, so no
//! number of parallel requests, in any number of processes, exceeds it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use streetlevel_db::{Database, DbError, Location, id_from_sql, id_to_sql, params};
use streetlevel_store::Store;

use crate::ImportError;
use crate::session_bytes::{SessionBytes, SessionWriter};
use crate::tables;

/// The folder of upload sessions in the data directory (the media layout's).
pub use streetlevel_media::layout::UPLOADS_DIR;

/// Bounds on what one user, one upload and one job may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// The largest session (one image, a manifest, or a zip of a whole sequence).
    pub max_session_bytes: u64,
    /// The most bytes a user's sessions may hold while they wait to be processed.
    pub max_pending_bytes_per_user: u64,
    /// The most entries a zip upload may list.
    pub max_zip_entries: u64,
    /// The most bytes the entries of a zip upload may inflate to, in all.
    pub max_zip_inflated_bytes: u64,
    /// How long one job may run before it fails, so that it cannot hold the queue.
    pub job_time_limit: Duration,
    /// How long a session no finish call took may go without new bytes before it is removed
    /// (its bytes then no longer count against the user's limit).
    pub session_max_age: Duration,
    /// How long a job waits before it is tried again when the external blur service was
    /// away: it stays `received`, with the reason, and publishes nothing until then.
    pub blur_retry_after: Duration,
    /// How long a worker's claim on a job lasts without being renewed (it is renewed every
    /// quarter of it while the worker works): how soon another worker, in this process or
    /// another sharing the database, takes over the job of a worker that died.
    pub job_lease: Duration,
}

impl Default for UploadLimits {
    fn default() -> Self {
        UploadLimits {
            max_session_bytes: 4 << 30,
            max_pending_bytes_per_user: 16 << 30,
            max_zip_entries: 20_000,
            max_zip_inflated_bytes: 8 << 30,
            job_time_limit: Duration::from_secs(1800),
            session_max_age: Duration::from_secs(7 * 24 * 3600),
            blur_retry_after: Duration::from_secs(60),
            job_lease: Duration::from_secs(60),
        }
    }
}

/// How long a writer's claim on a session lasts without being renewed: longer than the
/// body's idle timeout, so a live request always renews it in time, and short enough that a
/// crashed process's claim does not block the client for long.
const WRITER_LEASE: Duration = Duration::from_secs(120);

/// Renew the lease when this much of it has passed.
const WRITER_RENEWAL: Duration = Duration::from_secs(30);

/// Bytes reserved against the user's pending limit at a time, so that a request reserves in
/// a few database writes rather than one per chunk.
const RESERVATION_STEP: u64 = 8 << 20;

/// Upload sessions and the job queue of one data directory.
#[derive(Debug)]
pub struct Uploads {
    pub(crate) data_dir: PathBuf,
    db: Database,
    pub(crate) limits: UploadLimits,
    /// Set when a job is submitted; the worker waits on it.
    work: (Mutex<bool>, Condvar),
    /// The worker name [`Uploads::process_next`] claims jobs as (each `run_worker` call
    /// makes its own).
    pub(crate) worker: String,
    /// How jobs blur what they publish (by default nothing is published: see
    /// [`Uploads::with_blurring`]).
    pub(crate) blurring: crate::Blurring,
}

/// Appends the bytes of one upload request to its session, which it holds alone (the
/// session's writer lease in the database) until it is finished or dropped.
#[derive(Debug)]
pub struct Appender<'a> {
    uploads: &'a Uploads,
    user_id: u64,
    key: String,
    file: Option<SessionWriter>,
    handle: String,
    /// This request's claim on the session.
    writer: String,
    /// The session's bytes when the request started.
    stored: u64,
    written: u64,
    /// `stored + written` may grow up to this without reserving more.
    held: u64,
    renewed: Instant,
    released: bool,
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
        Self::open_database(data_dir, tables::open(location)?, limits)
    }

    /// Opens the upload tables in `database`, the process's one handle (a clone of it, shared
    /// with the other crates; see [`Uploads::open_location`]).
    pub fn open_database(
        data_dir: &Path,
        db: Database,
        limits: UploadLimits,
    ) -> Result<Self, ImportError> {
        tables::migrate(&db)?;
        Ok(Uploads {
            data_dir: data_dir.to_path_buf(),
            db,
            limits,
            work: (Mutex::new(true), Condvar::new()),
            worker: crate::jobs::worker_name(),
            blurring: crate::Blurring::default(),
        })
    }

    /// The same uploads with jobs blurring as `blurring` says. Without it a job fails,
    /// publishing nothing, with the reason that no blurrer was configured.
    #[must_use]
    pub fn with_blurring(mut self, blurring: crate::Blurring) -> Self {
        self.blurring = blurring;
        self
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// Where the sessions' bytes are: the data directory's files or the object store.
    pub(crate) fn bytes(&self) -> SessionBytes {
        SessionBytes::of(&self.data_dir)
    }

    /// The bytes stored for a session: 0 for one never seen.
    pub fn offset(&self, user_id: u64, key: &str) -> Result<u64, ImportError> {
        check_key(key)?;
        self.stored(user_id, key)
    }

    /// The session's bytes, or once a job processed (and deleted) them, the size they had.
    fn stored(&self, user_id: u64, key: &str) -> Result<u64, ImportError> {
        if let Some(size) = self.bytes().size(user_id, key)? {
            return Ok(size);
        }
        let size: Option<i64> = self
            .db
            .read(|connection| {
                connection.query_value::<Option<i64>>(
                    "SELECT size FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                    params![id_to_sql(user_id), key],
                )
            })?
            .flatten();
        Ok(size.map_or(0, |size| u64::try_from(size).unwrap_or(0)))
    }

    /// Starts appending to a session at `offset`, which must be the bytes stored; creates the
    /// session (and its handle) on first use. A session any append of which came from an
    /// uploader up to 0.13 (`generation`) is remembered as such: see [`UploaderGeneration`]. The request holds the session alone until the
    /// [`Appender`] is finished or dropped: another request gets
    /// [`ImportError::SessionBusy`], in this process or any other sharing the database.
    pub fn append(
        &self,
        user_id: u64,
        key: &str,
        offset: u64,
        generation: UploaderGeneration,
    ) -> Result<Appender<'_>, ImportError> {
        check_key(key)?;
        let bytes = self.bytes();
        let writer = new_handle();
        // One write transaction: no other request, finish call or sweep of any process
        // runs between the checks and the claim.
        let (handle, finished, stored) = self.db.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "INSERT INTO import_sessions (user_id, key, handle, created_at, touched_at)
                 VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT DO NOTHING",
                params![id_to_sql(user_id), key, &new_handle(), now],
            )?;
            let (handle, job, writer_until) = connection
                .query_row(
                    "SELECT handle, job, writer_until FROM import_sessions
                     WHERE user_id = ?1 AND key = ?2",
                    params![id_to_sql(user_id), key],
                    |row| {
                        Ok::<_, DbError>((
                            row.get::<String>(0)?,
                            row.get::<Option<i64>>(1)?,
                            row.get::<Option<i64>>(2)?,
                        ))
                    },
                )?
                .ok_or_else(|| DbError::Statement("no session row".into()))?;
            let stored = if let Some(size) = bytes.size(user_id, key)? {
                size
            } else {
                connection
                    .query_value::<Option<i64>>(
                        "SELECT size FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                        params![id_to_sql(user_id), key],
                    )?
                    .flatten()
                    .map_or(0, |size| u64::try_from(size).unwrap_or(0))
            };
            if job.is_some() {
                return Ok((handle, true, stored));
            }
            if writer_until.is_some_and(|until| until > now) {
                return Err(ImportError::SessionBusy(key.to_owned()));
            }
            if offset != stored {
                return Err(ImportError::OffsetMismatch {
                    given: offset,
                    stored,
                });
            }
            connection.execute(
                "UPDATE import_sessions SET writer = ?3, writer_until = ?4, held = ?5
                 WHERE user_id = ?1 AND key = ?2",
                params![
                    id_to_sql(user_id),
                    key,
                    &writer,
                    now + lease_millis(),
                    i64::try_from(stored).unwrap_or(i64::MAX)
                ],
            )?;
            if generation == UploaderGeneration::UpTo013 {
                connection.execute(
                    "UPDATE import_sessions SET legacy_uploader = 1 WHERE user_id = ?1 AND key = ?2",
                    params![id_to_sql(user_id), key],
                )?;
            }
            Ok((handle, false, stored))
        })?;
        if finished && offset != stored {
            return Err(ImportError::OffsetMismatch {
                given: offset,
                stored,
            });
        }
        let mut appender = Appender {
            uploads: self,
            user_id,
            key: key.to_owned(),
            file: None,
            handle,
            writer,
            stored,
            written: 0,
            held: stored,
            renewed: Instant::now(),
            // A finished session is not claimed: there is nothing to release.
            released: finished,
        };
        if !finished {
            appender.file = Some(bytes.writer(user_id, key, stored)?);
        }
        Ok(appender)
    }

    /// Removes the sessions that no finish call took (or whose job ended) and that got no
    /// bytes for [`UploadLimits::session_max_age`]: their files are deleted and their bytes
    /// no longer count against their user's limit. Returns how many were removed.
    pub fn remove_abandoned(&self) -> Result<usize, ImportError> {
        let max_age = i64::try_from(self.limits.session_max_age.as_millis()).unwrap_or(0);
        let bytes = self.bytes();
        self.db.write(|connection| {
            let now = connection.now_millis()?;
            let cutoff = now - max_age;
            let abandoned = connection.query_map(
                "SELECT user_id, key, job FROM import_sessions
                 WHERE coalesce(touched_at, created_at) < ?1
                   AND (writer_until IS NULL OR writer_until < ?2)
                   AND (job IS NULL OR (held > 0 AND job IN
                        (SELECT id FROM import_jobs WHERE state IN ('published', 'failed'))))",
                params![cutoff, now],
                |row| {
                    Ok::<_, DbError>((
                        row.get::<i64>(0)?,
                        row.get::<String>(1)?,
                        row.get::<Option<i64>>(2)?,
                    ))
                },
            )?;
            for (user_id, key, job) in &abandoned {
                bytes.remove(id_from_sql(*user_id), key)?;
                let statement = if job.is_some() {
                    "UPDATE import_sessions SET held = 0 WHERE user_id = ?1 AND key = ?2"
                } else {
                    "DELETE FROM import_sessions WHERE user_id = ?1 AND key = ?2"
                };
                connection.execute(statement, params![*user_id, key])?;
            }
            Ok::<_, ImportError>(abandoned.len())
        })
    }

    /// Checks the caller's session `key` against the MD5 its key names, as far as the
    /// uploader that wrote it defines what that MD5 was taken of (see [`KeyDigest`] and
    /// docs/CLIENTS.md); a session whose file is gone (processed by an earlier job) is not
    /// checked again. A session being written is busy; one that fails the check is discarded
    /// (its file, its row and the bytes it held against the user's limit), so that the
    /// uploader's next run sends it again from offset 0, and the finish is refused.
    pub(crate) fn check_named_md5(&self, user_id: u64, key: &str) -> Result<(), ImportError> {
        let Some(named) = named_md5(key) else {
            return Ok(());
        };
        let (now, row) = self.db.read(|connection| {
            let now = connection.now_millis()?;
            let row = connection.query_row(
                "SELECT writer_until, legacy_uploader FROM import_sessions
                 WHERE user_id = ?1 AND key = ?2",
                params![id_to_sql(user_id), key],
                |row| Ok::<_, DbError>((row.get::<Option<i64>>(0)?, row.get::<i64>(1)?)),
            )?;
            Ok::<_, DbError>((now, row))
        })?;
        let Some((writer_until, legacy_uploader)) = row else {
            return Ok(());
        };
        if writer_until.is_some_and(|until| until > now) {
            return Err(ImportError::SessionBusy(key.to_owned()));
        }
        let generation = if legacy_uploader == 0 {
            UploaderGeneration::Current
        } else {
            UploaderGeneration::UpTo013
        };
        let bytes = self.bytes();
        if bytes.size(user_id, key)?.is_none() {
            return Ok(());
        }
        let refusal = match KeyDigest::of(key, generation) {
            KeyDigest::Bytes => {
                let stored = md5_of(&bytes, user_id, key)?;
                (!stored.eq_ignore_ascii_case(named)).then(|| ImportError::DigestMismatch {
                    key: key.to_owned(),
                    stored,
                })
            }
            KeyDigest::ZipComment => match zip_comment_of(&bytes, user_id, key)? {
                // A zip without the member is named by its bytes' MD5 (the uploader's
                // `upload_zipfile` of a zip it did not make).
                Ok(None) => {
                    let stored = md5_of(&bytes, user_id, key)?;
                    (!stored.eq_ignore_ascii_case(named)).then(|| ImportError::DigestMismatch {
                        key: key.to_owned(),
                        stored,
                    })
                }
                Ok(Some(comment)) => {
                    (!comment.eq_ignore_ascii_case(named)).then(|| ImportError::CommentMismatch {
                        key: key.to_owned(),
                        comment,
                    })
                }
                // Not a zip: the finish call's own reading of it says why.
                Err(()) => None,
            },
            KeyDigest::Unseen => None,
        };
        let Some(refusal) = refusal else {
            return Ok(());
        };
        let discarded = self.db.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "DELETE FROM import_sessions WHERE user_id = ?1 AND key = ?2 AND job IS NULL
                   AND (writer_until IS NULL OR writer_until < ?3)",
                params![id_to_sql(user_id), key, now],
            )
        })?;
        if discarded == 0 {
            // A request began writing meanwhile, or a job took it: the bytes may yet change.
            return Err(ImportError::SessionBusy(key.to_owned()));
        }
        bytes.remove(user_id, key)?;
        Err(refusal)
    }

    /// Marks the sessions' bytes deleted: they no longer count against the user's limit.
    pub(crate) fn release_sessions(
        &self,
        user_id: u64,
        keys: &[String],
    ) -> Result<(), ImportError> {
        self.db.write(|connection| {
            for key in keys {
                connection.execute(
                    "UPDATE import_sessions SET held = 0 WHERE user_id = ?1 AND key = ?2",
                    params![id_to_sql(user_id), key],
                )?;
            }
            Ok(())
        })
    }

    /// The key of the caller's session with `handle`.
    pub(crate) fn key_of(&self, user_id: u64, handle: &str) -> Result<String, ImportError> {
        self.db
            .read(|connection| {
                connection.query_value::<String>(
                    "SELECT key FROM import_sessions WHERE user_id = ?1 AND handle = ?2",
                    params![id_to_sql(user_id), handle],
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

impl Appender<'_> {
    /// Appends one piece of the request body, after reserving it against the session's and
    /// the user's limits.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), ImportError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            return Err(ImportError::SessionFinished(self.key.clone()));
        }
        let total = self.stored + self.written + bytes.len() as u64;
        if total > self.uploads.limits.max_session_bytes {
            return Err(ImportError::SessionTooLarge {
                limit: self.uploads.limits.max_session_bytes,
            });
        }
        if total > self.held || self.renewed.elapsed() > WRITER_RENEWAL {
            self.reserve(total)?;
        }
        if let Some(file) = self.file.as_mut() {
            file.write(bytes)?;
        }
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Holds at least `needed` bytes for the session (a step more when it can) and renews
    /// the lease, in one write transaction: the sum over the user's sessions is read and
    /// raised with no other writer in between, in any process.
    fn reserve(&mut self, needed: u64) -> Result<(), ImportError> {
        let limits = self.uploads.limits;
        let user_id = id_to_sql(self.user_id);
        let wanted = if needed > self.held {
            needed
                .saturating_add(RESERVATION_STEP)
                .min(limits.max_session_bytes)
        } else {
            self.held
        };
        let held = self.uploads.db.write(|connection| {
            let now = connection.now_millis()?;
            let others: i64 = connection
                .query_value::<i64>(
                    // sum() of BIGINT is NUMERIC on PostgreSQL.
                    "SELECT CAST(coalesce(sum(held), 0) AS BIGINT) FROM import_sessions
                     WHERE user_id = ?1 AND key <> ?2",
                    params![user_id, &self.key],
                )?
                .unwrap_or(0);
            let room = limits
                .max_pending_bytes_per_user
                .saturating_sub(u64::try_from(others).unwrap_or(0));
            if needed > room {
                return Err(ImportError::QuotaExceeded {
                    limit: limits.max_pending_bytes_per_user,
                });
            }
            let held = wanted.min(room);
            let claimed = connection.execute(
                "UPDATE import_sessions SET held = ?4, writer_until = ?5
                 WHERE user_id = ?1 AND key = ?2 AND writer = ?3",
                params![
                    user_id,
                    &self.key,
                    &self.writer,
                    i64::try_from(held).unwrap_or(i64::MAX),
                    now + lease_millis()
                ],
            )?;
            if claimed == 0 {
                // The lease ran out and another request took the session.
                return Err(ImportError::SessionBusy(self.key.clone()));
            }
            Ok(held)
        })?;
        self.held = held;
        self.renewed = Instant::now();
        Ok(())
    }

    /// Makes the appended bytes durable, gives the session up and returns its handle.
    pub fn finish(mut self) -> Result<String, ImportError> {
        if let Some(file) = self.file.take() {
            file.finish()?;
        }
        self.release()?;
        Ok(std::mem::take(&mut self.handle))
    }

    /// How many bytes this request appended.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Ends the claim: the session holds its file's size, and another request may write.
    fn release(&mut self) -> Result<(), ImportError> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let size = i64::try_from(self.stored + self.written).unwrap_or(i64::MAX);
        self.uploads.db.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_sessions SET held = ?4, writer = NULL, writer_until = NULL,
                    touched_at = ?5
                 WHERE user_id = ?1 AND key = ?2 AND writer = ?3",
                params![id_to_sql(self.user_id), &self.key, &self.writer, size, now],
            )
        })?;
        Ok(())
    }
}

impl Drop for Appender<'_> {
    fn drop(&mut self) {
        // A request that failed: what reached the disk (or the store) stays, and so does its
        // count.
        if let Some(file) = self.file.take()
            && let Err(error) = file.finish()
        {
            tracing::warn!(%error, key = self.key, "cannot store what an upload sent");
        }
        if let Err(error) = self.release() {
            tracing::warn!(%error, key = self.key, "cannot release an upload session");
        }
    }
}

fn lease_millis() -> i64 {
    i64::try_from(WRITER_LEASE.as_millis()).unwrap_or(i64::MAX)
}

/// Which generation of the official uploader sent an append, as its headers show. What the
/// MD5 its session key names was taken of depends on it (see [`KeyDigest`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UploaderGeneration {
    /// `mapillary_tools` 0.14 and later, and any other client.
    #[default]
    Current,
    /// `mapillary_tools` up to 0.13, which send `X-Entity-Type` (and up to 0.12 also
    /// `X-Entity-Length`) with every append.
    UpTo013,
}

/// What the MD5 in a session key (`mly_tools_<md5>.<suffix>`) was taken of, by the
/// uploaders' own code (read from each generation's wheel, 0.10.0 to 0.14.7):
/// - `.jpg` (0.14's one session per image): the bytes sent;
/// - `.zip`: up to 0.13, the sequence (an MD5 of its images' own MD5s, of the files before the
///   uploader rewrote their Exif), which the same uploader writes into the zip's comment as
///   `{"upload_md5sum": …}`, and for a zip without it (one the uploader did not make) the
///   bytes; 0.14 names every zip by its bytes (its comment is `{"sequence_md5sum": …}`);
/// - `.mp4`: 0.14 the bytes sent (the CAMM MP4 it rewrites every video into); up to 0.13 the
///   camera's file, which the server never sees, for the videos it rewrites, and the bytes for
///   the raw CAMM and `BlackVue` files up to 0.12 sent unchanged, which the server cannot tell
///   apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyDigest {
    /// The MD5 of the session's bytes.
    Bytes,
    /// The zip comment's `upload_md5sum` where it has one, else the MD5 of the bytes.
    ZipComment,
    /// Something the server never sees: nothing to check the key against (the finish call's
    /// other checks, and a zip's per-entry CRC-32 when its pictures are read, still hold).
    Unseen,
}

impl KeyDigest {
    /// What the MD5 `key` names was taken of, for a session `generation` wrote.
    pub(crate) fn of(key: &str, generation: UploaderGeneration) -> Self {
        let suffix = key.rsplit_once('.').map_or("", |(_, suffix)| suffix);
        if suffix.eq_ignore_ascii_case("zip") {
            KeyDigest::ZipComment
        } else if suffix.eq_ignore_ascii_case("mp4") && generation == UploaderGeneration::UpTo013 {
            KeyDigest::Unseen
        } else {
            KeyDigest::Bytes
        }
    }
}

/// The MD5 of every byte of a session, in hexadecimal, read as a stream.
fn md5_of(bytes: &SessionBytes, user_id: u64, key: &str) -> Result<String, ImportError> {
    use md5::Digest as _;
    struct Hashing(md5::Md5);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hashing = Hashing(md5::Md5::new());
    bytes.copy_to(user_id, key, &mut hashing)?;
    Ok(hex::encode(hashing.0.finalize()))
}

/// [`zip_comment_md5`] of a session's bytes (as a file: the zip's directory is at its end).
fn zip_comment_of(
    bytes: &SessionBytes,
    user_id: u64,
    key: &str,
) -> Result<Result<Option<String>, ()>, ImportError> {
    let Some(file) = bytes.as_file(user_id, key)? else {
        return Ok(Err(()));
    };
    Ok(zip_comment_md5(File::open(file.path())?))
}

/// The `upload_md5sum` an uploader up to 0.13 writes into the comment of the zips it makes
/// (`{"upload_md5sum": "<md5>"}`): `Ok(None)` for a zip whose comment is not such JSON,
/// `Err(())` for bytes that are not a zip. Only the archive's directory is read.
fn zip_comment_md5(file: impl std::io::Read + std::io::Seek) -> Result<Option<String>, ()> {
    let archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|_| ())?;
    let comment: Option<serde_json::Value> = serde_json::from_slice(archive.comment()).ok();
    Ok(comment
        .as_ref()
        .and_then(|comment| comment.get("upload_md5sum"))
        .and_then(serde_json::Value::as_str)
        .filter(|named| !named.is_empty())
        .map(str::to_owned))
}

/// The MD5 digest (32 hexadecimal digits) a session key names: the official uploader names a
/// session `mly_tools_<md5>.jpg` (or `.zip`, `.mp4`; what the MD5 was taken of is
/// [`KeyDigest`]), unless run with `--noresume` (`mly_tools_uuid_<hex>.jpg`, and manifests
/// `uuid_<hex>.json`), which name none.
pub(crate) fn named_md5(key: &str) -> Option<&str> {
    let (digest, suffix) = key.strip_prefix("mly_tools_")?.split_once('.')?;
    let names = digest.len() == 32
        && digest.bytes().all(|byte| byte.is_ascii_hexdigit())
        && !suffix.is_empty()
        && suffix.bytes().all(|byte| byte.is_ascii_alphanumeric());
    names.then_some(digest)
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

/// An opaque, unguessable handle (handles are also checked against the caller's sessions).
fn new_handle() -> String {
    let bytes: [u8; 18] = rand::random();
    format!("h1.{}", hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::{KeyDigest, UploaderGeneration, check_key, named_md5, zip_comment_md5};

    #[test]
    fn what_a_key_names_depends_on_its_suffix_and_the_uploader_generation() {
        use UploaderGeneration::{Current, UpTo013};
        let digest = "d41d8cd98f00b204e9800998ecf8427e";
        let check = |suffix: &str, generation, expected| {
            let key = format!("mly_tools_{digest}.{suffix}");
            assert_eq!(
                KeyDigest::of(&key, generation),
                expected,
                "{key} {generation:?}"
            );
        };
        check("jpg", Current, KeyDigest::Bytes);
        check("jpg", UpTo013, KeyDigest::Bytes);
        check("zip", Current, KeyDigest::ZipComment);
        check("ZIP", UpTo013, KeyDigest::ZipComment);
        check("mp4", Current, KeyDigest::Bytes);
        check("mp4", UpTo013, KeyDigest::Unseen);
    }

    #[test]
    fn a_zip_comment_names_an_upload_md5sum_only_as_the_old_uploaders_write_it() {
        use std::io::{Cursor, Write as _};
        let zip_with = |comment: &str| {
            let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
            writer
                .start_file("0.jpg", zip::write::SimpleFileOptions::default())
                .unwrap();
            writer.write_all(b"bytes").unwrap();
            writer.set_comment(comment);
            let mut zip = writer.finish().unwrap();
            zip.set_position(0);
            zip
        };
        let named = "0123456789abcdef0123456789abcdef";
        let comment = format!(r#"{{"upload_md5sum": "{named}"}}"#);
        assert_eq!(
            zip_comment_md5(zip_with(&comment)),
            Ok(Some(named.to_owned()))
        );
        // 0.14's comment, and comments that are not that JSON, name nothing.
        for other in [
            r#"{"sequence_md5sum": "ab"}"#,
            "",
            "not json",
            r#"{"upload_md5sum": 5}"#,
        ] {
            assert_eq!(zip_comment_md5(zip_with(other)), Ok(None), "{other}");
        }
        assert_eq!(zip_comment_md5(Cursor::new(b"not a zip at all")), Err(()));
    }

    #[test]
    fn keys_name_an_md5_as_the_uploader_writes_them() {
        let digest = "d41d8cd98f00b204e9800998ecf8427e";
        let upper = digest.to_uppercase();
        let named = [
            (format!("mly_tools_{digest}.jpg"), digest),
            (format!("mly_tools_{digest}.mp4"), digest),
            (format!("mly_tools_{upper}.zip"), upper.as_str()),
        ];
        for (key, digest) in &named {
            assert_eq!(named_md5(key), Some(*digest), "{key}");
        }
        for key in [
            String::from("mly_tools_uuid_0123456789abcdef0123456789abcdef.jpg"),
            String::from("uuid_0123456789abcdef0123456789abcdef.json"),
            String::from("mly_tools_0123abcd.jpg"),
            format!("mly_tools_{digest}"),
            format!("mly_tools_{digest}.a.b"),
            format!("mly_tools_{}g.jpg", &digest[..31]),
        ] {
            assert_eq!(named_md5(&key), None, "{key}");
        }
    }

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
