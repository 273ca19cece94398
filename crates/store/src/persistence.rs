//! Persistence: the `SQLite` connection a store writes through, and what the store must
//! remember about it.
//!
//! Invariants kept here: every write runs in one immediate transaction and reaches memory
//! only after it committed (callers apply it after [`Persistence::write`] returns `Ok`);
//! `followed_write` is the newest entry of the write log whose images the store holds; IDs
//! handed out are below `next_id`, which only grows; without a database, `image_hashes`
//! holds the content hash of every imported image (with one, the database does).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, Transaction, TransactionBehavior};
use streetlevel_model::ImageId;

use crate::StoreError;

/// The database a store writes through, if any, and the state that goes with it.
#[derive(Debug)]
pub(crate) struct Persistence {
    /// Shared so that following other writers can hold the connection while the store
    /// changes.
    database: Option<Arc<Mutex<Connection>>>,
    /// The newest entry of `SQLite`'s write log this store holds (see `batch.rs`).
    followed_write: i64,
    /// Content hashes of imported images, for a store without `SQLite`.
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

/// Locks a connection; a poisoned lock only means another writer panicked mid-call, and
/// `SQLite` rolled that back.
fn lock(database: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    database
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Persistence {
    /// Writes go through `connection` from now on.
    pub(crate) fn attach(&mut self, connection: Connection) {
        self.database = Some(Arc::new(Mutex::new(connection)));
    }

    /// The connection, locked, if there is a database.
    pub(crate) fn connection(&self) -> Option<MutexGuard<'_, Connection>> {
        self.database.as_deref().map(lock)
    }

    /// The connection, shared, for a caller that must lock it while changing the store.
    pub(crate) fn shared_connection(&self) -> Option<Arc<Mutex<Connection>>> {
        self.database.clone()
    }

    /// Runs `statements` in one immediate transaction and commits; without a database,
    /// nothing.
    pub(crate) fn write(
        &self,
        statements: impl FnOnce(&Transaction<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Some(mut connection) = self.connection() else {
            return Ok(());
        };
        // Immediate: a writer that reads before it writes (ID allocation, duplicate checks)
        // must not find its lock upgrade refused by another process's writer.
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        statements(&transaction)?;
        transaction.commit()?;
        Ok(())
    }

    /// Whether the database takes a write lock within `patience`: begins an immediate
    /// transaction and rolls it back. Without a database, always.
    pub(crate) fn check_writable(&self, patience: std::time::Duration) -> Result<(), StoreError> {
        let Some(mut connection) = self.connection() else {
            return Ok(());
        };
        connection.busy_timeout(patience)?;
        let result = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .and_then(Transaction::rollback);
        connection.busy_timeout(streetlevel_sqlite::BUSY_TIMEOUT)?;
        Ok(result?)
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
