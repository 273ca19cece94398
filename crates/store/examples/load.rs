//! Opens a data directory (as `streetlevel fixtures` writes it) and prints what it holds and
//! the wall and CPU time `Store::open` took, for docs/PERFORMANCE.md's load figure:
//!
//! ```sh
//! cargo run --release -p streetlevel-store --example load -- DATA_DIR
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use streetlevel_store::Store;

/// CPU time this process has used (all threads), from `/proc/self/stat` (Linux), or zero.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|text| {
            // Fields after the command name (which may hold spaces) start at index 2.
            let rest = text.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: u64 = fields.get(11)?.parse().ok()?;
            let system: u64 = fields.get(12)?.parse().ok()?;
            Some(user + system)
        })
        .unwrap_or(0);
    // The kernel reports in clock ticks of 1/100 s on Linux.
    Duration::from_millis(ticks * 10)
}

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
