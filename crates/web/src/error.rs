//! The crate's error: what can stop the web surface from starting.

/// What can go wrong when setting up the web surface. Request handling never fails: a
/// request that cannot be served gets an error page instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    /// The web surface's own `SQLite` tables failed.
    #[error("web storage failed: {0}")]
    Storage(#[from] rusqlite::Error),
    /// The auth store failed.
    #[error("auth failed: {0}")]
    Auth(#[from] streetlevel_auth::AuthError),
    /// The database was written by a newer version of this crate.
    #[error("web schema version {found} is newer than the supported version {supported}")]
    SchemaTooNew {
        /// Version found in `web_schema_version`.
        found: i64,
        /// Highest version this build knows.
        supported: i64,
    },
}
