//! Privacy requests: anyone asks for an image to be blurred (more) or taken down, and an
//! administrator resolves the request, applying its box as an edit when asked.

use std::sync::PoisonError;

use streetlevel_db::{DbError, Row, id_from_sql, id_to_sql, params};
use streetlevel_model::ImageId;

use super::{
    BlurEdit, EditKind, MAX_CONTACT_CHARS, MAX_OPEN_REQUESTS, MAX_REASON_CHARS, Privacy,
    PrivacyRefusal, Shares, refused,
};
use crate::ImportError;

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
