//! Decoding and encoding one detection geometry: a traffic sign outline of 24 vertices with
//! a hole, in a 4000 x 3000 image. Base64 decoding alone is the baseline.

#![allow(clippy::unwrap_used)] // Benchmarks fail loudly.

use base64::Engine as _;
use divan::{Bencher, black_box};
use streetlevel_detection::{decode_pixels, encode_pixels};
use streetlevel_mvt::geo::{Coord, LineString, MultiPolygon, Polygon};

fn main() {
    divan::main();
}

fn circle(center_x: f64, center_y: f64, radius: f64, vertices: u32) -> LineString<f64> {
    (0..vertices)
        .map(|index| {
            let angle = f64::from(index) / f64::from(vertices) * std::f64::consts::TAU;
            Coord {
                x: center_x + radius * angle.cos(),
                y: center_y + radius * angle.sin(),
            }
        })
        .collect()
}

fn sign() -> MultiPolygon<f64> {
    MultiPolygon::new(vec![Polygon::new(
        circle(1500.0, 1000.0, 300.0, 24),
        vec![circle(1500.0, 1000.0, 200.0, 16)],
    )])
}

#[divan::bench]
fn decode_detection_geometry(bencher: Bencher) {
    let geometry = encode_pixels(&sign(), 4000, 3000).unwrap();
    bencher.bench(|| decode_pixels(black_box(&geometry), 4000, 3000).unwrap());
}

#[divan::bench]
fn encode_detection_geometry(bencher: Bencher) {
    let polygons = sign();
    bencher.bench(|| encode_pixels(black_box(&polygons), 4000, 3000).unwrap());
}

#[divan::bench]
fn baseline_base64_only(bencher: Bencher) {
    let geometry = encode_pixels(&sign(), 4000, 3000).unwrap();
    bencher.bench(|| {
        base64::engine::general_purpose::STANDARD
            .decode(black_box(&geometry))
            .unwrap()
    });
}
