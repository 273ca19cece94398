//! The local media store: each key of the layout is a file under the data directory, written
//! so that a crash never leaves half a file under a key.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use streetlevel_model::ImageId;

use crate::layout::{self, ImageObject, Key};

/// Media kept as files under a data directory.
#[derive(Debug, Clone)]
pub struct LocalMedia {
    root: PathBuf,
}

/// A stored object opened for reading.
#[derive(Debug)]
pub struct Opened {
    /// The open file.
    pub file: std::fs::File,
    /// Its length in bytes.
    pub length: u64,
    /// A strong `ETag` (with quotes) of this version: its inode, length and modification time,
    /// which every write (a new file renamed over the key) changes.
    pub etag: String,
}

/// What removing an image's objects did.
#[derive(Debug, Default)]
pub struct Removal {
    /// How many files were removed.
    pub removed: usize,
    /// Files that exist but could not be removed, with the reason.
    pub failures: Vec<(PathBuf, std::io::Error)>,
}

impl LocalMedia {
    /// The media of the data directory `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        LocalMedia {
            root: data_dir.to_path_buf(),
        }
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `key`.
    pub fn path(&self, key: &Key) -> PathBuf {
        key.path(&self.root)
    }

    /// The bytes of `key`, `None` when there is no such object.
    pub fn read(&self, key: &Key) -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.path(key)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// `key` opened for reading, `None` when there is no such object.
    pub fn open(&self, key: &Key) -> std::io::Result<Option<Opened>> {
        let file = match std::fs::File::open(self.path(key)) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Ok(None);
        }
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
        #[cfg(not(unix))]
        let inode = 0;
        let modified = metadata
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_nanos());
        Ok(Some(Opened {
            length: metadata.len(),
            etag: format!("\"{inode:x}-{:x}-{modified:x}\"", metadata.len()),
            file,
        }))
    }

    /// The first of `keys` that exists, opened for reading.
    pub fn open_first(&self, keys: &[Key]) -> std::io::Result<Option<Opened>> {
        for key in keys {
            if let Some(opened) = self.open(key)? {
                return Ok(Some(opened));
            }
        }
        Ok(None)
    }

    /// The bytes of the first of `keys` that exists.
    pub fn read_first(&self, keys: &[Key]) -> std::io::Result<Option<Vec<u8>>> {
        for key in keys {
            if let Some(bytes) = self.read(key)? {
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    }

    /// The file of the first of `keys` that exists.
    pub fn find(&self, keys: &[Key]) -> Option<PathBuf> {
        keys.iter()
            .map(|key| self.path(key))
            .find(|path| path.is_file())
    }

    /// Writes `bytes` as `key`, atomically (see [`write_atomically`]).
    pub fn write(&self, key: &Key, bytes: &[u8]) -> std::io::Result<()> {
        write_atomically(&self.path(key), bytes)
    }

    /// Removes `key`; `false` when there was no such object.
    pub fn remove(&self, key: &Key) -> std::io::Result<bool> {
        match std::fs::remove_file(self.path(key)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// The keys under `prefix`, in name order (one level: the layout's prefixes hold files).
    pub fn list(&self, prefix: &Key) -> std::io::Result<Vec<Key>> {
        let entries = match std::fs::read_dir(self.path(prefix)) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut keys = Vec::new();
        for entry in entries {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                keys.push(Key::from_layout(format!("{prefix}{name}")));
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// Every key under `prefix`, at any depth, in name order; the temporary files of writes
    /// under way (and other hidden or temporary names) are not objects and are left out.
    pub fn list_all(&self, prefix: &Key) -> std::io::Result<Vec<Key>> {
        let mut keys = Vec::new();
        let mut folders = vec![prefix.as_str().trim_end_matches('/').to_owned()];
        while let Some(folder) = folders.pop() {
            let entries = match std::fs::read_dir(self.root.join(&folder)) {
                Ok(entries) => entries,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    folders.push(format!("{folder}/{name}"));
                } else if kind.is_file() && !name.starts_with('.') && !is_temporary(&name) {
                    keys.push(Key::from_layout(format!("{folder}/{name}")));
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// Removes every object of `image` (whose entity is `width` x `height`): everything under
    /// its prefix, whatever made it, and every place an older layout kept its objects.
    pub fn remove_image(&self, image: ImageId, width: u32, height: u32) -> Removal {
        let mut removal = Removal::default();
        let prefix = layout::image_prefix(image);
        match self.list(&prefix) {
            Ok(keys) => {
                for key in keys {
                    self.remove_counted(&key, &mut removal);
                }
            }
            Err(error) => removal.failures.push((self.path(&prefix), error)),
        }
        // Empty now, unless a request is writing into it this moment (it removes its own
        // file once it sees the image gone).
        let _ = std::fs::remove_dir(self.path(&prefix));
        for object in layout::image_objects(width, height) {
            for key in layout::legacy_keys(image, object) {
                self.remove_counted(&key, &mut removal);
            }
        }
        removal
    }

    /// Removes every object made from `image`'s original (thumbnails and pyramid tiles, in
    /// this layout and the older one); returns how many there were.
    pub fn remove_derived(&self, image: ImageId, width: u32, height: u32) -> Removal {
        let mut removal = Removal::default();
        for object in layout::derived_objects(width, height) {
            self.remove_counted(&object.key(image), &mut removal);
            for key in layout::legacy_keys(image, object) {
                self.remove_counted(&key, &mut removal);
            }
        }
        removal
    }

    fn remove_counted(&self, key: &Key, removal: &mut Removal) {
        match self.remove(key) {
            Ok(true) => removal.removed += 1,
            Ok(false) => {}
            Err(error) => removal.failures.push((self.path(key), error)),
        }
    }

    /// The file of `object` of `image` to read: its key's, else where an older layout kept
    /// it; `None` when it has none.
    pub fn find_image_object(&self, image: ImageId, object: ImageObject) -> Option<PathBuf> {
        self.find(&layout::read_keys(image, object))
    }
}

/// Bytes `start..start + count` of `file`, read 64 KiB at a time on tokio's blocking pool, one
/// chunk ahead of the consumer at most; a file shorter than promised ends the stream with an
/// error, never with made-up bytes.
pub(crate) fn file_stream(
    file: std::fs::File,
    start: u64,
    count: u64,
) -> futures_util::stream::BoxStream<'static, std::io::Result<bytes::Bytes>> {
    use futures_util::StreamExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
    const CHUNK_BYTES: usize = 64 * 1024;
    let file = tokio::fs::File::from_std(file);
    futures_util::stream::unfold(
        (file, count, start > 0),
        move |(mut file, remaining, mut seek)| async move {
            if remaining == 0 {
                return None;
            }
            if seek {
                if let Err(error) = file.seek(std::io::SeekFrom::Start(start)).await {
                    return Some((Err(error), (file, 0, false)));
                }
                seek = false;
            }
            let wanted = usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(CHUNK_BYTES);
            let mut buffer = vec![0; wanted];
            match file.read(&mut buffer).await {
                Ok(0) => Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the stored object ended early",
                    )),
                    (file, 0, seek),
                )),
                Ok(read) => {
                    buffer.truncate(read);
                    Some((
                        Ok(bytes::Bytes::from(buffer)),
                        (file, remaining - read as u64, seek),
                    ))
                }
                Err(error) => Some((Err(error), (file, 0, seek))),
            }
        },
    )
    .boxed()
}

/// Whether a file's `name` is one [`write_atomically`] writes before renaming it into place.
fn is_temporary(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, extension)| {
        extension
            .strip_prefix("tmp")
            .is_some_and(|rest| rest.contains('-'))
    })
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
    fn listing_everything_finds_objects_at_any_depth_but_no_temporary_file() {
        let dir = temp_dir("list-all");
        let media = LocalMedia::new(&dir);
        let keys = [
            ImageObject::Original.key(ImageId(1)),
            ImageObject::Thumbnail(256).key(ImageId(1)),
            ImageObject::Tile { z: 0, x: 0, y: 0 }.key(ImageId(2)),
            crate::layout::cluster_key(streetlevel_model::MediaId(3)),
        ];
        for key in &keys {
            media.write(key, b"bytes").unwrap();
        }
        let folder = dir.join("media/img/1");
        std::fs::write(folder.join("256.tmp123-4"), b"half").unwrap();
        std::fs::write(folder.join(".hidden"), b"x").unwrap();
        let mut expected: Vec<Key> = keys.to_vec();
        expected.sort();
        assert_eq!(
            media
                .list_all(&Key::from_layout(String::from("media/")))
                .unwrap(),
            expected
        );
        assert!(
            media
                .list_all(&Key::from_layout(String::from("nothing/")))
                .unwrap()
                .is_empty()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("streetlevel-media-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn concurrent_writers_of_one_path_all_succeed_with_complete_bytes() {
        let dir = temp_dir("atomic");
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

    #[test]
    fn removing_an_image_removes_its_prefix_and_its_older_places_and_nothing_else() {
        let dir = temp_dir("remove");
        let media = LocalMedia::new(&dir);
        let (image, other) = (ImageId(7), ImageId(70));
        let mut kept = Vec::new();
        for object in [
            ImageObject::Original,
            ImageObject::Thumbnail(256),
            ImageObject::Tile { z: 11, x: 1, y: 0 },
            ImageObject::Unblurred,
        ] {
            media.write(&object.key(image), b"x").unwrap();
            media.write(&object.key(other), b"y").unwrap();
            kept.push(object.key(other));
        }
        // Something a request made that no list names, and the older layout's files.
        media
            .write(&Key::from_layout("media/img/7/made-later.jpg".into()), b"z")
            .unwrap();
        for key in layout::legacy_keys(image, ImageObject::Original)
            .into_iter()
            .chain(layout::legacy_keys(image, ImageObject::Unblurred))
            .chain(layout::legacy_keys(
                image,
                ImageObject::Tile { z: 0, x: 0, y: 0 },
            ))
        {
            media.write(&key, b"old").unwrap();
        }
        let removal = media.remove_image(image, 1024, 768);
        assert!(removal.failures.is_empty(), "{:?}", removal.failures);
        assert_eq!(removal.removed, 5 + 3 + 1 + 1);
        assert!(!media.path(&layout::image_prefix(image)).exists());
        for key in kept {
            assert_eq!(media.read(&key).unwrap().as_deref(), Some(&b"y"[..]));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
