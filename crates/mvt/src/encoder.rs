//! Building and encoding tiles: layers with deduplicated key and value tables.

use std::collections::HashMap;

use prost::Message;

use crate::command::encode_geometry;
use crate::value::ScalarKey;
use crate::vector_tile::{Tile, tile};
use crate::{Geometry, MvtError, Value};

/// The MVT version this encoder writes.
pub const VERSION: u32 = 2;

/// Up to this many keys, a layer finds a key by comparing instead of hashing.
const SMALL_KEY_TABLE: usize = 16;

/// A tile under construction.
///
/// ```
/// use streetlevel_mvt::{TileBuilder, Value, geo::point};
/// let mut tile = TileBuilder::default();
/// let layer = tile.layer("image", 4096)?;
/// layer.add_feature(Some(7), &point!(x: 10, y: 20).into(), &[("id", Value::Uint(7))])?;
/// assert!(!tile.encode().is_empty());
/// # Ok::<(), streetlevel_mvt::MvtError>(())
/// ```
#[derive(Debug, Default)]
pub struct TileBuilder {
    layers: Vec<LayerBuilder>,
}

impl TileBuilder {
    /// An empty tile (same as `default()`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The layer called `name`, created with `extent` if it does not exist yet. Asking for an
    /// existing layer with another extent is an error.
    pub fn layer(&mut self, name: &str, extent: u32) -> Result<&mut LayerBuilder, MvtError> {
        if extent == 0 {
            return Err(MvtError::InvalidExtent { extent });
        }
        let index = match self.layers.iter().position(|layer| layer.name == name) {
            Some(index) if self.layers[index].extent == extent => index,
            Some(_) => {
                return Err(MvtError::DuplicateLayerName {
                    name: name.to_owned(),
                });
            }
            None => {
                self.layers.push(LayerBuilder::new(name, extent));
                self.layers.len() - 1
            }
        };
        Ok(&mut self.layers[index])
    }

    /// Whether no layer holds a feature.
    pub fn is_empty(&self) -> bool {
        self.layers.iter().all(|layer| layer.features.is_empty())
    }

    /// The protobuf bytes. Layers without features are left out, so an empty tile is zero
    /// bytes.
    pub fn encode(self) -> Vec<u8> {
        let tile = Tile {
            layers: self
                .layers
                .into_iter()
                .filter(|layer| !layer.features.is_empty())
                .map(LayerBuilder::into_message)
                .collect(),
        };
        tile.encode_to_vec()
    }
}

/// One layer of a [`TileBuilder`].
#[derive(Debug)]
pub struct LayerBuilder {
    name: String,
    extent: u32,
    keys: Vec<String>,
    key_index: HashMap<String, u32>,
    values: Vec<tile::Value>,
    string_index: HashMap<String, u32>,
    scalar_index: HashMap<ScalarKey, u32>,
    features: Vec<tile::Feature>,
}

impl LayerBuilder {
    fn new(name: &str, extent: u32) -> Self {
        Self {
            name: name.to_owned(),
            extent,
            keys: Vec::new(),
            key_index: HashMap::new(),
            values: Vec::new(),
            string_index: HashMap::new(),
            scalar_index: HashMap::new(),
            features: Vec::new(),
        }
    }

    /// The layer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The layer's extent.
    pub fn extent(&self) -> u32 {
        self.extent
    }

    /// The number of features added.
    pub fn len(&self) -> usize {
        self.features.len()
    }

    /// Whether no feature was added.
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }

    /// Adds a feature with an optional id, a geometry in tile coordinates and properties.
    ///
    /// Returns `Ok(false)` and adds nothing when the geometry is empty once repeated points
    /// and degenerate lines and rings are removed. Fails only for deltas beyond 32 bits or
    /// more than 2^29 points in one command.
    pub fn add_feature(
        &mut self,
        id: Option<u64>,
        geometry: &Geometry,
        properties: &[(&str, Value)],
    ) -> Result<bool, MvtError> {
        let mut stream = Vec::new();
        let Some(geometry_type) = encode_geometry(geometry, &mut stream)? else {
            return Ok(false);
        };
        let mut tags = Vec::with_capacity(properties.len() * 2);
        for (key, value) in properties {
            tags.push(self.key(key));
            tags.push(self.value(value));
        }
        self.features.push(tile::Feature {
            id,
            tags,
            r#type: Some(geometry_type as i32),
            geometry: stream,
        });
        Ok(true)
    }

    fn key(&mut self, key: &str) -> u32 {
        // Layers have a handful of keys: comparing them beats hashing the key.
        if self.keys.len() <= SMALL_KEY_TABLE {
            if let Some(index) = self.keys.iter().position(|known| known == key) {
                return index as u32;
            }
        } else if let Some(index) = self.key_index.get(key) {
            return *index;
        }
        let index = self.keys.len() as u32;
        self.keys.push(key.to_owned());
        self.key_index.insert(key.to_owned(), index);
        index
    }

    fn value(&mut self, value: &Value) -> u32 {
        let next = self.values.len() as u32;
        let index = if let Value::String(text) = value {
            if let Some(index) = self.string_index.get(text.as_str()) {
                return *index;
            }
            self.string_index.insert(text.clone(), next);
            next
        } else {
            *self.scalar_index.entry(value.dedup_key()).or_insert(next)
        };
        if index == next {
            self.values.push(value.to_message());
        }
        index
    }

    fn into_message(self) -> tile::Layer {
        tile::Layer {
            version: VERSION,
            name: self.name,
            features: self.features,
            keys: self.keys,
            values: self.values,
            extent: Some(self.extent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::point;

    #[test]
    fn keys_and_values_are_deduplicated_by_wire_type() {
        let mut tile = TileBuilder::new();
        let layer = tile.layer("l", 4096).unwrap();
        let geometry: Geometry = point!(x: 1, y: 1).into();
        for _ in 0..3 {
            let properties = [
                ("a", Value::Int(1)),
                ("b", Value::Uint(1)),
                ("c", Value::Sint(1)),
                ("d", Value::from("1")),
                ("e", Value::Double(1.0)),
                ("f", Value::Float(1.0)),
                ("g", Value::Bool(true)),
                ("h", Value::Int(1)),
            ];
            layer.add_feature(None, &geometry, &properties).unwrap();
        }
        assert_eq!(layer.keys.len(), 8);
        // Seven distinct wire values: "h" reuses "a"'s.
        assert_eq!(layer.values.len(), 7);
        assert_eq!(
            layer.features[2].tags,
            vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 0]
        );
    }

    #[test]
    fn same_layer_name_with_another_extent_is_an_error() {
        let mut tile = TileBuilder::new();
        tile.layer("l", 4096).unwrap();
        assert!(tile.layer("l", 4096).is_ok());
        assert_eq!(
            tile.layer("l", 512).err(),
            Some(MvtError::DuplicateLayerName { name: "l".into() })
        );
        assert_eq!(
            tile.layer("m", 0).err(),
            Some(MvtError::InvalidExtent { extent: 0 })
        );
    }

    #[test]
    fn empty_tile_encodes_to_no_bytes() {
        let mut tile = TileBuilder::new();
        tile.layer("empty", 4096).unwrap();
        assert!(tile.is_empty());
        assert!(tile.encode().is_empty());
    }
}
