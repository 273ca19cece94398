//! Camera poses: world-to-camera rotations (the camera's x right, y down, z forward, as
//! `COLMAP` and `OpenSfM` both have it) from unit quaternions, to the angle-axis vectors the
//! API's `computed_rotation` and the cluster's shots carry, and the compass angle of the
//! optical axis in an east-north-up world.

/// A 3 x 3 rotation matrix, rows first.
pub type Matrix = [[f64; 3]; 3];

/// A camera pose: `x_camera = rotation * x_world + translation`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pose {
    /// World to camera.
    pub rotation: Matrix,
    /// World to camera.
    pub translation: [f64; 3],
}

impl Pose {
    /// The pose of a unit quaternion `[w, x, y, z]` (normalised here) and a translation.
    pub fn from_quaternion(quaternion: [f64; 4], translation: [f64; 3]) -> Self {
        Pose {
            rotation: matrix_of_quaternion(quaternion),
            translation,
        }
    }

    /// Where the camera is, in world coordinates: `-Rᵀ t`.
    pub fn centre(&self) -> [f64; 3] {
        let rotated = transpose_times(&self.rotation, self.translation);
        rotated.map(|value| -value)
    }

    /// `x` (world) in the camera's frame.
    pub fn to_camera(&self, x: [f64; 3]) -> [f64; 3] {
        let rotated = times(&self.rotation, x);
        [
            rotated[0] + self.translation[0],
            rotated[1] + self.translation[1],
            rotated[2] + self.translation[2],
        ]
    }

    /// A direction given in the camera's frame, in world coordinates.
    pub fn direction_to_world(&self, direction: [f64; 3]) -> [f64; 3] {
        transpose_times(&self.rotation, direction)
    }

    /// The angle-axis vector of the rotation (radians).
    pub fn angle_axis(&self) -> [f64; 3] {
        angle_axis(&self.rotation)
    }

    /// The bearing of the optical axis (z) in an east-north-up world: degrees clockwise from
    /// north in `[0, 360)`.
    pub fn compass(&self) -> f64 {
        // The axis in world coordinates is the third row of the rotation.
        let [east, north, _] = self.rotation[2];
        normalise_degrees(east.atan2(north).to_degrees())
    }
}

/// An angle in degrees brought into `[0, 360)`.
pub fn normalise_degrees(angle: f64) -> f64 {
    let wrapped = angle.rem_euclid(360.0);
    // `rem_euclid` of a tiny negative number rounds to 360.
    if wrapped >= 360.0 { 0.0 } else { wrapped }
}

/// The smallest difference between two bearings, degrees in `[0, 180]`.
pub fn angle_between(a: f64, b: f64) -> f64 {
    let difference = normalise_degrees(a - b);
    difference.min(360.0 - difference)
}

fn matrix_of_quaternion(quaternion: [f64; 4]) -> Matrix {
    let norm = quaternion
        .iter()
        .map(|value| value * value)
        .sum::<f64>()
        .sqrt();
    let [w, x, y, z] = quaternion.map(|value| value / norm);
    [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * z + w * y),
        ],
        [
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - w * x),
        ],
        [
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ]
}

/// The angle-axis vector of a rotation matrix, also near 0 and near π.
pub fn angle_axis(r: &Matrix) -> [f64; 3] {
    let trace = r[0][0] + r[1][1] + r[2][2];
    let cos = ((trace - 1.0) / 2.0).clamp(-1.0, 1.0);
    let angle = cos.acos();
    let skew = [r[2][1] - r[1][2], r[0][2] - r[2][0], r[1][0] - r[0][1]];
    if angle < 1e-7 {
        // sin θ ≈ θ: half the skew part.
        return skew.map(|value| value / 2.0);
    }
    if std::f64::consts::PI - angle > 1e-4 {
        let factor = angle / (2.0 * angle.sin());
        return skew.map(|value| value * factor);
    }
    // Near π the skew part vanishes: the axis is the column of R + I with the largest norm.
    let plus_identity = [
        [r[0][0] + 1.0, r[0][1], r[0][2]],
        [r[1][0], r[1][1] + 1.0, r[1][2]],
        [r[2][0], r[2][1], r[2][2] + 1.0],
    ];
    let column = |index: usize| {
        [
            plus_identity[0][index],
            plus_identity[1][index],
            plus_identity[2][index],
        ]
    };
    let norm = |v: [f64; 3]| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let best = (0..3)
        .map(column)
        .max_by(|a, b| norm(*a).total_cmp(&norm(*b)))
        .unwrap_or([1.0, 0.0, 0.0]);
    let length = norm(best).max(f64::MIN_POSITIVE);
    let mut axis = best.map(|value| value / length);
    // The sign that agrees with what is left of the skew part.
    if axis[0] * skew[0] + axis[1] * skew[1] + axis[2] * skew[2] < 0.0 {
        axis = axis.map(|value| -value);
    }
    axis.map(|value| value * angle)
}

/// The rotation of an angle-axis vector (Rodrigues).
pub fn matrix_of_angle_axis(vector: [f64; 3]) -> Matrix {
    let angle = (vector[0] * vector[0] + vector[1] * vector[1] + vector[2] * vector[2]).sqrt();
    if angle < 1e-12 {
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    }
    let [x, y, z] = vector.map(|value| value / angle);
    let (sin, cos) = angle.sin_cos();
    let one = 1.0 - cos;
    [
        [
            cos + x * x * one,
            x * y * one - z * sin,
            x * z * one + y * sin,
        ],
        [
            y * x * one + z * sin,
            cos + y * y * one,
            y * z * one - x * sin,
        ],
        [
            z * x * one - y * sin,
            z * y * one + x * sin,
            cos + z * z * one,
        ],
    ]
}

/// `m x`.
pub fn times(m: &Matrix, x: [f64; 3]) -> [f64; 3] {
    m.map(|row| row[0] * x[0] + row[1] * x[1] + row[2] * x[2])
}

/// `mᵀ x`.
pub fn transpose_times(m: &Matrix, x: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|column| m[0][column] * x[0] + m[1][column] * x[1] + m[2][column] * x[2])
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The rotation of a level camera looking at `bearing` (degrees) in an east-north-up world.
    fn level_camera(bearing: f64) -> Matrix {
        let (sin, cos) = bearing.to_radians().sin_cos();
        // Camera x (right), y (down), z (forward) in world coordinates are the rows.
        [[cos, -sin, 0.0], [0.0, 0.0, -1.0], [sin, cos, 0.0]]
    }

    #[test]
    fn a_level_camera_has_the_compass_angle_it_looks_at() {
        for bearing in [0.0, 45.0, 184.0, 341.0] {
            let pose = Pose {
                rotation: level_camera(bearing),
                translation: [0.0; 3],
            };
            assert!(angle_between(pose.compass(), bearing) < 1e-9, "{bearing}");
        }
    }

    #[test]
    fn the_centre_is_where_the_translation_puts_the_origin() {
        let rotation = level_camera(30.0);
        let centre = [5.0, -3.0, 1.5];
        let translation = times(&rotation, centre).map(|value| -value);
        let pose = Pose {
            rotation,
            translation,
        };
        let got = pose.centre();
        for (a, b) in got.iter().zip(centre) {
            assert!((a - b).abs() < 1e-12);
        }
        let in_camera = pose.to_camera(centre);
        assert!(in_camera.iter().all(|value| value.abs() < 1e-12));
    }

    #[test]
    fn angles_are_normalised_and_compared_the_short_way() {
        assert_eq!(normalise_degrees(-1e-20), 0.0);
        assert_eq!(normalise_degrees(370.0), 10.0);
        assert!((angle_between(350.0, 10.0) - 20.0).abs() < 1e-12);
        assert!((angle_between(184.0, 341.0) - 157.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn quaternion_angle_axis_and_back_is_the_same_rotation(
            w in -1.0f64..1.0, x in -1.0f64..1.0, y in -1.0f64..1.0, z in -1.0f64..1.0,
        ) {
            prop_assume!(w * w + x * x + y * y + z * z > 0.01);
            let rotation = matrix_of_quaternion([w, x, y, z]);
            let back = matrix_of_angle_axis(angle_axis(&rotation));
            for (row, other) in rotation.iter().zip(back) {
                for (a, b) in row.iter().zip(other) {
                    prop_assert!((a - b).abs() < 1e-6, "{rotation:?} {back:?}");
                }
            }
        }

        #[test]
        fn rotations_near_a_half_turn_convert_too(
            axis in proptest::array::uniform3(-1.0f64..1.0), off in -1e-5f64..1e-5,
        ) {
            let norm = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
            prop_assume!(norm > 0.1);
            let vector = axis.map(|value| value / norm * (std::f64::consts::PI - off.abs()));
            let rotation = matrix_of_angle_axis(vector);
            let back = matrix_of_angle_axis(angle_axis(&rotation));
            for (row, other) in rotation.iter().zip(back) {
                for (a, b) in row.iter().zip(other) {
                    prop_assert!((a - b).abs() < 1e-4, "{rotation:?} {back:?}");
                }
            }
        }
    }
}
