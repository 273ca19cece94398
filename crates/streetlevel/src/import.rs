//! `streetlevel import`: geotagged JPEG files and folders into a data directory, with a
//! progress bar and a summary of what was imported, skipped and refused (and why).
//!
//! The images go to the data directory's `SQLite` file, or with `--database-url` (as `serve`
//! takes it) to PostgreSQL, while their media files go to the data directory's `media/`
//! either way (which replicas share). A server on the same database shows the new images
//! within a second or two (it follows the database's write log); nothing needs a restart.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use streetlevel_db::Location;
use streetlevel_import::{ImportError, ImportOptions, Outcome, Progress, Report, import_paths};
use streetlevel_ingest::sequence::CutRules;
use streetlevel_model::OrganizationId;
use streetlevel_store::Store;

/// Options of `streetlevel import`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the media go (`--media-store s3://bucket/prefix`; default the data directory).
    #[command(flatten)]
    pub media_store: crate::media_store::MediaStoreArgs,
    /// The data directory (created if it does not exist): the media files go to its `media/`.
    #[arg(long)]
    data: PathBuf,
    /// The PostgreSQL database (with PostGIS) the images go to instead of the data
    /// directory's `SQLite` file, as `serve --database-url` takes it: replicas on that
    /// database serve them within a second. May hold a password: prefer the environment.
    #[arg(
        long,
        visible_alias = "database",
        env = "STREETLEVEL_DATABASE_URL",
        hide_env_values = true
    )]
    database_url: Option<String>,
    /// The username the images are credited to.
    #[arg(long, default_value = "import")]
    user: String,
    /// The ID of an existing organization the images are contributed to.
    #[arg(long)]
    organization: Option<u64>,
    /// Start a new sequence after a gap longer than this many seconds.
    #[arg(long, default_value_t = CutRules::default().cutoff_time_seconds)]
    cutoff_time: f64,
    /// Start a new sequence after a jump longer than this many metres.
    #[arg(long, default_value_t = CutRules::default().cutoff_distance_meters)]
    cutoff_distance: f64,
    /// Drop an image within this many metres of the previous one ...
    #[arg(long, default_value_t = CutRules::default().duplicate_distance_meters)]
    duplicate_distance: f64,
    /// ... whose compass differs by at most this many degrees.
    #[arg(long, default_value_t = CutRules::default().duplicate_angle_degrees)]
    duplicate_angle: f64,
    /// Refuse images that imply a faster speed than this from the previous one.
    #[arg(long, default_value_t = CutRules::default().max_speed_kmh)]
    max_speed_kmh: f64,
    /// Keep a video frame when it is more than this many metres from the last one kept (the
    /// official uploader's default).
    #[arg(long, default_value_t = streetlevel_video::DEFAULT_SAMPLE_DISTANCE)]
    video_sample_distance: f64,
    /// Keep a video frame every this many seconds instead of by distance.
    #[arg(long)]
    video_sample_interval: Option<f64>,
    /// The ffmpeg program that decodes video frames (Debian's `ffmpeg` package).
    #[arg(long, default_value = "ffmpeg")]
    ffmpeg: PathBuf,
    #[command(flatten)]
    blur: crate::blur::BlurArgs,
    #[command(flatten)]
    memory: PictureMemoryArgs,
    /// JPEG files and videos (`.mp4`, `.mov`, `.360`; a GPX track beside a video as
    /// `VIDEO.gpx`), or folders searched recursively for them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// The picture memory of `import` and `reblur`, as `serve` has it among its settings.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PictureMemoryArgs {
    /// The memory the pictures this process works on may hold at once, in bytes: each one's
    /// whole working set (decode, detection, blurring, encoding, thumbnails); a picture waits
    /// for room, and one that alone needs more is refused. [default: 3221225472]
    #[arg(long, env = "STREETLEVEL_DECODE_MEMORY_BYTES")]
    pub decode_memory_bytes: Option<u64>,
}

impl PictureMemoryArgs {
    /// Sets the process's picture memory when given.
    pub fn apply(&self) {
        if let Some(bytes) = self.decode_memory_bytes {
            streetlevel_import::set_decode_memory_limit(bytes);
        }
    }
}

/// The store the images go to: the data directory's `SQLite` file, or the PostgreSQL
/// database of `--database-url` (the media directory is made either way).
fn open_store(args: &Args) -> anyhow::Result<Store> {
    let location = crate::serve::database_location(&args.data, args.database_url.clone())?;
    match &location {
        Location::Sqlite(_) => Store::open(&args.data)
            .with_context(|| format!("cannot open the data directory {}", args.data.display())),
        Location::Postgres(url) => {
            let media = Store::media_dir(&args.data);
            std::fs::create_dir_all(&media)
                .with_context(|| format!("cannot create {}", media.display()))?;
            Store::open_location(&location).with_context(|| {
                format!("cannot open the database {}", streetlevel_db::redact(url))
            })
        }
    }
}

/// How videos are sampled and decoded, from the flags.
fn video_options(args: &Args) -> anyhow::Result<streetlevel_import::VideoOptions> {
    use streetlevel_video::{DecodeLimits, Sampling};
    let sampling = if let Some(seconds) = args.video_sample_interval {
        anyhow::ensure!(seconds > 0.0, "--video-sample-interval must be positive");
        Sampling::Interval(seconds)
    } else {
        anyhow::ensure!(
            args.video_sample_distance >= 0.0,
            "--video-sample-distance must not be negative"
        );
        Sampling::Distance(args.video_sample_distance)
    };
    Ok(streetlevel_import::VideoOptions {
        sampling,
        limits: DecodeLimits {
            program: args.ffmpeg.clone(),
            ..DecodeLimits::default()
        },
    })
}

/// Imports; fails (non-zero exit) only when no file could be imported or found stored.
#[allow(clippy::print_stdout)]
#[allow(clippy::too_many_lines)] // the command's steps in the order they run, then its report
pub fn run(args: &Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("cannot create the data directory {}", args.data.display()))?;
    let location = crate::serve::database_location(&args.data, args.database_url.clone())?;
    args.memory.apply();
    args.media_store.apply(&args.data)?;
    // Before the store loads: with blurring on and no usable model, nothing is imported.
    let blurring = args.blur.blurring();
    if let streetlevel_import::Blurring::Unusable(reason) = &blurring {
        anyhow::bail!("nothing was imported: {reason}");
    }
    eprintln!(
        "{}",
        crate::blur::describe(&blurring, &args.blur, &args.data)
    );
    let store = RwLock::new(open_store(args)?);
    let options = ImportOptions {
        blurring,
        database: Some(location),
        username: args.user.clone(),
        organization: args.organization.map(OrganizationId),
        rules: CutRules {
            cutoff_time_seconds: args.cutoff_time,
            cutoff_distance_meters: args.cutoff_distance,
            duplicate_distance_meters: args.duplicate_distance,
            duplicate_angle_degrees: args.duplicate_angle,
            max_speed_kmh: args.max_speed_kmh,
            ..CutRules::default()
        },
        video: video_options(args)?,
    };
    let bar = Mutex::new(None::<(&'static str, ProgressBar)>);
    let started = Instant::now();
    let storing_started = Mutex::new(None::<Instant>);
    let show = |progress: Progress| {
        if matches!(progress, Progress::Storing { .. }) {
            storing_started
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_or_insert_with(Instant::now);
        }
        let (label, done, total) = match progress {
            Progress::Reading { done, total } => ("files read", done, total),
            Progress::Storing { done, total } => ("images stored", done, total),
        };
        let mut bar = bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if bar.as_ref().is_none_or(|(shown, _)| *shown != label) {
            if let Some((_, old)) = bar.take() {
                old.finish();
            }
            let new = ProgressBar::new(total as u64);
            if let Ok(style) = ProgressStyle::with_template(&format!(
                "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {label} ({{per_sec}}, eta {{eta}})"
            )) {
                new.set_style(style);
            }
            *bar = Some((label, new));
        }
        if let Some((_, bar)) = bar.as_ref() {
            bar.set_position(done as u64);
        }
    };
    let report = import_paths(&store, &args.data, &args.paths, &options, &show).map_err(
        |error| match error {
            ImportError::BlurUnavailable(_) => anyhow::anyhow!(
                "{error}. The sequences finished before are published, blurred: run the same \
                 import again once the blur service answers, it skips them"
            ),
            ImportError::MediaStoreUnavailable(_) => anyhow::anyhow!(
                "{error}. The sequences finished before are published with all their media: \
                 run the same import again once the media store answers, it skips them"
            ),
            other => other.into(),
        },
    )?;
    if let Some((_, bar)) = bar
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        bar.finish();
    }
    let mut out = std::io::stdout().lock();
    write_outcomes(&mut out, &report)?;
    // How long reading (metadata and hashes) and storing (thumbnails, originals, the
    // database) took: docs/PERFORMANCE.md quotes these.
    let total = started.elapsed();
    let storing = storing_started
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .map_or(Duration::ZERO, |at| at.elapsed());
    writeln!(
        out,
        "took {:.2} s: reading {:.2} s, thumbnails and storing {:.2} s ({:.1} images/s; \
         blurring {:.2} s and thumbnails {:.2} s summed over the threads)",
        total.as_secs_f64(),
        total.saturating_sub(storing).as_secs_f64(),
        storing.as_secs_f64(),
        f64::from(u32::try_from(report.imported()).unwrap_or(u32::MAX))
            / total.as_secs_f64().max(1e-9),
        report.blur_time.as_secs_f64(),
        report.thumbnail_time.as_secs_f64(),
    )?;
    anyhow::ensure!(
        report.imported() + report.duplicates() > 0,
        "no image could be imported from {} files",
        report.files.len()
    );
    Ok(())
}

/// One line per file not imported and per warning, the summary, and where the capture times
/// came from.
fn write_outcomes(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    for file in &report.files {
        match &file.outcome {
            Outcome::Imported(_) => {}
            Outcome::Duplicate(id) => {
                writeln!(out, "skipped {}: imported before as image {id}", file.file)?;
            }
            Outcome::Refused(reason) => {
                writeln!(out, "refused {}: {reason}", file.file)?;
            }
        }
    }
    for (file, warning) in report.warnings() {
        writeln!(out, "warning {file}: {warning}")?;
    }
    writeln!(
        out,
        "imported {} images in {} sequences, skipped {} imported before, refused {}",
        report.imported(),
        report.sequences.len(),
        report.duplicates(),
        report.refused()
    )?;
    let sources: Vec<String> = report
        .time_sources()
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(source, count)| format!("{count} {}", source.as_str()))
        .collect();
    if !sources.is_empty() {
        writeln!(out, "capture times from: {}", sources.join(", "))?;
    }
    Ok(())
}
