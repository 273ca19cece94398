//! The one error type of the crate.

/// Everything that can go wrong in tile math, encoding or decoding.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MvtError {
    /// A zoom level above [`crate::MAX_ZOOM`].
    #[error("zoom {zoom} is above the maximum of {max}")]
    ZoomTooLarge {
        /// The zoom asked for.
        zoom: u8,
        /// The largest supported zoom.
        max: u8,
    },
    /// A tile column or row outside `0..2^z`.
    #[error("tile {z}/{x}/{y} is outside the grid of zoom {z}")]
    TileOutOfRange {
        /// Zoom.
        z: u8,
        /// Column.
        x: u32,
        /// Row.
        y: u32,
    },
    /// A bounding box whose minimum exceeds its maximum, or which is not finite.
    #[error("invalid bounding box: {reason}")]
    InvalidBounds {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An extent of zero, or one that does not fit the tile coordinate range.
    #[error("invalid extent {extent}")]
    InvalidExtent {
        /// The extent given.
        extent: u32,
    },
    /// The bytes are not a valid protocol buffer of the vector tile schema.
    #[error("malformed protocol buffer: {0}")]
    Protobuf(String),
    /// Two layers of one tile share a name.
    #[error("duplicate layer name {name:?}")]
    DuplicateLayerName {
        /// The repeated name.
        name: String,
    },
    /// A layer version other than 1 or 2.
    #[error("layer {layer:?} has unsupported version {version}")]
    UnsupportedVersion {
        /// Layer name.
        layer: String,
        /// Version found.
        version: u32,
    },
    /// A geometry type that is unknown or cannot be decoded.
    #[error("unknown geometry type {0}")]
    UnknownGeometryType(i32),
    /// A command integer with an unknown command id.
    #[error("unknown command id {0}")]
    UnknownCommand(u32),
    /// A command count that is zero where it must not be, or exceeds the remaining parameters.
    #[error("bad command count {count} for command {command}")]
    BadCommandCount {
        /// The command id.
        command: u32,
        /// The count found.
        count: u32,
    },
    /// A command out of place for the geometry type (for example `LineTo` before `MoveTo`).
    #[error("invalid command sequence: {0}")]
    InvalidCommandSequence(&'static str),
    /// A coordinate that leaves the 32-bit range after applying deltas.
    #[error("coordinate overflows 32 bits")]
    CoordinateOverflow,
    /// A feature tag list with an odd length.
    #[error("odd number of feature tags")]
    OddTagCount,
    /// A key index beyond the layer's key table.
    #[error("key index {index} out of range for {len} keys")]
    KeyIndexOutOfRange {
        /// The index found.
        index: u32,
        /// The number of keys.
        len: usize,
    },
    /// A value index beyond the layer's value table.
    #[error("value index {index} out of range for {len} values")]
    ValueIndexOutOfRange {
        /// The index found.
        index: u32,
        /// The number of values.
        len: usize,
    },
    /// A value message that does not hold exactly one value.
    #[error("value must hold exactly one field, found {0}")]
    InvalidValue(usize),
    /// A polygon whose first ring is not exterior, or a ring with fewer than four points.
    #[error("invalid polygon: {0}")]
    InvalidPolygon(&'static str),
}
