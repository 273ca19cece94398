//! `streetlevel reblur`: blurring images again after the blurrer changed (a new model, another
//! service), image by image, each finished before the next, so that an interrupted run is
//! taken up by the next one.
//!
//! Invariants: an image is blurred from its kept unblurred original when there is one (with
//! the boxes blurred by hand, blur edits, laid on again), and otherwise from its published
//! picture, which only ever adds blur; it is seen upright, as the import saw it (the Exif
//! orientation of its file, not of its record, which says 1 for every upright thumbnail). It
//! is blurred and its thumbnails made outside any transaction; then one short write
//! transaction checks that its blur edits and its served original are what the blurring read
//! (a blur edit applied meanwhile is never overwritten: the image is blurred again from what
//! changed, [`REBLUR_ATTEMPTS`] times at most), writes its original and thumbnails
//! (atomically), removes its cached pyramid tiles and replaces its regions and fingerprint; a
//! crash before the commit leaves it listed for the next run. Nothing unblurred is written at
//! a key that is served. Which images are stale is decided once, by [`blur_status`] and the
//! run's selection alike: last blurred by another blurrer than the one configured, or never
//! blurred.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

use streetlevel_blur::{Blurrer, Hints};
use streetlevel_db::{Database, DbError, Param, params};
use streetlevel_media::layout::{self, ImageObject};
use streetlevel_media::{Key, MediaStore};
use streetlevel_model::{Image, ImageId};
use streetlevel_store::Store;

use crate::ImportError;
use crate::blurring::{BlurRecord, write_record};
use crate::budgets::PictureWork;
use crate::pipeline::{make_thumbnails, write_picture_files};

/// How many times one image is blurred before it is left for the next run because its blur
/// edits or its served original kept changing while it was blurred.
pub const REBLUR_ATTEMPTS: usize = 3;

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
    /// Its kept unblurred original (`media/img/<id>/unblurred.jpg`): blurred from scratch.
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

/// How the images of a store stand against one blurrer: what the administrators' dashboard
/// and `streetlevel reblur --status` show, and what a run without `--all` does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlurStatus {
    /// The images the store holds, public or hidden.
    pub images: usize,
    /// Those last blurred by the blurrer asked about.
    pub current: usize,
    /// Those last blurred by another blurrer (an older model set, another service), by
    /// blurrer, most images first: stale until blurred again.
    pub older: Vec<(String, usize)>,
}

impl BlurStatus {
    /// The images last blurred by another blurrer.
    pub fn stale(&self) -> usize {
        self.older.iter().map(|(_, count)| count).sum()
    }

    /// The images never blurred (imported with blurring off).
    pub fn never_blurred(&self) -> usize {
        self.images
            .saturating_sub(self.current)
            .saturating_sub(self.stale())
    }

    /// The images a run without `--all` blurs again: the stale and the never blurred.
    pub fn outdated(&self) -> usize {
        self.images.saturating_sub(self.current)
    }
}

/// How the images of `store` stand against the blurrer whose fingerprint is `fingerprint`
/// ([`Blurrer::fingerprint`]), counted in the database (one aggregate, not a row per image);
/// the tables are made first if the data directory has none yet.
pub fn blur_status(store: &RwLock<Store>, fingerprint: &str) -> Result<BlurStatus, ImportError> {
    crate::tables::migrate(&store_database(
        &store.read().unwrap_or_else(PoisonError::into_inner),
    )?)?;
    count_status(store, fingerprint)
}

/// [`blur_status`] on tables made already (the dashboard's, on every view).
pub(crate) fn count_status(
    store: &RwLock<Store>,
    fingerprint: &str,
) -> Result<BlurStatus, ImportError> {
    let (database, images) = {
        let store = store.read().unwrap_or_else(PoisonError::into_inner);
        (
            store_database(&store)?,
            store.image_count() + store.hidden_image_count(),
        )
    };
    let mut counts: Vec<(String, usize)> = database.read(|connection| {
        connection.query_map(
            "SELECT blurred_by, count(*) FROM import_blurred_images GROUP BY blurred_by",
            params![],
            |row| {
                Ok::<_, DbError>((
                    row.get::<String>(0)?,
                    usize::try_from(row.get::<i64>(1)?).unwrap_or(0),
                ))
            },
        )
    })?;
    let current = counts
        .iter()
        .filter(|(by, _)| by == fingerprint)
        .map(|(_, count)| count)
        .sum();
    counts.retain(|(by, _)| by != fingerprint);
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(BlurStatus {
        images,
        current,
        older: counts,
    })
}

/// The store's own database handle (a process holds one).
fn store_database(store: &Store) -> Result<Database, ImportError> {
    store.database().cloned().ok_or_else(|| {
        ImportError::InvalidUpload(String::from("reblur needs a store on a database"))
    })
}

/// Blurs again the images of `store` that `selection` names, with `blurrer`, under
/// `data_dir`, on the process's CPU pool (one image per pool thread, each within its share
/// of the process's picture memory), calling `progress` before the first and after each
/// image; no image is started once `stop` is set.
pub fn reblur(
    store: &RwLock<Store>,
    data_dir: &Path,
    blurrer: &dyn Blurrer,
    selection: Selection,
    progress: &(dyn Fn(ReblurProgress) + Sync),
    stop: &AtomicBool,
) -> Result<ReblurReport, ImportError> {
    let database = store_database(&store.read().unwrap_or_else(PoisonError::into_inner))?;
    crate::tables::migrate(&database)?;
    let fingerprint = blurrer.fingerprint();
    let (run, resumed) = match selection {
        Selection::All => {
            let (run, resumed) = current_run(&database)?;
            (Some(run), resumed)
        }
        Selection::Outdated => (None, false),
    };
    let blurred = blurred_images(&database)?;
    // Images needing nothing: blurred by this blurrer, or (`--all`) since the run started.
    let done = match run {
        Some(run) => images_where(
            &database,
            "SELECT image_id FROM import_blurred_images WHERE blurred_at >= ?1",
            params![run.started_at],
        )?,
        None => images_where(
            &database,
            "SELECT image_id FROM import_blurred_images WHERE blurred_by = ?1",
            params![fingerprint.as_str()],
        )?,
    };
    let images: Vec<Image> = {
        let store = store.read().unwrap_or_else(PoisonError::into_inner);
        store
            .all_image_ids()
            .into_iter()
            .filter(|id| !done.contains(id))
            .filter_map(|id| store.image(id).or_else(|| store.hidden_image(id)))
            .collect()
    };
    let total = images.len();
    progress(ReblurProgress::Started { total, resumed });
    // The process's media store: the data directory's files or the object store.
    let media = crate::media_store(data_dir);
    let thumbnail_nanos = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);
    let outcomes = crate::cpu::map(total, |index| {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let image = &images[index];
        let outcome = reblur_one(
            &database,
            &media,
            image,
            blurrer,
            blurred.contains(&image.id),
            &thumbnail_nanos,
        );
        progress(ReblurProgress::Image {
            done: finished.fetch_add(1, Ordering::Relaxed) + 1,
            total,
            id: image.id,
            outcome: outcome.clone(),
        });
        Some(outcome)
    });
    let mut report = ReblurReport::default();
    for (image, outcome) in images.iter().zip(outcomes) {
        match outcome {
            None => report.interrupted = true,
            Some(Ok(Source::Unblurred)) => report.from_unblurred += 1,
            Some(Ok(Source::Published)) => report.from_published += 1,
            Some(Ok(Source::NeverBlurred)) => report.never_blurred += 1,
            Some(Err(reason)) => report.refused.push((image.id, reason)),
        }
    }
    if let (Some(run), false) = (run, report.interrupted) {
        database.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_reblur_runs SET finished_at = ?2 WHERE id = ?1",
                params![run.id, now],
            )
        })?;
    }
    Ok(report)
}

/// A `reblur --all` run: its row and when it started on the database's clock.
#[derive(Debug, Clone, Copy)]
struct ReblurRun {
    id: i64,
    started_at: i64,
}

/// The `--all` run under way, or a new one; `true` when one was under way.
fn current_run(database: &Database) -> Result<(ReblurRun, bool), ImportError> {
    Ok(database.write(|connection| {
        let open = connection.query_row(
            "SELECT id, started_at FROM import_reblur_runs WHERE finished_at IS NULL
             ORDER BY id DESC LIMIT 1",
            params![],
            |row| {
                Ok::<_, DbError>(ReblurRun {
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
        let started_at = connection.now_millis()?;
        connection.execute(
            "INSERT INTO import_reblur_runs (id, started_at) VALUES (?1, ?2)",
            params![id, started_at],
        )?;
        Ok((ReblurRun { id, started_at }, false))
    })?)
}

/// Every image ever blurred.
fn blurred_images(database: &Database) -> Result<HashSet<ImageId>, ImportError> {
    images_where(
        database,
        "SELECT image_id FROM import_blurred_images",
        params![],
    )
}

/// The images a query of `import_blurred_images` lists (its first column), without holding
/// a row more than it reads.
fn images_where(
    database: &Database,
    sql: &str,
    parameters: &[Param<'_>],
) -> Result<HashSet<ImageId>, ImportError> {
    let mut images = HashSet::new();
    database.read(|connection| {
        connection.each(sql, parameters, |row| {
            images.insert(ImageId(row.get::<u64>(0)?));
            Ok::<_, DbError>(())
        })
    })?;
    Ok(images)
}

fn reblur_one(
    database: &Database,
    media: &MediaStore,
    image: &Image,
    blurrer: &dyn Blurrer,
    was_blurred: bool,
    thumbnail_nanos: &AtomicU64,
) -> Result<Source, String> {
    for attempt in 1..=REBLUR_ATTEMPTS {
        let basis = read_basis(database, media, image, was_blurred)?;
        let picture = blur_picture(image, blurrer, &basis, thumbnail_nanos)?;
        match publish(database, media, image, blurrer, &basis, &picture)? {
            None => return Ok(basis.source),
            Some(changed) => tracing::info!(
                image = %image.id,
                attempt,
                changed,
                "an image is blurred again: it changed while it was blurred"
            ),
        }
    }
    Err(format!(
        "its blur edits or its picture changed while it was blurred, {REBLUR_ATTEMPTS} times: \
         left for the next run"
    ))
}

/// What one image is blurred from, as read before blurring; the transaction that publishes
/// the result checks that its edits and its served original still say the same.
struct ReblurBasis {
    source: Source,
    /// The bytes blurred: the unblurred original, or the served one.
    bytes: Vec<u8>,
    /// The boxes blurred by hand and not removed.
    edits: Vec<streetlevel_blur::Region>,
    /// The served original's key and bytes, if it has one.
    served: Option<(Key, Vec<u8>)>,
}

fn read_basis(
    database: &Database,
    media: &MediaStore,
    image: &Image,
    was_blurred: bool,
) -> Result<ReblurBasis, String> {
    let read = |key: &Key| match media.read(key) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(format!("cannot read {key}: it is gone")),
        Err(error) => Err(format!("cannot read {key}: {error}")),
    };
    let find = |object: ImageObject| {
        media
            .find_image_object(image.id, object)
            .map_err(|error| format!("cannot look for its picture: {error}"))
    };
    let served = match find(ImageObject::Original)? {
        Some(key) => {
            let bytes = read(&key)?;
            Some((key, bytes))
        }
        None => None,
    };
    let (source, bytes) = if let Some(unblurred) = find(ImageObject::Unblurred)? {
        (Source::Unblurred, read(&unblurred)?)
    } else {
        let (_, bytes) = served
            .as_ref()
            .ok_or_else(|| String::from("no picture file (neither unblurred nor published)"))?;
        let source = if was_blurred {
            Source::Published
        } else {
            Source::NeverBlurred
        };
        (source, bytes.clone())
    };
    let edits = database
        .read(|connection| crate::privacy::edit_regions(connection, image.id))
        .map_err(|error: DbError| format!("cannot read its blur edits: {error}"))?;
    Ok(ReblurBasis {
        source,
        bytes,
        edits,
        served,
    })
}

/// The blurred picture of `basis` and its thumbnails: the CPU work, within the process's
/// picture memory.
fn blur_picture(
    image: &Image,
    blurrer: &dyn Blurrer,
    basis: &ReblurBasis,
    thumbnail_nanos: &AtomicU64,
) -> Result<(streetlevel_blur::Blurred, streetlevel_ingest::Thumbnails), String> {
    let bytes = &basis.bytes;
    // The record says 1 for every imported image (its thumbnails are upright); the file
    // says how its pixels are stored, as it did when it was imported.
    let orientation = streetlevel_ingest::read_metadata(bytes)
        .map_or(image.exif_orientation.unwrap_or(1), |metadata| {
            metadata.orientation
        });
    let _memory = crate::budgets::picture_permit(
        bytes,
        PictureWork::Blur {
            orientation,
            detection: blurrer.working_memory_bytes(),
        },
    )?;
    let mut blurred = blurrer
        .blur(
            bytes,
            Hints {
                orientation,
                panorama: image.is_pano,
            },
        )
        .map_err(|error| format!("cannot be blurred: {error}"))?;
    // Boxes blurred by hand are not the detector's to drop: laid on the new picture.
    if basis.source == Source::Unblurred && !basis.edits.is_empty() {
        blurred.jpeg = streetlevel_blur::blur_regions(&blurred.jpeg, &basis.edits)
            .map_err(|error| format!("cannot blur its edited boxes: {error}"))?;
    }
    let thumbnails = make_thumbnails((&blurred.jpeg, None), orientation, thumbnail_nanos)?;
    Ok((blurred, thumbnails))
}

/// In one write transaction: when the image's blur edits and served original are still
/// `basis`'s, writes the picture and its thumbnails, removes what was made from the old one
/// and records the blur; otherwise says what changed, and nothing is written.
fn publish(
    database: &Database,
    media: &MediaStore,
    image: &Image,
    blurrer: &dyn Blurrer,
    basis: &ReblurBasis,
    (blurred, thumbnails): &(streetlevel_blur::Blurred, streetlevel_ingest::Thumbnails),
) -> Result<Option<&'static str>, String> {
    let record = BlurRecord {
        regions: blurred.regions.clone(),
        blurred_by: blurrer.fingerprint(),
        unblurred_kept: basis.source == Source::Unblurred,
    };
    // Failures of its own (a file) are the inner error: nothing is recorded before them.
    let published = database.write(|connection| {
        if crate::privacy::edit_regions(connection, image.id)? != basis.edits {
            return Ok(Ok(Some("its blur edits")));
        }
        let served = media
            .find_image_object(image.id, ImageObject::Original)
            .ok()
            .flatten();
        let unchanged = match (&basis.served, served) {
            (Some((before, bytes)), Some(now)) => {
                // A comparison of bytes already read, not a render: the transaction stays
                // short.
                *before == now
                    && media
                        .read(&now)
                        .is_ok_and(|read| read.as_ref() == Some(bytes))
            }
            (None, None) => true,
            _ => false,
        };
        if !unchanged {
            return Ok(Ok(Some("its picture")));
        }
        let written = write_picture_files(media, image.id, &blurred.jpeg, thumbnails)
            .and_then(|()| remove_stale(media, image));
        if let Err(reason) = written {
            return Ok(Err(reason));
        }
        let now = connection.now_millis()?;
        write_record(connection, image.id, &record, now)?;
        Ok::<_, DbError>(Ok(None))
    });
    published.map_err(|error| format!("cannot record the blur: {error}"))?
}

/// Removes what was made from the old picture and is not written anew: the pyramid tiles,
/// and where an older layout kept the original and the thumbnails.
fn remove_stale(media: &MediaStore, image: &Image) -> Result<(), String> {
    let tiles = layout::derived_objects(image.width, image.height)
        .into_iter()
        .filter(|object| matches!(object, ImageObject::Tile { .. }));
    let mut stale = Vec::new();
    if let MediaStore::Object(_) = media {
        // One listing of the image's prefix rather than a request per tile it could have;
        // an object store has nothing where older layouts kept files.
        let tiles: HashSet<Key> = tiles.map(|tile| tile.key(image.id)).collect();
        let listed = media
            .list(&layout::image_prefix(image.id))
            .map_err(|error| format!("cannot list its objects: {error}"))?;
        stale.extend(listed.into_iter().filter(|key| tiles.contains(key)));
    } else {
        for object in layout::derived_objects(image.width, image.height) {
            stale.extend(layout::legacy_keys(image.id, object));
        }
        stale.extend(tiles.map(|tile| tile.key(image.id)));
        stale.extend(layout::legacy_keys(image.id, ImageObject::Original));
    }
    for key in stale {
        media
            .remove(&key)
            .map_err(|error| format!("cannot remove {key}: {error}"))?;
    }
    Ok(())
}
