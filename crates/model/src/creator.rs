//! Creators: the users who upload images.

use crate::CreatorId;

/// The owner of uploaded images, as shown in an image's `creator` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creator {
    /// The user ID.
    pub id: CreatorId,
    /// The public username.
    pub username: String,
}
