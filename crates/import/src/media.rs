//! Where imported media go in the data directory's `media/` folder, and writing them so
//! that a crash never leaves half a file under a final name.
//!
//! The server reads originals from `images/<id>.jpg` first and serves thumbnails from
//! `cache/<id>_<width>.jpg` before making one, so imported images need no rendering.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
/// rename, so the file is either absent or complete. Concurrent writers of one path (two
/// requests making the same thumbnail) each write a temporary file of their own, named by
/// process and call, and the last rename wins with complete bytes.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    let temporary = path.with_extension(format!("tmp{}-{write}", std::process::id()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_of_one_path_all_succeed_with_complete_bytes() {
        let dir = std::env::temp_dir().join(format!("streetlevel-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("cache").join("7_256.jpg");
        let writers: Vec<_> = (0..8u8)
            .map(|writer| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        write_atomically(&path, &[writer; 4096])?;
                    }
                    Ok::<(), std::io::Error>(())
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap().unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert!(bytes.iter().all(|byte| *byte == bytes[0]));
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("7_256.jpg")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
