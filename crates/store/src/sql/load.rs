//! Loading the whole store at start-up from one read snapshot (a large `SQLite` file's images
//! in two halves on two connections).

use std::path::Path;

use streetlevel_db::sqlite_file::Reader;
use streetlevel_db::{Conn, Database, DbError, Location, Row, params};
use streetlevel_model::{
    CameraType, Creator, CreatorId, Detection, DetectionId, EntityKind, ImageId, MapFeature,
    MapFeatureId, ObjectType, Organization, OrganizationId, Point, Sequence, SequenceId, Timestamp,
};

use super::columns::blob_to_ids;
use super::columns::from_sql_id;
use super::columns::narrow;
use super::write::last_write;
use crate::image_record::{RecordNames, RecordValues};
use crate::records::Records;
use crate::{Store, StoreError};

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

pub(super) const IMAGE_COLUMNS: &str =
    "SELECT id, captured_at, lon, lat, computed_lon, computed_lat,
    altitude, atomic_scale, camera_parameters, camera_type, compass_angle, computed_altitude,
    computed_compass_angle, computed_rotation, creator, exif_orientation, height, width, is_pano,
    make, model, merge_cc, mesh, sequence, sfm_cluster, quality_score, organization, hidden
    FROM store_images";

/// Whether the row of [`IMAGE_COLUMNS`] is hidden.
pub(super) fn is_hidden_row(row: &dyn Row) -> Result<bool, StoreError> {
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
pub(super) fn read_image_row<'a>(
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
    use streetlevel_db::Migrations;
    use streetlevel_model::{Image, MediaId, SequenceId};

    use super::*;
    use crate::ImageFilter;
    use crate::sql::columns::to_sql_id;
    use crate::sql::schema::{POSTGRES_MIGRATIONS, SCHEMA_VERSION, SQLITE_MIGRATIONS, migrate};

    fn image(number: u64) -> Image {
        let some = |value: f64| (!number.is_multiple_of(3)).then_some(value);
        let float = f64::from(u32::try_from(number).unwrap());
        Image {
            // Every fourth ID above `i64::MAX`: stored negative, read first.
            id: ImageId(if number.is_multiple_of(4) {
                u64::MAX - number
            } else {
                1000 + number
            }),
            altitude: some(40.0 + float / 7.0),
            atomic_scale: some(1.0),
            camera_parameters: (!number.is_multiple_of(5)).then(|| vec![0.85, -0.02, float]),
            camera_type: (number.is_multiple_of(2)).then_some(CameraType::Fisheye),
            captured_at: Timestamp(1_600_000_000_000 + number.cast_signed()),
            compass_angle: some(float % 360.0),
            computed_altitude: some(41.5),
            computed_compass_angle: some(12.25),
            computed_geometry: (number % 3 == 1).then(|| Point::new(13.2, 55.7)),
            computed_rotation: (number % 2 == 1).then_some([1.5, 0.1, -0.2]),
            creator: CreatorId(number % 7),
            exif_orientation: (number % 4 != 1).then_some(u8::try_from(number % 9).unwrap_or(1)),
            geometry: Point::new(13.0 + float / 1e4, 55.0 + float / 3e4),
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
