//! Erasing images from a data directory: every row and every file of each image, listed in
//! one place ([`image_files`] for the files, [`erase_images`] for the rows), so that whatever
//! keeps something of an image (a thumbnail size, the unblurred original, another crate's
//! table) is erased by adding it here.
//!
//! Rows go first, in one transaction: the store's (the image, its detections, its content
//! hash, its links from map features, a sequence left empty; see `streetlevel-store`),
//! this crate's (the upload sessions that became the images) and the reconstructions' (its
//! shot, so its mesh, and its part of its cluster's points; see `streetlevel-sfm`). Then memory, then the files:
//! from then on no server that holds the store's answer serves the image, and a file a
//! concurrent request rendered after the deletion is removed by that request itself (see the
//! server's media handler).

use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use streetlevel_db::{Conn, DbError, Param, id_to_sql};
use streetlevel_model::{Image, ImageId, SequenceId};
use streetlevel_store::{MEDIA_DIR, Store, TakedownNote};

use crate::ImportError;
use crate::media::{THUMBNAIL_CACHE_DIR, original_path, thumbnail_path};

/// Where an operator who keeps unblurred originals has them: `<data dir>/unblurred/<id>.jpg`,
/// outside `media/` so that nothing serves them.
pub const UNBLURRED_DIR: &str = "unblurred";

/// The thumbnail widths the server makes and caches.
const THUMBNAIL_WIDTHS: [u32; 3] = [256, 1024, 2048];

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

/// Every file an image may have under the data directory `data_dir`: its original (where
/// imports put it and where fixture sets have it), every thumbnail, every tile of its image
/// pyramid, the unblurred original when one is kept, and its mesh and `SfM` cluster (only
/// removed when no other image uses them, see [`erase_images`]).
pub fn image_files(data_dir: &Path, image: &Image) -> Vec<PathBuf> {
    let media = data_dir.join(MEDIA_DIR);
    let mut files = vec![
        original_path(&media, image.id),
        media.join("originals").join(format!("{}.jpg", image.id)),
        media.join(format!("{}.jpg", image.id)),
        data_dir
            .join(UNBLURRED_DIR)
            .join(format!("{}.jpg", image.id)),
    ];
    files.extend(cached_files(data_dir, image));
    debug_assert!(files.iter().all(|file| file.starts_with(data_dir)));
    files
}

/// The files the server makes from an image's original and caches: every thumbnail and every
/// tile of its image pyramid (removed when a blur edit writes a new original).
pub(crate) fn cached_files(data_dir: &Path, image: &Image) -> Vec<PathBuf> {
    let media = data_dir.join(MEDIA_DIR);
    let mut files: Vec<PathBuf> = THUMBNAIL_WIDTHS
        .iter()
        .map(|&width| thumbnail_path(&media, image.id, width))
        .collect();
    files.extend(pyramid_tiles(&media, image));
    files
}

/// The files of an image's mesh and `SfM` cluster, as the server looks for them, each when
/// no other image uses it (`in_use`). (A reconstruction's are no files: they are made from
/// the rows the erasure deletes, see `streetlevel-sfm`.)
fn shared_media_files(
    data_dir: &Path,
    image: &Image,
    in_use: impl Fn(streetlevel_model::MediaId) -> bool,
) -> Vec<PathBuf> {
    let media = data_dir.join(MEDIA_DIR);
    let mut files = Vec::new();
    if let Some(mesh) = image.mesh.filter(|&mesh| !in_use(mesh)) {
        for pattern in [
            "meshes/{}.pb",
            "meshes/{}.pbf",
            "meshes/{}",
            "mesh/{}.pbf",
            "mesh/{}",
        ] {
            files.push(media.join(pattern.replace("{}", &mesh.to_string())));
        }
    }
    if let Some(cluster) = image.sfm_cluster.filter(|&cluster| !in_use(cluster)) {
        for pattern in [
            "sfm/{}.json.zz",
            "sfm/{}.json.zlib",
            "sfm/{}",
            "sfm_clusters/{}.json.zlib",
            "clusters/{}",
        ] {
            files.push(media.join(pattern.replace("{}", &cluster.to_string())));
        }
    }
    files
}

/// The lowest pyramid level the web viewer asks for (mapillary-js's `TILE_MIN_REQUEST_LEVEL`):
/// the server serves (and caches) every level up to this one also for an image whose own top
/// level is lower, enlarged (`streetlevel_server::media::VIEWER_MIN_LEVEL` is this).
pub const VIEWER_MIN_LEVEL: u32 = 11;

/// The cached tiles of the viewer's image pyramid (`cache/<id>_tile_<z>_<x>_<y>.jpg`, blocks
/// of 1024 pixels of the image scaled by `2^(z - max)`), every one the image can have, up to
/// its own top level or [`VIEWER_MIN_LEVEL`], whichever is higher (the levels above its own
/// are the image enlarged: a picture under 2049 pixels has tiles at level 11, the level the
/// viewer shows first): the server cuts the stored JPEG, whose sides may be the entity's
/// swapped (EXIF orientation), so both axes take the longer side.
pub(crate) fn pyramid_tiles(media: &Path, image: &Image) -> Vec<PathBuf> {
    let side = image.width.max(image.height).max(1);
    let max_level = u32::BITS - (side - 1).leading_zeros();
    let mut tiles = Vec::new();
    for z in 0..=max_level.max(VIEWER_MIN_LEVEL) {
        let scaled = if z >= max_level {
            u64::from(side) << (z - max_level)
        } else {
            u64::from((side >> (max_level - z)).max(1))
        };
        let columns = scaled.div_ceil(1024);
        let rows = columns;
        for x in 0..columns {
            for y in 0..rows {
                tiles.push(
                    media
                        .join(THUMBNAIL_CACHE_DIR)
                        .join(format!("{}_tile_{z}_{x}_{y}.jpg", image.id)),
                );
            }
        }
    }
    tiles
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
    let images = {
        let mut store = store.write().unwrap_or_else(PoisonError::into_inner);
        store.delete_images(ids, note, |connection, erased| {
            if database.is_some() {
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
    for image in &erasure.images {
        let mut files = image_files(data_dir, image);
        files.extend(shared_media_files(data_dir, image, |media| {
            store.media_in_use(media)
        }));
        for file in files {
            match std::fs::remove_file(&file) {
                Ok(()) => erasure.files_removed += 1,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => erasure.failures.push((file, error)),
            }
        }
    }
    drop(store);
    for (file, error) in &erasure.failures {
        tracing::error!(file = %file.display(), %error, "an erased image's file could not be removed");
    }
    Ok(erasure)
}

/// Removes the files of images erased by another process (found by following the database):
/// the same files [`erase_images`] removes, for data directories that do not share `media/`
/// and for files a request here made while the other process erased.
pub fn remove_image_files(data_dir: &Path, images: &[Image]) -> usize {
    let mut removed = 0;
    for image in images {
        for file in image_files(data_dir, image) {
            if std::fs::remove_file(&file).is_ok() {
                removed += 1;
            }
        }
    }
    removed
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pyramid_tile_the_server_can_make_is_listed() {
        let mut image = streetlevel_model::Image {
            width: 4000,
            height: 3000,
            ..test_image()
        };
        image.id = ImageId(7);
        let tiles = pyramid_tiles(Path::new("/m"), &image);
        // Level 12 (4096 ≥ 4000): up to 4 × 4 blocks; level 0: one.
        assert!(tiles.contains(&PathBuf::from("/m/cache/7_tile_12_3_3.jpg")));
        assert!(!tiles.contains(&PathBuf::from("/m/cache/7_tile_12_4_2.jpg")));
        assert!(tiles.contains(&PathBuf::from("/m/cache/7_tile_0_0_0.jpg")));
        assert!(tiles.len() < 40, "{}", tiles.len());
        assert_eq!(
            tiles.len(),
            16 + 4 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
        );
    }

    #[test]
    fn the_enlarged_levels_of_a_small_picture_are_listed_up_to_the_viewers_first() {
        // 1024 x 768: its own top level is 10 (one block); level 11 is it enlarged twice, in
        // 2 x 2 blocks, which the server serves and caches for the viewer.
        let mut image = streetlevel_model::Image {
            width: 1024,
            height: 768,
            ..test_image()
        };
        image.id = ImageId(9);
        let tiles = pyramid_tiles(Path::new("/m"), &image);
        for (x, y) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let tile = PathBuf::from(format!("/m/cache/9_tile_11_{x}_{y}.jpg"));
            assert!(tiles.contains(&tile), "{}", tile.display());
        }
        assert!(tiles.contains(&PathBuf::from("/m/cache/9_tile_10_0_0.jpg")));
        assert!(
            !tiles
                .iter()
                .any(|tile| tile.to_string_lossy().contains("_tile_12_"))
        );
        assert_eq!(tiles.len(), 11 + 4);
    }

    fn test_image() -> streetlevel_model::Image {
        use streetlevel_model::{CreatorId, Point, SequenceId, Timestamp};
        streetlevel_model::Image {
            id: ImageId(1),
            altitude: None,
            atomic_scale: None,
            camera_parameters: None,
            camera_type: None,
            captured_at: Timestamp(0),
            compass_angle: None,
            computed_altitude: None,
            computed_compass_angle: None,
            computed_geometry: None,
            computed_rotation: None,
            creator: CreatorId(1),
            exif_orientation: None,
            geometry: Point::new(0.0, 0.0),
            height: 1,
            width: 1,
            is_pano: false,
            make: None,
            model: None,
            merge_cc: None,
            mesh: None,
            sequence: SequenceId(String::from("s")),
            sfm_cluster: None,
            quality_score: None,
            organization: None,
        }
    }
}
