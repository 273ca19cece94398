//! The one error type of the crate.

/// Why a detection geometry could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DetectionError {
    /// The string is not standard base64.
    #[error("geometry is not valid base64: {0}")]
    InvalidBase64(String),
    /// The bytes are not a valid vector tile.
    #[error("geometry is not a valid vector tile: {0}")]
    Tile(#[from] streetlevel_mvt::MvtError),
    /// The tile holds no feature at all, or its feature is not a polygon.
    #[error("geometry holds no polygon")]
    NoPolygon,
    /// The tile holds more than one feature.
    #[error("geometry holds {0} features, expected one")]
    TooManyFeatures(usize),
    /// The layer's extent is not the one detections use.
    #[error("geometry has extent {found}, expected {expected}")]
    UnexpectedExtent {
        /// The extent found.
        found: u32,
        /// The extent detections use.
        expected: u32,
    },
    /// An image width or height of zero.
    #[error("image size {width}x{height} has a zero side")]
    ZeroImageSize {
        /// Image width in pixels.
        width: u32,
        /// Image height in pixels.
        height: u32,
    },
    /// Nothing is left of the polygon once snapped to the grid (too small, or no area).
    #[error("polygon is empty on the detection grid")]
    EmptyPolygon,
    /// A pixel coordinate that is not a finite number.
    #[error("pixel coordinates must be finite")]
    NonFiniteCoordinate,
}
