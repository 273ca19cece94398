//! From lon/lat geometries to one tile's integer geometries: project, clip with a buffer,
//! simplify, round.

use std::cell::RefCell;

use geo::{Coord, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};

use crate::clip::{ClipBox, clip_line_string, clip_polygon};
use crate::simplify::{DEFAULT_TOLERANCE, Simplifier, round_to_i32, simplify_polygon};
use crate::tile::{DEFAULT_EXTENT, TileId, TileTransform};
use crate::{Geometry, MvtError};

/// How geometries are fitted to a tile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProjectionConfig {
    /// Tile-local units per tile side.
    pub extent: u32,
    /// Units kept beyond each tile edge, so lines and polygons join seamlessly.
    pub buffer: u32,
    /// Simplification tolerance in tile units; zero keeps every vertex.
    pub tolerance: f64,
}

impl Default for ProjectionConfig {
    /// Extent 4096, buffer 64, tolerance one unit.
    fn default() -> Self {
        Self {
            extent: DEFAULT_EXTENT,
            buffer: 64,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

/// Projects lon/lat geometries (`x` = longitude, `y` = latitude, degrees) into one tile.
/// Each method returns `None` when nothing of the geometry is left in the buffered tile.
#[derive(Debug, Clone, Copy)]
pub struct TileProjector {
    transform: TileTransform,
    fast: FastProjection,
    clip_box: ClipBox,
    tolerance: f64,
}

impl TileProjector {
    /// A projector for `tile`.
    pub fn new(tile: TileId, config: ProjectionConfig) -> Result<Self, MvtError> {
        let transform = TileTransform::new(tile, config.extent)?;
        Ok(Self {
            transform,
            fast: FastProjection::for_tile(&transform, config),
            clip_box: ClipBox::for_tile(config.extent, config.buffer),
            tolerance: config.tolerance.max(0.0),
        })
    }

    /// The underlying lon/lat to tile-local transform.
    pub fn transform(&self) -> &TileTransform {
        &self.transform
    }

    /// Lon/lat in degrees to tile-local coordinates, unrounded: the transform's result
    /// within a billionth of a unit, computed without transcendental functions near the tile.
    pub fn to_local(&self, lon: f64, lat: f64) -> (f64, f64) {
        let coord = self.local(Coord { x: lon, y: lat });
        (coord.x, coord.y)
    }

    #[inline]
    fn local(&self, coord: Coord<f64>) -> Coord<f64> {
        self.fast.project(&self.transform, coord)
    }

    fn project_line(&self, line: &LineString<f64>) -> LineString<f64> {
        line.coords().map(|coord| self.local(*coord)).collect()
    }

    /// A point, if inside the buffered tile.
    pub fn point(&self, lon: f64, lat: f64) -> Option<Geometry> {
        let coord = self.local(Coord { x: lon, y: lat });
        self.clip_box
            .contains(coord)
            .then(|| Geometry::Points(MultiPoint::new(vec![Point(round(coord))])))
    }

    /// The points inside the buffered tile.
    pub fn multi_point(&self, points: &MultiPoint<f64>) -> Option<Geometry> {
        let kept: Vec<Point<i32>> = points
            .iter()
            .map(|point| self.local(point.0))
            .filter(|coord| self.clip_box.contains(*coord))
            .map(|coord| Point(round(coord)))
            .collect();
        (!kept.is_empty()).then(|| Geometry::Points(MultiPoint::new(kept)))
    }

    /// A line, clipped and simplified; it may come out as several parts.
    pub fn line_string(&self, line: &LineString<f64>) -> Option<Geometry> {
        self.lines(std::iter::once(line))
    }

    /// Lines, clipped and simplified.
    pub fn multi_line_string(&self, lines: &MultiLineString<f64>) -> Option<Geometry> {
        self.lines(lines.iter())
    }

    fn lines<'a>(&self, lines: impl Iterator<Item = &'a LineString<f64>>) -> Option<Geometry> {
        // Scratch buffers live per thread: a tile of 500 lines would otherwise allocate and
        // free them 500 times, a tenth of its encoding time.
        thread_local! {
            static SCRATCH: RefCell<LineScratch> = RefCell::default();
        }
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => self.lines_with(lines, &mut scratch),
            Err(_) => self.lines_with(lines, &mut LineScratch::default()),
        })
    }

    fn lines_with<'a>(
        &self,
        lines: impl Iterator<Item = &'a LineString<f64>>,
        scratch: &mut LineScratch,
    ) -> Option<Geometry> {
        let LineScratch {
            local,
            simplifier,
            rounded,
        } = scratch;
        let mut parts = Vec::new();
        let mut add_part = |coords: &[Coord<f64>], simplifier: &mut Simplifier| {
            simplifier.simplify_rounded(coords, self.tolerance, rounded);
            if rounded.len() >= 2 {
                parts.push(LineString::new(rounded.clone()));
            }
        };
        for line in lines {
            local.clear();
            local.extend(line.coords().map(|coord| self.local(*coord)));
            // Most lines of a tile lie wholly inside it: no clipping, no copy.
            if local.iter().all(|coord| self.clip_box.contains(*coord)) {
                if local.len() >= 2 {
                    add_part(local, simplifier);
                }
            } else {
                let projected = LineString::new(std::mem::take(local));
                for part in clip_line_string(&projected, &self.clip_box) {
                    add_part(&part.0, simplifier);
                }
                *local = projected.0;
            }
        }
        (!parts.is_empty()).then(|| Geometry::LineStrings(MultiLineString::new(parts)))
    }

    /// A polygon, clipped and simplified.
    pub fn polygon(&self, polygon: &Polygon<f64>) -> Option<Geometry> {
        self.multi_polygon(&MultiPolygon::new(vec![polygon.clone()]))
    }

    /// Polygons, clipped and simplified; rings that collapse are dropped.
    pub fn multi_polygon(&self, polygons: &MultiPolygon<f64>) -> Option<Geometry> {
        let mut kept = Vec::new();
        for polygon in polygons {
            let local = Polygon::new(
                self.project_line(polygon.exterior()),
                polygon
                    .interiors()
                    .iter()
                    .map(|ring| self.project_line(ring))
                    .collect(),
            );
            let Some(clipped) = clip_polygon(&local, &self.clip_box) else {
                continue;
            };
            let simplified = simplify_polygon(&clipped, self.tolerance);
            let exterior = round_line(simplified.exterior());
            if exterior.0.len() < 4 {
                continue;
            }
            let interiors = simplified
                .interiors()
                .iter()
                .map(round_line)
                .filter(|ring| ring.0.len() >= 4)
                .collect();
            kept.push(Polygon::new(exterior, interiors));
        }
        (!kept.is_empty()).then(|| Geometry::Polygons(MultiPolygon::new(kept)))
    }
}

/// Buffers reused from one line to the next.
#[derive(Debug, Default)]
struct LineScratch {
    local: Vec<Coord<f64>>,
    simplifier: Simplifier,
    rounded: Vec<Coord<i32>>,
}

/// World-to-local scale of a transform: `2^z * extent`.
fn scale(transform: &TileTransform) -> f64 {
    f64::from(TileId::tiles_per_axis(transform.tile().z())) * f64::from(transform.extent())
}

/// The degree of the polynomial standing in for the Mercator formula near a tile.
const DEGREE: usize = 6;

/// Largest difference allowed between the polynomial and the exact formula, in tile units,
/// for a world-to-local scale: far below the rounding to integers, and a few times the
/// exact formula's own rounding error (its `y` is a world coordinate times the scale).
fn fast_tolerance(scale: f64) -> f64 {
    1e-9 + scale * 1e-15
}

/// Lon/lat to tile-local coordinates without a `sin` and a `ln` per vertex: near the tile,
/// `y` is a Taylor polynomial of the Mercator formula in the latitude. Beyond a tile's height
/// above or below the tile, or when the polynomial is not within
/// [`fast_tolerance`] of the exact formula (low zooms, where a tile spans many degrees), the
/// exact formula is used.
#[derive(Debug, Clone, Copy)]
struct FastProjection {
    /// `2^z * extent`, and the tile's western edge at that scale: `x` is computed exactly as
    /// [`TileTransform::to_local`] does.
    x_scale: f64,
    x_origin: f64,
    /// Latitudes (degrees) where the polynomial holds; empty when it never does.
    min_lat: f64,
    max_lat: f64,
    center_lat: f64,
    /// Coefficients of `y` in powers of `lat - center_lat` (degrees), lowest first.
    coefficients: [f64; DEGREE + 1],
}

impl FastProjection {
    /// The tile and a tile's height above and below it (lines leaving the tile are projected
    /// before they are clipped), or if the polynomial does not hold that far, the buffered
    /// tile.
    fn for_tile(transform: &TileTransform, config: ProjectionConfig) -> Self {
        let tile = transform.tile();
        let wide = Self::new(transform, tile.buffered_bounds(1, 1));
        if wide.min_lat <= wide.max_lat {
            wide
        } else {
            Self::new(
                transform,
                tile.buffered_bounds(config.extent, config.buffer),
            )
        }
    }

    fn new(transform: &TileTransform, bounds: crate::LonLatBounds) -> Self {
        let center_lat = f64::midpoint(bounds.min_lat, bounds.max_lat);
        let coefficients = Self::taylor(transform, center_lat);
        let mut fast = Self {
            x_scale: scale(transform),
            x_origin: f64::from(transform.tile().x()) * f64::from(transform.extent()),
            min_lat: bounds.min_lat,
            max_lat: bounds.max_lat,
            center_lat,
            coefficients,
        };
        let samples = 16;
        let holds = (0..=samples).all(|step| {
            let lat = bounds.min_lat
                + (bounds.max_lat - bounds.min_lat) * f64::from(step) / f64::from(samples);
            let exact = transform.to_local(0.0, lat).1;
            (fast.polynomial(lat) - exact).abs() <= fast_tolerance(fast.x_scale)
        });
        if !holds || !(bounds.max_lat - bounds.min_lat).is_finite() {
            fast.min_lat = f64::INFINITY;
            fast.max_lat = f64::NEG_INFINITY;
        }
        fast
    }

    /// Taylor coefficients of the tile-local `y` around `lat0` (degrees). With
    /// `psi(phi) = atanh(sin(phi))` the Mercator ordinate, `psi' = sec`, and the higher
    /// derivatives are polynomials in `S = sec(phi)` and `T = tan(phi)`.
    fn taylor(transform: &TileTransform, lat0: f64) -> [f64; DEGREE + 1] {
        let phi = lat0.to_radians();
        let (s, t) = (1.0 / phi.cos(), phi.tan());
        let (s3, s5) = (s * s * s, s * s * s * s * s);
        let derivatives = [
            s,
            s * t,
            s * t * t + s3,
            s * t.powi(3) + 5.0 * s3 * t,
            s * t.powi(4) + 18.0 * s3 * t * t + 5.0 * s5,
            s * t.powi(5) + 58.0 * s3 * t.powi(3) + 61.0 * s5 * t,
        ];
        // World y = 0.5 - psi / (2 pi); local y = world y * scale - offset.
        let (_, y0) = transform.to_local(0.0, lat0);
        let y_per_psi = -scale(transform) / std::f64::consts::TAU;
        let mut coefficients = [0.0; DEGREE + 1];
        coefficients[0] = y0;
        let mut factor = 1.0;
        let mut k_float = 0.0;
        for (power, derivative) in derivatives.iter().enumerate() {
            let k = power + 1;
            k_float += 1.0;
            factor *= std::f64::consts::PI / 180.0 / k_float;
            coefficients[k] = y_per_psi * derivative * factor;
        }
        coefficients
    }

    /// Estrin's scheme rather than Horner's: the same polynomial in three short chains of
    /// multiplications instead of one of six, so projecting a line is not one long wait.
    #[inline]
    fn polynomial(&self, lat: f64) -> f64 {
        let d = lat - self.center_lat;
        let [c0, c1, c2, c3, c4, c5, c6] = self.coefficients;
        let d2 = d * d;
        let d4 = d2 * d2;
        (c0 + c1 * d) + (c2 + c3 * d) * d2 + ((c4 + c5 * d) + c6 * d2) * d4
    }

    #[inline]
    fn project(&self, transform: &TileTransform, coord: Coord<f64>) -> Coord<f64> {
        if coord.y >= self.min_lat && coord.y <= self.max_lat {
            Coord {
                x: (coord.x + 180.0) / 360.0 * self.x_scale - self.x_origin,
                y: self.polynomial(coord.y),
            }
        } else {
            let (x, y) = transform.to_local(coord.x, coord.y);
            Coord { x, y }
        }
    }
}

fn round(coord: Coord<f64>) -> Coord<i32> {
    Coord {
        x: round_to_i32(coord.x),
        y: round_to_i32(coord.y),
    }
}

/// Rounds and drops consecutive repeats.
fn round_line(line: &LineString<f64>) -> LineString<i32> {
    let mut rounded: Vec<Coord<i32>> = Vec::with_capacity(line.0.len());
    for coord in line.coords() {
        let coord = round(*coord);
        if rounded.last() != Some(&coord) {
            rounded.push(coord);
        }
    }
    LineString::new(rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::line_string;

    #[test]
    fn line_through_a_tile_is_clipped_into_its_buffer() {
        let tile = TileId::new(14, 8800, 5373).unwrap();
        let projector = TileProjector::new(tile, ProjectionConfig::default()).unwrap();
        let bounds = tile.bounds();
        let mid_lat = f64::midpoint(bounds.min_lat, bounds.max_lat);
        let line = line_string![(x: bounds.min_lon - 1.0, y: mid_lat), (x: bounds.max_lon + 1.0, y: mid_lat)];
        let Some(Geometry::LineStrings(lines)) = projector.line_string(&line) else {
            panic!("expected lines");
        };
        let xs: Vec<i32> = lines.0[0].coords().map(|c| c.x).collect();
        assert_eq!(xs, vec![-64, 4096 + 64]);
        assert!(projector.point(bounds.max_lon + 1.0, mid_lat).is_none());
    }

    #[test]
    fn fast_projection_matches_the_exact_formula() {
        let mut fast_tiles = 0;
        for z in [0u8, 4, 8, 10, 12, 14, 18, 24] {
            for (lon, lat) in [
                (13.3777, 52.5163),
                (-70.0, -33.4),
                (0.0, 0.0),
                (179.9, 84.9),
            ] {
                let tile = TileId::containing(lon, lat, z).unwrap();
                let projector = TileProjector::new(tile, ProjectionConfig::default()).unwrap();
                if projector.fast.min_lat <= projector.fast.max_lat {
                    fast_tiles += 1;
                }
                let bounds = tile.buffered_bounds(1, 1);
                for step in 0..=100 {
                    let t = f64::from(step) / 100.0;
                    let lon = bounds.min_lon + (bounds.max_lon - bounds.min_lon) * t;
                    let lat = bounds.min_lat + (bounds.max_lat - bounds.min_lat) * (1.0 - t);
                    let fast = projector.local(Coord { x: lon, y: lat });
                    let (x, y) = projector.transform().to_local(lon, lat);
                    let tolerance = fast_tolerance(scale(projector.transform()));
                    assert!(
                        fast.x.to_bits() == x.to_bits(),
                        "{z} {lon} {lat}: x {} vs {x}",
                        fast.x
                    );
                    assert!(
                        (fast.y - y).abs() <= tolerance,
                        "{z} {lon} {lat}: y {} vs {y}",
                        fast.y
                    );
                }
            }
        }
        // From z8 up (the zooms of lines and points) the polynomial serves.
        assert!(fast_tiles >= 16, "{fast_tiles}");
    }
}
