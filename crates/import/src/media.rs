//! The process's media store: where every object of the media layout is written and read
//! (the data directory's files by default, or an S3-compatible object store that `serve`,
//! `import` and the commands that write or erase media are given with `--media-store`).
//!
//! Set once at start, as the CPU pool and the picture memory are, so that the import
//! pipeline, the upload jobs and erasure, which run deep inside other crates' calls, all
//! write and erase where the server reads.

use std::path::Path;
use std::sync::OnceLock;

use streetlevel_media::MediaStore;

static MEDIA_STORE: OnceLock<MediaStore> = OnceLock::new();

/// Sets the process's media store; an error (with the store not taken) once one is set.
pub fn set_media_store(store: MediaStore) -> Result<(), MediaStore> {
    MEDIA_STORE.set(store)
}

/// The process's media store: the one set, else the files of the data directory `data_dir`.
pub fn media_store(data_dir: &Path) -> MediaStore {
    MEDIA_STORE
        .get()
        .cloned()
        .unwrap_or_else(|| MediaStore::local(data_dir))
}
