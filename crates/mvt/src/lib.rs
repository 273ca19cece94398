#![doc = include_str!("../README.md")]

pub mod clip;
pub mod command;
mod decoder;
mod encoder;
mod error;
pub mod generalise;
mod geometry;
mod projector;
pub mod simplify;
mod tile;
mod value;
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod vector_tile;
mod wire;

pub use decoder::{DecodedFeature, DecodedLayer, DecodedTile, Properties, PropertiesIter, decode};
pub use encoder::{LayerBuilder, TileBuilder, VERSION};
pub use error::MvtError;
pub use geometry::Geometry;
pub use projector::{ProjectionConfig, TileProjector};
pub use tile::{
    DEFAULT_EXTENT, EARTH_RADIUS_METRES, LonLatBounds, MAX_LATITUDE, MAX_ZOOM, TileId, TileRange,
    TileTransform, lon_lat_to_mercator, lon_lat_to_world, mercator_to_lon_lat, world_to_lon_lat,
};
pub use value::Value;

/// The geometry types of the `geo` crate used in this API (re-exported so callers need not
/// pin `geo` themselves).
pub use geo;
