//! From lon/lat geometries to one tile's integer geometries: project, clip with a buffer,
//! simplify, round.

use geo::{Coord, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};

use crate::clip::{ClipBox, clip_line_string, clip_polygon};
use crate::simplify::{DEFAULT_TOLERANCE, simplify_line_string, simplify_polygon};
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
    clip_box: ClipBox,
    tolerance: f64,
}

impl TileProjector {
    /// A projector for `tile`.
    pub fn new(tile: TileId, config: ProjectionConfig) -> Result<Self, MvtError> {
        Ok(Self {
            transform: TileTransform::new(tile, config.extent)?,
            clip_box: ClipBox::for_tile(config.extent, config.buffer),
            tolerance: config.tolerance.max(0.0),
        })
    }

    /// The underlying lon/lat to tile-local transform.
    pub fn transform(&self) -> &TileTransform {
        &self.transform
    }

    fn local(&self, coord: Coord<f64>) -> Coord<f64> {
        let (x, y) = self.transform.to_local(coord.x, coord.y);
        Coord { x, y }
    }

    fn project_line(&self, line: &LineString<f64>) -> LineString<f64> {
        line.coords().map(|coord| self.local(*coord)).collect()
    }

    /// A point, if inside the buffered tile.
    pub fn point(&self, lon: f64, lat: f64) -> Option<Geometry> {
        self.multi_point(&MultiPoint::new(vec![Point::new(lon, lat)]))
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
        self.multi_line_string(&MultiLineString::new(vec![line.clone()]))
    }

    /// Lines, clipped and simplified.
    pub fn multi_line_string(&self, lines: &MultiLineString<f64>) -> Option<Geometry> {
        let mut parts = Vec::new();
        for line in lines {
            let local = self.project_line(line);
            for part in clip_line_string(&local, &self.clip_box) {
                let simplified = simplify_line_string(&part, self.tolerance);
                let rounded = round_line(&simplified);
                if rounded.0.len() >= 2 {
                    parts.push(rounded);
                }
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

fn round(coord: Coord<f64>) -> Coord<i32> {
    Coord {
        x: coord.x.round() as i32,
        y: coord.y.round() as i32,
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
}
