//! Images (spec 2.1).

use std::fmt;
use std::str::FromStr;

use crate::{CreatorId, ImageId, MediaId, OrganizationId, Point, SequenceId, Timestamp};

/// The projection of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CameraType {
    /// A pinhole camera with radial distortion `[focal, k1, k2]`.
    Perspective,
    /// A fisheye lens.
    Fisheye,
    /// A 360 degree panorama; `spherical` is accepted as a synonym.
    Equirectangular,
}

/// A camera type name that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown camera type {0:?}: expected perspective, fisheye, equirectangular or spherical")]
pub struct ParseCameraTypeError(pub String);

impl CameraType {
    /// The canonical name sent to clients.
    pub fn as_str(self) -> &'static str {
        match self {
            CameraType::Perspective => "perspective",
            CameraType::Fisheye => "fisheye",
            CameraType::Equirectangular => "equirectangular",
        }
    }
}

impl fmt::Display for CameraType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CameraType {
    type Err = ParseCameraTypeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "perspective" => Ok(CameraType::Perspective),
            "fisheye" => Ok(CameraType::Fisheye),
            "equirectangular" | "spherical" => Ok(CameraType::Equirectangular),
            other => Err(ParseCameraTypeError(other.to_owned())),
        }
    }
}

/// One street-level image and its metadata.
///
/// Optional fields are `None` when the value is unknown; they are then omitted from responses.
/// Thumbnail URLs are not stored: they are derived (and signed) from the ID when projected.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// The image ID.
    pub id: ImageId,
    /// Original altitude from the camera Exif, metres above sea level.
    pub altitude: Option<f64>,
    /// Scale of the structure-from-motion reconstruction around the image.
    pub atomic_scale: Option<f64>,
    /// Camera intrinsics: focal length (normalised by the larger image side), k1, k2.
    pub camera_parameters: Option<Vec<f64>>,
    /// Projection type.
    pub camera_type: Option<CameraType>,
    /// Capture time.
    pub captured_at: Timestamp,
    /// Original compass angle in degrees, 0 to 360.
    pub compass_angle: Option<f64>,
    /// Altitude after processing, metres above sea level.
    pub computed_altitude: Option<f64>,
    /// Compass angle after processing, degrees.
    pub computed_compass_angle: Option<f64>,
    /// Location after processing.
    pub computed_geometry: Option<Point>,
    /// Corrected orientation: a world-to-camera rotation as an axis-angle vector (radians).
    pub computed_rotation: Option<[f64; 3]>,
    /// The user who uploaded the image.
    pub creator: CreatorId,
    /// Exif orientation tag, 1 (normal) to 8.
    pub exif_orientation: Option<u8>,
    /// Original location.
    pub geometry: Point,
    /// Height of the original in pixels.
    pub height: u32,
    /// Width of the original in pixels.
    pub width: u32,
    /// Whether the image is a 360 degree panorama.
    pub is_pano: bool,
    /// Camera manufacturer.
    pub make: Option<String>,
    /// Camera model.
    pub model: Option<String>,
    /// ID of the connected component of images aligned together.
    pub merge_cc: Option<u64>,
    /// The mesh of the image, if one was reconstructed.
    pub mesh: Option<MediaId>,
    /// The sequence the image belongs to.
    pub sequence: SequenceId,
    /// The point cloud around the image, if one was reconstructed.
    pub sfm_cluster: Option<MediaId>,
    /// Quality estimate from 0 (worst) to 1 (best).
    pub quality_score: Option<f64>,
    /// The organization the image was contributed to.
    pub organization: Option<OrganizationId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spherical_is_equirectangular() {
        assert_eq!("spherical".parse(), Ok(CameraType::Equirectangular));
        assert_eq!(CameraType::Equirectangular.to_string(), "equirectangular");
        assert_eq!(
            "pinhole".parse::<CameraType>(),
            Err(ParseCameraTypeError("pinhole".to_owned()))
        );
    }
}
