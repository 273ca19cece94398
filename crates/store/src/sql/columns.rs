//! How the store's values are kept in columns: unsigned 64-bit IDs as their two's-complement
//! `i64`, float and ID lists as little-endian blobs (so that values read back bit for bit), NaN
//! as NULL, and integers read back into narrower types.

use streetlevel_model::ImageId;

use crate::StoreError;

// IDs as `db` keeps them, the one place they are converted.
pub(super) use streetlevel_db::{id_from_sql as from_sql_id, id_to_sql as to_sql_id};

pub(super) fn floats_to_blob(values: &[f64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

pub(super) fn ids_to_blob(ids: &[ImageId]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.0.to_le_bytes()).collect()
}

pub(super) fn blob_to_ids(table: &'static str, blob: &[u8]) -> Result<Vec<ImageId>, StoreError> {
    if !blob.len().is_multiple_of(8) {
        return Err(StoreError::CorruptRow {
            table,
            reason: format!("id blob of {} bytes", blob.len()),
        });
    }
    Ok(blob
        .chunks_exact(8)
        .map(|chunk| {
            let mut bytes = [0; 8];
            bytes.copy_from_slice(chunk);
            ImageId(u64::from_le_bytes(bytes))
        })
        .collect())
}

/// NaN has no SQL form; it is stored as NULL (and reads back as `None`, as in memory).
pub(super) fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|value| !value.is_nan())
}

/// An integer column's value as a narrower type.
pub(super) fn narrow<T: TryFrom<i64>>(
    table: &'static str,
    column: &str,
    value: i64,
) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::CorruptRow {
        table,
        reason: format!("{column} {value} out of range"),
    })
}
