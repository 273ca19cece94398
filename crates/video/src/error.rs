//! Why a video is refused: every reason is a sentence a person can act on.

/// Why a video cannot be read, sampled or decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum VideoError {
    /// The file could not be read.
    #[error("cannot read the video: {0}")]
    Io(String),
    /// Not an ISO-BMFF (MP4/MOV) file.
    #[error("not an MP4/MOV video (no ISO-BMFF box structure)")]
    NotMp4,
    /// The file ends before its boxes or samples do.
    #[error("the video is truncated: {0}")]
    Truncated(String),
    /// The boxes contradict themselves.
    #[error("the video is malformed: {0}")]
    Malformed(String),
    /// A table or box is larger than this reader accepts.
    #[error("the video is too large to read: {0}")]
    TooLarge(String),
    /// No video track.
    #[error("the file has no video track")]
    NoVideoTrack,
    /// No GPS track: not CAMM, not GoPro GPS, no GPX beside it.
    #[error("the video has no GPS track (no CAMM GPS, no GoPro GPS5/GPS9, no GPX file beside it)")]
    NoGps,
    /// The GPS track cannot be used, and why (stationary, at 0,0, too fast, ...).
    #[error("the video's GPS track cannot be used: {0}")]
    UnusableGps(String),
    /// A GPX file that cannot be read.
    #[error("the GPX file cannot be read: {0}")]
    Gpx(String),
    /// ffmpeg is not installed or cannot be started.
    #[error("cannot run ffmpeg ({0}); install Debian's `ffmpeg` package")]
    NoDecoder(String),
    /// ffmpeg failed, ran over a limit, or gave other frames than asked for.
    #[error("the video cannot be decoded: {0}")]
    Decode(String),
}

impl From<std::io::Error> for VideoError {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            VideoError::Truncated(String::from("the file ends inside a box"))
        } else {
            VideoError::Io(error.to_string())
        }
    }
}
