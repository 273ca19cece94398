//! `streetlevel media migrate --to s3://bucket/prefix` (or `--to local`): moves a data
//! directory's media between its files and an object store. Every object under `media/` is
//! copied, read back and compared (length and SHA-256) before it counts as moved; each
//! verified object is written to a journal in the data directory, so an interrupted run
//! resumes where it stopped. Once all are verified the data directory records where its media
//! are (`DATA/media-store`, which `serve`, `import` and the deletes then use without a flag)
//! and the old copies are removed, unless `--keep-source` keeps them (an erasure would not
//! reach them).
//!
//! No server may run on the data directory meanwhile (its lock is taken); replicas on other
//! machines sharing the database must be stopped first, or what they write during the copy
//! stays behind.

use std::collections::HashSet;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};
use streetlevel_media::{Key, MediaStore, layout};

use crate::data_lock::lock_data_dir;
use crate::media_store::{RECORD_FILE, recorded_store};

/// The journal of verified copies, in the data directory, while a migration is under way.
const JOURNAL_FILE: &str = "media-migrate.journal";

/// The value of `--to` that names the data directory's files.
const LOCAL: &str = "local";

/// `streetlevel media …`.
#[derive(clap::Subcommand)]
pub enum MediaCommand {
    /// Copy every media object to another store (`s3://bucket/prefix`, or `local` for the
    /// data directory's files), verify each, then switch the data directory to it and
    /// remove the old copies. Resumable: run it again after an interruption.
    Migrate(MigrateArgs),
}

/// `streetlevel media migrate` arguments.
#[derive(clap::Args)]
pub struct MigrateArgs {
    /// The data directory (no server may be running on it).
    #[arg(long, env = "STREETLEVEL_DATA")]
    data: PathBuf,
    /// Where the media go: `s3://bucket/prefix` (endpoint, region and credentials from the
    /// standard `AWS_*` environment variables), or `local`.
    #[arg(long)]
    to: String,
    /// Keep the old copies once the switch is made. Erasing an image later does not reach
    /// them: remove them yourself once you no longer need them.
    #[arg(long)]
    keep_source: bool,
}

/// Runs `streetlevel media …`.
pub fn run(command: MediaCommand) -> anyhow::Result<()> {
    match command {
        MediaCommand::Migrate(args) => migrate(&args),
    }
}

fn migrate(args: &MigrateArgs) -> anyhow::Result<()> {
    let data = &args.data;
    anyhow::ensure!(data.is_dir(), "no data directory at {}", data.display());
    let _lock = lock_data_dir(data, "stop the server before moving its media")?;
    let from_url = recorded_store(data)?;
    let to_url = (args.to != LOCAL).then(|| args.to.clone());
    if from_url == to_url {
        bail!(
            "the media of {} are already on {}",
            data.display(),
            describe(to_url.as_deref())
        );
    }
    let from = open(data, from_url.as_deref())?;
    let to = open(data, to_url.as_deref())?;
    let keys = from
        .list_all(&layout::media_prefix())
        .with_context(|| format!("cannot list the media on {}", from.describe()))?;
    let journal_path = data.join(JOURNAL_FILE);
    let header = format!(
        "{}\t{}",
        describe(from_url.as_deref()),
        describe(to_url.as_deref())
    );
    let done = read_journal(&journal_path, &header)?;
    let mut journal = open_journal(&journal_path, &header, done.is_empty())?;
    let mut progress = Progress::new(keys.len(), done.len());
    for key in &keys {
        if done.contains(key.as_str()) {
            continue;
        }
        let Some(bytes) = from
            .read(key)
            .with_context(|| format!("cannot read {key} from {}", from.describe()))?
        else {
            // Gone since the listing (nothing may write meanwhile, but a file removed by hand).
            continue;
        };
        copy_verified(&to, key, &bytes)?;
        writeln!(
            journal,
            "{}\t{}\t{}",
            key.as_str(),
            bytes.len(),
            hex::encode(Sha256::digest(&bytes))
        )?;
        journal.flush()?;
        progress.moved(bytes.len());
    }
    journal.sync_all()?;
    progress.print();
    record_store(data, to_url.as_deref())?;
    std::fs::remove_file(&journal_path)?;
    eprintln!(
        "media migrate: {} objects verified on {}; the data directory now uses it",
        keys.len(),
        to.describe()
    );
    if args.keep_source {
        eprintln!(
            "media migrate: the old copies are kept on {} (--keep-source); erasures will not \
             reach them",
            from.describe()
        );
        return Ok(());
    }
    remove_all(&from, &keys)?;
    eprintln!(
        "media migrate: the old copies on {} are removed",
        from.describe()
    );
    Ok(())
}

fn describe(url: Option<&str>) -> String {
    url.unwrap_or(LOCAL).to_owned()
}

fn open(data: &Path, url: Option<&str>) -> anyhow::Result<MediaStore> {
    MediaStore::connect(data, url, &[])
        .map_err(|error| anyhow::anyhow!("{}", error.0))
        .with_context(|| format!("cannot open the media store {}", describe(url)))
}

/// Writes `bytes` as `key` on `to` and reads them back: the same length and SHA-256, or an
/// error that stops the migration before anything is switched.
fn copy_verified(to: &MediaStore, key: &Key, bytes: &[u8]) -> anyhow::Result<()> {
    to.write(key, bytes)
        .with_context(|| format!("cannot write {key} to {}", to.describe()))?;
    let back = to
        .read(key)
        .with_context(|| format!("cannot read {key} back from {}", to.describe()))?
        .with_context(|| {
            format!(
                "{key} is missing on {} right after it was written",
                to.describe()
            )
        })?;
    if back.len() != bytes.len() || Sha256::digest(&back) != Sha256::digest(bytes) {
        bail!(
            "{key} differs on {} after it was written ({} bytes read back, {} written)",
            to.describe(),
            back.len(),
            bytes.len()
        );
    }
    Ok(())
}

/// The keys a journal with `header` lists as verified; none when there is no journal, and
/// an error when it is one of another migration.
fn read_journal(path: &Path, header: &str) -> anyhow::Result<HashSet<String>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(error) => return Err(error).context(format!("cannot read {}", path.display())),
    };
    let mut lines = std::io::BufReader::new(file).lines();
    let first = lines.next().transpose()?.unwrap_or_default();
    if first != header {
        bail!(
            "{} is the journal of another migration ({first}); finish that one (run it again \
             with the same --to) or remove the file",
            path.display()
        );
    }
    let mut done = HashSet::new();
    for line in lines {
        let line = line?;
        // A line cut by a crash has fewer fields: that object is copied again.
        if let [key, _, _] = line.split('\t').collect::<Vec<_>>()[..] {
            done.insert(key.to_owned());
        }
    }
    Ok(done)
}

fn open_journal(path: &Path, header: &str, new: bool) -> anyhow::Result<std::fs::File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if new {
        file.set_len(0)?;
        writeln!(file, "{header}")?;
    }
    Ok(file)
}

/// Records `url` (or the files, `None`) as where the data directory's media are.
fn record_store(data: &Path, url: Option<&str>) -> anyhow::Result<()> {
    let path = data.join(RECORD_FILE);
    match url {
        Some(url) => streetlevel_media::write_atomically(&path, format!("{url}\n").as_bytes())
            .with_context(|| format!("cannot write {}", path.display())),
        None => match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(error).context(format!("cannot remove {}", path.display()))
            }
            _ => Ok(()),
        },
    }
}

fn remove_all(store: &MediaStore, keys: &[Key]) -> anyhow::Result<()> {
    for key in keys {
        store
            .remove(key)
            .with_context(|| format!("cannot remove {key} from {}", store.describe()))?;
    }
    if let Some(local) = store.as_local() {
        // The folders the files were in, emptied.
        let _ = remove_empty_folders(&local.root().join(layout::MEDIA_DIR));
    }
    Ok(())
}

fn remove_empty_folders(folder: &Path) -> std::io::Result<bool> {
    let mut empty = true;
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() && remove_empty_folders(&entry.path())? {
            continue;
        }
        empty = false;
    }
    if empty {
        std::fs::remove_dir(folder)?;
    }
    Ok(empty)
}

/// A line on stderr at most every two seconds: objects and bytes moved so far.
struct Progress {
    total: usize,
    done: usize,
    bytes: u64,
    last: Instant,
}

impl Progress {
    fn new(total: usize, done: usize) -> Self {
        if done > 0 {
            eprintln!("media migrate: resuming, {done} of {total} objects already verified");
        }
        Progress {
            total,
            done,
            bytes: 0,
            last: Instant::now(),
        }
    }

    fn moved(&mut self, bytes: usize) {
        self.done += 1;
        self.bytes += bytes as u64;
        if self.last.elapsed() >= Duration::from_secs(2) {
            self.print();
            self.last = Instant::now();
        }
    }

    fn print(&self) {
        #[allow(clippy::cast_precision_loss)] // a figure for people
        let megabytes = self.bytes as f64 / 1e6;
        eprintln!(
            "media migrate: {} of {} objects copied and verified ({megabytes:.1} MB this run)",
            self.done, self.total
        );
    }
}
