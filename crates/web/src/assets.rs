//! `GET /assets/...`: the viewer and map packages from npm (`web/node_modules`), and this
//! crate's own stylesheets and scripts: the embed page's and the explorer's (compiled in).
//!
//! Only the `dist/` folders of the packages the embed page uses are served, never the rest of
//! `node_modules`.

use std::path::Path;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, X_CONTENT_TYPE_OPTIONS};
use http::{Response, StatusCode};

use crate::web::Web;

/// The npm files the embed page loads, relative to `node_modules`.
pub(crate) const MAPILLARY_JS: &str = "mapillary-js/dist/mapillary.js";
pub(crate) const MAPILLARY_CSS: &str = "mapillary-js/dist/mapillary.css";
pub(crate) const MAPLIBRE_JS: &str = "maplibre-gl/dist/maplibre-gl.mjs";
pub(crate) const MAPLIBRE_CSS: &str = "maplibre-gl/dist/maplibre-gl.css";

/// Folders of `node_modules` that may be served: the viewer's and the map's builds, and the
/// map feature icons the explorer draws (`mapillary_sprite_source`, MIT).
const SERVED_PACKAGES: &[&str] = &[
    "mapillary-js/dist/",
    "maplibre-gl/dist/",
    "mapillary_sprite_source/sprites/",
];

/// This crate's own assets, under `/assets/streetlevel/`.
const OWN_ASSETS: &[(&str, &str)] = &[
    ("site.css", include_str!("static/site.css")),
    ("embed.css", include_str!("static/embed.css")),
    ("embed.mjs", include_str!("static/embed.mjs")),
    ("draw.mjs", include_str!("static/draw.mjs")),
    (
        "explorer/explorer.css",
        include_str!("static/explorer/explorer.css"),
    ),
    (
        "explorer/main.mjs",
        include_str!("static/explorer/main.mjs"),
    ),
    (
        "explorer/viewer.mjs",
        include_str!("static/explorer/viewer.mjs"),
    ),
    ("explorer/map.mjs", include_str!("static/explorer/map.mjs")),
    (
        "explorer/state.mjs",
        include_str!("static/explorer/state.mjs"),
    ),
    (
        "explorer/filters.mjs",
        include_str!("static/explorer/filters.mjs"),
    ),
    (
        "explorer/player.mjs",
        include_str!("static/explorer/player.mjs"),
    ),
    (
        "explorer/legend.mjs",
        include_str!("static/explorer/legend.mjs"),
    ),
    (
        "explorer/layers.mjs",
        include_str!("static/explorer/layers.mjs"),
    ),
    (
        "explorer/shortcuts.mjs",
        include_str!("static/explorer/shortcuts.mjs"),
    ),
    (
        "explorer/features.mjs",
        include_str!("static/explorer/features.mjs"),
    ),
    (
        "explorer/dates.mjs",
        include_str!("static/explorer/dates.mjs"),
    ),
    (
        "explorer/report.mjs",
        include_str!("static/explorer/report.mjs"),
    ),
    (
        "explorer/swipe.mjs",
        include_str!("static/explorer/swipe.mjs"),
    ),
];

/// The media type of a file, by its extension. JavaScript modules (`.mjs`) must be
/// `text/javascript` or browsers refuse to run them.
pub(crate) fn content_type(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map_or("", |(_, extension)| extension);
    match extension.to_ascii_lowercase().as_str() {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "html" => "text/html; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Whether `path` is a plain relative path inside a served package: no `..`, no hidden or
/// empty segments, no backslashes.
fn servable(path: &str) -> bool {
    SERVED_PACKAGES
        .iter()
        .any(|prefix| path.starts_with(prefix))
        && !path.contains('\\')
        && path
            .split('/')
            .all(|segment| !segment.is_empty() && !segment.starts_with('.'))
}

/// Which of the npm files the embed page needs are missing.
pub(crate) fn missing_packages(node_modules: &Path) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !node_modules.join(MAPILLARY_JS).is_file() {
        missing.push("mapillary-js");
    }
    if !node_modules.join(MAPLIBRE_JS).is_file() {
        missing.push("maplibre-gl");
    }
    missing
}

fn file_response(path: &str, body: Bytes) -> Response<Bytes> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type(path)));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response
}

fn not_found(path: &str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(format!("no asset {path}\n")));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl Web {
    pub(crate) fn asset(&self, path: &str) -> Response<Bytes> {
        if let Some(own) = path.strip_prefix("streetlevel/") {
            return OWN_ASSETS
                .iter()
                .find(|(name, _)| *name == own)
                .map_or_else(
                    || not_found(path),
                    |(name, text)| file_response(name, Bytes::from_static(text.as_bytes())),
                );
        }
        if !servable(path) {
            return not_found(path);
        }
        match std::fs::read(self.config.assets_dir.join(path)) {
            Ok(bytes) => file_response(path, Bytes::from(bytes)),
            Err(_) => not_found(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_javascript() {
        assert_eq!(content_type("a/b.mjs"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("a/b.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("a/b.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("a/b.wasm"), "application/wasm");
        assert_eq!(content_type("a/b"), "application/octet-stream");
    }

    #[test]
    fn only_package_dist_files_are_servable() {
        assert!(servable("maplibre-gl/dist/maplibre-gl.mjs"));
        assert!(servable("mapillary-js/dist/mapillary.css"));
        assert!(servable("mapillary_sprite_source/sprites/sprites@2x.png"));
        for bad in [
            "maplibre-gl/package.json",
            "playwright-core/index.js",
            "mapillary_sprite_source/package_signs/x.svg",
            "maplibre-gl/dist/../../x",
            "maplibre-gl/dist/.hidden",
            "maplibre-gl/dist//x",
            "maplibre-gl/dist/a\\..\\b",
            "../etc/passwd",
        ] {
            assert!(!servable(bad), "{bad}");
        }
    }
}
