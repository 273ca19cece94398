//! The one error type of the crate: why a file cannot be ingested.

/// Why one JPEG cannot be read, thumbnailed or rewritten.
///
/// Every variant names a property of the file, so the message can be shown to the person who
/// uploaded it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The bytes do not start with the JPEG start-of-image marker (`FF D8`).
    #[error("not a jpeg file: it does not start with the start-of-image marker")]
    NotJpeg,
    /// The file ends inside its headers, before the compressed image data starts.
    #[error("truncated jpeg: the file ends before its image data")]
    Truncated,
    /// The headers are complete but hold no frame header (SOF) with a non-zero size, or one
    /// that cannot be read.
    #[error("jpeg has no usable frame header: {0}")]
    FrameHeader(String),
    /// The Exif segment is not a readable TIFF structure, or it is damaged where a required
    /// value would be.
    #[error("unreadable exif: {0}")]
    InvalidExif(String),
    /// Neither the uploader's description nor Exif gives a position.
    #[error("no gps position: neither the uploader's description nor exif gives one")]
    NoGps,
    /// Neither the uploader's description nor Exif gives a capture time.
    #[error("no capture time: neither the uploader's description nor exif gives one")]
    NoCaptureTime,
    /// A value is present but unusable: the uploader's description is not valid JSON, a
    /// latitude is out of range, a time does not exist, an orientation is not 1 to 8.
    #[error("invalid metadata: {0}")]
    InvalidMetadata(String),
    /// The frame header announces more pixels than [`crate::MAX_PIXELS`]; nothing was decoded.
    #[error("image of {width}x{height} pixels is over the limit of {limit} pixels")]
    TooManyPixels {
        /// Stored width from the frame header.
        width: u32,
        /// Stored height from the frame header.
        height: u32,
        /// The limit in force.
        limit: u64,
    },
    /// The Exif data to write does not fit in one JPEG segment.
    #[error("exif data of {len} bytes does not fit in one jpeg segment of at most {max} bytes")]
    ExifTooLarge {
        /// Size of the encoded Exif data.
        len: usize,
        /// The most one segment can hold.
        max: usize,
    },
    /// The compressed image data cannot be decoded (damaged, or a kind of JPEG this crate does
    /// not decode such as CMYK or 12-bit samples).
    #[error("cannot decode the jpeg image data: {0}")]
    Decode(String),
    /// A thumbnail or the Exif data to write cannot be encoded.
    #[error("cannot encode: {0}")]
    Encode(String),
}
