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
    let mut close_dropped = Vec::new();
    drop_close_vertices(&line.0, tolerance, &mut close_dropped);
    LineString::new(douglas_peucker(&close_dropped, tolerance))
}

/// Scratch buffers for simplifying many lines without allocating for each.
#[derive(Debug, Default)]
pub(crate) struct Simplifier {
    close_dropped: Vec<Coord<f64>>,
    keep: Vec<bool>,
    ranges: Vec<(usize, usize)>,
}

impl Simplifier {
    /// Simplifies `coords` as [`simplify_line_string`] does, then rounds to integers and drops
    /// consecutive repeats, into `out` (cleared first).
    pub(crate) fn simplify_rounded(
        &mut self,
        coords: &[Coord<f64>],
        tolerance: f64,
        out: &mut Vec<Coord<i32>>,
    ) {
        out.clear();
        let kept: &[Coord<f64>] = if tolerance > 0.0 {
            drop_close_vertices(coords, tolerance, &mut self.close_dropped);
            mark_douglas_peucker(
                &self.close_dropped,
                tolerance,
                &mut self.keep,
                &mut self.ranges,
            );
            &self.close_dropped
        } else {
            self.keep.clear();
            self.keep.resize(coords.len(), true);
            coords
        };
        for (coord, _) in kept.iter().zip(&self.keep).filter(|(_, keep)| **keep) {
            let rounded = Coord {
                x: round_to_i32(coord.x),
                y: round_to_i32(coord.y),
            };
            if out.last() != Some(&rounded) {
                out.push(rounded);
            }
        }
    }
}

/// `value.round() as i32`, without the call into libm that `round` is on targets without
/// SSE4.1 (the default x86-64 target): it was a few percent of encoding a tile of lines.
/// Truncating and comparing the exact remainder with one half rounds halves away from
/// zero, as `round` does; conversions saturate and NaN gives zero, as `as` does.
#[inline]
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // as the comment says
pub(crate) fn round_to_i32(value: f64) -> i32 {
    let truncated = value as i64;
    // Exact: below 2^52 the remainder fits the mantissa; above, `value` is whole.
    let remainder = value - truncated as f64;
    let rounded = truncated
        .saturating_add(i64::from(remainder >= 0.5))
        .saturating_sub(i64::from(remainder <= -0.5));
    rounded.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
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
    let (mut keep, mut ranges) = (Vec::new(), Vec::new());
    mark_douglas_peucker(coords, tolerance, &mut keep, &mut ranges);
    coords
        .iter()
        .zip(keep)
        .filter_map(|(coord, kept)| kept.then_some(*coord))
        .collect()
}

/// Sets `keep[i]` for the vertices Ramer–Douglas–Peucker keeps (`keep` is resized to the
/// line; `ranges` is a scratch stack).
fn mark_douglas_peucker(
    coords: &[Coord<f64>],
    tolerance: f64,
    keep: &mut Vec<bool>,
    ranges: &mut Vec<(usize, usize)>,
) {
    let count = coords.len();
    keep.clear();
    if count < 3 {
        keep.resize(count, true);
        return;
    }
    keep.resize(count, false);
    let squared_tolerance = tolerance * tolerance;
    keep[0] = true;
    keep[count - 1] = true;
    ranges.clear();
    ranges.push((0, count - 1));
    while let Some((first, last)) = ranges.pop() {
        let Some((index, farthest)) = farthest_from_segment(coords, first, last, squared_tolerance)
        else {
            continue;
        };
        if farthest {
            keep[index] = true;
            ranges.push((first, index));
            ranges.push((index, last));
        }
    }
}

/// The vertex strictly between `first` and `last` farthest from the segment joining them
/// (the first of equals), and whether it lies farther than the tolerance. `None` when there
/// is no vertex in between.
///
/// Distances are compared multiplied by the segment's squared length, which needs no
/// division: `cross^2` for a vertex projecting inside the segment, the squared distance to
/// the nearer end times the squared length otherwise.
fn farthest_from_segment(
    coords: &[Coord<f64>],
    first: usize,
    last: usize,
    squared_tolerance: f64,
) -> Option<(usize, bool)> {
    let inner = coords
        .get(first + 1..last)
        .filter(|inner| !inner.is_empty())?;
    let start = coords[first];
    let direction = coords[last] - start;
    let squared_length = direction.x * direction.x + direction.y * direction.y;
    if squared_length == 0.0 {
        let mut farthest = (0.0, first + 1);
        for (offset, coord) in inner.iter().enumerate() {
            let away = *coord - start;
            let squared_distance = away.x * away.x + away.y * away.y;
            if squared_distance > farthest.0 {
                farthest = (squared_distance, first + 1 + offset);
            }
        }
        return Some((farthest.1, farthest.0 > squared_tolerance));
    }
    let mut largest = 0.0;
    let mut index = 0;
    for (offset, coord) in inner.iter().enumerate() {
        let (offset_x, offset_y) = (coord.x - start.x, coord.y - start.y);
        let along = offset_x * direction.x + offset_y * direction.y;
        let value = if along <= 0.0 {
            (offset_x * offset_x + offset_y * offset_y) * squared_length
        } else if along >= squared_length {
            let (beyond_x, beyond_y) = (offset_x - direction.x, offset_y - direction.y);
            (beyond_x * beyond_x + beyond_y * beyond_y) * squared_length
        } else {
            let cross = offset_x * direction.y - offset_y * direction.x;
            cross * cross
        };
        if value > largest {
            largest = value;
            index = offset;
        }
    }
    Some((
        first + 1 + index,
        largest > squared_tolerance * squared_length,
    ))
}

/// Keeps the first and last vertex and every vertex farther than `tolerance` from the
/// previous kept one.
fn drop_close_vertices(coords: &[Coord<f64>], tolerance: f64, kept: &mut Vec<Coord<f64>>) {
    let squared_tolerance = tolerance * tolerance;
    kept.clear();
    let Some((&last, rest)) = coords.split_last() else {
        return;
    };
    kept.reserve(coords.len());
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

    /// The standard library's rounding and `as`'s saturating conversion, to compare with.
    #[allow(clippy::cast_possible_truncation)] // the conversion under test
    fn reference(value: f64) -> i32 {
        value.round() as i32
    }

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

    proptest::proptest! {
        #[test]
        fn matches_geo_on_random_lines(
            coords in proptest::collection::vec((0.0..1000.0f64, 0.0..1000.0f64), 0..60),
            tolerance in 0.1..50.0f64,
        ) {
            let line: LineString<f64> = coords.into_iter().map(Coord::from).collect();
            proptest::prop_assert_eq!(douglas_peucker(&line.0, tolerance), line.simplify(tolerance).0);
        }
    }

    #[test]
    fn rounding_matches_the_standard_library_at_the_edges() {
        let values = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.499_999_999_999_999_94,
            -0.499_999_999_999_999_94,
            4095.5,
            -64.5,
            4_503_599_627_370_495.5,
            4_503_599_627_370_497.0,
            2_147_483_647.4,
            2_147_483_647.5,
            -2_147_483_648.5,
            1e19,
            -1e19,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
        ];
        for value in values {
            assert_eq!(round_to_i32(value), reference(value), "{value}");
        }
    }

    proptest::proptest! {
        #[test]
        fn rounding_matches_the_standard_library(value in proptest::num::f64::ANY) {
            proptest::prop_assert_eq!(round_to_i32(value), reference(value));
        }

        #[test]
        fn rounding_matches_at_halves(whole in -5_000_000i32..5_000_000, up in proptest::bool::ANY) {
            let value = f64::from(whole) + if up { 0.5 } else { -0.5 };
            proptest::prop_assert_eq!(round_to_i32(value), reference(value));
        }
    }

    #[test]
    fn no_simplification_at_max_zoom() {
        assert!(tolerance_for_zoom(14, 14, 1.0).abs() < f64::EPSILON);
        assert!((tolerance_for_zoom(10, 14, 1.0) - 1.0).abs() < f64::EPSILON);
    }
}
