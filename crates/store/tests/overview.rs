//! The precomputed low-zoom tiles against the scans they replace and a brute-force
//! projection of every image. Overview pyramid: random points all over the world with many on
//! cell edges, half units and tile borders, inserted in several batches, asked for random
//! z0–5 tiles and buffers. Sequence lines: random walks growing over several batches, asked
//! for random z6–13 tiles, buffers and tolerances.

// Helpers outside `#[test]` functions unwrap and panic too.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::HashSet;

use common::brute_sequences;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streetlevel_model::{
    CreatorId, Image, ImageId, MediaId, OrganizationId, Point, SequenceId, Timestamp,
};
use streetlevel_mvt::{MAX_LATITUDE, ProjectionConfig, TileId, TileProjector, world_to_lon_lat};
use streetlevel_store::{
    Computed, ComputedUpdate, GeometryVariant, Store, TakedownNote, TileImage,
};

/// Global units across the world at z5 and extent 4096.
const UNITS_Z5: f64 = 4096.0 * 32.0;

/// A longitude on a half-unit of z5 near a cell edge, or anywhere.
fn random_lon(rng: &mut StdRng, anchors: &[f64]) -> f64 {
    match rng.random_range(0..6) {
        0 => rng.random_range(-180.0..=180.0),
        1 => [-180.0, 180.0, 0.0][rng.random_range(0..3)],
        2 => anchors[rng.random_range(0..anchors.len())],
        _ => {
            // Half units around a cell edge of z5 (also an edge at every lower zoom when the
            // cell number is even enough).
            let step = 1u32 << rng.random_range(0..=11u32);
            let cell = f64::from(rng.random_range(0..=2048 / step) * step);
            let half_units = cell * 128.0 + f64::from(rng.random_range(-3..=3i32));
            ((half_units / 2.0 / UNITS_Z5) * 360.0 - 180.0).clamp(-180.0, 180.0)
        }
    }
}

/// A latitude near a tile or cell row edge, at the poles or the projection's limit, or
/// anywhere.
fn random_lat(rng: &mut StdRng, anchors: &[f64]) -> f64 {
    match rng.random_range(0..6) {
        0 => rng.random_range(-85.0..=85.0),
        1 => [0.0, MAX_LATITUDE, -MAX_LATITUDE, 90.0, -90.0][rng.random_range(0..5)],
        2 => anchors[rng.random_range(0..anchors.len())],
        _ => {
            let zoom = rng.random_range(0..=5u32);
            let rows = 64u32 << zoom;
            let row = f64::from(rng.random_range(0..=rows));
            let nudge = f64::from(rng.random_range(-2..=2i32)) * 0.25;
            let (_, lat) = world_to_lon_lat(0.0, (row * 64.0 + nudge) / (f64::from(rows) * 64.0));
            lat
        }
    }
}

fn random_point(rng: &mut StdRng, lons: &[f64], lats: &[f64]) -> Point {
    Point::new(random_lon(rng, lons), random_lat(rng, lats))
}

/// An image whose tile properties (creator, organization, panorama, compass angles, one or
/// both or none) vary with its ID, so that a tile item with another image's properties shows.
fn image(id: u64, geometry: Point, computed: Option<Point>, sequence: u64) -> Image {
    Image {
        id: ImageId(id),
        altitude: None,
        atomic_scale: None,
        camera_parameters: None,
        camera_type: None,
        captured_at: Timestamp(i64::try_from(id & 0xffff).unwrap()),
        compass_angle: (!id.is_multiple_of(4))
            .then_some(f64::from(u32::try_from(id % 360).unwrap()) + 0.5),
        computed_altitude: None,
        computed_compass_angle: (!id.is_multiple_of(3))
            .then_some(f64::from(u32::try_from(id % 359).unwrap()) + 0.25),
        computed_geometry: computed,
        computed_rotation: None,
        creator: CreatorId(1 + id % 3),
        exif_orientation: None,
        geometry,
        height: 3000,
        width: 4000,
        is_pano: id.is_multiple_of(5),
        make: None,
        model: None,
        merge_cc: None,
        mesh: None,
        sequence: SequenceId(format!("s{sequence}")),
        sfm_cluster: None,
        quality_score: None,
        organization: id.is_multiple_of(2).then_some(OrganizationId(100 + id % 7)),
    }
}

fn dataset(seed: u64, count: usize) -> Vec<Image> {
    let mut rng = StdRng::seed_from_u64(seed);
    let lons: Vec<f64> = (0..3).map(|_| random_lon(&mut rng, &[0.0])).collect();
    let lats: Vec<f64> = (0..3).map(|_| random_lat(&mut rng, &[0.0])).collect();
    let mut used = HashSet::new();
    let mut images = Vec::with_capacity(count);
    while images.len() < count {
        let id = if rng.random_bool(0.05) {
            u64::MAX - rng.random_range(0..1000)
        } else {
            rng.random_range(1..100_000)
        };
        if !used.insert(id) {
            continue;
        }
        let geometry = random_point(&mut rng, &lons, &lats);
        let computed = match rng.random_range(0..3) {
            0 => None,
            1 => Some(geometry),
            _ => Some(random_point(&mut rng, &lons, &lats)),
        };
        images.push(image(id, geometry, computed, rng.random_range(0..5)));
    }
    images
}

fn brute_overview(
    images: &[Image],
    tile: TileId,
    config: ProjectionConfig,
    variant: GeometryVariant,
) -> Vec<TileImage<'_>> {
    let projector = TileProjector::new(tile, config).unwrap();
    common::brute_overview(
        &common::brute_tile_images(images, &projector, variant),
        config.extent,
    )
}

/// A tile at a random z0–5 around a random image, or one of its neighbours.
fn random_tile(rng: &mut StdRng, images: &[Image]) -> TileId {
    let z = rng.random_range(0..=5u8);
    let anchor = &images[rng.random_range(0..images.len())];
    let point = if rng.random_bool(0.5) {
        anchor.geometry
    } else {
        anchor.computed_geometry.unwrap_or(anchor.geometry)
    };
    let tile = TileId::containing(point.lon, point.lat, z).unwrap();
    let last = i64::from(TileId::tiles_per_axis(z)) - 1;
    let x = (i64::from(tile.x()) + rng.random_range(-1..=1)).clamp(0, last);
    let y = (i64::from(tile.y()) + rng.random_range(-1..=1)).clamp(0, last);
    TileId::new(z, u32::try_from(x).unwrap(), u32::try_from(y).unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pyramid_answers_like_the_scan(seed in any::<u64>(), count in 1usize..300, batches in 1usize..5) {
        let images = dataset(seed, count);
        let mut store = Store::in_memory();
        let size = count.div_ceil(batches);
        for batch in images.chunks(size) {
            store.insert_images(batch).unwrap();
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 0x0b5e);
        for _ in 0..8 {
            let tile = random_tile(&mut rng, &images);
            let buffer = [0, 0, 64, 128, 1024, 100][rng.random_range(0..6)];
            let config = ProjectionConfig { buffer, ..ProjectionConfig::default() };
            let variant = if rng.random_bool(0.5) {
                GeometryVariant::Computed
            } else {
                GeometryVariant::Original
            };
            let expected = brute_overview(&images, tile, config, variant);
            let scanned = store.tile_overview_by_scan(tile, &config, variant).unwrap();
            prop_assert_eq!(&scanned, &expected, "scan, tile {} buffer {}", tile, buffer);
            let got = store.tile_overview(tile, &config, variant).unwrap();
            prop_assert_eq!(&got, &expected, "pyramid, tile {} buffer {}", tile, buffer);
        }
    }
}

const NOTE: TakedownNote<'static> = TakedownNote {
    actor: "test",
    subject: "test",
    at: Timestamp(0),
};

/// Erases about a third of `images` and hides about a third, restores some of the hidden
/// ones, moves the computed location of some images still held (public or hidden, as a
/// reconstruction does), each step in a few calls, and returns the images still public as
/// they are now.
fn take_down(store: &mut Store, images: &[Image], rng: &mut StdRng) -> Vec<Image> {
    let mut erased = HashSet::new();
    let mut hidden = Vec::new();
    for image in images {
        match rng.random_range(0..3) {
            0 => {
                erased.insert(image.id);
            }
            1 => hidden.push(image.id),
            _ => {}
        }
    }
    let erased_list: Vec<ImageId> = erased.iter().copied().collect();
    for chunk in erased_list.chunks(7) {
        store.delete_images(chunk, &NOTE, |_, _| Ok(())).unwrap();
    }
    for chunk in hidden.chunks(5) {
        store.hide_images(chunk, &NOTE).unwrap();
    }
    let restored: Vec<ImageId> = hidden
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.3))
        .collect();
    store.restore_images(&restored, &NOTE).unwrap();
    let lons: Vec<f64> = (0..2).map(|_| random_lon(rng, &[0.0])).collect();
    let lats: Vec<f64> = (0..2).map(|_| random_lat(rng, &[0.0])).collect();
    let mut moved = std::collections::BTreeMap::new();
    for image in images.iter().filter(|image| !erased.contains(&image.id)) {
        if rng.random_bool(0.3) {
            moved.insert(image.id.0, random_point(rng, &lons, &lats));
        }
    }
    let updates: Vec<(ImageId, ComputedUpdate)> = moved
        .iter()
        .map(|(&id, &point)| {
            let id = ImageId(id);
            let computed = Computed {
                computed_geometry: point,
                computed_altitude: 0.0,
                computed_compass_angle: 10.0,
                computed_rotation: [0.0; 3],
                camera_parameters: None,
                atomic_scale: 1.0,
                merge_cc: 1,
                mesh: MediaId(1),
                sfm_cluster: MediaId(1),
            };
            (id, ComputedUpdate::Reconstructed(computed))
        })
        .collect();
    for chunk in updates.chunks(11) {
        store.set_computed(chunk, |_, _| Ok(())).unwrap();
    }
    images
        .iter()
        .filter(|image| {
            !erased.contains(&image.id)
                && (!hidden.contains(&image.id) || restored.contains(&image.id))
        })
        .map(|image| {
            let mut image = image.clone();
            if let Some(&point) = moved.get(&image.id.0) {
                image.computed_geometry = Some(point);
                image.computed_compass_angle = Some(10.0);
            }
            image
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Erasing, hiding, restoring and moving keep the pyramid's answer (points and counts)
    /// the scan's over the images still public, also for cells whose lowest ID went, and a
    /// hidden image moved by a reconstruction stays out.
    #[test]
    fn pyramid_answers_like_the_scan_after_takedowns(seed in any::<u64>(), count in 1usize..300, batches in 1usize..4) {
        let images = dataset(seed, count);
        let mut store = Store::in_memory();
        for batch in images.chunks(count.div_ceil(batches)) {
            store.insert_images(batch).unwrap();
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 0xde1e);
        let public = take_down(&mut store, &images, &mut rng);
        prop_assert_eq!(store.image_count(), public.len());
        for _ in 0..8 {
            let tile = random_tile(&mut rng, &images);
            let buffer = [0, 0, 64, 128, 1024, 100][rng.random_range(0..6)];
            let config = ProjectionConfig { buffer, ..ProjectionConfig::default() };
            let variant = if rng.random_bool(0.5) {
                GeometryVariant::Computed
            } else {
                GeometryVariant::Original
            };
            let expected = brute_overview(&public, tile, config, variant);
            let scanned = store.tile_overview_by_scan(tile, &config, variant).unwrap();
            prop_assert_eq!(&scanned, &expected, "scan, tile {} buffer {}", tile, buffer);
            let got = store.tile_overview(tile, &config, variant).unwrap();
            prop_assert_eq!(&got, &expected, "pyramid, tile {} buffer {}", tile, buffer);
        }
    }
}

#[test]
fn half_units_before_a_tile_edge_go_to_the_right_tile_and_cell() {
    // z5 global units: 4096 per tile. A point half a unit before the edge between tiles 16
    // and 17 rounds onto the edge: with no buffer it is in tile 16 only (cell 64, the edge),
    // with a buffer of one cell it is also in tile 17 at −0.5, which rounds to −1.
    let edge_units = 17.0 * 4096.0;
    let lon = |units: f64| units / UNITS_Z5 * 360.0 - 180.0;
    let images = vec![
        image(10, Point::new(lon(edge_units - 0.5), 0.0), None, 1),
        image(20, Point::new(lon(edge_units), 0.0), None, 1),
        image(30, Point::new(lon(edge_units + 0.25), 0.0), None, 1),
    ];
    let mut store = Store::in_memory();
    store.insert_images(&images).unwrap();
    let left = TileId::new(5, 16, 16).unwrap();
    let right = TileId::new(5, 17, 16).unwrap();
    for buffer in [0, 64] {
        let config = ProjectionConfig {
            buffer,
            ..ProjectionConfig::default()
        };
        for tile in [left, right] {
            let expected = brute_overview(&images, tile, config, GeometryVariant::Original);
            let got = store
                .tile_overview(tile, &config, GeometryVariant::Original)
                .unwrap();
            assert_eq!(got, expected, "tile {tile} buffer {buffer}");
        }
    }
    let config = ProjectionConfig {
        buffer: 0,
        ..ProjectionConfig::default()
    };
    let ids = |tile| -> Vec<ImageId> {
        store
            .tile_overview(tile, &config, GeometryVariant::Original)
            .unwrap()
            .iter()
            .map(|item| item.id)
            .collect()
    };
    // Left: 10 and 20 share the edge cell (10 wins). Right: 20 and 30 share cell 0.
    assert_eq!(ids(left), vec![ImageId(10)]);
    assert_eq!(ids(right), vec![ImageId(20)]);
}

/// Sequences walking from random starts (near Lund or anywhere), with steps of random length
/// so that low zooms see lines of every size, and capture times with ties.
fn walks(seed: u64, count: usize) -> Vec<Image> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut used = HashSet::new();
    let mut images = Vec::new();
    for sequence in 0..count as u64 {
        let (mut lon, mut lat): (f64, f64) = if rng.random_bool(0.7) {
            (
                13.0 + rng.random_range(0.0..0.5),
                55.5 + rng.random_range(0.0..0.4),
            )
        } else {
            (
                rng.random_range(-170.0..170.0),
                rng.random_range(-80.0..80.0),
            )
        };
        let step: f64 = [1e-5, 1e-4, 1e-3, 1e-2][rng.random_range(0..4)];
        let members = rng.random_range(1..80);
        for number in 0..members {
            let id = loop {
                let id = rng.random_range(1..1_000_000u64);
                if used.insert(id) {
                    break id;
                }
            };
            lon = (lon + rng.random_range(-step..step)).clamp(-180.0, 180.0);
            lat = (lat + rng.random_range(-step..step)).clamp(-85.0, 85.0);
            let computed = match rng.random_range(0..3) {
                0 => None,
                _ => Some(Point::new(
                    (lon + rng.random_range(-step..step) / 4.0).clamp(-180.0, 180.0),
                    lat,
                )),
            };
            let mut item = image(id, Point::new(lon, lat), computed, sequence);
            item.captured_at = Timestamp(number / 3);
            images.push(item);
        }
    }
    images
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn precomputed_sequence_lines_answer_like_the_scan(
        seed in any::<u64>(),
        count in 1usize..40,
        batches in 1usize..5,
    ) {
        let mut images = walks(seed, count);
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5e9);
        // Batches cut across sequences, which then grow batch by batch.
        for position in (1..images.len()).rev() {
            if rng.random_bool(0.3) {
                images.swap(position, rng.random_range(0..=position));
            }
        }
        let mut store = Store::in_memory();
        for batch in images.chunks(images.len().div_ceil(batches)) {
            store.insert_images(batch).unwrap();
        }
        for _ in 0..8 {
            let z = rng.random_range(6..=13u8);
            let anchor = &images[rng.random_range(0..images.len())];
            let tile = TileId::containing(anchor.geometry.lon, anchor.geometry.lat, z).unwrap();
            let last = i64::from(TileId::tiles_per_axis(z)) - 1;
            let x = (i64::from(tile.x()) + rng.random_range(-1..=1)).clamp(0, last);
            let tile = TileId::new(z, u32::try_from(x).unwrap(), tile.y()).unwrap();
            let config = ProjectionConfig {
                buffer: [64, 64, 0, 256][rng.random_range(0..4)],
                tolerance: [1.0, 1.0, 1.0, 0.5][rng.random_range(0..4)],
                ..ProjectionConfig::default()
            };
            let variant = if rng.random_bool(0.5) {
                GeometryVariant::Computed
            } else {
                GeometryVariant::Original
            };
            let projector = TileProjector::new(tile, config).unwrap();
            let expected = brute_sequences(&images, &projector, variant);
            let scanned = store.tile_sequences_by_scan(tile, &config, variant).unwrap();
            prop_assert_eq!(&scanned, &expected, "scan, tile {}", tile);
            let got = store.tile_sequences(tile, &config, variant).unwrap();
            prop_assert_eq!(&got, &expected, "precomputed, tile {}", tile);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Sequences that lose images to erasure and hiding (and get some back) keep their
    /// precomputed lines and boxes the scan's.
    #[test]
    fn precomputed_sequence_lines_answer_like_the_scan_after_takedowns(
        seed in any::<u64>(),
        count in 1usize..30,
    ) {
        let images = walks(seed, count);
        let mut store = Store::in_memory();
        store.insert_images(&images).unwrap();
        let mut rng = StdRng::seed_from_u64(seed ^ 0x7a4e);
        let public = take_down(&mut store, &images, &mut rng);
        if public.is_empty() {
            return Ok(());
        }
        for _ in 0..8 {
            let z = rng.random_range(6..=13u8);
            let anchor = &images[rng.random_range(0..images.len())];
            let tile = TileId::containing(anchor.geometry.lon, anchor.geometry.lat, z).unwrap();
            let config = ProjectionConfig::default();
            let variant = if rng.random_bool(0.5) {
                GeometryVariant::Computed
            } else {
                GeometryVariant::Original
            };
            let projector = TileProjector::new(tile, config).unwrap();
            let expected = brute_sequences(&public, &projector, variant);
            let got = store.tile_sequences(tile, &config, variant).unwrap();
            prop_assert_eq!(&got, &expected, "precomputed, tile {}", tile);
        }
    }
}

#[test]
fn points_on_tile_corners_match_the_scan_at_every_low_zoom() {
    // The equator and the prime meridian are tile edges at every zoom from 1: points exactly
    // on them, and half a z5 unit around them, belong to the tiles the scan says.
    let half = 360.0 / UNITS_Z5 / 2.0;
    let mut images = Vec::new();
    for (number, (lon, lat)) in [
        (0.0, 0.0),
        (-half, 0.0),
        (half, 0.0),
        (0.0, MAX_LATITUDE),
        (180.0, -MAX_LATITUDE),
        (-180.0, 90.0),
        (-half / 2.0, -0.0),
    ]
    .into_iter()
    .enumerate()
    {
        images.push(image(100 + number as u64, Point::new(lon, lat), None, 1));
    }
    let mut store = Store::in_memory();
    store.insert_images(&images).unwrap();
    for z in 0..=5u8 {
        let last = TileId::tiles_per_axis(z) - 1;
        let middle = TileId::tiles_per_axis(z) / 2;
        let mut tiles = HashSet::new();
        for x in [0, middle.saturating_sub(1), middle.min(last), last] {
            for y in [0, middle.saturating_sub(1), middle.min(last), last] {
                tiles.insert(TileId::new(z, x, y).unwrap());
            }
        }
        for tile in tiles {
            for buffer in [0, 64] {
                let config = ProjectionConfig {
                    buffer,
                    ..ProjectionConfig::default()
                };
                let expected = brute_overview(&images, tile, config, GeometryVariant::Original);
                let got = store
                    .tile_overview(tile, &config, GeometryVariant::Original)
                    .unwrap();
                assert_eq!(got, expected, "tile {tile} buffer {buffer}");
            }
        }
    }
}
