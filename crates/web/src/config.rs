//! [`WebConfig`]: the public URLs, the short name and where the npm packages live.

use std::path::PathBuf;

/// What the web surface needs to know that is not data.
///
/// A URL left `None` is derived from the request's `Host` header as `http://<host>`, which
/// suits a server reached directly (tests, `cargo xtask serve`). Behind a proxy, set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfig {
    /// `{web_url}`: where these pages are served. Cookies are `Secure` when it is `https`.
    pub web_url: Option<String>,
    /// `{base_url}`: the entity endpoints the embedded viewer reads.
    pub base_url: Option<String>,
    /// `{tiles_url}`: the vector tiles the embedded map shows.
    pub tiles_url: Option<String>,
    /// Where media (thumbnails) are served, when not at `{base_url}`: the explorer's
    /// Content-Security-Policy allows its origin.
    pub media_url: Option<String>,
    /// The service's short name in tile set names (`{short}1_public`).
    pub short_name: String,
    /// The npm `node_modules` folder whose viewer and map packages are served at `/assets/`.
    /// Default: [`default_assets_dir`].
    pub assets_dir: PathBuf,
    /// A `MapLibre` style drawn under the embed map's coverage (streets and places), e.g. a
    /// keyless public one; `None`: coverage on a plain background. When it cannot be loaded
    /// the map falls back to the plain background.
    pub base_map_style_url: Option<String>,
    /// What a browser's `GET /` shows.
    pub home_page: HomePage,
}

/// What a browser's `GET /` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HomePage {
    /// The public explorer (as at `/explore`).
    #[default]
    Explorer,
    /// A page saying what this server is, with links to the dashboard, the embed page and
    /// the API.
    Links,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            web_url: None,
            base_url: None,
            tiles_url: None,
            media_url: None,
            short_name: String::from("svc"),
            assets_dir: default_assets_dir(),
            base_map_style_url: None,
            home_page: HomePage::default(),
        }
    }
}

/// The folder next to the executable that a release tarball ships the viewer's npm files in
/// (laid out as `node_modules`: `mapillary-js/dist/…`, `maplibre-gl/dist/…`).
pub const RELEASE_ASSETS_DIR: &str = "assets";

/// Where the viewer's npm files are when no `--assets-dir` is given: [`RELEASE_ASSETS_DIR`]
/// next to the running executable when it holds them (an unpacked release, wherever it is),
/// else the source tree's `web/node_modules` as found when this crate was compiled (a build
/// from a clone).
pub fn default_assets_dir() -> PathBuf {
    let beside_executable = std::env::current_exe()
        .ok()
        .and_then(|executable| Some(executable.parent()?.join(RELEASE_ASSETS_DIR)));
    beside_executable
        .filter(|dir| crate::assets::missing_packages(dir).is_empty())
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../web/node_modules"
            ))
        })
}

/// The URLs of one request, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Urls {
    pub(crate) web: String,
    pub(crate) base: String,
    pub(crate) tiles: String,
    pub(crate) media: String,
}

impl WebConfig {
    /// The configured URLs, falling back on `http://<host>`.
    pub(crate) fn urls(&self, host: Option<&str>) -> Urls {
        let derived = host.map_or_else(
            || String::from("http://localhost"),
            |host| format!("http://{host}"),
        );
        let pick = |url: Option<&String>| {
            url.map_or_else(
                || derived.clone(),
                |url| url.trim_end_matches('/').to_owned(),
            )
        };
        Urls {
            web: pick(self.web_url.as_ref()),
            base: pick(self.base_url.as_ref()),
            tiles: pick(self.tiles_url.as_ref()),
            media: pick(self.media_url.as_ref().or(self.base_url.as_ref())),
        }
    }

    /// Whether cookies carry `Secure`: the pages are served over https.
    pub(crate) fn secure_cookies(&self) -> bool {
        self.web_url.as_deref().is_some_and(|url| {
            url.get(..8)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
        })
    }
}
