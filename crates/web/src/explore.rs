//! `GET /explore` (and a browser's `GET /` unless [`crate::HomePage::Links`]): the public
//! explorer, a map of the coverage and the image viewer side by side.
//!
//! The shell is rendered here; the modules under `static/explorer/` enhance it: `main.mjs`
//! wires `map.mjs` (`MapLibre` over `/maps/style.json`) and `viewer.mjs` (the adapter over
//! mapillary-js, the only module that knows it). The page reads with the embed app's
//! read-only token, as the embed page does. Without JavaScript it shows the requested
//! image's thumbnail and the links; without the npm packages, the thumbnail and what is
//! missing.

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS,
};
use http::request::Parts;
use http::{Response, StatusCode};
use maud::{Markup, html};
use streetlevel_model::ImageId;

use crate::EmbedImage;
use crate::assets::{MAPILLARY_CSS, MAPILLARY_JS, MAPLIBRE_CSS, MAPLIBRE_JS, missing_packages};
use crate::config::Urls;
use crate::embed::ScriptJson;
use crate::explore_panels::{
    Filters, comparison, feature_panel, filter_form, layer_switcher, legend_and_share, other_dates,
    player_bar, report_dialog, shortcut_sheet, shown_layers,
};
use crate::form::Form;
use crate::html::DOCTYPE;
use crate::share_link::{card_title, preview_card};
use crate::web::Web;

/// The explorer's modules, in the order they are preloaded.
const MODULES: &[&str] = &[
    "main.mjs",
    "viewer.mjs",
    "map.mjs",
    "state.mjs",
    "filters.mjs",
    "player.mjs",
    "legend.mjs",
    "layers.mjs",
    "shortcuts.mjs",
    "features.mjs",
    "dates.mjs",
    "report.mjs",
    "swipe.mjs",
];

/// The origin (`scheme://host[:port]`) of an absolute URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |index| index + 3);
    url[after_scheme..]
        .find('/')
        .map_or(url, |index| &url[..after_scheme + index])
}

/// The explorer reads from this server's own origins only: the API, tiles and media URLs
/// (the same origin unless configured apart), and anything only when an operator set a base
/// map (whose style names hosts of its own). mapillary-js evaluates strings as code, hence
/// `'unsafe-eval'`; no inline script runs and no style is inline in the markup.
fn policy(urls: &Urls, base_map: bool) -> String {
    let mut origins = vec!["'self'"];
    for url in [&urls.base, &urls.tiles, &urls.media, &urls.web] {
        let origin = origin(url);
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    if base_map {
        origins.push("*");
    }
    let origins = origins.join(" ");
    format!(
        "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self'; \
         img-src {origins} data: blob:; connect-src {origins} data: blob:; \
         worker-src 'self' blob:; child-src 'self' blob:; frame-ancestors 'none'; \
         base-uri 'none'; form-action 'self'"
    )
}

fn response(status: StatusCode, policy: &str, body: Markup) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.into_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if let Ok(value) = HeaderValue::from_str(policy) {
        headers.insert(CONTENT_SECURITY_POLICY, value);
    }
    response
}

impl Web {
    pub(crate) fn explore(&self, parts: &Parts) -> Response<Bytes> {
        let query = Form::parse(parts.uri.query().unwrap_or(""));
        let asked = query.get("image").filter(|key| !key.is_empty());
        self.explorer(parts, &query, asked, false)
    }

    /// The explorer with the state `query`, on the image `asked` if any (404 when there is no
    /// public image by that ID), with the image's preview card when `card` (`/i/<id>`).
    pub(crate) fn explorer(
        &self,
        parts: &Parts,
        query: &Form,
        asked: Option<&str>,
        card: bool,
    ) -> Response<Bytes> {
        let image = asked
            .and_then(|key| key.parse::<ImageId>().ok())
            .and_then(|id| self.images.embed_image(id));
        let urls = self.urls(parts);
        let missing = missing_packages(&self.config.assets_dir);
        let notice = match (asked, &image) {
            (Some(key), None) => Some(format!("There is no image with the ID {key}.")),
            _ if !missing.is_empty() => Some(format!(
                "The interactive map and viewer are not available: the npm package{} {} {} missing on the server (`npm ci` in the repository's web/ folder).",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(" and "),
                if missing.len() == 1 { "is" } else { "are" },
            )),
            _ => None,
        };
        let status = if asked.is_some() && image.is_none() {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        // Who is signed in, so that an owner or an administrator gets the image's management
        // links (the dashboard checks again).
        let signed_in = self.session(parts).ok().flatten().map(|session| {
            serde_json::json!({
                "username": session.user.username,
                "administrator": self.is_administrator(&session),
            })
        });
        let config = serde_json::json!({
            "baseUrl": urls.base,
            "tilesUrl": urls.tiles,
            "webUrl": urls.web,
            "accessToken": self.embed_token(),
            "baseMapStyle": self.config.base_map_style_url,
            "image": image.as_ref().map(|image| serde_json::json!({
                "id": image.id.to_string(),
                "lngLat": [image.longitude, image.latitude],
            })),
            "extent": self.images.extent(),
            "signedIn": signed_in,
        });
        let interactive = missing.is_empty();
        let image_key = image.as_ref().map(|image| image.id.to_string());
        let panels = (
            html! {
                (filter_form(&Filters::of(query), image_key.as_deref())) "\n"
                (layer_switcher(&shown_layers(query), image_key.as_deref()))
            },
            player_bar(query.get("speed").unwrap_or("")),
        );
        let head = match (&image, card) {
            (Some(image), true) => (card_title(image), preview_card(image, &urls)),
            _ => (String::from("Explore street-level imagery"), html! {}),
        };
        let body = Self::explorer_document(
            &urls,
            image.as_ref(),
            notice.as_deref(),
            interactive,
            &config,
            &head,
            &panels,
        );
        response(
            status,
            &policy(&urls, self.config.base_map_style_url.is_some()),
            body,
        )
    }

    fn explorer_document(
        urls: &Urls,
        image: Option<&EmbedImage>,
        notice: Option<&str>,
        interactive: bool,
        config: &serde_json::Value,
        (title, card): &(String, Markup),
        (filters, player): &(Markup, Markup),
    ) -> Markup {
        let thumb = image.and_then(|image| image.thumb_2048_url.as_deref());
        let alt = image.map_or_else(String::new, |image| {
            format!("Street-level image {}", image.id)
        });
        html! {
            (DOCTYPE)
            html lang="en" {
                "\n"
                head {
                    "\n"
                    meta charset="utf-8"; "\n"
                    meta name="viewport" content="width=device-width, initial-scale=1"; "\n"
                    title { (title) " · streetlevel" } "\n"
                    (card)
                    @if let Some(url) = thumb {
                        link rel="preload" as="image" href=(url); "\n"
                    }
                    @if interactive {
                        link rel="stylesheet" href={ "/assets/" (MAPILLARY_CSS) }; "\n"
                        link rel="stylesheet" href={ "/assets/" (MAPLIBRE_CSS) }; "\n"
                        link rel="modulepreload" href={ "/assets/" (MAPLIBRE_JS) }; "\n"
                        @for module in MODULES {
                            link rel="modulepreload" href={ "/assets/streetlevel/explorer/" (module) }; "\n"
                        }
                    }
                    link rel="stylesheet" href="/assets/streetlevel/explorer/explorer.css"; "\n"
                    @if interactive {
                        script src={ "/assets/" (MAPILLARY_JS) } {} "\n"
                        script type="application/json" id="explorer-config" { (ScriptJson::new(config)) } "\n"
                        script type="module" src="/assets/streetlevel/explorer/main.mjs" {} "\n"
                    }
                } "\n"
                body {
                    "\n"
                    a class="skip" href="#viewer-pane" { "Skip to the image" } "\n"
                    header class="bar" {
                        "\n"
                        h1 { a href="/explore" { "streetlevel" } " " span class="subtitle" { "explorer" } } "\n"
                        div class="tools" role="group" aria-label="Layout" {
                            "\n"
                            button id="swap" type="button" aria-pressed="false" { "Map large" } "\n"
                            label for="split" { "Map size" } "\n"
                            input id="split" type="range" min="20" max="80" step="5" value="40"; "\n"
                        } "\n"
                        (filters) "\n"
                        @if interactive { (legend_and_share()) "\n" (shortcut_sheet()) "\n" }
                        nav aria-label="Site" {
                            a href="/dashboard" { "Dashboard" } "\n"
                        } "\n"
                    } "\n"
                    main id="explorer" class="layout" {
                        "\n"
                        section id="viewer-pane" class="pane viewer" aria-label="Image viewer" tabindex="-1" {
                            "\n"
                            @if let Some(url) = thumb {
                                img id="placeholder" class="placeholder" src=(url) alt=(alt); "\n"
                            } @else {
                                p id="hint" class="hint" { "Choose an image on the map: click a point or a line, or focus the map and press Enter to show the image nearest its centre." } "\n"
                            }
                            div id="viewer" class="viewer-canvas" {} "\n"
                            @if interactive { (comparison()) "\n" }
                        } "\n"
                        section id="map-pane" class="pane map" aria-label="Map of the imagery" {
                            "\n"
                            div id="map" class="map-canvas" {} "\n"
                            div class="crosshair" aria-hidden="true" {} "\n"
                            p id="count" class="count" {} "\n"
                            button id="pick" type="button" class="pick" { "Show the image nearest the map centre" } "\n"
                            @if interactive { (feature_panel()) "\n" }
                        } "\n"
                    } "\n"
                    footer class="status-bar" {
                        "\n"
                        (player) "\n"
                        p id="announce" class="announce" role="status" aria-live="polite" {
                            @if let Some(message) = notice { (message) }
                        } "\n"
                        @if interactive { (other_dates()) "\n" }
                        a id="report" href={ (urls.web) "/report" @if let Some(image) = image { "?image_key=" (image.id) } } hidden[image.is_none()] {
                            "Report / request blurring"
                        } "\n"
                        @if interactive { (report_dialog()) "\n" }
                    } "\n"
                } "\n"
            } "\n"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_of_urls() {
        assert_eq!(origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(
            origin("https://media.example/a/b?c"),
            "https://media.example"
        );
    }

    #[test]
    fn the_policy_names_only_the_servers_origins() {
        let urls = Urls {
            web: String::from("https://www.example"),
            base: String::from("https://api.example"),
            tiles: String::from("https://api.example"),
            media: String::from("https://media.example/m"),
        };
        let policy = policy(&urls, false);
        assert!(policy.contains(
            "connect-src 'self' https://api.example https://media.example https://www.example data: blob:"
        ));
        assert!(policy.contains("frame-ancestors 'none'"));
        assert!(!policy.contains('*'));
        assert!(super::policy(&urls, true).contains(" * "));
    }
}
