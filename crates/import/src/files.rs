//! `streetlevel import`: JPEG files, videos and folders from disk into a data directory.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use streetlevel_db::Location;
use streetlevel_ingest::sequence::CutRules;
use streetlevel_model::{OrganizationId, SequenceId};
use streetlevel_store::Store;

use crate::budgets::{Budgeted, Interrupt};
use crate::jobs::base62;
use crate::pipeline::{Grouping, ImportRun, Owner, Progress, Report, Sources, read_lock};
use crate::video::{Frame, VideoOptions, is_video_name};
use crate::{Blurring, ImportError};

/// How `import_paths` imports.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The creator's username.
    pub username: String,
    /// The organization the images are contributed to; it must exist.
    pub organization: Option<OrganizationId>,
    /// How files are cut into sequences.
    pub rules: CutRules,
    /// Whether pictures are blurred before they are published; the default publishes nothing
    /// until a blurrer (or [`Blurring::Off`]) is given.
    pub blurring: Blurring,
    /// The database the store's tables are in, where the blur regions go too (default: the
    /// data directory's `SQLite` file).
    pub database: Option<Location>,
    /// How videos are sampled into images and decoded.
    pub video: VideoOptions,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            username: String::from("import"),
            organization: None,
            rules: CutRules::default(),
            blurring: Blurring::default(),
            database: None,
            video: VideoOptions::default(),
        }
    }
}

/// Imports every file named and every `.jpg`/`.jpeg` file and every `.mp4`/`.mov`/`.360`
/// video under the folders named (recursively, in name order) into the data directory whose
/// store is `store`; a video's frames are sampled and decoded first (`video.rs`). Files
/// imported before (the same bytes) are reported as duplicates and change nothing; each
/// sequence is written in one transaction. With blurring on, every picture is blurred
/// before anything of it is written; with blurring unusable, nothing is imported.
pub fn import_paths(
    store: &RwLock<Store>,
    data_dir: &Path,
    paths: &[PathBuf],
    options: &ImportOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Report, ImportError> {
    if let Blurring::Unusable(reason) = &options.blurring {
        return Err(ImportError::Blurring(reason.clone()));
    }
    let mut files = Vec::new();
    for path in paths {
        collect(path, true, &mut files)?;
    }
    // The blur regions' tables, in the store's database (through the store's handle when it
    // has one: a process holds one).
    let database = read_lock(store).database().cloned();
    if let Some(database) = database {
        crate::tables::migrate(&database)?;
    } else {
        let location = options
            .database
            .clone()
            .unwrap_or_else(|| Location::Sqlite(Store::database_path(data_dir)));
        crate::tables::open(&location)?;
    }
    if let Some(organization) = options.organization
        && read_lock(store).organization(organization).is_none()
    {
        return Err(ImportError::UnknownOrganization(organization.0));
    }
    let owner = Owner {
        username: options.username.clone(),
        organization: options.organization,
    };
    let sequence_key = |_: usize| {
        let bytes: [u8; 22] = rand::random();
        SequenceId(base62(&bytes, 22))
    };
    let run = ImportRun {
        store,
        media: crate::media_store(data_dir),
        blurring: &options.blurring,
        owner: &owner,
        grouping: Grouping::Cut(options.rules.clone()),
        first_id: None,
        sequence_key: &sequence_key,
        one_batch: false,
        progress,
        thumbnail_nanos: std::sync::atomic::AtomicU64::new(0),
        blur_nanos: std::sync::atomic::AtomicU64::new(0),
        held: std::sync::Mutex::new(None),
    };
    // Videos become their frames, decoded into a scratch folder removed when the import ends.
    let scratch = Scratch(data_dir.join("video-frames").join(format!(
        "import-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    )));
    let arrival = streetlevel_model::Clock::now(&streetlevel_model::SystemClock);
    let mut entries = Vec::with_capacity(files.len());
    for (index, file) in files.into_iter().enumerate() {
        if !is_video_name(&file) {
            entries.push(Entry::File(file));
            continue;
        }
        let dir = scratch.0.join(index.to_string());
        match crate::video::frames(&file, &dir, &options.video, arrival) {
            Ok(frames) => entries.extend(
                frames
                    .into_iter()
                    .map(|frame| Entry::Frame(Box::new(frame))),
            ),
            Err(reason) => entries.push(Entry::Refused {
                name: file.display().to_string(),
                reason,
            }),
        }
    }
    let files = Files(entries);
    let sources = Budgeted {
        inner: &files,
        interrupt: &Interrupt::NEVER,
    };
    run.import(&sources, None)
}

/// Adds `path` (a file, or the JPEGs and videos under a folder) to `files`.
fn collect(path: &Path, named: bool, files: &mut Vec<PathBuf>) -> Result<(), ImportError> {
    let read_error = |source| ImportError::ReadPath {
        path: path.to_path_buf(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if metadata.is_dir() {
        let mut entries = std::fs::read_dir(path)
            .map_err(read_error)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(read_error)?;
        entries.sort();
        for entry in entries {
            collect(&entry, false, files)?;
        }
    } else if named || is_jpeg_name(path) || is_video_name(path) {
        files.push(path.to_path_buf());
    }
    Ok(())
}

/// Whether a file name ends in `.jpg` or `.jpeg`, in any case.
pub(crate) fn is_jpeg_name(path: &Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| {
            extension.eq_ignore_ascii_case("jpg") || extension.eq_ignore_ascii_case("jpeg")
        })
}

/// One file of an import: a picture on disk, a frame of a video, or a video refused.
enum Entry {
    File(PathBuf),
    Frame(Box<Frame>),
    Refused { name: String, reason: String },
}

struct Files(Vec<Entry>);

impl Sources for Files {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn name(&self, index: usize) -> String {
        match &self.0[index] {
            Entry::File(path) => path.display().to_string(),
            Entry::Frame(frame) => frame.name.clone(),
            Entry::Refused { name, .. } => name.clone(),
        }
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        match &self.0[index] {
            Entry::File(path) => {
                std::fs::read(path).map_err(|error| format!("cannot read the file: {error}"))
            }
            Entry::Frame(frame) => frame.read(),
            Entry::Refused { reason, .. } => Err(reason.clone()),
        }
    }

    fn time_source(&self, index: usize) -> Option<streetlevel_ingest::TimeSource> {
        match &self.0[index] {
            Entry::Frame(frame) => Some(frame.time_source),
            _ => None,
        }
    }
}

/// A scratch folder removed (with what is in it) when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
