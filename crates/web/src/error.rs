//! The crate's error: what can stop the web surface from starting.

/// What can go wrong when setting up the web surface. Request handling never fails: a
/// request that cannot be served gets an error page instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    /// The web surface's own tables failed.
    #[error("web storage failed: {0}")]
    Storage(#[from] streetlevel_db::DbError),
    /// The auth store failed.
    #[error("auth failed: {0}")]
    Auth(#[from] streetlevel_auth::AuthError),
    /// The schema could not be brought up to date (for example, a newer build wrote it).
    #[error(transparent)]
    Migration(#[from] streetlevel_db::MigrationError),
}
