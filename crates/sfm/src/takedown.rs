//! Takedowns reach what reconstructions derived: erasing images deletes their shots (and so
//! their meshes, which are made from them) and takes them out of every point's observers,
//! dropping the points fewer than two images then observe, and a cluster left without shots;
//! in the transaction that erases the images (`streetlevel-import`'s erasure runs it). Hidden
//! images need nothing here: what is served is made on request from the images the store
//! says are public (`media.rs`). A job's work directory may hold an erased image's thumbnail
//! while it runs: [`remove_work_files`] removes such copies.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use streetlevel_db::{Conn, DbError, id_to_sql, params};
use streetlevel_model::{ImageId, MediaId};

use crate::cluster;

/// Deletes what reconstructions keep about the images `erased`, in the caller's transaction
/// (the `sfm_` tables must exist: [`crate::migrate`] first).
pub fn forget_images(connection: &mut dyn Conn, erased: &[ImageId]) -> Result<(), DbError> {
    if erased.is_empty() {
        return Ok(());
    }
    let shots = cluster::shots_of_images(connection, erased)?;
    let mut by_cluster: HashMap<MediaId, HashSet<ImageId>> = HashMap::new();
    for shot in &shots {
        by_cluster
            .entry(shot.cluster)
            .or_default()
            .insert(shot.image);
    }
    for image in erased {
        connection.execute(
            "DELETE FROM sfm_shots WHERE image_id = ?1",
            params![id_to_sql(image.0)],
        )?;
    }
    for (id, gone) in by_cluster {
        let left = cluster::shots_of_cluster(connection, id)?;
        if left.is_empty() {
            cluster::delete_cluster(connection, id)?;
            continue;
        }
        let points: Option<Vec<u8>> = connection.query_value(
            "SELECT points FROM sfm_clusters WHERE id = ?1",
            params![id_to_sql(id.0)],
        )?;
        let Some(points) = points else {
            continue;
        };
        // A cluster whose points do not decode loses them all rather than keep the image.
        let points = cluster::decode_points(&points).unwrap_or_default();
        cluster::update_points(connection, id, &cluster::without_observers(points, &gone))?;
    }
    Ok(())
}

/// Removes the copies of these images' thumbnails from the jobs' work directories under
/// `data_dir` (a job that then needs one fails and is queued again). Returns how many.
pub fn remove_work_files(data_dir: &Path, images: &[ImageId]) -> usize {
    let root = data_dir.join(crate::WORK_DIR);
    let wanted: HashSet<String> = images.iter().map(|image| format!("-{image}.jpg")).collect();
    let mut removed = 0;
    let Ok(jobs) = std::fs::read_dir(&root) else {
        return 0;
    };
    for job in jobs.flatten() {
        let Ok(parts) = std::fs::read_dir(job.path()) else {
            continue;
        };
        for part in parts.flatten() {
            let Ok(files) = std::fs::read_dir(part.path().join("images")) else {
                continue;
            };
            for file in files.flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                if wanted.iter().any(|suffix| name.ends_with(suffix.as_str()))
                    && std::fs::remove_file(file.path()).is_ok()
                {
                    removed += 1;
                }
            }
        }
    }
    removed
}
