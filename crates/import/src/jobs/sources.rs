//! Where a job's pictures come from: the sessions' files, or the JPEG entries of a zip, read
//! one at a time within the job's budget.

use std::io::Read as _;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use super::finish::MAX_JOB_IMAGES;
use crate::budgets::{ZipBudget, open_zip};
use crate::pipeline::Sources;
use crate::{ImportError, Uploads};

/// The largest JPEG taken out of a zip.
const MAX_ZIP_ENTRY_BYTES: u64 = 256 << 20;

pub(super) struct SessionFiles<'a> {
    pub(super) uploads: &'a Uploads,
    pub(super) user_id: u64,
    pub(super) keys: &'a [String],
}

impl Sources for SessionFiles<'_> {
    fn len(&self) -> usize {
        self.keys.len()
    }

    fn name(&self, index: usize) -> String {
        self.keys[index].clone()
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        match self.uploads.bytes().read(self.user_id, &self.keys[index]) {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(String::from("cannot read the upload: its bytes are gone")),
            Err(error) => Err(format!("cannot read the upload: {error}")),
        }
    }
}

/// The JPEG entries of a zip archive, read one at a time.
pub(super) struct ZipEntries {
    pub(super) archive: Mutex<zip::ZipArchive<std::fs::File>>,
    pub(super) names: Vec<(usize, String)>,
}

impl ZipEntries {
    pub(super) fn open(path: &Path, budget: ZipBudget) -> Result<Self, ImportError> {
        let archive = open_zip(path, budget)?;
        let names = jpeg_entries(&archive)?;
        Ok(ZipEntries {
            archive: Mutex::new(archive),
            names,
        })
    }
}

/// `2.jpg` before `10.jpg`: the uploader numbers entries in capture order.
fn natural_key(name: &str) -> (u64, String) {
    let stem = name.split('.').next().unwrap_or(name);
    (stem.parse().unwrap_or(u64::MAX), name.to_owned())
}

impl Sources for ZipEntries {
    fn len(&self) -> usize {
        self.names.len()
    }

    fn name(&self, index: usize) -> String {
        self.names[index].1.clone()
    }

    fn read(&self, index: usize) -> Result<Vec<u8>, String> {
        let mut archive = self.archive.lock().unwrap_or_else(PoisonError::into_inner);
        read_zip_entry(&mut archive, self.names[index].0)
    }
}

/// The JPEG entries of an archive [`open_zip`] accepted, as a job takes them: their indexes
/// and names, in capture order (1 to [`MAX_JOB_IMAGES`]).
pub(crate) fn jpeg_entries<R: std::io::Read + std::io::Seek>(
    archive: &zip::ZipArchive<R>,
) -> Result<Vec<(usize, String)>, ImportError> {
    let mut names: Vec<(usize, String)> = (0..archive.len())
        .filter_map(|index| {
            let name = archive.name_for_index(index)?;
            crate::files::is_jpeg_name(Path::new(name)).then(|| (index, name.to_owned()))
        })
        .collect();
    if names.is_empty() || names.len() > MAX_JOB_IMAGES {
        return Err(ImportError::InvalidUpload(format!(
            "an archive holds 1 to {MAX_JOB_IMAGES} JPEG files"
        )));
    }
    names.sort_by_key(|(_, name)| natural_key(name));
    Ok(names)
}

/// The bytes of entry `index`, inflated no further than the size the directory declares (and
/// the budget checked) nor [`MAX_ZIP_ENTRY_BYTES`].
pub(crate) fn read_zip_entry<R: std::io::Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    index: usize,
) -> Result<Vec<u8>, String> {
    let mut entry = archive
        .by_index(index)
        .map_err(|error| format!("cannot read the archive entry: {error}"))?;
    // The directory's sizes were checked against the budget: no entry inflates to more.
    let declared = entry.size();
    if declared > MAX_ZIP_ENTRY_BYTES {
        return Err(format!("larger than {MAX_ZIP_ENTRY_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    entry
        .by_ref()
        .take(declared + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read the archive entry: {error}"))?;
    if bytes.len() as u64 > declared {
        return Err(format!(
            "it inflates to more than the {declared} bytes the archive declares"
        ));
    }
    Ok(bytes)
}
