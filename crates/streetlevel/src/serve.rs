//! `streetlevel serve`: loads a data directory and serves every surface on one listener.
//!
//! On start it prints one line `listening on http://<addr>` to standard output (tests and
//! `cargo xtask serve` read the bound port from it), then logs the public URLs.

mod log_writer;
pub(crate) mod media;
mod media_key;
pub(crate) mod settings;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::Context;
use streetlevel_auth::{AuthStore, OsRandom};
use streetlevel_db::{Database, Location};
use streetlevel_import::Uploads;
use streetlevel_model::{Clock, SystemClock};
use streetlevel_moderation::Moderation;
use streetlevel_ratelimit::{RateLimits, RedisConfig, SignInGuard};
use streetlevel_server::media::{MediaLinks, MediaObject, ThumbSize};
use streetlevel_server::{Server, Services};
use streetlevel_store::{Notifications, Store};
use streetlevel_web::{Registry, StoreImages, Web};
use tokio::net::TcpListener;

use self::media::DataDirMedia;
use self::settings::{LogFormat, Resolved, Settings};

/// Options of `streetlevel serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Every setting: each flag is also an environment variable `STREETLEVEL_<NAME>` and a
    /// member of the config file (see docs/API.md).
    #[command(flatten)]
    settings: Settings,
    /// A JSON file with settings; flags and environment variables win over it.
    #[arg(long, env = "STREETLEVEL_CONFIG")]
    config: Option<PathBuf>,
    /// Serve `GET /__panic` (a handler that panics), for tests of panic handling.
    #[arg(long, hide = true)]
    debug_panic_route: bool,
    /// Shut down when standard input closes: a test harness that dies takes the server with it.
    #[arg(long, hide = true)]
    exit_on_stdin_eof: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let settings = settings::merge(&args.settings, args.config.as_deref())?;
    let _log_writer = init_logging(settings.log_format.unwrap_or_default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args, settings))
}

/// Logs to standard error through a writer thread (`log_writer.rs`), so a slow terminal or
/// pipe never stalls a request until its buffer is full, and a request pays for little more
/// than formatting its line; colours only when standard error is a terminal. The guard
/// writes what is left when dropped.
fn init_logging(format: LogFormat) -> log_writer::LogWriterGuard {
    use std::io::IsTerminal as _;
    let (writer, guard) = log_writer::spawn(std::io::stderr());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    guard
}

/// The media URL signer, with the signing key of `config` or else of the data set (its
/// database's on PostgreSQL: `media_key.rs`), and `config` with that key.
fn media_links(
    mut config: streetlevel_server::Config,
    data: &Path,
    database: &Database,
    bound: SocketAddr,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<(streetlevel_server::Config, Arc<MediaLinks>)> {
    if config.media_key.is_empty() {
        config.media_key = media_key::of_data_set(data, database)?;
    }
    let links =
        MediaLinks::new(&config, bound, Arc::clone(clock)).context("cannot sign media URLs")?;
    Ok((config, Arc::new(links)))
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

/// Where the tables live: `database_url` (a PostgreSQL URL) when given, else the data
/// directory's `SQLite` file.
pub(crate) fn database_location(
    data: &Path,
    database_url: Option<String>,
) -> anyhow::Result<Location> {
    match database_url {
        None => Ok(Location::Sqlite(Store::database_path(data))),
        Some(url) if Location::is_postgres_url(&url) => Ok(Location::Postgres(url)),
        Some(url) => anyhow::bail!(
            "database_url {:?} is not a postgres:// URL (leave it out for the data directory's \
             SQLite file)",
            streetlevel_db::redact(&url)
        ),
    }
}

/// Opens the process's one database handle off the async workers (the data directory's
/// `SQLite` file, or a pool of connections to the PostgreSQL database of `location`, whose
/// versions are checked), making the media directory; every crate gets a clone of it.
pub(crate) fn open_database(
    data: &Path,
    location: &Location,
    pool: streetlevel_db::PoolOptions,
) -> anyhow::Result<Database> {
    let media = Store::media_dir(data);
    std::fs::create_dir_all(&media)
        .with_context(|| format!("cannot create {}", media.display()))?;
    Database::open_with(location, pool).with_context(|| match location {
        Location::Sqlite(_) => format!("cannot open the data directory {}", data.display()),
        Location::Postgres(url) => {
            format!("cannot open the database {}", streetlevel_db::redact(url))
        }
    })
}

/// The quotas: in Redis when `redis_url` is given (checked here, before the store loads: an
/// unreachable server is logged, not fatal), else in this process.
fn rate_limits(
    redis_url: Option<String>,
    limits: streetlevel_ratelimit::Config,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<RateLimits> {
    match redis_url {
        Some(url) => RateLimits::with_redis(limits, Arc::clone(clock), RedisConfig::new(url))
            .context("invalid redis_url"),
        None => RateLimits::new(limits, Arc::clone(clock)).context("invalid rate limits"),
    }
}

/// [`open_database`] on a blocking thread (connecting may take seconds).
async fn open_database_off_workers(
    data: &Path,
    location: &Location,
    pool: streetlevel_db::PoolOptions,
) -> anyhow::Result<Database> {
    let (data, location) = (data.to_path_buf(), location.clone());
    tokio::task::spawn_blocking(move || open_database(&data, &location, pool))
        .await
        .context("opening the database failed")?
}

/// Loads the store from `database` off the async workers, and logs what it holds.
async fn load_store(data: &Path, database: &Database) -> anyhow::Result<Store> {
    let started = std::time::Instant::now();
    let owned = database.clone();
    let store = tokio::task::spawn_blocking(move || Store::open_database(owned))
        .await
        .context("loading the store failed")?
        .with_context(|| match database.location() {
            Location::Sqlite(_) => format!("cannot open the data directory {}", data.display()),
            Location::Postgres(url) => {
                format!("cannot open the database {}", streetlevel_db::redact(url))
            }
        })?;
    tracing::info!(
        images = store.image_count(),
        map_features = store.map_feature_count(),
        detections = store.detection_count(),
        millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "loaded the store"
    );
    Ok(store)
}

/// A count as a gauge's value (an `f64`).
#[allow(clippy::cast_precision_loss)] // exact up to 2^53; a larger count is only rounded
fn gauge_value(count: u64) -> f64 {
    count as f64
}

/// Installs the Prometheus recorder and serves it on `metrics_addr`, announced on standard
/// output (`metrics on http://ADDR`, before `listening on`). The store's and the upload
/// queue's sizes, and the shared quotas' failures, are read at each scrape.
async fn start_metrics(
    metrics_addr: &str,
    store: Arc<RwLock<Store>>,
    uploads: Arc<Uploads>,
    rate_limits: Arc<RateLimits>,
) -> anyhow::Result<()> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    use streetlevel_server::metrics;
    let listener = listen(metrics_addr).await?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(metrics::REQUEST_SECONDS.to_owned()),
            metrics::REQUEST_SECONDS_BUCKETS,
        )
        .context("invalid histogram buckets")?
        .install_recorder()
        .context("cannot install the metrics recorder")?;
    let render = move || {
        {
            let store = store.read().unwrap_or_else(PoisonError::into_inner);
            for (kind, count) in [
                ("images", store.image_count()),
                ("sequences", store.sequence_count()),
                ("map_features", store.map_feature_count()),
                ("detections", store.detection_count()),
            ] {
                ::metrics::gauge!(metrics::STORE_ENTITIES, "kind" => kind)
                    .set(gauge_value(count as u64));
            }
        }
        match uploads.job_counts() {
            Ok(counts) => {
                for (state, count) in counts {
                    ::metrics::gauge!(metrics::UPLOAD_JOBS, "state" => state.as_str())
                        .set(gauge_value(count));
                }
            }
            Err(error) => tracing::warn!(%error, "cannot count upload jobs for metrics"),
        }
        ::metrics::counter!(metrics::RATE_LIMIT_BACKEND_ERRORS)
            .absolute(rate_limits.backend_errors());
        handle.run_upkeep();
        handle.render()
    };
    announce_metrics(listener.local_addr()?);
    tokio::spawn(metrics::serve_metrics(listener, Arc::new(render)));
    Ok(())
}

#[allow(clippy::print_stdout)]
fn announce_metrics(addr: SocketAddr) {
    use std::io::Write;
    println!("metrics on http://{addr}/metrics");
    let _ = std::io::stdout().flush();
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

/// The pages' image look-ups, with thumbnails signed by `media_links` (the store answers for
/// public images only, so no hidden or deleted image gets a signed URL here).
fn embed_images(store: &Arc<RwLock<Store>>, media_links: &Arc<MediaLinks>) -> StoreImages {
    let thumbnails = Arc::clone(media_links);
    StoreImages::new(Arc::clone(store), move |id, size| {
        Some(thumbnails.url(&MediaObject::Thumb(id, ThumbSize::from(size))))
    })
}

/// Takedowns, for the API and the dashboard alike: the store, the files and the
/// administrators.
fn moderation(
    store: &Arc<RwLock<Store>>,
    data: &Path,
    config: &streetlevel_server::Config,
    clock: &Arc<dyn Clock>,
) -> Arc<Moderation> {
    Arc::new(Moderation::new(
        Arc::clone(store),
        Some(data.to_path_buf()),
        config.administrators.clone(),
        Arc::clone(clock),
    ))
}

/// Forgets the quotas and sign-in throttles that refilled, every minute.
fn spawn_cleaner(
    rate_limits: Arc<RateLimits>,
    sign_in: Arc<SignInGuard>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            interval.tick().await;
            rate_limits.retain_recent();
            sign_in.throttle.retain_recent();
        }
    })
}

async fn serve(args: Args, settings: Settings) -> anyhow::Result<()> {
    let media_store = crate::media_store::MediaStoreArgs::from(&settings);
    let Resolved {
        data,
        addr,
        metrics_addr,
        config,
        limits,
        redis_url,
        database_url,
        database_pool,
        web: web_config,
        upload_limits,
        background,
        auth: auth_config,
        blur,
        sfm,
    } = settings::resolve(settings, args.debug_panic_route, |_, from_config| {
        Ok(media_key::from_config(from_config)?.unwrap_or_default())
    })?;
    media_store.apply(&data)?;
    let config = fit_connections_to_descriptors(config);
    let location = database_location(&data, database_url)?;
    check_database_file(&data)?;
    // A second server on the same directory would run its own upload worker and caches
    // over the same files, so it is refused.
    let _lock = crate::data_lock::lock_data_dir(&data, "")?;
    // Bound before the store loads, so a port in use is reported at once.
    let listener = listen(&addr).await?;
    // The one clock: tokens, sign-in throttles, quotas and media URLs all read it.
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let rate_limits = Arc::new(rate_limits(redis_url, limits, &clock)?);
    let sign_in = Arc::new(SignInGuard::new(Arc::clone(&clock)));

    // The one handle of the process: every crate's tables are reached through its pool.
    let database = open_database_off_workers(&data, &location, database_pool).await?;
    let (config, media_links) =
        media_links(config, &data, &database, listener.local_addr()?, &clock)?;
    let store = load_store(&data, &database).await?;
    warn_if_empty(&store, &data);
    let store = Arc::new(RwLock::new(store));
    let auth = Arc::new(
        AuthStore::open_database(database.clone(), auth_config, Arc::clone(&clock), OsRandom)
            .context("cannot open the auth tables")?,
    );
    let registry =
        Registry::open_database(database.clone()).context("cannot open the web tables")?;
    // `POST /blur/` blurs with the same blurrer as uploads, or answers 503 without one.
    let (uploads, blur_api) =
        crate::blur::for_server(&data, database.clone(), upload_limits, &blur)?;
    let (media, reconstructor) = media_and_reconstructions(&data, database, &store, &sfm)?;

    let blurrer = blur_api.as_ref().map(|blurrer| blurrer.fingerprint());
    let privacy = Arc::new(
        streetlevel_import::Privacy::open(Arc::clone(&store), &data)
            .context("cannot open the privacy tables")?
            .with_blurrer(blurrer),
    );
    warn_if_blurred_by_older(&privacy);
    let moderation = moderation(&store, &data, &config, &clock);
    let web = Web::new(
        web_config,
        Arc::clone(&auth),
        &registry,
        Arc::new(embed_images(&store, &media_links)),
        OsRandom,
    )
    .context("cannot start the web pages")?
    .with_uploads(Arc::clone(&uploads))
    .with_sign_in_guard(Arc::clone(&sign_in))
    .with_takedowns(Arc::clone(&moderation))
    .with_privacy(Arc::clone(&privacy));

    let services = Services {
        store: Arc::clone(&store),
        auth,
        rate_limits: Arc::clone(&rate_limits),
        media,
        kept_media: streetlevel_import::media_store(&data),
        clock,
        media_links,
        web: Some(Arc::new(web)),
        uploads: Some(Arc::clone(&uploads)),
        sign_in: Arc::clone(&sign_in),
        moderation,
        blurrer: blur_api,
        privacy: Some(privacy),
    };
    if let Some(metrics_addr) = metrics_addr {
        start_metrics(
            &metrics_addr,
            Arc::clone(&store),
            Arc::clone(&uploads),
            Arc::clone(&rate_limits),
        )
        .await?;
    }
    let server = Server::on_listener(listener, config, services)
        .with_context(|| format!("cannot serve on {addr}"))?;
    let shutdown = shutdown_signal(args.exit_on_stdin_eof);
    announce(&server);
    let cleaner = spawn_cleaner(rate_limits, sign_in);
    let background = Background::start(&uploads, store, background, &reconstructor, sfm.workers)?;
    server.run(shutdown).await?;
    cleaner.abort();
    background.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// The media source of the data directory (fixture media rendered on request where the set
/// is marked so; reconstructions' meshes and clusters from the database) and the
/// reconstructor, whose tables exist before the media source reads them.
fn media_and_reconstructions(
    data: &Path,
    database: Database,
    store: &Arc<RwLock<Store>>,
    sfm: &crate::sfm::Background,
) -> anyhow::Result<(
    Arc<dyn streetlevel_server::MediaSource>,
    Arc<streetlevel_sfm::Reconstructor>,
)> {
    let media: Arc<dyn streetlevel_server::MediaSource> =
        Arc::new(DataDirMedia::new(data, Arc::clone(store)));
    let reconstructor = Arc::new(crate::sfm::reconstructor(
        data,
        database,
        Arc::clone(store),
        Arc::clone(&media),
        &sfm.engine,
        sfm.settle,
        sfm.lease,
    )?);
    if Store::media_dir(data)
        .join(streetlevel_fixtures::RENDER_ON_REQUEST_MARKER)
        .is_file()
    {
        tracing::info!("fixture data set: missing media are rendered on request");
    }
    Ok((media, reconstructor))
}

/// Descriptors kept for what is not a client connection: the database connections, the
/// log, data files and media being read, and the connections being refused 503.
const RESERVED_DESCRIPTORS: u64 = 128;

/// Raises the soft limit on open files to the hard limit (as Go's runtime and nginx do; the
/// common default soft limit is 1,024) and, if `max_connections` would still not fit in it
/// beside [`RESERVED_DESCRIPTORS`], lowers it to what fits: the server then answers the
/// connections beyond it 503 instead of running out of descriptors.
fn fit_connections_to_descriptors(
    mut config: streetlevel_server::Config,
) -> streetlevel_server::Config {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    // An unlimited hard limit is not a number the kernel takes for a soft one (it caps it at
    // `fs.nr_open`): 1,048,576, that cap's default, is far more than needed.
    let wanted = limit.maximum.unwrap_or(1 << 20);
    if limit.current.is_some_and(|current| current < wanted) {
        let raised = rustix::process::Rlimit {
            current: Some(wanted),
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = getrlimit(Resource::Nofile),
            Err(error) => tracing::warn!(%error, "cannot raise the limit on open files"),
        }
    }
    let Some(descriptors) = limit.current else {
        return config;
    };
    tracing::info!(descriptors, "open files allowed");
    let fits = usize::try_from(descriptors.saturating_sub(RESERVED_DESCRIPTORS).max(16))
        .unwrap_or(usize::MAX);
    if config.max_connections > fits {
        tracing::warn!(
            max_connections = config.max_connections,
            descriptors,
            serving = fits,
            "max_connections does not fit in the open files allowed: fewer connections are \
             served at once, and the others answered 503"
        );
        config.max_connections = fits;
    }
    config
}

/// Says at start how many images another blurrer blurred, or none did, when blurring is on:
/// after a change of models they are served as blurred by the old ones until `streetlevel
/// reblur` has run.
fn warn_if_blurred_by_older(privacy: &streetlevel_import::Privacy) {
    match privacy.blur_status() {
        Some(Ok(status)) if status.outdated() > 0 => tracing::warn!(
            blurred_by_older_models = status.stale(),
            never_blurred = status.never_blurred(),
            images = status.images,
            "images were blurred by another blurrer than the one configured now, or never: run \
             `streetlevel reblur` to bring them up to date (the dashboard counts them)"
        ),
        Some(Err(error)) => {
            tracing::error!(%error, "cannot count the images blurred by older models");
        }
        Some(Ok(_)) | None => {}
    }
}

/// The work a server does besides answering requests: the upload workers and the
/// reconstruction workers (threads, since processing is blocking work) and the follower of
/// other processes' writes.
struct Background {
    stop: Arc<AtomicBool>,
    workers: Vec<std::thread::JoinHandle<()>>,
    follower: tokio::task::JoinHandle<()>,
}

impl Background {
    /// Starts `work.workers` upload workers and the follower; the image decodes of the
    /// process (the workers') share `work.decode_memory_bytes`, and its CPU work the pool of
    /// `work.cpu_threads`.
    fn start(
        uploads: &Arc<Uploads>,
        store: Arc<RwLock<Store>>,
        work: settings::UploadWork,
        reconstructor: &Arc<streetlevel_sfm::Reconstructor>,
        sfm_workers: usize,
    ) -> anyhow::Result<Self> {
        streetlevel_import::set_decode_memory_limit(work.decode_memory_bytes);
        if let Some(threads) = work.cpu_threads {
            streetlevel_import::set_cpu_threads(threads);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let workers = (0..work.workers.max(1))
            .map(|index| {
                let (uploads, store, stop) =
                    (Arc::clone(uploads), Arc::clone(&store), Arc::clone(&stop));
                std::thread::Builder::new()
                    .name(format!("upload worker {index}"))
                    .spawn(move || uploads.run_worker(&store, &stop))
                    .context("cannot start an upload worker")
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut workers = workers;
        workers.extend(crate::sfm::start_workers(
            reconstructor,
            &store,
            sfm_workers,
            &stop,
        )?);
        let follower = tokio::spawn(follow_other_writers(store));
        Ok(Background {
            stop,
            workers,
            follower,
        })
    }

    /// Stops them. Each worker's job is interrupted at its next file, stays `processing` and
    /// its lease is given back, so the next worker to look (another replica's, or this
    /// server's after its restart) takes it again (it publishes in one transaction: nothing is
    /// half done); a step that does not end within [`SHUTDOWN_GRACE`] is not waited for, and
    /// its job is taken over once its lease runs out.
    async fn stop(self) {
        self.follower.abort();
        self.stop.store(true, Ordering::Relaxed);
        let workers = self.workers;
        let joined = tokio::time::timeout(
            SHUTDOWN_GRACE,
            tokio::task::spawn_blocking(move || {
                for worker in workers {
                    let _ = worker.join();
                }
            }),
        )
        .await;
        if joined.is_err() {
            tracing::warn!(
                seconds = SHUTDOWN_GRACE.as_secs(),
                "an upload worker did not stop within the grace period: its job is taken over once its lease runs out"
            );
        }
    }
}

/// How long a shutdown waits for the upload workers to leave their jobs.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long the follower waits for a notification before it looks at the write log anyway
/// (on `SQLite`, which cannot signal across processes, it always waits this long).
const FOLLOW_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Loads what other processes (`streetlevel import`, other replicas) wrote to the database,
/// so their images show without a restart. Each round waits for the store's notifications
/// (PostgreSQL's `NOTIFY`, sent when another process's write commits, wakes it at once; on
/// `SQLite` only the one-second timeout does), then checks the write log and takes the write
/// lock only when there is something to load. Every round catches up from the log, so a
/// notification lost with a broken connection costs one timeout, never a write.
async fn follow_other_writers(store: Arc<RwLock<Store>>) {
    let mut notifications: Option<Notifications> = None;
    loop {
        let store = Arc::clone(&store);
        let mut listening = notifications.take();
        let round = tokio::task::spawn_blocking(move || {
            if listening.is_none() {
                // Made here, off the async workers; retried every round while PostgreSQL
                // cannot be reached.
                match store
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .notifications()
                {
                    Ok(made) => listening = made,
                    Err(error) => {
                        tracing::warn!(%error, "cannot listen for other processes' writes");
                    }
                }
            }
            match &mut listening {
                Some(listening) => {
                    listening.wait(FOLLOW_INTERVAL);
                }
                None => std::thread::sleep(FOLLOW_INTERVAL),
            }
            let followed = streetlevel_store::catch_up(&store);
            (listening, followed)
        })
        .await;
        match round {
            Ok((listening, followed)) => {
                notifications = listening;
                match followed {
                    Ok(0) => {}
                    Ok(images) => {
                        tracing::info!(images, "loaded images written by another process");
                    }
                    Err(error) => tracing::warn!(%error, "cannot follow the database"),
                }
            }
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

/// The future that ends when the server should stop. The SIGTERM handler is installed when
/// this is called, before the server says it listens: a supervisor that signals right after
/// the "listening on" line gets a graceful stop, not the default disposition's kill.
fn shutdown_signal(exit_on_stdin_eof: bool) -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let terminate_stream =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move { wait_for_shutdown(exit_on_stdin_eof, terminate_stream).await }
}

async fn wait_for_shutdown(
    exit_on_stdin_eof: bool,
    #[cfg(unix)] terminate_stream: std::io::Result<tokio::signal::unix::Signal>,
) {
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
        match terminate_stream {
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
