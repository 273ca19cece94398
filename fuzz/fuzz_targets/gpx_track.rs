//! Fuzzes `streetlevel_video::gpx::parse`, a GPX track given beside a video:
//! any bytes give a value or a refusal, never a panic, and nothing beyond its bounds (see
//! `checks::gpx_track`, which `cargo test` also runs on the seeds and on random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    checks::gpx_track(bytes);
});
