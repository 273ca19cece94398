//! Fuzzes the validating tile decoder: any bytes must give a tile or an error, never a panic.
//! A tile that decodes is re-encoded: the features the encoder keeps (it drops geometries that
//! are empty once repeated points and degenerate parts are removed) must decode with the same
//! layer, id and properties, and encoding that result again must give the same bytes (the
//! encoder's normalisation is a fixed point).

#![no_main]

use libfuzzer_sys::fuzz_target;
use streetlevel_mvt::{DecodedLayer, DecodedTile, TileBuilder, Value};

/// What a kept feature must decode to: its layer, id and properties.
type Kept = (String, u32, Option<u64>, Vec<(String, Value)>);

/// Re-encodes every feature of `tile`; `None` when the encoder refuses one (deltas between
/// decoded `i32` coordinates may exceed 32 bits) or a layer.
fn reencode(layers: &[DecodedLayer]) -> Option<(Vec<u8>, Vec<Kept>)> {
    let mut builder = TileBuilder::new();
    let mut kept = Vec::new();
    for layer in layers {
        let out = builder.layer(&layer.name, layer.extent).ok()?;
        for feature in &layer.features {
            let properties: Vec<(&str, Value)> = feature
                .properties
                .iter()
                .map(|(key, value)| (key, value.clone()))
                .collect();
            if out
                .add_feature(feature.id, &feature.geometry, &properties)
                .ok()?
            {
                let properties = properties
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect();
                kept.push((layer.name.clone(), layer.extent, feature.id, properties));
            }
        }
    }
    Some((builder.encode(), kept))
}

/// Equal, with floats compared by their bits (a NaN property must survive as that NaN).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
        (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
        _ => a == b,
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(tile) = DecodedTile::decode(bytes) else {
        return;
    };
    let Some((encoded, kept)) = reencode(&tile.layers) else {
        return;
    };
    let again = DecodedTile::decode(&encoded).expect("our own encoding must decode");
    let decoded: Vec<_> = again
        .layers
        .iter()
        .flat_map(|layer| layer.features.iter().map(move |feature| (layer, feature)))
        .collect();
    assert_eq!(decoded.len(), kept.len(), "kept features must all decode");
    for ((layer, feature), (name, extent, id, properties)) in decoded.iter().zip(&kept) {
        assert_eq!(&layer.name, name);
        assert_eq!(layer.extent, *extent);
        assert_eq!(feature.id, *id);
        assert_eq!(feature.properties.len(), properties.len());
        for ((key, value), (want_key, want_value)) in feature.properties.iter().zip(properties) {
            assert_eq!(key, want_key);
            assert!(same_value(value, want_value), "{value:?} != {want_value:?}");
        }
    }
    let (twice, _) = reencode(&again.layers).expect("a normalised tile re-encodes");
    assert_eq!(
        twice, encoded,
        "re-encoding a normalised tile must give the same bytes"
    );
});
