//! The store's SQL: the schema and its migrations for each engine, loading at start-up, the
//! write-through inserts and following other processes' writes. Every statement is written
//! once, with `?N` placeholders, and runs on `SQLite` and on PostgreSQL through
//! `streetlevel-db`; only the schema steps differ. Tables are prefixed `store_` because other
//! crates (auth) keep their own tables in the same database.
//!
//! Unsigned 64-bit IDs are stored as their two's-complement `i64`; float lists as
//! little-endian `f64` blobs so that values read back bit for bit; booleans as integers.
//! On PostgreSQL the images and map features also carry PostGIS points (`geom`, and
//! `computed_geom` for images), generated from the coordinates by the database, with `GiST`
//! indexes, for GIS tools: the store's own statements never name them.
//!
//! By concern: [`schema`] (tables and migrations), [`columns`] (how values are kept),
//! [`write`] (inserts, the write log, ID reservation), [`follow`] (other processes' writes),
//! [`takedown`] (erasing, hiding, restoring) and [`load`] (start-up).

mod columns;
mod follow;
mod load;
mod schema;
mod takedown;
mod write;

pub(crate) use follow::{FollowedChanges, follow};
pub(crate) use load::load;
pub(crate) use schema::migrate;
pub use schema::{SCHEMA_VERSION, WRITES_CHANNEL};
pub(crate) use takedown::{TakedownRow, erase_images, set_hidden, takedowns};
pub(crate) use write::{
    creator_by_username, images_with_hashes, insert_creators, insert_detections,
    insert_image_hashes, insert_images, insert_map_features, insert_organizations,
    insert_sequences, last_write, reserve_ids, set_computed,
};
