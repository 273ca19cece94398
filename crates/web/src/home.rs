//! The landing page at `/` for browsers: what this server is and where to go next. API
//! clients never see it: the server routes `/` here only for a browser's plain `GET /`.

use bytes::Bytes;
use http::Response;
use http::StatusCode;
use http::request::Parts;

use crate::Web;
use crate::html::{self, escape};

impl Web {
    pub(crate) fn home(&self, parts: &Parts) -> Response<Bytes> {
        let urls = self.urls(parts);
        let base = escape(&urls.base);
        let tiles = escape(&urls.tiles);
        let tile_set = escape(&self.config.short_name);
        let main = format!(
            r#"<p>This is a streetlevel server: street-level imagery and the map data derived from it, served through version 4 of a well-known crowd-sourced imagery API, so that its official SDK, web viewer and maps work against it unchanged.</p>
<ul>
<li><a href="/dashboard">Dashboard</a>: sign in, create apps and get their access tokens.</li>
<li>Embeddable viewer: <code>/embed?image_key=IMAGE_ID&amp;style=split</code>, with the ID of any image (search with <code>{base}/images?bbox=…</code>).</li>
<li>API base: <code>{base}</code>, vector tiles under <code>{tiles}/maps/vtp/{tile_set}1_public/2/{{z}}/{{x}}/{{y}}</code>; every call needs <code>Authorization: OAuth TOKEN</code> or <code>access_token=TOKEN</code>.</li>
<li>Documentation: <code>docs/API.md</code> (every endpoint, with examples) and <code>docs/CLIENTS.md</code> (connecting the official clients) in the streetlevel source.</li>
</ul>"#
        );
        html::html(
            StatusCode::OK,
            html::page("Street-level imagery", None, &main),
        )
    }
}
