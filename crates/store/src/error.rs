//! The error type of the store.

use streetlevel_model::EntityKind;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database (`SQLite` or PostgreSQL) could not be opened, read or written.
    #[error("database error: {0}")]
    Database(#[from] streetlevel_db::DbError),
    /// The data directory could not be created.
    #[error("cannot create data directory {path}: {source}")]
    DataDirectory {
        /// The directory that was to be created.
        path: std::path::PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The schema could not be brought up to date (for example, a newer build wrote it).
    #[error(transparent)]
    Migration(#[from] streetlevel_db::MigrationError),
    /// A stored row could not be turned back into an entity.
    #[error("corrupt row in {table}: {reason}")]
    CorruptRow {
        /// The table holding the row.
        table: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An insert used an ID that already belongs to an entity (of this or another kind).
    #[error("id {id} is already taken by a {existing}")]
    DuplicateId {
        /// The ID.
        id: u64,
        /// The kind of the entity that holds it.
        existing: EntityKind,
    },
    /// An insert used a key that already exists among entities without a global ID
    /// (creators, usernames, sequences).
    #[error("{what} {key} already exists")]
    DuplicateKey {
        /// What kind of key (`creator`, `username`, `sequence`).
        what: &'static str,
        /// The key.
        key: String,
    },
    /// An entity to insert is not valid (a coordinate out of range, ...).
    #[error("invalid {what} {id}: {reason}")]
    InvalidEntity {
        /// The entity kind.
        what: &'static str,
        /// Its ID.
        id: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A paging cursor that this store did not produce.
    #[error("invalid cursor {0:?}")]
    InvalidCursor(String),
    /// An S2 cell ID that is not a valid cell.
    #[error("invalid s2 cell id {0}")]
    InvalidCell(u64),
    /// A bounding box that is not finite or has its minimum above its maximum.
    #[error("invalid bounding box: {0}")]
    InvalidBoundingBox(&'static str),
    /// A tile query with an unusable tile or projection (an extent of zero, ...).
    #[error("tile error: {0}")]
    Tile(#[from] streetlevel_mvt::MvtError),
    /// The store has too many entities of one kind for its compact 32-bit indices.
    #[error("too many {0} for one store")]
    Full(&'static str),
}

impl StoreError {
    /// Whether the database could not be reached (PostgreSQL restarting, `SQLite` busy), so
    /// that the same call may succeed later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Database(error) if error.is_unavailable())
    }
}
