//! Decoding tiles with validation: every malformed input is an [`MvtError`], never a panic,
//! and allocation is bounded by the input's size.

use std::collections::{BTreeMap, HashSet};

use prost::Message;

use crate::command::decode_geometry;
use crate::vector_tile::{Tile, tile};
use crate::{Geometry, MvtError, Value};

/// A decoded tile: its layers in wire order.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedTile {
    /// The layers, each with a distinct name.
    pub layers: Vec<DecodedLayer>,
}

/// One decoded layer.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedLayer {
    /// The layer's name.
    pub name: String,
    /// The MVT version (1 or 2).
    pub version: u32,
    /// Tile-local units per tile side.
    pub extent: u32,
    /// The features in wire order.
    pub features: Vec<DecodedFeature>,
}

/// One decoded feature.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedFeature {
    /// The feature id, if the tile carries one.
    pub id: Option<u64>,
    /// The geometry in tile-local coordinates; polygons have closed rings.
    pub geometry: Geometry,
    /// The properties by key; when a key repeats, the last value wins.
    pub properties: BTreeMap<String, Value>,
}

impl DecodedTile {
    /// Decodes and validates protobuf bytes. Zero bytes are a tile without layers.
    pub fn decode(bytes: &[u8]) -> Result<Self, MvtError> {
        let tile = Tile::decode(bytes).map_err(|error| MvtError::Protobuf(error.to_string()))?;
        let mut names = HashSet::with_capacity(tile.layers.len());
        let mut layers = Vec::with_capacity(tile.layers.len());
        for layer in tile.layers {
            if !names.insert(layer.name.clone()) {
                return Err(MvtError::DuplicateLayerName { name: layer.name });
            }
            layers.push(decode_layer(layer)?);
        }
        Ok(Self { layers })
    }

    /// The layer called `name`.
    pub fn layer(&self, name: &str) -> Option<&DecodedLayer> {
        self.layers.iter().find(|layer| layer.name == name)
    }
}

/// Decodes and validates protobuf bytes (see [`DecodedTile::decode`]).
pub fn decode(bytes: &[u8]) -> Result<DecodedTile, MvtError> {
    DecodedTile::decode(bytes)
}

fn decode_layer(layer: tile::Layer) -> Result<DecodedLayer, MvtError> {
    let extent = layer.extent();
    if !(1..=2).contains(&layer.version) {
        return Err(MvtError::UnsupportedVersion {
            layer: layer.name,
            version: layer.version,
        });
    }
    if extent == 0 {
        return Err(MvtError::InvalidExtent { extent });
    }
    let values = layer
        .values
        .into_iter()
        .map(|value| Value::from_message(value).map_err(MvtError::InvalidValue))
        .collect::<Result<Vec<_>, _>>()?;
    let keys = layer.keys;
    let mut features = Vec::with_capacity(layer.features.len());
    for feature in layer.features {
        let geometry_type = feature.r#type.unwrap_or(0);
        let geometry = decode_geometry(geometry_type, &feature.geometry)?;
        if feature.tags.len() % 2 != 0 {
            return Err(MvtError::OddTagCount);
        }
        let mut properties = BTreeMap::new();
        for pair in feature.tags.chunks_exact(2) {
            let key = keys
                .get(pair[0] as usize)
                .ok_or(MvtError::KeyIndexOutOfRange {
                    index: pair[0],
                    len: keys.len(),
                })?;
            let value = values
                .get(pair[1] as usize)
                .ok_or(MvtError::ValueIndexOutOfRange {
                    index: pair[1],
                    len: values.len(),
                })?;
            properties.insert(key.clone(), value.clone());
        }
        features.push(DecodedFeature {
            id: feature.id,
            geometry,
            properties,
        });
    }
    Ok(DecodedLayer {
        name: layer.name,
        version: layer.version,
        extent,
        features,
    })
}
