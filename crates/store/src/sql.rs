//! The store's SQL: the schema and its migrations for each engine, loading at start-up, the
//! write-through inserts and following other processes' writes. Every statement is written
//! once, with `?N` placeholders, and runs on `SQLite` and on PostgreSQL through
//! `streetlevel-db`; only the schema steps differ. Tables are prefixed `store_` because other
//! crates (auth) keep their own tables in the same database.
//!
//! Unsigned 64-bit IDs are stored as their two's-complement `i64`; float lists as
//! little-endian `f64` blobs so that values read back bit for bit; booleans as integers.
//! On PostgreSQL the images and map features also carry PostGIS points (`geom`, and
//! `computed_geom` for images), generated from the coordinates by the database, with `GiST`
//! indexes, for GIS tools: the store's own statements never name them.

use std::path::Path;

use streetlevel_db::sqlite_file::Reader;
use streetlevel_db::{Conn, Database, DbError, Location, Migrations, Row, params};
use streetlevel_model::{
    CameraType, Creator, CreatorId, Detection, DetectionId, EntityId, EntityKind, Image, ImageId,
    MapFeature, MapFeatureId, ObjectType, Organization, OrganizationId, Point, Sequence,
    SequenceId, Timestamp,
};

use crate::image_record::{NONE, RecordNames, RecordValues};
use crate::records::Records;
use crate::takedown::{TakedownAction, TakedownRecord};
use crate::{Store, StoreError};

/// The newest schema version this build writes.
pub const SCHEMA_VERSION: i64 = 3;

/// The channel every image write notifies in its transaction (PostgreSQL's `NOTIFY`), so
/// that other processes following the database wake up (see [`Store::notifications`]).
pub const WRITES_CHANNEL: &str = "store_writes";

/// Migration `n` (1-based) brings the `SQLite` schema from version `n - 1` to `n`.
const SQLITE_MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
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
const POSTGRES_MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
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

fn to_sql_id(id: u64) -> i64 {
    id as i64
}

fn from_sql_id(id: i64) -> u64 {
    id as u64
}

fn floats_to_blob(values: &[f64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

fn ids_to_blob(ids: &[ImageId]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.0.to_le_bytes()).collect()
}

fn blob_to_ids(table: &'static str, blob: &[u8]) -> Result<Vec<ImageId>, StoreError> {
    if !blob.len().is_multiple_of(8) {
        return Err(StoreError::CorruptRow {
            table,
            reason: format!("id blob of {} bytes", blob.len()),
        });
    }
    Ok(blob
        .chunks_exact(8)
        .map(|chunk| {
            let mut bytes = [0; 8];
            bytes.copy_from_slice(chunk);
            ImageId(u64::from_le_bytes(bytes))
        })
        .collect())
}

/// NaN has no SQL form; it is stored as NULL (and reads back as `None`, as in memory).
fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|value| !value.is_nan())
}

/// An integer column's value as a narrower type.
fn narrow<T: TryFrom<i64>>(table: &'static str, column: &str, value: i64) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::CorruptRow {
        table,
        reason: format!("{column} {value} out of range"),
    })
}

pub(crate) fn insert_creators(
    connection: &mut dyn Conn,
    creators: &[Creator],
) -> Result<(), StoreError> {
    for creator in creators {
        connection.execute(
            "INSERT INTO store_creators (id, username) VALUES (?1, ?2)",
            params![to_sql_id(creator.id.0), &creator.username],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_organizations(
    connection: &mut dyn Conn,
    organizations: &[Organization],
) -> Result<(), StoreError> {
    for organization in organizations {
        connection.execute(
            "INSERT INTO store_organizations (id, slug, name, description)
             VALUES (?1, ?2, ?3, ?4)",
            params![
                to_sql_id(organization.id.0),
                &organization.slug,
                &organization.name,
                organization.description.as_deref()
            ],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_sequences(
    connection: &mut dyn Conn,
    sequences: &[Sequence],
) -> Result<(), StoreError> {
    for sequence in sequences {
        connection.execute(
            "INSERT INTO store_sequences (id, creator, organization) VALUES (?1, ?2, ?3)",
            params![
                sequence.id.as_str(),
                to_sql_id(sequence.creator.0),
                sequence.organization.map(|id| to_sql_id(id.0))
            ],
        )?;
    }
    Ok(())
}

const INSERT_IMAGE: &str = "INSERT INTO store_images (id, captured_at, lon, lat, computed_lon,
    computed_lat, altitude, atomic_scale, camera_parameters, camera_type, compass_angle,
    computed_altitude, computed_compass_angle, computed_rotation, creator, exif_orientation,
    height, width, is_pano, make, model, merge_cc, mesh, sequence, sfm_cluster, quality_score,
    organization)
 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
    ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)";

/// Inserts images and logs the write (see [`log_write`]).
pub(crate) fn insert_images(connection: &mut dyn Conn, images: &[Image]) -> Result<(), StoreError> {
    for image in images {
        let rotation = image
            .computed_rotation
            .filter(|rotation| !rotation[0].is_nan())
            .map(|rotation| floats_to_blob(&rotation));
        let parameters = image.camera_parameters.as_deref().map(floats_to_blob);
        connection.execute(
            INSERT_IMAGE,
            params![
                to_sql_id(image.id.0),
                image.captured_at.0,
                image.geometry.lon,
                image.geometry.lat,
                image.computed_geometry.map(|point| point.lon),
                image.computed_geometry.map(|point| point.lat),
                finite(image.altitude),
                finite(image.atomic_scale),
                parameters.as_ref(),
                image.camera_type.map(CameraType::as_str),
                finite(image.compass_angle),
                finite(image.computed_altitude),
                finite(image.computed_compass_angle),
                rotation.as_ref(),
                to_sql_id(image.creator.0),
                image.exif_orientation,
                image.height,
                image.width,
                image.is_pano,
                image.make.as_deref(),
                image.model.as_deref(),
                image.merge_cc.map(to_sql_id),
                image.mesh.map(|mesh| to_sql_id(mesh.0)),
                image.sequence.as_str(),
                image.sfm_cluster.map(|cluster| to_sql_id(cluster.0)),
                finite(image.quality_score),
                image.organization.map(|id| to_sql_id(id.0)),
            ],
        )?;
    }
    log_write(connection, images.iter().map(|image| image.id))
}

/// Records that images with IDs between the least and the greatest of `ids` were written, so
/// that other processes on the same database can follow (see [`follow`]), and wakes them
/// (PostgreSQL's `NOTIFY` on [`WRITES_CHANNEL`], sent when the transaction commits).
fn log_write(
    connection: &mut dyn Conn,
    ids: impl Iterator<Item = ImageId>,
) -> Result<(), StoreError> {
    let range = ids
        .map(|id| to_sql_id(id.0))
        .fold(None, |range, id| match range {
            None => Some((id, id)),
            Some((low, high)) => Some((id.min(low), id.max(high))),
        });
    if let Some((first, last)) = range {
        connection.execute(
            "INSERT INTO store_writes (first_image, last_image) VALUES (?1, ?2)",
            params![first, last],
        )?;
        Database::notify(connection, WRITES_CHANNEL)?;
    }
    Ok(())
}

/// The newest entry of the write log (0 for none).
pub(crate) fn last_write(connection: &mut dyn Conn) -> Result<i64, StoreError> {
    Ok(connection
        .query_value("SELECT coalesce(max(seq), 0) FROM store_writes", params![])?
        .unwrap_or(0))
}

/// Hands out `count` consecutive entity IDs above every ID in the database, in memory
/// (`in_memory_next`) and handed out before, and returns the first.
pub(crate) fn reserve_ids(
    connection: &mut dyn Conn,
    count: u64,
    in_memory_next: u64,
) -> Result<u64, StoreError> {
    let stored: Option<i64> = connection.query_value(
        "SELECT next FROM store_next_id WHERE singleton = 0",
        params![],
    )?;
    let greatest: Option<i64> = connection
        .query_value::<Option<i64>>(
            "SELECT max(id) FROM (
                SELECT max(id) AS id FROM store_images UNION ALL
                SELECT max(id) FROM store_map_features UNION ALL
                SELECT max(id) FROM store_detections UNION ALL
                SELECT max(id) FROM store_organizations UNION ALL
                SELECT max(id) FROM store_creators) AS greatest",
            params![],
        )?
        .flatten();
    let first = [
        stored.map_or(1, from_sql_id),
        greatest.map_or(1, |id| from_sql_id(id) + 1),
        in_memory_next,
    ]
    .into_iter()
    .max()
    .unwrap_or(1);
    let next = first
        .checked_add(count)
        .filter(|next| i64::try_from(*next).is_ok())
        .ok_or(StoreError::Full("entity ids"))?;
    connection.execute(
        "INSERT INTO store_next_id (singleton, next) VALUES (0, ?1)
         ON CONFLICT (singleton) DO UPDATE SET next = excluded.next",
        params![to_sql_id(next)],
    )?;
    Ok(first)
}

/// The ID of the creator named `username`, if there is one.
pub(crate) fn creator_by_username(
    connection: &mut dyn Conn,
    username: &str,
) -> Result<Option<CreatorId>, StoreError> {
    let id: Option<i64> = connection.query_value(
        "SELECT id FROM store_creators WHERE username = ?1",
        params![username],
    )?;
    Ok(id.map(|id| CreatorId(from_sql_id(id))))
}

/// The image holding each content hash, where one does.
pub(crate) fn images_with_hashes(
    connection: &mut dyn Conn,
    hashes: &[[u8; 32]],
) -> Result<Vec<Option<ImageId>>, StoreError> {
    hashes
        .iter()
        .map(|hash| {
            let image: Option<i64> = connection.query_value(
                "SELECT image FROM store_image_hashes WHERE sha256 = ?1",
                params![hash.as_slice()],
            )?;
            Ok(image.map(|id| ImageId(from_sql_id(id))))
        })
        .collect()
}

pub(crate) fn insert_image_hashes(
    connection: &mut dyn Conn,
    hashes: &[([u8; 32], ImageId)],
) -> Result<(), StoreError> {
    for (hash, image) in hashes {
        connection.execute(
            "INSERT INTO store_image_hashes (sha256, image) VALUES (?1, ?2)",
            params![hash.as_slice(), to_sql_id(image.0)],
        )?;
    }
    Ok(())
}

/// Loads into `store` what other connections wrote after the write log entry `after`: the
/// images of each logged range that `store` lacks, and the creators, organizations and
/// sequences they name that it lacks. Returns the newest log entry read and how many images
/// were added. Runs in one read transaction, so the log and the rows agree.
pub(crate) fn follow(
    database: &Database,
    store: &mut Store,
    after: i64,
) -> Result<(i64, usize), StoreError> {
    database.snapshot(|connection| follow_in_transaction(connection, store, after))
}

fn follow_in_transaction(
    connection: &mut dyn Conn,
    store: &mut Store,
    after: i64,
) -> Result<(i64, usize), StoreError> {
    let writes = connection.query_map(
        "SELECT seq, first_image, last_image FROM store_writes WHERE seq > ?1 ORDER BY seq",
        params![after],
        |row| Ok::<_, StoreError>((row.get::<i64>(0)?, row.get::<i64>(1)?, row.get::<i64>(2)?)),
    )?;
    let Some(&(newest, _, _)) = writes.last() else {
        return Ok((after, 0));
    };
    let first_new = store.records.images().len();
    let mut added = std::collections::HashSet::new();
    let mut changes = FollowedChanges::default();
    let sql = format!("{IMAGE_COLUMNS} WHERE id BETWEEN ?1 AND ?2");
    let mut parameters = Vec::new();
    for (_, first, last) in writes {
        let mut in_database = std::collections::HashSet::new();
        connection.each::<StoreError>(&sql, params![first, last], |row| {
            let id = from_sql_id(row.get(0)?);
            let hidden = is_hidden_row(row)?;
            in_database.insert(id);
            if store.image(ImageId(id)).is_some() {
                if hidden {
                    changes.hidden.push(ImageId(id));
                }
                return Ok(());
            }
            if store.records.hidden_slot(id).is_some() {
                if !hidden {
                    changes.restored.push(ImageId(id));
                }
                return Ok(());
            }
            if store.kind_of(EntityId(id)).is_some() || !added.insert(id) {
                return Ok(());
            }
            let (values, names) = read_image_row(row, &mut parameters)?;
            store.records.push_image_hidden(&values, &names, hidden);
            Ok(())
        })?;
        // Images this store holds in the range that the database no longer has were erased.
        // The range is of stored (signed) IDs: from below zero to above it, it is two
        // ranges of unsigned IDs.
        let ranges = if first < 0 && last >= 0 {
            vec![(0, from_sql_id(last)), (from_sql_id(first), u64::MAX)]
        } else {
            vec![(from_sql_id(first), from_sql_id(last))]
        };
        for (low, high) in ranges {
            for id in store
                .image_ids_between(low, high)
                .into_iter()
                .filter(|id| !in_database.contains(id))
            {
                changes.erased.push(ImageId(id));
            }
        }
    }
    let new_images = store.records.images().len() - first_new;
    follow_names(connection, store, first_new)?;
    store.index_new_images(first_new);
    store.apply_followed(&changes);
    Ok((newest, new_images))
}

/// What following found other processes did to images this store holds.
#[derive(Debug, Default)]
pub(crate) struct FollowedChanges {
    /// Visible here, hidden in the database.
    pub(crate) hidden: Vec<ImageId>,
    /// Hidden here, visible in the database.
    pub(crate) restored: Vec<ImageId>,
    /// Held here (visible or hidden), gone from the database.
    pub(crate) erased: Vec<ImageId>,
}

/// Erases images with their detections, their hashes, their links from map features (each
/// changed feature's new image list in `map_features`), the sequences `emptied` (left
/// without images), logs the write and records the takedown. Raises the ID allocator's floor
/// above the erased IDs, so that an ID is never handed out twice and cursors stay valid.
pub(crate) fn erase_images(
    connection: &mut dyn Conn,
    ids: &[ImageId],
    map_features: &[(MapFeatureId, Vec<ImageId>)],
    emptied: &[SequenceId],
    takedown: &TakedownRow<'_>,
) -> Result<(), StoreError> {
    for id in ids {
        let id = to_sql_id(id.0);
        connection.execute("DELETE FROM store_images WHERE id = ?1", params![id])?;
        connection.execute("DELETE FROM store_detections WHERE image = ?1", params![id])?;
        connection.execute(
            "DELETE FROM store_image_hashes WHERE image = ?1",
            params![id],
        )?;
    }
    for (feature, images) in map_features {
        connection.execute(
            "UPDATE store_map_features SET images = ?2 WHERE id = ?1",
            params![to_sql_id(feature.0), &ids_to_blob(images)],
        )?;
    }
    for sequence in emptied {
        connection.execute(
            "DELETE FROM store_sequences WHERE id = ?1",
            params![sequence.as_str()],
        )?;
    }
    // IDs from `i64::MAX` on are never handed out: no floor to raise for them.
    if let Some(next) = ids
        .iter()
        .map(|id| id.0.saturating_add(1))
        .filter(|next| i64::try_from(*next).is_ok())
        .max()
    {
        reserve_ids(connection, 0, next)?;
    }
    log_write(connection, ids.iter().copied())?;
    insert_takedown(connection, takedown)
}

/// Sets the `hidden` flag of images, logs the write and records the takedown.
pub(crate) fn set_hidden(
    connection: &mut dyn Conn,
    ids: &[ImageId],
    hidden: bool,
    takedown: &TakedownRow<'_>,
) -> Result<(), StoreError> {
    for id in ids {
        connection.execute(
            "UPDATE store_images SET hidden = ?2 WHERE id = ?1",
            params![to_sql_id(id.0), i64::from(hidden)],
        )?;
    }
    log_write(connection, ids.iter().copied())?;
    insert_takedown(connection, takedown)
}

/// One row of `store_takedowns`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TakedownRow<'a> {
    pub(crate) at: i64,
    pub(crate) actor: &'a str,
    pub(crate) action: &'a str,
    pub(crate) subject: &'a str,
    pub(crate) images: usize,
}

fn insert_takedown(connection: &mut dyn Conn, row: &TakedownRow<'_>) -> Result<(), StoreError> {
    connection.execute(
        "INSERT INTO store_takedowns (at, actor, action, subject, images)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            row.at,
            row.actor,
            row.action,
            row.subject,
            i64::try_from(row.images).unwrap_or(i64::MAX)
        ],
    )?;
    Ok(())
}

/// The newest `limit` takedowns, newest first.
pub(crate) fn takedowns(
    connection: &mut dyn Conn,
    limit: usize,
) -> Result<Vec<TakedownRecord>, StoreError> {
    connection.query_map(
        "SELECT seq, at, actor, action, subject, images FROM store_takedowns
         ORDER BY seq DESC LIMIT ?1",
        params![i64::try_from(limit).unwrap_or(i64::MAX)],
        |row| {
            let action: String = row.get(3)?;
            Ok::<_, StoreError>(TakedownRecord {
                seq: row.get(0)?,
                at: Timestamp(row.get(1)?),
                actor: row.get(2)?,
                action: TakedownAction::parse(&action).ok_or_else(|| StoreError::CorruptRow {
                    table: "store_takedowns",
                    reason: format!("action {action:?}"),
                })?,
                subject: row.get(4)?,
                images: u64::try_from(row.get::<i64>(5)?).unwrap_or(0),
            })
        },
    )
}

/// Reads the creators, organizations and sequences that images `first_new..` name and the
/// store does not hold yet.
fn follow_names(
    connection: &mut dyn Conn,
    store: &mut Store,
    first_new: usize,
) -> Result<(), StoreError> {
    let mut creators = std::collections::BTreeSet::new();
    let mut organizations = std::collections::BTreeSet::new();
    let mut sequences = std::collections::BTreeSet::new();
    for record in &store.records.images()[first_new..] {
        let creator = store.records.creator(record.creator);
        if creator.creator.is_none() {
            creators.insert(creator.id);
        }
        if record.organization != NONE {
            let organization = store.records.organization(record.organization);
            if organization.organization.is_none() {
                organizations.insert(organization.id);
            }
        }
        let sequence = store.records.sequence(record.sequence);
        if sequence.explicit.is_none() {
            sequences.insert(sequence.id.clone());
        }
    }
    for id in creators {
        let username: Option<String> = connection.query_value(
            "SELECT username FROM store_creators WHERE id = ?1",
            params![to_sql_id(id.0)],
        )?;
        if let Some(username) = username {
            store.records.push_creator(&Creator { id, username });
        }
    }
    for id in organizations {
        let row = connection.query_row(
            "SELECT slug, name, description FROM store_organizations WHERE id = ?1",
            params![to_sql_id(id.0)],
            |row| {
                Ok::<_, StoreError>(Organization {
                    id,
                    slug: row.get(0)?,
                    name: row.get(1)?,
                    description: row.get(2)?,
                })
            },
        )?;
        if let Some(organization) = row {
            store.records.push_organization(&organization);
        }
    }
    for id in sequences {
        let row = connection.query_row(
            "SELECT creator, organization FROM store_sequences WHERE id = ?1",
            params![id.as_str()],
            |row| Ok::<_, StoreError>((row.get::<i64>(0)?, row.get::<Option<i64>>(1)?)),
        )?;
        if let Some((creator, organization)) = row {
            store.records.push_sequence(&Sequence {
                id,
                creator: CreatorId(from_sql_id(creator)),
                organization: organization.map(|id| OrganizationId(from_sql_id(id))),
                image_ids: Vec::new(),
            });
        }
    }
    Ok(())
}

pub(crate) fn insert_map_features(
    connection: &mut dyn Conn,
    features: &[MapFeature],
) -> Result<(), StoreError> {
    for feature in features {
        let images = ids_to_blob(&feature.images);
        connection.execute(
            "INSERT INTO store_map_features (id, aligned_direction, first_seen_at, last_seen_at,
                object_value, object_type, lon, lat, images)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                to_sql_id(feature.id.0),
                finite(feature.aligned_direction),
                feature.first_seen_at.0,
                feature.last_seen_at.0,
                &feature.object_value,
                feature.object_type.as_str(),
                feature.geometry.lon,
                feature.geometry.lat,
                &images,
            ],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_detections(
    connection: &mut dyn Conn,
    detections: &[Detection],
) -> Result<(), StoreError> {
    for detection in detections {
        connection.execute(
            "INSERT INTO store_detections (id, created_at, geometry, image, value, map_feature)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                to_sql_id(detection.id.0),
                detection.created_at.0,
                &detection.geometry,
                to_sql_id(detection.image.0),
                &detection.value,
                detection.map_feature.map(|id| to_sql_id(id.0)),
            ],
        )?;
    }
    Ok(())
}

/// Reads every entity into `store` (which must be empty), in one read transaction.
pub(crate) fn load(database: &Database, store: &mut Store) -> Result<(), StoreError> {
    load_with(database, store, PARALLEL_LOAD, &mut || {}).map(|_| ())
}

/// How [`load_with`] read the images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageRead {
    /// All of them through the main connection.
    OnePass,
    /// In two halves through two connections on the same snapshot.
    Halves,
}

/// [`load`], reading images in two halves from `parallel_from` images on (`SQLite` files
/// only). `after_first_read` runs once the main transaction's snapshot is fixed and before a
/// second connection opens (tests write there to play a concurrent writer).
fn load_with(
    database: &Database,
    store: &mut Store,
    parallel_from: i64,
    after_first_read: &mut dyn FnMut(),
) -> Result<ImageRead, StoreError> {
    let file = match database.location() {
        Location::Sqlite(path) if path.as_os_str() != ":memory:" => Some(path.clone()),
        _ => None,
    };
    database.snapshot(|connection| {
        load_all(
            connection,
            file.as_deref(),
            store,
            parallel_from,
            after_first_read,
        )
    })
}

fn load_all(
    connection: &mut dyn Conn,
    file: Option<&Path>,
    store: &mut Store,
    parallel_from: i64,
    after_first_read: &mut dyn FnMut(),
) -> Result<ImageRead, StoreError> {
    // The first read fixes this transaction's snapshot (WAL; PostgreSQL's repeatable read):
    // everything below, and the second connection's half of the images, must come from it.
    let newest_write = last_write(connection)?;
    store.persistence.followed_up_to(newest_write);
    after_first_read();
    let upper_half = match file {
        Some(path) if has_at_least(connection, parallel_from)? => {
            open_upper_half(connection, path, newest_write)?
        }
        _ => None,
    };

    connection.each::<StoreError>(
        "SELECT id, username FROM store_creators",
        params![],
        |row| {
            store.records.push_creator(&Creator {
                id: CreatorId(from_sql_id(row.get(0)?)),
                username: row.get(1)?,
            });
            Ok(())
        },
    )?;

    connection.each::<StoreError>(
        "SELECT id, slug, name, description FROM store_organizations",
        params![],
        |row| {
            store.records.push_organization(&Organization {
                id: OrganizationId(from_sql_id(row.get(0)?)),
                slug: row.get(1)?,
                name: row.get(2)?,
                description: row.get(3)?,
            });
            Ok(())
        },
    )?;

    connection.each::<StoreError>(
        "SELECT id, creator, organization FROM store_sequences",
        params![],
        |row| {
            store.records.push_sequence(&Sequence {
                id: SequenceId(row.get(0)?),
                creator: CreatorId(from_sql_id(row.get(1)?)),
                organization: row
                    .get::<Option<i64>>(2)?
                    .map(|id| OrganizationId(from_sql_id(id))),
                image_ids: Vec::new(),
            });
            Ok(())
        },
    )?;

    let read = load_images(connection, store, upper_half)?;
    load_map_features_and_detections(connection, store)?;
    if let Some((id, first, second)) = store.first_shared_id() {
        return Err(StoreError::CorruptRow {
            table: table_of(second),
            reason: format!("id {id} belongs to both a {first} and a {second}"),
        });
    }
    Ok(read)
}

fn load_map_features_and_detections(
    connection: &mut dyn Conn,
    store: &mut Store,
) -> Result<(), StoreError> {
    let mut features = Vec::new();
    connection.each::<StoreError>(
        "SELECT id, aligned_direction, first_seen_at, last_seen_at, object_value, object_type,
            lon, lat, images
         FROM store_map_features",
        params![],
        |row| {
            let object_type = match row.text(5)? {
                "traffic_sign" => ObjectType::TrafficSign,
                "point" => ObjectType::Point,
                other => {
                    return Err(StoreError::CorruptRow {
                        table: "store_map_features",
                        reason: format!("object type {other:?}"),
                    });
                }
            };
            let images = match row.blob_or_null(8)? {
                Some(blob) => blob_to_ids("store_map_features", blob)?,
                None => {
                    return Err(StoreError::Database(DbError::Column {
                        index: 8,
                        message: String::from("expected blob, found null"),
                    }));
                }
            };
            features.push(MapFeature {
                id: MapFeatureId(from_sql_id(row.get(0)?)),
                aligned_direction: row.get(1)?,
                first_seen_at: Timestamp(row.get(2)?),
                last_seen_at: Timestamp(row.get(3)?),
                object_value: row.get(4)?,
                object_type,
                geometry: Point::new(row.get(6)?, row.get(7)?),
                images,
            });
            Ok(())
        },
    )?;
    store.records.push_map_features(features);
    store.index_new_map_features(0);

    let mut detections = Vec::new();
    connection.each::<StoreError>(
        "SELECT id, created_at, geometry, image, value, map_feature FROM store_detections",
        params![],
        |row| {
            detections.push(Detection {
                id: DetectionId(from_sql_id(row.get(0)?)),
                created_at: Timestamp(row.get(1)?),
                geometry: row.get(2)?,
                image: ImageId(from_sql_id(row.get(3)?)),
                value: row.get(4)?,
                map_feature: row
                    .get::<Option<i64>>(5)?
                    .map(|id| MapFeatureId(from_sql_id(id))),
            });
            Ok(())
        },
    )?;
    store.records.push_detections(detections);
    store.index_new_detections(0);
    Ok(())
}

/// The table holding entities of `kind`.
fn table_of(kind: EntityKind) -> &'static str {
    match kind {
        EntityKind::Image => "store_images",
        EntityKind::MapFeature => "store_map_features",
        EntityKind::Detection => "store_detections",
        EntityKind::Organization => "store_organizations",
    }
}

/// Tables of at least this many images are read by two connections at once, each half.
const PARALLEL_LOAD: i64 = 100_000;

/// Whether the image table holds at least `count` rows: counts at most that many, where
/// `count(*)` of the whole table reads every page of it (at 10M images a tenth of loading's
/// CPU time, for a number loading does not need).
fn has_at_least(connection: &mut dyn Conn, count: i64) -> Result<bool, StoreError> {
    let counted: i64 = connection
        .query_value(
            "SELECT count(*) FROM (SELECT 1 FROM store_images LIMIT ?1) AS head",
            params![count],
        )?
        .unwrap_or(0);
    Ok(counted >= count)
}

const IMAGE_COLUMNS: &str = "SELECT id, captured_at, lon, lat, computed_lon, computed_lat,
    altitude, atomic_scale, camera_parameters, camera_type, compass_angle, computed_altitude,
    computed_compass_angle, computed_rotation, creator, exif_orientation, height, width, is_pano,
    make, model, merge_cc, mesh, sequence, sfm_cluster, quality_score, organization, hidden
    FROM store_images";

/// Whether the row of [`IMAGE_COLUMNS`] is hidden.
fn is_hidden_row(row: &dyn Row) -> Result<bool, StoreError> {
    Ok(row.int(27)? != 0)
}

/// A second read-only connection to the `SQLite` file at `path` in a read transaction on the
/// same images as `connection`'s, and the first ID of the upper half it is to read (above the
/// middle of the ID range); `None` when a writer committed between the two transactions'
/// first reads (then one connection reads everything).
///
/// This is the one place the store opens a connection of its own, because it is `SQLite`'s
/// alone: a second reader of the same file on a second core. It runs the same statements
/// through a [`Reader`].
///
/// Both transactions' snapshots are fixed by their first read (WAL), and the main one's was
/// fixed before this opens. The store only ever inserts into `store_images`, and every insert
/// appends to `store_writes` in its transaction (which [`follow`] relies on too), so a later
/// snapshot with the same newest write `newest_write` and the same greatest image ID holds
/// exactly the same images; anything else means the halves could disagree. (Erasing, hiding
/// and restoring images append to `store_writes` too, so they change the newest write.) (Comparing the
/// counts of images instead took two scans of the table, a tenth of loading's CPU time.)
fn open_upper_half(
    connection: &mut dyn Conn,
    path: &Path,
    newest_write: i64,
) -> Result<Option<(Reader, i64)>, StoreError> {
    let upper = Reader::open(path)?;
    let mut upper_connection = upper.conn();
    let upper_connection: &mut dyn Conn = &mut upper_connection;
    let (upper_write, upper_high) = upper_connection
        .query_row(
            "SELECT (SELECT coalesce(max(seq), 0) FROM store_writes),
                (SELECT max(id) FROM store_images)",
            params![],
            |row| Ok::<_, StoreError>((row.get::<i64>(0)?, row.get::<Option<i64>>(1)?)),
        )?
        .unwrap_or((0, None));
    // The middle of the ID range, not the median ID: min and max are two lookups in the
    // table's B-tree, where `OFFSET n/2` stepped through half of it. IDs are handed out in
    // ascending order, so the halves are near even. (Each in a query of its own: `SQLite`
    // looks a lone `min` or `max` up, but scans the table for `SELECT min(id), max(id)`.)
    let (low, high) = connection
        .query_row(
            "SELECT (SELECT min(id) FROM store_images), (SELECT max(id) FROM store_images)",
            params![],
            |row| Ok::<_, StoreError>((row.get::<Option<i64>>(0)?, row.get::<Option<i64>>(1)?)),
        )?
        .unwrap_or((None, None));
    if upper_write != newest_write || upper_high != high {
        return Ok(None);
    }
    let split = low
        .zip(high)
        .map(|(low, high)| low.midpoint(high).saturating_add(1));
    Ok(split.map(|split| (upper, split)))
}

/// Reads the images straight into the store's records (no intermediate [`Image`]), then
/// indexes them once. With `upper_half` (a large table in a `SQLite` file) they are read in
/// two halves by ID: this thread pushes the lower half while the second connection reads the
/// upper half into records of its own, which this thread then appends (each of their names,
/// cameras and parameter lists resolved once, not per image).
fn load_images(
    connection: &mut dyn Conn,
    store: &mut Store,
    upper_half: Option<(Reader, i64)>,
) -> Result<ImageRead, StoreError> {
    let mut parameters = Vec::new();
    let Some((upper_connection, split)) = upper_half else {
        connection.each::<StoreError>(IMAGE_COLUMNS, params![], |row| {
            let hidden = is_hidden_row(row)?;
            let (values, names) = read_image_row(row, &mut parameters)?;
            store.records.push_image_hidden(&values, &names, hidden);
            Ok(())
        })?;
        store.records.shrink_pools();
        store.index_new_images(0);
        return Ok(ImageRead::OnePass);
    };
    let upper = std::thread::scope(|scope| {
        let upper = scope.spawn(|| read_upper_half(upper_connection, split));
        let lower = connection.each::<StoreError>(
            &format!("{IMAGE_COLUMNS} WHERE id < ?1"),
            params![split],
            |row| {
                let hidden = is_hidden_row(row)?;
                let (values, names) = read_image_row(row, &mut parameters)?;
                store.records.push_image_hidden(&values, &names, hidden);
                Ok(())
            },
        );
        let upper = upper.join().unwrap_or_else(|_| {
            Err(StoreError::CorruptRow {
                table: "store_images",
                reason: "the reading thread failed".to_owned(),
            })
        });
        lower.and(upper)
    })?;
    store.records.append_images(&upper);
    drop(upper);
    store.records.shrink_pools();
    store.index_new_images(0);
    Ok(ImageRead::Halves)
}

/// Reads the images with IDs from `first` on through the second connection (in its read
/// transaction from [`open_upper_half`]) into records of their own (which
/// [`Records::append_images`] then takes), then ends that transaction.
fn read_upper_half(connection: Reader, first: i64) -> Result<Records, StoreError> {
    let mut records = Records::default();
    let mut parameters = Vec::new();
    (&mut connection.conn() as &mut dyn Conn).each::<StoreError>(
        &format!("{IMAGE_COLUMNS} WHERE id >= ?1"),
        params![first],
        |row| {
            let hidden = is_hidden_row(row)?;
            let (values, names) = read_image_row(row, &mut parameters)?;
            records.push_image_hidden(&values, &names, hidden);
            Ok(())
        },
    )?;
    connection.finish()?;
    Ok(records)
}

/// Decodes a float blob into `out` (cleared first).
fn decode_floats(table: &'static str, blob: &[u8], out: &mut Vec<f64>) -> Result<(), StoreError> {
    if !blob.len().is_multiple_of(8) {
        return Err(StoreError::CorruptRow {
            table,
            reason: format!("float blob of {} bytes", blob.len()),
        });
    }
    out.clear();
    out.extend(blob.chunks_exact(8).map(|chunk| {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(chunk);
        f64::from_le_bytes(bytes)
    }));
    Ok(())
}

/// The values and names of one row of [`IMAGE_COLUMNS`], borrowed from the row; camera
/// parameters are decoded into `parameters`.
fn read_image_row<'a>(
    row: &'a dyn Row,
    parameters: &'a mut Vec<f64>,
) -> Result<(RecordValues, RecordNames<'a>), StoreError> {
    const TABLE: &str = "store_images";
    let computed_lon = row.real_or_null(4)?;
    let computed_lat = row.real_or_null(5)?;
    let camera_parameters = match row.blob_or_null(8)? {
        Some(blob) => {
            decode_floats(TABLE, blob, parameters)?;
            Some(parameters.as_slice())
        }
        None => None,
    };
    let camera_type = match row.text_or_null(9)? {
        Some(name) => Some(
            name.parse::<CameraType>()
                .map_err(|error| StoreError::CorruptRow {
                    table: TABLE,
                    reason: error.to_string(),
                })?,
        ),
        None => None,
    };
    let computed_rotation = match row.blob_or_null(13)? {
        Some(blob) => {
            // Decoded in place: no allocation per row.
            let bytes: &[u8; 24] = blob.try_into().map_err(|_| StoreError::CorruptRow {
                table: TABLE,
                reason: if blob.len().is_multiple_of(8) {
                    format!("rotation of {} values", blob.len() / 8)
                } else {
                    format!("float blob of {} bytes", blob.len())
                },
            })?;
            let value = |index: usize| {
                let mut eight = [0; 8];
                eight.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
                f64::from_le_bytes(eight)
            };
            Some([value(0), value(1), value(2)])
        }
        None => None,
    };
    let values = RecordValues {
        id: from_sql_id(row.int(0)?),
        captured_at: row.int(1)?,
        geometry: [row.real(2)?, row.real(3)?],
        computed_geometry: computed_lon.zip(computed_lat).map(|(lon, lat)| [lon, lat]),
        altitude: row.real_or_null(6)?,
        atomic_scale: row.real_or_null(7)?,
        compass_angle: row.real_or_null(10)?,
        computed_altitude: row.real_or_null(11)?,
        computed_compass_angle: row.real_or_null(12)?,
        quality_score: row.real_or_null(25)?,
        computed_rotation,
        merge_cc: row.int_or_null(21)?.map(from_sql_id),
        mesh: row.int_or_null(22)?.map(from_sql_id),
        sfm_cluster: row.int_or_null(24)?.map(from_sql_id),
        width: narrow(TABLE, "width", row.int(17)?)?,
        height: narrow(TABLE, "height", row.int(16)?)?,
        exif_orientation: match row.int_or_null(15)? {
            Some(orientation) => Some(narrow(TABLE, "exif_orientation", orientation)?),
            None => None,
        },
        is_pano: row.int(18)? != 0,
    };
    let names = RecordNames {
        sequence: row.text(23)?,
        creator: CreatorId(from_sql_id(row.int(14)?)),
        organization: row
            .int_or_null(26)?
            .map(|id| OrganizationId(from_sql_id(id))),
        make: row.text_or_null(19)?,
        model: row.text_or_null(20)?,
        camera_parameters,
        camera_type,
    };
    Ok((values, names))
}

#[cfg(test)]
mod tests {
    use streetlevel_model::{MediaId, SequenceId};

    use super::*;
    use crate::ImageFilter;

    fn image(number: u64) -> Image {
        let some = |value: f64| (!number.is_multiple_of(3)).then_some(value);
        Image {
            // Every fourth ID above `i64::MAX`: stored negative, read first.
            id: ImageId(if number.is_multiple_of(4) {
                u64::MAX - number
            } else {
                1000 + number
            }),
            altitude: some(40.0 + number as f64 / 7.0),
            atomic_scale: some(1.0),
            camera_parameters: (!number.is_multiple_of(5))
                .then(|| vec![0.85, -0.02, number as f64]),
            camera_type: (number.is_multiple_of(2)).then_some(CameraType::Fisheye),
            captured_at: Timestamp(1_600_000_000_000 + number as i64),
            compass_angle: some(number as f64 % 360.0),
            computed_altitude: some(41.5),
            computed_compass_angle: some(12.25),
            computed_geometry: (number % 3 == 1).then(|| Point::new(13.2, 55.7)),
            computed_rotation: (number % 2 == 1).then_some([1.5, 0.1, -0.2]),
            creator: CreatorId(number % 7),
            exif_orientation: (number % 4 != 1).then_some(u8::try_from(number % 9).unwrap_or(1)),
            geometry: Point::new(13.0 + number as f64 / 1e4, 55.0 + number as f64 / 3e4),
            height: 3000,
            width: u32::try_from(number).unwrap_or(0),
            is_pano: number % 5 == 2,
            make: (number % 3 != 2).then(|| format!("make{}", number % 4)),
            model: (!number.is_multiple_of(3)).then(|| format!("model{}", number % 5)),
            merge_cc: (number.is_multiple_of(2)).then_some(number),
            mesh: (number.is_multiple_of(3)).then_some(MediaId(number)),
            sequence: SequenceId(format!("seq{}", number / 10)),
            sfm_cluster: (number % 4 == 3).then_some(MediaId(number + 1)),
            quality_score: some(0.5),
            organization: (number.is_multiple_of(3)).then_some(OrganizationId(9)),
        }
    }

    /// A fresh data directory holding `images`.
    fn directory_with(name: &str, images: &[Image]) -> std::path::PathBuf {
        let directory =
            std::env::temp_dir().join(format!("streetlevel-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        let mut store = Store::open(&directory).unwrap();
        store.insert_images(images).unwrap();
        directory
    }

    #[test]
    fn loading_in_two_halves_gives_the_same_store_as_one_pass() {
        let images: Vec<Image> = (0..500).map(image).collect();
        let directory = directory_with("split-load", &images);

        let connection =
            Database::open(&Location::Sqlite(Store::database_path(&directory))).unwrap();
        migrate(&connection).unwrap();
        let mut one_pass = Store::in_memory();
        let read = load_with(&connection, &mut one_pass, i64::MAX, &mut || {}).unwrap();
        assert_eq!(read, ImageRead::OnePass);
        let mut halves = Store::in_memory();
        let read = load_with(&connection, &mut halves, 1, &mut || {}).unwrap();
        assert_eq!(read, ImageRead::Halves);
        let _ = std::fs::remove_dir_all(&directory);

        let ids: Vec<ImageId> = images.iter().map(|image| image.id).collect();
        assert_eq!(one_pass.images(&ids), images);
        assert_eq!(halves.images(&ids), images);
        let all = |store: &Store| store.search_images(&ImageFilter::default(), 1000, None);
        assert_eq!(all(&halves), all(&one_pass));
        assert_eq!(all(&halves).items.len(), images.len());
    }

    /// Another process commits images after the load's transaction took its snapshot but
    /// before the second connection takes its own: the second connection's snapshot would
    /// hold them, so the load must not read a half through it.
    #[test]
    fn a_write_during_a_load_does_not_reach_one_half() {
        let images: Vec<Image> = (0..500).map(image).collect();
        let directory = directory_with("load-during-write", &images);
        // IDs in both halves: 5000 above every stored ID below `i64::MAX`, 500 below them.
        let late: Vec<Image> = [5000, 5001, 500]
            .into_iter()
            .map(|id| Image {
                id: ImageId(id),
                ..image(1)
            })
            .collect();
        let mut writer = Store::open(&directory).unwrap();
        let connection =
            Database::open(&Location::Sqlite(Store::database_path(&directory))).unwrap();
        migrate(&connection).unwrap();

        let mut loaded = Store::in_memory();
        let read = load_with(&connection, &mut loaded, 1, &mut || {
            writer.insert_images(&late).unwrap();
        })
        .unwrap();
        assert_eq!(read, ImageRead::OnePass);
        assert_eq!(loaded.image_count(), images.len());
        for image in &late {
            assert_eq!(loaded.image(image.id), None);
        }
        let ids: Vec<ImageId> = images.iter().map(|image| image.id).collect();
        assert_eq!(loaded.images(&ids), images);

        // With no writer in between, the next load reads in halves and sees them.
        let mut next = Store::in_memory();
        let read = load_with(&connection, &mut next, 1, &mut || {}).unwrap();
        assert_eq!(read, ImageRead::Halves);
        assert_eq!(next.image_count(), images.len() + late.len());
        assert_eq!(next.image(late[0].id).as_ref(), Some(&late[0]));
        drop(writer);
        let _ = std::fs::remove_dir_all(&directory);
    }
    /// A database a build of schema version 1 wrote (before the hashes, the ID allocator and
    /// the write log) is brought to the current version and loads, on both engines.
    fn a_version_one_database_migrates_and_loads(location: &Location) {
        let database = Database::open(location).unwrap();
        let version_one = Migrations {
            sqlite: &SQLITE_MIGRATIONS[..1],
            postgres: &POSTGRES_MIGRATIONS[..1],
        };
        database.migrate("store", &version_one).unwrap();
        assert_eq!(database.schema_version("store").unwrap(), Some(1));
        let old = image(7);
        database
            .write(|connection| {
                // Version 1 wrote images without a log entry.
                connection.execute(
                    "INSERT INTO store_images (id, captured_at, lon, lat, creator, height,
                        width, is_pano, sequence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        to_sql_id(old.id.0),
                        old.captured_at.0,
                        old.geometry.lon,
                        old.geometry.lat,
                        to_sql_id(old.creator.0),
                        old.height,
                        old.width,
                        old.is_pano,
                        old.sequence.as_str()
                    ],
                )?;
                Ok::<_, DbError>(())
            })
            .unwrap();
        drop(database);
        let mut store = Store::open_location(location).unwrap();
        let loaded = store.image(old.id).unwrap();
        assert_eq!(
            (loaded.id, loaded.geometry, &loaded.sequence),
            (old.id, old.geometry, &old.sequence)
        );
        // The version 2 tables work: IDs are handed out above the stored one.
        assert!(store.reserve_ids(1).unwrap() > old.id.0);
        let database = Database::open(location).unwrap();
        assert_eq!(
            database.schema_version("store").unwrap(),
            Some(SCHEMA_VERSION)
        );
    }

    #[test]
    fn a_version_one_sqlite_file_migrates_and_loads() {
        let directory =
            std::env::temp_dir().join(format!("streetlevel-store-v1-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        a_version_one_database_migrates_and_loads(&Location::Sqlite(Store::database_path(
            &directory,
        )));
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn a_version_one_postgres_database_migrates_and_loads() {
        if let Some(location) = streetlevel_db::test_postgres_database("store_v1") {
            a_version_one_database_migrates_and_loads(&location);
        }
    }
}
