//! `streetlevel images|sequences|uploads delete|hide|restore` and `streetlevel takedowns
//! list`: taking imagery down as an administrator, on a data directory's `SQLite` file or with
//! `--database-url` on PostgreSQL, also while servers run on it (they follow the database's
//! write log within a second and answer the images as unknown from then on).
//!
//! Each command loads the store (as `serve` does), so it takes as long as a server's start.
//! After each target it prints the CDN surrogate keys to purge (`surrogate keys to purge:
//! image/<id> tile/<z>/<x>/<y> ...`), the keys the API's answer lists for the same change.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use streetlevel_db::Location;
use streetlevel_model::SystemClock;
use streetlevel_moderation::{self as moderation, Caller, Moderation, Names, Target};
use streetlevel_store::Store;

/// Where the data lives: the data directory (its `media/` holds the files) and the database.
#[derive(clap::Args, Debug)]
pub struct DataArgs {
    /// The data directory: its `SQLite` file, unless `--database-url` names PostgreSQL, and
    /// its media files.
    #[arg(long)]
    pub(crate) data: PathBuf,
    /// The PostgreSQL database (with PostGIS) the servers use, as `serve --database-url`
    /// takes it. May hold a password: prefer the environment.
    #[arg(
        long,
        visible_alias = "database",
        env = "STREETLEVEL_DATABASE_URL",
        hide_env_values = true
    )]
    database_url: Option<String>,
    /// Where the media are (`--media-store s3://bucket/prefix`; default the data directory).
    #[command(flatten)]
    media_store: crate::media_store::MediaStoreArgs,
}

/// What to do to the images named.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Erase: rows, detections, map feature links, original, thumbnails and every cached
    /// file. Recorded (who, what, when) without the content.
    Delete(Targets),
    /// Withdraw from public view without erasing: unknown to everyone but the owner and
    /// administrators until restored.
    Hide(Targets),
    /// Make hidden images public again.
    Restore(Targets),
}

/// The images an action applies to.
#[derive(clap::Args, Debug)]
pub struct Targets {
    #[command(flatten)]
    data: DataArgs,
    /// The IDs (images, upload jobs) or keys (sequences).
    #[arg(required = true)]
    ids: Vec<String>,
}

/// `streetlevel takedowns` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum TakedownsCommand {
    /// List the newest takedowns: number, time (UTC), action, images, who, what.
    List {
        #[command(flatten)]
        data: DataArgs,
        /// How many to list.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

/// What the IDs of a command name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Image IDs.
    Images,
    /// Sequence keys.
    Sequences,
    /// Upload job IDs (`cluster_id`).
    Uploads,
}

fn location(data: &DataArgs) -> anyhow::Result<Location> {
    crate::serve::database_location(&data.data, data.database_url.clone())
}

impl DataArgs {
    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data
    }
}

/// The store of `data`, loaded as `serve` loads it.
pub(crate) fn open_store(data: &DataArgs) -> anyhow::Result<Store> {
    data.media_store.apply(&data.data)?;
    let location = location(data)?;
    anyhow::ensure!(
        data.data.is_dir(),
        "the data directory {} does not exist",
        data.data.display()
    );
    match &location {
        Location::Sqlite(_) => Store::open(&data.data)
            .with_context(|| format!("cannot open the data directory {}", data.data.display())),
        Location::Postgres(url) => Store::open_location(&location)
            .with_context(|| format!("cannot open the database {}", streetlevel_db::redact(url))),
    }
}

/// Runs `streetlevel images|sequences|uploads <action>`.
pub fn run(kind: Kind, action: &Action) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let (targets, verb, action) = match action {
        Action::Delete(targets) => (targets, "deleted", moderation::Action::Delete),
        Action::Hide(targets) => (targets, "hidden", moderation::Action::Hide),
        Action::Restore(targets) => (targets, "restored", moderation::Action::Restore),
    };
    let service = Moderation::new(
        Arc::new(RwLock::new(open_store(&targets.data)?)),
        Some(targets.data.data.clone()),
        Vec::new(),
        Arc::new(SystemClock),
    );
    let mut total = 0;
    let mut unknown = Vec::new();
    for raw in &targets.ids {
        let Some(target) = target_named(&service, &targets.data, kind, raw)? else {
            unknown.push(raw.clone());
            continue;
        };
        let done = service.take_down(Caller::CommandLine, &target, action)?;
        for (file, error) in &done.failures {
            eprintln!("warning: cannot remove {}: {error}", file.display());
        }
        let count = done.images.len();
        total += count;
        writeln!(out, "{}: {count} images {verb}", target.subject)?;
        if count > 0 {
            // What a CDN in front of the servers purges, as the API's answer lists it.
            writeln!(
                out,
                "surrogate keys to purge: {}",
                done.surrogate_keys.join(" ")
            )?;
        }
    }
    anyhow::ensure!(
        unknown.is_empty(),
        "{total} images {verb}; unknown: {}",
        unknown.join(", ")
    );
    Ok(())
}

/// The images `raw` names (public and hidden), `None` when it names nothing.
fn target_named(
    service: &Moderation,
    data: &DataArgs,
    kind: Kind,
    raw: &str,
) -> anyhow::Result<Option<Target>> {
    let store = service.store();
    Ok(match kind {
        Kind::Images => Target::resolve(&store, raw, Names::Images),
        Kind::Sequences => Target::resolve(&store, raw, Names::Sequences),
        Kind::Uploads => {
            let Ok(job) = raw.parse::<u64>() else {
                return Ok(None);
            };
            // Through the store's handle: a process holds one.
            let database = store
                .database()
                .cloned()
                .context("the store has no database")?;
            let uploads = streetlevel_import::Uploads::open_database(
                &data.data,
                database,
                streetlevel_import::UploadLimits::default(),
            )
            .context("cannot open the upload tables")?;
            // The command line acts as an administrator: the uploader does not matter.
            Target::upload(&store, &uploads, job, |_| None)?
        }
    })
}

/// Runs `streetlevel takedowns list`.
pub fn run_takedowns(command: TakedownsCommand) -> anyhow::Result<()> {
    let TakedownsCommand::List { data, limit } = command;
    anyhow::ensure!(
        data.data.is_dir(),
        "the data directory {} does not exist",
        data.data.display()
    );
    let mut out = std::io::stdout().lock();
    for record in Store::takedowns_at(&location(&data)?, limit)? {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}",
            record.seq,
            record.at.to_iso8601(),
            record.action.as_str(),
            record.images,
            record.actor,
            record.subject
        )?;
    }
    Ok(())
}
