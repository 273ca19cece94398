//! Fuzzes the validating tile decoder: any bytes must give a tile or an error, never a panic;
//! a tile that decodes must survive re-encoding with its layers, ids, properties and
//! geometries (see `checks::decode_tile`, which `cargo test` also runs on the seeds).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    checks::decode_tile(bytes);
});
