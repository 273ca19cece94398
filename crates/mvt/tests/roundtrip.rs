//! Property tests: what goes into a tile comes out of our decoder, for every geometry type,
//! every value type, and the tile math.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

mod common;

use proptest::prelude::*;
use prost::Message;
use streetlevel_mvt::command::{
    Command, MAX_COMMAND_COUNT, command_integer, parse_command_integer, zigzag_decode,
    zigzag_encode,
};
use streetlevel_mvt::{DecodedTile, Geometry, MvtError, TileBuilder, TileId, Value};

proptest! {
    #[test]
    fn zigzag_round_trips(value in any::<i32>()) {
        prop_assert_eq!(zigzag_decode(zigzag_encode(value)), value);
        // Small magnitudes stay small.
        prop_assert!(zigzag_encode(value) <= value.unsigned_abs().saturating_mul(2));
    }

    #[test]
    fn command_integers_round_trip(
        command in prop_oneof![Just(Command::MoveTo), Just(Command::LineTo), Just(Command::ClosePath)],
        count in 0..=MAX_COMMAND_COUNT,
        too_large in (MAX_COMMAND_COUNT + 1)..=u32::MAX,
    ) {
        let integer = command_integer(command, count).unwrap();
        prop_assert_eq!(parse_command_integer(integer).unwrap(), (command, count));
        let rejected = command_integer(command, too_large);
        prop_assert!(
            matches!(rejected, Err(MvtError::BadCommandCount { count, .. }) if count == too_large),
            "{rejected:?}"
        );
    }

    /// The raw command stream of each geometry type, as prost reads it off the wire, is
    /// exactly what section 4.3 of the specification prescribes for the expected geometry,
    /// written here by a reference encoder that shares no code with ours.
    #[test]
    fn command_streams_are_what_the_specification_prescribes(
        geometry in common::geometry(),
    ) {
        let mut tile = TileBuilder::new();
        tile.layer("layer", 4096).unwrap().add_feature(None, &geometry, &[]).unwrap();
        let message = streetlevel_mvt::vector_tile::Tile::decode(tile.encode().as_slice()).unwrap();
        match common::expected(&geometry) {
            Some(expected) => {
                let feature = &message.layers[0].features[0];
                let (geometry_type, stream) = reference_stream(&expected);
                prop_assert_eq!(feature.r#type, Some(geometry_type));
                prop_assert_eq!(&feature.geometry, &stream);
            }
            None => prop_assert!(message.layers.is_empty()),
        }
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
        let (back_lon, back_lat) = transform.to_lon_lat(
            f64::from(i32::try_from(integer_x).unwrap()),
            f64::from(i32::try_from(integer_y).unwrap()),
        );
        let (again_x, again_y) = transform.to_local(back_lon, back_lat);
        prop_assert!((again_x - x).abs() <= 0.5 + 1e-6, "x {x} -> {again_x}");
        prop_assert!((again_y - y).abs() <= 0.5 + 1e-6, "y {y} -> {again_y}");
    }
}

use streetlevel_mvt::geo;

/// The command stream and geometry type of section 4.3 for a geometry that is already as the
/// wire wants it (repeats removed, rings closed and oriented): one `MoveTo` with every point
/// for points, `MoveTo(1) LineTo(n-1)` per line, `MoveTo(1) LineTo(n-2) ClosePath(1)` per
/// ring, cursor-relative zigzag parameters throughout.
fn reference_stream(geometry: &Geometry) -> (i32, Vec<u32>) {
    fn command(id: u32, count: usize) -> u32 {
        (u32::try_from(count).unwrap() << 3) | id
    }
    fn zigzag(value: i64) -> u32 {
        u32::try_from(if value >= 0 {
            2 * value
        } else {
            -2 * value - 1
        })
        .unwrap()
    }
    let mut stream = Vec::new();
    let mut cursor = (0i64, 0i64);
    let mut parameters = |stream: &mut Vec<u32>, coords: &[geo::Coord<i32>]| {
        for coord in coords {
            let (x, y) = (i64::from(coord.x), i64::from(coord.y));
            stream.push(zigzag(x - cursor.0));
            stream.push(zigzag(y - cursor.1));
            cursor = (x, y);
        }
    };
    let geometry_type = match geometry {
        Geometry::Points(points) => {
            let coords: Vec<_> = points.iter().map(|point| point.0).collect();
            stream.push(command(1, coords.len()));
            parameters(&mut stream, &coords);
            1
        }
        Geometry::LineStrings(lines) => {
            for line in lines {
                stream.push(command(1, 1));
                parameters(&mut stream, &line.0[..1]);
                stream.push(command(2, line.0.len() - 1));
                parameters(&mut stream, &line.0[1..]);
            }
            2
        }
        Geometry::Polygons(polygons) => {
            for polygon in polygons {
                for ring in std::iter::once(polygon.exterior()).chain(polygon.interiors()) {
                    // The decoded ring repeats its first point at the end; the wire does not.
                    let open = &ring.0[..ring.0.len() - 1];
                    stream.push(command(1, 1));
                    parameters(&mut stream, &open[..1]);
                    stream.push(command(2, open.len() - 1));
                    parameters(&mut stream, &open[1..]);
                    stream.push(command(7, 1));
                }
            }
            3
        }
    };
    (geometry_type, stream)
}
