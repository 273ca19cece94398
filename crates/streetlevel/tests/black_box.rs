//! Black-box tests of `streetlevel serve`: the real binary on `127.0.0.1:0` against a fixture
//! data directory, talked to over HTTP. Expected answers come from the store opened directly.
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
use streetlevel_tests::{Fixture, Response, Server};

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
        let server = Server::start(Path::new(BINARY), &fixture.dir, &["--debug-panic-route"]);
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

/// Asserts a Graph-style error with this status and code, the trace member and CORS.
fn assert_error(response: &Response, status: u16, code: i64, mentions: &str) -> Value {
    assert_eq!(
        response.status,
        status,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    assert_eq!(response.header("access-control-allow-origin"), Some("*"));
    let body = response.json();
    let error = &body["error"];
    assert_eq!(error["code"], code, "{body}");
    assert!(
        error["message"].as_str().unwrap().contains(mentions),
        "{body} should mention {mentions}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert!(
        error["svctrace_id"]
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
    let body = assert_error(&missing, 401, 190, "access token");
    assert_eq!(body["error"]["type"], "OAuthException");
    assert_error(
        &server.get("/images?bbox=13,55,14,56&access_token=nope"),
        401,
        190,
        "",
    );
    assert_error(
        &server.request(
            "GET",
            "/maps/vtp/svc1_public/2/14/0/0",
            &[("Authorization", "OAuth wrong")],
            b"",
        ),
        401,
        190,
        "",
    );
}

/// A browser's `GET /` gets a page that says what this server is; API clients keep the
/// API's answers at `/`.
#[test]
fn a_browser_at_the_root_gets_the_landing_page_and_api_clients_keep_json() {
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
    assert!(html.contains(r#"href="/dashboard""#), "{html}");
    assert!(html.contains("/embed?image_key="), "{html}");
    assert!(html.contains(&server.base()), "names the API base: {html}");

    // Without an `Accept: text/html`, or with a query, `/` is the API's multiple-ID call.
    assert_error(&server.get("/"), 401, 190, "access token");
    assert_error(
        &server.request("GET", "/", &[("Accept", "application/json")], b""),
        401,
        190,
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
        401,
        190,
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
    assert_error(&get("/nothing/here/at/all"), 404, 2500, "Unknown path");
    let world = world();
    let auth = format!("OAuth {}", world.fixture.client_token);
    let response = world
        .server
        .request("DELETE", "/images", &[("Authorization", &auth)], b"");
    assert_error(&response, 405, 100, "DELETE");
}

#[test]
fn a_panicking_handler_is_a_500_error_body_and_the_server_lives_on() {
    // A server of its own whose standard error the test reads instead of passing it on: the
    // panic it provokes is logged there, with a backtrace when RUST_BACKTRACE is set, and
    // that belongs in no passing test's output.
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let data = world().pristine.copy("black-box-panic");
    let mut child = Command::new(BINARY)
        .arg("serve")
        .arg("--data")
        .arg(&data.dir)
        .args([
            "--addr",
            "127.0.0.1:0",
            "--exit-on-stdin-eof",
            "--debug-panic-route",
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr: std::net::SocketAddr = loop {
        let line = lines
            .next()
            .expect("the server prints its address")
            .unwrap();
        if let Some(url) = line.strip_prefix("listening on http://") {
            break url.trim().parse().unwrap();
        }
    };
    let response = streetlevel_tests::request(addr, "GET", "/__panic", &[], b"");
    assert_error(&response, 500, 1, "unknown error");
    let auth = format!("OAuth {}", data.client_token);
    let after = streetlevel_tests::request(
        addr,
        "GET",
        &format!("/{}?fields=id", first_image().id),
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(after.status, 200, "the server lives on");
    // Closing standard input stops the server, which closes its standard error.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let log = log.join().unwrap();
    assert!(
        log.contains("requested panic"),
        "the panic is logged: {log}"
    );
}

#[test]
fn oversized_bodies_are_refused() {
    let body = vec![b'x'; 200_000];
    let response = world().server.request(
        "POST",
        "/token",
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_error(&response, 413, 100, "larger than");
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
        400,
        100,
        "nonexisting field (nonsense)",
    );
    let feature_id = all_ids(&world.store, EntityKind::MapFeature)[0];
    // The SDK tells map features from images this way.
    assert_error(
        &get(&format!("/{feature_id}?fields={SDK_IMAGE_FIELDS}")),
        400,
        100,
        "MapFeature",
    );
    let unknown = assert_error(&get("/1?fields=id"), 404, 100, "does not exist");
    assert_eq!(unknown["error"]["error_subcode"], 33);
    assert_error(&get("/12abc?fields=id"), 400, 100, "(id)");
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
    assert!(feature["images"]["data"][0]["id"].is_string());

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
    let store = &world().store;
    let image_id = all_ids(store, EntityKind::Image)
        .into_iter()
        .find(|id| !store.detections_of_image(ImageId(*id)).is_empty())
        .expect("an image with detections");
    let expected: Vec<String> = store
        .detections_of_image(ImageId(image_id))
        .iter()
        .map(|d| d.id.to_string())
        .collect();
    let body = get_json(&format!(
        "/{image_id}/detections/?fields=id,value,image,geometry"
    ));
    let got: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got, expected);
    assert_eq!(body["data"][0]["image"]["id"], image_id.to_string());

    let feature_id = all_ids(store, EntityKind::MapFeature)[0];
    let expected = store
        .detections_of_map_feature(streetlevel_model::MapFeatureId(feature_id))
        .len();
    let body = get_json(&format!("/{feature_id}/detections?fields="));
    assert_eq!(body["data"].as_array().unwrap().len(), expected);
    assert!(expected > 0);
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
        400,
        100,
        "(ids)",
    );
    assert_error(&get("/?fields=id"), 400, 100, "(ids)");
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
    assert_error(&get("/image_ids"), 400, 100, "(sequence_id)");
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

#[test]
fn image_search_by_bbox_pages_to_exhaustion() {
    let store = &world().store;
    let expected: Vec<String> = all_ids(store, EntityKind::Image)
        .iter()
        .map(ToString::to_string)
        .collect();
    let all = exhaust("/images?bbox=-180,-90,180,90&limit=37&fields=id,geometry");
    assert_eq!(all, expected);
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
    // The default limit is 2000 and there is then no paging.
    let body = get_json("/images?bbox=-180,-90,180,90");
    assert!(body.get("paging").is_none());
    assert_eq!(ids_of(&body).len(), expected.len());
}

#[test]
fn image_search_filters_match_the_store() {
    let store = &world().store;
    let image = first_image();
    let creator = store.creator(image.creator).unwrap().username.clone();
    let check = |query: &str, filter: ImageFilter| {
        let expected: Vec<String> = store
            .search_images(&filter, 2000, None)
            .items
            .iter()
            .map(|i| i.id.to_string())
            .collect();
        let got = ids_of(&get_json(&format!("/images?{query}&fields=id")));
        assert_eq!(got, expected, "{query}");
    };
    let lund = BoundingBox::new(13.0, 55.0, 14.0, 56.0).unwrap();
    check(
        &format!("creator_username={creator}"),
        ImageFilter {
            creator_username: Some(creator.clone()),
            ..Default::default()
        },
    );
    check(
        &format!("creator_username={creator}&is_pano=true"),
        ImageFilter {
            creator_username: Some(creator.clone()),
            is_pano: Some(true),
            ..Default::default()
        },
    );
    check(
        "bbox=13,55,14,56&is_pano=false",
        ImageFilter {
            bbox: Some(lund),
            is_pano: Some(false),
            ..Default::default()
        },
    );
    let make = image.make.clone().unwrap();
    check(
        &format!("bbox=13,55,14,56&make={}", make.replace(' ', "%20")),
        ImageFilter {
            bbox: Some(lund),
            make: Some(make),
            ..Default::default()
        },
    );
    check(
        &format!("sequence_ids={}", image.sequence),
        ImageFilter {
            sequence_ids: Some(vec![image.sequence.clone()]),
            ..Default::default()
        },
    );
    // The Python SDK's alias.
    check(
        &format!("sequence_id={}", image.sequence),
        ImageFilter {
            sequence_ids: Some(vec![image.sequence.clone()]),
            ..Default::default()
        },
    );
    let organization = first_image_with_organization();
    check(
        &format!("organization_id={organization}"),
        ImageFilter {
            organization_id: Some(streetlevel_model::OrganizationId(organization)),
            ..Default::default()
        },
    );
    let start = streetlevel_model::Timestamp(image.captured_at.millis() - 1000);
    check(
        &format!(
            "bbox=13,55,14,56&start_captured_at={}",
            start.to_iso8601().replace("+0000", "Z")
        ),
        ImageFilter {
            bbox: Some(lund),
            captured_at: streetlevel_store::TimeRange {
                start: Some(start),
                end: None,
            },
            ..Default::default()
        },
    );
}

#[test]
fn image_ids_and_s2_searches_for_the_viewer() {
    let store = &world().store;
    let ids = all_ids(store, EntityKind::Image);
    let asked = [ids[5], ids[1], ids[9]];
    let body = get_json(&format!(
        "/images?image_ids={},{},{}&fields=id,computed_geometry,sequence",
        asked[0], asked[1], asked[2]
    ));
    let got: BTreeSet<String> = ids_of(&body).into_iter().collect();
    assert_eq!(got, asked.iter().map(ToString::to_string).collect());

    let image = first_image();
    let cell = streetlevel_store::S2CellId::from_lat_lng(image.geometry.lat, image.geometry.lon)
        .parent(17);
    let expected: Vec<String> = store
        .images_in_s2_cell(cell)
        .iter()
        .map(|i| i.id.to_string())
        .collect();
    let body = get_json(&format!(
        "/images?s2={}&fields=id,computed_geometry,geometry,sequence",
        cell.raw()
    ));
    assert_eq!(ids_of(&body), expected);
    assert!(expected.contains(&image.id.to_string()));
}

#[test]
fn image_search_rules_give_400s_naming_the_parameter() {
    assert_error(
        &get("/images?fields=id"),
        400,
        100,
        "bbox, creator_username",
    );
    let too_many: Vec<String> = (1..=201).map(|id| id.to_string()).collect();
    assert_error(
        &get(&format!("/images?image_ids={}", too_many.join(","))),
        400,
        100,
        "(image_ids): give at most 200 ids",
    );
    let enough = &too_many[..200];
    assert_eq!(
        get(&format!("/images?image_ids={}", enough.join(","))).status,
        200
    );
    assert_error(
        &get("/images?is_pano=true"),
        400,
        100,
        "bbox, creator_username",
    );
    assert_error(
        &get("/images?organization_id=1&is_pano=true"),
        400,
        100,
        "(is_pano)",
    );
    assert_error(
        &get("/images?creator_username=x&make=Sony"),
        400,
        100,
        "(make)",
    );
    assert_error(
        &get("/images?creator_username=x&model=A"),
        400,
        100,
        "(model)",
    );
    for limit in ["0", "2001", "ten", "-1"] {
        assert_error(
            &get(&format!("/images?bbox=13,55,14,56&limit={limit}")),
            400,
            100,
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
        assert_error(&get(&format!("/images?bbox={bbox}")), 400, 100, "(bbox)");
    }
    assert_error(
        &get("/images?bbox=13,55,14,56&start_captured_at=yesterday"),
        400,
        100,
        "(start_captured_at)",
    );
    assert_error(
        &get("/images?bbox=13,55,14,56&after=zzz"),
        400,
        100,
        "(after)",
    );
    assert_error(&get("/images?image_ids=1,x"), 400, 100, "(image_ids)");
    assert_error(&get("/images?s2=notacell"), 400, 100, "(s2)");
    assert_error(
        &get("/images?bbox=13,55,14,56&is_pano=maybe"),
        400,
        100,
        "(is_pano)",
    );
}

#[test]
fn map_feature_and_detection_searches() {
    let store = &world().store;
    let all_features = exhaust("/map_features?bbox=-180,-90,180,90&limit=5&fields=id,object_value");
    assert_eq!(
        all_features,
        all_ids(store, EntityKind::MapFeature)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let body = get_json(
        "/map_features?bbox=-180,-90,180,90&object_values=regulatory--*&fields=id,object_value",
    );
    for item in body["data"].as_array().unwrap() {
        assert!(
            item["object_value"]
                .as_str()
                .unwrap()
                .starts_with("regulatory--")
        );
    }
    assert_error(&get("/map_features?fields=id"), 400, 100, "bbox");

    let all_detections = exhaust("/detections?bbox=-180,-90,180,90&limit=25&fields=id,value");
    assert_eq!(
        all_detections,
        all_ids(store, EntityKind::Detection)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let body = get_json("/detections?values=object--*,regulatory--*&fields=id,value");
    for item in body["data"].as_array().unwrap() {
        let value = item["value"].as_str().unwrap();
        assert!(
            value.starts_with("object--") || value.starts_with("regulatory--"),
            "{value}"
        );
    }
    assert_error(&get("/detections?fields=id"), 400, 100, "values");
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
        let extent = decoded_layer.extent as i32;
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
        404,
        100,
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
            400,
            100,
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
        assert_error(&world().server.get(&tampered), 403, 10, "signature");
    }
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
    let body = throttled.json();
    let error = &body["error"];
    assert_eq!(error["message"], "Application request limit reached");
    assert_eq!(error["type"], "OAuthException");
    assert_eq!(error["is_transient"], true);
    assert_eq!(error["code"], 4);
    assert_eq!(error["error_subcode"], 1_349_210);
    assert_eq!(error["error_user_title"], "Rate Limit Exceeded");
    assert!(error["error_user_msg"].is_string());
    assert!(error["mlytrace_id"].is_string());
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
    assert_eq!(server.get(&tile).status, 429);
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
