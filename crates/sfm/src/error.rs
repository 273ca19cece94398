//! The crate's one error type.

use streetlevel_db::{DbError, MigrationError};
use streetlevel_store::StoreError;

/// What can go wrong reconstructing, storing or serving a reconstruction.
#[derive(Debug, thiserror::Error)]
pub enum SfmError {
    /// The engine is not installed or not usable: nothing is reconstructed, images keep their
    /// GPS values.
    #[error("the reconstruction engine cannot run: {0}")]
    EngineMissing(String),
    /// The engine ran and failed, or ran over its time.
    #[error("the reconstruction engine failed: {0}")]
    Engine(String),
    /// The engine's model files could not be read.
    #[error("the engine's model is unreadable: {0}")]
    Model(String),
    /// The model was read and refused (not a number, too far from the GPS, ...).
    #[error("the engine's model was refused: {0}")]
    Refused(String),
    /// A picture could not be had.
    #[error("image {image}: {reason}")]
    Picture {
        /// The image.
        image: u64,
        /// Why.
        reason: String,
    },
    /// A stored cluster could not be decoded.
    #[error("stored cluster {0} is corrupt")]
    CorruptCluster(u64),
    /// Stopped (the server shuts down, or another worker took the job).
    #[error("interrupted")]
    Interrupted,
    /// The job's lease was lost to another worker.
    #[error("the job's lease ran out and another worker took it")]
    LeaseLost,
    /// Files of the work directory.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The database.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The tables' schema.
    #[error(transparent)]
    Migration(#[from] MigrationError),
}

impl SfmError {
    /// Whether the database could not be reached (a 503 over HTTP, a retry for a worker).
    pub fn is_unavailable(&self) -> bool {
        match self {
            SfmError::Db(error) => error.is_unavailable(),
            SfmError::Store(error) => error.is_unavailable(),
            _ => false,
        }
    }
}
