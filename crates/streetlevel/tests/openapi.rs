//! The `OpenAPI` description (`crates/server/openapi.json`, served at `GET /openapi.json`) against
//! the real binary: every documented operation is called on `127.0.0.1:0`, with successes and
//! errors, and again with its `PostgreSQL` stopped (503s), and each response's status, content
//! type, required headers and JSON body are checked against the description. Body schemas are
//! JSON Schema 2020-12 (`OpenAPI` 3.1's dialect), validated with the `jsonschema` crate, `$ref`s
//! resolved inside the document.
// Helpers outside `#[test]` functions fail the test by panicking, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};
use streetlevel_mvt::TileId;
use streetlevel_tests::{Fixture, Response, Server, create_app, create_user};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
/// The committed description, byte for byte what the server must serve.
const DOCUMENT: &str = include_str!("../../server/openapi.json");

/// The description and the operations the test exercised.
struct Description {
    document: Value,
    /// Validators by the JSON pointer of their schema in the document.
    validators: BTreeMap<String, jsonschema::Validator>,
    /// For each operation (`GET /{id}`), the statuses it answered with.
    seen: BTreeMap<String, BTreeSet<u16>>,
}

impl Description {
    fn new() -> Self {
        Description {
            document: serde_json::from_str(DOCUMENT).expect("openapi.json is JSON"),
            validators: BTreeMap::new(),
            seen: BTreeMap::new(),
        }
    }

    /// The path template of the document that `path` matches: concrete segments win over
    /// templated ones (`OpenAPI` 3.1, "Path Templating Matching").
    fn template_of(&self, path: &str) -> String {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let paths = self.document["paths"].as_object().expect("paths");
        paths
            .keys()
            .filter_map(|template| {
                let parts: Vec<&str> = template.trim_start_matches('/').split('/').collect();
                if parts.len() != segments.len() {
                    return None;
                }
                let mut literal = 0;
                for (part, segment) in parts.iter().zip(&segments) {
                    if part.starts_with('{') && part.ends_with('}') {
                        if segment.is_empty() {
                            return None;
                        }
                    } else if part == segment {
                        literal += 1;
                    } else {
                        return None;
                    }
                }
                Some((literal, template))
            })
            .max_by_key(|(literal, _)| *literal)
            .map_or_else(
                || panic!("no path of the description matches {path}"),
                |(_, template)| template.clone(),
            )
    }

    /// Follows a `$ref` inside the document (`#/components/...`), or returns the value.
    fn resolve<'a>(&'a self, value: &'a Value) -> (&'a Value, Option<String>) {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let pointer = reference.strip_prefix('#').expect("a local $ref");
                let target = self
                    .document
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("{reference} points nowhere"));
                (target, Some(pointer.to_owned()))
            }
            None => (value, None),
        }
    }

    /// Checks `response` to `method target` against the description; panics with the reason
    /// when they disagree.
    fn check(&mut self, method: &str, target: &str, response: &Response) {
        let path = target.split('?').next().unwrap_or(target);
        let template = self.template_of(path);
        let operation_key = format!("{method} {template}");
        let method_lower = method.to_ascii_lowercase();
        let escaped = template.replace('~', "~0").replace('/', "~1");
        let operation_pointer = format!("/paths/{escaped}/{method_lower}");
        let context = format!(
            "{operation_key} ({target}) answered {}: {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        );
        let operation = self
            .document
            .pointer(&operation_pointer)
            .unwrap_or_else(|| panic!("{operation_key} is not described; {context}"));
        let status = response.status.to_string();
        let class = format!("{}XX", response.status / 100);
        let (response_pointer, described) = [status.as_str(), class.as_str(), "default"]
            .into_iter()
            .find_map(|key| {
                operation["responses"]
                    .get(key)
                    .map(|described| (format!("{operation_pointer}/responses/{key}"), described))
            })
            .unwrap_or_else(|| panic!("the status is not described; {context}"));
        let (described, referenced) = self.resolve(described);
        let response_pointer = referenced.unwrap_or(response_pointer);
        let described = described.clone();
        if let Some(headers) = described.get("headers").and_then(Value::as_object) {
            for (name, header) in headers {
                let (header, _) = self.resolve(header);
                if header["required"] == true {
                    assert!(
                        response.header(name).is_some(),
                        "the required header {name} is missing; {context}"
                    );
                }
            }
        }
        let Some(content) = described.get("content").and_then(Value::as_object) else {
            assert!(
                response.body.is_empty(),
                "a body where none is described; {context}"
            );
            self.record(operation_key, response.status);
            return;
        };
        let media_type = response
            .header("content-type")
            .unwrap_or_else(|| panic!("no Content-Type; {context}"))
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        assert!(
            content.contains_key(&media_type),
            "the content type {media_type} is not described (described: {:?}); {context}",
            content.keys().collect::<Vec<_>>()
        );
        if media_type == "application/json" {
            let body: Value = serde_json::from_slice(&response.body)
                .unwrap_or_else(|error| panic!("not JSON ({error}); {context}"));
            let media_escaped = media_type.replace('~', "~0").replace('/', "~1");
            let schema_pointer = format!("{response_pointer}/content/{media_escaped}/schema");
            let errors = self.validate(&schema_pointer, &body);
            assert!(
                errors.is_empty(),
                "the body does not match {schema_pointer}:\n  {}\n{context}",
                errors.join("\n  ")
            );
        }
        self.record(operation_key, response.status);
    }

    fn record(&mut self, operation: String, status: u16) {
        self.seen.entry(operation).or_default().insert(status);
    }

    /// The validation errors of `instance` against the schema at `pointer`. The validator's
    /// root is the whole document with a `$ref` to the schema, so the schema's own `$ref`s
    /// (`#/components/schemas/...`) resolve against the document.
    fn validate(&mut self, pointer: &str, instance: &Value) -> Vec<String> {
        if !self.validators.contains_key(pointer) {
            assert!(
                self.document.pointer(pointer).is_some(),
                "no schema at {pointer}"
            );
            let mut root = self.document.clone();
            // A JSON pointer in a URI fragment: `{` and `}` (path templates) are percent-encoded.
            let fragment = pointer.replace('{', "%7B").replace('}', "%7D");
            root["$ref"] = Value::from(format!("#{fragment}"));
            let validator = jsonschema::draft202012::new(&root).unwrap_or_else(|error| {
                panic!("the schema at {pointer} does not compile: {error}")
            });
            self.validators.insert(pointer.to_owned(), validator);
        }
        self.validators[pointer]
            .iter_errors(instance)
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect()
    }

    /// Every described operation, as `METHOD /template`.
    fn operations(&self) -> BTreeSet<String> {
        let mut operations = BTreeSet::new();
        for (template, item) in self.document["paths"].as_object().expect("paths") {
            for method in ["get", "put", "post", "delete", "options", "head", "patch"] {
                if item.get(method).is_some() {
                    operations.insert(format!("{} {template}", method.to_ascii_uppercase()));
                }
            }
        }
        operations
    }

    /// Whether the operation (`METHOD /template`) describes the status `status`.
    fn describes(&self, operation: &str, status: &str) -> bool {
        let (method, template) = operation.split_once(' ').expect("METHOD /path");
        self.document["paths"][template][method.to_ascii_lowercase()]["responses"]
            .get(status)
            .is_some()
    }

    /// Whether the operation describes any 4xx answer.
    fn describes_client_errors(&self, operation: &str) -> bool {
        let (method, template) = operation.split_once(' ').expect("METHOD /path");
        self.document["paths"][template][method.to_ascii_lowercase()]["responses"]
            .as_object()
            .is_some_and(|responses| responses.keys().any(|status| status.starts_with('4')))
    }
}

/// The server, its data and the tokens the calls use, and the description to check against.
struct World {
    server: Server,
    fixture: Fixture,
    /// A client token of an app that may ask for `upload`.
    upload_app: String,
    /// The user's token with `read` and `upload` (from `POST /login`).
    user_token: String,
    /// A client token of an app with only the `blur` scope.
    blur_app: String,
    description: Description,
}

const USERNAME: &str = "olga";
/// The administrator of the server of [`World::start`].
const ADMINISTRATOR: &str = "ada";
const EMAIL: &str = "olga@example.com";
const PASSWORD: &str = "correct horse battery";

impl World {
    fn start() -> World {
        let binary = Path::new(BINARY);
        let fixture = Fixture::generate(binary, "openapi", 40);
        let upload_app = create_app(binary, &fixture.dir, "read,upload");
        let blur_app = create_app(binary, &fixture.dir, "blur");
        create_user(binary, &fixture.dir, USERNAME, EMAIL, PASSWORD);
        let server = Server::start(binary, &fixture.dir, &["--administrators", ADMINISTRATOR]);
        let mut world = World {
            server,
            fixture,
            upload_app,
            blur_app,
            user_token: String::new(),
            description: Description::new(),
        };
        let login = world.call(
            "POST",
            "/login",
            &[
                ("Authorization", &format!("OAuth {}", world.upload_app)),
                ("Content-Type", "application/json"),
            ],
            json!({"email": EMAIL, "password": PASSWORD})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(login.status, 200);
        login.json()["access_token"]
            .as_str()
            .unwrap()
            .clone_into(&mut world.user_token);
        world
    }

    /// Sends a request, checks the response against the description, and returns it.
    fn call(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let response = self.server.request(method, target, headers, body);
        self.description.check(method, target, &response);
        response
    }

    /// `GET target` with `token` in `Authorization: OAuth`.
    fn get_as(&mut self, token: &str, target: &str) -> Response {
        let auth = format!("OAuth {token}");
        self.call("GET", target, &[("Authorization", &auth)], b"")
    }

    /// `GET target` with the fixture's client token.
    fn get(&mut self, target: &str) -> Response {
        let token = self.fixture.client_token.clone();
        self.get_as(&token, target)
    }

    /// `GET target` without a token.
    fn get_anonymous(&mut self, target: &str) -> Response {
        self.call("GET", target, &[], b"")
    }

    /// A `GET` that must answer `status`.
    fn expect(&mut self, status: u16, target: &str) -> Response {
        let response = self.get(target);
        assert_eq!(
            response.status,
            status,
            "{target}: {}",
            String::from_utf8_lossy(&response.body)
        );
        response
    }

    /// The path and query of an absolute URL the server handed out.
    fn local(&self, url: &Value) -> String {
        let url = url.as_str().expect("a URL string");
        url.strip_prefix(&self.server.base())
            .unwrap_or_else(|| panic!("{url} is not on this server"))
            .to_owned()
    }

    fn post_as(
        &mut self,
        token: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let auth = format!("OAuth {token}");
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        self.call("POST", target, &all, body)
    }
}

const IMAGE_FIELDS: &str = "id,altitude,atomic_scale,camera_parameters,camera_type,captured_at,compass_angle,computed_altitude,computed_compass_angle,computed_geometry,computed_rotation,creator,detections.value,detections.geometry,detections.created_at,detections.image,exif_orientation,geometry,height,is_pano,make,merge_cc,mesh,model,organization,quality_score,sequence,sfm_cluster,thumb_256_url,thumb_1024_url,thumb_2048_url,thumb_original_url,width";
const MAP_FEATURE_FIELDS: &str = "id,aligned_direction,first_seen_at,geometry,images.geometry,last_seen_at,object_type,object_value";
const DETECTION_FIELDS: &str = "id,created_at,geometry,image,value";
const ORGANIZATION_FIELDS: &str = "id,description,name,slug";
const WORLD_BBOX: &str = "-180,-90,180,90";

#[test]
fn every_described_operation_answers_as_described() {
    let mut world = World::start();

    // Operations: no token, no quota.
    assert_eq!(world.get_anonymous("/health").status, 200);
    assert_eq!(world.get_anonymous("/ready").status, 200);
    let served = world.get_anonymous("/openapi.json");
    assert_eq!(served.status, 200);
    assert_eq!(
        served.body,
        DOCUMENT.as_bytes(),
        "the committed document is served"
    );

    let picks = searches(&mut world);
    let pyramid_tile = entities(&mut world, &picks);
    tiles_and_media(&mut world, &picks, pyramid_tile);
    token_exchange(&mut world, &picks);
    sign_in_and_me(&mut world);
    let cluster_id = upload_sessions(&mut world);
    takedowns(&mut world, &picks, &cluster_id);
    let blurred = blur_service(&mut world);
    let image_id = &picks.image_id;

    // A method no operation of the path has is a 405 naming the ones it has (RFC 9110).
    for (path, allow) in [
        ("/health", "GET, HEAD, OPTIONS"),
        ("/token", "POST, OPTIONS"),
        (
            &format!("/{image_id}") as &str,
            "GET, HEAD, DELETE, OPTIONS",
        ),
        (&format!("/{image_id}/hide") as &str, "POST, OPTIONS"),
        ("/uploads/1", "DELETE, OPTIONS"),
        ("/blur/", "POST, OPTIONS"),
    ] {
        let response = world.server.request("TRACE", path, &[], b"");
        assert_eq!(response.status, 405, "TRACE {path}");
        assert_eq!(response.header("allow"), Some(allow), "TRACE {path}");
    }

    // Every operation was exercised, with a success and, where any is described, a 4xx.
    let description = &world.description;
    for operation in description.operations() {
        if operation == "POST /blur/" && !blurred {
            // Without the models (outside CI only) no server here can blur.
            continue;
        }
        let statuses = description
            .seen
            .get(&operation)
            .unwrap_or_else(|| panic!("{operation} was never called"));
        assert!(
            statuses.iter().any(|status| (200..300).contains(status)),
            "{operation} never succeeded: {statuses:?}"
        );
        assert!(
            !description.describes_client_errors(&operation)
                || statuses.iter().any(|status| (400..500).contains(status)),
            "{operation} was never called with an error: {statuses:?}"
        );
    }
}

/// The operations that never need the database: they answer while it is down, and the
/// description gives them no 503 for it (`/ready` says so in its own shape).
const WITHOUT_THE_DATABASE: [&str; 6] = [
    "GET /health",
    "GET /openapi.json",
    "GET /media/thumb/{image_id}/{size}",
    "GET /media/tile/{image_id}/{z}/{x}/{y}",
    "GET /media/mesh/{media_id}",
    "GET /media/sfm/{media_id}",
];

/// Sends a request to `server`, checks the response against `description`, and returns it.
fn checked(
    description: &mut Description,
    server: &Server,
    request: (&str, &str),
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let (method, target) = request;
    let response = server.request(method, target, headers, body);
    description.check(method, target, &response);
    response
}

/// A server on a `PostgreSQL` of its own, before the test stops it.
struct BeforeTheOutage {
    postgres: streetlevel_tests::postgres::Postgres,
    fixture: Fixture,
    server: Server,
    /// `OAuth <token>` of the user, whose token every process has in its cache.
    user_auth: String,
    /// The path and query of a signed thumbnail.
    thumb: String,
}

/// Starts a server on a `PostgreSQL` of its own that keeps checked tokens for 10 minutes,
/// signs the user in, and has every process check the user's token.
fn before_the_outage(description: &mut Description) -> BeforeTheOutage {
    let binary = Path::new(BINARY);
    let fixture = Fixture::generate(binary, "openapi-outage", 10);
    let upload_app = create_app(binary, &fixture.dir, "read,upload");
    create_user(binary, &fixture.dir, USERNAME, EMAIL, PASSWORD);
    let postgres = streetlevel_tests::postgres::Postgres::start("openapi-outage");
    let server = Server::start_on_postgres(
        binary,
        &fixture.dir,
        &postgres.url(),
        &["--token-cache-seconds", "600"],
    );
    let sign_in = json!({"email": EMAIL, "password": PASSWORD}).to_string();
    let login = checked(
        description,
        &server,
        ("POST", "/login"),
        &[
            ("Authorization", &format!("OAuth {upload_app}")),
            ("Content-Type", "application/json"),
        ],
        sign_in.as_bytes(),
    );
    assert_eq!(login.status, 200, "{login:?}");
    let user_auth = format!("OAuth {}", login.json()["access_token"].as_str().unwrap());
    let images = checked(
        description,
        &server,
        (
            "GET",
            &format!("/images?bbox={WORLD_BBOX}&limit=1&fields=id,thumb_256_url"),
        ),
        &[("Authorization", &user_auth)],
        b"",
    );
    let thumb = images.json()["data"][0]["thumb_256_url"]
        .as_str()
        .unwrap()
        .to_owned();
    let thumb = thumb[thumb.find("/media/").unwrap()..].to_owned();
    // Every process checks the user's token once, so each has it in its cache.
    for process in server.processes() {
        let response = streetlevel_tests::request(
            *process,
            "GET",
            "/upload/outage.jpg",
            &[("Authorization", &user_auth)],
            b"",
        );
        assert_eq!(response.status, 200, "{response:?}");
    }
    BeforeTheOutage {
        postgres,
        fixture,
        server,
        user_auth,
        thumb,
    }
}

/// A `POST` of the outage test: the path, two headers and the body.
type Post<'a> = (&'a str, [(&'a str, &'a str); 2], &'a [u8]);

/// With the database down (a `PostgreSQL` the test stops), every operation that needs it
/// answers 503 with `Retry-After` in the shape the description gives it, and every
/// operation the description gives a 503 answers one; the probe, this document and signed
/// media answer as before.
#[test]
fn with_the_database_down_every_operation_that_needs_it_answers_503_as_described() {
    let mut description = Description::new();
    let mut world = before_the_outage(&mut description);
    world.postgres.stop();
    let BeforeTheOutage {
        fixture,
        server,
        user_auth,
        thumb,
        ..
    } = &world;
    let mut answered_503 = |method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]| {
        let response = checked(&mut description, server, (method, target), headers, body);
        assert_eq!(response.status, 503, "{method} {target}: {response:?}");
        // The probe says why in its own body; everything else asks the client to wait.
        if target != "/ready" {
            assert_eq!(response.header("retry-after"), Some("5"), "{target}");
        }
        response
    };
    // A token no process has checked yet: every check of it needs the database.
    let unseen = format!("OAuth {}", fixture.client_token);
    let with_unseen = [("Authorization", unseen.as_str())];
    for target in [
        "/maps/vtp/svc1_public/2/14/0/0",
        "/maps/vtp/svc1_public/2/tilejson.json",
        "/catalog",
        "/maps/style.json",
        "/?ids=1",
        "/1",
        "/1/detections",
        "/1/tiles",
        &format!("/images?bbox={WORLD_BBOX}"),
        &format!("/map_features?bbox={WORLD_BBOX}"),
        "/detections?values=*",
        "/image_ids?sequence_id=1",
        "/me",
        "/upload/outage.jpg",
        "/uploads",
    ] {
        answered_503("GET", target, &with_unseen, b"");
    }
    let json = ("Content-Type", "application/json");
    let secret = format!("OAuth {}", fixture.client_secret);
    let token_form = format!(
        "grant_type=authorization_code&client_id={}&code=outage",
        fixture.client_id
    );
    let sign_in = json!({"email": EMAIL, "password": PASSWORD}).to_string();
    let finish = json!({"file_handle": "outage", "file_type": "mly_bundle_manifest"}).to_string();
    let form = ("Content-Type", "multipart/form-data; boundary=b");
    let posts: [Post; 6] = [
        (
            "/token",
            [
                ("Authorization", &secret),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            token_form.as_bytes(),
        ),
        ("/login", [with_unseen[0], json], sign_in.as_bytes()),
        (
            "/upload/outage.jpg",
            [with_unseen[0], ("Offset", "0")],
            b"bytes",
        ),
        ("/finish_upload", [with_unseen[0], json], finish.as_bytes()),
        ("/logging", [with_unseen[0], json], b"{}"),
        ("/blur/", [with_unseen[0], form], b"--b--\r\n"),
    ];
    for (target, headers, body) in posts {
        answered_503("POST", target, &headers, body);
    }
    for (method, target) in [
        ("DELETE", "/1"),
        ("POST", "/1/hide"),
        ("POST", "/1/restore"),
        ("DELETE", "/uploads/1"),
        ("GET", "/privacy_requests"),
        ("POST", "/privacy_requests/1?state=done"),
    ] {
        answered_503(method, target, &with_unseen, b"");
    }
    // A token in the cache: the upload session's own use of the database answers, in the
    // uploader's shape.
    let upload = answered_503(
        "GET",
        "/upload/outage.jpg",
        &[("Authorization", user_auth)],
        b"",
    );
    assert_eq!(
        upload.json()["debug_info"]["type"],
        "ServiceUnavailableError"
    );
    answered_503("GET", "/ready", &[], b"");
    for target in ["/health", "/openapi.json", thumb.as_str()] {
        let response = checked(&mut description, server, ("GET", target), &[], b"");
        assert_eq!(response.status, 200, "{target}");
    }
    assert_503_exactly_where_described(&description);
}

/// Every operation that needs the database answered 503 in the outage test, and the others
/// describe no 503.
fn assert_503_exactly_where_described(description: &Description) {
    for operation in description.operations() {
        let statuses = description.seen.get(&operation);
        if WITHOUT_THE_DATABASE.contains(&operation.as_str()) {
            assert!(
                !description.describes(&operation, "503"),
                "{operation} needs no database, yet describes a 503"
            );
            continue;
        }
        assert!(
            statuses.is_some_and(|statuses| statuses.contains(&503)),
            "{operation} never answered 503 with the database down: {statuses:?}"
        );
    }
}

/// `body` as the only part of a `multipart/form-data` body, named `name`: the content type
/// and the body.
fn form_data(name: &str, body: &[u8]) -> (String, Vec<u8>) {
    let boundary = "streetlevel-openapi-test-boundary";
    let mut form = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"picture.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(body);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), form)
}

/// `POST /blur/`: on the world's server, whose blurring is off, a 503 that says so and a 403
/// for a token without the `blur` scope; on a server of its own with the blur models, a real
/// street photo blurred (multipart and plain answers) and a body that is not multipart
/// refused. `false` when the models are missing (outside CI), so that nothing could blur.
fn blur_service(world: &mut World) -> bool {
    let photo = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/opensfm-blur-pairs/before_berlin_images_01.jpg"),
    )
    .expect("the shared data set ../shared/data/opensfm-blur-pairs");
    let (form_type, form) = form_data("picture", &photo);
    let blur_auth = format!("OAuth {}", world.blur_app);
    let off = world.call(
        "POST",
        "/blur/",
        &[("Authorization", &blur_auth), ("Content-Type", &form_type)],
        &form,
    );
    assert_eq!(off.status, 503, "{off:?}");
    assert!(
        off.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot blur"),
        "{off:?}"
    );
    assert_eq!(off.header("retry-after"), None, "it lasts: no Retry-After");
    let read_only = format!("OAuth {}", world.fixture.client_token);
    let refused = world.call(
        "POST",
        "/blur/",
        &[("Authorization", &read_only), ("Content-Type", &form_type)],
        &form,
    );
    assert_eq!(refused.status, 403, "{refused:?}");

    let Some(models) = streetlevel_tests::test_models_dir() else {
        return false;
    };
    let binary = Path::new(BINARY);
    let data =
        std::env::temp_dir().join(format!("streetlevel-openapi-blur-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data).unwrap();
    let blur_app = create_app(binary, &data, "blur");
    let models = models.to_string_lossy();
    let blurring = Server::start(
        binary,
        &data,
        &["--blur", "true", "--blur-models-dir", &models],
    );
    let auth = format!("OAuth {blur_app}");
    let mut call = |headers: &[(&str, &str)], body: &[u8]| {
        let response = blurring.request("POST", "/blur/", headers, body);
        world.description.check("POST", "/blur/", &response);
        response
    };
    let multipart = call(
        &[
            ("Authorization", &auth),
            ("Content-Type", &form_type),
            ("Accept", "multipart/form-data"),
        ],
        &form,
    );
    assert_eq!(multipart.status, 200, "{multipart:?}");
    assert!(
        multipart
            .header("content-type")
            .unwrap()
            .starts_with("multipart/form-data; boundary=")
    );
    let plain = call(
        &[("Authorization", &auth), ("Content-Type", &form_type)],
        &form,
    );
    assert_eq!(plain.status, 200, "{plain:?}");
    assert_eq!(plain.header("content-type"), Some("image/jpeg"));
    assert!(plain.body.starts_with(&[0xFF, 0xD8]) && plain.body != photo);
    let metadata: Value = serde_json::from_str(plain.header("x-sgblur").unwrap()).unwrap();
    let not_multipart = call(
        &[("Authorization", &auth), ("Content-Type", "image/jpeg")],
        &photo,
    );
    assert_eq!(not_multipart.status, 400, "{not_multipart:?}");
    let errors = world
        .description
        .validate("/components/schemas/BlurMetadata", &metadata);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        !metadata["annotations"].as_array().unwrap().is_empty(),
        "the street's faces are found: {metadata}"
    );
    drop(blurring);
    let _ = std::fs::remove_dir_all(&data);
    true
}

/// What the searches found, for the calls that follow.
struct Picks {
    /// An image with every field, one with a mesh and an `SfM` cluster if any has.
    image: Value,
    image_id: String,
    /// Another image.
    second_id: String,
    sequence: String,
    feature_id: String,
    detection_id: String,
}

/// The three searches, with every field, paged, and their errors.
fn searches(world: &mut World) -> Picks {
    // Searches, with every field, paged.
    let images = world
        .expect(
            200,
            &format!("/images?bbox={WORLD_BBOX}&limit=20&fields={IMAGE_FIELDS}"),
        )
        .json();
    let next = world.local(&images["paging"]["next"]);
    world.expect(200, &next);
    let data = images["data"].as_array().unwrap();
    let image = data
        .iter()
        .find(|image| image.get("mesh").is_some() && image.get("sfm_cluster").is_some())
        .unwrap_or(&data[0])
        .clone();
    let image_id = image["id"].as_str().unwrap().to_owned();
    let sequence = image["sequence"].as_str().unwrap().to_owned();
    let token = world.fixture.client_token.clone();
    let with_query_token = world.get_anonymous(&format!(
        "/images?sequence_ids={sequence}&fields=id,captured_at&access_token={token}"
    ));
    assert_eq!(with_query_token.status, 200);
    world.expect(
        200,
        &format!("/images?image_ids={image_id}&fields={IMAGE_FIELDS}"),
    );
    world.expect(400, "/images?fields=id");
    world.expect(400, &format!("/images?bbox={WORLD_BBOX}&limit=0"));
    world.expect(400, "/images?bbox=14,55,13,56");
    world.expect(400, &format!("/images?bbox={WORLD_BBOX}&fields=nonsense"));
    assert_eq!(world.get_anonymous("/images?bbox=13,55,14,56").status, 401);
    assert_eq!(
        world
            .get_as("not-a-token", "/images?bbox=13,55,14,56")
            .status,
        401
    );

    let features = world
        .expect(
            200,
            &format!("/map_features?bbox={WORLD_BBOX}&limit=5&fields={MAP_FEATURE_FIELDS}"),
        )
        .json();
    let feature_id = features["data"][0]["id"].as_str().unwrap().to_owned();
    world.expect(400, "/map_features?fields=id");
    assert_eq!(
        world.get_anonymous("/map_features?bbox=13,55,14,56").status,
        401
    );

    let detections = world
        .expect(
            200,
            &format!("/detections?values=*&limit=5&fields={DETECTION_FIELDS}"),
        )
        .json();
    let detection_id = detections["data"][0]["id"].as_str().unwrap().to_owned();
    world.expect(400, "/detections?fields=id");
    world.expect(400, "/detections?values=*&start_captured_at=yesterday");
    assert_eq!(world.get_anonymous("/detections?values=*").status, 401);

    let second_id = data[1]["id"].as_str().unwrap().to_owned();
    Picks {
        image,
        image_id,
        second_id,
        sequence,
        feature_id,
        detection_id,
    }
}

/// Entities by ID, several by ID, detections of, image IDs and the pyramid; returns the
/// local URL of a pyramid block.
fn entities(world: &mut World, picks: &Picks) -> String {
    let Picks {
        image_id,
        second_id: second,
        sequence,
        feature_id,
        detection_id,
        ..
    } = picks;
    // Entities by ID, each kind with every field.
    world.expect(200, &format!("/{image_id}?fields={IMAGE_FIELDS}"));
    world.expect(
        200,
        &format!("/{feature_id}?fields={MAP_FEATURE_FIELDS},images"),
    );
    world.expect(200, &format!("/{detection_id}?fields={DETECTION_FIELDS}"));
    let organizations = world
        .expect(
            200,
            &format!("/images?bbox={WORLD_BBOX}&fields=organization"),
        )
        .json();
    let organization = organizations["data"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|image| image["organization"]["id"].as_str())
        .expect("some image of the fixture belongs to an organization")
        .to_owned();
    world.expect(
        200,
        &format!("/{organization}?fields={ORGANIZATION_FIELDS}"),
    );
    world.expect(200, &format!("/{image_id}"));
    world.expect(400, &format!("/{image_id}?fields=nonsense"));
    world.expect(400, "/12x?fields=id");
    world.expect(404, "/1?fields=id");
    assert_eq!(world.get_anonymous(&format!("/{image_id}")).status, 401);

    // Several by ID.
    world.expect(
        200,
        &format!("/?ids={image_id},{second}&fields={IMAGE_FIELDS}"),
    );
    world.expect(
        200,
        &format!("/?ids={detection_id}&fields={DETECTION_FIELDS}"),
    );
    world.expect(400, &format!("/?ids={image_id},{feature_id}"));
    world.expect(400, "/?ids=");
    world.expect(404, "/?ids=1");
    assert_eq!(
        world.get_anonymous(&format!("/?ids={image_id}")).status,
        401
    );

    // Detections of an image and of a map feature.
    world.expect(
        200,
        &format!("/{image_id}/detections?fields={DETECTION_FIELDS}"),
    );
    world.expect(200, &format!("/{feature_id}/detections?fields=id,value"));
    world.expect(404, &format!("/{detection_id}/detections"));
    world.expect(400, &format!("/{image_id}/detections?fields=nonsense"));
    assert_eq!(
        world
            .get_anonymous(&format!("/{image_id}/detections"))
            .status,
        401
    );

    // The sequence's image IDs.
    world.expect(200, &format!("/image_ids?sequence_id={sequence}"));
    world.expect(404, "/image_ids?sequence_id=no-such-sequence");
    world.expect(400, "/image_ids");
    assert_eq!(
        world
            .get_anonymous(&format!("/image_ids?sequence_id={sequence}"))
            .status,
        401
    );

    // The image pyramid.
    let pyramid = world.expect(200, &format!("/{image_id}/tiles?z=11")).json();
    let pyramid_tile = world.local(&pyramid["data"][0]["url"]);
    world.expect(200, &format!("/{image_id}/tiles?fields=url,z"));
    world.expect(400, &format!("/{image_id}/tiles?z=high"));
    world.expect(400, &format!("/{image_id}/tiles?fields=nonsense"));
    world.expect(404, &format!("/{feature_id}/tiles"));
    assert_eq!(
        world.get_anonymous(&format!("/{image_id}/tiles")).status,
        401
    );

    pyramid_tile
}

/// Vector tiles, and the signed media of an image.
fn tiles_and_media(world: &mut World, picks: &Picks, pyramid_tile: String) {
    let image = &picks.image;
    // Tiles: one with the image in it, an empty one, and errors.
    let coordinates = &image["geometry"]["coordinates"];
    let tile = TileId::containing(
        coordinates[0].as_f64().unwrap(),
        coordinates[1].as_f64().unwrap(),
        14,
    )
    .unwrap();
    let (x, y) = (tile.x(), tile.y());
    let full = world.expect(200, &format!("/maps/vtp/svc1_public/2/14/{x}/{y}"));
    assert!(!full.body.is_empty());
    world.expect(200, &format!("/maps/vtp/svc1_computed_public/2/14/{x}/{y}"));
    world.expect(
        200,
        &format!("/maps/vtp/svc_map_feature_point/2/14/{x}/{y}"),
    );
    world.expect(
        200,
        &format!("/maps/vtp/svc_map_feature_traffic_sign/2/14/{x}/{y}"),
    );
    let empty = world.expect(200, "/maps/vtp/svc1_public/2/14/0/0");
    assert!(empty.body.is_empty());
    world.expect(400, "/maps/vtp/svc1_public/2/14/x/0");
    world.expect(400, "/maps/vtp/svc1_public/2/25/0/0");
    world.expect(404, "/maps/vtp/nonsense/2/0/0/0");
    // The tile sets' descriptions.
    let catalog = world.expect(200, "/catalog").json();
    let tilejson = world.local(&catalog["tiles"]["svc1_public"]["tilejson"]);
    world.expect(200, &tilejson);
    world.expect(200, "/maps/style.json");
    world.expect(404, "/maps/vtp/nonsense/2/tilejson.json");
    for target in [
        "/catalog",
        "/maps/style.json",
        "/maps/vtp/svc1_public/2/tilejson.json",
    ] {
        assert_eq!(world.get_anonymous(target).status, 401, "{target}");
    }
    assert_eq!(
        world.get_anonymous("/maps/vtp/svc1_public/2/0/0/0").status,
        401
    );

    // Signed media, without a token.
    let mut media = vec![world.local(&image["thumb_256_url"]), pyramid_tile];
    for member in ["mesh", "sfm_cluster"] {
        if let Some(url) = image.get(member).map(|object| &object["url"]) {
            media.push(world.local(url));
        }
    }
    assert_eq!(
        media.len(),
        4,
        "the image has a mesh and an SfM cluster: {image}"
    );
    for target in &media {
        let response = world.get_anonymous(target);
        assert_eq!(response.status, 200, "{target}");
        let (path, _) = target.split_once('?').unwrap();
        let forged = format!("{path}?expires=4102444800&signature=00");
        assert_eq!(world.get_anonymous(&forged).status, 403, "{forged}");
    }
    assert_eq!(
        world
            .get_anonymous("/media/thumb/1/256?expires=1&signature=00")
            .status,
        403
    );
}

/// `POST /token` with a form body: a real code, a replay, no client authentication.
fn token_exchange(world: &mut World, picks: &Picks) {
    let image_id = &picks.image_id;
    // The token exchange: a real code from the web pages, then errors.
    let code = authorization_code(world);
    let form = format!(
        "grant_type=authorization_code&client_id={}&code={code}&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback",
        world.fixture.client_id
    );
    let secret = world.fixture.client_secret.clone();
    let exchanged = world.post_as(
        &secret,
        "/token",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form.as_bytes(),
    );
    assert_eq!(exchanged.status, 200);
    let user_token = exchanged.json()["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        world.get_as(&user_token, &format!("/{image_id}")).status,
        200
    );
    let replayed = world.post_as(
        &secret,
        "/token",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form.as_bytes(),
    );
    assert_eq!(replayed.status, 400);
    let anonymous = world.call(
        "POST",
        "/token",
        &[("Content-Type", "application/json")],
        br#"{"grant_type":"authorization_code","client_id":1,"code":"x"}"#,
    );
    assert_eq!(anonymous.status, 401);
}

/// The uploader's sign-in and `/me`.
fn sign_in_and_me(world: &mut World) {
    // The uploader's endpoints.
    let user = world.user_token.clone();
    let app = world.upload_app.clone();
    assert_eq!(world.get_as(&user, "/me").status, 200);
    assert_eq!(world.get_as(&app, "/me").status, 403);
    assert_eq!(world.get_anonymous("/me").status, 401);
    let wrong = world.post_as(
        &app,
        "/login",
        &[("Content-Type", "application/json")],
        json!({"email": EMAIL, "password": "wrong"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(wrong.status, 401);
    let client = world.fixture.client_token.clone();
    let read_only = world.post_as(
        &client,
        "/login",
        &[("Content-Type", "application/json")],
        json!({"email": EMAIL, "password": PASSWORD})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(read_only.status, 403);
    let malformed = world.post_as(
        &app,
        "/login",
        &[("Content-Type", "application/json")],
        b"{",
    );
    assert_eq!(malformed.status, 400);
}

/// Upload sessions, finishing them, the jobs, and the telemetry endpoint.
fn upload_sessions(world: &mut World) -> String {
    let user = world.user_token.clone();
    let app = world.upload_app.clone();
    assert_eq!(world.get_as(&user, "/upload/photo.jpg").json()["offset"], 0);
    assert_eq!(world.get_as(&user, "/upload/.hidden").status, 400);
    assert_eq!(world.get_as(&app, "/upload/photo.jpg").status, 403);
    let appended = world.post_as(
        &user,
        "/upload/photo.jpg",
        &[("Offset", "0")],
        b"not a jpeg",
    );
    assert_eq!(appended.status, 200);
    let photo_handle = appended.json()["h"].as_str().unwrap().to_owned();
    let mismatch = world.post_as(&user, "/upload/photo.jpg", &[("Offset", "3")], b"more");
    assert_eq!(mismatch.status, 412);
    assert_eq!(
        world.post_as(&app, "/upload/photo.jpg", &[], b"x").status,
        403
    );
    let manifest = json!({"image_handles": [photo_handle]}).to_string();
    let manifest_handle = world
        .post_as(&user, "/upload/manifest.json", &[], manifest.as_bytes())
        .json()["h"]
        .as_str()
        .unwrap()
        .to_owned();
    let finish = |handle: &str| {
        json!({"file_handle": handle, "file_type": "mly_bundle_manifest"}).to_string()
    };
    let finished = world.post_as(
        &user,
        "/finish_upload",
        &[("Content-Type", "application/json")],
        finish(&manifest_handle).as_bytes(),
    );
    assert_eq!(finished.status, 200);
    let unknown = world.post_as(
        &user,
        "/finish_upload",
        &[("Content-Type", "application/json")],
        finish("no-such-handle").as_bytes(),
    );
    assert_eq!(unknown.status, 400);
    let not_json = world.post_as(
        &user,
        "/finish_upload",
        &[("Content-Type", "application/json")],
        b"[",
    );
    assert_eq!(not_json.status, 400);
    let as_app = world.post_as(
        &app,
        "/finish_upload",
        &[("Content-Type", "application/json")],
        finish(&manifest_handle).as_bytes(),
    );
    assert_eq!(as_app.status, 403);
    let finished_again = world.post_as(&user, "/upload/manifest.json", &[("Offset", "0")], b"{}");
    assert!(
        matches!(finished_again.status, 409 | 412),
        "{finished_again:?}"
    );
    let jobs = world.get_as(&user, "/uploads").json();
    assert_eq!(jobs["data"].as_array().map(Vec::len), Some(1));
    let cluster_id = jobs["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(world.get_as(&app, "/uploads").status, 403);
    assert_eq!(world.get_anonymous("/uploads").status, 401);
    assert_eq!(
        world
            .post_as(
                &app,
                "/logging",
                &[("Content-Type", "application/json")],
                b"{}"
            )
            .status,
        200
    );
    assert_eq!(world.call("POST", "/logging", &[], b"{}").status, 401);
    cluster_id
}

/// Hiding, restoring and erasing an image, and erasing an upload, as the administrator; and
/// their refusals.
fn takedowns(world: &mut World, picks: &Picks, cluster_id: &str) {
    let binary = Path::new(BINARY);
    let created = streetlevel_tests::run(
        binary,
        &[
            "apps",
            "create",
            "--data",
            &world.fixture.dir.to_string_lossy(),
            "--name",
            "takedowns",
            "--callback",
            "http://127.0.0.1/callback",
            "--scopes",
            "read,write",
        ],
    );
    let field = |name: &str| {
        created
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .unwrap()
            .trim()
            .to_owned()
    };
    let code = streetlevel_tests::auth::approved_code(
        world.server.database(),
        &field("client_id"),
        ADMINISTRATOR,
    );
    let exchanged = world.call(
        "POST",
        "/token",
        &[
            (
                "Authorization",
                &format!("OAuth {}", field("client_secret")),
            ),
            ("Content-Type", "application/json"),
        ],
        json!({
            "grant_type": "authorization_code",
            "code": code,
            "client_id": field("client_id").parse::<u64>().unwrap(),
        })
        .to_string()
        .as_bytes(),
    );
    assert_eq!(exchanged.status, 200, "{exchanged:?}");
    let administrator = format!(
        "OAuth {}",
        exchanged.json()["access_token"].as_str().unwrap()
    );
    let as_administrator = [("Authorization", administrator.as_str())];
    let client = format!("OAuth {}", world.fixture.client_token);
    let as_client = [("Authorization", client.as_str())];
    let image = &picks.second_id;
    let mut expect = |status: u16, method: &str, target: &str, headers: &[(&str, &str)]| {
        let response = world.call(method, target, headers, b"");
        assert_eq!(response.status, status, "{method} {target}: {response:?}");
        response
    };
    for action in ["hide", "restore"] {
        let target = format!("/{image}/{action}");
        expect(403, "POST", &target, &as_client);
        expect(401, "POST", &target, &[]);
        let done = expect(200, "POST", &target, &as_administrator);
        assert_eq!(done.json()["images"], 1);
        expect(404, "POST", "/1/hide", &as_administrator);
    }
    let target = format!("/{image}");
    expect(403, "DELETE", &target, &as_client);
    expect(401, "DELETE", &target, &[]);
    let done = expect(200, "DELETE", &target, &as_administrator);
    assert_eq!(done.json()["images"], 1);
    expect(404, "DELETE", &target, &as_administrator);
    expect(404, "GET", &format!("/{image}?fields=id"), &as_client);
    let upload = format!("/uploads/{cluster_id}");
    expect(403, "DELETE", &upload, &as_client);
    expect(404, "DELETE", "/uploads/999999", &as_administrator);
    expect(200, "DELETE", &upload, &as_administrator);
    privacy_requests(world, picks, &as_administrator, &as_client);
}

/// Privacy requests: one sent with the report form (not an API operation), then listed and
/// resolved by the administrator.
fn privacy_requests(
    world: &mut World,
    picks: &Picks,
    as_administrator: &[(&str, &str)],
    as_client: &[(&str, &str)],
) {
    let form = world
        .server
        .get(&format!("/report?image_key={}", picks.image_id));
    assert_eq!(form.status, 200, "{form:?}");
    let sent = world.server.request(
        "POST",
        &format!("/report?image_key={}", picks.image_id),
        &[
            ("Cookie", &cookies_of(&form, "")),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        format!(
            "csrf={}&kind=blur&reason=a+face&box_left=0.1&box_top=0.1&box_width=0.2&box_height=0.2",
            hidden_field(&form, "csrf")
        )
        .as_bytes(),
    );
    assert_eq!(sent.status, 201, "{sent:?}");
    let mut expect = |status: u16, method: &str, target: &str, headers: &[(&str, &str)]| {
        let response = world.call(method, target, headers, b"");
        assert_eq!(response.status, status, "{method} {target}: {response:?}");
        response
    };
    expect(401, "GET", "/privacy_requests", &[]);
    expect(403, "GET", "/privacy_requests", as_client);
    expect(400, "GET", "/privacy_requests?state=lost", as_administrator);
    let unknown = expect(
        400,
        "GET",
        "/privacy_requests?fields=id,secret",
        as_administrator,
    );
    assert_eq!(unknown.json()["error"]["code"], 100, "{unknown:?}");
    let listed = expect(200, "GET", "/privacy_requests?state=open", as_administrator);
    assert_eq!(listed.json()["data"][0]["reason"], "a face");
    // `fields=` selects members, `id` always among them.
    let selected = expect(
        200,
        "GET",
        "/privacy_requests?state=open&fields=state,handling_seconds",
        as_administrator,
    );
    let members: Vec<String> = selected.json()["data"][0]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(members, ["handling_seconds", "id", "state"], "{selected:?}");
    expect(403, "POST", "/privacy_requests/1?state=refused", as_client);
    expect(
        404,
        "POST",
        "/privacy_requests/999?state=refused",
        as_administrator,
    );
    expect(
        400,
        "POST",
        "/privacy_requests/1?state=open",
        as_administrator,
    );
    let resolved = expect(
        200,
        "POST",
        "/privacy_requests/1?state=refused",
        as_administrator,
    );
    assert_eq!(resolved.json()["request"]["state"], "refused");
    expect(
        400,
        "POST",
        "/privacy_requests/1?state=done",
        as_administrator,
    );
}

/// A code from the web surface's OAuth flow, as a browser gets it: sign in with the form,
/// allow the fixture's app on the consent page, read the code from the redirect.
fn authorization_code(world: &World) -> String {
    let server = &world.server;
    let form = server.get("/login");
    let mut cookies = cookies_of(&form, "");
    let csrf = hidden_field(&form, "csrf");
    let body = format!(
        "csrf={csrf}&next=%2Fdashboard&username={USERNAME}&password={}",
        PASSWORD.replace(' ', "+")
    );
    let signed_in = server.request(
        "POST",
        "/login",
        &[
            ("Cookie", &cookies),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    );
    assert_eq!(
        signed_in.status,
        303,
        "{}",
        String::from_utf8_lossy(&signed_in.body)
    );
    cookies = cookies_of(&signed_in, &cookies);
    let query = format!(
        "client_id={}&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback&response_type=code&scope=read&state=s",
        world.fixture.client_id
    );
    let consent = server.request(
        "GET",
        &format!("/connect?{query}"),
        &[("Cookie", &cookies)],
        b"",
    );
    assert_eq!(
        consent.status,
        200,
        "{}",
        String::from_utf8_lossy(&consent.body)
    );
    let request = hidden_field(&consent, "request");
    let csrf = hidden_field(&consent, "csrf");
    let allow = format!(
        "request={}&csrf={csrf}&decision=allow",
        percent_encode(&request)
    );
    let allowed = server.request(
        "POST",
        "/connect",
        &[
            ("Cookie", &cookies),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        allow.as_bytes(),
    );
    assert_eq!(
        allowed.status,
        303,
        "{}",
        String::from_utf8_lossy(&allowed.body)
    );
    let location = allowed.header("location").expect("a redirect");
    location
        .strip_prefix("http://127.0.0.1/callback?code=")
        .and_then(|rest| rest.split('&').next())
        .unwrap_or_else(|| panic!("no code in {location}"))
        .to_owned()
}

/// `jar` with the response's `Set-Cookie` pairs added (as a `Cookie` header value).
fn cookies_of(response: &Response, jar: &str) -> String {
    let mut pairs: Vec<String> = jar
        .split("; ")
        .filter(|pair| !pair.is_empty())
        .map(str::to_owned)
        .collect();
    for (name, value) in &response.headers {
        if name == "set-cookie" {
            let pair = value.split(';').next().unwrap_or_default().to_owned();
            let cookie_name = pair.split('=').next().unwrap_or_default().to_owned();
            pairs.retain(|kept| !kept.starts_with(&format!("{cookie_name}=")));
            pairs.push(pair);
        }
    }
    pairs.join("; ")
}

/// The value of the `<input name="name" value="...">` of an HTML page.
fn hidden_field(response: &Response, name: &str) -> String {
    let html = String::from_utf8_lossy(&response.body);
    let marker = format!("name=\"{name}\"");
    let found = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {marker} in {html}"));
    let start = html[..found].rfind("<input").unwrap();
    let rest = &html[start..];
    let value = rest.find("value=\"").unwrap() + 7;
    let end = rest[value..].find('"').unwrap();
    rest[value..value + end].replace("&amp;", "&")
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// The validator is not vacuous: bodies that break the description are caught, with the
/// place they break it.
#[test]
fn a_body_that_breaks_the_description_is_caught() {
    let mut description = Description::new();
    let schema = "/components/schemas/ImagePage";
    let good = json!({"data": [{"id": "1", "captured_at": 1_619_366_040_484_i64,
        "geometry": {"type": "Point", "coordinates": [13.19, 55.70]}}]});
    assert_eq!(description.validate(schema, &good), Vec::<String>::new());
    for (bad, place) in [
        (json!({"data": [{"id": 1}]}), "/data/0/id"),
        (
            json!({"data": [{"id": "1", "captured_at": "2021-04-25"}]}),
            "/data/0/captured_at",
        ),
        (json!({"data": [{"id": "1", "nonsense": true}]}), "/data/0"),
        (json!({"data": [], "paging": null}), "/paging"),
        (
            json!({"data": [{"id": "1", "geometry": {"type": "Point", "coordinates": [200, 0]}}]}),
            "/data/0/geometry/coordinates/0",
        ),
    ] {
        let errors = description.validate(schema, &bad);
        assert!(
            errors.iter().any(|error| error.starts_with(place)),
            "{bad} breaks the schema at {place}: {errors:?}"
        );
    }
    let error = "/components/schemas/Error";
    assert!(!description
        .validate(error, &json!({"error": {"message": "m", "type": "OAuthException", "code": 100, "svctrace_id": "A1"}}))
        .iter()
        .any(|_| true));
    assert!(
        !description
            .validate(
                error,
                &json!({"error": {"message": "m", "type": "OAuthException", "code": "100"}})
            )
            .is_empty()
    );
    assert!(!description
        .validate(error, &json!({"error": {"message": "m", "type": "OAuthException", "code": 100, "trace": "A1"}}))
        .is_empty());
}
