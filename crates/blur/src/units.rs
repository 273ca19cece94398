//! Conversions between pixel counts or positions (`u32`, `usize`) and the `f32` geometry of
//! detections, stated once here so that the detectors and the blur carry no bare `as`.

/// A pixel count or position as an `f32`: exact up to 2^24 (16,777,216); a longer side, which
/// the pixel budget allows only for strips (100,000,000 x 1), becomes the nearest `f32`, a
/// few pixels off at most, well inside a box's margin.
#[inline]
#[allow(clippy::cast_precision_loss)] // exact below 2^24, rounded beyond, as documented
pub(crate) fn to_f32(pixels: u32) -> f32 {
    pixels as f32
}

/// [`to_f32`] for a position counted in a `usize` (a cell or pixel index).
#[inline]
#[allow(clippy::cast_precision_loss)] // as `to_f32`
pub(crate) fn index_to_f32(index: usize) -> f32 {
    index as f32
}

/// An `f32` pixel position or length the caller has already rounded (`floor`, `ceil` or
/// `round`) as a `u32`, saturating: negative and NaN give 0, beyond `u32::MAX` gives
/// `u32::MAX`; callers then clamp to the picture.
#[inline]
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // saturating, as documented
pub(crate) fn to_u32(value: f32) -> u32 {
    value as u32
}
