//! A hand-made hostile corpus: every entry decodes to a typed error, never a panic.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

use proptest::prelude::*;
use prost::Message;
use streetlevel_mvt::vector_tile::{Tile, tile};
use streetlevel_mvt::{DecodedTile, MvtError};

fn value(build: impl FnOnce(&mut tile::Value)) -> tile::Value {
    let mut value = tile::Value::default();
    build(&mut value);
    value
}

fn layer(name: &str, features: Vec<tile::Feature>) -> tile::Layer {
    tile::Layer {
        version: 2,
        name: name.to_owned(),
        features,
        keys: vec!["k".to_owned()],
        values: vec![value(|value| value.int_value = Some(1))],
        extent: Some(4096),
    }
}

fn feature(geometry_type: i32, geometry: Vec<u32>, tags: Vec<u32>) -> tile::Feature {
    tile::Feature {
        id: Some(1),
        tags,
        r#type: Some(geometry_type),
        geometry,
    }
}

fn tile_bytes(layers: Vec<tile::Layer>) -> Vec<u8> {
    Tile { layers }.encode_to_vec()
}

fn one_feature(geometry_type: i32, geometry: Vec<u32>, tags: Vec<u32>) -> Vec<u8> {
    tile_bytes(vec![layer(
        "l",
        vec![feature(geometry_type, geometry, tags)],
    )])
}

/// A corpus entry: its name, the bytes, and a test of the error it must produce.
type Entry = (&'static str, Vec<u8>, fn(&MvtError) -> bool);

/// Every entry with the error it must produce.
#[allow(clippy::too_many_lines)] // One line per entry reads best.
fn corpus() -> Vec<Entry> {
    let valid_point = vec![9, 50, 34];
    vec![
        ("truncated varint", vec![0x1a, 0x80], |error| {
            matches!(error, MvtError::Protobuf(_))
        }),
        (
            "eleven-byte varint",
            vec![
                0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            |error| matches!(error, MvtError::Protobuf(_)),
        ),
        (
            "length beyond the input",
            vec![0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00],
            |error| matches!(error, MvtError::Protobuf(_)),
        ),
        (
            "truncated layer",
            tile_bytes(vec![layer(
                "l",
                vec![feature(1, valid_point.clone(), vec![])],
            )])[..6]
                .to_vec(),
            |error| matches!(error, MvtError::Protobuf(_)),
        ),
        ("wrong wire type for layers", vec![0x18, 0x01], |error| {
            matches!(error, MvtError::Protobuf(_))
        }),
        (
            "layer name not UTF-8",
            vec![0x1a, 0x03, 0x0a, 0x01, 0xff],
            |error| matches!(error, MvtError::Protobuf(_)),
        ),
        (
            "huge MoveTo count",
            one_feature(1, vec![(((1 << 29) - 1) << 3) | 1, 2, 2], vec![]),
            |error| matches!(error, MvtError::BadCommandCount { .. }),
        ),
        (
            "huge LineTo count",
            one_feature(2, vec![9, 2, 2, (((1 << 29) - 1) << 3) | 2, 2, 2], vec![]),
            |error| matches!(error, MvtError::BadCommandCount { .. }),
        ),
        (
            "MoveTo count zero",
            one_feature(1, vec![1], vec![]),
            |error| matches!(error, MvtError::BadCommandCount { .. }),
        ),
        (
            "line MoveTo count two",
            one_feature(2, vec![17, 2, 2, 2, 2, 10, 2, 2], vec![]),
            |error| matches!(error, MvtError::BadCommandCount { .. }),
        ),
        (
            "ring of two points",
            one_feature(3, vec![9, 2, 2, 10, 4, 4, 15], vec![]),
            |error| matches!(error, MvtError::BadCommandCount { .. }),
        ),
        (
            "ClosePath count two",
            one_feature(3, vec![9, 0, 0, 18, 20, 0, 0, 20, 23], vec![]),
            |error| matches!(error, MvtError::BadCommandCount { .. }),
        ),
        (
            "LineTo before MoveTo",
            one_feature(2, vec![10, 2, 2], vec![]),
            |error| matches!(error, MvtError::InvalidCommandSequence(_)),
        ),
        (
            "ring without ClosePath",
            one_feature(3, vec![9, 0, 0, 18, 20, 0, 0, 20], vec![]),
            |error| matches!(error, MvtError::InvalidCommandSequence(_)),
        ),
        (
            "point with trailing LineTo",
            one_feature(1, vec![9, 2, 2, 10, 2, 2], vec![]),
            |error| matches!(error, MvtError::InvalidCommandSequence(_)),
        ),
        ("empty line", one_feature(2, vec![], vec![]), |error| {
            matches!(error, MvtError::InvalidCommandSequence(_))
        }),
        (
            "unknown command id",
            one_feature(1, vec![(1 << 3) | 5, 2, 2], vec![]),
            |error| matches!(error, MvtError::UnknownCommand(5)),
        ),
        (
            "geometry type UNKNOWN",
            one_feature(0, valid_point.clone(), vec![]),
            |error| matches!(error, MvtError::UnknownGeometryType(0)),
        ),
        (
            "geometry type 4",
            one_feature(4, valid_point.clone(), vec![]),
            |error| matches!(error, MvtError::UnknownGeometryType(4)),
        ),
        (
            "negative geometry type",
            one_feature(-1, valid_point.clone(), vec![]),
            |error| matches!(error, MvtError::UnknownGeometryType(-1)),
        ),
        (
            "x overflows 32 bits",
            one_feature(1, vec![17, u32::MAX - 1, 0, u32::MAX - 1, 0], vec![]),
            |error| matches!(error, MvtError::CoordinateOverflow),
        ),
        (
            "y underflows 32 bits",
            one_feature(2, vec![9, 0, u32::MAX, 10, 0, u32::MAX], vec![]),
            |error| matches!(error, MvtError::CoordinateOverflow),
        ),
        (
            "hole before exterior",
            one_feature(3, vec![9, 0, 0, 18, 0, 20, 20, 0, 15], vec![]),
            |error| matches!(error, MvtError::InvalidPolygon(_)),
        ),
        (
            "zero-area ring",
            one_feature(3, vec![9, 0, 0, 18, 2, 0, 2, 0, 15], vec![]),
            |error| matches!(error, MvtError::InvalidPolygon(_)),
        ),
        (
            "key index out of range",
            one_feature(1, valid_point.clone(), vec![1, 0]),
            |error| matches!(error, MvtError::KeyIndexOutOfRange { index: 1, len: 1 }),
        ),
        (
            "huge key index",
            one_feature(1, valid_point.clone(), vec![u32::MAX, 0]),
            |error| matches!(error, MvtError::KeyIndexOutOfRange { .. }),
        ),
        (
            "value index out of range",
            one_feature(1, valid_point.clone(), vec![0, 7]),
            |error| matches!(error, MvtError::ValueIndexOutOfRange { index: 7, len: 1 }),
        ),
        (
            "odd tag count",
            one_feature(1, valid_point.clone(), vec![0]),
            |error| matches!(error, MvtError::OddTagCount),
        ),
        (
            "duplicate layer names",
            tile_bytes(vec![
                layer("same", vec![feature(1, valid_point.clone(), vec![])]),
                layer("same", vec![feature(1, valid_point.clone(), vec![])]),
            ]),
            |error| matches!(error, MvtError::DuplicateLayerName { .. }),
        ),
        (
            "value with two fields",
            tile_bytes(vec![tile::Layer {
                values: vec![value(|value| {
                    value.int_value = Some(1);
                    value.bool_value = Some(true);
                })],
                ..layer("l", vec![feature(1, valid_point.clone(), vec![0, 0])])
            }]),
            |error| matches!(error, MvtError::InvalidValue(2)),
        ),
        (
            "value with no field",
            tile_bytes(vec![tile::Layer {
                values: vec![tile::Value::default()],
                ..layer("l", vec![feature(1, valid_point.clone(), vec![0, 0])])
            }]),
            |error| matches!(error, MvtError::InvalidValue(0)),
        ),
        (
            "extent zero",
            tile_bytes(vec![tile::Layer {
                extent: Some(0),
                ..layer("l", vec![])
            }]),
            |error| matches!(error, MvtError::InvalidExtent { extent: 0 }),
        ),
        (
            "version three",
            tile_bytes(vec![tile::Layer {
                version: 3,
                ..layer("l", vec![])
            }]),
            |error| matches!(error, MvtError::UnsupportedVersion { version: 3, .. }),
        ),
        (
            "version zero",
            tile_bytes(vec![tile::Layer {
                version: 0,
                ..layer("l", vec![])
            }]),
            |error| matches!(error, MvtError::UnsupportedVersion { version: 0, .. }),
        ),
    ]
}

#[test]
fn every_hostile_entry_is_a_typed_error() {
    for (name, bytes, expected) in corpus() {
        match DecodedTile::decode(&bytes) {
            Err(error) => assert!(expected(&error), "{name}: unexpected error {error:?}"),
            Ok(tile) => panic!("{name}: decoded to {tile:?}"),
        }
    }
}

#[test]
fn the_corpus_base_is_valid() {
    // The hostile entries differ from this tile in one thing each.
    let bytes = one_feature(1, vec![9, 50, 34], vec![0, 0]);
    let tile = DecodedTile::decode(&bytes).unwrap();
    assert_eq!(tile.layers[0].features.len(), 1);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = DecodedTile::decode(&bytes);
    }

    #[test]
    fn arbitrary_command_streams_never_panic(
        geometry_type in -1..5i32,
        stream in prop::collection::vec(prop_oneof![0u32..64, any::<u32>()], 0..64),
        tags in prop::collection::vec(0u32..3, 0..6),
    ) {
        let _ = DecodedTile::decode(&one_feature(geometry_type, stream, tags));
    }
}
