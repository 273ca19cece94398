//! The limits and names a deployment may change.

use std::num::NonZeroU32;
use std::time::Duration;

/// Quotas per app, and the name of the error body's trace member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Entity calls (`{base_url}/<id>`) allowed per minute per app.
    pub entity_per_minute: NonZeroU32,
    /// Search calls (`{base_url}/images?bbox=…`) allowed per minute per app.
    pub search_per_minute: NonZeroU32,
    /// Tile requests allowed per [`Config::tiles_window`] per app.
    pub tiles_per_window: NonZeroU32,
    /// The fixed window of the tile quota; one day in the spec.
    pub tiles_window: Duration,
    /// The name of the error body's trace member: `svctrace_id` by default; clients of the
    /// original service read `fbtrace_id`.
    pub trace_member: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            entity_per_minute: NonZeroU32::new(60_000).unwrap_or(NonZeroU32::MIN),
            search_per_minute: NonZeroU32::new(10_000).unwrap_or(NonZeroU32::MIN),
            tiles_per_window: NonZeroU32::new(50_000).unwrap_or(NonZeroU32::MIN),
            tiles_window: Duration::from_secs(24 * 60 * 60),
            trace_member: "svctrace_id".to_owned(),
        }
    }
}

impl Config {
    /// The name of the trace member of the error body, such as `svctrace_id`.
    pub fn trace_member(&self) -> String {
        self.trace_member.clone()
    }
}
