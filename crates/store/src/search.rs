//! Searches over images, map features and detections: filters, ascending ID order and cursor
//! paging (see the semantics in [`crate::filter`]).
//!
//! Each search picks a candidate source: an explicit ID list, the members of the asked
//! sequences, the R-tree for a bounding box, or an ID-ordered list (a creator's or an
//! organization's images, or everything) that stops as soon as a page is full. A bounding box
//! holding very many candidates falls back to the ordered scan, which then ends early.

use std::collections::HashSet;
use std::ops::Bound;

use rstar::AABB;
use streetlevel_model::{Detection, Image, MapFeature, Timestamp};

use crate::Store;
use crate::filter::{
    BoundingBox, Cursor, DetectionFilter, ImageFilter, MapFeatureFilter, Page, matches_any,
};
use crate::image_record::NONE;
use crate::indexes::{lower_f32, upper_f32};

/// Above this many R-tree candidates (or a hundredth of the images, if more) a bounding-box
/// search switches to the ordered scan: a box holding that many is dense enough for the scan
/// to fill a page soon.
const BBOX_CANDIDATE_CAP: usize = 10_000;

/// An image filter with names resolved to the store's indices.
struct ResolvedImageFilter<'a> {
    filter: &'a ImageFilter,
    creator: Option<u32>,
    organization: Option<u32>,
    /// By camera index, whether the camera passes the make and model filters; `None` when
    /// neither is set.
    cameras: Option<Vec<bool>>,
    sequences: Option<HashSet<u32>>,
}

pub(crate) fn envelope_f32(bbox: &BoundingBox) -> AABB<[f32; 2]> {
    AABB::from_corners(
        [lower_f32(bbox.min_lon()), lower_f32(bbox.min_lat())],
        [upper_f32(bbox.max_lon()), upper_f32(bbox.max_lat())],
    )
}

/// Takes up to `limit` items of an ascending stream of `(id, item)` and says whether more
/// follow.
fn page_of<T>(mut stream: impl Iterator<Item = (u64, T)>, limit: usize) -> Page<T> {
    let mut items = Vec::new();
    let mut last_id = None;
    if limit == 0 {
        return Page { items, next: None };
    }
    for (id, item) in stream.by_ref() {
        items.push(item);
        last_id = Some(id);
        if items.len() == limit {
            break;
        }
    }
    let more = items.len() == limit && stream.next().is_some();
    Page {
        items,
        next: if more {
            last_id.map(Cursor::after)
        } else {
            None
        },
    }
}

fn after_bound(after: Option<Cursor>) -> Bound<u64> {
    after.map_or(Bound::Unbounded, |cursor| Bound::Excluded(cursor.last_id()))
}

fn is_after(id: u64, after: Option<Cursor>) -> bool {
    after.is_none_or(|cursor| id > cursor.last_id())
}

impl Store {
    /// Images matching `filter`, at most `limit`, in ascending ID order, continuing after
    /// `after`. `limit` 0 gives an empty last page.
    pub fn search_images(
        &self,
        filter: &ImageFilter,
        limit: usize,
        after: Option<Cursor>,
    ) -> Page<Image> {
        let Some(resolved) = self.resolve_image_filter(filter) else {
            return Page {
                items: Vec::new(),
                next: None,
            };
        };
        let indices = self.image_candidates(&resolved, limit, after);
        let page = page_of(
            indices
                .into_iter()
                .map(|index| (self.records.image(index).id, index)),
            limit,
        );
        Page {
            items: page
                .items
                .into_iter()
                .map(|index| self.image_at(index))
                .collect(),
            next: page.next,
        }
    }

    /// `None` when a named creator, make, model or organization does not exist (no result).
    fn resolve_image_filter<'a>(&self, filter: &'a ImageFilter) -> Option<ResolvedImageFilter<'a>> {
        let creator = match &filter.creator_username {
            Some(username) => Some(self.records.username_slot(username)?),
            None => None,
        };
        let organization = match filter.organization_id {
            Some(id) => Some(self.records.organization_slot_of(id)?),
            None => None,
        };
        let interned = |text: &Option<String>| {
            text.as_deref()
                .map(|text| self.records.strings().matching_ignore_case(text))
        };
        let makes = interned(&filter.make);
        let models = interned(&filter.model);
        if makes.as_ref().is_some_and(Vec::is_empty) || models.as_ref().is_some_and(Vec::is_empty) {
            return None;
        }
        let cameras = (makes.is_some() || models.is_some()).then(|| {
            self.records.cameras().matching(|camera| {
                let named = |names: &Option<Vec<u32>>, name: u32| {
                    names
                        .as_ref()
                        .is_none_or(|names| name != NONE && names.contains(&name))
                };
                named(&makes, camera.make) && named(&models, camera.model)
            })
        });
        let sequences = filter.sequence_ids.as_ref().map(|ids| {
            ids.iter()
                .filter_map(|id| self.records.sequence_slot_of(id.as_str()))
                .collect()
        });
        Some(ResolvedImageFilter {
            filter,
            creator,
            organization,
            cameras,
            sequences,
        })
    }

    fn image_matches(&self, index: u32, resolved: &ResolvedImageFilter<'_>) -> bool {
        let record = self.records.image(index);
        let filter = resolved.filter;
        filter.bbox.is_none_or(|bbox| bbox.contains(record.point()))
            && resolved
                .creator
                .is_none_or(|creator| record.creator == creator)
            && filter.is_pano.is_none_or(|pano| record.is_pano() == pano)
            && resolved
                .cameras
                .as_ref()
                .is_none_or(|cameras| cameras[record.camera as usize])
            && resolved
                .organization
                .is_none_or(|organization| record.organization == organization)
            && resolved
                .sequences
                .as_ref()
                .is_none_or(|sequences| sequences.contains(&record.sequence))
            && filter.captured_at.contains(Timestamp(record.captured_at))
    }

    /// Matching image indices after the cursor in ascending ID order; at least `limit + 1` of
    /// them when that many exist.
    fn image_candidates(
        &self,
        resolved: &ResolvedImageFilter<'_>,
        limit: usize,
        after: Option<Cursor>,
    ) -> Vec<u32> {
        let wanted = limit.saturating_add(1);
        let by_id = |indices: &mut Vec<u32>| {
            indices.sort_unstable_by_key(|&index| self.records.image(index).id);
            indices.dedup();
        };
        if let Some(ids) = &resolved.filter.image_ids {
            let mut indices: Vec<u32> = ids
                .iter()
                .filter(|id| is_after(id.0, after))
                .filter_map(|id| self.image_index(id.0))
                .filter(|&index| self.image_matches(index, resolved))
                .collect();
            by_id(&mut indices);
            return indices;
        }
        if let Some(sequences) = &resolved.sequences {
            let mut indices: Vec<u32> = sequences
                .iter()
                .flat_map(|&sequence| self.records.sequence(sequence).members.iter().copied())
                .filter(|&index| is_after(self.records.image(index).id, after))
                .filter(|&index| self.image_matches(index, resolved))
                .collect();
            by_id(&mut indices);
            return indices;
        }
        if let Some(bbox) = &resolved.filter.bbox {
            let cap = BBOX_CANDIDATE_CAP.max(self.image_count() / 100);
            let mut found: Vec<(u64, u32)> = Vec::new();
            let mut visited = 0;
            for index in self.indexes.images_meeting(&envelope_f32(bbox)) {
                visited += 1;
                if visited > cap {
                    break;
                }
                let id = self.records.image(index).id;
                if is_after(id, after) && self.image_matches(index, resolved) {
                    found.push((id, index));
                }
            }
            if visited <= cap {
                // Only the lowest `wanted` IDs can be on the page: select them, then sort just
                // those, on the ID carried along (not looked up per comparison).
                if found.len() > wanted {
                    found.select_nth_unstable(wanted);
                    found.truncate(wanted);
                }
                found.sort_unstable();
                return found.into_iter().map(|(_, index)| index).collect();
            }
        }
        // An ordered source: the smallest of the creator's list, the organization's list and
        // everything (the ID order); stop once the page (plus one) is full.
        let creator_list = resolved
            .creator
            .map(|creator| &self.records.creator(creator).images);
        let organization_list = resolved
            .organization
            .map(|organization| &self.records.organization(organization).images);
        let list = match (creator_list, organization_list) {
            (Some(a), Some(b)) => Some(if a.len() <= b.len() { a } else { b }),
            (a, b) => a.or(b),
        };
        let matching = |index: &u32| self.image_matches(*index, resolved);
        // Every list is in ID order: start after the cursor by binary search.
        let list = list.map_or(self.indexes.id_order(), Vec::as_slice);
        let start = after.map_or(0, |cursor| {
            list.partition_point(|&index| self.records.image(index).id <= cursor.last_id())
        });
        list[start..]
            .iter()
            .copied()
            .filter(matching)
            .take(wanted)
            .collect()
    }

    /// Map features matching `filter`, at most `limit`, in ascending ID order, continuing
    /// after `after`.
    pub fn search_map_features(
        &self,
        filter: &MapFeatureFilter,
        limit: usize,
        after: Option<Cursor>,
    ) -> Page<&MapFeature> {
        let matches = |feature: &MapFeature| {
            filter
                .bbox
                .is_none_or(|bbox| bbox.contains(feature.geometry))
                && matches_any(filter.object_values.as_deref(), &feature.object_value)
                && filter.first_seen_at.contains(feature.first_seen_at)
                && filter.last_seen_at.contains(feature.last_seen_at)
        };
        if let Some(bbox) = &filter.bbox {
            let envelope = AABB::from_corners(
                [bbox.min_lon(), bbox.min_lat()],
                [bbox.max_lon(), bbox.max_lat()],
            );
            let mut found = Vec::new();
            let mut visited = 0;
            for index in self.indexes.map_features_in(&envelope) {
                visited += 1;
                if visited > BBOX_CANDIDATE_CAP {
                    break;
                }
                let feature = &self.records.map_features()[index as usize];
                if is_after(feature.id.0, after) && matches(feature) {
                    found.push(feature);
                }
            }
            if visited <= BBOX_CANDIDATE_CAP {
                found.sort_unstable_by_key(|feature| feature.id);
                return page_of(
                    found.into_iter().map(|feature| (feature.id.0, feature)),
                    limit,
                );
            }
        }
        page_of(
            self.records
                .map_feature_ids()
                .range((after_bound(after), Bound::Unbounded))
                .map(|(&id, &index)| (id, &self.records.map_features()[index as usize]))
                .filter(|(_, feature)| matches(feature)),
            limit,
        )
    }

    /// Detections matching `filter`, at most `limit`, in ascending ID order, continuing after
    /// `after`. Bounding box and time range apply to the detection's image; a detection whose
    /// image is unknown matches only when neither is set.
    pub fn search_detections(
        &self,
        filter: &DetectionFilter,
        limit: usize,
        after: Option<Cursor>,
    ) -> Page<&Detection> {
        let needs_image = filter.bbox.is_some() || !filter.captured_at.is_unbounded();
        let matches = |detection: &Detection| {
            if !matches_any(filter.values.as_deref(), &detection.value) {
                return false;
            }
            if !needs_image {
                return true;
            }
            let Some(index) = self.image_index(detection.image.0) else {
                return false;
            };
            let record = self.records.image(index);
            filter.bbox.is_none_or(|bbox| bbox.contains(record.point()))
                && filter.captured_at.contains(Timestamp(record.captured_at))
        };
        if let Some(bbox) = &filter.bbox {
            let mut found = Vec::new();
            let mut visited = 0;
            for index in self.indexes.images_meeting(&envelope_f32(bbox)) {
                let record = self.records.image(index);
                let Some(detections) = self.records.detections_of_image(record.id) else {
                    continue;
                };
                visited += detections.len();
                if visited > BBOX_CANDIDATE_CAP {
                    break;
                }
                for &index in detections {
                    let detection = &self.records.detections()[index as usize];
                    if is_after(detection.id.0, after) && matches(detection) {
                        found.push(detection);
                    }
                }
            }
            if visited <= BBOX_CANDIDATE_CAP {
                found.sort_unstable_by_key(|detection| detection.id);
                return page_of(
                    found
                        .into_iter()
                        .map(|detection| (detection.id.0, detection)),
                    limit,
                );
            }
        }
        page_of(
            self.records
                .detection_ids()
                .range((after_bound(after), Bound::Unbounded))
                .map(|(&id, &index)| (id, &self.records.detections()[index as usize]))
                .filter(|(_, detection)| matches(detection)),
            limit,
        )
    }
}
