//! Blur edits and privacy requests: boxes drawn by hand on an image to blur it more, or a
//! blurred region to remove, and requests from anyone to blur or take down an image.
//!
//! An edit is recorded in `import_blur_edits` and, once applied (at once for the image's owner
//! and administrators, after an administrator's review for anyone else), becomes a region of
//! `import_blur_regions` (`source` `edit`; a removal marks the region `removed_at`) and a new
//! blurred original: from the kept unblurred original with every region that is not removed
//! when the operator keeps one, else the served original with the new box blurred on top
//! (so that without an unblurred original blur can only be added). The thumbnails and
//! pyramid tiles cached from the old original are removed from `media/cache`, which the
//! replicas share, so every replica renders them anew from the new original.
//!
//! Invariants: the recording, the rendering and the writing of the new original happen in
//! one write transaction, which excludes every other writer of the database (other processes
//! too), so two edits applied at once each see the other's region; a request's text is
//! stored as given (pages escape it) and bounded here, whoever calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use streetlevel_blur::{Region, RegionClass};
use streetlevel_db::{Conn, Database, DbError, Row, id_from_sql, id_to_sql, params};
use streetlevel_model::{Image, ImageId};
use streetlevel_store::Store;

use crate::ImportError;
use streetlevel_media::{ImageObject, LocalMedia, write_atomically};

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
/// The smallest box side drawn, as a share of the picture: a click is not a box.
const MIN_SHARE: f64 = 0.002;

/// A box in the original's stored pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBox {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width, at least 1.
    pub width: u32,
    /// Height, at least 1.
    pub height: u32,
}

/// A box as shares (0 to 1) of the upright picture's width and height, as drawn on a page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

impl Shares {
    /// `Some` when every value is finite, the box lies in the picture and is not a click.
    pub fn checked(self) -> Option<Shares> {
        let values = [self.left, self.top, self.width, self.height];
        let in_range = values
            .iter()
            .all(|value| value.is_finite() && (0.0..=1.0).contains(value));
        (in_range
            && self.width >= MIN_SHARE
            && self.height >= MIN_SHARE
            && self.left + self.width <= 1.0 + 1e-9
            && self.top + self.height <= 1.0 + 1e-9)
            .then_some(self)
    }
}

/// What an edit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    /// Blur a box.
    Add,
    /// Remove a blurred region (needs the unblurred original).
    Remove,
}

impl EditKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EditKind::Add => "add",
            EditKind::Remove => "remove",
        }
    }

    fn parse(text: &str) -> Self {
        if text == "remove" {
            EditKind::Remove
        } else {
            EditKind::Add
        }
    }
}

/// Where an edit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditState {
    /// Waiting for an administrator.
    Pending,
    /// Applied to the pictures.
    Applied,
    /// Refused by an administrator.
    Refused,
}

impl EditState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EditState::Pending => "pending",
            EditState::Applied => "applied",
            EditState::Refused => "refused",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "applied" => EditState::Applied,
            "refused" => EditState::Refused,
            _ => EditState::Pending,
        }
    }
}

/// One blur edit.
#[derive(Debug, Clone, PartialEq)]
pub struct BlurEdit {
    /// Its number.
    pub id: u64,
    /// The image.
    pub image: ImageId,
    /// Add or remove.
    pub kind: EditKind,
    /// The box, in stored pixels.
    pub area: StoredBox,
    /// `user <name>`, `administrator <name>`, `request <n>` or `command line`.
    pub proposed_by: String,
    /// When, ms since the epoch.
    pub proposed_at: i64,
    /// Where it stands.
    pub state: EditState,
    /// Who applied or refused it.
    pub decided_by: Option<String>,
    /// When, ms since the epoch.
    pub decided_at: Option<i64>,
    /// The privacy request it came from.
    pub request: Option<u64>,
}

/// One region of an image's blur.
#[derive(Debug, Clone, PartialEq)]
pub struct BlurRegion {
    /// `detector` or `edit`.
    pub source: String,
    /// `face`, `plate` or `other`.
    pub class: String,
    /// The box, in stored pixels.
    pub area: StoredBox,
    /// Whether an edit removed it.
    pub removed: bool,
}

/// What a privacy request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Blur something (more).
    Blur,
    /// Take the image down.
    Remove,
}

impl RequestKind {
    /// The stored and form name.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Blur => "blur",
            RequestKind::Remove => "remove",
        }
    }

    /// The kind of a form value.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "blur" => Some(RequestKind::Blur),
            "remove" => Some(RequestKind::Remove),
            _ => None,
        }
    }
}

/// Where a privacy request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    /// Not handled yet.
    Open,
    /// Handled as asked.
    Done,
    /// Refused.
    Refused,
}

impl RequestState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Open => "open",
            RequestState::Done => "done",
            RequestState::Refused => "refused",
        }
    }

    /// The state of a stored or asked-for name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "open" => Some(RequestState::Open),
            "done" => Some(RequestState::Done),
            "refused" => Some(RequestState::Refused),
            _ => None,
        }
    }
}

/// A privacy request as the form sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRequest {
    /// The image.
    pub image: ImageId,
    /// Blur or remove.
    pub kind: RequestKind,
    /// What to blur, or why to remove (1 to [`MAX_REASON_CHARS`] characters).
    pub reason: String,
    /// The box drawn on the picture.
    pub area: Option<Shares>,
    /// How to reach the person (at most [`MAX_CONTACT_CHARS`] characters).
    pub contact: Option<String>,
}

/// A stored privacy request.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivacyRequest {
    /// Its number.
    pub id: u64,
    /// The image.
    pub image: ImageId,
    /// Blur or remove.
    pub kind: RequestKind,
    /// What to blur, or why to remove, as given.
    pub reason: String,
    /// The box drawn on the picture.
    pub area: Option<Shares>,
    /// How to reach the person, as given.
    pub contact: Option<String>,
    /// When it came, ms since the epoch.
    pub created_at: i64,
    /// Where it stands.
    pub state: RequestState,
    /// When it was resolved, ms since the epoch.
    pub resolved_at: Option<i64>,
    /// Who resolved it.
    pub resolved_by: Option<String>,
}

impl PrivacyRequest {
    /// How long it took to handle, or has been open at `now` (ms since the epoch), in ms.
    pub fn handling_millis(&self, now: i64) -> i64 {
        (self.resolved_at.unwrap_or(now) - self.created_at).max(0)
    }
}

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

fn read_edit(row: &dyn Row) -> Result<BlurEdit, DbError> {
    let number = |value: i64| u32::try_from(value).unwrap_or(0);
    Ok(BlurEdit {
        id: row.get::<u64>(0)?,
        image: ImageId(row.get::<u64>(1)?),
        kind: EditKind::parse(&row.get::<String>(2)?),
        area: StoredBox {
            x: number(row.get(3)?),
            y: number(row.get(4)?),
            width: number(row.get(5)?),
            height: number(row.get(6)?),
        },
        proposed_by: row.get(7)?,
        proposed_at: row.get(8)?,
        state: EditState::parse(&row.get::<String>(9)?),
        decided_by: row.get(10)?,
        decided_at: row.get(11)?,
        request: row.get::<Option<u64>>(12)?,
    })
}

const EDIT_COLUMNS: &str = "id, image_id, kind, x, y, width, height, proposed_by, proposed_at, \
     state, decided_by, decided_at, request_id";

const REQUEST_COLUMNS: &str = "id, image_id, kind, reason, box_left, box_top, box_width, \
     box_height, contact, created_at, state, resolved_at, resolved_by";

fn read_request(row: &dyn Row) -> Result<PrivacyRequest, DbError> {
    let area = match (
        row.get::<Option<f64>>(4)?,
        row.get::<Option<f64>>(5)?,
        row.get::<Option<f64>>(6)?,
        row.get::<Option<f64>>(7)?,
    ) {
        (Some(left), Some(top), Some(width), Some(height)) => Some(Shares {
            left,
            top,
            width,
            height,
        }),
        _ => None,
    };
    Ok(PrivacyRequest {
        id: row.get::<u64>(0)?,
        image: ImageId(row.get::<u64>(1)?),
        kind: RequestKind::parse(&row.get::<String>(2)?).unwrap_or(RequestKind::Blur),
        reason: row.get(3)?,
        area,
        contact: row.get(8)?,
        created_at: row.get(9)?,
        state: RequestState::parse(&row.get::<String>(10)?).unwrap_or(RequestState::Open),
        resolved_at: row.get(11)?,
        resolved_by: row.get(12)?,
    })
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
        crate::unblurred_path(&self.data_dir, image).is_file()
    }

    /// The served original's file, if the image has one on disk.
    fn original_file(&self, image: ImageId) -> Option<PathBuf> {
        LocalMedia::new(&self.data_dir).find_image_object(image, ImageObject::Original)
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
        let file = self.original_file(image).ok_or_else(|| {
            refused(PrivacyRefusal::Impossible(String::from(
                "this image's original is not a file on this server (a fixture rendered on request)",
            )))
        })?;
        let size = streetlevel_blur::stored_size(&std::fs::read(&file)?)
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

    /// Applies a pending edit: records its region (or the removal), renders the new blurred
    /// original and writes it, in one write transaction; then removes the thumbnails and
    /// pyramid tiles cached from the old original.
    pub fn apply(&self, id: u64, decided_by: &str) -> Result<BlurEdit, ImportError> {
        let edit = self
            .edit(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))?;
        if edit.state != EditState::Pending {
            return Err(refused(PrivacyRefusal::Handled));
        }
        let image = self
            .image(edit.image)
            .ok_or_else(|| refused(PrivacyRefusal::UnknownImage))?;
        let original = self.original_file(edit.image).ok_or_else(|| {
            refused(PrivacyRefusal::Impossible(String::from(
                "this image's original is not a file on this server (a fixture rendered on request)",
            )))
        })?;
        let unblurred = crate::unblurred_path(&self.data_dir, edit.image);
        // On the CPU pool, where the picture is rendered: its memory is waited for on a pool
        // thread, as the upload queue's pictures wait for it (held while waiting for a pool
        // thread, it could be what the pool's threads are all waiting for).
        crate::cpu::run(|| self.render_and_write(id, &edit, decided_by, &unblurred, &original))?;
        let removed = remove_cached_media(&self.data_dir, &image);
        tracing::info!(
            edit = id,
            image = %edit.image,
            kind = edit.kind.as_str(),
            decided_by,
            cached_files_removed = removed,
            "blur edit applied"
        );
        self.edit(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))
    }

    /// Records `edit` and writes its image's new original, rendered within the process's
    /// picture memory, taken before the transaction so that no write waits on it.
    fn render_and_write(
        &self,
        id: u64,
        edit: &BlurEdit,
        decided_by: &str,
        unblurred: &Path,
        original: &Path,
    ) -> Result<(), ImportError> {
        let _memory = {
            let base = std::fs::read(if unblurred.is_file() {
                unblurred
            } else {
                original
            })?;
            crate::budgets::picture_permit(&base, crate::budgets::PictureWork::BlurRegions)
                .map_err(|reason| refused(PrivacyRefusal::Impossible(reason)))?
        };
        self.db.write(|connection| {
            let now = connection.now_millis()?;
            // Taken again inside the transaction: another process may have decided it.
            let state: Option<String> = connection.query_value(
                "SELECT state FROM import_blur_edits WHERE id = ?1",
                params![id_to_sql(id)],
            )?;
            if state.as_deref() != Some("pending") {
                return Err(refused(PrivacyRefusal::Handled));
            }
            record_edit(connection, edit, decided_by, now)?;
            let bytes = render(connection, edit, unblurred, original)?;
            write_atomically(original, &bytes)?;
            Ok::<_, ImportError>(())
        })
    }

    /// Stores a request from the form (anyone), bounded: its text and contact within their
    /// limits (refused beyond), its box inside the picture, and the open requests at most
    /// [`MAX_OPEN_REQUESTS`].
    pub fn submit(&self, request: &NewRequest) -> Result<u64, ImportError> {
        let reason = request.reason.trim();
        if reason.is_empty() {
            return Err(refused(PrivacyRefusal::Invalid(String::from(
                "say what to blur or why the image should be removed",
            ))));
        }
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(refused(PrivacyRefusal::Invalid(format!(
                "the text may have at most {MAX_REASON_CHARS} characters"
            ))));
        }
        let contact = request
            .contact
            .as_deref()
            .map(str::trim)
            .filter(|contact| !contact.is_empty());
        if contact.is_some_and(|contact| contact.chars().count() > MAX_CONTACT_CHARS) {
            return Err(refused(PrivacyRefusal::Invalid(format!(
                "the contact may have at most {MAX_CONTACT_CHARS} characters"
            ))));
        }
        let area = match request.area {
            Some(area) => Some(area.checked().ok_or_else(|| {
                refused(PrivacyRefusal::Invalid(String::from(
                    "the box must lie inside the picture and be larger than a click",
                )))
            })?),
            None => None,
        };
        if self
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .image(request.image)
            .is_none()
        {
            return Err(refused(PrivacyRefusal::UnknownImage));
        }
        let id = self.db.write(|connection| {
            let now = connection.now_millis()?;
            let open: Option<i64> = connection.query_value(
                "SELECT COUNT(*) FROM import_privacy_requests WHERE state = 'open'",
                params![],
            )?;
            if open.unwrap_or(0) >= MAX_OPEN_REQUESTS {
                return Err(refused(PrivacyRefusal::QueueFull));
            }
            let id: i64 = connection
                .query_value(
                    "INSERT INTO import_privacy_requests (image_id, kind, reason, box_left,
                        box_top, box_width, box_height, contact, created_at, state)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'open') RETURNING id",
                    params![
                        id_to_sql(request.image.0),
                        request.kind.as_str(),
                        reason,
                        area.map(|area| area.left),
                        area.map(|area| area.top),
                        area.map(|area| area.width),
                        area.map(|area| area.height),
                        contact,
                        now
                    ],
                )?
                .ok_or_else(|| DbError::Statement("INSERT … RETURNING gave no row".into()))?;
            Ok::<_, ImportError>(id_from_sql(id))
        })?;
        Ok(id)
    }

    /// One request.
    pub fn request(&self, id: u64) -> Result<Option<PrivacyRequest>, ImportError> {
        Ok(self.db.read(|connection| {
            connection.query_row(
                &format!("SELECT {REQUEST_COLUMNS} FROM import_privacy_requests WHERE id = ?1"),
                params![id_to_sql(id)],
                read_request,
            )
        })?)
    }

    /// Requests in `state` (all with `None`), open ones oldest first, others newest first,
    /// at most `limit`.
    pub fn requests(
        &self,
        state: Option<RequestState>,
        limit: usize,
    ) -> Result<Vec<PrivacyRequest>, ImportError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self.db.read(|connection| match state {
            Some(RequestState::Open) => connection.query_map(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM import_privacy_requests WHERE state = 'open'
                     ORDER BY id LIMIT ?1"
                ),
                params![limit],
                read_request,
            ),
            Some(state) => connection.query_map(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM import_privacy_requests WHERE state = ?2
                     ORDER BY id DESC LIMIT ?1"
                ),
                params![limit, state.as_str()],
                read_request,
            ),
            None => connection.query_map(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM import_privacy_requests ORDER BY id DESC LIMIT ?1"
                ),
                params![limit],
                read_request,
            ),
        })?)
    }

    /// Resolves an open request as `done` or `refused`; with `apply_blur`, a blur request's
    /// box becomes an applied edit first (an administrator's).
    pub fn resolve(
        &self,
        id: u64,
        state: RequestState,
        resolved_by: &str,
        apply_blur: bool,
    ) -> Result<(PrivacyRequest, Option<BlurEdit>), ImportError> {
        if state == RequestState::Open {
            return Err(refused(PrivacyRefusal::Invalid(String::from(
                "resolve a request as done or refused",
            ))));
        }
        let request = self
            .request(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))?;
        if request.state != RequestState::Open {
            return Err(refused(PrivacyRefusal::Handled));
        }
        let mut edit = None;
        if apply_blur && state == RequestState::Done {
            let area = request.area.ok_or_else(|| {
                refused(PrivacyRefusal::Invalid(String::from(
                    "this request has no box to blur",
                )))
            })?;
            let stored = self.stored_box(request.image, area)?;
            edit = Some(self.propose_for(
                request.image,
                EditKind::Add,
                stored,
                resolved_by,
                true,
                Some(id),
            )?);
        }
        let changed = self.db.write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_privacy_requests SET state = ?2, resolved_at = ?3, resolved_by = ?4
                 WHERE id = ?1 AND state = 'open'",
                params![id_to_sql(id), state.as_str(), now, resolved_by],
            )
        })?;
        if changed == 0 {
            return Err(refused(PrivacyRefusal::Handled));
        }
        let request = self
            .request(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))?;
        Ok((request, edit))
    }
}

/// Records an applied edit in the caller's transaction: its region (or the region's
/// removal) and its state.
fn record_edit(
    connection: &mut dyn Conn,
    edit: &BlurEdit,
    decided_by: &str,
    now: i64,
) -> Result<(), ImportError> {
    let id = edit.id;
    let image_id = id_to_sql(edit.image.0);
    let area = edit.area;
    let (x, y, width, height) = (
        i64::from(area.x),
        i64::from(area.y),
        i64::from(area.width),
        i64::from(area.height),
    );
    match edit.kind {
        EditKind::Add => {
            connection.execute(
                "INSERT INTO import_blur_regions (image_id, source, class, score, x, y,
                    width, height, model, model_sha256, created_at)
                 VALUES (?1, ?6, 'other', NULL, ?2, ?3, ?4, ?5, ?7, '', ?8)",
                params![
                    image_id,
                    x,
                    y,
                    width,
                    height,
                    SOURCE_EDIT,
                    edit.proposed_by.as_str(),
                    now
                ],
            )?;
        }
        EditKind::Remove => {
            connection.execute(
                "UPDATE import_blur_regions SET removed_at = ?6
                 WHERE image_id = ?1 AND x = ?2 AND y = ?3 AND width = ?4
                    AND height = ?5 AND removed_at IS NULL",
                params![image_id, x, y, width, height, now],
            )?;
        }
    }
    connection.execute(
        "UPDATE import_blur_edits SET state = 'applied', decided_by = ?2, decided_at = ?3
         WHERE id = ?1",
        params![id_to_sql(id), decided_by, now],
    )?;
    Ok(())
}

/// The new served original of an applied edit, read in the caller's transaction: from the
/// unblurred original with every region left, or the served one with the new box on top.
fn render(
    connection: &mut dyn Conn,
    edit: &BlurEdit,
    unblurred: &Path,
    original: &Path,
) -> Result<Vec<u8>, ImportError> {
    let area = edit.area;
    let bytes = if unblurred.is_file() {
        let base = std::fs::read(unblurred)?;
        let kept: Vec<Region> = regions(connection, edit.image, true)?
            .iter()
            .map(to_blur_region)
            .collect();
        if kept.is_empty() {
            base
        } else {
            blur(&base, &kept)?
        }
    } else if edit.kind == EditKind::Add {
        let base = std::fs::read(original)?;
        blur(
            &base,
            &[to_blur_region(&BlurRegion {
                source: String::from(SOURCE_EDIT),
                class: String::from("other"),
                area,
                removed: false,
            })],
        )?
    } else {
        return Err(refused(PrivacyRefusal::Impossible(String::from(
            "this server keeps no unblurred original of this image: blur can only be added",
        ))));
    };
    Ok(bytes)
}

/// The boxes blurred by hand on `image` and not removed since, as regions to blur: what a
/// re-blur from the unblurred original lays on again.
pub(crate) fn edit_regions(
    connection: &mut dyn Conn,
    image: ImageId,
) -> Result<Vec<Region>, DbError> {
    Ok(regions(connection, image, true)?
        .iter()
        .filter(|region| region.source == SOURCE_EDIT)
        .map(to_blur_region)
        .collect())
}

/// The regions of `image` (only those not removed with `active_only`).
fn regions(
    connection: &mut dyn Conn,
    image: ImageId,
    active_only: bool,
) -> Result<Vec<BlurRegion>, DbError> {
    let number = |value: i64| u32::try_from(value).unwrap_or(0);
    let filter = if active_only {
        " AND removed_at IS NULL"
    } else {
        ""
    };
    connection.query_map(
        &format!(
            "SELECT source, class, x, y, width, height, removed_at FROM import_blur_regions
             WHERE image_id = ?1{filter} ORDER BY created_at, x, y"
        ),
        params![id_to_sql(image.0)],
        |row| {
            Ok::<_, DbError>(BlurRegion {
                source: row.get(0)?,
                class: row.get(1)?,
                area: StoredBox {
                    x: number(row.get(2)?),
                    y: number(row.get(3)?),
                    width: number(row.get(4)?),
                    height: number(row.get(5)?),
                },
                removed: row.get::<Option<i64>>(6)?.is_some(),
            })
        },
    )
}

fn to_blur_region(region: &BlurRegion) -> Region {
    Region {
        class: RegionClass::parse(&region.class).unwrap_or(RegionClass::Other),
        score: 1.0,
        x: region.area.x,
        y: region.area.y,
        width: region.area.width.max(1),
        height: region.area.height.max(1),
        model: region.source.clone(),
        model_sha256: String::new(),
    }
}

fn blur(jpeg: &[u8], regions: &[Region]) -> Result<Vec<u8>, ImportError> {
    crate::cpu::run(|| streetlevel_blur::blur_regions(jpeg, regions))
        .map_err(|error| refused(PrivacyRefusal::Impossible(error.to_string())))
}

/// Removes the thumbnails and pyramid tiles made from an image's original; returns how many
/// there were.
pub fn remove_cached_media(data_dir: &Path, image: &Image) -> usize {
    LocalMedia::new(data_dir)
        .remove_derived(image.id, image.width, image.height)
        .removed
}
