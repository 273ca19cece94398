//! The finish call: a session handed over becomes a job row (a manifest's handles checked,
//! a zip's or a video's one file), in the queue for a worker.

use streetlevel_db::{DbError, id_from_sql, id_to_sql, params};
use streetlevel_model::{Clock, OrganizationId, SystemClock};

use super::FileType;
use super::sources::ZipEntries;
use crate::budgets::ZipBudget;
use crate::{ImportError, Uploads};

#[derive(serde::Deserialize)]
pub(crate) struct Manifest {
    pub(crate) image_handles: Vec<String>,
}

/// The largest manifest read (the uploader's lists a few hundred handles).
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// The most images one job may hold.
pub(super) const MAX_JOB_IMAGES: usize = 20_000;

/// The handles a manifest lists: JSON with 1 to [`MAX_JOB_IMAGES`] of them.
pub(crate) fn parse_manifest(text: &[u8]) -> Result<Manifest, ImportError> {
    let manifest: Manifest = serde_json::from_slice(text).map_err(|error| {
        ImportError::InvalidUpload(format!("the manifest is not valid JSON: {error}"))
    })?;
    if manifest.image_handles.is_empty() || manifest.image_handles.len() > MAX_JOB_IMAGES {
        return Err(ImportError::InvalidUpload(format!(
            "a manifest lists 1 to {MAX_JOB_IMAGES} image handles"
        )));
    }
    Ok(manifest)
}

impl Uploads {
    /// Queues a job for the caller's session `handle` and returns its ID (the `cluster_id`).
    pub fn finish(
        &self,
        user_id: u64,
        username: &str,
        handle: &str,
        file_type: &str,
        organization: Option<OrganizationId>,
    ) -> Result<u64, ImportError> {
        let file_type = FileType::parse(file_type)?;
        let key = self.key_of(user_id, handle)?;
        // What is checked here must be what the job reads: the size is compared again in
        // the transaction that hands the session over. A zip's or a video's session that an
        // earlier job processed has no file any more (the same file uploaded again, its key
        // the same): the transaction checks that an earlier job took it, and the job reports
        // what that one found.
        let bytes = self.bytes();
        let checked_size = match bytes.size(user_id, &key)? {
            Some(size) => Some(size),
            None if file_type != FileType::Manifest => None,
            None => return Err(ImportError::SessionIncomplete(key.clone())),
        };
        self.check_named_md5(user_id, &key)?;
        let sessions = match file_type {
            FileType::Zip | FileType::CammVideo if checked_size.is_none() => vec![key.clone()],
            FileType::Zip => {
                // Refused now, with its reason, rather than failing later in the queue.
                let file = bytes
                    .as_file(user_id, &key)?
                    .ok_or_else(|| ImportError::SessionIncomplete(key.clone()))?;
                ZipEntries::open(file.path(), self.zip_budget())?;
                vec![key.clone()]
            }
            FileType::CammVideo => {
                // Refused now, with its reason: not an MP4, truncated, no usable GPS track.
                let file = bytes
                    .as_file(user_id, &key)?
                    .ok_or_else(|| ImportError::SessionIncomplete(key.clone()))?;
                streetlevel_video::Video::read(file.path(), None, SystemClock.now().seconds())
                    .map_err(|error| ImportError::InvalidUpload(error.to_string()))?;
                vec![key.clone()]
            }
            FileType::Manifest => {
                let manifest = self.read_manifest(user_id, &key)?;
                let keys = manifest
                    .image_handles
                    .iter()
                    .map(|handle| self.key_of(user_id, handle))
                    .collect::<Result<Vec<_>, _>>()?;
                for image in &keys {
                    self.check_named_md5(user_id, image)?;
                }
                keys
            }
        };
        let listed = serde_json::to_string(&sessions).unwrap_or_default();
        let job = self.db().write(|connection| {
            let now = connection.now_millis()?;
            let job: i64 = connection
                .query_value(
                    "INSERT INTO import_jobs (user_id, username, organization, file_type,
                        sessions, state, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'received', ?6, ?6) RETURNING id",
                    params![
                        id_to_sql(user_id),
                        username,
                        organization.map(|id| id_to_sql(id.0)),
                        file_type.as_str(),
                        &listed,
                        now
                    ],
                )?
                .ok_or_else(|| DbError::Statement("INSERT … RETURNING gave no row".into()))?;
            for session in sessions.iter().chain(std::iter::once(&key)) {
                let size = self.check_handed_over(connection, user_id, session, now)?;
                if session == &key
                    && size != checked_size.map(|size| i64::try_from(size).unwrap_or(i64::MAX))
                {
                    return Err(ImportError::SessionBusy(key.clone()));
                }
                let key = session;
                connection.execute(
                    "UPDATE import_sessions SET job = coalesce(job, ?3), size = coalesce(size, ?4)
                     WHERE user_id = ?1 AND key = ?2",
                    params![id_to_sql(user_id), key, job, size],
                )?;
            }
            Ok::<_, ImportError>(job)
        })?;
        self.notify();
        Ok(id_from_sql(job))
    }

    /// Checks, in the transaction of a finish call, that `key` may be handed to a job: no
    /// request is writing to it and it holds bytes (or a job processed it before); returns
    /// the size of its file, if it has one.
    fn check_handed_over(
        &self,
        connection: &mut dyn streetlevel_db::Conn,
        user_id: u64,
        key: &str,
        now: i64,
    ) -> Result<Option<i64>, ImportError> {
        let row = connection.query_row(
            "SELECT writer_until, size FROM import_sessions WHERE user_id = ?1 AND key = ?2",
            params![id_to_sql(user_id), key],
            |row| Ok::<_, DbError>((row.get::<Option<i64>>(0)?, row.get::<Option<i64>>(1)?)),
        )?;
        let Some((writer_until, processed_size)) = row else {
            return Err(ImportError::SessionIncomplete(key.to_owned()));
        };
        if writer_until.is_some_and(|until| until > now) {
            return Err(ImportError::SessionBusy(key.to_owned()));
        }
        match self.bytes().size(user_id, key)? {
            Some(size) if size > 0 => Ok(Some(i64::try_from(size).unwrap_or(i64::MAX))),
            None if processed_size.is_some() => Ok(None),
            _ => Err(ImportError::SessionIncomplete(key.to_owned())),
        }
    }

    pub(super) fn zip_budget(&self) -> ZipBudget {
        ZipBudget {
            max_entries: self.limits.max_zip_entries,
            max_inflated_bytes: self.limits.max_zip_inflated_bytes,
        }
    }

    fn read_manifest(&self, user_id: u64, key: &str) -> Result<Manifest, ImportError> {
        let bytes = self.bytes();
        let gone = || ImportError::InvalidUpload(String::from("the manifest's bytes are gone"));
        if bytes.size(user_id, key)?.ok_or_else(gone)? > MAX_MANIFEST_BYTES {
            return Err(ImportError::InvalidUpload(String::from(
                "the manifest is too large",
            )));
        }
        let text = bytes.read(user_id, key)?.ok_or_else(gone)?;
        if text.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(ImportError::InvalidUpload(String::from(
                "the manifest is too large",
            )));
        }
        parse_manifest(&text)
    }
}
