//! The decoded form of a small tile, pinned as a snapshot so any change to the codec's
//! output (ring order, orientation, value types) shows up in review.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

use streetlevel_mvt::geo::{line_string, point, polygon};
use streetlevel_mvt::{DecodedTile, Geometry, TileBuilder, Value};

#[test]
fn decoded_small_tile() {
    let mut tile = TileBuilder::new();
    let layer = tile.layer("mixed", 4096).unwrap();
    let point: Geometry = point!(x: 25, y: 17).into();
    layer
        .add_feature(
            Some(1),
            &point,
            &[("name", Value::from("a")), ("big", Value::Uint(u64::MAX))],
        )
        .unwrap();
    let line: Geometry =
        line_string![(x: 2, y: 2), (x: 2, y: 2), (x: 2, y: 10), (x: 10, y: 10)].into();
    layer
        .add_feature(
            Some(2),
            &line,
            &[("name", Value::from("b")), ("negative", Value::Sint(-5))],
        )
        .unwrap();
    // Counter-clockwise on screen: the encoder must turn it round.
    let square: Geometry = polygon!(
        exterior: [(x: 0, y: 0), (x: 0, y: 100), (x: 100, y: 100), (x: 100, y: 0)],
        interiors: [[(x: 10, y: 10), (x: 20, y: 10), (x: 20, y: 20), (x: 10, y: 20)]],
    )
    .into();
    layer
        .add_feature(
            None,
            &square,
            &[
                ("flag", Value::Bool(true)),
                ("ratio", Value::Float(0.25)),
                ("exact", Value::Double(0.1)),
            ],
        )
        .unwrap();
    let decoded = DecodedTile::decode(&tile.encode()).unwrap();
    insta::assert_debug_snapshot!(decoded);
}
