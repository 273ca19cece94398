//! Fuzzes `streetlevel_video::Video::from_reader`, a video's container, sample tables and GPS track as an upload or import reads them:
//! any bytes give a value or a refusal, never a panic, and nothing beyond its bounds (see
//! `checks::read_video`, which `cargo test` also runs on the seeds and on random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    checks::read_video(bytes);
});
