//! The engine's model as `COLMAP` writes it in text (`cameras.txt`, `images.txt`,
//! `points3D.txt`), read without trusting it: every file is bounded in size, every line
//! parsed or refused with its file and line, counts bounded, and nothing panics. What the
//! numbers mean (finite, plausible, near the GPS) is `validate.rs`'s question.

use std::collections::HashMap;
use std::path::Path;

use crate::SfmError;
use crate::pose::Pose;

/// The largest model file read (the 2-D observations make `images.txt` the largest: about
/// 0.3 MB per 2048 px picture).
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// The most images, cameras or points a model may have.
const MAX_ITEMS: usize = 20_000_000;

/// A camera model of the engine's, with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Intrinsics {
    /// `RADIAL`: focal length, principal point, two radial distortion terms (pixels).
    Radial {
        /// Focal length (pixels).
        focal: f64,
        /// Principal point (pixels).
        principal: [f64; 2],
        /// Radial distortion of normalised coordinates: `1 + k1 r² + k2 r⁴`.
        k1: f64,
        /// See `k1`.
        k2: f64,
    },
    /// `SIMPLE_RADIAL`: one radial term.
    SimpleRadial {
        /// Focal length (pixels).
        focal: f64,
        /// Principal point (pixels).
        principal: [f64; 2],
        /// Radial distortion.
        k: f64,
    },
    /// `EQUIRECTANGULAR`: a 360° panorama (no parameters to refine).
    Equirectangular,
}

/// One camera of the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Camera {
    /// Its ID in the model.
    pub id: u32,
    /// The picture's width (pixels).
    pub width: u32,
    /// The picture's height (pixels).
    pub height: u32,
    /// Model and parameters.
    pub intrinsics: Intrinsics,
}

/// One registered image.
#[derive(Debug, Clone, PartialEq)]
pub struct Shot {
    /// Its ID in the model.
    pub id: u32,
    /// The file name the driver gave it.
    pub name: String,
    /// World to camera.
    pub pose: Pose,
    /// The camera's ID.
    pub camera: u32,
}

/// One triangulated point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// World coordinates.
    pub xyz: [f64; 3],
    /// Colour.
    pub color: [u8; 3],
    /// Mean reprojection error (pixels).
    pub error: f64,
    /// The images that observe it (model IDs, each once).
    pub observers: Vec<u32>,
}

/// A model: cameras, registered images and points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    /// By ID.
    pub cameras: HashMap<u32, Camera>,
    /// In file order.
    pub shots: Vec<Shot>,
    /// In file order.
    pub points: Vec<Point>,
}

impl Model {
    /// Reads the three text files of a model directory.
    pub fn read(dir: &Path) -> Result<Self, SfmError> {
        let cameras = read_bounded(&dir.join("cameras.txt"))?;
        let images = read_bounded(&dir.join("images.txt"))?;
        let points = read_bounded(&dir.join("points3D.txt"))?;
        Self::parse(&cameras, &images, &points)
    }

    /// Parses the three files' text.
    pub fn parse(cameras: &str, images: &str, points: &str) -> Result<Self, SfmError> {
        let mut model = Model::default();
        for (number, line) in data_lines(cameras) {
            let camera = parse_camera(line).map_err(|reason| at("cameras.txt", number, &reason))?;
            if model.cameras.len() >= MAX_ITEMS {
                return Err(at("cameras.txt", number, "too many cameras"));
            }
            model.cameras.insert(camera.id, camera);
        }
        parse_images(images, &mut model)?;
        for (number, line) in data_lines(points) {
            if model.points.len() >= MAX_ITEMS {
                return Err(at("points3D.txt", number, "too many points"));
            }
            let point = parse_point(line).map_err(|reason| at("points3D.txt", number, &reason))?;
            model.points.push(point);
        }
        Ok(model)
    }
}

fn read_bounded(path: &Path) -> Result<String, SfmError> {
    let unreadable =
        |error: std::io::Error| SfmError::Model(format!("{}: {error}", path.display()));
    let length = std::fs::metadata(path).map_err(unreadable)?.len();
    if length > MAX_FILE_BYTES {
        return Err(SfmError::Model(format!(
            "{}: {length} bytes, more than {MAX_FILE_BYTES}",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    String::from_utf8(bytes)
        .map_err(|_| SfmError::Model(format!("{}: not UTF-8 text", path.display())))
}

fn at(file: &str, line: usize, reason: &str) -> SfmError {
    SfmError::Model(format!("{file} line {line}: {reason}"))
}

/// Lines that are not comments, with their 1-based numbers; blank lines are kept (an image
/// with no observations has a blank second line).
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.starts_with('#'))
}

fn number<T: std::str::FromStr>(field: Option<&str>, what: &str) -> Result<T, String> {
    let field = field.ok_or_else(|| format!("no {what}"))?;
    field
        .parse()
        .map_err(|_| format!("{what} {field:?} is not a number"))
}

fn parse_camera(line: &str) -> Result<Camera, String> {
    let mut fields = line.split_ascii_whitespace();
    let id = number(fields.next(), "camera id")?;
    let model = fields.next().ok_or("no camera model")?;
    let width = number(fields.next(), "width")?;
    let height = number(fields.next(), "height")?;
    let params = fields
        .map(|field| number::<f64>(Some(field), "parameter"))
        .collect::<Result<Vec<f64>, String>>()?;
    let intrinsics = match (model, params.as_slice()) {
        ("RADIAL", &[focal, cx, cy, k1, k2]) => Intrinsics::Radial {
            focal,
            principal: [cx, cy],
            k1,
            k2,
        },
        ("SIMPLE_RADIAL", &[focal, cx, cy, k]) => Intrinsics::SimpleRadial {
            focal,
            principal: [cx, cy],
            k,
        },
        ("EQUIRECTANGULAR", _) => Intrinsics::Equirectangular,
        (model, params) => {
            return Err(format!(
                "camera model {model} with {} parameters is not one the driver asks for",
                params.len()
            ));
        }
    };
    Ok(Camera {
        id,
        width,
        height,
        intrinsics,
    })
}

/// `images.txt`: a header line per image, then a line of its 2-D observations (ignored: the
/// points' tracks say which image sees which point).
fn parse_images(text: &str, model: &mut Model) -> Result<(), SfmError> {
    let mut lines = data_lines(text);
    while let Some((number, line)) = lines.next() {
        if line.is_empty() {
            continue;
        }
        if model.shots.len() >= MAX_ITEMS {
            return Err(at("images.txt", number, "too many images"));
        }
        let shot = parse_shot(line).map_err(|reason| at("images.txt", number, &reason))?;
        model.shots.push(shot);
        // The observations' line (may be missing at the end of the file).
        lines.next();
    }
    Ok(())
}

fn parse_shot(line: &str) -> Result<Shot, String> {
    let mut fields = line.split_ascii_whitespace();
    let id = number(fields.next(), "image id")?;
    let mut quaternion = [0.0; 4];
    for (value, what) in quaternion.iter_mut().zip(["qw", "qx", "qy", "qz"]) {
        *value = number(fields.next(), what)?;
    }
    let mut translation = [0.0; 3];
    for (value, what) in translation.iter_mut().zip(["tx", "ty", "tz"]) {
        *value = number(fields.next(), what)?;
    }
    let camera = number(fields.next(), "camera id")?;
    let name = fields.next().ok_or("no image name")?.to_owned();
    if fields.next().is_some() {
        return Err(String::from("more fields than an image header has"));
    }
    let norm = quaternion
        .iter()
        .map(|value| value * value)
        .sum::<f64>()
        .sqrt();
    if !norm.is_finite() || (norm - 1.0).abs() > 1e-3 {
        return Err(format!(
            "the rotation is not a unit quaternion (norm {norm})"
        ));
    }
    Ok(Shot {
        id,
        name,
        pose: Pose::from_quaternion(quaternion, translation),
        camera,
    })
}

fn parse_point(line: &str) -> Result<Point, String> {
    let mut fields = line.split_ascii_whitespace();
    let _id: u64 = number(fields.next(), "point id")?;
    let mut xyz = [0.0; 3];
    for (value, what) in xyz.iter_mut().zip(["x", "y", "z"]) {
        *value = number(fields.next(), what)?;
    }
    let mut color = [0u8; 3];
    for (value, what) in color.iter_mut().zip(["red", "green", "blue"]) {
        *value = number(fields.next(), what)?;
    }
    let error = number(fields.next(), "error")?;
    let rest: Vec<&str> = fields.collect();
    if !rest.len().is_multiple_of(2) {
        return Err(String::from("a track element without its observation"));
    }
    let mut observers: Vec<u32> = rest
        .chunks_exact(2)
        .map(|pair| number(Some(pair[0]), "track image id"))
        .collect::<Result<_, _>>()?;
    observers.sort_unstable();
    observers.dedup();
    Ok(Point {
        xyz,
        color,
        error,
        observers,
    })
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use proptest::prelude::*;

    use super::*;

    const CAMERAS: &str =
        "# Camera list\n1 RADIAL 1024 768 763.9 512 384 -0.02 0.001\n2 EQUIRECTANGULAR 2048 1024\n";
    const IMAGES: &str = "# Image list\n#   POINTS2D\n\
        1 1 0 0 0 0.5 0.25 -1 1 00000.jpg\n\
        10.5 3.25 7 20 30 -1\n\
        2 0.7071067811865476 0 0.7071067811865476 0 1 2 3 2 00001.jpg\n\
        \n";
    const POINTS: &str = "# 3D point list\n7 1.5 -2 30.25 69 75 89 0.4 1 0 2 5 1 3\n";

    #[test]
    fn a_model_reads_back_as_written() {
        let model = Model::parse(CAMERAS, IMAGES, POINTS).unwrap();
        assert_eq!(model.cameras.len(), 2);
        assert_eq!(
            model.cameras[&1].intrinsics,
            Intrinsics::Radial {
                focal: 763.9,
                principal: [512.0, 384.0],
                k1: -0.02,
                k2: 0.001
            }
        );
        assert_eq!(model.cameras[&2].intrinsics, Intrinsics::Equirectangular);
        assert_eq!(model.shots.len(), 2);
        assert_eq!(model.shots[0].name, "00000.jpg");
        assert_eq!(model.shots[0].pose.translation, [0.5, 0.25, -1.0]);
        assert_eq!(model.shots[1].camera, 2);
        assert_eq!(model.points.len(), 1);
        assert_eq!(model.points[0].observers, [1, 2]);
        assert_eq!(model.points[0].color, [69, 75, 89]);
    }

    #[test]
    fn broken_lines_are_refused_with_their_place() {
        let error = Model::parse(CAMERAS, "1 1 0 0 0 nan? 0 0 1 a.jpg\n\n", "").unwrap_err();
        assert!(error.to_string().contains("images.txt line 1"), "{error}");
        let error = Model::parse(CAMERAS, "1 2 0 0 0 0 0 0 1 a.jpg\n\n", "").unwrap_err();
        assert!(error.to_string().contains("unit quaternion"), "{error}");
        let error = Model::parse("1 OPENCV 10 10 1 2 3 4 5 6 7 8\n", "", "").unwrap_err();
        assert!(error.to_string().contains("OPENCV"), "{error}");
        let error = Model::parse(CAMERAS, IMAGES, "7 1 2 3 300 0 0 0.1 1 0\n").unwrap_err();
        assert!(error.to_string().contains("points3D.txt line 1"), "{error}");
        let error = Model::parse(CAMERAS, IMAGES, "7 1 2 3 3 0 0 0.1 1\n").unwrap_err();
        assert!(error.to_string().contains("track"), "{error}");
    }

    proptest! {
        #[test]
        fn hostile_text_never_panics(
            cameras in "[ -~\n]{0,300}", images in "[ -~\n]{0,300}", points in "[0-9 .e\n-]{0,300}",
        ) {
            let _ = Model::parse(&cameras, &images, &points);
        }

        #[test]
        fn mutated_models_never_panic(position in 0usize..300, byte in any::<u8>()) {
            let mut images = IMAGES.as_bytes().to_vec();
            if position < images.len() {
                images[position] = byte;
            }
            let images = String::from_utf8_lossy(&images);
            let _ = Model::parse(CAMERAS, &images, POINTS);
        }
    }
}
