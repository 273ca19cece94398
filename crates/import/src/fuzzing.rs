//! The readers of the upload path that take untrusted bytes, as the fuzz targets (`fuzz/`) and
//! the property tests (`crates/streetlevel/tests/fuzz_corpora.rs`) call them: a zip archive
//! (its budgets, directory and every JPEG entry read as a job reads it), an uploaded image (cut
//! at its end-of-image marker, its decode memory estimated from its markers) and a manifest.
//! Each gives a value or an error for any bytes: never a panic, and no allocation or work
//! beyond the budgets the server applies.

use std::io::Cursor;

use crate::ImportError;
use crate::budgets::{ZipBudget, open_zip_reader, trim_to_image};
use crate::jobs::{jpeg_entries, parse_manifest, read_zip_entry};

/// The budget the fuzzers open archives with: small, so a hostile directory is refused
/// rather than inflated.
const FUZZ_ZIP_BUDGET: ZipBudget = ZipBudget {
    max_entries: 1_000,
    max_inflated_bytes: 16 << 20,
};

/// One JPEG entry of an archive: its name, and its inflated size or why it cannot be read.
pub type ZipEntryRead = (String, Result<usize, String>);

/// Opens `bytes` as a job opens an uploaded zip (within a 1,000-entry, 16 MiB budget) and
/// reads every JPEG entry as the job would; the entries' outcomes, in capture order.
///
/// # Errors
///
/// The finish call's refusal: not a zip, over budget, overlapping or duplicate entries, or
/// no JPEG entry.
pub fn zip_archive(bytes: &[u8]) -> Result<Vec<ZipEntryRead>, ImportError> {
    let mut archive = open_zip_reader(Cursor::new(bytes), FUZZ_ZIP_BUDGET)?;
    let names = jpeg_entries(&archive)?;
    Ok(names
        .into_iter()
        .map(|(index, name)| {
            let read = read_zip_entry(&mut archive, index).map(|entry| entry.len());
            (name, read)
        })
        .collect())
}

/// An uploaded file as a job stores it: cut after its first end-of-image marker and refused
/// when larger than its pixels need; then the decode memory its markers call for (what the
/// decode pool charges), when they can be read. Returns the bytes kept and that estimate.
///
/// # Errors
///
/// Why the file is refused.
pub fn upload_image(bytes: &[u8]) -> Result<(usize, Option<u64>), String> {
    let kept = trim_to_image(bytes.to_vec())?;
    let estimate = crate::budgets::decode_estimate(&kept);
    Ok((kept.len(), estimate))
}

/// The handles a manifest (`mly_bundle_manifest`) lists.
///
/// # Errors
///
/// Not JSON of the manifest's shape, or not 1 to 20,000 handles.
pub fn manifest(bytes: &[u8]) -> Result<Vec<String>, ImportError> {
    parse_manifest(bytes).map(|manifest| manifest.image_handles)
}
