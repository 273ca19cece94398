//! Sequence cutting, one rule at a time.

#![allow(clippy::unwrap_used, clippy::panic, clippy::float_cmp)] // Helpers of tests fail loudly; values are exact.

use num_traits::ToPrimitive as _;
use streetlevel_ingest::sequence::{Cut, CutRules, DropReason, cut};
use streetlevel_ingest::{Metadata, TimeSource};
use streetlevel_model::{CameraType, Timestamp};

/// One metre of latitude, in degrees (on the sphere the haversine distance uses).
const METER: f64 = 1.0 / 111_195.0;

/// An image `seconds` after the start, `meters` north of (48, 11), facing `compass`.
fn image(seconds: f64, meters: f64, compass: Option<f64>) -> Metadata {
    Metadata {
        latitude: 48.0 + meters * METER,
        longitude: 11.0,
        altitude: None,
        compass_angle: compass,
        captured_at: Timestamp(1_600_000_000_000 + (seconds * 1000.0).round().to_i64().unwrap()),
        time_source: TimeSource::Gps,
        make: Some(String::from("GoPro")),
        model: Some(String::from("MAX")),
        camera_uuid: None,
        orientation: 1,
        width: 4000,
        height: 3000,
        is_pano: false,
        camera_type: CameraType::Perspective,
        ignored: Vec::new(),
    }
}

/// Images every 2 s, 5 m apart, facing north.
fn walk(n: u32) -> Vec<Metadata> {
    (0..n)
        .map(|i| image(2.0 * f64::from(i), 5.0 * f64::from(i), Some(0.0)))
        .collect()
}

fn check(
    items: &[Metadata],
    rules: &CutRules,
    sequences: &[&[usize]],
    dropped: &[(usize, DropReason)],
) {
    let result = cut(items, rules);
    assert_eq!(
        result,
        Cut {
            sequences: sequences.iter().map(|sequence| sequence.to_vec()).collect(),
            dropped: dropped.to_vec(),
        }
    );
    let mut seen: Vec<usize> = result
        .sequences
        .iter()
        .flatten()
        .copied()
        .chain(result.dropped.iter().map(|(index, _)| *index))
        .collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..items.len()).collect::<Vec<_>>(),
        "every item once"
    );
}

#[test]
fn a_steady_walk_is_one_sequence() {
    check(&walk(5), &CutRules::default(), &[&[0, 1, 2, 3, 4]], &[]);
    check(&[], &CutRules::default(), &[], &[]);
}

#[test]
fn cuts_on_a_time_gap_over_the_cutoff() {
    let mut items = walk(4);
    items[2] = image(2.0 + 60.0, 10.0, Some(0.0)); // 60 s after the previous: kept
    items[3] = image(62.0 + 60.5, 15.0, Some(0.0)); // 60.5 s after: cut
    check(&items, &CutRules::default(), &[&[0, 1, 2], &[3]], &[]);
}

#[test]
fn cuts_on_a_jump_over_the_cutoff_distance() {
    let mut items = walk(4);
    items[2] = image(4.0, 5.0 + 99.0, Some(0.0));
    items[3] = image(6.0, 104.0 + 102.0, Some(0.0));
    check(&items, &CutRules::default(), &[&[0, 1, 2], &[3]], &[]);
}

#[test]
fn drops_duplicates_of_the_previous_kept_image() {
    let items = vec![
        image(0.0, 0.0, Some(10.0)),
        image(1.0, 0.05, Some(14.0)),  // 5 cm, 4 degrees: duplicate of 0
        image(2.0, 0.09, Some(20.0)),  // 9 cm from 0 but 10 degrees: kept
        image(3.0, 0.12, None),        // 3 cm from 2, no compass: duplicate of 2
        image(4.0, 0.5, Some(20.0)),   // 41 cm: kept
        image(5.0, 0.55, Some(200.0)), // turned around: kept
        image(6.0, 0.56, Some(196.0)), // 1 cm, 4 degrees: duplicate of 5
        image(7.0, 0.6, Some(358.0)),  // 5 cm, 158 degrees from 5: kept
        image(8.0, 0.61, Some(2.0)),   // 4 degrees across north: duplicate of 7
    ];
    check(
        &items,
        &CutRules::default(),
        &[&[0, 2, 4, 5, 7]],
        &[
            (1, DropReason::Duplicate { of: 0 }),
            (3, DropReason::Duplicate { of: 2 }),
            (6, DropReason::Duplicate { of: 5 }),
            (8, DropReason::Duplicate { of: 7 }),
        ],
    );
}

#[test]
fn drops_positions_exactly_at_null_island() {
    let mut items = walk(4);
    items[1].latitude = 0.0;
    items[1].longitude = 0.0;
    items[2].latitude = 0.0; // only the latitude: a real place on the equator
    items[2].longitude = 0.000_001;
    check(
        &items,
        &CutRules {
            cutoff_distance_meters: 1e9,
            max_speed_kmh: f64::INFINITY,
            ..CutRules::default()
        },
        &[&[0, 2, 3]],
        &[(1, DropReason::NullIsland)],
    );
}

#[test]
fn drops_a_whole_piece_whose_average_speed_is_too_fast() {
    // 100 m every 0.5 s is 720 km/h.
    let fast: Vec<Metadata> = (0..3)
        .map(|i| image(0.5 * f64::from(i), 100.0 * f64::from(i), Some(0.0)))
        .collect();
    let rules = CutRules {
        cutoff_distance_meters: 1000.0,
        ..CutRules::default()
    };
    let result = cut(&fast, &rules);
    assert!(result.sequences.is_empty());
    assert_eq!(result.dropped.len(), 3);
    for (n, (index, reason)) in result.dropped.iter().enumerate() {
        assert_eq!(*index, n);
        let DropReason::TooFast { speed_kmh } = reason else {
            panic!("{reason:?}");
        };
        assert!((speed_kmh - 720.0).abs() < 1.0, "{speed_kmh}");
        assert_eq!(
            reason.to_string(),
            "captured too fast: average speed 720 km/h"
        );
    }

    // One glitch in a slow walk leaves the average under the limit: nothing is dropped,
    // and the glitch is cut off by distance.
    let mut items = walk(60);
    items[30] = image(60.0, 150.0 + 500.0, Some(0.0));
    let result = cut(&items, &CutRules::default());
    assert!(result.dropped.is_empty());
    assert_eq!(
        result.sequences.iter().map(Vec::len).collect::<Vec<_>>(),
        [30, 1, 29]
    );

    // All the images within one instant are not judged.
    let instant = vec![image(0.0, 0.0, None), image(0.0, 50.0, None)];
    check(&instant, &CutRules::default(), &[&[0, 1]], &[]);
}

#[test]
fn cuts_when_a_sequence_reaches_max_images() {
    let rules = CutRules {
        max_images: 3,
        ..CutRules::default()
    };
    check(&walk(7), &rules, &[&[0, 1, 2], &[3, 4, 5], &[6]], &[]);
    // Duplicates do not count towards the limit.
    let mut items = walk(4);
    items.insert(1, image(1.0, 0.0, Some(0.0)));
    check(
        &items,
        &rules,
        &[&[0, 2, 3], &[4]],
        &[(1, DropReason::Duplicate { of: 0 })],
    );
}

#[test]
fn two_cameras_interleaved_in_time_become_two_sequences_in_capture_order() {
    let mut items = Vec::new();
    for i in 0..4 {
        let mut front = image(2.0 * f64::from(i) + 1.0, 5.0 * f64::from(i), Some(0.0));
        front.camera_uuid = Some(String::from("front"));
        let mut back = image(2.0 * f64::from(i), 5.0 * f64::from(i), Some(180.0));
        back.camera_uuid = Some(String::from("back"));
        items.push(front);
        items.push(back);
    }
    // The back camera's first image is the earliest.
    check(
        &items,
        &CutRules::default(),
        &[&[1, 3, 5, 7], &[0, 2, 4, 6]],
        &[],
    );

    // Same camera UUID, different size or model: other cameras too.
    let mut items = walk(4);
    items[1].width = 3000;
    items[3].model = None;
    check(&items, &CutRules::default(), &[&[0, 2], &[1], &[3]], &[]);
}

#[test]
fn unsorted_input_is_sorted_by_capture_time_then_index() {
    let walk = walk(4);
    let items = vec![
        walk[2].clone(),
        walk[0].clone(),
        walk[3].clone(),
        walk[1].clone(),
    ];
    check(&items, &CutRules::default(), &[&[1, 3, 0, 2]], &[]);
    // Equal times keep index order.
    let mut same_time = vec![image(0.0, 0.0, Some(0.0)), image(0.0, 5.0, Some(0.0))];
    same_time.push(image(0.0, 2.0, Some(0.0)));
    check(&same_time, &CutRules::default(), &[&[0, 1, 2]], &[]);
}

#[test]
fn drop_reasons_explain_themselves() {
    assert_eq!(
        DropReason::NullIsland.to_string(),
        "gps position is null island (0, 0)"
    );
    assert_eq!(
        DropReason::Duplicate { of: 3 }.to_string(),
        "duplicate of image 3: same place and direction"
    );
}
