//! Every search compared with a brute-force scan of the same random data, page by page.

// Helpers outside `#[test]` functions unwrap and panic too.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{Dataset, Ids, MAKES, MODELS, PATTERNS, dataset, insert_all, random_image, rng};
use proptest::prelude::*;
use rand::Rng;
use rand::rngs::StdRng;
use std::collections::HashSet;

use streetlevel_model::{
    Detection, DetectionId, Image, ImageId, MapFeature, MapFeatureId, OrganizationId, Point,
    SequenceId, Timestamp,
};
use streetlevel_store::{
    BoundingBox, Cursor, DetectionFilter, ImageFilter, MapFeatureFilter, Page, Store, TimeRange,
    wildcard_match,
};

fn random_bbox(rng: &mut StdRng, data: &Dataset) -> BoundingBox {
    // Corners on the data's own coordinates half the time, to exercise inclusive edges.
    let coordinate = |rng: &mut StdRng| {
        if !data.images.is_empty() && rng.random_bool(0.5) {
            let image = &data.images[rng.random_range(0..data.images.len())];
            (image.geometry.lon, image.geometry.lat)
        } else {
            let point = common::random_point(rng);
            (point.lon, point.lat)
        }
    };
    let (lon_a, lat_a) = coordinate(rng);
    let (lon_b, lat_b) = coordinate(rng);
    BoundingBox::new(
        lon_a.min(lon_b),
        lat_a.min(lat_b),
        lon_a.max(lon_b),
        lat_a.max(lat_b),
    )
    .unwrap()
}

fn random_range(rng: &mut StdRng) -> TimeRange {
    TimeRange {
        start: rng.random_bool(0.3).then(|| common::random_time(rng)),
        end: rng.random_bool(0.3).then(|| common::random_time(rng)),
    }
}

fn random_image_filter(rng: &mut StdRng, data: &Dataset) -> ImageFilter {
    let some = |rng: &mut StdRng, p: f64| rng.random_bool(p);
    ImageFilter {
        bbox: some(rng, 0.5).then(|| random_bbox(rng, data)),
        creator_username: some(rng, 0.2).then(|| format!("user{}", rng.random_range(0..5))),
        is_pano: some(rng, 0.2).then(|| rng.random_bool(0.5)),
        make: some(rng, 0.15)
            .then(|| ["APPLE", "gopro", "Nikon", "Sony"][rng.random_range(0..4)].to_owned()),
        model: some(rng, 0.1).then(|| MODELS[rng.random_range(0..MODELS.len())].to_lowercase()),
        organization_id: some(rng, 0.2).then(|| {
            if rng.random_bool(0.8) {
                data.organizations[rng.random_range(0..data.organizations.len())].id
            } else {
                OrganizationId(7)
            }
        }),
        sequence_ids: some(rng, 0.15).then(|| {
            (0..rng.random_range(0..3))
                .map(|_| SequenceId(format!("seq{}", rng.random_range(0..8))))
                .collect()
        }),
        captured_at: random_range(rng),
        image_ids: some(rng, 0.1).then(|| {
            (0..rng.random_range(0..20))
                .map(|_| {
                    if !data.images.is_empty() && rng.random_bool(0.8) {
                        data.images[rng.random_range(0..data.images.len())].id
                    } else {
                        ImageId(rng.random_range(1..100))
                    }
                })
                .collect()
        }),
    }
}

fn brute_images(data: &Dataset, filter: &ImageFilter) -> Vec<Image> {
    let creator = filter.creator_username.as_ref().map(|username| {
        data.creators
            .iter()
            .find(|creator| &creator.username == username)
            .map(|creator| creator.id)
    });
    let text_matches = |wanted: &Option<String>, have: &Option<String>| {
        wanted.as_ref().is_none_or(|wanted| {
            have.as_ref()
                .is_some_and(|have| have.eq_ignore_ascii_case(wanted))
        })
    };
    let mut found: Vec<Image> = data
        .images
        .iter()
        .filter(|image| {
            in_box(filter.bbox, image.geometry)
                && creator.is_none_or(|creator| creator == Some(image.creator))
                && filter.is_pano.is_none_or(|pano| image.is_pano == pano)
                && text_matches(&filter.make, &image.make)
                && text_matches(&filter.model, &image.model)
                && filter
                    .organization_id
                    .is_none_or(|id| image.organization == Some(id))
                && filter
                    .sequence_ids
                    .as_ref()
                    .is_none_or(|ids| ids.contains(&image.sequence))
                && filter
                    .captured_at
                    .start
                    .is_none_or(|start| image.captured_at >= start)
                && filter
                    .captured_at
                    .end
                    .is_none_or(|end| image.captured_at <= end)
                && filter
                    .image_ids
                    .as_ref()
                    .is_none_or(|ids| ids.contains(&image.id))
        })
        .cloned()
        .collect();
    found.sort_by_key(|image| image.id);
    found
}

fn in_range(range: &TimeRange, time: Timestamp) -> bool {
    range.start.is_none_or(|start| time >= start) && range.end.is_none_or(|end| time <= end)
}

/// The brute force's own wildcard matcher, independent of the store's: a `*` tries every
/// split of the rest of the value.
fn glob(pattern: &[u8], value: &[u8]) -> bool {
    match pattern.split_first() {
        None => value.is_empty(),
        Some((b'*', rest)) => (0..=value.len()).any(|skip| glob(rest, &value[skip..])),
        Some((byte, rest)) => value.first() == Some(byte) && glob(rest, &value[1..]),
    }
}

fn any_pattern(patterns: Option<&Vec<String>>, value: &str) -> bool {
    patterns.is_none_or(|patterns| {
        patterns
            .iter()
            .any(|pattern| glob(pattern.as_bytes(), value.as_bytes()))
    })
}

/// Inclusive on every edge, compared by hand (not through `BoundingBox::contains`).
fn in_box(bbox: Option<BoundingBox>, point: Point) -> bool {
    bbox.is_none_or(|bbox| {
        point.lon >= bbox.min_lon()
            && point.lon <= bbox.max_lon()
            && point.lat >= bbox.min_lat()
            && point.lat <= bbox.max_lat()
    })
}

fn random_patterns(rng: &mut StdRng) -> Option<Vec<String>> {
    rng.random_bool(0.5).then(|| {
        (0..rng.random_range(1..3))
            .map(|_| PATTERNS[rng.random_range(0..PATTERNS.len())].to_owned())
            .collect()
    })
}

fn brute_map_features(data: &Dataset, filter: &MapFeatureFilter) -> Vec<MapFeature> {
    let mut found: Vec<MapFeature> = data
        .map_features
        .iter()
        .filter(|feature| {
            in_box(filter.bbox, feature.geometry)
                && any_pattern(filter.object_values.as_ref(), &feature.object_value)
                && in_range(&filter.first_seen_at, feature.first_seen_at)
                && in_range(&filter.last_seen_at, feature.last_seen_at)
        })
        .cloned()
        .collect();
    found.sort_by_key(|feature| feature.id);
    found
}

fn brute_detections(data: &Dataset, filter: &DetectionFilter) -> Vec<Detection> {
    let mut found: Vec<Detection> = data
        .detections
        .iter()
        .filter(|detection| {
            let image = data.images.iter().find(|image| image.id == detection.image);
            let needs_image = filter.bbox.is_some() || filter.captured_at != TimeRange::default();
            any_pattern(filter.values.as_ref(), &detection.value)
                && (!needs_image
                    || image.is_some_and(|image| {
                        in_box(filter.bbox, image.geometry)
                            && in_range(&filter.captured_at, image.captured_at)
                    }))
        })
        .cloned()
        .collect();
    found.sort_by_key(|detection| detection.id);
    found
}

fn random_map_feature_filter(rng: &mut StdRng, data: &Dataset) -> MapFeatureFilter {
    MapFeatureFilter {
        bbox: rng.random_bool(0.5).then(|| random_bbox(rng, data)),
        object_values: random_patterns(rng),
        first_seen_at: random_range(rng),
        last_seen_at: random_range(rng),
    }
}

fn random_detection_filter(rng: &mut StdRng, data: &Dataset) -> DetectionFilter {
    DetectionFilter {
        bbox: rng.random_bool(0.5).then(|| random_bbox(rng, data)),
        captured_at: random_range(rng),
        values: random_patterns(rng),
    }
}

/// Every ID the data set uses, of any kind.
fn all_ids(data: &Dataset) -> HashSet<u64> {
    data.images
        .iter()
        .map(|image| image.id.0)
        .chain(data.map_features.iter().map(|feature| feature.id.0))
        .chain(data.detections.iter().map(|detection| detection.id.0))
        .chain(
            data.organizations
                .iter()
                .map(|organization| organization.id.0),
        )
        .collect()
}

fn owned<T: Clone>(page: Page<&T>) -> Page<T> {
    Page {
        items: page.items.into_iter().cloned().collect(),
        next: page.next,
    }
}

/// Pages through `search` to the end, letting `add` insert entities after every page that
/// announces a next one. Returns what the pages held and, per page, its cursor's ID with what
/// was added after it.
fn page_while_adding<T, A>(
    store: &mut Store,
    search: impl Fn(&Store, Option<Cursor>) -> Page<T>,
    mut add: impl FnMut(&mut Store) -> Vec<A>,
) -> (Vec<T>, Vec<(u64, Vec<A>)>) {
    let mut seen = Vec::new();
    let mut added_after = Vec::new();
    let mut after = None;
    loop {
        let page = search(store, after);
        seen.extend(page.items);
        let Some(cursor) = page.next else {
            return (seen, added_after);
        };
        // Each page moves on (else this would loop for ever).
        assert!(
            after.is_none_or(|previous| cursor > previous),
            "{cursor} repeats"
        );
        after = Some(cursor);
        added_after.push((cursor.last_id(), add(store)));
    }
}

/// What paging while adding must have seen: `original` (the matches of the data before
/// paging began), plus the matches among each batch added after a page whose IDs lie above
/// that page's cursor, in ID order.
fn expected_while_adding<T>(
    original: Vec<T>,
    added_after: Vec<(u64, Vec<T>)>,
    matches: impl Fn(Vec<T>) -> Vec<T>,
    id_of: impl Fn(&T) -> u64,
) -> Vec<T> {
    let mut expected = original;
    for (cursor, added) in added_after {
        expected.extend(
            matches(added)
                .into_iter()
                .filter(|item| id_of(item) > cursor),
        );
    }
    expected.sort_by_key(&id_of);
    expected
}

/// Pages through a search with `limit`, checking each page's shape, and returns everything.
fn collect_pages<T: Clone>(
    limit: usize,
    mut search: impl FnMut(Option<Cursor>) -> Page<T>,
    id_of: impl Fn(&T) -> u64,
) -> Vec<T> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = search(after);
        assert!(page.items.len() <= limit);
        assert!(page.items.is_sorted_by_key(&id_of));
        if let Some(cursor) = after {
            assert!(page.items.iter().all(|item| id_of(item) > cursor.last_id()));
        }
        all.extend(page.items.iter().cloned());
        match page.next {
            Some(cursor) => {
                // A next page is announced only beside a full page, and never empty.
                assert_eq!(page.items.len(), limit);
                assert_eq!(Some(cursor.last_id()), page.items.last().map(&id_of));
                let text = cursor.to_string();
                after = Some(text.parse().unwrap());
            }
            None => return all,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn image_search_pages_match_brute_force(seed in any::<u64>(), n in 0usize..150, limit in 1usize..40) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0x5eed);
        for _ in 0..8 {
            let filter = random_image_filter(&mut rng, &data);
            let expected = brute_images(&data, &filter);
            let paged = collect_pages(limit, |after| store.search_images(&filter, limit, after), |image| image.id.0);
            prop_assert_eq!(&paged, &expected, "{:?}", filter);
            let single = store.search_images(&filter, 2000, None);
            prop_assert_eq!(&single.items, &expected);
            prop_assert!(single.next.is_none());
        }
    }

    #[test]
    fn paging_continues_while_images_are_added(seed in any::<u64>(), n in 1usize..120, limit in 1usize..20) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0xadd);
        let mut ids = Ids::new();
        let existing = all_ids(&data);
        let filter = random_image_filter(&mut rng, &data);
        let (seen, added_after) = page_while_adding(
            &mut store,
            |store, after| store.search_images(&filter, limit, after),
            |store| {
                let added: Vec<Image> = (0..rng.random_range(0..6))
                    .map(|_| random_image(&mut rng, &mut ids, &data))
                    .filter(|image| !existing.contains(&image.id.0))
                    .collect();
                store.insert_images(&added).unwrap();
                added
            },
        );
        let expected = expected_while_adding(
            brute_images(&data, &filter),
            added_after,
            |images| brute_images(&Dataset { images, ..data.clone() }, &filter),
            |image| image.id.0,
        );
        prop_assert_eq!(seen, expected);
    }

    #[test]
    fn paging_continues_while_map_features_are_added(seed in any::<u64>(), n in 1usize..120, limit in 1usize..20) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0xadd2);
        let mut ids = Ids::new();
        let existing = all_ids(&data);
        let filter = random_map_feature_filter(&mut rng, &data);
        let (seen, added_after) = page_while_adding(
            &mut store,
            |store, after| owned(store.search_map_features(&filter, limit, after)),
            |store| {
                let added: Vec<MapFeature> = (0..rng.random_range(0..6))
                    .map(|_| common::random_map_feature(&mut rng, &mut ids, &data.images))
                    .filter(|feature| !existing.contains(&feature.id.0))
                    .collect();
                store.insert_map_features(&added).unwrap();
                added
            },
        );
        let expected = expected_while_adding(
            brute_map_features(&data, &filter),
            added_after,
            |map_features| brute_map_features(&Dataset { map_features, ..data.clone() }, &filter),
            |feature| feature.id.0,
        );
        prop_assert_eq!(seen, expected);
    }

    #[test]
    fn paging_continues_while_detections_are_added(seed in any::<u64>(), n in 1usize..120, limit in 1usize..20) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0xadd3);
        let mut ids = Ids::new();
        let existing = all_ids(&data);
        let filter = random_detection_filter(&mut rng, &data);
        let (seen, added_after) = page_while_adding(
            &mut store,
            |store, after| owned(store.search_detections(&filter, limit, after)),
            |store| {
                let added: Vec<Detection> = (0..rng.random_range(0..6))
                    .map(|_| common::random_detection(&mut rng, &mut ids, &data.images, &data.map_features))
                    .filter(|detection| !existing.contains(&detection.id.0))
                    .collect();
                store.insert_detections(&added).unwrap();
                added
            },
        );
        let expected = expected_while_adding(
            brute_detections(&data, &filter),
            added_after,
            |detections| brute_detections(&Dataset { detections, ..data.clone() }, &filter),
            |detection| detection.id.0,
        );
        prop_assert_eq!(seen, expected);
    }

    #[test]
    fn map_feature_search_pages_match_brute_force(seed in any::<u64>(), n in 0usize..150, limit in 1usize..40) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0xfea7);
        for _ in 0..8 {
            let filter = random_map_feature_filter(&mut rng, &data);
            let expected = brute_map_features(&data, &filter);
            let paged = collect_pages(limit, |after| store.search_map_features(&filter, limit, after), |feature| feature.id.0);
            let paged: Vec<MapFeature> = paged.into_iter().cloned().collect();
            prop_assert_eq!(paged, expected);
        }
    }

    #[test]
    fn detection_search_pages_match_brute_force(seed in any::<u64>(), n in 0usize..150, limit in 1usize..40) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0xde7);
        for _ in 0..8 {
            let filter = random_detection_filter(&mut rng, &data);
            let expected = brute_detections(&data, &filter);
            let paged = collect_pages(limit, |after| store.search_detections(&filter, limit, after), |detection| detection.id.0);
            let paged: Vec<Detection> = paged.into_iter().cloned().collect();
            prop_assert_eq!(paged, expected);
        }
    }

    #[test]
    fn the_wildcard_matcher_agrees_with_the_reference(pattern in "[ab*]{0,6}", value in "[ab]{0,8}") {
        prop_assert_eq!(wildcard_match(&pattern, &value), glob(pattern.as_bytes(), value.as_bytes()));
    }

    #[test]
    fn lookups_match_the_inserted_entities(seed in any::<u64>(), n in 0usize..100) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        check_lookups(&store, &data);
    }

    #[test]
    fn lookups_match_after_inserts_in_batches(seed in any::<u64>(), n in 0usize..100, batch in 1usize..30) {
        // The lists of creators, organizations, sequences, images and map features stay in
        // order whatever the batches bring (IDs and capture times come in random order).
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        store.insert_creators(&data.creators).unwrap();
        store.insert_organizations(&data.organizations).unwrap();
        store.insert_sequences(&data.sequences).unwrap();
        for images in data.images.chunks(batch) {
            store.insert_images(images).unwrap();
        }
        for features in data.map_features.chunks(batch) {
            store.insert_map_features(features).unwrap();
        }
        for detections in data.detections.chunks(batch) {
            store.insert_detections(detections).unwrap();
        }
        check_lookups(&store, &data);
    }
}

/// Erases about a quarter of the images and hides another quarter (restoring some) in
/// `store`, holding `data`, and returns what the store should answer now: the public images,
/// the detections of public images, the map features without the erased images, and the
/// declared sequences that still have public images or never had any.
fn take_down(store: &mut Store, data: &Dataset, rng: &mut StdRng) -> Dataset {
    use streetlevel_store::TakedownNote;
    let note = TakedownNote {
        actor: "test",
        subject: "test",
        at: streetlevel_model::Timestamp(0),
    };
    let mut erased = HashSet::new();
    let mut hidden = HashSet::new();
    for image in &data.images {
        match rng.random_range(0..4) {
            0 => {
                erased.insert(image.id);
            }
            1 => {
                hidden.insert(image.id);
            }
            _ => {}
        }
    }
    let erased_list: Vec<ImageId> = erased.iter().copied().collect();
    for chunk in erased_list.chunks(5) {
        let done = store.delete_images(chunk, &note, |_, _| Ok(())).unwrap();
        assert_eq!(done.len(), chunk.len());
    }
    let hidden_list: Vec<ImageId> = hidden.iter().copied().collect();
    store.hide_images(&hidden_list, &note).unwrap();
    // Hiding again, erasing again: nothing more to do.
    assert!(store.hide_images(&hidden_list, &note).unwrap().is_empty());
    assert!(
        store
            .delete_images(&erased_list, &note, |_, _| Ok(()))
            .unwrap()
            .is_empty()
    );
    let restored: Vec<ImageId> = hidden_list
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.3))
        .collect();
    store.restore_images(&restored, &note).unwrap();
    for id in &restored {
        hidden.remove(id);
    }
    let public: Vec<Image> = data
        .images
        .iter()
        .filter(|image| !erased.contains(&image.id) && !hidden.contains(&image.id))
        .cloned()
        .collect();
    for image in &data.images {
        if hidden.contains(&image.id) {
            assert_eq!(store.image(image.id), None);
            assert_eq!(store.hidden_image(image.id).as_ref(), Some(image));
        } else if erased.contains(&image.id) {
            assert_eq!(store.image(image.id), None);
            assert_eq!(store.hidden_image(image.id), None);
        }
    }
    let sequences = data
        .sequences
        .iter()
        .filter(|sequence| {
            let had = data
                .images
                .iter()
                .any(|image| image.sequence == sequence.id);
            !had || public.iter().any(|image| image.sequence == sequence.id)
        })
        .cloned()
        .collect();
    Dataset {
        creators: data.creators.clone(),
        organizations: data.organizations.clone(),
        sequences,
        images: public,
        map_features: data
            .map_features
            .iter()
            .map(|feature| {
                let mut feature = feature.clone();
                feature.images.retain(|image| !erased.contains(image));
                feature
            })
            .collect(),
        detections: data
            .detections
            .iter()
            .filter(|detection| {
                !erased.contains(&detection.image) && !hidden.contains(&detection.image)
            })
            .cloned()
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// After erasing, hiding and restoring, every lookup and search answers like a brute
    /// force over what is still public, page by page.
    #[test]
    fn lookups_and_searches_match_brute_force_after_takedowns(seed in any::<u64>(), n in 0usize..120, limit in 1usize..30) {
        let data = dataset(seed, n);
        let mut store = Store::in_memory();
        insert_all(&mut store, &data);
        let mut rng = rng(seed ^ 0x7a4e);
        let expected_data = take_down(&mut store, &data, &mut rng);
        check_lookups(&store, &expected_data);
        prop_assert_eq!(store.image_count(), expected_data.images.len());
        for _ in 0..6 {
            let filter = random_image_filter(&mut rng, &data);
            let expected = brute_images(&expected_data, &filter);
            let paged = collect_pages(limit, |after| store.search_images(&filter, limit, after), |image| image.id.0);
            prop_assert_eq!(&paged, &expected, "{:?}", filter);
            let filter = random_detection_filter(&mut rng, &data);
            let expected = brute_detections(&expected_data, &filter);
            let paged = collect_pages(limit, |after| store.search_detections(&filter, limit, after), |detection| detection.id.0);
            let paged: Vec<Detection> = paged.into_iter().cloned().collect();
            prop_assert_eq!(&paged, &expected, "{:?}", filter);
            let filter = random_map_feature_filter(&mut rng, &data);
            let expected = brute_map_features(&expected_data, &filter);
            let paged = collect_pages(limit, |after| store.search_map_features(&filter, limit, after), |feature| feature.id.0);
            let paged: Vec<MapFeature> = paged.into_iter().cloned().collect();
            prop_assert_eq!(&paged, &expected, "{:?}", filter);
        }
    }
}

/// Every lookup of the store against the data it was given.
pub fn check_lookups(store: &Store, data: &Dataset) {
    use streetlevel_model::{EntityId, EntityKind};
    for image in &data.images {
        assert_eq!(store.kind_of(EntityId(image.id.0)), Some(EntityKind::Image));
        assert_eq!(store.image(image.id).as_ref(), Some(image));
    }
    for feature in &data.map_features {
        assert_eq!(
            store.kind_of(EntityId(feature.id.0)),
            Some(EntityKind::MapFeature)
        );
        assert_eq!(store.map_feature(feature.id), Some(feature));
        let mut expected: Vec<&Detection> = data
            .detections
            .iter()
            .filter(|detection| detection.map_feature == Some(feature.id))
            .collect();
        expected.sort_by_key(|detection| detection.id);
        assert_eq!(store.detections_of_map_feature(feature.id), expected);
    }
    for detection in &data.detections {
        assert_eq!(
            store.kind_of(EntityId(detection.id.0)),
            Some(EntityKind::Detection)
        );
        assert_eq!(store.detection(detection.id), Some(detection));
    }
    for organization in &data.organizations {
        assert_eq!(
            store.kind_of(EntityId(organization.id.0)),
            Some(EntityKind::Organization)
        );
        assert_eq!(store.organization(organization.id), Some(organization));
        let mut expected: Vec<ImageId> = data
            .images
            .iter()
            .filter(|image| image.organization == Some(organization.id))
            .map(|image| image.id)
            .collect();
        expected.sort();
        assert_eq!(store.images_of_organization(organization.id), expected);
    }
    for creator in &data.creators {
        assert_eq!(store.creator(creator.id), Some(creator));
        assert_eq!(store.creator_by_username(&creator.username), Some(creator));
        let mut expected: Vec<ImageId> = data
            .images
            .iter()
            .filter(|image| image.creator == creator.id)
            .map(|image| image.id)
            .collect();
        expected.sort();
        assert_eq!(store.images_of_creator(creator.id), expected);
        assert_eq!(store.images_of_username(&creator.username), expected);
    }
    for image in &data.images {
        let mut expected: Vec<&Detection> = data
            .detections
            .iter()
            .filter(|detection| detection.image == image.id)
            .collect();
        expected.sort_by_key(|detection| detection.id);
        assert_eq!(store.detections_of_image(image.id), expected);
    }
    for number in 0..8 {
        let key = SequenceId(format!("seq{number}"));
        let mut members: Vec<&Image> = data
            .images
            .iter()
            .filter(|image| image.sequence == key)
            .collect();
        members.sort_by_key(|image| (image.captured_at, image.id));
        let expected: Vec<ImageId> = members.iter().map(|image| image.id).collect();
        let declared = data.sequences.iter().find(|sequence| sequence.id == key);
        if declared.is_none() && members.is_empty() {
            assert_eq!(store.sequence_image_ids(&key), None);
            assert_eq!(store.sequence(&key), None);
            continue;
        }
        assert_eq!(store.sequence_image_ids(&key), Some(expected.clone()));
        let sequence = store.sequence(&key).unwrap();
        assert_eq!(sequence.image_ids, expected);
        let (creator, organization) = declared.map_or_else(
            || (members[0].creator, members[0].organization),
            |declared| (declared.creator, declared.organization),
        );
        assert_eq!(
            (sequence.creator, sequence.organization),
            (creator, organization)
        );
    }
    assert_eq!(store.kind_of(EntityId(0)), None);
}

#[test]
fn duplicate_ids_are_rejected_across_kinds() {
    let data = dataset(7, 10);
    let mut store = Store::in_memory();
    insert_all(&mut store, &data);
    let generation = store.generation();
    let mut clash = data.map_features[0].clone();
    clash.id = streetlevel_model::MapFeatureId(data.images[0].id.0);
    let error = store.insert_map_features(&[clash]).unwrap_err();
    assert!(
        matches!(error, streetlevel_store::StoreError::DuplicateId { .. }),
        "{error}"
    );
    let error = store.insert_images(&data.images[..1]).unwrap_err();
    assert!(
        matches!(error, streetlevel_store::StoreError::DuplicateId { .. }),
        "{error}"
    );
    assert_eq!(store.generation(), generation);
    assert_eq!(store.image_count(), data.images.len());
}

#[test]
fn invalid_geometry_is_rejected() {
    let mut rng = rng(1);
    let mut ids = Ids::new();
    let base = common::base(&mut rng, &mut ids);
    let mut image = random_image(&mut rng, &mut ids, &base);
    image.geometry.lat = 91.0;
    let mut store = Store::in_memory();
    assert!(store.insert_images(&[image]).is_err());
    assert_eq!(store.image_count(), 0);
}

#[test]
fn makes_are_matched_ignoring_case() {
    let data = dataset(3, 60);
    let mut store = Store::in_memory();
    insert_all(&mut store, &data);
    let filter = ImageFilter {
        make: Some(String::from("APPLE")),
        ..ImageFilter::default()
    };
    let found = store.search_images(&filter, 2000, None).items;
    let expected = data
        .images
        .iter()
        .filter(|image| {
            image
                .make
                .as_deref()
                .is_some_and(|make| make.eq_ignore_ascii_case(MAKES[0]))
        })
        .count();
    assert_eq!(found.len(), expected);
    assert!(expected > 0);
}

#[test]
fn boxes_with_very_many_candidates_page_like_small_ones() {
    // More candidates than the R-tree path takes (10,000), so searches fall back to the
    // ordered scan.
    let mut rng = rng(11);
    let mut ids = Ids::new();
    let mut data = common::base(&mut rng, &mut ids);
    data.images = (0..20_000)
        .map(|_| random_image(&mut rng, &mut ids, &data))
        .collect();
    data.detections = (0..20_000)
        .map(|_| common::random_detection(&mut rng, &mut ids, &data.images, &[]))
        .collect();
    let mut store = Store::in_memory();
    insert_all(&mut store, &data);
    let everything = BoundingBox::new(13.0, 55.0, 14.0, 56.0).unwrap();
    let filters = [
        ImageFilter {
            bbox: Some(everything),
            ..ImageFilter::default()
        },
        ImageFilter {
            bbox: Some(everything),
            is_pano: Some(true),
            make: Some(String::from("sony")),
            ..ImageFilter::default()
        },
        ImageFilter {
            bbox: Some(everything),
            creator_username: Some(String::from("user1")),
            organization_id: Some(data.organizations[0].id),
            ..ImageFilter::default()
        },
    ];
    for filter in &filters {
        let expected = brute_images(&data, filter);
        let paged = collect_pages(
            2000,
            |after| store.search_images(filter, 2000, after),
            |image| image.id.0,
        );
        assert_eq!(paged.len(), expected.len());
        assert!(paged == expected, "{filter:?}");
    }
    let filter = DetectionFilter {
        bbox: Some(everything),
        values: Some(vec![String::from("regulatory--*")]),
        ..DetectionFilter::default()
    };
    let expected = brute_detections_indexed(&data, &filter);
    let paged: Vec<Detection> = collect_pages(
        2000,
        |after| store.search_detections(&filter, 2000, after),
        |detection| detection.id.0,
    )
    .into_iter()
    .cloned()
    .collect();
    assert!(paged == expected);
}

/// `brute_detections` with a hash map of images, for large data sets.
fn brute_detections_indexed(data: &Dataset, filter: &DetectionFilter) -> Vec<Detection> {
    let images: std::collections::HashMap<ImageId, &Image> =
        data.images.iter().map(|image| (image.id, image)).collect();
    let mut found: Vec<Detection> = data
        .detections
        .iter()
        .filter(|detection| {
            let image = images.get(&detection.image);
            any_pattern(filter.values.as_ref(), &detection.value)
                && image.is_some_and(|image| {
                    in_box(filter.bbox, image.geometry)
                        && in_range(&filter.captured_at, image.captured_at)
                })
        })
        .cloned()
        .collect();
    found.sort_by_key(|detection| detection.id);
    found
}

#[test]
fn the_store_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Store>();
    shareable::<std::sync::Arc<std::sync::RwLock<Store>>>();
}

#[test]
fn wildcard_examples() {
    let cases = [
        ("*", "", true),
        ("*", "regulatory--stop--g1", true),
        ("**", "", true),
        ("regulatory--*", "regulatory--stop--g1", true),
        ("regulatory--*", "regulatory--", true),
        ("regulatory--*", "regulatory-", false),
        ("regulatory--*", "warning--regulatory--", false),
        ("*--g1", "regulatory--stop--g1", true),
        ("*--g1", "--g1", true),
        ("*--g1", "regulatory--stop--g12", false),
        ("a*b*c", "abc", true),
        ("a*b*c", "aXbYbZc", true),
        ("a*b*c", "acb", false),
        ("a*b*c", "aXbYc!", false),
        ("a*b*c", "Abc", false),
        ("object--street-light", "object--street-light", true),
        ("object--street-light", "object--street-lights", false),
        ("object--street-light", "Object--street-light", false),
        ("", "", true),
        ("", "a", false),
        ("a", "", false),
    ];
    for (pattern, value, expected) in cases {
        assert_eq!(
            wildcard_match(pattern, value),
            expected,
            "store: {pattern:?} {value:?}"
        );
        assert_eq!(
            glob(pattern.as_bytes(), value.as_bytes()),
            expected,
            "reference: {pattern:?} {value:?}"
        );
    }

    // The same patterns through the searches, over one map feature and one detection per
    // value (IDs in the values' order, so results come in that order).
    let mut values: Vec<&str> = cases.iter().map(|(_, value, _)| *value).collect();
    values.sort_unstable();
    values.dedup();
    let data = dataset(17, 3);
    let features: Vec<MapFeature> = values
        .iter()
        .enumerate()
        .map(|(number, value)| MapFeature {
            id: MapFeatureId(50_000_000 + number as u64),
            object_value: (*value).to_owned(),
            ..data.map_features[0].clone()
        })
        .collect();
    let detections: Vec<Detection> = values
        .iter()
        .enumerate()
        .map(|(number, value)| Detection {
            id: DetectionId(60_000_000 + number as u64),
            value: (*value).to_owned(),
            ..data.detections[0].clone()
        })
        .collect();
    let mut store = Store::in_memory();
    store.insert_map_features(&features).unwrap();
    store.insert_detections(&detections).unwrap();
    for (pattern, _, _) in cases {
        let expected: Vec<&str> = values
            .iter()
            .copied()
            .filter(|value| glob(pattern.as_bytes(), value.as_bytes()))
            .collect();
        let filter = MapFeatureFilter {
            object_values: Some(vec![pattern.to_owned()]),
            ..MapFeatureFilter::default()
        };
        let found: Vec<&str> = store
            .search_map_features(&filter, 100, None)
            .items
            .iter()
            .map(|feature| feature.object_value.as_str())
            .collect();
        assert_eq!(found, expected, "map features, {pattern:?}");
        let filter = DetectionFilter {
            values: Some(vec![pattern.to_owned()]),
            ..DetectionFilter::default()
        };
        let found: Vec<&str> = store
            .search_detections(&filter, 100, None)
            .items
            .iter()
            .map(|detection| detection.value.as_str())
            .collect();
        assert_eq!(found, expected, "detections, {pattern:?}");
    }
}
