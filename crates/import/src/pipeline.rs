//! The pipeline that `streetlevel import` and upload jobs share: read every file's metadata
//! and hash, leave out what is stored already, group into sequences, then per batch make the
//! thumbnails, write the media and insert the images in one store transaction.
//!
//! With blurring on, each picture is blurred before its thumbnails are made and its original
//! written (`blurring.rs`), and its regions are written in its batch's transaction.
//!
//! Files are read, blurred and made into thumbnails on the process's CPU pool (`cpu.rs`), one
//! file per pool thread, however many imports and upload workers run at once. Memory stays
//! bounded by the largest batch's metadata and one file per pool thread: the bytes are read
//! twice (metadata, then media) rather than held. The store's write lock is
//! taken only for the ID reservation and each batch's insert, never while files are read or
//! thumbnails are made.

use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use streetlevel_db::{Conn, DbError};
use streetlevel_ingest::Metadata;
use streetlevel_ingest::sequence::{CutRules, cut};
use streetlevel_model::{
    CameraType, CreatorId, Image, ImageId, OrganizationId, Point, Sequence, SequenceId,
};
use streetlevel_store::{BatchOutcome, ImportBatch, ImportedImage, Store};

use crate::ImportError;
use crate::blurring::{BlurRecord, Blurring, write_record};
use crate::budgets::PictureWork;
use crate::notes::ReadNotes;
use streetlevel_media::{ImageObject, MediaStore};

/// Whose images these are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The creator's username (created in the store if new).
    pub username: String,
    /// The organization the images are contributed to.
    pub organization: Option<OrganizationId>,
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Imported as this image.
    Imported(ImageId),
    /// The same bytes were imported before, as this image.
    Duplicate(ImageId),
    /// Not imported, for this reason.
    Refused(String),
}

/// One file's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    /// The file's name or path.
    pub file: String,
    /// What happened.
    pub outcome: Outcome,
    /// What reading its metadata noted (capture time source, ignored description members).
    pub notes: ReadNotes,
}

/// What an import did, file by file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every file, in the order given.
    pub files: Vec<FileOutcome>,
    /// The sequences created.
    pub sequences: Vec<SequenceId>,
    /// Time spent making thumbnails, summed over the worker threads.
    pub thumbnail_time: std::time::Duration,
    /// Time spent blurring (decoding, detecting, blurring, encoding), summed over the worker
    /// threads.
    pub blur_time: std::time::Duration,
}

impl Report {
    /// How many files became new images.
    pub fn imported(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Imported(_)))
    }

    /// How many files were stored before.
    pub fn duplicates(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Duplicate(_)))
    }

    /// How many files were refused.
    pub fn refused(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Refused(_)))
    }

    /// How many imported files took their capture time from each source.
    pub fn time_sources(&self) -> Vec<(streetlevel_ingest::TimeSource, usize)> {
        crate::notes::time_source_counts(&self.files)
    }

    /// The imported files' warnings, as `(file, warning)`.
    pub fn warnings(&self) -> Vec<(String, String)> {
        crate::notes::warnings(&self.files)
    }

    fn count(&self, which: impl Fn(&Outcome) -> bool) -> usize {
        self.files
            .iter()
            .filter(|file| which(&file.outcome))
            .count()
    }
}

/// How far an import has come: `done` of `total` files in the current step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Reading metadata.
    Reading {
        /// Files read.
        done: usize,
        /// Files in all.
        total: usize,
    },
    /// Making thumbnails and storing images.
    Storing {
        /// Files stored.
        done: usize,
        /// Files to store.
        total: usize,
    },
}

/// Where an import's files come from: paths on disk, entries of a zip, upload sessions.
pub(crate) trait Sources: Sync {
    fn len(&self) -> usize;
    fn name(&self, index: usize) -> String;
    /// The file's bytes, or why they cannot be read.
    fn read(&self, index: usize) -> Result<Vec<u8>, String>;
    /// Where the file's capture time comes from when the source knows better than its Exif
    /// (a video frame: the video's clock).
    fn time_source(&self, _index: usize) -> Option<streetlevel_ingest::TimeSource> {
        None
    }
}

/// How files become sequences.
#[derive(Debug, Clone)]
pub(crate) enum Grouping {
    /// By camera and capture time, as the uploader cuts them.
    Cut(CutRules),
    /// All files one sequence in capture order (an upload whose client cut it already).
    OneSequence,
}

/// The fixed inputs of one run of the pipeline.
pub(crate) struct ImportRun<'a> {
    pub(crate) store: &'a RwLock<Store>,
    /// Where the images' objects go, at their keys of the media layout.
    pub(crate) media: MediaStore,
    pub(crate) blurring: &'a Blurring,
    pub(crate) owner: &'a Owner,
    pub(crate) grouping: Grouping,
    /// The first of `sources.len()` reserved IDs (file `i` becomes image `first_id + i`);
    /// `None` reserves them.
    pub(crate) first_id: Option<u64>,
    /// The key of the `n`-th sequence created.
    pub(crate) sequence_key: &'a (dyn Fn(usize) -> SequenceId + Sync),
    /// One store transaction for everything (uploads: visible at once) rather than one per
    /// sequence (imports from disk: progress survives an interruption).
    pub(crate) one_batch: bool,
    pub(crate) progress: &'a (dyn Fn(Progress) + Sync),
    /// Nanoseconds spent in `thumbnails`, for the report.
    pub(crate) thumbnail_nanos: std::sync::atomic::AtomicU64,
    /// Nanoseconds spent blurring, for the report.
    pub(crate) blur_nanos: std::sync::atomic::AtomicU64,
    /// Why the run is held: the external blur service was away for a picture, so nothing
    /// more is blurred or published, and the run ends with [`ImportError::BlurUnavailable`].
    pub(crate) held: std::sync::Mutex<Option<String>>,
}

/// What reading one source file found: its metadata and the hash of its bytes.
struct FileMetadata {
    metadata: Metadata,
    content_hash: [u8; 32],
}

/// Bookkeeping run in the transaction that publishes the last batch, given that batch's
/// outcome and every file's final outcome (as the [`Report`] will list them), so that what it
/// records is complete the moment the images are visible.
pub(crate) type Bookkeeping<'a> =
    Box<dyn FnOnce(&mut dyn Conn, &BatchOutcome, &[FileOutcome]) -> Result<(), DbError> + 'a>;

impl ImportRun<'_> {
    /// Imports `sources`; `bookkeeping` runs in the transaction of the last batch (which
    /// exists even when nothing is new, so a job is marked done exactly once).
    pub(crate) fn import(
        &self,
        sources: &dyn Sources,
        bookkeeping: Option<Bookkeeping<'_>>,
    ) -> Result<Report, ImportError> {
        self.blurring.check()?;
        let total = sources.len();
        let mut outcomes: Vec<Option<Outcome>> = vec![None; total];
        let (kept, mut reads) = self.read_new(sources, &mut outcomes)?;
        let notes: Vec<ReadNotes> = reads
            .iter()
            .map(|read| read.as_ref().map(|read| ReadNotes::of(&read.metadata)))
            .map(Option::unwrap_or_default)
            .collect();
        let groups = self.group(&kept, &reads, &mut outcomes);
        let creator = write_lock(self.store).ensure_creator(&self.owner.username)?;
        let first_id = match self.first_id {
            Some(first_id) => first_id,
            None => write_lock(self.store).reserve_ids(total as u64)?,
        };
        let to_store: usize = groups.iter().map(Vec::len).sum();
        let stored_count = AtomicUsize::new(0);
        (self.progress)(Progress::Storing {
            done: 0,
            total: to_store,
        });
        let mut sequences = Vec::new();
        let mut batch = ImportBatch::default();
        let mut blur_records: Vec<(ImageId, BlurRecord)> = Vec::new();
        let mut bookkeeping = bookkeeping;
        let n_groups = groups.len();
        for (group_index, group) in groups.into_iter().enumerate() {
            let sequence = (self.sequence_key)(group_index);
            let media = crate::cpu::map(group.len(), |position| {
                let index = group[position];
                let result = self.write_media(
                    sources,
                    index,
                    ImageId(first_id + index as u64),
                    reads[index].as_ref(),
                );
                let done = stored_count.fetch_add(1, Ordering::Relaxed) + 1;
                (self.progress)(Progress::Storing {
                    done,
                    total: to_store,
                });
                result
            });
            // A picture the blur service could not take holds the whole run: this group is
            // not inserted (its media files, all blurred, are written again by the retry).
            self.check_held()?;
            let mut members = Vec::new();
            for (&index, written) in group.iter().zip(media) {
                match written {
                    Ok(record) => {
                        members.push(index);
                        if let Some(record) = record {
                            blur_records.push((ImageId(first_id + index as u64), record));
                        }
                    }
                    Err(reason) => outcomes[index] = Some(Outcome::Refused(reason)),
                }
            }
            self.add_sequence(
                &mut batch, &members, &mut reads, first_id, &sequence, creator,
            );
            let last = group_index + 1 == n_groups;
            if !self.one_batch || last {
                let outcome = self.insert(
                    (
                        &std::mem::take(&mut batch),
                        &std::mem::take(&mut blur_records),
                    ),
                    if last { bookkeeping.take() } else { None },
                    sources,
                    &outcomes,
                    &notes,
                    first_id,
                )?;
                record(&mut outcomes, &outcome, first_id);
            }
            if !members.is_empty() {
                sequences.push(sequence);
            }
        }
        if let Some(bookkeeping) = bookkeeping.take() {
            // Nothing to insert: the caller's bookkeeping still runs in a transaction.
            self.insert(
                (&ImportBatch::default(), &[]),
                Some(bookkeeping),
                sources,
                &outcomes,
                &notes,
                first_id,
            )?;
        }
        // A sequence whose images all turned out stored already (another process imported
        // them meanwhile) was not created.
        {
            let store = read_lock(self.store);
            sequences.retain(|sequence| store.sequence(sequence).is_some());
        }
        Ok(Report {
            files: file_outcomes(sources, outcomes, notes),
            sequences,
            thumbnail_time: std::time::Duration::from_nanos(
                self.thumbnail_nanos.load(Ordering::Relaxed),
            ),
            blur_time: std::time::Duration::from_nanos(self.blur_nanos.load(Ordering::Relaxed)),
        })
    }

    /// [`ImportError::BlurUnavailable`] once the run is held.
    fn check_held(&self) -> Result<(), ImportError> {
        self.held_reason()
            .map_or(Ok(()), |reason| Err(ImportError::BlurUnavailable(reason)))
    }

    fn held_reason(&self) -> Option<String> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Adds the images of one sequence (`members`, in capture order) and the sequence to
    /// `batch`, taking their metadata out of `reads`.
    fn add_sequence(
        &self,
        batch: &mut ImportBatch,
        members: &[usize],
        reads: &mut [Option<FileMetadata>],
        first_id: u64,
        sequence: &SequenceId,
        creator: CreatorId,
    ) {
        let compass_angles: Vec<f64> = {
            let metadata: Vec<&Metadata> = members
                .iter()
                .filter_map(|&index| reads[index].as_ref().map(|read| &read.metadata))
                .collect();
            sequence_compass_angles(&metadata)
        };
        for (&index, compass_angle) in members.iter().zip(compass_angles) {
            let Some(read) = reads[index].take() else {
                continue;
            };
            let image = image_record(
                ImageId(first_id + index as u64),
                &read.metadata,
                compass_angle,
                sequence,
                creator,
                self.owner.organization,
            );
            batch.images.push(ImportedImage {
                image,
                content_hash: read.content_hash,
            });
        }
        if !members.is_empty() {
            batch.sequences.push(Sequence {
                id: sequence.clone(),
                creator,
                organization: self.owner.organization,
                image_ids: Vec::new(),
            });
        }
    }

    /// Reads every file's metadata and hash (in parallel); returns the files to import (not
    /// refused, not stored before, not a repeat within this import) and what was read.
    fn read_new(
        &self,
        sources: &dyn Sources,
        outcomes: &mut [Option<Outcome>],
    ) -> Result<(Vec<usize>, Vec<Option<FileMetadata>>), ImportError> {
        let total = sources.len();
        let done = AtomicUsize::new(0);
        (self.progress)(Progress::Reading { done: 0, total });
        let reads = crate::cpu::map(total, |index| {
            let read = sources.read(index).and_then(|bytes| {
                let mut metadata =
                    streetlevel_ingest::read_metadata(&bytes).map_err(|error| error.to_string())?;
                if let Some(source) = sources.time_source(index) {
                    metadata.time_source = source;
                }
                Ok(FileMetadata {
                    metadata,
                    content_hash: streetlevel_ingest::content_hash(&bytes),
                })
            });
            let done = done.fetch_add(1, Ordering::Relaxed) + 1;
            (self.progress)(Progress::Reading { done, total });
            read
        });
        let mut candidates = Vec::new();
        let reads: Vec<Option<FileMetadata>> = reads
            .into_iter()
            .enumerate()
            .map(|(index, read)| match read {
                Ok(read) => {
                    candidates.push(index);
                    Some(read)
                }
                Err(reason) => {
                    outcomes[index] = Some(Outcome::Refused(reason));
                    None
                }
            })
            .collect();
        // Stored before, or earlier in this import: no work at all.
        let hashes: Vec<[u8; 32]> = candidates
            .iter()
            .filter_map(|&index| reads[index].as_ref().map(|read| read.content_hash))
            .collect();
        let stored = read_lock(self.store).images_with_hashes(&hashes)?;
        let mut seen = std::collections::HashMap::new();
        let mut kept = Vec::new();
        for (&index, stored) in candidates.iter().zip(stored) {
            let Some(read) = &reads[index] else { continue };
            if let Some(existing) = stored {
                outcomes[index] = Some(Outcome::Duplicate(existing));
            } else if let Some(&first) = seen.get(&read.content_hash) {
                outcomes[index] = Some(Outcome::Refused(format!(
                    "the same bytes as {}",
                    sources.name(first)
                )));
            } else {
                seen.insert(read.content_hash, index);
                kept.push(index);
            }
        }
        Ok((kept, reads))
    }

    /// Splits the kept files into sequences; files the rules drop get their reason.
    fn group(
        &self,
        kept: &[usize],
        reads: &[Option<FileMetadata>],
        outcomes: &mut [Option<Outcome>],
    ) -> Vec<Vec<usize>> {
        let metadata: Vec<Metadata> = kept
            .iter()
            .filter_map(|&index| reads[index].as_ref().map(|read| read.metadata.clone()))
            .collect();
        match &self.grouping {
            Grouping::Cut(rules) => {
                let result = cut(&metadata, rules);
                for (position, reason) in result.dropped {
                    outcomes[kept[position]] = Some(Outcome::Refused(reason.to_string()));
                }
                result
                    .sequences
                    .into_iter()
                    .map(|sequence| {
                        sequence
                            .into_iter()
                            .map(|position| kept[position])
                            .collect()
                    })
                    .collect()
            }
            Grouping::OneSequence => {
                let mut order: Vec<usize> = (0..kept.len()).collect();
                order.sort_by_key(|&position| metadata[position].captured_at);
                if order.is_empty() {
                    Vec::new()
                } else {
                    vec![order.into_iter().map(|position| kept[position]).collect()]
                }
            }
        }
    }

    /// Reads the file again, checks it is the one whose metadata was read, blurs it (with
    /// blurring on), and writes its thumbnails and original: the blurred picture, while the
    /// unblurred one is kept outside `media/` only if so configured.
    fn write_media(
        &self,
        sources: &dyn Sources,
        index: usize,
        image: ImageId,
        read: Option<&FileMetadata>,
    ) -> Result<Option<BlurRecord>, String> {
        let Some(read) = read else {
            return Err(String::from("not read"));
        };
        if let Some(reason) = self.held_reason() {
            return Err(reason);
        }
        let bytes = sources.read(index)?;
        if streetlevel_ingest::content_hash(&bytes) != read.content_hash {
            return Err(String::from("the file changed while it was imported"));
        }
        // The process's picture memory is shared by every job and thread (budgets.rs); the
        // permit covers the picture's whole working set and is held until its files are
        // written.
        let orientation = read.metadata.orientation;
        let _memory = match self.blurring {
            Blurring::Off | Blurring::Unusable(_) => {
                crate::budgets::picture_permit(&bytes, PictureWork::Thumbnails { orientation })?
            }
            Blurring::On { blurrer, .. } => crate::budgets::picture_permit(
                &bytes,
                PictureWork::Blur {
                    orientation,
                    detection: blurrer.working_memory_bytes(),
                },
            )?
            .releasing(std::sync::Arc::clone(blurrer)),
        };
        let (published, record, pixels) = match self.blurring {
            Blurring::Off => (bytes, None, None),
            Blurring::Unusable(reason) => return Err(format!("not blurred: {reason}")),
            Blurring::On {
                blurrer,
                keep_unblurred,
            } => {
                let hints = streetlevel_blur::Hints {
                    orientation: read.metadata.orientation,
                    panorama: read.metadata.is_pano,
                };
                let started = std::time::Instant::now();
                let blurred = blurrer.blur_with_pixels(&bytes, hints);
                let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.blur_nanos.fetch_add(elapsed, Ordering::Relaxed);
                let (blurred, pixels) = blurred.map_err(|error| {
                    if error.is_transient() {
                        let mut held = self
                            .held
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        held.get_or_insert_with(|| error.to_string());
                    }
                    format!("cannot be blurred, so it is not published: {error}")
                })?;
                if *keep_unblurred {
                    self.media
                        .write(&ImageObject::Unblurred.key(image), &bytes)
                        .map_err(|error| format!("cannot keep the unblurred original: {error}"))?;
                }
                let record = BlurRecord {
                    regions: blurred.regions,
                    blurred_by: blurrer.fingerprint(),
                    unblurred_kept: *keep_unblurred,
                };
                (blurred.jpeg, Some(record), pixels)
            }
        };
        write_picture(
            &self.media,
            image,
            (&published, pixels),
            read.metadata.orientation,
            &self.thumbnail_nanos,
        )?;
        Ok(record)
    }

    /// Stores `batch`; `bookkeeping` runs in its transaction with every file's outcome once the
    /// batch's is added to `outcomes` (the files of earlier batches and those left out), with
    /// the files' notes.
    fn insert(
        &self,
        (batch, blur_records): (&ImportBatch, &[(ImageId, BlurRecord)]),
        bookkeeping: Option<Bookkeeping<'_>>,
        sources: &dyn Sources,
        outcomes: &[Option<Outcome>],
        notes: &[ReadNotes],
        first_id: u64,
    ) -> Result<BatchOutcome, ImportError> {
        // The transaction runs under no lock of the store, so requests keep reading it;
        // only adding the written images to memory takes the write lock.
        let prepared = read_lock(self.store).prepare_batch(batch)?;
        let written = prepared.write(|transaction, outcome| {
            // What blurring found becomes visible with the images it belongs to.
            let now = transaction.now_millis()?;
            for (image, record) in blur_records {
                if outcome.inserted.contains(image) {
                    write_record(transaction, *image, record, now)?;
                }
            }
            match bookkeeping {
                Some(bookkeeping) => {
                    let mut files = outcomes.to_vec();
                    record(&mut files, outcome, first_id);
                    bookkeeping(
                        transaction,
                        outcome,
                        &file_outcomes(sources, files, notes.to_vec()),
                    )
                }
                None => Ok(()),
            }
        })?;
        Ok(write_lock(self.store).add_written(written))
    }
}

/// Makes the thumbnails of `jpeg` (from `pixels`, its pixels as the blurrer decoded them,
/// when given, so that it is not decoded again) and writes them and `jpeg` as the image's
/// original.
pub(crate) fn write_picture(
    media: &MediaStore,
    image: ImageId,
    (jpeg, pixels): (&[u8], Option<streetlevel_blur::BlurredPixels>),
    orientation: u8,
    thumbnail_nanos: &std::sync::atomic::AtomicU64,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let thumbnails = match pixels {
        Some(pixels) => streetlevel_ingest::thumbnails_from_rgb(
            pixels.width,
            pixels.height,
            pixels.rgb,
            orientation,
        ),
        None => streetlevel_ingest::thumbnails(jpeg, orientation),
    }
    .map_err(|error| error.to_string());
    let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    thumbnail_nanos.fetch_add(elapsed, Ordering::Relaxed);
    let thumbnails = thumbnails?;
    for (width, thumbnail) in [
        (256, &thumbnails.px256),
        (1024, &thumbnails.px1024),
        (2048, &thumbnails.px2048),
    ] {
        media
            .write(&ImageObject::Thumbnail(width).key(image), &thumbnail.jpeg)
            .map_err(|error| format!("cannot write a thumbnail: {error}"))?;
    }
    media
        .write(&ImageObject::Original.key(image), jpeg)
        .map_err(|error| format!("cannot write the original: {error}"))
}

/// Each file's outcome by name, with its notes; a file that has no outcome was never
/// processed.
fn file_outcomes(
    sources: &dyn Sources,
    outcomes: Vec<Option<Outcome>>,
    notes: Vec<ReadNotes>,
) -> Vec<FileOutcome> {
    outcomes
        .into_iter()
        .zip(notes)
        .enumerate()
        .map(|(index, (outcome, notes))| FileOutcome {
            file: sources.name(index),
            outcome: outcome.unwrap_or_else(|| Outcome::Refused(String::from("not processed"))),
            notes,
        })
        .collect()
}

/// Files the store left out because another writer stored the same bytes meanwhile are
/// duplicates; the others are imported.
fn record(outcomes: &mut [Option<Outcome>], outcome: &BatchOutcome, first_id: u64) {
    let index = |id: ImageId| {
        usize::try_from(id.0 - first_id).expect("the store answers with IDs of the batch reserved")
    };
    for &id in &outcome.inserted {
        outcomes[index(id)] = Some(Outcome::Imported(id));
    }
    for &(id, existing) in &outcome.duplicates {
        outcomes[index(id)] = Some(Outcome::Duplicate(existing));
    }
}

/// The image an imported file becomes. Values come from the file but the compass angle, which
/// [`sequence_compass_angles`] filled; the computed ones (no reconstruction runs here) repeat
/// them.
fn image_record(
    id: ImageId,
    metadata: &Metadata,
    compass_angle: f64,
    sequence: &SequenceId,
    creator: CreatorId,
    organization: Option<OrganizationId>,
) -> Image {
    let point = Point::new(metadata.longitude, metadata.latitude);
    let (width, height) = metadata.upright_size();
    let camera_parameters = match metadata.camera_type {
        // The viewer needs a focal length; without calibration this is a typical phone
        // camera's (focal length over the larger side), with no radial distortion.
        CameraType::Perspective | CameraType::Fisheye => Some(vec![0.85, 0.0, 0.0]),
        CameraType::Equirectangular => None,
    };
    Image {
        id,
        altitude: metadata.altitude,
        atomic_scale: None,
        camera_parameters,
        camera_type: Some(metadata.camera_type),
        captured_at: metadata.captured_at,
        compass_angle: Some(compass_angle),
        computed_altitude: metadata.altitude,
        computed_compass_angle: Some(compass_angle),
        computed_geometry: Some(point),
        computed_rotation: None,
        creator,
        // Thumbnails are stored upright, so viewers must not rotate them again.
        exif_orientation: Some(1),
        geometry: point,
        height,
        width,
        is_pano: metadata.is_pano,
        make: metadata.make.clone(),
        model: metadata.model.clone(),
        merge_cc: None,
        mesh: None,
        sequence: sequence.clone(),
        sfm_cluster: None,
        quality_score: None,
        organization,
    }
}

/// The compass angle of each image of a sequence (in capture order), filled as the official
/// uploader fills it before it uploads (`geo.interpolate_directions_if_none` in
/// `mapillary_tools` 0.14), so that a folder imported and the same folder uploaded agree: the
/// file's own direction; else the direction of travel towards the next image; the last image
/// without one takes the angle of the image before it; a lone image without one gets 0, as the
/// uploader writes. (Where the uploader would compute a bearing between two images at the same
/// spot, which is no direction, the image takes the angle before it, or 0.)
///
/// The web viewer cannot place an image without a compass angle (mapillary-js turns
/// `compass_angle` into the camera's rotation when `computed_rotation` is absent), so every
/// image gets one.
fn sequence_compass_angles(sequence: &[&Metadata]) -> Vec<f64> {
    let mut angles: Vec<f64> = Vec::with_capacity(sequence.len());
    for (position, image) in sequence.iter().enumerate() {
        let previous = angles.last().copied();
        let angle = image
            .compass_angle
            .or_else(|| {
                let next = sequence.get(position + 1)?;
                bearing(image, next)
            })
            .or(previous)
            .unwrap_or(0.0);
        angles.push(angle);
    }
    angles
}

/// The initial compass bearing from `from` to `to`, in `[0, 360)`; `None` when they are at the
/// same spot.
fn bearing(from: &Metadata, to: &Metadata) -> Option<f64> {
    let (lat1, lat2) = (from.latitude.to_radians(), to.latitude.to_radians());
    let delta_lon = (to.longitude - from.longitude).to_radians();
    let y = delta_lon.sin() * lat2.cos();
    let x = lat1.cos() * lat2.sin() - lat1.sin() * lat2.cos() * delta_lon.cos();
    if x.abs() < 1e-12 && y.abs() < 1e-12 {
        return None;
    }
    let degrees = y.atan2(x).to_degrees().rem_euclid(360.0);
    // rem_euclid rounds a tiny negative angle up to 360 itself.
    Some(if degrees >= 360.0 { 0.0 } else { degrees })
}

pub(crate) fn read_lock(store: &RwLock<Store>) -> std::sync::RwLockReadGuard<'_, Store> {
    store
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write_lock(store: &RwLock<Store>) -> std::sync::RwLockWriteGuard<'_, Store> {
    store
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(latitude: f64, longitude: f64, compass_angle: Option<f64>) -> Metadata {
        Metadata {
            latitude,
            longitude,
            altitude: None,
            compass_angle,
            captured_at: streetlevel_model::Timestamp(0),
            time_source: streetlevel_ingest::TimeSource::Gps,
            make: None,
            model: None,
            camera_uuid: None,
            orientation: 1,
            width: 4,
            height: 3,
            is_pano: false,
            camera_type: CameraType::Perspective,
            ignored: Vec::new(),
        }
    }

    fn check(sequence: &[Metadata], expected: &[f64]) {
        let sequence: Vec<&Metadata> = sequence.iter().collect();
        let angles = sequence_compass_angles(&sequence);
        assert_eq!(angles.len(), expected.len());
        for (angle, expected) in angles.iter().zip(expected) {
            assert!(
                (angle - expected).abs() < 0.01,
                "{angles:?} != {expected:?}"
            );
        }
    }

    #[test]
    fn compass_angles_are_filled_as_the_uploader_fills_them() {
        // North, then east along the equator: towards the next image, the last one as the one
        // before it.
        check(
            &[
                at(0.0, 0.0, None),
                at(0.001, 0.0, None),
                at(0.001, 0.001, None),
            ],
            &[0.0, 90.0, 90.0],
        );
        // The file's own direction wins; the last image takes its predecessor's angle, even
        // when that is the file's.
        check(
            &[
                at(0.0, 0.0, None),
                at(0.0, -0.001, Some(12.5)),
                at(0.0, 0.0, None),
            ],
            &[270.0, 12.5, 12.5],
        );
        // South-west, across the antimeridian eastwards.
        check(
            &[at(0.0, 0.0, None), at(-0.001, -0.001, None)],
            &[225.0, 225.0],
        );
        check(
            &[at(0.0, 179.9995, None), at(0.0, -179.9995, None)],
            &[90.0, 90.0],
        );
        // A lone image: its own direction, else 0, as the uploader writes.
        check(&[at(55.7, 13.19, Some(300.0))], &[300.0]);
        check(&[at(55.7, 13.19, None)], &[0.0]);
        // Two images at one spot give no direction: the angle before, else 0.
        check(
            &[at(1.0, 1.0, None), at(1.0, 1.0, None), at(1.001, 1.0, None)],
            &[0.0, 0.0, 0.0],
        );
        check(
            &[
                at(1.0, 1.0, Some(40.0)),
                at(1.0, 1.001, None),
                at(1.0, 1.001, None),
            ],
            &[40.0, 40.0, 40.0],
        );
        check(&[], &[]);
    }
}
