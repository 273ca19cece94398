//! Who may take a target down.
//!
//! Invariant: only the owner of every image named, or an administrator, may act; to anyone
//! else hidden images do not exist (a target with nothing public is answered as unknown, so a
//! takedown cannot be used to learn that a hidden image exists).

use streetlevel_model::CreatorId;

use crate::Target;

/// In which role a caller may act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The owner of every image named.
    Owner,
    /// An administrator (or the command line), acting on anyone's images.
    Administrator,
}

/// Why a caller may not act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The target is unknown to the caller (nothing of it is public).
    Unknown,
    /// The target is public but neither the caller's nor are they an administrator.
    Forbidden,
}

/// The caller's role on `target`: `creator` is the creator the caller is (by username), if
/// any; an owner acts as the owner even when also an administrator.
pub fn decide(
    creator: Option<CreatorId>,
    administrator: bool,
    target: &Target,
) -> Result<Role, Refusal> {
    let owns =
        creator.is_some_and(|creator| target.owners.len() == 1 && target.owners.contains(&creator));
    if owns {
        Ok(Role::Owner)
    } else if administrator {
        Ok(Role::Administrator)
    } else if target.public.is_empty() {
        Err(Refusal::Unknown)
    } else {
        Err(Refusal::Forbidden)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use streetlevel_model::ImageId;

    use super::*;

    fn target(public: &[u64], hidden: &[u64], owners: &[u64]) -> Target {
        Target {
            subject: String::from("sequence walk"),
            public: public.iter().copied().map(ImageId).collect(),
            hidden: hidden.iter().copied().map(ImageId).collect(),
            owners: owners
                .iter()
                .copied()
                .map(CreatorId)
                .collect::<BTreeSet<_>>(),
        }
    }

    const ALICE: Option<CreatorId> = Some(CreatorId(1));
    const BOB: Option<CreatorId> = Some(CreatorId(2));

    #[test]
    fn the_owner_acts_as_owner_even_when_an_administrator() {
        let walk = target(&[10, 11], &[12], &[1]);
        assert_eq!(decide(ALICE, false, &walk), Ok(Role::Owner));
        assert_eq!(decide(ALICE, true, &walk), Ok(Role::Owner));
    }

    #[test]
    fn an_administrator_acts_on_anyones_images_hidden_or_not() {
        assert_eq!(
            decide(BOB, true, &target(&[10], &[], &[1])),
            Ok(Role::Administrator)
        );
        assert_eq!(
            decide(None, true, &target(&[], &[12], &[1])),
            Ok(Role::Administrator)
        );
    }

    #[test]
    fn someone_else_is_forbidden_public_images_and_told_hidden_ones_do_not_exist() {
        assert_eq!(
            decide(BOB, false, &target(&[10], &[12], &[1])),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            decide(BOB, false, &target(&[], &[12], &[1])),
            Err(Refusal::Unknown)
        );
        // A user who never published anything is nobody's owner.
        assert_eq!(
            decide(None, false, &target(&[10], &[], &[1])),
            Err(Refusal::Forbidden)
        );
    }

    #[test]
    fn owning_part_of_a_target_is_not_owning_it() {
        let shared = target(&[10, 20], &[], &[1, 2]);
        assert_eq!(decide(ALICE, false, &shared), Err(Refusal::Forbidden));
        assert_eq!(decide(BOB, false, &shared), Err(Refusal::Forbidden));
        assert_eq!(decide(ALICE, true, &shared), Ok(Role::Administrator));
    }

    #[test]
    fn a_target_without_owners_belongs_to_no_one() {
        // An upload whose images are gone and whose uploader has no creator record.
        let empty = target(&[], &[], &[]);
        assert_eq!(decide(ALICE, false, &empty), Err(Refusal::Unknown));
        assert_eq!(decide(ALICE, true, &empty), Ok(Role::Administrator));
    }
}
