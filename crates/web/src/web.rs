//! [`Web`]: the pages, and which handler answers each [`Page`] for each method.

use std::sync::Arc;
use streetlevel_import::Uploads;
use streetlevel_ratelimit::SignInGuard;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::header::{ALLOW, HOST};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use streetlevel_auth::{AuthStore, ClientId, RandomSource, User, csrf_token};

use crate::config::Urls;
use crate::form::cookie;
use crate::html;
use crate::{EmbedImages, Registry, WebConfig, WebError};

/// The pages of the web surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// `/` for browsers: the explorer, or what this server is with links
    /// ([`crate::HomePage`]).
    Home,
    /// `/login`: the sign-in form (the official uploader's JSON sign-in is the server's).
    SignIn,
    /// `/logout`.
    SignOut,
    /// `/connect`: the OAuth authorization prompt.
    Connect,
    /// `/dashboard`: the signed-in user's apps and uploads.
    Dashboard,
    /// `/embed`: the embeddable viewer.
    Embed,
    /// `/explore`: the public explorer, map and viewer together.
    Explore,
    /// `/i/<image id>`: an image's short share link, the explorer on that image with a
    /// preview card (Open Graph and Twitter meta) for the sites it is shared on.
    ImageLink(String),
    /// `/report?image_key=<id>`: the public privacy request form.
    Report,
    /// `/dashboard/image?image_key=<id>`: an image's blur, and drawing boxes to blur.
    DashboardImage,
    /// `/assets/<path>`: a file of the viewer's npm packages.
    Asset(String),
}

/// The browser session cookie (the auth crate's session token).
pub(crate) const SESSION_COOKIE: &str = "streetlevel_session";

/// The web surface: sign-in, the authorization page, the dashboard, the embed page and the
/// npm assets. Share one instance between requests.
pub struct Web {
    pub(crate) config: WebConfig,
    pub(crate) auth: Arc<AuthStore>,
    pub(crate) images: Arc<dyn EmbedImages>,
    pub(crate) random: Box<dyn RandomSource>,
    /// The embed page's app and its read-only token.
    pub(crate) embed: (ClientId, String),
    /// Upload jobs, shown on the dashboard when uploads are enabled.
    pub(crate) uploads: Option<Arc<Uploads>>,
    /// Sign-in throttling and the password-hashing queue.
    pub(crate) sign_in: Arc<SignInGuard>,
    /// Deleting, hiding and restoring images from the dashboard, when enabled.
    pub(crate) moderation: Option<Arc<streetlevel_moderation::Moderation>>,
    /// Blur edits and privacy requests, when enabled.
    pub(crate) privacy: Option<Arc<crate::privacy::PrivacyPages>>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Web")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A signed-in browser: its session token and user.
pub(crate) struct Session {
    pub(crate) token: String,
    pub(crate) user: User,
}

impl Session {
    pub(crate) fn csrf(&self) -> String {
        csrf_token(&self.token)
    }
}

impl Web {
    /// The web surface over `auth` (users, sessions, apps and their owners), `registry` (the
    /// embed token) and `images` (the embed page's look-ups). Creates the embed page's app and
    /// token on first start, and hands app owners an older version kept to `auth`.
    pub fn new(
        config: WebConfig,
        auth: Arc<AuthStore>,
        registry: &Registry,
        images: Arc<dyn EmbedImages>,
        random: impl RandomSource + 'static,
    ) -> Result<Self, WebError> {
        registry.hand_owners_to(&auth)?;
        let sign_in = Arc::new(SignInGuard::new(auth.clock()));
        let embed = registry.embed_token(&auth)?;
        Ok(Self {
            config,
            auth,

            images,
            random: Box::new(random),
            embed,
            uploads: None,
            sign_in,
            moderation: None,
            privacy: None,
        })
    }

    /// Shares the sign-in throttle and hashing queue with the other sign-in (the uploader's
    /// `POST /login`), so that both count the same attempts.
    #[must_use]
    pub fn with_sign_in_guard(mut self, guard: Arc<SignInGuard>) -> Self {
        self.sign_in = guard;
        self
    }

    /// Shows the signed-in user's uploads (from the official uploader) on the dashboard.
    #[must_use]
    pub fn with_uploads(mut self, uploads: Arc<Uploads>) -> Self {
        self.uploads = Some(uploads);
        self
    }

    /// The read-only token the embed page and the explorer publish.
    pub fn embed_token(&self) -> &str {
        &self.embed.1
    }

    /// The app whose token the embed page and the explorer publish (every visitor holds it:
    /// the server may charge its calls per visitor).
    pub fn public_app(&self) -> ClientId {
        self.embed.0
    }

    /// The response for a request to `page`. Which path is which page is decided by the
    /// server's route table, the one place that maps paths for the API and the pages alike;
    /// this only picks the handler for the method.
    pub fn page(&self, page: &Page, parts: &Parts, body: &[u8]) -> Response<Bytes> {
        let get = parts.method == Method::GET || parts.method == Method::HEAD;
        let post = parts.method == Method::POST;
        match page {
            Page::Home if get => match self.config.home_page {
                crate::HomePage::Explorer => self.explore(parts),
                crate::HomePage::Links => self.home(parts),
            },
            Page::Explore if get => self.explore(parts),
            Page::ImageLink(id) if get => self.image_link(parts, id),
            Page::SignIn if get => self.login_form(parts),
            Page::SignIn if post => self.login_submit(parts, body),
            Page::SignOut if post => self.logout(parts, body),
            Page::Connect if get => self.connect_prompt(parts),
            Page::Connect if post => self.connect_answer(parts, body),
            Page::Dashboard if get => self.dashboard(parts),
            Page::Dashboard if post => self.dashboard_action(parts, body),
            Page::Embed if get => self.embed(parts),
            Page::Report if get => self.report_form(parts),
            Page::Report if post => self.report_submit(parts, body),
            Page::DashboardImage if get => self.image_page(parts),
            Page::DashboardImage if post => self.image_action(parts, body),
            Page::Asset(path) if get => self.asset(path),
            Page::SignIn
            | Page::Connect
            | Page::Dashboard
            | Page::Report
            | Page::DashboardImage => method_not_allowed("GET, HEAD, POST"),
            Page::SignOut => method_not_allowed("POST"),
            Page::Home | Page::Embed | Page::Explore | Page::ImageLink(_) | Page::Asset(_) => {
                method_not_allowed("GET, HEAD")
            }
        }
    }

    /// The public URLs for this request.
    pub(crate) fn urls(&self, parts: &Parts) -> Urls {
        let host = parts
            .headers
            .get(HOST)
            .and_then(|value| value.to_str().ok())
            .or_else(|| parts.uri.authority().map(http::uri::Authority::as_str))
            .filter(|host| {
                !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
            });
        self.config.urls(host)
    }

    /// The signed-in browser of a request, if its session cookie is live; the 503 page when
    /// the database cannot be reached to tell (not a signed-out browser: that would send the
    /// user to sign in again for nothing).
    pub(crate) fn session(&self, parts: &Parts) -> Result<Option<Session>, html::Unavailable> {
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Ok(None);
        };
        match self.auth.session_user(token) {
            Ok(user) => Ok(Some(Session {
                token: token.to_owned(),
                user,
            })),
            Err(error) if error.is_unavailable() => Err(html::Unavailable),
            Err(_) => Ok(None),
        }
    }

    /// A fresh random value for a cookie: 256 bits, URL-safe.
    pub(crate) fn random_token(&self) -> String {
        let mut bytes = [0_u8; 32];
        self.random.fill(&mut bytes);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The attributes every cookie carries; `Secure` when the pages are served over https.
    pub(crate) fn cookie_attributes(&self, path: &str, max_age_seconds: u64) -> String {
        let secure = if self.config.secure_cookies() {
            "; Secure"
        } else {
            ""
        };
        format!("; Path={path}; Max-Age={max_age_seconds}; HttpOnly; SameSite=Lax{secure}")
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Bytes> {
    let mut response = html::error_page(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method not allowed",
        &format!("This page answers {allow} only."),
    );
    html::set_header(&mut response, ALLOW, allow);
    response
}
