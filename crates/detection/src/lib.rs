#![doc = include_str!("../README.md")]

mod error;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use streetlevel_mvt::geo::{Coord, LineString, MultiPolygon, Polygon};
use streetlevel_mvt::{DecodedTile, Geometry, TileBuilder};

pub use error::DetectionError;

/// The extent of the grid detection coordinates live on (spec section 2.3 and 8).
pub const DETECTION_EXTENT: u32 = 4096;

/// The layer name our encoder writes. Decoding accepts any name: the tile must simply hold
/// exactly one feature. (The original service's clients, e.g. the Python SDK, read the first
/// feature of whatever layer is there; the name follows the original service's object
/// recognition layer.)
pub const LAYER_NAME: &str = "mpy-or";

/// Standard base64 alphabet; padding optional on input, written on output.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes a detection `geometry` string to polygons in normalized image coordinates
/// (`0..=1`, origin top-left, `y` down): tile coordinates divided by the extent.
///
/// Vertices outside the grid (below 0 or above the extent, which our encoder never writes
/// but the vector tile format allows) are returned as they are, outside `0..=1`, rather than
/// refused or moved: a caller that draws them clips to the image as it would any polygon.
pub fn decode_normalized(geometry: &str) -> Result<MultiPolygon<f64>, DetectionError> {
    decode_scaled(geometry, 1.0, 1.0)
}

/// Decodes a detection `geometry` string to polygons in pixel coordinates of an image of
/// `width` x `height` pixels (origin top-left, `y` down).
pub fn decode_pixels(
    geometry: &str,
    width: u32,
    height: u32,
) -> Result<MultiPolygon<f64>, DetectionError> {
    check_size(width, height)?;
    decode_scaled(geometry, f64::from(width), f64::from(height))
}

/// Encodes polygons in pixel coordinates of a `width` x `height` image as a detection
/// `geometry` string: one polygon feature (several polygons make a multi-polygon) in layer
/// [`LAYER_NAME`], extent [`DETECTION_EXTENT`], standard base64. Coordinates outside the
/// image are clamped to its edges.
pub fn encode_pixels(
    polygons: &MultiPolygon<f64>,
    width: u32,
    height: u32,
) -> Result<String, DetectionError> {
    check_size(width, height)?;
    encode_scaled(polygons, f64::from(width), f64::from(height))
}

/// Encodes polygons in normalized image coordinates (`0..=1`) as a detection `geometry`
/// string (see [`encode_pixels`]).
pub fn encode_normalized(polygons: &MultiPolygon<f64>) -> Result<String, DetectionError> {
    encode_scaled(polygons, 1.0, 1.0)
}

fn check_size(width: u32, height: u32) -> Result<(), DetectionError> {
    if width == 0 || height == 0 {
        return Err(DetectionError::ZeroImageSize { width, height });
    }
    Ok(())
}

fn decode_scaled(
    geometry: &str,
    width: f64,
    height: f64,
) -> Result<MultiPolygon<f64>, DetectionError> {
    let bytes = BASE64
        .decode(geometry.trim())
        .map_err(|error| DetectionError::InvalidBase64(error.to_string()))?;
    let tile = DecodedTile::decode(&bytes)?;
    let mut features = tile.layers.iter().flat_map(|layer| {
        layer
            .features
            .iter()
            .map(move |feature| (layer.extent, feature))
    });
    let Some((extent, feature)) = features.next() else {
        return Err(DetectionError::NoPolygon);
    };
    let extra = features.count();
    if extra > 0 {
        return Err(DetectionError::TooManyFeatures(extra + 1));
    }
    if extent != DETECTION_EXTENT {
        return Err(DetectionError::UnexpectedExtent {
            found: extent,
            expected: DETECTION_EXTENT,
        });
    }
    let Geometry::Polygons(polygons) = &feature.geometry else {
        return Err(DetectionError::NoPolygon);
    };
    let scale_x = width / f64::from(DETECTION_EXTENT);
    let scale_y = height / f64::from(DETECTION_EXTENT);
    let scale = |ring: &LineString<i32>| -> LineString<f64> {
        ring.coords()
            .map(|coord| Coord {
                x: f64::from(coord.x) * scale_x,
                y: f64::from(coord.y) * scale_y,
            })
            .collect()
    };
    Ok(polygons
        .iter()
        .map(|polygon| {
            Polygon::new(
                scale(polygon.exterior()),
                polygon.interiors().iter().map(scale).collect(),
            )
        })
        .collect())
}

/// A finite coordinate in grid units, rounded to the nearest one and clamped to `0..=extent`.
#[allow(clippy::cast_possible_truncation)] // clamped to `DETECTION_EXTENT`, far below `i32::MAX`
fn to_extent(value: f64, extent: f64) -> i32 {
    value.round().clamp(0.0, extent) as i32
}

fn encode_scaled(
    polygons: &MultiPolygon<f64>,
    width: f64,
    height: f64,
) -> Result<String, DetectionError> {
    let extent = f64::from(DETECTION_EXTENT);
    let to_grid = |ring: &LineString<f64>| -> Result<LineString<i32>, DetectionError> {
        ring.coords()
            .map(|coord| {
                if !coord.x.is_finite() || !coord.y.is_finite() {
                    return Err(DetectionError::NonFiniteCoordinate);
                }
                Ok(Coord {
                    x: to_extent(coord.x / width * extent, extent),
                    y: to_extent(coord.y / height * extent, extent),
                })
            })
            .collect()
    };
    let grid = polygons
        .iter()
        .map(|polygon| {
            Ok(Polygon::new(
                to_grid(polygon.exterior())?,
                polygon
                    .interiors()
                    .iter()
                    .map(to_grid)
                    .collect::<Result<_, DetectionError>>()?,
            ))
        })
        .collect::<Result<Vec<_>, DetectionError>>()?;
    let mut tile = TileBuilder::new();
    let added = tile.layer(LAYER_NAME, DETECTION_EXTENT)?.add_feature(
        None,
        &Geometry::Polygons(MultiPolygon::new(grid)),
        &[],
    )?;
    if !added {
        return Err(DetectionError::EmptyPolygon);
    }
    Ok(BASE64.encode(tile.encode()))
}
