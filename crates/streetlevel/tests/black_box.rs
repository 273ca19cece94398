//! Black-box tests of `streetlevel serve`: the real binary on `127.0.0.1:0` against a fixture
//! data directory, talked to over HTTP. Search results are checked against a scan of the
//! fixture's `SQLite` file in plain SQL (`scan`), errors against docs/API.md's error table, and
//! entity lookups against the store opened directly.
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;
use streetlevel_model::{EntityId, EntityKind, ImageId};
use streetlevel_mvt::{TileId, Value as TileValue};
use streetlevel_store::{BoundingBox, ImageFilter, Store};
use streetlevel_tests::{Fixture, Response, Server, auth};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

struct World {
    fixture: Fixture,
    /// A copy of the fixture made before any server ran, for tests that start their own.
    pristine: Fixture,
    server: Server,
    store: Store,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let fixture = Fixture::generate(Path::new(BINARY), "black-box", 200);
        let pristine = fixture.copy("black-box-pristine");
        let server = Server::start(Path::new(BINARY), &fixture.dir, &[]);
        let store = Store::open(&fixture.dir).expect("the fixture store opens");
        World {
            fixture,
            pristine,
            server,
            store,
        }
    })
}

/// `GET target` with the client token in the `Authorization: OAuth` header.
fn get(target: &str) -> Response {
    let world = world();
    let auth = format!("OAuth {}", world.fixture.client_token);
    world
        .server
        .request("GET", target, &[("Authorization", &auth)], b"")
}

/// The path and query of an absolute URL the server handed out, to request it again.
fn local_target(url: &Value) -> String {
    let url = url.as_str().expect("a URL string");
    url.strip_prefix(&world().server.base())
        .unwrap_or_else(|| panic!("{url} is not on this server"))
        .to_owned()
}

fn get_json(target: &str) -> Value {
    let response = get(target);
    assert_eq!(
        response.status,
        200,
        "{target}: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

// The rows of docs/API.md's error table, by the start of their "Situation" cell.
const MALFORMED: &str = "malformed parameter";
const NOT_SELECTIVE: &str = "search without a selective filter";
const UNKNOWN_FIELD: &str = "unknown field in `fields`";
const MIXED_KINDS: &str = "mixed entity kinds";
const TOKEN: &str = "missing, unknown, expired or conflicting token";
const MEDIA_SIGNATURE: &str = "bad or expired media signature";
const TAKEDOWN_REFUSED: &str = "a takedown without a user token with `write`";
const UNKNOWN_ID: &str = "unknown ID";
const UNKNOWN_TILE_SET: &str = "unknown tile set";
const UNKNOWN_PATH: &str = "unknown path";
const METHOD_NOT_ALLOWED: &str = "method not allowed";
const BODY_TOO_LARGE: &str = "request body over the limit";
const QUOTA: &str = "quota exhausted";
const INTERNAL: &str = "handler panic or internal failure";
const DATABASE_UNREACHABLE: &str = "database unreachable";

/// One row of the error table in docs/API.md.
#[derive(Debug)]
struct DocumentedError {
    situation: String,
    status: u16,
    error_type: String,
    code: i64,
    subcode: Option<i64>,
}

/// The error table of docs/API.md's "Errors" section, parsed once: what the docs promise is
/// what the tests expect, so the two cannot drift apart.
fn documented_errors() -> &'static [DocumentedError] {
    static ROWS: OnceLock<Vec<DocumentedError>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let api = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/API.md"),
        )
        .unwrap();
        let section = api
            .split("\n## Errors")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/API.md has an Errors section");
        let rows: Vec<DocumentedError> = section
            .lines()
            .filter(|line| line.starts_with('|'))
            .skip(2) // the header and its rule
            .map(|line| {
                let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
                assert_eq!(cells.len(), 5, "{line}");
                DocumentedError {
                    situation: cells[0].to_owned(),
                    status: cells[1].parse().unwrap(),
                    error_type: cells[2].to_owned(),
                    code: cells[3].parse().unwrap(),
                    subcode: (!cells[4].is_empty()).then(|| cells[4].parse().unwrap()),
                }
            })
            .collect();
        assert!(rows.len() >= 10, "{rows:?}");
        rows
    })
}

/// The documented row whose situation starts with `situation`.
fn documented(situation: &str) -> &'static DocumentedError {
    let mut rows = documented_errors()
        .iter()
        .filter(|row| row.situation.starts_with(situation));
    let row = rows
        .next()
        .unwrap_or_else(|| panic!("docs/API.md has no error row for {situation:?}"));
    assert!(rows.next().is_none(), "two rows for {situation:?}");
    row
}

/// Asserts the Graph-style error docs/API.md documents for `situation` (status, `type`,
/// `code`, `error_subcode` present exactly when documented), a message that mentions
/// `mentions`, the trace member and CORS.
fn assert_error(response: &Response, situation: &str, mentions: &str) -> Value {
    assert_error_with_trace(response, situation, mentions, "svctrace_id")
}

/// [`assert_error`] for a server whose trace member is `trace_member`.
fn assert_error_with_trace(
    response: &Response,
    situation: &str,
    mentions: &str,
    trace_member: &str,
) -> Value {
    let row = documented(situation);
    assert_eq!(
        response.status,
        row.status,
        "{situation}: {}",
        String::from_utf8_lossy(&response.body)
    );
    assert_eq!(response.header("access-control-allow-origin"), Some("*"));
    let body = response.json();
    let error = &body["error"];
    assert_eq!(
        error["type"],
        row.error_type.as_str(),
        "{situation}: {body}"
    );
    assert_eq!(error["code"], row.code, "{situation}: {body}");
    assert_eq!(
        error
            .get("error_subcode")
            .map(|subcode| subcode.as_i64().unwrap()),
        row.subcode,
        "{situation}: {body}"
    );
    assert!(
        error["message"].as_str().unwrap().contains(mentions),
        "{body} should mention {mentions}"
    );
    assert!(
        error[trace_member]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{body}"
    );
    body
}

fn first_image() -> streetlevel_model::Image {
    let store = &world().store;
    let page = store.search_images(
        &ImageFilter {
            bbox: Some(BoundingBox::new(-180.0, -90.0, 180.0, 90.0).unwrap()),
            ..ImageFilter::default()
        },
        1,
        None,
    );
    page.items
        .into_iter()
        .next()
        .expect("the fixture has images")
}

fn all_ids(store: &Store, kind: EntityKind) -> Vec<u64> {
    // Entity IDs are sparse; find them through searches that cover the world.
    let world_box = BoundingBox::new(-180.0, -90.0, 180.0, 90.0).unwrap();
    match kind {
        EntityKind::Image => store
            .search_images(
                &ImageFilter {
                    bbox: Some(world_box),
                    ..ImageFilter::default()
                },
                100_000,
                None,
            )
            .items
            .iter()
            .map(|image| image.id.0)
            .collect(),
        EntityKind::MapFeature => store
            .search_map_features(
                &streetlevel_store::MapFeatureFilter {
                    bbox: Some(world_box),
                    ..Default::default()
                },
                100_000,
                None,
            )
            .items
            .iter()
            .map(|feature| feature.id.0)
            .collect(),
        _ => store
            .search_detections(
                &streetlevel_store::DetectionFilter {
                    bbox: Some(world_box),
                    ..Default::default()
                },
                100_000,
                None,
            )
            .items
            .iter()
            .map(|detection| detection.id.0)
            .collect(),
    }
}

fn no_nulls(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Array(items) => items.iter().all(no_nulls),
        Value::Object(members) => members.values().all(no_nulls),
        _ => true,
    }
}

// ---- auth, errors, CORS ----------------------------------------------------------------------

#[test]
fn requests_without_a_valid_token_get_401_code_190() {
    let server = &world().server;
    let missing = server.get("/images?bbox=13,55,14,56");
    let body = assert_error(&missing, TOKEN, "access token");
    assert_eq!(body["error"]["type"], "OAuthException");
    assert_error(
        &server.get("/images?bbox=13,55,14,56&access_token=nope"),
        TOKEN,
        "",
    );
    assert_error(
        &server.request(
            "GET",
            "/maps/vtp/svc1_public/2/14/0/0",
            &[("Authorization", "OAuth wrong")],
            b"",
        ),
        TOKEN,
        "",
    );
}

/// A browser's `GET /` gets the explorer (by default; `home_page` `links` brings back the
/// page of links, `crates/web/tests/pages.rs`); API clients keep the API's answers at `/`.
#[test]
fn a_browser_at_the_root_gets_the_explorer_and_api_clients_keep_json() {
    const FIREFOX: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    let server = &world().server;
    let page = server.request("GET", "/", &[("Accept", FIREFOX)], b"");
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .is_some_and(|value| value.starts_with("text/html")),
        "{:?}",
        page.header("content-type")
    );
    let html = String::from_utf8_lossy(&page.body);
    assert!(html.contains(r#"<main id="explorer""#), "{html}");
    assert!(html.contains(r#"href="/dashboard""#), "{html}");
    let explore = server.request("GET", "/explore", &[("Accept", FIREFOX)], b"");
    assert_eq!(explore.status, 200);
    assert_eq!(String::from_utf8_lossy(&explore.body), html);

    // Without an `Accept: text/html`, or with a query, `/` is the API's multiple-ID call.
    assert_error(&server.get("/"), TOKEN, "access token");
    assert_error(
        &server.request("GET", "/", &[("Accept", "application/json")], b""),
        TOKEN,
        "access token",
    );
    let image = first_image().id;
    assert_error(
        &server.request(
            "GET",
            &format!("/?ids={image}&fields=id"),
            &[("Accept", FIREFOX)],
            b"",
        ),
        TOKEN,
        "access token",
    );
    let ids = get_json(&format!("/?ids={image}&fields=id"));
    assert_eq!(ids[image.to_string()]["id"], image.to_string(), "{ids}");
}

/// Clients send headers a GET does not need (docs/API.md); they change nothing.
#[test]
fn headers_a_get_does_not_need_are_ignored() {
    let world = world();
    let token = &world.fixture.client_token;
    let image = first_image();
    let path = format!("/{}?fields=id,captured_at&access_token={token}", image.id);
    let plain = world.server.get(&path);
    assert_eq!(plain.status, 200);
    for headers in [
        [
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
        ],
        [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "*/*"),
        ],
    ] {
        let response = world.server.request("GET", &path, &headers, b"");
        assert_eq!(response.status, 200, "{headers:?}");
        assert_eq!(response.json(), plain.json(), "{headers:?}");
    }
}

#[test]
fn tokens_are_accepted_in_the_query_and_both_header_schemes() {
    let world = world();
    let token = &world.fixture.client_token;
    let image = first_image();
    let path = format!("/{}?fields=id", image.id);
    assert_eq!(
        world
            .server
            .get(&format!("{path}&access_token={token}"))
            .status,
        200
    );
    for scheme in ["OAuth", "Bearer"] {
        let header = format!("{scheme} {token}");
        assert_eq!(
            world
                .server
                .request("GET", &path, &[("Authorization", &header)], b"")
                .status,
            200
        );
    }
    // The Python SDK sends the same token both ways.
    let header = format!("OAuth {token}");
    let both = world.server.request(
        "GET",
        &format!("{path}&access_token={token}"),
        &[("Authorization", &header)],
        b"",
    );
    assert_eq!(both.status, 200);
}

#[test]
fn preflight_allows_authorization_and_every_response_has_cors() {
    let server = &world().server;
    let preflight = server.request(
        "OPTIONS",
        "/images",
        &[
            ("Origin", "http://example.com"),
            ("Access-Control-Request-Method", "GET"),
            ("Access-Control-Request-Headers", "authorization"),
        ],
        b"",
    );
    assert!(preflight.status == 204 || preflight.status == 200);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    assert!(
        preflight
            .header("access-control-allow-headers")
            .unwrap()
            .contains("authorization")
    );
    assert_eq!(
        get("/images?bbox=13,55,14,56&limit=1").header("access-control-allow-origin"),
        Some("*")
    );
    assert_eq!(
        server
            .get("/nothing/here/at/all")
            .header("access-control-allow-origin"),
        Some("*")
    );
}

#[test]
fn unknown_paths_and_methods_are_graph_errors() {
    assert_error(&get("/nothing/here/at/all"), UNKNOWN_PATH, "Unknown path");
    let world = world();
    let auth = format!("OAuth {}", world.fixture.client_token);
    let response = world
        .server
        .request("DELETE", "/images", &[("Authorization", &auth)], b"");
    assert_error(&response, METHOD_NOT_ALLOWED, "DELETE");
}

/// iD joins its API root, which ends in `/`, with `/<id>/detections`: empty segments must
/// reach the same endpoint as the single-slash path, for GET and HEAD alike, while paths that
/// are unknown once the empty segments are gone stay refused.
#[test]
fn empty_path_segments_resolve_as_the_single_slash_path() {
    let world = world();
    let scan = scan();
    let image_id = scan.detections[0].image;
    let feature_id = scan
        .detections
        .iter()
        .find_map(|detection| detection.map_feature)
        .expect("a detection of a map feature");
    let auth = format!("OAuth {}", world.fixture.client_token);
    let headers = [("Authorization", auth.as_str())];
    for (single, doubled) in [
        (
            format!("/{image_id}?fields=id,geometry"),
            format!("//{image_id}?fields=id,geometry"),
        ),
        (
            format!("/{image_id}/detections?fields=id,image,geometry,value"),
            format!("//{image_id}/detections?fields=id,image,geometry,value"),
        ),
        (
            format!("/{feature_id}/detections?fields=id,value,image"),
            format!("//{feature_id}/detections?fields=id,value,image"),
        ),
        (
            format!("/{image_id}/detections/?fields=id"),
            format!("//{image_id}//detections//?fields=id"),
        ),
        (
            format!("/images?image_ids={image_id}&fields=id,sequence"),
            format!("//images?image_ids={image_id}&fields=id,sequence"),
        ),
    ] {
        let expected = get_json(&single);
        assert!(
            expected.get("id").is_some() || !expected["data"].as_array().unwrap().is_empty(),
            "{single} answers something to compare: {expected}"
        );
        assert_eq!(get_json(&doubled), expected, "{doubled} against {single}");
        let head = world.server.request("HEAD", &doubled, &headers, b"");
        assert_eq!(head.status, 200, "HEAD {doubled}");
        assert!(head.body.is_empty(), "HEAD {doubled} has no body");
        assert_eq!(
            head.header("content-type"),
            get(&single).header("content-type"),
            "HEAD {doubled}"
        );
    }
    // Still refused: what is unknown without the empty segments, and signed media, whose
    // paths the server hands out and takes literally.
    for path in [
        "//nothing/here".to_owned(),
        format!("//{image_id}/nothing"),
        "//images/extra".to_owned(),
        "//media/thumb/1/256".to_owned(),
    ] {
        assert_error(&get(&path), UNKNOWN_PATH, "Unknown path");
        let head = world.server.request("HEAD", &path, &headers, b"");
        assert_eq!(head.status, 404, "HEAD {path}");
    }
}

#[test]
fn a_panicking_handler_is_a_500_error_body_and_the_server_lives_on() {
    // A server of its own whose standard error the test reads instead of passing it on: the
    // panic it provokes is logged there, with a backtrace when RUST_BACKTRACE is set, and
    // that belongs in no passing test's output.
    let data = world().pristine.copy("black-box-panic");
    let server =
        Server::start_captured(Path::new(BINARY), &data.dir, &["--debug-panic-route"], &[]);
    assert_error(&server.get("/__panic"), INTERNAL, "unknown error");
    let auth = format!("OAuth {}", data.client_token);
    let after = server.request(
        "GET",
        &format!("/{}?fields=id", first_image().id),
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(after.status, 200, "the server lives on");
    // The panic is logged.
    server.stderr_once_it_contains("requested panic");
}

/// The server refuses a body over the limit before reading all of it; the client, which
/// sends all of it before reading, still gets the 413, since a connection the server closes
/// reads and throws away what the client still sends before it is closed (closing over
/// unread bytes would reset it, and the reset may destroy the answer unread).
#[test]
fn oversized_bodies_are_refused() {
    let body = vec![b'x'; 200_000];
    let response = world().server.request(
        "POST",
        "/token",
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_error(&response, BODY_TOO_LARGE, "larger than");
}

/// The same, made certain to take the early path: the client sends part of a body over the
/// limit, waits until the 413 has arrived (the server answered without reading the rest),
/// then sends the rest, and only then reads: every byte it sends is taken, and the answer
/// arrives whole, followed by the end of the connection. Without the lingering close the
/// server's socket closes over unread bytes, the rest is refused with a reset, and the answer
/// may be lost with it.
#[test]
fn a_body_refused_before_it_was_read_is_taken_and_the_answer_kept() {
    use std::io::Write as _;
    let addr = world().server.addr;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let length: usize = 4 << 20;
    let head = format!(
        "POST /token HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let first = 256 * 1024;
    stream.write_all(&vec![b' '; first]).unwrap();
    // The answer arrives before the body is all sent.
    let mut one = [0_u8; 1];
    assert_eq!(stream.peek(&mut one).expect("the refusal arrives"), 1);
    stream
        .write_all(&vec![b' '; length - first])
        .expect("the rest of the body is taken after the refusal");
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .expect("the answer is read after the whole body was sent");
    let response = streetlevel_tests::parse_response(&raw);
    assert_error(&response, BODY_TOO_LARGE, "larger than");
}

/// Every row of docs/API.md's error table, answered by the real server: a row no request
/// here covers fails the test, so a documented error cannot go unchecked.
#[test]
fn every_row_of_the_documented_error_table_is_what_the_server_answers() {
    let world = world();
    let image = first_image();
    let feature = all_ids(&world.store, EntityKind::MapFeature)[0];
    let thumb = get_json(&format!("/{}?fields=thumb_256_url", image.id));
    let auth = format!("OAuth {}", world.fixture.client_token);
    let mut covered = 0;
    for row in documented_errors() {
        let situation = row.situation.as_str();
        let is = |prefix: &str| situation.starts_with(prefix);
        let response = if is(MALFORMED) {
            get("/images?bbox=13,55,14")
        } else if is(NOT_SELECTIVE) {
            get("/images?start_captured_at=2021-01-01")
        } else if is(UNKNOWN_FIELD) {
            get(&format!("/{}?fields=id,nonsense", image.id))
        } else if is(MIXED_KINDS) {
            get(&format!("/?ids={},{feature}", image.id))
        } else if is(TOKEN) {
            world.server.get("/images?bbox=13,55,14,56")
        } else if is(MEDIA_SIGNATURE) {
            let target = local_target(&thumb["thumb_256_url"]);
            world
                .server
                .get(&target.replace("signature=", "signature=ab"))
        } else if is(TAKEDOWN_REFUSED) {
            // A client token may not delete (crates/streetlevel/tests/takedown.rs has the rest).
            world.server.request(
                "DELETE",
                &format!("/{}", image.id),
                &[("Authorization", &auth)],
                b"",
            )
        } else if is(UNKNOWN_ID) {
            get("/1?fields=id")
        } else if is(UNKNOWN_TILE_SET) {
            get("/maps/vtp/nope/2/14/0/0")
        } else if is(UNKNOWN_PATH) {
            get("/nothing/here/at/all")
        } else if is(METHOD_NOT_ALLOWED) {
            world
                .server
                .request("PUT", "/images", &[("Authorization", &auth)], b"")
        } else if is(BODY_TOO_LARGE) {
            world.server.request(
                "POST",
                "/logging",
                &[
                    ("Authorization", &auth),
                    ("Content-Type", "application/json"),
                ],
                &vec![b' '; 65 * 1024 + 1],
            )
        } else if is(QUOTA) {
            let fixture = world.pristine.copy("black-box-error-table-quota");
            let limited = Server::start(
                Path::new(BINARY),
                &fixture.dir,
                &["--limit-entity-per-min", "1"],
            );
            let auth = format!("OAuth {}", fixture.client_token);
            let target = format!("/{}?fields=id", image.id);
            assert_eq!(
                limited
                    .request("GET", &target, &[("Authorization", &auth)], b"")
                    .status,
                200
            );
            limited.request("GET", &target, &[("Authorization", &auth)], b"")
        } else if is(INTERNAL) {
            // A server of its own, whose logged panic stays out of the test output.
            let fixture = world.pristine.copy("black-box-error-table-panic");
            Server::start_captured(
                Path::new(BINARY),
                &fixture.dir,
                &["--debug-panic-route"],
                &[],
            )
            .get("/__panic")
        } else if is(DATABASE_UNREACHABLE) {
            database_unreachable(world)
        } else {
            panic!("no request here checks the documented error row {situation:?}: add one");
        };
        assert_error(&response, situation, "");
        covered += 1;
    }
    assert_eq!(covered, 15, "docs/API.md's error table has 15 rows");
}

/// A token check the token cache cannot answer, by a server on a PostgreSQL that was
/// stopped: 503 with `Retry-After` (`tests/replicas.rs` covers the other requests and the
/// recovery).
fn database_unreachable(world: &World) -> Response {
    let fixture = world.pristine.copy("black-box-error-table-database");
    let mut postgres = streetlevel_tests::postgres::Postgres::start("black-box-error-table");
    // Captured: the server warns of the outage, which is no concern of this test's output.
    let server = Server::start_on_postgres(Path::new(BINARY), &fixture.dir, &postgres.url(), &[]);
    postgres.stop();
    let response = server.request(
        "GET",
        "/images?bbox=13,55,14,56",
        &[("Authorization", &format!("OAuth {}", fixture.client_token))],
        b"",
    );
    assert_eq!(response.header("retry-after"), Some("5"), "{response:?}");
    response
}

/// A body that is not what it claims to be is a 400 in the token endpoint's RFC 6749 shape,
/// and changes nothing: the code inside a broken body can still be redeemed.
#[test]
fn malformed_token_request_bodies_are_400_and_change_nothing() {
    let world = world();
    let secret = format!("OAuth {}", world.fixture.client_secret);
    let client_id = &world.fixture.client_id;
    let code = approved_code("malformed-body-user");
    let valid =
        format!(r#"{{"grant_type":"authorization_code","client_id":{client_id},"code":"{code}"}}"#);
    let json = ("Content-Type", "application/json");
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    for (content_type, body) in [
        (json, valid.as_bytes()[..valid.len() - 1].to_vec()),
        (json, format!("{valid} trailing").into_bytes()),
        (json, format!("[{valid}]").into_bytes()),
        (json, b"\xff\xfe{}".to_vec()),
        (json, Vec::new()),
        // (An invalid `%` escape in a form is kept literally, as WHATWG form decoding does.)
        (form, b"grant_type=\xff\xfe".to_vec()),
    ] {
        let response = world.server.request(
            "POST",
            "/token",
            &[content_type, ("Authorization", &secret)],
            &body,
        );
        let shown = String::from_utf8_lossy(&body);
        assert_eq!(
            response.status,
            400,
            "{shown}: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert_eq!(response.header("access-control-allow-origin"), Some("*"));
        let answer = response.json();
        assert_eq!(answer["error"], "invalid_request", "{shown}: {answer}");
        assert!(answer["error_description"].is_string(), "{answer}");
        assert!(answer["svctrace_id"].is_string(), "{answer}");
    }
    let exchanged = world.server.request(
        "POST",
        "/token",
        &[json, ("Authorization", &secret)],
        valid.as_bytes(),
    );
    assert_eq!(
        exchanged.status,
        200,
        "{}",
        String::from_utf8_lossy(&exchanged.body)
    );
    assert!(exchanged.json()["access_token"].is_string());
}

/// A new user `username` approves the fixture app, written by the auth crate where the
/// server keeps its tables (the fixture's file, or the replicas' database) at `now`: the code.
fn approved_code_at(username: &str, now: streetlevel_model::Timestamp) -> String {
    let world = world();
    auth::approved_code_at(
        world.server.database(),
        &world.fixture.client_id,
        username,
        now,
    )
}

/// [`approved_code_at`] now.
fn approved_code(username: &str) -> String {
    approved_code_at(username, auth::now())
}

/// `POST /token` with the fixture app's secret and a JSON body.
fn post_token(body: &Value) -> Response {
    let world = world();
    let secret = format!("OAuth {}", world.fixture.client_secret);
    world.server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &secret),
        ],
        body.to_string().as_bytes(),
    )
}

/// The code of `approved_code_at` exchanged through the auth store at the same time: a user
/// token issued then.
fn user_token_issued_at(username: &str, now: streetlevel_model::Timestamp) -> String {
    let code = approved_code_at(username, now);
    let fixture = &world().fixture;
    let body = serde_json::json!({
        "grant_type": "authorization_code",
        "client_id": fixture.client_id.parse::<u64>().unwrap(),
        "code": code,
    });
    auth::store_at(world().server.database(), now)
        .exchange(
            Some(&format!("OAuth {}", fixture.client_secret)),
            Some("application/json"),
            body.to_string().as_bytes(),
        )
        .unwrap()
        .access_token
}

#[test]
fn expired_and_conflicting_tokens_are_401() {
    let world = world();
    let path = format!("/{}?fields=id", first_image().id);
    // Issued a year ago with a 30-day lifetime.
    let year_ago = streetlevel_model::Timestamp(auth::now().0 - 365 * 24 * 3600 * 1000);
    let expired = user_token_issued_at("expired-token-user", year_ago);
    let header = format!("OAuth {expired}");
    assert_error(
        &world
            .server
            .request("GET", &path, &[("Authorization", &header)], b""),
        TOKEN,
        "expired",
    );
    assert_error(
        &world.server.get(&format!("{path}&access_token={expired}")),
        TOKEN,
        "expired",
    );
    // Too long ago to refresh (the grace is a day).
    let refused = post_token(&serde_json::json!({
        "grant_type": "refresh_token",
        "client_id": world.fixture.client_id.parse::<u64>().unwrap(),
        "refresh_token": expired,
    }));
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"], "invalid_grant");

    // Two valid tokens of the same app, one in the query and one in the header: neither wins.
    let embed = streetlevel_tests::run_with_env(
        Path::new(BINARY),
        &[
            "apps",
            "embed-token",
            "--data",
            world.fixture.dir.to_str().unwrap(),
            "--client-id",
            &world.fixture.client_id,
        ],
        &world.server.admin_env(),
    );
    let embed = embed.trim().strip_prefix("embed_token: ").unwrap();
    let client = &world.fixture.client_token;
    assert_eq!(
        world
            .server
            .get(&format!("{path}&access_token={embed}"))
            .status,
        200
    );
    let header = format!("OAuth {embed}");
    assert_error(
        &world.server.request(
            "GET",
            &format!("{path}&access_token={client}"),
            &[("Authorization", &header)],
            b"",
        ),
        TOKEN,
        "",
    );
}

/// Refresh over HTTP: the new token works, the old one stops, and presenting the old one
/// again revokes the family. Each state is asked of every process serving: on replicas a
/// write through one reaches the others within issue 17's second (a token another replica
/// validated a moment ago may be taken from its memory until then).
#[test]
fn a_user_token_refreshes_over_http_and_a_replayed_refresh_revokes_the_family() {
    let world = world();
    let client_id = world.fixture.client_id.parse::<u64>().unwrap();
    let code = approved_code("refresh-user");
    let issued = post_token(&serde_json::json!({
        "grant_type": "authorization_code", "client_id": client_id, "code": code,
    }));
    assert_eq!(
        issued.status,
        200,
        "{}",
        String::from_utf8_lossy(&issued.body)
    );
    let first = issued.json()["access_token"].as_str().unwrap().to_owned();
    let path = format!("/{}?fields=id", first_image().id);
    // The answers to `token` of every process, once each gives `status`.
    let everywhere = |token: &str, status: u16| {
        world.server.get_on_every_process(
            &format!("{path}&access_token={token}"),
            &[],
            |response| response.status == status,
        )
    };
    for response in everywhere(&first, 200) {
        assert_eq!(response.status, 200);
    }

    let refresh = |token: &str| {
        post_token(&serde_json::json!({
            "grant_type": "refresh_token", "client_id": client_id, "refresh_token": token,
        }))
    };
    let refreshed = refresh(&first);
    assert_eq!(
        refreshed.status,
        200,
        "{}",
        String::from_utf8_lossy(&refreshed.body)
    );
    let body = refreshed.json();
    assert_eq!(body["token_type"], "bearer");
    assert!(
        body["expires_in"]
            .as_u64()
            .is_some_and(|seconds| seconds > 0)
    );
    let second = body["access_token"].as_str().unwrap().to_owned();
    assert_ne!(second, first);
    for response in everywhere(&second, 200) {
        assert_eq!(response.status, 200);
    }
    for response in everywhere(&first, 401) {
        assert_error(&response, TOKEN, "");
    }

    let replayed = refresh(&first);
    assert_eq!(replayed.status, 400);
    assert_eq!(replayed.json()["error"], "invalid_grant");
    for response in everywhere(&second, 401) {
        assert_error(&response, TOKEN, "");
    }
}

// ---- entities ----------------------------------------------------------------------------------

const SDK_IMAGE_FIELDS: &str = "id,altitude,atomic_scale,camera_parameters,camera_type,captured_at,compass_angle,computed_altitude,computed_compass_angle,computed_geometry,computed_rotation,creator,exif_orientation,geometry,height,make,model,thumb_256_url,thumb_1024_url,thumb_2048_url,thumb_original_url,merge_cc,mesh,quality_score,sequence,sfm_cluster,width";

#[test]
fn image_by_id_with_the_sdk_fields() {
    let image = first_image();
    for path in [format!("/{}", image.id), format!("/{}/", image.id)] {
        let body = get_json(&format!("{path}?fields={SDK_IMAGE_FIELDS}"));
        assert!(no_nulls(&body), "{body}");
        assert_eq!(body["id"], image.id.to_string());
        assert_eq!(body["captured_at"], image.captured_at.millis());
        assert_eq!(body["sequence"], image.sequence.as_str());
        assert_eq!(body["creator"]["id"], image.creator.to_string());
        assert!(body["creator"]["username"].is_string());
        assert_eq!(body["geometry"]["type"], "Point");
        // serde_json's default float parsing may differ in the last bit.
        let lon = body["geometry"]["coordinates"][0].as_f64().unwrap();
        assert!((lon - image.geometry.lon).abs() < 1e-9, "{lon}");
        assert_eq!(body["width"], image.width);
        for field in [
            "thumb_256_url",
            "thumb_1024_url",
            "thumb_2048_url",
            "thumb_original_url",
        ] {
            assert!(
                body[field]
                    .as_str()
                    .unwrap()
                    .starts_with(&world().server.base()),
                "{field}"
            );
        }
        // `/` is not escaped.
        let raw = String::from_utf8(get(&format!("{path}?fields=thumb_256_url")).body).unwrap();
        assert!(!raw.contains("\\/"), "{raw}");
    }
}

#[test]
fn fields_default_to_id_and_accept_encoded_commas() {
    let image = first_image();
    let expected = serde_json::json!({"id": image.id.to_string()});
    assert_eq!(get_json(&format!("/{}", image.id)), expected);
    assert_eq!(get_json(&format!("/{}?fields=", image.id)), expected);
    let encoded = get_json(&format!("/{}?fields=id%2Cheight", image.id));
    assert_eq!(encoded["height"], image.height);
}

#[test]
fn unknown_fields_and_ids_are_errors() {
    let world = world();
    let image = first_image();
    assert_error(
        &get(&format!("/{}?fields=id,nonsense", image.id)),
        UNKNOWN_FIELD,
        "nonexisting field (nonsense)",
    );
    let feature_id = all_ids(&world.store, EntityKind::MapFeature)[0];
    // The SDK tells map features from images this way.
    assert_error(
        &get(&format!("/{feature_id}?fields={SDK_IMAGE_FIELDS}")),
        UNKNOWN_FIELD,
        "MapFeature",
    );
    assert_error(&get("/1?fields=id"), UNKNOWN_ID, "does not exist");
    assert_error(&get("/12abc?fields=id"), MALFORMED, "(id)");
}

#[test]
fn map_features_detections_and_organizations_by_id() {
    let world = world();
    let feature_id = all_ids(&world.store, EntityKind::MapFeature)[0];
    let feature = get_json(&format!(
        "/{feature_id}?fields=id,object_value,object_type,geometry,first_seen_at,last_seen_at,images,aligned_direction"
    ));
    assert!(no_nulls(&feature));
    assert_eq!(feature["id"], feature_id.to_string());
    assert!(
        feature["first_seen_at"]
            .as_str()
            .unwrap()
            .ends_with("+0000")
    );
    assert!(["point", "traffic_sign"].contains(&feature["object_type"].as_str().unwrap()));
    // `images` named alone: each image with its ID and original location (map editors pick
    // the image nearest the feature from it).
    let images = feature["images"]["data"].as_array().unwrap();
    assert!(!images.is_empty());
    for item in images {
        let id: u64 = item["id"].as_str().unwrap().parse().unwrap();
        let image = world.store.image(ImageId(id)).expect("a stored image");
        assert_eq!(item["geometry"]["type"], "Point", "{item}");
        assert_eq!(
            item["geometry"]["coordinates"],
            serde_json::json!([image.geometry.lon, image.geometry.lat]),
            "{item}"
        );
    }
    let ids_only = get_json(&format!("/{feature_id}?fields=images.id"));
    assert!(
        ids_only["images"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|item| item.as_object().unwrap().keys().eq(["id"])),
        "{ids_only}"
    );

    let detection_id = all_ids(&world.store, EntityKind::Detection)[0];
    let detection = get_json(&format!(
        "/{detection_id}?fields=id,value,geometry,created_at,image.geometry"
    ));
    assert_eq!(detection["id"], detection_id.to_string());
    assert!(detection["created_at"].as_str().unwrap().ends_with("+0000"));
    assert!(detection["image"]["id"].is_string());
    assert_eq!(detection["image"]["geometry"]["type"], "Point");

    let organization_id = first_image_with_organization();
    let organization = get_json(&format!(
        "/{organization_id}?fields=id,slug,name,description"
    ));
    assert_eq!(organization["id"], organization_id.to_string());
    assert!(organization["slug"].is_string() && organization["name"].is_string());
    assert_eq!(
        world.store.kind_of(EntityId(organization_id)),
        Some(EntityKind::Organization)
    );
}

/// compat.md's nested defaults: a detection's `image` named alone carries the image's ID and
/// its original location, by the detection's ID and in the lists iD asks for
/// (`/<image>/detections?fields=id,image,geometry,value`, `/<feature>/detections?fields=id,value,image`);
/// `image.id` alone carries the ID only.
#[test]
fn a_detections_image_named_alone_carries_its_id_and_location() {
    let world = world();
    let scan = scan();
    let image_of = |detection_id: &str| -> Value {
        let detection = scan
            .detections
            .iter()
            .find(|detection| detection.id.to_string() == detection_id)
            .unwrap_or_else(|| panic!("detection {detection_id} is in the fixture"));
        let image = world
            .store
            .image(ImageId(detection.image))
            .expect("a stored image");
        serde_json::json!({
            "id": detection.image.to_string(),
            "geometry": {"type": "Point", "coordinates": [image.geometry.lon, image.geometry.lat]},
        })
    };
    let detection = &scan.detections[0];
    let by_id = get_json(&format!("/{}?fields=image", detection.id));
    assert_eq!(
        by_id["image"],
        image_of(&detection.id.to_string()),
        "{by_id}"
    );
    let ids_only = get_json(&format!("/{}?fields=image.id", detection.id));
    assert_eq!(
        ids_only["image"],
        serde_json::json!({"id": detection.image.to_string()}),
        "{ids_only}"
    );
    let feature_id = scan
        .detections
        .iter()
        .find_map(|detection| detection.map_feature)
        .expect("a detection of a map feature");
    for list in [
        format!(
            "/{}/detections?fields=id,image,geometry,value",
            detection.image
        ),
        format!("/{feature_id}/detections?fields=id,value,image"),
    ] {
        let body = get_json(&list);
        let items = body["data"].as_array().unwrap();
        assert!(!items.is_empty(), "{list}: {body}");
        for item in items {
            assert_eq!(
                item["image"],
                image_of(item["id"].as_str().unwrap()),
                "{list}: {item}"
            );
        }
    }
}

fn first_image_with_organization() -> u64 {
    let store = &world().store;
    all_ids(store, EntityKind::Image)
        .into_iter()
        .find_map(|id| {
            store
                .image(ImageId(id))
                .and_then(|image| image.organization)
        })
        .expect("some fixture image belongs to an organization")
        .0
}

#[test]
fn detections_of_an_image_and_of_a_map_feature() {
    let scan = scan();
    let detection_ids = |of: &dyn Fn(&ScannedDetection) -> bool| -> Vec<String> {
        scan.detections
            .iter()
            .filter(|detection| of(detection))
            .map(|detection| detection.id.to_string())
            .collect()
    };
    let image_id = scan.detections[0].image;
    let expected = detection_ids(&|detection| detection.image == image_id);
    let body = get_json(&format!(
        "/{image_id}/detections/?fields=id,value,image,geometry"
    ));
    assert!(!expected.is_empty());
    assert_eq!(ids_of(&body), expected);
    assert_eq!(body["data"][0]["image"]["id"], image_id.to_string());

    let feature_id = scan
        .detections
        .iter()
        .find_map(|detection| detection.map_feature)
        .expect("a detection of a map feature");
    let expected = detection_ids(&|detection| detection.map_feature == Some(feature_id));
    let body = get_json(&format!("/{feature_id}/detections?fields="));
    assert!(!expected.is_empty());
    assert_eq!(ids_of(&body), expected);
}

#[test]
fn multiple_ids_are_keyed_and_must_share_a_kind() {
    let store = &world().store;
    let images = all_ids(store, EntityKind::Image);
    let body = get_json(&format!(
        "/?ids={},{}&fields=id,is_pano",
        images[0], images[1]
    ));
    assert_eq!(body[images[0].to_string()]["id"], images[0].to_string());
    assert!(body[images[1].to_string()]["is_pano"].is_boolean());
    let feature = all_ids(store, EntityKind::MapFeature)[0];
    assert_error(
        &get(&format!("/?ids={},{feature}&fields=id", images[0])),
        MIXED_KINDS,
        "(ids)",
    );
    assert_error(&get("/?fields=id"), MALFORMED, "(ids)");
}

#[test]
fn image_ids_of_a_sequence_in_capture_order() {
    let image = first_image();
    let expected = world().store.sequence_image_ids(&image.sequence).unwrap();
    let body = get_json(&format!("/image_ids?sequence_id={}", image.sequence));
    let got: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        got,
        expected.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
    assert_error(&get("/image_ids"), MALFORMED, "(sequence_id)");
    assert_eq!(get("/image_ids?sequence_id=doesnotexist").status, 404);
}

#[test]
fn image_pyramid_tiles_for_the_viewer() {
    let image = first_image();
    let body = get_json(&format!("/{}/tiles?z=11&fields=url,z,x,y", image.id));
    let items = body["data"].as_array().unwrap();
    assert!(!items.is_empty());
    assert_eq!(items[0]["z"], 11);
    let url = items[0]["url"].as_str().unwrap();
    let target = url.strip_prefix(&world().server.base()).unwrap();
    let tile = world().server.get(target);
    assert_eq!(tile.status, 200);
    assert_eq!(tile.header("content-type"), Some("image/jpeg"));
}

// ---- searches ----------------------------------------------------------------------------------

fn ids_of(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Follows `paging.next` to the end; returns every ID and checks no page repeats an ID.
fn exhaust(first: &str) -> Vec<String> {
    let base = world().server.base();
    let mut target = first.to_owned();
    let mut all = Vec::new();
    for _ in 0..1000 {
        let body = get_json(&target);
        let ids = ids_of(&body);
        all.extend(ids.clone());
        match body.get("paging") {
            None => return all,
            Some(paging) => {
                assert!(!ids.is_empty(), "a next link beside an empty page");
                let next = paging["next"].as_str().expect("paging.next is a string");
                next.strip_prefix(&base)
                    .expect("absolute next URL")
                    .clone_into(&mut target);
            }
        }
    }
    panic!("paging did not end");
}

/// The fixture's entities read straight from its `SQLite` file with plain SQL (no store
/// code): the oracle the search tests filter by scanning, independently of the store's index.
struct Scan {
    images: Vec<ScannedImage>,
    features: Vec<ScannedFeature>,
    detections: Vec<ScannedDetection>,
}

struct ScannedImage {
    id: u64,
    captured_at: i64,
    lon: f64,
    lat: f64,
    creator: String,
    is_pano: bool,
    make: Option<String>,
    sequence: String,
    organization: Option<u64>,
}

struct ScannedFeature {
    id: u64,
    lon: f64,
    lat: f64,
    object_value: String,
    first_seen_at: i64,
    last_seen_at: i64,
}

struct ScannedDetection {
    id: u64,
    value: String,
    image: u64,
    map_feature: Option<u64>,
}

#[allow(clippy::cast_sign_loss)] // IDs are stored as the two's complement of the u64
fn scan() -> &'static Scan {
    static SCAN: OnceLock<Scan> = OnceLock::new();
    SCAN.get_or_init(|| {
        let connection = rusqlite::Connection::open_with_flags(
            world().pristine.database(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let id = |value: i64| value as u64;
        let mut images: Vec<ScannedImage> = connection
            .prepare(
                "SELECT i.id, i.captured_at, i.lon, i.lat, c.username, i.is_pano, i.make,
                        i.sequence, i.organization
                 FROM store_images i JOIN store_creators c ON c.id = i.creator",
            )
            .unwrap()
            .query_map([], |row| {
                Ok(ScannedImage {
                    id: id(row.get(0)?),
                    captured_at: row.get(1)?,
                    lon: row.get(2)?,
                    lat: row.get(3)?,
                    creator: row.get(4)?,
                    is_pano: row.get(5)?,
                    make: row.get(6)?,
                    sequence: row.get(7)?,
                    organization: row.get::<_, Option<i64>>(8)?.map(id),
                })
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut features: Vec<ScannedFeature> = connection
            .prepare(
                "SELECT id, lon, lat, object_value, first_seen_at, last_seen_at
                 FROM store_map_features",
            )
            .unwrap()
            .query_map([], |row| {
                Ok(ScannedFeature {
                    id: id(row.get(0)?),
                    lon: row.get(1)?,
                    lat: row.get(2)?,
                    object_value: row.get(3)?,
                    first_seen_at: row.get(4)?,
                    last_seen_at: row.get(5)?,
                })
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut detections: Vec<ScannedDetection> = connection
            .prepare("SELECT id, value, image, map_feature FROM store_detections")
            .unwrap()
            .query_map([], |row| {
                Ok(ScannedDetection {
                    id: id(row.get(0)?),
                    value: row.get(1)?,
                    image: id(row.get(2)?),
                    map_feature: row.get::<_, Option<i64>>(3)?.map(id),
                })
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        images.sort_by_key(|image| image.id);
        features.sort_by_key(|feature| feature.id);
        detections.sort_by_key(|detection| detection.id);
        assert!(!images.is_empty() && !features.is_empty() && !detections.is_empty());
        Scan {
            images,
            features,
            detections,
        }
    })
}

impl Scan {
    fn image(&self, id: u64) -> &ScannedImage {
        self.images.iter().find(|image| image.id == id).unwrap()
    }
}

/// `left,bottom,right,top` as the `bbox` parameter, and whether it holds `(lon, lat)`.
#[derive(Clone, Copy)]
struct Bbox([f64; 4]);

impl Bbox {
    fn holds(self, lon: f64, lat: f64) -> bool {
        let [left, bottom, right, top] = self.0;
        (left..=right).contains(&lon) && (bottom..=top).contains(&lat)
    }

    fn param(self) -> String {
        let [left, bottom, right, top] = self.0;
        format!("{left},{bottom},{right},{top}")
    }
}

/// The western half of the images' extent, so a bbox filter keeps some images, not all.
fn western_half() -> Bbox {
    let images = &scan().images;
    let (min_lon, max_lon) = images.iter().fold((f64::MAX, f64::MIN), |(low, high), i| {
        (low.min(i.lon), high.max(i.lon))
    });
    let (min_lat, max_lat) = images.iter().fold((f64::MAX, f64::MIN), |(low, high), i| {
        (low.min(i.lat), high.max(i.lat))
    });
    // Rounded to 4 decimals so the query carries exactly the box the oracle uses.
    let round = |value: f64| (value * 1e4).round() / 1e4;
    Bbox([
        round(min_lon - 0.01),
        round(min_lat - 0.01),
        round(f64::midpoint(min_lon, max_lon)),
        round(max_lat + 0.01),
    ])
}

/// `*` matches any run of characters, anything else itself.
fn glob(pattern: &str, value: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == value,
        Some((head, rest)) => {
            value.starts_with(head)
                && (0..=value.len() - head.len()).any(|skip| {
                    value.is_char_boundary(head.len() + skip)
                        && glob(rest, &value[head.len() + skip..])
                })
        }
    }
}

/// A whole-second time in the form the query takes (`Z`, as `+` would need escaping).
fn query_time(millis: i64) -> String {
    streetlevel_model::Timestamp(millis)
        .to_iso8601()
        .replace("+0000", "Z")
}

/// The median of `values`, rounded down to a whole second.
fn median_second(mut values: Vec<i64>) -> i64 {
    values.sort_unstable();
    let median = values[values.len() / 2];
    median - median.rem_euclid(1000)
}

/// Checks that `query` pages to exactly `expected` (ID strings in ascending order), which
/// must not be empty: an empty answer cannot pass.
fn check_search(query: &str, expected: &[u64]) {
    assert!(!expected.is_empty(), "{query}: the oracle expects nothing");
    let separator = if query.contains('?') { '&' } else { '?' };
    let got = exhaust(&format!("{query}{separator}limit=7&fields=id"));
    let expected: Vec<String> = expected.iter().map(ToString::to_string).collect();
    assert_eq!(got, expected, "{query}");
}

#[test]
fn image_search_by_bbox_pages_to_exhaustion() {
    let scan = scan();
    let expected: Vec<u64> = scan.images.iter().map(|image| image.id).collect();
    let all = exhaust("/images?bbox=-180,-90,180,90&limit=37&fields=id,geometry");
    assert_eq!(
        all,
        expected.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
    // The default limit is 2000 and there is then no paging.
    let body = get_json("/images?bbox=-180,-90,180,90");
    assert!(body.get("paging").is_none());
    assert_eq!(ids_of(&body).len(), expected.len());
}

#[test]
fn image_search_filters_match_a_scan_of_the_fixture() {
    let scan = scan();
    let check = |query: &str, keep: &dyn Fn(&ScannedImage) -> bool| {
        let expected: Vec<u64> = scan
            .images
            .iter()
            .filter(|image| keep(image))
            .map(|image| image.id)
            .collect();
        // Each filter here keeps some images and drops others.
        assert!(
            expected.len() < scan.images.len(),
            "{query} keeps everything"
        );
        check_search(&format!("/images?{query}"), &expected);
    };
    let half = western_half();
    let in_half = |image: &ScannedImage| half.holds(image.lon, image.lat);
    check(&format!("bbox={}", half.param()), &in_half);
    let pano = scan.images.iter().find(|image| image.is_pano).unwrap();
    let creator = pano.creator.clone();
    check(&format!("creator_username={creator}"), &|image| {
        image.creator == creator
    });
    check(
        &format!("creator_username={creator}&is_pano=true"),
        &|image| image.creator == creator && image.is_pano,
    );
    check(&format!("bbox={}&is_pano=false", half.param()), &|image| {
        in_half(image) && !image.is_pano
    });
    let make = pano.make.clone().unwrap();
    // Case-insensitive, spaces allowed.
    check(
        &format!(
            "bbox=-180,-90,180,90&make={}",
            make.to_lowercase().replace(' ', "%20")
        ),
        &|image| {
            image
                .make
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case(&make))
        },
    );
    let sequence = pano.sequence.clone();
    check(&format!("sequence_ids={sequence}"), &|image| {
        image.sequence == sequence
    });
    // The Python SDK's alias.
    check(&format!("sequence_id={sequence}"), &|image| {
        image.sequence == sequence
    });
    let organization = pano.organization.unwrap();
    let other_organization = scan
        .images
        .iter()
        .find_map(|image| image.organization.filter(|id| *id != organization));
    if other_organization.is_some() {
        check(&format!("organization_id={organization}"), &|image| {
            image.organization == Some(organization)
        });
    }
    let start = median_second(scan.images.iter().map(|image| image.captured_at).collect());
    check(
        &format!(
            "bbox=-180,-90,180,90&start_captured_at={}",
            query_time(start)
        ),
        &|image| image.captured_at >= start,
    );
    check(
        &format!("bbox=-180,-90,180,90&end_captured_at={}", query_time(start)),
        &|image| image.captured_at <= start,
    );
}

#[test]
fn image_ids_and_s2_searches_for_the_viewer() {
    let scan = scan();
    let asked = [scan.images[5].id, scan.images[1].id, scan.images[9].id];
    let body = get_json(&format!(
        "/images?image_ids={},{},{},1&fields=id,computed_geometry,sequence",
        asked[0], asked[1], asked[2]
    ));
    let got: BTreeSet<String> = ids_of(&body).into_iter().collect();
    assert_eq!(got, asked.iter().map(ToString::to_string).collect());

    let image = &scan.images[0];
    let cell_of =
        |lat: f64, lon: f64| streetlevel_store::S2CellId::from_lat_lng(lat, lon).parent(17);
    let cell = cell_of(image.lat, image.lon);
    let expected: Vec<String> = scan
        .images
        .iter()
        .filter(|other| cell_of(other.lat, other.lon) == cell)
        .map(|other| other.id.to_string())
        .collect();
    assert!(expected.contains(&image.id.to_string()));
    let body = get_json(&format!(
        "/images?s2={}&fields=id,computed_geometry,geometry,sequence",
        cell.raw()
    ));
    assert_eq!(ids_of(&body), expected);
}

#[test]
fn image_search_rules_give_400s_naming_the_parameter() {
    assert_error(
        &get("/images?fields=id"),
        NOT_SELECTIVE,
        "bbox, creator_username",
    );
    let too_many: Vec<String> = (1..=201).map(|id| id.to_string()).collect();
    assert_error(
        &get(&format!("/images?image_ids={}", too_many.join(","))),
        MALFORMED,
        "(image_ids): give at most 200 ids",
    );
    let enough = &too_many[..200];
    assert_eq!(
        get(&format!("/images?image_ids={}", enough.join(","))).status,
        200
    );
    assert_error(
        &get("/images?is_pano=true"),
        NOT_SELECTIVE,
        "bbox, creator_username",
    );
    assert_error(
        &get("/images?organization_id=1&is_pano=true"),
        NOT_SELECTIVE,
        "(is_pano)",
    );
    assert_error(
        &get("/images?creator_username=x&make=Sony"),
        NOT_SELECTIVE,
        "(make)",
    );
    assert_error(
        &get("/images?creator_username=x&model=A"),
        NOT_SELECTIVE,
        "(model)",
    );
    for limit in ["0", "2001", "ten", "-1"] {
        assert_error(
            &get(&format!("/images?bbox=13,55,14,56&limit={limit}")),
            MALFORMED,
            "(limit)",
        );
    }
    for bbox in [
        "1,2,3",
        "NaN,55,14,56",
        "13,55,inf,56",
        "14,55,13,56",
        "13,56,14,55",
        "13,55,200,56",
        "13,-95,14,56",
        "a,b,c,d",
    ] {
        assert_error(&get(&format!("/images?bbox={bbox}")), MALFORMED, "(bbox)");
    }
    assert_error(
        &get("/images?bbox=13,55,14,56&start_captured_at=yesterday"),
        MALFORMED,
        "(start_captured_at)",
    );
    assert_error(
        &get("/images?bbox=13,55,14,56&after=zzz"),
        MALFORMED,
        "(after)",
    );
    assert_error(&get("/images?image_ids=1,x"), MALFORMED, "(image_ids)");
    assert_error(&get("/images?s2=notacell"), MALFORMED, "(s2)");
    assert_error(
        &get("/images?bbox=13,55,14,56&is_pano=maybe"),
        MALFORMED,
        "(is_pano)",
    );
}

#[test]
fn map_feature_and_detection_searches_match_a_scan_of_the_fixture() {
    let scan = scan();
    let features = |keep: &dyn Fn(&ScannedFeature) -> bool| -> Vec<u64> {
        scan.features
            .iter()
            .filter(|feature| keep(feature))
            .map(|feature| feature.id)
            .collect()
    };
    check_search("/map_features?bbox=-180,-90,180,90", &features(&|_| true));
    let half = western_half();
    let in_half = features(&|feature| half.holds(feature.lon, feature.lat));
    assert!(in_half.len() < scan.features.len());
    check_search(&format!("/map_features?bbox={}", half.param()), &in_half);
    check_search(
        "/map_features?bbox=-180,-90,180,90&object_values=regulatory--*,object--street-*",
        &features(&|feature| {
            glob("regulatory--*", &feature.object_value)
                || glob("object--street-*", &feature.object_value)
        }),
    );
    let seen = median_second(scan.features.iter().map(|f| f.first_seen_at).collect());
    check_search(
        &format!(
            "/map_features?bbox=-180,-90,180,90&start_first_seen_at={}",
            query_time(seen)
        ),
        &features(&|feature| feature.first_seen_at >= seen),
    );
    let last = median_second(scan.features.iter().map(|f| f.last_seen_at).collect());
    check_search(
        &format!(
            "/map_features?bbox=-180,-90,180,90&end_last_seen_at={}",
            query_time(last)
        ),
        &features(&|feature| feature.last_seen_at <= last),
    );
    assert_error(&get("/map_features?fields=id"), NOT_SELECTIVE, "bbox");

    let detections = |keep: &dyn Fn(&ScannedDetection) -> bool| -> Vec<u64> {
        scan.detections
            .iter()
            .filter(|detection| keep(detection))
            .map(|detection| detection.id)
            .collect()
    };
    check_search("/detections?bbox=-180,-90,180,90", &detections(&|_| true));
    let regulatory = detections(&|detection| glob("regulatory--*", &detection.value));
    assert!(regulatory.len() < scan.detections.len());
    check_search("/detections?values=regulatory--*", &regulatory);
    check_search(
        "/detections?values=object--*,regulatory--*",
        &detections(&|d| glob("object--*", &d.value) || glob("regulatory--*", &d.value)),
    );
    // `bbox` and the time bounds are the detection's image's.
    let in_half = detections(&|detection| {
        let image = scan.image(detection.image);
        half.holds(image.lon, image.lat)
    });
    assert!(in_half.len() < scan.detections.len());
    check_search(&format!("/detections?bbox={}", half.param()), &in_half);
    let start = median_second(scan.images.iter().map(|image| image.captured_at).collect());
    check_search(
        &format!(
            "/detections?values=*&start_captured_at={}",
            query_time(start)
        ),
        &detections(&|detection| scan.image(detection.image).captured_at >= start),
    );
    assert_error(&get("/detections?fields=id"), NOT_SELECTIVE, "values");
}

// ---- tiles -------------------------------------------------------------------------------------

fn tile_of_first_image(z: u8) -> TileId {
    let image = first_image();
    TileId::containing(image.geometry.lon, image.geometry.lat, z).unwrap()
}

fn tile_path(tileset: &str, tile: TileId) -> String {
    format!(
        "/maps/vtp/{tileset}/2/{}/{}/{}",
        tile.z(),
        tile.x(),
        tile.y()
    )
}

fn get_tile(path: &str) -> streetlevel_mvt::DecodedTile {
    let token = &world().fixture.client_token;
    let response = world().server.get(&format!("{path}?access_token={token}"));
    assert_eq!(response.status, 200, "{path}");
    assert_eq!(
        response.header("content-type"),
        Some("application/vnd.mapbox-vector-tile")
    );
    // Cross-check with an independent decoder.
    if !response.body.is_empty() {
        let reader = mvt_reader::Reader::new(response.body.clone()).expect("mvt-reader decodes it");
        let names = reader.get_layer_names().unwrap();
        let ours = streetlevel_mvt::decode(&response.body).unwrap();
        assert_eq!(
            names,
            ours.layers
                .iter()
                .map(|l| l.name.clone())
                .collect::<Vec<_>>()
        );
        for (index, layer) in ours.layers.iter().enumerate() {
            assert_eq!(
                reader.get_features(index).unwrap().len(),
                layer.features.len()
            );
        }
    }
    streetlevel_mvt::decode(&response.body).unwrap()
}

fn is_uint(value: Option<&TileValue>) -> bool {
    matches!(
        value,
        Some(TileValue::Uint(_) | TileValue::Int(_) | TileValue::Sint(_))
    )
}

#[test]
fn z14_coverage_tiles_hold_image_and_sequence_layers_with_spec_types() {
    for tileset in ["svc1_public", "svc1_computed_public"] {
        let tile = get_tile(&tile_path(tileset, tile_of_first_image(14)));
        let names: Vec<&str> = tile.layers.iter().map(|l| l.name.as_str()).collect();
        assert!(
            names.contains(&"image") && names.contains(&"sequence"),
            "{names:?}"
        );
        let image_layer = tile.layer("image").unwrap();
        assert_eq!(image_layer.extent, 4096);
        for feature in &image_layer.features {
            let p = &feature.properties;
            assert!(
                is_uint(p.get("id"))
                    && is_uint(p.get("creator_id"))
                    && is_uint(p.get("captured_at"))
            );
            assert!(matches!(p.get("sequence_id"), Some(TileValue::String(_))));
            assert!(matches!(p.get("is_pano"), Some(TileValue::Bool(_))));
            assert!(is_uint(p.get("compass_angle")));
            assert!(p.get("organization_id").is_none_or(|v| is_uint(Some(v))));
        }
        assert!(
            image_layer
                .features
                .iter()
                .any(|f| f.properties.get("id") == Some(&TileValue::Uint(first_image().id.0)))
        );
        for feature in &tile.layer("sequence").unwrap().features {
            let p = &feature.properties;
            assert!(matches!(p.get("id"), Some(TileValue::String(_))));
            assert!(
                is_uint(p.get("image_id"))
                    && is_uint(p.get("creator_id"))
                    && is_uint(p.get("captured_at"))
            );
            assert!(matches!(p.get("is_pano"), Some(TileValue::Bool(_))));
            assert!(p.get("sequence_id").is_none());
        }
    }
}

#[test]
fn layers_follow_their_zoom_ranges() {
    let overview = get_tile(&tile_path("svc1_public", tile_of_first_image(3)));
    assert_eq!(
        overview
            .layers
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["overview"]
    );
    let feature = &overview.layer("overview").unwrap().features[0];
    assert!(matches!(
        feature.properties.get("sequence_id"),
        Some(TileValue::String(_))
    ));
    assert!(!feature.properties.contains_key("compass_angle"));
    // Each overview point carries its cell's counts: over the world tile they add up to every
    // image and every panorama.
    let world_tile = get_tile(&tile_path("svc1_public", TileId::new(0, 0, 0).unwrap()));
    let points = &world_tile.layer("overview").unwrap().features;
    let sum = |name: &str| -> u64 {
        points
            .iter()
            .map(|feature| match feature.properties.get(name) {
                Some(TileValue::Uint(count)) => *count,
                other => panic!("{name} is {other:?}"),
            })
            .sum()
    };
    let images = &scan().images;
    assert!(points.len() < images.len(), "the overview thins");
    assert_eq!(sum("count"), images.len() as u64);
    let panoramas = images.iter().filter(|image| image.is_pano).count();
    assert_eq!(sum("pano_count"), panoramas as u64);
    let z10 = get_tile(&tile_path("svc1_public", tile_of_first_image(10)));
    assert_eq!(
        z10.layers
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["sequence"]
    );
    // Beyond every layer's range, and far from any data: 200 with an empty body.
    let token = &world().fixture.client_token;
    for path in [
        tile_path("svc1_public", tile_of_first_image(16)),
        String::from("/maps/vtp/svc1_public/2/14/0/0/"),
    ] {
        let response = world().server.get(&format!("{path}?access_token={token}"));
        assert_eq!(response.status, 200, "{path}");
        assert!(response.body.is_empty(), "{path}");
    }
}

#[test]
fn map_feature_tiles_at_z14() {
    let store = &world().store;
    let feature = store
        .map_feature(streetlevel_model::MapFeatureId(
            all_ids(store, EntityKind::MapFeature)[0],
        ))
        .unwrap();
    let tile = TileId::containing(feature.geometry.lon, feature.geometry.lat, 14).unwrap();
    let (tileset, layer) = match feature.object_type {
        streetlevel_model::ObjectType::Point => ("svc_map_feature_point", "point"),
        streetlevel_model::ObjectType::TrafficSign => {
            ("svc_map_feature_traffic_sign", "traffic_sign")
        }
    };
    let decoded = get_tile(&tile_path(tileset, tile));
    let features = &decoded.layer(layer).expect("the feature's layer").features;
    let found = features
        .iter()
        .find(|f| f.properties.get("id") == Some(&TileValue::Uint(feature.id.0)))
        .expect("the feature is in its tile");
    assert_eq!(
        found.properties.get("value"),
        Some(&TileValue::String(feature.object_value.clone()))
    );
    assert!(
        is_uint(found.properties.get("first_seen_at"))
            && is_uint(found.properties.get("last_seen_at"))
    );
    // Not at lower zooms.
    assert!(
        get_tile(&tile_path(tileset, tile_of_first_image(13)))
            .layers
            .is_empty()
    );
}

/// Clients such as the Python SDK join neighbouring z14 tiles without removing duplicates,
/// so every point of a point layer lies inside its own tile, none in the buffer around it.
#[test]
fn z14_point_layers_hold_only_points_inside_the_tile() {
    let tile = tile_of_first_image(14);
    let mut n_points = 0;
    for (tileset, layer) in [
        ("svc1_public", "image"),
        ("svc1_computed_public", "image"),
        ("svc_map_feature_point", "point"),
        ("svc_map_feature_traffic_sign", "traffic_sign"),
    ] {
        let decoded = get_tile(&tile_path(tileset, tile));
        let Some(decoded_layer) = decoded.layer(layer) else {
            continue;
        };
        let extent = i32::try_from(decoded_layer.extent).unwrap();
        for feature in &decoded_layer.features {
            let streetlevel_mvt::Geometry::Points(points) = &feature.geometry else {
                panic!("{tileset}/{layer} holds a feature that is not a point");
            };
            for point in points {
                n_points += 1;
                assert!(
                    (0..=extent).contains(&point.x()) && (0..=extent).contains(&point.y()),
                    "{tileset}/{layer}: {point:?} lies outside the tile"
                );
            }
        }
    }
    assert!(n_points > 0, "the first image's tile holds points");
}

#[test]
fn tile_errors() {
    let token = &world().fixture.client_token;
    let server = &world().server;
    assert_error(
        &server.get(&format!("/maps/vtp/nope/2/14/0/0?access_token={token}")),
        UNKNOWN_TILE_SET,
        "nope",
    );
    for (path, name) in [
        ("2/a/0/0", "(z)"),
        ("2/1/2/0", "(x)"),
        ("2/1/0/5", "(y)"),
        ("2/99/0/0", "(z)"),
    ] {
        assert_error(
            &server.get(&format!(
                "/maps/vtp/svc1_public/{path}?access_token={token}"
            )),
            MALFORMED,
            name,
        );
    }
}

#[test]
fn tiles_are_cacheable_gzipped_on_request_and_revalidate_with_304() {
    let token = &world().fixture.client_token;
    let server = &world().server;
    let path = format!(
        "{}?access_token={token}",
        tile_path("svc1_public", tile_of_first_image(14))
    );
    let plain = server.get(&path);
    assert!(plain.header("cache-control").unwrap().contains("max-age"));
    assert!(plain.header("content-encoding").is_none());
    let zipped = server.request("GET", &path, &[("Accept-Encoding", "gzip")], b"");
    assert_eq!(zipped.header("content-encoding"), Some("gzip"));
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(zipped.body.as_slice())
        .read_to_end(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, plain.body);
    let etag = plain.header("etag").unwrap().to_owned();
    let revalidated = server.request("GET", &path, &[("If-None-Match", &etag)], b"");
    assert_eq!(revalidated.status, 304);
    assert!(revalidated.body.is_empty());
    assert_eq!(revalidated.header("access-control-allow-origin"), Some("*"));
}

// ---- media and token -----------------------------------------------------------------------

#[test]
fn signed_thumbnails_work_without_a_token_and_tampering_fails() {
    let image = first_image();
    let body = get_json(&format!(
        "/{}?fields=thumb_256_url,thumb_1024_url",
        image.id
    ));
    for (field, width) in [("thumb_256_url", 256), ("thumb_1024_url", 1024)] {
        let target = local_target(&body[field]);
        let response = world().server.get(&target);
        assert_eq!(response.status, 200, "{field}");
        assert_eq!(response.header("content-type"), Some("image/jpeg"));
        assert_eq!(response.header("access-control-allow-origin"), Some("*"));
        let decoded = image::load_from_memory(&response.body).unwrap();
        assert_eq!(decoded.width(), width.min(image.width));
        let tampered = target.replace("signature=", "signature=00");
        assert_error(&world().server.get(&tampered), MEDIA_SIGNATURE, "signature");
    }
}

/// The signer the server uses: its key from `DATA/media.key`, the default lifetime.
fn server_signer() -> streetlevel_server::media::Signer {
    let key = std::fs::read_to_string(world().fixture.dir.join("media.key")).unwrap();
    streetlevel_server::media::Signer::new(&hex::decode(key.trim()).unwrap(), 30 * 24 * 3600)
        .unwrap()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Media URLs signed with the server's own key: one signed now works, one whose expiry has
/// passed, one without a signature or expiry, and one whose expiry was moved are 403 code 10.
#[test]
fn expired_unsigned_and_altered_media_urls_are_403() {
    use streetlevel_server::media::{MediaObject, ThumbSize};
    let server = &world().server;
    let object = MediaObject::Thumb(first_image().id, ThumbSize::W256);
    let signer = server_signer();
    let base = server.base();
    let target = |url: String| url.strip_prefix(&base).unwrap().to_owned();
    let fresh = target(signer.url(&base, &object, unix_now()));
    assert_eq!(server.get(&fresh).status, 200, "{fresh}");

    // Signed long ago: the signature matches, the expiry has passed.
    let expired = target(signer.url(&base, &object, unix_now() - 40 * 24 * 3600));
    assert_error(&server.get(&expired), MEDIA_SIGNATURE, "expired");

    let (path, query) = fresh.split_once('?').unwrap();
    let (expires, signature) = query.split_once('&').unwrap();
    assert!(expires.starts_with("expires=") && signature.starts_with("signature="));
    assert_error(&server.get(path), MEDIA_SIGNATURE, "");
    assert_error(
        &server.get(&format!("{path}?{expires}")),
        MEDIA_SIGNATURE,
        "signature",
    );
    assert_error(
        &server.get(&format!("{path}?{signature}")),
        MEDIA_SIGNATURE,
        "expiry",
    );
    let later: u64 = expires["expires=".len()..].parse::<u64>().unwrap() + 86_400;
    assert_error(
        &server.get(&format!("{path}?expires={later}&{signature}")),
        MEDIA_SIGNATURE,
        "signature",
    );
    // Another image's path under this signature.
    let other = MediaObject::Thumb(ImageId(first_image().id.0 + 1), ThumbSize::W256).path();
    assert_error(
        &server.get(&format!("{other}?{query}")),
        MEDIA_SIGNATURE,
        "signature",
    );
}

/// The fixtures are written with lazy media, so meshes and `SfM` clusters are made on their
/// first request, in the formats the web viewer reads (docs/API.md), without a token.
#[test]
fn meshes_and_sfm_clusters_are_served_from_lazy_data_sets() {
    let store = &world().store;
    let image = all_ids(store, EntityKind::Image)
        .into_iter()
        .filter_map(|id| store.image(ImageId(id)))
        .find(|image| image.mesh.is_some() && image.sfm_cluster.is_some())
        .expect("an image with a mesh and a cluster");
    let body = get_json(&format!("/{}?fields=mesh,sfm_cluster", image.id));
    assert_eq!(body["mesh"]["id"], image.mesh.unwrap().to_string());
    assert_eq!(
        body["sfm_cluster"]["id"],
        image.sfm_cluster.unwrap().to_string()
    );
    let fetch = |url: &Value| {
        let target = local_target(url);
        let response = world().server.get(&target);
        assert_eq!(response.status, 200, "{target}");
        response.body
    };
    for _ in 0..2 {
        // The second round reads what the first one kept on disk.
        let mesh = fetch(&body["mesh"]["url"]);
        assert_eq!(
            mesh.first(),
            Some(&0x0D),
            "vertices are unpacked floats (tag 0x0D)"
        );
        let mut json = String::new();
        flate2::read::ZlibDecoder::new(&fetch(&body["sfm_cluster"]["url"])[..])
            .read_to_string(&mut json)
            .unwrap();
        let clusters: Value = serde_json::from_str(&json).unwrap();
        let reconstruction = &clusters[0];
        assert!(
            reconstruction["points"]
                .as_object()
                .is_some_and(|points| !points.is_empty())
        );
        assert!(reconstruction["reference_lla"]["latitude"].is_f64());
    }
}

#[test]
fn token_exchange_errors_are_oauth_bodies() {
    let server = &world().server;
    let response = server.request(
        "POST",
        "/token",
        &[("Content-Type", "application/json")],
        br#"{"grant_type":"authorization_code","client_id":1,"code":"x"}"#,
    );
    assert_eq!(response.status, 401);
    let body = response.json();
    assert_eq!(body["error"], "invalid_client");
    assert!(body["svctrace_id"].is_string());
    assert_eq!(response.header("access-control-allow-origin"), Some("*"));
    let secret = format!("OAuth {}", world().fixture.client_secret);
    let client_id = &world().fixture.client_id;
    let body = format!(
        r#"{{"grant_type":"authorization_code","client_id":{client_id},"code":"not-a-code"}}"#
    );
    let response = server.request(
        "POST",
        "/token",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &secret),
        ],
        body.as_bytes(),
    );
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"], "invalid_grant");
}

// ---- rate limits -------------------------------------------------------------------------------

#[test]
fn rate_limits_answer_with_the_spec_body_and_retry_after() {
    let fixture = world().pristine.copy("black-box-rate-limits");
    let server = Server::start(
        Path::new(BINARY),
        &fixture.dir,
        &[
            "--limit-search-per-min",
            "2",
            "--limit-tiles-per-day",
            "1",
            "--short-name",
            "mly",
        ],
    );
    let auth = format!("OAuth {}", fixture.client_token);
    let search = |server: &Server| {
        server.request(
            "GET",
            "/images?bbox=13,55,14,56&limit=1",
            &[("Authorization", &auth)],
            b"",
        )
    };
    let first = search(&server);
    assert_eq!(first.status, 200);
    assert!(first.header("x-app-usage").unwrap().contains("call_count"));
    assert_eq!(search(&server).status, 200);
    let throttled = search(&server);
    assert_eq!(throttled.status, 429);
    assert!(
        throttled
            .header("retry-after")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert!(throttled.header("x-app-usage").is_some());
    assert_eq!(throttled.header("access-control-allow-origin"), Some("*"));
    let body = assert_error_with_trace(
        &throttled,
        QUOTA,
        "Application request limit reached",
        "mlytrace_id",
    );
    let error = &body["error"];
    assert_eq!(error["message"], "Application request limit reached");
    assert_eq!(error["is_transient"], true);
    assert_eq!(error["error_user_title"], "Rate Limit Exceeded");
    assert!(error["error_user_msg"].is_string());
    // Entity calls have their own quota.
    let entity = server.request(
        "GET",
        &format!("/{}?fields=id", first_image().id),
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(entity.status, 200);
    // Tiles: a daily quota, and the short name renames the tile sets.
    let tile = format!(
        "/maps/vtp/mly1_public/2/14/0/0?access_token={}",
        fixture.client_token
    );
    assert_eq!(server.get(&tile).status, 200);
    assert_error_with_trace(
        &server.get(&tile),
        QUOTA,
        "Application request limit reached",
        "mlytrace_id",
    );
}

// ---- web surface -------------------------------------------------------------------------------

#[test]
fn the_web_pages_are_mounted_on_the_same_listener() {
    let server = &world().server;
    let login = server.get("/login");
    assert_eq!(login.status, 200);
    assert!(
        login
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    let image = first_image();
    let embed = server.get(&format!("/embed?image_key={}&style=photo", image.id));
    assert_eq!(embed.status, 200);
    let page = String::from_utf8(embed.body).unwrap();
    assert!(
        page.contains(&format!("/media/thumb/{}/2048?", image.id)),
        "the embed page shows a signed thumbnail"
    );
}

#[test]
fn sigterm_stops_the_server_gracefully() {
    let data = world().pristine.copy("black-box-sigterm");
    let mut server = Server::start(Path::new(BINARY), &data.dir, &[]);
    assert_eq!(server.get("/images").status, 401);
    assert!(server.is_running());
    assert!(
        server.terminate(),
        "the server exits with success on SIGTERM"
    );
}
