//! Blurring in the pipeline: what a picture goes through before anything of it is written to
//! `media/`, and where its regions and its unblurred original go.
//!
//! Invariants: with blurring on, the bytes written as the original and every thumbnail are the
//! blurrer's output; a picture the blurrer refuses is not published (it is refused with the
//! reason); a pipeline whose blurrer cannot be made publishes nothing. The regions found are
//! written in the transaction that makes the image visible.

use std::sync::Arc;

use streetlevel_blur::{Blurrer, Region};
use streetlevel_db::{Conn, DbError, id_to_sql, params};
use streetlevel_model::ImageId;

/// Where a region came from, as stored in `import_blur_regions.source`.
pub const SOURCE_DETECTOR: &str = "detector";

/// Whether and how imports blur what they publish.
#[derive(Clone)]
pub enum Blurring {
    /// Nothing is blurred (synthetic data, tests not about blurring, an operator's choice).
    Off,
    /// Every picture goes through `blurrer` first.
    On {
        /// What blurs.
        blurrer: Arc<dyn Blurrer>,
        /// Keep the unblurred original at `media/img/<id>/unblurred.jpg`, never served (for
        /// blur edits and `streetlevel reblur`); off by default, as Panoramax.
        keep_unblurred: bool,
    },
    /// Blurring is on but no blurrer could be made (a missing or wrong model, no runtime):
    /// nothing is published, and every import and job says this reason.
    Unusable(String),
}

impl Default for Blurring {
    /// Fails closed: a pipeline nobody configured publishes nothing.
    fn default() -> Self {
        Blurring::Unusable(String::from("blurring is on but no blurrer was configured"))
    }
}

impl std::fmt::Debug for Blurring {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blurring::Off => formatter.write_str("Off"),
            Blurring::On {
                blurrer,
                keep_unblurred,
            } => formatter
                .debug_struct("On")
                .field("blurrer", &blurrer.fingerprint())
                .field("keep_unblurred", keep_unblurred)
                .finish(),
            Blurring::Unusable(reason) => formatter.debug_tuple("Unusable").field(reason).finish(),
        }
    }
}

impl Blurring {
    /// `Err` with the reason when blurring is on and cannot run: nothing may be published.
    pub(crate) fn check(&self) -> Result<(), crate::ImportError> {
        match self {
            Blurring::Unusable(reason) => Err(crate::ImportError::Blurring(reason.clone())),
            Blurring::Off | Blurring::On { .. } => Ok(()),
        }
    }
}

/// What blurring one picture gave, kept until its batch is inserted.
#[derive(Debug, Clone)]
pub(crate) struct BlurRecord {
    pub regions: Vec<Region>,
    pub blurred_by: String,
    pub unblurred_kept: bool,
}

/// Replaces the detector regions and the blur state of `image` with `record`'s, in the
/// caller's transaction (an import's insert, or `reblur`), as of `now` (the database's
/// clock, which a resumed `reblur --all` compares with its start).
pub(crate) fn write_record(
    connection: &mut dyn Conn,
    image: ImageId,
    record: &BlurRecord,
    now: i64,
) -> Result<(), DbError> {
    let image_id = id_to_sql(image.0);
    connection.execute(
        "DELETE FROM import_blur_regions WHERE image_id = ?1 AND source = ?2",
        params![image_id, SOURCE_DETECTOR],
    )?;
    for region in &record.regions {
        connection.execute(
            "INSERT INTO import_blur_regions (image_id, source, class, score, x, y, width,
                height, model, model_sha256, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                image_id,
                SOURCE_DETECTOR,
                region.class.as_str(),
                f64::from(region.score),
                i64::from(region.x),
                i64::from(region.y),
                i64::from(region.width),
                i64::from(region.height),
                region.model.as_str(),
                region.model_sha256.as_str(),
                now
            ],
        )?;
    }
    connection.execute(
        "DELETE FROM import_blurred_images WHERE image_id = ?1",
        params![image_id],
    )?;
    connection.execute(
        "INSERT INTO import_blurred_images (image_id, blurred_by, unblurred_kept, blurred_at)
         VALUES (?1, ?2, ?3, ?4)",
        params![
            image_id,
            record.blurred_by.as_str(),
            i64::from(record.unblurred_kept),
            now
        ],
    )?;
    Ok(())
}
