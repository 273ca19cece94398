//! Blur edits and privacy requests: boxes drawn by hand on an image to blur it more, or a
//! blurred region to remove, and requests from anyone to blur or take down an image.
//!
//! An edit is recorded in `import_blur_edits` and, once applied (at once for the image's owner
//! and administrators, after an administrator's review for anyone else), becomes a region of
//! `import_blur_regions` (`source` `edit`; a removal marks the region `removed_at`) and a new
//! blurred original: from the kept unblurred original with every region that is not removed
//! when the operator keeps one, else the served original with the new box blurred on top
//! (so that without an unblurred original blur can only be added). The thumbnails and
//! pyramid tiles made from the old original are removed from the media store (the image's
//! prefix of the media layout), which the replicas share, so every replica renders them anew
//! from the new original; the originals are read and written there too, so any replica
//! applies an edit of any image.
//!
//! Invariants: no transaction is open while a picture is rendered. An edit is rendered from
//! what was read (the regions not removed, the served original's bytes, the kept unblurred
//! original) on the CPU pool's interactive lane, which batch work cannot hold up; then one
//! short write transaction, which excludes every other writer of the database (other
//! processes too), checks that the edit is still pending and that the regions and the served
//! original are what the render read, writes the new original and records the edit. If
//! anything changed it is rendered again ([`APPLY_ATTEMPTS`] times at most), so two
//! edits applied at once each see the other's region. The new original is written before the
//! transaction commits: a crash in between leaves the edit pending with its blur already on
//! the picture, never an edit recorded without its blur. A request's text is stored as given
//! (pages escape it) and bounded here, whoever calls. Files: `edit.rs` (edits and regions as
//! stored), `apply.rs` (rendering and publishing an edit), `request.rs` (privacy requests).

mod apply;
mod edit;
mod request;

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use streetlevel_db::{Database, DbError, id_from_sql, id_to_sql, params};
use streetlevel_media::{ImageObject, Key, MediaStore};
use streetlevel_model::{Image, ImageId};
use streetlevel_store::Store;

use crate::ImportError;
pub(crate) use apply::edit_regions;
pub use apply::{APPLY_ATTEMPTS, remove_cached_media};
pub use edit::{BlurEdit, BlurRegion, EditKind, EditState, Shares, StoredBox};
use edit::{EDIT_COLUMNS, read_edit, regions};
pub use request::{NewRequest, PrivacyRequest, RequestKind, RequestState};

/// Where an edit's region came from, as stored in `import_blur_regions.source`.
pub const SOURCE_EDIT: &str = "edit";
/// The longest `what` or `why` of a request, in characters.
pub const MAX_REASON_CHARS: usize = 2000;
/// The longest contact of a request, in characters.
pub const MAX_CONTACT_CHARS: usize = 200;
/// Open requests kept at most: beyond this the form refuses new ones until administrators
/// resolve some, so that a flood cannot fill the disk.
pub const MAX_OPEN_REQUESTS: i64 = 10_000;
/// Pending edits kept at most, for the same reason.
pub const MAX_PENDING_EDITS: i64 = 10_000;

/// Why an edit or a request was refused before anything was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrivacyRefusal {
    /// No public or hidden image has this ID.
    #[error("there is no image with this ID")]
    UnknownImage,
    /// No edit or request has this number.
    #[error("there is no such edit or request")]
    Unknown,
    /// Already applied, refused or resolved.
    #[error("this was handled already")]
    Handled,
    /// A blur cannot be removed without the unblurred original, or the original is not a
    /// file this server can rewrite.
    #[error("{0}")]
    Impossible(String),
    /// A value of the form is wrong.
    #[error("{0}")]
    Invalid(String),
    /// The queue is full.
    #[error("too many requests are waiting: try again later")]
    QueueFull,
    /// What an edit is rendered from kept changing while it was rendered (other edits of
    /// the image, a reblur): nothing was applied, and a later try may succeed.
    #[error("{0}")]
    Changed(String),
}

/// Blur edits and privacy requests over the store's database and a data directory.
pub struct Privacy {
    db: Database,
    data_dir: PathBuf,
    store: Arc<RwLock<Store>>,
    /// The fingerprint of the blurrer configured now, if blurring is on.
    blurrer: Option<String>,
}

impl std::fmt::Debug for Privacy {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Privacy")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

fn refused(refusal: PrivacyRefusal) -> ImportError {
    ImportError::Privacy(refusal)
}

impl Privacy {
    /// Blur edits and requests of the images in `store` (on a database), whose files are under
    /// `data_dir`.
    pub fn open(store: Arc<RwLock<Store>>, data_dir: &Path) -> Result<Self, ImportError> {
        // The store's own handle: a process holds one.
        let db = store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .database()
            .cloned()
            .ok_or_else(|| {
                refused(PrivacyRefusal::Impossible(String::from(
                    "blur edits need a store on a database",
                )))
            })?;
        crate::tables::migrate(&db)?;
        Ok(Privacy {
            db,
            data_dir: data_dir.to_path_buf(),
            store,
            blurrer: None,
        })
    }

    /// The same, told the fingerprint of the blurrer configured now ([`Blurrer::fingerprint`];
    /// `None` with blurring off), against which [`Privacy::blur_status`] counts the images
    /// blurred by an older one.
    ///
    /// [`Blurrer::fingerprint`]: streetlevel_blur::Blurrer::fingerprint
    #[must_use]
    pub fn with_blurrer(mut self, fingerprint: Option<String>) -> Self {
        self.blurrer = fingerprint;
        self
    }

    /// How the images stand against the blurrer configured now (what the administrators'
    /// dashboard shows); `None` with blurring off.
    pub fn blur_status(&self) -> Option<Result<crate::BlurStatus, ImportError>> {
        let fingerprint = self.blurrer.as_deref()?;
        Some(crate::reblur::count_status(&self.store, fingerprint))
    }

    /// The image with this ID, public or hidden.
    pub fn image(&self, image: ImageId) -> Option<Image> {
        let store = self.store.read().unwrap_or_else(PoisonError::into_inner);
        store.image(image).or_else(|| store.hidden_image(image))
    }

    /// Whether the operator keeps this image's unblurred original (so that blur can be
    /// removed as well as added).
    pub fn unblurred_kept(&self, image: ImageId) -> bool {
        self.media()
            .find_image_object(image, ImageObject::Unblurred)
            .is_ok_and(|key| key.is_some())
    }

    /// The process's media store, where the originals are read and written.
    fn media(&self) -> MediaStore {
        crate::media_store(&self.data_dir)
    }

    /// The served original's key, if the image has one on the media store.
    fn original_key(&self, image: ImageId) -> Result<Key, ImportError> {
        self.media()
            .find_image_object(image, ImageObject::Original)?
            .ok_or_else(|| {
                refused(PrivacyRefusal::Impossible(String::from(
                    "this image's original is not stored on this server (a fixture rendered on \
                     request)",
                )))
            })
    }

    /// Every region of an image's blur, removed ones too, in the order found.
    pub fn regions(&self, image: ImageId) -> Result<Vec<BlurRegion>, ImportError> {
        Ok(self
            .db
            .read(|connection| regions(connection, image, false))?)
    }

    /// How many edits were applied to the image: pages add it to the thumbnail URLs they
    /// show, so a browser does not show a copy it cached before the last edit.
    pub fn revision(&self, image: ImageId) -> Result<u64, ImportError> {
        let count: Option<i64> = self.db.read(|connection| {
            connection.query_value(
                "SELECT COUNT(*) FROM import_blur_edits WHERE image_id = ?1 AND state = 'applied'",
                params![id_to_sql(image.0)],
            )
        })?;
        Ok(u64::try_from(count.unwrap_or(0)).unwrap_or(0))
    }

    /// The stored-pixel box of `shares` drawn on the upright picture of `image`.
    pub fn stored_box(&self, image: ImageId, shares: Shares) -> Result<StoredBox, ImportError> {
        let shares = shares.checked().ok_or_else(|| {
            refused(PrivacyRefusal::Invalid(String::from(
                "the box must lie inside the picture and be larger than a click",
            )))
        })?;
        let entity = self
            .image(image)
            .ok_or_else(|| refused(PrivacyRefusal::UnknownImage))?;
        let original = self.original_key(image)?;
        let bytes = self
            .media()
            .read(&original)?
            .ok_or_else(|| refused(PrivacyRefusal::UnknownImage))?;
        let size = streetlevel_blur::stored_size(&bytes)
            .map_err(|error| refused(PrivacyRefusal::Impossible(error.to_string())))?;
        let (x, y, width, height) = streetlevel_blur::upright_shares_to_stored(
            [shares.left, shares.top, shares.width, shares.height],
            size,
            entity.exif_orientation.unwrap_or(1),
        );
        Ok(StoredBox {
            x,
            y,
            width,
            height,
        })
    }

    /// Records an edit proposed by `proposed_by`; with `apply` (the owner, an administrator)
    /// it is applied at once, else it waits for an administrator.
    pub fn propose(
        &self,
        image: ImageId,
        kind: EditKind,
        area: StoredBox,
        proposed_by: &str,
        apply: bool,
    ) -> Result<BlurEdit, ImportError> {
        self.propose_for(image, kind, area, proposed_by, apply, None)
    }

    fn propose_for(
        &self,
        image: ImageId,
        kind: EditKind,
        area: StoredBox,
        proposed_by: &str,
        apply: bool,
        request: Option<u64>,
    ) -> Result<BlurEdit, ImportError> {
        if self.image(image).is_none() {
            return Err(refused(PrivacyRefusal::UnknownImage));
        }
        if kind == EditKind::Remove {
            if !self.unblurred_kept(image) {
                return Err(refused(PrivacyRefusal::Impossible(String::from(
                    "this server keeps no unblurred original of this image: blur can only be added",
                ))));
            }
            let known = self
                .regions(image)?
                .iter()
                .any(|region| !region.removed && region.area == area);
            if !known {
                return Err(refused(PrivacyRefusal::Invalid(String::from(
                    "this image has no such blurred region",
                ))));
            }
        }
        let id = self.db.write(|connection| {
            let now = connection.now_millis()?;
            if !apply {
                let pending: Option<i64> = connection.query_value(
                    "SELECT COUNT(*) FROM import_blur_edits WHERE state = 'pending'",
                    params![],
                )?;
                if pending.unwrap_or(0) >= MAX_PENDING_EDITS {
                    return Err(refused(PrivacyRefusal::QueueFull));
                }
            }
            let id: i64 = connection
                .query_value(
                    "INSERT INTO import_blur_edits (image_id, kind, x, y, width, height,
                        proposed_by, proposed_at, state, request_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9) RETURNING id",
                    params![
                        id_to_sql(image.0),
                        kind.as_str(),
                        i64::from(area.x),
                        i64::from(area.y),
                        i64::from(area.width),
                        i64::from(area.height),
                        proposed_by,
                        now,
                        request.map(id_to_sql)
                    ],
                )?
                .ok_or_else(|| DbError::Statement("INSERT … RETURNING gave no row".into()))?;
            Ok::<_, ImportError>(id_from_sql(id))
        })?;
        if apply {
            self.apply(id, proposed_by)
        } else {
            self.edit(id)?
                .ok_or_else(|| refused(PrivacyRefusal::Unknown))
        }
    }

    /// One edit.
    pub fn edit(&self, id: u64) -> Result<Option<BlurEdit>, ImportError> {
        Ok(self.db.read(|connection| {
            connection.query_row(
                &format!("SELECT {EDIT_COLUMNS} FROM import_blur_edits WHERE id = ?1"),
                params![id_to_sql(id)],
                read_edit,
            )
        })?)
    }

    /// The edits waiting for an administrator, oldest first (at most `limit`).
    pub fn pending_edits(&self, limit: usize) -> Result<Vec<BlurEdit>, ImportError> {
        Ok(self.db.read(|connection| {
            connection.query_map(
                &format!(
                    "SELECT {EDIT_COLUMNS} FROM import_blur_edits WHERE state = 'pending'
                     ORDER BY id LIMIT ?1"
                ),
                params![i64::try_from(limit).unwrap_or(i64::MAX)],
                read_edit,
            )
        })?)
    }

    /// The edits of one image, newest first.
    pub fn edits_of(&self, image: ImageId) -> Result<Vec<BlurEdit>, ImportError> {
        Ok(self.db.read(|connection| {
            connection.query_map(
                &format!(
                    "SELECT {EDIT_COLUMNS} FROM import_blur_edits WHERE image_id = ?1
                     ORDER BY id DESC LIMIT 200"
                ),
                params![id_to_sql(image.0)],
                read_edit,
            )
        })?)
    }

    /// Refuses a pending edit.
    pub fn refuse(&self, id: u64, decided_by: &str) -> Result<BlurEdit, ImportError> {
        let changed = self.db.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_blur_edits SET state = 'refused', decided_by = ?2, decided_at = ?3
                 WHERE id = ?1 AND state = 'pending'",
                params![id_to_sql(id), decided_by, now],
            )
        })?;
        let edit = self
            .edit(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))?;
        if changed == 0 {
            return Err(refused(PrivacyRefusal::Handled));
        }
        Ok(edit)
    }
}
