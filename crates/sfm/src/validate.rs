//! What of an engine's model is believed: a model is refused whole when a number is not
//! finite, a camera is implausible, its points do not reproject, its scale is outside what
//! the viewer accepts or its cameras are not where the GPS says (the median distance); an
//! image is refused alone when it is far from its own GPS position; a point when it
//! reprojects badly or lies far from every camera. What is believed becomes a [`Piece`]: an
//! atomic reconstruction of a part of a sequence in the job's east-north-up frame.

use std::collections::HashMap;

use crate::SfmError;
use crate::colmap::{Intrinsics, Model};
use crate::pose::Pose;

/// Fewer registered images than this are no reconstruction.
pub const MIN_REGISTERED: usize = 3;
/// A model whose cameras are further than this from their GPS positions (the median,
/// horizontally) is refused (metres).
pub const MAX_MEDIAN_GPS_METRES: f64 = 10.0;
/// An image further from its GPS position than this, or than [`OUTLIER_FACTOR`] times the
/// model's median, whichever is more, is refused (metres).
pub const MIN_OUTLIER_GPS_METRES: f64 = 20.0;
/// See [`MIN_OUTLIER_GPS_METRES`].
pub const OUTLIER_FACTOR: f64 = 4.0;
/// An image whose height differs from its GPS altitude by more is refused (metres).
pub const MAX_ALTITUDE_METRES: f64 = 100.0;
/// Points reprojecting worse than this are left out (pixels).
pub const MAX_POINT_ERROR: f64 = 4.0;
/// A model whose points' median reprojection error is worse is refused (pixels).
pub const MAX_MEDIAN_ERROR: f64 = 2.0;
/// Points further than this from every camera of the model are left out (metres).
pub const MAX_POINT_DISTANCE: f64 = 1000.0;
/// Radial distortion terms beyond this are not a plausible lens.
pub const MAX_DISTORTION: f64 = 1.0;
/// A model whose cameras are tilted more than this from level (the median, degrees) is
/// refused: street cameras are held about level, and the driver levels what it aligns.
pub const MAX_MEDIAN_TILT_DEGREES: f64 = 25.0;
/// The scales the web viewer accepts (it ignores the mesh of an image outside them).
pub const SCALE_RANGE: (f64, f64) = (0.01, 50.0);

/// What the engine was given for one image: its name, its GPS position in the job's frame
/// and the size of the picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    /// The file name the driver was given.
    pub name: String,
    /// East, north, up of its GPS position.
    pub gps: [f64; 3],
    /// Whether the GPS gave an altitude.
    pub has_altitude: bool,
}

/// A camera as the piece keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lens {
    /// Focal length over the picture's larger side, and the radial terms.
    Perspective {
        /// Focal length over the larger side.
        focal: f64,
        /// Radial distortion.
        k1: f64,
        /// Radial distortion.
        k2: f64,
    },
    /// A 360° panorama.
    Spherical,
}

/// A registered image of a piece.
#[derive(Debug, Clone, PartialEq)]
pub struct PieceShot {
    /// The image's position in what the engine was given.
    pub image: usize,
    /// World (the job's frame, metres) to camera.
    pub pose: Pose,
    /// Its lens.
    pub lens: Lens,
    /// Horizontal distance to its GPS position (metres).
    pub gps_distance: f64,
}

/// A point of a piece.
#[derive(Debug, Clone, PartialEq)]
pub struct PiecePoint {
    /// East, north, up in the job's frame.
    pub xyz: [f64; 3],
    /// Colour.
    pub color: [u8; 3],
    /// The images (positions in what the engine was given) observing it.
    pub observers: Vec<usize>,
}

/// A believed atomic reconstruction.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// Its registered images, in the model's order.
    pub shots: Vec<PieceShot>,
    /// Its points.
    pub points: Vec<PiecePoint>,
    /// The viewer's atomic scale: the engine's units per metre.
    pub scale: f64,
    /// Images the model registered and that were refused, with the reason.
    pub refused: Vec<(usize, String)>,
    /// The points' median reprojection error (pixels).
    pub median_error: f64,
    /// The median horizontal distance of the cameras to their GPS positions (metres).
    pub median_gps_distance: f64,
}

#[allow(clippy::too_many_lines)] // the checks in the order they refuse, each short
/// Checks `model`, aligned by a similarity of scale `alignment_scale` (metres per engine
/// unit), against what the engine was given.
pub fn validate(model: &Model, alignment_scale: f64, given: &[Given]) -> Result<Piece, SfmError> {
    let refuse = |reason: String| Err(SfmError::Refused(reason));
    if !(alignment_scale.is_finite() && alignment_scale > 0.0) {
        return refuse(format!(
            "the alignment's scale {alignment_scale} is not a positive number"
        ));
    }
    let scale = 1.0 / alignment_scale;
    if !(scale > SCALE_RANGE.0 && scale < SCALE_RANGE.1) {
        return refuse(format!(
            "its scale {scale} is outside what the viewer accepts ({} to {})",
            SCALE_RANGE.0, SCALE_RANGE.1
        ));
    }
    let by_name: HashMap<&str, usize> = given
        .iter()
        .enumerate()
        .map(|(index, image)| (image.name.as_str(), index))
        .collect();
    let mut lenses = HashMap::new();
    for camera in model.cameras.values() {
        lenses.insert(camera.id, lens_of(camera)?);
    }
    let mut shots = Vec::with_capacity(model.shots.len());
    let mut model_ids = HashMap::new();
    for shot in &model.shots {
        let Some(&image) = by_name.get(shot.name.as_str()) else {
            return refuse(format!(
                "it registered {:?}, which it was not given",
                shot.name
            ));
        };
        let Some(&lens) = lenses.get(&shot.camera) else {
            return refuse(format!(
                "image {:?} names no camera of the model",
                shot.name
            ));
        };
        let finite = shot
            .pose
            .rotation
            .iter()
            .flatten()
            .all(|value| value.is_finite())
            && shot.pose.translation.iter().all(|value| value.is_finite());
        if !finite {
            return refuse(format!("the pose of {:?} is not a number", shot.name));
        }
        let centre = shot.pose.centre();
        let gps = given[image].gps;
        let gps_distance = (centre[0] - gps[0]).hypot(centre[1] - gps[1]);
        model_ids.insert(shot.id, shots.len());
        shots.push(PieceShot {
            image,
            pose: shot.pose,
            lens,
            gps_distance,
        });
    }
    if shots.len() < MIN_REGISTERED {
        return refuse(format!(
            "it registered {} images, fewer than {MIN_REGISTERED}",
            shots.len()
        ));
    }
    let median_gps_distance = median(shots.iter().map(|shot| shot.gps_distance));
    if median_gps_distance > MAX_MEDIAN_GPS_METRES {
        return refuse(format!(
            "its cameras are a median {median_gps_distance:.1} m from their GPS positions, \
             more than {MAX_MEDIAN_GPS_METRES} m"
        ));
    }
    let median_tilt = median(shots.iter().map(|shot| {
        // The camera's up (-y) in the world; its angle from the vertical.
        let up = shot.pose.direction_to_world([0.0, -1.0, 0.0]);
        up[2].clamp(-1.0, 1.0).acos().to_degrees()
    }));
    if median_tilt > MAX_MEDIAN_TILT_DEGREES {
        return refuse(format!(
            "its cameras are tilted a median {median_tilt:.0}° from level, more than \
             {MAX_MEDIAN_TILT_DEGREES}°"
        ));
    }
    let outlier = MIN_OUTLIER_GPS_METRES.max(OUTLIER_FACTOR * median_gps_distance);
    let mut refused = Vec::new();
    let mut kept = vec![true; shots.len()];
    for (index, shot) in shots.iter().enumerate() {
        let given = &given[shot.image];
        let height = shot.pose.centre()[2] - given.gps[2];
        let reason = if shot.gps_distance > outlier {
            Some(format!(
                "{:.1} m from its GPS position (more than {outlier:.1} m)",
                shot.gps_distance
            ))
        } else if given.has_altitude && height.abs() > MAX_ALTITUDE_METRES {
            Some(format!("{height:.1} m from its GPS altitude"))
        } else {
            None
        };
        if let Some(reason) = reason {
            kept[index] = false;
            refused.push((shot.image, reason));
        }
    }
    let errors: Vec<f64> = model.points.iter().map(|point| point.error).collect();
    if errors.iter().any(|error| !error.is_finite()) {
        return refuse(String::from("a point's reprojection error is not a number"));
    }
    let median_error = median(errors.iter().copied());
    if median_error > MAX_MEDIAN_ERROR {
        return refuse(format!(
            "its points reproject a median {median_error:.2} px off, more than {MAX_MEDIAN_ERROR} px"
        ));
    }
    let centres: Vec<[f64; 3]> = shots.iter().map(|shot| shot.pose.centre()).collect();
    let mut points = Vec::with_capacity(model.points.len());
    for point in &model.points {
        if !point.xyz.iter().all(|value| value.is_finite()) {
            return refuse(String::from("a point's position is not a number"));
        }
        if point.error > MAX_POINT_ERROR {
            continue;
        }
        let near = centres.iter().any(|centre| {
            let d = [0, 1, 2].map(|axis| point.xyz[axis] - centre[axis]);
            (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt() <= MAX_POINT_DISTANCE
        });
        if !near {
            continue;
        }
        let observers: Vec<usize> = point
            .observers
            .iter()
            .filter_map(|id| model_ids.get(id).copied())
            .filter(|&shot| kept[shot])
            .map(|shot| shots[shot].image)
            .collect();
        if observers.len() >= crate::cluster::MIN_OBSERVERS {
            points.push(PiecePoint {
                xyz: point.xyz,
                color: point.color,
                observers,
            });
        }
    }
    let shots: Vec<PieceShot> = shots
        .into_iter()
        .zip(kept)
        .filter_map(|(shot, kept)| kept.then_some(shot))
        .collect();
    if shots.len() < MIN_REGISTERED {
        return refuse(format!(
            "{} of its images were refused, leaving fewer than {MIN_REGISTERED}",
            refused.len()
        ));
    }
    Ok(Piece {
        shots,
        points,
        scale,
        refused,
        median_error,
        median_gps_distance,
    })
}

fn lens_of(camera: &crate::colmap::Camera) -> Result<Lens, SfmError> {
    let larger = f64::from(camera.width.max(camera.height));
    if camera.width == 0 || camera.height == 0 {
        return Err(SfmError::Refused(format!(
            "camera {} has no size",
            camera.id
        )));
    }
    let (focal, k1, k2) = match camera.intrinsics {
        Intrinsics::Radial { focal, k1, k2, .. } => (focal, k1, k2),
        Intrinsics::SimpleRadial { focal, k, .. } => (focal, k, 0.0),
        Intrinsics::Equirectangular => return Ok(Lens::Spherical),
    };
    let focal = focal / larger;
    if !(focal.is_finite() && (0.1..=10.0).contains(&focal)) {
        return Err(SfmError::Refused(format!(
            "camera {} has a focal length of {focal} times its size",
            camera.id
        )));
    }
    if !(k1.is_finite() && k2.is_finite()) || k1.abs() > MAX_DISTORTION || k2.abs() > MAX_DISTORTION
    {
        return Err(SfmError::Refused(format!(
            "camera {} has an implausible distortion ({k1}, {k2})",
            camera.id
        )));
    }
    Ok(Lens::Perspective { focal, k1, k2 })
}

/// The median of some numbers (0 for none).
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        f64::midpoint(values[middle - 1], values[middle])
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::colmap::Model;

    /// A model of `count` level cameras 5 m apart walking north, looking north, with points
    /// 10 m ahead of each; translation written with `translation_of`.
    fn model_text(
        count: usize,
        translation_of: &dyn Fn(usize, [f64; 3]) -> String,
    ) -> (String, String, String) {
        let cameras = String::from("1 RADIAL 1024 768 990 512 384 -0.01 0.001\n");
        let mut images = String::new();
        let mut points = String::new();
        // World to camera of a level camera looking north: rows x = east, y = -up, z = north.
        // As a quaternion: a rotation of -90° about x.
        let half = std::f64::consts::FRAC_1_SQRT_2;
        for index in 0..count {
            let centre = [0.0, 5.0 * f64::from(u32::try_from(index).unwrap()), 0.0];
            // t = -R c; R c = [c.x, -c.z, c.y].
            let t = [-centre[0], centre[2], -centre[1]];
            writeln!(
                images,
                "{} {half} {half} 0 0 {} 1 {index:05}.jpg\n",
                index + 1,
                translation_of(index, t)
            )
            .unwrap();
            writeln!(
                points,
                "{} 1 {} 2 10 20 30 0.5 {} 0 {} 0",
                index + 1,
                centre[1] + 10.0,
                index + 1,
                if index + 2 <= count { index + 2 } else { index }
            )
            .unwrap();
        }
        (cameras, images, points)
    }

    fn given(count: usize) -> Vec<Given> {
        (0..count)
            .map(|index| Given {
                name: format!("{index:05}.jpg"),
                gps: [0.5, 5.0 * f64::from(u32::try_from(index).unwrap()), 0.0],
                has_altitude: true,
            })
            .collect()
    }

    fn plain(_: usize, t: [f64; 3]) -> String {
        format!("{} {} {}", t[0], t[1], t[2])
    }

    #[test]
    fn a_good_model_becomes_a_piece_looking_north() {
        let (cameras, images, points) = model_text(5, &plain);
        let model = Model::parse(&cameras, &images, &points).unwrap();
        let piece = validate(&model, 16.0, &given(5)).unwrap();
        assert_eq!(piece.shots.len(), 5);
        assert!((piece.scale - 1.0 / 16.0).abs() < 1e-12);
        for shot in &piece.shots {
            assert!(crate::pose::angle_between(shot.pose.compass(), 0.0) < 1e-6);
            assert!((shot.gps_distance - 0.5).abs() < 1e-9);
        }
        assert!(!piece.points.is_empty());
        assert!(piece.refused.is_empty());
    }

    #[test]
    fn a_pose_that_is_not_a_number_refuses_the_model() {
        let (cameras, images, points) = model_text(5, &|index, t| {
            if index == 2 {
                String::from("nan 0 0")
            } else {
                plain(index, t)
            }
        });
        let model = Model::parse(&cameras, &images, &points).unwrap();
        let error = validate(&model, 1.0, &given(5)).unwrap_err();
        assert!(error.to_string().contains("not a number"), "{error}");
    }

    #[test]
    fn a_wild_image_is_refused_alone_and_a_wild_model_whole() {
        let (cameras, images, points) = model_text(6, &|index, t| {
            if index == 3 {
                format!("{} {} {}", t[0] - 5000.0, t[1], t[2])
            } else {
                plain(index, t)
            }
        });
        let model = Model::parse(&cameras, &images, &points).unwrap();
        let piece = validate(&model, 1.0, &given(6)).unwrap();
        assert_eq!(piece.shots.len(), 5);
        assert_eq!(piece.refused.len(), 1);
        assert_eq!(piece.refused[0].0, 3);
        assert!(
            piece
                .points
                .iter()
                .all(|point| !point.observers.contains(&3))
        );
        let (cameras, images, points) =
            model_text(6, &|_, t| format!("{} {} {}", t[0] - 300.0, t[1], t[2]));
        let model = Model::parse(&cameras, &images, &points).unwrap();
        let error = validate(&model, 1.0, &given(6)).unwrap_err();
        assert!(
            error.to_string().contains("from their GPS positions"),
            "{error}"
        );
    }

    #[test]
    fn implausible_cameras_and_scales_are_refused() {
        let (_, images, points) = model_text(5, &plain);
        for (cameras, needle) in [
            ("1 RADIAL 1024 768 990 512 384 3.5 0\n", "distortion"),
            ("1 RADIAL 1024 768 1e9 512 384 0 0\n", "focal"),
            ("1 RADIAL 1024 768 nan 512 384 0 0\n", "focal"),
        ] {
            let model = Model::parse(cameras, &images, &points).unwrap();
            let error = validate(&model, 1.0, &given(5)).unwrap_err();
            assert!(error.to_string().contains(needle), "{error}");
        }
        let (cameras, images, points) = model_text(5, &plain);
        let model = Model::parse(&cameras, &images, &points).unwrap();
        for scale in [f64::NAN, 0.0, -1.0, 1000.0, 0.001] {
            assert!(validate(&model, scale, &given(5)).is_err(), "{scale}");
        }
    }

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
        assert_eq!(median(std::iter::empty()), 0.0);
    }
}
