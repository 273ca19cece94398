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
use maud::{Markup, PreEscaped, Render, html};
use streetlevel_model::ImageId;

use crate::EmbedImage;
use crate::assets::{MAPILLARY_CSS, MAPILLARY_JS, MAPLIBRE_CSS, missing_packages};
use crate::form::Form;
use crate::html::DOCTYPE;
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

fn embed_response(status: StatusCode, body: Markup) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.into_string()));
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

/// The embed page's document around `main`; `head` goes before its stylesheet.
fn document(title: &str, head: Option<Markup>, body_class: &str, main: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            "\n"
            head {
                "\n"
                meta charset="utf-8"; "\n"
                meta name="viewport" content="width=device-width, initial-scale=1"; "\n"
                title { (title) } "\n"
                @if let Some(head) = head {
                    (head)
                }
                link rel="stylesheet" href="/assets/streetlevel/embed.css"; "\n"
            } "\n"
            body class=(body_class) {
                "\n"
                (main) "\n"
            } "\n"
        } "\n"
    }
}

/// An error inside the frame: a visible message, never a blank frame.
fn embed_error(status: StatusCode, message: &str) -> Response<Bytes> {
    let main = html! {
        main class="embed-error" {
            h1 { "Cannot show this image" }
            p role="alert" { (message) }
        }
    };
    embed_response(
        status,
        document("Cannot show this image · streetlevel", None, "error", &main),
    )
}

/// JSON for the content of a `<script type="application/json">` element. HTML escaping does
/// not apply inside `<script>` (its content is not decoded), so the JSON escapes `<`, `>`
/// and `&` as `\u003c`, `\u003e` and `\u0026` instead: no value can close the element
/// (`</script>`), open a comment (`<!--`) or anything else, and the JSON still parses to the
/// same value. U+2028 and U+2029 are escaped too, so the text is also safe as JavaScript.
pub(crate) struct ScriptJson(String);

impl ScriptJson {
    pub(crate) fn new(value: &serde_json::Value) -> Self {
        let mut escaped = String::new();
        for character in value.to_string().chars() {
            match character {
                '<' => escaped.push_str("\\u003c"),
                '>' => escaped.push_str("\\u003e"),
                '&' => escaped.push_str("\\u0026"),
                '\u{2028}' => escaped.push_str("\\u2028"),
                '\u{2029}' => escaped.push_str("\\u2029"),
                other => escaped.push(other),
            }
        }
        Self(escaped)
    }
}

impl Render for ScriptJson {
    fn render_to(&self, buffer: &mut String) {
        PreEscaped(&self.0).render_to(buffer);
    }
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
            fallback_page(&self.urls(parts).web, &image, &missing)
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
        let head = html! {
            link rel="stylesheet" href={ "/assets/" (MAPILLARY_CSS) }; "\n"
            link rel="stylesheet" href={ "/assets/" (MAPLIBRE_CSS) }; "\n"
            script src={ "/assets/" (MAPILLARY_JS) } {} "\n"
            script type="application/json" id="embed-config" { (ScriptJson::new(&config)) } "\n"
            script type="module" src="/assets/streetlevel/embed.mjs" {} "\n"
        };
        let label = format!("Street-level image {}", image.id);
        let main = html! {
            main id="embed" class={ "embed style-" (style.as_str()) } aria-label=(label) {
                "\n"
                div id="viewer" class="pane viewer large" role="region" aria-label="Image viewer" {} "\n"
                @if style != EmbedStyle::Photo {
                    div id="map" class="pane map small" role="region" aria-label="Map of the image's surroundings" {}
                }
                @if style == EmbedStyle::Classic {
                    button id="swap" type="button" class="swap" aria-controls="viewer map" aria-pressed="false" {
                        "Swap image and map"
                    }
                }
                @if let Some(url) = &image.thumb_2048_url {
                    noscript { img class="still" src=(url) alt=(label); }
                }
                "\n"
                p id="status" class="status" role="status" {} "\n"
                a id="report" class="report" href={ (urls.web) "/report?image_key=" (image.id) } target="_blank" rel="noopener" {
                    "Report / request blurring"
                } "\n"
            }
        };
        embed_response(
            StatusCode::OK,
            document(
                &format!("Image {} · streetlevel", image.id),
                Some(head),
                &format!("style-{}", style.as_str()),
                &main,
            ),
        )
    }
}

fn fallback_page(web_url: &str, image: &EmbedImage, missing: &[&str]) -> Response<Bytes> {
    let what = format!(
        "The interactive viewer is not available: the npm package{} {} {} missing on the server. Its operator installs them with `npm ci` in the repository's web/ folder, or points `--assets-dir` at a node_modules folder that has them.",
        if missing.len() == 1 { "" } else { "s" },
        missing.join(" and "),
        if missing.len() == 1 { "is" } else { "are" },
    );
    let label = format!("Street-level image {}", image.id);
    let main = html! {
        main id="embed" class="embed fallback" aria-label=(label) {
            "\n"
            @if let Some(url) = &image.thumb_2048_url {
                img class="still" src=(url) alt=(label);
            } @else {
                p { "No thumbnail of this image is available either." }
            }
            "\n"
            p class="missing" role="status" { (what) } "\n"
            a id="report" class="report" href={ (web_url) "/report?image_key=" (image.id) } target="_blank" rel="noopener" {
                "Report / request blurring"
            } "\n"
        }
    };
    embed_response(
        StatusCode::OK,
        document(
            &format!("Image {} · streetlevel", image.id),
            None,
            "fallback",
            &main,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_close_its_element_nor_open_a_comment() {
        let hostile = "</script><script>alert(1)</script><!--\"'&<>\u{2028}";
        let value = serde_json::json!({ "name": hostile });
        let mut text = String::new();
        ScriptJson::new(&value).render_to(&mut text);
        for forbidden in ["<", ">", "&", "\u{2028}"] {
            assert!(!text.contains(forbidden), "{forbidden} in {text}");
        }
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, value);
    }
}
