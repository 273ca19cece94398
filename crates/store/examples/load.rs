//! Opens a data directory (as `streetlevel fixtures` writes it) and prints what it holds and
//! the wall and CPU time `Store::open` took, for docs/PERFORMANCE.md's load figure:
//!
//! ```sh
//! cargo run --release -p streetlevel-store --example load -- DATA_DIR
//! ```

use std::path::PathBuf;
use std::time::Instant;

use streetlevel_store::Store;

#[path = "../benches/common/cpu_time.rs"]
mod cpu_time;
use cpu_time::cpu_time;

fn main() {
    let Some(directory) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: load DATA_DIR");
        std::process::exit(2);
    };
    let cpu_before = cpu_time();
    let start = Instant::now();
    match Store::open(&directory) {
        Ok(store) => eprintln!(
            "{} images, {} sequences, {} map features, {} detections: {:?} wall, {:?} CPU",
            store.image_count(),
            store.sequence_count(),
            store.map_feature_count(),
            store.detection_count(),
            start.elapsed(),
            cpu_time().saturating_sub(cpu_before)
        ),
        Err(error) => {
            eprintln!("cannot open {}: {error}", directory.display());
            std::process::exit(1);
        }
    }
}
