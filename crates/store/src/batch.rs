//! Imports and other processes' writes: batches of images known by the content hash of their
//! originals, written in one transaction with their sequences (and whatever the importer
//! records beside them); the entity ID allocator every writer shares; and following what
//! other processes wrote to the same database.
//!
//! Invariants: a batch is all or nothing, in the database and in memory; an image whose hash is
//! already stored is never inserted again; IDs handed out are above every ID ever stored or
//! handed out, so cursors stay valid (see the crate docs on paging).

use std::collections::{HashMap, HashSet};

use streetlevel_db::{Conn, DbError, Notifications};
use streetlevel_model::{Creator, CreatorId, Image, ImageId, Sequence};

use crate::image_record::{RecordNames, RecordValues};
use crate::{Store, StoreError, sql};

/// One image of an [`ImportBatch`] and the SHA-256 of its original file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedImage {
    /// The image, with an ID from [`Store::reserve_ids`].
    pub image: Image,
    /// SHA-256 of the original's bytes.
    pub content_hash: [u8; 32],
}

/// Images and the new sequences they belong to, inserted together or not at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportBatch {
    /// New sequences; every image names one of them.
    pub sequences: Vec<Sequence>,
    /// The images, each with the hash of its original.
    pub images: Vec<ImportedImage>,
}

/// What [`Store::insert_batch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// The images inserted, in batch order.
    pub inserted: Vec<ImageId>,
    /// Images left out because their original was stored before: (batch ID, stored ID).
    pub duplicates: Vec<(ImageId, ImageId)>,
}

impl Store {
    /// Hands out `count` consecutive entity IDs and returns the first. They are above every
    /// ID in memory, in the database file and handed out before, also by other processes
    /// on the same database; unused ones are simply never seen.
    pub fn reserve_ids(&mut self, count: u64) -> Result<u64, StoreError> {
        let in_memory_next = self.greatest_id_in_memory().map_or(1, |id| id + 1);
        let mut first = in_memory_next.max(self.persistence.next_id());
        self.write(|connection| {
            first = sql::reserve_ids(connection, count, first)?;
            Ok(())
        })?;
        let next = first
            .checked_add(count)
            .ok_or(StoreError::Full("entity ids"))?;
        self.persistence.handed_out_below(next);
        Ok(first)
    }

    fn greatest_id_in_memory(&self) -> Option<u64> {
        let image = self.indexes.greatest_image_id(&self.records);
        image.max(self.records.greatest_id_but_images())
    }

    /// The creator named `username`, created (with a new ID) if there is none, also when
    /// another process created it since this store loaded.
    pub fn ensure_creator(&mut self, username: &str) -> Result<CreatorId, StoreError> {
        if let Some(creator) = self.creator_by_username(username) {
            return Ok(creator.id);
        }
        let stored = match self.persistence.database() {
            Some(database) => {
                database.read(|connection| sql::creator_by_username(connection, username))?
            }
            None => None,
        };
        let id = if let Some(id) = stored {
            id
        } else {
            let id = CreatorId(self.reserve_ids(1)?);
            let creator = Creator {
                id,
                username: username.to_owned(),
            };
            self.write(|connection| {
                sql::insert_creators(connection, std::slice::from_ref(&creator))
            })?;
            id
        };
        self.records.push_creator(&Creator {
            id,
            username: username.to_owned(),
        });
        self.bump_generation();
        Ok(id)
    }

    /// The stored image whose original has each hash, where one has.
    pub fn images_with_hashes(
        &self,
        hashes: &[[u8; 32]],
    ) -> Result<Vec<Option<ImageId>>, StoreError> {
        match self.persistence.database() {
            Some(database) => {
                database.read(|connection| sql::images_with_hashes(connection, hashes))
            }
            None => Ok(hashes
                .iter()
                .map(|hash| self.persistence.image_with_hash(hash))
                .collect()),
        }
    }

    /// Inserts a batch in one transaction: images whose original is already stored (or
    /// appears earlier in the batch) are left out, as are sequences left without images.
    /// `also` runs inside the same transaction with the outcome, so an importer can record
    /// its own progress (a job marked done) atomically with the images.
    pub fn insert_batch(
        &mut self,
        batch: &ImportBatch,
        also: impl FnOnce(&mut dyn Conn, &BatchOutcome) -> Result<(), DbError>,
    ) -> Result<BatchOutcome, StoreError> {
        let mut ids = HashSet::new();
        for imported in &batch.images {
            self.check_new_image(&imported.image, &mut ids)?;
        }
        let mut sequence_keys = HashSet::new();
        for sequence in &batch.sequences {
            if self.sequence(&sequence.id).is_some() || !sequence_keys.insert(&sequence.id) {
                return Err(StoreError::DuplicateKey {
                    what: "sequence",
                    key: sequence.id.to_string(),
                });
            }
        }
        if let Some(orphan) = batch
            .images
            .iter()
            .find(|imported| !sequence_keys.contains(&imported.image.sequence))
        {
            return Err(StoreError::InvalidEntity {
                what: "image",
                id: orphan.image.id.to_string(),
                reason: "its sequence is not in the batch",
            });
        }
        Self::check_capacity(self.records.images().len() + batch.images.len(), "images")?;
        let mut outcome = BatchOutcome::default();
        let mut kept: Vec<&ImportedImage> = Vec::new();
        let mut kept_sequences: Vec<Sequence> = Vec::new();
        let known_in_memory = |hash: &[u8; 32]| self.persistence.image_with_hash(hash);
        self.write(|connection| {
            let hashes: Vec<[u8; 32]> = batch
                .images
                .iter()
                .map(|imported| imported.content_hash)
                .collect();
            let stored = sql::images_with_hashes(connection, &hashes)?;
            let mut in_batch: HashMap<[u8; 32], ImageId> = HashMap::new();
            for (imported, stored) in batch.images.iter().zip(stored) {
                let earlier = stored
                    .or_else(|| known_in_memory(&imported.content_hash))
                    .or_else(|| in_batch.get(&imported.content_hash).copied());
                if let Some(existing) = earlier {
                    outcome.duplicates.push((imported.image.id, existing));
                } else {
                    in_batch.insert(imported.content_hash, imported.image.id);
                    outcome.inserted.push(imported.image.id);
                    kept.push(imported);
                }
            }
            let used: HashSet<_> = kept
                .iter()
                .map(|imported| &imported.image.sequence)
                .collect();
            kept_sequences = batch
                .sequences
                .iter()
                .filter(|sequence| used.contains(&sequence.id))
                .cloned()
                .collect();
            let images: Vec<Image> = kept.iter().map(|imported| imported.image.clone()).collect();
            sql::insert_sequences(connection, &kept_sequences)?;
            sql::insert_images(connection, &images)?;
            let pairs: Vec<([u8; 32], ImageId)> = kept
                .iter()
                .map(|imported| (imported.content_hash, imported.image.id))
                .collect();
            sql::insert_image_hashes(connection, &pairs)?;
            also(connection, &outcome)?;
            Ok(())
        })?;
        for sequence in &kept_sequences {
            self.records.push_sequence(sequence);
        }
        let first_new = self.records.images().len();
        for imported in &kept {
            let image = &imported.image;
            self.records
                .push_image(&RecordValues::of(image), &RecordNames::of(image));
            self.persistence
                .remember_hash(imported.content_hash, image.id);
        }
        self.index_new_images(first_new);
        self.bump_generation();
        self.record_new_images(first_new);
        Ok(outcome)
    }

    /// Loads what other processes wrote to the database since this store loaded or
    /// last followed (images, with the sequences, creators and organizations they name), so
    /// that an import into a served data directory shows without a restart. Returns how many
    /// images were added. A store without a database has nothing to follow.
    pub fn follow(&mut self) -> Result<usize, StoreError> {
        let Some(database) = self.persistence.database().cloned() else {
            return Ok(0);
        };
        let after = self.persistence.followed_write();
        let first_new = self.records.images().len();
        let (newest, added) = sql::follow(&database, self, after)?;
        self.persistence.followed_up_to(newest);
        if added > 0 {
            self.bump_generation();
            self.record_new_images(first_new);
        }
        Ok(added)
    }

    /// Whether another process (or this store, through [`Store::insert_batch`]) wrote images
    /// since the last [`Store::follow`]: a cheap check under a read lock before taking the
    /// write lock to follow.
    pub fn has_writes_to_follow(&self) -> Result<bool, StoreError> {
        let Some(database) = self.persistence.database() else {
            return Ok(false);
        };
        Ok(database.read(sql::last_write)? > self.persistence.followed_write())
    }

    /// What wakes a follower of other processes' writes: every image write notifies
    /// [`crate::WRITES_CHANNEL`] in its transaction, and PostgreSQL delivers it to this
    /// listener when the write commits; on `SQLite`, which cannot signal across processes,
    /// only its wait's timeout wakes it. After each wake the follower calls
    /// [`Store::has_writes_to_follow`] and [`Store::follow`], which catch up from the write
    /// log, so a lost notification (a broken listening connection) costs one timeout, never
    /// a write. `None` for a store without a database. On PostgreSQL this opens the
    /// listening connection, so call it where blocking is fine.
    pub fn notifications(&self) -> Result<Option<Notifications>, StoreError> {
        match self.persistence.database() {
            Some(database) => Ok(Some(database.notifications(sql::WRITES_CHANNEL)?)),
            None => Ok(None),
        }
    }

    pub(crate) fn check_new_image(
        &self,
        image: &Image,
        batch: &mut HashSet<u64>,
    ) -> Result<(), StoreError> {
        self.check_new_id(image.id.0, batch)?;
        let invalid = |reason| StoreError::InvalidEntity {
            what: "image",
            id: image.id.to_string(),
            reason,
        };
        if !image.geometry.is_valid() {
            return Err(invalid("geometry out of range"));
        }
        if image
            .computed_geometry
            .is_some_and(|point| !point.is_valid())
        {
            return Err(invalid("computed_geometry out of range"));
        }
        Ok(())
    }
}
