//! `streetlevel serve`: loads a data directory and serves every surface on one listener.
//!
//! On start it prints one line `listening on http://<addr>` to standard output (tests and
//! `cargo xtask serve` read the bound port from it), then logs the public URLs.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, Weak};

use anyhow::Context;
use streetlevel_auth::{AuthStore, OsRandom};
use streetlevel_import::{UploadLimits, Uploads};
use streetlevel_model::{ImageId, MediaId};
use streetlevel_ratelimit::SignInGuard;
use streetlevel_server::media::{MediaObject, ThumbSize};
use streetlevel_server::{
    App, Config, DirectoryMedia, Error as ServerError, MediaSource, Server, Services, SystemClock,
};
use streetlevel_store::Store;
use streetlevel_web::{Registry, StoreImages, Web, WebConfig};
use tokio::net::TcpListener;

/// Options of `streetlevel serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The data directory holding `streetlevel.sqlite` and `media/`.
    #[arg(long)]
    data: PathBuf,
    /// Address to listen on, `HOST:PORT` with a host name or an IP address (the first address
    /// the name resolves to that can be bound is used); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// A JSON file with further settings (see docs/API.md); flags win over it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Public URL of every surface (when behind a proxy), e.g. `https://streetlevel.example`.
    #[arg(long)]
    public_url: Option<String>,
    /// The short name in tile set names (`mly` for clients of the original service).
    #[arg(long)]
    short_name: Option<String>,
    /// The error body's trace member; default `<short name>trace_id` (clients of the original
    /// service read `fbtrace_id`).
    #[arg(long)]
    trace_member: Option<String>,
    /// Everything a family of clients needs at once: `original` (the original service's SDK,
    /// viewer and maps) means `--short-name mly --trace-member fbtrace_id`. A flag given
    /// as well wins; this wins over the config file.
    #[arg(long, value_enum)]
    compat: Option<Compat>,
    /// Entity calls per minute per app.
    #[arg(long)]
    limit_entity_per_min: Option<NonZeroU32>,
    /// Search calls per minute per app.
    #[arg(long)]
    limit_search_per_min: Option<NonZeroU32>,
    /// Tile requests per day per app.
    #[arg(long)]
    limit_tiles_per_day: Option<NonZeroU32>,
    /// The npm `node_modules` folder holding the embed page's viewer and map packages
    /// (default: `assets/` next to this executable if it holds them, as in a release tarball,
    /// else the source tree's `web/node_modules`). Without them the embed page shows a still
    /// image.
    #[arg(long)]
    assets_dir: Option<PathBuf>,
    /// Serve `GET /__panic` (a handler that panics), for tests of panic handling.
    #[arg(long, hide = true)]
    debug_panic_route: bool,
    /// Shut down when standard input closes: a test harness that dies takes the server with it.
    #[arg(long, hide = true)]
    exit_on_stdin_eof: bool,
}

/// `--compat`: the settings a family of clients needs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Compat {
    /// The original service's clients: tile sets `mly1_public`, …, and `fbtrace_id`.
    Original,
}

impl Compat {
    fn short_name(self) -> &'static str {
        match self {
            Self::Original => "mly",
        }
    }

    fn trace_member(self) -> &'static str {
        match self {
            Self::Original => "fbtrace_id",
        }
    }
}

/// Media from the data directory; originals missing there (fixtures written with
/// `--media lazy`) are rendered from the image's metadata on first request and kept.
struct DataDirMedia {
    files: DirectoryMedia,
    media_dir: PathBuf,
    store: Arc<RwLock<Store>>,
}

impl MediaSource for DataDirMedia {
    fn original(&self, image: ImageId) -> Result<Option<Vec<u8>>, ServerError> {
        if let Some(bytes) = self.files.original(image)? {
            return Ok(Some(bytes));
        }
        let Some(metadata) = self
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .image(image)
        else {
            return Ok(None);
        };
        let bytes = streetlevel_fixtures::render_original(&metadata);
        keep(
            &streetlevel_fixtures::original_path(&self.media_dir, image),
            &bytes,
        )?;
        Ok(Some(bytes))
    }

    fn mesh(&self, id: MediaId) -> Result<Option<Vec<u8>>, ServerError> {
        if let Some(bytes) = self.files.mesh(id)? {
            return Ok(Some(bytes));
        }
        let store = self.store.read().unwrap_or_else(PoisonError::into_inner);
        let Some(image) = store.image_with_mesh(id) else {
            return Ok(None);
        };
        drop(store);
        let bytes = streetlevel_fixtures::mesh_for_image(&image);
        keep(
            &streetlevel_fixtures::mesh_path(&self.media_dir, id),
            &bytes,
        )?;
        Ok(Some(bytes))
    }

    fn sfm_cluster(&self, id: MediaId) -> Result<Option<Vec<u8>>, ServerError> {
        if let Some(bytes) = self.files.sfm_cluster(id)? {
            return Ok(Some(bytes));
        }
        let sequence_images = {
            let store = self.store.read().unwrap_or_else(PoisonError::into_inner);
            let Some(image) = store.image_with_sfm_cluster(id) else {
                return Ok(None);
            };
            let ids = store
                .sequence_image_ids(&image.sequence)
                .unwrap_or_default();
            store.images(&ids)
        };
        let members = streetlevel_fixtures::cluster_members(&sequence_images, id);
        let bytes = streetlevel_fixtures::sfm_cluster_bytes(&members).map_err(|error| {
            ServerError::Internal(format!("cannot build cluster {id}: {error}"))
        })?;
        keep(
            &streetlevel_fixtures::sfm_cluster_path(&self.media_dir, id),
            &bytes,
        )?;
        Ok(Some(bytes))
    }
}

/// Writes media rendered on request to the data directory, atomically, so the next request
/// reads the file and a crash never leaves half a file.
fn keep(path: &Path, bytes: &[u8]) -> Result<(), ServerError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)?;
    Ok(())
}

/// The settings a `--config` file may hold; every member is optional.
#[derive(serde::Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    public_url: Option<String>,
    base_url: Option<String>,
    tiles_url: Option<String>,
    web_url: Option<String>,
    media_url: Option<String>,
    short_name: Option<String>,
    trace_member: Option<String>,
    media_key_hex: Option<String>,
    media_url_lifetime_seconds: Option<u64>,
    header_read_timeout_seconds: Option<u64>,
    max_body_bytes: Option<usize>,
    max_connections: Option<usize>,
    max_connections_per_address: Option<usize>,
    body_read_timeout_seconds: Option<u64>,
    tile_cache_entries: Option<usize>,
    limit_entity_per_min: Option<NonZeroU32>,
    limit_search_per_min: Option<NonZeroU32>,
    limit_tiles_per_day: Option<NonZeroU32>,
    assets_dir: Option<PathBuf>,
    max_upload_session_bytes: Option<u64>,
    max_pending_upload_bytes_per_user: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn read_file_config(path: Option<&Path>) -> anyhow::Result<FileConfig> {
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// The media signing key: from the config, else `DATA/media.key` (created on first start).
fn media_key(data: &Path, from_config: Option<&str>) -> anyhow::Result<Vec<u8>> {
    if let Some(text) = from_config {
        return hex::decode(text.trim()).context("media_key_hex is not hexadecimal");
    }
    let path = data.join("media.key");
    match std::fs::read_to_string(&path) {
        Ok(text) => hex::decode(text.trim())
            .with_context(|| format!("{} is not hexadecimal", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let key: [u8; 32] = rand::random();
            write_private(&path, hex::encode(key).as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(key.to_vec())
        }
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes a secret readable by its owner only (mode 0600 on Unix).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// Everything `serve` takes from its flags, the config file and the defaults.
struct Settings {
    config: Config,
    limits: streetlevel_ratelimit::Config,
    /// `None`: the web crate's default (`web/node_modules` of the source tree).
    assets_dir: Option<PathBuf>,
    upload_limits: UploadLimits,
}

/// A public URL must be absolute `http` or `https` with a host: it is pasted in front of
/// every path the server hands out.
fn check_public_url(name: &str, url: Option<&String>) -> anyhow::Result<()> {
    let Some(url) = url else {
        return Ok(());
    };
    let rest = ["http://", "https://"].iter().find_map(|scheme| {
        url.get(..scheme.len())
            .filter(|prefix| prefix.eq_ignore_ascii_case(scheme))
            .map(|_| &url[scheme.len()..])
    });
    anyhow::ensure!(
        rest.is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/')),
        "{name} {url:?} is not an absolute http:// or https:// URL"
    );
    Ok(())
}

/// The server and quota settings: a flag wins over the config file, which wins over the
/// default. `--public-url` (or `public_url`) sets every surface whose own URL (`base_url`,
/// `tiles_url`, `web_url`, `media_url`, file only) is not given.
fn settings(args: &Args) -> anyhow::Result<Settings> {
    let file = read_file_config(args.config.as_deref())?;
    anyhow::ensure!(
        args.data.is_dir(),
        "the data directory {} does not exist (create one with `streetlevel fixtures --out {}`)",
        args.data.display(),
        args.data.display()
    );
    let defaults = Config::default();
    let public_url = args.public_url.clone().or(file.public_url);
    for (name, url) in [
        ("the public URL", public_url.as_ref()),
        ("base_url", file.base_url.as_ref()),
        ("tiles_url", file.tiles_url.as_ref()),
        ("web_url", file.web_url.as_ref()),
        ("media_url", file.media_url.as_ref()),
    ] {
        check_public_url(name, url)?;
    }
    anyhow::ensure!(
        file.header_read_timeout_seconds != Some(0),
        "header_read_timeout_seconds must be at least 1"
    );
    anyhow::ensure!(
        file.body_read_timeout_seconds != Some(0),
        "body_read_timeout_seconds must be at least 1"
    );
    anyhow::ensure!(
        file.max_connections_per_address != Some(0),
        "max_connections_per_address must be at least 1"
    );
    let config = Config {
        // The listener is bound by `listen`; this is only its fallback.
        bind: defaults.bind,
        base_url: file.base_url.or_else(|| public_url.clone()),
        tiles_url: file.tiles_url.or_else(|| public_url.clone()),
        web_url: file.web_url.or_else(|| public_url.clone()),
        media_url: file.media_url.or_else(|| public_url.clone()),
        short_name: args
            .short_name
            .clone()
            .or_else(|| args.compat.map(|compat| compat.short_name().to_owned()))
            .or(file.short_name)
            .unwrap_or(defaults.short_name.clone()),
        trace_member: args
            .trace_member
            .clone()
            .or_else(|| args.compat.map(|compat| compat.trace_member().to_owned()))
            .or(file.trace_member),
        media_key: media_key(&args.data, file.media_key_hex.as_deref())?,
        media_url_lifetime: file
            .media_url_lifetime_seconds
            .map_or(defaults.media_url_lifetime, std::time::Duration::from_secs),
        header_read_timeout: file
            .header_read_timeout_seconds
            .map_or(defaults.header_read_timeout, std::time::Duration::from_secs),
        max_body_bytes: file.max_body_bytes.unwrap_or(defaults.max_body_bytes),
        max_connections: file.max_connections.unwrap_or(defaults.max_connections),
        max_connections_per_address: file
            .max_connections_per_address
            .unwrap_or(defaults.max_connections_per_address),
        body_read_timeout: file
            .body_read_timeout_seconds
            .map_or(defaults.body_read_timeout, std::time::Duration::from_secs),
        tile_cache_entries: file
            .tile_cache_entries
            .unwrap_or(defaults.tile_cache_entries),
        debug_panic_route: args.debug_panic_route,
        ..defaults
    };
    let limits_defaults = streetlevel_ratelimit::Config::default();
    let limits = streetlevel_ratelimit::Config {
        entity_per_minute: args
            .limit_entity_per_min
            .or(file.limit_entity_per_min)
            .unwrap_or(limits_defaults.entity_per_minute),
        search_per_minute: args
            .limit_search_per_min
            .or(file.limit_search_per_min)
            .unwrap_or(limits_defaults.search_per_minute),
        tiles_per_window: args
            .limit_tiles_per_day
            .or(file.limit_tiles_per_day)
            .unwrap_or(limits_defaults.tiles_per_window),
        trace_member: config.trace_member(),
        ..limits_defaults
    };
    let upload_defaults = UploadLimits::default();
    let upload_limits = UploadLimits {
        max_session_bytes: file
            .max_upload_session_bytes
            .unwrap_or(upload_defaults.max_session_bytes),
        max_pending_bytes_per_user: file
            .max_pending_upload_bytes_per_user
            .unwrap_or(upload_defaults.max_pending_bytes_per_user),
    };
    Ok(Settings {
        config,
        limits,
        assets_dir: args.assets_dir.clone().or(file.assets_dir),
        upload_limits,
    })
}

/// The data directory's lock file: held (flock) for as long as a server serves it.
const LOCK_FILE: &str = "streetlevel.lock";

/// Takes the data directory for this process: a second server on the same directory would
/// run its own upload worker and caches over the same files, so it is refused. The lock is
/// the kernel's, so it goes with the process, however it ends.
fn lock_data_dir(data: &Path) -> anyhow::Result<std::fs::File> {
    let path = data.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |_| {
            anyhow::anyhow!(
                "another streetlevel server is serving {} (it holds {})",
                data.display(),
                path.display()
            )
        },
    )?;
    Ok(file)
}

/// A database file of zero bytes is a damaged or truncated copy, not a new data set: `SQLite`
/// would take it for an empty database and the server would serve nothing without a word.
fn check_database_file(data: &Path) -> anyhow::Result<()> {
    let path = Store::database_path(data);
    match std::fs::metadata(&path) {
        Ok(metadata) if metadata.len() == 0 => anyhow::bail!(
            "{} is empty (0 bytes): restore it from a backup, or remove it to start afresh",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// Loads the data directory's store off the async workers, and logs what it holds.
async fn load_store(data: &Path) -> anyhow::Result<Store> {
    let started = std::time::Instant::now();
    let owned = data.to_path_buf();
    let store = tokio::task::spawn_blocking(move || Store::open(&owned))
        .await
        .context("loading the store failed")?
        .with_context(|| format!("cannot open the data directory {}", data.display()))?;
    tracing::info!(
        images = store.image_count(),
        map_features = store.map_feature_count(),
        detections = store.detection_count(),
        millis = started.elapsed().as_millis() as u64,
        "loaded the store"
    );
    Ok(store)
}

/// Binds `addr` (`HOST:PORT`, the host a name or an IP address): the first of its addresses
/// that can be bound. The error is one line that says what to do.
async fn listen(addr: &str) -> anyhow::Result<TcpListener> {
    let candidates: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|error| {
            anyhow::anyhow!("cannot resolve --addr {addr:?} (expected HOST:PORT): {error}")
        })?
        .collect();
    let mut first_error = None;
    for candidate in &candidates {
        match TcpListener::bind(candidate).await {
            Ok(listener) => return Ok(listener),
            Err(error) => {
                first_error.get_or_insert((*candidate, error));
            }
        }
    }
    let Some((candidate, error)) = first_error else {
        anyhow::bail!("cannot listen on {addr}: the name resolves to no address");
    };
    // Name the resolved address only when it says more than `addr` does.
    let resolved = if candidate.to_string() == addr {
        String::new()
    } else {
        format!(" ({candidate})")
    };
    if error.kind() == std::io::ErrorKind::AddrInUse {
        anyhow::bail!(
            "cannot listen on {addr}{resolved}: the port is in use by another program; stop it \
             or choose another port with --addr"
        )
    }
    anyhow::bail!("cannot listen on {addr}{resolved}: {error}")
}

/// Says so when the data directory holds no images: a new user may have pointed `--data` at
/// an empty or wrong directory, and an empty service answers every search with nothing.
fn warn_if_empty(store: &Store, data: &Path) {
    if store.image_count() == 0 {
        tracing::warn!(
            "{} holds no images: create the default data set with `streetlevel fixtures --out \
             {}`, or add photos with `streetlevel import --data {} PATH...`",
            data.display(),
            data.display(),
            data.display()
        );
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let Settings {
        config,
        limits,
        assets_dir,
        upload_limits,
    } = settings(&args)?;
    check_database_file(&args.data)?;
    let _lock = lock_data_dir(&args.data)?;
    // Bound before the store loads, so a port in use is reported at once.
    let listener = listen(&args.addr).await?;
    let rate_limits =
        Arc::new(streetlevel_ratelimit::RateLimits::new(limits).context("invalid rate limits")?);
    let store = load_store(&args.data).await?;
    warn_if_empty(&store, &args.data);
    let auth = AuthStore::open(
        &Store::database_path(&args.data),
        streetlevel_auth::Config::default(),
        streetlevel_auth::SystemClock,
        OsRandom,
    )
    .context("cannot open the auth tables")?;
    let store = Arc::new(RwLock::new(store));
    let media_dir = Store::media_dir(&args.data);
    let media = DataDirMedia {
        files: DirectoryMedia::new(&media_dir),
        media_dir: media_dir.clone(),
        store: Arc::clone(&store),
    };
    let auth = Arc::new(auth);
    // The embed page shows a signed thumbnail; the signer lives in the app, which exists only
    // once the listener is bound, so the page reaches it through a cell filled after binding.
    let app_cell: Arc<OnceLock<Weak<App>>> = Arc::new(OnceLock::new());
    let thumb_cell = Arc::clone(&app_cell);
    let images = StoreImages::new(Arc::clone(&store), move |id| {
        let app = thumb_cell.get()?.upgrade()?;
        Some(app.media_url(&MediaObject::Thumb(id, ThumbSize::W2048)))
    });
    let mut web_config = WebConfig {
        web_url: config.web_url.clone(),
        base_url: config.base_url.clone(),
        tiles_url: config.tiles_url.clone(),
        short_name: config.short_name.clone(),
        ..WebConfig::default()
    };
    if let Some(assets_dir) = assets_dir {
        web_config.assets_dir = assets_dir;
    }
    let registry =
        Registry::open(&Store::database_path(&args.data)).context("cannot open the web tables")?;
    let uploads = Arc::new(
        Uploads::open(&args.data, upload_limits).context("cannot open the upload tables")?,
    );
    let sign_in = Arc::new(SignInGuard::default());
    let web = Web::new(
        web_config,
        Arc::clone(&auth),
        &registry,
        Arc::new(images),
        OsRandom,
    )
    .context("cannot start the web pages")?
    .with_uploads(Arc::clone(&uploads))
    .with_sign_in_guard(Arc::clone(&sign_in));

    let services = Services {
        store: Arc::clone(&store),
        auth,
        rate_limits: Arc::clone(&rate_limits),
        media: Arc::new(media),
        media_cache_dir: media_dir.join(streetlevel_import::THUMBNAIL_CACHE_DIR),
        clock: Arc::new(SystemClock),
        web: Some(Arc::new(web)),
        uploads: Some(Arc::clone(&uploads)),
        sign_in: Arc::clone(&sign_in),
    };
    let server = Server::on_listener(listener, config, services)
        .with_context(|| format!("cannot serve on {}", args.addr))?;
    let _ = app_cell.set(Arc::downgrade(&server.app()));
    announce(&server);
    let cleaner = tokio::spawn(async move {
        let mut interval = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            interval.tick().await;
            rate_limits.retain_recent();
            sign_in.throttle.retain_recent();
        }
    });
    let background = Background::start(uploads, store)?;
    server.run(shutdown_signal(args.exit_on_stdin_eof)).await?;
    cleaner.abort();
    background.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// The work a server does besides answering requests: the upload worker (a thread, since
/// processing is blocking work) and the follower of other processes' writes.
struct Background {
    stop: Arc<AtomicBool>,
    worker: std::thread::JoinHandle<()>,
    follower: tokio::task::JoinHandle<()>,
}

impl Background {
    fn start(uploads: Arc<Uploads>, store: Arc<RwLock<Store>>) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
            std::thread::Builder::new()
                .name(String::from("upload worker"))
                .spawn(move || uploads.run_worker(&store, &stop))
                .context("cannot start the upload worker")?
        };
        let follower = tokio::spawn(follow_other_writers(store));
        Ok(Background {
            stop,
            worker,
            follower,
        })
    }

    /// Stops both; the worker first finishes the job it is on (each is one transaction).
    async fn stop(self) {
        self.follower.abort();
        self.stop.store(true, Ordering::Relaxed);
        let worker = self.worker;
        let _ = tokio::task::spawn_blocking(move || worker.join()).await;
    }
}

/// Loads, every second, what other processes (`streetlevel import`) wrote to the database,
/// so their images show without a restart. The write lock is taken only when there is
/// something to load.
async fn follow_other_writers(store: Arc<RwLock<Store>>) {
    let mut interval = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        interval.tick().await;
        let store = Arc::clone(&store);
        let followed = tokio::task::spawn_blocking(move || {
            let pending = store
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .has_writes_to_follow()?;
            if !pending {
                return Ok(0);
            }
            store
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .follow()
        })
        .await;
        match followed {
            Ok(Ok(0)) => {}
            Ok(Ok(images)) => tracing::info!(images, "loaded images written by another process"),
            Ok(Err(error)) => tracing::warn!(%error, "cannot follow the database"),
            Err(error) => tracing::warn!(%error, "the follower failed"),
        }
    }
}

#[allow(clippy::print_stdout)]
fn announce(server: &Server) {
    use std::io::Write;
    let urls = server.urls();
    println!("listening on http://{}", server.local_addr());
    let _ = std::io::stdout().flush();
    tracing::info!(base_url = %urls.base, tiles_url = %urls.tiles, web_url = %urls.web, media_url = %urls.media, "serving");
}

async fn shutdown_signal(exit_on_stdin_eof: bool) {
    let stdin_closed = async {
        if exit_on_stdin_eof {
            // A plain thread, not `spawn_blocking`: the runtime must not wait for it on exit.
            let (closed, on_closed) = tokio::sync::oneshot::channel::<()>();
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
                let _ = closed.send(());
            });
            let _ = on_closed.await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("interrupted, shutting down"),
        () = terminate => tracing::info!("terminated, shutting down"),
        () = stdin_closed => tracing::info!("standard input closed, shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use super::check_public_url;

    #[test]
    fn public_urls_must_be_absolute_http_or_https() {
        for good in [
            "http://127.0.0.1:8080",
            "https://streetlevel.example/",
            "HTTPS://Streetlevel.Example/prefix",
        ] {
            assert!(
                check_public_url("url", Some(&good.to_owned())).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "streetlevel.example",
            "https://",
            "http:///path",
            "ftp://streetlevel.example",
            "/relative",
            "",
        ] {
            let error = check_public_url("tiles_url", Some(&bad.to_owned())).unwrap_err();
            assert!(error.to_string().contains("tiles_url"), "{bad}: {error}");
        }
        assert!(check_public_url("url", None).is_ok());
    }
}
