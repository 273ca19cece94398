//! Applying a blur edit: rendered from what was read, outside any transaction, and published
//! in a short write transaction only if nothing it was rendered from changed meanwhile.

use std::path::Path;

use streetlevel_blur::Region;
use streetlevel_db::{Conn, DbError, id_to_sql, params};
use streetlevel_media::{ImageObject, Key};
use streetlevel_model::{Image, ImageId};

use super::edit::{BlurEdit, BlurRegion, EditKind, EditState, regions, to_blur_region};
use super::{Privacy, PrivacyRefusal, SOURCE_EDIT, refused};
use crate::ImportError;

/// How many times an edit is rendered before it is refused because what it is rendered from
/// keeps changing (other edits of the image, a reblur): each try renders from what the last
/// one found.
pub const APPLY_ATTEMPTS: usize = 3;

/// What an edit's picture is rendered from, as read before rendering: the transaction that
/// publishes it checks that the database and the served original still say the same.
struct RenderBasis {
    /// The image's regions not removed, in the order they are laid on.
    regions: Vec<BlurRegion>,
    /// The served original's bytes.
    original: Vec<u8>,
    /// The kept unblurred original's bytes, when the operator keeps one.
    unblurred: Option<Vec<u8>>,
}

/// Why a rendered picture was not published: what changed since it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Changed {
    /// The image's regions (another edit applied, a reblur).
    Regions,
    /// The served original's bytes (another edit, a reblur).
    Original,
}

impl Changed {
    fn as_str(self) -> &'static str {
        match self {
            Changed::Regions => "its blurred regions",
            Changed::Original => "its picture",
        }
    }
}

impl Privacy {
    /// Applies a pending edit: renders the new blurred original from what it reads (outside
    /// any transaction, on the CPU pool's interactive lane), then, in one short write
    /// transaction, checks that the edit is still pending and that the regions and the served
    /// original are what the render read, writes the new original and records the edit;
    /// renders again from what changed, at most [`APPLY_ATTEMPTS`] times. Then removes the
    /// thumbnails and pyramid tiles cached from the old original.
    pub fn apply(&self, id: u64, decided_by: &str) -> Result<BlurEdit, ImportError> {
        let mut attempt = 1;
        let (edit, image) = loop {
            let (edit, image) = self.pending(id)?;
            let original = self.original_key(edit.image)?;
            let basis = self.read_basis(&edit, &original)?;
            // Its memory is waited for on the lane's thread, as the upload queue's pictures
            // wait for theirs on the pool's.
            let rendered = crate::cpu::run_interactive(|| {
                let base = basis.unblurred.as_deref().unwrap_or(&basis.original);
                let _memory =
                    crate::budgets::picture_permit(base, crate::budgets::PictureWork::BlurRegions)
                        .map_err(|reason| refused(PrivacyRefusal::Impossible(reason)))?;
                render(&edit, &basis)
            })?;
            match self.publish(&edit, decided_by, &basis, &rendered, &original)? {
                None => break (edit, image),
                Some(changed) if attempt < APPLY_ATTEMPTS => {
                    tracing::info!(
                        edit = id,
                        image = %edit.image,
                        attempt,
                        changed = changed.as_str(),
                        "a blur edit is rendered again: the image changed while it was rendered"
                    );
                    attempt += 1;
                }
                Some(changed) => {
                    return Err(refused(PrivacyRefusal::Changed(format!(
                        "{} changed while the edit was rendered, {APPLY_ATTEMPTS} times: try again",
                        changed.as_str()
                    ))));
                }
            }
        };
        let removed = remove_cached_media(&self.data_dir, &image);
        tracing::info!(
            edit = id,
            image = %edit.image,
            kind = edit.kind.as_str(),
            decided_by,
            attempts = attempt,
            cached_files_removed = removed,
            "blur edit applied"
        );
        self.edit(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))
    }

    /// The edit `id`, pending, and its image.
    fn pending(&self, id: u64) -> Result<(BlurEdit, Image), ImportError> {
        let edit = self
            .edit(id)?
            .ok_or_else(|| refused(PrivacyRefusal::Unknown))?;
        if edit.state != EditState::Pending {
            return Err(refused(PrivacyRefusal::Handled));
        }
        let image = self
            .image(edit.image)
            .ok_or_else(|| refused(PrivacyRefusal::UnknownImage))?;
        Ok((edit, image))
    }

    /// What `edit` is rendered from, read now.
    fn read_basis(&self, edit: &BlurEdit, original: &Key) -> Result<RenderBasis, ImportError> {
        let media = self.media();
        let unblurred = media.read_image_object(edit.image, ImageObject::Unblurred)?;
        let original = media.read(original)?.ok_or_else(|| {
            refused(PrivacyRefusal::Changed(String::from(
                "its picture was removed meanwhile",
            )))
        })?;
        Ok(RenderBasis {
            regions: self
                .db
                .read(|connection| regions(connection, edit.image, true))?,
            original,
            unblurred,
        })
    }

    /// In one write transaction: when `edit` is still pending and its image's regions and
    /// served original are still `basis`'s, writes `rendered` as the new original (before the
    /// commit, so that a crash leaves the blur on the picture rather than a record without it)
    /// and records the edit; otherwise what changed, and nothing is written.
    fn publish(
        &self,
        edit: &BlurEdit,
        decided_by: &str,
        basis: &RenderBasis,
        rendered: &[u8],
        original: &Key,
    ) -> Result<Option<Changed>, ImportError> {
        let media = self.media();
        self.db.write(|connection| {
            let state: Option<String> = connection.query_value(
                "SELECT state FROM import_blur_edits WHERE id = ?1",
                params![id_to_sql(edit.id)],
            )?;
            if state.as_deref() != Some(EditState::Pending.as_str()) {
                return Err(refused(PrivacyRefusal::Handled));
            }
            if regions(connection, edit.image, true)? != basis.regions {
                return Ok(Some(Changed::Regions));
            }
            // A comparison of bytes already read, not a render: the transaction stays short.
            match media.read(original)? {
                Some(bytes) if bytes == basis.original => {}
                Some(_) | None => return Ok(Some(Changed::Original)),
            }
            let now = connection.now_millis()?;
            record_edit(connection, edit, decided_by, now)?;
            // Whole or not at all, on either store: a file renamed into place, one object put.
            media.write(original, rendered)?;
            Ok::<_, ImportError>(None)
        })
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

/// The regions of `basis` once `edit` is recorded: its box laid on last (as it is recorded
/// last), or every region of the removed box gone (as the removal marks them all).
fn regions_after(edit: &BlurEdit, basis: &[BlurRegion]) -> Vec<BlurRegion> {
    let mut regions: Vec<BlurRegion> = basis
        .iter()
        .filter(|region| edit.kind == EditKind::Add || region.area != edit.area)
        .cloned()
        .collect();
    if edit.kind == EditKind::Add {
        regions.push(edit_region(edit));
    }
    regions
}

fn edit_region(edit: &BlurEdit) -> BlurRegion {
    BlurRegion {
        source: String::from(SOURCE_EDIT),
        class: String::from("other"),
        area: edit.area,
        removed: false,
    }
}

/// The new served original of `edit`, from `basis` alone (no I/O): the unblurred original
/// with every region left once the edit is recorded, or the served one with the new box on
/// top.
fn render(edit: &BlurEdit, basis: &RenderBasis) -> Result<Vec<u8>, ImportError> {
    if let Some(unblurred) = &basis.unblurred {
        let kept: Vec<Region> = regions_after(edit, &basis.regions)
            .iter()
            .map(to_blur_region)
            .collect();
        if kept.is_empty() {
            Ok(unblurred.clone())
        } else {
            blur(unblurred, &kept)
        }
    } else if edit.kind == EditKind::Add {
        blur(&basis.original, &[to_blur_region(&edit_region(edit))])
    } else {
        Err(refused(PrivacyRefusal::Impossible(String::from(
            "this server keeps no unblurred original of this image: blur can only be added",
        ))))
    }
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

fn blur(jpeg: &[u8], regions: &[Region]) -> Result<Vec<u8>, ImportError> {
    streetlevel_blur::blur_regions(jpeg, regions)
        .map_err(|error| refused(PrivacyRefusal::Impossible(error.to_string())))
}

/// Removes the thumbnails and pyramid tiles made from an image's original; returns how many
/// there were.
pub fn remove_cached_media(data_dir: &Path, image: &Image) -> usize {
    crate::media_store(data_dir)
        .remove_derived(image.id, image.width, image.height)
        .removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::StoredBox;

    fn region(x: u32, source: &str) -> BlurRegion {
        BlurRegion {
            source: source.to_owned(),
            class: String::from("face"),
            area: StoredBox {
                x,
                y: 0,
                width: 10,
                height: 10,
            },
            removed: false,
        }
    }

    fn edit(kind: EditKind, x: u32) -> BlurEdit {
        BlurEdit {
            id: 1,
            image: ImageId(1),
            kind,
            area: region(x, SOURCE_EDIT).area,
            proposed_by: String::from("user alice"),
            proposed_at: 0,
            state: EditState::Pending,
            decided_by: None,
            decided_at: None,
            request: None,
        }
    }

    /// The render lays on what the record will say: an added box last, and a removal takes
    /// every region of its box (the detector's and a hand-drawn copy alike), no other.
    #[test]
    fn the_render_lays_on_the_regions_the_record_will_have() {
        let basis = vec![
            region(0, "detector"),
            region(20, "detector"),
            region(20, SOURCE_EDIT),
        ];
        let added = regions_after(&edit(EditKind::Add, 40), &basis);
        assert_eq!(added.len(), 4);
        assert_eq!(added[..3], basis[..]);
        assert_eq!(added[3], edit_region(&edit(EditKind::Add, 40)));
        let removed = regions_after(&edit(EditKind::Remove, 20), &basis);
        assert_eq!(removed, vec![region(0, "detector")]);
    }
}
