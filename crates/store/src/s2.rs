//! S2 cell IDs: the 64-bit cells of the S2 geometry library, computed from latitude and
//! longitude with the quadratic projection and the Hilbert curve, as the web viewer expects.
//!
//! A leaf cell (level 30) is about 1 cm wide. Every cell at level `L` covers a contiguous range
//! of leaf IDs, so an index sorted by leaf ID answers "what lies in this cell" at any level
//! with one range scan.

use std::fmt;

use crate::StoreError;

/// The deepest level: leaf cells.
pub const MAX_LEVEL: u8 = 30;

const POS_BITS: u32 = 2 * MAX_LEVEL as u32 + 1;
const MAX_SIZE: u32 = 1 << MAX_LEVEL;
const SWAP_MASK: usize = 1;
const INVERT_MASK: usize = 2;
/// Hilbert position (0..4) of the child at (i bit, j bit), by orientation.
const IJ_TO_POS: [[usize; 4]; 4] = [[0, 1, 3, 2], [0, 3, 1, 2], [2, 3, 1, 0], [2, 1, 3, 0]];
/// How the orientation changes when descending into the child at a Hilbert position.
const POS_TO_ORIENTATION: [usize; 4] = [SWAP_MASK, 0, 0, INVERT_MASK | SWAP_MASK];
/// Levels looked up at once in [`LOOKUP_POS`].
const LOOKUP_BITS: u32 = 4;
/// For `LOOKUP_BITS` levels at once, as the S2 library does: indexed by `i` bits, `j` bits
/// and the orientation (`i << 6 | j << 2 | orientation`), the Hilbert positions of those
/// levels and the orientation after them (`positions << 2 | orientation`).
static LOOKUP_POS: [u16; 1 << (2 * LOOKUP_BITS + 2)] = lookup_pos();

#[allow(clippy::cast_possible_truncation)] // 4 levels' positions (8 bits), an orientation (2)
const fn lookup_pos() -> [u16; 1 << (2 * LOOKUP_BITS + 2)] {
    let mut table = [0; 1 << (2 * LOOKUP_BITS + 2)];
    let mut index = 0;
    while index < table.len() {
        let (i, j, start) = (index >> 6, (index >> 2) & 15, index & 3);
        let mut orientation = start;
        let mut positions = 0;
        let mut bit = LOOKUP_BITS;
        while bit > 0 {
            bit -= 1;
            let quadrant = ((i >> bit) & 1) << 1 | ((j >> bit) & 1);
            let child = IJ_TO_POS[orientation][quadrant];
            orientation ^= POS_TO_ORIENTATION[child];
            positions = (positions << 2) | child;
        }
        table[index] = (positions << 2 | orientation) as u16;
        index += 1;
    }
    table
}

/// An S2 cell: a face (0–5), a level (0–30) and a position along the Hilbert curve, packed in
/// a `u64` exactly as the S2 library does (so the decimal form matches other clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct S2CellId(u64);

impl S2CellId {
    /// Validates a raw cell ID: face at most 5 and a trailing 1 bit at an even position.
    pub fn new(raw: u64) -> Result<Self, StoreError> {
        let face = raw >> POS_BITS;
        let lowest_bit = raw & raw.wrapping_neg();
        if raw == 0 || face > 5 || lowest_bit & 0x1555_5555_5555_5555 == 0 {
            return Err(StoreError::InvalidCell(raw));
        }
        Ok(S2CellId(raw))
    }

    /// The leaf cell (level 30) containing a latitude/longitude in degrees.
    pub fn from_lat_lng(lat: f64, lng: f64) -> Self {
        let (lat, lng) = (lat.to_radians(), lng.to_radians());
        let point = [lat.cos() * lng.cos(), lat.cos() * lng.sin(), lat.sin()];
        let (face, u, v) = xyz_to_face_uv(point);
        let i = st_to_ij(uv_to_st(u));
        let j = st_to_ij(uv_to_st(v));
        Self::from_face_ij(face, i, j)
    }

    /// The cell at `level` that contains this one; `self` when `level` is this cell's level or
    /// deeper.
    #[must_use]
    pub fn parent(self, level: u8) -> Self {
        if level >= self.level() {
            return self;
        }
        let lsb = lsb_for_level(level);
        S2CellId((self.0 & lsb.wrapping_neg()) | lsb)
    }

    /// The level: 0 for a face, 30 for a leaf.
    pub fn level(self) -> u8 {
        // At most 32 (the trailing zeros of a `u64`, halved): it fits.
        MAX_LEVEL - u8::try_from(self.0.trailing_zeros() / 2).unwrap_or(u8::MAX)
    }

    /// The face, 0 to 5.
    pub fn face(self) -> u8 {
        (self.0 >> POS_BITS) as u8
    }

    /// The smallest leaf ID inside this cell.
    pub fn range_min(self) -> u64 {
        self.0 - (self.lowest_bit() - 1)
    }

    /// The largest leaf ID inside this cell.
    pub fn range_max(self) -> u64 {
        self.0 + (self.lowest_bit() - 1)
    }

    /// Whether `leaf` (any cell, in practice a leaf) lies inside this cell.
    pub fn contains(self, other: S2CellId) -> bool {
        (self.range_min()..=self.range_max()).contains(&other.0)
    }

    /// The raw 64-bit ID.
    pub fn raw(self) -> u64 {
        self.0
    }

    fn lowest_bit(self) -> u64 {
        self.0 & self.0.wrapping_neg()
    }

    /// Walks the Hilbert curve `LOOKUP_BITS` levels at a time from the top: 32 levels,
    /// of which the first two (above level 0; `i` and `j` have 30 bits) are the child at
    /// (0, 0) twice, which adds no position and, from a face's orientation (0 or 1), gives the
    /// same orientation back.
    fn from_face_ij(face: u8, i: u32, j: u32) -> Self {
        const MASK: u32 = (1 << LOOKUP_BITS) - 1;
        let mut bits = usize::from(face) & SWAP_MASK;
        let mut position: u64 = 0;
        for chunk in (0..32 / LOOKUP_BITS).rev() {
            let shift = chunk * LOOKUP_BITS;
            bits += (((i >> shift) & MASK) as usize) << (LOOKUP_BITS + 2);
            bits += (((j >> shift) & MASK) as usize) << 2;
            let entry = LOOKUP_POS[bits];
            position |= u64::from(entry >> 2) << (2 * shift);
            bits = usize::from(entry) & (SWAP_MASK | INVERT_MASK);
        }
        S2CellId(((u64::from(face) << (POS_BITS - 1)) | position) << 1 | 1)
    }
}

impl fmt::Display for S2CellId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

fn lsb_for_level(level: u8) -> u64 {
    1u64 << (2 * u32::from(MAX_LEVEL - level.min(MAX_LEVEL)))
}

#[allow(clippy::many_single_char_names)] // The S2 paper's names.
fn xyz_to_face_uv(point: [f64; 3]) -> (u8, f64, f64) {
    let [x, y, z] = point;
    let (abs_x, abs_y, abs_z) = (x.abs(), y.abs(), z.abs());
    let mut face = if abs_x > abs_y {
        if abs_x > abs_z { 0 } else { 2 }
    } else if abs_y > abs_z {
        1
    } else {
        2
    };
    if point[usize::from(face)] < 0.0 {
        face += 3;
    }
    let (u, v) = match face {
        0 => (y / x, z / x),
        1 => (-x / y, z / y),
        2 => (-x / z, -y / z),
        3 => (z / x, y / x),
        4 => (z / y, -x / y),
        _ => (-y / z, -x / z),
    };
    (face, u, v)
}

/// The quadratic projection of S2 (its default), from the face's gnomonic `u` to `s`.
fn uv_to_st(u: f64) -> f64 {
    if u >= 0.0 {
        0.5 * (1.0 + 3.0 * u).sqrt()
    } else {
        1.0 - 0.5 * (1.0 - 3.0 * u).sqrt()
    }
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped to `0..MAX_SIZE`
fn st_to_ij(s: f64) -> u32 {
    let scaled = (f64::from(MAX_SIZE) * s).floor();
    scaled.clamp(0.0, f64::from(MAX_SIZE - 1)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faces_are_level_zero_cells() {
        // The centre of face 0 (lat 0, lng 0) and its face cell, as in the S2 library.
        let leaf = S2CellId::from_lat_lng(0.0, 0.0);
        assert_eq!(leaf.face(), 0);
        assert_eq!(leaf.level(), 30);
        assert_eq!(leaf.parent(0).raw(), 0x1000_0000_0000_0000);
        assert_eq!(S2CellId::from_lat_lng(90.0, 0.0).face(), 2);
        assert_eq!(S2CellId::from_lat_lng(-90.0, 0.0).face(), 5);
        assert_eq!(S2CellId::from_lat_lng(0.0, 180.0).face(), 3);
        assert_eq!(S2CellId::from_lat_lng(0.0, 90.0).face(), 1);
        assert_eq!(S2CellId::from_lat_lng(0.0, -90.0).face(), 4);
    }

    #[test]
    fn invalid_ids_are_rejected() {
        for raw in [
            0,
            0xc000_0000_0000_0000_u64 | 1 << 60,
            2,
            0x1000_0000_0000_0002,
        ] {
            assert!(S2CellId::new(raw).is_err(), "{raw:#x}");
        }
        assert!(S2CellId::new(0x1000_0000_0000_0000).is_ok());
    }
}
