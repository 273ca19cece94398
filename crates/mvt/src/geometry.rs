//! Geometries in tile-local integer coordinates, as a vector tile carries them.

use geo::{LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};

/// One feature's geometry in tile-local integer coordinates (`y` down).
///
/// The three variants are the three MVT geometry types; a single point, line or polygon is
/// the one-element case of its multi form (convert with `From`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Geometry {
    /// `POINT`: one or more points.
    Points(MultiPoint<i32>),
    /// `LINESTRING`: one or more lines.
    LineStrings(MultiLineString<i32>),
    /// `POLYGON`: one or more polygons with holes.
    Polygons(MultiPolygon<i32>),
}

impl Geometry {
    /// Whether the geometry holds nothing to draw.
    pub fn is_empty(&self) -> bool {
        match self {
            Geometry::Points(points) => points.0.is_empty(),
            Geometry::LineStrings(lines) => lines.0.is_empty(),
            Geometry::Polygons(polygons) => polygons.0.is_empty(),
        }
    }
}

impl From<Point<i32>> for Geometry {
    fn from(point: Point<i32>) -> Self {
        Geometry::Points(MultiPoint::new(vec![point]))
    }
}

impl From<MultiPoint<i32>> for Geometry {
    fn from(points: MultiPoint<i32>) -> Self {
        Geometry::Points(points)
    }
}

impl From<LineString<i32>> for Geometry {
    fn from(line: LineString<i32>) -> Self {
        Geometry::LineStrings(MultiLineString::new(vec![line]))
    }
}

impl From<MultiLineString<i32>> for Geometry {
    fn from(lines: MultiLineString<i32>) -> Self {
        Geometry::LineStrings(lines)
    }
}

impl From<Polygon<i32>> for Geometry {
    fn from(polygon: Polygon<i32>) -> Self {
        Geometry::Polygons(MultiPolygon::new(vec![polygon]))
    }
}

impl From<MultiPolygon<i32>> for Geometry {
    fn from(polygons: MultiPolygon<i32>) -> Self {
        Geometry::Polygons(polygons)
    }
}
