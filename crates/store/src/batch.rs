//! Imports and other processes' writes: batches of images known by the content hash of their
//! originals, written in one transaction with their sequences (and whatever the importer
//! records beside them); the entity ID allocator every writer shares; and following what
//! other processes wrote to the same database.
//!
//! Invariants: a batch is all or nothing, in the database and in memory; an image whose hash is
//! already stored is never inserted again; IDs handed out are above every ID ever stored or
//! handed out, so cursors stay valid (see the crate docs on paging); a written batch reaches
//! memory once, whether its own addition or a follow of the write log brings it, and never
//! brings back an image erased since it was written.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use streetlevel_db::{Conn, Database, DbError, Notifications};
use streetlevel_model::{Creator, CreatorId, EntityId, Image, ImageId, Sequence};

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

/// Read-your-writes for a state read from the database, such as an upload job that says its
/// images are published: loads into `store` every image write committed before this call
/// that it does not hold yet (this process's batches between their commit and
/// [`Store::add_written`], other processes' before the follower's next round). Call it after
/// reading that state. Returns how many images were added.
pub fn catch_up(store: &std::sync::RwLock<Store>) -> Result<usize, StoreError> {
    let pending = store
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .has_writes_to_follow()?;
    if !pending {
        return Ok(0);
    }
    store
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .follow()
}

/// A batch checked by [`Store::prepare_batch`], to be written by [`PreparedBatch::write`]
/// without holding the store.
#[derive(Debug)]
pub struct PreparedBatch<'b> {
    batch: &'b ImportBatch,
    /// The store's count of erasures when the batch was prepared.
    erasures: u64,
    database: Option<Arc<Database>>,
    /// For each image, the stored image with its hash that the store knows without a
    /// database.
    known_in_memory: Vec<Option<ImageId>>,
}

/// A batch in the database, not yet in memory: give it to [`Store::add_written`].
#[derive(Debug)]
#[must_use = "the batch is in the database but not yet served: add it with Store::add_written"]
pub struct WrittenBatch {
    erasures: u64,
    outcome: BatchOutcome,
    sequences: Vec<Sequence>,
    images: Vec<ImportedImage>,
}

impl PreparedBatch<'_> {
    /// Writes the batch in one transaction (which excludes every other writer of the
    /// database), leaving out images whose original is stored already or appears earlier in
    /// the batch and sequences left without images; `also` runs in the same transaction with
    /// the outcome. Without a database nothing is written and only the store's own hashes
    /// find duplicates.
    pub fn write(
        self,
        also: impl FnOnce(&mut dyn Conn, &BatchOutcome) -> Result<(), DbError>,
    ) -> Result<WrittenBatch, StoreError> {
        let PreparedBatch {
            batch,
            erasures,
            database,
            known_in_memory,
        } = self;
        let Some(database) = database else {
            let stored = vec![None; batch.images.len()];
            return Ok(choose(batch, erasures, &stored, &known_in_memory));
        };
        database.write(|connection| {
            let hashes: Vec<[u8; 32]> = batch
                .images
                .iter()
                .map(|imported| imported.content_hash)
                .collect();
            let stored = sql::images_with_hashes(connection, &hashes)?;
            let written = choose(batch, erasures, &stored, &known_in_memory);
            let images: Vec<Image> = written
                .images
                .iter()
                .map(|imported| imported.image.clone())
                .collect();
            sql::insert_sequences(connection, &written.sequences)?;
            sql::insert_images(connection, &images)?;
            let pairs: Vec<([u8; 32], ImageId)> = written
                .images
                .iter()
                .map(|imported| (imported.content_hash, imported.image.id))
                .collect();
            sql::insert_image_hashes(connection, &pairs)?;
            also(connection, &written.outcome)?;
            Ok::<_, StoreError>(written)
        })
    }
}

/// What of `batch` is new: images whose hash is neither `stored` (in the database), nor
/// `known` (in memory), nor earlier in the batch, and the sequences they name.
fn choose(
    batch: &ImportBatch,
    erasures: u64,
    stored: &[Option<ImageId>],
    known: &[Option<ImageId>],
) -> WrittenBatch {
    let mut outcome = BatchOutcome::default();
    let mut images = Vec::new();
    let mut in_batch: HashMap<[u8; 32], ImageId> = HashMap::new();
    for ((imported, stored), known) in batch.images.iter().zip(stored).zip(known) {
        let earlier = stored
            .or(*known)
            .or_else(|| in_batch.get(&imported.content_hash).copied());
        if let Some(existing) = earlier {
            outcome.duplicates.push((imported.image.id, existing));
        } else {
            in_batch.insert(imported.content_hash, imported.image.id);
            outcome.inserted.push(imported.image.id);
            images.push(imported.clone());
        }
    }
    let used: HashSet<_> = images
        .iter()
        .map(|imported: &ImportedImage| &imported.image.sequence)
        .collect();
    let sequences = batch
        .sequences
        .iter()
        .filter(|sequence| used.contains(&sequence.id))
        .cloned()
        .collect();
    WrittenBatch {
        erasures,
        outcome,
        sequences,
        images,
    }
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
    ///
    /// This holds `&mut self` through the transaction; a store shared behind a lock is better
    /// written in three steps, [`Store::prepare_batch`] under a read lock,
    /// [`PreparedBatch::write`] under none and [`Store::add_written`] under the write lock.
    pub fn insert_batch(
        &mut self,
        batch: &ImportBatch,
        also: impl FnOnce(&mut dyn Conn, &BatchOutcome) -> Result<(), DbError>,
    ) -> Result<BatchOutcome, StoreError> {
        let written = self.prepare_batch(batch)?.write(also)?;
        Ok(self.add_written(written))
    }

    /// Checks `batch` against what the store holds (new IDs, new sequence keys, every image's
    /// sequence in the batch, room) and takes what its write needs: the database handle and
    /// the hashes known in memory. Nothing is written.
    pub fn prepare_batch<'b>(
        &self,
        batch: &'b ImportBatch,
    ) -> Result<PreparedBatch<'b>, StoreError> {
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
        Ok(PreparedBatch {
            batch,
            erasures: self.erasures,
            database: self.persistence.database().cloned(),
            known_in_memory: batch
                .images
                .iter()
                .map(|imported| self.persistence.image_with_hash(&imported.content_hash))
                .collect(),
        })
    }

    /// Adds to memory the images and sequences `written` wrote, leaving out those the store
    /// holds already (a [`Store::follow`] of the write log may have loaded them since the
    /// write committed), and returns the batch's outcome.
    ///
    /// If images were erased from this store since the batch was prepared, one of them may
    /// have been the batch's (loaded by a follow, then erased), which the store no longer
    /// knows: the batch is then loaded from the database by [`Store::follow`], which has only
    /// what is still there. Should that read fail, the images are in the database and the
    /// next follow (or the next start) loads them.
    pub fn add_written(&mut self, written: WrittenBatch) -> BatchOutcome {
        let WrittenBatch {
            erasures,
            outcome,
            sequences,
            images,
        } = written;
        if erasures != self.erasures && self.persistence.database().is_some() {
            // The follower thread logs its own failures; this one is retried by it.
            let _loaded = self.follow().ok();
            return outcome;
        }
        for sequence in &sequences {
            self.records.push_sequence(sequence);
        }
        let first_new = self.records.images().len();
        for imported in &images {
            let image = &imported.image;
            let held = self.kind_of(EntityId(image.id.0)).is_some()
                || self.records.hidden_slot(image.id.0).is_some();
            if held {
                continue;
            }
            self.records
                .push_image(&RecordValues::of(image), &RecordNames::of(image));
            self.persistence
                .remember_hash(imported.content_hash, image.id);
        }
        self.index_new_images(first_new);
        self.bump_generation();
        self.record_new_images(first_new);
        outcome
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
