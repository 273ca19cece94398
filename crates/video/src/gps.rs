//! A video's GPS track as the official uploader treats it: points in video time, the checks
//! that refuse a track (a point at 0,0, a stationary clip, an impossible speed), interpolation
//! at a frame's time, the uploader's distance (a chord on the WGS84 ellipsoid) and bearing.

use crate::VideoError;

/// One GPS point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpsPoint {
    /// Seconds from the start of the video.
    pub time: f64,
    /// Degrees north.
    pub lat: f64,
    /// Degrees east.
    pub lon: f64,
    /// Metres above sea level, when known.
    pub alt: Option<f64>,
    /// The receiver's UTC time in seconds since 1970, when the source has one.
    pub epoch: Option<f64>,
}

/// All points within this many metres of the first: a stationary clip, refused as the
/// uploader refuses it.
pub const STATIONARY_METRES: f64 = 10.0;

/// An average speed above this many km/h is refused, as the uploader refuses it.
pub const MAX_SPEED_KMH: f64 = 400.0;

/// Sorts the points by time, drops those before the video's start and those after its end but
/// the first (a GPX track or a CAMM track longer than the video), and refuses a track the
/// uploader refuses.
pub fn prepare(
    mut points: Vec<GpsPoint>,
    duration_seconds: f64,
) -> Result<Vec<GpsPoint>, VideoError> {
    points.retain(|point| {
        point.time.is_finite()
            && point.lat.is_finite()
            && point.lon.is_finite()
            && (-90.0..=90.0).contains(&point.lat)
            && (-180.0..=180.0).contains(&point.lon)
    });
    points.sort_by(|a, b| a.time.total_cmp(&b.time));
    let end = if duration_seconds > 0.0 {
        duration_seconds + 0.001
    } else {
        f64::INFINITY
    };
    // The first point past the end is kept, so that the video's last frames are placed
    // between two points as the uploader (which keeps the whole track) places them.
    let past_end = points.iter().position(|point| point.time > end);
    if let Some(past_end) = past_end {
        points.truncate(past_end + 1);
    }
    points.retain(|point| point.time >= 0.0);
    if points.is_empty() {
        return Err(VideoError::NoGps);
    }
    if points
        .iter()
        .any(|point| point.lat == 0.0 && point.lon == 0.0)
    {
        return Err(VideoError::UnusableGps(String::from(
            "a point at 0,0 (a receiver without a fix)",
        )));
    }
    let first = points[0];
    if points
        .iter()
        .all(|point| distance(first.lat, first.lon, point.lat, point.lon) <= STATIONARY_METRES)
    {
        return Err(VideoError::UnusableGps(format!(
            "stationary: every point within {STATIONARY_METRES} m of the first"
        )));
    }
    let last = points[points.len() - 1];
    let (start, end) = match (first.epoch, last.epoch) {
        (Some(start), Some(end)) if end > start => (start, end),
        _ => (first.time, last.time),
    };
    if end > start {
        let metres: f64 = points
            .windows(2)
            .map(|pair| distance(pair[0].lat, pair[0].lon, pair[1].lat, pair[1].lon))
            .sum();
        let kmh = metres / (end - start) * 3.6;
        if kmh > MAX_SPEED_KMH {
            return Err(VideoError::UnusableGps(format!(
                "an average speed of {kmh:.0} km/h (at most {MAX_SPEED_KMH})"
            )));
        }
    }
    Ok(points)
}

/// The position at `time` along the sorted `points`, interpolated linearly between the two
/// points around it (extrapolated from the first or last segment outside them), as the
/// uploader's `Interpolator` does.
pub fn interpolate(points: &[GpsPoint], time: f64) -> GpsPoint {
    let (start, end) = match points.len() {
        0 => {
            return GpsPoint {
                time,
                lat: 0.0,
                lon: 0.0,
                alt: None,
                epoch: None,
            };
        }
        1 => (points[0], points[0]),
        n => {
            let index = points.partition_point(|point| point.time < time);
            if index == 0 {
                (points[0], points[1])
            } else if index >= n {
                (points[n - 2], points[n - 1])
            } else {
                (points[index - 1], points[index])
            }
        }
    };
    let span = end.time - start.time;
    let weight = if span > 0.0 {
        (time - start.time) / span
    } else {
        0.0
    };
    let mix = |a: f64, b: f64| a + (b - a) * weight;
    GpsPoint {
        time,
        lat: mix(start.lat, end.lat),
        lon: mix(start.lon, end.lon),
        alt: start.alt.zip(end.alt).map(|(a, b)| mix(a, b)),
        epoch: start.epoch.zip(end.epoch).map(|(a, b)| mix(a, b)),
    }
}

const WGS84_A: f64 = 6_378_137.0;
const WGS84_B: f64 = 6_356_752.314_245;

fn ecef(lat: f64, lon: f64) -> [f64; 3] {
    let (lat, lon) = (lat.to_radians(), lon.to_radians());
    let (a2, b2) = (WGS84_A * WGS84_A, WGS84_B * WGS84_B);
    let l = 1.0 / (a2 * lat.cos().powi(2) + b2 * lat.sin().powi(2)).sqrt();
    let k = a2 * l * lat.cos();
    [k * lon.cos(), k * lon.sin(), b2 * l * lat.sin()]
}

/// Metres between two points: the straight line between them on the WGS84 ellipsoid, the
/// uploader's `gps_distance`.
pub fn distance(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (a, b) = (ecef(lat1, lon1), ecef(lat2, lon2));
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// The initial compass bearing in degrees (0 to 360) from the first point to the second.
pub fn bearing(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (lat1, lat2) = (lat1.to_radians(), lat2.to_radians());
    let mut d_lon = (lon2 - lon1).to_radians();
    if d_lon.abs() > std::f64::consts::PI {
        d_lon = if d_lon > 0.0 {
            -(2.0 * std::f64::consts::PI - d_lon)
        } else {
            2.0 * std::f64::consts::PI + d_lon
        };
    }
    let y = d_lon.sin() * lat2.cos();
    let x = lat1.cos() * lat2.sin() - lat1.sin() * lat2.cos() * d_lon.cos();
    (y.atan2(x).to_degrees() + 360.0) % 360.0
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::*;

    #[test]
    fn distance_matches_the_uploaders_doctest() {
        // mapillary_tools geo.py: 19000 < gps_distance((42.1, -11.1), (42.2, -11.3)) < 20000
        let metres = distance(42.1, -11.1, 42.2, -11.3);
        assert!(19_000.0 < metres && metres < 20_000.0, "{metres}");
    }

    #[test]
    fn bearing_points_the_compass_way() {
        assert!((bearing(0.0, 0.0, 1.0, 0.0) - 0.0).abs() < 1e-9);
        assert!((bearing(0.0, 0.0, 0.0, 1.0) - 90.0).abs() < 1e-9);
        assert!((bearing(0.0, 0.0, -1.0, 0.0) - 180.0).abs() < 1e-9);
        assert!((bearing(0.0, 0.0, 0.0, -1.0) - 270.0).abs() < 1e-9);
    }

    fn point(time: f64, lat: f64, lon: f64) -> GpsPoint {
        GpsPoint {
            time,
            lat,
            lon,
            alt: Some(time),
            epoch: None,
        }
    }

    #[test]
    fn interpolation_is_linear_and_extrapolates_from_the_end_segments() {
        let points = [
            point(0.0, 10.0, 20.0),
            point(1.0, 11.0, 22.0),
            point(3.0, 11.0, 24.0),
        ];
        let middle = interpolate(&points, 0.5);
        assert_eq!(
            (middle.lat, middle.lon, middle.alt),
            (10.5, 21.0, Some(0.5))
        );
        let after = interpolate(&points, 4.0);
        assert_eq!((after.lat, after.lon), (11.0, 25.0));
        let before = interpolate(&points, -1.0);
        assert_eq!((before.lat, before.lon), (9.0, 18.0));
    }

    #[test]
    fn tracks_the_uploader_refuses_are_refused() {
        let moving = vec![point(0.0, 10.0, 20.0), point(5.0, 10.001, 20.0)];
        assert_eq!(
            prepare(moving.clone(), 10.0).map(|points| points.len()),
            Ok(2)
        );
        let stationary = vec![point(0.0, 10.0, 20.0), point(5.0, 10.00001, 20.0)];
        assert!(
            matches!(prepare(stationary, 10.0), Err(VideoError::UnusableGps(reason)) if reason.contains("stationary"))
        );
        let mut null_island = moving.clone();
        null_island.push(point(6.0, 0.0, 0.0));
        assert!(
            matches!(prepare(null_island, 10.0), Err(VideoError::UnusableGps(reason)) if reason.contains("0,0"))
        );
        let too_fast = vec![point(0.0, 10.0, 20.0), point(1.0, 11.0, 20.0)];
        assert!(
            matches!(prepare(too_fast, 10.0), Err(VideoError::UnusableGps(reason)) if reason.contains("km/h"))
        );
        // Points past the video's end but the first are dropped before the checks.
        let mut long = moving;
        long.push(point(11.0, 10.0011, 20.0));
        long.push(point(60.0, 10.5, 20.0));
        assert_eq!(prepare(long, 10.0).map(|points| points.len()), Ok(3));
        assert_eq!(prepare(Vec::new(), 10.0), Err(VideoError::NoGps));
    }
}
