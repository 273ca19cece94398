//! The one error type of the crate: why a picture cannot be blurred, or a blurrer not made.

use std::path::PathBuf;

/// Why blurring cannot go on. Every variant is a reason to publish nothing: a caller that
/// gets one keeps the picture unpublished and shows the message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlurError {
    /// The ONNX Runtime shared library cannot be loaded.
    #[error("cannot load the ONNX Runtime library {path}: {reason}")]
    Runtime {
        /// The library file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A model file cannot be read.
    #[error("cannot read the model {path}: {source}")]
    ModelFile {
        /// The model file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A model file is not the one pinned.
    #[error("the model {path} has SHA-256 {actual}, not the pinned {expected}")]
    ModelHash {
        /// The model file.
        path: PathBuf,
        /// The pinned sum.
        expected: String,
        /// The file's sum.
        actual: String,
    },
    /// A model the runtime refuses, or whose inputs and outputs are of no known family.
    #[error("unusable model {name}: {reason}")]
    Model {
        /// The model's file name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Running a model failed.
    #[error("the model {name} failed: {reason}")]
    Inference {
        /// The model's file name.
        name: String,
        /// What went wrong.
        reason: String,
    },
    /// The picture cannot be decoded.
    #[error("cannot decode the picture: {0}")]
    Decode(String),
    /// The picture has more pixels than are ever decoded.
    #[error("the picture has {width}x{height} pixels, more than the {limit} allowed")]
    TooManyPixels {
        /// Stored width.
        width: u32,
        /// Stored height.
        height: u32,
        /// [`crate::MAX_PIXELS`].
        limit: u64,
    },
    /// The blurred picture cannot be encoded.
    #[error("cannot encode the blurred picture: {0}")]
    Encode(String),
    /// A blurrer that is not a local model (an external service) refused the picture; its
    /// own words. Trying the same picture again gives the same answer.
    #[error("{0}")]
    Service(String),
    /// An external blur service cannot be reached, timed out or is overloaded: the picture
    /// must wait (nothing of it published) and be tried again later.
    #[error("{0}")]
    Unavailable(String),
}

impl BlurError {
    /// Whether a later try of the same picture may succeed: the picture is held, not refused.
    pub fn is_transient(&self) -> bool {
        matches!(self, BlurError::Unavailable(_))
    }
}
