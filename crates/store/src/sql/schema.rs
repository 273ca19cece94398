//! The store's schema: its tables and their migrations, one list per engine (the only SQL
//! written twice: PostgreSQL's tables carry PostGIS points and `GiST` indexes).

use streetlevel_db::{Database, Migrations};

use crate::StoreError;

/// The newest schema version this build writes.
pub const SCHEMA_VERSION: i64 = 3;

/// The channel every image write notifies in its transaction (PostgreSQL's `NOTIFY`), so
/// that other processes following the database wake up (see [`crate::Store::notifications`]).
pub const WRITES_CHANNEL: &str = "store_writes";

/// [`SCHEMA_VERSION`] as a count of migrations.
#[allow(clippy::cast_possible_truncation)] // a small positive constant
const MIGRATION_COUNT: usize = SCHEMA_VERSION as usize;

/// Migration `n` (1-based) brings the `SQLite` schema from version `n - 1` to `n`.
pub(super) const SQLITE_MIGRATIONS: [&str; MIGRATION_COUNT] = [
    "
CREATE TABLE store_creators (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE
);
CREATE TABLE store_organizations (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT
);
CREATE TABLE store_sequences (
    id TEXT PRIMARY KEY,
    creator INTEGER NOT NULL,
    organization INTEGER
);
CREATE TABLE store_images (
    id INTEGER PRIMARY KEY,
    captured_at INTEGER NOT NULL,
    lon REAL NOT NULL,
    lat REAL NOT NULL,
    computed_lon REAL,
    computed_lat REAL,
    altitude REAL,
    atomic_scale REAL,
    camera_parameters BLOB,
    camera_type TEXT,
    compass_angle REAL,
    computed_altitude REAL,
    computed_compass_angle REAL,
    computed_rotation BLOB,
    creator INTEGER NOT NULL,
    exif_orientation INTEGER,
    height INTEGER NOT NULL,
    width INTEGER NOT NULL,
    is_pano INTEGER NOT NULL,
    make TEXT,
    model TEXT,
    merge_cc INTEGER,
    mesh INTEGER,
    sequence TEXT NOT NULL,
    sfm_cluster INTEGER,
    quality_score REAL,
    organization INTEGER
);
CREATE TABLE store_map_features (
    id INTEGER PRIMARY KEY,
    aligned_direction REAL,
    first_seen_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    object_value TEXT NOT NULL,
    object_type TEXT NOT NULL,
    lon REAL NOT NULL,
    lat REAL NOT NULL,
    images BLOB NOT NULL
);
CREATE TABLE store_detections (
    id INTEGER PRIMARY KEY,
    created_at INTEGER NOT NULL,
    geometry TEXT NOT NULL,
    image INTEGER NOT NULL,
    value TEXT NOT NULL,
    map_feature INTEGER
);
",
    "
-- The original's SHA-256 of every imported image: importing the same file again adds nothing.
CREATE TABLE store_image_hashes (
    sha256 BLOB PRIMARY KEY,
    image INTEGER NOT NULL
) WITHOUT ROWID;
-- The next entity ID any writer (server, import, fixtures) may hand out; one row.
CREATE TABLE store_next_id (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 0),
    next INTEGER NOT NULL
);
-- One row per committed image write, so that other processes on the same file can follow.
CREATE TABLE store_writes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    first_image INTEGER NOT NULL,
    last_image INTEGER NOT NULL
);
",
    "
-- Withdrawn from public view by its owner or an administrator (1), or public (0).
ALTER TABLE store_images ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
-- Who took what down or restored it, and when: no content of the images, only the ID asked
-- for (an image, a sequence or an upload) and how many images it covered.
CREATE TABLE store_takedowns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT NOT NULL,
    images INTEGER NOT NULL
);
",
];

/// The same tables in PostgreSQL's types, step for step. Images and map features carry
/// PostGIS points generated from their coordinates (so inserts stay the same statements as on
/// `SQLite`), indexed with `GiST`. `CREATE EXTENSION` needs a role that may create it; where the
/// role may not, an administrator creates PostGIS in the database beforehand and this step
/// finds it there.
pub(super) const POSTGRES_MIGRATIONS: [&str; MIGRATION_COUNT] = [
    "
CREATE EXTENSION IF NOT EXISTS postgis;
CREATE TABLE store_creators (
    id BIGINT PRIMARY KEY,
    username TEXT NOT NULL UNIQUE
);
CREATE TABLE store_organizations (
    id BIGINT PRIMARY KEY,
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT
);
CREATE TABLE store_sequences (
    id TEXT PRIMARY KEY,
    creator BIGINT NOT NULL,
    organization BIGINT
);
CREATE TABLE store_images (
    id BIGINT PRIMARY KEY,
    captured_at BIGINT NOT NULL,
    lon DOUBLE PRECISION NOT NULL,
    lat DOUBLE PRECISION NOT NULL,
    computed_lon DOUBLE PRECISION,
    computed_lat DOUBLE PRECISION,
    altitude DOUBLE PRECISION,
    atomic_scale DOUBLE PRECISION,
    camera_parameters BYTEA,
    camera_type TEXT,
    compass_angle DOUBLE PRECISION,
    computed_altitude DOUBLE PRECISION,
    computed_compass_angle DOUBLE PRECISION,
    computed_rotation BYTEA,
    creator BIGINT NOT NULL,
    exif_orientation INTEGER,
    height BIGINT NOT NULL,
    width BIGINT NOT NULL,
    is_pano INTEGER NOT NULL,
    make TEXT,
    model TEXT,
    merge_cc BIGINT,
    mesh BIGINT,
    sequence TEXT NOT NULL,
    sfm_cluster BIGINT,
    quality_score DOUBLE PRECISION,
    organization BIGINT,
    geom geometry(Point, 4326) GENERATED ALWAYS AS
        (ST_SetSRID(ST_MakePoint(lon, lat), 4326)) STORED,
    -- NULL where the image has no computed location (ST_MakePoint is strict).
    computed_geom geometry(Point, 4326) GENERATED ALWAYS AS
        (ST_SetSRID(ST_MakePoint(computed_lon, computed_lat), 4326)) STORED
);
CREATE INDEX store_images_geom ON store_images USING GIST (geom);
CREATE INDEX store_images_computed_geom ON store_images USING GIST (computed_geom);
CREATE TABLE store_map_features (
    id BIGINT PRIMARY KEY,
    aligned_direction DOUBLE PRECISION,
    first_seen_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    object_value TEXT NOT NULL,
    object_type TEXT NOT NULL,
    lon DOUBLE PRECISION NOT NULL,
    lat DOUBLE PRECISION NOT NULL,
    images BYTEA NOT NULL,
    geom geometry(Point, 4326) GENERATED ALWAYS AS
        (ST_SetSRID(ST_MakePoint(lon, lat), 4326)) STORED
);
CREATE INDEX store_map_features_geom ON store_map_features USING GIST (geom);
CREATE TABLE store_detections (
    id BIGINT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    geometry TEXT NOT NULL,
    image BIGINT NOT NULL,
    value TEXT NOT NULL,
    map_feature BIGINT
);
",
    "
-- The original's SHA-256 of every imported image: importing the same file again adds nothing.
CREATE TABLE store_image_hashes (
    sha256 BYTEA PRIMARY KEY,
    image BIGINT NOT NULL
);
-- The next entity ID any writer (server, import, fixtures) may hand out; one row.
CREATE TABLE store_next_id (
    singleton BIGINT PRIMARY KEY CHECK (singleton = 0),
    next BIGINT NOT NULL
);
-- One row per committed image write, so that other processes can follow. Writers exclude
-- each other (`Database::write`), so sequence numbers are taken in commit order.
CREATE TABLE store_writes (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    first_image BIGINT NOT NULL,
    last_image BIGINT NOT NULL
);
",
    "
ALTER TABLE store_images ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
CREATE TABLE store_takedowns (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT NOT NULL,
    images BIGINT NOT NULL
);
",
];

/// The store's schema steps for both engines.
pub(crate) const MIGRATIONS: Migrations<'static> = Migrations {
    sqlite: &SQLITE_MIGRATIONS,
    postgres: &POSTGRES_MIGRATIONS,
};

/// Brings the store's tables in `database` to the newest schema (`SQLite` connections come
/// from `streetlevel-db` with WAL, a busy timeout and `synchronous = NORMAL`).
pub(crate) fn migrate(database: &Database) -> Result<(), StoreError> {
    database.migrate("store", &MIGRATIONS)?;
    Ok(())
}
