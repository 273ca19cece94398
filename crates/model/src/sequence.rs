//! Sequences (spec 2.5).

use crate::{CreatorId, ImageId, OrganizationId, SequenceId};

/// Images captured in succession, in capture order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    /// The opaque sequence key.
    pub id: SequenceId,
    /// The user who captured the sequence.
    pub creator: CreatorId,
    /// The organization the sequence was contributed to.
    pub organization: Option<OrganizationId>,
    /// Image IDs ordered by capture time.
    pub image_ids: Vec<ImageId>,
}
