//! `GeoJSON` points.

/// A WGS 84 position, serialised as `GeoJSON` `{"type":"Point","coordinates":[lon,lat]}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Longitude in degrees, -180 to 180.
    pub lon: f64,
    /// Latitude in degrees, -90 to 90.
    pub lat: f64,
}

impl Point {
    /// A point at `lon`, `lat` in degrees.
    pub fn new(lon: f64, lat: f64) -> Self {
        Point { lon, lat }
    }

    /// Whether both coordinates are finite and within the WGS 84 range.
    pub fn is_valid(&self) -> bool {
        self.lon.is_finite()
            && self.lat.is_finite()
            && (-180.0..=180.0).contains(&self.lon)
            && (-90.0..=90.0).contains(&self.lat)
    }
}
