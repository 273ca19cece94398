//! The landing page at `/` for browsers: what this server is and where to go next. API
//! clients never see it: the server routes `/` here only for a browser's plain `GET /`.

use bytes::Bytes;
use http::Response;
use http::StatusCode;
use http::request::Parts;
use maud::html;

use crate::Web;
use crate::html;

impl Web {
    pub(crate) fn home(&self, parts: &Parts) -> Response<Bytes> {
        let urls = self.urls(parts);
        let base = &urls.base;
        let tiles = &urls.tiles;
        let tile_set = &self.config.short_name;
        let main = html! {
            p { "This is a streetlevel server: street-level imagery and the map data derived from it, served through version 4 of a well-known crowd-sourced imagery API, so that its official SDK, web viewer and maps work against it unchanged." } "\n"
            ul {
                "\n"
                li { a href="/dashboard" { "Dashboard" } ": sign in, create apps and get their access tokens." } "\n"
                li {
                    "Embeddable viewer: " code { "/embed?image_key=IMAGE_ID&style=split" }
                    ", with the ID of any image (search with " code { (base) "/images?bbox=…" } ")."
                } "\n"
                li {
                    "API base: " code { (base) } ", vector tiles under "
                    code { (tiles) "/maps/vtp/" (tile_set) "1_public/2/{z}/{x}/{y}" }
                    "; every call needs " code { "Authorization: OAuth TOKEN" } " or "
                    code { "access_token=TOKEN" } "."
                } "\n"
                li {
                    "Documentation: " code { "docs/API.md" } " (every endpoint, with examples) and "
                    code { "docs/CLIENTS.md" }
                    " (connecting the official clients) in the streetlevel source."
                } "\n"
            }
        };
        html::html(
            StatusCode::OK,
            html::page("Street-level imagery", None, &main),
        )
    }
}
