//! Property tests: what goes into a tile comes out of our decoder, for every geometry type,
//! every value type, and the tile math.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

mod common;

use proptest::prelude::*;
use prost::Message;
use streetlevel_mvt::command::{zigzag_decode, zigzag_encode};
use streetlevel_mvt::{DecodedTile, Geometry, TileBuilder, TileId, Value};

proptest! {
    #[test]
    fn zigzag_round_trips(value in any::<i32>()) {
        prop_assert_eq!(zigzag_decode(zigzag_encode(value)), value);
        // Small magnitudes stay small.
        prop_assert!(zigzag_encode(value) <= value.unsigned_abs().saturating_mul(2));
    }

    #[test]
    fn every_geometry_type_round_trips(geometry in common::geometry(), id in any::<Option<u64>>()) {
        let mut tile = TileBuilder::new();
        let added = tile.layer("layer", 4096).unwrap().add_feature(id, &geometry, &[]).unwrap();
        let expected = common::expected(&geometry);
        prop_assert_eq!(added, expected.is_some());
        let decoded = DecodedTile::decode(&tile.encode()).unwrap();
        match expected {
            Some(expected) => {
                let feature = &decoded.layers[0].features[0];
                prop_assert_eq!(&feature.geometry, &expected);
                prop_assert_eq!(feature.id, id);
            }
            None => prop_assert!(decoded.layers.is_empty()),
        }
    }

    #[test]
    fn every_value_type_round_trips(values in prop::collection::vec(common::value(), 1..16)) {
        let mut tile = TileBuilder::new();
        let layer = tile.layer("values", 4096).unwrap();
        let keys: Vec<String> = (0..values.len()).map(|index| format!("key{index}")).collect();
        for pass in 0..2 {
            // The second feature reuses every key and value: deduplication must not mix them up.
            let properties: Vec<(&str, Value)> =
                keys.iter().map(String::as_str).zip(values.iter().cloned()).collect();
            let point: Geometry = geo::Point::new(pass, pass).into();
            layer.add_feature(None, &point, &properties).unwrap();
        }
        let decoded = DecodedTile::decode(&tile.encode()).unwrap();
        for feature in &decoded.layers[0].features {
            for (key, value) in keys.iter().zip(&values) {
                prop_assert_eq!(feature.properties.get(key), Some(value));
            }
        }
    }

    #[test]
    fn encoder_writes_the_bytes_prost_writes(
        features in prop::collection::vec(
            (common::geometry(), any::<Option<u64>>(), prop::collection::vec(common::value(), 0..6)),
            1..8,
        ),
    ) {
        let mut tile = TileBuilder::new();
        for (index, (geometry, id, values)) in features.iter().enumerate() {
            let layer = tile.layer(if index % 2 == 0 { "even" } else { "odd" }, 4096).unwrap();
            let keys: Vec<String> = (0..values.len()).map(|key| format!("k{key}")).collect();
            let properties: Vec<(&str, Value)> =
                keys.iter().map(String::as_str).zip(values.iter().cloned()).collect();
            layer.add_feature(*id, geometry, &properties).unwrap();
        }
        let bytes = tile.encode();
        let message = streetlevel_mvt::vector_tile::Tile::decode(bytes.as_slice()).unwrap();
        prop_assert_eq!(message.encode_to_vec(), bytes);
    }

    #[test]
    fn lon_lat_to_tile_coordinates_and_back_within_half_a_unit(
        lon in -180.0..180.0f64,
        lat in -85.0..85.0f64,
        z in 0u8..=24,
        extent in prop_oneof![Just(256u32), Just(4096u32), Just(8192u32)],
    ) {
        let tile = TileId::containing(lon, lat, z).unwrap();
        prop_assert!(tile.bounds().contains(lon, lat));
        let transform = tile.transform(extent).unwrap();
        let (x, y) = transform.to_local(lon, lat);
        prop_assert!((-1e-6..=f64::from(extent) + 1e-6).contains(&x));
        prop_assert!((-1e-6..=f64::from(extent) + 1e-6).contains(&y));
        let (integer_x, integer_y) = transform.to_local_integer(lon, lat);
        let (back_lon, back_lat) = transform.to_lon_lat(integer_x as f64, integer_y as f64);
        let (again_x, again_y) = transform.to_local(back_lon, back_lat);
        prop_assert!((again_x - x).abs() <= 0.5 + 1e-6, "x {x} -> {again_x}");
        prop_assert!((again_y - y).abs() <= 0.5 + 1e-6, "y {y} -> {again_y}");
    }
}

use streetlevel_mvt::geo;
