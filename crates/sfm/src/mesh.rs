//! Meshes: the coarse surface the web viewer projects an image onto while it moves between
//! images, as the original's `OpenSfM` makes it (`opensfm/mesh.py`): the reconstructed points
//! the image observes, triangulated in the picture (a perspective image: its four corners
//! first, each at the mean depth of the points it shares a triangle with, or 50 m) or on the
//! sphere of viewing directions (a panorama: the corners of a cube around the camera, and a
//! vertex above the camera that closes the surface), with the vertices in the camera's frame
//! (x right, y down, z forward) multiplied by the image's atomic scale, as the viewer reads
//! them. Encoded as the viewer's protobuf, `repeated float vertices = 1; repeated uint32
//! faces = 2;` not packed.

use spade::{DelaunayTriangulation, Point2, Triangulation as _};

/// Depth of a corner no point shares a triangle with (metres), as `OpenSfM` has it.
const DEFAULT_DEPTH: f64 = 50.0;
/// Points nearer than this are left out (metres).
const MIN_DEPTH: f64 = 0.5;
/// The viewer reads face indices as 16-bit numbers: at most this many points are used.
pub const MAX_POINTS: usize = 8000;

/// A mesh: vertices in the camera's frame and triangles as vertex indices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mesh {
    /// Camera-frame positions times the atomic scale.
    pub vertices: Vec<[f32; 3]>,
    /// Triangles.
    pub faces: Vec<[u32; 3]>,
}

impl Mesh {
    /// The viewer's protobuf.
    pub fn encode(&self) -> Vec<u8> {
        encode_mesh(&self.vertices, &self.faces)
    }
}

/// Encodes vertices and triangles in the viewer's unpacked protobuf layout.
pub fn encode_mesh(vertices: &[[f32; 3]], faces: &[[u32; 3]]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(vertices.len() * 15 + faces.len() * 9);
    for coordinate in vertices.iter().flatten() {
        bytes.push(0x0D);
        bytes.extend_from_slice(&coordinate.to_le_bytes());
    }
    for &index in faces.iter().flatten() {
        bytes.push(0x10);
        let mut value = index;
        // The low byte each time (`to_le_bytes()[0]` is `as u8`'s truncation, spelt out).
        while value >= 0x80 {
            bytes.push((value.to_le_bytes()[0] & 0x7F) | 0x80);
            value >>= 7;
        }
        bytes.push(value.to_le_bytes()[0]);
    }
    bytes
}

/// The mesh of a perspective image: `points` are the observed points in the camera's frame
/// (metres), `focal` the focal length over the larger side, `aspect` width over height.
pub fn perspective(points: &[[f64; 3]], focal: f64, width: u32, height: u32, scale: f64) -> Mesh {
    let larger = f64::from(width.max(height).max(1));
    let dx = f64::from(width) / 2.0 / larger;
    let dy = f64::from(height) / 2.0 / larger;
    let mut pixels = vec![[-dx, -dy], [-dx, dy], [dx, dy], [dx, -dy]];
    let mut positions: Vec<[f64; 3]> = vec![[0.0; 3]; 4];
    for point in points.iter().take(MAX_POINTS) {
        if point[2] < MIN_DEPTH || !point.iter().all(|value| value.is_finite()) {
            continue;
        }
        let pixel = [focal * point[0] / point[2], focal * point[1] / point[2]];
        if pixel[0].abs() <= dx && pixel[1].abs() <= dy {
            pixels.push(pixel);
            positions.push(*point);
        }
    }
    let faces = triangulate(&pixels);
    // Each corner at the mean depth of the points it shares a triangle with.
    let mut sums = [0.0; 4];
    let mut counts = [0u32; 4];
    for face in &faces {
        for corner in 0..4u32 {
            if face.contains(&corner) {
                for &vertex in face.iter().filter(|&&vertex| vertex >= 4) {
                    sums[corner as usize] += positions[vertex as usize][2];
                    counts[corner as usize] += 1;
                }
            }
        }
    }
    for corner in 0..4 {
        let depth = if counts[corner] > 0 {
            sums[corner] / f64::from(counts[corner])
        } else {
            DEFAULT_DEPTH
        };
        let pixel = pixels[corner];
        positions[corner] = [pixel[0] / focal * depth, pixel[1] / focal * depth, depth];
    }
    Mesh {
        vertices: scaled(&positions, scale),
        faces,
    }
}

/// The mesh of a panorama: `points` in the camera's frame (metres).
pub fn spherical(points: &[[f64; 3]], scale: f64) -> Mesh {
    let length = |p: &[f64; 3]| (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
    let kept: Vec<[f64; 3]> = points
        .iter()
        .take(MAX_POINTS)
        .filter(|point| point.iter().all(|value| value.is_finite()) && length(point) >= MIN_DEPTH)
        .copied()
        .collect();
    let distance = if kept.is_empty() {
        DEFAULT_DEPTH
    } else {
        kept.iter().map(length).sum::<f64>()
            / f64::from(u32::try_from(kept.len()).unwrap_or(u32::MAX))
    };
    // The corners of a cube around the camera, so that every direction meets the surface.
    let mut positions: Vec<[f64; 3]> = Vec::with_capacity(kept.len() + 9);
    let third = 1.0 / 3.0_f64.sqrt();
    for x in [-1.0, 1.0] {
        for y in [-1.0, 1.0] {
            for z in [-1.0, 1.0] {
                positions.push([
                    x * third * distance,
                    y * third * distance,
                    z * third * distance,
                ]);
            }
        }
    }
    positions.extend(kept);
    // Stereographic projection from straight up (-y, the camera's up), where street
    // panoramas see sky: circles on the sphere stay circles, so the plane's Delaunay
    // triangles are the sphere's; what the projection leaves open around the pole is closed
    // with a vertex there.
    let mut pixels = Vec::with_capacity(positions.len());
    let mut projected = Vec::with_capacity(positions.len());
    for (index, position) in positions.iter().enumerate() {
        let norm = length(position);
        let bearing = position.map(|value| value / norm);
        let denominator = 1.0 + bearing[1];
        if denominator < 1e-3 {
            continue;
        }
        pixels.push([bearing[0] / denominator, bearing[2] / denominator]);
        projected.push(u32::try_from(index).unwrap_or(0));
    }
    let (planar, hull) = triangulate_with_hull(&pixels);
    let pole = u32::try_from(positions.len()).unwrap_or(u32::MAX);
    positions.push([0.0, -distance, 0.0]);
    let mut faces: Vec<[u32; 3]> = planar
        .into_iter()
        .map(|face| face.map(|vertex| projected[vertex as usize]))
        .collect();
    faces.extend(
        hull.into_iter()
            .map(|[from, to]| [projected[from as usize], projected[to as usize], pole]),
    );
    Mesh {
        vertices: scaled(&positions, scale),
        faces,
    }
}

#[allow(clippy::cast_possible_truncation)] // metres in the viewer's 32-bit floats
fn scaled(positions: &[[f64; 3]], scale: f64) -> Vec<[f32; 3]> {
    positions
        .iter()
        .map(|position| position.map(|value| (value * scale) as f32))
        .collect()
}

fn triangulate(pixels: &[[f64; 2]]) -> Vec<[u32; 3]> {
    triangulate_with_hull(pixels).0
}

/// The Delaunay triangles of `pixels` (indices into it) and the convex hull's edges.
fn triangulate_with_hull(pixels: &[[f64; 2]]) -> (Vec<[u32; 3]>, Vec<[u32; 2]>) {
    let mut triangulation: DelaunayTriangulation<Point2<f64>> = DelaunayTriangulation::new();
    // The triangulation's vertex index to ours (a repeated position keeps the first).
    let mut ours: Vec<u32> = Vec::with_capacity(pixels.len());
    for (index, pixel) in pixels.iter().enumerate() {
        let Ok(handle) = triangulation.insert(Point2::new(pixel[0], pixel[1])) else {
            continue;
        };
        if handle.index() == ours.len() {
            ours.push(u32::try_from(index).unwrap_or(0));
        }
    }
    let at = |handle: usize| ours.get(handle).copied().unwrap_or(0);
    let faces = triangulation
        .inner_faces()
        .map(|face| face.vertices().map(|vertex| at(vertex.fix().index())))
        .collect();
    let hull = if triangulation.num_inner_faces() == 0 {
        Vec::new()
    } else {
        triangulation
            .convex_hull()
            .map(|edge| edge.vertices().map(|vertex| at(vertex.fix().index())))
            .collect()
    };
    (faces, hull)
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::*;

    fn points() -> Vec<[f64; 3]> {
        let mut points = Vec::new();
        for x in -5..=5 {
            for y in -3..=3 {
                points.push([f64::from(x), f64::from(y), 12.0 + f64::from(x)]);
            }
        }
        points
    }

    #[test]
    fn encodes_unpacked_fields_byte_for_byte() {
        let bytes = encode_mesh(&[[1.0, 0.0, -2.5]], &[[0, 1, 300]]);
        assert_eq!(
            bytes,
            [
                0x0D, 0x00, 0x00, 0x80, 0x3F, 0x0D, 0x00, 0x00, 0x00, 0x00, 0x0D, 0x00, 0x00, 0x20,
                0xC0, 0x10, 0x00, 0x10, 0x01, 0x10, 0xAC, 0x02,
            ]
        );
    }

    #[test]
    fn a_perspective_mesh_starts_with_the_corners_in_front_of_the_camera() {
        let mesh = perspective(&points(), 0.97, 1024, 768, 2.0);
        assert!(mesh.vertices.len() > 4 && mesh.faces.len() > 4);
        for corner in &mesh.vertices[..4] {
            assert!(corner[2] > 0.0, "{corner:?}");
            // At the depth of nearby points (12 m give or take 5), times the scale.
            assert!((2.0 * 6.0..=2.0 * 18.0).contains(&corner[2]), "{corner:?}");
        }
        // The corners are where the picture's corners look.
        let [x, y, z] = mesh.vertices[2];
        assert!((x / z * 0.97 - 0.5).abs() < 1e-4 && (y / z * 0.97 - 0.375).abs() < 1e-4);
        for face in &mesh.faces {
            assert!(
                face.iter()
                    .all(|&index| (index as usize) < mesh.vertices.len())
            );
        }
        assert!(mesh.faces.iter().any(|face| face.contains(&0)));
    }

    #[test]
    fn a_perspective_mesh_without_points_is_a_wall_at_fifty_metres() {
        let mesh = perspective(
            &[[0.0, 0.0, -3.0], [f64::NAN, 0.0, 1.0]],
            1.0,
            100,
            100,
            1.0,
        );
        assert_eq!(mesh.vertices.len(), 4);
        assert_eq!(mesh.faces.len(), 2);
        assert!(mesh.vertices.iter().all(|vertex| vertex[2] == 50.0));
    }

    #[test]
    fn a_spherical_mesh_closes_around_the_camera() {
        let mut around = points();
        around.extend(points().iter().map(|[x, y, z]| [-x, *y, -z]));
        let mesh = spherical(&around, 1.0);
        // A closed surface of genus 0 triangulated: faces = 2 × vertices − 4 over the
        // vertices it uses.
        let mut used: Vec<u32> = mesh.faces.iter().flatten().copied().collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(
            mesh.faces.len(),
            2 * used.len() - 4,
            "{} faces",
            mesh.faces.len()
        );
        // Every edge is shared by exactly two faces.
        let mut edges = std::collections::HashMap::new();
        for face in &mesh.faces {
            for (a, b) in [(face[0], face[1]), (face[1], face[2]), (face[2], face[0])] {
                *edges.entry((a.min(b), a.max(b))).or_insert(0) += 1;
            }
        }
        assert!(edges.values().all(|&count| count == 2), "{edges:?}");
        let empty = spherical(&[], 1.0);
        assert!(!empty.faces.is_empty());
    }
}
