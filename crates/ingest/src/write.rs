//! Writing metadata into a JPEG, for the fixture generator and tests: a new Exif segment built
//! with `kamadak-exif`'s writer and, for panoramas, a `GPano` XMP segment, spliced in with
//! `img-parts` so that the image data stays byte for byte.

use std::io::Cursor;

use bytes::Bytes;
use chrono::DateTime;
use exif::experimental::Writer;
use exif::{Field, In, Rational, Tag, Value};
use img_parts::ImageEXIF;
use img_parts::jpeg::{JpegSegment, markers};
use num_traits::ToPrimitive as _;
use streetlevel_model::Timestamp;

use crate::IngestError;
use crate::jpeg::{EXIF_PREFIX, JpegFile, XMP_PREFIX};

/// The most bytes of TIFF data one Exif segment holds: 65535, less the segment length and
/// the `Exif\0\0` prefix.
pub const MAX_EXIF_LEN: usize = 65535 - 2 - EXIF_PREFIX.len();

/// The tags [`write_metadata`] writes; `None` leaves a tag out. Text values are written as
/// given (so tests can write invalid ones); numbers must be finite.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteTags {
    /// `GPSLatitude` (degrees, minutes, seconds) and `GPSLatitudeRef` `N` or `S`.
    pub latitude: Option<f64>,
    /// `GPSLongitude` and `GPSLongitudeRef` `E` or `W`.
    pub longitude: Option<f64>,
    /// `GPSAltitude` in metres and `GPSAltitudeRef` (1 below sea level).
    pub altitude: Option<f64>,
    /// `GPSImgDirection` in degrees (not negative) with `GPSImgDirectionRef` `T`.
    pub direction: Option<f64>,
    /// `GPSDateStamp`, the UTC date as written (`YYYY:MM:DD`).
    pub gps_date_stamp: Option<String>,
    /// `GPSTimeStamp`: UTC hours, minutes and seconds (to the millisecond).
    pub gps_time_stamp: Option<[f64; 3]>,
    /// `DateTimeOriginal`, local time as `YYYY:MM:DD HH:MM:SS`.
    pub date_time_original: Option<String>,
    /// `SubSecTimeOriginal`, the digits of the fraction of a second (`250`).
    pub subsec_time_original: Option<String>,
    /// `OffsetTimeOriginal`, the offset of the local time from UTC (`+02:00`).
    pub offset_time_original: Option<String>,
    /// `Make`.
    pub make: Option<String>,
    /// `Model`.
    pub model: Option<String>,
    /// `Orientation`, any value (1 to 8 are meaningful).
    pub orientation: Option<u16>,
    /// `ImageDescription`, for instance the uploader's JSON.
    pub description: Option<String>,
    /// Adds an XMP segment marking the image as an equirectangular panorama (`GPano`
    /// properties with the stored size as full and cropped size), replacing any XMP segment.
    pub pano: bool,
}

impl WriteTags {
    /// Sets `DateTimeOriginal`, `SubSecTimeOriginal` (milliseconds) and `OffsetTimeOriginal`
    /// (`+00:00`) to `captured_at` in UTC.
    pub fn set_capture_time_utc(&mut self, captured_at: Timestamp) {
        let date_time = DateTime::from_timestamp_millis(captured_at.millis()).unwrap_or_default();
        self.date_time_original = Some(date_time.format("%Y:%m:%d %H:%M:%S").to_string());
        self.subsec_time_original = Some(date_time.format("%3f").to_string());
        self.offset_time_original = Some(String::from("+00:00"));
    }
}

/// Returns `jpeg` with its Exif segments replaced by one holding `tags` (or removed when
/// `tags` sets none) and, when `tags.pano`, its standard XMP segments replaced by a `GPano` one.
/// Every other segment and the image data are kept byte for byte. (An MPF segment's offsets
/// are updated for the Exif change but not for the XMP one.)
pub fn write_metadata(jpeg: &[u8], tags: &WriteTags) -> Result<Vec<u8>, IngestError> {
    let mut file = JpegFile::parse(jpeg)?;
    let fields = exif_fields(tags)?;
    let tiff = if fields.is_empty() {
        None
    } else {
        let mut writer = Writer::new();
        for field in &fields {
            writer.push_field(field);
        }
        let mut tiff = Cursor::new(Vec::new());
        writer
            .write(&mut tiff, true)
            .map_err(|error| IngestError::Encode(format!("exif: {error}")))?;
        let tiff = tiff.into_inner();
        if tiff.len() > MAX_EXIF_LEN {
            return Err(IngestError::ExifTooLarge {
                len: tiff.len(),
                max: MAX_EXIF_LEN,
            });
        }
        Some(Bytes::from(tiff))
    };
    file.jpeg.set_exif(tiff);

    if tags.pano {
        let xmp = pano_xmp(file.frame.width, file.frame.height);
        let segments = file.jpeg.segments_mut();
        segments.retain(|segment| {
            segment.marker() != markers::APP1 || !segment.contents().starts_with(XMP_PREFIX)
        });
        // Right after the Exif segment, else after the JFIF (APP0) segments: before the frame
        // header either way.
        let position = match segments
            .iter()
            .position(|segment| segment.contents().starts_with(EXIF_PREFIX))
        {
            Some(exif) => exif + 1,
            None => segments
                .iter()
                .position(|segment| segment.marker() != markers::APP0)
                .unwrap_or(segments.len()),
        };
        let contents = [XMP_PREFIX, xmp.as_bytes()].concat();
        segments.insert(
            position,
            JpegSegment::new_with_contents(markers::APP1, Bytes::from(contents)),
        );
    }
    Ok(file.jpeg.encoder().bytes().to_vec())
}

fn exif_fields(tags: &WriteTags) -> Result<Vec<Field>, IngestError> {
    let field = |tag: Tag, value: Value| Field {
        tag,
        ifd_num: In::PRIMARY,
        value,
    };
    let ascii = |text: &str| Value::Ascii(vec![text.as_bytes().to_vec()]);
    let mut fields = Vec::new();
    if let Some(latitude) = tags.latitude {
        let reference = if latitude < 0.0 { "S" } else { "N" };
        fields.push(field(Tag::GPSLatitudeRef, ascii(reference)));
        fields.push(field(
            Tag::GPSLatitude,
            degrees_minutes_seconds("latitude", latitude)?,
        ));
    }
    if let Some(longitude) = tags.longitude {
        let reference = if longitude < 0.0 { "W" } else { "E" };
        fields.push(field(Tag::GPSLongitudeRef, ascii(reference)));
        fields.push(field(
            Tag::GPSLongitude,
            degrees_minutes_seconds("longitude", longitude)?,
        ));
    }
    if let Some(altitude) = tags.altitude {
        let below_sea_level = u8::from(altitude < 0.0);
        fields.push(field(
            Tag::GPSAltitudeRef,
            Value::Byte(vec![below_sea_level]),
        ));
        fields.push(field(
            Tag::GPSAltitude,
            Value::Rational(vec![rational("altitude", altitude.abs(), 1000)?]),
        ));
    }
    if let Some(direction) = tags.direction {
        fields.push(field(Tag::GPSImgDirectionRef, ascii("T")));
        fields.push(field(
            Tag::GPSImgDirection,
            Value::Rational(vec![rational("direction", direction, 100)?]),
        ));
    }
    if let Some(date) = &tags.gps_date_stamp {
        fields.push(field(Tag::GPSDateStamp, ascii(date)));
    }
    if let Some([hours, minutes, seconds]) = tags.gps_time_stamp {
        fields.push(field(
            Tag::GPSTimeStamp,
            Value::Rational(vec![
                rational("gps hours", hours, 1)?,
                rational("gps minutes", minutes, 1)?,
                rational("gps seconds", seconds, 1000)?,
            ]),
        ));
    }
    if !fields.is_empty() {
        fields.push(field(Tag::GPSVersionID, Value::Byte(vec![2, 3, 0, 0])));
    }
    let texts = [
        (Tag::DateTimeOriginal, &tags.date_time_original),
        (Tag::SubSecTimeOriginal, &tags.subsec_time_original),
        (Tag::OffsetTimeOriginal, &tags.offset_time_original),
        (Tag::Make, &tags.make),
        (Tag::Model, &tags.model),
        (Tag::ImageDescription, &tags.description),
    ];
    for (tag, text) in texts {
        if let Some(text) = text {
            fields.push(field(tag, ascii(text)));
        }
    }
    if let Some(orientation) = tags.orientation {
        fields.push(field(Tag::Orientation, Value::Short(vec![orientation])));
    }
    Ok(fields)
}

/// `degrees` (sign dropped) as three rationals: whole degrees, whole minutes and seconds to
/// a millionth.
fn degrees_minutes_seconds(name: &str, degrees: f64) -> Result<Value, IngestError> {
    let degrees = degrees.abs();
    let whole_degrees = degrees.floor();
    let minutes = (degrees - whole_degrees) * 60.0;
    let whole_minutes = minutes.floor();
    let seconds = (minutes - whole_minutes) * 60.0;
    Ok(Value::Rational(vec![
        rational(name, whole_degrees, 1)?,
        rational(name, whole_minutes, 1)?,
        rational(name, seconds, 1_000_000)?,
    ]))
}

fn rational(name: &str, value: f64, denom: u32) -> Result<Rational, IngestError> {
    let num = (value * f64::from(denom)).round().to_u32().ok_or_else(|| {
        IngestError::InvalidMetadata(format!(
            "{name} {value} cannot be written as an exif rational"
        ))
    })?;
    Ok(Rational { num, denom })
}

/// An XMP packet that marks a `width` x `height` image as a full equirectangular panorama.
fn pano_xmp(width: u32, height: u32) -> String {
    format!(
        r#"<?xpacket begin="{BOM}" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/">
 <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <rdf:Description rdf:about=""
    xmlns:GPano="http://ns.google.com/photos/1.0/panorama/"
    GPano:ProjectionType="equirectangular"
    GPano:UsePanoramaViewer="True"
    GPano:FullPanoWidthPixels="{width}"
    GPano:FullPanoHeightPixels="{height}"
    GPano:CroppedAreaImageWidthPixels="{width}"
    GPano:CroppedAreaImageHeightPixels="{height}"
    GPano:CroppedAreaLeftPixels="0"
    GPano:CroppedAreaTopPixels="0"/>
 </rdf:RDF>
</x:xmpmeta>
<?xpacket end="w"?>"#,
        BOM = '\u{feff}'
    )
}
