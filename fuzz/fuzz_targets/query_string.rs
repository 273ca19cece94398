//! Fuzzes the hand-written query string decoder (`streetlevel_server::query::Query::parse`,
//! with its typed readers) and the route table (`Route::of`): any text gives a value or a 400,
//! never a panic (see `checks::query_string`, which `cargo test` also runs on the seeds and on
//! random changes of them).

#![no_main]

use libfuzzer_sys::fuzz_target;

// Each target uses one of the shared checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|text: &str| {
    checks::query_string(text);
});
