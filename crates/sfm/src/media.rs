//! Serving reconstructions: an image's `mesh` and `sfm_cluster` are made on request from the
//! rows (`cluster.rs`) and the store's view of which images are public, so that a hidden
//! image's shot, mesh and the points only it and one other image observe are never served,
//! and come back when it is restored, on every process at once (each follows the database).
//! Each answer names the images it shows, for the CDN's surrogate keys.

use std::collections::HashSet;
use std::sync::{PoisonError, RwLock};

use streetlevel_db::Database;
use streetlevel_model::{EntityId, EntityKind, ImageId, MediaId};
use streetlevel_store::Store;

use crate::SfmError;
use crate::cluster::{self, MIN_OBSERVERS};
use crate::mesh;
use crate::pose::{Pose, matrix_of_angle_axis};

/// Bytes to serve and the images they show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The body.
    pub bytes: Vec<u8>,
    /// The public images whose data it holds (a takedown of any of them changes it).
    pub images: Vec<ImageId>,
}

fn public_images(store: &RwLock<Store>, images: impl Iterator<Item = ImageId>) -> HashSet<ImageId> {
    let store = store.read().unwrap_or_else(PoisonError::into_inner);
    images
        .filter(|image| store.kind_of(EntityId(image.0)) == Some(EntityKind::Image))
        .collect()
}

/// The cluster `id` as the viewer downloads it (zlib JSON), `None` when there is no such
/// cluster or none of its images is public.
pub fn cluster_bytes(
    database: &Database,
    store: &RwLock<Store>,
    id: MediaId,
) -> Result<Option<Served>, SfmError> {
    let found = database.read(|connection| {
        let Some(row) = cluster::read_cluster(connection, id)? else {
            return Ok::<_, SfmError>(None);
        };
        Ok(Some((row, cluster::shots_of_cluster(connection, id)?)))
    })?;
    let Some((row, shots)) = found else {
        return Ok(None);
    };
    let public = public_images(store, shots.iter().map(|shot| shot.image));
    let Some(value) = cluster::cluster_json(&row, &shots, &|image| public.contains(&image)) else {
        return Ok(None);
    };
    let mut images: Vec<ImageId> = public.into_iter().collect();
    images.sort_unstable();
    Ok(Some(Served {
        bytes: cluster::compress_json(&value),
        images,
    }))
}

/// The mesh `id` as the viewer reads it (protobuf), `None` when there is no such mesh or its
/// image is not public.
pub fn mesh_bytes(
    database: &Database,
    store: &RwLock<Store>,
    id: MediaId,
) -> Result<Option<Served>, SfmError> {
    let found = database.read(|connection| {
        let Some(shot) = cluster::shot_with_mesh(connection, id)? else {
            return Ok::<_, SfmError>(None);
        };
        let Some(row) = cluster::read_cluster(connection, shot.cluster)? else {
            return Ok(None);
        };
        let shots = cluster::shots_of_cluster(connection, shot.cluster)?;
        Ok(Some((shot, row, shots)))
    })?;
    let Some((shot, row, shots)) = found else {
        return Ok(None);
    };
    let public = public_images(store, shots.iter().map(|shot| shot.image));
    if !public.contains(&shot.image) {
        return Ok(None);
    }
    let pose = Pose {
        rotation: matrix_of_angle_axis(shot.rotation),
        translation: shot.translation,
    };
    let points: Vec<[f64; 3]> = row
        .points
        .iter()
        .filter(|point| point.observers.contains(&shot.image))
        .filter(|point| {
            point
                .observers
                .iter()
                .filter(|observer| public.contains(observer))
                .count()
                >= MIN_OBSERVERS
        })
        .map(|point| pose.to_camera(point.xyz.map(f64::from)))
        .collect();
    let camera = row.cameras.get(&shot.camera);
    let number = |name: &str| camera.and_then(|camera| camera[name].as_f64());
    let size = |name: &str| {
        camera
            .and_then(|camera| camera[name].as_u64())
            .and_then(|value| u32::try_from(value).ok())
    };
    let made = match camera.and_then(|camera| camera["projection_type"].as_str()) {
        Some("equirectangular") => mesh::spherical(&points, shot.scale),
        _ => mesh::perspective(
            &points,
            number("focal").unwrap_or(0.85),
            size("width").unwrap_or(4),
            size("height").unwrap_or(3),
            shot.scale,
        ),
    };
    Ok(Some(Served {
        bytes: made.encode(),
        images: vec![shot.image],
    }))
}

/// The image whose mesh `id` is, if it is one of a reconstruction's.
pub fn mesh_image(database: &Database, id: MediaId) -> Result<Option<ImageId>, SfmError> {
    Ok(database
        .read(|connection| cluster::shot_with_mesh(connection, id))?
        .map(|shot| shot.image))
}

/// The public images of the cluster `id`.
pub fn cluster_images(
    database: &Database,
    store: &RwLock<Store>,
    id: MediaId,
) -> Result<Vec<ImageId>, SfmError> {
    let shots = database.read(|connection| cluster::shots_of_cluster(connection, id))?;
    let mut images: Vec<ImageId> = public_images(store, shots.iter().map(|shot| shot.image))
        .into_iter()
        .collect();
    images.sort_unstable();
    Ok(images)
}
