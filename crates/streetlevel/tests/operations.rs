//! Black-box tests of what an operator watches: Prometheus metrics on their own listener,
//! and request logs as JSON lines carrying the request ID of the error body's trace member.
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;
use streetlevel_tests::{Fixture, Server, create_app, request};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

fn binary() -> &'static Path {
    Path::new(BINARY)
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture::generate(binary(), "operations", 30))
}

fn copy(name: &str) -> Fixture {
    fixture().copy(&format!("operations-{name}"))
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

fn scrape(addr: SocketAddr) -> String {
    let response = request(addr, "GET", "/metrics", &[], b"");
    assert_eq!(response.status, 200);
    assert!(
        response
            .header("content-type")
            .is_some_and(|value| value.starts_with("text/plain")),
        "{:?}",
        response.headers
    );
    String::from_utf8(response.body).unwrap()
}

/// The value of the sample whose line starts with `series` (name and labels as written); every
/// value checked here is a whole count.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn metrics_count_requests_tokens_quotas_tiles_and_the_store_on_their_own_listener() {
    let data = copy("metrics");
    let server = Server::start(
        binary(),
        &data.dir,
        &["--metrics-addr", "127.0.1:0", "--limit-search-per-min", "1"],
    );
    let metrics = metrics_addr(&server);
    assert_ne!(metrics.port(), server.addr.port(), "a listener of its own");
    let token = format!("access_token={}", data.client_token);
    let tile = format!("/maps/vtp/svc1_public/2/14/8716/5990?{token}");
    assert_eq!(server.get(&tile).status, 200);
    assert_eq!(server.get(&tile).status, 200);
    assert_eq!(server.get("/images?bbox=0,0,1,1").status, 401);
    let search = format!("/images?bbox=-180,-90,180,90&limit=1&{token}");
    assert_eq!(server.get(&search).status, 200);
    assert_eq!(server.get(&search).status, 429);

    let text = scrape(metrics);
    let requests = "streetlevel_http_requests_total";
    assert_eq!(
        sample(
            &text,
            &format!("{requests}{{class=\"tile\",status=\"200\"}}")
        ),
        2
    );
    assert_eq!(
        sample(
            &text,
            &format!("{requests}{{class=\"search\",status=\"401\"}}")
        ),
        1
    );
    assert_eq!(
        sample(
            &text,
            &format!("{requests}{{class=\"search\",status=\"429\"}}")
        ),
        1
    );
    assert_eq!(
        sample(
            &text,
            "streetlevel_http_request_duration_seconds_count{class=\"tile\"}"
        ),
        2
    );
    assert_eq!(
        sample(
            &text,
            "streetlevel_tile_cache_lookups_total{result=\"miss\"}"
        ),
        1
    );
    assert_eq!(
        sample(
            &text,
            "streetlevel_tile_cache_lookups_total{result=\"hit\"}"
        ),
        1
    );
    assert_eq!(
        sample(&text, "streetlevel_token_checks_total{result=\"ok\"}"),
        4
    );
    assert_eq!(
        sample(&text, "streetlevel_token_checks_total{result=\"refused\"}"),
        1
    );
    assert_eq!(
        sample(
            &text,
            "streetlevel_rate_limit_rejections_total{class=\"search\"}"
        ),
        1
    );
    assert!(sample(&text, "streetlevel_store_entities{kind=\"images\"}") >= 30);
    assert!(sample(&text, "streetlevel_store_entities{kind=\"sequences\"}") >= 1);
    assert_eq!(
        sample(&text, "streetlevel_upload_jobs{state=\"failed\"}"),
        0
    );

    // The API's listener does not serve metrics, and the metrics listener nothing else.
    assert_eq!(server.get("/metrics").status, 404);
    assert_eq!(request(metrics, "GET", "/images", &[], b"").status, 404);
}

/// The value of `series` summed over every process's metrics (one server, or each replica);
/// a process that never counted it adds 0.
fn sample_of_every_process(server: &Server, series: &str) -> u64 {
    let addrs: Vec<SocketAddr> = server
        .announced
        .iter()
        .filter_map(|line| line.strip_prefix("metrics on http://"))
        .filter_map(|rest| rest.strip_suffix("/metrics"))
        .map(|addr| addr.parse().unwrap())
        .collect();
    assert_eq!(
        addrs.len(),
        server.processes().len(),
        "a metrics listener per process: {:?}",
        server.announced
    );
    addrs
        .into_iter()
        .map(|addr| {
            let text = scrape(addr);
            if text
                .lines()
                .any(|line| line.starts_with(&format!("{series} ")))
            {
                sample(&text, series)
            } else {
                0
            }
        })
        .sum()
}

/// Token checks the database could not answer (its `PostgreSQL` stopped) are counted as
/// `result="unavailable"`, and nothing else is: a token in the cache still counts `ok`, a
/// missing token `refused`, as before the outage.
#[test]
fn token_checks_the_database_could_not_answer_count_as_unavailable_and_only_those() {
    let data = copy("token-checks-outage");
    // A token no process has checked: during the outage only the database could tell.
    let unseen = format!("access_token={}", create_app(binary(), &data.dir, "read"));
    let mut postgres = streetlevel_tests::postgres::Postgres::start("token-checks-outage");
    let server = Server::start_on_postgres(
        binary(),
        &data.dir,
        &postgres.url(),
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--token-cache-seconds",
            "600",
        ],
    );
    let search = "/images?bbox=-180,-90,180,90&limit=1";
    let cached = format!("{search}&access_token={}", data.client_token);
    // Every process checks the cached token once, so each has it in its cache.
    for process in server.processes() {
        assert_eq!(request(*process, "GET", &cached, &[], b"").status, 200);
    }
    assert_eq!(server.get(search).status, 401);

    postgres.stop();
    for target in [
        format!("{search}&{unseen}"),
        format!("{search}&{unseen}"),
        format!("{search}&access_token=no-such-token"),
    ] {
        let response = server.get(&target);
        assert_eq!(response.status, 503, "{target}: {response:?}");
    }
    assert_eq!(server.get(&cached).status, 200);
    assert_eq!(server.get(&cached).status, 200);
    assert_eq!(server.get(search).status, 401);

    let checks = |result: &str| {
        sample_of_every_process(
            &server,
            &format!("streetlevel_token_checks_total{{result=\"{result}\"}}"),
        )
    };
    assert_eq!(
        (checks("ok"), checks("refused"), checks("unavailable")),
        (server.processes().len() as u64 + 2, 2, 3),
        "(ok, refused, unavailable)"
    );
}

#[test]
fn without_the_flag_no_metrics_listener_is_announced() {
    let server = Server::start(binary(), &copy("no-metrics").dir, &[]);
    assert!(
        server
            .announced
            .iter()
            .all(|line| !line.contains("metrics")),
        "{:?}",
        server.announced
    );
}

#[test]
fn json_logs_have_one_line_per_request_with_the_trace_id_of_the_error_body() {
    let data = copy("json-logs");
    let server = Server::start_captured(
        binary(),
        &data.dir,
        &["--log-format", "json"],
        &[("RUST_LOG", "info")],
    );
    let refused = server.get("/images?bbox=0,0,1,1");
    assert_eq!(refused.status, 401);
    let trace_id = refused.json()["error"]["svctrace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let all = server.stderr_once_it_contains(&trace_id);
    let line = all
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["request_id"] == trace_id.as_str())
        .unwrap_or_else(|| panic!("no JSON log line for {trace_id} in:\n{all}"));
    assert_eq!(line["message"], "request");
    assert_eq!(line["class"], "search");
    assert_eq!(line["status"], 401);
    assert_eq!(line["path"], "/images");
    assert!(line["micros"].is_u64());
    assert!(
        line["level"] == "INFO" && line["timestamp"].is_string(),
        "{line}"
    );
    assert!(
        all.lines()
            .filter(|line| !line.trim().is_empty())
            .all(|line| serde_json::from_str::<Value>(line).is_ok()),
        "every line is JSON:\n{all}"
    );
    assert_eq!(
        all.matches(&trace_id).count(),
        1,
        "one line per request:\n{all}"
    );
    assert!(!all.contains('\u{1b}'), "no terminal colours in a pipe");
}

#[test]
fn text_logs_into_a_pipe_have_no_colours() {
    let data = copy("text-logs");
    let server = Server::start_captured(binary(), &data.dir, &[], &[("RUST_LOG", "info")]);
    assert_eq!(server.get("/health").status, 200);
    let text = server.stderr_once_it_contains("class=\"probe\"");
    assert!(!text.contains('\u{1b}'), "{text}");
}
