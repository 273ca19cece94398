//! CAMM (Camera Motion Metadata) GPS samples: type 5 (latitude, longitude, altitude) and type 6
//! (with the receiver's time), little-endian, after a 16-bit reserved field and a 16-bit type.
//! Other types (gyroscope, accelerometer, ...) are skipped. The time in type 6 is read as
//! written; whether it counts from 1970 (as the official uploader writes it) or from the GPS
//! epoch (as the CAMM specification says) is decided for the whole track in `time.rs`.

/// One GPS sample of a CAMM track.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CammGps {
    /// Degrees north.
    pub lat: f64,
    /// Degrees east.
    pub lon: f64,
    /// Metres, when given (type 5 writes -1 for unknown, as the uploader does).
    pub alt: Option<f64>,
    /// Type 6's `time_gps_epoch`, as written.
    pub time: Option<f64>,
    /// Type 6's fix (0 none, 2 2D, 3 3D).
    pub fix: Option<i32>,
}

/// The GPS point of one CAMM sample, or `None` for another type or too few bytes.
pub fn decode(sample: &[u8]) -> Option<CammGps> {
    let kind = u16::from_le_bytes([*sample.get(2)?, *sample.get(3)?]);
    let payload = sample.get(4..)?;
    let f64_at = |at: usize| {
        payload
            .get(at..at + 8)
            .and_then(|bytes| bytes.try_into().ok())
            .map(f64::from_le_bytes)
    };
    let f32_at = |at: usize| {
        payload
            .get(at..at + 4)
            .and_then(|bytes| bytes.try_into().ok())
            .map(f32::from_le_bytes)
    };
    match kind {
        5 => {
            let alt = f64_at(16)?;
            Some(CammGps {
                lat: f64_at(0)?,
                lon: f64_at(8)?,
                alt: (alt.is_finite() && (alt + 1.0).abs() > f64::EPSILON).then_some(alt),
                time: None,
                fix: None,
            })
        }
        6 => {
            let time = f64_at(0)?;
            let fix = payload
                .get(8..12)
                .and_then(|bytes| bytes.try_into().ok())
                .map(i32::from_le_bytes)?;
            let alt = f64::from(f32_at(28)?);
            Some(CammGps {
                lat: f64_at(12)?,
                lon: f64_at(20)?,
                alt: alt.is_finite().then_some(alt),
                time: (time.is_finite() && time > 0.0).then_some(time),
                fix: Some(fix),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::*;

    fn type5(lat: f64, lon: f64, alt: f64) -> Vec<u8> {
        let mut bytes = vec![0, 0, 5, 0];
        for value in [lat, lon, alt] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn type_5_and_6_decode_and_others_are_skipped() {
        assert_eq!(
            decode(&type5(1.5, -2.5, -1.0)),
            Some(CammGps {
                lat: 1.5,
                lon: -2.5,
                alt: None,
                time: None,
                fix: None
            })
        );
        let mut six = vec![0, 0, 6, 0];
        six.extend_from_slice(&1_574_120_714.0f64.to_le_bytes());
        six.extend_from_slice(&3i32.to_le_bytes());
        six.extend_from_slice(&33.1f64.to_le_bytes());
        six.extend_from_slice(&(-117.3f64).to_le_bytes());
        for value in [12.5f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] {
            six.extend_from_slice(&value.to_le_bytes());
        }
        assert_eq!(six.len(), 60);
        assert_eq!(
            decode(&six),
            Some(CammGps {
                lat: 33.1,
                lon: -117.3,
                alt: Some(12.5),
                time: Some(1_574_120_714.0),
                fix: Some(3)
            })
        );
        assert_eq!(decode(&six[..30]), None);
        assert_eq!(decode(&[0, 0, 2, 0, 1, 2, 3, 4]), None);
        assert_eq!(decode(&[]), None);
    }
}
