//! The largest coverage tile at each zoom of a data directory, as the server sends it to a
//! client accepting gzip: for docs/PERFORMANCE.md's tile size figures (issue 19, point 7).
//!
//! Opens the directory (as `streetlevel fixtures` writes it), renders every tile of both
//! coverage tile sets at each zoom asked (default 0 to 13) over the box around the images,
//! with the server's own encoder and stored gzip coding, and prints per zoom the tile with the
//! most gzipped bytes, its raw bytes, features and line vertices:
//!
//! ```sh
//! cargo run --release -p streetlevel-server --example tile_sizes -- DATA_DIR [ZOOM...]
//! ```
//!
//! Every tile of the box is rendered (at 10M images z13 has a few hundred), so the figure is the
//! largest tile there is, not a sample.

// The table on standard output is what the example is for.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::time::Instant;

use streetlevel_mvt::{Geometry, LonLatBounds, TileId, TileRange};
use streetlevel_server::reply::Coding;
use streetlevel_server::tiles::{CachedTile, Tileset};
use streetlevel_store::Store;

/// The largest tile found at one zoom.
#[derive(Default)]
struct Largest {
    tile: Option<(Tileset, TileId)>,
    gzip: usize,
    raw: usize,
    features: usize,
    vertices: usize,
}

fn vertices(geometry: &Geometry) -> usize {
    match geometry {
        Geometry::Points(points) => points.0.len(),
        Geometry::LineStrings(lines) => lines.iter().map(|line| line.0.len()).sum(),
        Geometry::Polygons(polygons) => polygons
            .iter()
            .map(|polygon| {
                polygon.exterior().0.len()
                    + polygon
                        .interiors()
                        .iter()
                        .map(|ring| ring.0.len())
                        .sum::<usize>()
            })
            .sum(),
    }
}

fn main() {
    let mut arguments = std::env::args_os().skip(1);
    let Some(directory) = arguments.next().map(PathBuf::from) else {
        eprintln!("usage: tile_sizes DATA_DIR [ZOOM...]");
        std::process::exit(2);
    };
    let zooms: Vec<u8> = arguments
        .map(|zoom| {
            zoom.to_str()
                .and_then(|zoom| zoom.parse().ok())
                .filter(|zoom| *zoom <= 14)
                .unwrap_or_else(|| {
                    eprintln!(
                        "a zoom is an integer from 0 to 14, not {}",
                        zoom.to_string_lossy()
                    );
                    std::process::exit(2);
                })
        })
        .collect();
    let zooms = if zooms.is_empty() {
        (0..=13).collect()
    } else {
        zooms
    };
    let start = Instant::now();
    let store = match Store::open(&directory) {
        Ok(store) => store,
        Err(error) => {
            eprintln!("cannot open {}: {error}", directory.display());
            std::process::exit(1);
        }
    };
    eprintln!(
        "{} images, {} sequences, opened in {:?}",
        store.image_count(),
        store.sequence_count(),
        start.elapsed()
    );
    let Some([west, south, east, north]) = store.image_extent() else {
        eprintln!("no images");
        return;
    };
    let bounds = LonLatBounds::new(west, south, east, north).unwrap_or_else(|error| {
        eprintln!("bad image extent: {error}");
        std::process::exit(1);
    });
    println!(
        "| Zoom | Tiles | Largest gzipped tile | Gzipped bytes | Raw bytes | Features | Vertices |"
    );
    println!("|---|---|---|---|---|---|---|");
    for z in zooms {
        let zoom_start = Instant::now();
        let range = TileRange::covering(&bounds, z).unwrap_or_else(|error| {
            eprintln!("no tile range at z{z}: {error}");
            std::process::exit(1);
        });
        let largest = largest_tile(&store, range);
        let name = largest.tile.map_or_else(
            || String::from("(all empty)"),
            |(tileset, tile)| format!("{tile} ({tileset:?})"),
        );
        println!(
            "| {z} | {} | {name} | {} | {} | {} | {} |",
            range.len(),
            largest.gzip,
            largest.raw,
            largest.features,
            largest.vertices
        );
        eprintln!("z{z}: {} tiles in {:?}", range.len(), zoom_start.elapsed());
    }
}

/// The tile of `range`, of either coverage tile set, with the most gzipped bytes.
fn largest_tile(store: &Store, range: TileRange) -> Largest {
    let mut largest = Largest::default();
    for tile in range {
        for tileset in [Tileset::Coverage, Tileset::ComputedCoverage] {
            let rendered = CachedTile::render(store, tileset, tile).unwrap_or_else(|error| {
                eprintln!("{tile}: {error:?}");
                std::process::exit(1);
            });
            if rendered.body.is_empty() {
                continue;
            }
            let gzip = rendered
                .coded(Coding::Gzip)
                .map_or(rendered.body.len(), |body| body.len());
            if gzip <= largest.gzip {
                continue;
            }
            let decoded = streetlevel_mvt::decode(&rendered.body).unwrap_or_else(|error| {
                eprintln!("{tile} does not decode: {error}");
                std::process::exit(1);
            });
            let features = decoded.layers.iter().map(|layer| layer.features.len());
            let vertices = decoded
                .layers
                .iter()
                .flat_map(|layer| &layer.features)
                .map(|feature| vertices(&feature.geometry));
            largest = Largest {
                tile: Some((tileset, tile)),
                gzip,
                raw: rendered.body.len(),
                features: features.sum(),
                vertices: vertices.sum(),
            };
        }
    }
    largest
}
