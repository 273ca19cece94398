//! The status view of jobs: a user's jobs, one job, and the count of jobs in each state.

use streetlevel_db::{DbError, id_to_sql, params};

use super::FileType;
use super::JobState;
use crate::{ImportError, Uploads};

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

impl Uploads {
    /// The jobs of a user, newest first.
    pub fn jobs_of(&self, user_id: u64) -> Result<Vec<Job>, ImportError> {
        self.query_jobs(
            "WHERE user_id = ?1 ORDER BY id DESC LIMIT 200",
            id_to_sql(user_id),
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
        Ok(self.query_jobs("WHERE id = ?1", id_to_sql(id))?.pop())
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
                        id: row.get::<u64>(0)?,
                        user_id: row.get::<u64>(1)?,
                        file_type: FileType::parse(&file_type).unwrap_or(FileType::Manifest),
                        organization: row.get::<Option<u64>>(3)?,
                        state: JobState::parse(&row.get::<String>(4)?),
                        reason: row.get(5)?,
                        files: serde_json::from_str::<Vec<String>>(&sessions)
                            .map_or(0, |sessions| sessions.len() as u64),
                        images: row.get::<u64>(7)?,
                        duplicates: row.get::<u64>(8)?,
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
}
