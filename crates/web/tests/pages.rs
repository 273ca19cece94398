//! The pages' flows on `http::Request`s, without a network: sign-in, the authorization page
//! of spec 5.3, the dashboard, the embed page and the assets.

#![allow(clippy::unwrap_used, clippy::panic)] // Helpers of tests fail loudly.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use streetlevel_auth::{AuthStore, Config, FakeClock, Scopes, SeededRandom, TokenKind};
use streetlevel_model::{ImageId, Timestamp};
use streetlevel_web::{EmbedImage, EmbedImages, HomePage, Page, Registry, Web, WebConfig};

const PASSWORD: &str = "correct horse battery staple";
const IMAGE: u64 = 1_000_000_000_000_042;

struct FakeImages;

impl EmbedImages for FakeImages {
    fn embed_image(&self, id: ImageId) -> Option<EmbedImage> {
        (id.0 == IMAGE).then(|| EmbedImage {
            id,
            longitude: 13.4,
            latitude: 52.5,
            captured_at: Timestamp(1_709_683_199_000),
            thumb_2048_url: Some(format!("/media/thumb/{id}/2048?expires=1&signature=ab")),
            thumb_1024_url: Some(format!("/media/thumb/{id}/1024?expires=1&signature=cd")),
        })
    }

    fn extent(&self) -> Option<[f64; 4]> {
        Some([13.3, 52.4, 13.5, 52.6])
    }
}

struct Harness {
    web: Web,
    auth: Arc<AuthStore>,
    clock: FakeClock,
}

fn unique_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "streetlevel-web-{label}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `node_modules` with stand-ins for the two packages the embed page loads.
fn fake_node_modules() -> PathBuf {
    let dir = unique_dir("assets");
    for (path, text) in [
        ("mapillary-js/dist/mapillary.js", "window.mapillary = {};"),
        ("mapillary-js/dist/mapillary.css", ".mapillary-js {}"),
        ("maplibre-gl/dist/maplibre-gl.mjs", "export class Map {}"),
        (
            "maplibre-gl/dist/maplibre-gl-worker.mjs",
            "self.onmessage = null;",
        ),
        ("maplibre-gl/package.json", "{}"),
        ("mapillary_sprite_source/sprites/sprites.json", "{}"),
        ("mapillary_sprite_source/package.json", "{}"),
    ] {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    dir
}

fn harness_with(config: WebConfig) -> Harness {
    let clock = FakeClock::new(Timestamp(1_750_000_000_000));
    let auth = Arc::new(
        AuthStore::open_in_memory(Config::insecure_fast(), clock.clone(), SeededRandom::new(1))
            .unwrap(),
    );
    auth.create_user("alice", PASSWORD).unwrap();
    auth.create_user("bob", PASSWORD).unwrap();
    let web = Web::new(
        config,
        Arc::clone(&auth),
        &Registry::open_in_memory().unwrap(),
        Arc::new(FakeImages),
        SeededRandom::new(2),
    )
    .unwrap();
    Harness { web, auth, clock }
}

fn harness() -> Harness {
    harness_with(WebConfig {
        assets_dir: fake_node_modules(),
        ..WebConfig::default()
    })
}

/// Cookies a browser keeps, by name.
#[derive(Default, Clone)]
struct Jar(Vec<(String, String)>);

impl Jar {
    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn take(&mut self, response: &Response<Bytes>) {
        for cookie in set_cookies(response) {
            let pair = cookie.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.0.retain(|(kept, _)| kept != name);
            if !value.is_empty() && !cookie.contains("Max-Age=0") {
                self.0.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(kept, _)| kept == name)
            .map(|(_, value)| value.as_str())
    }
}

fn set_cookies(response: &Response<Bytes>) -> Vec<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .collect()
}

/// The page of a path. In the service the server's route table decides; these tests name
/// the pages by their paths for readability.
fn page_of(uri: &str) -> Page {
    let path = uri.split('?').next().unwrap_or_default();
    let path = if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    };
    match path {
        "/" => Page::Home,
        "/login" => Page::SignIn,
        "/logout" => Page::SignOut,
        "/connect" => Page::Connect,
        "/dashboard" => Page::Dashboard,
        "/embed" => Page::Embed,
        "/explore" => Page::Explore,
        _ if path.starts_with("/i/") => Page::ImageLink(path[3..].to_owned()),
        _ => Page::Asset(
            path.strip_prefix("/assets/")
                .unwrap_or_else(|| panic!("{uri} is not a page"))
                .to_owned(),
        ),
    }
}

/// What the web surface answers to `request`.
fn handle(web: &Web, request: Request<Bytes>) -> Response<Bytes> {
    let (parts, body) = request.into_parts();
    web.page(&page_of(&parts.uri.to_string()), &parts, &body)
}

fn get(web: &Web, uri: &str, jar: &Jar) -> Response<Bytes> {
    let request = Request::get(uri)
        .header(header::HOST, "127.0.0.1:8080")
        .header(header::COOKIE, jar.header())
        .body(Bytes::new())
        .unwrap();
    handle(web, request)
}

fn post(web: &Web, uri: &str, jar: &Jar, form: &[(&str, &str)]) -> Response<Bytes> {
    let body = form
        .iter()
        .map(|(name, value)| format!("{name}={}", encode(value)))
        .collect::<Vec<_>>()
        .join("&");
    let request = Request::post(uri)
        .header(header::HOST, "127.0.0.1:8080")
        .header(header::COOKIE, jar.header())
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Bytes::from(body))
        .unwrap();
    handle(web, request)
}

fn encode(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn body(response: &Response<Bytes>) -> String {
    String::from_utf8(response.body().to_vec()).unwrap()
}

fn location(response: &Response<Bytes>) -> &str {
    response
        .headers()
        .get(header::LOCATION)
        .expect("a Location header")
        .to_str()
        .unwrap()
}

/// The value of the first hidden or read-only input named `name` (or with `data-credential`).
fn field(html: &str, marker: &str) -> String {
    let found = html
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {html}"));
    // The attribute may come before or after the marker inside the same `<input>`.
    let start = html[..found].rfind("<input").unwrap();
    let rest = &html[start..];
    let value = rest.find("value=\"").unwrap() + 7;
    let end = rest[value..].find('"').unwrap();
    rest[value..value + end].replace("&amp;", "&")
}

fn sign_in(web: &Web, username: &str) -> Jar {
    let mut jar = Jar::default();
    let form = get(web, "/login", &jar);
    jar.take(&form);
    let csrf = field(&body(&form), r#"name="csrf""#);
    let response = post(
        web,
        "/login",
        &jar,
        &[
            ("csrf", &csrf),
            ("next", "/dashboard"),
            ("username", username),
            ("password", PASSWORD),
        ],
    );
    assert_eq!(
        response.status(),
        StatusCode::SEE_OTHER,
        "{}",
        body(&response)
    );
    jar.take(&response);
    assert!(jar.get("streetlevel_session").is_some());
    jar
}

fn create_app(h: &Harness, scopes: Scopes) -> streetlevel_auth::AppCredentials {
    h.auth
        .create_app("Field Mapper", "https://mapper.example/callback", scopes)
        .unwrap()
}

// Sign-in.

#[test]
fn login_page_has_labelled_fields_and_a_form_token_cookie() {
    let h = harness();
    let response = get(
        &h.web,
        "/login?next=%2Fconnect%3Fclient_id%3D1",
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::OK);
    let html = body(&response);
    for needle in [
        r#"<label for="username">"#,
        r#"<label for="password">"#,
        r#"name="username""#,
        r#"type="password""#,
        r#"name="next" value="/connect?client_id=1""#,
        "<main id=\"main\">",
    ] {
        assert!(html.contains(needle), "{needle} missing in {html}");
    }
    let cookies = set_cookies(&response);
    assert!(cookies[0].starts_with("streetlevel_login="));
    assert!(cookies[0].contains("HttpOnly") && cookies[0].contains("SameSite=Lax"));
    assert!(!cookies[0].contains("Secure"));
}

#[test]
fn signing_in_sets_an_http_only_lax_session_cookie_and_follows_next() {
    let h = harness();
    let mut jar = Jar::default();
    let form = get(&h.web, "/login", &jar);
    jar.take(&form);
    let csrf = field(&body(&form), r#"name="csrf""#);
    let next = "/connect?client_id=1&state=a%2Fb";
    let response = post(
        &h.web,
        "/login",
        &jar,
        &[
            ("csrf", &csrf),
            ("next", next),
            ("username", "alice"),
            ("password", PASSWORD),
        ],
    );
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), next);
    let session = set_cookies(&response)
        .into_iter()
        .find(|cookie| cookie.starts_with("streetlevel_session="))
        .unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/;"] {
        assert!(session.contains(attribute), "{session}");
    }
    assert!(!session.contains("Secure"));
    let token = session["streetlevel_session=".len()..]
        .split(';')
        .next()
        .unwrap();
    assert_eq!(h.auth.session_user(token).unwrap().username, "alice");
}

#[test]
fn session_cookie_is_secure_when_the_site_is_https() {
    let h = harness_with(WebConfig {
        web_url: Some(String::from("https://streetlevel.example")),
        ..WebConfig::default()
    });
    let mut jar = Jar::default();
    let form = get(&h.web, "/login", &jar);
    assert!(set_cookies(&form)[0].contains("; Secure"));
    jar.take(&form);
    let csrf = field(&body(&form), r#"name="csrf""#);
    let response = post(
        &h.web,
        "/login",
        &jar,
        &[
            ("csrf", &csrf),
            ("username", "alice"),
            ("password", PASSWORD),
        ],
    );
    assert!(
        set_cookies(&response)
            .iter()
            .all(|cookie| cookie.contains("; Secure"))
    );
}

#[test]
fn sign_in_never_sends_the_browser_to_another_site() {
    let h = harness();
    for next in [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
    ] {
        let mut jar = Jar::default();
        let form = get(&h.web, "/login", &jar);
        jar.take(&form);
        let csrf = field(&body(&form), r#"name="csrf""#);
        let response = post(
            &h.web,
            "/login",
            &jar,
            &[
                ("csrf", &csrf),
                ("next", next),
                ("username", "alice"),
                ("password", PASSWORD),
            ],
        );
        assert_eq!(location(&response), "/dashboard", "{next}");
    }
}

#[test]
fn a_wrong_password_shows_the_form_again_without_a_session() {
    let h = harness();
    let mut jar = Jar::default();
    let form = get(&h.web, "/login", &jar);
    jar.take(&form);
    let csrf = field(&body(&form), r#"name="csrf""#);
    let response = post(
        &h.web,
        "/login",
        &jar,
        &[
            ("csrf", &csrf),
            ("username", "alice"),
            ("password", "wrong"),
        ],
    );
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let html = body(&response);
    assert!(html.contains(r#"role="alert""#) && html.contains("Wrong username or password"));
    assert!(html.contains(r#"value="alice""#));
    assert!(
        set_cookies(&response)
            .iter()
            .all(|cookie| !cookie.starts_with("streetlevel_session="))
    );
}

#[test]
fn a_sign_in_without_the_form_token_is_refused() {
    let h = harness();
    let response = post(
        &h.web,
        "/login",
        &Jar::default(),
        &[
            ("csrf", "forged"),
            ("username", "alice"),
            ("password", PASSWORD),
        ],
    );
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(
        set_cookies(&response)
            .iter()
            .all(|cookie| !cookie.starts_with("streetlevel_session="))
    );
}

#[test]
fn signing_out_ends_the_session_only_with_its_csrf_token() {
    let h = harness();
    let jar = sign_in(&h.web, "alice");
    let session = jar.get("streetlevel_session").unwrap().to_owned();
    let forged = post(&h.web, "/logout", &jar, &[("csrf", "forged")]);
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(h.auth.session_user(&session).is_ok());
    let csrf = streetlevel_auth::csrf_token(&session);
    let response = post(&h.web, "/logout", &jar, &[("csrf", &csrf)]);
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/login");
    assert!(set_cookies(&response)[0].contains("Max-Age=0"));
    assert!(h.auth.session_user(&session).is_err());
}

// The authorization page (spec 5.3).

#[test]
fn connect_without_a_session_goes_to_sign_in_and_back() {
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let query = format!(
        "client_id={}&redirect_uri=https%3A%2F%2Fmapper.example%2Fcallback&response_type=code&scope=read&state=s1",
        app.client_id
    );
    let response = get(&h.web, &format!("/connect?{query}"), &Jar::default());
    assert_eq!(response.status(), StatusCode::FOUND);
    let expected_next = format!("/connect?{query}");
    assert_eq!(
        location(&response),
        format!("/login?next={}", encode_unreserved(&expected_next))
    );
    // The sign-in form carries the way back.
    let form = get(&h.web, location(&response), &Jar::default());
    assert_eq!(field(&body(&form), r#"name="next""#), expected_next);
}

fn encode_unreserved(value: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(value, SET).to_string()
}

#[test]
fn unknown_clients_and_foreign_redirect_uris_get_an_error_page_never_a_redirect() {
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let jar = sign_in(&h.web, "alice");
    for query in [
        String::from("client_id=4242&redirect_uri=https%3A%2F%2Fevil.example%2F&state=x"),
        format!(
            "client_id={}&redirect_uri=https%3A%2F%2Fevil.example%2Fcallback",
            app.client_id
        ),
        String::from("redirect_uri=https%3A%2F%2Fevil.example%2F"),
    ] {
        let response = get(&h.web, &format!("/connect?{query}"), &jar);
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
        assert!(
            response.headers().get(header::LOCATION).is_none(),
            "{query}"
        );
        assert!(body(&response).contains(r#"role="alert""#));
        // Answering such a request is refused the same way.
        let csrf = streetlevel_auth::csrf_token(jar.get("streetlevel_session").unwrap());
        let answer = post(
            &h.web,
            "/connect",
            &jar,
            &[("request", &query), ("csrf", &csrf), ("decision", "allow")],
        );
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{query}");
        assert!(answer.headers().get(header::LOCATION).is_none(), "{query}");
    }
}

#[test]
fn scopes_beyond_the_app_redirect_with_invalid_scope() {
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let response = get(
        &h.web,
        &format!("/connect?client_id={}&scope=write&state=s2", app.client_id),
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::FOUND);
    assert_eq!(
        location(&response),
        "https://mapper.example/callback?error=invalid_scope&state=s2"
    );
}

/// Shows the consent page; returns it and the form's hidden fields.
fn consent(h: &Harness, jar: &Jar, query: &str) -> (String, String, String) {
    let response = get(&h.web, &format!("/connect?{query}"), jar);
    assert_eq!(response.status(), StatusCode::OK, "{}", body(&response));
    assert_eq!(response.headers()[header::X_FRAME_OPTIONS], "DENY");
    let html = body(&response);
    let request = field(&html, r#"name="request""#);
    let csrf = field(&html, r#"name="csrf""#);
    (html, request, csrf)
}

#[test]
fn the_consent_page_names_the_app_and_scopes_and_allowing_redirects_with_a_code() {
    let h = harness();
    let app = create_app(&h, Scopes::ALL);
    let jar = sign_in(&h.web, "alice");
    let query = format!(
        "client_id={}&redirect_uri=https%3A%2F%2Fmapper.example%2Fcallback&response_type=code&scope=read%2Cwrite&state=xyz%20123",
        app.client_id
    );
    let (html, request, csrf) = consent(&h, &jar, &query);
    assert!(html.contains("Field Mapper"));
    assert!(html.contains("<strong>read</strong>") && html.contains("<strong>write</strong>"));
    assert!(!html.contains("<strong>upload</strong>"));
    assert!(html.contains(r#"name="decision" value="allow""#));
    assert!(html.contains(r#"name="decision" value="deny""#));
    let response = post(
        &h.web,
        "/connect",
        &jar,
        &[
            ("request", &request),
            ("csrf", &csrf),
            ("decision", "allow"),
        ],
    );
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = location(&response);
    let rest = location
        .strip_prefix("https://mapper.example/callback?code=")
        .unwrap_or_else(|| panic!("{location}"));
    let (code, state) = rest.split_once("&state=").unwrap();
    assert_eq!(state, "xyz%20123");
    // The code is real: the app exchanges it for a user token.
    let exchanged = h
        .auth
        .exchange(
            Some(&format!("OAuth {}", app.client_secret)),
            Some("application/json"),
            serde_json::json!({
                "grant_type": "authorization_code",
                "client_id": app.client_id.0,
                "code": code,
                "redirect_uri": "https://mapper.example/callback",
            })
            .to_string()
            .as_bytes(),
        )
        .unwrap();
    let principal = h.auth.check_token(&exchanged.access_token).unwrap();
    assert_eq!(principal.kind, TokenKind::User);
    assert_eq!(principal.scopes.to_string(), "read,write");
}

#[test]
fn the_consent_form_carries_the_pkce_challenge_through_to_the_code() {
    // RFC 7636 appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let jar = sign_in(&h.web, "alice");
    let (html, request, csrf) = consent(
        &h,
        &jar,
        &format!(
            "client_id={}&code_challenge={CHALLENGE}&code_challenge_method=S256",
            app.client_id
        ),
    );
    assert!(
        html.contains("This request is protected by PKCE (S256)"),
        "{html}"
    );
    let (plain_html, _, _) = consent(&h, &jar, &format!("client_id={}", app.client_id));
    assert!(plain_html.contains("This request is not protected by PKCE."));
    let response = post(
        &h.web,
        "/connect",
        &jar,
        &[
            ("request", &request),
            ("csrf", &csrf),
            ("decision", "allow"),
        ],
    );
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let code = location(&response)
        .strip_prefix("https://mapper.example/callback?code=")
        .unwrap_or_else(|| panic!("{}", location(&response)))
        .to_owned();
    let exchange = |verifier: Option<&str>| {
        let mut body = serde_json::json!({
            "grant_type": "authorization_code",
            "client_id": app.client_id.0,
            "code": code,
        });
        if let Some(verifier) = verifier {
            body["code_verifier"] = serde_json::json!(verifier);
        }
        h.auth.exchange(
            Some(&format!("OAuth {}", app.client_secret)),
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    };
    // The code is bound to the challenge: it needs the verifier.
    let refused = exchange(None).unwrap_err();
    assert!(
        refused.description.contains("code_verifier is required"),
        "{refused}"
    );
    let exchanged = exchange(Some(VERIFIER)).unwrap();
    assert!(h.auth.check_token(&exchanged.access_token).is_ok());
}

#[test]
fn the_consent_page_markup() {
    let h = harness();
    let app = create_app(&h, Scopes::ALL);
    let jar = sign_in(&h.web, "alice");
    let (html, _, _) = consent(
        &h,
        &jar,
        &format!("client_id={}&scope=read%2Cupload&state=snap", app.client_id),
    );
    insta::assert_snapshot!(html);
}

#[test]
fn denying_redirects_with_user_denied_and_the_state() {
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let jar = sign_in(&h.web, "alice");
    let (_, request, csrf) = consent(&h, &jar, &format!("client_id={}&state=s3", app.client_id));
    let response = post(
        &h.web,
        "/connect",
        &jar,
        &[("request", &request), ("csrf", &csrf), ("decision", "deny")],
    );
    assert_eq!(
        location(&response),
        "https://mapper.example/callback?error=user_denied&state=s3"
    );
}

#[test]
fn an_answer_after_the_session_expired_redirects_with_invalid_request() {
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let jar = sign_in(&h.web, "alice");
    let (_, request, csrf) = consent(&h, &jar, &format!("client_id={}&state=s4", app.client_id));
    h.clock.advance(Duration::from_secs(15 * 24 * 3600));
    let response = post(
        &h.web,
        "/connect",
        &jar,
        &[
            ("request", &request),
            ("csrf", &csrf),
            ("decision", "allow"),
        ],
    );
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&response),
        "https://mapper.example/callback?error=invalid_request&state=s4"
    );
}

#[test]
fn an_answer_without_the_csrf_token_redirects_with_invalid_request() {
    let h = harness();
    let app = create_app(&h, Scopes::READ);
    let jar = sign_in(&h.web, "alice");
    let (_, request, _) = consent(&h, &jar, &format!("client_id={}", app.client_id));
    let response = post(
        &h.web,
        "/connect",
        &jar,
        &[
            ("request", &request),
            ("csrf", "forged"),
            ("decision", "allow"),
        ],
    );
    assert_eq!(
        location(&response),
        "https://mapper.example/callback?error=invalid_request"
    );
}

#[test]
fn the_embed_app_cannot_be_authorized() {
    let h = harness();
    let embed_client = h.auth.check_token(h.web.embed_token()).unwrap().client_id;
    let jar = sign_in(&h.web, "alice");
    let response = get(&h.web, &format!("/connect?client_id={embed_client}"), &jar);
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.headers().get(header::LOCATION).is_none());
}

// The dashboard.

#[test]
fn the_dashboard_asks_to_sign_in_first() {
    let h = harness();
    let response = get(&h.web, "/dashboard", &Jar::default());
    assert_eq!(response.status(), StatusCode::FOUND);
    assert_eq!(location(&response), "/login?next=%2Fdashboard");
}

fn dashboard_csrf(h: &Harness, jar: &Jar) -> String {
    let page = get(&h.web, "/dashboard", jar);
    assert_eq!(page.status(), StatusCode::OK);
    field(&body(&page), r#"name="csrf""#)
}

fn create_on_dashboard(h: &Harness, jar: &Jar) -> (String, String, String) {
    let csrf = dashboard_csrf(h, jar);
    let response = post(
        &h.web,
        "/dashboard",
        jar,
        &[
            ("csrf", &csrf),
            ("action", "create"),
            ("name", "Trail Viewer"),
            ("callback_url", "https://trail.example/cb"),
            ("scope", "read"),
            ("scope", "upload"),
        ],
    );
    assert_eq!(
        response.status(),
        StatusCode::CREATED,
        "{}",
        body(&response)
    );
    let html = body(&response);
    (
        field(&html, r#"data-credential="client_id""#),
        field(&html, r#"data-credential="client_access_token""#),
        field(&html, r#"data-credential="client_secret""#),
    )
}

#[test]
fn creating_an_app_shows_its_credentials_once_and_lists_it_for_its_owner_only() {
    let h = harness();
    let alice = sign_in(&h.web, "alice");
    let (client_id, client_token, client_secret) = create_on_dashboard(&h, &alice);
    let principal = h.auth.check_token(&client_token).unwrap();
    assert_eq!(principal.client_id.to_string(), client_id);
    assert_eq!(principal.kind, TokenKind::Client);
    assert!(client_secret.starts_with("sls_"));
    let app = h.auth.app(principal.client_id).unwrap().unwrap();
    assert_eq!(app.scopes.to_string(), "read,upload");
    let listed = body(&get(&h.web, "/dashboard", &alice));
    assert!(listed.contains("Trail Viewer") && listed.contains(&client_id));
    assert!(!listed.contains(&client_token) && !listed.contains(&client_secret));
    let bob = sign_in(&h.web, "bob");
    let other = body(&get(&h.web, "/dashboard", &bob));
    assert!(!other.contains("Trail Viewer"));
}

#[test]
fn a_rejected_app_keeps_the_form_values_and_says_why() {
    let h = harness();
    let jar = sign_in(&h.web, "alice");
    let csrf = dashboard_csrf(&h, &jar);
    let response = post(
        &h.web,
        "/dashboard",
        &jar,
        &[
            ("csrf", &csrf),
            ("action", "create"),
            ("name", "Broken"),
            ("callback_url", "not a url"),
            ("scope", "read"),
        ],
    );
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let html = body(&response);
    assert!(html.contains("invalid callback url"), "{html}");
    assert!(html.contains(r#"value="Broken""#));
}

#[test]
fn rotating_replaces_the_secret_and_the_token_of_ones_own_app_only() {
    let h = harness();
    let alice = sign_in(&h.web, "alice");
    let (client_id, client_token, _) = create_on_dashboard(&h, &alice);
    let csrf = dashboard_csrf(&h, &alice);
    let response = post(
        &h.web,
        "/dashboard",
        &alice,
        &[
            ("csrf", &csrf),
            ("action", "rotate_token"),
            ("client_id", &client_id),
        ],
    );
    assert_eq!(response.status(), StatusCode::OK);
    let new_token = field(&body(&response), r#"data-credential="client_access_token""#);
    assert!(h.auth.check_token(&client_token).is_err());
    assert!(h.auth.check_token(&new_token).is_ok());
    let response = post(
        &h.web,
        "/dashboard",
        &alice,
        &[
            ("csrf", &csrf),
            ("action", "rotate_secret"),
            ("client_id", &client_id),
        ],
    );
    assert_eq!(response.status(), StatusCode::OK);
    assert!(field(&body(&response), r#"data-credential="client_secret""#).starts_with("sls_"));
    // Bob cannot rotate Alice's app.
    let bob = sign_in(&h.web, "bob");
    let bob_csrf = dashboard_csrf(&h, &bob);
    let response = post(
        &h.web,
        "/dashboard",
        &bob,
        &[
            ("csrf", &bob_csrf),
            ("action", "rotate_token"),
            ("client_id", &client_id),
        ],
    );
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(h.auth.check_token(&new_token).is_ok());
}

#[test]
fn dashboard_actions_need_the_csrf_token() {
    let h = harness();
    let jar = sign_in(&h.web, "alice");
    let response = post(
        &h.web,
        "/dashboard",
        &jar,
        &[
            ("csrf", "forged"),
            ("action", "create"),
            ("name", "X"),
            ("callback_url", "https://x.example/cb"),
            ("scope", "read"),
        ],
    );
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(h.auth.apps().unwrap().iter().all(|app| app.name != "X"));
}

// The embed page.

#[test]
fn the_embed_page_configures_viewer_and_map_with_a_read_only_token() {
    let h = harness();
    let response = get(
        &h.web,
        &format!("/embed?image_key={IMAGE}&style=split"),
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get(header::X_FRAME_OPTIONS).is_none());
    let policy = response.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(policy.contains("frame-ancestors *"));
    let html = body(&response);
    let start = html.find(r#"id="embed-config">"#).unwrap() + r#"id="embed-config">"#.len();
    let end = start + html[start..].find("</script>").unwrap();
    let config: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    assert_eq!(config["imageId"], IMAGE.to_string());
    assert_eq!(config["style"], "split");
    assert_eq!(config["baseUrl"], "http://127.0.0.1:8080");
    assert_eq!(config["tilesUrl"], "http://127.0.0.1:8080");
    assert_eq!(config["tileset"], "svc1_public");
    let token = config["accessToken"].as_str().unwrap();
    let principal = h.auth.check_token(token).unwrap();
    assert_eq!(principal.kind, TokenKind::Embed);
    assert_eq!(principal.scopes, Scopes::READ);
    assert!(html.contains(r#"id="viewer""#) && html.contains(r#"id="map""#));
    assert!(html.contains("/assets/mapillary-js/dist/mapillary.js"));
}

#[test]
fn each_style_shows_its_panes() {
    let h = harness();
    let page = |style: &str| {
        body(&get(
            &h.web,
            &format!("/embed?image_key={IMAGE}&style={style}"),
            &Jar::default(),
        ))
    };
    let photo = page("photo");
    assert!(photo.contains(r#"id="viewer""#) && !photo.contains(r#"id="map""#));
    let default = body(&get(
        &h.web,
        &format!("/embed?image_key={IMAGE}"),
        &Jar::default(),
    ));
    assert!(default.contains("style-photo"));
    let classic = page("classic");
    assert!(classic.contains(r#"id="map""#) && classic.contains(r#"id="swap""#));
    assert!(!page("split").contains(r#"id="swap""#));
}

#[test]
fn bad_embed_requests_get_a_visible_error_page() {
    let h = harness();
    for (uri, status, words) in [
        (
            format!("/embed?image_key={IMAGE}&style=fancy"),
            StatusCode::BAD_REQUEST,
            "Unknown style",
        ),
        (
            String::from("/embed?style=photo"),
            StatusCode::BAD_REQUEST,
            "image_key parameter is missing",
        ),
        (
            String::from("/embed?image_key=77"),
            StatusCode::NOT_FOUND,
            "no image with the ID 77",
        ),
        (
            String::from("/embed?image_key=%3Cscript%3E"),
            StatusCode::NOT_FOUND,
            "no image with the ID &lt;script&gt;",
        ),
    ] {
        let response = get(&h.web, &uri, &Jar::default());
        assert_eq!(response.status(), status, "{uri}");
        let html = body(&response);
        assert!(html.contains(words), "{uri}: {html}");
        assert!(html.contains(r#"role="alert""#));
        assert!(response.headers().get(header::X_FRAME_OPTIONS).is_none());
    }
}

#[test]
fn without_the_npm_packages_the_embed_page_shows_the_thumbnail_and_says_why() {
    let h = harness_with(WebConfig {
        assets_dir: unique_dir("empty"),
        ..WebConfig::default()
    });
    let response = get(
        &h.web,
        &format!("/embed?image_key={IMAGE}&style=classic"),
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::OK);
    let html = body(&response);
    assert!(html.contains(&format!(
        r#"<img class="still" src="/media/thumb/{IMAGE}/2048?expires=1&amp;signature=ab""#
    )));
    assert!(
        html.contains("mapillary-js and maplibre-gl are missing"),
        "{html}"
    );
    assert!(!html.contains("embed.mjs"));
}

// Assets.

#[test]
fn npm_files_are_served_with_their_content_types() {
    let h = harness();
    for (path, content_type) in [
        (
            "/assets/maplibre-gl/dist/maplibre-gl.mjs",
            "text/javascript; charset=utf-8",
        ),
        (
            "/assets/maplibre-gl/dist/maplibre-gl-worker.mjs",
            "text/javascript; charset=utf-8",
        ),
        (
            "/assets/mapillary-js/dist/mapillary.js",
            "text/javascript; charset=utf-8",
        ),
        (
            "/assets/mapillary-js/dist/mapillary.css",
            "text/css; charset=utf-8",
        ),
        (
            "/assets/streetlevel/embed.mjs",
            "text/javascript; charset=utf-8",
        ),
        ("/assets/streetlevel/site.css", "text/css; charset=utf-8"),
        (
            "/assets/mapillary_sprite_source/sprites/sprites.json",
            "application/json",
        ),
    ] {
        let response = get(&h.web, path, &Jar::default());
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            content_type,
            "{path}"
        );
        assert!(!response.body().is_empty());
    }
    for path in [
        "/assets/maplibre-gl/package.json",
        "/assets/mapillary_sprite_source/package.json",
        "/assets/maplibre-gl/dist/../package.json",
        "/assets/maplibre-gl/dist/missing.mjs",
        "/assets/streetlevel/missing.css",
    ] {
        assert_eq!(
            get(&h.web, path, &Jar::default()).status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[test]
fn a_page_asked_with_a_method_it_does_not_answer_says_which_it_does() {
    let h = harness();
    for (method, path, allow) in [
        (Method::DELETE, "/login", "GET, HEAD, POST"),
        (Method::GET, "/logout", "POST"),
        (Method::POST, "/", "GET, HEAD"),
        (Method::PUT, "/embed", "GET, HEAD"),
        (Method::POST, "/assets/x.js", "GET, HEAD"),
    ] {
        let request = Request::builder()
            .method(method.clone())
            .uri(path)
            .body(Bytes::new())
            .unwrap();
        let response = handle(&h.web, request);
        assert_eq!(
            response.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(response.headers()[header::ALLOW], allow, "{method} {path}");
    }
}

#[test]
fn a_broken_archive_is_refused_at_finish_and_the_dashboard_lists_nothing() {
    let data = unique_dir("uploads");
    let uploads = Arc::new(
        streetlevel_import::Uploads::open(&data, streetlevel_import::UploadLimits::default())
            .unwrap()
            .with_blurring(streetlevel_import::Blurring::Off),
    );
    let h = harness();
    let Harness { web, auth, clock } = h;
    let h = Harness {
        web: web.with_uploads(Arc::clone(&uploads)),
        auth,
        clock,
    };
    let alice = sign_in(&h.web, "alice");
    let empty = body(&get(&h.web, "/dashboard", &alice));
    assert!(empty.contains("No uploads yet"), "{empty}");

    // alice (user 1) hands over an archive that is not one: the finish call refuses it with
    // its reason and queues nothing, so the dashboard still lists no upload.
    let mut appender = uploads
        .append(
            1,
            "mly_tools_broken.zip",
            0,
            streetlevel_import::UploaderGeneration::Current,
        )
        .unwrap();
    appender.write(b"not a zip archive").unwrap();
    let handle = appender.finish().unwrap();
    let refused = uploads
        .finish(1, "alice", &handle, "zip", None)
        .unwrap_err();
    assert!(
        refused.to_string().contains("not a zip archive"),
        "{refused}"
    );
    let after = body(&get(&h.web, "/dashboard", &alice));
    assert!(after.contains("No uploads yet"), "{after}");

    // Nobody else sees it.
    let bob = sign_in(&h.web, "bob");
    let other = body(&get(&h.web, "/dashboard", &bob));
    assert!(!other.contains("data-upload"), "{other}");
}

#[test]
fn sign_in_attempts_are_throttled_with_retry_after() {
    use streetlevel_ratelimit::{HashingGate, SignInGuard, SignInLimits, SignInThrottle};
    let one = std::num::NonZeroU32::new(1).unwrap();
    let two = std::num::NonZeroU32::new(2).unwrap();
    let Harness { web, auth, clock } = harness();
    let guard = SignInGuard {
        throttle: SignInThrottle::new(
            SignInLimits {
                per_account: (two, Duration::from_secs(60)),
                per_address: (one, Duration::from_secs(60)),
                per_account_and_address: (one, Duration::from_secs(60)),
            },
            Arc::new(clock.clone()),
        ),
        hashing: HashingGate::new(1, 1, Duration::from_secs(1)),
    };
    let h = Harness {
        web: web.with_sign_in_guard(Arc::new(guard)),
        auth,
        clock,
    };
    let attempt = |password: &str| {
        let mut jar = Jar::default();
        let form = get(&h.web, "/login", &jar);
        jar.take(&form);
        let csrf = field(&body(&form), r#"name="csrf""#);
        post(
            &h.web,
            "/login",
            &jar,
            &[
                ("csrf", &csrf),
                ("username", "alice"),
                ("password", password),
            ],
        )
    };
    assert_eq!(attempt("wrong").status(), StatusCode::UNAUTHORIZED);
    assert_eq!(attempt("wrong").status(), StatusCode::UNAUTHORIZED);
    let throttled = attempt(PASSWORD);
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = throttled.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=61).contains(&wait), "{wait}");
    assert!(body(&throttled).contains("Too many sign-in attempts"));
    // Another account is not affected.
    assert!(sign_in(&h.web, "bob").get("streetlevel_session").is_some());
}

// ---- the landing page ----------------------------------------------------------------------------

#[test]
fn the_landing_page_says_what_the_server_is_and_where_to_go() {
    let h = harness_with(WebConfig {
        base_url: Some(String::from("https://api.streetlevel.example")),
        tiles_url: Some(String::from("https://tiles.streetlevel.example")),
        short_name: String::from("mly"),
        home_page: HomePage::Links,
        ..WebConfig::default()
    });
    let response = get(&h.web, "/", &Jar::default());
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let html = body(&response);
    for expected in [
        "street-level imagery",
        r#"<a href="/dashboard">"#,
        "/embed?image_key=",
        "https://api.streetlevel.example",
        "https://tiles.streetlevel.example/maps/vtp/mly1_public/",
        "docs/API.md",
    ] {
        assert!(html.contains(expected), "{expected} missing from {html}");
    }

    // Without configured URLs the page names the host the browser asked.
    let links = harness_with(WebConfig {
        home_page: HomePage::Links,
        ..WebConfig::default()
    });
    let html = body(&get(&links.web, "/", &Jar::default()));
    assert!(
        html.contains("<code>http://127.0.0.1:8080</code>"),
        "{html}"
    );
}

// ---- the explorer --------------------------------------------------------------------------------

/// The JSON configuration an explorer page hands its modules.
fn explorer_config(html: &str) -> serde_json::Value {
    let start = html
        .find(r#"<script type="application/json" id="explorer-config">"#)
        .unwrap();
    let text = &html[start..];
    let text = &text[text.find('>').unwrap() + 1..text.find("</script>").unwrap()];
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_explorer_is_the_home_page_and_inlines_the_image_it_opens_on() {
    let h = harness();
    let home = get(&h.web, "/", &Jar::default());
    assert_eq!(home.status(), StatusCode::OK);
    let html = body(&home);
    assert!(
        html.contains(r#"<main id="explorer" class="layout">"#),
        "{html}"
    );
    let config = explorer_config(&html);
    assert_eq!(config["image"], serde_json::Value::Null);
    assert_eq!(
        config["extent"],
        serde_json::json!([13.3, 52.4, 13.5, 52.6])
    );
    assert_eq!(config["accessToken"], h.web.embed_token());
    assert!(html.contains(r#"id="hint""#), "{html}");

    let response = get(
        &h.web,
        &format!("/explore?image={IMAGE}&map=3/1/2"),
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::OK);
    let policy = response.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(
        policy.contains("connect-src 'self' http://127.0.0.1:8080 data: blob:"),
        "{policy}"
    );
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let html = body(&response);
    let config = explorer_config(&html);
    assert_eq!(config["image"]["id"], IMAGE.to_string());
    assert_eq!(config["image"]["lngLat"], serde_json::json!([13.4, 52.5]));
    let thumb = format!("/media/thumb/{IMAGE}/2048?expires=1&amp;signature=ab");
    assert!(
        html.contains(&format!(
            r#"<link rel="preload" as="image" href="{thumb}">"#
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            r#"<img id="placeholder" class="placeholder" src="{thumb}""#
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!("/report?image_key={IMAGE}")),
        "{html}"
    );
    for module in [
        "main.mjs",
        "map.mjs",
        "viewer.mjs",
        "state.mjs",
        "filters.mjs",
        "player.mjs",
    ] {
        let asset = get(
            &h.web,
            &format!("/assets/streetlevel/explorer/{module}"),
            &Jar::default(),
        );
        assert_eq!(asset.status(), StatusCode::OK, "{module}");
        assert_eq!(
            asset.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
    }

    // An image that is not there: 404, the explorer all the same, and a notice.
    let missing = get(&h.web, "/explore?image=7", &Jar::default());
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let html = body(&missing);
    assert!(html.contains("There is no image with the ID 7."), "{html}");
    assert_eq!(explorer_config(&html)["image"], serde_json::Value::Null);
}

#[test]
fn the_explorer_has_other_dates_and_a_report_dialog_and_knows_who_may_manage() {
    let (h, _store, _ids) = takedown_harness();
    let page = |jar: &Jar| body(&get(&h.web, &format!("/explore?image={IMAGE}"), jar));
    let html = page(&Jar::default());
    for markup in [
        r#"<button id="dates-open" type="button" aria-haspopup="dialog" hidden>Other dates here</button>"#,
        r#"<dialog id="dates" class="dates" aria-labelledby="dates-title">"#,
        r#"<input id="curtain" type="range" min="0" max="100" step="1" value="50">"#,
        r#"<dialog id="report-dialog" class="report" aria-labelledby="report-title">"#,
        r#"<p id="manage" class="manage" hidden>"#,
    ] {
        assert!(html.contains(markup), "{markup} in {html}");
    }
    // Nobody signed in; a user; an administrator (the modules show the links to the image's
    // creator and to administrators; the dashboard checks again).
    assert_eq!(explorer_config(&html)["signedIn"], serde_json::Value::Null);
    let alice = sign_in(&h.web, "alice");
    assert_eq!(
        explorer_config(&page(&alice))["signedIn"],
        serde_json::json!({"username": "alice", "administrator": false})
    );
    let carol = sign_in(&h.web, "carol");
    assert_eq!(
        explorer_config(&page(&carol))["signedIn"],
        serde_json::json!({"username": "carol", "administrator": true})
    );
    for module in ["dates.mjs", "report.mjs"] {
        let asset = get(
            &h.web,
            &format!("/assets/streetlevel/explorer/{module}"),
            &Jar::default(),
        );
        assert_eq!(asset.status(), StatusCode::OK, "{module}");
        assert!(html.contains(&format!(
            r#"<link rel="modulepreload" href="/assets/streetlevel/explorer/{module}">"#
        )));
    }
}

/// The `content` of the `<meta>` whose `property` or `name` is `key`, unescaped.
fn meta(html: &str, key: &str) -> Option<String> {
    ["property", "name"].iter().find_map(|attribute| {
        let marker = format!(r#"<meta {attribute}="{key}" content=""#);
        let rest = &html[html.find(&marker)? + marker.len()..];
        Some(unescape(&rest[..rest.find('"')?]).replace("&amp;", "&"))
    })
}

#[test]
fn an_image_link_is_the_explorer_on_it_with_a_preview_card() {
    let h = harness();
    let response = get(&h.web, &format!("/i/{IMAGE}"), &Jar::default());
    assert_eq!(response.status(), StatusCode::OK);
    let html = body(&response);
    assert_eq!(explorer_config(&html)["image"]["id"], IMAGE.to_string());
    assert!(html.contains(r#"<img id="placeholder""#), "{html}");
    // Title: the date (UTC) and the place.
    let title = "Street-level photo, 5 March 2024, 52.50000° N, 13.40000° E";
    assert!(
        html.contains(&format!("<title>{title} · streetlevel</title>")),
        "{html}"
    );
    let link = format!("http://127.0.0.1:8080/i/{IMAGE}");
    let picture = format!("http://127.0.0.1:8080/media/thumb/{IMAGE}/1024?expires=1&signature=cd");
    for (key, expected) in [
        ("og:type", "website"),
        ("og:title", title),
        ("twitter:title", title),
        ("og:url", &link),
        ("og:image", &picture),
        ("twitter:image", &picture),
        ("og:image:width", "1024"),
        ("twitter:card", "summary_large_image"),
    ] {
        assert_eq!(meta(&html, key).as_deref(), Some(expected), "{key}: {html}");
    }
    let description = meta(&html, "og:description").unwrap();
    assert!(
        description.contains("5 March 2024") && description.contains("52.50000° N"),
        "{description}"
    );
    assert!(
        html.contains(&format!(r#"<link rel="canonical" href="{link}">"#)),
        "{html}"
    );
    let head = Request::head(format!("/i/{IMAGE}"))
        .header(header::HOST, "127.0.0.1:8080")
        .body(Bytes::new())
        .unwrap();
    assert_eq!(handle(&h.web, head).status(), StatusCode::OK);
    let post = post(&h.web, &format!("/i/{IMAGE}"), &Jar::default(), &[]);
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);

    // The explorer's own address has no card.
    let explorer = body(&get(
        &h.web,
        &format!("/explore?image={IMAGE}"),
        &Jar::default(),
    ));
    assert_eq!(meta(&explorer, "og:image"), None, "{explorer}");
    assert!(!explorer.contains("og:"), "{explorer}");

    // No public image by that ID (unknown, hidden or deleted: the store tells none of them
    // apart): 404, the explorer with a notice, and no card at all.
    for missing in ["7", "12abc"] {
        let response = get(&h.web, &format!("/i/{missing}"), &Jar::default());
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{missing}");
        let html = body(&response);
        assert!(
            html.contains(&format!("There is no image with the ID {missing}.")),
            "{html}"
        );
        assert!(
            !html.contains("og:") && !html.contains("twitter:"),
            "{html}"
        );
        assert!(!html.contains("/media/"), "{html}");
        assert_eq!(explorer_config(&html)["image"], serde_json::Value::Null);
    }
}

/// The values of the ticked `layers` boxes of an explorer page.
fn ticked_layers(html: &str) -> Vec<String> {
    html.match_indices(r#"<input type="checkbox" name="layers" value=""#)
        .filter_map(|(start, marker)| {
            let rest = &html[start + marker.len()..];
            let tag = &rest[..rest.find('>')?];
            tag.contains("checked")
                .then(|| tag[..tag.find('"').unwrap_or(0)].to_owned())
        })
        .collect()
}

#[test]
fn the_layer_switcher_ticks_the_layers_the_url_names() {
    let h = harness();
    let ticked = |query: &str| {
        ticked_layers(&body(&get(
            &h.web,
            &format!("/explore{query}"),
            &Jar::default(),
        )))
    };
    assert_eq!(ticked(""), ["images", "density"]);
    assert_eq!(ticked("?layers=signs,points"), ["points", "signs"]);
    // As a form without JavaScript sends it: repeated, with the `none` that keeps an empty
    // choice from meaning the default; names not known are ignored.
    assert_eq!(
        ticked("?layers=density&layers=none&layers=bogus"),
        ["density"]
    );
    assert_eq!(ticked("?layers=none"), Vec::<String>::new());
    let html = body(&get(&h.web, "/explore", &Jar::default()));
    assert!(
        html.contains(r#"<form id="layers" method="get" action="/explore">"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<input type="hidden" name="layers" value="none">"#),
        "{html}"
    );
}

#[test]
fn the_shortcut_sheet_is_a_dialog_that_question_mark_opens() {
    let h = harness();
    let html = body(&get(&h.web, "/explore", &Jar::default()));
    assert!(
        html.contains(r#"<button id="shortcuts-open" type="button" aria-haspopup="dialog" aria-keyshortcuts="?">Shortcuts</button>"#),
        "{html}"
    );
    assert!(
        html.contains(
            r#"<dialog id="shortcuts" class="shortcuts" aria-labelledby="shortcuts-title">"#
        ),
        "{html}"
    );
    assert!(html.contains("<kbd>Enter</kbd>"), "{html}");
    assert!(
        html.contains("/assets/streetlevel/explorer/shortcuts.mjs"),
        "{html}"
    );
}

#[test]
fn the_explorer_without_the_npm_packages_shows_the_thumbnail_and_says_why() {
    let h = harness_with(WebConfig {
        assets_dir: unique_dir("no-assets"),
        ..WebConfig::default()
    });
    let html = body(&get(
        &h.web,
        &format!("/explore?image={IMAGE}"),
        &Jar::default(),
    ));
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains(r#"<img id="placeholder""#), "{html}");
    assert!(
        html.contains("mapillary-js and maplibre-gl are missing"),
        "{html}"
    );
}

#[test]
fn a_forged_host_never_reaches_a_page_with_a_public_url_nor_with_odd_characters() {
    let page_for = |h: &Harness, host: &str| {
        let request = Request::get(format!("/embed?image_key={IMAGE}"))
            .header(header::HOST, host)
            .body(Bytes::new())
            .unwrap();
        body(&handle(&h.web, request))
    };
    let configured = harness_with(WebConfig {
        web_url: Some(String::from("https://streetlevel.example")),
        base_url: Some(String::from("https://streetlevel.example")),
        tiles_url: Some(String::from("https://streetlevel.example")),
        assets_dir: fake_node_modules(),
        ..WebConfig::default()
    });
    let html = page_for(&configured, "evil.example");
    assert!(html.contains("https://streetlevel.example"), "{html}");
    assert!(!html.contains("evil.example"), "{html}");
    // Without a public URL the Host header is used, but only as a plain host and port.
    let plain = harness();
    let html = page_for(&plain, "192.0.2.7:8080");
    assert!(html.contains("http://192.0.2.7:8080"), "{html}");
    let html = page_for(&plain, "evil.example\"><script>alert(1)</script>");
    assert!(!html.contains("evil.example"), "{html}");
    assert!(!html.contains("<script>alert(1)"), "{html}");
}

// ---- escaping of user-controlled values ----------------------------------------------------------

/// A value that would run script, close a `<script>` element or an attribute, or open an HTML
/// comment, if any page put it into its markup unescaped.
const HOSTILE: &str = r#"</script><script>alert(1)</script><!--"'&<>"#;

/// `html` holds `scripts` `<script>` elements of its own and nothing of [`HOSTILE`] as markup;
/// with `shown`, the value is on the page, escaped (however `'` is spelled).
fn assert_inert(html: &str, scripts: usize, shown: bool, context: &str) {
    assert!(!html.contains("<script>alert(1)"), "{context}: {html}");
    assert!(!html.contains("</script><script>"), "{context}: {html}");
    assert!(!html.contains("<!--"), "{context}: {html}");
    assert!(!html.contains("'&<>"), "{context}: {html}");
    assert_eq!(
        html.matches("<script").count(),
        scripts,
        "{context}: {html}"
    );
    assert_eq!(
        html.matches("</script>").count(),
        scripts,
        "{context}: {html}"
    );
    if shown {
        assert!(
            html.contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!--&quot;"),
            "{context}: the value is shown, escaped: {html}"
        );
    }
}

/// `value` from [`field`] with the other entities an attribute may use decoded.
fn unescape(value: &str) -> String {
    value
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

/// A harness whose base map style URL and user are [`HOSTILE`], and the callback URL the
/// hostile apps register.
fn hostile_harness() -> (Harness, String) {
    let h = harness_with(WebConfig {
        assets_dir: fake_node_modules(),
        base_map_style_url: Some(format!("https://maps.example/style.json?{HOSTILE}")),
        ..WebConfig::default()
    });
    h.auth.create_user(HOSTILE, PASSWORD).unwrap();
    (h, format!("https://app.example/cb?x={HOSTILE}"))
}

#[test]
fn a_hostile_next_and_username_come_out_inert_on_the_sign_in_page() {
    let (h, _) = hostile_harness();
    let next = format!("/dashboard?{HOSTILE}");
    let mut jar = Jar::default();
    let form = get(&h.web, &format!("/login?next={}", encode(&next)), &jar);
    let html = body(&form);
    assert_inert(&html, 0, false, "sign-in form");
    assert_eq!(unescape(&field(&html, r#"name="next""#)), next);
    jar.take(&form);
    let csrf = field(&html, r#"name="csrf""#);
    let wrong = post(
        &h.web,
        "/login",
        &jar,
        &[
            ("csrf", &csrf),
            ("next", &next),
            ("username", HOSTILE),
            ("password", "wrong"),
        ],
    );
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert_inert(&body(&wrong), 0, true, "wrong password");
}

#[test]
fn a_hostile_username_app_name_and_callback_come_out_inert_on_the_dashboard() {
    let (h, callback) = hostile_harness();
    // The username in the header, the app's name and callback in the list, the credentials
    // section and a rejected form.
    let jar = sign_in(&h.web, HOSTILE);
    let html = body(&get(&h.web, "/dashboard", &jar));
    assert_inert(&html, 0, true, "dashboard");
    let csrf = field(&html, r#"name="csrf""#);
    let create = |name: &str, callback_url: &str| {
        post(
            &h.web,
            "/dashboard",
            &jar,
            &[
                ("csrf", &csrf),
                ("action", "create"),
                ("name", name),
                ("callback_url", callback_url),
                ("scope", "read"),
            ],
        )
    };
    let created = create(HOSTILE, &callback);
    assert_eq!(created.status(), StatusCode::CREATED, "{}", body(&created));
    let html = body(&created);
    assert_inert(&html, 0, true, "created app");
    assert!(html.contains("Credentials of &lt;/script&gt;"), "{html}");
    let client_id = field(&html, r#"data-credential="client_id""#);
    let listed = body(&get(&h.web, "/dashboard", &jar));
    assert_inert(&listed, 0, true, "app list");
    assert!(
        listed.contains(&format!("<h3 id=\"app-{client_id}\">&lt;/script&gt;")),
        "{listed}"
    );
    assert!(
        listed.contains("<code>https://app.example/cb?x=&lt;/script&gt;"),
        "{listed}"
    );
    let rotated = post(
        &h.web,
        "/dashboard",
        &jar,
        &[
            ("csrf", &csrf),
            ("action", "rotate_token"),
            ("client_id", &client_id),
        ],
    );
    assert_eq!(rotated.status(), StatusCode::OK);
    assert_inert(&body(&rotated), 0, true, "rotated");
    let rejected = create(HOSTILE, HOSTILE);
    assert_eq!(rejected.status(), StatusCode::BAD_REQUEST);
    let html = body(&rejected);
    assert_inert(&html, 0, true, "rejected app");
    assert!(html.contains(r#"role="alert""#), "{html}");
}

#[test]
fn hostile_values_come_out_inert_on_the_consent_and_error_pages() {
    let (h, callback) = hostile_harness();
    let app = h.auth.create_app(HOSTILE, &callback, Scopes::READ).unwrap();
    let jar = sign_in(&h.web, HOSTILE);
    // App name, account and callback, and the state inside the form's request.
    let query = format!(
        "client_id={}&redirect_uri={}&response_type=code&scope=read&state={}",
        app.client_id,
        encode(&callback),
        encode(HOSTILE)
    );
    let (html, request, _) = consent(&h, &jar, &query);
    assert_inert(&html, 0, true, "consent");
    assert!(
        html.contains("<code>https://app.example/cb?x=&lt;/script&gt;"),
        "{html}"
    );
    assert!(
        html.contains("Signed in as <strong>&lt;/script&gt;"),
        "{html}"
    );
    assert!(request.contains("state="), "{request}");
    // Error pages that repeat what the request said.
    for uri in [
        format!("/connect?client_id={}&state=x", encode(HOSTILE)),
        format!(
            "/connect?client_id={}&redirect_uri={}",
            app.client_id,
            encode(&format!("https://evil.example/{HOSTILE}"))
        ),
    ] {
        let response = get(&h.web, &uri, &jar);
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        let html = body(&response);
        assert_inert(&html, 0, false, &uri);
        assert!(html.contains(r#"role="alert""#), "{uri}: {html}");
    }
    let response = get(
        &h.web,
        &format!("/embed?image_key={}", encode(HOSTILE)),
        &jar,
    );
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_inert(&body(&response), 0, true, "embed error");
}

#[test]
fn a_hostile_value_cannot_leave_the_embed_pages_script_json() {
    let (h, _) = hostile_harness();
    let response = get(
        &h.web,
        &format!("/embed?image_key={IMAGE}&style=split"),
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::OK);
    let html = body(&response);
    // The viewer, the configuration and the page's module.
    assert_inert(&html, 3, false, "embed page");
    let start = html.find(r#"id="embed-config">"#).unwrap() + r#"id="embed-config">"#.len();
    let end = start + html[start..].find("</script>").unwrap();
    let config: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    assert_eq!(
        config["baseMapStyle"],
        format!("https://maps.example/style.json?{HOSTILE}")
    );
}

#[test]
fn a_hostile_value_cannot_leave_the_explorer() {
    let (h, _) = hostile_harness();
    let response = get(
        &h.web,
        &format!("/explore?image={}", encode(HOSTILE)),
        &Jar::default(),
    );
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let html = body(&response);
    // The viewer, the configuration and the page's module; the key in the notice, escaped.
    assert_inert(&html, 3, true, "explorer");
    assert_eq!(
        explorer_config(&html)["baseMapStyle"],
        format!("https://maps.example/style.json?{HOSTILE}")
    );
    // The route table passes only a segment starting with a digit; the page holds anything.
    let (parts, ()) = Request::get("/i/x")
        .header(header::HOST, "127.0.0.1:8080")
        .body(())
        .unwrap()
        .into_parts();
    let link = h
        .web
        .page(&Page::ImageLink(HOSTILE.to_owned()), &parts, b"");
    assert_eq!(link.status(), StatusCode::NOT_FOUND);
    assert_inert(&body(&link), 3, true, "image link");
}

// Taking images down from the dashboard.

/// A harness whose dashboard takes down images of an in-memory store: alice owns a sequence
/// of two images, carol is an administrator.
fn takedown_harness() -> (
    Harness,
    Arc<std::sync::RwLock<streetlevel_store::Store>>,
    Vec<ImageId>,
) {
    use streetlevel_model::{Creator, CreatorId, Image, Point, SequenceId};
    let mut store = streetlevel_store::Store::in_memory();
    store
        .insert_creators(&[Creator {
            id: CreatorId(7),
            username: String::from("alice"),
        }])
        .unwrap();
    let image = |id: u64| Image {
        id: ImageId(id),
        altitude: None,
        atomic_scale: None,
        camera_parameters: None,
        camera_type: None,
        captured_at: Timestamp(1_700_000_000_000 + i64::try_from(id).unwrap()),
        compass_angle: None,
        computed_altitude: None,
        computed_compass_angle: None,
        computed_geometry: None,
        computed_rotation: None,
        creator: CreatorId(7),
        exif_orientation: None,
        geometry: Point::new(13.19, 55.70 + f64::from(u32::try_from(id).unwrap()) * 1e-5),
        height: 768,
        width: 1024,
        is_pano: false,
        make: None,
        model: None,
        merge_cc: None,
        mesh: None,
        sequence: SequenceId::from("seq<script>"),
        sfm_cluster: None,
        quality_score: None,
        organization: None,
    };
    let ids = vec![ImageId(101), ImageId(102)];
    store.insert_images(&[image(101), image(102)]).unwrap();
    let store = Arc::new(std::sync::RwLock::new(store));
    let mut h = harness();
    h.auth.create_user("carol", PASSWORD).unwrap();
    h.web = h
        .web
        .with_takedowns(Arc::new(streetlevel_moderation::Moderation::new(
            Arc::clone(&store),
            None,
            vec![String::from("carol")],
            h.auth.clock(),
        )));
    (h, store, ids)
}

fn take_down(h: &Harness, jar: &Jar, action: &str, target: &str) -> Response<Bytes> {
    let csrf = dashboard_csrf(h, jar);
    post(
        &h.web,
        "/dashboard",
        jar,
        &[
            ("csrf", &csrf),
            ("action", "takedown"),
            ("takedown", action),
            ("target", target),
        ],
    )
}

#[test]
fn owners_hide_restore_and_delete_their_images_from_the_dashboard() {
    let (h, store, ids) = takedown_harness();
    let alice = sign_in(&h.web, "alice");
    let page = body(&get(&h.web, "/dashboard", &alice));
    assert!(page.contains("Your images"), "{page}");
    // The key is escaped where it lands.
    assert!(
        page.contains("seq&lt;script&gt;") && !page.contains("seq<script>"),
        "{page}"
    );
    let public = |id: ImageId| store.read().unwrap().image(id).is_some();
    // The explorer's "Hide or delete it" link names the image: the form is filled with it,
    // escaped; nothing is taken down until the form is sent.
    let filled = body(&get(&h.web, "/dashboard?takedown=101", &alice));
    assert!(
        filled.contains(r#"name="target" type="text" required maxlength="256" value="101""#),
        "{filled}"
    );
    let hostile = body(&get(
        &h.web,
        "/dashboard?takedown=%22%3E%3Cscript%3E",
        &alice,
    ));
    assert!(
        hostile.contains("value=\"&quot;&gt;&lt;script&gt;\"") && !hostile.contains("\"><script>"),
        "{hostile}"
    );
    assert!(public(ids[0]));

    // Without the form's CSRF token nothing happens.
    let forged = post(
        &h.web,
        "/dashboard",
        &alice,
        &[
            ("action", "takedown"),
            ("takedown", "delete"),
            ("target", "101"),
        ],
    );
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(public(ids[0]));

    let hidden = take_down(&h, &alice, "hide", "seq<script>");
    assert_eq!(hidden.status(), StatusCode::OK, "{}", body(&hidden));
    assert!(body(&hidden).contains("Hid 2 images"), "{}", body(&hidden));
    assert!(!public(ids[0]) && !public(ids[1]));

    // Someone else cannot tell the hidden images from none, and cannot touch public ones.
    let bob = sign_in(&h.web, "bob");
    let refused = take_down(&h, &bob, "restore", "101");
    assert_eq!(
        refused.status(),
        StatusCode::NOT_FOUND,
        "{}",
        body(&refused)
    );
    assert!(!public(ids[0]));

    let restored = take_down(&h, &alice, "restore", "101");
    assert_eq!(restored.status(), StatusCode::OK, "{}", body(&restored));
    assert!(public(ids[0]) && !public(ids[1]));
    let refused = take_down(&h, &bob, "delete", "101");
    assert_eq!(
        refused.status(),
        StatusCode::FORBIDDEN,
        "{}",
        body(&refused)
    );
    assert!(public(ids[0]));

    // An administrator may delete anyone's; the hidden one goes with its sequence.
    let carol = sign_in(&h.web, "carol");
    let deleted = take_down(&h, &carol, "delete", "seq<script>");
    assert_eq!(deleted.status(), StatusCode::OK, "{}", body(&deleted));
    assert!(
        body(&deleted).contains("Deleted 2 images"),
        "{}",
        body(&deleted)
    );
    let store = store.read().unwrap();
    for id in &ids {
        assert!(store.image(*id).is_none() && store.hidden_image(*id).is_none());
    }
    drop(store);
    let missing = take_down(&h, &alice, "delete", "<b>101</b>");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(!body(&missing).contains("<b>101"));
}
