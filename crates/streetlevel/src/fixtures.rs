//! `streetlevel fixtures`: generates a deterministic, realistic data set into a data
//! directory (`streetlevel.sqlite`, `media/`, `credentials.json`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use streetlevel_auth::OsRandom;
use streetlevel_fixtures::{
    Config, MediaMode, WriteOptions, progress_bar, write_credentials, write_data_dir,
};
use streetlevel_model::SystemClock;

/// Options of `streetlevel fixtures`.
#[derive(clap::Args)]
pub struct Args {
    /// The data directory to create; it must be empty or absent unless `--force` is given.
    #[arg(long)]
    out: PathBuf,
    /// The seed the whole data set follows from.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many images to generate.
    #[arg(long, default_value_t = 2_000)]
    images: usize,
    /// Share (0 to 1) of sequences that drive the route of the sequence before again, months
    /// to years later: places with imagery of two dates ("Other dates here" in the explorer).
    #[arg(long, default_value_t = 0.0, value_parser = share)]
    revisits: f64,
    /// Write media files now (`eager`) or leave them to the server (`lazy`); by default eager
    /// up to 20,000 images.
    #[arg(long, value_parser = ["eager", "lazy"])]
    media: Option<String>,
    /// Replace the data set of a non-empty directory (its `streetlevel.sqlite`, `media/` and
    /// `credentials.json`; other files are left alone).
    #[arg(long)]
    force: bool,
}

/// A share from 0 to 1.
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("{text} is not a share from 0 to 1")),
    }
}

pub fn run(args: Args) -> Result<()> {
    let Args {
        out,
        seed,
        images,
        revisits,
        media,
        force,
    } = args;
    prepare_directory(&out, force)?;
    let config = Config {
        seed,
        images,
        revisits,
        ..Config::default()
    };
    let mut options = WriteOptions::new(config);
    options.media = match media.as_deref() {
        Some("eager") => MediaMode::Eager,
        Some(_) => MediaMode::Lazy,
        None => options.media,
    };
    let started = Instant::now();
    let summary = write_data_dir(&out, &options, &mut progress_bar())
        .with_context(|| format!("could not generate fixtures into {}", out.display()))?;
    // Secrets come from the OS: fixtures may be served, and a seed is no secret.
    let credentials = write_credentials(&out, SystemClock, OsRandom)
        .with_context(|| format!("could not create the developer app in {}", out.display()))?;
    eprintln!(
        "wrote {} images, {} sequences, {} map features, {} detections, {} creators, {} organizations and {} media files to {} in {:.1} s",
        summary.images,
        summary.sequences,
        summary.map_features,
        summary.detections,
        summary.creators,
        summary.organizations,
        summary.media_files,
        out.display(),
        started.elapsed().as_secs_f64(),
    );
    eprintln!(
        "app {} of user {}: see {}",
        credentials.client_id,
        credentials.username,
        out.join(streetlevel_fixtures::CREDENTIALS_FILE).display(),
    );
    Ok(())
}

/// Refuses a non-empty directory unless `force`; with `force`, removes what fixtures write.
fn prepare_directory(out: &Path, force: bool) -> Result<()> {
    let is_empty = match std::fs::read_dir(out) {
        Ok(mut entries) => entries.next().is_none(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => true,
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", out.display()));
        }
    };
    if is_empty {
        return Ok(());
    }
    if !force {
        bail!(
            "{} is not empty: pass --force to replace its data set",
            out.display()
        );
    }
    for name in [
        "streetlevel.sqlite",
        "streetlevel.sqlite-wal",
        "streetlevel.sqlite-shm",
        "credentials.json",
    ] {
        let path = out.join(name);
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    let media = out.join("media");
    if media.exists() {
        std::fs::remove_dir_all(&media)
            .with_context(|| format!("cannot remove {}", media.display()))?;
    }
    Ok(())
}
