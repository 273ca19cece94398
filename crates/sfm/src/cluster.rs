//! Clusters as they are kept and as they are served.
//!
//! Kept: one `sfm_clusters` row per reconstruction (reference position, cameras, points) and
//! one `sfm_shots` row per registered image. The points are a zlib-compressed list of
//! `b"SLP1"`, a `u32` count, then per point east, north and up from the reference as `f32`
//! (metres), red, green, blue and the number of observers as bytes, and each observer's image
//! ID as a `u64`, all little-endian.
//!
//! Served (the image's `sfm_cluster`): zlib-compressed JSON, a list of one reconstruction in
//! `OpenSfM`'s layout, `{"cameras", "shots", "points", "reference_lla"}`, which the web viewer
//! reads; built on request from the rows and the store's view of which images are public, so
//! that a hidden or erased image's shot is never in it, nor a point fewer than two public
//! images observe.

use std::collections::{HashMap, HashSet};
use std::io::{Read as _, Write as _};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use serde_json::{Map, Value, json};
use streetlevel_db::{Conn, DbError, Row, id_from_sql, id_to_sql, params};
use streetlevel_model::{ImageId, MediaId};

use crate::SfmError;
use crate::geo::Lla;

/// The points' format tag.
const POINTS_MAGIC: &[u8; 4] = b"SLP1";
/// The most bytes the points of one cluster may inflate to.
const MAX_POINTS_BYTES: u64 = 512 << 20;
/// A point needs this many public observers to be served.
pub const MIN_OBSERVERS: usize = 2;

/// One point of a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPoint {
    /// East, north, up from the cluster's reference (metres).
    pub xyz: [f32; 3],
    /// Colour.
    pub color: [u8; 3],
    /// The images that observe it.
    pub observers: Vec<ImageId>,
}

/// A cluster's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterRow {
    /// Its ID (the images' `sfm_cluster`).
    pub id: MediaId,
    /// The sequence it reconstructs (a part of).
    pub sequence: String,
    /// The origin of its coordinates.
    pub reference: Lla,
    /// Its cameras, by key (the `cameras` member served).
    pub cameras: Map<String, Value>,
    /// Its points.
    pub points: Vec<StoredPoint>,
}

/// An image's shot in its cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ShotRow {
    /// The image.
    pub image: ImageId,
    /// Its cluster.
    pub cluster: MediaId,
    /// Its mesh's ID.
    pub mesh: MediaId,
    /// Its camera's key in the cluster's cameras.
    pub camera: String,
    /// World to camera, angle-axis.
    pub rotation: [f64; 3],
    /// World to camera.
    pub translation: [f64; 3],
    /// The GPS position in the cluster's frame.
    pub gps: [f64; 3],
    /// The atomic reconstruction's scale.
    pub scale: f64,
    /// Its connected component.
    pub merge_cc: u64,
    /// Capture time (milliseconds since the epoch).
    pub capture_time: i64,
    /// The computed compass angle.
    pub compass: Option<f64>,
}

/// Packs and compresses points.
pub fn encode_points(points: &[StoredPoint]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(8 + points.len() * 40);
    raw.extend_from_slice(POINTS_MAGIC);
    raw.extend_from_slice(
        &u32::try_from(points.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for point in points.iter().take(u32::MAX as usize) {
        for value in point.xyz {
            raw.extend_from_slice(&value.to_le_bytes());
        }
        raw.extend_from_slice(&point.color);
        let observers = &point.observers[..point.observers.len().min(255)];
        raw.push(u8::try_from(observers.len()).unwrap_or(u8::MAX));
        for observer in observers {
            raw.extend_from_slice(&observer.0.to_le_bytes());
        }
    }
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::fast());
    // Writing to a vector cannot fail.
    let _ = encoder.write_all(&raw);
    encoder.finish().unwrap_or_default()
}

/// Unpacks points; `None` when the bytes are not what [`encode_points`] writes.
pub fn decode_points(blob: &[u8]) -> Option<Vec<StoredPoint>> {
    let mut raw = Vec::new();
    ZlibDecoder::new(blob)
        .take(MAX_POINTS_BYTES + 1)
        .read_to_end(&mut raw)
        .ok()?;
    if raw.len() as u64 > MAX_POINTS_BYTES {
        return None;
    }
    let mut rest = raw.strip_prefix(POINTS_MAGIC.as_slice())?;
    let mut take = |count: usize| -> Option<&[u8]> {
        let (head, tail) = rest.split_at_checked(count)?;
        rest = tail;
        Some(head)
    };
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
    // A point takes at least 16 bytes: a count beyond what is there is a corrupt blob.
    let mut points = Vec::with_capacity((count as usize).min(raw.len() / 16));
    for _ in 0..count {
        let mut xyz = [0f32; 3];
        for value in &mut xyz {
            *value = f32::from_le_bytes(take(4)?.try_into().ok()?);
        }
        let color: [u8; 3] = take(3)?.try_into().ok()?;
        let observers = usize::from(take(1)?[0]);
        let observers = take(observers * 8)?
            .chunks_exact(8)
            .map(|chunk| {
                let mut bytes = [0; 8];
                bytes.copy_from_slice(chunk);
                ImageId(u64::from_le_bytes(bytes))
            })
            .collect();
        points.push(StoredPoint {
            xyz,
            color,
            observers,
        });
    }
    rest.is_empty().then_some(points)
}

/// Inserts a cluster's row.
pub(crate) fn insert_cluster(
    connection: &mut dyn Conn,
    cluster: &ClusterRow,
) -> Result<(), DbError> {
    let cameras = Value::Object(cluster.cameras.clone()).to_string();
    let now = connection.now_millis()?;
    connection.execute(
        "INSERT INTO sfm_clusters (id, sequence, reference_lat, reference_lon, reference_alt,
            cameras, points, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            id_to_sql(cluster.id.0),
            cluster.sequence.as_str(),
            cluster.reference.lat,
            cluster.reference.lon,
            cluster.reference.alt,
            cameras.as_str(),
            encode_points(&cluster.points).as_slice(),
            now,
        ],
    )?;
    Ok(())
}

/// Rewrites a cluster's points.
pub(crate) fn update_points(
    connection: &mut dyn Conn,
    cluster: MediaId,
    points: &[StoredPoint],
) -> Result<(), DbError> {
    connection.execute(
        "UPDATE sfm_clusters SET points = ?2 WHERE id = ?1",
        params![id_to_sql(cluster.0), encode_points(points).as_slice()],
    )?;
    Ok(())
}

/// Inserts an image's shot.
pub(crate) fn insert_shot(connection: &mut dyn Conn, shot: &ShotRow) -> Result<(), DbError> {
    connection.execute(
        "INSERT INTO sfm_shots (image_id, cluster, mesh, camera, rotation_x, rotation_y,
            rotation_z, translation_x, translation_y, translation_z, gps_x, gps_y, gps_z, scale,
            merge_cc, capture_time, compass)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            id_to_sql(shot.image.0),
            id_to_sql(shot.cluster.0),
            id_to_sql(shot.mesh.0),
            shot.camera.as_str(),
            shot.rotation[0],
            shot.rotation[1],
            shot.rotation[2],
            shot.translation[0],
            shot.translation[1],
            shot.translation[2],
            shot.gps[0],
            shot.gps[1],
            shot.gps[2],
            shot.scale,
            id_to_sql(shot.merge_cc),
            shot.capture_time,
            shot.compass,
        ],
    )?;
    Ok(())
}

const SHOT_COLUMNS: &str = "SELECT image_id, cluster, mesh, camera, rotation_x, rotation_y,
    rotation_z, translation_x, translation_y, translation_z, gps_x, gps_y, gps_z, scale,
    merge_cc, capture_time, compass FROM sfm_shots";

fn shot_of(row: &dyn Row) -> Result<ShotRow, DbError> {
    Ok(ShotRow {
        image: ImageId(id_from_sql(row.get(0)?)),
        cluster: MediaId(id_from_sql(row.get(1)?)),
        mesh: MediaId(id_from_sql(row.get(2)?)),
        camera: row.get(3)?,
        rotation: [row.get(4)?, row.get(5)?, row.get(6)?],
        translation: [row.get(7)?, row.get(8)?, row.get(9)?],
        gps: [row.get(10)?, row.get(11)?, row.get(12)?],
        scale: row.get(13)?,
        merge_cc: id_from_sql(row.get(14)?),
        capture_time: row.get(15)?,
        compass: row.get(16)?,
    })
}

/// The shots of a cluster, by image ID.
pub(crate) fn shots_of_cluster(
    connection: &mut dyn Conn,
    cluster: MediaId,
) -> Result<Vec<ShotRow>, DbError> {
    connection.query_map(
        &format!("{SHOT_COLUMNS} WHERE cluster = ?1 ORDER BY image_id"),
        params![id_to_sql(cluster.0)],
        shot_of,
    )
}

/// The shot whose mesh this is.
pub(crate) fn shot_with_mesh(
    connection: &mut dyn Conn,
    mesh: MediaId,
) -> Result<Option<ShotRow>, DbError> {
    connection.query_row(
        &format!("{SHOT_COLUMNS} WHERE mesh = ?1"),
        params![id_to_sql(mesh.0)],
        shot_of,
    )
}

/// The shots of these images.
pub(crate) fn shots_of_images(
    connection: &mut dyn Conn,
    images: &[ImageId],
) -> Result<Vec<ShotRow>, DbError> {
    let mut shots = Vec::new();
    for image in images {
        if let Some(shot) = connection.query_row(
            &format!("{SHOT_COLUMNS} WHERE image_id = ?1"),
            params![id_to_sql(image.0)],
            shot_of,
        )? {
            shots.push(shot);
        }
    }
    Ok(shots)
}

/// A cluster's row, `None` when there is none; [`SfmError::CorruptCluster`] when its stored
/// points or cameras do not decode.
pub(crate) fn read_cluster(
    connection: &mut dyn Conn,
    id: MediaId,
) -> Result<Option<ClusterRow>, SfmError> {
    let row = connection.query_row(
        "SELECT sequence, reference_lat, reference_lon, reference_alt, cameras, points
         FROM sfm_clusters WHERE id = ?1",
        params![id_to_sql(id.0)],
        |row| {
            Ok::<_, DbError>((
                row.get::<String>(0)?,
                Lla {
                    lat: row.get(1)?,
                    lon: row.get(2)?,
                    alt: row.get(3)?,
                },
                row.get::<String>(4)?,
                row.get::<Vec<u8>>(5)?,
            ))
        },
    )?;
    let Some((sequence, reference, cameras, points)) = row else {
        return Ok(None);
    };
    let corrupt = || SfmError::CorruptCluster(id.0);
    let Ok(Value::Object(cameras)) = serde_json::from_str::<Value>(&cameras) else {
        return Err(corrupt());
    };
    let points = decode_points(&points).ok_or_else(corrupt)?;
    Ok(Some(ClusterRow {
        id,
        sequence,
        reference,
        cameras,
        points,
    }))
}

/// The IDs of a sequence's clusters.
pub(crate) fn clusters_of_sequence(
    connection: &mut dyn Conn,
    sequence: &str,
) -> Result<Vec<MediaId>, DbError> {
    connection.query_map(
        "SELECT id FROM sfm_clusters WHERE sequence = ?1 ORDER BY id",
        params![sequence],
        |row| Ok::<_, DbError>(MediaId(id_from_sql(row.get(0)?))),
    )
}

/// Deletes a cluster and its shots.
pub(crate) fn delete_cluster(connection: &mut dyn Conn, id: MediaId) -> Result<(), DbError> {
    let id = id_to_sql(id.0);
    connection.execute("DELETE FROM sfm_shots WHERE cluster = ?1", params![id])?;
    connection.execute("DELETE FROM sfm_clusters WHERE id = ?1", params![id])?;
    Ok(())
}

/// The points of `points` that at least [`MIN_OBSERVERS`] of the images `shown` observe, with
/// only those observers.
pub fn served_points<'a, S: std::hash::BuildHasher>(
    points: &'a [StoredPoint],
    shown: &'a HashSet<ImageId, S>,
) -> impl Iterator<Item = (usize, &'a StoredPoint)> + 'a {
    points.iter().enumerate().filter(move |(_, point)| {
        point
            .observers
            .iter()
            .filter(|observer| shown.contains(observer))
            .count()
            >= MIN_OBSERVERS
    })
}

/// The reconstruction served for a cluster: its shots of the images `public` says are public,
/// and the points at least two of them observe. `None` when no shot is public.
pub fn cluster_json(
    cluster: &ClusterRow,
    shots: &[ShotRow],
    public: &dyn Fn(ImageId) -> bool,
) -> Option<Value> {
    let shown: Vec<&ShotRow> = shots.iter().filter(|shot| public(shot.image)).collect();
    if shown.is_empty() {
        return None;
    }
    let ids: HashSet<ImageId> = shown.iter().map(|shot| shot.image).collect();
    let mut served_shots = Map::new();
    let mut used_cameras = HashSet::new();
    for shot in &shown {
        used_cameras.insert(shot.camera.as_str());
        let mut value = json!({
            "camera": shot.camera,
            "rotation": shot.rotation,
            "translation": shot.translation,
            "gps_position": shot.gps,
            "gps_dop": 5.0,
            "orientation": 1,
            "capture_time": round3(millis_to_seconds(shot.capture_time)),
            "scale": shot.scale,
            "merge_cc": shot.merge_cc,
        });
        if let Some(angle) = shot.compass {
            value["compass"] = json!({"angle": angle, "accuracy": 0.0});
        }
        served_shots.insert(shot.image.to_string(), value);
    }
    let mut points = Map::new();
    for (index, point) in served_points(&cluster.points, &ids) {
        points.insert(
            index.to_string(),
            json!({
                "color": point.color,
                "coordinates": point.xyz.map(|value| round3(f64::from(value))),
            }),
        );
    }
    let cameras: Map<String, Value> = cluster
        .cameras
        .iter()
        .filter(|(key, _)| used_cameras.contains(key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Some(json!([{
        "cameras": cameras,
        "shots": served_shots,
        "points": points,
        "reference_lla": {
            "latitude": cluster.reference.lat,
            "longitude": cluster.reference.lon,
            "altitude": cluster.reference.alt,
        },
    }]))
}

/// zlib-compressed JSON, as the viewer downloads a cluster.
pub fn compress_json(value: &Value) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
    // Writing to a vector cannot fail.
    let _ = encoder.write_all(value.to_string().as_bytes());
    encoder.finish().unwrap_or_default()
}

/// The points of `points` without the observers `gone`, and without the points fewer than
/// [`MIN_OBSERVERS`] images observe then.
pub fn without_observers<S: std::hash::BuildHasher>(
    points: Vec<StoredPoint>,
    gone: &HashSet<ImageId, S>,
) -> Vec<StoredPoint> {
    points
        .into_iter()
        .filter_map(|mut point| {
            point.observers.retain(|observer| !gone.contains(observer));
            (point.observers.len() >= MIN_OBSERVERS).then_some(point)
        })
        .collect()
}

/// How many points each image observes (for the per-image report).
pub fn observations(points: &[StoredPoint]) -> HashMap<ImageId, usize> {
    let mut counts = HashMap::new();
    for point in points {
        for observer in &point.observers {
            *counts.entry(*observer).or_insert(0) += 1;
        }
    }
    counts
}

/// Milliseconds as seconds (a capture time: exact to the millisecond within 2^53 ms).
#[allow(clippy::cast_precision_loss)] // times are far below 2^53 ms
fn millis_to_seconds(millis: i64) -> f64 {
    millis as f64 / 1000.0
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn point(observers: &[u64]) -> StoredPoint {
        StoredPoint {
            xyz: [1.5, -2.25, 3.0],
            color: [10, 20, 30],
            observers: observers.iter().copied().map(ImageId).collect(),
        }
    }

    #[test]
    fn points_read_back_as_written() {
        let points = vec![point(&[1, 2]), point(&[]), point(&[u64::MAX, 7, 9])];
        assert_eq!(decode_points(&encode_points(&points)), Some(points));
        assert_eq!(decode_points(&encode_points(&[])), Some(Vec::new()));
    }

    proptest! {
        #[test]
        fn hostile_blobs_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_points(&bytes);
            let mut raw = b"SLP1".to_vec();
            raw.extend_from_slice(&bytes);
            let mut encoder = ZlibEncoder::new(Vec::new(), Compression::fast());
            encoder.write_all(&raw).unwrap();
            let _ = decode_points(&encoder.finish().unwrap());
        }
    }

    fn shot(image: u64) -> ShotRow {
        ShotRow {
            image: ImageId(image),
            cluster: MediaId(50),
            mesh: MediaId(60 + image),
            camera: String::from("v2 apple iphone 1024 768 perspective"),
            rotation: [0.1, 0.2, 0.3],
            translation: [1.0, 2.0, 3.0],
            gps: [0.5, 0.5, 0.0],
            scale: 0.06,
            merge_cc: 9,
            capture_time: 1_500_000_000_123,
            compass: Some(341.0),
        }
    }

    #[test]
    fn a_cluster_serves_public_shots_and_the_points_two_of_them_observe() {
        let mut cameras = Map::new();
        cameras.insert(
            String::from("v2 apple iphone 1024 768 perspective"),
            json!({"projection_type": "perspective", "width": 1024, "height": 768, "focal": 0.97, "k1": 0.0, "k2": 0.0}),
        );
        cameras.insert(String::from("unused"), json!({}));
        let cluster = ClusterRow {
            id: MediaId(50),
            sequence: String::from("s"),
            reference: Lla {
                lat: 55.7,
                lon: 13.2,
                alt: 37.0,
            },
            cameras,
            points: vec![
                point(&[1, 2]),
                point(&[1, 3]),
                point(&[2, 3]),
                point(&[1, 2, 3]),
            ],
        };
        let shots = [shot(1), shot(2), shot(3)];
        // Image 3 is hidden.
        let value = cluster_json(&cluster, &shots, &|image| image != ImageId(3)).unwrap();
        let reconstruction = &value[0];
        let served: Vec<&String> = reconstruction["shots"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(served, ["1", "2"]);
        let points: Vec<&String> = reconstruction["points"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(points, ["0", "3"]);
        assert_eq!(
            reconstruction["points"]["0"]["coordinates"],
            json!([1.5, -2.25, 3.0])
        );
        assert_eq!(reconstruction["cameras"].as_object().unwrap().len(), 1);
        assert_eq!(reconstruction["reference_lla"]["altitude"], json!(37.0));
        assert_eq!(
            reconstruction["shots"]["1"]["capture_time"],
            json!(1_500_000_000.123)
        );
        assert!(cluster_json(&cluster, &shots, &|_| false).is_none());
        // What the viewer inflates is the same JSON.
        let bytes = compress_json(&value);
        let mut inflated = String::new();
        ZlibDecoder::new(bytes.as_slice())
            .read_to_string(&mut inflated)
            .unwrap();
        assert_eq!(serde_json::from_str::<Value>(&inflated).unwrap(), value);
    }

    #[test]
    fn erasing_an_observer_drops_the_points_left_with_fewer_than_two() {
        let points = vec![point(&[1, 2]), point(&[1, 2, 3]), point(&[2, 3])];
        let gone: HashSet<ImageId> = [ImageId(1)].into();
        let left = without_observers(points, &gone);
        assert_eq!(left, vec![point(&[2, 3]), point(&[2, 3])]);
    }
}
