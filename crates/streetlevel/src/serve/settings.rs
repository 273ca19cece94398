//! Every setting of `streetlevel serve` in one typed struct, read from three places and merged
//! once: a flag wins over its environment variable (`STREETLEVEL_<NAME>`), which wins over the
//! `--config` JSON file, which wins over the default. The same struct is the flags (clap), the
//! variables (clap's `env`) and the file (serde), so a setting cannot exist in one place and
//! be missing from another.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use streetlevel_import::UploadLimits;
use streetlevel_server::Config;
use streetlevel_web::WebConfig;

/// The settings of `streetlevel serve`; each is optional, defaults are applied by [`resolve`].
#[derive(clap::Args, Serialize, Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The data directory holding `streetlevel.sqlite` and `media/`.
    #[arg(long, env = "STREETLEVEL_DATA")]
    pub data: Option<PathBuf>,
    /// Address to listen on, `HOST:PORT` with a host name or an IP address (the first address
    /// the name resolves to that can be bound is used); port 0 picks a free port.
    /// [default: 127.0.0.1:8080]
    #[arg(long, env = "STREETLEVEL_ADDR")]
    pub addr: Option<String>,
    /// Public URL of every surface (when behind a proxy), e.g. `https://streetlevel.example`.
    #[arg(long, env = "STREETLEVEL_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Public root of the entity endpoints; default the public URL.
    #[arg(long, env = "STREETLEVEL_BASE_URL")]
    pub base_url: Option<String>,
    /// Public root of the tiles; default the public URL.
    #[arg(long, env = "STREETLEVEL_TILES_URL")]
    pub tiles_url: Option<String>,
    /// Public root of the web pages; default the public URL.
    #[arg(long, env = "STREETLEVEL_WEB_URL")]
    pub web_url: Option<String>,
    /// Public root of the signed media URLs; default the public URL.
    #[arg(long, env = "STREETLEVEL_MEDIA_URL")]
    pub media_url: Option<String>,
    /// The short name in tile set names (`mly` for clients of the original service).
    /// [default: svc]
    #[arg(long, env = "STREETLEVEL_SHORT_NAME")]
    pub short_name: Option<String>,
    /// The error body's trace member; default `<short name>trace_id` (clients of the original
    /// service read `fbtrace_id`).
    #[arg(long, env = "STREETLEVEL_TRACE_MEMBER")]
    pub trace_member: Option<String>,
    /// Everything a family of clients needs at once: `original` (the original service's SDK,
    /// viewer and maps) means `--short-name mly --trace-member fbtrace_id`. Those given at
    /// the same level or above (a flag over a variable over the file) win over it.
    #[arg(long, env = "STREETLEVEL_COMPAT", value_enum)]
    pub compat: Option<Compat>,
    /// The media signing key, hexadecimal; default on PostgreSQL the database's (shared by
    /// every replica), else `DATA/media.key`, created on first start.
    /// A secret: prefer the environment or the file to a flag, which other users can see.
    #[arg(long, env = "STREETLEVEL_MEDIA_KEY_HEX", hide_env_values = true)]
    pub media_key_hex: Option<String>,
    /// How long a signed media URL stays valid, seconds. [default: 2592000]
    #[arg(long, env = "STREETLEVEL_MEDIA_URL_LIFETIME_SECONDS")]
    pub media_url_lifetime_seconds: Option<u64>,
    /// Time to read a request's headers, and the longest idle keep-alive, seconds.
    /// [default: 10]
    #[arg(long, env = "STREETLEVEL_HEADER_READ_TIMEOUT_SECONDS")]
    pub header_read_timeout_seconds: Option<u64>,
    /// Time for a whole request body (other than an upload's) to arrive, seconds. [default: 10]
    #[arg(long, env = "STREETLEVEL_BODY_READ_TIMEOUT_SECONDS")]
    pub body_read_timeout_seconds: Option<u64>,
    /// How long a client may take none of a response before its connection is dropped,
    /// seconds (between two writes, not for the whole response). [default: 30]
    #[arg(long, env = "STREETLEVEL_SEND_TIMEOUT_SECONDS")]
    pub send_timeout_seconds: Option<u64>,
    /// Largest request body in bytes (uploads stream and have their own limits).
    /// [default: 65536]
    #[arg(long, env = "STREETLEVEL_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Connections served at once. [default: 1024]
    #[arg(long, env = "STREETLEVEL_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Connections served at once from one client address. [default: 64]
    #[arg(long, env = "STREETLEVEL_MAX_CONNECTIONS_PER_ADDRESS")]
    pub max_connections_per_address: Option<u64>,
    /// Encoded tiles kept in memory. [default: 4096]
    #[arg(long, env = "STREETLEVEL_TILE_CACHE_ENTRIES")]
    pub tile_cache_entries: Option<usize>,
    /// `Cache-Control: max-age` of tiles, seconds. [default: 3600]
    #[arg(long, env = "STREETLEVEL_TILE_MAX_AGE_SECONDS")]
    pub tile_max_age_seconds: Option<u32>,
    /// Entity calls per minute per app. [default: 60000]
    #[arg(long, env = "STREETLEVEL_LIMIT_ENTITY_PER_MIN")]
    pub limit_entity_per_min: Option<NonZeroU32>,
    /// Search calls per minute per app. [default: 10000]
    #[arg(long, env = "STREETLEVEL_LIMIT_SEARCH_PER_MIN")]
    pub limit_search_per_min: Option<NonZeroU32>,
    /// Tile requests per day per app. [default: 50000]
    #[arg(long, env = "STREETLEVEL_LIMIT_TILES_PER_DAY")]
    pub limit_tiles_per_day: Option<NonZeroU32>,
    /// A Redis server holding every app's quotas, shared by all replicas given the same one,
    /// e.g. `redis://10.0.0.5:6379` (default: each process counts its own). While it does not
    /// answer, each replica enforces the quotas on its own. May hold a password: prefer the
    /// environment or the file to a flag.
    #[arg(
        long,
        visible_alias = "redis",
        env = "STREETLEVEL_REDIS_URL",
        hide_env_values = true
    )]
    pub redis_url: Option<String>,
    /// A PostgreSQL database (with PostGIS) holding the images, apps, users and tokens instead
    /// of the data directory's `SQLite` file, e.g. `postgres://streetlevel@10.0.0.4/streetlevel`,
    /// so several replicas serve one data set (docs/SCALING.md). May hold a password: prefer
    /// the environment or the file to a flag. [default: `DATA/streetlevel.sqlite`]
    #[arg(
        long,
        visible_alias = "database",
        env = "STREETLEVEL_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// The most connections to PostgreSQL the process holds, shared by all its work (requests,
    /// the upload worker, the follower; one more listens for other replicas' writes).
    /// [default: 16]
    #[arg(long, env = "STREETLEVEL_DATABASE_CONNECTIONS")]
    pub database_connections: Option<u64>,
    /// How long a request waits for a PostgreSQL connection when all are in use before it
    /// is answered 503 with `Retry-After`, milliseconds. [default: 3000]
    #[arg(long, env = "STREETLEVEL_DATABASE_WAIT_MS")]
    pub database_wait_ms: Option<u64>,
    /// The npm `node_modules` folder holding the embed page's viewer and map packages
    /// (default: the source tree's `web/node_modules`). Without them the embed page shows a
    /// still image.
    #[arg(long, env = "STREETLEVEL_ASSETS_DIR")]
    pub assets_dir: Option<PathBuf>,
    /// Serve Prometheus metrics at `http://HOST:PORT/metrics` on a listener of their own (off
    /// by default; bind it to loopback or a private network).
    #[arg(long, env = "STREETLEVEL_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Log lines as `text` or `json` (one object per line); which lines is `RUST_LOG`'s
    /// choice (default `info`). [default: text]
    #[arg(long, env = "STREETLEVEL_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// A `MapLibre` style URL drawn under the embed page's map (streets and places), e.g.
    /// `https://tiles.openfreemap.org/styles/liberty`; off by default. When it cannot be
    /// loaded the map shows the coverage on a plain background.
    #[arg(long, env = "STREETLEVEL_BASE_MAP_STYLE_URL")]
    pub base_map_style_url: Option<String>,
    /// What a browser's `GET /` shows: the public `explorer` (map and viewer, as at
    /// `/explore`) or `links` (what this server is, with links). [default: explorer]
    #[arg(long, env = "STREETLEVEL_HOME_PAGE", value_enum)]
    pub home_page: Option<HomePage>,
    /// Largest upload session, bytes. [default: 4294967296]
    #[arg(long, env = "STREETLEVEL_MAX_UPLOAD_SESSION_BYTES")]
    pub max_upload_session_bytes: Option<u64>,
    /// Bytes one user may have uploaded and not yet processed. [default: 17179869184]
    #[arg(long, env = "STREETLEVEL_MAX_PENDING_UPLOAD_BYTES_PER_USER")]
    pub max_pending_upload_bytes_per_user: Option<u64>,
    /// The most entries a zip upload may list; more is refused at the finish call.
    /// [default: 20000]
    #[arg(long, env = "STREETLEVEL_MAX_UPLOAD_ZIP_ENTRIES")]
    pub max_upload_zip_entries: Option<u64>,
    /// The most bytes the entries of a zip upload may inflate to, in all (as its central
    /// directory declares them); more is refused at the finish call. [default: 8589934592]
    #[arg(long, env = "STREETLEVEL_MAX_UPLOAD_ZIP_INFLATED_BYTES")]
    pub max_upload_zip_inflated_bytes: Option<u64>,
    /// How long one upload job may run before it fails with that reason and the queue moves
    /// on, seconds. [default: 1800]
    #[arg(long, env = "STREETLEVEL_UPLOAD_JOB_TIME_LIMIT_SECONDS")]
    pub upload_job_time_limit_seconds: Option<u64>,
    /// Upload workers this server runs, each processing one job at a time; the workers of
    /// every replica sharing the database share one queue. [default: 1]
    #[arg(long, env = "STREETLEVEL_UPLOAD_WORKERS")]
    pub upload_workers: Option<usize>,
    /// How long a worker's claim on a job lasts unrenewed, seconds (renewed every quarter
    /// of it while the worker works): how soon another worker takes over the job of a
    /// worker that died. [default: 60]
    #[arg(long, env = "STREETLEVEL_UPLOAD_JOB_LEASE_SECONDS")]
    pub upload_job_lease_seconds: Option<u64>,
    /// How long an upload session no finish call took (or whose job ended) is kept without
    /// new bytes before its file is removed and its bytes released, seconds.
    /// [default: 604800]
    #[arg(long, env = "STREETLEVEL_UPLOAD_SESSION_MAX_AGE_SECONDS")]
    pub upload_session_max_age_seconds: Option<u64>,
    /// Memory the pictures this process works on may hold at once, bytes, whatever the
    /// number of cores: each one's whole working set (decode, detection, blurring, encoding,
    /// thumbnails, pyramid tiles); a picture waits for room, and one that alone needs more is
    /// refused. [default: 3221225472]
    #[arg(long, env = "STREETLEVEL_DECODE_MEMORY_BYTES")]
    pub decode_memory_bytes: Option<u64>,
    /// Threads of the process's one pool for CPU work: the upload workers' decoding,
    /// blurring and video decoding and the requests that blur share it, at a lower priority
    /// than the requests. [default: the number of cores]
    #[arg(long, env = "STREETLEVEL_CPU_THREADS")]
    pub cpu_threads: Option<usize>,
    /// How long a valid access token is remembered before it is read from the database
    /// again, seconds: how late a revocation by another process sharing the database takes
    /// effect (this server's own take effect at once); 0 reads every token. [default: 1]
    #[arg(long, env = "STREETLEVEL_TOKEN_CACHE_SECONDS")]
    pub token_cache_seconds: Option<u64>,
    /// Usernames of administrators, comma-separated: with a `write` token they may delete,
    /// hide and restore anyone's images. [default: none]
    #[arg(long, env = "STREETLEVEL_ADMINISTRATORS", value_delimiter = ',')]
    pub administrators: Option<Vec<String>>,
    /// Proxies in front of the server whose `X-Forwarded-For` names the client, comma-separated
    /// addresses or networks (`127.0.0.1`, `10.0.0.0/8`); the client address throttles
    /// sign-ins and forms and pays the public app's quota. [default: none: the peer is the
    /// client]
    #[arg(long, env = "STREETLEVEL_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Option<Vec<String>>,
    /// Charge the calls of the token the explorer and the embed page publish per client
    /// address (each visitor has the whole quota), not to the app. [default: true]
    #[arg(long, env = "STREETLEVEL_PUBLIC_APP_PER_ADDRESS")]
    pub public_app_per_address: Option<bool>,
    /// Blur faces and licence plates of uploads before anything of them is published; with blurring on and no usable model, jobs fail and publish nothing.
    /// [default: true]
    #[arg(long, env = "STREETLEVEL_BLUR")]
    pub blur: Option<bool>,
    /// The folder holding `libonnxruntime.so.1.32.0`, `centerface.onnx` and
    /// `PP-OCRv5_det.onnx` (default: `models/` next to the executable, else the source tree's
    /// `target/streetlevel-models`, which `cargo xtask models` fills).
    #[arg(long, env = "STREETLEVEL_BLUR_MODELS_DIR")]
    pub blur_models_dir: Option<PathBuf>,
    /// A face model (CenterFace or YuNet ONNX) instead of the pinned CenterFace; its SHA-256
    /// is recorded with every region it finds.
    #[arg(long, env = "STREETLEVEL_BLUR_FACE_MODEL")]
    pub blur_face_model: Option<PathBuf>,
    /// A licence plate detector (single-class YOLO-style ONNX, or a PP-OCR text detector, such
    /// as the models folder's `ch_PP-OCRv4_det_infer.onnx`, the default before) instead of
    /// the pinned PP-OCRv5 text detector; its SHA-256 is recorded with every region it finds.
    #[arg(long, env = "STREETLEVEL_BLUR_PLATE_MODEL")]
    pub blur_plate_model: Option<PathBuf>,
    /// Where media are kept: `s3://bucket/prefix` for an S3-compatible object store (endpoint,
    /// region and credentials from the standard `AWS_*` environment variables), instead of
    /// the data directory's files (the default).
    #[arg(long, env = "STREETLEVEL_MEDIA_STORE")]
    pub media_store: Option<String>,
    /// The object store's endpoint, region and credentials in the config file, under the
    /// standard names (`{"AWS_ENDPOINT_URL": "http://127.0.0.1:3900", "AWS_REGION": "garage",
    /// ...}`); an `AWS_*` environment variable wins over the same name here. File only: a
    /// secret on a command line is visible to other users.
    #[arg(skip)]
    pub media_store_options: Option<std::collections::BTreeMap<String, String>>,
    /// With `media_store` on S3: answer each media request (after its signature and the
    /// image's state are checked) with a redirect to a presigned URL of the object, the same
    /// URL for this many seconds; 0 streams the bytes through the server. [default: 0]
    #[arg(long, env = "STREETLEVEL_MEDIA_REDIRECT_SECONDS")]
    pub media_redirect_seconds: Option<u64>,
    /// Keep each unblurred original at `DATA/media/img/<image id>/unblurred.jpg` (never
    /// served), for blur edits and `streetlevel reblur`. [default: false]
    #[arg(long, env = "STREETLEVEL_KEEP_UNBLURRED")]
    pub keep_unblurred: Option<bool>,
    /// An external blur service speaking Panoramax's blur API (`http://host:port`, optionally
    /// `http://<token>@host:port`): pictures are sent to `POST {url}/blur/` instead of the
    /// local models (docs/PRIVACY.md).
    #[arg(long, env = "STREETLEVEL_BLUR_URL")]
    pub blur_url: Option<String>,
    /// How long an upload job waits before it is tried again when the blur service was
    /// away (it stays `received` with the reason and publishes nothing meanwhile), seconds.
    /// [default: 60]
    #[arg(long, env = "STREETLEVEL_BLUR_RETRY_SECONDS")]
    pub blur_retry_seconds: Option<u64>,
    /// Reconstruction workers this server runs (structure from motion of own imagery, one
    /// sequence at a time each, on the CPU pool); 0 runs none (another process's workers, or
    /// `streetlevel sfm`, do it). [default: 1]
    #[arg(long, env = "STREETLEVEL_SFM_WORKERS")]
    pub sfm_workers: Option<usize>,
    /// The folder of the structure-from-motion engine's virtual environment
    /// (`venv/bin/python` with pycolmap 4.2.1; default: `sfm/` next to the executable, else
    /// the source tree's `target/streetlevel-sfm`, which `cargo xtask models` fills).
    #[arg(long, env = "STREETLEVEL_SFM_ENGINE_DIR")]
    pub sfm_engine_dir: Option<PathBuf>,
    /// Threads one engine run may use. [default: the CPU pool's threads]
    #[arg(long, env = "STREETLEVEL_SFM_THREADS")]
    pub sfm_threads: Option<usize>,
    /// How long one engine run (one part of a sequence) may take, seconds. [default: 3600]
    #[arg(long, env = "STREETLEVEL_SFM_TIME_LIMIT_SECONDS")]
    pub sfm_time_limit_seconds: Option<u64>,
    /// How long a sequence waits after its images were published before it is
    /// reconstructed, seconds. [default: 5]
    #[arg(long, env = "STREETLEVEL_SFM_SETTLE_SECONDS")]
    pub sfm_settle_seconds: Option<u64>,
    /// Images per part: a longer sequence is reconstructed in overlapping parts of this many
    /// (a fifth of them shared with the next), joined afterwards. [default: 100]
    #[arg(long, env = "STREETLEVEL_SFM_PART_IMAGES")]
    pub sfm_part_images: Option<usize>,
    /// Sequences whose images come this near each other (metres) are reconstructed
    /// together, as an area; 0 reconstructs each alone. [default: 25]
    #[arg(long, env = "STREETLEVEL_SFM_AREA_METRES")]
    pub sfm_area_metres: Option<f64>,
    /// How long a reconstruction worker's claim on a job lasts unrenewed (renewed every
    /// quarter of it while it works): a job whose worker died is taken over after this,
    /// seconds. [default: 60]
    #[arg(long, env = "STREETLEVEL_SFM_LEASE_SECONDS")]
    pub sfm_lease_seconds: Option<u64>,
}

/// `--compat`: the settings a family of clients needs.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Compat {
    /// The original service's clients: tile sets `mly1_public`, …, and `fbtrace_id`.
    Original,
}

impl Compat {
    /// Fills the short name and trace member `settings` do not give.
    fn fill(self, settings: &mut Settings) {
        let (short_name, trace_member) = match self {
            Compat::Original => ("mly", "fbtrace_id"),
        };
        settings
            .short_name
            .get_or_insert_with(|| short_name.to_owned());
        settings
            .trace_member
            .get_or_insert_with(|| trace_member.to_owned());
    }
}

/// What a browser's `GET /` shows.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum HomePage {
    /// The public explorer.
    #[default]
    Explorer,
    /// The page of links.
    Links,
}

impl From<HomePage> for streetlevel_web::HomePage {
    fn from(home_page: HomePage) -> Self {
        match home_page {
            HomePage::Explorer => Self::Explorer,
            HomePage::Links => Self::Links,
        }
    }
}

/// How log lines are written.
#[derive(clap::ValueEnum, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (colours only on a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// The settings merged from the command line (flags and environment, already merged by clap)
/// over the config file at `config_file`, if any.
pub fn merge(command_line: &Settings, config_file: Option<&Path>) -> anyhow::Result<Settings> {
    // `compat` stands for the settings it implies at its own level.
    let mut command_line = command_line.clone();
    if let Some(compat) = command_line.compat {
        compat.fill(&mut command_line);
    }
    let Some(path) = config_file else {
        return Ok(command_line);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    let mut from_file: Settings = serde_json::from_str(&text)
        .with_context(|| format!("invalid config file {}", path.display()))?;
    if let Some(compat) = from_file.compat {
        compat.fill(&mut from_file);
    }
    let mut merged = serde_json::to_value(from_file)?;
    let Value::Object(over) = serde_json::to_value(&command_line)? else {
        anyhow::bail!("the settings are not a JSON object");
    };
    for (name, value) in over {
        if !value.is_null() {
            merged[name] = value;
        }
    }
    Ok(serde_json::from_value(merged)?)
}

/// What `serve` runs with, every default applied and every value checked.
pub struct Resolved {
    pub data: PathBuf,
    pub addr: String,
    pub metrics_addr: Option<String>,
    pub config: Config,
    pub limits: streetlevel_ratelimit::Config,
    /// Where the quotas are shared between replicas, if they are.
    pub redis_url: Option<String>,
    /// Where the tables live when not in the data directory's `SQLite` file.
    pub database_url: Option<String>,
    /// The PostgreSQL pool's size and wait.
    pub database_pool: streetlevel_db::PoolOptions,
    /// The web pages' settings, from the same URLs and short name as the server's.
    pub web: WebConfig,
    pub upload_limits: UploadLimits,
    /// The upload workers and their decode memory.
    pub background: UploadWork,
    /// Token lifetimes and the token cache.
    pub auth: streetlevel_auth::Config,
    /// How uploads are blurred.
    pub blur: crate::blur::BlurArgs,
    /// The reconstruction workers and their engine.
    pub sfm: crate::sfm::Background,
}

/// The administrators' usernames as given, blanks left out.
/// The settings that must be at least 1 when given.
fn check_at_least_one(settings: &Settings) -> anyhow::Result<()> {
    for (name, value) in [
        (
            "header_read_timeout_seconds",
            settings.header_read_timeout_seconds,
        ),
        (
            "body_read_timeout_seconds",
            settings.body_read_timeout_seconds,
        ),
        (
            "max_connections_per_address",
            settings.max_connections_per_address,
        ),
    ] {
        anyhow::ensure!(value != Some(0), "{name} must be at least 1");
    }
    Ok(())
}

fn administrators(names: Option<Vec<String>>) -> Vec<String> {
    names
        .unwrap_or_default()
        .into_iter()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Applies the defaults. The public URL sets every surface whose own URL is not given.
/// `media_key` turns the data directory and `media_key_hex` into the signing key (empty for
/// one the caller finds later).
pub fn resolve(
    settings: Settings,
    debug_panic_route: bool,
    media_key: impl FnOnce(&Path, Option<&str>) -> anyhow::Result<Vec<u8>>,
) -> anyhow::Result<Resolved> {
    check_public_urls(&settings)?;
    check_at_least_one(&settings)?;
    let limits = rate_limits(&settings);
    let (upload_limits, background) = upload_limits(&settings)?;
    let sfm = sfm_background(&settings);
    let (auth, blur, database_pool) = (
        auth_config(&settings),
        blur_args(&settings),
        database_pool(settings.database_connections, settings.database_wait_ms)?,
    );
    let data = settings.data.context(
        "no data directory: pass --data DIR (or set STREETLEVEL_DATA, or `data` in the config file)",
    )?;
    anyhow::ensure!(
        data.is_dir(),
        "the data directory {} does not exist (create one with `streetlevel fixtures --out {}`)",
        data.display(),
        data.display()
    );
    let public_url = settings.public_url;
    let defaults = Config::default();
    let seconds =
        |value: Option<u64>, default: Duration| value.map_or(default, Duration::from_secs);
    let config = Config {
        // The listener is bound from `addr`; this is only its fallback.
        bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
        base_url: settings.base_url.or_else(|| public_url.clone()),
        tiles_url: settings.tiles_url.or_else(|| public_url.clone()),
        web_url: settings.web_url.or_else(|| public_url.clone()),
        media_url: settings.media_url.or_else(|| public_url.clone()),
        short_name: settings.short_name.unwrap_or(defaults.short_name.clone()),
        trace_member: settings.trace_member,
        media_key: media_key(&data, settings.media_key_hex.as_deref())?,
        media_url_lifetime: settings
            .media_url_lifetime_seconds
            .map_or(defaults.media_url_lifetime, Duration::from_secs),
        header_read_timeout: seconds(
            settings.header_read_timeout_seconds,
            defaults.header_read_timeout,
        ),
        body_read_timeout: seconds(
            settings.body_read_timeout_seconds,
            defaults.body_read_timeout,
        ),
        send_timeout: seconds(settings.send_timeout_seconds, defaults.send_timeout),
        max_body_bytes: settings.max_body_bytes.unwrap_or(defaults.max_body_bytes),
        max_connections: settings.max_connections.unwrap_or(defaults.max_connections),
        max_connections_per_address: settings
            .max_connections_per_address
            .map_or(defaults.max_connections_per_address, |value| {
                usize::try_from(value).unwrap_or(usize::MAX)
            }),
        tile_cache_entries: settings
            .tile_cache_entries
            .unwrap_or(defaults.tile_cache_entries),
        tile_max_age_seconds: settings
            .tile_max_age_seconds
            .unwrap_or(defaults.tile_max_age_seconds),
        media_redirect_seconds: settings.media_redirect_seconds.unwrap_or_default(),
        debug_panic_route,
        administrators: administrators(settings.administrators),
        trusted_proxies: streetlevel_server::parse_trusted_proxies(
            &settings.trusted_proxies.unwrap_or_default(),
        )
        .map_err(|reason| anyhow::anyhow!("trusted_proxies: {reason}"))?,
        public_app_per_address: settings.public_app_per_address.unwrap_or(true),
    };
    let limits = streetlevel_ratelimit::Config {
        trace_member: config.trace_member(),
        ..limits
    };
    let web = web_config(&config, settings.assets_dir, settings.base_map_style_url);
    Ok(Resolved {
        data,
        metrics_addr: settings.metrics_addr,
        addr: settings
            .addr
            .unwrap_or_else(|| String::from("127.0.0.1:8080")),
        config,
        limits,
        redis_url: settings.redis_url,
        database_url: settings.database_url,
        database_pool,
        web: with_home_page(web, settings.home_page),
        upload_limits,
        background,
        auth,
        blur,
        sfm,
    })
}

/// The reconstruction workers and their engine, the defaults where a setting is missing.
fn sfm_background(settings: &Settings) -> crate::sfm::Background {
    crate::sfm::Background {
        workers: settings.sfm_workers.unwrap_or(1),
        settle: Duration::from_secs(settings.sfm_settle_seconds.unwrap_or(5)),
        lease: Duration::from_secs(settings.sfm_lease_seconds.unwrap_or(60).max(1)),
        engine: crate::sfm::EngineArgs {
            engine_dir: settings.sfm_engine_dir.clone(),
            threads: settings.sfm_threads,
            time_limit_seconds: settings.sfm_time_limit_seconds,
            part_images: settings.sfm_part_images,
            area_metres: settings.sfm_area_metres,
        },
    }
}

/// The PostgreSQL pool's options, the defaults where a setting is missing.
fn database_pool(
    connections: Option<u64>,
    wait_ms: Option<u64>,
) -> anyhow::Result<streetlevel_db::PoolOptions> {
    anyhow::ensure!(
        connections != Some(0),
        "database_connections must be at least 1"
    );
    let defaults = streetlevel_db::PoolOptions::default();
    Ok(streetlevel_db::PoolOptions {
        max_connections: connections.map_or(defaults.max_connections, |value| {
            usize::try_from(value).unwrap_or(usize::MAX)
        }),
        wait: wait_ms.map_or(defaults.wait, Duration::from_millis),
    })
}

/// `web` showing `home_page` (default: the explorer) at a browser's `GET /`.
fn with_home_page(web: WebConfig, home_page: Option<HomePage>) -> WebConfig {
    WebConfig {
        home_page: home_page.unwrap_or_default().into(),
        ..web
    }
}

/// The web pages' settings, from the same URLs and short name as the server's.
fn web_config(
    config: &Config,
    assets_dir: Option<PathBuf>,
    base_map_style_url: Option<String>,
) -> WebConfig {
    WebConfig {
        web_url: config.web_url.clone(),
        base_url: config.base_url.clone(),
        tiles_url: config.tiles_url.clone(),
        media_url: config.media_url.clone(),
        short_name: config.short_name.clone(),
        // Without one, the web crate's default: `assets/` next to the executable or the
        // source tree's `web/node_modules`.
        assets_dir: assets_dir.unwrap_or_else(streetlevel_web::default_assets_dir),
        base_map_style_url,
        home_page: streetlevel_web::HomePage::default(),
    }
}

fn blur_args(settings: &Settings) -> crate::blur::BlurArgs {
    crate::blur::BlurArgs {
        blur: settings.blur,
        blur_models_dir: settings.blur_models_dir.clone(),
        blur_face_model: settings.blur_face_model.clone(),
        blur_plate_model: settings.blur_plate_model.clone(),
        keep_unblurred: settings.keep_unblurred,
        blur_url: settings.blur_url.clone(),
    }
}

fn auth_config(settings: &Settings) -> streetlevel_auth::Config {
    let defaults = streetlevel_auth::Config::default();
    streetlevel_auth::Config {
        token_cache_ttl: settings
            .token_cache_seconds
            .map_or(defaults.token_cache_ttl, Duration::from_secs),
        ..defaults
    }
}

fn rate_limits(settings: &Settings) -> streetlevel_ratelimit::Config {
    let limits_defaults = streetlevel_ratelimit::Config::default();
    streetlevel_ratelimit::Config {
        entity_per_minute: settings
            .limit_entity_per_min
            .unwrap_or(limits_defaults.entity_per_minute),
        search_per_minute: settings
            .limit_search_per_min
            .unwrap_or(limits_defaults.search_per_minute),
        tiles_per_window: settings
            .limit_tiles_per_day
            .unwrap_or(limits_defaults.tiles_per_window),
        ..limits_defaults
    }
}

/// How the process processes uploads.
#[derive(Debug, Clone, Copy)]
pub struct UploadWork {
    /// The memory the image decodes of the process may hold at once.
    pub decode_memory_bytes: u64,
    /// The threads of the process's CPU pool; `None`: the number of cores.
    pub cpu_threads: Option<usize>,
    /// How many upload workers the process runs (at least 1).
    pub workers: usize,
}

/// The upload limits, and how the process processes uploads.
fn upload_limits(settings: &Settings) -> anyhow::Result<(UploadLimits, UploadWork)> {
    anyhow::ensure!(
        settings.upload_job_time_limit_seconds != Some(0)
            && settings.upload_session_max_age_seconds != Some(0)
            && settings.upload_job_lease_seconds != Some(0)
            && settings.upload_workers != Some(0)
            && settings.cpu_threads != Some(0),
        "upload_job_time_limit_seconds, upload_session_max_age_seconds, \
         upload_job_lease_seconds, upload_workers and cpu_threads must be at least 1"
    );
    let upload_defaults = UploadLimits::default();
    let limits = UploadLimits {
        max_session_bytes: settings
            .max_upload_session_bytes
            .unwrap_or(upload_defaults.max_session_bytes),
        max_pending_bytes_per_user: settings
            .max_pending_upload_bytes_per_user
            .unwrap_or(upload_defaults.max_pending_bytes_per_user),
        max_zip_entries: settings
            .max_upload_zip_entries
            .unwrap_or(upload_defaults.max_zip_entries),
        max_zip_inflated_bytes: settings
            .max_upload_zip_inflated_bytes
            .unwrap_or(upload_defaults.max_zip_inflated_bytes),
        job_time_limit: settings
            .upload_job_time_limit_seconds
            .map_or(upload_defaults.job_time_limit, Duration::from_secs),
        session_max_age: settings
            .upload_session_max_age_seconds
            .map_or(upload_defaults.session_max_age, Duration::from_secs),
        blur_retry_after: settings
            .blur_retry_seconds
            .map_or(upload_defaults.blur_retry_after, Duration::from_secs),
        job_lease: settings
            .upload_job_lease_seconds
            .map_or(upload_defaults.job_lease, Duration::from_secs),
    };
    let decode_memory_bytes = settings
        .decode_memory_bytes
        .unwrap_or(streetlevel_import::DEFAULT_DECODE_MEMORY_BYTES);
    let work = UploadWork {
        decode_memory_bytes,
        cpu_threads: settings.cpu_threads,
        workers: settings.upload_workers.unwrap_or(1),
    };
    Ok((limits, work))
}

/// A public URL must be absolute `http` or `https` with a host: it is pasted in front of
/// every path the server hands out.
/// [`check_public_url`] for each URL the settings give.
fn check_public_urls(settings: &Settings) -> anyhow::Result<()> {
    for (name, url) in [
        ("the public URL", settings.public_url.as_ref()),
        ("base_url", settings.base_url.as_ref()),
        ("tiles_url", settings.tiles_url.as_ref()),
        ("web_url", settings.web_url.as_ref()),
        ("media_url", settings.media_url.as_ref()),
        ("base_map_style_url", settings.base_map_style_url.as_ref()),
    ] {
        check_public_url(name, url)?;
    }
    Ok(())
}

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

/// The settings with no flag and no variable of their own.
#[cfg(test)]
const FILE_ONLY: &[&str] = &["media_store_options"];

/// Every setting's name in the config file, in declaration order.
#[cfg(test)]
pub fn names() -> Vec<String> {
    let Ok(Value::Object(members)) = serde_json::to_value(Settings::default()) else {
        return Vec::new();
    };
    members.keys().cloned().collect()
}

#[cfg(test)]
mod tests;
