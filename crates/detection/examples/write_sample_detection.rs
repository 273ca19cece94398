//! Writes a sample detection geometry and the pixel polygon a decoder must read from it, for
//! the cross-check with Python's `mapbox-vector-tile` in `cargo xtask test`.
//!
//! Usage: `cargo run -p streetlevel-detection --example write_sample_detection -- <dir>`
//! writes `<dir>/detection.json`: `{"geometry", "width", "height", "extent", "layer",
//! "polygons"}` with `polygons` in pixels as our decoder returns them.

use std::path::PathBuf;

use serde_json::json;
use streetlevel_detection::{DETECTION_EXTENT, LAYER_NAME, decode_pixels, encode_pixels};
use streetlevel_mvt::geo::{MultiPolygon, Polygon, polygon};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: write_sample_detection <dir>")?,
    );
    std::fs::create_dir_all(&dir)?;
    let (width, height) = (4000, 3000);
    let sign = polygon!(
        exterior: [(x: 1200.0, y: 800.0), (x: 1800.0, y: 800.0), (x: 1800.0, y: 1400.0), (x: 1200.0, y: 1400.0)],
        interiors: [[(x: 1400.0, y: 1000.0), (x: 1400.0, y: 1200.0), (x: 1600.0, y: 1200.0), (x: 1600.0, y: 1000.0)]],
    );
    let pole: Polygon<f64> = polygon![(x: 1490.0, y: 1400.0), (x: 1510.0, y: 1400.0), (x: 1510.0, y: 2900.0), (x: 1490.0, y: 2900.0)];
    let geometry = encode_pixels(&MultiPolygon::new(vec![sign, pole]), width, height)?;
    let decoded = decode_pixels(&geometry, width, height)?;
    let polygons: Vec<Vec<Vec<[f64; 2]>>> = decoded
        .iter()
        .map(|polygon| {
            std::iter::once(polygon.exterior())
                .chain(polygon.interiors())
                .map(|ring| ring.coords().map(|coord| [coord.x, coord.y]).collect())
                .collect()
        })
        .collect();
    let sample = json!({
        "geometry": geometry,
        "width": width,
        "height": height,
        "extent": DETECTION_EXTENT,
        "layer": LAYER_NAME,
        "polygons": polygons,
    });
    std::fs::write(
        dir.join("detection.json"),
        serde_json::to_string_pretty(&sample)?,
    )?;
    Ok(())
}
