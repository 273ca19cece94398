//! The data directory's lock: one server (or restore) per directory at a time.

use std::path::Path;

use anyhow::Context;

/// The data directory's lock file: held (flock) for as long as a server serves it or a
/// restore replaces its database.
const LOCK_FILE: &str = "streetlevel.lock";

/// Takes the data directory for this process. The lock is the kernel's, so it goes with the
/// process, however it ends. When another process holds it, the error says so and adds
/// `what_to_do`.
pub fn lock_data_dir(data: &Path, what_to_do: &str) -> anyhow::Result<std::fs::File> {
    let path = data.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
        |_| {
            anyhow::anyhow!(
                "another streetlevel server is serving {} (it holds {}){what_to_do}",
                data.display(),
                path.display()
            )
        },
    )?;
    Ok(file)
}
