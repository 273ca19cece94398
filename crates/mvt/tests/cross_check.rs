//! Cross-check: tiles from our encoder decode to the same layers, features, geometries and
//! property values with an independent decoder (the `mvt-reader` crate).

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

mod common;

use std::collections::BTreeMap;

use geo_types_compat::to_geometry;
use proptest::prelude::*;
use streetlevel_mvt::{DecodedTile, Geometry, TileBuilder, Value};

/// Converts `mvt-reader`'s results into our types.
mod geo_types_compat {
    use streetlevel_mvt::Geometry;
    use streetlevel_mvt::geo::{
        Geometry as GeoGeometry, MultiLineString, MultiPoint, MultiPolygon,
    };

    pub fn to_geometry(geometry: GeoGeometry<i32>) -> Geometry {
        match geometry {
            GeoGeometry::Point(point) => Geometry::Points(MultiPoint::new(vec![point])),
            GeoGeometry::MultiPoint(points) => Geometry::Points(points),
            GeoGeometry::LineString(line) => {
                Geometry::LineStrings(MultiLineString::new(vec![line]))
            }
            GeoGeometry::MultiLineString(lines) => Geometry::LineStrings(lines),
            GeoGeometry::Polygon(polygon) => Geometry::Polygons(MultiPolygon::new(vec![polygon])),
            GeoGeometry::MultiPolygon(polygons) => Geometry::Polygons(polygons),
            other => panic!("unexpected geometry {other:?}"),
        }
    }
}

fn to_value(value: &mvt_reader::feature::Value) -> Value {
    use mvt_reader::feature::Value as Reader;
    match value {
        Reader::String(text) => Value::String(text.clone()),
        Reader::Float(number) => Value::Float(*number),
        Reader::Double(number) => Value::Double(*number),
        Reader::Int(number) => Value::Int(*number),
        Reader::UInt(number) => Value::Uint(*number),
        Reader::SInt(number) => Value::Sint(*number),
        Reader::Bool(flag) => Value::Bool(*flag),
        Reader::Null => panic!("null value"),
    }
}

fn check_against_mvt_reader(bytes: &[u8]) {
    let ours = DecodedTile::decode(bytes).unwrap();
    let reader = mvt_reader::Reader::new(bytes.to_vec()).unwrap();
    let names = reader.get_layer_names().unwrap();
    assert_eq!(
        names,
        ours.layers
            .iter()
            .map(|layer| layer.name.clone())
            .collect::<Vec<_>>()
    );
    for (index, layer) in ours.layers.iter().enumerate() {
        let metadata = &reader.get_layer_metadata().unwrap()[index];
        assert_eq!(metadata.extent, layer.extent);
        assert_eq!(metadata.version, 2);
        let features = reader.get_features_as::<i32>(index).unwrap();
        assert_eq!(features.len(), layer.features.len());
        for (theirs, ours) in features.into_iter().zip(&layer.features) {
            assert_eq!(theirs.id, ours.id);
            assert_eq!(to_geometry(theirs.geometry), ours.geometry);
            let properties: BTreeMap<String, Value> = theirs
                .properties
                .unwrap_or_default()
                .iter()
                .map(|(key, value)| (key.clone(), to_value(value)))
                .collect();
            assert_eq!(properties, ours.properties.to_map());
        }
    }
}

#[test]
fn coverage_like_tile_matches_mvt_reader() {
    let mut tile = TileBuilder::new();
    let image = tile.layer("image", 4096).unwrap();
    for index in 0..50_u16 {
        let id = (1u64 << 60) + u64::from(index);
        let point: Geometry =
            geo::Point::new(i32::from(index) * 80, 4000 - i32::from(index) * 80).into();
        image
            .add_feature(
                Some(id),
                &point,
                &[
                    ("id", Value::Uint(id)),
                    (
                        "captured_at",
                        Value::Int(1_600_000_000_000 + i64::from(index)),
                    ),
                    ("creator_id", Value::Uint(u64::MAX - u64::from(index))),
                    ("sequence_id", Value::String(format!("seq{}", index % 3))),
                    ("is_pano", Value::Bool(index % 2 == 0)),
                    ("compass_angle", Value::Sint(-i64::from(index))),
                    ("quality", Value::Float(0.5)),
                    ("altitude", Value::Double(12.25)),
                ],
            )
            .unwrap();
    }
    let sequence = tile.layer("sequence", 4096).unwrap();
    let line: Geometry = line_string![(x: -10, y: 5), (x: 100, y: 200), (x: 4100, y: 4000)].into();
    sequence
        .add_feature(
            None,
            &line,
            &[
                ("id", Value::from("abc")),
                ("image_id", Value::Uint(1 << 55)),
            ],
        )
        .unwrap();
    check_against_mvt_reader(&tile.encode());
}

proptest! {
    #[test]
    fn random_tiles_match_mvt_reader(
        features in prop::collection::vec(
            (common::geometry(), any::<Option<u64>>(), prop::collection::vec(common::value(), 0..6)),
            1..8,
        ),
    ) {
        let mut tile = TileBuilder::new();
        let layer = tile.layer("random", 4096).unwrap();
        for (geometry, id, values) in &features {
            let keys: Vec<String> = (0..values.len()).map(|index| format!("k{index}")).collect();
            let properties: Vec<(&str, Value)> =
                keys.iter().map(String::as_str).zip(values.iter().cloned()).collect();
            layer.add_feature(*id, geometry, &properties).unwrap();
        }
        let bytes = tile.encode();
        if !bytes.is_empty() {
            check_against_mvt_reader(&bytes);
        }
    }
}

use streetlevel_mvt::geo::{self, line_string};
