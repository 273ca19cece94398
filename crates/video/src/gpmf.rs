//! GoPro's GPMF telemetry (the `gpmd` track): key-length-value entries, nested in `DEVC` and
//! `STRM` containers, read for the GPS streams as the official uploader reads them:
//!
//! - `GPS5` (HERO5 to HERO10, MAX): latitude, longitude, altitude, 2D and 3D speed, divided by
//!   `SCAL`; one `GPSU` UTC time, one fix (`GPSF`) and one precision (`GPSP`, DOP × 100) for the
//!   whole payload, so every point of a payload carries the same time (a staircase);
//! - `GPS9` (HERO11 on): nine values per point, typed by `TYPE`, with days since 2000 and
//!   seconds since midnight, DOP and fix per point.
//!
//! Points with a fix other than 2D or 3D, or a DOP × 100 above 1000, are dropped (the
//! uploader's `GOPRO_GPS_FIXES` and `GOPRO_MAX_DOP100`). Nesting is bounded and every length is
//! checked against the bytes there are. [`mod@write`] builds payloads for the tests and the fuzz
//! seeds.

pub mod write;

use crate::time::{approximate, approximate_unsigned};

/// One point of a payload, before it is placed in video time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpmfPoint {
    /// Degrees north.
    pub lat: f64,
    /// Degrees east.
    pub lon: f64,
    /// Metres.
    pub alt: f64,
    /// UTC seconds since 1970: the payload's `GPSU` for GPS5, the point's own for GPS9.
    pub epoch: Option<f64>,
}

/// What one GPMF payload (one `gpmd` sample) holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Payload {
    /// The GPS points kept, in order.
    pub points: Vec<GpmfPoint>,
    /// `DVNM`, the device name ("GoPro Max").
    pub device_name: Option<String>,
}

/// The most container levels followed.
const MAX_DEPTH: usize = 8;

/// Whether a GPS fix is 2D or 3D (the uploader's `GOPRO_GPS_FIXES`).
fn locked(fix: f64) -> bool {
    (fix - 2.0).abs() < 0.5 || (fix - 3.0).abs() < 0.5
}

/// The uploader's `GOPRO_MAX_DOP100`.
const MAX_DOP100: f64 = 1000.0;

/// Reads one payload.
pub fn parse(payload: &[u8]) -> Payload {
    let mut out = Payload::default();
    walk(payload, 0, &mut out);
    out
}

struct Klv<'a> {
    key: [u8; 4],
    kind: u8,
    struct_size: usize,
    repeat: usize,
    data: &'a [u8],
}

fn entries(mut bytes: &[u8]) -> impl Iterator<Item = Klv<'_>> {
    std::iter::from_fn(move || {
        if bytes.len() < 8 {
            return None;
        }
        let key = [bytes[0], bytes[1], bytes[2], bytes[3]];
        let kind = bytes[4];
        let struct_size = usize::from(bytes[5]);
        let repeat = usize::from(u16::from_be_bytes([bytes[6], bytes[7]]));
        let len = struct_size * repeat;
        let padded = len.div_ceil(4) * 4;
        let data = bytes.get(8..8 + len)?;
        bytes = bytes.get(8 + padded..).unwrap_or_default();
        Some(Klv {
            key,
            kind,
            struct_size,
            repeat,
            data,
        })
    })
}

fn walk(bytes: &[u8], depth: usize, out: &mut Payload) {
    if depth > MAX_DEPTH {
        return;
    }
    for klv in entries(bytes) {
        match (&klv.key, klv.kind) {
            (b"DEVC", 0) => walk(klv.data, depth + 1, out),
            (b"STRM", 0) => stream(klv.data, out),
            (b"DVNM", b'c') if out.device_name.is_none() => {
                let name = String::from_utf8_lossy(klv.data)
                    .trim_matches(char::from(0))
                    .trim()
                    .to_owned();
                if !name.is_empty() {
                    out.device_name = Some(name);
                }
            }
            _ => {}
        }
    }
}

fn element_size(kind: u8) -> Option<usize> {
    Some(match kind {
        b'b' | b'B' | b'c' => 1,
        b's' | b'S' => 2,
        b'l' | b'L' | b'f' | b'F' | b'q' => 4,
        b'd' | b'j' | b'J' | b'Q' => 8,
        _ => return None,
    })
}

fn number(kind: u8, bytes: &[u8]) -> Option<f64> {
    Some(match kind {
        b'b' => f64::from(i8::from_be_bytes(bytes.try_into().ok()?)),
        b'B' => f64::from(bytes[0]),
        b's' => f64::from(i16::from_be_bytes(bytes.try_into().ok()?)),
        b'S' => f64::from(u16::from_be_bytes(bytes.try_into().ok()?)),
        b'l' => f64::from(i32::from_be_bytes(bytes.try_into().ok()?)),
        b'L' => f64::from(u32::from_be_bytes(bytes.try_into().ok()?)),
        b'f' => f64::from(f32::from_be_bytes(bytes.try_into().ok()?)),
        b'd' => f64::from_be_bytes(bytes.try_into().ok()?),
        b'j' => approximate(i64::from_be_bytes(bytes.try_into().ok()?)),
        b'J' => approximate_unsigned(u64::from_be_bytes(bytes.try_into().ok()?)),
        _ => return None,
    })
}

/// Every element of a plain numeric entry, in order.
fn numbers(klv: &Klv<'_>) -> Vec<f64> {
    let Some(size) = element_size(klv.kind) else {
        return Vec::new();
    };
    klv.data
        .chunks_exact(size)
        .filter_map(|bytes| number(klv.kind, bytes))
        .collect()
}

/// The rows of a complex (`?`) entry typed by `types`, one per repeat.
fn complex_rows(klv: &Klv<'_>, types: &[u8]) -> Vec<Vec<f64>> {
    let Some(sizes) = types
        .iter()
        .map(|&kind| element_size(kind))
        .collect::<Option<Vec<_>>>()
    else {
        return Vec::new();
    };
    if sizes.iter().sum::<usize>() != klv.struct_size || klv.struct_size == 0 {
        return Vec::new();
    }
    klv.data
        .chunks_exact(klv.struct_size)
        .take(klv.repeat)
        .map(|row| {
            let mut at = 0;
            types
                .iter()
                .zip(&sizes)
                .filter_map(|(&kind, &size)| {
                    let value = number(kind, &row[at..at + size]);
                    at += size;
                    value
                })
                .collect()
        })
        .collect()
}

/// `yymmddhhmmss.sss` (UTC) to seconds since 1970.
fn gpsu(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?.trim_matches(char::from(0));
    let date =
        chrono::NaiveDateTime::parse_from_str(&format!("20{text}"), "%Y%m%d%H%M%S%.f").ok()?;
    Some(approximate(date.and_utc().timestamp_micros()) / 1e6)
}

fn stream(bytes: &[u8], out: &mut Payload) {
    let mut scale: Vec<f64> = Vec::new();
    let mut types: Vec<u8> = Vec::new();
    let mut epoch = None;
    let mut fix = None;
    let mut dop100 = None;
    for klv in entries(bytes) {
        match &klv.key {
            b"SCAL" => scale = numbers(&klv),
            b"TYPE" => types = klv.data.iter().copied().filter(|&byte| byte != 0).collect(),
            b"GPSU" => epoch = gpsu(klv.data.get(..16).unwrap_or(klv.data)),
            b"GPSF" => fix = numbers(&klv).first().copied(),
            b"GPSP" => dop100 = numbers(&klv).first().copied(),
            b"GPS5" if klv.kind == b'l' => {
                let ok = fix.is_none_or(locked) && dop100.is_none_or(|dop| dop <= MAX_DOP100);
                if scale.len() < 3 || scale.contains(&0.0) || !ok {
                    continue;
                }
                let values = numbers(&klv);
                for row in values.chunks_exact(5) {
                    out.points.push(GpmfPoint {
                        lat: row[0] / scale[0],
                        lon: row[1] / scale[1],
                        alt: row[2] / scale[2],
                        epoch,
                    });
                }
            }
            b"GPS9" if klv.kind == b'?' => {
                if scale.len() < 9 || scale.contains(&0.0) || types.len() != 9 {
                    continue;
                }
                for row in complex_rows(&klv, &types) {
                    if row.len() != 9 {
                        continue;
                    }
                    let value = |at: usize| row[at] / scale[at];
                    let (point_fix, dop) = (value(8), value(7) * 100.0);
                    if !locked(point_fix) || dop > MAX_DOP100 {
                        continue;
                    }
                    out.points.push(GpmfPoint {
                        lat: value(0),
                        lon: value(1),
                        alt: value(2),
                        epoch: Some(946_684_800.0 + value(5) * 86_400.0 + value(6)),
                    });
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::write::{big_endian, klv, nested};
    use super::*;

    #[test]
    fn gps5_is_scaled_and_timed_by_gpsu_and_filtered_by_fix() {
        let mut strm = klv(*b"GPSF", b'L', 4, 1, &3u32.to_be_bytes());
        strm.extend(klv(*b"GPSU", b'U', 16, 1, b"191118234514.000"));
        strm.extend(klv(*b"GPSP", b'S', 2, 1, &500u16.to_be_bytes()));
        strm.extend(klv(
            *b"SCAL",
            b'l',
            4,
            5,
            &big_endian(&[10_000_000, 10_000_000, 1000, 1000, 100]),
        ));
        strm.extend(klv(
            *b"GPS5",
            b'l',
            20,
            2,
            &big_endian(&[
                331_234_567,
                -1_171_234_567,
                12_500,
                0,
                0,
                331_234_600,
                -1_171_234_500,
                12_400,
                0,
                0,
            ]),
        ));
        let mut devc = klv(*b"DVNM", b'c', 9, 1, b"GoPro Max");
        devc.extend(nested(*b"STRM", &strm).unwrap());
        let payload = parse(&nested(*b"DEVC", &devc).unwrap());
        assert_eq!(payload.device_name.as_deref(), Some("GoPro Max"));
        assert_eq!(payload.points.len(), 2);
        assert!((payload.points[0].lat - 33.123_456_7).abs() < 1e-9);
        assert!((payload.points[0].lon + 117.123_456_7).abs() < 1e-9);
        assert_eq!(payload.points[0].alt, 12.5);
        assert_eq!(payload.points[0].epoch, Some(1_574_120_714.0));
        assert_eq!(payload.points[1].epoch, Some(1_574_120_714.0));
        // Without a fix, nothing.
        let no_fix = strm.clone();
        let mut no_fix_strm = klv(*b"GPSF", b'L', 4, 1, &0u32.to_be_bytes());
        no_fix_strm.extend_from_slice(&no_fix[12..]);
        let devc = nested(*b"STRM", &no_fix_strm).unwrap();
        assert!(parse(&nested(*b"DEVC", &devc).unwrap()).points.is_empty());
    }

    #[test]
    fn gps9_carries_a_time_per_point() {
        let mut row = big_endian(&[331_234_567, -1_171_234_567, 12_500, 0, 0, 9000, 3_600_500]);
        row.extend_from_slice(&150u16.to_be_bytes());
        row.extend_from_slice(&3u16.to_be_bytes());
        let mut strm = klv(
            *b"SCAL",
            b'l',
            4,
            9,
            &big_endian(&[10_000_000, 10_000_000, 1000, 1000, 100, 1, 1000, 100, 1]),
        );
        strm.extend(klv(*b"TYPE", b'c', 9, 1, b"lllllllSS"));
        strm.extend(klv(*b"GPS9", b'?', 32, 1, &row));
        let devc = nested(*b"STRM", &strm).unwrap();
        let payload = parse(&nested(*b"DEVC", &devc).unwrap());
        assert_eq!(payload.points.len(), 1);
        // Day 9000 after 2000-01-01 is 2024-08-22; 3600.5 s after midnight.
        assert_eq!(
            payload.points[0].epoch,
            Some(946_684_800.0 + 9000.0 * 86_400.0 + 3600.5)
        );
    }
}
