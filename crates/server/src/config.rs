//! Server configuration: where to listen, the public URLs of each surface, the short name,
//! limits and the media signing key.

use std::net::SocketAddr;
use std::time::Duration;

/// Everything the server needs to know that is not data.
///
/// One listener serves every surface; each surface has its own public URL so that a deployment
/// behind a proxy can put them on different hosts. URLs have no trailing slash.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to bind (`127.0.0.1:0` picks a free port).
    pub bind: SocketAddr,
    /// Public root of the entity endpoints, `{base_url}`. `None`: `http://<bound address>`.
    pub base_url: Option<String>,
    /// Public root of the tile endpoints, `{tiles_url}`. `None`: the base URL.
    pub tiles_url: Option<String>,
    /// Public root of the web pages, `{web_url}`. `None`: the base URL.
    pub web_url: Option<String>,
    /// Public root of the signed media URLs. `None`: the base URL.
    pub media_url: Option<String>,
    /// The service's short name: tile sets `{short}1_public`, ...
    pub short_name: String,
    /// The error body's trace member. `None`: `{short}trace_id`. Clients of the original
    /// service use the short name `mly` but read `fbtrace_id`, so the two are set apart.
    pub trace_member: Option<String>,
    /// Key of the HMAC that signs media URLs.
    pub media_key: Vec<u8>,
    /// How long a signed media URL stays valid.
    pub media_url_lifetime: Duration,
    /// Time allowed to read a request's headers; a kept-alive connection idle for this long
    /// between requests is closed too, so an idle client holds a connection slot at most this
    /// long.
    pub header_read_timeout: Duration,
    /// Largest accepted request body in bytes.
    pub max_body_bytes: usize,
    /// Connections served at once; further connections wait in the listen queue, unanswered,
    /// until a served one closes.
    pub max_connections: usize,
    /// Connections served at once from one client address: one client cannot take every
    /// slot of `max_connections`; further connections from it are closed at once.
    pub max_connections_per_address: usize,
    /// How long a request body (other than an upload's, which streams) may take to arrive in
    /// full; a slower one is answered 408 and the connection closed.
    pub body_read_timeout: Duration,
    /// How long a client may take none of a response before the connection is dropped
    /// (between two writes, as nginx's `send_timeout`, not for the whole response).
    pub send_timeout: Duration,
    /// Encoded tiles kept in memory.
    pub tile_cache_entries: usize,
    /// `Cache-Control: max-age` of tiles, seconds.
    pub tile_max_age_seconds: u32,
    /// Answer media kept on an object store with a redirect to a presigned URL of the
    /// object, the same URL for this many seconds (a CDN or a browser keeps it that long);
    /// 0 streams every object through the server.
    pub media_redirect_seconds: u64,
    /// Serve `GET /__panic`, which panics in its handler: lets black-box tests prove that a
    /// panic becomes a 500 error body and the process lives on. Off in production.
    pub debug_panic_route: bool,
    /// The usernames of administrators: they may delete, hide and restore anyone's images.
    pub administrators: Vec<String>,
    /// Proxies whose `X-Forwarded-For` names the client (`client_address.rs`); empty: the
    /// connection's peer is the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Charge the public app's calls (the token the explorer and the embed page publish) per
    /// client address instead of to the app, so one visitor cannot use up every visitor's
    /// quota.
    pub public_app_per_address: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            base_url: None,
            tiles_url: None,
            web_url: None,
            media_url: None,
            short_name: String::from("svc"),
            trace_member: None,
            media_key: Vec::new(),
            media_url_lifetime: Duration::from_secs(30 * 24 * 3600),
            header_read_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_connections: 1024,
            max_connections_per_address: 64,
            body_read_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(30),
            tile_cache_entries: 4096,
            tile_max_age_seconds: 3600,
            media_redirect_seconds: 0,
            debug_panic_route: false,
            administrators: Vec::new(),
            trusted_proxies: Vec::new(),
            public_app_per_address: true,
        }
    }
}

/// The resolved public URLs of the four surfaces, without trailing slashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrls {
    /// `{base_url}`.
    pub base: String,
    /// `{tiles_url}`.
    pub tiles: String,
    /// `{web_url}`.
    pub web: String,
    /// Root of signed media URLs.
    pub media: String,
}

impl Config {
    /// The public URLs once the listener's address is known.
    pub fn public_urls(&self, bound: SocketAddr) -> PublicUrls {
        let trim = |url: &str| url.trim_end_matches('/').to_owned();
        let base = self
            .base_url
            .as_deref()
            .map_or_else(|| format!("http://{bound}"), trim);
        let or_base = |url: Option<&str>| url.map_or_else(|| base.clone(), trim);
        PublicUrls {
            tiles: or_base(self.tiles_url.as_deref()),
            web: or_base(self.web_url.as_deref()),
            media: or_base(self.media_url.as_deref()),
            base: base.clone(),
        }
    }

    /// The coverage tile set name, `{short}1_public`.
    pub fn coverage_tileset(&self) -> String {
        format!("{}1_public", self.short_name)
    }

    /// The computed coverage tile set name, `{short}1_computed_public`.
    pub fn computed_coverage_tileset(&self) -> String {
        format!("{}1_computed_public", self.short_name)
    }

    /// The map feature points tile set name, `{short}_map_feature_point`.
    pub fn point_tileset(&self) -> String {
        format!("{}_map_feature_point", self.short_name)
    }

    /// The traffic sign tile set name, `{short}_map_feature_traffic_sign`.
    pub fn traffic_sign_tileset(&self) -> String {
        format!("{}_map_feature_traffic_sign", self.short_name)
    }

    /// The error body's trace member: the configured one, else `{short}trace_id`.
    pub fn trace_member(&self) -> String {
        self.trace_member
            .clone()
            .unwrap_or_else(|| format!("{}trace_id", self.short_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surfaces_default_to_the_bound_address() {
        let config = Config::default();
        let urls = config.public_urls(SocketAddr::from(([127, 0, 0, 1], 4321)));
        assert_eq!(urls.base, "http://127.0.0.1:4321");
        assert_eq!(urls.tiles, urls.base);
        assert_eq!(urls.media, urls.base);
    }

    #[test]
    fn each_surface_can_have_its_own_url() {
        let config = Config {
            base_url: Some(String::from("https://graph.example/")),
            tiles_url: Some(String::from("https://tiles.example")),
            short_name: String::from("mly"),
            ..Config::default()
        };
        let urls = config.public_urls(SocketAddr::from(([127, 0, 0, 1], 1)));
        assert_eq!(urls.base, "https://graph.example");
        assert_eq!(urls.tiles, "https://tiles.example");
        assert_eq!(urls.web, "https://graph.example");
        assert_eq!(config.coverage_tileset(), "mly1_public");
        assert_eq!(
            config.traffic_sign_tileset(),
            "mly_map_feature_traffic_sign"
        );
        assert_eq!(config.trace_member(), "mlytrace_id");
    }

    #[test]
    fn the_trace_member_can_be_set_apart_from_the_short_name() {
        let config = Config {
            short_name: String::from("mly"),
            trace_member: Some(String::from("fbtrace_id")),
            ..Config::default()
        };
        assert_eq!(config.coverage_tileset(), "mly1_public");
        assert_eq!(config.trace_member(), "fbtrace_id");
    }
}
