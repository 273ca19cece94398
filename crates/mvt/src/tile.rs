//! Web Mercator tile math: lon/lat, spherical mercator metres, tiles `z/x/y` and tile-local
//! coordinates at an extent.
//!
//! "World" coordinates here are the unit square of the Web Mercator plane, `x` growing east and
//! `y` growing south, as tiles are numbered.

use std::f64::consts::PI;

use num_traits::ToPrimitive as _;

use crate::MvtError;

/// The largest zoom level accepted: `2^24` tiles fit a `u32` with room to spare.
pub const MAX_ZOOM: u8 = 24;

/// The latitude limit of Web Mercator (the map is a square), in degrees.
pub const MAX_LATITUDE: f64 = 85.051_128_779_806_59;

/// Earth radius used by spherical (Web) Mercator, in metres (EPSG:3857).
pub const EARTH_RADIUS_METRES: f64 = 6_378_137.0;

/// The default layer extent of the MVT specification.
pub const DEFAULT_EXTENT: u32 = 4096;

/// A tile of the Web Mercator grid: zoom `z`, column `x` (west to east), row `y` (north to
/// south). Always valid: `z <= MAX_ZOOM` and `x, y < 2^z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileId {
    z: u8,
    x: u32,
    y: u32,
}

/// A box in longitude/latitude degrees (WGS 84), `min` corner south-west.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LonLatBounds {
    /// Western edge, degrees.
    pub min_lon: f64,
    /// Southern edge, degrees.
    pub min_lat: f64,
    /// Eastern edge, degrees.
    pub max_lon: f64,
    /// Northern edge, degrees.
    pub max_lat: f64,
}

impl LonLatBounds {
    /// A validated box: finite, `min <= max` on both axes (a box crossing the antimeridian
    /// must be split by the caller).
    pub fn new(min_lon: f64, min_lat: f64, max_lon: f64, max_lat: f64) -> Result<Self, MvtError> {
        if ![min_lon, min_lat, max_lon, max_lat]
            .iter()
            .all(|value| value.is_finite())
        {
            return Err(MvtError::InvalidBounds {
                reason: "coordinates must be finite",
            });
        }
        if min_lon > max_lon || min_lat > max_lat {
            return Err(MvtError::InvalidBounds {
                reason: "minimum exceeds maximum",
            });
        }
        Ok(Self {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        })
    }

    /// Whether the point lies inside or on the edge of the box.
    pub fn contains(&self, lon: f64, lat: f64) -> bool {
        lon >= self.min_lon && lon <= self.max_lon && lat >= self.min_lat && lat <= self.max_lat
    }

    /// Whether the two boxes share at least one point.
    pub fn intersects(&self, other: &LonLatBounds) -> bool {
        self.min_lon <= other.max_lon
            && other.min_lon <= self.max_lon
            && self.min_lat <= other.max_lat
            && other.min_lat <= self.max_lat
    }
}

/// Longitude/latitude in degrees to spherical mercator metres (EPSG:3857). Latitudes are
/// clamped to [`MAX_LATITUDE`].
pub fn lon_lat_to_mercator(lon: f64, lat: f64) -> (f64, f64) {
    let lat = lat.clamp(-MAX_LATITUDE, MAX_LATITUDE);
    let x = EARTH_RADIUS_METRES * lon.to_radians();
    let y = EARTH_RADIUS_METRES * (PI / 4.0 + lat.to_radians() / 2.0).tan().ln();
    (x, y)
}

/// Spherical mercator metres (EPSG:3857) to longitude/latitude in degrees.
pub fn mercator_to_lon_lat(x: f64, y: f64) -> (f64, f64) {
    let lon = (x / EARTH_RADIUS_METRES).to_degrees();
    let lat = (2.0 * (y / EARTH_RADIUS_METRES).exp().atan() - PI / 2.0).to_degrees();
    (lon, lat)
}

/// Longitude/latitude in degrees to world coordinates in the unit square (`y` down).
/// Latitudes are clamped to [`MAX_LATITUDE`]; longitudes are not wrapped.
pub fn lon_lat_to_world(lon: f64, lat: f64) -> (f64, f64) {
    let lat = lat.clamp(-MAX_LATITUDE, MAX_LATITUDE);
    let x = (lon + 180.0) / 360.0;
    let sin_lat = lat.to_radians().sin();
    let y = 0.5 - ((1.0 + sin_lat) / (1.0 - sin_lat)).ln() / (4.0 * PI);
    (x, y)
}

/// World coordinates in the unit square (`y` down) to longitude/latitude in degrees.
pub fn world_to_lon_lat(x: f64, y: f64) -> (f64, f64) {
    let lon = x * 360.0 - 180.0;
    let lat = (PI * (1.0 - 2.0 * y)).sinh().atan().to_degrees();
    (lon, lat)
}

impl TileId {
    /// A validated tile id.
    pub fn new(z: u8, x: u32, y: u32) -> Result<Self, MvtError> {
        if z > MAX_ZOOM {
            return Err(MvtError::ZoomTooLarge {
                zoom: z,
                max: MAX_ZOOM,
            });
        }
        let n = 1u64 << z;
        if u64::from(x) >= n || u64::from(y) >= n {
            return Err(MvtError::TileOutOfRange { z, x, y });
        }
        Ok(Self { z, x, y })
    }

    /// Zoom level.
    pub fn z(self) -> u8 {
        self.z
    }

    /// Column, west to east.
    pub fn x(self) -> u32 {
        self.x
    }

    /// Row, north to south.
    pub fn y(self) -> u32 {
        self.y
    }

    /// The number of tiles along one axis at zoom `z`, `2^z`.
    pub fn tiles_per_axis(z: u8) -> u32 {
        1u32 << z.min(MAX_ZOOM)
    }

    /// The tile containing a lon/lat at zoom `z`; points on the map edge belong to the last
    /// tile, latitudes beyond [`MAX_LATITUDE`] to the first or last row.
    pub fn containing(lon: f64, lat: f64, z: u8) -> Result<Self, MvtError> {
        if z > MAX_ZOOM {
            return Err(MvtError::ZoomTooLarge {
                zoom: z,
                max: MAX_ZOOM,
            });
        }
        if !lon.is_finite() || !lat.is_finite() {
            return Err(MvtError::InvalidBounds {
                reason: "coordinates must be finite",
            });
        }
        let (world_x, world_y) = lon_lat_to_world(lon.clamp(-180.0, 180.0), lat);
        let n = f64::from(Self::tiles_per_axis(z));
        let last = Self::tiles_per_axis(z) - 1;
        // Beyond `u32` (or `last`) is the last tile; NaN is made 0 by `max`.
        let index = |world: f64| {
            (world * n)
                .floor()
                .max(0.0)
                .to_u32()
                .map_or(last, |index| index.min(last))
        };
        let (x, y) = (index(world_x), index(world_y));
        Self::new(z, x, y)
    }

    /// The tile's box in lon/lat degrees.
    pub fn bounds(self) -> LonLatBounds {
        let n = f64::from(Self::tiles_per_axis(self.z));
        let (min_lon, max_lat) = world_to_lon_lat(f64::from(self.x) / n, f64::from(self.y) / n);
        let (max_lon, min_lat) =
            world_to_lon_lat(f64::from(self.x + 1) / n, f64::from(self.y + 1) / n);
        LonLatBounds {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        }
    }

    /// The tile's box in lon/lat degrees, grown by `buffer` tile-local units on each side
    /// at `extent` (the area whose features a tile with that buffer carries).
    pub fn buffered_bounds(self, extent: u32, buffer: u32) -> LonLatBounds {
        let n = f64::from(Self::tiles_per_axis(self.z));
        let margin = f64::from(buffer) / f64::from(extent.max(1));
        let west = ((f64::from(self.x) - margin) / n).max(0.0);
        let north = ((f64::from(self.y) - margin) / n).max(0.0);
        let east = ((f64::from(self.x) + 1.0 + margin) / n).min(1.0);
        let south = ((f64::from(self.y) + 1.0 + margin) / n).min(1.0);
        let (min_lon, max_lat) = world_to_lon_lat(west, north);
        let (max_lon, min_lat) = world_to_lon_lat(east, south);
        LonLatBounds {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        }
    }

    /// The parent tile one zoom level up, or `None` at zoom 0.
    pub fn parent(self) -> Option<TileId> {
        (self.z > 0).then(|| TileId {
            z: self.z - 1,
            x: self.x / 2,
            y: self.y / 2,
        })
    }

    /// The transform from lon/lat to this tile's local coordinates at `extent`.
    pub fn transform(self, extent: u32) -> Result<TileTransform, MvtError> {
        TileTransform::new(self, extent)
    }
}

impl std::fmt::Display for TileId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}/{}/{}", self.z, self.x, self.y)
    }
}

/// The block of tiles at one zoom covering a box: columns `min_x..=max_x`, rows
/// `min_y..=max_y`. Iterate it for the tile ids, row by row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileRange {
    /// Zoom level.
    pub z: u8,
    /// Westernmost column.
    pub min_x: u32,
    /// Northernmost row.
    pub min_y: u32,
    /// Easternmost column (inclusive).
    pub max_x: u32,
    /// Southernmost row (inclusive).
    pub max_y: u32,
}

impl TileRange {
    /// The tiles at zoom `z` that a box touches, edges included. The box is validated as
    /// [`LonLatBounds::new`] does, since its fields are public.
    pub fn covering(bounds: &LonLatBounds, z: u8) -> Result<Self, MvtError> {
        LonLatBounds::new(
            bounds.min_lon,
            bounds.min_lat,
            bounds.max_lon,
            bounds.max_lat,
        )?;
        let north_west = TileId::containing(bounds.min_lon, bounds.max_lat, z)?;
        let south_east = TileId::containing(bounds.max_lon, bounds.min_lat, z)?;
        Ok(Self {
            z,
            min_x: north_west.x,
            min_y: north_west.y,
            max_x: south_east.x,
            max_y: south_east.y,
        })
    }

    /// The number of tiles in the range (0 for a hand-built range whose minimum exceeds its
    /// maximum; [`TileRange::covering`] never makes one).
    pub fn len(&self) -> u64 {
        let span = |min: u32, max: u32| {
            if min > max {
                0
            } else {
                u64::from(max - min) + 1
            }
        };
        span(self.min_x, self.max_x) * span(self.min_y, self.max_y)
    }

    /// Whether the range holds no tile: only a hand-built range with a minimum above its
    /// maximum.
    pub fn is_empty(&self) -> bool {
        self.min_x > self.max_x || self.min_y > self.max_y
    }

    /// Whether the range holds the tile.
    pub fn contains(&self, tile: TileId) -> bool {
        tile.z == self.z
            && (self.min_x..=self.max_x).contains(&tile.x)
            && (self.min_y..=self.max_y).contains(&tile.y)
    }
}

impl IntoIterator for TileRange {
    type Item = TileId;
    type IntoIter = Box<dyn Iterator<Item = TileId>>;

    fn into_iter(self) -> Self::IntoIter {
        let z = self.z;
        let (min_x, max_x) = (self.min_x, self.max_x);
        Box::new(
            (self.min_y..=self.max_y)
                .flat_map(move |y| (min_x..=max_x).map(move |x| TileId { z, x, y })),
        )
    }
}

/// Maps lon/lat to one tile's local coordinates at an extent (`0..extent` inside the tile,
/// `y` down) and back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TileTransform {
    tile: TileId,
    extent: u32,
    /// World-to-local scale: `2^z * extent`.
    scale: f64,
}

impl TileTransform {
    /// A transform for `tile` at `extent` (1 to 2^30 units).
    pub fn new(tile: TileId, extent: u32) -> Result<Self, MvtError> {
        if extent == 0 || extent > 1 << 30 {
            return Err(MvtError::InvalidExtent { extent });
        }
        let scale = f64::from(TileId::tiles_per_axis(tile.z)) * f64::from(extent);
        Ok(Self {
            tile,
            extent,
            scale,
        })
    }

    /// The tile.
    pub fn tile(&self) -> TileId {
        self.tile
    }

    /// The extent.
    pub fn extent(&self) -> u32 {
        self.extent
    }

    /// Lon/lat in degrees to tile-local coordinates, unrounded.
    pub fn to_local(&self, lon: f64, lat: f64) -> (f64, f64) {
        let (world_x, world_y) = lon_lat_to_world(lon, lat);
        let extent = f64::from(self.extent);
        (
            world_x * self.scale - f64::from(self.tile.x) * extent,
            world_y * self.scale - f64::from(self.tile.y) * extent,
        )
    }

    /// Lon/lat in degrees to integer tile-local coordinates (rounded to the nearest unit).
    #[allow(clippy::cast_possible_truncation)] // saturates far outside the tile, as documented
    pub fn to_local_integer(&self, lon: f64, lat: f64) -> (i64, i64) {
        let (x, y) = self.to_local(lon, lat);
        (x.round() as i64, y.round() as i64)
    }

    /// Tile-local coordinates back to lon/lat in degrees.
    pub fn to_lon_lat(&self, x: f64, y: f64) -> (f64, f64) {
        let extent = f64::from(self.extent);
        let world_x = (x + f64::from(self.tile.x) * extent) / self.scale;
        let world_y = (y + f64::from(self.tile.y) * extent) / self.scale;
        world_to_lon_lat(world_x, world_y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_out_of_range_tiles() {
        assert!(TileId::new(0, 0, 0).is_ok());
        assert_eq!(
            TileId::new(1, 2, 0),
            Err(MvtError::TileOutOfRange { z: 1, x: 2, y: 0 })
        );
        assert_eq!(
            TileId::new(25, 0, 0),
            Err(MvtError::ZoomTooLarge { zoom: 25, max: 24 })
        );
        assert!(TileId::new(24, (1 << 24) - 1, (1 << 24) - 1).is_ok());
    }

    #[test]
    fn world_tile_bounds_are_the_mercator_square() {
        let bounds = TileId::new(0, 0, 0).unwrap().bounds();
        assert!((bounds.min_lon + 180.0).abs() < 1e-9);
        assert!((bounds.max_lon - 180.0).abs() < 1e-9);
        assert!((bounds.max_lat - MAX_LATITUDE).abs() < 1e-9);
        assert!((bounds.min_lat + MAX_LATITUDE).abs() < 1e-9);
    }

    #[test]
    fn known_tile_contains_known_place() {
        // Berlin's Brandenburg Gate: x = (13.3777 + 180) / 360 * 2^14 = 8800.8.
        let tile = TileId::containing(13.377_7, 52.516_3, 14).unwrap();
        assert_eq!((tile.x(), tile.y()), (8800, 5373));
        assert!(tile.bounds().contains(13.377_7, 52.516_3));
    }

    #[test]
    fn mercator_round_trip() {
        let (x, y) = lon_lat_to_mercator(13.4, 52.5);
        assert!((x - 1_491_681.0).abs() < 10.0);
        let (lon, lat) = mercator_to_lon_lat(x, y);
        assert!((lon - 13.4).abs() < 1e-9 && (lat - 52.5).abs() < 1e-9);
    }

    #[test]
    fn covering_range_counts_tiles() {
        let bounds = LonLatBounds::new(-180.0, -85.0, 180.0, 85.0).unwrap();
        let range = TileRange::covering(&bounds, 2).unwrap();
        assert_eq!(range.len(), 16);
        assert_eq!(range.into_iter().count(), 16);
        let bounds = TileId::new(10, 500, 300).unwrap().bounds();
        let inner = LonLatBounds::new(
            bounds.min_lon + 1e-6,
            bounds.min_lat + 1e-6,
            bounds.max_lon - 1e-6,
            bounds.max_lat - 1e-6,
        )
        .unwrap();
        let range = TileRange::covering(&inner, 10).unwrap();
        assert_eq!(
            range.into_iter().collect::<Vec<_>>(),
            vec![TileId::new(10, 500, 300).unwrap()]
        );
    }

    #[test]
    fn covering_rejects_a_hand_built_inverted_box() {
        let inverted = LonLatBounds {
            min_lon: 14.0,
            min_lat: 55.0,
            max_lon: 13.0,
            max_lat: 56.0,
        };
        assert!(matches!(
            TileRange::covering(&inverted, 10),
            Err(MvtError::InvalidBounds { .. })
        ));
        let not_finite = LonLatBounds {
            min_lon: f64::NAN,
            ..inverted
        };
        assert!(matches!(
            TileRange::covering(&not_finite, 10),
            Err(MvtError::InvalidBounds { .. })
        ));
    }

    #[test]
    fn a_hand_built_inverted_range_is_empty() {
        let range = TileRange {
            z: 3,
            min_x: 5,
            min_y: 1,
            max_x: 4,
            max_y: 2,
        };
        assert!(range.is_empty());
        assert_eq!(range.len(), 0);
        assert_eq!(range.into_iter().count(), 0);
        let covering = TileRange::covering(&TileId::new(3, 4, 2).unwrap().bounds(), 3).unwrap();
        assert!(!covering.is_empty());
    }

    #[test]
    fn local_coordinates_span_the_extent() {
        let tile = TileId::new(14, 8800, 5373).unwrap();
        let transform = tile.transform(4096).unwrap();
        let bounds = tile.bounds();
        let (x, y) = transform.to_local(bounds.min_lon, bounds.max_lat);
        assert!(x.abs() < 1e-6 && y.abs() < 1e-6);
        let (x, y) = transform.to_local(bounds.max_lon, bounds.min_lat);
        assert!((x - 4096.0).abs() < 1e-6 && (y - 4096.0).abs() < 1e-6);
    }
}
