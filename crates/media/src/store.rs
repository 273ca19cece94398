//! Where the media layout's objects are kept: as files under the data directory (the
//! default, for one machine) or on an S3-compatible object store (`s3://bucket/prefix`, for
//! replicas on separate machines), behind one type that every reader and writer holds.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::layout::{self, ImageObject, Key};
use crate::local::{LocalMedia, Opened, Removal};
use crate::object::{ObjectMedia, OpenError};

/// The media store of a process: one per process, cloned into everything that reads or
/// writes media.
#[derive(Debug, Clone)]
pub enum MediaStore {
    /// Files under the data directory.
    Local(LocalMedia),
    /// An S3-compatible object store.
    Object(ObjectMedia),
}

/// A stored object opened for reading: its length and version, and where its bytes come
/// from.
#[derive(Debug)]
pub struct Stored {
    /// Its length in bytes.
    pub length: u64,
    /// A strong `ETag` (with quotes) of this version.
    pub etag: String,
    source: Source,
}

#[derive(Debug)]
enum Source {
    File(std::fs::File),
    Object(ObjectMedia, Key),
}

impl Stored {
    /// A presigned `GET` URL of this object on its store, the same within each time bucket
    /// of `bucket_seconds`; `None` for a file, or a store that cannot presign.
    pub fn presigned_url(&self, now_unix: u64, bucket_seconds: u64) -> Option<String> {
        match &self.source {
            Source::File(_) => None,
            Source::Object(media, key) => media.presigned_url(key, now_unix, bucket_seconds),
        }
    }

    /// Bytes `start..start + count`, read as the consumer takes them.
    pub fn stream(self, start: u64, count: u64) -> BoxStream<'static, std::io::Result<Bytes>> {
        match self.source {
            Source::File(file) => crate::local::file_stream(file, start, count),
            Source::Object(media, key) => media.stream(&key, start, count),
        }
    }
}

impl MediaStore {
    /// The data directory's files.
    pub fn local(data_dir: &Path) -> Self {
        MediaStore::Local(LocalMedia::new(data_dir))
    }

    /// The store `url` names (`s3://bucket/prefix`; the endpoint, region and credentials from
    /// the `AWS_*` environment variables and `settings`), or the data directory's files when
    /// `url` is `None`.
    pub fn connect(
        data_dir: &Path,
        url: Option<&str>,
        settings: &[(String, String)],
    ) -> Result<Self, OpenError> {
        match url {
            None => Ok(MediaStore::local(data_dir)),
            Some(url) => ObjectMedia::open(url, settings).map(MediaStore::Object),
        }
    }

    /// What it is, for logs and messages: the data directory's path or the store's URL.
    pub fn describe(&self) -> String {
        match self {
            MediaStore::Local(local) => local.root().display().to_string(),
            MediaStore::Object(object) => object.url().to_owned(),
        }
    }

    /// The local files, when the media are files.
    pub fn as_local(&self) -> Option<&LocalMedia> {
        match self {
            MediaStore::Local(local) => Some(local),
            MediaStore::Object(_) => None,
        }
    }

    /// The file of `key` when the media are files.
    pub fn local_path(&self, key: &Key) -> Option<PathBuf> {
        self.as_local().map(|local| local.path(key))
    }

    /// The bytes of `key`, `None` when there is no such object.
    pub fn read(&self, key: &Key) -> std::io::Result<Option<Vec<u8>>> {
        match self {
            MediaStore::Local(local) => local.read(key),
            MediaStore::Object(object) => object.read(key),
        }
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

    /// Writes `bytes` as `key`: whole or not at all (a file renamed into place, or one object
    /// put, in parts when large).
    pub fn write(&self, key: &Key, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            MediaStore::Local(local) => local.write(key, bytes),
            MediaStore::Object(object) => object.write(key, bytes),
        }
    }

    /// Removes `key` (nothing when there is none); `true` when there was one (always for an
    /// object store, which does not say).
    pub fn remove(&self, key: &Key) -> std::io::Result<bool> {
        match self {
            MediaStore::Local(local) => local.remove(key),
            MediaStore::Object(object) => object.remove(key).map(|()| true),
        }
    }

    /// The keys under `prefix`, in order.
    pub fn list(&self, prefix: &Key) -> std::io::Result<Vec<Key>> {
        match self {
            MediaStore::Local(local) => local.list(prefix),
            MediaStore::Object(object) => object.list(prefix),
        }
    }

    /// Every key under `prefix`, at any depth, in order.
    pub fn list_all(&self, prefix: &Key) -> std::io::Result<Vec<Key>> {
        match self {
            MediaStore::Local(local) => local.list_all(prefix),
            MediaStore::Object(object) => object.list(prefix),
        }
    }

    /// `key` opened for reading, `None` when there is none.
    pub fn open(&self, key: &Key) -> std::io::Result<Option<Stored>> {
        match self {
            MediaStore::Local(local) => Ok(local.open(key)?.map(|opened: Opened| Stored {
                length: opened.length,
                etag: opened.etag,
                source: Source::File(opened.file),
            })),
            MediaStore::Object(object) => Ok(object.head(key)?.map(|(length, etag)| Stored {
                length,
                etag: quoted(&etag),
                source: Source::Object(object.clone(), key.clone()),
            })),
        }
    }

    /// The first of `keys` that exists, opened for reading.
    pub fn open_first(&self, keys: &[Key]) -> std::io::Result<Option<Stored>> {
        for key in keys {
            if let Some(stored) = self.open(key)? {
                return Ok(Some(stored));
            }
        }
        Ok(None)
    }

    /// The first of `keys` that exists.
    pub fn find(&self, keys: &[Key]) -> std::io::Result<Option<Key>> {
        for key in keys {
            if self.version(key)?.is_some() {
                return Ok(Some(key.clone()));
            }
        }
        Ok(None)
    }

    /// What identifies the stored version of `key` (every write changes it), `None` when
    /// there is none.
    pub fn version(&self, key: &Key) -> std::io::Result<Option<String>> {
        match self {
            MediaStore::Local(local) => Ok(local.open(key)?.map(|opened| opened.etag)),
            MediaStore::Object(object) => Ok(object.head(key)?.map(|(_, etag)| etag)),
        }
    }

    /// The key of `object` of `image` to read: its own, else where an older layout kept it
    /// (files only); `None` when there is none.
    pub fn find_image_object(
        &self,
        image: streetlevel_model::ImageId,
        object: ImageObject,
    ) -> std::io::Result<Option<Key>> {
        match self {
            MediaStore::Local(_) => self.find(&layout::read_keys(image, object)),
            MediaStore::Object(_) => self.find(&[object.key(image)]),
        }
    }

    /// The bytes of `object` of `image`: at its key, else (files only) where an older layout
    /// kept it.
    pub fn read_image_object(
        &self,
        image: streetlevel_model::ImageId,
        object: ImageObject,
    ) -> std::io::Result<Option<Vec<u8>>> {
        match self {
            MediaStore::Local(local) => local.read_first(&layout::read_keys(image, object)),
            MediaStore::Object(_) => self.read(&object.key(image)),
        }
    }

    /// `object` of `image` opened for reading: at its key, else (files only) where an older
    /// layout kept it.
    pub fn open_image_object(
        &self,
        image: streetlevel_model::ImageId,
        object: ImageObject,
    ) -> std::io::Result<Option<Stored>> {
        match self {
            MediaStore::Local(_) => self.open_first(&layout::read_keys(image, object)),
            MediaStore::Object(_) => self.open(&object.key(image)),
        }
    }

    /// Removes every object of `image` (whose entity is `width` x `height`): everything under
    /// its prefix, and on files where an older layout kept them.
    pub fn remove_image(
        &self,
        image: streetlevel_model::ImageId,
        width: u32,
        height: u32,
    ) -> Removal {
        match self {
            MediaStore::Local(local) => local.remove_image(image, width, height),
            MediaStore::Object(object) => object.remove_prefix(&layout::image_prefix(image)),
        }
    }

    /// Removes every object made from `image`'s original (thumbnails and pyramid tiles).
    pub fn remove_derived(
        &self,
        image: streetlevel_model::ImageId,
        width: u32,
        height: u32,
    ) -> Removal {
        match self {
            MediaStore::Local(local) => local.remove_derived(image, width, height),
            MediaStore::Object(object) => {
                let mut removal = Removal::default();
                let keys = match object.list(&layout::image_prefix(image)) {
                    Ok(keys) => keys,
                    Err(error) => {
                        removal.failures.push((PathBuf::from(object.url()), error));
                        return removal;
                    }
                };
                for key in keys {
                    let derived = key != ImageObject::Original.key(image)
                        && key != ImageObject::Unblurred.key(image);
                    if derived {
                        match object.remove(&key) {
                            Ok(()) => removal.removed += 1,
                            Err(error) => {
                                removal.failures.push((PathBuf::from(key.as_str()), error));
                            }
                        }
                    }
                }
                removal
            }
        }
    }
}

fn quoted(etag: &str) -> String {
    if etag.starts_with('"') {
        etag.to_owned()
    } else {
        format!("\"{etag}\"")
    }
}
