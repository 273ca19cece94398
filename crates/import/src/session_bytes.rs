//! Where upload sessions' bytes are kept: in the data directory's `uploads/<user>/<key>`, one
//! file appended to (one machine), or on the process's object store (`--media-store`), where
//! every replica finds them, so that a session begun through one replica is continued and
//! finished through another and any replica's worker processes it.
//!
//! An object cannot be appended to, so on a store each request that sends bytes writes one
//! segment, `uploads/<user>/<key>/<offset>` (the media layout's
//! [`upload_segment_key`]), streamed in parts as the body arrives and complete only once the
//! request ends (a body cut short stores what arrived; a process killed mid-body stores nothing
//! of that request, and the session's offset is where its last segment ended). The session's
//! bytes are its segments from offset 0 on, each starting where the one before ended.
//! Nothing reads a whole session into memory except a picture's or a manifest's, which are
//! read whole from files too; a zip or a video is copied to a scratch file of the data
//! directory for the job (or the finish call's checks) that needs to seek in it.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use streetlevel_media::layout::{
    upload_key, upload_segment_key, upload_segment_offset, upload_segments_prefix,
};
use streetlevel_media::{MediaStore, ObjectMedia, ObjectWriter};

/// The folder of the data directory where sessions on an object store are copied for a job
/// or a check that seeks in them (removed after).
pub(crate) const SCRATCH_DIR: &str = "upload-scratch";

/// Where the sessions' bytes of a data directory are.
#[derive(Debug, Clone)]
pub(crate) enum SessionBytes {
    /// Files under the data directory.
    Files(PathBuf),
    /// Segments on an object store; the data directory holds the scratch copies.
    Objects(ObjectMedia, PathBuf),
}

/// One request's bytes being written to a session.
#[derive(Debug)]
pub(crate) enum SessionWriter {
    /// Appended to the session's file.
    File(File),
    /// The request's segment (boxed: a file is a handle, a segment its buffers' bookkeeping).
    Segment(Box<ObjectWriter>),
}

/// A session's bytes as a file: the session's own, or a copy removed when this is dropped.
#[derive(Debug)]
pub(crate) struct SessionFile {
    path: PathBuf,
    copy: bool,
}

impl SessionFile {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionFile {
    fn drop(&mut self) {
        if self.copy {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl SessionBytes {
    /// The sessions of `data_dir`, where the process's media store keeps them.
    pub(crate) fn of(data_dir: &Path) -> Self {
        match crate::media_store(data_dir) {
            MediaStore::Object(object) => SessionBytes::Objects(object, data_dir.to_path_buf()),
            MediaStore::Local(_) => SessionBytes::Files(data_dir.to_path_buf()),
        }
    }

    fn file(data_dir: &Path, user: u64, key: &str) -> PathBuf {
        upload_key(user, key).path(data_dir)
    }

    /// The session's segments from offset 0 on, each starting where the one before ended:
    /// (segment key, offset, length). A segment after a gap is not part of it.
    fn segments(
        object: &ObjectMedia,
        user: u64,
        key: &str,
    ) -> std::io::Result<Vec<(streetlevel_media::Key, u64, u64)>> {
        let mut chain = Vec::new();
        let mut end = 0;
        for (segment, length) in object.list_sized(&upload_segments_prefix(user, key))? {
            match upload_segment_offset(&segment) {
                Some(offset) if offset == end => {
                    if length > 0 {
                        chain.push((segment, offset, length));
                    }
                    end = offset + length;
                }
                _ => {}
            }
        }
        Ok(chain)
    }

    /// The bytes the session holds, `None` when it holds none (no file, no segment).
    pub(crate) fn size(&self, user: u64, key: &str) -> std::io::Result<Option<u64>> {
        match self {
            SessionBytes::Files(data_dir) => {
                match std::fs::metadata(Self::file(data_dir, user, key)) {
                    Ok(metadata) => Ok(Some(metadata.len())),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(error) => Err(error),
                }
            }
            SessionBytes::Objects(object, _) => {
                let segments = Self::segments(object, user, key)?;
                Ok(segments.last().map(|(_, offset, length)| offset + length))
            }
        }
    }

    /// A writer of one request's bytes, appended at `stored`, the bytes the session holds.
    pub(crate) fn writer(
        &self,
        user: u64,
        key: &str,
        stored: u64,
    ) -> std::io::Result<SessionWriter> {
        match self {
            SessionBytes::Files(data_dir) => {
                let path = Self::file(data_dir, user, key);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let file = OpenOptions::new().create(true).append(true).open(&path)?;
                Ok(SessionWriter::File(file))
            }
            SessionBytes::Objects(object, _) => Ok(SessionWriter::Segment(Box::new(
                object.writer(&upload_segment_key(user, key, stored)),
            ))),
        }
    }

    /// Every byte of the session (a picture or a manifest: not a zip nor a video), `None`
    /// when it holds none.
    pub(crate) fn read(&self, user: u64, key: &str) -> std::io::Result<Option<Vec<u8>>> {
        match self {
            SessionBytes::Files(data_dir) => match std::fs::read(Self::file(data_dir, user, key)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(error),
            },
            SessionBytes::Objects(..) => {
                if self.size(user, key)?.is_none() {
                    return Ok(None);
                }
                let mut bytes = Vec::new();
                self.copy_to(user, key, &mut bytes)?;
                Ok(Some(bytes))
            }
        }
    }

    /// Writes the session's bytes into `sink` as they are read; how many there were.
    pub(crate) fn copy_to(
        &self,
        user: u64,
        key: &str,
        sink: &mut dyn std::io::Write,
    ) -> std::io::Result<u64> {
        match self {
            SessionBytes::Files(data_dir) => {
                let mut file = File::open(Self::file(data_dir, user, key))?;
                std::io::copy(&mut file, sink)
            }
            SessionBytes::Objects(object, _) => {
                let mut copied = 0;
                for (segment, _, length) in Self::segments(object, user, key)? {
                    let got = object.copy_to(&segment, 0, length, sink)?;
                    if got != length {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!("{segment}: {got} of {length} bytes"),
                        ));
                    }
                    copied += got;
                }
                Ok(copied)
            }
        }
    }

    /// The session's bytes as a file to seek in (its own file, or a copy made now in the
    /// data directory's [`SCRATCH_DIR`] and removed when dropped), `None` when it holds none.
    pub(crate) fn as_file(&self, user: u64, key: &str) -> std::io::Result<Option<SessionFile>> {
        match self {
            SessionBytes::Files(data_dir) => {
                let path = Self::file(data_dir, user, key);
                Ok(path.exists().then_some(SessionFile { path, copy: false }))
            }
            SessionBytes::Objects(_, data_dir) => {
                if self.size(user, key)?.is_none() {
                    return Ok(None);
                }
                let scratch = data_dir.join(SCRATCH_DIR);
                std::fs::create_dir_all(&scratch)?;
                let nonce: [u8; 8] = rand::random();
                let copy = SessionFile {
                    path: scratch.join(format!("{user}-{}-{key}", hex::encode(nonce))),
                    copy: true,
                };
                let mut file =
                    std::io::BufWriter::with_capacity(1 << 20, File::create(&copy.path)?);
                self.copy_to(user, key, &mut file)?;
                file.into_inner()
                    .map_err(std::io::IntoInnerError::into_error)?;
                Ok(Some(copy))
            }
        }
    }

    /// Removes the session's bytes (nothing when there are none).
    pub(crate) fn remove(&self, user: u64, key: &str) -> std::io::Result<()> {
        match self {
            SessionBytes::Files(data_dir) => {
                match std::fs::remove_file(Self::file(data_dir, user, key)) {
                    Ok(()) => Ok(()),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(error) => Err(error),
                }
            }
            SessionBytes::Objects(object, _) => {
                let removal = object.remove_prefix(&upload_segments_prefix(user, key));
                match removal.failures.into_iter().next() {
                    Some((_, error)) => Err(error),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Removes the copies in `data_dir`'s [`SCRATCH_DIR`] older than `age`: what a process that
/// died while a job or a check read a session left (a copy lives no longer than its job,
/// which the job time limit bounds); how many were removed.
pub(crate) fn remove_stale_copies(data_dir: &Path, age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(data_dir.join(SCRATCH_DIR)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|elapsed| elapsed > age);
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl SessionWriter {
    /// Appends `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            SessionWriter::File(file) => file.write_all(bytes),
            SessionWriter::Segment(segment) => segment.write(bytes),
        }
    }

    /// Makes what was written durable: the file synced, the segment completed (not when no
    /// byte was written: an empty segment would say nothing).
    pub(crate) fn finish(self) -> std::io::Result<()> {
        match self {
            SessionWriter::File(file) => file.sync_data(),
            SessionWriter::Segment(segment) if segment.written() == 0 => segment.abort(),
            SessionWriter::Segment(segment) => segment.finish().map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SCRATCH_DIR, remove_stale_copies};
    use std::time::Duration;

    #[test]
    fn only_copies_older_than_a_job_can_run_are_removed() {
        let data = std::env::temp_dir().join(format!("session-bytes-{}", std::process::id()));
        let scratch = data.join(SCRATCH_DIR);
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::write(scratch.join("1-00-mly_tools_a.zip"), b"a copy").unwrap();
        assert_eq!(remove_stale_copies(&data, Duration::from_secs(3600)), 0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(remove_stale_copies(&data, Duration::from_millis(10)), 1);
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
        // No scratch folder: nothing to do.
        std::fs::remove_dir_all(&data).unwrap();
        assert_eq!(remove_stale_copies(&data, Duration::ZERO), 0);
    }
}
