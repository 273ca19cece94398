//! The crate's error type.

/// What can go wrong when building the limiters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitError {
    /// The tile window must be a positive duration.
    #[error("the tile quota window must be longer than zero")]
    ZeroWindow,
}
