//! Exif: the tags a street-level image needs (GPS, times, camera, orientation, description),
//! read with `kamadak-exif` from the TIFF structure of the first Exif segment.

use chrono::{NaiveDate, NaiveDateTime, TimeDelta};
use exif::{Exif, Field, In, Reader, Tag, Value};
use num_traits::ToPrimitive as _;

use crate::IngestError;
use crate::capture_time::CameraTime;
use crate::description::trim_padding;

/// The Exif tags of one image. A TIFF structure that is damaged in places (a bad offset, an IFD
/// loop) still gives the tags read before and around the damage; [`ExifTags::damage`] says
/// what was skipped.
pub(crate) struct ExifTags {
    exif: Exif,
    damage: Option<String>,
}

/// A date-time tag with the sub-second and offset tags that complete it.
struct TimeTags {
    date_time: Tag,
    sub_sec: Tag,
    offset: Tag,
}

/// The tags a capture time is read from, best first.
const TIME_TAGS: [TimeTags; 3] = [
    TimeTags {
        date_time: Tag::DateTimeOriginal,
        sub_sec: Tag::SubSecTimeOriginal,
        offset: Tag::OffsetTimeOriginal,
    },
    TimeTags {
        date_time: Tag::DateTimeDigitized,
        sub_sec: Tag::SubSecTimeDigitized,
        offset: Tag::OffsetTimeDigitized,
    },
    TimeTags {
        date_time: Tag::DateTime,
        sub_sec: Tag::SubSecTime,
        offset: Tag::OffsetTime,
    },
];

impl ExifTags {
    /// Reads the TIFF structure `tiff` (the Exif segment without its `Exif\0\0` prefix).
    pub fn read(tiff: &[u8]) -> Result<ExifTags, IngestError> {
        // `kamadak-exif` bounds the work itself: at most 8 IFDs in the chain, every IFD read
        // once (so offset loops end), and counts checked against the data before allocating.
        match Reader::new()
            .continue_on_error(true)
            .read_raw(tiff.to_vec())
        {
            Ok(exif) => Ok(ExifTags { exif, damage: None }),
            Err(exif::Error::PartialResult(partial)) => {
                let (exif, errors) = partial.into_inner();
                let damage = errors.first().map(ToString::to_string);
                Ok(ExifTags { exif, damage })
            }
            Err(error) => Err(IngestError::InvalidExif(error.to_string())),
        }
    }

    /// What could not be read, if anything.
    pub fn damage(&self) -> Option<&str> {
        self.damage.as_deref()
    }

    fn field(&self, tag: Tag) -> Option<&Field> {
        self.exif.get_field(tag, In::PRIMARY)
    }

    /// The first string of an ASCII tag, without padding; `None` when absent or empty.
    fn ascii(&self, tag: Tag) -> Option<&[u8]> {
        match &self.field(tag)?.value {
            Value::Ascii(strings) => strings
                .first()
                .map(|string| trim_padding(string))
                .filter(|string| !string.is_empty()),
            _ => None,
        }
    }

    /// A text tag as a string (non-UTF-8 bytes replaced).
    fn text(&self, tag: Tag) -> Option<String> {
        self.ascii(tag)
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    }

    /// `ImageDescription` of the primary image.
    pub fn description(&self) -> Option<&[u8]> {
        self.ascii(Tag::ImageDescription)
    }

    /// `Make`.
    pub fn make(&self) -> Option<String> {
        self.text(Tag::Make)
    }

    /// `Model`.
    pub fn model(&self) -> Option<String> {
        self.text(Tag::Model)
    }

    /// `Orientation` when it is 1 to 8; cameras that write 0 or garbage mean "as stored".
    pub fn orientation(&self) -> Option<u8> {
        let orientation = self.field(Tag::Orientation)?.value.get_uint(0)?;
        u8::try_from(orientation)
            .ok()
            .filter(|orientation| (1..=8).contains(orientation))
    }

    /// `GPSLatitude`/`GPSLongitude` with their references, as signed degrees; `None` when
    /// either is absent. A reference that is absent counts as north or east.
    pub fn position(&self) -> Result<Option<(f64, f64)>, IngestError> {
        let (Some(latitude), Some(longitude)) =
            (self.field(Tag::GPSLatitude), self.field(Tag::GPSLongitude))
        else {
            return Ok(None);
        };
        let latitude = self.signed_degrees(latitude, Tag::GPSLatitudeRef, b'N', b'S')?;
        let longitude = self.signed_degrees(longitude, Tag::GPSLongitudeRef, b'E', b'W')?;
        Ok(Some((latitude, longitude)))
    }

    fn signed_degrees(
        &self,
        field: &Field,
        reference: Tag,
        positive: u8,
        negative: u8,
    ) -> Result<f64, IngestError> {
        let invalid =
            |what: &str| IngestError::InvalidMetadata(format!("exif {} {what}", field.tag));
        let parts = numbers(&field.value)
            .filter(|parts| (1..=3).contains(&parts.len()))
            .ok_or_else(|| invalid("is not one to three numbers (degrees, minutes, seconds)"))?;
        let degrees = parts
            .iter()
            .zip([1.0, 60.0, 3600.0])
            .map(|(part, divisor)| part / divisor)
            .sum::<f64>();
        if !degrees.is_finite() || degrees < 0.0 {
            return Err(invalid("is not a finite number of degrees"));
        }
        match self.ascii(reference).and_then(|text| text.first()) {
            None => Ok(degrees),
            Some(letter) if letter.eq_ignore_ascii_case(&positive) => Ok(degrees),
            Some(letter) if letter.eq_ignore_ascii_case(&negative) => Ok(-degrees),
            Some(_) => Err(IngestError::InvalidMetadata(format!(
                "exif {reference} is not {} or {}",
                char::from(positive),
                char::from(negative)
            ))),
        }
    }

    /// `GPSAltitude` in metres, negative when `GPSAltitudeRef` is 1 (below sea level); `None`
    /// when absent or not a finite number.
    pub fn altitude(&self) -> Option<f64> {
        let altitude = single_number(&self.field(Tag::GPSAltitude)?.value)?;
        let below_sea_level = self
            .field(Tag::GPSAltitudeRef)
            .and_then(|field| field.value.get_uint(0))
            == Some(1);
        Some(if below_sea_level { -altitude } else { altitude })
    }

    /// `FocalLengthIn35mmFilm` in millimetres: the lens's angle of view as a 35 mm camera's
    /// focal length; `None` when absent, zero (unknown, as Exif has it) or not finite.
    pub fn focal_length_35mm(&self) -> Option<f64> {
        single_number(&self.field(Tag::FocalLengthIn35mmFilm)?.value).filter(|focal| *focal > 0.0)
    }

    /// `GPSImgDirection` in degrees; `None` when absent or not a finite number. True or
    /// magnetic north (`GPSImgDirectionRef`) is not told apart, as the uploader does not.
    pub fn direction(&self) -> Option<f64> {
        single_number(&self.field(Tag::GPSImgDirection)?.value)
    }

    /// The camera's clock: the first of `DateTimeOriginal`, `DateTimeDigitized` and
    /// `DateTime` that is a real date, with its sub-second and offset tags (each left out when
    /// unreadable).
    pub fn camera_time(&self) -> Option<CameraTime> {
        TIME_TAGS.iter().find_map(|tags| self.camera_time_of(tags))
    }

    fn camera_time_of(&self, tags: &TimeTags) -> Option<CameraTime> {
        let mut date_time = exif::DateTime::from_ascii(self.ascii(tags.date_time)?).ok()?;
        if let Some(offset) = self.ascii(tags.offset)
            && date_time.parse_offset(offset).is_err()
        {
            date_time.offset = None;
        }
        let local = NaiveDate::from_ymd_opt(
            i32::from(date_time.year),
            u32::from(date_time.month),
            u32::from(date_time.day),
        )?
        .and_hms_opt(
            u32::from(date_time.hour),
            u32::from(date_time.minute),
            u32::from(date_time.second),
        )?;
        let sub_second_micros = self
            .field(tags.sub_sec)
            .and_then(|field| match &field.value {
                Value::Ascii(strings) => strings.first(),
                _ => None,
            })
            .and_then(|raw| sub_second_micros(raw));
        Some(CameraTime {
            local,
            sub_second_micros,
            offset_minutes: date_time.offset.map(i32::from),
        })
    }

    /// `GPSDateStamp` (`YYYY:MM:DD` or `YYYY-MM-DD`) and `GPSTimeStamp` (hours, minutes and
    /// seconds as rationals) as the UTC time they give, to the microsecond; `None` when either
    /// is absent or unreadable.
    pub fn gps_time(&self) -> Option<NaiveDateTime> {
        let date = std::str::from_utf8(self.ascii(Tag::GPSDateStamp)?).ok()?;
        let date = ["%Y:%m:%d", "%Y-%m-%d"]
            .iter()
            .find_map(|format| NaiveDate::parse_from_str(date.trim(), format).ok())?;
        let parts = match &self.field(Tag::GPSTimeStamp)?.value {
            Value::Rational(parts) if parts.len() >= 3 => parts,
            _ => return None,
        };
        let part = |index: usize| {
            let rational = parts[index];
            (rational.denom != 0).then(|| rational.to_f64())
        };
        // As the uploader: whole hours and minutes, seconds with their fraction.
        let (hours, minutes, seconds) = (part(0)?.trunc(), part(1)?.trunc(), part(2)?);
        let micros =
            ((hours * 3600.0 + minutes * 60.0) * 1e6 + (seconds * 1e6).round()).to_i64()?;
        date.and_hms_opt(0, 0, 0)?
            .checked_add_signed(TimeDelta::microseconds(micros))
    }
}

/// `SubSecTime*` as the uploader reads it: spaces are zeros (a camera bug writes `" 5"` for
/// `005`), and the first six digits, padded with zeros, are microseconds. `None` when those
/// are not digits.
fn sub_second_micros(raw: &[u8]) -> Option<u32> {
    let end = raw.iter().position(|&byte| byte == 0).unwrap_or(raw.len());
    let digits: Vec<u8> = raw[..end]
        .iter()
        .map(|&byte| if byte == b' ' { b'0' } else { byte })
        .collect();
    let digits = digits.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    let mut micros = 0_u32;
    for index in 0..6 {
        let digit = digits.get(index).copied().unwrap_or(b'0');
        if !digit.is_ascii_digit() {
            return None;
        }
        micros = micros * 10 + u32::from(digit - b'0');
    }
    Some(micros)
}

/// The numbers of a numeric value (rationals, integers or floats).
fn numbers(value: &Value) -> Option<Vec<f64>> {
    Some(match value {
        Value::Rational(values) => values.iter().map(exif::Rational::to_f64).collect(),
        Value::SRational(values) => values.iter().map(exif::SRational::to_f64).collect(),
        Value::Byte(_) | Value::Short(_) | Value::Long(_) => {
            value.iter_uint()?.map(f64::from).collect()
        }
        Value::SLong(values) => values.iter().copied().map(f64::from).collect(),
        Value::Float(values) => values.iter().copied().map(f64::from).collect(),
        Value::Double(values) => values.clone(),
        _ => return None,
    })
}

/// The first number of a numeric value, if finite.
fn single_number(value: &Value) -> Option<f64> {
    numbers(value)?
        .first()
        .copied()
        .filter(|number| number.is_finite())
}
