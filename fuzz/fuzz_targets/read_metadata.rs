//! Fuzzes the JPEG metadata reader (segments, frame header, Exif, the uploader's JSON, XMP):
//! any bytes give metadata or an error, never a panic, and metadata that is read keeps the
//! documented ranges (see `checks::read_metadata`, which `cargo test` also runs on the seeds).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|jpeg: &[u8]| {
    checks::read_metadata(jpeg);
});
