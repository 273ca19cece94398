//! Structure from motion in the binary: the engine settings `serve` and `streetlevel sfm`
//! share, the pictures a job reads from the data directory (the 2048 px thumbnail the server
//! serves, the original's Exif for the focal length), the server's reconstruction workers,
//! and the `streetlevel sfm` command.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use streetlevel_db::Database;
use streetlevel_model::ImageId;
use streetlevel_server::MediaSource;
use streetlevel_server::media::{MediaObject, ThumbSize};
use streetlevel_sfm::{
    Engine, EngineOptions, JobState, Outcome, Pictures, Queue, Reconstructor, Settings, Thumbnail,
};
use streetlevel_store::Store;

/// The engine flags of `streetlevel sfm` (`serve` has the same ones among its settings).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EngineArgs {
    /// The folder of the structure-from-motion engine's virtual environment
    /// (`venv/bin/python` with pycolmap 4.2.1; default: `sfm/` next to the executable, else
    /// the source tree's `target/streetlevel-sfm`, which `cargo xtask models` fills).
    #[arg(long = "sfm-engine-dir", env = "STREETLEVEL_SFM_ENGINE_DIR")]
    pub engine_dir: Option<PathBuf>,
    /// Threads one engine run may use. [default: the CPU pool's threads]
    #[arg(long = "sfm-threads", env = "STREETLEVEL_SFM_THREADS")]
    pub threads: Option<usize>,
    /// How long one engine run (one part of a sequence) may take, seconds. [default: 3600]
    #[arg(
        long = "sfm-time-limit-seconds",
        env = "STREETLEVEL_SFM_TIME_LIMIT_SECONDS"
    )]
    pub time_limit_seconds: Option<u64>,
    /// Images per part: a longer sequence is reconstructed in overlapping parts of this many
    /// (a fifth of them shared with the next), joined afterwards. [default: 100]
    #[arg(long = "sfm-part-images", env = "STREETLEVEL_SFM_PART_IMAGES")]
    pub part_images: Option<usize>,
    /// Sequences whose images come this near each other (metres) are reconstructed
    /// together, as an area, so that their images share one `merge_cc` where the engine
    /// matched them; 0 reconstructs each alone. [default: 25]
    #[arg(long = "sfm-area-metres", env = "STREETLEVEL_SFM_AREA_METRES")]
    pub area_metres: Option<f64>,
}

impl EngineArgs {
    /// How sequences are split and reconstructed.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let defaults = Settings::default();
        let part_images = self.part_images.unwrap_or(defaults.part_images);
        anyhow::ensure!(part_images >= 5, "sfm_part_images must be at least 5");
        let area_metres = self.area_metres.unwrap_or(defaults.area_metres);
        anyhow::ensure!(
            area_metres.is_finite() && (0.0..=1000.0).contains(&area_metres),
            "sfm_area_metres must be between 0 and 1000"
        );
        Ok(Settings {
            part_images,
            part_overlap: (part_images / 5).max(3),
            area_metres,
            ..defaults
        })
    }
}

impl EngineArgs {
    /// The engine these flags name, or why it cannot run.
    pub fn engine(&self) -> Result<Engine, streetlevel_sfm::SfmError> {
        let dir = self.engine_dir.clone().unwrap_or_else(|| {
            streetlevel_sfm::default_engine_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        });
        let defaults = EngineOptions::default();
        Engine::find(
            &dir,
            EngineOptions {
                threads: self
                    .threads
                    .unwrap_or_else(streetlevel_import::cpu_threads)
                    .max(1),
                time_limit: self
                    .time_limit_seconds
                    .map_or(defaults.time_limit, Duration::from_secs),
                ..defaults
            },
        )
    }
}

/// A job's pictures from the data directory: the 2048 px thumbnail as the server serves it
/// (made from the original and cached when missing) and the original's Exif.
pub struct DataDirPictures {
    media: Arc<dyn MediaSource>,
    kept: streetlevel_media::MediaStore,
}

impl DataDirPictures {
    /// The pictures of `media`, with thumbnails kept in `kept`.
    pub fn new(media: Arc<dyn MediaSource>, kept: streetlevel_media::MediaStore) -> Self {
        DataDirPictures { media, kept }
    }
}

impl Pictures for DataDirPictures {
    fn thumbnail(&self, image: ImageId) -> Result<Thumbnail, String> {
        let bytes = streetlevel_server::media::load(
            self.media.as_ref(),
            &self.kept,
            &MediaObject::Thumb(image, ThumbSize::W2048),
        )
        .map_err(|error| error.to_string())?
        .ok_or_else(|| String::from("its picture is missing"))?;
        let (width, height) =
            image::ImageReader::with_format(std::io::Cursor::new(&bytes), image::ImageFormat::Jpeg)
                .into_dimensions()
                .map_err(|error| format!("its thumbnail is unreadable: {error}"))?;
        Ok(Thumbnail {
            bytes,
            width,
            height,
        })
    }

    fn focal_length_35mm(&self, image: ImageId) -> Option<f64> {
        let original = self.media.original(image).ok()??;
        streetlevel_ingest::focal_length_35mm(&original)
    }
}

/// What the server's reconstruction does.
#[derive(Debug, Clone)]
pub struct Background {
    /// Reconstruction workers (0: none).
    pub workers: usize,
    /// How long a sequence waits after its images were published.
    pub settle: Duration,
    /// How long a worker's claim on a job lasts unrenewed.
    pub lease: Duration,
    /// The engine.
    pub engine: EngineArgs,
}

/// A reconstructor for the data directory `data` on `database`.
pub fn reconstructor(
    data: &Path,
    database: Database,
    store: Arc<RwLock<Store>>,
    media: Arc<dyn MediaSource>,
    engine: &EngineArgs,
    settle: Duration,
    lease: Duration,
) -> anyhow::Result<Reconstructor> {
    let mut queue = Queue::open(database).context("cannot open the reconstruction tables")?;
    queue.settle = settle;
    queue.lease = lease;
    let pictures = DataDirPictures::new(media, streetlevel_import::media_store(data));
    Ok(Reconstructor::new(
        queue,
        store,
        engine.engine(),
        Arc::new(pictures),
        data,
        engine.settings()?,
    ))
}

/// Starts the server's reconstruction workers: each finds the sequences to reconstruct (new
/// images without a mesh) whenever the store changed, and runs their jobs one at a time on
/// the CPU pool, the engine at a lower priority still.
pub fn start_workers(
    reconstructor: &Arc<Reconstructor>,
    store: &Arc<RwLock<Store>>,
    workers: usize,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Vec<std::thread::JoinHandle<()>>> {
    match reconstructor.engine_missing() {
        Some(reason) if workers > 0 => tracing::warn!(
            %reason,
            "structure from motion cannot run: sequences are queued and skipped with this reason, images keep their GPS values"
        ),
        None if workers > 0 => {
            match reconstructor.queue().requeue_skipped_for_engine() {
                Ok(0) => {}
                Ok(requeued) => tracing::info!(
                    requeued,
                    "sequences skipped while the engine was missing are queued again"
                ),
                Err(error) => tracing::warn!(%error, "cannot queue skipped sequences again"),
            }
            tracing::info!(
                workers,
                "structure from motion: reconstruction workers started"
            );
        }
        _ => {}
    }
    (0..workers)
        .map(|index| {
            let (reconstructor, store, stop) = (
                Arc::clone(reconstructor),
                Arc::clone(store),
                Arc::clone(stop),
            );
            std::thread::Builder::new()
                .name(format!("sfm worker {index}"))
                .spawn(move || run_worker(&reconstructor, &store, &stop))
                .context("cannot start a reconstruction worker")
        })
        .collect()
}

/// How long the command's claim on a job lasts unrenewed: a killed run's jobs are taken up
/// again by the next run (or a server) after this.
const LEASE: Duration = Duration::from_secs(60);

/// How often a worker looks for new sequences even when the store did not change here
/// (another process may have queued or finished jobs).
const SCAN_INTERVAL: Duration = Duration::from_secs(30);

fn run_worker(reconstructor: &Reconstructor, store: &RwLock<Store>, stop: &AtomicBool) {
    let worker = streetlevel_sfm::worker_name();
    let mut scanned: Option<(u64, Instant)> = None;
    while !stop.load(Ordering::Relaxed) {
        let generation = store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .generation();
        if scanned.is_none_or(|(at, when)| at != generation || when.elapsed() >= SCAN_INTERVAL) {
            let summaries = store
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .sequence_summaries();
            match reconstructor.queue().queue_new(summaries) {
                Ok(queued) if !queued.is_empty() => {
                    tracing::info!(
                        sequences = queued.len(),
                        "sequences queued for reconstruction"
                    );
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "cannot queue sequences for reconstruction"),
            }
            scanned = Some((generation, Instant::now()));
        }
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            streetlevel_import::run_on_cpu_pool(|| {
                reconstructor.run_next(&worker, None, stop, &|_, _| {})
            })
        }));
        match ran {
            Ok(Ok(Some(outcome))) => log_outcome(&outcome),
            Ok(Ok(None)) => pause(stop, Duration::from_secs(1)),
            Ok(Err(error)) => {
                tracing::warn!(%error, "the reconstruction queue failed");
                pause(stop, Duration::from_secs(5));
            }
            Err(_) => {
                // Its lease runs out and another worker (or this one) takes the job up again,
                // at most three times.
                tracing::error!("a reconstruction panicked");
                pause(stop, Duration::from_secs(5));
            }
        }
    }
}

fn pause(stop: &AtomicBool, duration: Duration) {
    let until = Instant::now() + duration;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log_outcome(outcome: &Outcome) {
    let report = outcome.report.as_ref();
    let number = |name: &str| report.and_then(|report| report[name].as_f64());
    match outcome.state {
        JobState::Done => tracing::info!(
            sequence = outcome.sequence,
            images = number("images"),
            registered = number("registered"),
            median_gps_distance_m = number("median_gps_distance_m"),
            "sequence reconstructed"
        ),
        JobState::Queued => {}
        _ => tracing::info!(
            sequence = outcome.sequence,
            state = outcome.state.as_str(),
            reason = outcome.reason.as_deref().unwrap_or_default(),
            "sequence not reconstructed"
        ),
    }
}

/// Options of `streetlevel sfm`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The data directory.
    #[arg(long)]
    data: PathBuf,
    /// The PostgreSQL database (with PostGIS) instead of the data directory's `SQLite` file,
    /// as `serve --database-url` takes it. May hold a password: prefer the environment.
    #[arg(
        long,
        visible_alias = "database",
        env = "STREETLEVEL_DATABASE_URL",
        hide_env_values = true
    )]
    database_url: Option<String>,
    /// Reconstruct (again) this sequence; may be given more than once.
    #[arg(long = "sequence")]
    sequences: Vec<String>,
    /// Reconstruct (again) every sequence with an image in this box: west,south,east,north.
    // Not `num_args = 4`: clap counts that before it splits at the commas, and refuses
    // `--bbox W,S,E,N` as one value; the count is checked where the box is made.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    bbox: Option<Vec<f64>>,
    /// Without --sequence or --bbox: every sequence not reconstructed yet (the default);
    /// with --all, every sequence of own imagery (with an image without a mesh) again.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// `streetlevel sfm`: queues the sequences asked for and runs their jobs here, one at a
/// time, printing where each is and a report per sequence. Resumable: a job interrupted
/// (the command killed) keeps its finished parts and is taken up again by the next run
/// once its lease (60 s) ran out, here or by a server's worker.
#[allow(clippy::print_stdout)]
pub fn run(args: &Args) -> anyhow::Result<()> {
    let location = crate::serve::database_location(&args.data, args.database_url.clone())?;
    let store = match &location {
        streetlevel_db::Location::Sqlite(_) => Store::open(&args.data)
            .with_context(|| format!("cannot open the data directory {}", args.data.display()))?,
        streetlevel_db::Location::Postgres(_) => {
            Store::open_location(&location).context("cannot open the database")?
        }
    };
    let database = store
        .database()
        .cloned()
        .context("the store has no database")?;
    let selected = selected_sequences(args, &store, &database)?;
    let store = Arc::new(RwLock::new(store));
    let media: Arc<dyn MediaSource> = Arc::new(crate::serve::media::DataDirMedia::new(
        &args.data,
        Arc::clone(&store),
    ));
    let reconstructor = reconstructor(
        &args.data,
        database,
        Arc::clone(&store),
        media,
        &args.engine,
        Duration::ZERO,
        LEASE,
    )?;
    if let Some(reason) = reconstructor.engine_missing() {
        eprintln!("warning: {reason}");
    }
    let queue = reconstructor.queue();
    let mut sequences: Vec<String> = selected
        .iter()
        .map(|(sequence, _)| sequence.clone())
        .collect();
    if selected.is_empty() {
        let summaries = store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .sequence_summaries();
        queue.queue_new(summaries)?;
        sequences = queue
            .jobs()?
            .into_iter()
            .filter(|job| matches!(job.state, JobState::Queued | JobState::Running))
            .map(|job| job.sequence)
            .collect();
    } else {
        queue.queue(&selected, Duration::ZERO)?;
    }
    eprintln!("{} sequences to reconstruct", sequences.len());
    let worker = streetlevel_sfm::worker_name();
    let stop = AtomicBool::new(false);
    let mut done = 0;
    let total = sequences.len();
    loop {
        let outcome = streetlevel_import::run_on_cpu_pool(|| {
            reconstructor.run_next(&worker, Some(&sequences), &stop, &|sequence, stage| {
                eprintln!("[{}/{total}] {sequence}: {stage}", done + 1);
            })
        })?;
        let Some(outcome) = outcome else {
            break;
        };
        done += 1;
        println!("{}", describe(&outcome));
    }
    let waiting: Vec<String> = queue
        .jobs()?
        .into_iter()
        .filter(|job| sequences.contains(&job.sequence) && job.state == JobState::Running)
        .map(|job| job.sequence)
        .collect();
    if !waiting.is_empty() {
        eprintln!(
            "{} sequences are held by another worker (a server's, or an earlier run of this \
             command whose lease has not run out yet): {}",
            waiting.len(),
            waiting.join(", ")
        );
    }
    Ok(())
}

/// The sequences `args` name (with their greatest image ID): those with an image in the box
/// and those named, or with `--all` every sequence of own imagery; none by default (then the
/// queue's own choice: what is not reconstructed yet).
fn selected_sequences(
    args: &Args,
    store: &Store,
    database: &Database,
) -> anyhow::Result<Vec<(String, u64)>> {
    let summaries = store.sequence_summaries();
    Ok(if !args.sequences.is_empty() || args.bbox.is_some() {
        let mut wanted: std::collections::BTreeSet<String> =
            args.sequences.iter().cloned().collect();
        if let Some(bbox) = &args.bbox {
            anyhow::ensure!(bbox.len() == 4, "--bbox takes west,south,east,north");
            let filter = streetlevel_store::ImageFilter {
                bbox: Some(
                    streetlevel_store::BoundingBox::new(bbox[0], bbox[1], bbox[2], bbox[3])
                        .map_err(|error| anyhow::anyhow!("--bbox: {error}"))?,
                ),
                ..streetlevel_store::ImageFilter::default()
            };
            let mut after = None;
            loop {
                let page = store.search_images(&filter, 2000, after);
                wanted.extend(page.items.into_iter().map(|image| image.sequence.0));
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        summaries
            .iter()
            .filter(|summary| wanted.contains(summary.sequence.as_str()))
            .map(|summary| (summary.sequence.0.clone(), summary.newest.0))
            .collect()
    } else if args.all {
        // Own imagery: what was reconstructed before, and what has an image without a mesh.
        let queue =
            Queue::open(database.clone()).context("cannot open the reconstruction tables")?;
        let known: std::collections::BTreeSet<String> =
            queue.jobs()?.into_iter().map(|job| job.sequence).collect();
        summaries
            .iter()
            .filter(|summary| summary.without_mesh > 0 || known.contains(summary.sequence.as_str()))
            .map(|summary| (summary.sequence.0.clone(), summary.newest.0))
            .collect()
    } else {
        Vec::new()
    })
}

/// One line per sequence (an area's job: per sequence of it): what was registered, how
/// well, and how far headings moved.
fn describe(outcome: &Outcome) -> String {
    let Some(report) = &outcome.report else {
        return format!(
            "{}: {} ({})",
            outcome.sequence,
            outcome.state.as_str(),
            outcome.reason.as_deref().unwrap_or_default()
        );
    };
    let members = report["sequences"]
        .as_array()
        .filter(|members| members.len() > 1);
    let Some(members) = members else {
        return describe_one(&outcome.sequence, outcome, report);
    };
    let mut lines: Vec<String> = members
        .iter()
        .map(|member| {
            let mut line = describe_one(
                member["sequence"].as_str().unwrap_or_default(),
                outcome,
                member,
            );
            let _ = write!(
                line,
                ", reconstructed with {} other sequences as an area",
                members.len() - 1
            );
            line
        })
        .collect();
    lines.push(format!(
        "the area: {} of {} images registered, {} connected components (merge_cc), {} crossing parts",
        report["registered"], report["images"], report["components"], report["crossing_parts"],
    ));
    lines.join("\n")
}

fn describe_one(sequence: &str, outcome: &Outcome, report: &serde_json::Value) -> String {
    let number = |name: &str| report[name].as_f64().unwrap_or(f64::NAN);
    let mut line = format!(
        "{}: {}, {} of {} images registered, median reprojection error {} px, median distance to \
         GPS {} m, heading changed by a median of {}° ({} images by more than 15°)",
        sequence,
        outcome.state.as_str(),
        report["registered"],
        report["images"],
        number("median_reprojection_error_px"),
        number("median_gps_distance_m"),
        report["heading_change"]["median_degrees"],
        report["heading_change"]["over_15_degrees"],
    );
    if let Some(reason) = &outcome.reason {
        let _ = write!(line, " ({reason})");
    }
    line
}
