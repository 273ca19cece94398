//! Organizations (spec 2.4).

use crate::OrganizationId;

/// An organization that can own imagery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// The organization ID.
    pub id: OrganizationId,
    /// Short name used in URLs.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Public description.
    pub description: Option<String>,
}
