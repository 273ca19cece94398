#![doc = include_str!("../README.md")]

mod batch;
mod changes;
mod computed;
mod error;
pub mod filter;
mod image_record;
mod indexes;
mod overview;
mod persistence;
mod records;
pub mod s2;
mod search;
mod sequence_lines;
mod sql;
mod store;
pub mod surrogate;
mod takedown;
mod tiles;

pub use batch::{BatchOutcome, ImportBatch, ImportedImage, PreparedBatch, WrittenBatch, catch_up};
pub use changes::{TouchedArea, TouchedContent};
pub use computed::{Computed, ComputedUpdate, SequenceSummary};
pub use error::StoreError;
pub use filter::{
    BoundingBox, Cursor, DetectionFilter, ImageFilter, MapFeatureFilter, Page, TimeRange,
    wildcard_match,
};
pub use image_record::GeometryVariant;
pub use overview::{CellCount, OVERVIEW_GRID};
pub use s2::S2CellId;
pub use sql::{SCHEMA_VERSION, WRITES_CHANNEL};
pub use store::{DATABASE_FILE, MEDIA_DIR, Store};
pub use streetlevel_db::{Location, Notifications};
pub use takedown::{TakedownAction, TakedownNote, TakedownRecord};
pub use tiles::{MAX_COVERAGE_ZOOM, TileImage, TileMapFeature, TileSequence};
