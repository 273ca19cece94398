//! Benchmarks of the store on synthetic data around Lund (55.70 N, 13.19 E): loading from
//! `SQLite`, bounding-box search, z14 tile queries, and memory per image.
//!
//! `cargo bench -p streetlevel-store` runs everything at 1M and 10M images (building 10M
//! takes a few minutes and about 6 GB). Before divan's table it prints p50/p99 of the
//! searches and the bytes per image, measured over many random boxes. Under `cargo test` the
//! sizes shrink so that the bench only proves it runs.
//!
//! `STREETLEVEL_STORE_BENCH_SIZES=1M cargo bench -p streetlevel-store --bench store` skips the
//! 10M store (its divan rows then measure an empty store; `none` skips both in-memory stores,
//! e.g. to time only `load_1m_from_sqlite`; `load` prints the load's wall and CPU time without
//! building them).

mod common;

use common::cpu_time::cpu_time;
use common::{CENTRE, SPREAD, Step, benchmarking, scale, wanted};

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streetlevel_model::{
    CameraType, CreatorId, Image, ImageId, MediaId, OrganizationId, Point, SequenceId, Timestamp,
};
use streetlevel_mvt::{ProjectionConfig, TileId};
use streetlevel_store::{BoundingBox, GeometryVariant, ImageFilter, Store};

const CAMERAS: [(&str, &str); 5] = [
    ("Apple", "iPhone 12"),
    ("GoPro", "HERO9 Black"),
    ("Sony", "RX100"),
    ("Samsung", "Galaxy S21"),
    ("Insta360", "ONE X2"),
];

/// Images `first..first + count` of the synthetic set, every field filled.
fn synthetic_images(first: u64, count: u64) -> Vec<Image> {
    common::synthetic_images(first, count, |step| {
        let Step {
            number,
            sequence,
            location,
            heading,
            rng,
        } = step;
        let (make, model) = CAMERAS[(sequence % 5) as usize];
        let pano = sequence % 5 == 4;
        Image {
            id: ImageId(1_000_000_000_000 + number),
            altitude: Some(40.0 + rng.random_range(0.0..5.0)),
            atomic_scale: Some(1.0),
            camera_parameters: (!pano).then(|| vec![0.85, -0.02, 0.0]),
            camera_type: Some(if pano {
                CameraType::Equirectangular
            } else {
                CameraType::Perspective
            }),
            captured_at: Timestamp(1_600_000_000_000 + number.cast_signed() * 1000),
            compass_angle: Some(heading.rem_euclid(360.0)),
            computed_altitude: Some(41.0),
            computed_compass_angle: Some(heading.rem_euclid(360.0)),
            computed_geometry: Some(Point::new(
                location.lon + rng.random_range(-2e-5..2e-5),
                location.lat + rng.random_range(-2e-5..2e-5),
            )),
            computed_rotation: Some([1.5, 0.1, -0.2]),
            creator: CreatorId(1 + sequence % 100),
            exif_orientation: Some(1),
            geometry: location,
            height: if pano { 2048 } else { 3000 },
            width: 4000,
            is_pano: pano,
            make: Some(make.to_owned()),
            model: Some(model.to_owned()),
            merge_cc: Some(1 + sequence % 7),
            mesh: Some(MediaId(number)),
            sequence: SequenceId(format!("seq{sequence:012}")),
            sfm_cluster: Some(MediaId(number)),
            quality_score: Some(0.8),
            organization: sequence
                .is_multiple_of(3)
                .then_some(OrganizationId(7 + sequence % 2)),
        }
    })
}

/// Resident set size of this process in bytes (Linux), or 0.
fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

static STORE_1M: LazyLock<Store> =
    LazyLock::new(|| common::build_if_wanted("1M", true, 1_000_000, synthetic_images));
static STORE_10M: LazyLock<Store> =
    LazyLock::new(|| common::build_if_wanted("10M", true, 10_000_000, synthetic_images));

fn bench_directory() -> PathBuf {
    std::env::temp_dir().join(format!("streetlevel-store-bench-{}", std::process::id()))
}

/// A data directory holding 1M images in `SQLite`, written once per run (and removed at the
/// end).
static DIR_1M: LazyLock<PathBuf> = LazyLock::new(|| {
    let directory = bench_directory();
    let _ = std::fs::remove_dir_all(&directory);
    match Store::open(&directory) {
        Ok(mut store) => {
            let count = scale(1_000_000) as u64;
            let mut first = 0;
            while first < count {
                let size = 200_000.min(count - first);
                if let Err(error) = store.insert_images(&synthetic_images(first, size)) {
                    eprintln!("insert failed: {error}");
                }
                first += size;
            }
        }
        Err(error) => eprintln!("cannot open {}: {error}", directory.display()),
    }
    directory
});

fn random_box(rng: &mut StdRng, size: f64) -> BoundingBox {
    let lon = CENTRE.0 + rng.random_range(-SPREAD.0..SPREAD.0 - size);
    let lat = CENTRE.1 + rng.random_range(-SPREAD.1..SPREAD.1 - size);
    BoundingBox::new(lon, lat, lon + size, lat + size).unwrap_or_else(|_| {
        BoundingBox::new(CENTRE.0, CENTRE.1, CENTRE.0, CENTRE.1).unwrap_or_else(|_| unreachable!())
    })
}

fn bbox_filter(rng: &mut StdRng, size: f64) -> ImageFilter {
    ImageFilter {
        bbox: Some(random_box(rng, size)),
        ..ImageFilter::default()
    }
}

fn centre_tile() -> TileId {
    TileId::containing(CENTRE.0, CENTRE.1, 14).unwrap_or_else(|_| unreachable!())
}

fn percentiles(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |percent: usize| samples[(samples.len() - 1) * percent / 100];
    eprintln!(
        "{label}: p50 {:?}  p99 {:?}  max {:?}  ({} queries)",
        at(50),
        at(99),
        at(100),
        samples.len()
    );
}

/// One `Store::open` of the 1M directory: wall time and CPU time (both threads), so that a
/// busy machine's figures can be told apart from the work done.
fn report_load() {
    let directory = &*DIR_1M;
    let cpu_before = cpu_time();
    let start = Instant::now();
    let count = Store::open(directory).map_or(0, |store| store.image_count());
    eprintln!(
        "1M load from SQLite: {count} images in {:?} wall, {:?} CPU",
        start.elapsed(),
        cpu_time().saturating_sub(cpu_before)
    );
}

fn report() {
    if wanted("1M", true) || wanted("load", true) {
        report_load();
    }
    let before = resident_bytes();
    let store = &*STORE_1M;
    let after_1m = resident_bytes();
    if wanted("1M", true) {
        eprintln!(
            "1M: {} images; structure estimate {} bytes/image; RSS growth {} bytes/image (with strings and allocator slack)",
            store.image_count(),
            store.image_memory_bytes() / store.image_count().max(1),
            after_1m.saturating_sub(before) / store.image_count().max(1)
        );
    }
    let store_10m = &*STORE_10M;
    let after_10m = resident_bytes();
    if wanted("10M", true) {
        eprintln!(
            "10M: {} images; structure estimate {} bytes/image; RSS growth {} bytes/image",
            store_10m.image_count(),
            store_10m.image_memory_bytes() / store_10m.image_count().max(1),
            after_10m.saturating_sub(after_1m) / store_10m.image_count().max(1)
        );
    }
    for (name, store) in [("1M", store), ("10M", store_10m)] {
        if !wanted(name, true) {
            continue;
        }
        for (label, size) in [
            ("0.01 deg box", 0.01),
            ("0.002 deg box", 0.002),
            ("0.199 deg box, most of the area", 0.199),
        ] {
            let mut rng = StdRng::seed_from_u64(7);
            let samples: Vec<Duration> = (0..1000)
                .map(|_| {
                    let filter = bbox_filter(&mut rng, size);
                    let start = Instant::now();
                    black_box(store.search_images(&filter, 2000, None));
                    start.elapsed()
                })
                .collect();
            percentiles(&format!("{name} bbox search, {label}, limit 2000"), samples);
        }
        let config = ProjectionConfig::default();
        let start = Instant::now();
        let images = store.tile_images(centre_tile(), &config, GeometryVariant::Computed);
        let images_time = start.elapsed();
        let start = Instant::now();
        let sequences = store.tile_sequences(centre_tile(), &config, GeometryVariant::Computed);
        eprintln!(
            "{name} z14 centre tile: {} images in {images_time:?}, {} sequences in {:?}",
            images.map_or(0, |items| items.len()),
            sequences.map_or(0, |items| items.len()),
            start.elapsed()
        );
        for z in [6u8, 10] {
            let tile = TileId::containing(CENTRE.0, CENTRE.1, z).unwrap_or_else(|_| unreachable!());
            let start = Instant::now();
            let sequences = store.tile_sequences(tile, &config, GeometryVariant::Computed);
            eprintln!(
                "{name} z{z} sequences: {} in {:?}",
                sequences.map_or(0, |items| items.len()),
                start.elapsed()
            );
        }
        for z in [0u8, 5] {
            let tile = TileId::containing(CENTRE.0, CENTRE.1, z).unwrap_or_else(|_| unreachable!());
            let start = Instant::now();
            let overview = store.tile_overview(tile, &config, GeometryVariant::Original);
            eprintln!(
                "{name} z{z} overview: {} points in {:?}",
                overview.map_or(0, |items| items.len()),
                start.elapsed()
            );
        }
    }
}

fn main() {
    if benchmarking() {
        report();
    }
    divan::main();
    let _ = std::fs::remove_dir_all(bench_directory());
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn load_1m_from_sqlite(bencher: divan::Bencher) {
    let directory = &*DIR_1M;
    bencher.bench(|| {
        let store = Store::open(directory);
        black_box(store.map(|store| store.image_count()).ok())
    });
}

#[divan::bench(args = ["1M", "10M"])]
fn bbox_search_001_deg(bencher: divan::Bencher, size: &str) {
    let store = if size == "1M" {
        &*STORE_1M
    } else {
        &*STORE_10M
    };
    let mut rng = StdRng::seed_from_u64(7);
    bencher
        .with_inputs(|| bbox_filter(&mut rng, 0.01))
        .bench_local_refs(|filter| black_box(store.search_images(filter, 2000, None)));
}

#[divan::bench(args = ["1M", "10M"])]
fn z14_tile_images(bencher: divan::Bencher, size: &str) {
    let store = if size == "1M" {
        &*STORE_1M
    } else {
        &*STORE_10M
    };
    let config = ProjectionConfig::default();
    bencher.bench(|| {
        black_box(
            store
                .tile_images(centre_tile(), &config, GeometryVariant::Computed)
                .map(|items| items.len()),
        )
    });
}

#[divan::bench(args = ["1M", "10M"])]
fn z14_tile_sequences(bencher: divan::Bencher, size: &str) {
    let store = if size == "1M" {
        &*STORE_1M
    } else {
        &*STORE_10M
    };
    let config = ProjectionConfig::default();
    bencher.bench(|| {
        black_box(
            store
                .tile_sequences(centre_tile(), &config, GeometryVariant::Computed)
                .map(|items| items.len()),
        )
    });
}
