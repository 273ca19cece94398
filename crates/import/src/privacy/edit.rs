//! Blur edits and the regions of an image's blur, as `import_blur_edits` and
//! `import_blur_regions` store them.

use streetlevel_blur::{Region, RegionClass};
use streetlevel_db::{Conn, DbError, Row, id_to_sql, params};
use streetlevel_model::ImageId;

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

pub(super) fn read_edit(row: &dyn Row) -> Result<BlurEdit, DbError> {
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

pub(super) const EDIT_COLUMNS: &str = "id, image_id, kind, x, y, width, height, proposed_by, proposed_at, \
     state, decided_by, decided_at, request_id";

/// The regions of `image` (only those not removed with `active_only`).
pub(super) fn regions(
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

/// A stored region as the blurrer takes it.
pub(super) fn to_blur_region(region: &BlurRegion) -> Region {
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
