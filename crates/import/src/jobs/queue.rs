//! The queue's state: workers claim jobs oldest first under a lease, renew it while they
//! work, and hold (a blur service away), fail or give back a job; a lease that ran out
//! unrenewed lets another worker take the job up (crash recovery).

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use streetlevel_db::{DbError, Row, id_from_sql, params};
use streetlevel_model::OrganizationId;
use streetlevel_store::Store;

use super::FileType;
use crate::budgets::{Interrupt, Interruption};
use crate::pipeline::Owner;
use crate::{ImportError, Uploads};

/// How often the worker looks for abandoned sessions (more often when they age faster).
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

pub(super) struct PendingJob {
    pub(super) id: i64,
    pub(super) user_id: u64,
    pub(super) owner: Owner,
    pub(super) sessions: Vec<String>,
    pub(super) first_id: Option<u64>,
    /// When the finish call queued it (milliseconds since the epoch): a video's clock of last
    /// resort, the same when a crashed job is redone.
    pub(super) created_at: i64,
}

/// A claimed job and its file type, from `RETURNING id, user_id, username, organization,
/// file_type, sessions, first_id, created_at`.
fn pending_job(row: &dyn Row) -> Result<(PendingJob, String), DbError> {
    let sessions: String = row.get(5)?;
    let file_type: String = row.get(4)?;
    let work = PendingJob {
        id: row.get(0)?,
        user_id: row.get::<u64>(1)?,
        owner: Owner {
            username: row.get(2)?,
            organization: row.get::<Option<u64>>(3)?.map(OrganizationId),
        },
        sessions: serde_json::from_str(&sessions).unwrap_or_default(),
        first_id: row.get::<Option<u64>>(6)?,
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

impl Uploads {
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
    pub(super) fn claim(
        &self,
        worker: &str,
    ) -> Result<Option<(PendingJob, String, bool)>, ImportError> {
        let lease = millis(self.limits.job_lease);
        self.db().write(|connection| {
            let now = connection.now_millis()?;
            let lease_until = now.saturating_add(lease);
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
            Err(ImportError::BlurUnavailable(reason)) => {
                self.hold(job, worker, "the blur service", &reason)?;
            }
            Err(ImportError::MediaStoreUnavailable(reason)) => {
                self.hold(job, worker, "the media store", &reason)?;
            }
            // The store that holds the session's bytes (`--media-store`) could not be read.
            Err(ImportError::Io(error)) if streetlevel_media::is_unavailable(&error) => {
                self.hold(job, worker, "the media store", &error.to_string())?;
            }
            Err(error) => {
                tracing::warn!(job, %error, "an upload failed");
                self.fail_processing(job, worker, &error.to_string())?;
            }
        }
        Ok(Some(id_from_sql(job)))
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
                let lease_until = connection.now_millis()?.saturating_add(millis(lease));
                connection.execute(
                    "UPDATE import_jobs SET lease_until = ?3
                     WHERE id = ?1 AND worker = ?2 AND state = 'processing'",
                    params![job, worker, lease_until],
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
                let copies = crate::session_bytes::remove_stale_copies(
                    &self.data_dir,
                    self.limits.job_time_limit.saturating_mul(2),
                );
                if copies > 0 {
                    tracing::info!(copies, "stale copies of upload sessions removed");
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
    /// `blur_retry_after` has passed, with the reason the status shows: `what` (the blur
    /// service, the media store) was away, so nothing of it was published, and a later try
    /// may succeed.
    pub(super) fn hold(
        &self,
        job: i64,
        worker: &str,
        what: &str,
        reason: &str,
    ) -> Result<(), ImportError> {
        let retry_after = self.limits.blur_retry_after;
        let reason = format!(
            "waiting for {what}, nothing is published until it answers; tried again in {} s: \
             {reason}",
            retry_after.as_secs()
        );
        tracing::warn!(job, %reason, "an upload is held");
        self.db().write(|connection| {
            let now = connection.now_millis()?;
            let not_before = now.saturating_add(millis(retry_after));
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
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_jobs SET state = 'failed', reason = ?1, updated_at = ?2,
                    lease_until = NULL
                 WHERE id = ?3 AND state = 'processing' AND worker = ?4",
                params![reason, now, job, worker],
            )
        })?;
        Ok(())
    }

    /// Gives `worker`'s lease on `job` back (a stopping server): the job stays `processing`
    /// and the next worker to look, here or in another process, resumes it at once.
    fn give_back(&self, job: i64, worker: &str) -> Result<(), ImportError> {
        self.db().write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_jobs SET lease_until = NULL, updated_at = ?3
                 WHERE id = ?1 AND state = 'processing' AND worker = ?2",
                params![job, worker, now],
            )
        })?;
        Ok(())
    }
}
