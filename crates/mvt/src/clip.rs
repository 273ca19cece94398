//! Clipping of points, lines and polygons to a tile's box with a buffer, in tile-local
//! floating-point coordinates.
//!
//! Lines use Liang–Barsky per segment and keep the pieces inside; polygons use
//! Sutherland–Hodgman per ring against the (convex, axis-aligned) box, as tile servers do:
//! a ring cut into several parts stays one ring with edges along the buffer, which is
//! invisible once rendered because the buffer lies outside the tile.

use geo::{Coord, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};

/// An axis-aligned box in tile-local coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClipBox {
    /// Left edge.
    pub min_x: f64,
    /// Top edge.
    pub min_y: f64,
    /// Right edge.
    pub max_x: f64,
    /// Bottom edge.
    pub max_y: f64,
}

impl ClipBox {
    /// The tile `0..extent` grown by `buffer` units on each side.
    pub fn for_tile(extent: u32, buffer: u32) -> Self {
        let buffer = f64::from(buffer);
        Self {
            min_x: -buffer,
            min_y: -buffer,
            max_x: f64::from(extent) + buffer,
            max_y: f64::from(extent) + buffer,
        }
    }

    /// Whether the point lies inside or on the edge.
    pub fn contains(&self, coord: Coord<f64>) -> bool {
        coord.x >= self.min_x
            && coord.x <= self.max_x
            && coord.y >= self.min_y
            && coord.y <= self.max_y
    }
}

/// The points inside the box.
pub fn clip_points(points: &MultiPoint<f64>, clip_box: &ClipBox) -> MultiPoint<f64> {
    points
        .iter()
        .filter(|point| clip_box.contains(point.0))
        .copied()
        .collect::<Vec<Point<f64>>>()
        .into()
}

/// The parts of a line inside the box, each a line of at least two points.
pub fn clip_line_string(line: &LineString<f64>, clip_box: &ClipBox) -> MultiLineString<f64> {
    // Most lines of a tile lie wholly inside it: one pass instead of a segment-by-segment cut.
    if line.0.iter().all(|coord| clip_box.contains(*coord)) {
        return MultiLineString::new(if line.0.len() >= 2 {
            vec![line.clone()]
        } else {
            Vec::new()
        });
    }
    let mut parts = Vec::new();
    let mut current: Vec<Coord<f64>> = Vec::new();
    for segment in line.0.windows(2) {
        let (start, end) = (segment[0], segment[1]);
        match clip_segment(start, end, clip_box) {
            Some((clipped_start, clipped_end)) => {
                if current.last() != Some(&clipped_start) {
                    flush_line(&mut current, &mut parts);
                    current.push(clipped_start);
                }
                current.push(clipped_end);
                // Leaving the box ends this part.
                if clipped_end != end {
                    flush_line(&mut current, &mut parts);
                }
            }
            None => flush_line(&mut current, &mut parts),
        }
    }
    flush_line(&mut current, &mut parts);
    MultiLineString::new(parts)
}

/// The parts of several lines inside the box.
pub fn clip_multi_line_string(
    lines: &MultiLineString<f64>,
    clip_box: &ClipBox,
) -> MultiLineString<f64> {
    MultiLineString::new(
        lines
            .iter()
            .flat_map(|line| clip_line_string(line, clip_box).0)
            .collect(),
    )
}

fn flush_line(current: &mut Vec<Coord<f64>>, parts: &mut Vec<LineString<f64>>) {
    if current.len() >= 2 {
        parts.push(LineString::new(std::mem::take(current)));
    } else {
        current.clear();
    }
}

/// Liang–Barsky: the part of segment `start..end` inside the box.
fn clip_segment(
    start: Coord<f64>,
    end: Coord<f64>,
    clip_box: &ClipBox,
) -> Option<(Coord<f64>, Coord<f64>)> {
    let delta = end - start;
    let mut entering: f64 = 0.0;
    let mut leaving: f64 = 1.0;
    let checks = [
        (-delta.x, start.x - clip_box.min_x),
        (delta.x, clip_box.max_x - start.x),
        (-delta.y, start.y - clip_box.min_y),
        (delta.y, clip_box.max_y - start.y),
    ];
    for (direction, distance) in checks {
        if direction == 0.0 {
            if distance < 0.0 {
                return None;
            }
        } else {
            let ratio = distance / direction;
            if direction < 0.0 {
                entering = entering.max(ratio);
            } else {
                leaving = leaving.min(ratio);
            }
        }
    }
    if entering > leaving {
        return None;
    }
    let clipped_start = if entering > 0.0 {
        start + delta * entering
    } else {
        start
    };
    let clipped_end = if leaving < 1.0 {
        start + delta * leaving
    } else {
        end
    };
    Some((clipped_start, clipped_end))
}

/// A polygon cut to the box, or `None` when its exterior falls outside. Holes that fall
/// outside are dropped.
pub fn clip_polygon(polygon: &Polygon<f64>, clip_box: &ClipBox) -> Option<Polygon<f64>> {
    let exterior = clip_ring(polygon.exterior(), clip_box)?;
    let interiors = polygon
        .interiors()
        .iter()
        .filter_map(|ring| clip_ring(ring, clip_box))
        .collect();
    Some(Polygon::new(exterior, interiors))
}

/// Several polygons cut to the box; those outside disappear.
pub fn clip_multi_polygon(polygons: &MultiPolygon<f64>, clip_box: &ClipBox) -> MultiPolygon<f64> {
    MultiPolygon::new(
        polygons
            .iter()
            .filter_map(|polygon| clip_polygon(polygon, clip_box))
            .collect(),
    )
}

/// Sutherland–Hodgman against the four edges; `None` when fewer than three points remain.
fn clip_ring(ring: &LineString<f64>, clip_box: &ClipBox) -> Option<LineString<f64>> {
    let mut points: Vec<Coord<f64>> = ring.0.clone();
    if points.len() > 1 && points.first() == points.last() {
        points.pop();
    }
    if points.iter().all(|point| clip_box.contains(*point)) {
        return (points.len() >= 3).then(|| LineString::new(points));
    }
    let edges: [(InsideTest, Axis); 4] = [
        (
            |point, clip_box| point.x >= clip_box.min_x,
            Axis::X(clip_box.min_x),
        ),
        (
            |point, clip_box| point.x <= clip_box.max_x,
            Axis::X(clip_box.max_x),
        ),
        (
            |point, clip_box| point.y >= clip_box.min_y,
            Axis::Y(clip_box.min_y),
        ),
        (
            |point, clip_box| point.y <= clip_box.max_y,
            Axis::Y(clip_box.max_y),
        ),
    ];
    for (inside, axis) in edges {
        if points.is_empty() {
            break;
        }
        let mut output = Vec::with_capacity(points.len() + 4);
        let mut previous = points[points.len() - 1];
        for &point in &points {
            let point_inside = inside(point, clip_box);
            let previous_inside = inside(previous, clip_box);
            if point_inside {
                if !previous_inside {
                    output.push(axis.intersect(previous, point));
                }
                output.push(point);
            } else if previous_inside {
                output.push(axis.intersect(previous, point));
            }
            previous = point;
        }
        points = output;
    }
    (points.len() >= 3).then(|| LineString::new(points))
}

/// Whether a point is on the inner side of one box edge.
type InsideTest = fn(Coord<f64>, &ClipBox) -> bool;

#[derive(Clone, Copy)]
enum Axis {
    X(f64),
    Y(f64),
}

impl Axis {
    fn intersect(self, from: Coord<f64>, to: Coord<f64>) -> Coord<f64> {
        match self {
            Axis::X(x) => {
                let ratio = (x - from.x) / (to.x - from.x);
                Coord {
                    x,
                    y: from.y + (to.y - from.y) * ratio,
                }
            }
            Axis::Y(y) => {
                let ratio = (y - from.y) / (to.y - from.y);
                Coord {
                    x: from.x + (to.x - from.x) * ratio,
                    y,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::{coord, line_string, polygon};

    #[test]
    fn line_crossing_the_tile_is_cut_at_the_edges() {
        let clip_box = ClipBox::for_tile(4096, 0);
        let line = line_string![(x: -100.0, y: 100.0), (x: 5000.0, y: 100.0)];
        let clipped = clip_line_string(&line, &clip_box);
        assert_eq!(
            clipped.0,
            vec![line_string![(x: 0.0, y: 100.0), (x: 4096.0, y: 100.0)]]
        );
    }

    #[test]
    fn line_leaving_and_reentering_becomes_two_parts() {
        let clip_box = ClipBox::for_tile(100, 0);
        let line = line_string![(x: 10.0, y: 10.0), (x: 10.0, y: 200.0), (x: 50.0, y: 200.0), (x: 50.0, y: 10.0)];
        let clipped = clip_line_string(&line, &clip_box);
        assert_eq!(clipped.0.len(), 2);
        assert_eq!(
            clipped.0[0],
            line_string![(x: 10.0, y: 10.0), (x: 10.0, y: 100.0)]
        );
        assert_eq!(
            clipped.0[1],
            line_string![(x: 50.0, y: 100.0), (x: 50.0, y: 10.0)]
        );
    }

    #[test]
    fn line_outside_disappears() {
        let clip_box = ClipBox::for_tile(100, 8);
        let line = line_string![(x: 200.0, y: 10.0), (x: 300.0, y: 10.0)];
        assert!(clip_line_string(&line, &clip_box).0.is_empty());
    }

    #[test]
    fn polygon_is_cut_to_the_buffered_box() {
        let clip_box = ClipBox::for_tile(100, 10);
        let square = polygon![(x: -50.0, y: -50.0), (x: 50.0, y: -50.0), (x: 50.0, y: 50.0), (x: -50.0, y: 50.0)];
        let clipped = clip_polygon(&square, &clip_box).unwrap();
        let mut xs: Vec<f64> = clipped.exterior().coords().map(|c| c.x).collect();
        xs.sort_by(f64::total_cmp);
        assert_eq!(xs.first(), Some(&-10.0));
        assert_eq!(xs.last(), Some(&50.0));
        assert!(clipped.exterior().coords().all(|c| c.y >= -10.0));
        assert!(
            clip_polygon(
                &polygon![(x: 500.0, y: 500.0), (x: 600.0, y: 500.0), (x: 600.0, y: 600.0)],
                &clip_box
            )
            .is_none()
        );
    }

    #[test]
    fn points_outside_are_dropped() {
        let clip_box = ClipBox::for_tile(4096, 64);
        let points = MultiPoint::new(vec![
            Point::new(-64.0, 0.0),
            Point::new(-65.0, 0.0),
            Point::from(coord! { x: 4000.0, y: 4100.0 }),
        ]);
        assert_eq!(clip_points(&points, &clip_box).0.len(), 2);
    }
}
