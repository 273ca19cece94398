//! Fuzzes `streetlevel_import::fuzzing::upload_image`, a reader of the upload path's untrusted bytes:
//! any bytes give a value or a refusal, never a panic, and nothing beyond its budget (see
//! `checks::upload_image`, which `cargo test` also runs on the seeds and on random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    checks::upload_image(bytes);
});
