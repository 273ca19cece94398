//! The `sfm_` tables, in the database the store's tables are in: the queue of reconstruction
//! jobs (one row per sequence), and what reconstructions derived that the store's image rows
//! do not hold: each cluster (its reference position, cameras and points) and each
//! registered image's shot (pose, scale, component, mesh). Meshes and clusters are served
//! from these rows, so deleting an image's rows is erasing its mesh and its part of every
//! cluster.

use streetlevel_db::{Database, MigrationError, Migrations};

const SQLITE_MIGRATIONS: &[&str] = &["
-- One row per sequence: its reconstruction job, queued when images were published.
CREATE TABLE sfm_jobs (
    sequence TEXT PRIMARY KEY,
    -- 'queued', 'running', 'done', 'failed' or 'skipped' (the engine is missing, too few
    -- images): `reason` says why.
    state TEXT NOT NULL,
    reason TEXT,
    -- The greatest image ID the sequence had when the job was queued: a sequence whose
    -- greatest ID grew since (new images) is queued again.
    newest_image INTEGER NOT NULL,
    -- Not taken before (milliseconds since the epoch): uploads of one sequence settle first.
    not_before INTEGER NOT NULL,
    worker TEXT,
    lease_until INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    -- Where a running job is ('part 2 of 5: extract'), and the report of the last run (JSON).
    progress TEXT,
    report TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX sfm_jobs_by_state ON sfm_jobs(state);
-- One row per reconstruction (an atomic reconstruction of a part of a sequence), served as
-- an image's `sfm_cluster`.
CREATE TABLE sfm_clusters (
    id INTEGER PRIMARY KEY,
    sequence TEXT NOT NULL,
    reference_lat REAL NOT NULL,
    reference_lon REAL NOT NULL,
    reference_alt REAL NOT NULL,
    -- JSON object of the cameras, as the cluster's `cameras` member.
    cameras TEXT NOT NULL,
    -- The points (zlib): east, north, up from the reference, colour, and the images that
    -- observe each (see `cluster.rs`).
    points BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX sfm_clusters_by_sequence ON sfm_clusters(sequence);
-- One row per registered image: its shot in its cluster.
CREATE TABLE sfm_shots (
    image_id INTEGER PRIMARY KEY,
    cluster INTEGER NOT NULL,
    mesh INTEGER NOT NULL UNIQUE,
    camera TEXT NOT NULL,
    -- World (east-north-up at the cluster's reference) to camera: angle-axis and
    -- translation, metres.
    rotation_x REAL NOT NULL,
    rotation_y REAL NOT NULL,
    rotation_z REAL NOT NULL,
    translation_x REAL NOT NULL,
    translation_y REAL NOT NULL,
    translation_z REAL NOT NULL,
    -- The GPS position in the same frame.
    gps_x REAL NOT NULL,
    gps_y REAL NOT NULL,
    gps_z REAL NOT NULL,
    scale REAL NOT NULL,
    merge_cc INTEGER NOT NULL,
    capture_time INTEGER NOT NULL,
    compass REAL
);
CREATE INDEX sfm_shots_by_cluster ON sfm_shots(cluster);
"];

const POSTGRES_MIGRATIONS: &[&str] = &["
CREATE TABLE sfm_jobs (
    sequence TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    reason TEXT,
    newest_image BIGINT NOT NULL,
    not_before BIGINT NOT NULL,
    worker TEXT,
    lease_until BIGINT,
    attempts BIGINT NOT NULL DEFAULT 0,
    progress TEXT,
    report TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX sfm_jobs_by_state ON sfm_jobs(state);
CREATE TABLE sfm_clusters (
    id BIGINT PRIMARY KEY,
    sequence TEXT NOT NULL,
    reference_lat DOUBLE PRECISION NOT NULL,
    reference_lon DOUBLE PRECISION NOT NULL,
    reference_alt DOUBLE PRECISION NOT NULL,
    cameras TEXT NOT NULL,
    points BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX sfm_clusters_by_sequence ON sfm_clusters(sequence);
CREATE TABLE sfm_shots (
    image_id BIGINT PRIMARY KEY,
    cluster BIGINT NOT NULL,
    mesh BIGINT NOT NULL UNIQUE,
    camera TEXT NOT NULL,
    rotation_x DOUBLE PRECISION NOT NULL,
    rotation_y DOUBLE PRECISION NOT NULL,
    rotation_z DOUBLE PRECISION NOT NULL,
    translation_x DOUBLE PRECISION NOT NULL,
    translation_y DOUBLE PRECISION NOT NULL,
    translation_z DOUBLE PRECISION NOT NULL,
    gps_x DOUBLE PRECISION NOT NULL,
    gps_y DOUBLE PRECISION NOT NULL,
    gps_z DOUBLE PRECISION NOT NULL,
    scale DOUBLE PRECISION NOT NULL,
    merge_cc BIGINT NOT NULL,
    capture_time BIGINT NOT NULL,
    compass DOUBLE PRECISION
);
CREATE INDEX sfm_shots_by_cluster ON sfm_shots(cluster);
"];

const MIGRATIONS: Migrations<'static> = Migrations {
    sqlite: SQLITE_MIGRATIONS,
    postgres: POSTGRES_MIGRATIONS,
};

/// Brings the `sfm_` tables of `database` up to date.
pub fn migrate(database: &Database) -> Result<(), MigrationError> {
    database.migrate("sfm", &MIGRATIONS)
}
