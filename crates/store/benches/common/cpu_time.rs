//! The CPU time of this process, for load figures that a busy machine does not distort
//! (shared by the store bench and the `load` example).

use std::time::Duration;

/// CPU time this process has used (all threads), from `/proc/self/stat` (Linux), or zero.
pub fn cpu_time() -> Duration {
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
