//! Routing: from a method and a path to the endpoint that answers it. Every path is accepted
//! with and without a trailing slash.

use http::Method;

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
    /// `POST /login`: with a JSON body the official uploader's sign-in, otherwise the web
    /// surface's sign-in page.
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
    /// `GET /health`: the process answers (no token, no quota).
    Health,
    /// `GET /ready`: the data is loaded and the database writable (no token, no quota).
    Ready,
    /// `GET /openapi.json`: the description of the API (no token, no quota).
    OpenApi,
    /// Anything else (the web surface may answer it).
    Other,
}

impl Route {
    /// The route of `path` (without the query string).
    pub fn of(path: &str) -> Route {
        let trimmed = path.trim_end_matches('/');
        if trimmed.starts_with("/media/") {
            return Route::Media;
        }
        let segments: Vec<&str> = trimmed.split('/').skip(1).collect();
        match segments.as_slice() {
            [] | [""] => Route::Multiple,
            ["maps", "vtp", tileset, "2", z, x, y] => Route::Tile {
                tileset: (*tileset).to_owned(),
                z: (*z).to_owned(),
                x: (*x).to_owned(),
                y: (*y).to_owned(),
            },
            ["token"] => Route::Token,
            ["login"] => Route::Login,
            ["me"] => Route::Me,
            ["upload", key] => Route::Upload((*key).to_owned()),
            ["finish_upload"] => Route::FinishUpload,
            ["logging"] => Route::Logging,
            ["uploads"] => Route::Uploads,
            ["health"] => Route::Health,
            ["ready"] => Route::Ready,
            ["openapi.json"] => Route::OpenApi,
            ["images"] => Route::SearchImages,
            ["map_features"] => Route::SearchMapFeatures,
            ["detections"] => Route::SearchDetections,
            ["image_ids"] => Route::ImageIds,
            [id] if looks_like_id(id) => Route::Entity((*id).to_owned()),
            [id, "detections"] if looks_like_id(id) => Route::DetectionsOf((*id).to_owned()),
            [id, "tiles"] if looks_like_id(id) => Route::ImageTiles((*id).to_owned()),
            _ => Route::Other,
        }
    }

    /// The methods the route answers (besides `OPTIONS`).
    pub fn allows(&self, method: &Method) -> bool {
        match self {
            Route::Token | Route::FinishUpload | Route::Logging => method == Method::POST,
            Route::Upload(_) => {
                method == Method::GET || method == Method::HEAD || method == Method::POST
            }
            Route::Login | Route::Other => true,
            _ => method == Method::GET || method == Method::HEAD,
        }
    }

    /// The `Allow` header of a 405 answer (RFC 9110 15.5.6): what [`Route::allows`] accepts,
    /// and `OPTIONS`, which every path answers.
    pub fn allow_header(&self) -> &'static str {
        match self {
            Route::Token | Route::FinishUpload | Route::Logging => "POST, OPTIONS",
            Route::Upload(_) => "GET, HEAD, POST, OPTIONS",
            Route::Login | Route::Other => "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
            _ => "GET, HEAD, OPTIONS",
        }
    }
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
        assert_eq!(Route::of("/connect"), Route::Other);
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
