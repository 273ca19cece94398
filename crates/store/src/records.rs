//! The records of sequences, creators and organizations: what the store keeps per entity
//! besides the image table.

use streetlevel_model::{Creator, CreatorId, Organization, OrganizationId, SequenceId};

use crate::indexes::SequenceEntry;

#[derive(Debug)]
pub(crate) struct SequenceRecord {
    pub(crate) id: SequenceId,
    /// Set when the sequence itself was inserted (not only images naming it).
    pub(crate) explicit: Option<(CreatorId, Option<OrganizationId>)>,
    /// Image indices in capture order (ties by ID).
    pub(crate) members: Vec<u32>,
    /// Its entry in the sequence R-tree, if it has images.
    pub(crate) entry: Option<SequenceEntry>,
}

#[derive(Debug)]
pub(crate) struct CreatorRecord {
    pub(crate) id: CreatorId,
    /// `None` while the creator is known only from its images.
    pub(crate) creator: Option<Creator>,
    /// Image indices in ID order.
    pub(crate) images: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct OrganizationRecord {
    pub(crate) id: OrganizationId,
    pub(crate) organization: Option<Organization>,
    /// Image indices in ID order.
    pub(crate) images: Vec<u32>,
}
