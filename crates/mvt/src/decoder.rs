//! Decoding tiles with validation: every malformed input is an [`MvtError`], never a panic,
//! and allocation is bounded by the input's size.
//!
//! The bytes are read in one pass straight into per-layer tables (keys, values, and every
//! feature's tags and command stream in two flat arrays), then validated in the order a
//! reader of the prost messages would: wire-format errors first, then per layer its name,
//! version, extent and values, then per feature its geometry and tags. Features share their
//! layer's key and value tables through [`Properties`] instead of copying them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::command::decode_geometry;
use crate::wire::{
    FIXED32, FIXED64, LEN, RECURSION_LIMIT, Reader, VARINT, expect_wire_type, low_u32, malformed,
};
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
    /// The properties; when a key repeats, the last value wins.
    pub properties: Properties,
}

/// A feature's properties: pairs of indexes into its layer's key and value tables, which all
/// features of the layer share (no copy per feature). Keys are unique: when a feature repeats
/// a key, its last value wins.
///
/// Compares and prints as a map sorted by key.
#[derive(Clone)]
pub struct Properties {
    table: Arc<PropertyTable>,
    /// Range of `table.tags`, in `u32`s (two per property).
    start: u32,
    end: u32,
}

/// A layer's tables, shared by its features.
#[derive(Debug, Default)]
struct PropertyTable {
    keys: Vec<String>,
    values: Vec<Value>,
    /// Every feature's validated (key index, value index) pairs, back to back.
    tags: Vec<u32>,
}

impl Properties {
    fn pairs(&self) -> &[u32] {
        &self.table.tags[self.start as usize..self.end as usize]
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.iter()
            .find_map(|(found, value)| (found == key).then_some(value))
    }

    /// Whether the feature has `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The number of properties.
    pub fn len(&self) -> usize {
        self.pairs().len() / 2
    }

    /// Whether the feature has no property.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The properties as `(key, value)` in wire order (of each key's last occurrence).
    pub fn iter(&self) -> PropertiesIter<'_> {
        PropertiesIter {
            table: &self.table,
            pairs: self.pairs().chunks_exact(2),
        }
    }

    /// The properties copied into a map.
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        self.iter()
            .map(|(key, value)| (key.to_owned(), value.clone()))
            .collect()
    }

    fn sorted(&self) -> BTreeMap<&str, &Value> {
        self.iter().collect()
    }
}

/// An iterator over a feature's `(key, value)` pairs.
#[derive(Debug, Clone)]
pub struct PropertiesIter<'a> {
    table: &'a PropertyTable,
    pairs: std::slice::ChunksExact<'a, u32>,
}

impl<'a> Iterator for PropertiesIter<'a> {
    type Item = (&'a str, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        let pair = self.pairs.next()?;
        // Indexes were validated when decoding.
        let key = self.table.keys.get(pair[0] as usize)?;
        let value = self.table.values.get(pair[1] as usize)?;
        Some((key.as_str(), value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.pairs.size_hint()
    }
}

impl<'a> IntoIterator for &'a Properties {
    type Item = (&'a str, &'a Value);
    type IntoIter = PropertiesIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for Properties {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The same text as a `BTreeMap<String, Value>`.
        formatter.debug_map().entries(self.sorted()).finish()
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.sorted() == other.sorted()
    }
}

impl PartialEq<BTreeMap<String, Value>> for Properties {
    fn eq(&self, other: &BTreeMap<String, Value>) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(key, value)| other.get(key) == Some(value))
    }
}

impl DecodedTile {
    /// Decodes and validates protobuf bytes. Zero bytes are a tile without layers.
    pub fn decode(bytes: &[u8]) -> Result<Self, MvtError> {
        let raw_layers = read_tile(bytes)?;
        let mut names = HashSet::with_capacity(raw_layers.len());
        let mut layers = Vec::with_capacity(raw_layers.len());
        for raw in raw_layers {
            if !names.insert(raw.name.clone()) {
                return Err(MvtError::DuplicateLayerName { name: raw.name });
            }
            layers.push(decode_layer(raw)?);
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

/// A layer as read from the wire, not validated yet.
struct RawLayer {
    name: String,
    version: u32,
    extent: u32,
    keys: Vec<String>,
    values: Vec<Value>,
    /// The field count of the first value message not holding exactly one field.
    invalid_value: Option<usize>,
    /// Every feature's tags, back to back.
    tags: Vec<u32>,
    /// Every feature's command stream, back to back.
    geometry: Vec<u32>,
    features: Vec<RawFeature>,
}

struct RawFeature {
    id: Option<u64>,
    geometry_type: i32,
    tags: (usize, usize),
    geometry: (usize, usize),
}

fn read_tile(bytes: &[u8]) -> Result<Vec<RawLayer>, MvtError> {
    let mut reader = Reader::new(bytes);
    let mut layers = Vec::new();
    while !reader.is_empty() {
        let (field, wire_type) = reader.key()?;
        if field == 3 {
            expect_wire_type(wire_type, LEN)?;
            layers.push(read_layer(reader.bytes()?)?);
        } else {
            reader.skip(field, wire_type, RECURSION_LIMIT)?;
        }
    }
    Ok(layers)
}

fn read_layer(bytes: &[u8]) -> Result<RawLayer, MvtError> {
    let mut reader = Reader::new(bytes);
    let mut layer = RawLayer {
        name: String::new(),
        version: 1,
        extent: crate::DEFAULT_EXTENT,
        keys: Vec::new(),
        values: Vec::new(),
        invalid_value: None,
        tags: Vec::new(),
        geometry: Vec::new(),
        features: Vec::new(),
    };
    let depth = RECURSION_LIMIT - 1;
    while !reader.is_empty() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => {
                expect_wire_type(wire_type, LEN)?;
                reader.string()?.clone_into(&mut layer.name);
            }
            2 => {
                expect_wire_type(wire_type, LEN)?;
                let feature = read_feature(reader.bytes()?, &mut layer, depth - 1)?;
                layer.features.push(feature);
            }
            3 => {
                expect_wire_type(wire_type, LEN)?;
                layer.keys.push(reader.string()?.to_owned());
            }
            4 => {
                expect_wire_type(wire_type, LEN)?;
                match read_value(reader.bytes()?, depth - 1)? {
                    Ok(value) => layer.values.push(value),
                    Err(count) => {
                        layer.invalid_value.get_or_insert(count);
                        // Keeps later indexes right; the layer is rejected anyway.
                        layer.values.push(Value::Bool(false));
                    }
                }
            }
            5 => {
                expect_wire_type(wire_type, VARINT)?;
                layer.extent = low_u32(reader.varint()?);
            }
            15 => {
                expect_wire_type(wire_type, VARINT)?;
                layer.version = low_u32(reader.varint()?);
            }
            _ => reader.skip(field, wire_type, depth)?,
        }
    }
    Ok(layer)
}

fn read_feature(bytes: &[u8], layer: &mut RawLayer, depth: u32) -> Result<RawFeature, MvtError> {
    let mut reader = Reader::new(bytes);
    let tags_start = layer.tags.len();
    let geometry_start = layer.geometry.len();
    let mut id = None;
    let mut geometry_type = 0;
    while !reader.is_empty() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => {
                expect_wire_type(wire_type, VARINT)?;
                id = Some(reader.varint()?);
            }
            2 => reader.repeated_u32(wire_type, &mut layer.tags)?,
            3 => {
                expect_wire_type(wire_type, VARINT)?;
                geometry_type = low_u32(reader.varint()?).cast_signed();
            }
            4 => reader.repeated_u32(wire_type, &mut layer.geometry)?,
            _ => reader.skip(field, wire_type, depth)?,
        }
    }
    Ok(RawFeature {
        id,
        geometry_type,
        tags: (tags_start, layer.tags.len()),
        geometry: (geometry_start, layer.geometry.len()),
    })
}

/// The value, or the number of fields when it does not hold exactly one.
fn read_value(bytes: &[u8], depth: u32) -> Result<Result<Value, usize>, MvtError> {
    let mut reader = Reader::new(bytes);
    // One slot per field, as prost's message has: a repeated field replaces its slot.
    let mut slots: [Option<Value>; 7] = Default::default();
    while !reader.is_empty() {
        let (field, wire_type) = reader.key()?;
        let value = match field {
            1 => {
                expect_wire_type(wire_type, LEN)?;
                Value::String(reader.string()?.to_owned())
            }
            2 => {
                expect_wire_type(wire_type, FIXED32)?;
                Value::Float(f32::from_le_bytes(reader.fixed32()?))
            }
            3 => {
                expect_wire_type(wire_type, FIXED64)?;
                Value::Double(f64::from_le_bytes(reader.fixed64()?))
            }
            4 => {
                expect_wire_type(wire_type, VARINT)?;
                Value::Int(reader.varint()?.cast_signed())
            }
            5 => {
                expect_wire_type(wire_type, VARINT)?;
                Value::Uint(reader.varint()?)
            }
            6 => {
                expect_wire_type(wire_type, VARINT)?;
                let raw = reader.varint()?;
                Value::Sint((raw >> 1).cast_signed() ^ -(raw & 1).cast_signed())
            }
            7 => {
                expect_wire_type(wire_type, VARINT)?;
                Value::Bool(reader.varint()? != 0)
            }
            _ => {
                reader.skip(field, wire_type, depth)?;
                continue;
            }
        };
        slots[field as usize - 1] = Some(value);
    }
    let count = slots.iter().filter(|slot| slot.is_some()).count();
    if count != 1 {
        return Ok(Err(count));
    }
    Ok(slots.into_iter().flatten().next().ok_or(0))
}

fn decode_layer(raw: RawLayer) -> Result<DecodedLayer, MvtError> {
    let RawLayer {
        name,
        version,
        extent,
        keys,
        values,
        invalid_value,
        mut tags,
        geometry,
        features: raw_features,
    } = raw;
    if !(1..=2).contains(&version) {
        return Err(MvtError::UnsupportedVersion {
            layer: name,
            version,
        });
    }
    if extent == 0 {
        return Err(MvtError::InvalidExtent { extent });
    }
    if let Some(count) = invalid_value {
        return Err(MvtError::InvalidValue(count));
    }
    let mut raw_features = raw_features;
    merge_repeated_key_strings(&raw_features, &mut tags, &keys);
    keep_last_values_of_repeated_keys(&mut raw_features, &mut tags, keys.len(), values.len());
    let table = Arc::new(PropertyTable { keys, values, tags });
    let mut features = Vec::with_capacity(raw_features.len());
    for feature in &raw_features {
        let geometry = decode_geometry(
            feature.geometry_type,
            &geometry[feature.geometry.0..feature.geometry.1],
        )?;
        let (start, end) = feature.tags;
        if !(end - start).is_multiple_of(2) {
            return Err(MvtError::OddTagCount);
        }
        for pair in table.tags[start..end].chunks_exact(2) {
            if pair[0] as usize >= table.keys.len() {
                return Err(MvtError::KeyIndexOutOfRange {
                    index: pair[0],
                    len: table.keys.len(),
                });
            }
            if pair[1] as usize >= table.values.len() {
                return Err(MvtError::ValueIndexOutOfRange {
                    index: pair[1],
                    len: table.values.len(),
                });
            }
        }
        let start = u32::try_from(start).map_err(|_| malformed("too many tags"))?;
        let end = u32::try_from(end).map_err(|_| malformed("too many tags"))?;
        features.push(DecodedFeature {
            id: feature.id,
            geometry,
            properties: Properties {
                table: Arc::clone(&table),
                start,
                end,
            },
        });
    }
    Ok(DecodedLayer {
        name,
        version,
        extent,
        features,
    })
}

/// Points the tags at the first of equal strings when a layer's key table holds a string
/// twice, so that a feature naming both entries has that key once (its last value), as a
/// decoder keyed by name sees it and as re-encoding would write it. Out-of-range indexes
/// are left for validation; a table of distinct keys, the usual one, rewrites nothing.
fn merge_repeated_key_strings(features: &[RawFeature], tags: &mut [u32], keys: &[String]) {
    let mut first: HashMap<&str, u32> = HashMap::with_capacity(keys.len());
    let canonical: Vec<u32> = (0u32..)
        .zip(keys)
        .map(|(index, key)| *first.entry(key.as_str()).or_insert(index))
        .collect();
    if (0u32..)
        .zip(&canonical)
        .all(|(index, &first)| first == index)
    {
        return;
    }
    for feature in features {
        let (start, end) = feature.tags;
        for pair in tags[start..end].chunks_exact_mut(2) {
            if let Some(&key) = canonical.get(pair[0] as usize) {
                pair[0] = key;
            }
        }
    }
}

/// Rewrites the tags of features that repeat a key so that each key appears once, with its
/// last value. Features whose tags are invalid (odd count, index out of range) are left as
/// they are: validation rejects them afterwards, in wire order.
fn keep_last_values_of_repeated_keys(
    features: &mut [RawFeature],
    tags: &mut [u32],
    key_count: usize,
    value_count: usize,
) {
    // `seen[key]` holds the stamp of the last feature that used the key.
    let mut seen = vec![0u32; key_count];
    // Marks for the rare feature that repeats a key, allocated on first need.
    let mut marks: Vec<bool> = Vec::new();
    for (index, feature) in features.iter_mut().enumerate() {
        let (start, end) = feature.tags;
        let pairs = &mut tags[start..end];
        if !pairs.len().is_multiple_of(2) {
            continue;
        }
        let stamp = low_u32(index as u64).wrapping_add(1);
        let mut repeated = false;
        let mut valid = true;
        for pair in pairs.chunks_exact(2) {
            let Some(key) = seen.get_mut(pair[0] as usize) else {
                valid = false;
                break;
            };
            valid &= (pair[1] as usize) < value_count;
            repeated |= *key == stamp;
            *key = stamp;
        }
        if repeated && valid {
            marks.resize(key_count, false);
            feature.tags.1 = start + keep_last_of_each_key(pairs, &mut marks);
        }
    }
}

/// Moves the last pair of each key to the front, in order, and returns how many `u32`s they
/// take. Only for the rare feature that repeats a key; `marks` (one per key, all false) is
/// left all false. The key indexes were checked against the key table.
fn keep_last_of_each_key(pairs: &mut [u32], marks: &mut [bool]) -> usize {
    let mut kept: Vec<[u32; 2]> = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks_exact(2).rev() {
        if let Some(mark) = marks.get_mut(pair[0] as usize)
            && !*mark
        {
            *mark = true;
            kept.push([pair[0], pair[1]]);
        }
    }
    kept.reverse();
    for pair in &kept {
        if let Some(mark) = marks.get_mut(pair[0] as usize) {
            *mark = false;
        }
    }
    for (slot, pair) in pairs.chunks_exact_mut(2).zip(&kept) {
        slot.copy_from_slice(pair);
    }
    kept.len() * 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector_tile::{Tile, tile};
    use proptest::prelude::*;
    use prost::Message;

    /// The decoder this module replaced: prost messages first, then validation, properties
    /// copied into maps. The hand-written reader must agree with it on every input.
    fn reference_decode(bytes: &[u8]) -> Result<Vec<ReferenceLayer>, MvtError> {
        let tile = Tile::decode(bytes).map_err(|error| MvtError::Protobuf(error.to_string()))?;
        let mut names = HashSet::new();
        let mut layers = Vec::new();
        for layer in tile.layers {
            if !names.insert(layer.name.clone()) {
                return Err(MvtError::DuplicateLayerName { name: layer.name });
            }
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
            let mut features = Vec::new();
            for feature in layer.features {
                let geometry = decode_geometry(feature.r#type.unwrap_or(0), &feature.geometry)?;
                if feature.tags.len() % 2 != 0 {
                    return Err(MvtError::OddTagCount);
                }
                let mut properties = BTreeMap::new();
                for pair in feature.tags.chunks_exact(2) {
                    let key =
                        layer
                            .keys
                            .get(pair[0] as usize)
                            .ok_or(MvtError::KeyIndexOutOfRange {
                                index: pair[0],
                                len: layer.keys.len(),
                            })?;
                    let value =
                        values
                            .get(pair[1] as usize)
                            .ok_or(MvtError::ValueIndexOutOfRange {
                                index: pair[1],
                                len: values.len(),
                            })?;
                    properties.insert(key.clone(), value.clone());
                }
                features.push((feature.id, geometry, properties));
            }
            layers.push((layer.name, layer.version, extent, features));
        }
        Ok(layers)
    }

    type ReferenceLayer = (
        String,
        u32,
        u32,
        Vec<(Option<u64>, Geometry, BTreeMap<String, Value>)>,
    );

    fn assert_same(bytes: &[u8]) -> Result<(), TestCaseError> {
        match (DecodedTile::decode(bytes), reference_decode(bytes)) {
            (Ok(ours), Ok(reference)) => {
                prop_assert_eq!(ours.layers.len(), reference.len());
                for (layer, (name, version, extent, features)) in ours.layers.iter().zip(reference)
                {
                    prop_assert_eq!(&layer.name, &name);
                    prop_assert_eq!(layer.version, version);
                    prop_assert_eq!(layer.extent, extent);
                    prop_assert_eq!(layer.features.len(), features.len());
                    for (feature, (id, geometry, properties)) in layer.features.iter().zip(features)
                    {
                        prop_assert_eq!(feature.id, id);
                        prop_assert_eq!(&feature.geometry, &geometry);
                        // Bitwise, so that NaN values compare.
                        let ours: Vec<(String, String)> = feature
                            .properties
                            .to_map()
                            .into_iter()
                            .map(|(key, value)| (key, bits(&value)))
                            .collect();
                        let theirs: Vec<(String, String)> = properties
                            .into_iter()
                            .map(|(key, value)| (key, bits(&value)))
                            .collect();
                        prop_assert_eq!(ours, theirs);
                        prop_assert_eq!(feature.properties.len(), properties_len(feature));
                    }
                }
            }
            (Err(MvtError::Protobuf(_)), Err(MvtError::Protobuf(_))) => {}
            (ours, reference) => prop_assert_eq!(ours.err(), reference.err()),
        }
        Ok(())
    }

    fn properties_len(feature: &DecodedFeature) -> usize {
        feature.properties.iter().count()
    }

    fn bits(value: &Value) -> String {
        match value {
            Value::Float(number) => format!("f{:x}", number.to_bits()),
            Value::Double(number) => format!("d{:x}", number.to_bits()),
            other => format!("{other:?}"),
        }
    }

    fn value_message() -> impl Strategy<Value = tile::Value> {
        (
            prop::option::weighted(0.2, "[a-c]{0,3}"),
            prop::option::weighted(0.15, any::<f32>()),
            prop::option::weighted(0.15, any::<f64>()),
            prop::option::weighted(0.2, any::<i64>()),
            prop::option::weighted(0.2, any::<u64>()),
            prop::option::weighted(0.15, any::<i64>()),
            prop::option::weighted(0.15, any::<bool>()),
        )
            .prop_map(|(text, float, double, int, uint, sint, flag)| tile::Value {
                string_value: text,
                float_value: float,
                double_value: double,
                int_value: int,
                uint_value: uint,
                sint_value: sint,
                bool_value: flag,
            })
    }

    fn feature_message() -> impl Strategy<Value = tile::Feature> {
        let stream = prop_oneof![
            Just(vec![9, 50, 34]),
            Just(vec![17, 10, 14, 3, 9]),
            Just(vec![9, 4, 4, 18, 0, 16, 16, 0]),
            Just(vec![9, 6, 12, 18, 10, 12, 24, 44, 15]),
            prop::collection::vec(prop_oneof![0u32..40, any::<u32>()], 0..12),
        ];
        (
            any::<Option<u64>>(),
            prop::collection::vec(0u32..4, 0..9),
            prop::option::weighted(0.95, -1i32..5),
            stream,
        )
            .prop_map(|(id, tags, geometry_type, geometry)| tile::Feature {
                id,
                tags,
                r#type: geometry_type,
                geometry,
            })
    }

    fn tile_bytes() -> impl Strategy<Value = Vec<u8>> {
        let layer = (
            prop_oneof![
                Just("a".to_owned()),
                Just("b".to_owned()),
                Just(String::new())
            ],
            prop_oneof![Just(2u32), Just(1), 0u32..4],
            prop::collection::vec(feature_message(), 0..5),
            prop::collection::vec("[k-m]{1,2}", 0..4),
            prop::collection::vec(value_message(), 0..4),
            prop::option::weighted(0.9, prop_oneof![Just(4096u32), 0u32..3]),
        )
            .prop_map(
                |(name, version, features, keys, values, extent)| tile::Layer {
                    version,
                    name,
                    features,
                    keys,
                    values,
                    extent,
                },
            );
        prop::collection::vec(layer, 0..3).prop_map(|layers| Tile { layers }.encode_to_vec())
    }

    /// A tile, then one edit of its bytes: none, a cut, a changed byte or an inserted byte.
    fn mutated_tile_bytes() -> impl Strategy<Value = Vec<u8>> {
        (
            tile_bytes(),
            0usize..4,
            any::<prop::sample::Index>(),
            any::<u8>(),
        )
            .prop_map(|(mut bytes, edit, at, byte)| {
                if bytes.is_empty() {
                    return bytes;
                }
                let index = at.index(bytes.len());
                match edit {
                    1 => bytes.truncate(index),
                    2 => bytes[index] = byte,
                    3 => bytes.insert(index, byte),
                    _ => {}
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn agrees_with_the_prost_decoder_on_edited_tiles(bytes in mutated_tile_bytes()) {
            assert_same(&bytes)?;
        }

        #[test]
        fn agrees_with_the_prost_decoder_on_arbitrary_bytes(
            bytes in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            assert_same(&bytes)?;
        }
    }

    /// A tile of one layer `l` with these keys, the int values 0, 1 and 2, and `features`.
    fn one_layer_tile(keys: &[&str], features: Vec<tile::Feature>) -> Vec<u8> {
        let layer = tile::Layer {
            version: 2,
            name: "l".into(),
            features,
            keys: keys.iter().map(|key| (*key).to_owned()).collect(),
            values: (0..3)
                .map(|number| tile::Value {
                    int_value: Some(number),
                    ..tile::Value::default()
                })
                .collect(),
            extent: None,
        };
        Tile {
            layers: vec![layer],
        }
        .encode_to_vec()
    }

    /// A point feature at (`at`, `at`) with these tags.
    fn point_feature(tags: Vec<u32>, at: u32) -> tile::Feature {
        tile::Feature {
            id: None,
            tags,
            r#type: Some(1),
            geometry: vec![9, at, at],
        }
    }

    #[test]
    fn repeated_keys_keep_their_last_value() {
        let bytes = one_layer_tile(
            &["a", "b", "c"],
            vec![point_feature(vec![0, 0, 1, 1, 0, 2, 2, 0], 2)],
        );
        let tile = DecodedTile::decode(&bytes).unwrap();
        let properties = &tile.layers[0].features[0].properties;
        let pairs: Vec<(&str, &Value)> = properties.iter().collect();
        assert_eq!(
            pairs,
            vec![
                ("b", &Value::Int(1)),
                ("a", &Value::Int(2)),
                ("c", &Value::Int(0))
            ]
        );
        assert_eq!(properties.get("a"), Some(&Value::Int(2)));
        assert!(!properties.contains_key("d"));
        assert_eq!(
            format!("{properties:?}"),
            r#"{"a": Int(2), "b": Int(1), "c": Int(0)}"#
        );
        assert_eq!(tile.layers[0].extent, 4096);
    }

    /// A key table may hold a string twice (the fuzzer's `decode_tile` target found that
    /// re-encoding merged such a feature's two entries while decoding had kept both): a key
    /// is a name, whichever entry of the table a tag points at.
    #[test]
    fn a_key_string_listed_twice_is_one_key() {
        let bytes = one_layer_tile(
            &["a", "b", "a"],
            vec![
                point_feature(vec![0, 0, 1, 1, 2, 2], 2),
                point_feature(vec![2, 0, 1, 2], 4),
            ],
        );
        assert_same(&bytes).unwrap();
        let tile = DecodedTile::decode(&bytes).unwrap();
        let first: Vec<(&str, &Value)> = tile.layers[0].features[0].properties.iter().collect();
        assert_eq!(first, vec![("b", &Value::Int(1)), ("a", &Value::Int(2))]);
        let second = &tile.layers[0].features[1].properties;
        assert_eq!(second.len(), 2);
        assert_eq!(second.get("a"), Some(&Value::Int(0)));
        assert_eq!(second.get("b"), Some(&Value::Int(2)));
    }

    #[test]
    fn unknown_fields_and_groups_are_skipped() {
        // A tile field 9 holding a group (start 9, a varint field 1, end 9), then an empty
        // layer message with an unknown fixed32 field.
        let bytes = [
            0x4b, 0x08, 0x01, 0x4c, 0x1a, 0x08, 0x0a, 0x01, b'l', 0x35, 1, 2, 3, 4,
        ];
        assert_same(&bytes).unwrap();
        assert_eq!(DecodedTile::decode(&bytes).unwrap().layers[0].name, "l");
        // An end group that was never opened.
        assert!(DecodedTile::decode(&[0x4c]).is_err());
        assert!(reference_decode(&[0x4c]).is_err());
    }
}
