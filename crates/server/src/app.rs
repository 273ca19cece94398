//! The application: one request in, one response out. Assigns the request ID (also the error
//! trace member), answers preflights, routes, authenticates, charges the quota, runs the
//! handler with panics caught, and maps errors to the Graph-style body.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, TryLockError};
use std::time::Instant;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use http::request::Parts;
use http::{Method, Response, StatusCode};

use streetlevel_ratelimit::Class;
use streetlevel_store::Store;
use streetlevel_web::{Page, Web};

use streetlevel_model::Clock;

use crate::endpoints::{self, Json, Links};
use crate::media::{MediaLinks, MediaObject, MediaSource};
use crate::query::Query;
use crate::reply::{self, Reply};
use crate::route::Route;
use crate::takedown::Action;
use crate::tilejson;
use crate::tiles::{self, TileCache, Tileset};
use crate::{Config, Error, PublicUrls};

mod media_route;

/// Who is calling: the app a token belongs to (and the user, for user tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The app's client ID; quotas are charged to it.
    pub app_id: u64,
    /// The user, for user access tokens.
    pub user_id: Option<u64>,
    /// Whether the token is a user's with the `upload` scope.
    pub may_upload: bool,
    /// Whether the token is a user's with the `write` scope (taking images down).
    pub may_write: bool,
    /// Whether the token has the `blur` scope (`POST /blur/`).
    pub may_blur: bool,
}

/// A successful sign-in of the official uploader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadLogin {
    /// The new user access token (scopes `read` and `upload`).
    pub access_token: String,
    /// The signed-in user.
    pub user_id: u64,
    /// Their username.
    pub username: String,
}

/// Token checks and the token exchange (spec 5), implemented over the auth crate.
pub trait Authenticator: Send + Sync {
    /// The caller of a request to the entity or tile surfaces, from `?access_token=` or
    /// `Authorization: OAuth|Bearer`; [`Error::Unauthorized`] when missing or invalid.
    fn authenticate(&self, parts: &Parts) -> Result<Caller, Error>;

    /// [`Authenticator::authenticate`] when it needs no database read (a request without a
    /// usable token, or a token found valid a moment ago); `None` when it does, so that the
    /// caller runs the check off the async workers.
    fn authenticate_cached(&self, _parts: &Parts) -> Option<Result<Caller, Error>> {
        None
    }

    /// `POST /token` (spec 5.4): the JSON response body.
    fn exchange_token(&self, parts: &Parts, body: &Bytes) -> Result<serde_json::Value, Error>;

    /// The uploader's `POST /login`: the request carries an app's client token, the body an
    /// email address (or username) and a password.
    fn upload_login(
        &self,
        parts: &Parts,
        login: &str,
        password: &str,
    ) -> Result<UploadLogin, Error>;

    /// The username of a user, if the user exists.
    fn username(&self, user_id: u64) -> Result<Option<String>, Error>;
}

/// The collaborators of the server.
pub struct Services {
    /// The entities, shared with writers.
    pub store: Arc<RwLock<Store>>,
    /// Token checks.
    pub auth: Arc<dyn Authenticator>,
    /// Per-app quotas.
    pub rate_limits: Arc<streetlevel_ratelimit::RateLimits>,
    /// Where media bytes come from.
    pub media: Arc<dyn MediaSource>,
    /// Where thumbnails and pyramid tiles made on request are kept, at their keys of the
    /// media layout.
    pub kept_media: streetlevel_media::MediaStore,
    /// The service's clock.
    pub clock: Arc<dyn Clock>,
    /// Signs and checks media URLs (shared with the embed page).
    pub media_links: Arc<MediaLinks>,
    /// The web pages, if any.
    pub web: Option<Arc<Web>>,
    /// Upload sessions and the processing queue, if uploads are enabled.
    pub uploads: Option<Arc<streetlevel_import::Uploads>>,
    /// Takedowns: who may act on which images, erasing, hiding, restoring (shared with the
    /// web pages).
    pub moderation: Arc<streetlevel_moderation::Moderation>,
    /// Sign-in throttling and the password-hashing queue (shared with the web pages).
    pub sign_in: Arc<streetlevel_ratelimit::SignInGuard>,
    /// What `POST /blur/` blurs with, if blurring is on and its model usable.
    pub blurrer: Option<Arc<dyn streetlevel_blur::Blurrer>>,
    /// Blur edits and privacy requests (shared with the web pages), if enabled.
    pub privacy: Option<Arc<streetlevel_import::Privacy>>,
}

/// The request-answering core, shared by all connections.
pub struct App {
    config: Config,
    urls: PublicUrls,
    pub(crate) services: Services,
    trace_member: String,
    request_seed: u64,
    request_counter: AtomicU64,
    tile_cache: Arc<TileCache>,
}

impl App {
    /// The app for a server bound at `bound`.
    pub fn new(
        config: Config,
        services: Services,
        bound: std::net::SocketAddr,
    ) -> Result<App, Error> {
        let urls = config.public_urls(bound);
        let trace_member = config.trace_member();
        let tile_cache = Arc::new(TileCache::new(
            Arc::clone(&services.store),
            config.tile_cache_entries,
        ));
        tile_cache.keep_warm();
        let request_seed = services
            .clock
            .now_unix_seconds()
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(std::process::id());
        Ok(App {
            config,
            urls,
            services,
            trace_member,
            request_seed,
            request_counter: AtomicU64::new(0),
            tile_cache,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The public URLs.
    pub fn urls(&self) -> &PublicUrls {
        &self.urls
    }

    fn next_request_id(&self) -> String {
        let count = self.request_counter.fetch_add(1, Ordering::Relaxed);
        request_id(self.request_seed, count)
    }

    /// The whole HTTP/1.1 answer to a connection refused because the server is out of
    /// connection slots or descriptors: 503 with `Retry-After` and the error body every other
    /// refusal has ([`Error::Busy`]), closing the connection.
    pub(crate) fn overloaded_response(&self) -> Bytes {
        let request_id = self.next_request_id();
        let error = Error::Busy;
        let body = error.to_body(&self.trace_member, &request_id).to_string();
        let status = error.status();
        tracing::debug!(
            request_id,
            "a connection refused: the server is at capacity"
        );
        Bytes::from(format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
             retry-after: {}\r\ncache-control: no-store\r\n\
             access-control-allow-origin: *\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            error.retry_after().unwrap_or(1),
            body.len()
        ))
    }

    /// Answers one request whose body has been read (or failed to be).
    pub async fn respond_async(
        self: &Arc<Self>,
        parts: Parts,
        body: Result<Bytes, Error>,
    ) -> Response<Bytes> {
        let started = Instant::now();
        let request_id = self.next_request_id();
        if parts.method == Method::OPTIONS {
            return reply::preflight(&parts.headers);
        }
        let route = Route::of(parts.uri.path());
        let class = route.class();
        let result = match body {
            Ok(body) => self.dispatch(&parts, route, body).await,
            Err(error) => Err(error),
        };
        let result = match result {
            Ok(Dispatched::Reply(reply)) => Ok(Dispatched::Reply(
                reply::compress_large(&parts.headers, reply).await,
            )),
            other => other,
        };
        self.complete(&parts, class, &request_id, started, result)
    }

    /// Answers `POST /upload/<key>`, whose body streams to disk instead of being read first.
    pub async fn respond_upload(
        self: &Arc<Self>,
        parts: Parts,
        key: String,
        body: hyper::body::Incoming,
    ) -> Response<Bytes> {
        let started = Instant::now();
        let request_id = self.next_request_id();
        let result = self
            .receive_upload(&parts, key, body)
            .await
            .map(Dispatched::Reply);
        self.complete(&parts, "upload", &request_id, started, result)
    }

    /// The response for a handler's result: errors mapped, CORS and caching headers added,
    /// and the request logged and counted, once.
    fn complete(
        &self,
        parts: &Parts,
        class: &'static str,
        request_id: &str,
        started: Instant,
        result: Result<Dispatched, Error>,
    ) -> Response<Bytes> {
        let is_head = parts.method == Method::HEAD;
        let response = match result {
            Ok(Dispatched::Reply(reply)) => {
                reply::finish(&parts.headers, is_head, reply, request_id)
            }
            Ok(Dispatched::Response(mut response)) => {
                reply::add_cors(response.headers_mut());
                response
            }
            Err(error) => {
                // A 503 (database unreachable, server busy) is an outage or a peak the client
                // rides out with `Retry-After`, not a bug.
                if error.status() == StatusCode::SERVICE_UNAVAILABLE {
                    tracing::warn!(request_id, %error, "request refused for now");
                } else if error.status().is_server_error() {
                    tracing::error!(request_id, %error, "request failed");
                }
                let mut response = reply::finish(
                    &parts.headers,
                    is_head,
                    self.error_reply(&error, request_id),
                    request_id,
                );
                if let Error::MethodNotAllowed(_) = error {
                    let allow = Route::of(parts.uri.path()).allow_header();
                    let headers = response.headers_mut();
                    headers.insert(http::header::ALLOW, HeaderValue::from_static(allow));
                }
                response
            }
        };
        let elapsed = started.elapsed();
        tracing::info!(
            request_id,
            class,
            method = %parts.method,
            path = parts.uri.path(),
            status = response.status().as_u16(),
            micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            "request"
        );
        crate::metrics::request(class, response.status(), elapsed);
        response
    }

    /// The reply for an error: the one mapping from [`Error`] to status, body and headers.
    fn error_reply(&self, error: &Error, request_id: &str) -> Reply {
        let mut reply = Reply::json_with_status(
            error.status(),
            &error.to_body(&self.trace_member, request_id),
        );
        reply.cache_control = Some(Cow::Borrowed("no-store"));
        if let Some(seconds) = error.retry_after() {
            reply
                .headers
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Error::RateLimited(rejection) = error
            && let Ok(usage) = HeaderValue::from_str(&rejection.app_usage_header())
        {
            reply
                .headers
                .insert(HeaderName::from_static("x-app-usage"), usage);
        }
        reply
    }

    /// `GET /privacy_requests` and `POST /privacy_requests/<id>`: they read and write the
    /// database, and applying a blur renders a picture, so they run off the async workers.
    async fn privacy_route(
        self: &Arc<Self>,
        parts: &Parts,
        route: Route,
        query: Query,
    ) -> Result<Dispatched, Error> {
        let app = Arc::clone(self);
        let parts = parts.clone();
        run_blocking(move || match &route {
            Route::PrivacyRequest(raw) => app.resolve_privacy_request(&parts, raw, &query),
            _ => app.privacy_requests(&parts, &query),
        })
        .await
        .map(Dispatched::Reply)
    }

    async fn dispatch(
        self: &Arc<Self>,
        parts: &Parts,
        route: Route,
        body: Bytes,
    ) -> Result<Dispatched, Error> {
        if !route.allows(&parts.method) {
            return Err(Error::MethodNotAllowed(parts.method.to_string()));
        }
        let query = Query::parse(parts.uri.query().unwrap_or(""))?;
        match route {
            Route::Multiple if self.services.web.is_some() && is_browser_home(parts) => {
                self.web_page(Page::Home, parts, body).await
            }
            Route::Health => Ok(Dispatched::Reply(probe(StatusCode::OK, "ok", None))),
            Route::OpenApi => Ok(Dispatched::Reply(crate::openapi::reply())),
            Route::Ready => {
                let app = Arc::clone(self);
                run_blocking(move || Ok(app.readiness()))
                    .await
                    .map(Dispatched::Reply)
            }
            Route::Media => {
                // `GET` and `HEAD` are streamed by `respond_media`; nothing else is allowed.
                Err(Error::MethodNotAllowed(parts.method.to_string()))
            }
            Route::Token => {
                let app = Arc::clone(self);
                let parts = parts.clone();
                run_blocking(move || {
                    let value = app.services.auth.exchange_token(&parts, &body)?;
                    let mut reply = Reply::json(&value);
                    reply.cache_control = Some(Cow::Borrowed("no-store"));
                    Ok(reply)
                })
                .await
                .map(Dispatched::Reply)
            }
            Route::Blur => {
                // Decoding, detecting and encoding a photo takes a core for a second or more.
                let app = Arc::clone(self);
                let parts = parts.clone();
                run_blocking(move || app.blur(&parts, body))
                    .await
                    .map(Dispatched::Reply)
            }
            Route::Login if parts.method == Method::POST && is_json(parts) => {
                // The uploader's sign-in hashes a password (argon2): off the async workers.
                let app = Arc::clone(self);
                let parts = parts.clone();
                run_blocking(move || app.upload_login(&parts, &body))
                    .await
                    .map(Dispatched::Reply)
            }
            Route::Me
            | Route::Upload(_)
            | Route::FinishUpload
            | Route::Logging
            | Route::Uploads => {
                // These read and write SQLite and the upload files.
                let app = Arc::clone(self);
                let parts = parts.clone();
                run_blocking(move || match &route {
                    Route::Me => app.me(&parts),
                    Route::Upload(key) if parts.method != Method::POST => {
                        app.upload_offset(&parts, key)
                    }
                    Route::FinishUpload => app.finish_upload(&parts, &body),
                    Route::Logging => app.logging(&parts),
                    Route::Uploads => app.upload_status(&parts),
                    // Upload bodies stream to disk through `respond_upload`.
                    _ => Err(Error::MethodNotAllowed(parts.method.to_string())),
                })
                .await
                .map(Dispatched::Reply)
            }
            Route::Entity(_) | Route::Other if parts.method == Method::DELETE => {
                self.takedown_route(parts, route).await
            }
            Route::Visibility { .. } | Route::UploadImages(_) => {
                self.takedown_route(parts, route).await
            }
            Route::PrivacyRequests | Route::PrivacyRequest(_) => {
                self.privacy_route(parts, route, query).await
            }
            Route::Login => self.web_page(Page::SignIn, parts, body).await,
            Route::Page(page) => self.web_page(page, parts, body).await,
            Route::DebugPanic if self.config.debug_panic_route => {
                catch(requested_panic).map(Dispatched::Reply)
            }
            Route::DebugPanic | Route::Other => {
                Err(Error::UnknownPath(parts.uri.path().to_owned()))
            }
            Route::TileJson(_) | Route::Catalog | Route::Style => {
                let app = Arc::clone(self);
                let parts = parts.clone();
                run_blocking(move || app.describe_tiles(&route, &parts))
                    .await
                    .map(Dispatched::Reply)
            }
            Route::Tile { .. } => self.tile(&route, parts).await,
            route => self.api_route(route, parts, query).await,
        }
    }

    /// An entity, search or detections request. The token check and the store's read lock
    /// run here when they wait for nothing (a token found valid a moment ago, a lock no
    /// writer holds or waits for); otherwise they run off the async workers, so that a
    /// database read or an import's write never stalls the requests sharing this worker.
    async fn api_route(
        self: &Arc<Self>,
        route: Route,
        parts: &Parts,
        query: Query,
    ) -> Result<Dispatched, Error> {
        let usage = self.admit_without_waiting(&route, parts).await?;
        let inline = match self.services.store.try_read() {
            Ok(store) => Some(catch(|| self.answer(&route, parts, &query, usage, store))),
            Err(TryLockError::Poisoned(poisoned)) => Some(catch(|| {
                self.answer(&route, parts, &query, usage, poisoned.into_inner())
            })),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(reply) = inline {
            return reply.map(Dispatched::Reply);
        }
        let (app, parts) = (Arc::clone(self), parts.clone());
        run_blocking(move || {
            let store = app
                .services
                .store
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            app.answer(&route, &parts, &query, usage, store)
        })
        .await
        .map(Dispatched::Reply)
    }

    /// A takedown (erasing, hiding, restoring) the route names, off the async workers: it
    /// writes the database and removes files.
    async fn takedown_route(
        self: &Arc<Self>,
        parts: &Parts,
        route: Route,
    ) -> Result<Dispatched, Error> {
        let app = Arc::clone(self);
        let parts = parts.clone();
        run_blocking(move || match route {
            Route::Entity(raw) => app.takedown(&parts, &raw, Action::Delete),
            Route::Visibility { target, hidden } => {
                let action = if hidden {
                    Action::Hide
                } else {
                    Action::Restore
                };
                app.takedown(&parts, &target, action)
            }
            Route::UploadImages(job) => app.takedown_upload(&parts, &job),
            _ => match crate::route::deletion_target(parts.uri.path()) {
                Some(raw) => app.takedown(&parts, raw, Action::Delete),
                None => Err(Error::UnknownPath(parts.uri.path().to_owned())),
            },
        })
        .await
        .map(Dispatched::Reply)
    }

    /// A tile: hits answer here; rendering runs on blocking threads inside the cache.
    async fn tile(self: &Arc<Self>, route: &Route, parts: &Parts) -> Result<Dispatched, Error> {
        let Route::Tile { tileset, z, x, y } = route else {
            return Err(Error::UnknownPath(parts.uri.path().to_owned()));
        };
        // Rendering runs on blocking threads inside the cache; hits answer here.
        let usage = self.admit_without_waiting(route, parts).await?;
        let tileset = Tileset::from_name(&self.config, tileset)
            .ok_or_else(|| Error::UnknownTileset(tileset.clone()))?;
        let tile_id = tiles::parse_tile(z, x, y)?;
        let tile = self.tile_cache.tile(tileset, tile_id).await?;
        let mut reply = self
            .tile_cache
            .reply(&tile, &parts.headers, self.config.tile_max_age_seconds)
            .await;
        reply.headers.insert(
            HeaderName::from_static("x-app-usage"),
            app_usage_value(usage),
        );
        if let Ok(keys) = HeaderValue::from_str(&crate::takedown::tile_surrogate_keys(tile_id)) {
            reply
                .headers
                .insert(HeaderName::from_static("surrogate-key"), keys);
        }
        Ok(Dispatched::Reply(reply))
    }

    async fn web_page(&self, page: Page, parts: &Parts, body: Bytes) -> Result<Dispatched, Error> {
        let Some(web) = self.services.web.clone() else {
            return Err(Error::UnknownPath(parts.uri.path().to_owned()));
        };
        // Pages hash passwords (argon2) and read SQLite: off the async workers, so a burst of
        // sign-ins cannot stall the API.
        let owned_parts = parts.clone();
        tokio::task::spawn_blocking(move || web.page(&page, &owned_parts, &body))
            .await
            .map(Dispatched::Response)
            .map_err(|error| Error::Internal(format!("web page failed: {error}")))
    }

    /// [`App::admit`], on this async worker when neither the token nor the quota needs a
    /// wait (the token decided without the database, the quota held in this process), else
    /// off the async workers.
    async fn admit_without_waiting(
        self: &Arc<Self>,
        route: &Route,
        parts: &Parts,
    ) -> Result<streetlevel_ratelimit::Usage, Error> {
        let client = client_ip(parts);
        if let Some(caller) = self.services.auth.authenticate_cached(parts) {
            if !self.services.rate_limits.is_shared() {
                return self.admit_caller(route, caller, client);
            }
            // A quota in Redis is a network round trip: never on an async worker.
            let (app, route) = (Arc::clone(self), route.clone());
            return run_blocking(move || app.admit_caller(&route, caller, client)).await;
        }
        let (app, route, parts) = (Arc::clone(self), route.clone(), parts.clone());
        run_blocking(move || app.admit(&route, &parts)).await
    }

    /// Authenticates the caller and charges the route's quota.
    fn admit(&self, route: &Route, parts: &Parts) -> Result<streetlevel_ratelimit::Usage, Error> {
        self.admit_caller(
            route,
            self.services.auth.authenticate(parts),
            client_ip(parts),
        )
    }

    /// Who pays for a call of `caller`'s app from `client`: the app, or, for the public app
    /// (the token the explorer and the embed page publish) with `public_app_per_address`,
    /// that app's visitor at `client` alone.
    fn payer(&self, caller: &Caller, client: Option<std::net::IpAddr>) -> u64 {
        let public = self
            .services
            .web
            .as_ref()
            .is_some_and(|web| web.public_app().0 == caller.app_id);
        match client {
            Some(address) if public && self.config.public_app_per_address => {
                streetlevel_ratelimit::per_address_key(caller.app_id, address)
            }
            _ => caller.app_id,
        }
    }

    /// Charges the route's quota to `caller`, the token check's outcome, calling from
    /// `client`.
    fn admit_caller(
        &self,
        route: &Route,
        caller: Result<Caller, Error>,
        client: Option<std::net::IpAddr>,
    ) -> Result<streetlevel_ratelimit::Usage, Error> {
        let result = match &caller {
            Ok(_) => "ok",
            Err(Error::Unavailable(_)) => "unavailable",
            Err(_) => "refused",
        };
        metrics::counter!(crate::metrics::TOKEN_CHECKS, "result" => result).increment(1);
        let caller = caller?;
        let class = match route {
            Route::Tile { .. } => Class::Tiles,
            Route::SearchImages | Route::SearchMapFeatures | Route::SearchDetections => {
                Class::Search
            }
            _ => Class::Entity,
        };
        self.services
            .rate_limits
            .check(self.payer(&caller, client), class)
            .map_err(|rejection| {
                metrics::counter!(crate::metrics::RATE_LIMITED, "class" => quota_class(class))
                    .increment(1);
                Error::RateLimited(rejection)
            })
    }

    /// The document of an entity, search or detections request, read from `store`.
    fn read_answer(
        &self,
        route: &Route,
        parts: &Parts,
        query: &Query,
        store: &Store,
    ) -> Result<Json, Error> {
        Ok(match route {
            Route::Entity(id) => endpoints::entity(store, self, id, query)?,
            Route::DetectionsOf(id) => {
                Json::Value(endpoints::detections_of(store, self, id, query)?)
            }
            Route::ImageTiles(id) => Json::Value(endpoints::image_tiles(store, self, id, query)?),
            Route::Multiple => Json::Value(endpoints::multiple(store, self, query)?),
            Route::ImageIds => Json::Value(endpoints::image_ids(store, query)?),
            Route::SearchImages => Json::Value(endpoints::search_images(store, self, query)?),
            Route::SearchMapFeatures => {
                Json::Value(endpoints::search_map_features(store, self, query)?)
            }
            Route::SearchDetections => {
                Json::Value(endpoints::search_detections(store, self, query)?)
            }
            _ => {
                return Err(Error::UnknownPath(parts.uri.path().to_owned()));
            }
        })
    }

    /// The answer of an admitted entity, search or detections request: read under the
    /// store's read lock `store`, which is released before the body is made.
    fn answer(
        &self,
        route: &Route,
        parts: &Parts,
        query: &Query,
        usage: streetlevel_ratelimit::Usage,
        store: std::sync::RwLockReadGuard<'_, Store>,
    ) -> Result<Reply, Error> {
        let value = self.read_answer(route, parts, query, &store);
        drop(store);
        let mut reply = match value? {
            Json::Value(value) => Reply::json(&value),
            Json::Written(body) => Reply::json_bytes(StatusCode::OK, body),
        };
        reply.headers.insert(
            HeaderName::from_static("x-app-usage"),
            app_usage_value(usage),
        );
        Ok(reply)
    }

    /// `TileJSON`, the catalog and the style: a token is needed (it goes into every URL they
    /// hand out, as `MapLibre` expects) but no quota is charged; they are small and fixed.
    fn describe_tiles(&self, route: &Route, parts: &Parts) -> Result<Reply, Error> {
        self.services.auth.authenticate(parts)?;
        // Authenticated, so the request carries exactly one token.
        let token = streetlevel_auth::request_token(parts).unwrap_or_default();
        let value = match route {
            Route::Catalog => tilejson::catalog(&self.urls, &self.config, &token),
            Route::Style => tilejson::style(&self.urls, &self.config, &token),
            Route::TileJson(name) => {
                let tileset = Tileset::from_name(&self.config, name)
                    .ok_or_else(|| Error::UnknownTileset(name.clone()))?;
                let store = self
                    .services
                    .store
                    .read()
                    .unwrap_or_else(PoisonError::into_inner);
                tilejson::tilejson(&store, &self.urls, &self.config, tileset, &token)
            }
            _ => return Err(Error::UnknownPath(parts.uri.path().to_owned())),
        };
        let mut reply = Reply::json(&value);
        reply.cache_control = Some(Cow::Borrowed("private, no-cache"));
        Ok(reply)
    }

    /// The signed URL of a media object.
    pub fn media_url(&self, object: &MediaObject) -> String {
        self.services.media_links.url(object)
    }
}

/// The ID of the request numbered `count`: unique per process and readable in logs; not a
/// secret. `A`, the seed's low 48 bits in 12 hexadecimal digits, then the count in at least
/// 8: `format!("A{:012x}{count:08x}", seed & 0xFFFF_FFFF_FFFF)`, written without the
/// formatting machinery.
fn request_id(seed: u64, count: u64) -> String {
    let mut id = String::with_capacity(1 + 12 + 16);
    id.push('A');
    push_hex_digits(&mut id, seed & 0xFFFF_FFFF_FFFF, 12);
    let count_digits = (64 - count.leading_zeros()).div_ceil(4).max(8);
    push_hex_digits(&mut id, count, count_digits);
    id
}

/// The lowest `digits` hexadecimal digits of `value`, lower case, appended to `text`.
fn push_hex_digits(text: &mut String, value: u64, digits: u32) {
    for digit in (0..digits).rev() {
        let nibble = (value >> (4 * digit)) & 0xf;
        text.push(char::from_digit(u32::try_from(nibble).unwrap_or(0), 16).unwrap_or('0'));
    }
}

/// The `x-app-usage` header of a call: made once for each percentage rather than formatted
/// for every request.
fn app_usage_value(usage: streetlevel_ratelimit::Usage) -> HeaderValue {
    static VALUES: std::sync::LazyLock<Vec<HeaderValue>> = std::sync::LazyLock::new(|| {
        (0..=100)
            .filter_map(|used_percent| {
                let usage = streetlevel_ratelimit::Usage {
                    class: Class::Entity,
                    used_percent,
                };
                HeaderValue::from_str(&usage.app_usage_header()).ok()
            })
            .collect()
    });
    VALUES
        .get(usize::from(usage.used_percent))
        .cloned()
        .or_else(|| HeaderValue::from_str(&usage.app_usage_header()).ok())
        .unwrap_or_else(|| HeaderValue::from_static("{}"))
}

fn quota_class(class: Class) -> &'static str {
    match class {
        Class::Entity => "entity",
        Class::Search => "search",
        Class::Tiles => "tiles",
    }
}

/// A probe's answer: `{"status": ..., "reason"?: ...}`, never cached.
fn probe(status: StatusCode, state: &str, reason: Option<&str>) -> Reply {
    let mut body = serde_json::json!({ "status": state });
    if let Some(reason) = reason {
        body["reason"] = serde_json::Value::from(reason);
    }
    let mut reply = Reply::json_with_status(status, &body);
    reply.cache_control = Some(Cow::Borrowed("no-store"));
    reply
}

impl App {
    /// `GET /ready`: 200 when the store is loaded (it is, once the server listens) and its
    /// database takes a write lock within a second; 503 with the reason otherwise.
    fn readiness(&self) -> Reply {
        let store = self
            .services
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        match store.check_writable(std::time::Duration::from_secs(1)) {
            Ok(()) => probe(StatusCode::OK, "ready", None),
            Err(error) => probe(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                Some(&format!("the database is not writable: {error}")),
            ),
        }
    }
}

/// Whether the request body is JSON (the uploader's sign-in, as opposed to the web form).
fn is_json(parts: &Parts) -> bool {
    parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

/// Whether a request to `/` is a browser's visit, answered with the home page: no query
/// (`/?ids=` is the API's) and an `Accept` header that prefers HTML. API clients send no
/// `Accept`, `*/*` or `application/json`, and keep the API's answers.
fn is_browser_home(parts: &Parts) -> bool {
    parts.uri.query().is_none_or(str::is_empty)
        && parts
            .headers
            .get_all(http::header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(prefers_html)
}

/// Whether an `Accept` value lists `text/html` with a weight above zero and at least that of
/// `application/json`.
fn prefers_html(accept: &str) -> bool {
    let weight_of = |wanted: &str| {
        accept
            .split(',')
            .filter_map(|range| {
                let mut pieces = range.split(';').map(str::trim);
                let media_type = pieces.next()?;
                if !media_type.eq_ignore_ascii_case(wanted) {
                    return None;
                }
                let weight = pieces
                    .find_map(|parameter| parameter.strip_prefix("q="))
                    .map_or(Some(1.0), |q| q.parse::<f32>().ok())?;
                Some(weight)
            })
            .fold(None, |best: Option<f32>, weight| {
                Some(best.map_or(weight, |best| best.max(weight)))
            })
    };
    let Some(html) = weight_of("text/html") else {
        return false;
    };
    html > 0.0 && weight_of("application/json").is_none_or(|json| html >= json)
}

/// The handler of the debug route: it panics, on purpose.
#[allow(clippy::panic)]
fn requested_panic() -> Result<Reply, Error> {
    panic!("requested panic")
}

impl Links for App {
    fn media_url(&self, object: &MediaObject) -> String {
        App::media_url(self, object)
    }

    fn base_url(&self) -> &str {
        &self.urls.base
    }
}

enum Dispatched {
    Reply(Reply),
    Response(Response<Bytes>),
}

/// Runs a synchronous handler; a panic becomes [`Error::Internal`].
fn catch<F: FnOnce() -> Result<Reply, Error>>(handler: F) -> Result<Reply, Error> {
    match std::panic::catch_unwind(AssertUnwindSafe(handler)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| String::from("handler panicked"));
            Err(Error::Internal(format!("handler panicked: {message}")))
        }
    }
}

/// Runs slow work (image resizing, password hashing, database reads) off the async workers.
async fn run_blocking<T, F>(work: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) => Err(Error::Internal(format!("blocking task failed: {error}"))),
    }
}

/// The client address the server resolved for the request (`client_address.rs`).
fn client_ip(parts: &Parts) -> Option<std::net::IpAddr> {
    parts
        .extensions
        .get::<streetlevel_ratelimit::ClientAddr>()
        .map(|address| address.0.ip())
}

#[cfg(test)]
mod tests {
    use super::{app_usage_value, prefers_html, request_id};

    #[test]
    fn request_ids_are_the_seed_and_the_count_in_hexadecimal() {
        for (seed, count) in [
            (0, 0),
            (0x9E37_79B9_7F4A_7C15, 1),
            (u64::MAX, 0xFFFF_FFFF),
            (42, 0x1_0000_0000),
            (7, u64::MAX),
        ] {
            assert_eq!(
                request_id(seed, count),
                format!("A{:012x}{count:08x}", seed & 0xFFFF_FFFF_FFFF)
            );
        }
    }

    #[test]
    fn usage_headers_are_those_the_quota_formats() {
        for used_percent in [0, 1, 57, 100, 101, 255] {
            let usage = streetlevel_ratelimit::Usage {
                class: streetlevel_ratelimit::Class::Search,
                used_percent,
            };
            assert_eq!(app_usage_value(usage), usage.app_usage_header().as_str());
        }
    }

    fn check(accept: &str, expected: bool) {
        assert_eq!(prefers_html(accept), expected, "{accept}");
    }

    #[test]
    fn browsers_prefer_html_and_api_clients_do_not() {
        // Firefox, Chromium.
        check(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            true,
        );
        check(
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8",
            true,
        );
        // curl, the Python SDK, fetch with JSON in mind.
        check("*/*", false);
        check("application/json", false);
        check("application/json, text/html;q=0.5", false);
        check("text/html;q=0", false);
        check("TEXT/HTML ; q=0.7, application/json;q=0.7", true);
    }
}
