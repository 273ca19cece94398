//! Encoding and decoding the two reference tiles of the issue: a z14 tile of 5,000 points
//! with 8 properties each, and 500 lines of 200 vertices clipped and simplified. Raw prost
//! decoding of the same bytes is the baseline our validating decoder is compared with.

#![allow(clippy::unwrap_used, clippy::panic)] // Benchmarks fail loudly.

use divan::{Bencher, black_box};
use prost::Message;
use streetlevel_mvt::geo::{Coord, LineString};
use streetlevel_mvt::vector_tile::Tile;
use streetlevel_mvt::{DecodedTile, ProjectionConfig, TileBuilder, TileId, TileProjector, Value};

fn main() {
    divan::main();
}

/// A deterministic pseudo-random stream in `0..1`.
struct Lcg(u64);

impl Lcg {
    #[allow(clippy::cast_precision_loss)] // 53 bits and 2^53: both exact
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct PointRow {
    lon: f64,
    lat: f64,
    id: u64,
    captured_at: i64,
    creator_id: u64,
    sequence_id: String,
    organization_id: u64,
    is_pano: bool,
    compass_angle: i64,
}

fn point_tile() -> TileId {
    TileId::containing(13.3777, 52.5163, 14).unwrap()
}

fn point_rows() -> Vec<PointRow> {
    let bounds = point_tile().bounds();
    let mut random = Lcg(1);
    (0..5000_u32)
        .map(|index| (u64::from(index), i64::from(index)))
        .map(|(index, signed)| PointRow {
            lon: bounds.min_lon + random.next() * (bounds.max_lon - bounds.min_lon),
            lat: bounds.min_lat + random.next() * (bounds.max_lat - bounds.min_lat),
            id: (1 << 60) + index,
            captured_at: 1_600_000_000_000 + signed * 1000,
            creator_id: 100_000_000_000 + index % 50,
            sequence_id: format!("sequence{:06}", index / 100),
            organization_id: 1 + index % 5,
            is_pano: index % 7 == 0,
            compass_angle: signed % 360,
        })
        .collect()
}

fn encode_points(rows: &[PointRow]) -> Vec<u8> {
    let projector = TileProjector::new(point_tile(), ProjectionConfig::default()).unwrap();
    let mut tile = TileBuilder::new();
    let layer = tile.layer("image", 4096).unwrap();
    for row in rows {
        let Some(geometry) = projector.point(row.lon, row.lat) else {
            continue;
        };
        layer
            .add_feature(
                Some(row.id),
                &geometry,
                &[
                    ("id", Value::Uint(row.id)),
                    ("captured_at", Value::Int(row.captured_at)),
                    ("creator_id", Value::Uint(row.creator_id)),
                    ("sequence_id", Value::String(row.sequence_id.clone())),
                    ("organization_id", Value::Uint(row.organization_id)),
                    ("is_pano", Value::Bool(row.is_pano)),
                    ("compass_angle", Value::Int(row.compass_angle)),
                    ("quality_score", Value::Double(0.5)),
                ],
            )
            .unwrap();
    }
    tile.encode()
}

fn line_tile() -> TileId {
    TileId::containing(13.3777, 52.5163, 12).unwrap()
}

/// 500 tracks of 200 vertices starting inside the tile, some leaving it: a vehicle with a
/// slowly turning heading and `step` tile units between images (z12: one unit is about
/// 2.4 m, so a step of 4 is an image every 10 m).
fn tracks(step: f64, turn: f64) -> Vec<LineString<f64>> {
    let bounds = line_tile().bounds();
    let (width, height) = (
        bounds.max_lon - bounds.min_lon,
        bounds.max_lat - bounds.min_lat,
    );
    let unit_lon = width / 4096.0;
    let unit_lat = height / 4096.0;
    let mut random = Lcg(2);
    (0..500)
        .map(|_| {
            let mut lon = bounds.min_lon + random.next() * width;
            let mut lat = bounds.min_lat + random.next() * height;
            let mut heading = random.next() * std::f64::consts::TAU;
            (0..200)
                .map(|_| {
                    heading += (random.next() - 0.5) * turn;
                    lon += heading.cos() * step * unit_lon;
                    lat += heading.sin() * step * unit_lat;
                    Coord { x: lon, y: lat }
                })
                .collect()
        })
        .collect()
}

/// Road-like tracks: the case the target is about.
fn lines() -> Vec<LineString<f64>> {
    tracks(4.0, 0.3)
}

/// Zigzags: every vertex far off the line through its neighbours, so Ramer–Douglas–Peucker
/// keeps nearly everything and meets its quadratic worst case.
fn zigzags() -> Vec<LineString<f64>> {
    tracks(15.0, 6.0)
}

fn encode_lines(lines: &[LineString<f64>]) -> Vec<u8> {
    let config = ProjectionConfig {
        tolerance: 1.0,
        ..ProjectionConfig::default()
    };
    let projector = TileProjector::new(line_tile(), config).unwrap();
    let mut tile = TileBuilder::new();
    let layer = tile.layer("sequence", 4096).unwrap();
    for (index, line) in lines.iter().enumerate() {
        if let Some(geometry) = projector.line_string(line) {
            layer
                .add_feature(
                    None,
                    &geometry,
                    &[
                        ("id", Value::String(format!("sequence{index:06}"))),
                        ("image_id", Value::Uint((1 << 60) + index as u64)),
                        ("is_pano", Value::Bool(false)),
                    ],
                )
                .unwrap();
        }
    }
    tile.encode()
}

/// The points tile is what the issue names: 5,000 features of 8 properties each. Checked
/// before measuring, so a change to the generator cannot quietly shrink the work.
fn assert_point_tile_shape(bytes: &[u8]) {
    let tile = DecodedTile::decode(bytes).unwrap();
    let features = &tile.layers[0].features;
    assert_eq!(features.len(), 5000, "every point lies in the tile");
    assert!(features.iter().all(|feature| feature.properties.len() == 8));
}

/// The lines tile clips and simplifies: some tracks leave the buffered tile, every output
/// vertex lies within it, and simplification drops vertices.
fn assert_line_tile_shape(lines: &[LineString<f64>], bytes: &[u8]) {
    let transform = line_tile().transform(4096).unwrap();
    let buffer = f64::from(ProjectionConfig::default().buffer);
    let inside = |(x, y): (f64, f64)| {
        (-buffer..=4096.0 + buffer).contains(&x) && (-buffer..=4096.0 + buffer).contains(&y)
    };
    let leaving = lines
        .iter()
        .filter(|line| {
            line.coords()
                .any(|coord| !inside(transform.to_local(coord.x, coord.y)))
        })
        .count();
    assert!(leaving > 0, "some tracks must be clipped");
    let tile = DecodedTile::decode(bytes).unwrap();
    let mut vertices = 0;
    for feature in &tile.layers[0].features {
        let streetlevel_mvt::Geometry::LineStrings(parts) = &feature.geometry else {
            panic!("a line tile holds lines");
        };
        for coord in parts.iter().flat_map(LineString::coords) {
            assert!(
                inside((f64::from(coord.x), f64::from(coord.y))),
                "{coord:?}"
            );
            vertices += 1;
        }
    }
    let input: usize = lines.iter().map(|line| line.0.len()).sum();
    assert!(
        vertices < input / 2,
        "simplification keeps {vertices} of {input}"
    );
}

#[divan::bench]
fn encode_5000_points_8_properties(bencher: Bencher) {
    let rows = point_rows();
    assert_point_tile_shape(&encode_points(&rows));
    bencher.bench(|| encode_points(black_box(&rows)));
}

#[divan::bench]
fn encode_500_lines_200_vertices_clipped_simplified(bencher: Bencher) {
    let lines = lines();
    assert_line_tile_shape(&lines, &encode_lines(&lines));
    bencher.bench(|| encode_lines(black_box(&lines)));
}

#[divan::bench]
fn encode_500_zigzags_200_vertices_worst_case(bencher: Bencher) {
    let lines = zigzags();
    bencher.bench(|| encode_lines(black_box(&lines)));
}

#[divan::bench]
fn decode_5000_points(bencher: Bencher) {
    let bytes = encode_points(&point_rows());
    bencher.bench(|| DecodedTile::decode(black_box(&bytes)).unwrap());
}

#[divan::bench]
fn decode_500_lines(bencher: Bencher) {
    let bytes = encode_lines(&lines());
    bencher.bench(|| DecodedTile::decode(black_box(&bytes)).unwrap());
}

#[divan::bench]
fn baseline_prost_only_decode_5000_points(bencher: Bencher) {
    let bytes = encode_points(&point_rows());
    bencher.bench(|| Tile::decode(black_box(bytes.as_slice())).unwrap());
}

#[divan::bench]
fn baseline_prost_only_decode_500_lines(bencher: Bencher) {
    let bytes = encode_lines(&lines());
    bencher.bench(|| Tile::decode(black_box(bytes.as_slice())).unwrap());
}

/// The phases of the line encoding, to see where its time goes.
mod line_phases {
    use super::{Coord, LineString, ProjectionConfig, TileProjector, black_box, line_tile, lines};
    use divan::Bencher;
    use streetlevel_mvt::clip::{ClipBox, clip_line_string};
    use streetlevel_mvt::geo::Simplify;
    use streetlevel_mvt::simplify::simplify_line_string;

    fn projected() -> Vec<LineString<f64>> {
        let transform = line_tile().transform(4096).unwrap();
        lines()
            .iter()
            .map(|line| {
                line.coords()
                    .map(|coord| {
                        let (x, y) = transform.to_local(coord.x, coord.y);
                        Coord { x, y }
                    })
                    .collect()
            })
            .collect()
    }

    /// What the projector does: a polynomial near the tile instead of `sin` and `ln`.
    #[divan::bench]
    fn project(bencher: Bencher) {
        let lines = lines();
        let projector = TileProjector::new(line_tile(), ProjectionConfig::default()).unwrap();
        bencher.bench(|| {
            let mut sum = 0.0;
            for line in black_box(&lines) {
                for coord in line.coords() {
                    sum += projector.to_local(coord.x, coord.y).1;
                }
            }
            sum
        });
    }

    /// The exact formula, for comparison.
    #[divan::bench]
    fn project_exact(bencher: Bencher) {
        let lines = lines();
        let transform = line_tile().transform(4096).unwrap();
        bencher.bench(|| {
            let mut sum = 0.0;
            for line in black_box(&lines) {
                for coord in line.coords() {
                    sum += transform.to_local(coord.x, coord.y).1;
                }
            }
            sum
        });
    }

    #[divan::bench]
    fn clip(bencher: Bencher) {
        let lines = projected();
        let clip_box = ClipBox::for_tile(4096, 64);
        bencher.bench(|| {
            black_box(&lines)
                .iter()
                .map(|line| clip_line_string(line, &clip_box).0.len())
                .sum::<usize>()
        });
    }

    /// geo's `Simplify` (Ramer–Douglas–Peucker alone, no radial pass first) on the same
    /// lines: the baseline of `simplify`.
    #[divan::bench]
    fn simplify_geo(bencher: Bencher) {
        let lines = projected();
        bencher.bench(|| {
            black_box(&lines)
                .iter()
                .map(|line| line.simplify(1.0).0.len())
                .sum::<usize>()
        });
    }

    #[divan::bench]
    fn simplify(bencher: Bencher) {
        let lines = projected();
        bencher.bench(|| {
            black_box(&lines)
                .iter()
                .map(|line| simplify_line_string(line, 1.0).0.len())
                .sum::<usize>()
        });
    }
}
