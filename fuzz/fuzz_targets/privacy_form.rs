//! Fuzzes `streetlevel_web::fuzzing::report_form`, the privacy-request form's body as the
//! report page reads it, and the box it gives turned into stored pixels:
//! any bytes give a request or a refusal, never a panic (see `checks::privacy_form`, which
//! `cargo test` also runs on the seeds and on random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    checks::privacy_form(bytes);
});
