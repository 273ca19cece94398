//! Taking images down: erasure (the rows, detections, map feature links and content hashes
//! gone from the database, the records from memory), hiding (withdrawn from public view, kept
//! to be restored) and restoring; the record of who did which, when; and applying what other
//! processes did, found by following the write log.
//!
//! Invariants: the database is written first, in one transaction with the write log entry
//! and the takedown record, then memory, so a refused write changes nothing; afterwards no
//! index, list or tile structure holds an erased or hidden image (each part's own invariants
//! say so, see `records.rs`, `indexes.rs`, `overview.rs`), the change log names every area
//! whose tiles changed, and the ID allocator's floor stays above every erased ID, so an ID is
//! never handed out again and paging cursors stay valid.

use std::collections::HashSet;

use streetlevel_db::{Conn, DbError};
use streetlevel_model::{CreatorId, Image, ImageId, MapFeatureId, SequenceId, Timestamp};

use crate::image_record::ImageRecord;
use crate::sql::{self, FollowedChanges, TakedownRow};
use crate::{Store, StoreError};

/// What a takedown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakedownAction {
    /// Erased.
    Deleted,
    /// Withdrawn from public view.
    Hidden,
    /// Public again after being hidden.
    Restored,
}

impl TakedownAction {
    /// The name stored and shown: `deleted`, `hidden`, `restored`.
    pub fn as_str(self) -> &'static str {
        match self {
            TakedownAction::Deleted => "deleted",
            TakedownAction::Hidden => "hidden",
            TakedownAction::Restored => "restored",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "deleted" => Some(TakedownAction::Deleted),
            "hidden" => Some(TakedownAction::Hidden),
            "restored" => Some(TakedownAction::Restored),
            _ => None,
        }
    }
}

/// Who takes images down, what they asked for, and when: recorded with the takedown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakedownNote<'a> {
    /// Who: `user <name>`, `administrator <name>`, `command line`, ...
    pub actor: &'a str,
    /// What was asked for: an image ID, a sequence key, `upload <id>`.
    pub subject: &'a str,
    /// When.
    pub at: Timestamp,
}

/// One entry of the takedown record: no content of the images, only who, what and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakedownRecord {
    /// Its number, ascending with time.
    pub seq: i64,
    /// When.
    pub at: Timestamp,
    /// Who.
    pub actor: String,
    /// What was done.
    pub action: TakedownAction,
    /// What was asked for.
    pub subject: String,
    /// How many images it covered.
    pub images: u64,
}

impl Store {
    /// The hidden image with this ID (hidden images answer `None` from [`Store::image`]).
    pub fn hidden_image(&self, id: ImageId) -> Option<Image> {
        let slot = self.records.hidden_slot(id.0)?;
        Some(self.image_at(slot))
    }

    /// Whether the image with this ID is hidden (a map lookup, no image built).
    pub fn is_hidden(&self, id: ImageId) -> bool {
        self.records.hidden_slot(id.0).is_some()
    }

    /// Whether an image the store holds, public or hidden, has this mesh or `SfM` cluster
    /// (a scan: erasure asks once per erased image whether to delete the file).
    pub fn media_in_use(&self, media: streetlevel_model::MediaId) -> bool {
        self.records.images().iter().any(|record| {
            !record.is_removed()
                && (record.mesh_id() == Some(media) || record.sfm_cluster_id() == Some(media))
        })
    }

    /// The IDs of the hidden images of a sequence, ascending.
    pub fn hidden_images_of_sequence(&self, id: &SequenceId) -> Vec<ImageId> {
        let Some(sequence) = self.records.sequence_slot_of(id.as_str()) else {
            return Vec::new();
        };
        self.hidden_where(|record| record.sequence == sequence)
    }

    /// The IDs of the hidden images of a creator, ascending.
    pub fn hidden_images_of_creator(&self, id: CreatorId) -> Vec<ImageId> {
        let Some(creator) = self.records.creator_slot_of(id) else {
            return Vec::new();
        };
        self.hidden_where(|record| record.creator == creator)
    }

    fn hidden_where(&self, keep: impl Fn(&ImageRecord) -> bool) -> Vec<ImageId> {
        let mut ids: Vec<ImageId> = self
            .records
            .hidden_ids()
            .filter_map(|id| {
                let slot = self.records.hidden_slot(id)?;
                keep(self.records.image(slot)).then_some(ImageId(id))
            })
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Whether a sequence has hidden images (and so exists, though not in public view).
    pub(crate) fn sequence_has_hidden(&self, sequence: u32) -> bool {
        self.records
            .hidden_ids()
            .filter_map(|id| self.records.hidden_slot(id))
            .any(|slot| self.records.image(slot).sequence == sequence)
    }

    /// The number of hidden images (public ones are [`Store::image_count`]).
    pub fn hidden_image_count(&self) -> usize {
        self.records.hidden_ids().count()
    }

    /// Every image the store holds, public or hidden, by ID ascending (`streetlevel reblur`
    /// goes through them all).
    pub fn all_image_ids(&self) -> Vec<ImageId> {
        let mut ids = self.image_ids_between(0, u64::MAX);
        ids.sort_unstable();
        ids.into_iter().map(ImageId).collect()
    }

    /// The IDs of the images held (visible or hidden) between `low` and `high` inclusive.
    pub(crate) fn image_ids_between(&self, low: u64, high: u64) -> Vec<u64> {
        let id_order = self.indexes.id_order();
        let id_at = |position: usize| self.records.image(id_order[position]).id;
        let start = id_order.partition_point(|&slot| self.records.image(slot).id < low);
        let mut ids: Vec<u64> = (start..id_order.len())
            .map(id_at)
            .take_while(|&id| id <= high)
            .collect();
        ids.extend(
            self.records
                .hidden_ids()
                .filter(|id| (low..=high).contains(id)),
        );
        ids
    }

    /// Erases the images with these IDs, public or hidden (IDs the store does not hold as
    /// images are left out): their rows, detections, content hashes and links from map
    /// features, and sequences left without images, in one transaction that records `note`;
    /// then memory. Returns the erased images as they were, in the order asked.
    ///
    /// `also` runs inside the same transaction with the IDs erased, so that other crates'
    /// rows about these images go with them (or the erasure fails whole).
    pub fn delete_images(
        &mut self,
        ids: &[ImageId],
        note: &TakedownNote<'_>,
        also: impl FnOnce(&mut dyn Conn, &[ImageId]) -> Result<(), DbError>,
    ) -> Result<Vec<Image>, StoreError> {
        let images = self.held_images(ids);
        let erased: Vec<ImageId> = images.iter().map(|image| image.id).collect();
        let gone: HashSet<u64> = erased.iter().map(|id| id.0).collect();
        let map_features: Vec<(MapFeatureId, Vec<ImageId>)> = self
            .records
            .map_features()
            .iter()
            .filter(|feature| feature.images.iter().any(|image| gone.contains(&image.0)))
            .map(|feature| {
                let kept = feature
                    .images
                    .iter()
                    .copied()
                    .filter(|image| !gone.contains(&image.0))
                    .collect();
                (feature.id, kept)
            })
            .collect();
        let emptied = self.sequences_emptied_by(&gone);
        let row = TakedownRow {
            at: note.at.0,
            actor: note.actor,
            action: TakedownAction::Deleted.as_str(),
            subject: note.subject,
            images: erased.len(),
        };
        self.write(|connection| {
            sql::erase_images(connection, &erased, &map_features, &emptied, &row)?;
            also(connection, &erased)?;
            Ok(())
        })?;
        if let Some(greatest) = gone.iter().max() {
            self.persistence
                .handed_out_below(greatest.saturating_add(1));
        }
        self.forget_images(&erased);
        Ok(images)
    }

    /// Withdraws the public images with these IDs from view (others are left out), recording
    /// `note`. Returns the images hidden.
    pub fn hide_images(
        &mut self,
        ids: &[ImageId],
        note: &TakedownNote<'_>,
    ) -> Result<Vec<Image>, StoreError> {
        let images: Vec<Image> = ids.iter().filter_map(|&id| self.image(id)).collect();
        self.set_visibility(&images, true, note)?;
        self.hide_in_memory(&images.iter().map(|image| image.id).collect::<Vec<_>>());
        Ok(images)
    }

    /// Makes the hidden images with these IDs public again (others are left out), recording
    /// `note`. Returns the images restored.
    pub fn restore_images(
        &mut self,
        ids: &[ImageId],
        note: &TakedownNote<'_>,
    ) -> Result<Vec<Image>, StoreError> {
        let images: Vec<Image> = ids.iter().filter_map(|&id| self.hidden_image(id)).collect();
        self.set_visibility(&images, false, note)?;
        self.restore_in_memory(&images.iter().map(|image| image.id).collect::<Vec<_>>());
        Ok(images)
    }

    /// The newest `limit` entries of the takedown record, newest first (none without a
    /// database).
    pub fn takedowns(&self, limit: usize) -> Result<Vec<TakedownRecord>, StoreError> {
        match self.persistence.database() {
            Some(database) => database.read(|connection| sql::takedowns(connection, limit)),
            None => Ok(Vec::new()),
        }
    }

    /// The newest `limit` entries of the takedown record in the database at `location`,
    /// newest first, without loading the store (for operators' tools).
    pub fn takedowns_at(
        location: &streetlevel_db::Location,
        limit: usize,
    ) -> Result<Vec<TakedownRecord>, StoreError> {
        let database = streetlevel_db::Database::open(location)?;
        sql::migrate(&database)?;
        database.read(|connection| sql::takedowns(connection, limit))
    }

    fn set_visibility(
        &self,
        images: &[Image],
        hidden: bool,
        note: &TakedownNote<'_>,
    ) -> Result<(), StoreError> {
        let ids: Vec<ImageId> = images.iter().map(|image| image.id).collect();
        let action = if hidden {
            TakedownAction::Hidden
        } else {
            TakedownAction::Restored
        };
        let row = TakedownRow {
            at: note.at.0,
            actor: note.actor,
            action: action.as_str(),
            subject: note.subject,
            images: ids.len(),
        };
        self.write(|connection| sql::set_hidden(connection, &ids, hidden, &row))
    }

    /// The images with these IDs the store holds, public or hidden, each once.
    fn held_images(&self, ids: &[ImageId]) -> Vec<Image> {
        let mut seen = HashSet::new();
        ids.iter()
            .filter(|id| seen.insert(**id))
            .filter_map(|&id| self.image(id).or_else(|| self.hidden_image(id)))
            .collect()
    }

    /// The sequences that erasing `gone` leaves without any image, public or hidden.
    fn sequences_emptied_by(&self, gone: &HashSet<u64>) -> Vec<SequenceId> {
        let mut sequences: Vec<u32> = gone
            .iter()
            .filter_map(|&id| {
                self.image_index(id)
                    .or_else(|| self.records.hidden_slot(id))
            })
            .map(|slot| self.records.image(slot).sequence)
            .collect();
        sequences.sort_unstable();
        sequences.dedup();
        sequences
            .into_iter()
            .filter(|&sequence| {
                let record = self.records.sequence(sequence);
                record
                    .members
                    .iter()
                    .all(|&slot| gone.contains(&self.records.image(slot).id))
                    && self
                        .records
                        .hidden_ids()
                        .filter(|id| !gone.contains(id))
                        .filter_map(|id| self.records.hidden_slot(id))
                        .all(|slot| self.records.image(slot).sequence != sequence)
            })
            .map(|sequence| self.records.sequence(sequence).id.clone())
            .collect()
    }

    /// Applies to memory what following found in the database.
    pub(crate) fn apply_followed(&mut self, changes: &FollowedChanges) {
        self.forget_images(&changes.erased);
        self.hide_in_memory(&changes.hidden);
        self.restore_in_memory(&changes.restored);
        self.replace_in_memory(&changes.updated);
    }

    /// Erases images from memory: visible ones leave the indexes and tile structures, every
    /// one's slot becomes a tombstone, their detections and map feature links go, and so do
    /// sequences left without images.
    fn forget_images(&mut self, ids: &[ImageId]) {
        let slots: Vec<u32> = ids
            .iter()
            .filter_map(|id| {
                self.image_index(id.0)
                    .or_else(|| self.records.hidden_slot(id.0))
            })
            .collect();
        if slots.is_empty() {
            return;
        }
        let removed = self.visible_records(&slots);
        let mut sequences: Vec<u32> = slots
            .iter()
            .map(|&slot| self.records.image(slot).sequence)
            .collect();
        sequences.sort_unstable();
        sequences.dedup();
        let touched = self.records.erase(&slots);
        self.unindex(&removed, &touched);
        // A sequence left without images was erased with them (its row too).
        for sequence in sequences {
            if self.records.sequence(sequence).members.is_empty()
                && !self.sequence_has_hidden(sequence)
            {
                let key = self.records.sequence(sequence).id.clone();
                self.records.forget_sequence(key.as_str());
            }
        }
        let gone: HashSet<u64> = ids.iter().map(|id| id.0).collect();
        self.records.unlink_images(&gone);
        self.erasures += 1;
        self.bump_generation();
        self.record_removed_images(&removed, &touched);
    }

    fn hide_in_memory(&mut self, ids: &[ImageId]) {
        let slots: Vec<u32> = ids.iter().filter_map(|id| self.image_index(id.0)).collect();
        if slots.is_empty() {
            return;
        }
        let removed = self.visible_records(&slots);
        let touched = self.records.hide(&slots);
        self.unindex(&removed, &touched);
        self.bump_generation();
        self.record_removed_images(&removed, &touched);
    }

    fn restore_in_memory(&mut self, ids: &[ImageId]) {
        let first_new = self.records.images().len();
        for id in ids {
            if let Some(slot) = self.records.hidden_slot(id.0) {
                self.records.restore(slot);
            }
        }
        if self.records.images().len() == first_new {
            return;
        }
        self.index_new_images(first_new);
        self.bump_generation();
        self.record_new_images(first_new);
    }

    /// The visible ones of `slots` with copies of their records as they are now.
    pub(crate) fn visible_records(&self, slots: &[u32]) -> Vec<(u32, ImageRecord)> {
        slots
            .iter()
            .map(|&slot| (slot, *self.records.image(slot)))
            .filter(|(_, record)| record.is_visible())
            .collect()
    }

    /// Takes `removed` out of the indexes and tile structures, once the records' lists no
    /// longer hold them (the sequences `touched` lost members).
    pub(crate) fn unindex(&mut self, removed: &[(u32, ImageRecord)], touched: &[u32]) {
        let Self {
            records,
            indexes,
            overview,
            ..
        } = self;
        indexes.remove_images(records, removed, touched);
        overview.remove(records, indexes, removed, touched);
    }
}
