//! Geodesy on the WGS84 ellipsoid: latitude, longitude and altitude to a local east-north-up
//! frame around a reference point and back, through earth-centred coordinates (the
//! topocentric frame `OpenSfM` writes `reference_lla` for).

/// WGS84 semi-major axis (metres).
const A: f64 = 6_378_137.0;
/// WGS84 first eccentricity squared.
const E2: f64 = 6.694_379_990_14e-3;

/// A geodetic position: degrees and metres above the ellipsoid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lla {
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
    /// Altitude, metres.
    pub alt: f64,
}

/// Earth-centred, earth-fixed coordinates of `lla` (metres).
fn ecef(lla: Lla) -> [f64; 3] {
    let (lat, lon) = (lla.lat.to_radians(), lla.lon.to_radians());
    let (sin_lat, cos_lat) = lat.sin_cos();
    let (sin_lon, cos_lon) = lon.sin_cos();
    let n = A / (1.0 - E2 * sin_lat * sin_lat).sqrt();
    [
        (n + lla.alt) * cos_lat * cos_lon,
        (n + lla.alt) * cos_lat * sin_lon,
        (n * (1.0 - E2) + lla.alt) * sin_lat,
    ]
}

/// The geodetic position of earth-centred coordinates (iterated to below a micrometre).
fn lla_of(ecef: [f64; 3]) -> Lla {
    let [east_axis, side_axis, polar_axis] = ecef;
    let lon = side_axis.atan2(east_axis);
    let radial = east_axis.hypot(side_axis);
    let mut lat = polar_axis.atan2(radial * (1.0 - E2));
    let mut alt = 0.0;
    for _ in 0..8 {
        let sin_lat = lat.sin();
        let normal = A / (1.0 - E2 * sin_lat * sin_lat).sqrt();
        alt = radial / lat.cos() - normal;
        lat = polar_axis.atan2(radial * (1.0 - E2 * normal / (normal + alt)));
    }
    Lla {
        lat: lat.to_degrees(),
        lon: lon.to_degrees(),
        alt,
    }
}

/// A local east-north-up frame (metres) with its origin at a reference position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Topocentric {
    reference: Lla,
    origin: [f64; 3],
    /// Rows: east, north and up as earth-centred unit vectors.
    axes: [[f64; 3]; 3],
}

impl Topocentric {
    /// The frame around `reference`.
    pub fn new(reference: Lla) -> Self {
        let (lat, lon) = (reference.lat.to_radians(), reference.lon.to_radians());
        let (sin_lat, cos_lat) = lat.sin_cos();
        let (sin_lon, cos_lon) = lon.sin_cos();
        Topocentric {
            reference,
            origin: ecef(reference),
            axes: [
                [-sin_lon, cos_lon, 0.0],
                [-sin_lat * cos_lon, -sin_lat * sin_lon, cos_lat],
                [cos_lat * cos_lon, cos_lat * sin_lon, sin_lat],
            ],
        }
    }

    /// The reference position (the origin).
    pub fn reference(&self) -> Lla {
        self.reference
    }

    /// East, north, up of `lla` (metres).
    pub fn to_enu(&self, lla: Lla) -> [f64; 3] {
        let point = ecef(lla);
        let delta = [
            point[0] - self.origin[0],
            point[1] - self.origin[1],
            point[2] - self.origin[2],
        ];
        self.axes.map(|axis| dot(axis, delta))
    }

    /// The geodetic position of east, north, up `enu` (metres).
    pub fn to_lla(&self, enu: [f64; 3]) -> Lla {
        let mut point = self.origin;
        for (axis, amount) in self.axes.iter().zip(enu) {
            for (coordinate, component) in point.iter_mut().zip(axis) {
                *coordinate += component * amount;
            }
        }
        lla_of(point)
    }
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_metre_east_and_north_is_where_the_spherical_approximation_puts_it() {
        let frame = Topocentric::new(Lla {
            lat: 55.698_166,
            lon: 13.195_388,
            alt: 37.0,
        });
        let there = frame.to_lla([10.0, 20.0, 1.5]);
        // About 1/111 km per degree of latitude; 1/(111 km cos lat) of longitude.
        let north = (there.lat - 55.698_166) * 111_320.0;
        let east = (there.lon - 13.195_388) * 111_320.0 * 55.698_166_f64.to_radians().cos();
        assert!((north - 20.0).abs() < 0.2, "{north}");
        assert!((east - 10.0).abs() < 0.1, "{east}");
        assert!((there.alt - 38.5).abs() < 1e-3, "{}", there.alt);
        let origin = frame.to_enu(frame.reference());
        assert!(origin.iter().all(|value| value.abs() < 1e-6), "{origin:?}");
    }

    proptest! {
        #[test]
        fn enu_and_back_is_the_same_position(
            lat in -80.0f64..80.0,
            lon in -179.0f64..179.0,
            alt in -100.0f64..3000.0,
            east in -5000.0f64..5000.0,
            north in -5000.0f64..5000.0,
            up in -200.0f64..200.0,
        ) {
            let frame = Topocentric::new(Lla { lat, lon, alt });
            let there = frame.to_lla([east, north, up]);
            let back = frame.to_enu(there);
            for (got, wanted) in back.iter().zip([east, north, up]) {
                prop_assert!((got - wanted).abs() < 1e-5, "{back:?}");
            }
        }
    }
}
