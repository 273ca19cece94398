//! The requirement on overview tiles (z0–5): thinned by density so that no tile exceeds
//! 500 KB compressed and 200,000 features, deterministically. Checked on the worst case the
//! thinning allows: every overview cell of the tile (the far edge units too) holds two images
//! in each geometry variant, and every image has the widest property values (IDs near
//! `u64::MAX`, its own 22-character sequence key, its own creator and organization), so every
//! kept feature is as large, and as hard to compress, as it gets.

use streetlevel_model::{CameraType, CreatorId, Image, ImageId, OrganizationId, Point, Timestamp};
use streetlevel_mvt::{DEFAULT_EXTENT, TileId};
use streetlevel_store::{OVERVIEW_GRID, Store};

use super::Tileset;
use super::limits::{MAX_COMPRESSED_BYTES, Values, gzip_default, served};
use crate::Config;

/// "... and 200,000 features" (besides "no tile exceeds 500 KB compressed").
const MAX_FEATURES: usize = 200_000;

/// Tile-local units per overview cell.
const CELL: u32 = DEFAULT_EXTENT / OVERVIEW_GRID;

/// The lon/lat of tile-local units `(x, y)` of `tile` (the far edge, 4096, included).
fn point_in(tile: TileId, x: f64, y: f64) -> Point {
    let (lon, lat) = tile.transform(DEFAULT_EXTENT).unwrap().to_lon_lat(x, y);
    Point::new(lon, lat)
}

/// Tile-local units inside cell `index` (0 to `OVERVIEW_GRID`, the last being the far edge
/// unit alone) at `offset` units into the cell.
fn unit_in_cell(index: u32, offset: f64) -> f64 {
    if index == OVERVIEW_GRID {
        f64::from(DEFAULT_EXTENT)
    } else {
        f64::from(index * CELL) + offset
    }
}

/// Two images per overview cell of `tile`, in both geometry variants, with wide values.
fn dense_images(tile: TileId, values: &mut Values) -> Vec<Image> {
    let mut images = Vec::new();
    for row in 0..=OVERVIEW_GRID {
        for column in 0..=OVERVIEW_GRID {
            for (original, computed) in [((17.3, 40.7), (32.5, 9.1)), ((45.9, 3.2), (5.6, 60.4))] {
                let geometry = point_in(
                    tile,
                    unit_in_cell(column, original.0),
                    unit_in_cell(row, original.1),
                );
                let computed_geometry = point_in(
                    tile,
                    unit_in_cell(column, computed.0),
                    unit_in_cell(row, computed.1),
                );
                images.push(Image {
                    id: ImageId(values.id()),
                    altitude: Some(12.5),
                    atomic_scale: Some(1.0),
                    camera_parameters: Some(vec![0.85, -0.12, 0.03]),
                    camera_type: Some(CameraType::Perspective),
                    // 2014 to 2025, to the millisecond.
                    captured_at: Timestamp(
                        1_388_534_400_000 + i64::try_from(values.next() % 378_691_200_000).unwrap(),
                    ),
                    compass_angle: Some(359.9),
                    computed_altitude: Some(13.0),
                    computed_compass_angle: Some(358.4),
                    computed_geometry: Some(computed_geometry),
                    computed_rotation: Some([0.1, 2.0, -0.3]),
                    creator: CreatorId(values.id()),
                    exif_orientation: Some(1),
                    geometry,
                    height: 3000,
                    width: 4000,
                    is_pano: values.next() & 1 == 1,
                    make: Some(String::from("GoPro")),
                    model: Some(String::from("MAX")),
                    merge_cc: Some(values.id()),
                    mesh: None,
                    sequence: values.sequence_key(),
                    sfm_cluster: None,
                    quality_score: Some(0.9),
                    organization: Some(OrganizationId(values.id())),
                });
            }
        }
    }
    images
}

/// What a client receives for `tileset`/`tile`: the tile built without a cache, its decoded
/// feature count, and the body the server sends to a client accepting gzip.
fn request(store: &Store, tileset: Tileset, tile_id: TileId) -> (Vec<u8>, usize, Vec<u8>) {
    let (bytes, sent) = served(store, tileset, tile_id);
    let features = if bytes.is_empty() {
        0
    } else {
        streetlevel_mvt::decode(&bytes)
            .unwrap()
            .layers
            .iter()
            .map(|layer| layer.features.len())
            .sum()
    };
    (bytes, features, sent)
}

#[test]
fn dense_overview_tiles_stay_within_the_size_and_feature_bounds_and_repeat() {
    let config = Config {
        short_name: String::from("mly"),
        ..Config::default()
    };
    let coverage = ["mly1_public", "mly1_computed_public"]
        .map(|name| Tileset::from_name(&config, name).unwrap());
    assert_eq!(coverage, [Tileset::Coverage, Tileset::ComputedCoverage]);
    // Lund's z5 tile and the whole world: the finest and the coarsest overview.
    let tiles = [
        TileId::containing(13.19, 55.70, 5).unwrap(),
        TileId::new(0, 0, 0).unwrap(),
    ];
    let mut values = Values(0x5EED);
    let mut images = Vec::new();
    for tile_id in tiles {
        images.extend(dense_images(tile_id, &mut values));
    }
    let mut store = Store::in_memory();
    store.insert_images(&images).unwrap();
    // The same images inserted backwards in batches: the tile must not depend on the order.
    let mut reordered = Store::in_memory();
    let backwards: Vec<Image> = images.iter().rev().cloned().collect();
    for batch in backwards.chunks(3_000) {
        reordered.insert_images(batch).unwrap();
    }

    let cells = (OVERVIEW_GRID as usize) * (OVERVIEW_GRID as usize);
    let images_per_tile = images.len() / tiles.len();
    let (mut max_features, mut max_server_gzip, mut max_default_gzip) = (0, 0, 0);
    for tile_id in tiles {
        for tileset in coverage {
            let what = format!(
                "{tileset:?} {}/{}/{}",
                tile_id.z(),
                tile_id.x(),
                tile_id.y()
            );
            let (bytes, features, sent) = request(&store, tileset, tile_id);
            // Every cell is filled, and thinning kept one image of the two in each.
            assert!(
                (cells..images_per_tile).contains(&features),
                "{what}: {features} features from {images_per_tile} images"
            );
            let default_gzip = gzip_default(&bytes);
            assert!(
                features <= MAX_FEATURES,
                "REQUIREMENT BROKEN: {what} has {features} features (max {MAX_FEATURES})"
            );
            assert!(
                sent.len() <= MAX_COMPRESSED_BYTES && default_gzip <= MAX_COMPRESSED_BYTES,
                "REQUIREMENT BROKEN: {what} is {} bytes gzipped as sent, {default_gzip} at the \
                 default level (max {MAX_COMPRESSED_BYTES}; {} bytes raw)",
                sent.len(),
                bytes.len()
            );
            assert_ne!(
                sent, bytes,
                "{what}: the server gzips tiles for clients asking"
            );
            let (again, _, sent_again) = request(&store, tileset, tile_id);
            assert!(
                again == bytes && sent_again == sent,
                "{what}: a repeated request gave other bytes"
            );
            let (from_reordered, _, _) = request(&reordered, tileset, tile_id);
            assert!(
                from_reordered == bytes,
                "{what}: the insertion order changed the tile"
            );
            max_features = max_features.max(features);
            max_server_gzip = max_server_gzip.max(sent.len());
            max_default_gzip = max_default_gzip.max(default_gzip);
        }
        // The map feature tile sets carry nothing at overview zooms.
        for tileset in [Tileset::Points, Tileset::TrafficSigns] {
            assert!(request(&store, tileset, tile_id).0.is_empty());
        }
    }
    eprintln!(
        "worst overview tile: {max_features} features, {max_server_gzip} bytes gzipped as \
         sent, {max_default_gzip} bytes at the default gzip level"
    );
}
