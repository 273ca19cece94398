//! The queue of reconstruction jobs, one row per sequence in `sfm_jobs`, shared by every
//! worker of every process on the database, as the upload queue is: a job is claimed with a
//! lease (the worker's name and an expiry) in a write transaction, renewed while it runs,
//! and taken over by another worker only once it ran out unrenewed; only the lease holder
//! may finish it, and a job is marked done in the transaction that writes its results.
//!
//! Jobs are found rather than sent: a sequence is queued when it has an image without a
//! mesh (never reconstructed) and its greatest image ID is above the one its last job
//! reconstructed (new images), so imports, uploads and other processes' writes all queue it
//! the same way once the store holds their images, and a restart finds what it missed.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use streetlevel_db::{Conn, Database, DbError, Param, Row, id_from_sql, id_to_sql, params};
use streetlevel_model::ImageId;
use streetlevel_store::SequenceSummary;
#[cfg(doc)]
use streetlevel_store::Store;

use crate::SfmError;

/// A job crashed (its worker's lease ran out) this many times is failed, not tried again.
const MAX_ATTEMPTS: i64 = 3;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for a worker.
    Queued,
    /// A worker holds it.
    Running,
    /// Its results are written.
    Done,
    /// It failed (the reason says why); images keep what they had.
    Failed,
    /// It could not run (no engine, too few images); images keep their GPS values.
    Skipped,
}

impl JobState {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Skipped => "skipped",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "done" => JobState::Done,
            "skipped" => JobState::Skipped,
            _ => JobState::Failed,
        }
    }
}

/// A job as the queue holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The sequence.
    pub sequence: String,
    /// Where it is.
    pub state: JobState,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// The greatest image ID reconstructed (or queued).
    pub newest_image: ImageId,
    /// How many times a worker took it.
    pub attempts: i64,
    /// Where a running job is.
    pub progress: Option<String>,
    /// The last run's report.
    pub report: Option<Value>,
    /// When it last changed (milliseconds since the epoch).
    pub updated_at: i64,
}

const JOB_COLUMNS: &str = "SELECT sequence, state, reason, newest_image, attempts, progress,
    report, updated_at FROM sfm_jobs";

fn job_of(row: &dyn Row) -> Result<Job, DbError> {
    let state: String = row.get(1)?;
    let report: Option<String> = row.get(6)?;
    Ok(Job {
        sequence: row.get(0)?,
        state: JobState::parse(&state),
        reason: row.get(2)?,
        newest_image: ImageId(id_from_sql(row.get(3)?)),
        attempts: row.get(4)?,
        progress: row.get(5)?,
        report: report.and_then(|text| serde_json::from_str(&text).ok()),
        updated_at: row.get(7)?,
    })
}

/// The queue, on the process's database.
#[derive(Debug, Clone)]
pub struct Queue {
    database: Database,
    /// How long a claim holds without renewal.
    pub lease: Duration,
    /// How long a sequence waits after it was queued (its images settle).
    pub settle: Duration,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Queue {
    /// The queue in `database`, its tables brought up to date.
    pub fn open(database: Database) -> Result<Self, SfmError> {
        crate::tables::migrate(&database)?;
        Ok(Queue {
            database,
            lease: Duration::from_secs(60),
            settle: Duration::from_secs(5),
        })
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Queues every sequence of `summaries` (the store's, [`Store::sequence_summaries`]) that
    /// has an image without a mesh and new images since its last job (or none yet), unless it
    /// waits or a worker holds it; returns the sequences queued.
    pub fn queue_new(&self, summaries: Vec<SequenceSummary>) -> Result<Vec<String>, SfmError> {
        let known: HashMap<String, (u64, JobState)> = self
            .database
            .read(|connection| {
                connection.query_map(
                    "SELECT sequence, newest_image, state FROM sfm_jobs",
                    params![],
                    |row| {
                        let state: String = row.get(2)?;
                        Ok::<_, DbError>((
                            row.get::<String>(0)?,
                            (id_from_sql(row.get(1)?), JobState::parse(&state)),
                        ))
                    },
                )
            })?
            .into_iter()
            .collect();
        let wanted: Vec<(String, u64)> = summaries
            .into_iter()
            .filter(|summary| summary.without_mesh > 0)
            .filter(|summary| {
                known
                    .get(summary.sequence.as_str())
                    .is_none_or(|&(newest, state)| {
                        summary.newest.0 > newest
                            && !matches!(state, JobState::Running | JobState::Queued)
                    })
            })
            .map(|summary| (summary.sequence.0, summary.newest.0))
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        self.queue(&wanted, self.settle)
    }

    /// Queues these sequences (with their greatest image ID) to be taken after `settle`,
    /// also ones done before; a running one is left to its worker. Returns those queued.
    pub fn queue(
        &self,
        sequences: &[(String, u64)],
        settle: Duration,
    ) -> Result<Vec<String>, SfmError> {
        let mut queued = Vec::new();
        self.database.write(|connection| {
            let now = connection.now_millis()?;
            let not_before = now.saturating_add(millis(settle));
            for (sequence, newest) in sequences {
                let changed = connection.execute(
                    "INSERT INTO sfm_jobs (sequence, state, newest_image, not_before, created_at,
                        updated_at)
                     VALUES (?1, 'queued', ?2, ?3, ?4, ?4)
                     ON CONFLICT (sequence) DO UPDATE SET state = 'queued', reason = NULL,
                        newest_image = excluded.newest_image, not_before = excluded.not_before,
                        attempts = 0, progress = NULL, worker = NULL, lease_until = NULL,
                        updated_at = excluded.updated_at
                     WHERE sfm_jobs.state <> 'running'",
                    params![sequence.as_str(), id_to_sql(*newest), not_before, now],
                )?;
                if changed > 0 {
                    queued.push(sequence.clone());
                }
            }
            Ok::<_, DbError>(())
        })?;
        Ok(queued)
    }

    /// Queues again the jobs skipped because the engine could not run (a server started
    /// since the engine was installed takes them up); returns how many.
    pub fn requeue_skipped_for_engine(&self) -> Result<usize, SfmError> {
        let pattern = format!(
            "{}%",
            crate::SfmError::EngineMissing(String::new())
                .to_string()
                .trim_end_matches(": ")
        );
        Ok(self.database.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE sfm_jobs SET state = 'queued', reason = NULL, not_before = ?1,
                    attempts = 0, updated_at = ?1
                 WHERE state = 'skipped' AND reason LIKE ?2",
                params![now, pattern.as_str()],
            )
        })?)
    }

    /// Claims the next job for `worker` (among `only` when given): the one waiting longest
    /// whose settling time passed, or a running one whose lease ran out (its worker died;
    /// one that died [`MAX_ATTEMPTS`] times is failed instead). Returns the sequence and
    /// whether it was taken over.
    pub fn claim(
        &self,
        worker: &str,
        only: Option<&[String]>,
    ) -> Result<Option<(String, bool)>, SfmError> {
        let lease = millis(self.lease);
        let filter = only.map(|sequences| {
            let placeholders: Vec<String> = (0..sequences.len())
                .map(|index| format!("?{}", index + 2))
                .collect();
            format!(" AND sequence IN ({})", placeholders.join(", "))
        });
        if only.is_some_and(<[String]>::is_empty) {
            return Ok(None);
        }
        let sql = format!(
            "SELECT sequence, state, attempts FROM sfm_jobs
             WHERE ((state = 'queued' AND not_before <= ?1)
                OR (state = 'running' AND coalesce(lease_until, 0) < ?1)){}
             ORDER BY not_before, sequence LIMIT 1",
            filter.unwrap_or_default()
        );
        self.database.write(|connection| {
            let now = connection.now_millis()?;
            let lease_until = now.saturating_add(lease);
            let mut parameters: Vec<Param<'_>> = vec![Param::from(now)];
            parameters.extend(
                only.unwrap_or_default()
                    .iter()
                    .map(|sequence| Param::from(sequence.as_str())),
            );
            loop {
                let next = connection.query_row(&sql, &parameters, |row| {
                    Ok::<_, DbError>((
                        row.get::<String>(0)?,
                        row.get::<String>(1)?,
                        row.get::<i64>(2)?,
                    ))
                })?;
                let Some((sequence, state, attempts)) = next else {
                    return Ok(None);
                };
                let taken_over = state == "running";
                if taken_over && attempts >= MAX_ATTEMPTS {
                    let reason = format!("its worker stopped {attempts} times while it ran");
                    connection.execute(
                        "UPDATE sfm_jobs SET state = 'failed', reason = ?2, worker = NULL,
                            lease_until = NULL, progress = NULL, updated_at = ?3
                         WHERE sequence = ?1",
                        params![sequence.as_str(), reason.as_str(), now],
                    )?;
                    continue;
                }
                connection.execute(
                    "UPDATE sfm_jobs SET state = 'running', worker = ?2, lease_until = ?3,
                        attempts = attempts + 1, updated_at = ?4
                     WHERE sequence = ?1",
                    params![sequence.as_str(), worker, lease_until, now],
                )?;
                return Ok::<_, SfmError>(Some((sequence, taken_over)));
            }
        })
    }

    /// Joins the jobs of `others` to `worker`'s job on `lead` (an area: sequences whose images
    /// lie near each other, reconstructed together): each row is held as the lead's is (running,
    /// by `worker`, under the lead's lease), created when the sequence had none, unless another
    /// worker holds it under a lease that has not run out (that worker's area job reconstructs
    /// it). Returns the sequences joined.
    pub fn join_area(
        &self,
        lead: &str,
        worker: &str,
        others: &[(String, u64)],
    ) -> Result<Vec<String>, SfmError> {
        let mut joined = Vec::new();
        self.database.write(|connection| {
            let now = connection.now_millis()?;
            let lease_until: Option<i64> = connection.query_row(
                "SELECT lease_until FROM sfm_jobs
                 WHERE sequence = ?1 AND worker = ?2 AND state = 'running'",
                params![lead, worker],
                |row| row.get(0),
            )?;
            let Some(lease_until) = lease_until else {
                return Ok::<_, DbError>(());
            };
            for (sequence, newest) in others {
                let changed = connection.execute(
                    "INSERT INTO sfm_jobs (sequence, state, newest_image, not_before, worker,
                        lease_until, attempts, created_at, updated_at)
                     VALUES (?1, 'running', ?2, ?3, ?4, ?5, 1, ?3, ?3)
                     ON CONFLICT (sequence) DO UPDATE SET state = 'running', reason = NULL,
                        worker = excluded.worker, lease_until = excluded.lease_until,
                        attempts = CASE WHEN sfm_jobs.state = 'running'
                            THEN sfm_jobs.attempts + 1 ELSE 1 END,
                        progress = NULL, updated_at = excluded.updated_at
                     WHERE sfm_jobs.state <> 'running' OR coalesce(sfm_jobs.lease_until, 0) < ?3",
                    params![
                        sequence.as_str(),
                        id_to_sql(*newest),
                        now,
                        worker,
                        lease_until
                    ],
                )?;
                if changed > 0 {
                    joined.push(sequence.clone());
                }
            }
            Ok(())
        })?;
        Ok(joined)
    }

    /// Renews `worker`'s lease on its job on `sequence` and the jobs joined to it (an area);
    /// `false` when the lead's is no longer `worker`'s.
    pub fn renew(&self, sequence: &str, worker: &str) -> Result<bool, SfmError> {
        let lease = millis(self.lease);
        let changed = self.database.write(|connection| {
            let until = connection.now_millis()?.saturating_add(lease);
            let changed = connection.execute(
                "UPDATE sfm_jobs SET lease_until = ?3
                 WHERE sequence = ?1 AND worker = ?2 AND state = 'running'",
                params![sequence, worker, until],
            )?;
            if changed == 1 {
                // A worker runs one job at a time: what else it holds is joined to it.
                connection.execute(
                    "UPDATE sfm_jobs SET lease_until = ?2 WHERE worker = ?1 AND state = 'running'",
                    params![worker, until],
                )?;
            }
            Ok::<_, DbError>(changed)
        })?;
        Ok(changed == 1)
    }

    /// Records where `worker`'s running job (and the jobs joined to it) is.
    pub fn progress(&self, worker: &str, progress: &str) -> Result<(), SfmError> {
        self.database.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE sfm_jobs SET progress = ?2, updated_at = ?3
                 WHERE worker = ?1 AND state = 'running'",
                params![worker, progress, now],
            )
        })?;
        Ok(())
    }

    /// Ends `worker`'s job (and the jobs joined to it) without results: failed or skipped,
    /// with the reason and the report.
    pub fn end(
        &self,
        worker: &str,
        state: JobState,
        reason: &str,
        report: Option<&Value>,
    ) -> Result<(), SfmError> {
        let report = report.map(Value::to_string);
        self.database.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE sfm_jobs SET state = ?2, reason = ?3, report = ?4, progress = NULL,
                    worker = NULL, lease_until = NULL, updated_at = ?5
                 WHERE worker = ?1 AND state = 'running'",
                params![worker, state.as_str(), reason, report.as_deref(), now],
            )
        })?;
        Ok(())
    }

    /// Gives `worker`'s job (and the jobs joined to it) back (a stopping server): the next
    /// worker to look resumes it.
    pub fn give_back(&self, worker: &str) -> Result<(), SfmError> {
        self.database.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE sfm_jobs SET lease_until = NULL, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
                    updated_at = ?2
                 WHERE worker = ?1 AND state = 'running'",
                params![worker, now],
            )
        })?;
        Ok(())
    }

    /// The job of a sequence.
    pub fn job(&self, sequence: &str) -> Result<Option<Job>, SfmError> {
        Ok(self.database.read(|connection| {
            connection.query_row(
                &format!("{JOB_COLUMNS} WHERE sequence = ?1"),
                params![sequence],
                job_of,
            )
        })?)
    }

    /// Every job, by sequence.
    pub fn jobs(&self) -> Result<Vec<Job>, SfmError> {
        Ok(self.database.read(|connection| {
            connection.query_map(
                &format!("{JOB_COLUMNS} ORDER BY sequence"),
                params![],
                job_of,
            )
        })?)
    }
}

/// Marks `worker`'s job done in the caller's transaction (the one that writes its results),
/// with the greatest image ID it reconstructed and its report; refuses (rolling the results
/// back) when the job is no longer `worker`'s.
pub(crate) fn mark_done(
    connection: &mut dyn Conn,
    sequence: &str,
    worker: &str,
    newest: u64,
    report: &Value,
) -> Result<(), DbError> {
    let now = connection.now_millis()?;
    let changed = connection.execute(
        "UPDATE sfm_jobs SET state = 'done', reason = NULL, report = ?4, progress = NULL,
            newest_image = ?3, worker = NULL, lease_until = NULL, updated_at = ?5
         WHERE sequence = ?1 AND worker = ?2 AND state = 'running'",
        params![
            sequence,
            worker,
            id_to_sql(newest),
            report.to_string().as_str(),
            now
        ],
    )?;
    if changed == 1 {
        Ok(())
    } else {
        Err(DbError::Stopped)
    }
}

/// A name for a worker, unique among every process sharing the database.
pub fn worker_name() -> String {
    let bytes: [u8; 8] = rand::random();
    format!("sfm-{}-{}", std::process::id(), hex::encode(bytes))
}
