//! Vector tiles (spec 4.1 and 2.6): the four tile sets, their layers and properties with the
//! exact MVT value types. `cache.rs` keeps them encoded and compressed.

use num_traits::ToPrimitive as _;
use streetlevel_model::ObjectType;
use streetlevel_mvt::{DEFAULT_EXTENT, ProjectionConfig, TileBuilder, TileId, Value};
use streetlevel_store::{GeometryVariant, Store, TileImage};

use crate::{Config, Error};

/// The four tile sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tileset {
    /// `{short}1_public`: coverage with original geometries.
    Coverage,
    /// `{short}1_computed_public`: coverage with computed geometries.
    ComputedCoverage,
    /// `{short}_map_feature_point`.
    Points,
    /// `{short}_map_feature_traffic_sign`.
    TrafficSigns,
}

impl Tileset {
    /// The tile set named `name` under the configured short name.
    pub fn from_name(config: &Config, name: &str) -> Option<Tileset> {
        if name == config.coverage_tileset() {
            Some(Tileset::Coverage)
        } else if name == config.computed_coverage_tileset() {
            Some(Tileset::ComputedCoverage)
        } else if name == config.point_tileset() {
            Some(Tileset::Points)
        } else if name == config.traffic_sign_tileset() {
            Some(Tileset::TrafficSigns)
        } else {
            None
        }
    }
}

/// Parses the path's `z`, `x` and `y`: integers with `x, y < 2^z`; errors name the parameter.
pub fn parse_tile(z: &str, x: &str, y: &str) -> Result<TileId, Error> {
    let z: u8 = z
        .parse()
        .ok()
        .filter(|z| *z <= streetlevel_mvt::MAX_ZOOM)
        .ok_or_else(|| {
            Error::bad_parameter(
                "z",
                format!("expected a zoom from 0 to {}", streetlevel_mvt::MAX_ZOOM),
            )
        })?;
    let side = TileId::tiles_per_axis(z);
    let coordinate = |name: &str, text: &str| -> Result<u32, Error> {
        text.parse::<u32>()
            .ok()
            .filter(|value| *value < side)
            .ok_or_else(|| {
                Error::bad_parameter(
                    name,
                    format!("expected an integer from 0 to {} at zoom {z}", side - 1),
                )
            })
    };
    let x = coordinate("x", x)?;
    let y = coordinate("y", y)?;
    TileId::new(z, x, y).map_err(|error| Error::bad_parameter("z", error.to_string()))
}

fn store_error(error: &streetlevel_store::StoreError) -> Error {
    Error::Internal(format!("tile query failed: {error}"))
}

fn mvt_error(error: &streetlevel_mvt::MvtError) -> Error {
    Error::Internal(format!("tile encoding failed: {error}"))
}

/// Builds the tile: layers by zoom as spec 2.6 says, properties with their spec types.
pub fn encode(store: &Store, tileset: Tileset, tile: TileId) -> Result<Vec<u8>, Error> {
    // Lines keep a buffer so that renderers draw them across tile edges without seams. Points
    // get none: clients such as the Python SDK join neighbouring tiles without removing
    // duplicates, so a point must belong to one tile only.
    let line_config = ProjectionConfig::default();
    let point_config = ProjectionConfig {
        buffer: 0,
        ..ProjectionConfig::default()
    };
    let mut builder = TileBuilder::new();
    let z = tile.z();
    match tileset {
        Tileset::Coverage | Tileset::ComputedCoverage => {
            let variant = if tileset == Tileset::Coverage {
                GeometryVariant::Original
            } else {
                GeometryVariant::Computed
            };
            if z <= 5 {
                let images = store
                    .tile_overview(tile, &point_config, variant)
                    .map_err(|e| store_error(&e))?;
                add_images(&mut builder, "overview", &images, false)?;
            }
            if (6..=14).contains(&z) {
                let sequences = store
                    .tile_sequences(tile, &line_config, variant)
                    .map_err(|e| store_error(&e))?;
                if !sequences.is_empty() {
                    let layer = builder
                        .layer("sequence", DEFAULT_EXTENT)
                        .map_err(|e| mvt_error(&e))?;
                    for sequence in &sequences {
                        let mut properties = vec![
                            ("captured_at", Value::Int(sequence.captured_at.millis())),
                            ("creator_id", Value::Uint(sequence.creator_id.0)),
                            ("id", Value::String(sequence.id.as_str().to_owned())),
                            ("image_id", Value::Uint(sequence.image_id.0)),
                            ("is_pano", Value::Bool(sequence.is_pano)),
                        ];
                        if let Some(organization) = sequence.organization_id {
                            properties.push(("organization_id", Value::Uint(organization.0)));
                        }
                        layer
                            .add_feature(None, &sequence.geometry, &properties)
                            .map_err(|e| mvt_error(&e))?;
                    }
                }
            }
            if z == 14 {
                let images = store
                    .tile_images(tile, &point_config, variant)
                    .map_err(|e| store_error(&e))?;
                add_images(&mut builder, "image", &images, true)?;
            }
        }
        Tileset::Points | Tileset::TrafficSigns => {
            if z == 14 {
                let (object_type, name) = if tileset == Tileset::Points {
                    (ObjectType::Point, "point")
                } else {
                    (ObjectType::TrafficSign, "traffic_sign")
                };
                let features = store
                    .tile_map_features(tile, &point_config, object_type)
                    .map_err(|e| store_error(&e))?;
                if !features.is_empty() {
                    let layer = builder
                        .layer(name, DEFAULT_EXTENT)
                        .map_err(|e| mvt_error(&e))?;
                    for item in &features {
                        let feature = item.feature;
                        let properties = [
                            ("first_seen_at", Value::Int(feature.first_seen_at.millis())),
                            ("id", Value::Uint(feature.id.0)),
                            ("last_seen_at", Value::Int(feature.last_seen_at.millis())),
                            ("value", Value::String(feature.object_value.clone())),
                        ];
                        layer
                            .add_feature(Some(feature.id.0), &item.geometry, &properties)
                            .map_err(|e| mvt_error(&e))?;
                    }
                }
            }
        }
    }
    if builder.is_empty() {
        return Ok(Vec::new());
    }
    Ok(builder.encode())
}

/// The `overview` (no organization, no compass; the cell's counts) or `image` layer.
fn add_images(
    builder: &mut TileBuilder,
    name: &str,
    images: &[TileImage<'_>],
    is_image_layer: bool,
) -> Result<(), Error> {
    if images.is_empty() {
        return Ok(());
    }
    let layer = builder
        .layer(name, DEFAULT_EXTENT)
        .map_err(|e| mvt_error(&e))?;
    for image in images {
        let mut properties = vec![
            ("captured_at", Value::Int(image.captured_at.millis())),
            ("creator_id", Value::Uint(image.creator_id.0)),
            ("id", Value::Uint(image.id.0)),
            ("is_pano", Value::Bool(image.is_pano)),
            (
                "sequence_id",
                Value::String(image.sequence_id.as_str().to_owned()),
            ),
        ];
        if let Some(cell) = image.cell {
            properties.push(("count", Value::Uint(u64::from(cell.images))));
            properties.push(("pano_count", Value::Uint(u64::from(cell.panoramas))));
        }
        if is_image_layer {
            if let Some(organization) = image.organization_id {
                properties.push(("organization_id", Value::Uint(organization.0)));
            }
            // A finite angle, rounded to whole degrees (`None` for NaN and infinities).
            if let Some(angle) = image.compass_angle.and_then(|angle| angle.round().to_i64()) {
                properties.push(("compass_angle", Value::Int(angle)));
            }
        }
        layer
            .add_feature(Some(image.id.0), &image.geometry, &properties)
            .map_err(|e| mvt_error(&e))?;
    }
    Ok(())
}

mod cache;
#[cfg(test)]
mod limits;
#[cfg(test)]
mod overview_limits;
#[cfg(test)]
mod sequence_limits;

pub use cache::{CachedTile, TileCache, TileCacheStats, WARM_MAX_ZOOM};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_coordinates_are_checked() {
        assert!(parse_tile("14", "8792", "5129").is_ok());
        for (z, x, y, name) in [
            ("a", "0", "0", "(z)"),
            ("31", "0", "0", "(z)"),
            ("1", "2", "0", "(x)"),
            ("1", "0", "-1", "(y)"),
            ("14", "1.5", "0", "(x)"),
        ] {
            let error = parse_tile(z, x, y).unwrap_err().to_string();
            assert!(error.contains(name), "{z}/{x}/{y}: {error}");
        }
    }
}
