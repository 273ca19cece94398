//! Erasing images from a data directory: every row and every object of each image, in one
//! place ([`erase_images`]). The objects are found by the media layout
//! (`streetlevel_media::layout`), which keeps every object of an image under one prefix, so
//! whatever a request made of the image goes with that prefix; the rows of another crate's
//! table that keeps something of an image are erased by adding them here.
//!
//! Rows go first, in one transaction: the store's (the image, its detections, its content
//! hash, its links from map features, a sequence left empty; see `streetlevel-store`),
//! this crate's (the upload sessions that became the images) and the reconstructions' (its
//! shot, so its mesh, and its part of its cluster's points; see `streetlevel-sfm`). Then memory, then the files
//! (and the bytes of the upload sessions that became the images, if a job left them):
//! from then on no server that holds the store's answer serves the image, and a file a
//! concurrent request rendered after the deletion is removed by that request itself (see the
//! server's media handler).

use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use streetlevel_db::{Conn, DbError, Param, id_from_sql, id_to_sql};
use streetlevel_media::{MediaStore, layout};
use streetlevel_model::{Image, ImageId, SequenceId};
use streetlevel_store::{Store, TakedownNote};

use crate::ImportError;

/// Image IDs per `IN (…)` list when deleting this crate's rows.
const IDS_PER_STATEMENT: usize = 500;

/// What [`erase_images`] did.
#[derive(Debug, Default)]
pub struct Erasure {
    /// The images erased, as they were (public or hidden), in the order asked.
    pub images: Vec<Image>,
    /// How many files were removed.
    pub files_removed: usize,
    /// Files that exist but could not be removed, with the reason (the rows are gone: the
    /// image is answered as unknown everywhere; an operator removes these by hand).
    pub failures: Vec<(PathBuf, std::io::Error)>,
}

/// Removes every object of `image` from the data directory's media: everything under its
/// prefix of the media layout (`media/img/<id>/`: its original, every thumbnail and pyramid
/// tile any request made, its kept unblurred original) and every place an older layout kept
/// them; and its mesh and `SfM` cluster when no other image uses them (`in_use`).
fn remove_image_media(
    media: &MediaStore,
    image: &Image,
    in_use: impl Fn(streetlevel_model::MediaId) -> bool,
    erasure: &mut Erasure,
) {
    let removal = media.remove_image(image.id, image.width, image.height);
    erasure.files_removed += removal.removed;
    erasure.failures.extend(removal.failures);
    let mut shared = Vec::new();
    if let Some(mesh) = image.mesh.filter(|&mesh| !in_use(mesh)) {
        shared.extend(layout::mesh_read_keys(mesh));
    }
    if let Some(cluster) = image.sfm_cluster.filter(|&cluster| !in_use(cluster)) {
        shared.extend(layout::cluster_read_keys(cluster));
    }
    for key in shared {
        match media.remove(&key) {
            Ok(true) => erasure.files_removed += 1,
            Ok(false) => {}
            Err(error) => erasure.failures.push((PathBuf::from(key.as_str()), error)),
        }
    }
}

/// Erases the images with these IDs (public or hidden; others are left out): the rows in one
/// transaction that records `note`, then the store's memory, then every file under
/// `data_dir` (none without one: a store with no files). A store on a database is expected
/// (`Store::open`/`open_location`); an in-memory store has no rows of this crate to erase.
pub fn erase_images(
    store: &RwLock<Store>,
    data_dir: Option<&Path>,
    ids: &[ImageId],
    note: &TakedownNote<'_>,
) -> Result<Erasure, ImportError> {
    let database = store
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .database()
        .cloned();
    // This crate's tables, where a data directory never served uploads, exist from here on.
    if let Some(database) = &database {
        crate::tables::migrate(database)?;
        streetlevel_sfm::migrate(database)?;
    }
    // The upload sessions that became the images: their bytes go with them (a job removes
    // them once it published, unless that failed).
    let mut sessions = Vec::new();
    let images = {
        let mut store = store.write().unwrap_or_else(PoisonError::into_inner);
        store.delete_images(ids, note, |connection, erased| {
            if database.is_some() {
                sessions = sessions_of(connection, erased)?;
                delete_own_rows(connection, erased)?;
                // Their shots (and so meshes) and their part of every cluster's points.
                streetlevel_sfm::forget_images(connection, erased)?;
            }
            Ok(())
        })?
    };
    let mut erasure = Erasure {
        images,
        ..Erasure::default()
    };
    let Some(data_dir) = data_dir else {
        return Ok(erasure);
    };
    let store = store.read().unwrap_or_else(PoisonError::into_inner);
    let erased: Vec<ImageId> = erasure.images.iter().map(|image| image.id).collect();
    erasure.files_removed += streetlevel_sfm::remove_work_files(data_dir, &erased);
    let media = crate::media_store(data_dir);
    let images = std::mem::take(&mut erasure.images);
    for image in &images {
        remove_image_media(
            &media,
            image,
            |shared| store.media_in_use(shared),
            &mut erasure,
        );
    }
    erasure.images = images;
    drop(store);
    let bytes = crate::session_bytes::SessionBytes::of(data_dir);
    for (user, key) in sessions {
        if let Err(error) = bytes.remove(user, &key) {
            let place = streetlevel_media::layout::upload_key(user, &key);
            erasure
                .failures
                .push((PathBuf::from(place.as_str()), error));
        }
    }
    for (file, error) in &erasure.failures {
        tracing::error!(file = %file.display(), %error, "an erased image's file could not be removed");
    }
    Ok(erasure)
}

impl crate::Uploads {
    /// The keys of every sequence an upload job (by its ID, the `cluster_id`) may have
    /// published, `None` for an unknown job: a job's sequences are keyed by the job and their
    /// position in it, and each holds at least one of its files.
    pub fn sequences_of_job(&self, job_id: u64) -> Result<Option<Vec<SequenceId>>, ImportError> {
        let Some(job) = self.job(job_id)? else {
            return Ok(None);
        };
        let job_id = i64::try_from(job.id).unwrap_or(i64::MAX);
        let count = usize::try_from(job.files.max(1)).unwrap_or(usize::MAX);
        Ok(Some(
            (0..count)
                .map(|index| crate::jobs::derived_sequence_key(job_id, index))
                .collect(),
        ))
    }
}

/// The upload sessions (user, key) that became the images `erased`.
fn sessions_of(
    connection: &mut dyn Conn,
    erased: &[ImageId],
) -> Result<Vec<(u64, String)>, DbError> {
    let mut sessions = Vec::new();
    for chunk in erased.chunks(IDS_PER_STATEMENT) {
        let placeholders: Vec<String> = (1..=chunk.len()).map(|n| format!("?{n}")).collect();
        let values: Vec<i64> = chunk.iter().map(|id| id_to_sql(id.0)).collect();
        let parameters: Vec<Param<'_>> = values.iter().map(|&value| Param::Int(value)).collect();
        sessions.extend(connection.query_map(
            &format!(
                "SELECT user_id, key FROM import_sessions WHERE image IN ({})",
                placeholders.join(", ")
            ),
            &parameters,
            |row| Ok::<_, DbError>((id_from_sql(row.get::<i64>(0)?), row.get::<String>(1)?)),
        )?);
    }
    Ok(sessions)
}

/// This crate's rows about the images `erased`: the upload sessions that became them (their
/// keys are the uploader's file names, which it derives from the content), what blurring found
/// in them (boxes drawn on the person's picture are personal data too), which blurrer blurred
/// them, and their blur edits. Privacy requests stay (resolved or not): they are the record of
/// what was asked, and hold no pixels.
fn delete_own_rows(connection: &mut dyn Conn, erased: &[ImageId]) -> Result<(), DbError> {
    const BY_IMAGE: [(&str, &str); 4] = [
        ("import_sessions", "image"),
        ("import_blur_regions", "image_id"),
        ("import_blurred_images", "image_id"),
        ("import_blur_edits", "image_id"),
    ];
    for chunk in erased.chunks(IDS_PER_STATEMENT) {
        let placeholders: Vec<String> = (1..=chunk.len()).map(|n| format!("?{n}")).collect();
        let values: Vec<i64> = chunk.iter().map(|id| id_to_sql(id.0)).collect();
        let parameters: Vec<Param<'_>> = values.iter().map(|&value| Param::Int(value)).collect();
        for (table, column) in BY_IMAGE {
            connection.execute(
                &format!(
                    "DELETE FROM {table} WHERE {column} IN ({})",
                    placeholders.join(", ")
                ),
                &parameters,
            )?;
        }
    }
    Ok(())
}
