//! Persistence: the database a store writes through (`SQLite` or PostgreSQL, through
//! `streetlevel-db`), and what the store must remember about it.
//!
//! Invariants kept here: every write runs in one transaction that excludes other writers and reaches memory
//! only after it committed (callers apply it after [`Persistence::write`] returns `Ok`);
//! `followed_write` is the newest entry of the write log whose images the store holds; IDs
//! handed out are below `next_id`, which only grows; without a database, `image_hashes`
//! holds the content hash of every imported image (with one, the database does).

use std::collections::HashMap;
use std::sync::Arc;

use streetlevel_db::{Conn, Database};
use streetlevel_model::ImageId;

use crate::StoreError;

/// The database a store writes through, if any, and the state that goes with it.
#[derive(Debug)]
pub(crate) struct Persistence {
    /// Shared so that following other writers can use the database while the store
    /// changes.
    database: Option<Arc<Database>>,
    /// The newest entry of the database's write log this store holds (see `batch.rs`).
    followed_write: i64,
    /// Content hashes of imported images, for a store without a database.
    image_hashes: HashMap<[u8; 32], ImageId>,
    /// The least ID the store may hand out next (the database keeps its own).
    next_id: u64,
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            database: None,
            followed_write: 0,
            image_hashes: HashMap::new(),
            next_id: 1,
        }
    }
}

impl Persistence {
    /// Writes go through `database` from now on.
    pub(crate) fn attach(&mut self, database: Database) {
        self.database = Some(Arc::new(database));
    }

    /// The database, if there is one.
    pub(crate) fn database(&self) -> Option<&Arc<Database>> {
        self.database.as_ref()
    }

    /// Runs `statements` in one write transaction (which excludes every other writer of the
    /// database) and commits; without a database, nothing.
    pub(crate) fn write(
        &self,
        statements: impl FnOnce(&mut dyn Conn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Some(database) = &self.database else {
            return Ok(());
        };
        // Exclusive from the start: a writer that reads before it writes (ID allocation,
        // duplicate checks) must not find its lock upgrade refused by another writer.
        database.write(statements)
    }

    /// Whether the database takes a write lock within `patience`: begins a write
    /// transaction and rolls it back. Without a database, always. On `SQLite` `patience` is
    /// the busy timeout; on PostgreSQL the wait is its `lock_timeout` (see `streetlevel-db`)
    /// and a connection that cannot be had fails at once.
    pub(crate) fn check_writable(&self, patience: std::time::Duration) -> Result<(), StoreError> {
        let Some(database) = &self.database else {
            return Ok(());
        };
        Ok(database.check_writable(patience)?)
    }

    /// The newest write log entry the store holds.
    pub(crate) fn followed_write(&self) -> i64 {
        self.followed_write
    }

    /// The store now holds the writes up to log entry `newest`.
    pub(crate) fn followed_up_to(&mut self, newest: i64) {
        self.followed_write = newest;
    }

    /// The least ID that may be handed out next.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// IDs below `next` have been handed out.
    pub(crate) fn handed_out_below(&mut self, next: u64) {
        self.next_id = self.next_id.max(next);
    }

    /// The image imported with this content hash, from memory (a store without a database).
    pub(crate) fn image_with_hash(&self, hash: &[u8; 32]) -> Option<ImageId> {
        self.image_hashes.get(hash).copied()
    }

    /// Remembers an imported image's hash when there is no database to hold it.
    pub(crate) fn remember_hash(&mut self, hash: [u8; 32], image: ImageId) {
        if self.database.is_none() {
            self.image_hashes.insert(hash, image);
        }
    }
}
