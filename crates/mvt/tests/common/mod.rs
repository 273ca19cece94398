//! Generators and expectations shared by the integration tests.

#![allow(dead_code)]

use geo::{Coord, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};
use num_traits::ToPrimitive as _;
use proptest::prelude::*;
use streetlevel_mvt::{Geometry, Value, geo};

/// Coordinates within a range where deltas never overflow.
pub fn coord() -> impl Strategy<Value = Coord<i32>> {
    (-(1 << 20)..(1 << 20), -(1 << 20)..(1 << 20)).prop_map(|(x, y)| Coord { x, y })
}

/// Coordinates near each other, so repeats happen.
pub fn small_coord() -> impl Strategy<Value = Coord<i32>> {
    (-4..4, -4..4).prop_map(|(x, y)| Coord { x, y })
}

pub fn points() -> impl Strategy<Value = Geometry> {
    prop::collection::vec(coord(), 1..20).prop_map(|coords| {
        Geometry::Points(MultiPoint::new(coords.into_iter().map(Point).collect()))
    })
}

pub fn lines() -> impl Strategy<Value = Geometry> {
    let line =
        prop::collection::vec(prop_oneof![coord(), small_coord()], 2..20).prop_map(LineString::new);
    prop::collection::vec(line, 1..5)
        .prop_map(|lines| Geometry::LineStrings(MultiLineString::new(lines)))
}

/// A ring around a centre: vertices at increasing angles, so it is simple; either winding.
pub fn ring() -> impl Strategy<Value = LineString<i32>> {
    (
        -100_000..100_000i32,
        -100_000..100_000i32,
        prop::collection::vec((1..1000i32, 0.0..1.0f64), 3..12),
        any::<bool>(),
    )
        .prop_map(|(center_x, center_y, spokes, clockwise)| {
            let count = f64::from(u32::try_from(spokes.len()).unwrap());
            let mut coords: Vec<Coord<i32>> = spokes
                .iter()
                .zip(0_u32..)
                .map(|((radius, jitter), index)| {
                    let angle = (f64::from(index) + jitter * 0.9) / count * std::f64::consts::TAU;
                    Coord {
                        x: center_x + (f64::from(*radius) * angle.cos()).round().to_i32().unwrap(),
                        y: center_y + (f64::from(*radius) * angle.sin()).round().to_i32().unwrap(),
                    }
                })
                .collect();
            if clockwise {
                coords.reverse();
            }
            LineString::new(coords)
        })
}

pub fn polygons() -> impl Strategy<Value = Geometry> {
    let polygon = (ring(), prop::collection::vec(ring(), 0..3))
        .prop_map(|(exterior, holes)| Polygon::new(exterior, holes));
    prop::collection::vec(polygon, 1..4)
        .prop_map(|polygons| Geometry::Polygons(MultiPolygon::new(polygons)))
}

pub fn geometry() -> impl Strategy<Value = Geometry> {
    prop_oneof![points(), lines(), polygons()]
}

pub fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".{0,12}".prop_map(Value::String),
        any::<f32>()
            .prop_filter("NaN is never equal", |number| !number.is_nan())
            .prop_map(Value::Float),
        any::<f64>()
            .prop_filter("NaN is never equal", |number| !number.is_nan())
            .prop_map(Value::Double),
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::Uint),
        any::<i64>().prop_map(Value::Sint),
        any::<bool>().prop_map(Value::Bool),
    ]
}

fn dedup(coords: &[Coord<i32>]) -> Vec<Coord<i32>> {
    let mut out: Vec<Coord<i32>> = Vec::new();
    for coord in coords {
        if out.last() != Some(coord) {
            out.push(*coord);
        }
    }
    out
}

fn twice_area(ring: &[Coord<i32>]) -> i128 {
    let mut sum = 0i128;
    for index in 0..ring.len() {
        let (a, b) = (ring[index], ring[(index + 1) % ring.len()]);
        sum += i128::from(a.x) * i128::from(b.y) - i128::from(b.x) * i128::from(a.y);
    }
    sum
}

/// The ring as the specification wants it on the wire, then closed as decoders return it;
/// `None` when degenerate.
fn expected_ring(ring: &LineString<i32>, exterior: bool) -> Option<LineString<i32>> {
    let mut coords = dedup(&ring.0);
    while coords.len() > 1 && coords.first() == coords.last() {
        coords.pop();
    }
    if coords.len() < 3 {
        return None;
    }
    let area = twice_area(&coords);
    if area == 0 {
        return None;
    }
    if (area > 0) != exterior {
        coords.reverse();
    }
    coords.push(coords[0]);
    Some(LineString::new(coords))
}

/// What a spec-conforming encoder + decoder must return for a geometry: repeats removed,
/// degenerate parts dropped, exterior rings clockwise on screen, holes counter-clockwise.
pub fn expected(geometry: &Geometry) -> Option<Geometry> {
    let result = match geometry {
        Geometry::Points(points) => Geometry::Points(points.clone()),
        Geometry::LineStrings(lines) => Geometry::LineStrings(MultiLineString::new(
            lines
                .iter()
                .map(|line| dedup(&line.0))
                .filter(|coords| coords.len() >= 2)
                .map(LineString::new)
                .collect(),
        )),
        Geometry::Polygons(polygons) => Geometry::Polygons(MultiPolygon::new(
            polygons
                .iter()
                .filter_map(|polygon| {
                    let exterior = expected_ring(polygon.exterior(), true)?;
                    let holes = polygon
                        .interiors()
                        .iter()
                        .filter_map(|hole| expected_ring(hole, false))
                        .collect();
                    Some(Polygon::new(exterior, holes))
                })
                .collect(),
        )),
    };
    (!result.is_empty()).then_some(result)
}
