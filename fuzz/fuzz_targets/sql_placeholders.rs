//! Fuzzes `streetlevel_db::dollar_placeholders`, the `?N` to `$N` rewriting of statements for PostgreSQL:
//! any bytes give a value or a refusal, never a panic (see `checks::sql_placeholders`, which `cargo test`
//! also runs on the seeds and on random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(text) = std::str::from_utf8(bytes) {
        checks::sql_placeholders(text);
    }
});
