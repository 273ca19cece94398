//! `streetlevel reblur`: blurring images again after the blurrer changed (a new model, another
//! service), image by image, each finished before the next, so that an interrupted run is
//! taken up by the next one.
//!
//! Invariants: an image is blurred from its kept unblurred original when there is one, and
//! otherwise from its published picture, which only ever adds blur; its original and
//! thumbnails are written (atomically) and its cached pyramid tiles removed before its regions
//! and fingerprint are replaced in one transaction, so a crash in between leaves it listed for
//! the next run; nothing unblurred is written under `media/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use streetlevel_blur::{Blurrer, Hints};
use streetlevel_db::{Database, DbError, params};
use streetlevel_model::{Image, ImageId};
use streetlevel_store::{MEDIA_DIR, Store};

use crate::ImportError;
use crate::blurring::{BlurRecord, unblurred_path, write_record};
use crate::erase::pyramid_tiles;
use crate::media::original_path;
use crate::pipeline::write_picture;
use crate::tables::now_millis;

/// Which images a run blurs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Those last blurred by another blurrer than this one, or never blurred.
    Outdated,
    /// Every image; a run interrupted is taken up where it stopped (the images blurred
    /// since it started are not done again).
    All,
}

/// Where one image's picture was blurred from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Its kept unblurred original (`unblurred/<id>.jpg`): blurred from scratch.
    Unblurred,
    /// Its published picture, already blurred by an earlier blurrer: blur is only added.
    Published,
    /// Its published picture, never blurred (imported with blurring off).
    NeverBlurred,
}

/// One step of a run, for its progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReblurProgress {
    /// The run starts with `total` images to do; `resumed` when it goes on with an
    /// interrupted `--all` run.
    Started {
        /// Images to blur again.
        total: usize,
        /// Whether an interrupted run is taken up.
        resumed: bool,
    },
    /// One image done (or refused, with the reason).
    Image {
        /// Images done so far, this one included.
        done: usize,
        /// Images to do in all.
        total: usize,
        /// The image.
        id: ImageId,
        /// Where it was blurred from, or why it was not.
        outcome: Result<Source, String>,
    },
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReblurReport {
    /// Images blurred again from their unblurred original.
    pub from_unblurred: usize,
    /// Images whose blur was added to their already blurred picture (no original kept).
    pub from_published: usize,
    /// Images imported with blurring off, blurred now.
    pub never_blurred: usize,
    /// Images not blurred again, with the reason (a missing file, a picture the blurrer
    /// refused): they stay as they were and are listed again by the next run.
    pub refused: Vec<(ImageId, String)>,
    /// Whether the run was stopped before the end (taken up by the next run).
    pub interrupted: bool,
}

/// Blurs again the images of `store` that `selection` names, with `blurrer`, under
/// `data_dir`, calling `progress` before the first and after each image; stops before the
/// next image once `stop` is set.
pub fn reblur(
    store: &RwLock<Store>,
    data_dir: &Path,
    blurrer: &dyn Blurrer,
    selection: Selection,
    progress: &dyn Fn(ReblurProgress),
    stop: &AtomicBool,
) -> Result<ReblurReport, ImportError> {
    // The store's own handle: a process holds one.
    let database = store
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .database()
        .cloned()
        .ok_or_else(|| {
            ImportError::InvalidUpload(String::from("reblur needs a store on a database"))
        })?;
    crate::tables::migrate(&database)?;
    let fingerprint = blurrer.fingerprint();
    let (run, resumed) = match selection {
        Selection::All => {
            let (run, resumed) = current_run(&database)?;
            (Some(run), resumed)
        }
        Selection::Outdated => (None, false),
    };
    let blurred = blur_states(&database)?;
    let images: Vec<Image> = {
        let store = store.read().unwrap_or_else(PoisonError::into_inner);
        store
            .all_image_ids()
            .into_iter()
            .filter(|id| match (run, blurred.get(id)) {
                (_, None) => true,
                (Some(run), Some((_, at))) => *at < run.started_at,
                (None, Some((by, _))) => *by != fingerprint,
            })
            .filter_map(|id| store.image(id).or_else(|| store.hidden_image(id)))
            .collect()
    };
    let total = images.len();
    progress(ReblurProgress::Started { total, resumed });
    let mut report = ReblurReport::default();
    let media = data_dir.join(MEDIA_DIR);
    let thumbnail_nanos = AtomicU64::new(0);
    for (index, image) in images.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            return Ok(report);
        }
        let was_blurred = blurred.contains_key(&image.id);
        let outcome = reblur_one(
            &database,
            data_dir,
            &media,
            image,
            blurrer,
            was_blurred,
            &thumbnail_nanos,
        );
        match &outcome {
            Ok(Source::Unblurred) => report.from_unblurred += 1,
            Ok(Source::Published) => report.from_published += 1,
            Ok(Source::NeverBlurred) => report.never_blurred += 1,
            Err(reason) => report.refused.push((image.id, reason.clone())),
        }
        progress(ReblurProgress::Image {
            done: index + 1,
            total,
            id: image.id,
            outcome,
        });
    }
    if let Some(run) = run {
        database.write(|connection| {
            connection.execute(
                "UPDATE import_reblur_runs SET finished_at = ?2 WHERE id = ?1",
                params![run.id, now_millis()],
            )
        })?;
    }
    Ok(report)
}

#[derive(Debug, Clone, Copy)]
struct Run {
    id: i64,
    started_at: i64,
}

/// The `--all` run under way, or a new one; `true` when one was under way.
fn current_run(database: &Database) -> Result<(Run, bool), ImportError> {
    Ok(database.write(|connection| {
        let open = connection.query_row(
            "SELECT id, started_at FROM import_reblur_runs WHERE finished_at IS NULL
             ORDER BY id DESC LIMIT 1",
            params![],
            |row| {
                Ok::<_, DbError>(Run {
                    id: row.get(0)?,
                    started_at: row.get(1)?,
                })
            },
        )?;
        if let Some(run) = open {
            return Ok::<_, DbError>((run, true));
        }
        let id = connection
            .query_value::<Option<i64>>("SELECT max(id) FROM import_reblur_runs", params![])?
            .flatten()
            .unwrap_or(0)
            + 1;
        let started_at = now_millis();
        connection.execute(
            "INSERT INTO import_reblur_runs (id, started_at) VALUES (?1, ?2)",
            params![id, started_at],
        )?;
        Ok((Run { id, started_at }, false))
    })?)
}

/// Every blurred image's last blurrer and when it blurred it.
fn blur_states(database: &Database) -> Result<HashMap<ImageId, (String, i64)>, ImportError> {
    let states = database.read(|connection| {
        connection.query_map(
            "SELECT image_id, blurred_by, blurred_at FROM import_blurred_images",
            params![],
            |row| {
                Ok::<_, DbError>((
                    ImageId(row.get::<u64>(0)?),
                    (row.get::<String>(1)?, row.get::<i64>(2)?),
                ))
            },
        )
    })?;
    Ok(states.into_iter().collect())
}

/// The published picture of an image: where imports put it, else where fixture sets have it.
fn published_path(media: &Path, image: ImageId) -> Option<PathBuf> {
    [
        original_path(media, image),
        media.join("originals").join(format!("{image}.jpg")),
        media.join(format!("{image}.jpg")),
    ]
    .into_iter()
    .find(|path| path.is_file())
}

fn reblur_one(
    database: &Database,
    data_dir: &Path,
    media: &Path,
    image: &Image,
    blurrer: &dyn Blurrer,
    was_blurred: bool,
    thumbnail_nanos: &AtomicU64,
) -> Result<Source, String> {
    let unblurred = unblurred_path(data_dir, image.id);
    let (path, source) = if unblurred.is_file() {
        (unblurred, Source::Unblurred)
    } else {
        let path = published_path(media, image.id)
            .ok_or_else(|| String::from("no picture file (neither unblurred nor published)"))?;
        let source = if was_blurred {
            Source::Published
        } else {
            Source::NeverBlurred
        };
        (path, source)
    };
    let bytes =
        std::fs::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let orientation = image.exif_orientation.unwrap_or(1);
    let _decoding = crate::budgets::decode_permit(&bytes, orientation)?;
    let blurred = blurrer
        .blur(
            &bytes,
            Hints {
                orientation,
                panorama: image.is_pano,
            },
        )
        .map_err(|error| format!("cannot be blurred: {error}"))?;
    write_picture(
        media,
        image.id,
        (&blurred.jpeg, None),
        orientation,
        thumbnail_nanos,
    )?;
    for tile in pyramid_tiles(media, image) {
        match std::fs::remove_file(&tile) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(format!("cannot remove {}: {error}", tile.display())),
        }
    }
    let record = BlurRecord {
        regions: blurred.regions,
        blurred_by: blurrer.fingerprint(),
        unblurred_kept: source == Source::Unblurred,
    };
    database
        .write(|connection| write_record(connection, image.id, &record))
        .map_err(|error: DbError| format!("cannot record the blur: {error}"))?;
    Ok(source)
}
