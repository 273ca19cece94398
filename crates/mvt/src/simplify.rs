//! Line simplification per zoom, with geo's Ramer–Douglas–Peucker.
//!
//! The tolerance is in tile-local units, so one tolerance serves every zoom: a unit covers
//! half the ground at each zoom level down, and lines keep the detail a tile can show.
//!
//! Lines first lose the vertices closer than the tolerance to the previous kept vertex (a
//! linear pass, as simplify-js does), so Ramer–Douglas–Peucker, quadratic at worst, only
//! sees the vertices a tile can tell apart: dense GPS tracks shrink several-fold before it.

use geo::{Coord, LineString, MultiLineString, MultiPolygon, Polygon, Simplify};

/// The tolerance tile servers commonly use: one unit at extent 4096.
pub const DEFAULT_TOLERANCE: f64 = 1.0;

/// The tolerance in tile units for a zoom: none at or above `max_zoom` (where the data is
/// shown at full detail and may be over-zoomed), `tolerance` below it.
pub fn tolerance_for_zoom(z: u8, max_zoom: u8, tolerance: f64) -> f64 {
    if z >= max_zoom { 0.0 } else { tolerance }
}

/// A simplified line; a tolerance of zero or less returns it unchanged. Every removed vertex
/// lies within twice the tolerance of the result.
pub fn simplify_line_string(line: &LineString<f64>, tolerance: f64) -> LineString<f64> {
    if tolerance <= 0.0 {
        return line.clone();
    }
    LineString::new(douglas_peucker(
        &drop_close_vertices(line, tolerance).0,
        tolerance,
    ))
}

/// Simplified lines.
pub fn simplify_multi_line_string(
    lines: &MultiLineString<f64>,
    tolerance: f64,
) -> MultiLineString<f64> {
    MultiLineString::new(
        lines
            .iter()
            .map(|line| simplify_line_string(line, tolerance))
            .collect(),
    )
}

/// Ramer–Douglas–Peucker without recursion or per-level allocation (geo's `Simplify`, used
/// for polygons, spent most of a 500-line tile's encoding time here).
fn douglas_peucker(coords: &[Coord<f64>], tolerance: f64) -> Vec<Coord<f64>> {
    let count = coords.len();
    if count < 3 {
        return coords.to_vec();
    }
    let squared_tolerance = tolerance * tolerance;
    let mut keep = vec![false; count];
    keep[0] = true;
    keep[count - 1] = true;
    let mut ranges = vec![(0, count - 1)];
    while let Some((first, last)) = ranges.pop() {
        let start = coords[first];
        let direction = coords[last] - start;
        let squared_length = direction.x * direction.x + direction.y * direction.y;
        let mut farthest = (0.0, first);
        for (index, coord) in coords.iter().enumerate().take(last).skip(first + 1) {
            let offset = *coord - start;
            let along = if squared_length > 0.0 {
                ((offset.x * direction.x + offset.y * direction.y) / squared_length).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let away = offset - direction * along;
            let squared_distance = away.x * away.x + away.y * away.y;
            if squared_distance > farthest.0 {
                farthest = (squared_distance, index);
            }
        }
        if farthest.0 > squared_tolerance {
            keep[farthest.1] = true;
            ranges.push((first, farthest.1));
            ranges.push((farthest.1, last));
        }
    }
    coords
        .iter()
        .zip(keep)
        .filter_map(|(coord, kept)| kept.then_some(*coord))
        .collect()
}

/// Keeps the first and last vertex and every vertex farther than `tolerance` from the
/// previous kept one.
fn drop_close_vertices(line: &LineString<f64>, tolerance: f64) -> LineString<f64> {
    let squared_tolerance = tolerance * tolerance;
    let Some((&last, rest)) = line.0.split_last() else {
        return line.clone();
    };
    let mut kept: Vec<Coord<f64>> = Vec::with_capacity(line.0.len());
    for &coord in rest {
        let far = kept.last().is_none_or(|previous| {
            let delta = coord - *previous;
            delta.x * delta.x + delta.y * delta.y > squared_tolerance
        });
        if far {
            kept.push(coord);
        }
    }
    kept.push(last);
    LineString::new(kept)
}

/// A simplified polygon (each ring on its own).
pub fn simplify_polygon(polygon: &Polygon<f64>, tolerance: f64) -> Polygon<f64> {
    if tolerance <= 0.0 {
        return polygon.clone();
    }
    polygon.simplify(tolerance)
}

/// Simplified polygons.
pub fn simplify_multi_polygon(polygons: &MultiPolygon<f64>, tolerance: f64) -> MultiPolygon<f64> {
    if tolerance <= 0.0 {
        return polygons.clone();
    }
    polygons.simplify(tolerance)
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::line_string;

    #[test]
    fn nearly_straight_line_loses_its_middle_point() {
        let line = line_string![(x: 0.0, y: 0.0), (x: 50.0, y: 0.4), (x: 100.0, y: 0.0)];
        assert_eq!(simplify_line_string(&line, 1.0).0.len(), 2);
        assert_eq!(simplify_line_string(&line, 0.0).0.len(), 3);
    }

    #[test]
    fn dense_vertices_collapse_but_ends_stay() {
        let line: LineString<f64> = (0..100)
            .map(|index| Coord {
                x: f64::from(index) * 0.1,
                y: 0.0,
            })
            .collect();
        let simplified = simplify_line_string(&line, 1.0);
        assert_eq!(simplified.0.first(), line.0.first());
        assert_eq!(simplified.0.last(), line.0.last());
        assert_eq!(simplified.0.len(), 2);
    }

    #[test]
    fn matches_geo_on_a_wiggly_line() {
        let line: LineString<f64> = (0..300)
            .map(|index| {
                let x = f64::from(index) * 3.0;
                Coord {
                    x,
                    y: (x / 17.0).sin() * 20.0 + (x / 5.0).cos() * 2.0,
                }
            })
            .collect();
        for tolerance in [0.5, 1.0, 4.0] {
            assert_eq!(
                douglas_peucker(&line.0, tolerance),
                line.simplify(tolerance).0
            );
        }
    }

    #[test]
    fn no_simplification_at_max_zoom() {
        assert!(tolerance_for_zoom(14, 14, 1.0).abs() < f64::EPSILON);
        assert!((tolerance_for_zoom(10, 14, 1.0) - 1.0).abs() < f64::EPSILON);
    }
}
