//! Following other processes' writes: what the write log names after the last entry this
//! store read, loaded in one read snapshot.

use streetlevel_db::{Conn, Database, params};
use streetlevel_model::{
    Creator, CreatorId, EntityId, Image, ImageId, MediaId, Organization, OrganizationId, Point,
    Sequence, SequenceId, Timestamp,
};

use super::columns::from_sql_id;
use super::columns::to_sql_id;
use super::load::IMAGE_COLUMNS;
use super::load::is_hidden_row;
use super::load::read_image_row;
use crate::image_record::{NONE, RecordNames, RecordValues};
use crate::{Store, StoreError};

/// Loads into `store` what other connections wrote after the write log entry `after`: the
/// images of each logged range that `store` lacks, and the creators, organizations and
/// sequences they name that it lacks. Returns the newest log entry read and how many images
/// were added. Runs in one read transaction, so the log and the rows agree.
pub(crate) fn follow(
    database: &Database,
    store: &mut Store,
    after: i64,
) -> Result<(i64, usize), StoreError> {
    database.snapshot(|connection| follow_in_transaction(connection, store, after))
}

fn follow_in_transaction(
    connection: &mut dyn Conn,
    store: &mut Store,
    after: i64,
) -> Result<(i64, usize), StoreError> {
    let writes = connection.query_map(
        "SELECT seq, first_image, last_image FROM store_writes WHERE seq > ?1 ORDER BY seq",
        params![after],
        |row| Ok::<_, StoreError>((row.get::<i64>(0)?, row.get::<i64>(1)?, row.get::<i64>(2)?)),
    )?;
    let Some(&(newest, _, _)) = writes.last() else {
        return Ok((after, 0));
    };
    let first_new = store.records.images().len();
    let mut added = std::collections::HashSet::new();
    let mut changes = FollowedChanges::default();
    let sql = format!("{IMAGE_COLUMNS} WHERE id BETWEEN ?1 AND ?2");
    let mut parameters = Vec::new();
    for (_, first, last) in writes {
        let mut in_database = std::collections::HashSet::new();
        connection.each::<StoreError>(&sql, params![first, last], |row| {
            let id = from_sql_id(row.get(0)?);
            let hidden = is_hidden_row(row)?;
            in_database.insert(id);
            let held = store
                .image(ImageId(id))
                .map(|image| (image, false))
                .or_else(|| store.hidden_image(ImageId(id)).map(|image| (image, true)));
            if let Some((image, was_hidden)) = held {
                if hidden && !was_hidden {
                    changes.hidden.push(ImageId(id));
                }
                if !hidden && was_hidden {
                    changes.restored.push(ImageId(id));
                }
                // Written over since (what a reconstruction derived): the row is the truth.
                let (values, names) = read_image_row(row, &mut parameters)?;
                let stored = image_of(&values, &names);
                if stored != image {
                    changes.updated.push(stored);
                }
                return Ok(());
            }
            if store.kind_of(EntityId(id)).is_some() || !added.insert(id) {
                return Ok(());
            }
            let (values, names) = read_image_row(row, &mut parameters)?;
            store.records.push_image_hidden(&values, &names, hidden);
            Ok(())
        })?;
        // Images this store holds in the range that the database no longer has were erased.
        // The range is of stored (signed) IDs: from below zero to above it, it is two
        // ranges of unsigned IDs.
        let ranges = if first < 0 && last >= 0 {
            vec![(0, from_sql_id(last)), (from_sql_id(first), u64::MAX)]
        } else {
            vec![(from_sql_id(first), from_sql_id(last))]
        };
        for (low, high) in ranges {
            for id in store
                .image_ids_between(low, high)
                .into_iter()
                .filter(|id| !in_database.contains(id))
            {
                changes.erased.push(ImageId(id));
            }
        }
    }
    let new_images = store.records.images().len() - first_new;
    follow_names(connection, store, first_new)?;
    store.index_new_images(first_new);
    store.apply_followed(&changes);
    Ok((newest, new_images))
}

/// What following found other processes did to images this store holds.
#[derive(Debug, Default)]
pub(crate) struct FollowedChanges {
    /// Visible here, hidden in the database.
    pub(crate) hidden: Vec<ImageId>,
    /// Hidden here, visible in the database.
    pub(crate) restored: Vec<ImageId>,
    /// Held here (visible or hidden), gone from the database.
    pub(crate) erased: Vec<ImageId>,
    /// Held here with other values than the database's (computed fields written over).
    pub(crate) updated: Vec<Image>,
}

/// The image a row of the store's table holds.
fn image_of(values: &RecordValues, names: &RecordNames<'_>) -> Image {
    Image {
        id: ImageId(values.id),
        altitude: values.altitude,
        atomic_scale: values.atomic_scale,
        camera_parameters: names.camera_parameters.map(<[f64]>::to_vec),
        camera_type: names.camera_type,
        captured_at: Timestamp(values.captured_at),
        compass_angle: values.compass_angle,
        computed_altitude: values.computed_altitude,
        computed_compass_angle: values.computed_compass_angle,
        computed_geometry: values
            .computed_geometry
            .map(|[lon, lat]| Point::new(lon, lat)),
        computed_rotation: values.computed_rotation,
        creator: names.creator,
        exif_orientation: values.exif_orientation,
        geometry: Point::new(values.geometry[0], values.geometry[1]),
        height: values.height,
        width: values.width,
        is_pano: values.is_pano,
        make: names.make.map(str::to_owned),
        model: names.model.map(str::to_owned),
        merge_cc: values.merge_cc,
        mesh: values.mesh.map(MediaId),
        sequence: SequenceId(names.sequence.to_owned()),
        sfm_cluster: values.sfm_cluster.map(MediaId),
        quality_score: values.quality_score,
        organization: names.organization,
    }
}

/// Reads the creators, organizations and sequences that images `first_new..` name and the
/// store does not hold yet.
fn follow_names(
    connection: &mut dyn Conn,
    store: &mut Store,
    first_new: usize,
) -> Result<(), StoreError> {
    let mut creators = std::collections::BTreeSet::new();
    let mut organizations = std::collections::BTreeSet::new();
    let mut sequences = std::collections::BTreeSet::new();
    for record in &store.records.images()[first_new..] {
        let creator = store.records.creator(record.creator);
        if creator.creator.is_none() {
            creators.insert(creator.id);
        }
        if record.organization != NONE {
            let organization = store.records.organization(record.organization);
            if organization.organization.is_none() {
                organizations.insert(organization.id);
            }
        }
        let sequence = store.records.sequence(record.sequence);
        if sequence.explicit.is_none() {
            sequences.insert(sequence.id.clone());
        }
    }
    for id in creators {
        let username: Option<String> = connection.query_value(
            "SELECT username FROM store_creators WHERE id = ?1",
            params![to_sql_id(id.0)],
        )?;
        if let Some(username) = username {
            store.records.push_creator(&Creator { id, username });
        }
    }
    for id in organizations {
        let row = connection.query_row(
            "SELECT slug, name, description FROM store_organizations WHERE id = ?1",
            params![to_sql_id(id.0)],
            |row| {
                Ok::<_, StoreError>(Organization {
                    id,
                    slug: row.get(0)?,
                    name: row.get(1)?,
                    description: row.get(2)?,
                })
            },
        )?;
        if let Some(organization) = row {
            store.records.push_organization(&organization);
        }
    }
    for id in sequences {
        let row = connection.query_row(
            "SELECT creator, organization FROM store_sequences WHERE id = ?1",
            params![id.as_str()],
            |row| Ok::<_, StoreError>((row.get::<i64>(0)?, row.get::<Option<i64>>(1)?)),
        )?;
        if let Some((creator, organization)) = row {
            store.records.push_sequence(&Sequence {
                id,
                creator: CreatorId(from_sql_id(creator)),
                organization: organization.map(|id| OrganizationId(from_sql_id(id))),
                image_ids: Vec::new(),
            });
        }
    }
    Ok(())
}
