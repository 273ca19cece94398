//! Write, drop, reopen from `SQLite`: the same answers.

// Helpers outside `#[test]` functions unwrap and panic too.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use common::{dataset, insert_all};
use streetlevel_model::{
    Detection, DetectionId, EntityId, EntityKind, Image, ImageId, MapFeature, MapFeatureId,
    OrganizationId, SequenceId,
};
use streetlevel_sqlite::MigrationError;
use streetlevel_store::{
    DetectionFilter, ImageFilter, MapFeatureFilter, S2CellId, Store, StoreError,
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

#[test]
fn a_reopened_store_gives_the_same_answers() {
    let directory = TempDir::new();
    let data = dataset(42, 300);
    let before;
    {
        let mut store = Store::open(&directory.0).unwrap();
        assert_eq!(store.image_count(), 0);
        insert_all(&mut store, &data);
        // A second batch of images, written through separately.
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
        before = answers(&store);
    }
    assert!(directory.0.join("streetlevel.sqlite").is_file());
    assert!(directory.0.join("media").is_dir());
    let store = Store::open(&directory.0).unwrap();
    assert_eq!(answers(&store), before);
    for image in &data.images {
        assert_eq!(store.image(image.id).as_ref(), Some(image));
    }
    assert_eq!(store.image(ImageId(0)), None);
}

#[test]
fn a_failed_insert_changes_nothing_on_disk() {
    let directory = TempDir::new();
    let data = dataset(5, 20);
    {
        let mut store = Store::open(&directory.0).unwrap();
        insert_all(&mut store, &data);
        let mut duplicate = data.images[0].clone();
        duplicate.id = ImageId(data.images[1].id.0);
        assert!(matches!(
            store.insert_images(&[duplicate]),
            Err(StoreError::DuplicateId { .. })
        ));
    }
    let store = Store::open(&directory.0).unwrap();
    assert_eq!(store.image_count(), data.images.len());
}

#[test]
fn a_newer_schema_is_refused() {
    let directory = TempDir::new();
    drop(Store::open(&directory.0).unwrap());
    let connection = rusqlite::Connection::open(Store::database_path(&directory.0)).unwrap();
    connection
        .execute("UPDATE store_schema_version SET version = 99", [])
        .unwrap();
    drop(connection);
    let error = Store::open(&directory.0).unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::Migration(MigrationError::SchemaTooNew { found: 99, .. })
        ),
        "{error}"
    );
}

#[test]
fn other_tables_in_the_same_file_are_left_alone() {
    let directory = TempDir::new();
    std::fs::create_dir_all(&directory.0).unwrap();
    let connection = rusqlite::Connection::open(Store::database_path(&directory.0)).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE auth_users (id INTEGER PRIMARY KEY); INSERT INTO auth_users VALUES (7);",
        )
        .unwrap();
    drop(connection);
    let mut store = Store::open(&directory.0).unwrap();
    insert_all(&mut store, &dataset(9, 5));
    drop(store);
    let connection = rusqlite::Connection::open(Store::database_path(&directory.0)).unwrap();
    let count: i64 = connection
        .query_row("SELECT count(*) FROM auth_users", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 1);
}

/// Several servers started at once on a new data directory all open it: the schema is
/// created by whichever migrates first, and the others wait for it instead of failing with
/// "database is locked" (a deferred transaction deadlocked on the lock upgrade).
#[test]
fn processes_opening_a_new_directory_at_once_all_succeed() {
    let directory = TempDir::new();
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|scope| {
        let openers: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    Store::open(&directory.0).map(|store| store.image_count())
                })
            })
            .collect();
        for opener in openers {
            assert_eq!(opener.join().unwrap().unwrap(), 0);
        }
    });
}

/// Runs `sql` on the store's database through a connection of its own (another process).
fn execute_elsewhere(directory: &TempDir, sql: &str) {
    let connection = rusqlite::Connection::open(Store::database_path(&directory.0)).unwrap();
    connection
        .busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    connection.execute_batch(sql).unwrap();
}

/// A trigger that makes `SQLite` refuse rows of `table` with this ID, which the store's own
/// checks know nothing about.
fn refuse_in_sqlite(directory: &TempDir, table: &str, id: u64) {
    execute_elsewhere(
        directory,
        &format!(
            "CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} WHEN NEW.id = {}
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
            id as i64
        ),
    );
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
fn a_write_sqlite_refuses_changes_nothing_in_memory_or_on_disk() {
    let directory = TempDir::new();
    let data = dataset(21, 40);
    let mut store = Store::open(&directory.0).unwrap();
    insert_all(&mut store, &data);
    let before = state(&store);
    let (generation, counts, before_answers) = before.clone();

    // Batches whose last entity SQLite refuses: the rows before it must not stay either.
    // The IDs are free in every kind, one of them above `i64::MAX` (negative in SQL).
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
    refuse_in_sqlite(&directory, "store_images", fresh_ids[2]);
    let error = store.insert_images(&images).unwrap_err();
    assert!(matches!(error, StoreError::Database(_)), "{error}");

    let features: Vec<MapFeature> = [20_000_001, 20_000_002]
        .into_iter()
        .map(|id| MapFeature {
            id: MapFeatureId(id),
            ..data.map_features[0].clone()
        })
        .collect();
    refuse_in_sqlite(&directory, "store_map_features", 20_000_002);
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
    refuse_in_sqlite(&directory, "store_detections", 30_000_002);
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
    let reloaded = Store::open(&directory.0).unwrap();
    assert_eq!(
        (reloaded.image_count(), reloaded.map_feature_count()),
        (counts[0], counts[1])
    );
    assert_eq!(answers(&reloaded), before_answers);
    drop(reloaded);

    // The connection is not left inside a transaction: what SQLite accepts goes through.
    store.insert_images(&images[..2]).unwrap();
    assert_eq!(store.generation(), generation + 1);
    drop(store);
    let reloaded = Store::open(&directory.0).unwrap();
    assert_eq!(reloaded.image_count(), counts[0] + 2);
    assert_eq!(reloaded.image(images[1].id).as_ref(), Some(&images[1]));
}

/// Raw rows with the columns a table requires, for writing what the store never would.
fn raw_insert(directory: &TempDir, table: &str, id: u64) {
    let id = id as i64;
    let sql = match table {
        "store_images" => format!(
            "INSERT INTO store_images (id, captured_at, lon, lat, creator, height, width,
                is_pano, sequence) VALUES ({id}, 0, 13.2, 55.7, 1, 10, 10, 0, 'raw')"
        ),
        "store_map_features" => format!(
            "INSERT INTO store_map_features (id, first_seen_at, last_seen_at, object_value,
                object_type, lon, lat, images)
             VALUES ({id}, 0, 0, 'object--street-light', 'point', 13.2, 55.7, x'')"
        ),
        "store_detections" => format!(
            "INSERT INTO store_detections (id, created_at, geometry, image, value)
             VALUES ({id}, 0, '', 1, 'object--street-light')"
        ),
        "store_organizations" => {
            format!("INSERT INTO store_organizations (id, slug, name) VALUES ({id}, 'raw', 'Raw')")
        }
        other => panic!("no raw insert for {other}"),
    };
    execute_elsewhere(directory, &sql);
}

#[test]
fn an_id_held_by_two_kinds_on_disk_fails_the_load() {
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
        let directory = TempDir::new();
        let mut store = Store::open(&directory.0).unwrap();
        insert_all(&mut store, &data);
        drop(store);
        raw_insert(&directory, table, id);
        let error = Store::open(&directory.0).unwrap_err();
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
    let directory = TempDir::new();
    let mut store = Store::open(&directory.0).unwrap();
    let mut image = data.images[0].clone();
    image.id = ImageId(u64::MAX - 5);
    store.insert_images(&[image]).unwrap();
    drop(store);
    raw_insert(&directory, "store_detections", u64::MAX - 5);
    let error = Store::open(&directory.0).unwrap_err();
    assert!(
        matches!(
            &error,
            StoreError::CorruptRow { table: "store_detections", reason }
                if reason.contains(&(u64::MAX - 5).to_string())
        ),
        "{error}"
    );
    // And a store whose IDs are all distinct still loads.
    raw_insert(&directory, "store_map_features", 77);
    execute_elsewhere(
        &directory,
        &format!(
            "DELETE FROM store_detections WHERE id = {}",
            (u64::MAX - 5) as i64
        ),
    );
    let store = Store::open(&directory.0).unwrap();
    assert_eq!(store.kind_of(EntityId(77)), Some(EntityKind::MapFeature));
}
