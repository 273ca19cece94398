//! Writes sample tiles and what a decoder must read from them, for the cross-check with
//! Python's `mapbox-vector-tile` in `cargo xtask test`.
//!
//! Usage: `cargo run -p streetlevel-mvt --example write_sample_tiles -- <dir>`. For each
//! sample, `<name>.mvt` holds the tile and `<name>.json` the expected layers: extent, and per
//! feature the id, GeoJSON-like geometry in tile coordinates (`y` down) and every property
//! as `{"type": ..., "value": ...}` so the checker can assert integers stay integers.

use std::path::PathBuf;

use num_traits::ToPrimitive as _;
use serde_json::{Value as Json, json};
use streetlevel_mvt::geo::{Coord, LineString, MultiLineString, line_string, point, polygon};
use streetlevel_mvt::{DecodedTile, Geometry, MvtError, TileBuilder, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: write_sample_tiles <dir>")?,
    );
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in [("coverage", coverage()?), ("shapes", shapes()?)] {
        // The expectations come from our decoder; the Rust tests pin our decoder against
        // the encoder's input, so this checks Python reads what we meant to write.
        let decoded = DecodedTile::decode(&bytes)?;
        std::fs::write(dir.join(format!("{name}.mvt")), &bytes)?;
        std::fs::write(
            dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(&expectation(&decoded))?,
        )?;
    }
    Ok(())
}

/// Layers shaped like the coverage tiles: IDs beyond 2^53, every value type.
fn coverage() -> Result<Vec<u8>, MvtError> {
    let mut tile = TileBuilder::new();
    let image = tile.layer("image", 4096)?;
    for index in 0..20_u16 {
        let id = (1u64 << 60) + u64::from(index);
        let point: Geometry =
            point!(x: i32::from(index) * 200, y: 4095 - i32::from(index) * 200).into();
        image.add_feature(
            Some(id),
            &point,
            &[
                ("id", Value::Uint(id)),
                (
                    "captured_at",
                    Value::Int(1_620_000_000_000 + i64::from(index)),
                ),
                ("creator_id", Value::Uint(u64::MAX - u64::from(index))),
                ("sequence_id", Value::String(format!("seq-{}", index % 3))),
                ("is_pano", Value::Bool(index % 2 == 0)),
                ("compass_angle", Value::Sint(-i64::from(index) * 10)),
                ("quality", Value::Float(0.25 * f32::from(index))),
                ("altitude", Value::Double(100.125 + f64::from(index))),
            ],
        )?;
    }
    let sequence = tile.layer("sequence", 4096)?;
    let line: Geometry =
        line_string![(x: -64, y: 10), (x: 2000, y: 2000), (x: 4160, y: 3000)].into();
    sequence.add_feature(
        None,
        &line,
        &[
            ("id", Value::from("abc-sequence")),
            ("image_id", Value::Uint((1 << 60) + 1)),
        ],
    )?;
    Ok(tile.encode())
}

/// Every geometry type, with repeats and a counter-clockwise exterior the encoder must fix.
fn shapes() -> Result<Vec<u8>, MvtError> {
    let mut tile = TileBuilder::new();
    let layer = tile.layer("shapes", 4096)?;
    let star: LineString<i32> = (0..10)
        .map(|index| {
            let angle = f64::from(index) / 10.0 * std::f64::consts::TAU;
            let radius = if index % 2 == 0 { 1000.0 } else { 400.0 };
            Coord {
                x: 2048
                    + (radius * angle.cos())
                        .round()
                        .to_i32()
                        .expect("within the tile"),
                y: 2048
                    + (radius * angle.sin())
                        .round()
                        .to_i32()
                        .expect("within the tile"),
            }
        })
        .collect();
    let geometries: Vec<Geometry> = vec![
        point!(x: 1, y: 2).into(),
        Geometry::Points(vec![point!(x: 5, y: 7), point!(x: 3, y: 2)].into()),
        line_string![(x: 2, y: 2), (x: 2, y: 2), (x: 2, y: 10), (x: 10, y: 10)].into(),
        Geometry::LineStrings(MultiLineString::new(vec![
            line_string![(x: 2, y: 2), (x: 2, y: 10), (x: 10, y: 10)],
            line_string![(x: 1, y: 1), (x: 3, y: 5)],
        ])),
        polygon![(x: 0, y: 0), (x: 0, y: 100), (x: 100, y: 100), (x: 100, y: 0)].into(),
        Geometry::Polygons(
            vec![
                polygon!(
                    exterior: [(x: 0, y: 0), (x: 1000, y: 0), (x: 1000, y: 1000), (x: 0, y: 1000)],
                    interiors: [[(x: 100, y: 100), (x: 200, y: 100), (x: 200, y: 200), (x: 100, y: 200)]],
                ),
                streetlevel_mvt::geo::Polygon::new(star, vec![]),
            ]
            .into(),
        ),
    ];
    for (geometry, index) in geometries.iter().zip(0_u32..) {
        layer.add_feature(
            Some(u64::from(index) + 1),
            geometry,
            &[("index", Value::Int(i64::from(index)))],
        )?;
    }
    Ok(tile.encode())
}

fn expectation(tile: &DecodedTile) -> Json {
    let layers: serde_json::Map<String, Json> = tile
        .layers
        .iter()
        .map(|layer| {
            let features: Vec<Json> = layer
                .features
                .iter()
                .map(|feature| {
                    let properties: serde_json::Map<String, Json> = feature
                        .properties
                        .iter()
                        .map(|(key, value)| (key.to_owned(), typed(value)))
                        .collect();
                    json!({
                        "id": feature.id,
                        "geometry": geometry(&feature.geometry),
                        "properties": properties,
                    })
                })
                .collect();
            (
                layer.name.clone(),
                json!({ "extent": layer.extent, "features": features }),
            )
        })
        .collect();
    Json::Object(layers)
}

fn typed(value: &Value) -> Json {
    match value {
        Value::String(text) => json!({ "type": "string", "value": text }),
        Value::Float(number) => json!({ "type": "float", "value": f64::from(*number) }),
        Value::Double(number) => json!({ "type": "float", "value": number }),
        Value::Int(number) | Value::Sint(number) => json!({ "type": "int", "value": number }),
        Value::Uint(number) => json!({ "type": "int", "value": number }),
        Value::Bool(flag) => json!({ "type": "bool", "value": flag }),
    }
}

fn ring(line: &LineString<i32>) -> Json {
    Json::Array(
        line.coords()
            .map(|coord| json!([coord.x, coord.y]))
            .collect(),
    )
}

/// `GeoJSON` shapes as `mapbox-vector-tile` returns them: single geometries when there is one.
fn geometry(geometry: &Geometry) -> Json {
    match geometry {
        Geometry::Points(points) if points.0.len() == 1 => {
            json!({ "type": "Point", "coordinates": [points.0[0].x(), points.0[0].y()] })
        }
        Geometry::Points(points) => json!({
            "type": "MultiPoint",
            "coordinates": points.iter().map(|point| json!([point.x(), point.y()])).collect::<Vec<_>>(),
        }),
        Geometry::LineStrings(lines) if lines.0.len() == 1 => {
            json!({ "type": "LineString", "coordinates": ring(&lines.0[0]) })
        }
        Geometry::LineStrings(lines) => json!({
            "type": "MultiLineString",
            "coordinates": lines.iter().map(ring).collect::<Vec<_>>(),
        }),
        Geometry::Polygons(polygons) => {
            let rings: Vec<Json> = polygons
                .iter()
                .map(|polygon| {
                    let mut rings = vec![ring(polygon.exterior())];
                    rings.extend(polygon.interiors().iter().map(ring));
                    Json::Array(rings)
                })
                .collect();
            if rings.len() == 1 {
                json!({ "type": "Polygon", "coordinates": rings[0] })
            } else {
                json!({ "type": "MultiPolygon", "coordinates": rings })
            }
        }
    }
}
