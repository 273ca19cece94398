//! The `import_` tables (upload sessions and jobs, blur regions), in the database the store's tables are in
//! (the data directory's `SQLite` file or PostgreSQL), so that a job is marked published in
//! the transaction that publishes its images.

use streetlevel_db::{Database, Location, Migrations};

use crate::ImportError;

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
const SQLITE_MIGRATIONS: &[&str] = &[
    "
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
",
    "
-- JSON object: how many new images took their capture time from each source.
ALTER TABLE import_jobs ADD COLUMN time_sources TEXT NOT NULL DEFAULT '{}';
-- JSON array of [file, warning] for new images (a time taken as UTC, ignored JSON members).
ALTER TABLE import_jobs ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]';
",
    "
-- The bytes counted against the user's pending limit for the session: its file's size, plus
-- what a request writing to it reserved ahead; 0 once the file is deleted.
ALTER TABLE import_sessions ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
-- The request writing to the session (any process's) and until when its lease runs.
ALTER TABLE import_sessions ADD COLUMN writer TEXT;
ALTER TABLE import_sessions ADD COLUMN writer_until INTEGER;
-- When bytes last arrived: a session left alone long enough is removed.
ALTER TABLE import_sessions ADD COLUMN touched_at INTEGER;
",
    "
-- What blurring found in each image, in the original's stored pixels: 'detector' rows from
-- the blurrer (replaced when an image is blurred again), 'edit' rows drawn by hand.
CREATE TABLE import_blur_regions (
    image_id INTEGER NOT NULL,
    source TEXT NOT NULL,
    class TEXT NOT NULL,
    score REAL,
    x INTEGER NOT NULL,
    y INTEGER NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    -- The model's file name (or the service's) and its SHA-256.
    model TEXT NOT NULL,
    model_sha256 TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX import_blur_regions_by_image ON import_blur_regions(image_id);
-- Which blurrer (models and sums) last blurred each image, and whether its unblurred
-- original is kept: `streetlevel reblur` redoes the images blurred by anything else.
CREATE TABLE import_blurred_images (
    image_id INTEGER PRIMARY KEY,
    blurred_by TEXT NOT NULL,
    unblurred_kept INTEGER NOT NULL,
    blurred_at INTEGER NOT NULL
);
",
    "
-- A job held because the external blur service was away is not taken again before this
-- time (milliseconds since the epoch).
ALTER TABLE import_jobs ADD COLUMN not_before INTEGER;
-- `streetlevel reblur --all`: the run under way, so that a rerun after an interruption
-- goes on with the images blurred before it started.
CREATE TABLE import_reblur_runs (
    id INTEGER PRIMARY KEY,
    started_at INTEGER NOT NULL,
    finished_at INTEGER
);
",
    "
-- The worker (any process's) that claimed a job and until when its lease runs: renewed while
-- it works, so only a job whose lease ran out (its worker died) is taken over by another.
-- NULL: given back by a stopping server (or never leased), to be taken at once.
ALTER TABLE import_jobs ADD COLUMN worker TEXT;
ALTER TABLE import_jobs ADD COLUMN lease_until INTEGER;
",
    "
-- Hand-drawn blur regions a removal took out (the row stays, as the record of what was
-- blurred and by what).
ALTER TABLE import_blur_regions ADD COLUMN removed_at INTEGER;
-- Blur edits from the dashboard: a box to blur ('add') or a blurred region to remove
-- ('remove'), in the original's stored pixels; 'pending' until an administrator applies or
-- refuses it (the owner's and administrators' own are applied at once).
CREATE TABLE import_blur_edits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    image_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    x INTEGER NOT NULL,
    y INTEGER NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    proposed_by TEXT NOT NULL,
    proposed_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    decided_by TEXT,
    decided_at INTEGER,
    -- The privacy request it came from, if any.
    request_id INTEGER
);
CREATE INDEX import_blur_edits_by_state ON import_blur_edits(state);
CREATE INDEX import_blur_edits_by_image ON import_blur_edits(image_id);
-- Privacy requests from anyone (the report form): what to blur or why to remove, an optional
-- box as shares of the upright picture, an optional contact; 'open' until resolved 'done'
-- or 'refused'.
CREATE TABLE import_privacy_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    image_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    box_left REAL,
    box_top REAL,
    box_width REAL,
    box_height REAL,
    contact TEXT,
    created_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    resolved_at INTEGER,
    resolved_by TEXT
);
CREATE INDEX import_privacy_requests_by_state ON import_privacy_requests(state);
",
    "
-- Whether an uploader up to 0.13 wrote the session (it sends X-Entity-Type, up to 0.12 also
-- X-Entity-Length, with every append; 0.14 neither): the key of a video it rewrote names the
-- MD5 of the camera's file, which the server never sees, not of the bytes sent.
ALTER TABLE import_sessions ADD COLUMN legacy_uploader INTEGER NOT NULL DEFAULT 0;
",
];

/// The same tables in PostgreSQL's types.
const POSTGRES_MIGRATIONS: &[&str] = &[
    "
CREATE TABLE import_sessions (
    user_id BIGINT NOT NULL,
    key TEXT NOT NULL,
    handle TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    job BIGINT,
    size BIGINT,
    image BIGINT,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE import_jobs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    user_id BIGINT NOT NULL,
    username TEXT NOT NULL,
    organization BIGINT,
    file_type TEXT NOT NULL,
    sessions TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    first_id BIGINT,
    images BIGINT NOT NULL DEFAULT 0,
    duplicates BIGINT NOT NULL DEFAULT 0,
    refused TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX import_jobs_by_state ON import_jobs(state);
CREATE INDEX import_jobs_by_user ON import_jobs(user_id);
",
    "
ALTER TABLE import_jobs ADD COLUMN time_sources TEXT NOT NULL DEFAULT '{}';
ALTER TABLE import_jobs ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]';
",
    "
ALTER TABLE import_sessions ADD COLUMN held BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN writer TEXT,
    ADD COLUMN writer_until BIGINT,
    ADD COLUMN touched_at BIGINT;
",
    "
CREATE TABLE import_blur_regions (
    image_id BIGINT NOT NULL,
    source TEXT NOT NULL,
    class TEXT NOT NULL,
    score DOUBLE PRECISION,
    x BIGINT NOT NULL,
    y BIGINT NOT NULL,
    width BIGINT NOT NULL,
    height BIGINT NOT NULL,
    model TEXT NOT NULL,
    model_sha256 TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX import_blur_regions_by_image ON import_blur_regions(image_id);
CREATE TABLE import_blurred_images (
    image_id BIGINT PRIMARY KEY,
    blurred_by TEXT NOT NULL,
    unblurred_kept BIGINT NOT NULL,
    blurred_at BIGINT NOT NULL
);
",
    "
ALTER TABLE import_jobs ADD COLUMN not_before BIGINT;
CREATE TABLE import_reblur_runs (
    id BIGINT PRIMARY KEY,
    started_at BIGINT NOT NULL,
    finished_at BIGINT
);
",
    "
ALTER TABLE import_jobs ADD COLUMN worker TEXT, ADD COLUMN lease_until BIGINT;
",
    "
ALTER TABLE import_blur_regions ADD COLUMN removed_at BIGINT;
CREATE TABLE import_blur_edits (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    image_id BIGINT NOT NULL,
    kind TEXT NOT NULL,
    x BIGINT NOT NULL,
    y BIGINT NOT NULL,
    width BIGINT NOT NULL,
    height BIGINT NOT NULL,
    proposed_by TEXT NOT NULL,
    proposed_at BIGINT NOT NULL,
    state TEXT NOT NULL,
    decided_by TEXT,
    decided_at BIGINT,
    request_id BIGINT
);
CREATE INDEX import_blur_edits_by_state ON import_blur_edits(state);
CREATE INDEX import_blur_edits_by_image ON import_blur_edits(image_id);
CREATE TABLE import_privacy_requests (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    image_id BIGINT NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    box_left DOUBLE PRECISION,
    box_top DOUBLE PRECISION,
    box_width DOUBLE PRECISION,
    box_height DOUBLE PRECISION,
    contact TEXT,
    created_at BIGINT NOT NULL,
    state TEXT NOT NULL,
    resolved_at BIGINT,
    resolved_by TEXT
);
CREATE INDEX import_privacy_requests_by_state ON import_privacy_requests(state);
",
    "
ALTER TABLE import_sessions ADD COLUMN legacy_uploader BIGINT NOT NULL DEFAULT 0;
",
];

const MIGRATIONS: Migrations<'static> = Migrations {
    sqlite: SQLITE_MIGRATIONS,
    postgres: POSTGRES_MIGRATIONS,
};

/// Opens the database and brings the `import_` tables up to date.
pub fn open(location: &Location) -> Result<Database, ImportError> {
    let database = Database::open(location)?;
    migrate(&database)?;
    Ok(database)
}

/// Brings the `import_` tables of `database` up to date.
pub fn migrate(database: &Database) -> Result<(), ImportError> {
    database.migrate("import", &MIGRATIONS)?;
    Ok(())
}
