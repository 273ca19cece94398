//! The error type of imports and uploads.

/// Why an import, an upload or a job could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// An upload session key that is not a plain file name.
    #[error("invalid upload session key {0:?}: use 1 to 200 letters, digits, '.', '_' or '-'")]
    InvalidKey(String),
    /// The `Offset` of an upload is not the number of bytes stored.
    #[error("offset {given} does not match the {stored} bytes stored for this session")]
    OffsetMismatch {
        /// The offset the client sent.
        given: u64,
        /// The bytes stored.
        stored: u64,
    },
    /// The session was handed to a job: its bytes can no longer change.
    #[error("upload session {0:?} is finished and takes no more bytes")]
    SessionFinished(String),
    /// Another request is writing to the session (or did until less than a lease ago).
    #[error("upload session {0:?} is being written by another request: try again when it ends")]
    SessionBusy(String),
    /// A finish call names a session that holds no bytes.
    #[error("upload session {0:?} holds no bytes: upload it before finishing")]
    SessionIncomplete(String),
    /// An upload exceeds one of the server's budgets (a zip's entries or inflated bytes).
    #[error("upload over budget: {0}")]
    OverBudget(String),
    /// A job ran longer than the server's job time limit.
    #[error("the job took longer than its time limit of {seconds} s")]
    TimeLimit {
        /// The limit in seconds.
        seconds: u64,
    },
    /// The server stopped while the job ran; it is taken again after the restart.
    #[error("the server is shutting down")]
    Interrupted,
    /// The worker's lease on the job ran out before it was renewed, so another worker may
    /// have taken the job over: this one leaves it to that one.
    #[error("another worker took the job over")]
    LeaseLost,
    /// A handle that no upload session of the caller has.
    #[error("unknown file handle {0:?}")]
    UnknownHandle(String),
    /// One upload session is larger than allowed.
    #[error("an upload session may hold at most {limit} bytes")]
    SessionTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The user's unprocessed uploads would exceed their allowance.
    #[error("the uploads waiting for processing may hold at most {limit} bytes per user")]
    QuotaExceeded {
        /// The limit in bytes.
        limit: u64,
    },
    /// The disk is full.
    #[error("no space left on the server's disk")]
    DiskFull,
    /// A finish call with a file type this server does not process.
    #[error(
        "file_type {0:?} is not supported: use mly_bundle_manifest, zip or mly_camm_video \
         (mapillary_tools 0.13 and later send every video, BlackVue's too, as mly_camm_video)"
    )]
    UnsupportedFileType(String),
    /// A session's bytes do not have the MD5 its key names (`mly_tools_<md5>.jpg`): the
    /// session was discarded, so that it is uploaded again from the start.
    #[error(
        "the bytes of upload session {key:?} have the MD5 {stored}, not the one its key names: \
         the session was discarded and nothing was published; upload the file again"
    )]
    DigestMismatch {
        /// The session's key.
        key: String,
        /// The MD5 of the bytes that were stored.
        stored: String,
    },
    /// A zip upload whose comment names another `upload_md5sum` than its key
    /// (`mly_tools_<md5>.zip`, as uploaders up to 0.13 name a zip they made): the session
    /// was discarded, so that it is uploaded again from the start.
    #[error(
        "the zip of upload session {key:?} names the MD5 {comment} in its comment \
         (upload_md5sum), not the one its key names: the session was discarded and nothing \
         was published; upload the file again"
    )]
    CommentMismatch {
        /// The session's key.
        key: String,
        /// The `upload_md5sum` the zip's comment names.
        comment: String,
    },
    /// A manifest or archive that cannot be read.
    #[error("invalid upload: {0}")]
    InvalidUpload(String),
    /// The organization named does not exist.
    #[error("unknown organization {0}")]
    UnknownOrganization(u64),
    /// An import path that cannot be read.
    #[error("cannot read {path}: {source}")]
    ReadPath {
        /// The path.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file operation failed.
    #[error("i/o error: {0}")]
    Io(std::io::Error),
    /// The upload tables failed.
    #[error("database error: {0}")]
    Database(#[from] streetlevel_db::DbError),
    /// The upload tables' schema could not be brought up to date.
    #[error(transparent)]
    Migration(#[from] streetlevel_db::MigrationError),
    /// Blurring is on and cannot run: nothing was published.
    #[error("nothing was published: {0}")]
    Blurring(String),
    /// The external blur service is away (down, timing out, overloaded): what it did not
    /// blur was not published, and the same import succeeds once it answers again.
    #[error("held until the blur service answers, nothing unblurred was published: {0}")]
    BlurUnavailable(String),
    /// The media store is away (an object store down or unreachable): what could not be
    /// written was not published, and the same import succeeds once it answers again.
    #[error("held until the media store answers, nothing without its media was published: {0}")]
    MediaStoreUnavailable(String),
    /// A blur edit or privacy request refused before anything was stored.
    #[error(transparent)]
    Privacy(crate::PrivacyRefusal),
    /// The store refused a write.
    #[error(transparent)]
    Store(#[from] streetlevel_store::StoreError),
}

impl ImportError {
    /// Whether the database or the media store could not be reached (PostgreSQL restarting, a
    /// lock not released in time, the object store down), so that the same call may succeed
    /// shortly: the uploader retries it.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        match self {
            ImportError::Database(error) => error.is_unavailable(),
            ImportError::Store(error) => error.is_unavailable(),
            // The media store, which holds the upload sessions' bytes with `--media-store`.
            ImportError::Io(error) => streetlevel_media::is_unavailable(error),
            _ => false,
        }
    }
}

impl From<std::io::Error> for ImportError {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::StorageFull {
            ImportError::DiskFull
        } else {
            ImportError::Io(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ImportError;

    #[test]
    fn a_media_store_that_is_away_is_worth_retrying_and_a_missing_file_is_not() {
        let away = std::io::Error::other(streetlevel_media::StoreUnavailable(String::from("down")));
        assert!(ImportError::from(away).is_unavailable());
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!ImportError::from(missing).is_unavailable());
    }
}
