//! Fuzzes `streetlevel_blur_service::protocol::parse_form_data`, the blur API's multipart bodies:
//! any bytes give a value or a refusal, never a panic (see `checks::form_data`, which `cargo test`
//! also runs on the seeds and on random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    checks::form_data(bytes);
});
