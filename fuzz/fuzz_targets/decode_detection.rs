//! Fuzzes the detection geometry decoder with arbitrary strings and image sizes: a polygon or
//! an error, never a panic; a polygon that decodes must survive re-encoding (see
//! `checks::decode_detection`, which `cargo test` also runs on the seeds).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|input: (u16, u16, &str)| {
    let (width, height, geometry) = input;
    checks::decode_detection(width, height, geometry);
});
