//! The geometry command stream of MVT section 4.3: command integers, zigzag parameters, and
//! the encoding and validating decoding of [`Geometry`].

use geo::{Coord, LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon};

use crate::vector_tile::tile::GeomType;
use crate::{Geometry, MvtError};

/// A geometry command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Starts a new point, line or ring (id 1).
    MoveTo,
    /// Draws to a point (id 2).
    LineTo,
    /// Closes the current ring (id 7).
    ClosePath,
}

impl Command {
    /// The command id.
    pub fn id(self) -> u32 {
        match self {
            Command::MoveTo => 1,
            Command::LineTo => 2,
            Command::ClosePath => 7,
        }
    }
}

/// The largest command count (29 bits).
pub const MAX_COMMAND_COUNT: u32 = (1 << 29) - 1;

/// The command integer for `command` repeated `count` times, or
/// [`MvtError::BadCommandCount`] when `count` does not fit the integer's 29 bits.
pub fn command_integer(command: Command, count: u32) -> Result<u32, MvtError> {
    if count > MAX_COMMAND_COUNT {
        return Err(MvtError::BadCommandCount {
            command: command.id(),
            count,
        });
    }
    Ok((count << 3) | command.id())
}

/// Splits a command integer into its command and count.
pub fn parse_command_integer(integer: u32) -> Result<(Command, u32), MvtError> {
    let count = integer >> 3;
    match integer & 0x7 {
        1 => Ok((Command::MoveTo, count)),
        2 => Ok((Command::LineTo, count)),
        7 => Ok((Command::ClosePath, count)),
        other => Err(MvtError::UnknownCommand(other)),
    }
}

/// Zigzag encoding of a parameter: small magnitudes become small unsigned numbers.
pub fn zigzag_encode(value: i32) -> u32 {
    ((value << 1) ^ (value >> 31)).cast_unsigned()
}

/// The inverse of [`zigzag_encode`].
pub fn zigzag_decode(value: u32) -> i32 {
    (value >> 1).cast_signed() ^ -(value & 1).cast_signed()
}

/// Writes the command stream of a geometry and returns its MVT type, or `None` when nothing
/// is left after removing repeated points and degenerate lines and rings (the feature should
/// then be left out).
///
/// Lines lose consecutive repeated points and need two distinct points; rings lose their
/// closing point and repeats, need three points and a non-zero area, and are oriented as the
/// specification wants: exterior rings clockwise in tile coordinates (positive area with
/// `y` down), holes counter-clockwise.
#[cfg(test)]
pub(crate) fn encode_geometry(
    geometry: &Geometry,
    out: &mut Vec<u32>,
) -> Result<Option<GeomType>, MvtError> {
    encode_geometry_with(geometry, out, &mut Vec::new())
}

/// Writes the command stream of a geometry (see `encode_geometry`), with a scratch buffer for
/// lines and rings that callers reuse between features.
pub(crate) fn encode_geometry_with(
    geometry: &Geometry,
    out: &mut Vec<u32>,
    scratch: &mut Vec<Coord<i32>>,
) -> Result<Option<GeomType>, MvtError> {
    let mut writer = Writer {
        out,
        cursor: Coord { x: 0, y: 0 },
    };
    match geometry {
        Geometry::Points(points) => {
            if points.0.is_empty() {
                return Ok(None);
            }
            writer.command(Command::MoveTo, points.0.len())?;
            for point in points {
                writer.point(point.0)?;
            }
            Ok(Some(GeomType::Point))
        }
        Geometry::LineStrings(lines) => {
            let mut any = false;
            for line in lines {
                dedup_into(&line.0, scratch);
                if scratch.len() < 2 {
                    continue;
                }
                any = true;
                writer.command(Command::MoveTo, 1)?;
                writer.point(scratch[0])?;
                writer.command(Command::LineTo, scratch.len() - 1)?;
                for coord in &scratch[1..] {
                    writer.point(*coord)?;
                }
            }
            Ok(any.then_some(GeomType::Linestring))
        }
        Geometry::Polygons(polygons) => {
            let mut any = false;
            for polygon in polygons {
                if !ring_for_encoding(polygon.exterior(), true, scratch) {
                    continue;
                }
                any = true;
                writer.ring(scratch)?;
                for hole in polygon.interiors() {
                    if ring_for_encoding(hole, false, scratch) {
                        writer.ring(scratch)?;
                    }
                }
            }
            Ok(any.then_some(GeomType::Polygon))
        }
    }
}

struct Writer<'a> {
    out: &'a mut Vec<u32>,
    cursor: Coord<i32>,
}

impl Writer<'_> {
    fn command(&mut self, command: Command, count: usize) -> Result<(), MvtError> {
        let count = u32::try_from(count).map_err(|_| MvtError::BadCommandCount {
            command: command.id(),
            count: u32::MAX,
        })?;
        self.out.push(command_integer(command, count)?);
        Ok(())
    }

    fn point(&mut self, coord: Coord<i32>) -> Result<(), MvtError> {
        let delta_x = i32::try_from(i64::from(coord.x) - i64::from(self.cursor.x))
            .map_err(|_| MvtError::CoordinateOverflow)?;
        let delta_y = i32::try_from(i64::from(coord.y) - i64::from(self.cursor.y))
            .map_err(|_| MvtError::CoordinateOverflow)?;
        self.out.push(zigzag_encode(delta_x));
        self.out.push(zigzag_encode(delta_y));
        self.cursor = coord;
        Ok(())
    }

    fn ring(&mut self, ring: &[Coord<i32>]) -> Result<(), MvtError> {
        self.command(Command::MoveTo, 1)?;
        self.point(ring[0])?;
        self.command(Command::LineTo, ring.len() - 1)?;
        for coord in &ring[1..] {
            self.point(*coord)?;
        }
        self.command(Command::ClosePath, 1)
    }
}

/// Copies `coords` without consecutive repeats.
fn dedup_into(coords: &[Coord<i32>], out: &mut Vec<Coord<i32>>) {
    out.clear();
    for coord in coords {
        if out.last() != Some(coord) {
            out.push(*coord);
        }
    }
}

/// Prepares a ring: open (no closing point), no repeats, oriented. False when degenerate.
fn ring_for_encoding(ring: &LineString<i32>, exterior: bool, out: &mut Vec<Coord<i32>>) -> bool {
    dedup_into(&ring.0, out);
    while out.len() > 1 && out.first() == out.last() {
        out.pop();
    }
    if out.len() < 3 {
        return false;
    }
    let area = twice_signed_area(out);
    if area == 0 {
        return false;
    }
    if (area > 0) != exterior {
        out.reverse();
    }
    true
}

/// Twice the surveyor's-formula area of an open ring: positive when clockwise on screen
/// (`y` down), which is the MVT exterior orientation.
pub(crate) fn twice_signed_area(ring: &[Coord<i32>]) -> i128 {
    let mut sum: i128 = 0;
    let mut previous = ring[ring.len() - 1];
    for coord in ring {
        sum += i128::from(previous.x) * i128::from(coord.y)
            - i128::from(coord.x) * i128::from(previous.y);
        previous = *coord;
    }
    sum
}

/// Decodes and validates a command stream of the given MVT geometry type.
pub(crate) fn decode_geometry(geometry_type: i32, stream: &[u32]) -> Result<Geometry, MvtError> {
    let mut reader = Reader {
        stream,
        position: 0,
        cursor: (0, 0),
    };
    match GeomType::try_from(geometry_type) {
        Ok(GeomType::Point) => {
            let count = reader.expect(Command::MoveTo, "point geometry must start with MoveTo")?;
            if count == 0 {
                return Err(MvtError::BadCommandCount {
                    command: Command::MoveTo.id(),
                    count,
                });
            }
            let points = reader.points(Command::MoveTo, count)?;
            if !reader.finished() {
                return Err(MvtError::InvalidCommandSequence(
                    "point geometry has commands after its MoveTo",
                ));
            }
            Ok(Geometry::Points(MultiPoint::new(
                points.into_iter().map(Point).collect(),
            )))
        }
        Ok(GeomType::Linestring) => {
            let mut lines = Vec::new();
            while !reader.finished() {
                let start = reader.move_to_one("line must start with MoveTo(1)")?;
                let count = reader.expect(Command::LineTo, "line needs LineTo after MoveTo")?;
                if count == 0 {
                    return Err(MvtError::BadCommandCount {
                        command: Command::LineTo.id(),
                        count,
                    });
                }
                let mut coords = reader.points(Command::LineTo, count)?;
                coords.insert(0, start);
                lines.push(LineString::new(coords));
            }
            if lines.is_empty() {
                return Err(MvtError::InvalidCommandSequence("empty line geometry"));
            }
            Ok(Geometry::LineStrings(MultiLineString::new(lines)))
        }
        Ok(GeomType::Polygon) => {
            let mut polygons: Vec<Polygon<i32>> = Vec::new();
            while !reader.finished() {
                let start = reader.move_to_one("ring must start with MoveTo(1)")?;
                let count = reader.expect(Command::LineTo, "ring needs LineTo after MoveTo")?;
                if count < 2 {
                    return Err(MvtError::BadCommandCount {
                        command: Command::LineTo.id(),
                        count,
                    });
                }
                let mut ring = reader.points(Command::LineTo, count)?;
                ring.insert(0, start);
                let close = reader.expect(Command::ClosePath, "ring must end with ClosePath")?;
                if close != 1 {
                    return Err(MvtError::BadCommandCount {
                        command: Command::ClosePath.id(),
                        count: close,
                    });
                }
                let area = twice_signed_area(&ring);
                match area.cmp(&0) {
                    std::cmp::Ordering::Greater => {
                        polygons.push(Polygon::new(LineString::new(ring), Vec::new()));
                    }
                    std::cmp::Ordering::Less => {
                        let Some(polygon) = polygons.last_mut() else {
                            return Err(MvtError::InvalidPolygon(
                                "first ring is not an exterior ring",
                            ));
                        };
                        polygon.interiors_push(LineString::new(ring));
                    }
                    std::cmp::Ordering::Equal => {
                        return Err(MvtError::InvalidPolygon("ring has zero area"));
                    }
                }
            }
            if polygons.is_empty() {
                return Err(MvtError::InvalidCommandSequence("empty polygon geometry"));
            }
            Ok(Geometry::Polygons(MultiPolygon::new(polygons)))
        }
        _ => Err(MvtError::UnknownGeometryType(geometry_type)),
    }
}

struct Reader<'a> {
    stream: &'a [u32],
    position: usize,
    cursor: (i64, i64),
}

impl Reader<'_> {
    fn finished(&self) -> bool {
        self.position >= self.stream.len()
    }

    /// Reads a command integer that must be `command`, returning its count.
    fn expect(&mut self, command: Command, context: &'static str) -> Result<u32, MvtError> {
        let Some(&integer) = self.stream.get(self.position) else {
            return Err(MvtError::InvalidCommandSequence(context));
        };
        self.position += 1;
        let (found, count) = parse_command_integer(integer)?;
        if found != command {
            return Err(MvtError::InvalidCommandSequence(context));
        }
        Ok(count)
    }

    fn move_to_one(&mut self, context: &'static str) -> Result<Coord<i32>, MvtError> {
        let count = self.expect(Command::MoveTo, context)?;
        if count != 1 {
            return Err(MvtError::BadCommandCount {
                command: Command::MoveTo.id(),
                count,
            });
        }
        let mut points = self.points(Command::MoveTo, 1)?;
        points
            .pop()
            .ok_or(MvtError::InvalidCommandSequence(context))
    }

    /// Reads `count` parameter pairs, after checking they are all there (so a hostile count
    /// never makes us allocate more than the input holds).
    fn points(&mut self, command: Command, count: u32) -> Result<Vec<Coord<i32>>, MvtError> {
        let remaining = self.stream.len() - self.position;
        let wanted = count as usize;
        if wanted > remaining / 2 {
            return Err(MvtError::BadCommandCount {
                command: command.id(),
                count,
            });
        }
        let mut coords = Vec::with_capacity(wanted + 1);
        for pair in self.stream[self.position..self.position + 2 * wanted].chunks_exact(2) {
            self.cursor.0 += i64::from(zigzag_decode(pair[0]));
            self.cursor.1 += i64::from(zigzag_decode(pair[1]));
            let x = i32::try_from(self.cursor.0).map_err(|_| MvtError::CoordinateOverflow)?;
            let y = i32::try_from(self.cursor.1).map_err(|_| MvtError::CoordinateOverflow)?;
            coords.push(Coord { x, y });
        }
        self.position += 2 * wanted;
        Ok(coords)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::{line_string, point, polygon};

    fn encode(geometry: &Geometry) -> Vec<u32> {
        let mut out = Vec::new();
        encode_geometry(geometry, &mut out).unwrap();
        out
    }

    // The examples of section 4.3.5 of the specification.
    #[test]
    fn point_example_of_the_spec() {
        assert_eq!(encode(&point!(x: 25, y: 17).into()), vec![9, 50, 34]);
    }

    #[test]
    fn multi_point_example_of_the_spec() {
        let points = MultiPoint::new(vec![point!(x: 5, y: 7), point!(x: 3, y: 2)]);
        assert_eq!(encode(&points.into()), vec![17, 10, 14, 3, 9]);
    }

    #[test]
    fn line_example_of_the_spec() {
        let line = line_string![(x: 2, y: 2), (x: 2, y: 10), (x: 10, y: 10)];
        assert_eq!(encode(&line.into()), vec![9, 4, 4, 18, 0, 16, 16, 0]);
    }

    #[test]
    fn multi_line_example_of_the_spec() {
        let lines = MultiLineString::new(vec![
            line_string![(x: 2, y: 2), (x: 2, y: 10), (x: 10, y: 10)],
            line_string![(x: 1, y: 1), (x: 3, y: 5)],
        ]);
        assert_eq!(
            encode(&lines.into()),
            vec![9, 4, 4, 18, 0, 16, 16, 0, 9, 17, 17, 10, 4, 8]
        );
    }

    #[test]
    fn polygon_example_of_the_spec() {
        let polygon = polygon![(x: 3, y: 6), (x: 8, y: 12), (x: 20, y: 34), (x: 3, y: 6)];
        assert_eq!(
            encode(&polygon.into()),
            vec![9, 6, 12, 18, 10, 12, 24, 44, 15]
        );
    }

    #[test]
    fn multi_polygon_example_of_the_spec() {
        let polygons = MultiPolygon::new(vec![
            polygon![(x: 0, y: 0), (x: 10, y: 0), (x: 10, y: 10), (x: 0, y: 10)],
            polygon!(
                exterior: [(x: 11, y: 11), (x: 20, y: 11), (x: 20, y: 20), (x: 11, y: 20)],
                interiors: [[(x: 13, y: 13), (x: 13, y: 17), (x: 17, y: 17), (x: 17, y: 13)]],
            ),
        ]);
        assert_eq!(
            encode(&polygons.into()),
            vec![
                9, 0, 0, 26, 20, 0, 0, 20, 19, 0, 15, 9, 22, 2, 26, 18, 0, 0, 18, 17, 0, 15, 9, 4,
                13, 26, 0, 8, 8, 0, 0, 7, 15
            ]
        );
    }

    #[test]
    fn counter_clockwise_exterior_is_reversed_and_repeats_dropped() {
        let counter_clockwise =
            polygon![(x: 0, y: 0), (x: 0, y: 10), (x: 0, y: 10), (x: 10, y: 10), (x: 10, y: 0)];
        let decoded = decode_geometry(3, &encode(&counter_clockwise.into())).unwrap();
        let Geometry::Polygons(polygons) = decoded else {
            panic!("not polygons")
        };
        let ring: Vec<_> = polygons.0[0].exterior().0.clone();
        assert_eq!(ring.len(), 5);
        assert!(twice_signed_area(&ring[..4]) > 0);
    }

    #[test]
    fn degenerate_geometries_are_left_out() {
        let mut out = Vec::new();
        let line = line_string![(x: 1, y: 1), (x: 1, y: 1)];
        assert_eq!(encode_geometry(&line.into(), &mut out).unwrap(), None);
        let flat = polygon![(x: 0, y: 0), (x: 5, y: 0), (x: 10, y: 0)];
        assert_eq!(encode_geometry(&flat.into(), &mut out).unwrap(), None);
        assert!(out.is_empty());
    }

    #[test]
    fn zigzag_known_values() {
        for (value, encoded) in [
            (0, 0),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (i32::MAX, u32::MAX - 1),
            (i32::MIN, u32::MAX),
        ] {
            assert_eq!(zigzag_encode(value), encoded);
            assert_eq!(zigzag_decode(encoded), value);
        }
    }

    #[test]
    fn hostile_streams_are_errors() {
        // MoveTo with a count far beyond the parameters.
        assert!(matches!(
            decode_geometry(
                1,
                &[
                    command_integer(Command::MoveTo, MAX_COMMAND_COUNT).unwrap(),
                    2,
                    2
                ]
            ),
            Err(MvtError::BadCommandCount { .. })
        ));
        assert!(matches!(
            decode_geometry(2, &[9, 2, 2]),
            Err(MvtError::InvalidCommandSequence(_))
        ));
        assert!(matches!(
            decode_geometry(1, &[9 | 3]),
            Err(MvtError::UnknownCommand(3))
        ));
        assert!(matches!(
            decode_geometry(0, &[9, 2, 2]),
            Err(MvtError::UnknownGeometryType(0))
        ));
        assert!(matches!(
            decode_geometry(7, &[9, 2, 2]),
            Err(MvtError::UnknownGeometryType(7))
        ));
        assert!(matches!(
            decode_geometry(1, &[17, u32::MAX - 1, 0, u32::MAX - 1, 0]),
            Err(MvtError::CoordinateOverflow)
        ));
        // A hole before any exterior ring.
        assert!(matches!(
            decode_geometry(3, &[9, 0, 0, 18, 0, 20, 20, 0, 15]),
            Err(MvtError::InvalidPolygon(_))
        ));
    }
}
