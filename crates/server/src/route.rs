//! The route table: from a path to the endpoint or page that answers it, for the API and the
//! web pages alike, so that no name (`health`, `upload`, `login`, ...) can be taken twice: a
//! second arm for a name is an unreachable pattern, which the build refuses. Every path is
//! accepted with and without a trailing slash, and empty segments count for nothing
//! (`//<id>/detections` is `/<id>/detections`): clients that join a base URL ending in `/`
//! with a path starting with one send them (the editor iD does). Signed media and the static
//! assets are the exception: their paths are handed out by the server and taken literally.

use http::Method;
use streetlevel_web::Page;

/// The endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /maps/vtp/<tileset>/2/<z>/<x>/<y>` (spec 4.1); the coordinates are still text.
    Tile {
        /// The tile set path segment.
        tileset: String,
        /// Zoom as sent.
        z: String,
        /// Column as sent.
        x: String,
        /// Row as sent.
        y: String,
    },
    /// `GET /maps/vtp/<tileset>/2/tilejson.json`: the tile set's `TileJSON`.
    TileJson(String),
    /// `GET /catalog`: every tile set and the URL of its `TileJSON`.
    Catalog,
    /// `GET /maps/style.json`: a `MapLibre` style of the coverage and map feature layers.
    Style,
    /// `GET /media/...`: signed media, no token.
    Media,
    /// `POST /token` (spec 4.11).
    Token,
    /// `GET /images` (spec 4.3).
    SearchImages,
    /// `GET /map_features` (spec 4.5).
    SearchMapFeatures,
    /// `GET /detections` (spec 4.7).
    SearchDetections,
    /// `GET /image_ids?sequence_id=` (spec 4.8).
    ImageIds,
    /// `GET /?ids=` (spec 4.9).
    Multiple,
    /// `GET /<id>` (spec 4.2, 4.4, 4.8 and detections by ID).
    Entity(String),
    /// `GET /<id>/detections` (spec 4.6).
    DetectionsOf(String),
    /// `GET /<id>/tiles` (the viewer's image pyramid).
    ImageTiles(String),
    /// `/login`: a `POST` with a JSON body is the official uploader's sign-in, anything
    /// else the sign-in page.
    Login,
    /// `GET /me`: the signed-in user.
    Me,
    /// `GET|POST /upload/<session key>`: the resumable upload sessions.
    Upload(String),
    /// `POST /finish_upload`: hands uploaded sessions to the processing queue.
    FinishUpload,
    /// `POST /logging`: the uploader's telemetry, accepted and ignored.
    Logging,
    /// `GET /uploads`: the status of the caller's uploads.
    Uploads,
    /// `DELETE /uploads/<cluster id>`: erases what one upload published.
    UploadImages(String),
    /// `POST /<image id or sequence key>/hide` (`hidden`) or `/restore`: withdraws images
    /// from public view or makes them public again.
    Visibility {
        /// The path segment naming the images.
        target: String,
        /// Hide (`true`) or restore.
        hidden: bool,
    },
    /// `GET /privacy_requests`: the privacy requests, for administrators' tooling.
    PrivacyRequests,
    /// `POST /privacy_requests/<id>`: resolves one privacy request.
    PrivacyRequest(String),
    /// `GET /health`: the process answers (no token, no quota).
    Health,
    /// `GET /ready`: the data is loaded and the database writable (no token, no quota).
    Ready,
    /// A page of the web surface (`/` is [`Route::Multiple`] and becomes [`Page::Home`] for
    /// browsers; `/login` is [`Route::Login`]).
    Page(Page),
    /// `GET /__panic`: a handler that panics, served only with `debug_panic_route`.
    DebugPanic,
    /// `GET /openapi.json`: the description of the API (no token, no quota).
    OpenApi,
    /// `POST /blur/`: Panoramax's blur API (a token with the `blur` scope).
    Blur,
    /// No endpoint and no page.
    Other,
}

impl Route {
    /// The route of `path` (without the query string).
    pub fn of(path: &str) -> Route {
        let trimmed = path.trim_end_matches('/');
        if trimmed.starts_with("/media/") {
            return Route::Media;
        }
        let segments: Vec<&str> = trimmed
            .split('/')
            .filter(|segment| !segment.is_empty())
            .collect();
        match segments.as_slice() {
            [] => Route::Multiple,
            ["maps", "vtp", tileset, "2", z, x, y] => Route::Tile {
                tileset: (*tileset).to_owned(),
                z: (*z).to_owned(),
                x: (*x).to_owned(),
                y: (*y).to_owned(),
            },
            ["maps", "vtp", tileset, "2", "tilejson.json"] => {
                Route::TileJson((*tileset).to_owned())
            }
            ["maps", "style.json"] => Route::Style,
            ["catalog"] => Route::Catalog,
            ["token"] => Route::Token,
            ["login"] => Route::Login,
            ["me"] => Route::Me,
            ["upload", key] => Route::Upload((*key).to_owned()),
            ["finish_upload"] => Route::FinishUpload,
            ["logging"] => Route::Logging,
            ["uploads"] => Route::Uploads,
            ["uploads", job] => Route::UploadImages((*job).to_owned()),
            ["logout"] => Route::Page(Page::SignOut),
            ["connect"] => Route::Page(Page::Connect),
            ["dashboard"] => Route::Page(Page::Dashboard),
            ["embed"] => Route::Page(Page::Embed),
            ["explore"] => Route::Page(Page::Explore),
            ["i", id] if looks_like_id(id) => Route::Page(Page::ImageLink((*id).to_owned())),
            ["report"] => Route::Page(Page::Report),
            ["dashboard", "image"] => Route::Page(Page::DashboardImage),
            ["privacy_requests"] => Route::PrivacyRequests,
            ["privacy_requests", id] => Route::PrivacyRequest((*id).to_owned()),
            ["assets", ..] => match trimmed.strip_prefix("/assets/") {
                Some(asset) => Route::Page(Page::Asset(asset.to_owned())),
                None => Route::Other,
            },
            ["__panic"] => Route::DebugPanic,
            ["health"] => Route::Health,
            ["ready"] => Route::Ready,
            ["openapi.json"] => Route::OpenApi,
            ["blur"] => Route::Blur,
            ["images"] => Route::SearchImages,
            ["map_features"] => Route::SearchMapFeatures,
            ["detections"] => Route::SearchDetections,
            ["image_ids"] => Route::ImageIds,
            [id] if looks_like_id(id) => Route::Entity((*id).to_owned()),
            [id, "detections"] if looks_like_id(id) => Route::DetectionsOf((*id).to_owned()),
            [id, "tiles"] if looks_like_id(id) => Route::ImageTiles((*id).to_owned()),
            [target, "hide"] => Route::Visibility {
                target: (*target).to_owned(),
                hidden: true,
            },
            [target, "restore"] => Route::Visibility {
                target: (*target).to_owned(),
                hidden: false,
            },
            _ => Route::Other,
        }
    }

    /// The route's class in logs and metrics: a small closed set, so a metric label never
    /// carries an ID or a path.
    pub fn class(&self) -> &'static str {
        match self {
            Route::Tile { .. } => "tile",
            Route::TileJson(_) | Route::Catalog | Route::Style | Route::OpenApi => "catalog",
            Route::Media => "media",
            Route::Token => "token",
            Route::SearchImages | Route::SearchMapFeatures | Route::SearchDetections => "search",
            Route::ImageIds
            | Route::Multiple
            | Route::Entity(_)
            | Route::DetectionsOf(_)
            | Route::ImageTiles(_) => "entity",
            Route::Login => "sign_in",
            Route::Me
            | Route::Upload(_)
            | Route::FinishUpload
            | Route::Logging
            | Route::Uploads => "upload",
            Route::UploadImages(_) | Route::Visibility { .. } => "takedown",
            Route::PrivacyRequests | Route::PrivacyRequest(_) => "privacy",
            Route::Health | Route::Ready => "probe",
            Route::Page(_) => "page",
            Route::Blur => "blur",
            Route::DebugPanic | Route::Other => "other",
        }
    }

    /// The methods the route answers (besides `OPTIONS`).
    pub fn allows(&self, method: &Method) -> bool {
        match self {
            Route::Token
            | Route::FinishUpload
            | Route::Logging
            | Route::Visibility { .. }
            | Route::Blur
            | Route::PrivacyRequest(_) => method == Method::POST,
            Route::UploadImages(_) => method == Method::DELETE,
            Route::Entity(_) => {
                method == Method::GET || method == Method::HEAD || method == Method::DELETE
            }
            Route::Upload(_) => {
                method == Method::GET || method == Method::HEAD || method == Method::POST
            }
            // Pages answer their own 405, as a page.
            Route::Login | Route::Page(_) | Route::Other => true,
            _ => method == Method::GET || method == Method::HEAD,
        }
    }

    /// The `Allow` header of a 405 answer (RFC 9110 15.5.6): what [`Route::allows`] accepts,
    /// and `OPTIONS`, which every path answers.
    pub fn allow_header(&self) -> &'static str {
        match self {
            Route::Token
            | Route::FinishUpload
            | Route::Logging
            | Route::Visibility { .. }
            | Route::Blur
            | Route::PrivacyRequest(_) => "POST, OPTIONS",
            Route::UploadImages(_) => "DELETE, OPTIONS",
            Route::Entity(_) => "GET, HEAD, DELETE, OPTIONS",
            Route::Upload(_) => "GET, HEAD, POST, OPTIONS",
            Route::Login | Route::Page(_) | Route::Other => {
                "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
            }
            _ => "GET, HEAD, OPTIONS",
        }
    }
}

/// The single path segment of a `DELETE` that no route names as an entity: a sequence key
/// that does not start with a digit (`DELETE /<sequence key>`).
pub fn deletion_target(path: &str) -> Option<&str> {
    // Empty segments count for nothing here too.
    let mut segments = path.split('/').filter(|segment| !segment.is_empty());
    let segment = segments.next()?;
    segments.next().is_none().then_some(segment)
}

/// Entity IDs are decimal; anything else with digits only up front is still routed as an ID
/// so that the answer is "unknown ID" rather than "unknown path".
fn looks_like_id(segment: &str) -> bool {
    segment
        .bytes()
        .next()
        .is_some_and(|byte| byte.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blur_api_is_a_post_with_or_without_its_slash() {
        assert_eq!(Route::of("/blur/"), Route::Blur);
        assert_eq!(Route::of("/blur"), Route::Blur);
        assert!(Route::Blur.allows(&Method::POST));
        assert!(!Route::Blur.allows(&Method::GET));
        assert_eq!(Route::Blur.allow_header(), "POST, OPTIONS");
        assert_eq!(Route::Blur.class(), "blur");
    }

    #[test]
    fn trailing_slashes_are_accepted() {
        assert_eq!(Route::of("/123/"), Route::Entity(String::from("123")));
        assert_eq!(Route::of("/123"), Route::Entity(String::from("123")));
        assert_eq!(
            Route::of("/123/detections/"),
            Route::DetectionsOf(String::from("123"))
        );
        assert_eq!(Route::of("/images/"), Route::SearchImages);
        assert_eq!(Route::of("/"), Route::Multiple);
        assert_eq!(
            Route::of("/maps/vtp/svc1_public/2/14/1/2/"),
            Route::Tile {
                tileset: String::from("svc1_public"),
                z: String::from("14"),
                x: String::from("1"),
                y: String::from("2")
            }
        );
        assert_eq!(Route::of("/connect/"), Route::Page(Page::Connect));
        assert_eq!(Route::of("/connectx"), Route::Other);
        assert_eq!(
            Route::of("/upload/mly_tools_ab.jpg"),
            Route::Upload(String::from("mly_tools_ab.jpg"))
        );
        assert_eq!(Route::of("/upload/a/b"), Route::Other);
        assert_eq!(Route::of("/me/"), Route::Me);
        assert_eq!(Route::of("/finish_upload"), Route::FinishUpload);
        assert_eq!(Route::of("/media/thumb/1/256"), Route::Media);
    }

    #[test]
    fn empty_segments_count_for_nothing_but_media_paths_are_literal() {
        assert_eq!(Route::of("//123"), Route::Entity(String::from("123")));
        assert_eq!(
            Route::of("//123/detections"),
            Route::DetectionsOf(String::from("123"))
        );
        assert_eq!(
            Route::of("/123//detections//"),
            Route::DetectionsOf(String::from("123"))
        );
        assert_eq!(Route::of("//images"), Route::SearchImages);
        assert_eq!(Route::of("//"), Route::Multiple);
        assert_eq!(
            Route::of("//maps/vtp/mly1_public/2/14//1/2"),
            Route::Tile {
                tileset: String::from("mly1_public"),
                z: String::from("14"),
                x: String::from("1"),
                y: String::from("2")
            }
        );
        // Unknown once the empty segments are gone: still unknown.
        assert_eq!(Route::of("//images/x"), Route::Other);
        assert_eq!(Route::of("//123/nothing"), Route::Other);
        assert_eq!(Route::of("//nothing"), Route::Other);
        // A missing tile coordinate is not made up by skipping the empty segment.
        assert_eq!(Route::of("/maps/vtp/mly1_public/2/14//2"), Route::Other);
        // Signed media and assets: the paths the server hands out, and only those.
        assert_eq!(Route::of("//media/thumb/1/256"), Route::Other);
        assert_eq!(Route::of("//assets/x.js"), Route::Other);
    }

    #[test]
    fn a_delete_names_one_segment() {
        assert_eq!(deletion_target("/AbC12"), Some("AbC12"));
        assert_eq!(deletion_target("//AbC12/"), Some("AbC12"));
        assert_eq!(deletion_target("/a/b"), None);
        assert_eq!(deletion_target("/"), None);
    }

    #[test]
    fn api_and_pages_share_one_table() {
        for (path, route) in [
            ("/login", Route::Login),
            ("/logout", Route::Page(Page::SignOut)),
            ("/dashboard", Route::Page(Page::Dashboard)),
            ("/embed", Route::Page(Page::Embed)),
            ("/explore", Route::Page(Page::Explore)),
            (
                "/i/1234",
                Route::Page(Page::ImageLink(String::from("1234"))),
            ),
            ("/i/x", Route::Other),
            ("/report", Route::Page(Page::Report)),
            ("/dashboard/image", Route::Page(Page::DashboardImage)),
            ("/privacy_requests", Route::PrivacyRequests),
            (
                "/privacy_requests/7",
                Route::PrivacyRequest(String::from("7")),
            ),
            (
                "/assets/mapillary-js/dist/mapillary.js",
                Route::Page(Page::Asset(String::from("mapillary-js/dist/mapillary.js"))),
            ),
            ("/assets", Route::Other),
            ("/asset/x", Route::Other),
            ("/health", Route::Health),
            ("/ready", Route::Ready),
            ("/upload/k", Route::Upload(String::from("k"))),
            ("/uploads", Route::Uploads),
            ("/images", Route::SearchImages),
            ("/token", Route::Token),
            ("/1234", Route::Entity(String::from("1234"))),
            (
                "/1234/hide",
                Route::Visibility {
                    target: String::from("1234"),
                    hidden: true,
                },
            ),
            (
                "/Ab12/restore",
                Route::Visibility {
                    target: String::from("Ab12"),
                    hidden: false,
                },
            ),
            ("/uploads/9", Route::UploadImages(String::from("9"))),
            ("/__panic", Route::DebugPanic),
        ] {
            assert_eq!(Route::of(path), route, "{path}");
        }
    }

    #[test]
    fn the_allow_header_lists_exactly_the_allowed_methods() {
        let methods = [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::TRACE,
        ];
        for path in [
            "/token",
            "/finish_upload",
            "/logging",
            "/upload/k",
            "/login",
            "/connect",
            "/1",
            "/1/hide",
            "/uploads/1",
            "/privacy_requests",
            "/privacy_requests/1",
            "/images",
            "/health",
            "/openapi.json",
            "/maps/vtp/a/2/0/0/0",
            "/media/x",
        ] {
            let route = Route::of(path);
            if route.allows(&Method::TRACE) {
                // The web surface's paths: it answers every method itself, never this 405.
                continue;
            }
            let listed: Vec<&str> = route.allow_header().split(", ").collect();
            assert!(listed.contains(&"OPTIONS"), "{path}");
            for method in &methods {
                assert_eq!(
                    route.allows(method),
                    listed.contains(&method.as_str()),
                    "{method} {path}"
                );
            }
        }
    }
}
