//! Taking images down in the database: erasing, hiding and restoring, each recorded in the
//! takedown record.

use streetlevel_db::{Conn, params};
use streetlevel_model::{ImageId, MapFeatureId, SequenceId, Timestamp};

use super::columns::ids_to_blob;
use super::columns::to_sql_id;
use super::write::log_write;
use super::write::reserve_ids;
use crate::StoreError;
use crate::takedown::{TakedownAction, TakedownRecord};

/// Erases images with their detections, their hashes, their links from map features (each
/// changed feature's new image list in `map_features`), the sequences `emptied` (left
/// without images), logs the write and records the takedown. Raises the ID allocator's floor
/// above the erased IDs, so that an ID is never handed out twice and cursors stay valid.
pub(crate) fn erase_images(
    connection: &mut dyn Conn,
    ids: &[ImageId],
    map_features: &[(MapFeatureId, Vec<ImageId>)],
    emptied: &[SequenceId],
    takedown: &TakedownRow<'_>,
) -> Result<(), StoreError> {
    for id in ids {
        let id = to_sql_id(id.0);
        connection.execute("DELETE FROM store_images WHERE id = ?1", params![id])?;
        connection.execute("DELETE FROM store_detections WHERE image = ?1", params![id])?;
        connection.execute(
            "DELETE FROM store_image_hashes WHERE image = ?1",
            params![id],
        )?;
    }
    for (feature, images) in map_features {
        connection.execute(
            "UPDATE store_map_features SET images = ?2 WHERE id = ?1",
            params![to_sql_id(feature.0), &ids_to_blob(images)],
        )?;
    }
    for sequence in emptied {
        connection.execute(
            "DELETE FROM store_sequences WHERE id = ?1",
            params![sequence.as_str()],
        )?;
    }
    // IDs from `i64::MAX` on are never handed out: no floor to raise for them.
    if let Some(next) = ids
        .iter()
        .map(|id| id.0.saturating_add(1))
        .filter(|next| i64::try_from(*next).is_ok())
        .max()
    {
        reserve_ids(connection, 0, next)?;
    }
    log_write(connection, ids.iter().copied())?;
    insert_takedown(connection, takedown)
}

/// Sets the `hidden` flag of images, logs the write and records the takedown.
pub(crate) fn set_hidden(
    connection: &mut dyn Conn,
    ids: &[ImageId],
    hidden: bool,
    takedown: &TakedownRow<'_>,
) -> Result<(), StoreError> {
    for id in ids {
        connection.execute(
            "UPDATE store_images SET hidden = ?2 WHERE id = ?1",
            params![to_sql_id(id.0), i64::from(hidden)],
        )?;
    }
    log_write(connection, ids.iter().copied())?;
    insert_takedown(connection, takedown)
}

/// One row of `store_takedowns`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TakedownRow<'a> {
    pub(crate) at: i64,
    pub(crate) actor: &'a str,
    pub(crate) action: &'a str,
    pub(crate) subject: &'a str,
    pub(crate) images: usize,
}

fn insert_takedown(connection: &mut dyn Conn, row: &TakedownRow<'_>) -> Result<(), StoreError> {
    connection.execute(
        "INSERT INTO store_takedowns (at, actor, action, subject, images)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            row.at,
            row.actor,
            row.action,
            row.subject,
            i64::try_from(row.images).unwrap_or(i64::MAX)
        ],
    )?;
    Ok(())
}

/// The newest `limit` takedowns, newest first.
pub(crate) fn takedowns(
    connection: &mut dyn Conn,
    limit: usize,
) -> Result<Vec<TakedownRecord>, StoreError> {
    connection.query_map(
        "SELECT seq, at, actor, action, subject, images FROM store_takedowns
         ORDER BY seq DESC LIMIT ?1",
        params![i64::try_from(limit).unwrap_or(i64::MAX)],
        |row| {
            let action: String = row.get(3)?;
            Ok::<_, StoreError>(TakedownRecord {
                seq: row.get(0)?,
                at: Timestamp(row.get(1)?),
                actor: row.get(2)?,
                action: TakedownAction::parse(&action).ok_or_else(|| StoreError::CorruptRow {
                    table: "store_takedowns",
                    reason: format!("action {action:?}"),
                })?,
                subject: row.get(4)?,
                images: u64::try_from(row.get::<i64>(5)?).unwrap_or(0),
            })
        },
    )
}
