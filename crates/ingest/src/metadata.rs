//! What one uploaded JPEG says about itself: position, direction, capture time, camera,
//! orientation, stored size and projection, from the uploader's JSON, Exif, XMP and the frame
//! header.

use streetlevel_model::{CameraType, Timestamp};

use crate::IngestError;
use crate::capture_time::{self, TimeSource};
use crate::description::UploaderDescription;
use crate::exif_tags::ExifTags;
use crate::jpeg::JpegFile;
use crate::orientation::upright_size;
use crate::xmp;

/// The metadata of one image, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    /// Degrees north, in `[-90, 90]`.
    pub latitude: f64,
    /// Degrees east, in `[-180, 180]`.
    pub longitude: f64,
    /// Metres above sea level (negative below).
    pub altitude: Option<f64>,
    /// Degrees clockwise from north, in `[0, 360)`.
    pub compass_angle: Option<f64>,
    /// The capture time in UTC.
    pub captured_at: Timestamp,
    /// Where the capture time came from.
    pub time_source: TimeSource,
    /// The camera's maker.
    pub make: Option<String>,
    /// The camera's model.
    pub model: Option<String>,
    /// The uploader's camera identifier (`MAPCameraUUID`).
    pub camera_uuid: Option<String>,
    /// Exif orientation, 1 to 8 (1 when the file gives none): how the stored pixels must be
    /// turned to be upright.
    pub orientation: u8,
    /// Stored width in pixels, from the frame header (not from Exif, which may lie).
    pub width: u32,
    /// Stored height in pixels, from the frame header.
    pub height: u32,
    /// Whether XMP marks the image as an equirectangular panorama.
    pub is_pano: bool,
    /// [`CameraType::Equirectangular`] for panoramas, else [`CameraType::Perspective`].
    pub camera_type: CameraType,
    /// Members of the description JSON that could not be read, and why, one line each; their
    /// values came from Exif where it has them.
    pub ignored: Vec<String>,
}

impl Metadata {
    /// The size once upright: orientations 5 to 8 turn the image by a quarter, swapping width
    /// and height.
    pub fn upright_size(&self) -> (u32, u32) {
        upright_size(self.width, self.height, self.orientation)
    }
}

/// How the stored pixels of `jpeg` turn upright, 1 to 8, as [`read_metadata`] reads it (the
/// uploader's JSON, else Exif, else 1), from any JPEG, with or without a position or a time:
/// what a re-blur and the server's tiles of a published picture go by.
pub fn read_orientation(jpeg: &[u8]) -> u8 {
    let Ok(file) = JpegFile::parse(jpeg) else {
        return 1;
    };
    let Some(Ok(exif)) = file.exif().map(ExifTags::read) else {
        return 1;
    };
    exif.description()
        .and_then(UploaderDescription::parse)
        .and_then(|description| description.orientation)
        .or_else(|| exif.orientation())
        .unwrap_or(1)
}

/// Reads the metadata of one JPEG. The bytes are only read.
///
/// Sources, per field, first found wins:
/// - the JSON in Exif `ImageDescription` (`MAPLatitude`, `MAPLongitude`, `MAPAltitude`,
///   `MAPCompassHeading.TrueHeading` (or `MagneticHeading`), `MAPCaptureTime` in UTC,
///   `MAPDeviceMake`, `MAPDeviceModel`, `MAPCameraUUID`, `MAPOrientation`), read leniently:
///   numbers may be strings, unknown members are ignored, and a member that cannot be read is
///   left out (Exif gives that value) and named in [`Metadata::ignored`]. A description that
///   does not start with `{` is a camera's text and is ignored;
/// - Exif, from the first Exif segment only: `GPSLatitude`/`GPSLongitude` with their refs,
///   `GPSAltitude`/`GPSAltitudeRef`, `GPSImgDirection`, the capture time as the uploader
///   chooses it ([`TimeSource`]: `GPSDateStamp` with `GPSTimeStamp`, else `DateTimeOriginal`,
///   `DateTimeDigitized` or `DateTime` with its `SubSecTime*` and `OffsetTime*` tags, **taken
///   as UTC without an offset**), then `Make`, `Model`, `Orientation`;
/// - XMP `GPano:ProjectionType="equirectangular"` (attribute or element) for panoramas. A 2:1
///   image without it is a perspective image: the uploader keeps XMP, so XMP is the signal;
/// - the frame header (SOF) for the stored size.
///
/// A file is refused only when no source gives a position or a capture time, or Exif gives an
/// unusable position (out of range, not a number). The compass angle is normalised to
/// `[0, 360)`. Optional Exif values that are not finite numbers (altitude, direction, a date
/// such as `0000:00:00 00:00:00`) are skipped rather than refused.
pub fn read_metadata(jpeg: &[u8]) -> Result<Metadata, IngestError> {
    let file = JpegFile::parse(jpeg)?;
    let exif = file.exif().map(ExifTags::read).transpose()?;
    let description = exif
        .as_ref()
        .and_then(ExifTags::description)
        .and_then(UploaderDescription::parse)
        .unwrap_or_default();
    // A required value missing from damaged Exif is reported as the damage: the value may
    // have been in the part that could not be read.
    let missing = |error: IngestError| match exif.as_ref().and_then(ExifTags::damage) {
        Some(damage) => IngestError::InvalidExif(damage.to_owned()),
        None => error,
    };

    let (latitude, longitude) = match description.position {
        Some(position) => position,
        None => match &exif {
            Some(exif) => exif
                .position()?
                .ok_or_else(|| missing(IngestError::NoGps))?,
            None => return Err(IngestError::NoGps),
        },
    };
    check_position(latitude, longitude)?;

    let altitude = description
        .altitude
        .or_else(|| exif.as_ref().and_then(ExifTags::altitude));
    let compass_angle = description.heading.or_else(|| {
        exif.as_ref()
            .and_then(ExifTags::direction)
            .map(normalise_angle)
    });
    let (captured_at, time_source) = match description.capture_time {
        Some(captured_at) => (captured_at, TimeSource::Description),
        None => exif
            .as_ref()
            .and_then(|exif| capture_time::choose(exif.gps_time(), exif.camera_time().as_ref()))
            .ok_or_else(|| missing(IngestError::NoCaptureTime))?,
    };
    let orientation = description
        .orientation
        .or_else(|| exif.as_ref().and_then(ExifTags::orientation))
        .unwrap_or(1);
    let is_pano = file.xmp().is_some_and(xmp::is_equirectangular);

    Ok(Metadata {
        latitude,
        longitude,
        altitude,
        compass_angle,
        captured_at,
        time_source,
        make: non_empty(description.device_make).or_else(|| exif.as_ref()?.make()),
        model: non_empty(description.device_model).or_else(|| exif.as_ref()?.model()),
        camera_uuid: non_empty(description.camera_uuid),
        orientation,
        width: file.frame.width,
        height: file.frame.height,
        is_pano,
        camera_type: if is_pano {
            CameraType::Equirectangular
        } else {
            CameraType::Perspective
        },
        ignored: description.ignored,
    })
}

fn check_position(latitude: f64, longitude: f64) -> Result<(), IngestError> {
    if !(-90.0..=90.0).contains(&latitude) {
        return Err(IngestError::InvalidMetadata(format!(
            "latitude {latitude} is not in [-90, 90]"
        )));
    }
    if !(-180.0..=180.0).contains(&longitude) {
        return Err(IngestError::InvalidMetadata(format!(
            "longitude {longitude} is not in [-180, 180]"
        )));
    }
    Ok(())
}

/// `degrees` in `[0, 360)`; `degrees` must be finite.
pub(crate) fn normalise_angle(degrees: f64) -> f64 {
    let angle = degrees.rem_euclid(360.0);
    // A tiny negative angle rounds to 360 itself.
    if angle >= 360.0 { 0.0 } else { angle }
}

fn non_empty(text: Option<String>) -> Option<String> {
    text.filter(|text| !text.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_angles_into_0_to_360() {
        for (degrees, expected) in [
            (0.0, 0.0),
            (359.5, 359.5),
            (360.0, 0.0),
            (-90.0, 270.0),
            (725.0, 5.0),
            (-1e-20, 0.0),
        ] {
            let angle = normalise_angle(degrees);
            assert!((angle - expected).abs() < 1e-9, "{degrees} gave {angle}");
        }
    }

    #[test]
    fn upright_size_swaps_for_quarter_turns() {
        for orientation in 1..=8 {
            let expected = if orientation >= 5 { (3, 4) } else { (4, 3) };
            assert_eq!(upright_size(4, 3, orientation), expected);
        }
    }
}
