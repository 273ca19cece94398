//! Cost of one rate-limit decision, against a baseline of hashing the key.

use std::hash::{BuildHasher, RandomState};

use std::sync::Arc;

use streetlevel_model::SystemClock;
use streetlevel_ratelimit::{Class, Config, RateLimits};

fn main() {
    divan::main();
}

/// Baseline: hashing the app ID once, which every keyed lookup does at least.
#[divan::bench]
fn baseline_hash_key(bencher: divan::Bencher) {
    let state = RandomState::new();
    let mut app_id = 0_u64;
    bencher.bench_local(|| {
        app_id = (app_id + 1) % 1000;
        state.hash_one(divan::black_box(app_id))
    });
}

/// One entity-call decision over 1000 apps.
#[divan::bench]
fn entity_check(bencher: divan::Bencher) {
    let limits = RateLimits::new(Config::default(), Arc::new(SystemClock)).expect("limits");
    let mut app_id = 0_u64;
    bencher.bench_local(|| {
        app_id = (app_id + 1) % 1000;
        let _ = divan::black_box(limits.check(divan::black_box(app_id), Class::Entity));
    });
}

/// One tile decision over 1000 apps.
#[divan::bench]
fn tiles_check(bencher: divan::Bencher) {
    let limits = RateLimits::new(Config::default(), Arc::new(SystemClock)).expect("limits");
    let mut app_id = 0_u64;
    bencher.bench_local(|| {
        app_id = (app_id + 1) % 1000;
        let _ = divan::black_box(limits.check(divan::black_box(app_id), Class::Tiles));
    });
}
