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
//!
//! By concern: [`finish`] (a finish call becomes a job), [`queue`] (claims, leases, holds and
//! crash recovery), [`publish`] (processing and publishing a claimed job), [`sources`] (where
//! its pictures come from) and [`status`] (what users and metrics see).

mod finish;
mod publish;
mod queue;
mod sources;
mod status;

use crate::ImportError;

pub(crate) use finish::parse_manifest;
pub(crate) use publish::{base62, derived_sequence_key};
pub(crate) use queue::worker_name;
pub(crate) use sources::{jpeg_entries, read_zip_entry};
pub use status::Job;

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
