//! GPX tracks given beside a video (`VIDEO.gpx` next to `VIDEO.mp4`): every `trkpt` with its
//! latitude, longitude, elevation and time, read with `quick-xml`. The uploader rebases such a
//! track so that its first point is the video's start and keeps the points' times as GPS times;
//! so does `Video::read`.

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::VideoError;
use crate::time::approximate;

/// The most track points read from one GPX file.
pub const MAX_GPX_POINTS: usize = 1_000_000;

/// One track point: degrees, metres, seconds since 1970.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpxPoint {
    /// Degrees north.
    pub lat: f64,
    /// Degrees east.
    pub lon: f64,
    /// `ele`, metres.
    pub ele: Option<f64>,
    /// `time`, seconds since 1970 (UTC).
    pub time: Option<f64>,
}

/// The track points of a GPX document, in document order.
pub fn parse(gpx: &[u8]) -> Result<Vec<GpxPoint>, VideoError> {
    let mut reader = Reader::from_reader(gpx);
    let mut points = Vec::new();
    let mut current: Option<GpxPoint> = None;
    let mut field: Option<&'static str> = None;
    let mut buffer = Vec::new();
    loop {
        let event = reader
            .read_event_into(&mut buffer)
            .map_err(|error| VideoError::Gpx(error.to_string()))?;
        let empty = matches!(event, Event::Empty(_));
        match event {
            Event::Start(element) | Event::Empty(element)
                if element.local_name().as_ref() == "trkpt" =>
            {
                let mut lat = None;
                let mut lon = None;
                for attribute in element.attributes().flatten() {
                    let value = attribute.value.trim().parse::<f64>().ok();
                    match attribute.key.local_name().as_ref() {
                        "lat" => lat = value,
                        "lon" => lon = value,
                        _ => {}
                    }
                }
                let (Some(lat), Some(lon)) = (lat, lon) else {
                    return Err(VideoError::Gpx(String::from("a trkpt without lat or lon")));
                };
                let point = GpxPoint {
                    lat,
                    lon,
                    ele: None,
                    time: None,
                };
                if empty {
                    points.push(point);
                } else {
                    current = Some(point);
                }
            }
            Event::Start(element) if current.is_some() => {
                field = match element.local_name().as_ref() {
                    "ele" => Some("ele"),
                    "time" => Some("time"),
                    _ => None,
                };
            }
            Event::Text(text) => {
                if let (Some(point), Some(name)) = (current.as_mut(), field) {
                    let text = text.trim().to_owned();
                    match name {
                        "ele" => point.ele = text.parse().ok(),
                        _ => {
                            point.time = chrono::DateTime::parse_from_rfc3339(&text)
                                .ok()
                                .map(|time| approximate(time.timestamp_micros()) / 1e6);
                        }
                    }
                }
            }
            Event::End(element) => {
                if element.local_name().as_ref() == "trkpt" {
                    if let Some(point) = current.take() {
                        points.push(point);
                    }
                } else {
                    field = None;
                }
            }
            Event::Eof => break,
            _ => {}
        }
        if points.len() > MAX_GPX_POINTS {
            return Err(VideoError::Gpx(format!(
                "more than {MAX_GPX_POINTS} track points"
            )));
        }
        buffer.clear();
    }
    Ok(points)
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::*;

    #[test]
    fn reads_points_with_elevation_and_time() {
        let gpx = br#"<?xml version="1.0"?><gpx><trk><trkseg>
            <trkpt lat="37.1" lon="-122.5"><ele>12.5</ele><time>2025-03-14T07:00:00Z</time></trkpt>
            <trkpt lat="37.2" lon="-122.4"/>
            </trkseg></trk></gpx>"#;
        let points = parse(gpx).expect("parses");
        assert_eq!(points.len(), 2);
        assert_eq!(
            points[0],
            GpxPoint {
                lat: 37.1,
                lon: -122.5,
                ele: Some(12.5),
                time: Some(1_741_935_600.0)
            }
        );
        assert_eq!(points[1].time, None);
        assert!(parse(b"<gpx><trkpt lat=\"x\"/></gpx>").is_err());
        assert!(parse(b"<gpx><trk").map_or(true, |points| points.is_empty()));
    }
}
