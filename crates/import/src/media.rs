//! Where imported media go in the data directory's `media/` folder, and writing them so
//! that a crash never leaves half a file under a final name.
//!
//! The server reads originals from `images/<id>.jpg` first and serves thumbnails from
//! `cache/<id>_<width>.jpg` before making one, so imported images need no rendering.

use std::io::Write;
use std::path::{Path, PathBuf};

use streetlevel_model::ImageId;

/// Folder of imported originals under `media/`.
pub const ORIGINALS_DIR: &str = "images";
/// Folder of thumbnails under `media/` (the server's thumbnail cache).
pub const THUMBNAIL_CACHE_DIR: &str = "cache";

/// `media/images/<id>.jpg`.
pub fn original_path(media_dir: &Path, image: ImageId) -> PathBuf {
    media_dir.join(ORIGINALS_DIR).join(format!("{image}.jpg"))
}

/// `media/cache/<id>_<width>.jpg`, where `width` is 256, 1024 or 2048.
pub fn thumbnail_path(media_dir: &Path, image: ImageId, width: u32) -> PathBuf {
    media_dir
        .join(THUMBNAIL_CACHE_DIR)
        .join(format!("{image}_{width}.jpg"))
}

/// Writes `bytes` to `path` through a temporary file in the same folder, synced before the
/// rename, so the file is either absent or complete.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    std::fs::rename(&temporary, path)
}
