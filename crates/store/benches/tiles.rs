//! Benchmarks of the low-zoom coverage tiles on synthetic data around Lund (55.70 N,
//! 13.19 E): overview tiles (z0, z5) from the pyramid against the scan they replace, and
//! sequence tiles (z6, z10) from precomputed lines against the full scan, each also asked
//! once as a server's first request would.
//!
//! `cargo bench -p streetlevel-store --bench tiles` runs at 1M images; add 10M with
//! `STREETLEVEL_STORE_BENCH_SIZES=1M,10M` (building it takes minutes and about 6 GB). Before
//! divan's table it prints one timing of each query per size and the pyramid's bytes per
//! image. Under `cargo test` the sizes shrink so that the bench only proves it runs.

mod common;

use common::{CENTRE, Step, benchmarking, wanted};

use std::hint::black_box;
use std::sync::LazyLock;
use std::time::Instant;

use rand::Rng;
use streetlevel_model::{CreatorId, Image, ImageId, Point, SequenceId, Timestamp};
use streetlevel_mvt::{ProjectionConfig, TileId};
use streetlevel_store::{GeometryVariant, Store};

const SIZES: [&str; 2] = ["1M", "10M"];

/// Images `first..first + count` of the synthetic walks, with fewer fields than
/// `benches/store.rs` fills.
fn synthetic_images(first: u64, count: u64) -> Vec<Image> {
    common::synthetic_images(first, count, |step| {
        let Step {
            number,
            sequence,
            location,
            heading,
            rng,
        } = step;
        Image {
            id: ImageId(1_000_000_000_000 + number),
            altitude: None,
            atomic_scale: None,
            camera_parameters: None,
            camera_type: None,
            captured_at: Timestamp(1_600_000_000_000 + number.cast_signed() * 1000),
            compass_angle: Some(heading.rem_euclid(360.0)),
            computed_altitude: None,
            computed_compass_angle: Some(heading.rem_euclid(360.0)),
            computed_geometry: Some(Point::new(
                location.lon + rng.random_range(-2e-5..2e-5),
                location.lat + rng.random_range(-2e-5..2e-5),
            )),
            computed_rotation: None,
            creator: CreatorId(1 + sequence % 100),
            exif_orientation: None,
            geometry: location,
            height: 3000,
            width: 4000,
            is_pano: sequence % 5 == 4,
            make: None,
            model: None,
            merge_cc: None,
            mesh: None,
            sequence: SequenceId(format!("seq{sequence:012}")),
            sfm_cluster: None,
            quality_score: None,
            organization: None,
        }
    })
}

static STORE_1M: LazyLock<Store> =
    LazyLock::new(|| common::build_if_wanted("1M", true, 1_000_000, synthetic_images));
static STORE_10M: LazyLock<Store> =
    LazyLock::new(|| common::build_if_wanted("10M", false, 10_000_000, synthetic_images));

fn store(size: &str) -> &'static Store {
    if size == "10M" { &STORE_10M } else { &STORE_1M }
}

fn centre_tile(z: u8) -> TileId {
    TileId::containing(CENTRE.0, CENTRE.1, z).unwrap_or_else(|_| unreachable!())
}

/// What the server asks for points: no buffer.
fn point_config() -> ProjectionConfig {
    ProjectionConfig {
        buffer: 0,
        ..ProjectionConfig::default()
    }
}

/// One timing of each query per size, as a server's first request sees it.
/// Bytes per image, for the report.
#[allow(clippy::cast_precision_loss)] // a ratio printed to two decimals
fn per_image(bytes: usize, images: usize) -> f64 {
    bytes as f64 / images as f64
}

fn report() {
    for size in SIZES {
        if !wanted(size, size == "1M") {
            continue;
        }
        let start = Instant::now();
        let store = store(size);
        let images = store.image_count().max(1);
        eprintln!(
            "{size}: {} images built in {:?}; overview pyramid {} bytes ({:.2} bytes/image); sequence lines {} bytes ({:.2} bytes/image)",
            store.image_count(),
            start.elapsed(),
            store.overview_memory_bytes(),
            per_image(store.overview_memory_bytes(), images),
            store.sequence_lines_memory_bytes(),
            per_image(store.sequence_lines_memory_bytes(), images)
        );
        for z in [0u8, 5] {
            let tile = centre_tile(z);
            let start = Instant::now();
            let pyramid = store.tile_overview(tile, &point_config(), GeometryVariant::Original);
            let pyramid_time = start.elapsed();
            let start = Instant::now();
            let scan =
                store.tile_overview_by_scan(tile, &point_config(), GeometryVariant::Original);
            let scan_time = start.elapsed();
            let same = matches!((&pyramid, &scan), (Ok(a), Ok(b)) if a == b);
            eprintln!(
                "{size} z{z} overview: {} points; pyramid {pyramid_time:?}, scan {scan_time:?} ({:.0}x); same answer: {same}",
                pyramid.map_or(0, |items| items.len()),
                scan_time.as_secs_f64() / pyramid_time.as_secs_f64().max(1e-9)
            );
        }
        for z in [6u8, 10] {
            let tile = centre_tile(z);
            let config = ProjectionConfig::default();
            let start = Instant::now();
            let precomputed = store.tile_sequences(tile, &config, GeometryVariant::Computed);
            let precomputed_time = start.elapsed();
            let start = Instant::now();
            let scan = store.tile_sequences_by_scan(tile, &config, GeometryVariant::Computed);
            let scan_time = start.elapsed();
            let same = matches!((&precomputed, &scan), (Ok(a), Ok(b)) if a == b);
            eprintln!(
                "{size} z{z} sequences: {}; precomputed lines {precomputed_time:?}, scan {scan_time:?} ({:.0}x); same answer: {same}",
                precomputed.map_or(0, |items| items.len()),
                scan_time.as_secs_f64() / precomputed_time.as_secs_f64().max(1e-9)
            );
        }
    }
}

fn main() {
    if benchmarking() {
        report();
    }
    divan::main();
}

#[divan::bench(args = SIZES, sample_count = 20, sample_size = 1)]
fn overview_z0_pyramid(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_overview(centre_tile(0), &point_config(), GeometryVariant::Original))
            .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn overview_z0_scan(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_overview_by_scan(
            centre_tile(0),
            &point_config(),
            GeometryVariant::Original,
        ))
        .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 20, sample_size = 1)]
fn overview_z5_pyramid(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_overview(centre_tile(5), &point_config(), GeometryVariant::Original))
            .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn overview_z5_scan(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_overview_by_scan(
            centre_tile(5),
            &point_config(),
            GeometryVariant::Original,
        ))
        .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 20, sample_size = 1)]
fn sequences_z6_precomputed(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_sequences(
            centre_tile(6),
            &ProjectionConfig::default(),
            GeometryVariant::Computed,
        ))
        .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn sequences_z6_scan(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_sequences_by_scan(
            centre_tile(6),
            &ProjectionConfig::default(),
            GeometryVariant::Computed,
        ))
        .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 20, sample_size = 1)]
fn sequences_z10_precomputed(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_sequences(
            centre_tile(10),
            &ProjectionConfig::default(),
            GeometryVariant::Computed,
        ))
        .map(|items| items.len())
    });
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn sequences_z10_scan(bencher: divan::Bencher, size: &str) {
    let store = store(size);
    bencher.bench(|| {
        black_box(store.tile_sequences_by_scan(
            centre_tile(10),
            &ProjectionConfig::default(),
            GeometryVariant::Computed,
        ))
        .map(|items| items.len())
    });
}
