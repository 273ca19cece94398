//! The store's write-through inserts (creators, organizations, sequences, images, map
//! features, detections, content hashes), the write log that followers read, and ID
//! reservation, each run inside the caller's write transaction.

use streetlevel_db::{Conn, Database, params};
use streetlevel_model::{
    CameraType, Creator, CreatorId, Detection, Image, ImageId, MapFeature, Organization, Sequence,
};

use super::columns::finite;
use super::columns::floats_to_blob;
use super::columns::from_sql_id;
use super::columns::ids_to_blob;
use super::columns::to_sql_id;
use super::schema::WRITES_CHANNEL;
use crate::StoreError;

pub(crate) fn insert_creators(
    connection: &mut dyn Conn,
    creators: &[Creator],
) -> Result<(), StoreError> {
    for creator in creators {
        connection.execute(
            "INSERT INTO store_creators (id, username) VALUES (?1, ?2)",
            params![to_sql_id(creator.id.0), &creator.username],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_organizations(
    connection: &mut dyn Conn,
    organizations: &[Organization],
) -> Result<(), StoreError> {
    for organization in organizations {
        connection.execute(
            "INSERT INTO store_organizations (id, slug, name, description)
             VALUES (?1, ?2, ?3, ?4)",
            params![
                to_sql_id(organization.id.0),
                &organization.slug,
                &organization.name,
                organization.description.as_deref()
            ],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_sequences(
    connection: &mut dyn Conn,
    sequences: &[Sequence],
) -> Result<(), StoreError> {
    for sequence in sequences {
        connection.execute(
            "INSERT INTO store_sequences (id, creator, organization) VALUES (?1, ?2, ?3)",
            params![
                sequence.id.as_str(),
                to_sql_id(sequence.creator.0),
                sequence.organization.map(|id| to_sql_id(id.0))
            ],
        )?;
    }
    Ok(())
}

const INSERT_IMAGE: &str = "INSERT INTO store_images (id, captured_at, lon, lat, computed_lon,
    computed_lat, altitude, atomic_scale, camera_parameters, camera_type, compass_angle,
    computed_altitude, computed_compass_angle, computed_rotation, creator, exif_orientation,
    height, width, is_pano, make, model, merge_cc, mesh, sequence, sfm_cluster, quality_score,
    organization)
 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
    ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)";

/// The computed rotation (none when it is NaN) and the camera parameters as blobs.
fn derived_blobs(image: &Image) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let rotation = image
        .computed_rotation
        .filter(|rotation| !rotation[0].is_nan())
        .map(|rotation| floats_to_blob(&rotation));
    let parameters = image.camera_parameters.as_deref().map(floats_to_blob);
    (rotation, parameters)
}

/// Inserts images and logs the write (see [`log_write`]).
pub(crate) fn insert_images(connection: &mut dyn Conn, images: &[Image]) -> Result<(), StoreError> {
    for image in images {
        let (rotation, parameters) = derived_blobs(image);
        connection.execute(
            INSERT_IMAGE,
            params![
                to_sql_id(image.id.0),
                image.captured_at.0,
                image.geometry.lon,
                image.geometry.lat,
                image.computed_geometry.map(|point| point.lon),
                image.computed_geometry.map(|point| point.lat),
                finite(image.altitude),
                finite(image.atomic_scale),
                parameters.as_ref(),
                image.camera_type.map(CameraType::as_str),
                finite(image.compass_angle),
                finite(image.computed_altitude),
                finite(image.computed_compass_angle),
                rotation.as_ref(),
                to_sql_id(image.creator.0),
                image.exif_orientation,
                image.height,
                image.width,
                image.is_pano,
                image.make.as_deref(),
                image.model.as_deref(),
                image.merge_cc.map(to_sql_id),
                image.mesh.map(|mesh| to_sql_id(mesh.0)),
                image.sequence.as_str(),
                image.sfm_cluster.map(|cluster| to_sql_id(cluster.0)),
                finite(image.quality_score),
                image.organization.map(|id| to_sql_id(id.0)),
            ],
        )?;
    }
    log_write(connection, images.iter().map(|image| image.id))
}

/// Writes the computed fields of images already stored (the whole row's derived part:
/// computed location, altitude, compass angle and rotation, camera parameters, scale,
/// component, mesh and cluster) and logs the write, so that followers reload the rows.
pub(crate) fn set_computed(connection: &mut dyn Conn, images: &[Image]) -> Result<(), StoreError> {
    for image in images {
        let (rotation, parameters) = derived_blobs(image);
        connection.execute(
            "UPDATE store_images SET computed_lon = ?2, computed_lat = ?3,
                computed_altitude = ?4, computed_compass_angle = ?5, computed_rotation = ?6,
                camera_parameters = ?7, atomic_scale = ?8, merge_cc = ?9, mesh = ?10,
                sfm_cluster = ?11
             WHERE id = ?1",
            params![
                to_sql_id(image.id.0),
                image.computed_geometry.map(|point| point.lon),
                image.computed_geometry.map(|point| point.lat),
                finite(image.computed_altitude),
                finite(image.computed_compass_angle),
                rotation.as_ref(),
                parameters.as_ref(),
                finite(image.atomic_scale),
                image.merge_cc.map(to_sql_id),
                image.mesh.map(|mesh| to_sql_id(mesh.0)),
                image.sfm_cluster.map(|cluster| to_sql_id(cluster.0)),
            ],
        )?;
    }
    log_write(connection, images.iter().map(|image| image.id))
}

/// Records that images with IDs between the least and the greatest of `ids` were written, so
/// that other processes on the same database can follow (see [`follow`]), and wakes them
/// (PostgreSQL's `NOTIFY` on [`WRITES_CHANNEL`], sent when the transaction commits).
pub(super) fn log_write(
    connection: &mut dyn Conn,
    ids: impl Iterator<Item = ImageId>,
) -> Result<(), StoreError> {
    let range = ids
        .map(|id| to_sql_id(id.0))
        .fold(None, |range, id| match range {
            None => Some((id, id)),
            Some((low, high)) => Some((id.min(low), id.max(high))),
        });
    if let Some((first, last)) = range {
        connection.execute(
            "INSERT INTO store_writes (first_image, last_image) VALUES (?1, ?2)",
            params![first, last],
        )?;
        Database::notify(connection, WRITES_CHANNEL)?;
    }
    Ok(())
}

/// The newest entry of the write log (0 for none).
pub(crate) fn last_write(connection: &mut dyn Conn) -> Result<i64, StoreError> {
    Ok(connection
        .query_value("SELECT coalesce(max(seq), 0) FROM store_writes", params![])?
        .unwrap_or(0))
}

/// Hands out `count` consecutive entity IDs above every ID in the database, in memory
/// (`in_memory_next`) and handed out before, and returns the first.
pub(crate) fn reserve_ids(
    connection: &mut dyn Conn,
    count: u64,
    in_memory_next: u64,
) -> Result<u64, StoreError> {
    let stored: Option<i64> = connection.query_value(
        "SELECT next FROM store_next_id WHERE singleton = 0",
        params![],
    )?;
    let greatest: Option<i64> = connection
        .query_value::<Option<i64>>(
            "SELECT max(id) FROM (
                SELECT max(id) AS id FROM store_images UNION ALL
                SELECT max(id) FROM store_map_features UNION ALL
                SELECT max(id) FROM store_detections UNION ALL
                SELECT max(id) FROM store_organizations UNION ALL
                SELECT max(id) FROM store_creators) AS greatest",
            params![],
        )?
        .flatten();
    let first = [
        stored.map_or(1, from_sql_id),
        greatest.map_or(1, |id| from_sql_id(id) + 1),
        in_memory_next,
    ]
    .into_iter()
    .max()
    .unwrap_or(1);
    let next = first
        .checked_add(count)
        .filter(|next| i64::try_from(*next).is_ok())
        .ok_or(StoreError::Full("entity ids"))?;
    connection.execute(
        "INSERT INTO store_next_id (singleton, next) VALUES (0, ?1)
         ON CONFLICT (singleton) DO UPDATE SET next = excluded.next",
        params![to_sql_id(next)],
    )?;
    Ok(first)
}

/// The ID of the creator named `username`, if there is one.
pub(crate) fn creator_by_username(
    connection: &mut dyn Conn,
    username: &str,
) -> Result<Option<CreatorId>, StoreError> {
    let id: Option<i64> = connection.query_value(
        "SELECT id FROM store_creators WHERE username = ?1",
        params![username],
    )?;
    Ok(id.map(|id| CreatorId(from_sql_id(id))))
}

/// The image holding each content hash, where one does.
pub(crate) fn images_with_hashes(
    connection: &mut dyn Conn,
    hashes: &[[u8; 32]],
) -> Result<Vec<Option<ImageId>>, StoreError> {
    hashes
        .iter()
        .map(|hash| {
            let image: Option<i64> = connection.query_value(
                "SELECT image FROM store_image_hashes WHERE sha256 = ?1",
                params![hash.as_slice()],
            )?;
            Ok(image.map(|id| ImageId(from_sql_id(id))))
        })
        .collect()
}

pub(crate) fn insert_image_hashes(
    connection: &mut dyn Conn,
    hashes: &[([u8; 32], ImageId)],
) -> Result<(), StoreError> {
    for (hash, image) in hashes {
        connection.execute(
            "INSERT INTO store_image_hashes (sha256, image) VALUES (?1, ?2)",
            params![hash.as_slice(), to_sql_id(image.0)],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_map_features(
    connection: &mut dyn Conn,
    features: &[MapFeature],
) -> Result<(), StoreError> {
    for feature in features {
        let images = ids_to_blob(&feature.images);
        connection.execute(
            "INSERT INTO store_map_features (id, aligned_direction, first_seen_at, last_seen_at,
                object_value, object_type, lon, lat, images)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                to_sql_id(feature.id.0),
                finite(feature.aligned_direction),
                feature.first_seen_at.0,
                feature.last_seen_at.0,
                &feature.object_value,
                feature.object_type.as_str(),
                feature.geometry.lon,
                feature.geometry.lat,
                &images,
            ],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_detections(
    connection: &mut dyn Conn,
    detections: &[Detection],
) -> Result<(), StoreError> {
    for detection in detections {
        connection.execute(
            "INSERT INTO store_detections (id, created_at, geometry, image, value, map_feature)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                to_sql_id(detection.id.0),
                detection.created_at.0,
                &detection.geometry,
                to_sql_id(detection.image.0),
                &detection.value,
                detection.map_feature.map(|id| to_sql_id(id.0)),
            ],
        )?;
    }
    Ok(())
}
