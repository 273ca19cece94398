//! The public app's quotas per visitor (issue 38, item 9): the token the explorer publishes
//! is charged per client address, so one heavy visitor is refused while another visitor and
//! every other app go on; behind a trusted proxy the visitor is the address the proxy names
//! in `X-Forwarded-For`, and a client that is not a trusted proxy cannot choose its address
//! with that header. Clients connect from several loopback addresses (127.0.0.1-3) to the real
//! binary on `127.0.0.1:0`.
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::OnceLock;

use streetlevel_tests::{Fixture, Response, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// Searches allowed per minute: small, so a few calls exhaust one visitor's quota.
const SEARCHES: usize = 2;
const SEARCH: &str = "/images?bbox=-180,-90,180,90&limit=1";

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture::generate(Path::new(BINARY), "public-quota", 10))
}

/// A server on a copy of the fixture with `config` as its config file, and the token its
/// explorer and embed page hand every visitor.
fn start(name: &str, config: &str) -> (Server, String) {
    let copy = fixture().copy(&format!("public-quota-{name}"));
    let file = copy.dir.join("config.json");
    std::fs::write(&file, config).unwrap();
    let server = Server::start(
        Path::new(BINARY),
        &copy.dir,
        &["--config", file.to_str().unwrap()],
    );
    // The pages publish it only with the viewer's npm packages, which the cargo suite may
    // run without: read it where the server keeps it (crates/web/src/registry.rs).
    let connection = rusqlite::Connection::open_with_flags(
        copy.database(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let token = connection
        .query_row(
            "SELECT token FROM web_embed WHERE singleton = 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    (server, token)
}

/// `GET target` over a connection from the local address `source`, with `headers`.
fn get_from(server: &Server, source: &str, target: &str, headers: &[(&str, &str)]) -> Response {
    let source: IpAddr = source.parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(source, 0)).unwrap();
        socket
            .connect(server.addr)
            .await
            .unwrap()
            .into_std()
            .unwrap()
    });
    // Tokio's socket is non-blocking; the shared client reads it blocking.
    stream.set_nonblocking(false).unwrap();
    streetlevel_tests::request_over(stream, server.addr, "GET", target, headers, b"")
}

/// The statuses of `count` searches with `token` from `source` (with `forwarded` as
/// `X-Forwarded-For` when given).
fn searches(
    server: &Server,
    source: &str,
    token: &str,
    forwarded: Option<&str>,
    count: usize,
) -> Vec<u16> {
    let auth = format!("OAuth {token}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some(forwarded) = forwarded {
        headers.push(("X-Forwarded-For", forwarded));
    }
    (0..count)
        .map(|_| get_from(server, source, SEARCH, &headers).status)
        .collect()
}

#[test]
fn one_visitor_exhausts_their_own_quota_not_the_public_apps() {
    let (server, token) = start(
        "per-address",
        &format!(r#"{{"limit_search_per_min": {SEARCHES}, "trusted_proxies": ["127.0.0.3"]}}"#),
    );
    assert_eq!(
        searches(&server, "127.0.0.1", &token, None, SEARCHES + 1),
        [200, 200, 429],
        "the first visitor gets the whole quota, then is refused"
    );
    assert_eq!(
        searches(&server, "127.0.0.2", &token, None, 1),
        [200],
        "another visitor is not affected"
    );
    assert_eq!(
        searches(&server, "127.0.0.1", &fixture().client_token, None, 1),
        [200],
        "nor is another app"
    );
    // A client that is not a trusted proxy cannot name another address.
    assert_eq!(
        searches(&server, "127.0.0.1", &token, Some("198.51.100.1"), 1),
        [429]
    );
    // Behind the trusted proxy, each forwarded address is a visitor of its own; what the
    // client wrote left of the proxy's entry is not believed.
    assert_eq!(
        searches(
            &server,
            "127.0.0.3",
            &token,
            Some("198.51.100.1"),
            SEARCHES + 1
        ),
        [200, 200, 429]
    );
    assert_eq!(
        searches(
            &server,
            "127.0.0.3",
            &token,
            Some("203.0.113.9, 198.51.100.1"),
            1
        ),
        [429],
        "a spoofed first entry does not make a new visitor"
    );
    assert_eq!(
        searches(&server, "127.0.0.3", &token, Some("198.51.100.2"), 1),
        [200]
    );
    assert_eq!(
        searches(&server, "127.0.0.3", &token, None, 1),
        [200],
        "the proxy's own calls are its own visitor"
    );
}

#[test]
fn without_per_address_quotas_every_visitor_shares_the_public_apps() {
    let (server, token) = start(
        "shared",
        &format!(r#"{{"limit_search_per_min": {SEARCHES}, "public_app_per_address": false}}"#),
    );
    assert_eq!(
        searches(&server, "127.0.0.1", &token, None, SEARCHES),
        [200, 200]
    );
    assert_eq!(
        searches(&server, "127.0.0.2", &token, None, 1),
        [429],
        "the app's quota is used up for everyone"
    );
}
