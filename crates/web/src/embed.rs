//! `GET /embed?image_key=<id>&style=photo|split|classic`: the embed page of spec section 1.
//!
//! The viewer is mapillary-js and the map `MapLibre` GL JS, both from npm, pointed at this
//! server with the embed app's read-only token (see [`crate::Registry::embed_token`]): the
//! page is public, so the token in it is too, and it can only read. Without the npm packages
//! the page shows the image's 2048 px thumbnail and says what is missing.

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue, X_CONTENT_TYPE_OPTIONS,
};
use http::request::Parts;
use http::{Response, StatusCode};
use streetlevel_model::ImageId;

use crate::EmbedImage;
use crate::assets::{MAPILLARY_CSS, MAPILLARY_JS, MAPLIBRE_CSS, missing_packages};
use crate::form::Form;
use crate::html::escape;
use crate::web::Web;

/// What the embed page shows (spec section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedStyle {
    /// Only the image viewer.
    Photo,
    /// Viewer and map side by side, equal size.
    Split,
    /// Viewer and map; the user can switch which one is large.
    Classic,
}

impl EmbedStyle {
    /// Parses the `style` parameter; absent or empty means [`EmbedStyle::Photo`].
    pub fn parse(text: Option<&str>) -> Option<Self> {
        match text.unwrap_or("") {
            "" | "photo" => Some(Self::Photo),
            "split" => Some(Self::Split),
            "classic" => Some(Self::Classic),
            _ => None,
        }
    }

    /// The parameter value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Photo => "photo",
            Self::Split => "split",
            Self::Classic => "classic",
        }
    }
}

/// The embed page may be framed by any site; it loads its scripts from here and talks to the
/// configured base, tiles and media URLs. mapillary-js evaluates strings as code, hence
/// `'unsafe-eval'`; no inline script runs.
const EMBED_POLICY: &str = "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; \
img-src * data: blob:; connect-src * data: blob:; worker-src 'self' blob:; child-src 'self' blob:; \
frame-ancestors *; base-uri 'none'; form-action 'none'";

fn embed_response(status: StatusCode, body: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(EMBED_POLICY),
    );
    response
}

fn document(title: &str, head: &str, body_class: &str, main: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
{head}<link rel="stylesheet" href="/assets/streetlevel/embed.css">
</head>
<body class="{body_class}">
{main}
</body>
</html>
"#,
        title = escape(title)
    )
}

/// An error inside the frame: a visible message, never a blank frame.
fn embed_error(status: StatusCode, message: &str) -> Response<Bytes> {
    let main = format!(
        r#"<main class="embed-error"><h1>Cannot show this image</h1><p role="alert">{}</p></main>"#,
        escape(message)
    );
    embed_response(
        status,
        document("Cannot show this image · streetlevel", "", "error", &main),
    )
}

/// JSON for a `<script type="application/json">` element: `<`, `>` and `&` are escaped so
/// no value can close the element.
fn script_json(value: &serde_json::Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

impl Web {
    pub(crate) fn embed(&self, parts: &Parts) -> Response<Bytes> {
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let Some(style) = EmbedStyle::parse(query.get("style")) else {
            return embed_error(
                StatusCode::BAD_REQUEST,
                "Unknown style: use photo, split or classic.",
            );
        };
        let Some(image_key) = query.get("image_key").filter(|key| !key.is_empty()) else {
            return embed_error(
                StatusCode::BAD_REQUEST,
                "The image_key parameter is missing: give the ID of an image.",
            );
        };
        let image = image_key
            .parse::<ImageId>()
            .ok()
            .and_then(|id| self.images.embed_image(id));
        let Some(image) = image else {
            return embed_error(
                StatusCode::NOT_FOUND,
                &format!("There is no image with the ID {image_key}."),
            );
        };
        let missing = missing_packages(&self.config.assets_dir);
        if missing.is_empty() {
            self.viewer_page(parts, &image, style)
        } else {
            fallback_page(&image, &missing)
        }
    }

    fn viewer_page(&self, parts: &Parts, image: &EmbedImage, style: EmbedStyle) -> Response<Bytes> {
        let urls = self.urls(parts);
        let config = serde_json::json!({
            "imageId": image.id.to_string(),
            "style": style.as_str(),
            "baseUrl": urls.base,
            "tilesUrl": urls.tiles,
            "tileset": format!("{}1_public", self.config.short_name),
            "accessToken": self.embed_token(),
            "center": [image.longitude, image.latitude],
            "baseMapStyle": self.config.base_map_style_url,
        });
        let head = format!(
            r#"<link rel="stylesheet" href="/assets/{MAPILLARY_CSS}">
<link rel="stylesheet" href="/assets/{MAPLIBRE_CSS}">
<script src="/assets/{MAPILLARY_JS}"></script>
<script type="application/json" id="embed-config">{}</script>
<script type="module" src="/assets/streetlevel/embed.mjs"></script>
"#,
            script_json(&config)
        );
        let thumb = image.thumb_2048_url.as_deref().map_or_else(String::new, |url| {
            format!(
                r#"<noscript><img class="still" src="{}" alt="Street-level image {}"></noscript>"#,
                escape(url),
                image.id
            )
        });
        let map = if style == EmbedStyle::Photo {
            ""
        } else {
            r#"<div id="map" class="pane map small" role="region" aria-label="Map of the image's surroundings"></div>"#
        };
        let swap = if style == EmbedStyle::Classic {
            r#"<button id="swap" type="button" class="swap" aria-controls="viewer map" aria-pressed="false">Swap image and map</button>"#
        } else {
            ""
        };
        let main = format!(
            r#"<main id="embed" class="embed style-{style}" aria-label="Street-level image {id}">
<div id="viewer" class="pane viewer large" role="region" aria-label="Image viewer"></div>
{map}{swap}{thumb}
<p id="status" class="status" role="status"></p>
</main>"#,
            style = style.as_str(),
            id = image.id,
        );
        embed_response(
            StatusCode::OK,
            document(
                &format!("Image {} · streetlevel", image.id),
                &head,
                &format!("style-{}", style.as_str()),
                &main,
            ),
        )
    }
}

fn fallback_page(image: &EmbedImage, missing: &[&str]) -> Response<Bytes> {
    let what = format!(
        "The interactive viewer is not available: the npm package{} {} {} missing on the server. Its operator installs them with `npm ci` in the repository's web/ folder, or points `--assets-dir` at a node_modules folder that has them.",
        if missing.len() == 1 { "" } else { "s" },
        missing.join(" and "),
        if missing.len() == 1 { "is" } else { "are" },
    );
    let picture = image.thumb_2048_url.as_deref().map_or_else(
        || String::from("<p>No thumbnail of this image is available either.</p>"),
        |url| {
            format!(
                r#"<img class="still" src="{}" alt="Street-level image {}">"#,
                escape(url),
                image.id
            )
        },
    );
    let main = format!(
        r#"<main id="embed" class="embed fallback" aria-label="Street-level image {id}">
{picture}
<p class="missing" role="status">{what}</p>
</main>"#,
        id = image.id,
        what = escape(&what),
    );
    embed_response(
        StatusCode::OK,
        document(
            &format!("Image {} · streetlevel", image.id),
            "",
            "fallback",
            &main,
        ),
    )
}
