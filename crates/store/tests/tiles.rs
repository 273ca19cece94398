//! Tile content queries compared with a brute-force projection of every entity.

// Helpers outside `#[test]` functions unwrap and panic too.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{brute_overview, brute_sequences, brute_tile_images, dataset, insert_all, rng};
use proptest::prelude::*;
use rand::Rng;
use streetlevel_model::{CreatorId, Image, ImageId, ObjectType, Point, SequenceId, Timestamp};
use streetlevel_mvt::{Geometry, ProjectionConfig, TileId, TileProjector};
use streetlevel_store::{GeometryVariant, OVERVIEW_GRID, Store};

fn tile_around(point: Point, z: u8) -> TileId {
    TileId::containing(point.lon, point.lat, z).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn tiles_match_brute_force(seed in any::<u64>(), n in 1usize..200, computed in any::<bool>()) {
        let mut data = dataset(seed, n);
        // Either compass angle may be missing alone (the computed one falls back).
        for image in &mut data.images {
            if image.id.0 % 3 == 0 {
                image.computed_compass_angle = None;
            }
            if image.id.0 % 5 == 0 {
                image.compass_angle = None;
            }
        }
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let variant = if computed { GeometryVariant::Computed } else { GeometryVariant::Original };
        let config = ProjectionConfig::default();
        let mut rng = rng(seed ^ 0x711e);
        for _ in 0..4 {
            let anchor = data.images[rng.random_range(0..data.images.len())].geometry;

            let tile = tile_around(anchor, 14);
            let projector = TileProjector::new(tile, config).unwrap();
            let expected = brute_tile_images(&data.images, &projector, variant);
            let got = store.tile_images(tile, &config, variant).unwrap();
            prop_assert_eq!(&got, &expected);

            for feature_type in [ObjectType::Point, ObjectType::TrafficSign] {
                let mut expected: Vec<_> = data
                    .map_features
                    .iter()
                    .filter(|feature| feature.object_type == feature_type)
                    .filter_map(|feature| {
                        projector
                            .point(feature.geometry.lon, feature.geometry.lat)
                            .map(|geometry| (feature.clone(), geometry))
                    })
                    .collect();
                expected.sort_by_key(|(feature, _)| feature.id);
                let got: Vec<_> = store
                    .tile_map_features(tile, &config, feature_type)
                    .unwrap()
                    .into_iter()
                    .map(|item| (item.feature.clone(), item.geometry))
                    .collect();
                prop_assert_eq!(got, expected);
            }

            let z = rng.random_range(6..=14);
            let tile = tile_around(anchor, z);
            let sequence_config = ProjectionConfig {
                tolerance: if z == 14 { 0.0 } else { config.tolerance },
                ..config
            };
            let projector = TileProjector::new(tile, sequence_config).unwrap();
            let expected = brute_sequences(&data.images, &projector, variant);
            let got = store.tile_sequences(tile, &config, variant).unwrap();
            prop_assert_eq!(got, expected);

            let z = rng.random_range(0..=5);
            let tile = tile_around(anchor, z);
            let projector = TileProjector::new(tile, config).unwrap();
            let expected = brute_overview(&brute_tile_images(&data.images, &projector, variant), config.extent);
            let got = store.tile_overview(tile, &config, variant).unwrap();
            prop_assert_eq!(got, expected);
        }
    }
}

fn image_at(id: u64, lon: f64, lat: f64, time: i64) -> Image {
    Image {
        id: ImageId(id),
        altitude: None,
        atomic_scale: None,
        camera_parameters: None,
        camera_type: None,
        captured_at: Timestamp(time),
        compass_angle: Some(90.0),
        computed_altitude: None,
        computed_compass_angle: None,
        computed_geometry: None,
        computed_rotation: None,
        creator: CreatorId(1),
        exif_orientation: None,
        geometry: Point::new(lon, lat),
        height: 3000,
        width: 4000,
        is_pano: false,
        make: None,
        model: None,
        merge_cc: None,
        mesh: None,
        sequence: SequenceId::from("zigzag"),
        sfm_cluster: None,
        quality_score: None,
        organization: None,
    }
}

#[test]
fn a_sequence_leaving_and_reentering_a_tile_has_several_lines() {
    let tile = TileId::containing(13.19, 55.70, 14).unwrap();
    let bounds = tile.bounds();
    let middle_lat = f64::midpoint(bounds.min_lat, bounds.max_lat);
    let width = bounds.max_lon - bounds.min_lon;
    // In, far east out, back in, out again, in: captured in that order.
    let xs = [0.5, 1.6, 0.4, 1.7, 0.3];
    let images: Vec<Image> = xs
        .iter()
        .zip(0_u32..)
        .map(|(fraction, step)| {
            image_at(
                100 + u64::from(step),
                bounds.min_lon + fraction * width,
                middle_lat + f64::from(step) * 1e-5,
                i64::from(step),
            )
        })
        .collect();
    let mut store = Store::in_memory();
    store.insert_images(&images).unwrap();
    let sequences = store
        .tile_sequences(
            tile,
            &ProjectionConfig::default(),
            GeometryVariant::Original,
        )
        .unwrap();
    assert_eq!(sequences.len(), 1);
    let Geometry::LineStrings(lines) = &sequences[0].geometry else {
        panic!("not lines")
    };
    assert_eq!(lines.0.len(), 3);
    assert_eq!(sequences[0].image_id, ImageId(100));
    // Only the three inside images in the image layer.
    let inside = store
        .tile_images(
            tile,
            &ProjectionConfig::default(),
            GeometryVariant::Original,
        )
        .unwrap();
    let ids: Vec<ImageId> = inside.iter().map(|item| item.id).collect();
    assert_eq!(ids, vec![ImageId(100), ImageId(102), ImageId(104)]);
    assert_eq!(inside[0].compass_angle, Some(90.0));
}

#[test]
fn overview_tiles_stay_small_and_deterministic() {
    // 60,000 images packed into one z5 tile.
    let mut images = Vec::new();
    for number in 0..60_000_u32 {
        let lon = 13.0 + f64::from(number % 300) * 0.002;
        let lat = 55.5 + f64::from(number / 300) * 0.002;
        let mut image = image_at(1000 + u64::from(number), lon, lat, i64::from(number));
        image.sequence = SequenceId(format!("s{}", number / 500));
        images.push(image);
    }
    let mut store = Store::in_memory();
    store.insert_images(&images).unwrap();
    let tile = TileId::containing(13.3, 55.7, 5).unwrap();
    let config = ProjectionConfig::default();
    let first = store
        .tile_overview(tile, &config, GeometryVariant::Original)
        .unwrap();
    let second = store
        .tile_overview(tile, &config, GeometryVariant::Original)
        .unwrap();
    assert_eq!(first, second);
    assert!(!first.is_empty());
    assert!(first.len() < 60_000);
    let cells = (OVERVIEW_GRID + 4) as usize;
    assert!(first.len() <= cells * cells);
}
