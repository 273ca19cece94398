//! Shared quotas in a real `redis-server` (Debian's package, started on a free port in a
//! temporary directory): the Redis backend of `streetlevel-ratelimit` on its own, then two
//! `streetlevel serve` replicas charging one app's quota, then Redis stopped and started
//! again under a running server (docs/DEPLOY.md, "Shared quotas with Redis").
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use streetlevel::model::{FakeClock, SystemClock, Timestamp};
use streetlevel::ratelimit::{Class, Config, RateLimits, RedisConfig};
use streetlevel_tests::redis::RedisServer;
use streetlevel_tests::{Fixture, Response, Server, request};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn binary() -> &'static Path {
    Path::new(BINARY)
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture::generate(binary(), "redis", 20))
}

fn quotas(entity_per_minute: u32, tiles_per_day: u32) -> Config {
    Config {
        entity_per_minute: NonZeroU32::new(entity_per_minute).unwrap(),
        tiles_per_window: NonZeroU32::new(tiles_per_day).unwrap(),
        ..Config::default()
    }
}

/// A replica's limiter on `redis`: the system clock is only the fallback's.
fn shared(config: Config, redis: &RedisServer, retry_interval: Duration) -> RateLimits {
    let redis = RedisConfig {
        retry_interval,
        ..RedisConfig::new(redis.url())
    };
    RateLimits::with_redis(config, Arc::new(SystemClock), redis).unwrap()
}

#[test]
fn the_redis_backend_admits_exactly_the_quota_across_limiters() {
    let redis = RedisServer::start();
    // Two replicas' limiters on one Redis, as two processes would have.
    let first = shared(quotas(50, 20), &redis, Duration::from_secs(1));
    let second = shared(quotas(50, 20), &redis, Duration::from_secs(1));
    // 50 per minute refill one call per 1.2 s; the 55 calls below take milliseconds, but a
    // slow machine may see refills, which the bound counts.
    let started = Instant::now();
    let mut admitted = Vec::new();
    for call in 0..55 {
        let limits = if call % 2 == 0 { &first } else { &second };
        if let Ok(usage) = limits.check(7, Class::Entity) {
            admitted.push(usage.used_percent);
        }
    }
    let refills = usize::try_from(started.elapsed().as_millis() / 1200).unwrap();
    assert!(
        (50..=50 + refills).contains(&admitted.len()),
        "{} admitted",
        admitted.len()
    );
    // The usage share grows by 2 % a call, as the in-memory quota's does.
    assert_eq!(admitted[..3], [2, 4, 6]);
    assert_eq!(admitted[49], 100);
    let rejection = second.check(7, Class::Entity).unwrap_err();
    assert_eq!(rejection.class, Class::Entity);
    assert!(
        rejection.retry_after > Duration::ZERO
            && rejection.retry_after <= Duration::from_millis(1200),
        "{:?}",
        rejection.retry_after
    );
    assert_eq!(
        rejection.retry_after_secs(),
        if rejection.retry_after > Duration::from_secs(1) {
            2
        } else {
            1
        }
    );
    // The same body as the in-memory quota's.
    let memory = RateLimits::new(
        quotas(1, 20),
        Arc::new(FakeClock::new(Timestamp(1_700_000_000_000))),
    )
    .unwrap();
    memory.check(7, Class::Entity).unwrap();
    let memory_rejection = memory.check(7, Class::Entity).unwrap_err();
    assert_eq!(rejection.error_body("t"), memory_rejection.error_body("t"));
    assert_eq!(
        rejection.app_usage_header(),
        memory_rejection.app_usage_header()
    );
    // Other apps and classes have quotas of their own.
    assert!(first.check(8, Class::Entity).is_ok());
    assert!(first.check(7, Class::Search).is_ok());

    // Tiles: a fixed window of a day, counted in Redis across both.
    let tiles = (0..25)
        .filter(|call| {
            let limits = if call % 2 == 0 { &first } else { &second };
            limits.check(7, Class::Tiles).is_ok()
        })
        .count();
    assert_eq!(tiles, 20);
    let rejection = first.check(7, Class::Tiles).unwrap_err();
    assert!(
        rejection.retry_after > Duration::ZERO
            && rejection.retry_after <= Duration::from_secs(24 * 3600),
        "{:?}",
        rejection.retry_after
    );
    assert_eq!(first.backend_errors() + second.backend_errors(), 0);
}

#[test]
fn without_redis_a_limiter_decides_alone_and_shares_again_when_it_returns() {
    let mut redis = RedisServer::start();
    // Retrying at once, so the test needs no wait for the retry interval.
    let limits = shared(quotas(5, 20), &redis, Duration::ZERO);
    let other = shared(quotas(5, 20), &redis, Duration::ZERO);
    for _ in 0..5 {
        other.check(1, Class::Entity).unwrap();
    }
    assert!(
        limits.check(1, Class::Entity).is_err(),
        "shared through Redis"
    );
    assert_eq!(limits.backend_errors(), 0);

    redis.stop();
    // Fail open to this process's own quota, which is enforced.
    let allowed = (0..7)
        .filter(|_| limits.check(1, Class::Entity).is_ok())
        .count();
    assert_eq!(allowed, 5);
    assert!(limits.backend_errors() >= 1);

    redis.restart();
    // A fresh Redis holds no state: the app's first call there uses 1 of 5.
    let usage = limits.check(1, Class::Entity).unwrap();
    assert_eq!(usage.used_percent, 20);
    let errors = limits.backend_errors();
    assert_eq!(
        (0..5)
            .filter(|_| other.check(1, Class::Entity).is_ok())
            .count(),
        4,
        "shared again"
    );
    assert_eq!(limits.backend_errors(), errors);
}

#[test]
fn a_redis_url_the_client_refuses_stops_serve() {
    let failed = streetlevel_tests::serve_expecting_failure(
        binary(),
        &fixture().copy("redis-bad-url").dir,
        &["--redis-url", "http://127.0.0.1:1"],
    );
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(failed.stderr.contains("redis_url"), "{}", failed.stderr);
    assert!(!failed.stdout.contains("listening on"), "{}", failed.stdout);
}

/// An image ID of the fixture, found with a search (charged to the search quota).
fn some_image(server: &Server, token: &str) -> String {
    let found = server.get(&format!(
        "/images?bbox=-180,-90,180,90&limit=1&fields=id&access_token={token}"
    ));
    assert_eq!(found.status, 200);
    found.json()["data"][0]["id"].as_str().unwrap().to_owned()
}

/// The documented 429: spec 7's body, `Retry-After` in whole seconds, usage at 100 %.
fn assert_throttled(response: &Response, longest_retry: u64) {
    assert_eq!(response.status, 429);
    let retry: u64 = response.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=longest_retry).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        response.header("x-app-usage"),
        Some(r#"{"call_count":100,"total_cputime":0,"total_time":0}"#)
    );
    let body = response.json();
    assert_eq!(body["error"]["code"], 4);
    assert_eq!(body["error"]["error_subcode"], 1_349_210);
    assert_eq!(
        body["error"]["message"],
        "Application request limit reached"
    );
}

#[test]
fn two_replicas_share_one_quota_of_60_a_minute_under_parallel_load() {
    let redis = RedisServer::start();
    // One server per data directory: each replica serves a copy with the same app and token.
    let first_data = fixture().copy("redis-replica-1");
    let second_data = fixture().copy("redis-replica-2");
    let limit = ["--limit-entity-per-min", "60"];
    let first = Server::start(
        binary(),
        &first_data.dir,
        &[&["--redis", &redis.url()][..], &limit[..]].concat(),
    );
    let second = Server::start_with_env(
        binary(),
        &second_data.dir,
        "127.0.0.1:0",
        &limit,
        &[("STREETLEVEL_REDIS_URL", &redis.url())],
    );
    let token = fixture().client_token.clone();
    let image = some_image(&first, &token);
    let target = format!("/{image}?fields=id&access_token={token}");
    let addrs: [SocketAddr; 2] = [first.addr, second.addr];

    // 90 calls from 6 threads, alternating between the replicas: each alone would admit
    // every one of its 45.
    let started = Instant::now();
    let responses: Vec<Response> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..6)
            .map(|worker| {
                let target = &target;
                scope.spawn(move || {
                    (0..15)
                        .map(|call| request(addrs[(worker + call) % 2], "GET", target, &[], b""))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    // 60 at once, then one more per second the burst took (GCRA refills continuously).
    let refills = usize::try_from(started.elapsed().as_secs()).unwrap();
    let admitted = responses.iter().filter(|r| r.status == 200).count();
    assert!(
        (60..=60 + refills).contains(&admitted),
        "{admitted} of 90 admitted in {refills} s"
    );
    for response in responses.iter().filter(|r| r.status != 200) {
        assert_throttled(response, 1);
    }
    // The quota is still used up, on both.
    for server in [&first, &second] {
        assert_throttled(&server.get(&target), 1);
    }
}

#[test]
fn with_redis_stopped_each_replica_enforces_the_quota_alone_until_it_returns() {
    let mut redis = RedisServer::start();
    let data = fixture().copy("redis-outage");
    // 5 a minute: one call back every 12 s, longer than any step below takes.
    let server = Server::start_captured(
        binary(),
        &data.dir,
        &[
            "--redis",
            &redis.url(),
            "--limit-entity-per-min",
            "5",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        &[("RUST_LOG", "info")],
    );
    let token = fixture().client_token.clone();
    let image = some_image(&server, &token);
    let target = format!("/{image}?fields=id&access_token={token}");
    let statuses =
        |count: usize| -> Vec<u16> { (0..count).map(|_| server.get(&target).status).collect() };
    assert_eq!(statuses(5), [200; 5]);
    assert_throttled(&server.get(&target), 12);
    server.stderr_once_it_contains("quotas are shared through Redis");

    redis.stop();
    // Fail open to the process's own quota, with the same limit: 5 more, then 429.
    assert_eq!(statuses(5), [200; 5]);
    assert_throttled(&server.get(&target), 12);
    let warning = "Redis does not answer";
    let stderr = server.stderr_once_it_contains(warning);
    assert_eq!(
        stderr.matches(warning).count(),
        1,
        "once per outage:\n{stderr}"
    );
    let metrics = metrics_addr(&server);
    let errors = backend_errors(metrics);
    assert!(errors >= 1, "{errors} backend errors counted");

    redis.restart();
    // Within the retry interval (1 s) the server asks Redis again; a fresh Redis has no
    // state, so the first call it decides uses 1 of 5 (20 %), where the process's own
    // quota, used up, would refuse it.
    let started = Instant::now();
    let back = loop {
        let response = server.get(&target);
        if response.status == 200 {
            break response;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not use Redis again"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        back.header("x-app-usage"),
        Some(r#"{"call_count":20,"total_cputime":0,"total_time":0}"#)
    );
    server.stderr_once_it_contains("Redis answers again");
    assert_eq!(statuses(4), [200; 4]);
    assert_throttled(&server.get(&target), 12);
}

/// The metrics listener's address, from the server's `metrics on http://ADDR/metrics` line.
fn metrics_addr(server: &Server) -> SocketAddr {
    server
        .announced
        .iter()
        .find_map(|line| line.strip_prefix("metrics on http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics line in {:?}", server.announced))
        .parse()
        .unwrap()
}

fn backend_errors(metrics: SocketAddr) -> u64 {
    let response = request(metrics, "GET", "/metrics", &[], b"");
    assert_eq!(response.status, 200);
    let text = String::from_utf8(response.body).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("streetlevel_rate_limit_backend_errors_total "))
        .unwrap_or_else(|| panic!("no backend error counter in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}
