//! Write, drop, reopen: the same answers, on `SQLite` and (where
//! `STREETLEVEL_TEST_DATABASE_URL` names a server, as in CI) on PostgreSQL with PostGIS.

// Helpers outside `#[test]` functions unwrap and panic too.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU32, Ordering};

use common::{dataset, insert_all};
use streetlevel_db::{Backend, Database, DbError, Location, MigrationError, Param, params};
use streetlevel_model::{
    Detection, DetectionId, EntityId, EntityKind, Image, ImageId, MapFeature, MapFeatureId,
    OrganizationId, Sequence, SequenceId,
};
use streetlevel_store::{
    BoundingBox, DetectionFilter, ImageFilter, ImportBatch, ImportedImage, MapFeatureFilter,
    S2CellId, Store, StoreError, TakedownAction, TakedownNote,
};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "streetlevel-store-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a test's store lives: a data directory, or a fresh PostgreSQL database.
enum Place {
    Sqlite(TempDir),
    Postgres(Location),
}

impl Place {
    /// A new data directory, and a new PostgreSQL database when the tests have a server.
    fn every(name: &str) -> Vec<Place> {
        let mut places = vec![Place::Sqlite(TempDir::new())];
        places.extend(streetlevel_db::test_postgres_database(name).map(Place::Postgres));
        places
    }

    fn backend(&self) -> Backend {
        match self {
            Place::Sqlite(_) => Backend::Sqlite,
            Place::Postgres(_) => Backend::Postgres,
        }
    }

    fn open(&self) -> Result<Store, StoreError> {
        match self {
            Place::Sqlite(directory) => Store::open(&directory.0),
            Place::Postgres(location) => Store::open_location(location),
        }
    }

    /// A connection of its own to the store's database (another process), for what the
    /// store would never write.
    fn database(&self) -> Database {
        match self {
            Place::Sqlite(directory) => {
                std::fs::create_dir_all(&directory.0).unwrap();
                Database::open(&Location::Sqlite(Store::database_path(&directory.0))).unwrap()
            }
            Place::Postgres(location) => Database::open(location).unwrap(),
        }
    }

    fn execute(&self, sql: &str, parameters: &[Param<'_>]) {
        self.database()
            .write(|connection| {
                connection.execute(sql, parameters)?;
                Ok::<_, DbError>(())
            })
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }

    fn count(&self, sql: &str) -> i64 {
        self.database()
            .read(|connection| connection.query_value::<i64>(sql, params![]))
            .unwrap()
            .unwrap()
    }
}

fn answers(store: &Store) -> String {
    let images = store.search_images(&ImageFilter::default(), 100_000, None);
    let features = store.search_map_features(&MapFeatureFilter::default(), 100_000, None);
    let detections = store.search_detections(&DetectionFilter::default(), 100_000, None);
    let sequences: Vec<_> = (0..8)
        .map(|number| store.sequence(&streetlevel_model::SequenceId(format!("seq{number}"))))
        .collect();
    let cells: Vec<_> = images
        .items
        .iter()
        .take(20)
        .map(|image| {
            let cell = S2CellId::from_lat_lng(image.geometry.lat, image.geometry.lon).parent(17);
            store
                .images_in_s2_cell(cell)
                .into_iter()
                .map(|image| image.id)
                .collect::<Vec<_>>()
        })
        .collect();
    format!("{images:?}\n{features:?}\n{detections:?}\n{sequences:?}\n{cells:?}")
}

/// Inserts the data set and a second batch of images written through separately; returns
/// the store's answers.
fn fill(store: &mut Store, data: &common::Dataset) -> String {
    insert_all(store, data);
    let extra = dataset(43, 30);
    let fresh: Vec<_> = extra
        .images
        .into_iter()
        .filter(|image| store.kind_of(EntityId(image.id.0)).is_none())
        .map(|mut image| {
            image.creator = data.creators[0].id;
            image
        })
        .collect();
    store.insert_images(&fresh).unwrap();
    answers(store)
}

#[test]
fn a_reopened_store_gives_the_same_answers() {
    for place in Place::every("reopened") {
        let data = dataset(42, 300);
        let before;
        {
            let mut store = place.open().unwrap();
            assert_eq!(store.image_count(), 0);
            before = fill(&mut store, &data);
        }
        if let Place::Sqlite(directory) = &place {
            assert!(directory.0.join("streetlevel.sqlite").is_file());
            assert!(directory.0.join("media").is_dir());
        }
        let store = place.open().unwrap();
        assert_eq!(answers(&store), before, "{:?}", place.backend());
        for image in &data.images {
            assert_eq!(store.image(image.id).as_ref(), Some(image));
        }
        assert_eq!(store.image(ImageId(0)), None);
    }
}

/// The same writes on both engines load as the same store: every optional field, IDs above
/// `i64::MAX`, sequences, map features and detections.
#[test]
fn postgres_and_sqlite_load_the_same_store() {
    let Some(location) = streetlevel_db::test_postgres_database("same_store") else {
        return;
    };
    let postgres = Place::Postgres(location);
    let sqlite = Place::Sqlite(TempDir::new());
    let data = dataset(7, 400);
    let every_field = data
        .images
        .iter()
        .filter(|image| image.camera_parameters.is_some() && image.computed_geometry.is_some())
        .count();
    assert!(every_field > 100, "{every_field} images with every field");
    assert!(data.images.iter().any(|image| image.id.0 > i64::MAX as u64));
    let mut written = Vec::new();
    for place in [&sqlite, &postgres] {
        let mut store = place.open().unwrap();
        written.push(fill(&mut store, &data));
    }
    assert_eq!(written[0], written[1]);
    let loaded: Vec<Store> = [&sqlite, &postgres]
        .into_iter()
        .map(|place| place.open().unwrap())
        .collect();
    assert_eq!(answers(&loaded[0]), answers(&loaded[1]));
    assert_eq!(answers(&loaded[1]), written[1]);
    for image in &data.images {
        assert_eq!(loaded[1].image(image.id).as_ref(), Some(image));
    }
    for feature in &data.map_features {
        assert_eq!(loaded[1].map_feature(feature.id), Some(feature));
    }
    for detection in &data.detections {
        assert_eq!(loaded[1].detection(detection.id), Some(detection));
    }
    for creator in &data.creators {
        assert_eq!(loaded[1].creator(creator.id), Some(creator));
    }
    for organization in &data.organizations {
        assert_eq!(loaded[1].organization(organization.id), Some(organization));
    }
}

/// GIS tools see the images and map features through PostGIS: the generated points, with
/// their `GiST` indexes, find what the store finds in the same box.
#[test]
fn postgis_finds_the_images_and_map_features_the_store_finds() {
    let Some(location) = streetlevel_db::test_postgres_database("postgis") else {
        return;
    };
    let place = Place::Postgres(location);
    let data = dataset(11, 300);
    let mut store = place.open().unwrap();
    insert_all(&mut store, &data);
    let [west, south, east, north] = [13.16, 55.69, 13.19, 55.70];
    let bbox = BoundingBox::new(west, south, east, north).unwrap();
    let in_store = store.search_images(
        &ImageFilter {
            bbox: Some(bbox),
            ..ImageFilter::default()
        },
        100_000,
        None,
    );
    let expected: Vec<i64> = data
        .images
        .iter()
        .filter(|image| {
            let point = image.geometry;
            (west..=east).contains(&point.lon) && (south..=north).contains(&point.lat)
        })
        .map(|image| image.id.0.cast_signed())
        .collect();
    assert!(!expected.is_empty());
    let database = place.database();
    let mut found: Vec<i64> = database
        .read(|connection| {
            connection.query_map(
                "SELECT id FROM store_images
                 WHERE ST_Intersects(geom, ST_MakeEnvelope(?1, ?2, ?3, ?4, 4326))",
                params![west, south, east, north],
                |row| row.get::<i64>(0),
            )
        })
        .unwrap();
    found.sort_unstable();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort_unstable();
    assert_eq!(found, expected_sorted);
    // The store's search also matches computed locations: PostGIS has those too.
    let either: i64 = database
        .read(|connection| {
            connection.query_value(
                "SELECT count(*) FROM store_images
                 WHERE ST_Intersects(geom, ST_MakeEnvelope(?1, ?2, ?3, ?4, 4326))
                    OR ST_Intersects(computed_geom, ST_MakeEnvelope(?1, ?2, ?3, ?4, 4326))",
                params![west, south, east, north],
            )
        })
        .unwrap()
        .unwrap();
    assert_eq!(either, i64::try_from(in_store.items.len()).unwrap());
    let features: i64 = database
        .read(|connection| {
            connection.query_value(
                "SELECT count(*) FROM store_map_features
                 WHERE ST_Intersects(geom, ST_MakeEnvelope(?1, ?2, ?3, ?4, 4326))",
                params![west, south, east, north],
            )
        })
        .unwrap()
        .unwrap();
    let in_store = store.search_map_features(
        &MapFeatureFilter {
            bbox: Some(bbox),
            ..MapFeatureFilter::default()
        },
        100_000,
        None,
    );
    assert_eq!(features, i64::try_from(in_store.items.len()).unwrap());
    // The indexes GIS queries use are there.
    let indexes = place.count(
        "SELECT count(*) FROM pg_indexes WHERE indexname IN
         ('store_images_geom', 'store_images_computed_geom', 'store_map_features_geom')",
    );
    assert_eq!(indexes, 3);
}

fn imported(image: &Image, hash: u8) -> ImportedImage {
    ImportedImage {
        image: image.clone(),
        content_hash: [hash; 32],
    }
}

/// A second store on the same database (another replica or process) is woken by the first
/// one's write (PostgreSQL's `NOTIFY`; `SQLite` has only the timeout), sees it in the write
/// log and loads it.
#[test]
fn a_second_store_follows_the_writes_of_the_first() {
    for place in Place::every("follow") {
        // IDs from the allocator only (the random data sets hold IDs up to `u64::MAX`, above
        // which the allocator has nothing left to hand out).
        let template = dataset(17, 1).images.remove(0);
        let mut first = place.open().unwrap();
        let someone = first.ensure_creator("someone").unwrap();
        let start = first.reserve_ids(3).unwrap();
        let initial: Vec<Image> = (start..start + 3)
            .map(|id| Image {
                id: ImageId(id),
                creator: someone,
                ..template.clone()
            })
            .collect();
        first.insert_images(&initial).unwrap();
        let mut second = place.open().unwrap();
        assert_eq!(second.image_count(), initial.len());
        let mut notifications = second.notifications().unwrap().unwrap();
        assert_eq!(
            notifications.is_listening(),
            place.backend() == Backend::Postgres
        );
        assert!(!second.has_writes_to_follow().unwrap());

        let creator = first.ensure_creator("a newcomer").unwrap();
        let id = first.reserve_ids(2).unwrap();
        assert!(id > start + 2);
        let sequence = Sequence {
            id: SequenceId::from("followed"),
            creator,
            organization: None,
            image_ids: Vec::new(),
        };
        let images: Vec<Image> = (0..2)
            .map(|offset| Image {
                id: ImageId(id + offset),
                creator,
                sequence: sequence.id.clone(),
                ..template.clone()
            })
            .collect();
        let batch = ImportBatch {
            sequences: vec![sequence.clone()],
            images: images.iter().map(|image| imported(image, 1)).collect(),
        };
        let outcome = first.insert_batch(&batch, |_, _| Ok(())).unwrap();
        // Both have the same original: the second is a duplicate of the first.
        assert_eq!(outcome.inserted, [images[0].id]);
        assert_eq!(outcome.duplicates, [(images[1].id, images[0].id)]);

        if place.backend() == Backend::Postgres {
            // A generous bound: the notification comes at the commit, long before.
            assert!(notifications.wait(std::time::Duration::from_secs(60)));
        }
        assert!(second.has_writes_to_follow().unwrap());
        assert_eq!(second.follow().unwrap(), 1);
        assert!(!second.has_writes_to_follow().unwrap());
        assert_eq!(second.image(images[0].id).as_ref(), Some(&images[0]));
        assert_eq!(second.image(images[1].id), None);
        assert_eq!(
            second.creator_by_username("a newcomer").map(|c| c.id),
            Some(creator)
        );
        assert_eq!(
            second
                .sequence(&sequence.id)
                .map(|sequence| sequence.image_ids),
            Some(vec![images[0].id])
        );
        let search = |store: &Store| store.search_images(&ImageFilter::default(), 100_000, None);
        assert_eq!(search(&second), search(&first));
        // The second store knows the original is stored, though it did not write it.
        assert_eq!(
            second.images_with_hashes(&[[1; 32], [2; 32]]).unwrap(),
            [Some(images[0].id), None]
        );
        assert_eq!(second.follow().unwrap(), 0);
    }
}

/// A batch written the way a shared store is (checked under a read lock, written under none,
/// added under the write lock): not served until it is added or caught up with, then served
/// once whichever loads it first, and an image of it erased in between stays erased.
#[test]
fn a_batch_written_outside_the_lock_is_served_once_and_stays_erased() {
    for place in Place::every("split-batch") {
        let template = dataset(17, 1).images.remove(0);
        let store = RwLock::new(place.open().unwrap());
        let read = || store.read().unwrap();
        let someone = store.write().unwrap().ensure_creator("someone").unwrap();
        let batch = |key: &str, first_hash: u8| {
            let start = store.write().unwrap().reserve_ids(3).unwrap();
            let sequence = Sequence {
                id: SequenceId::from(key),
                creator: someone,
                organization: None,
                image_ids: Vec::new(),
            };
            let images: Vec<Image> = (0..3)
                .map(|offset| Image {
                    id: ImageId(start + offset),
                    creator: someone,
                    sequence: sequence.id.clone(),
                    ..template.clone()
                })
                .collect();
            let ids: Vec<ImageId> = images.iter().map(|image| image.id).collect();
            let batch = ImportBatch {
                sequences: vec![sequence],
                images: (0u8..)
                    .zip(&images)
                    .map(|(offset, image)| imported(image, first_hash + offset))
                    .collect(),
            };
            (batch, ids)
        };
        let served = |ids: &[ImageId]| -> Vec<bool> {
            let store = read();
            let found: Vec<ImageId> = store
                .search_images(&ImageFilter::default(), 100_000, None)
                .items
                .into_iter()
                .map(|image| image.id)
                .collect();
            ids.iter()
                .map(|id| {
                    let times = found.iter().filter(|found| *found == id).count();
                    assert!(times <= 1, "{id} found {times} times");
                    assert_eq!(store.image(*id).is_some(), times == 1);
                    times == 1
                })
                .collect()
        };

        // Added by itself.
        let (plain, plain_ids) = batch("plain", 10);
        let written = read().prepare_batch(&plain).unwrap();
        let written = written.write(|_, _| Ok(())).unwrap();
        assert_eq!(served(&plain_ids), [false; 3], "served before it is added");
        let outcome = store.write().unwrap().add_written(written);
        assert_eq!(outcome.inserted, plain_ids);
        assert_eq!(served(&plain_ids), [true; 3]);

        // Caught up with first (an upload's status read meanwhile), then added: once.
        let (caught, caught_ids) = batch("caught", 20);
        let written = read().prepare_batch(&caught).unwrap();
        let written = written.write(|_, _| Ok(())).unwrap();
        assert!(streetlevel_store::catch_up(&store).unwrap() >= 3);
        assert_eq!(served(&caught_ids), [true; 3]);
        let outcome = store.write().unwrap().add_written(written);
        assert_eq!(outcome.inserted, caught_ids);
        assert_eq!(served(&caught_ids), [true; 3]);
        assert_eq!(
            read().sequence_image_ids(&SequenceId::from("caught")),
            Some(caught_ids.clone())
        );

        // Caught up with, one image erased, then added: the erased one is not brought back.
        let (erased, erased_ids) = batch("erased", 30);
        let written = read().prepare_batch(&erased).unwrap();
        let written = written.write(|_, _| Ok(())).unwrap();
        streetlevel_store::catch_up(&store).unwrap();
        let note = TakedownNote {
            actor: "user alice",
            subject: "one",
            at: streetlevel_model::Timestamp(1_700_000_000_000),
        };
        store
            .write()
            .unwrap()
            .delete_images(&erased_ids[..1], &note, |_, _| Ok(()))
            .unwrap();
        store.write().unwrap().add_written(written);
        assert_eq!(served(&erased_ids), [false, true, true]);
        // What a restart loads agrees.
        let reopened = place.open().unwrap();
        assert_eq!(answers(&reopened), answers(&read()));
    }
}

/// Nothing of the images `ids` is left in the database: rows, detections, hashes.
fn assert_erased_from(database: &Database, ids: &[ImageId]) {
    for id in ids {
        let id = id.0.cast_signed();
        let count = |sql: &str| -> i64 {
            database
                .read(|connection| connection.query_value::<i64>(sql, params![id]))
                .unwrap()
                .unwrap()
        };
        assert_eq!(count("SELECT count(*) FROM store_images WHERE id = ?1"), 0);
        assert_eq!(
            count("SELECT count(*) FROM store_detections WHERE image = ?1"),
            0
        );
        assert_eq!(
            count("SELECT count(*) FROM store_image_hashes WHERE image = ?1"),
            0
        );
    }
}

/// Erasing, hiding and restoring in one store: a reopened store and a second store that
/// follows the first give the same answers, the rows and hashes of erased images are gone
/// from the database, the takedowns are recorded, and erased IDs are never handed out again.
#[test]
fn takedowns_persist_and_are_followed() {
    for place in Place::every("takedowns") {
        let data = dataset(42, 200);
        let mut first = place.open().unwrap();
        insert_all(&mut first, &data);
        let mut second = place.open().unwrap();
        let note = |subject| TakedownNote {
            actor: "user alice",
            subject,
            at: streetlevel_model::Timestamp(1_700_000_000_000),
        };
        let sequence = data.images[0].sequence.clone();
        let of_sequence = first.sequence_image_ids(&sequence).unwrap();
        let erased = first
            .delete_images(&of_sequence, &note(sequence.as_str()), |_, _| Ok(()))
            .unwrap();
        assert_eq!(erased.len(), of_sequence.len());
        // The greatest ID the allocator could hand out.
        let greatest = data
            .images
            .iter()
            .map(|image| image.id)
            .filter(|id| id.0 < i64::MAX as u64)
            .max()
            .unwrap();
        let lone = [data.images[data.images.len() - 1].id, greatest];
        first
            .delete_images(&lone, &note("lone"), |_, _| Ok(()))
            .unwrap();
        let hidden: Vec<ImageId> = data.images[10..40]
            .iter()
            .map(|image| image.id)
            .filter(|id| first.image(*id).is_some())
            .collect();
        first.hide_images(&hidden, &note("hidden")).unwrap();
        first
            .restore_images(&hidden[..5], &note("restored"))
            .unwrap();
        assert!(first.sequence(&sequence).is_none());
        for id in &hidden[5..] {
            assert!(first.image(*id).is_none());
            assert!(first.hidden_image(*id).is_some());
        }

        assert!(second.has_writes_to_follow().unwrap());
        second.follow().unwrap();
        let reopened = place.open().unwrap();
        let expected = answers(&first);
        for (name, got) in [
            ("followed", answers(&second)),
            ("reopened", answers(&reopened)),
        ] {
            let first_difference = got
                .split("}, ")
                .zip(expected.split("}, "))
                .find(|(got, expected)| got != expected);
            assert_eq!(first_difference, None, "{name}, {:?}", place.backend());
            assert_eq!(got.len(), expected.len(), "{name}, {:?}", place.backend());
        }
        for store in [&second, &reopened] {
            for id in &hidden[5..] {
                assert!(store.image(*id).is_none());
                assert_eq!(store.hidden_image(*id), first.hidden_image(*id));
            }
            for id in of_sequence.iter().chain(&lone) {
                assert!(store.image(*id).is_none() && store.hidden_image(*id).is_none());
                assert!(store.detections_of_image(*id).is_empty());
            }
            assert!(store.sequence(&sequence).is_none());
        }
        let database = place.database();
        let erased_ids: Vec<ImageId> = of_sequence.iter().chain(&lone).copied().collect();
        assert_erased_from(&database, &erased_ids);
        let takedowns = reopened.takedowns(10).unwrap();
        let actions: Vec<(TakedownAction, &str, u64)> = takedowns
            .iter()
            .map(|record| (record.action, record.subject.as_str(), record.images))
            .collect();
        assert_eq!(
            actions,
            [
                (TakedownAction::Restored, "restored", 5),
                (TakedownAction::Hidden, "hidden", hidden.len() as u64),
                (TakedownAction::Deleted, "lone", 2),
                (
                    TakedownAction::Deleted,
                    sequence.as_str(),
                    of_sequence.len() as u64
                ),
            ]
        );
        assert!(takedowns.iter().all(|record| record.actor == "user alice"));
        // The greatest ID the allocator could hand out was erased: its floor is above it.
        let next: i64 = database
            .read(|connection| {
                connection.query_value::<i64>(
                    "SELECT next FROM store_next_id WHERE singleton = 0",
                    params![],
                )
            })
            .unwrap()
            .unwrap();
        assert!(next.cast_unsigned() > greatest.0);
    }
}

/// What an importer adds to a batch's transaction fails it whole: no image, sequence or hash
/// stays, in the database or in memory.
#[test]
fn a_batch_whose_addition_fails_stores_nothing() {
    for place in Place::every("batch_fails") {
        let data = dataset(19, 20);
        let mut store = place.open().unwrap();
        store.insert_creators(&data.creators).unwrap();
        let id = store.reserve_ids(1).unwrap();
        let sequence = Sequence {
            id: SequenceId::from("refused"),
            creator: data.creators[0].id,
            organization: None,
            image_ids: Vec::new(),
        };
        let image = Image {
            id: ImageId(id),
            sequence: sequence.id.clone(),
            ..data.images[0].clone()
        };
        let batch = ImportBatch {
            sequences: vec![sequence.clone()],
            images: vec![imported(&image, 3)],
        };
        let before = state(&store);
        let error = store
            .insert_batch(&batch, |connection, _| {
                connection.execute("INSERT INTO no_such_table VALUES (1)", params![])?;
                Ok(())
            })
            .unwrap_err();
        assert!(matches!(error, StoreError::Database(_)), "{error}");
        assert_eq!(state(&store), before);
        drop(store);
        let store = place.open().unwrap();
        assert_eq!(store.image(image.id), None);
        assert_eq!(store.sequence(&sequence.id), None);
        assert_eq!(store.images_with_hashes(&[[3; 32]]).unwrap(), [None]);
        assert_eq!(
            place.count("SELECT count(*) FROM store_sequences WHERE id = 'refused'"),
            0
        );
    }
}

#[test]
fn a_failed_insert_changes_nothing_on_disk() {
    for place in Place::every("failed_insert") {
        let data = dataset(5, 20);
        {
            let mut store = place.open().unwrap();
            insert_all(&mut store, &data);
            let mut duplicate = data.images[0].clone();
            duplicate.id = ImageId(data.images[1].id.0);
            assert!(matches!(
                store.insert_images(&[duplicate]),
                Err(StoreError::DuplicateId { .. })
            ));
        }
        let store = place.open().unwrap();
        assert_eq!(store.image_count(), data.images.len());
    }
}

#[test]
fn a_newer_schema_is_refused() {
    for place in Place::every("newer_schema") {
        drop(place.open().unwrap());
        place.execute("UPDATE store_schema_version SET version = 99", params![]);
        let error = place.open().unwrap_err();
        assert!(
            matches!(
                error,
                StoreError::Migration(MigrationError::SchemaTooNew { found: 99, .. })
            ),
            "{error}"
        );
    }
}

#[test]
fn other_tables_in_the_same_database_are_left_alone() {
    for place in Place::every("other_tables") {
        place.execute("CREATE TABLE auth_users (id BIGINT PRIMARY KEY)", params![]);
        place.execute("INSERT INTO auth_users VALUES (7)", params![]);
        let mut store = place.open().unwrap();
        insert_all(&mut store, &dataset(9, 5));
        drop(store);
        assert_eq!(place.count("SELECT count(*) FROM auth_users"), 1);
    }
}

/// Several servers started at once on a new data directory (or database) all open it: the
/// schema is created by whichever migrates first, and the others wait for it instead of
/// failing with "database is locked" (a deferred transaction deadlocked on the lock upgrade)
/// or a duplicate table.
#[test]
fn processes_opening_a_new_directory_at_once_all_succeed() {
    for place in Place::every("at_once") {
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        place.open().map(|store| store.image_count())
                    })
                })
                .collect();
            for opener in openers {
                assert_eq!(opener.join().unwrap().unwrap(), 0);
            }
        });
    }
}

/// Makes the database refuse rows of `table` with this ID, which the store's own checks know
/// nothing about (a trigger on `SQLite`, a check constraint on PostgreSQL).
fn refuse_in_database(place: &Place, table: &str, id: u64) {
    let id = id.cast_signed();
    let sql = match place.backend() {
        Backend::Sqlite => format!(
            "CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} WHEN NEW.id = {id}
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
        ),
        Backend::Postgres => {
            format!("ALTER TABLE {table} ADD CONSTRAINT refuse_{table} CHECK (id <> {id})")
        }
    };
    place
        .database()
        .write(|connection| connection.execute_batch(&sql))
        .unwrap();
}

/// Everything a failed write must leave as it was.
fn state(store: &Store) -> (u64, [usize; 4], String) {
    (
        store.generation(),
        [
            store.image_count(),
            store.map_feature_count(),
            store.detection_count(),
            store.sequence_count(),
        ],
        answers(store),
    )
}

#[test]
fn a_write_the_database_refuses_changes_nothing_in_memory_or_on_disk() {
    for place in Place::every("refused_write") {
        a_write_the_database_refuses(&place);
    }
}

fn a_write_the_database_refuses(place: &Place) {
    let data = dataset(21, 40);
    let mut store = place.open().unwrap();
    insert_all(&mut store, &data);
    let before = state(&store);
    let (generation, counts, before_answers) = before.clone();

    // Batches whose last entity the database refuses: the rows before it must not stay
    // either. The IDs are free in every kind, one of them above `i64::MAX` (negative in SQL).
    let fresh_ids = [10_000_001, 10_000_002, u64::MAX - 200_000];
    let mut images: Vec<Image> = fresh_ids
        .iter()
        .map(|&id| Image {
            id: ImageId(id),
            sequence: SequenceId::from("a sequence of its own"),
            ..data.images[0].clone()
        })
        .collect();
    images[0].organization = Some(OrganizationId(424_242));
    refuse_in_database(place, "store_images", fresh_ids[2]);
    let error = store.insert_images(&images).unwrap_err();
    assert!(matches!(error, StoreError::Database(_)), "{error}");

    let features: Vec<MapFeature> = [20_000_001, 20_000_002]
        .into_iter()
        .map(|id| MapFeature {
            id: MapFeatureId(id),
            ..data.map_features[0].clone()
        })
        .collect();
    refuse_in_database(place, "store_map_features", 20_000_002);
    let error = store.insert_map_features(&features).unwrap_err();
    assert!(matches!(error, StoreError::Database(_)), "{error}");

    let detections: Vec<Detection> = [30_000_001, 30_000_002]
        .into_iter()
        .map(|id| Detection {
            id: DetectionId(id),
            image: data.images[1].id,
            map_feature: Some(data.map_features[1].id),
            ..data.detections[0].clone()
        })
        .collect();
    refuse_in_database(place, "store_detections", 30_000_002);
    let error = store.insert_detections(&detections).unwrap_err();
    assert!(matches!(error, StoreError::Database(_)), "{error}");

    assert_eq!(state(&store), before);
    let refused = fresh_ids
        .iter()
        .chain(&[20_000_001, 20_000_002, 30_000_001, 30_000_002]);
    for &id in refused {
        assert_eq!(store.kind_of(EntityId(id)), None, "{id}");
    }
    assert_eq!(store.image(images[0].id), None);
    assert_eq!(store.sequence_image_ids(&images[0].sequence), None);
    assert!(
        store
            .images_of_organization(OrganizationId(424_242))
            .is_empty()
    );
    assert_eq!(store.map_feature(features[0].id), None);
    assert_eq!(store.detection(detections[0].id), None);
    assert_eq!(
        store.detections_of_image(data.images[1].id).len(),
        data.detections
            .iter()
            .filter(|detection| detection.image == data.images[1].id)
            .count()
    );

    // What is on disk gives the same store.
    let reloaded = place.open().unwrap();
    assert_eq!(
        (reloaded.image_count(), reloaded.map_feature_count()),
        (counts[0], counts[1])
    );
    assert_eq!(answers(&reloaded), before_answers);
    drop(reloaded);

    // The connection is not left inside a transaction: what the database accepts goes
    // through.
    store.insert_images(&images[..2]).unwrap();
    assert_eq!(store.generation(), generation + 1);
    drop(store);
    let reloaded = place.open().unwrap();
    assert_eq!(reloaded.image_count(), counts[0] + 2);
    assert_eq!(reloaded.image(images[1].id).as_ref(), Some(&images[1]));
}

/// Raw rows with the columns a table requires, for writing what the store never would.
fn raw_insert(place: &Place, table: &str, id: u64) {
    let id = id.cast_signed();
    let sql = match table {
        "store_images" => {
            "INSERT INTO store_images (id, captured_at, lon, lat, creator, height, width,
                is_pano, sequence) VALUES (?1, 0, 13.2, 55.7, 1, 10, 10, 0, 'raw')"
        }
        "store_map_features" => {
            "INSERT INTO store_map_features (id, first_seen_at, last_seen_at, object_value,
                object_type, lon, lat, images)
             VALUES (?1, 0, 0, 'object--street-light', 'point', 13.2, 55.7, ?2)"
        }
        "store_detections" => {
            "INSERT INTO store_detections (id, created_at, geometry, image, value)
             VALUES (?1, 0, '', 1, 'object--street-light')"
        }
        "store_organizations" => {
            "INSERT INTO store_organizations (id, slug, name) VALUES (?1, 'raw', 'Raw')"
        }
        other => panic!("no raw insert for {other}"),
    };
    if table == "store_map_features" {
        place.execute(sql, params![id, &[] as &[u8]]);
    } else {
        place.execute(sql, params![id]);
    }
}

#[test]
fn an_id_held_by_two_kinds_on_disk_fails_the_load() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        an_id_held_by_two_kinds_fails_the_load(backend);
    }
}

fn new_place(backend: Backend, name: &str) -> Option<Place> {
    match backend {
        Backend::Sqlite => Some(Place::Sqlite(TempDir::new())),
        Backend::Postgres => streetlevel_db::test_postgres_database(name).map(Place::Postgres),
    }
}

fn an_id_held_by_two_kinds_fails_the_load(backend: Backend) {
    let data = dataset(8, 30);
    // (existing entity's ID, the table that gets a second row with it, the two kinds).
    let image_id = data.images[3].id.0;
    let cases = [
        (image_id, "store_map_features", "Image", "MapFeature"),
        (image_id, "store_organizations", "Image", "Organization"),
        (
            data.detections[2].id.0,
            "store_map_features",
            "MapFeature",
            "Detection",
        ),
        (
            data.organizations[1].id.0,
            "store_detections",
            "Detection",
            "Organization",
        ),
        (
            data.map_features[0].id.0,
            "store_images",
            "Image",
            "MapFeature",
        ),
    ];
    for (id, table, first, second) in cases {
        let Some(place) = new_place(backend, "two_kinds") else {
            return;
        };
        let mut store = place.open().unwrap();
        insert_all(&mut store, &data);
        drop(store);
        raw_insert(&place, table, id);
        let error = place.open().unwrap_err();
        let StoreError::CorruptRow { reason, .. } = &error else {
            panic!("{id} in {table}: {error}");
        };
        assert_eq!(
            reason,
            &format!("id {id} belongs to both a {first} and a {second}"),
            "{table}"
        );
    }
    // Above `i64::MAX` (negative in SQL) too.
    let Some(place) = new_place(backend, "two_kinds") else {
        return;
    };
    let mut store = place.open().unwrap();
    let mut image = data.images[0].clone();
    image.id = ImageId(u64::MAX - 5);
    store.insert_images(&[image]).unwrap();
    drop(store);
    raw_insert(&place, "store_detections", u64::MAX - 5);
    let error = place.open().unwrap_err();
    assert!(
        matches!(
            &error,
            StoreError::CorruptRow { table: "store_detections", reason }
                if reason.contains(&(u64::MAX - 5).to_string())
        ),
        "{error}"
    );
    // And a store whose IDs are all distinct still loads.
    raw_insert(&place, "store_map_features", 77);
    place.execute(
        "DELETE FROM store_detections WHERE id = ?1",
        params![(u64::MAX - 5).cast_signed()],
    );
    let store = place.open().unwrap();
    assert_eq!(store.kind_of(EntityId(77)), Some(EntityKind::MapFeature));
}
