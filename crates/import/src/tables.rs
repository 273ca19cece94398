//! The `import_` tables (upload sessions and jobs) in the shared database file.

use std::path::Path;

use rusqlite::Connection;

use crate::ImportError;

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &["
-- One row per upload session of a user: the bytes live in uploads/<user id>/<key>.
CREATE TABLE import_sessions (
    user_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    handle TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    -- The first job that took the session; from then on it accepts no more bytes.
    job INTEGER,
    -- Its size when the job took it: the offset once the file is deleted.
    size INTEGER,
    -- The image the bytes became (or were stored as before) once a job processed them; the
    -- file is then deleted, and a later manifest naming the session counts it as stored.
    image INTEGER,
    PRIMARY KEY (user_id, key)
) WITHOUT ROWID;
-- The processing queue: one row per finish_upload call. The ID is the cluster_id.
CREATE TABLE import_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    username TEXT NOT NULL,
    organization INTEGER,
    file_type TEXT NOT NULL,
    -- JSON array of the session keys to process, in capture order.
    sessions TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    -- The first of the entity IDs reserved for the job's images, kept across restarts.
    first_id INTEGER,
    images INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    -- JSON array of {file, reason} for files that were refused.
    refused TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX import_jobs_by_state ON import_jobs(state);
CREATE INDEX import_jobs_by_user ON import_jobs(user_id);
"];

/// Opens the database file and brings the `import_` tables up to date.
pub(crate) fn open(path: &Path) -> Result<Connection, ImportError> {
    let mut connection = streetlevel_sqlite::open(path)?;
    streetlevel_sqlite::migrate(&mut connection, "import", MIGRATIONS)?;
    Ok(connection)
}

/// Milliseconds since the epoch, for the tables' time columns.
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}
