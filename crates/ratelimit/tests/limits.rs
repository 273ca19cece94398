//! Quotas against a fake clock: exact counts, refills, the day window and the error body.

use std::num::NonZeroU32;
use std::time::Duration;

use std::sync::Arc;

use streetlevel_model::{FakeClock, Timestamp};
use streetlevel_ratelimit::{Class, Config, RateLimits};

fn clock() -> FakeClock {
    FakeClock::new(Timestamp(1_700_000_000_000))
}

fn limits() -> (RateLimits, FakeClock) {
    let clock = clock();
    let limits = RateLimits::new(Config::default(), Arc::new(clock.clone())).expect("valid config");
    (limits, clock)
}

/// Calls `class` for `app_id` `count` times and returns how many were allowed.
fn allowed(limits: &RateLimits, app_id: u64, class: Class, count: u32) -> u32 {
    (0..count)
        .filter(|_| limits.check(app_id, class).is_ok())
        .fold(0, |allowed, _| allowed + 1)
}

#[test]
fn the_60001st_entity_call_in_a_minute_is_rejected_with_the_exact_body() {
    let (limits, _clock) = limits();
    assert_eq!(allowed(&limits, 7, Class::Entity, 60_000), 60_000);
    let rejection = limits.check(7, Class::Entity).unwrap_err();
    assert_eq!(rejection.class, Class::Entity);
    insta::assert_json_snapshot!(rejection.error_body("AbC123trace"), @r#"
    {
      "error": {
        "code": 4,
        "error_subcode": 1349210,
        "error_user_msg": "You're hitting rate limits on the node you are fetching. Please wait and try again later.",
        "error_user_title": "Rate Limit Exceeded",
        "is_transient": true,
        "message": "Application request limit reached",
        "svctrace_id": "AbC123trace",
        "type": "OAuthException"
      }
    }
    "#);
    assert_eq!(rejection.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        rejection.app_usage_header(),
        r#"{"call_count":100,"total_cputime":0,"total_time":0}"#
    );
    // One call per millisecond refills.
    assert_eq!(rejection.retry_after, Duration::from_millis(1));
    assert_eq!(rejection.retry_after_secs(), 1);
}

#[test]
fn the_entity_window_refills() {
    let (limits, clock) = limits();
    assert_eq!(allowed(&limits, 7, Class::Entity, 60_001), 60_000);
    clock.advance(Duration::from_secs(30));
    assert_eq!(allowed(&limits, 7, Class::Entity, 30_001), 30_000);
    clock.advance(Duration::from_secs(60));
    assert_eq!(allowed(&limits, 7, Class::Entity, 60_001), 60_000);
}

#[test]
fn apps_and_classes_have_separate_quotas() {
    let (limits, _clock) = limits();
    assert_eq!(allowed(&limits, 1, Class::Search, 10_001), 10_000);
    assert!(limits.check(1, Class::Search).is_err());
    assert!(limits.check(2, Class::Search).is_ok());
    assert!(limits.check(1, Class::Entity).is_ok());
    assert!(limits.check(1, Class::Tiles).is_ok());
}

#[test]
fn usage_share_grows_with_calls() {
    let (limits, _clock) = limits();
    assert_eq!(allowed(&limits, 3, Class::Search, 4_999), 4_999);
    let usage = limits.check(3, Class::Search).unwrap();
    assert_eq!(usage.used_percent, 50);
    assert_eq!(
        usage.app_usage_header(),
        r#"{"call_count":50,"total_cputime":0,"total_time":0}"#
    );
}

#[test]
fn the_tile_day_quota_holds_across_the_day() {
    let (limits, clock) = limits();
    assert_eq!(allowed(&limits, 9, Class::Tiles, 50_000), 50_000);
    let rejection = limits.check(9, Class::Tiles).unwrap_err();
    assert_eq!(rejection.class, Class::Tiles);
    assert_eq!(rejection.retry_after, Duration::from_secs(24 * 3600));
    // A GCRA would refill a cell every 1.7 s; the day window does not.
    for _ in 0..23 {
        clock.advance(Duration::from_secs(3600));
        assert!(limits.check(9, Class::Tiles).is_err());
    }
    clock.advance(Duration::from_secs(3599));
    let rejection = limits.check(9, Class::Tiles).unwrap_err();
    assert_eq!(rejection.retry_after_secs(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(allowed(&limits, 9, Class::Tiles, 50_001), 50_000);
}

#[test]
fn the_trace_member_is_configurable() {
    let config = Config {
        entity_per_minute: NonZeroU32::MIN,
        trace_member: "fbtrace_id".to_owned(),
        ..Config::default()
    };
    let limits = RateLimits::new(config, Arc::new(clock())).unwrap();
    assert!(limits.check(1, Class::Entity).is_ok());
    let rejection = limits.check(1, Class::Entity).unwrap_err();
    assert_eq!(rejection.trace_member(), "fbtrace_id");
    assert_eq!(rejection.error_body("t")["error"]["fbtrace_id"], "t");
    assert!(
        rejection.error_body("t")["error"]
            .get("svctrace_id")
            .is_none()
    );
    assert_eq!(rejection.retry_after, Duration::from_secs(60));
}

#[test]
fn a_zero_tile_window_is_refused() {
    let config = Config {
        tiles_window: Duration::ZERO,
        ..Config::default()
    };
    assert!(RateLimits::new(config, Arc::new(clock())).is_err());
}

#[test]
fn retain_recent_bounds_memory() {
    let (limits, clock) = limits();
    for app_id in 0..10_000 {
        limits.check(app_id, Class::Entity).unwrap();
        limits.check(app_id, Class::Tiles).unwrap();
    }
    assert_eq!(limits.len(), 20_000);
    limits.retain_recent();
    // Still inside the minute and the day: nothing may be forgotten.
    assert_eq!(limits.len(), 20_000);
    clock.advance(Duration::from_secs(24 * 3600));
    limits.retain_recent();
    assert!(limits.is_empty());
    // Forgetting an app gives it a full quota, which it would have had anyway.
    assert_eq!(allowed(&limits, 5, Class::Entity, 60_001), 60_000);
}
