//! Black-box tests of how `streetlevel serve` is configured and how it holds up: the
//! `--config` file and its precedence against flags, `--public-url` in every absolute URL the
//! server hands out, the header read timeout, the connection cap, and the embed page without
//! the npm packages. Each test starts the real binary on `127.0.0.1:0`.
//!
//! Nothing here measures time: a deadline on a socket read only stops a broken server from
//! hanging the test, and every assertion is about what the server did.
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use streetlevel_tests::{
    Connection, Fixture, Response, Server, serve_at_expecting_failure, serve_expecting_failure,
};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");

/// Bounds every socket read: far longer than any answer takes, short enough that a broken
/// server fails the test instead of hanging it.
const DEADLINE: Duration = Duration::from_secs(60);

fn binary() -> &'static Path {
    Path::new(BINARY)
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture::generate(binary(), "serve-config", 30))
}

/// A scratch path under the system temp directory, unique to this test process.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "streetlevel-serve-config-{}-{name}",
        std::process::id()
    ))
}

/// Writes `text` to a config file named after `name` and returns its path.
fn config_file(name: &str, text: &str) -> PathBuf {
    let path = scratch(&format!("{name}.json"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts `serve` on a copy of the shared fixture (one server per data directory: it holds
/// a lock), so tests start their servers at the same moment without sharing data.
fn start(extra: &[&str]) -> Server {
    Server::start(binary(), &fixture_copy().dir, extra)
}

/// A copy of the shared fixture of its own.
fn fixture_copy() -> Fixture {
    static COPIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let copy = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    fixture().copy(&format!("serve-config-copy-{copy}"))
}

/// An empty directory under the system temp directory.
fn empty_dir(name: &str) -> PathBuf {
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start_with_config(name: &str, json: &str, extra: &[&str]) -> Server {
    let path = config_file(name, json);
    let path = path.to_str().unwrap();
    let mut args = vec!["--config", path];
    args.extend_from_slice(extra);
    start(&args)
}

fn auth() -> String {
    format!("OAuth {}", fixture().client_token)
}

fn get(server: &Server, target: &str) -> Response {
    server.request("GET", target, &[("Authorization", &auth())], b"")
}

fn get_json(server: &Server, target: &str) -> Value {
    let response = get(server, target);
    assert_eq!(
        response.status,
        200,
        "{target}: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

const SEARCH: &str = "/images?bbox=-180,-90,180,90&limit=1";

#[test]
fn environment_variables_sit_between_flags_and_the_config_file() {
    let path = config_file(
        "environment",
        r#"{"short_name": "cfg", "trace_member": "cfg_trace", "limit_search_per_min": 1}"#,
    );
    let server = Server::start_with_env(
        binary(),
        &fixture_copy().dir,
        "127.0.0.1:0",
        &[
            "--config",
            path.to_str().unwrap(),
            "--limit-search-per-min",
            "2",
        ],
        &[
            ("STREETLEVEL_SHORT_NAME", "env"),
            ("STREETLEVEL_LIMIT_SEARCH_PER_MIN", "5"),
            ("STREETLEVEL_TILE_MAX_AGE_SECONDS", "77"),
        ],
    );
    let tile_response = get(&server, &tile("env1_public"));
    assert_eq!(tile_response.status, 200, "the variable wins over the file");
    assert_eq!(
        tile_response.header("cache-control"),
        Some("public, max-age=77"),
        "a setting only the environment gives"
    );
    assert_eq!(get(&server, &tile("cfg1_public")).status, 404);
    assert_eq!(get(&server, SEARCH).status, 200);
    assert_eq!(get(&server, SEARCH).status, 200);
    let throttled = get(&server, SEARCH);
    assert_eq!(
        throttled.status, 429,
        "the flag's 2 wins over the variable's 5"
    );
    assert!(
        throttled.json()["error"]["cfg_trace"].is_string(),
        "a setting neither flag nor variable gives still comes from the file"
    );
}

#[test]
fn a_bad_environment_variable_stops_the_start_naming_it() {
    let failed = {
        let mut command = std::process::Command::new(binary());
        command
            .args(["serve", "--data"])
            .arg(&fixture().dir)
            .args(["--addr", "127.0.0.1:0"])
            .env("STREETLEVEL_MAX_CONNECTIONS", "many")
            .stdin(std::process::Stdio::null());
        command.output().unwrap()
    };
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("max-connections"), "{stderr}");
    assert!(!String::from_utf8_lossy(&failed.stdout).contains("listening on"));
}

/// Real imagery is never replaced by synthetic scenery: only a data set marked as fixtures
/// rendered on request (`media/RENDER_ON_REQUEST`) gets its missing originals drawn.
#[test]
fn missing_media_of_an_unmarked_data_set_are_unknown_not_rendered() {
    let marked = fixture_copy();
    let unmarked = fixture_copy();
    std::fs::remove_file(unmarked.dir.join("media").join("RENDER_ON_REQUEST"))
        .expect("lazy fixtures carry the marker");
    for (fixture, expected) in [(&marked, 200), (&unmarked, 404)] {
        let server = Server::start(binary(), &fixture.dir, &[]);
        let image = image_with_media(&server);
        let original = image["thumb_original_url"].as_str().unwrap();
        let mesh = image["mesh"]["url"].as_str().unwrap();
        for url in [original, mesh] {
            let target = local_target(&Value::from(url), &server.base());
            assert_eq!(get(&server, &target).status, expected, "{url}");
        }
    }
    // The files the marked set rendered and kept, under the names `streetlevel fixtures`
    // writes, are served from an unmarked set too: files are always read.
    for folder in ["img", "meshes", "sfm"] {
        copy_tree(
            &marked.dir.join("media").join(folder),
            &unmarked.dir.join("media").join(folder),
        );
    }
    let server = Server::start(binary(), &unmarked.dir, &[]);
    let image = image_with_media(&server);
    for url in [&image["thumb_original_url"], &image["mesh"]["url"]] {
        let target = local_target(url, &server.base());
        assert_eq!(get(&server, &target).status, 200, "{url} from its file");
    }
}

fn tile(tileset: &str) -> String {
    format!("/maps/vtp/{tileset}/2/14/0/0")
}

/// The first image of the fixture that has a mesh and an `SfM` cluster, with its media fields.
fn image_with_media(server: &Server) -> Value {
    let body = get_json(
        server,
        "/images?bbox=-180,-90,180,90&limit=100&fields=id,mesh,sfm_cluster,thumb_256_url,thumb_1024_url,thumb_2048_url,thumb_original_url",
    );
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|image| image["mesh"]["url"].is_string() && image["sfm_cluster"]["url"].is_string())
        .cloned()
        .expect("a fixture image with a mesh and a cluster")
}

// ---- the config file and flags -----------------------------------------------------------------

#[test]
fn config_file_values_take_effect() {
    let server = start_with_config(
        "values",
        r#"{"short_name": "cfg", "trace_member": "cfg_trace", "limit_search_per_min": 1}"#,
        &[],
    );
    assert_eq!(get(&server, &tile("cfg1_public")).status, 200);
    assert_eq!(get(&server, &tile("cfg_map_feature_point")).status, 200);
    assert_eq!(get(&server, &tile("svc1_public")).status, 404);
    assert_eq!(get(&server, SEARCH).status, 200);
    let throttled = get(&server, SEARCH);
    assert_eq!(
        throttled.status, 429,
        "the file's search limit of 1 applies"
    );
    assert!(
        throttled.json()["error"]["cfg_trace"].is_string(),
        "the file's trace member names the error's trace ID"
    );
}

#[test]
fn flags_win_over_the_config_file() {
    let server = start_with_config(
        "precedence",
        r#"{"short_name": "cfg", "trace_member": "cfg_trace", "limit_search_per_min": 1}"#,
        &["--short-name", "flag", "--limit-search-per-min", "2"],
    );
    assert_eq!(get(&server, &tile("flag1_public")).status, 200);
    assert_eq!(get(&server, &tile("cfg1_public")).status, 404);
    assert_eq!(get(&server, SEARCH).status, 200);
    assert_eq!(
        get(&server, SEARCH).status,
        200,
        "the flag's limit of 2 replaces the file's 1"
    );
    let throttled = get(&server, SEARCH);
    assert_eq!(throttled.status, 429);
    assert!(
        throttled.json()["error"]["cfg_trace"].is_string(),
        "a setting no flag gives still comes from the file"
    );
}

#[test]
fn compat_original_sets_what_the_original_clients_need_and_flags_still_win() {
    let server = start(&["--compat", "original", "--limit-search-per-min", "1"]);
    assert_eq!(get(&server, &tile("mly1_public")).status, 200);
    assert_eq!(get(&server, &tile("mly_map_feature_point")).status, 200);
    assert_eq!(get(&server, &tile("svc1_public")).status, 404);
    assert_eq!(get(&server, SEARCH).status, 200);
    let throttled = get(&server, SEARCH);
    assert_eq!(throttled.status, 429);
    assert!(
        throttled.json()["error"]["fbtrace_id"].is_string(),
        "{}",
        throttled.json()
    );
    drop(server);
    let server = start_with_config(
        "compat",
        r#"{"short_name": "cfg", "trace_member": "cfg_trace"}"#,
        &["--compat", "original", "--short-name", "flag"],
    );
    assert_eq!(
        get(&server, &tile("flag1_public")).status,
        200,
        "a flag wins"
    );
    assert_eq!(get(&server, &tile("mly1_public")).status, 404);
    let missing = get(&server, "/1?fields=id");
    assert!(
        missing.json()["error"]["fbtrace_id"].is_string(),
        "--compat wins over the file: {}",
        missing.json()
    );
}

/// Asserts that `serve` with these arguments exits with an error that mentions `mentions`,
/// without ever listening.
fn assert_refused(extra: &[&str], mentions: &[&str]) {
    let failed = serve_expecting_failure(binary(), &fixture().dir, extra);
    assert!(!failed.success, "{extra:?} must fail: {failed:?}");
    assert!(
        !failed.stdout.contains("listening on"),
        "{extra:?} must fail before listening: {failed:?}"
    );
    for text in mentions {
        assert!(
            failed.stderr.contains(text),
            "the error for {extra:?} should mention {text:?}: {}",
            failed.stderr
        );
    }
}

#[test]
fn a_bad_config_file_stops_the_start_with_a_clear_error() {
    let missing = scratch("absent.json");
    let missing = missing.to_str().unwrap();
    assert_refused(
        &["--config", missing],
        &["cannot read the config file", missing],
    );

    let broken = config_file("broken", r#"{"short_name": "cfg""#);
    let broken = broken.to_str().unwrap();
    assert_refused(&["--config", broken], &["invalid config file", broken]);

    let unknown = config_file("unknown", r#"{"short_nmae": "cfg"}"#);
    let unknown = unknown.to_str().unwrap();
    assert_refused(
        &["--config", unknown],
        &["invalid config file", "unknown field `short_nmae`"],
    );

    let mistyped = config_file("mistyped", r#"{"max_connections": "many"}"#);
    let mistyped = mistyped.to_str().unwrap();
    assert_refused(
        &["--config", mistyped],
        &["invalid config file", "invalid type"],
    );

    let zero_limit = config_file("zero-limit", r#"{"limit_search_per_min": 0}"#);
    let zero_limit = zero_limit.to_str().unwrap();
    assert_refused(&["--config", zero_limit], &["invalid config file"]);

    let zero_timeout = config_file("zero-timeout", r#"{"header_read_timeout_seconds": 0}"#);
    let zero_timeout = zero_timeout.to_str().unwrap();
    assert_refused(
        &["--config", zero_timeout],
        &["header_read_timeout_seconds"],
    );

    let relative_url = config_file("relative-url", r#"{"tiles_url": "tiles.example"}"#);
    let relative_url = relative_url.to_str().unwrap();
    assert_refused(&["--config", relative_url], &["tiles_url", "tiles.example"]);
    assert_refused(
        &["--public-url", "streetlevel.example"],
        &["public URL", "streetlevel.example"],
    );
    assert_refused(
        &["--trusted-proxies", "127.0.0.1,proxy.example"],
        &["trusted_proxies", "proxy.example"],
    );
}

// ---- the listening address and the data directory ----------------------------------------------

#[test]
fn a_host_name_is_accepted_as_the_address() {
    let data = fixture_copy();
    let server = Server::start_at(binary(), &data.dir, "localhost:0", &[]);
    assert!(server.addr.ip().is_loopback(), "{}", server.addr);
    assert_eq!(get(&server, "/images?bbox=13,55,14,56&limit=1").status, 200);
}

#[test]
fn a_port_in_use_is_one_clear_line_before_the_data_is_loaded() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = holder.local_addr().unwrap().to_string();
    // An empty data directory: a server that loaded it would warn that it holds no images.
    let failed = serve_at_expecting_failure(binary(), &empty_dir("port-in-use"), &addr, &[]);
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(!failed.stdout.contains("listening on"), "{failed:?}");
    let lines: Vec<&str> = failed
        .stderr
        .lines()
        .filter(|line| !line.is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one line: {}", failed.stderr);
    assert!(lines[0].contains(&addr), "{}", lines[0]);
    assert!(lines[0].contains("in use"), "{}", lines[0]);
    assert!(lines[0].contains("--addr"), "says what to do: {}", lines[0]);
    drop(holder);
}

#[test]
fn an_address_that_does_not_resolve_is_refused() {
    let failed = serve_at_expecting_failure(binary(), &empty_dir("no-port"), "localhost", &[]);
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(failed.stderr.contains("HOST:PORT"), "{}", failed.stderr);
}

#[test]
fn an_empty_data_directory_is_served_with_a_warning_that_says_how_to_fill_it() {
    // Standard input is closed, so the server stops right after it started.
    let run = serve_at_expecting_failure(binary(), &empty_dir("empty-data"), "127.0.0.1:0", &[]);
    assert!(run.stdout.contains("listening on"), "{run:?}");
    assert!(run.stderr.contains("holds no images"), "{}", run.stderr);
    assert!(
        run.stderr.contains("streetlevel fixtures --out"),
        "{}",
        run.stderr
    );

    let filled = serve_at_expecting_failure(binary(), &fixture_copy().dir, "127.0.0.1:0", &[]);
    assert!(filled.stdout.contains("listening on"), "{filled:?}");
    assert!(
        !filled.stderr.contains("holds no images"),
        "{}",
        filled.stderr
    );
}

// ---- public URLs -------------------------------------------------------------------------------

/// The target of `url` on the local listener: `url` must start with `public`.
fn local_target(url: &Value, public: &str) -> String {
    let url = url.as_str().unwrap();
    url.strip_prefix(public)
        .unwrap_or_else(|| panic!("{url} should start with {public}"))
        .to_owned()
}

/// A stand-in `node_modules` with the two files the embed page checks for, so the viewer page
/// (not the fallback) is rendered whether or not `npm ci` has run.
fn fake_assets() -> PathBuf {
    let dir = scratch("fake-node-modules");
    for file in [
        "mapillary-js/dist/mapillary.js",
        "maplibre-gl/dist/maplibre-gl.mjs",
    ] {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "// stand-in\n").unwrap();
    }
    dir
}

/// `&amp;` back to `&`: URLs in HTML attributes are escaped.
fn unescape(text: &str) -> String {
    text.replace("&amp;", "&")
}

/// The `src` of the first `<img class="still">` in an HTML page.
fn still_image_src(page: &str) -> String {
    let start = page
        .find(r#"<img class="still" src=""#)
        .unwrap_or_else(|| panic!("no still image in {page}"))
        + r#"<img class="still" src=""#.len();
    let end = start + page[start..].find('"').unwrap();
    unescape(&page[start..end])
}

#[test]
fn the_public_url_is_in_every_absolute_url_and_signed_urls_still_verify_locally() {
    let public = "https://streetlevel.example";
    let assets = fake_assets();
    let server = start(&[
        "--public-url",
        "https://streetlevel.example/",
        "--assets-dir",
        assets.to_str().unwrap(),
    ]);

    let image = image_with_media(&server);
    let media = [
        &image["thumb_256_url"],
        &image["thumb_1024_url"],
        &image["thumb_2048_url"],
        &image["thumb_original_url"],
        &image["mesh"]["url"],
        &image["sfm_cluster"]["url"],
    ];
    for url in media {
        let target = local_target(url, &format!("{public}/media/"));
        let response = server.get(&format!("/media/{target}"));
        assert_eq!(response.status, 200, "{url} fetched locally");
        assert!(!response.body.is_empty());
    }

    let id = image["id"].as_str().unwrap();
    let pyramid = get_json(&server, &format!("/{id}/tiles?z=11&fields=url,z,x,y"));
    let block = &pyramid["data"][0]["url"];
    let target = local_target(block, public);
    assert_eq!(server.get(&target).status, 200, "{block} fetched locally");

    let page = get_json(&server, "/images?bbox=-180,-90,180,90&limit=2");
    let next = local_target(&page["paging"]["next"], &format!("{public}/images?"));
    let rest = get_json(&server, &format!("/images?{next}"));
    assert!(!rest["data"].as_array().unwrap().is_empty());

    let embed = server.get(&format!("/embed?image_key={id}&style=split"));
    assert_eq!(embed.status, 200);
    let html = String::from_utf8(embed.body).unwrap();
    assert!(
        html.contains(r#""baseUrl":"https://streetlevel.example""#),
        "{html}"
    );
    assert!(
        html.contains(r#""tilesUrl":"https://streetlevel.example""#),
        "{html}"
    );
    let still = still_image_src(&html);
    let target = local_target(
        &Value::from(still.clone()),
        &format!("{public}/media/thumb/"),
    );
    assert_eq!(
        server.get(&format!("/media/thumb/{target}")).status,
        200,
        "{still} fetched locally"
    );

    // Served over https: the pages' cookies are Secure.
    let login = server.get("/login");
    assert_eq!(login.status, 200);
    assert!(
        login.header("set-cookie").unwrap().contains("; Secure"),
        "{:?}",
        login.headers
    );
}

#[test]
fn a_surface_with_its_own_url_in_the_file_keeps_it_under_the_public_url_flag() {
    let assets = fake_assets();
    let server = start_with_config(
        "surfaces",
        r#"{"public_url": "https://file.example", "tiles_url": "https://tiles.example", "media_url": "https://media.example/"}"#,
        &[
            "--public-url",
            "https://flag.example",
            "--assets-dir",
            assets.to_str().unwrap(),
        ],
    );
    let image = image_with_media(&server);
    let target = local_target(
        &image["thumb_256_url"],
        "https://media.example/media/thumb/",
    );
    assert_eq!(server.get(&format!("/media/thumb/{target}")).status, 200);
    let page = get_json(&server, "/images?bbox=-180,-90,180,90&limit=1");
    local_target(&page["paging"]["next"], "https://flag.example/images?");
    let id = image["id"].as_str().unwrap();
    let html = String::from_utf8(
        server
            .get(&format!("/embed?image_key={id}&style=split"))
            .body,
    )
    .unwrap();
    assert!(
        html.contains(r#""baseUrl":"https://flag.example""#),
        "{html}"
    );
    assert!(
        html.contains(r#""tilesUrl":"https://tiles.example""#),
        "{html}"
    );
}

#[test]
fn without_a_public_url_urls_name_the_bound_address_and_cookies_are_not_secure() {
    let server = start(&[]);
    let image = image_with_media(&server);
    local_target(
        &image["thumb_256_url"],
        &format!("{}/media/", server.base()),
    );
    let login = server.get("/login");
    assert!(!login.header("set-cookie").unwrap().contains("Secure"));
}

// ---- header read timeout and connection cap ----------------------------------------------------

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let server = start_with_config(
        "header-timeout",
        r#"{"header_read_timeout_seconds": 1}"#,
        &[],
    );
    let mut stalled = Connection::open(server.addr, DEADLINE);
    stalled
        .stream()
        .write_all(b"GET /images?bbox=13,55,14,56 HTTP/1.1\r\nHost: 127.0.0.1")
        .unwrap();
    let received = stalled
        .read_until_closed()
        .expect("the server closes a connection whose headers never end");
    assert!(
        received.is_empty(),
        "no answer to half a request: {}",
        String::from_utf8_lossy(&received)
    );
    // Other clients are served as usual, over a connection of their own.
    assert_eq!(get(&server, SEARCH).status, 200);
}

#[test]
fn an_idle_kept_alive_connection_is_closed_after_the_header_timeout() {
    // One connection at a time, so the second client is served only once the idle first one
    // has been closed by the server.
    let server = start_with_config(
        "idle-timeout",
        r#"{"header_read_timeout_seconds": 1, "max_connections": 1}"#,
        &[],
    );
    let mut idle = Connection::open(server.addr, DEADLINE);
    assert_eq!(idle.get(SEARCH, &[("Authorization", &auth())]).status, 200);
    let mut waiting = Connection::open(server.addr, DEADLINE);
    assert_eq!(
        waiting.get(SEARCH, &[("Authorization", &auth())]).status,
        200
    );
    let leftover = idle
        .read_until_closed()
        .expect("the idle connection was closed");
    assert!(
        leftover.is_empty(),
        "{}",
        String::from_utf8_lossy(&leftover)
    );
}

#[test]
fn connections_beyond_the_cap_wait_until_a_slot_frees() {
    // A header timeout far beyond the test, so held connections stay open until closed here.
    let server = start_with_config(
        "cap",
        r#"{"max_connections": 4, "header_read_timeout_seconds": 3600}"#,
        &[],
    );
    let auth = auth();
    let headers = [("Authorization", auth.as_str())];
    let mut held: Vec<Connection> = (0..4)
        .map(|_| {
            let mut connection = Connection::open(server.addr, DEADLINE);
            assert_eq!(connection.get(SEARCH, &headers).status, 200);
            connection
        })
        .collect();

    // The fifth connection is completed by the kernel, and its request sent, but the server
    // does not accept it while four are open.
    let mut extra = Connection::open(server.addr, DEADLINE);
    extra.send_get(SEARCH, &headers);
    // The held connections are still served...
    for connection in &mut held {
        assert_eq!(connection.get(SEARCH, &headers).status, 200);
    }
    // ...while the fifth has no answer.
    assert!(
        !extra.has_unread_data(),
        "a connection beyond the cap of 4 must not be served"
    );

    // Closing one held connection frees a slot, and the waiting request is answered.
    drop(held.remove(0));
    assert_eq!(extra.read_response().status, 200);
    // The extra connection now holds the slot: it is kept alive like any other.
    assert_eq!(extra.get(SEARCH, &headers).status, 200);
    for connection in &mut held {
        assert_eq!(connection.get(SEARCH, &headers).status, 200);
    }
}

// ---- the embed page without the npm packages ---------------------------------------------------

#[test]
fn without_the_npm_packages_the_embed_page_shows_the_thumbnail() {
    let absent = scratch("no-node-modules");
    let server = start(&["--assets-dir", absent.to_str().unwrap()]);
    let image = image_with_media(&server);
    let id = image["id"].as_str().unwrap();
    for style in ["photo", "split", "classic"] {
        let embed = server.get(&format!("/embed?image_key={id}&style={style}"));
        assert_eq!(embed.status, 200);
        let html = String::from_utf8(embed.body).unwrap();
        assert!(html.contains("embed fallback"), "{html}");
        assert!(
            html.contains("mapillary-js and maplibre-gl are missing"),
            "the page says what is missing: {html}"
        );
        assert!(
            !html.contains("<script"),
            "no viewer script without its package: {html}"
        );
        let src = still_image_src(&html);
        let target = local_target(&Value::from(src.clone()), &server.base());
        assert!(
            target.starts_with(&format!("/media/thumb/{id}/2048?")),
            "{src}"
        );
        let picture = server.get(&target);
        assert_eq!(picture.status, 200, "{src}");
        assert_eq!(picture.header("content-type"), Some("image/jpeg"));
        let decoded = image::load_from_memory_with_format(&picture.body, image::ImageFormat::Jpeg)
            .expect("the fallback image is a JPEG");
        assert!(decoded.width() > 0 && decoded.width() <= 2048);
    }
    assert_eq!(
        server.get("/assets/mapillary-js/dist/mapillary.js").status,
        404
    );
}

/// Copies the files under `from` to `to`, folders included.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
