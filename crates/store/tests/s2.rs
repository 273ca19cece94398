//! S2 cell IDs against published values and the `s2` crate, and the cell lookup of the store.

// Helpers outside `#[test]` functions unwrap and panic too.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use proptest::prelude::*;
use rand::Rng;
use rand::rngs::StdRng;
use streetlevel_model::Image;
use streetlevel_store::{S2CellId, Store};

#[test]
fn known_cell_ids() {
    // A published leaf cell (token 88d9275d495ccc57).
    let leaf = S2CellId::from_lat_lng(26.568_629, -80.108_965);
    assert_eq!(leaf.raw(), 9_860_956_140_720_671_831);
    assert_eq!(format!("{:x}", leaf.raw()), "88d9275d495ccc57");
    // Face cells.
    assert_eq!(
        S2CellId::from_lat_lng(0.0, 0.0).parent(0).raw(),
        0x1000_0000_0000_0000
    );
    assert_eq!(
        S2CellId::from_lat_lng(0.0, 180.0).parent(0).raw(),
        0x7000_0000_0000_0000
    );
    assert_eq!(
        S2CellId::from_lat_lng(-90.0, 0.0).parent(0).raw(),
        0xb000_0000_0000_0000
    );
}

#[test]
fn levels_and_ranges() {
    let leaf = S2CellId::from_lat_lng(55.70, 13.19);
    assert_eq!(leaf.level(), 30);
    let cell = leaf.parent(17);
    assert_eq!(cell.level(), 17);
    assert!(cell.contains(leaf));
    assert_eq!(S2CellId::new(cell.raw()).unwrap(), cell);
    assert_eq!(
        cell.range_max() - cell.range_min() + 1,
        2 * 4u64.pow(13) - 1
    );
    assert_eq!(cell.parent(5), leaf.parent(5));
}

fn reference_leaf(lat: f64, lng: f64) -> u64 {
    let lat_lng = s2::latlng::LatLng::from_degrees(lat, lng);
    s2::cellid::CellID::from(&lat_lng).0
}

proptest! {
    #[test]
    fn leaves_match_the_s2_crate(lat in -90.0f64..=90.0, lng in -180.0f64..=180.0, level in 0u8..=30) {
        let ours = S2CellId::from_lat_lng(lat, lng);
        prop_assert_eq!(ours.raw(), reference_leaf(lat, lng));
        let reference_parent = s2::cellid::CellID(reference_leaf(lat, lng)).parent(u64::from(level));
        prop_assert_eq!(ours.parent(level).raw(), reference_parent.0);
    }

    #[test]
    fn every_image_is_in_exactly_one_cell_per_level(seed in any::<u64>(), n in 0usize..200, level in 0u8..=30) {
        let data = common::dataset(seed, n);
        let mut store = Store::in_memory();
        common::insert_all(&mut store, &data);
        let mut cells: Vec<S2CellId> = data
            .images
            .iter()
            .map(|image| S2CellId::from_lat_lng(image.geometry.lat, image.geometry.lon).parent(level))
            .collect();
        cells.sort();
        cells.dedup();
        let mut found: Vec<_> = cells
            .iter()
            .flat_map(|&cell| store.images_in_s2_cell(cell))
            .collect();
        found.sort_by_key(|image| image.id);
        let mut expected = data.images.clone();
        expected.sort_by_key(|image| image.id);
        prop_assert_eq!(found, expected);
    }

    #[test]
    fn each_cell_holds_what_the_s2_crate_puts_there(seed in any::<u64>(), n in 0usize..200) {
        let data = common::dataset(seed, n);
        let mut store = Store::in_memory();
        common::insert_all(&mut store, &data);
        let mut rng = common::rng(seed ^ 0x52);
        let (mut n_empty, mut n_full) = (0, 0);
        for _ in 0..40 {
            let cell = random_cell(&mut rng, &data.images);
            let level = cell.level();
            // Brute force: the reference leaf of every image, cut to the level.
            let mut expected: Vec<&Image> = data
                .images
                .iter()
                .filter(|image| {
                    let leaf = s2::cellid::CellID(reference_leaf(image.geometry.lat, image.geometry.lon));
                    leaf.parent(level) == cell
                })
                .collect();
            expected.sort_by_key(|image| image.id);
            n_empty += usize::from(expected.is_empty());
            n_full += usize::from(!expected.is_empty());
            let ours = S2CellId::new(cell.0).unwrap();
            prop_assert_eq!(u64::from(ours.level()), level);
            let found = store.images_in_s2_cell(ours);
            prop_assert_eq!(found.iter().collect::<Vec<_>>(), expected, "cell {:x} level {}", cell.0, level);
        }
        // Cells away from the images are asked too, and cells with images when there are any.
        prop_assert!(n_empty > 0);
        prop_assert!(n_full > 0 || data.images.is_empty());
    }
}

/// A cell of a random level 0–30: around an image, next to one along the curve (often
/// empty), or anywhere in the area or the world.
fn random_cell(rng: &mut StdRng, images: &[Image]) -> s2::cellid::CellID {
    let level = rng.random_range(0..=30u64);
    let (lat, lng) = match rng.random_range(0..4) {
        0 | 1 if !images.is_empty() => {
            let image = &images[rng.random_range(0..images.len())];
            (image.geometry.lat, image.geometry.lon)
        }
        2 => {
            let point = common::random_point(rng);
            (point.lat, point.lon)
        }
        _ => (
            rng.random_range(-90.0..=90.0),
            rng.random_range(-180.0..=180.0),
        ),
    };
    let cell = s2::cellid::CellID(reference_leaf(lat, lng)).parent(level);
    let neighbour = match rng.random_range(0..4) {
        0 => cell.next(),
        1 => cell.prev(),
        _ => cell,
    };
    if neighbour.is_valid() {
        neighbour
    } else {
        cell
    }
}
