//! The processing queue: a finish call becomes a job row; workers (any number per process,
//! in any number of processes sharing the database) claim jobs oldest first with a lease and
//! import their sessions through the pipeline, each job within its time limit.
//!
//! Invariants: a job's images become visible in the same transaction that marks it
//! published, and only while the publishing worker still holds the job's lease, so nothing
//! half-processed is ever visible and no job is published twice; a job is taken from another
//! worker only once that worker's lease ran out unrenewed, and is then redone with the IDs it
//! reserved before, so it neither loses nor duplicates images; a session's bytes are deleted
//! only after that transaction.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use streetlevel_db::{DbError, Row, params};
use streetlevel_model::{ImageId, OrganizationId, SequenceId};
use streetlevel_store::Store;

use crate::budgets::{Budgeted, Interrupt, Interruption, ZipBudget, open_zip};
use crate::pipeline::{
    FileOutcome, Grouping, Outcome, Owner, Progress, Run, Sources, read_lock, write_lock,
};
use crate::tables::now_millis;
use crate::{ImportError, Uploads};

/// The largest manifest read (the uploader's lists a few hundred handles).
const MAX_MANIFEST_BYTES: u64 = 16 << 20;
/// The most images one job may hold.
const MAX_JOB_IMAGES: usize = 20_000;
/// The largest JPEG taken out of a zip.
const MAX_ZIP_ENTRY_BYTES: u64 = 256 << 20;
/// How often the worker looks for abandoned sessions (more often when they age faster).
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// What a finish call hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// `mly_bundle_manifest`: JSON listing the handles of image sessions in capture order.
    Manifest,
    /// `zip`: an archive of JPEGs, one sequence.
    Zip,
    /// `mly_camm_video`: one MP4 with a CAMM GPS track (the official uploader rewrites every
    /// video into one), sampled into frames, one sequence.
    CammVideo,
}

impl FileType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FileType::Manifest => "mly_bundle_manifest",
            FileType::Zip => "zip",
            FileType::CammVideo => "mly_camm_video",
        }
    }

    /// The type of a wire name.
    pub fn parse(text: &str) -> Result<Self, ImportError> {
        match text {
            "mly_bundle_manifest" => Ok(FileType::Manifest),
            "zip" => Ok(FileType::Zip),
            "mly_camm_video" => Ok(FileType::CammVideo),
            other => Err(ImportError::UnsupportedFileType(
                other.chars().take(64).collect(),
            )),
        }
    }
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for the worker.
    Received,
    /// The worker is on it (or was, when the process stopped).
    Processing,
    /// Its images are visible.
    Published,
    /// It could not be processed; see the reason.
    Failed,
}

impl JobState {
    /// The name in the status JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Received => "received",
            JobState::Processing => "processing",
            JobState::Published => "published",
            JobState::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "received" => JobState::Received,
            "processing" => JobState::Processing,
            "published" => JobState::Published,
            _ => JobState::Failed,
        }
    }
}

/// A job as the status view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job's ID, the `cluster_id` the finish call answered.
    pub id: u64,
    /// The uploading user.
    pub user_id: u64,
    /// What was handed over.
    pub file_type: FileType,
    /// The organization the images go to.
    pub organization: Option<u64>,
    /// Where it is.
    pub state: JobState,
    /// Why it failed.
    pub reason: Option<String>,
    /// Files handed over.
    pub files: u64,
    /// New images.
    pub images: u64,
    /// Files stored before.
    pub duplicates: u64,
    /// Files refused, with the reason.
    pub refused: Vec<(String, String)>,
    /// How many new images took their capture time from each source (by
    /// `TimeSource::as_str` name, best source first), once published.
    pub time_sources: Vec<(String, u64)>,
    /// Warnings about new images, as `(file, warning)`: a capture time taken as UTC, members
    /// of the description JSON that were ignored.
    pub warnings: Vec<(String, String)>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
}

#[derive(serde::Deserialize)]
pub(crate) struct Manifest {
    pub(crate) image_handles: Vec<String>,
}

impl Uploads {
    /// Queues a job for the caller's session `handle` and returns its ID (the `cluster_id`).
    pub fn finish(
        &self,
        user_id: u64,
        username: &str,
        handle: &str,
        file_type: &str,
        organization: Option<OrganizationId>,
    ) -> Result<u64, ImportError> {
        let file_type = FileType::parse(file_type)?;
        let key = self.key_of(user_id, handle)?;
        // What is checked here must be what the job reads: the size is compared again in
        // the transaction that hands the session over.
        let checked_size = std::fs::metadata(self.session_path(user_id, &key))
            .map_err(|_| ImportError::SessionIncomplete(key.clone()))?
            .len();
        let sessions = match file_type {
            FileType::Zip => {
                // Refused now, with its reason, rather than failing later in the queue.
                ZipEntries::open(&self.session_path(user_id, &key), self.zip_budget())?;
                vec![key.clone()]
            }
            FileType::CammVideo => {
                // Refused now, with its reason: not an MP4, truncated, no usable GPS track.
                streetlevel_video::Video::read(
                    &self.session_path(user_id, &key),
                    None,
                    now_millis() as f64 / 1000.0,
                )
                .map_err(|error| ImportError::InvalidUpload(error.to_string()))?;
                vec![key.clone()]
            }
            FileType::Manifest => {
                let manifest = self.read_manifest(user_id, &key)?;
                manifest
                    .image_handles
                    .iter()
                    .map(|handle| self.key_of(user_id, handle))
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        let now = now_millis();
        let listed = serde_json::to_string(&sessions).unwrap_or_default();
        let job = self.db().write(|connection| {
            let job: i64 = connection
                .query_value(
                    "INSERT INTO import_jobs (user_id, username, organization, file_type,
                        sessions, state, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'received', ?6, ?6) RETURNING id",
                    params![
                        user_id as i64,
                        username,
                        organization.map(|id| id.0 as i64),
                        file_type.as_str(),
                        &listed,
                        now
                    ],
                )?
                .ok_or_else(|| DbError::Statement("INSERT … RETURNING gave no row".into()))?;
            for session in sessions.iter().chain(std::iter::once(&key)) {
                let size = self.check_handed_over(connection, user_id, session, now)?;
                if session == &key && size != Some(checked_size as i64) {
                    return Err(ImportError::SessionBusy(key.clone()));
                }
                let key = session;
                connection.execute(
                    "UPDATE import_sessions SET job = coalesce(job, ?3), size = coalesce(size, ?4)
                     WHERE user_id = ?1 AND key = ?2",
                    params![user_id as i64, key, job, size],
                )?;
            }
            Ok::<_, ImportError>(job)
        })?;
        self.notify();
        Ok(job as u64)
    }

    /// Checks, in the transaction of a finish call, that `key` may be handed to a job: no
    /// request is writing to it and it holds bytes (or a job processed it before); returns
    /// the size of its file, if it has one.
    fn check_handed_over(
        &self,
        connection: &mut dyn streetlevel_db::Conn,
        user_id: u64,
        key: &str,
        now: i64,
    ) -> Result<Option<i64>, ImportError> {
        let row = connection.query_row(
            "SELECT writer_until, size FROM import_sessions WHERE user_id = ?1 AND key = ?2",
            params![user_id as i64, key],
            |row| Ok::<_, DbError>((row.get::<Option<i64>>(0)?, row.get::<Option<i64>>(1)?)),
        )?;
        let Some((writer_until, processed_size)) = row else {
            return Err(ImportError::SessionIncomplete(key.to_owned()));
        };
        if writer_until.is_some_and(|until| until > now) {
            return Err(ImportError::SessionBusy(key.to_owned()));
        }
        match std::fs::metadata(self.session_path(user_id, key)) {
            Ok(metadata) if metadata.len() > 0 => Ok(Some(metadata.len() as i64)),
            Err(_) if processed_size.is_some() => Ok(None),
            _ => Err(ImportError::SessionIncomplete(key.to_owned())),
        }
    }

    fn zip_budget(&self) -> ZipBudget {
        ZipBudget {
            max_entries: self.limits.max_zip_entries,
            max_inflated_bytes: self.limits.max_zip_inflated_bytes,
        }
    }

    fn read_manifest(&self, user_id: u64, key: &str) -> Result<Manifest, ImportError> {
        let path = self.session_path(user_id, key);
        let mut text = Vec::new();
        std::fs::File::open(&path)
            .map_err(|_| ImportError::InvalidUpload(String::from("the manifest's bytes are gone")))?
            .take(MAX_MANIFEST_BYTES + 1)
            .read_to_end(&mut text)?;
        if text.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(ImportError::InvalidUpload(String::from(
                "the manifest is too large",
            )));
        }
        parse_manifest(&text)
    }

    /// The jobs of a user, newest first.
    pub fn jobs_of(&self, user_id: u64) -> Result<Vec<Job>, ImportError> {
        self.query_jobs(
            "WHERE user_id = ?1 ORDER BY id DESC LIMIT 200",
            user_id as i64,
        )
    }

    /// How many jobs are in each state (for metrics), every state listed.
    pub fn job_counts(&self) -> Result<Vec<(JobState, u64)>, ImportError> {
        let rows = self.db().read(|connection| {
            connection.query_map(
                "SELECT state, COUNT(*) FROM import_jobs GROUP BY state",
                params![],
                |row| Ok::<_, DbError>((row.get::<String>(0)?, row.get::<i64>(1)?)),
            )
        })?;
        Ok([
            JobState::Received,
            JobState::Processing,
            JobState::Published,
            JobState::Failed,
        ]
        .into_iter()
        .map(|state| {
            let count = rows
                .iter()
                .filter(|(name, _)| JobState::parse(name) == state)
                .map(|(_, count)| u64::try_from(*count).unwrap_or(0))
                .sum();
            (state, count)
        })
        .collect())
    }

    /// One job.
    pub fn job(&self, id: u64) -> Result<Option<Job>, ImportError> {
        Ok(self.query_jobs("WHERE id = ?1", id as i64)?.pop())
    }

    fn query_jobs(&self, filter: &str, value: i64) -> Result<Vec<Job>, ImportError> {
        self.db().read(|connection| {
            connection.query_map(
                &format!(
                    "SELECT id, user_id, file_type, organization, state, reason, sessions, images,
                        duplicates, refused, created_at, updated_at, time_sources, warnings
                     FROM import_jobs {filter}"
                ),
                params![value],
                |row| {
                    let sessions: String = row.get(6)?;
                    let refused: String = row.get(9)?;
                    let file_type: String = row.get(2)?;
                    Ok::<_, ImportError>(Job {
                        id: row.get::<i64>(0)? as u64,
                        user_id: row.get::<i64>(1)? as u64,
                        file_type: FileType::parse(&file_type).unwrap_or(FileType::Manifest),
                        organization: row.get::<Option<i64>>(3)?.map(|id| id as u64),
                        state: JobState::parse(&row.get::<String>(4)?),
                        reason: row.get(5)?,
                        files: serde_json::from_str::<Vec<String>>(&sessions)
                            .map_or(0, |sessions| sessions.len() as u64),
                        images: row.get::<i64>(7)? as u64,
                        duplicates: row.get::<i64>(8)? as u64,
                        refused: serde_json::from_str(&refused).unwrap_or_default(),
                        created_at: row.get(10)?,
                        updated_at: row.get(11)?,
                        time_sources: time_sources_of(&row.get::<String>(12)?),
                        warnings: serde_json::from_str(&row.get::<String>(13)?).unwrap_or_default(),
                    })
                },
            )
        })
    }

    /// Processes the oldest job that waits or whose worker's lease ran out (a worker that
    /// crashed, in this process or another); `None` when there is none. A job that cannot be
    /// processed is marked failed with the reason.
    ///
    /// Several workers may share the queue (more than one per process, and replicas on one
    /// database): a job is claimed with a lease (the worker's name and an expiry) in a write
    /// transaction, which excludes every other writer of the database, and the lease is
    /// renewed while the job runs. A job whose lease holds is never taken by another worker;
    /// only the lease holder may publish or fail it.
    pub fn process_next(&self, store: &RwLock<Store>) -> Result<Option<u64>, ImportError> {
        self.process_next_until(store, None, &AtomicI64::new(0), &self.worker)
    }

    /// Claims the next job for `worker`: the oldest `received` one, or the oldest
    /// `processing` one whose lease ran out (a lease without expiry is one a stopping server
    /// gave back, or one an older version left). Returns the job and whether it was taken over.
    fn claim(&self, worker: &str) -> Result<Option<(PendingJob, String, bool)>, ImportError> {
        let now = now_millis();
        let lease_until = now.saturating_add(millis(self.limits.job_lease));
        self.db().write(|connection| {
            let next = connection.query_row(
                "SELECT id, state, worker FROM import_jobs
                 WHERE (state = 'received' AND coalesce(not_before, 0) <= ?1)
                    OR (state = 'processing' AND coalesce(lease_until, 0) < ?1)
                 ORDER BY id LIMIT 1",
                params![now],
                |row| {
                    Ok::<_, DbError>((
                        row.get::<i64>(0)?,
                        row.get::<String>(1)?,
                        row.get::<Option<String>>(2)?,
                    ))
                },
            )?;
            let Some((id, state, previous)) = next else {
                return Ok(None);
            };
            let claimed = connection.query_row(
                "UPDATE import_jobs SET state = 'processing', worker = ?2, lease_until = ?3,
                    updated_at = ?4
                 WHERE id = ?1
                 RETURNING id, user_id, username, organization, file_type, sessions, first_id,
                    created_at",
                params![id, worker, lease_until, now],
                pending_job,
            )?;
            Ok(claimed.map(|(work, file_type)| {
                let taken_over = state == "processing" && previous.is_some();
                (work, file_type, taken_over)
            }))
        })
    }

    /// [`Uploads::process_next`] as `worker`, interrupted when `stop` is set (the job's
    /// lease is given back and the job taken again at once by the next worker) or the job
    /// time limit passes (the job fails); the job's ID goes to `current` while it runs.
    fn process_next_until(
        &self,
        store: &RwLock<Store>,
        stop: Option<&AtomicBool>,
        current: &AtomicI64,
        worker: &str,
    ) -> Result<Option<u64>, ImportError> {
        let Some((work, file_type, taken_over)) = self.claim(worker)? else {
            return Ok(None);
        };
        let job = work.id;
        current.store(job, Ordering::Relaxed);
        if taken_over {
            tracing::warn!(
                job,
                file_type,
                worker,
                "taking over an upload whose worker's lease ran out"
            );
        } else {
            tracing::info!(job, file_type, worker, "processing an upload");
        }
        let lost = AtomicBool::new(false);
        let interrupt = Interrupt {
            deadline: Some(Instant::now() + self.limits.job_time_limit),
            stop,
            lost: Some(&lost),
        };
        let result = std::thread::scope(|scope| {
            // Dropped when the job ends, or unwinds: the renewal stops then.
            let (working, renewal) = std::sync::mpsc::channel::<()>();
            let lost = &lost;
            scope.spawn(move || self.renew_lease(job, worker, &renewal, lost));
            let result = match FileType::parse(&file_type) {
                Ok(FileType::Manifest) => self.process_manifest(store, &work, worker, &interrupt),
                Ok(FileType::Zip) => self.process_zip(store, &work, worker, &interrupt),
                Ok(FileType::CammVideo) => self.process_video(store, &work, worker, &interrupt),
                Err(error) => Err(error),
            };
            drop(working);
            result
        });
        // Whatever failed once the job was interrupted failed because of it.
        let result = result.map_err(|error| match interrupt.why() {
            Some(Interruption::TimeLimit) => ImportError::TimeLimit {
                seconds: self.limits.job_time_limit.as_secs(),
            },
            Some(Interruption::Shutdown) => ImportError::Interrupted,
            Some(Interruption::LeaseLost) => ImportError::LeaseLost,
            None => error,
        });
        current.store(0, Ordering::Relaxed);
        match result {
            Ok(()) => {}
            Err(ImportError::Interrupted) => {
                self.give_back(job, worker)?;
                tracing::info!(
                    job,
                    "an upload was interrupted by the shutdown: the next worker to look resumes it"
                );
            }
            Err(ImportError::LeaseLost) => {
                tracing::warn!(
                    job,
                    worker,
                    "an upload's lease ran out before it was renewed: left to the worker that took it over"
                );
            }
            Err(ImportError::BlurUnavailable(reason)) => self.hold(job, worker, &reason)?,
            Err(error) => {
                tracing::warn!(job, %error, "an upload failed");
                self.fail_processing(job, worker, &error.to_string())?;
            }
        }
        Ok(Some(job as u64))
    }

    /// Renews `worker`'s lease on `job` every quarter of the lease until `working` is
    /// dropped; sets `lost` once the lease is another worker's or ran out unrenewed (the
    /// database could not be reached in time), so the job publishes nothing.
    fn renew_lease(
        &self,
        job: i64,
        worker: &str,
        working: &std::sync::mpsc::Receiver<()>,
        lost: &AtomicBool,
    ) {
        let lease = self.limits.job_lease;
        let mut held_until = Instant::now() + lease;
        loop {
            match working.recv_timeout(lease / 4) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            }
            let asked = Instant::now();
            let renewed = self.db().write(|connection| {
                connection.execute(
                    "UPDATE import_jobs SET lease_until = ?3
                     WHERE id = ?1 AND worker = ?2 AND state = 'processing'",
                    params![job, worker, now_millis().saturating_add(millis(lease))],
                )
            });
            match renewed {
                Ok(1) => held_until = asked + lease,
                Ok(_) => {
                    lost.store(true, Ordering::Relaxed);
                    return;
                }
                Err(error) => {
                    tracing::warn!(job, %error, "cannot renew an upload's lease");
                    if Instant::now() >= held_until {
                        lost.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }
    }

    /// Processes jobs until `stop` is set, as one worker with a name of its own: a server
    /// runs as many of these as its `upload_workers` setting says, each on a thread. Jobs run
    /// oldest first; between them a worker waits for a finish call or a second. Each also
    /// removes abandoned sessions every minute (or every half of their maximum age).
    /// Setting `stop` interrupts the job being processed at its next file.
    pub fn run_worker(&self, store: &RwLock<Store>, stop: &AtomicBool) {
        let worker = worker_name();
        let current = AtomicI64::new(0);
        let sweep_interval = SWEEP_INTERVAL
            .min(self.limits.session_max_age / 2)
            .max(Duration::from_millis(100));
        let mut swept: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            if swept.is_none_or(|at| at.elapsed() >= sweep_interval) {
                match self.remove_abandoned() {
                    Ok(0) => {}
                    Ok(removed) => tracing::info!(removed, "abandoned upload sessions removed"),
                    Err(error) => tracing::warn!(%error, "cannot remove abandoned upload sessions"),
                }
                swept = Some(Instant::now());
            }
            let processed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.process_next_until(store, Some(stop), &current, &worker)
            }));
            match processed {
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => self.wait_for_work(sweep_interval.min(Duration::from_secs(1))),
                Ok(Err(error)) => {
                    tracing::error!(%error, "the upload queue failed");
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
                Err(_) => {
                    // A bug must not stop the queue, nor make the job fail again after every
                    // restart: the job this worker was processing is marked failed, and no
                    // other (other workers hold theirs under their own leases).
                    tracing::error!("processing an upload panicked");
                    let job = current.swap(0, Ordering::Relaxed);
                    if let Err(error) =
                        self.fail_processing(job, &worker, "processing failed unexpectedly")
                    {
                        tracing::error!(%error, "cannot mark the upload failed");
                    }
                }
            }
        }
    }

    /// Puts `job` back in the queue if `worker` still holds it, not to be taken before
    /// `blur_retry_after` has passed, with the reason the status shows: the blur service was
    /// away, so nothing of it was published, and a later try may succeed.
    fn hold(&self, job: i64, worker: &str, reason: &str) -> Result<(), ImportError> {
        let retry_after = self.limits.blur_retry_after;
        let now = now_millis();
        let not_before =
            now.saturating_add(i64::try_from(retry_after.as_millis()).unwrap_or(i64::MAX));
        let reason = format!(
            "waiting for the blur service, nothing is published until it answers; tried again \
             in {} s: {reason}",
            retry_after.as_secs()
        );
        tracing::warn!(job, %reason, "an upload is held");
        self.db().write(|connection| {
            connection.execute(
                "UPDATE import_jobs SET state = 'received', reason = ?2, not_before = ?3,
                    updated_at = ?4, worker = NULL, lease_until = NULL
                 WHERE id = ?1 AND state = 'processing' AND worker = ?5",
                params![job, reason.as_str(), not_before, now, worker],
            )
        })?;
        Ok(())
    }

    /// Marks `job` failed if `worker` still holds it.
    fn fail_processing(&self, job: i64, worker: &str, reason: &str) -> Result<(), ImportError> {
        self.db().write(|connection| {
            connection.execute(
                "UPDATE import_jobs SET state = 'failed', reason = ?1, updated_at = ?2,
                    lease_until = NULL
                 WHERE id = ?3 AND state = 'processing' AND worker = ?4",
                params![reason, now_millis(), job, worker],
            )
        })?;
        Ok(())
    }

    /// Gives `worker`'s lease on `job` back (a stopping server): the job stays `processing`
    /// and the next worker to look, here or in another process, resumes it at once.
    fn give_back(&self, job: i64, worker: &str) -> Result<(), ImportError> {
        self.db().write(|connection| {
            connection.execute(
                "UPDATE import_jobs SET lease_until = NULL, updated_at = ?3
                 WHERE id = ?1 AND state = 'processing' AND worker = ?2",
                params![job, worker, now_millis()],
            )
        })?;
        Ok(())
    }

    /// The first of `count` IDs for the job: reserved once and kept, so a retry after a
    /// crash writes the same images.
    /// Only the lease holder records them, and a worker that lost its lease to another takes
    /// the IDs that one recorded.
    fn job_ids(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        count: usize,
    ) -> Result<u64, ImportError> {
        if let Some(first_id) = work.first_id {
            return Ok(first_id);
        }
        let reserved = write_lock(store).reserve_ids(count as u64)?;
        let recorded = self.db().write(|connection| {
            connection.query_value::<i64>(
                "UPDATE import_jobs SET first_id = coalesce(first_id, ?2)
                 WHERE id = ?1 AND worker = ?3 RETURNING first_id",
                params![work.id, reserved as i64, worker],
            )
        })?;
        recorded
            .map(|first_id| first_id as u64)
            .ok_or(ImportError::LeaseLost)
    }

    fn process_manifest(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let mut present = Vec::new();
        let mut processed_before = Vec::new();
        for key in &work.sessions {
            let path = self.session_path(work.user_id, key);
            if path.exists() {
                present.push(key.clone());
            } else {
                processed_before.push(key.clone());
            }
        }
        let first_id = self.job_ids(store, work, worker, present.len().max(1))?;
        let sources = SessionFiles {
            uploads: self,
            user_id: work.user_id,
            keys: &present,
        };
        let earlier = self.images_of_sessions(work.user_id, &processed_before)?;
        let published = Publish {
            work,
            worker,
            first_id,
            session_keys: &present,
            earlier: &earlier,
        };
        self.run(store, &published, &sources, interrupt)?;
        for key in &present {
            let _ = std::fs::remove_file(self.session_path(work.user_id, key));
        }
        self.release_sessions(work.user_id, &present)
    }

    fn process_zip(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let (key, path) = self.single_file(work, "archive")?;
        let archive = ZipEntries::open(&path, self.zip_budget())?;
        self.run_single(
            store,
            work,
            worker,
            &archive,
            archive.names.len(),
            interrupt,
        )?;
        self.release_single(work, key, &path)
    }

    /// An uploaded video: its frames sampled and decoded into a scratch folder (removed after),
    /// then imported as one sequence like a zip's pictures.
    fn process_video(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let (key, path) = self.single_file(work, "video")?;
        let scratch = self
            .data_dir
            .join("video-frames")
            .join(format!("job-{}", work.id));
        let _ = std::fs::remove_dir_all(&scratch);
        let mut options = crate::VideoOptions::default();
        options.limits.timeout = self.limits.job_time_limit;
        let frames = crate::video::frames_named(
            &path,
            key,
            &scratch,
            &options,
            streetlevel_model::Timestamp(work.created_at),
        )
        .map_err(ImportError::InvalidUpload);
        let result = frames.and_then(|frames| {
            let frames = crate::video::Frames(frames);
            self.run_single(store, work, worker, &frames, frames.0.len(), interrupt)
        });
        let _ = std::fs::remove_dir_all(&scratch);
        result?;
        self.release_single(work, key, &path)
    }

    /// The one uploaded file of a zip's or a video's job (`what` names it in the refusal): its
    /// session key and where its bytes are, refused when an earlier job already took them.
    fn single_file<'a>(
        &self,
        work: &'a PendingJob,
        what: &str,
    ) -> Result<(&'a String, PathBuf), ImportError> {
        let Some(key) = work.sessions.first() else {
            return Err(ImportError::InvalidUpload(format!("no {what}")));
        };
        let path = self.session_path(work.user_id, key);
        if !path.exists() {
            return Err(ImportError::InvalidUpload(format!(
                "the {what} was processed by an earlier job"
            )));
        }
        Ok((key, path))
    }

    /// Publishes the `count` pictures `sources` reads from a job's one file, under `worker`'s
    /// lease, with the job's IDs reserved first.
    fn run_single(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        sources: &dyn Sources,
        count: usize,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let first_id = self.job_ids(store, work, worker, count.max(1))?;
        let published = Publish {
            work,
            worker,
            first_id,
            session_keys: &[],
            earlier: &[],
        };
        self.run(store, &published, sources, interrupt)
    }

    /// After a job's one file was published: its bytes removed and its session released.
    fn release_single(
        &self,
        work: &PendingJob,
        key: &String,
        path: &Path,
    ) -> Result<(), ImportError> {
        let _ = std::fs::remove_file(path);
        self.release_sessions(work.user_id, std::slice::from_ref(key))
    }

    /// Runs the pipeline and, in the transaction that publishes the images, marks the job
    /// published with its counts and records which image each session became. Once the job
    /// is interrupted no file is read, and that transaction refuses to commit, so an
    /// interrupted job publishes nothing; it also refuses when the job's lease is no longer
    /// the worker's, so a job is published once, by its lease holder.
    fn run(
        &self,
        store: &RwLock<Store>,
        published: &Publish<'_>,
        sources: &dyn Sources,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let Publish {
            work,
            worker,
            first_id,
            session_keys,
            earlier,
        } = *published;
        if let Some(organization) = work.owner.organization
            && read_lock(store).organization(organization).is_none()
        {
            return Err(ImportError::UnknownOrganization(organization.0));
        }
        let job = work.id;
        let sequence_key = move |index: usize| derived_sequence_key(job, index);
        let run = Run {
            store,
            data_dir: &self.data_dir,
            media_dir: &Store::media_dir(&self.data_dir),
            blurring: &self.blurring,
            owner: &work.owner,
            grouping: Grouping::OneSequence,
            first_id: Some(first_id),
            sequence_key: &sequence_key,
            one_batch: true,
            progress: &|_: Progress| {},
            thumbnail_nanos: std::sync::atomic::AtomicU64::new(0),
            blur_nanos: std::sync::atomic::AtomicU64::new(0),
            held: std::sync::Mutex::new(None),
        };
        let user_id = work.user_id as i64;
        let sources = Budgeted {
            inner: sources,
            interrupt,
        };
        run.import(
            &sources,
            Some(Box::new(|transaction, outcome, files| {
                if interrupt.why().is_some() {
                    return Err(DbError::Statement(String::from("the job was interrupted")));
                }
                let pairs = outcome
                    .inserted
                    .iter()
                    .map(|&id| (id, id))
                    .chain(outcome.duplicates.iter().copied());
                for (id, image) in pairs {
                    if let Some(key) = session_keys.get((id.0 - first_id) as usize) {
                        transaction.execute(
                            "UPDATE import_sessions SET image = ?3 WHERE user_id = ?1 AND key = ?2",
                            streetlevel_db::params![user_id, key, image.0 as i64],
                        )?;
                    }
                }
                // The counts in the same write as the state: whoever reads the job published
                // reads its final counts.
                let (duplicates, refused) = counts(earlier, files);
                let time_sources: serde_json::Map<String, serde_json::Value> =
                    crate::notes::time_source_counts(files)
                        .into_iter()
                        .map(|(source, count)| (source.as_str().to_owned(), count.into()))
                        .collect();
                let marked = transaction.execute(
                    "UPDATE import_jobs SET state = 'published', reason = NULL, images = ?2,
                        duplicates = ?3, refused = ?4, updated_at = ?5, time_sources = ?6,
                        warnings = ?7, lease_until = NULL
                     WHERE id = ?1 AND state = 'processing' AND worker = ?8",
                    streetlevel_db::params![
                        job,
                        outcome.inserted.len() as i64,
                        duplicates,
                        &serde_json::to_string(&refused).unwrap_or_default(),
                        now_millis(),
                        &serde_json::Value::Object(time_sources).to_string(),
                        &serde_json::to_string(&crate::notes::warnings(files)).unwrap_or_default(),
                        worker
                    ],
                )?;
                if marked != 1 {
                    return Err(DbError::Statement(String::from(
                        "the job's lease is another worker's",
                    )));
                }
                Ok(())
            })),
        )?;
        Ok(())
    }

    /// The image each session became when an earlier job processed it.
    fn images_of_sessions(
        &self,
        user_id: u64,
        keys: &[String],
    ) -> Result<Vec<(String, Option<ImageId>)>, ImportError> {
        self.db().read(|connection| {
            keys.iter()
                .map(|key| {
                    let image: Option<i64> = connection
                        .query_value::<Option<i64>>(
                            "SELECT image FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                            params![user_id as i64, key],
                        )?
                        .flatten();
                    Ok((key.clone(), image.map(|id| ImageId(id as u64))))
                })
                .collect()
        })
    }
}

struct PendingJob {
    id: i64,
    user_id: u64,
    owner: Owner,
    sessions: Vec<String>,
    first_id: Option<u64>,
    /// When the finish call queued it (milliseconds since the epoch): a video's clock of last
    /// resort, the same when a crashed job is redone.
    created_at: i64,
}

/// A job, as [`Uploads::run`] publishes it.
#[derive(Clone, Copy)]
struct Publish<'a> {
    work: &'a PendingJob,
    /// The worker that must still hold the job's lease when it is published.
    worker: &'a str,
    first_id: u64,
    /// The sessions the files are, in order (a manifest's; none for a zip).
    session_keys: &'a [String],
    /// What an earlier job made of the manifest's other sessions.
    earlier: &'a [(String, Option<ImageId>)],
}

/// A claimed job and its file type, from `RETURNING id, user_id, username, organization,
/// file_type, sessions, first_id, created_at`.
fn pending_job(row: &dyn Row) -> Result<(PendingJob, String), DbError> {
    let sessions: String = row.get(5)?;
    let file_type: String = row.get(4)?;
    let work = PendingJob {
        id: row.get(0)?,
        user_id: row.get::<i64>(1)? as u64,
        owner: Owner {
            username: row.get(2)?,
            organization: row
                .get::<Option<i64>>(3)?
                .map(|id| OrganizationId(id as u64)),
        },
        sessions: serde_json::from_str(&sessions).unwrap_or_default(),
        first_id: row.get::<Option<i64>>(6)?.map(|id| id as u64),
        created_at: row.get(7)?,
    };
    Ok((work, file_type))
}

/// A name for a worker, unique among every process sharing the database: the process ID for
/// the logs, and random bytes.
pub(crate) fn worker_name() -> String {
    let bytes: [u8; 8] = rand::random();
    format!("{}-{}", std::process::id(), hex::encode(bytes))
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The handles a manifest lists: JSON with 1 to [`MAX_JOB_IMAGES`] of them.
pub(crate) fn parse_manifest(text: &[u8]) -> Result<Manifest, ImportError> {
    let manifest: Manifest = serde_json::from_slice(text).map_err(|error| {
        ImportError::InvalidUpload(format!("the manifest is not valid JSON: {error}"))
    })?;
    if manifest.image_handles.is_empty() || manifest.image_handles.len() > MAX_JOB_IMAGES {
        return Err(ImportError::InvalidUpload(format!(
            "a manifest lists 1 to {MAX_JOB_IMAGES} image handles"
        )));
    }
    Ok(manifest)
}

/// A job's duplicates and refused files: the sessions an earlier job processed (duplicates if
/// their image exists, refused if their bytes are gone) and this run's files.
fn counts(
    earlier: &[(String, Option<ImageId>)],
    files: &[FileOutcome],
) -> (i64, Vec<(String, String)>) {
    let mut duplicates = 0;
    let mut refused = Vec::new();
    for (key, image) in earlier {
        if image.is_some() {
            duplicates += 1;
        } else {
            refused.push((key.clone(), String::from("its bytes are no longer stored")));
        }
    }
    for file in files {
        match &file.outcome {
            Outcome::Duplicate(_) => duplicates += 1,
            Outcome::Refused(reason) => refused.push((file.file.clone(), reason.clone())),
            Outcome::Imported(_) => {}
        }
    }
    (duplicates, refused)
}

/// The `time_sources` column: a JSON object of counts, in the order of `TimeSource::ALL`.
fn time_sources_of(text: &str) -> Vec<(String, u64)> {
    let counts: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).unwrap_or_default();
    streetlevel_ingest::TimeSource::ALL
        .iter()
        .filter_map(|source| {
            let count = counts.get(source.as_str())?.as_u64()?;
            Some((source.as_str().to_owned(), count))
        })
        .collect()
}

/// A sequence key (22 letters and digits, like the original service's) that depends only on
/// the job and the sequence's position in it, so a retried job writes the same keys.
pub(crate) fn derived_sequence_key(job: i64, index: usize) -> SequenceId {
    let digest = Sha256::digest(format!("streetlevel upload {job} sequence {index}").as_bytes());
    SequenceId(base62(&digest, 22))
}

pub(crate) fn base62(bytes: &[u8], length: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    bytes
        .iter()
        .cycle()
        .take(length)
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect()
}

struct SessionFiles<'a> {
    uploads: &'a Uploads,
    user_id: u64,
    keys: &'a [String],
}

impl Sources for SessionFiles<'_> {
    fn len(&self) -> usize {
        self.keys.len()
    }

    fn name(&self, index: usize) -> String {
        self.keys[index].clone()
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        std::fs::read(self.uploads.session_path(self.user_id, &self.keys[index]))
            .map_err(|error| format!("cannot read the upload: {error}"))
    }
}

/// The JPEG entries of a zip archive, read one at a time.
struct ZipEntries {
    archive: Mutex<zip::ZipArchive<std::fs::File>>,
    names: Vec<(usize, String)>,
}

impl ZipEntries {
    fn open(path: &Path, budget: ZipBudget) -> Result<Self, ImportError> {
        let archive = open_zip(path, budget)?;
        let names = jpeg_entries(&archive)?;
        Ok(ZipEntries {
            archive: Mutex::new(archive),
            names,
        })
    }
}

/// `2.jpg` before `10.jpg`: the uploader numbers entries in capture order.
fn natural_key(name: &str) -> (u64, String) {
    let stem = name.split('.').next().unwrap_or(name);
    (stem.parse().unwrap_or(u64::MAX), name.to_owned())
}

impl Sources for ZipEntries {
    fn len(&self) -> usize {
        self.names.len()
    }

    fn name(&self, index: usize) -> String {
        self.names[index].1.clone()
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        let mut archive = self.archive.lock().unwrap_or_else(PoisonError::into_inner);
        read_zip_entry(&mut archive, self.names[index].0)
    }
}

/// The JPEG entries of an archive [`open_zip`] accepted, as a job takes them: their indexes
/// and names, in capture order (1 to [`MAX_JOB_IMAGES`]).
pub(crate) fn jpeg_entries<R: std::io::Read + std::io::Seek>(
    archive: &zip::ZipArchive<R>,
) -> Result<Vec<(usize, String)>, ImportError> {
    let mut names: Vec<(usize, String)> = (0..archive.len())
        .filter_map(|index| {
            let name = archive.name_for_index(index)?;
            crate::files::is_jpeg_name(Path::new(name)).then(|| (index, name.to_owned()))
        })
        .collect();
    if names.is_empty() || names.len() > MAX_JOB_IMAGES {
        return Err(ImportError::InvalidUpload(format!(
            "an archive holds 1 to {MAX_JOB_IMAGES} JPEG files"
        )));
    }
    names.sort_by_key(|(_, name)| natural_key(name));
    Ok(names)
}

/// The bytes of entry `index`, inflated no further than the size the directory declares (and
/// the budget checked) nor [`MAX_ZIP_ENTRY_BYTES`].
pub(crate) fn read_zip_entry<R: std::io::Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    index: usize,
) -> Result<Vec<u8>, String> {
    let mut entry = archive
        .by_index(index)
        .map_err(|error| format!("cannot read the archive entry: {error}"))?;
    // The directory's sizes were checked against the budget: no entry inflates to more.
    let declared = entry.size();
    if declared > MAX_ZIP_ENTRY_BYTES {
        return Err(format!("larger than {MAX_ZIP_ENTRY_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    entry
        .by_ref()
        .take(declared + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read the archive entry: {error}"))?;
    if bytes.len() as u64 > declared {
        return Err(format!(
            "it inflates to more than the {declared} bytes the archive declares"
        ));
    }
    Ok(bytes)
}
