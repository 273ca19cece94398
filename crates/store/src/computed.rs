//! What a reconstruction derives for an image, written over what it had: the computed
//! location, altitude, compass angle and rotation, the refined camera parameters, the scale,
//! connected component, mesh and cluster (`streetlevel-sfm` is the writer). Applying what
//! another process wrote is the follower's (`sql/follow.rs`).
//!
//! Invariants: the database is written first, in one transaction with the write log entry
//! and the caller's own rows, then memory, so a refused write changes nothing; an updated
//! image takes a new slot at the end of the table (slots never move, the old one becomes a
//! tombstone, as a restored image does), so the indexes and tile structures drop it from
//! where it was and add it where it is now, and the change log names both areas; a hidden
//! image stays hidden; nothing but the fields named here changes.

use std::collections::HashSet;

use streetlevel_db::{Conn, DbError};
use streetlevel_model::{Image, ImageId, MediaId, Point};

use crate::image_record::{RecordNames, RecordValues};
use crate::{Store, StoreError, sql};

/// The fields a reconstruction derives for one image.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// Where the camera was.
    pub computed_geometry: Point,
    /// Its altitude above sea level (metres).
    pub computed_altitude: f64,
    /// Where it looked: the optical axis's bearing (degrees clockwise from north, `[0, 360)`).
    pub computed_compass_angle: f64,
    /// The world-to-camera rotation as an angle-axis vector (radians).
    pub computed_rotation: [f64; 3],
    /// Refined camera parameters (`[focal, k1, k2]`), or `None` to keep the image's own.
    pub camera_parameters: Option<Vec<f64>>,
    /// The scale of the reconstruction around the image.
    pub atomic_scale: f64,
    /// The connected component of images aligned together.
    pub merge_cc: u64,
    /// The image's mesh.
    pub mesh: MediaId,
    /// The reconstruction it belongs to.
    pub sfm_cluster: MediaId,
}

/// What to write for one image.
#[derive(Debug, Clone, PartialEq)]
pub enum ComputedUpdate {
    /// The reconstruction's values.
    Reconstructed(Computed),
    /// Back to the image's own values (a rerun that did not register it, or a cluster taken
    /// apart): computed location, altitude and compass angle repeat the original ones; no
    /// rotation, scale, component, mesh or cluster. Camera parameters stay.
    Original,
}

impl ComputedUpdate {
    /// `image` with this update applied.
    fn apply(&self, image: &Image) -> Image {
        let mut updated = image.clone();
        match self {
            ComputedUpdate::Reconstructed(computed) => {
                updated.computed_geometry = Some(computed.computed_geometry);
                updated.computed_altitude = Some(computed.computed_altitude);
                updated.computed_compass_angle = Some(computed.computed_compass_angle);
                updated.computed_rotation = Some(computed.computed_rotation);
                if let Some(parameters) = &computed.camera_parameters {
                    updated.camera_parameters = Some(parameters.clone());
                }
                updated.atomic_scale = Some(computed.atomic_scale);
                updated.merge_cc = Some(computed.merge_cc);
                updated.mesh = Some(computed.mesh);
                updated.sfm_cluster = Some(computed.sfm_cluster);
            }
            ComputedUpdate::Original => {
                updated.computed_geometry = Some(image.geometry);
                updated.computed_altitude = image.altitude;
                updated.computed_compass_angle = image.compass_angle;
                updated.computed_rotation = None;
                updated.atomic_scale = None;
                updated.merge_cc = None;
                updated.mesh = None;
                updated.sfm_cluster = None;
            }
        }
        updated
    }
}

/// Why a computed value is refused: the store keeps only finite numbers in range.
fn check(update: &ComputedUpdate, id: ImageId) -> Result<(), StoreError> {
    let ComputedUpdate::Reconstructed(computed) = update else {
        return Ok(());
    };
    let invalid = |reason| StoreError::InvalidEntity {
        what: "image",
        id: id.to_string(),
        reason,
    };
    if !computed.computed_geometry.is_valid() {
        return Err(invalid("computed_geometry out of range"));
    }
    let finite = [
        computed.computed_altitude,
        computed.computed_compass_angle,
        computed.atomic_scale,
    ]
    .into_iter()
    .chain(computed.computed_rotation)
    .chain(computed.camera_parameters.iter().flatten().copied())
    .all(f64::is_finite);
    if !finite {
        return Err(invalid("a computed value is not a finite number"));
    }
    if !(0.0..360.0).contains(&computed.computed_compass_angle) {
        return Err(invalid("computed_compass_angle out of [0, 360)"));
    }
    Ok(())
}

/// What a sequence holds, for finding the ones to reconstruct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceSummary {
    /// The sequence.
    pub sequence: streetlevel_model::SequenceId,
    /// Its greatest image ID.
    pub newest: ImageId,
    /// How many images it has (public or hidden).
    pub images: usize,
    /// How many of them have no mesh (never reconstructed, or not registered).
    pub without_mesh: usize,
}

impl Store {
    /// Writes what a reconstruction derived for the images it names (public or hidden; others
    /// are left out: an image erased meanwhile gets nothing), in one transaction in which
    /// `also` runs with the IDs written, so that the caller's own rows about them commit with
    /// them (or nothing does); then memory. Returns the IDs written, in the order given.
    ///
    /// A value that is not finite, or a location out of range, refuses the whole write.
    pub fn set_computed(
        &mut self,
        updates: &[(ImageId, ComputedUpdate)],
        also: impl FnOnce(&mut dyn Conn, &[ImageId]) -> Result<(), DbError>,
    ) -> Result<Vec<ImageId>, StoreError> {
        let mut seen = HashSet::new();
        let mut images = Vec::with_capacity(updates.len());
        for (id, update) in updates {
            check(update, *id)?;
            if !seen.insert(*id) {
                continue;
            }
            if let Some(image) = self.image(*id).or_else(|| self.hidden_image(*id)) {
                images.push(update.apply(&image));
            }
        }
        let ids: Vec<ImageId> = images.iter().map(|image| image.id).collect();
        self.write(|connection| {
            sql::set_computed(connection, &images)?;
            also(connection, &ids)?;
            Ok(())
        })?;
        self.replace_in_memory(&images);
        Ok(ids)
    }

    /// Every sequence with images (public or hidden), with its greatest image ID and how many
    /// of its images have no mesh: one pass over the records.
    pub fn sequence_summaries(&self) -> Vec<SequenceSummary> {
        let mut by_slot: std::collections::BTreeMap<u32, (u64, usize, usize)> =
            std::collections::BTreeMap::new();
        for record in self.records.images() {
            if record.is_removed() {
                continue;
            }
            let entry = by_slot.entry(record.sequence).or_insert((0, 0, 0));
            entry.0 = entry.0.max(record.id);
            entry.1 += 1;
            if record.mesh_id().is_none() {
                entry.2 += 1;
            }
        }
        by_slot
            .into_iter()
            .map(|(slot, (newest, images, without_mesh))| SequenceSummary {
                sequence: self.records.sequence(slot).id.clone(),
                newest: ImageId(newest),
                images,
                without_mesh,
            })
            .collect()
    }

    /// The images of a sequence, public and hidden, in capture order (ties by ID).
    pub fn sequence_images_held(&self, sequence: &streetlevel_model::SequenceId) -> Vec<Image> {
        let mut images: Vec<Image> = self
            .sequence_image_ids(sequence)
            .map(|ids| self.images(&ids))
            .unwrap_or_default();
        images.extend(
            self.hidden_images_of_sequence(sequence)
                .into_iter()
                .filter_map(|id| self.hidden_image(id)),
        );
        images.sort_by_key(|image| (image.captured_at, image.id));
        images
    }

    /// Puts `images` (held by the store, public or hidden, each once) in place of the records
    /// with their IDs: each in a new slot, hidden ones staying hidden.
    pub(crate) fn replace_in_memory(&mut self, images: &[Image]) {
        let held: Vec<(u32, bool, &Image)> = images
            .iter()
            .filter_map(|image| {
                let id = image.id.0;
                self.image_index(id)
                    .map(|slot| (slot, false, image))
                    .or_else(|| self.records.hidden_slot(id).map(|slot| (slot, true, image)))
            })
            .collect();
        if held.is_empty() {
            return;
        }
        let slots: Vec<u32> = held.iter().map(|(slot, _, _)| *slot).collect();
        let removed = self.visible_records(&slots);
        let touched = self.records.erase(&slots);
        self.unindex(&removed, &touched);
        let first_new = self.records.images().len();
        for (_, hidden, image) in &held {
            self.records.push_image_hidden(
                &RecordValues::of(image),
                &RecordNames::of(image),
                *hidden,
            );
        }
        self.index_new_images(first_new);
        self.bump_generation();
        self.record_removed_images(&removed, &touched);
        self.record_new_images(first_new);
    }
}

#[cfg(test)]
mod tests {
    use streetlevel_model::{CreatorId, SequenceId, Timestamp};

    use super::*;

    fn image(number: u64) -> Image {
        let offset = f64::from(u32::try_from(number).unwrap()) * 1e-4;
        Image {
            id: ImageId(100 + number),
            altitude: Some(10.0),
            atomic_scale: None,
            camera_parameters: Some(vec![0.85, 0.0, 0.0]),
            camera_type: None,
            captured_at: Timestamp(i64::try_from(number).unwrap() * 1000),
            compass_angle: Some(184.0),
            computed_altitude: Some(10.0),
            computed_compass_angle: Some(184.0),
            computed_geometry: Some(Point::new(13.0 + offset, 55.0)),
            computed_rotation: None,
            creator: CreatorId(1),
            exif_orientation: Some(1),
            geometry: Point::new(13.0 + offset, 55.0),
            height: 768,
            width: 1024,
            is_pano: false,
            make: Some(String::from("Apple")),
            model: None,
            merge_cc: None,
            mesh: None,
            sequence: SequenceId(String::from("walk")),
            sfm_cluster: None,
            quality_score: None,
            organization: None,
        }
    }

    fn computed(number: u64) -> Computed {
        let offset = f64::from(u32::try_from(number).unwrap()) * 1e-4;
        Computed {
            computed_geometry: Point::new(13.0 + offset, 55.001),
            computed_altitude: 12.5,
            computed_compass_angle: 341.0,
            computed_rotation: [0.1, 0.2, 0.3],
            camera_parameters: Some(vec![0.97, -0.01, 0.002]),
            atomic_scale: 0.06,
            merge_cc: 7,
            mesh: MediaId(1000 + number),
            sfm_cluster: MediaId(999),
        }
    }

    #[test]
    fn computed_values_replace_the_old_ones_in_every_index_and_survive_a_reload() {
        let dir = std::env::temp_dir().join(format!("store-computed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir).unwrap();
        store
            .insert_images(&(0..4).map(image).collect::<Vec<_>>())
            .unwrap();
        store
            .hide_images(
                &[ImageId(103)],
                &crate::TakedownNote {
                    actor: "test",
                    subject: "103",
                    at: Timestamp(0),
                },
            )
            .unwrap();
        let mut also_saw = Vec::new();
        let written = store
            .set_computed(
                &[
                    (ImageId(100), ComputedUpdate::Reconstructed(computed(0))),
                    (ImageId(101), ComputedUpdate::Reconstructed(computed(1))),
                    (ImageId(103), ComputedUpdate::Reconstructed(computed(3))),
                    // Unknown: left out.
                    (ImageId(555), ComputedUpdate::Reconstructed(computed(5))),
                ],
                |_, ids| {
                    also_saw = ids.to_vec();
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(written, [ImageId(100), ImageId(101), ImageId(103)]);
        assert_eq!(also_saw, written);
        let first = store.image(ImageId(100)).unwrap();
        assert_eq!(first.computed_compass_angle, Some(341.0));
        assert_eq!(first.compass_angle, Some(184.0));
        assert_eq!(first.mesh, Some(MediaId(1000)));
        assert_eq!(first.camera_parameters, Some(vec![0.97, -0.01, 0.002]));
        assert!(store.image(ImageId(103)).is_none());
        assert_eq!(
            store.hidden_image(ImageId(103)).unwrap().merge_cc,
            Some(7),
            "a hidden image stays hidden, with its new values"
        );
        // The sequence keeps its members in capture order, each once.
        assert_eq!(
            store
                .sequence_image_ids(&SequenceId(String::from("walk")))
                .unwrap(),
            [ImageId(100), ImageId(101), ImageId(102)]
        );
        assert_eq!(store.image_count(), 3);
        let reopened = Store::open(&dir).unwrap();
        assert_eq!(reopened.image(ImageId(101)), store.image(ImageId(101)));
        assert_eq!(
            reopened.hidden_image(ImageId(103)),
            store.hidden_image(ImageId(103))
        );
        // Back to the original values.
        store
            .set_computed(&[(ImageId(100), ComputedUpdate::Original)], |_, _| Ok(()))
            .unwrap();
        let back = store.image(ImageId(100)).unwrap();
        assert_eq!(back.computed_geometry, Some(back.geometry));
        assert_eq!(back.computed_compass_angle, Some(184.0));
        assert_eq!(back.mesh, None);
        assert_eq!(back.camera_parameters, Some(vec![0.97, -0.01, 0.002]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_process_following_the_database_gets_the_new_values() {
        let dir =
            std::env::temp_dir().join(format!("store-computed-follow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut writer = Store::open(&dir).unwrap();
        writer
            .insert_images(&(0..3).map(image).collect::<Vec<_>>())
            .unwrap();
        let mut follower = Store::open(&dir).unwrap();
        let before = follower.generation();
        writer
            .set_computed(
                &[(ImageId(101), ComputedUpdate::Reconstructed(computed(1)))],
                |_, _| Ok(()),
            )
            .unwrap();
        // The writer follows its own write and finds nothing to change.
        let generation = writer.generation();
        writer.follow().unwrap();
        assert_eq!(writer.generation(), generation);
        follower.follow().unwrap();
        assert_eq!(follower.image(ImageId(101)), writer.image(ImageId(101)));
        assert_eq!(
            follower.image(ImageId(101)).unwrap().computed_compass_angle,
            Some(341.0)
        );
        assert_eq!(follower.image(ImageId(100)), Some(image(0)));
        assert!(
            follower
                .touched_since(before)
                .is_some_and(|areas| !areas.is_empty())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_value_that_is_not_finite_refuses_the_whole_write() {
        let mut store = Store::in_memory();
        store.insert_images(&[image(0), image(1)]).unwrap();
        let mut bad = computed(1);
        bad.computed_rotation[1] = f64::NAN;
        let error = store
            .set_computed(
                &[
                    (ImageId(100), ComputedUpdate::Reconstructed(computed(0))),
                    (ImageId(101), ComputedUpdate::Reconstructed(bad)),
                ],
                |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(matches!(error, StoreError::InvalidEntity { .. }), "{error}");
        assert_eq!(store.image(ImageId(100)), Some(image(0)));
        let mut wild = computed(0);
        wild.computed_geometry = Point::new(200.0, 55.0);
        assert!(
            store
                .set_computed(
                    &[(ImageId(100), ComputedUpdate::Reconstructed(wild))],
                    |_, _| Ok(())
                )
                .is_err()
        );
        assert_eq!(store.image(ImageId(100)), Some(image(0)));
    }

    #[test]
    fn a_write_refused_by_the_callers_rows_changes_nothing() {
        let dir =
            std::env::temp_dir().join(format!("store-computed-refused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir).unwrap();
        store.insert_images(&[image(0)]).unwrap();
        let result = store.set_computed(
            &[(ImageId(100), ComputedUpdate::Reconstructed(computed(0)))],
            |_, _| Err(DbError::Stopped),
        );
        assert!(result.is_err());
        assert_eq!(store.image(ImageId(100)), Some(image(0)));
        assert_eq!(
            Store::open(&dir).unwrap().image(ImageId(100)),
            Some(image(0))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
