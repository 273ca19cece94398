//! What the store's benchmarks share: the synthetic data set around Lund (55.70 N, 13.19 E),
//! sequences of 100 images walking 3 m apart from random starts, and the size switches.

#![allow(dead_code)]

pub mod cpu_time;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streetlevel_model::{Image, Point};
use streetlevel_store::Store;

pub const CENTRE: (f64, f64) = (13.19, 55.70);
/// Half the width and height of the area the images cover, degrees (about 19 x 22 km).
pub const SPREAD: (f64, f64) = (0.15, 0.10);
pub const IMAGES_PER_SEQUENCE: u64 = 100;

/// Whether this is a `cargo bench` run (under `cargo test` the sizes shrink).
pub fn benchmarking() -> bool {
    std::env::args().any(|argument| argument == "--bench")
}

pub fn scale(count: usize) -> usize {
    if benchmarking() { count } else { count / 1000 }
}

/// Whether the size named `name` ("1M", "10M", ...) is asked for: whether
/// `STREETLEVEL_STORE_BENCH_SIZES` lists it, else `by_default`.
pub fn wanted(name: &str, by_default: bool) -> bool {
    std::env::var("STREETLEVEL_STORE_BENCH_SIZES").map_or(by_default, |sizes| {
        sizes.split(',').any(|size| size.trim() == name)
    })
}

/// Where the walk is at image `number`.
pub struct Step<'a> {
    pub number: u64,
    pub sequence: u64,
    pub location: Point,
    /// Degrees clockwise from north.
    pub heading: f64,
    /// The walk's random source, for the fields `image` fills.
    pub rng: &'a mut StdRng,
}

/// Images `first..first + count` of the synthetic walks, each made by `image` from its step.
pub fn synthetic_images(
    first: u64,
    count: u64,
    mut image: impl FnMut(Step<'_>) -> Image,
) -> Vec<Image> {
    let mut images = Vec::with_capacity(usize::try_from(count).unwrap_or_default());
    let mut rng = StdRng::seed_from_u64(first);
    let metres_to_lat = 1.0 / 111_320.0;
    let metres_to_lon = metres_to_lat / CENTRE.1.to_radians().cos();
    let (mut lon, mut lat, mut heading) = (0.0, 0.0, 0.0_f64);
    for number in first..first + count {
        if number % IMAGES_PER_SEQUENCE == 0 || images.is_empty() {
            lon = CENTRE.0 + rng.random_range(-SPREAD.0..SPREAD.0);
            lat = CENTRE.1 + rng.random_range(-SPREAD.1..SPREAD.1);
            heading = rng.random_range(0.0..360.0);
        }
        heading += rng.random_range(-10.0..10.0);
        lon += 3.0 * heading.to_radians().sin() * metres_to_lon;
        lat += 3.0 * heading.to_radians().cos() * metres_to_lat;
        images.push(image(Step {
            number,
            sequence: number / IMAGES_PER_SEQUENCE,
            location: Point::new(lon, lat),
            heading,
            rng: &mut rng,
        }));
    }
    images
}

/// The store of the size named `name` with `count` images (scaled down under `cargo test`)
/// if that size is [`wanted`], else an empty one.
pub fn build_if_wanted(
    name: &str,
    by_default: bool,
    count: usize,
    images: impl Fn(u64, u64) -> Vec<Image>,
) -> Store {
    let count = if wanted(name, by_default) {
        scale(count)
    } else {
        0
    };
    build(count, images)
}

/// A store of `count` images of `images(first, count)`, inserted in batches of 1M.
pub fn build(count: usize, images: impl Fn(u64, u64) -> Vec<Image>) -> Store {
    let mut store = Store::in_memory();
    let chunk = 1_000_000;
    let mut first = 0;
    while first < count {
        let size = chunk.min(count - first);
        if let Err(error) = store.insert_images(&images(first as u64, size as u64)) {
            eprintln!("insert failed: {error}");
            break;
        }
        first += size;
    }
    store
}
