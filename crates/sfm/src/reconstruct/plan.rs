//! A job's plan: the sequence's images in the engine's frame, split into overlapping parts,
//! and each part's input for the driver (its thumbnails and `input.json`).

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use streetlevel_model::{CameraType, Image, ImageId};

use super::{Reconstructor, Settings, area};
use crate::SfmError;
use crate::engine::Engine;
use crate::geo::{Lla, Topocentric};

/// The plan of a job: its images and parts, and the frame the engine works in. A work
/// directory whose plan differs is started afresh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Plan {
    /// The job's key: its sequence, or the first (by key) of its area's.
    pub(super) sequence: String,
    /// The sequences reconstructed (one, or an area's, by key).
    pub(super) sequences: Vec<String>,
    pub(super) reference: [f64; 3],
    /// Sequence by sequence, each in capture order.
    pub(super) images: Vec<Planned>,
    pub(super) parts: Vec<Vec<usize>>,
    /// For each part, whether its images are also matched with their nearest neighbours by
    /// position (across sequences), not only along their sequence.
    pub(super) spatial: Vec<bool>,
    pub(super) settings: Settings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Planned {
    pub(super) id: u64,
    /// Its sequence's index in [`Plan::sequences`].
    pub(super) member: usize,
    pub(super) gps: [f64; 3],
    pub(super) has_altitude: bool,
    /// The camera's key in clusters: make, model, size and projection.
    pub(super) camera: String,
    pub(super) spherical: bool,
    pub(super) focal_ratio: Option<f64>,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) captured_at: i64,
    pub(super) compass: Option<f64>,
}

/// Images of each sequence on either side of the closest approach that a crossing part takes.
const CROSSING_WINDOW: usize = 6;

/// Neighbours by position each image of a part matched across sequences is matched with.
const SPATIAL_NEIGHBORS: usize = 8;

/// The input the driver reads (`input.json`).
#[derive(Debug, Serialize)]
pub(super) struct DriverInput<'a> {
    pub(super) threads: usize,
    pub(super) max_image_size: u32,
    pub(super) max_features: usize,
    pub(super) first_octave: i32,
    pub(super) overlap: usize,
    pub(super) seed: u64,
    pub(super) mappers: &'a [String],
    pub(super) refine_intrinsics: bool,
    pub(super) min_registered_share: f64,
    pub(super) alignment_max_error: f64,
    /// Each image is also matched with up to this many others within `spatial_distance`
    /// metres of its GPS position (0: along the sequence only).
    pub(super) spatial_neighbors: usize,
    pub(super) spatial_distance: f64,
    pub(super) cameras: Vec<DriverCamera>,
    pub(super) images: Vec<DriverImage>,
}

#[derive(Debug, Serialize)]
pub(super) struct DriverCamera {
    pub(super) model: &'static str,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) focal: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct DriverImage {
    pub(super) name: String,
    pub(super) camera: usize,
    pub(super) position: [f64; 3],
    pub(super) sigma: f64,
}

impl Reconstructor {
    pub(super) fn plan(&self, area: &[(String, Vec<Image>)]) -> Plan {
        let first = &area[0].1[0];
        let reference = [
            first.geometry.lat,
            first.geometry.lon,
            first.altitude.unwrap_or(0.0),
        ];
        let frame = Topocentric::new(Lla {
            lat: reference[0],
            lon: reference[1],
            alt: reference[2],
        });
        let mut ranges = Vec::with_capacity(area.len());
        let mut planned: Vec<Planned> = Vec::new();
        for (member, (_, images)) in area.iter().enumerate() {
            let start = planned.len();
            planned.extend(
                images
                    .iter()
                    .map(|image| self.planned(&frame, member, image)),
            );
            ranges.push(start..planned.len());
        }
        let settings = &self.settings;
        let (size, overlap) = (settings.part_images, settings.part_overlap);
        let step = size.saturating_sub(overlap).max(1);
        let (parts, spatial) = if area.len() == 1 {
            let parts = split(planned.len(), size, overlap);
            let spatial = vec![false; parts.len()];
            (parts, spatial)
        } else if planned.len() <= size.max(3) + step / 2 {
            // A small area: one run, matched across its sequences.
            (vec![(0..planned.len()).collect()], vec![true])
        } else {
            let mut parts: Vec<Vec<usize>> = ranges
                .iter()
                .flat_map(|range| {
                    split(range.len(), size, overlap)
                        .into_iter()
                        .map(|part| part.into_iter().map(|index| index + range.start).collect())
                })
                .collect();
            let own = parts.len();
            let positions: Vec<[f64; 2]> = planned
                .iter()
                .map(|image| [image.gps[0], image.gps[1]])
                .collect();
            parts.extend(area::crossing_parts(
                &positions,
                &ranges,
                settings.area_metres,
                CROSSING_WINDOW,
            ));
            let spatial = (0..parts.len()).map(|index| index >= own).collect();
            (parts, spatial)
        };
        Plan {
            sequence: area[0].0.clone(),
            sequences: area.iter().map(|(sequence, _)| sequence.clone()).collect(),
            reference,
            images: planned,
            parts,
            spatial,
            settings: settings.clone(),
        }
    }

    fn planned(&self, frame: &Topocentric, member: usize, image: &Image) -> Planned {
        let reference = frame.reference();
        let spherical = image.is_pano || image.camera_type == Some(CameraType::Equirectangular);
        let projection = if spherical {
            "equirectangular"
        } else {
            "perspective"
        };
        let gps = frame.to_enu(Lla {
            lat: image.geometry.lat,
            lon: image.geometry.lon,
            alt: image.altitude.unwrap_or(reference.alt),
        });
        Planned {
            id: image.id.0,
            member,
            gps,
            has_altitude: image.altitude.is_some(),
            camera: format!(
                "v2 {} {} {} {} {projection}",
                image.make.as_deref().unwrap_or("unknown").to_lowercase(),
                image.model.as_deref().unwrap_or("unknown").to_lowercase(),
                image.width,
                image.height,
            ),
            spherical,
            focal_ratio: if spherical {
                None
            } else {
                self.pictures
                    .focal_length_35mm(image.id)
                    .map(|focal| focal_ratio(focal, image.width, image.height))
            },
            width: image.width,
            height: image.height,
            captured_at: image.captured_at.0,
            compass: image.compass_angle,
        }
    }

    /// Writes a part's thumbnails and `input.json` into `dir` (afresh).
    pub(super) fn prepare_part(
        &self,
        plan: &Plan,
        part: usize,
        dir: &Path,
        engine: &Engine,
    ) -> Result<(), SfmError> {
        let members = &plan.parts[part];
        let _ = std::fs::remove_dir_all(dir);
        let images_dir = dir.join("images");
        std::fs::create_dir_all(&images_dir)?;
        let mut cameras: Vec<DriverCamera> = Vec::new();
        let mut camera_index: HashMap<(String, u32, u32), usize> = HashMap::new();
        let mut inputs = Vec::with_capacity(members.len());
        for (position, &image) in members.iter().enumerate() {
            let planned = &plan.images[image];
            let thumbnail = self
                .pictures
                .thumbnail(ImageId(planned.id))
                .map_err(|reason| SfmError::Picture {
                    image: planned.id,
                    reason,
                })?;
            let name = image_name(position, planned.id);
            std::fs::write(images_dir.join(&name), &thumbnail.bytes)?;
            let key = (planned.camera.clone(), thumbnail.width, thumbnail.height);
            let camera = *camera_index.entry(key).or_insert_with(|| {
                cameras.push(DriverCamera {
                    model: if planned.spherical {
                        "EQUIRECTANGULAR"
                    } else {
                        "RADIAL"
                    },
                    width: thumbnail.width,
                    height: thumbnail.height,
                    focal: planned
                        .focal_ratio
                        .map(|ratio| ratio * f64::from(thumbnail.width.max(thumbnail.height))),
                });
                cameras.len() - 1
            });
            inputs.push(DriverImage {
                name,
                camera,
                position: planned.gps,
                sigma: plan.settings.gps_sigma,
            });
        }
        let input = DriverInput {
            threads: engine.options().threads,
            max_image_size: plan.settings.max_image_size,
            max_features: plan.settings.max_features,
            first_octave: plan.settings.first_octave,
            overlap: plan.settings.matching_overlap,
            seed: 0,
            mappers: &plan.settings.mappers,
            // Refined only where some camera has no focal length from Exif.
            refine_intrinsics: cameras
                .iter()
                .any(|camera| camera.model == "RADIAL" && camera.focal.is_none()),
            min_registered_share: plan.settings.min_registered_share,
            alignment_max_error: plan.settings.alignment_max_error,
            spatial_neighbors: if plan.spatial[part] {
                SPATIAL_NEIGHBORS
            } else {
                0
            },
            spatial_distance: plan.settings.area_metres,
            cameras,
            images: inputs,
        };
        let text =
            serde_json::to_vec(&input).map_err(|error| SfmError::Engine(error.to_string()))?;
        std::fs::write(dir.join("input.json"), text)?;
        Ok(())
    }
}

/// The file name of the image `id` at `position` in its part: in capture order, as the
/// engine's sequential matching takes them, and ending in the ID, so that an erasure finds
/// the copy (`takedown.rs`).
pub(super) fn image_name(position: usize, id: u64) -> String {
    format!("{position:05}-{id}.jpg")
}

/// A 35 mm equivalent focal length (millimetres) as a focal length over the picture's larger
/// side: the equivalence holds on the diagonal (43.27 mm on a 36 x 24 mm frame).
pub(super) fn focal_ratio(focal_35mm: f64, width: u32, height: u32) -> f64 {
    let (width, height) = (f64::from(width.max(1)), f64::from(height.max(1)));
    focal_35mm / 36.0_f64.hypot(24.0) * width.hypot(height) / width.max(height)
}

/// Overlapping parts of a sequence of `count` images: one part up to `size` images (and a
/// little more, so a last part is never a sliver), else parts of `size` starting every
/// `size - overlap`.
pub(super) fn split(count: usize, size: usize, overlap: usize) -> Vec<Vec<usize>> {
    let size = size.max(3);
    let step = size.saturating_sub(overlap).max(1);
    if count <= size + step / 2 {
        return vec![(0..count).collect()];
    }
    let mut parts = Vec::new();
    let mut start = 0;
    loop {
        let end = if count - start <= size + step / 2 {
            count
        } else {
            start + size
        };
        parts.push((start..end).collect());
        if end == count {
            return parts;
        }
        start += step;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn a_35_mm_focal_length_is_a_ratio_on_the_diagonal() {
        // A 3:2 picture: 36 mm is its width.
        assert!((focal_ratio(36.0, 3000, 2000) - 1.0).abs() < 1e-12);
        // The iPhone 4S of the Lund walk: 35 mm on a 4:3 picture.
        assert!((focal_ratio(35.0, 1024, 768) - 1.011).abs() < 1e-3);
        assert!((focal_ratio(35.0, 768, 1024) - 1.011).abs() < 1e-3);
    }

    #[test]
    fn a_long_sequence_is_split_into_overlapping_parts_that_cover_it() {
        assert_eq!(split(29, 100, 20), vec![(0..29).collect::<Vec<_>>()]);
        assert_eq!(
            split(130, 100, 20).len(),
            1,
            "a little more than a part is one part"
        );
        let parts = split(350, 100, 20);
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[0], (0..100).collect::<Vec<_>>());
        assert_eq!(parts[1][0], 80);
        assert_eq!(*parts.last().unwrap().last().unwrap(), 349);
        for pair in parts.windows(2) {
            let shared = pair[0]
                .iter()
                .filter(|image| pair[1].contains(image))
                .count();
            assert_eq!(shared, 20);
        }
        let covered: HashSet<usize> = parts.iter().flatten().copied().collect();
        assert_eq!(covered.len(), 350);
    }
}
