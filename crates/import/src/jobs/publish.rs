//! Processing a claimed job: its files (a manifest's sessions, a zip's entries, a video's
//! frames) through the pipeline, published in the transaction that marks the job published,
//! only while the worker still holds its lease.

use std::sync::RwLock;

use sha2::{Digest, Sha256};
use streetlevel_db::{DbError, id_from_sql, id_to_sql, params};
use streetlevel_model::{ImageId, SequenceId};
use streetlevel_store::Store;

use super::queue::PendingJob;
use super::sources::SessionFiles;
use super::sources::ZipEntries;
use crate::budgets::{Budgeted, Interrupt};
use crate::pipeline::{
    FileOutcome, Grouping, ImportRun, Outcome, Progress, Sources, read_lock, write_lock,
};
use crate::session_bytes::SessionFile;
use crate::{ImportError, Uploads};

/// A job, as [`Uploads::run`] publishes it.
#[derive(Clone, Copy)]
pub(super) struct Publish<'a> {
    pub(super) work: &'a PendingJob,
    /// The worker that must still hold the job's lease when it is published.
    pub(super) worker: &'a str,
    pub(super) first_id: u64,
    /// The sessions the files are, in order (a manifest's; none for a zip).
    pub(super) session_keys: &'a [String],
    /// What an earlier job made of the manifest's other sessions.
    pub(super) earlier: &'a [(String, Option<ImageId>)],
}

/// A job's duplicates and refused files: the sessions an earlier job processed (duplicates if
/// their image exists, refused if their bytes are gone) and this run's files.
pub(super) fn counts(
    earlier: &[(String, Option<ImageId>)],
    files: &[FileOutcome],
) -> (i64, Vec<(String, String)>) {
    let mut duplicates = 0;
    let mut refused = Vec::new();
    for (key, image) in earlier {
        if image.is_some() {
            duplicates += 1;
        } else {
            refused.push((key.clone(), String::from("its bytes are no longer stored")));
        }
    }
    for file in files {
        match &file.outcome {
            Outcome::Duplicate(_) => duplicates += 1,
            Outcome::Refused(reason) => refused.push((file.file.clone(), reason.clone())),
            Outcome::Imported(_) => {}
        }
    }
    (duplicates, refused)
}

/// A sequence key (22 letters and digits, like the original service's) that depends only on
/// the job and the sequence's position in it, so a retried job writes the same keys.
pub(crate) fn derived_sequence_key(job: i64, index: usize) -> SequenceId {
    let digest = Sha256::digest(format!("streetlevel upload {job} sequence {index}").as_bytes());
    SequenceId(base62(&digest, 22))
}

pub(crate) fn base62(bytes: &[u8], length: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    bytes
        .iter()
        .cycle()
        .take(length)
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect()
}

impl Uploads {
    /// The first of `count` IDs for the job: reserved once and kept, so a retry after a
    /// crash writes the same images.
    /// Only the lease holder records them, and a worker that lost its lease to another takes
    /// the IDs that one recorded.
    fn job_ids(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        count: usize,
    ) -> Result<u64, ImportError> {
        if let Some(first_id) = work.first_id {
            return Ok(first_id);
        }
        let reserved = write_lock(store).reserve_ids(count as u64)?;
        let recorded = self.db().write(|connection| {
            connection.query_value::<i64>(
                "UPDATE import_jobs SET first_id = coalesce(first_id, ?2)
                 WHERE id = ?1 AND worker = ?3 RETURNING first_id",
                params![work.id, id_to_sql(reserved), worker],
            )
        })?;
        recorded.map(id_from_sql).ok_or(ImportError::LeaseLost)
    }

    pub(super) fn process_manifest(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let mut present = Vec::new();
        let mut processed_before = Vec::new();
        let bytes = self.bytes();
        for key in &work.sessions {
            if bytes.size(work.user_id, key)?.is_some() {
                present.push(key.clone());
            } else {
                processed_before.push(key.clone());
            }
        }
        let first_id = self.job_ids(store, work, worker, present.len().max(1))?;
        let sources = SessionFiles {
            uploads: self,
            user_id: work.user_id,
            keys: &present,
        };
        let earlier = self.images_of_sessions(work.user_id, &processed_before)?;
        let published = Publish {
            work,
            worker,
            first_id,
            session_keys: &present,
            earlier: &earlier,
        };
        self.run(store, &published, &sources, interrupt)?;
        for key in &present {
            if let Err(error) = bytes.remove(work.user_id, key) {
                tracing::warn!(%error, key, "cannot remove a processed upload's bytes");
            }
        }
        self.release_sessions(work.user_id, &present)
    }

    pub(super) fn process_zip(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let (key, file) = self.single_file(work, "archive")?;
        let Some(file) = file else {
            return self.publish_as_before(store, work, worker, key, "archive");
        };
        let archive = ZipEntries::open(file.path(), self.zip_budget())?;
        self.run_single(
            store,
            work,
            worker,
            &archive,
            archive.names.len(),
            interrupt,
        )?;
        drop(archive);
        drop(file);
        self.release_single(work, key)
    }

    /// An uploaded video: its frames sampled and decoded into a scratch folder (removed after),
    /// then imported as one sequence like a zip's pictures.
    pub(super) fn process_video(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let (key, file) = self.single_file(work, "video")?;
        let Some(file) = file else {
            return self.publish_as_before(store, work, worker, key, "video");
        };
        let scratch = self
            .data_dir
            .join("video-frames")
            .join(format!("job-{}", work.id));
        let _ = std::fs::remove_dir_all(&scratch);
        let mut options = crate::VideoOptions::default();
        options.limits.timeout = self.limits.job_time_limit;
        let frames = crate::video::frames_named(
            file.path(),
            key,
            &scratch,
            &options,
            streetlevel_model::Timestamp(work.created_at),
        )
        .map_err(ImportError::InvalidUpload);
        let result = frames.and_then(|frames| {
            let frames = crate::video::Frames(frames);
            self.run_single(store, work, worker, &frames, frames.0.len(), interrupt)
        });
        let _ = std::fs::remove_dir_all(&scratch);
        drop(file);
        result?;
        self.release_single(work, key)
    }

    /// The one uploaded file of a zip's or a video's job (`what` names it in the refusal): its
    /// session key and its bytes as a file (`None` when an earlier job processed them).
    fn single_file<'a>(
        &self,
        work: &'a PendingJob,
        what: &str,
    ) -> Result<(&'a String, Option<SessionFile>), ImportError> {
        let Some(key) = work.sessions.first() else {
            return Err(ImportError::InvalidUpload(format!("no {what}")));
        };
        Ok((key, self.bytes().as_file(work.user_id, key)?))
    }

    /// A zip or a video uploaded again under the same key (the uploader's history lost, or
    /// 0.14's `--reupload`), after an earlier job published it and its bytes were deleted: the
    /// job is published with nothing new, the earlier job's pictures that are still stored
    /// (its sequence's images) and its duplicates counted as duplicates, as a manifest counts
    /// its sessions processed before. When the earlier job did not publish, or every picture
    /// it published was taken down since, nothing of the file is left: the session is
    /// discarded (so the uploader's next run sends the file again from offset 0) and the job
    /// fails saying so.
    fn publish_as_before(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        key: &str,
        what: &str,
    ) -> Result<(), ImportError> {
        let earlier = self.db().read(|connection| {
            connection.query_row(
                "SELECT j.id, j.state, j.images, j.duplicates FROM import_sessions s
                 JOIN import_jobs j ON j.id = s.job
                 WHERE s.user_id = ?1 AND s.key = ?2 AND j.id <> ?3",
                params![id_to_sql(work.user_id), key, work.id],
                |row| {
                    Ok::<_, DbError>((
                        row.get::<i64>(0)?,
                        row.get::<String>(1)?,
                        row.get::<i64>(2)?,
                        row.get::<i64>(3)?,
                    ))
                },
            )
        })?;
        let still_stored = |job: i64| {
            let store = read_lock(store);
            let sequence = derived_sequence_key(job, 0);
            let public = store
                .sequence_image_ids(&sequence)
                .map_or(0, |ids| ids.len());
            public + store.hidden_images_of_sequence(&sequence).len()
        };
        let found = earlier.and_then(|(job, state, images, duplicates)| {
            let kept = i64::try_from(still_stored(job)).unwrap_or(i64::MAX);
            let published = state == "published" && (images == 0 || kept > 0);
            published.then_some(kept + duplicates)
        });
        let Some(duplicates) = found else {
            self.db().write(|connection| {
                connection.execute(
                    "DELETE FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                    params![id_to_sql(work.user_id), key],
                )
            })?;
            return Err(ImportError::InvalidUpload(format!(
                "the {what} was uploaded before, and nothing of what an earlier job made of it \
                 is stored any more: its session was discarded, upload it again"
            )));
        };
        let marked = self.db().write(|connection| {
            let now = connection.now_millis()?;
            connection.execute(
                "UPDATE import_jobs SET state = 'published', reason = NULL, images = 0,
                    duplicates = ?2, refused = '[]', updated_at = ?3, lease_until = NULL
                 WHERE id = ?1 AND state = 'processing' AND worker = ?4",
                params![work.id, duplicates, now, worker],
            )
        })?;
        if marked == 1 {
            Ok(())
        } else {
            Err(ImportError::LeaseLost)
        }
    }

    /// Publishes the `count` pictures `sources` reads from a job's one file, under `worker`'s
    /// lease, with the job's IDs reserved first.
    fn run_single(
        &self,
        store: &RwLock<Store>,
        work: &PendingJob,
        worker: &str,
        sources: &dyn Sources,
        count: usize,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let first_id = self.job_ids(store, work, worker, count.max(1))?;
        let published = Publish {
            work,
            worker,
            first_id,
            session_keys: &[],
            earlier: &[],
        };
        self.run(store, &published, sources, interrupt)
    }

    /// After a job's one file was published: its bytes removed and its session released.
    fn release_single(&self, work: &PendingJob, key: &String) -> Result<(), ImportError> {
        if let Err(error) = self.bytes().remove(work.user_id, key) {
            tracing::warn!(%error, key, "cannot remove a processed upload's bytes");
        }
        self.release_sessions(work.user_id, std::slice::from_ref(key))
    }

    /// Runs the pipeline and, in the transaction that publishes the images, marks the job
    /// published with its counts and records which image each session became. Once the job
    /// is interrupted no file is read, and that transaction refuses to commit, so an
    /// interrupted job publishes nothing; it also refuses when the job's lease is no longer
    /// the worker's, so a job is published once, by its lease holder.
    pub(super) fn run(
        &self,
        store: &RwLock<Store>,
        published: &Publish<'_>,
        sources: &dyn Sources,
        interrupt: &Interrupt<'_>,
    ) -> Result<(), ImportError> {
        let Publish {
            work,
            worker,
            first_id,
            session_keys,
            earlier,
        } = *published;
        if let Some(organization) = work.owner.organization
            && read_lock(store).organization(organization).is_none()
        {
            return Err(ImportError::UnknownOrganization(organization.0));
        }
        let job = work.id;
        let sequence_key = move |index: usize| derived_sequence_key(job, index);
        let run = ImportRun {
            store,
            media: crate::media_store(&self.data_dir),
            blurring: &self.blurring,
            owner: &work.owner,
            grouping: Grouping::OneSequence,
            first_id: Some(first_id),
            sequence_key: &sequence_key,
            one_batch: true,
            progress: &|_: Progress| {},
            thumbnail_nanos: std::sync::atomic::AtomicU64::new(0),
            blur_nanos: std::sync::atomic::AtomicU64::new(0),
            held: std::sync::Mutex::new(None),
        };
        let user_id = id_to_sql(work.user_id);
        let sources = Budgeted {
            inner: sources,
            interrupt,
        };
        run.import(
            &sources,
            Some(Box::new(|transaction, outcome, files| {
                if interrupt.why().is_some() {
                    return Err(DbError::Statement(String::from("the job was interrupted")));
                }
                let pairs = outcome
                    .inserted
                    .iter()
                    .map(|&id| (id, id))
                    .chain(outcome.duplicates.iter().copied());
                for (id, image) in pairs {
                    let index = usize::try_from(id.0 - first_id).ok();
                    if let Some(key) = index.and_then(|index| session_keys.get(index)) {
                        transaction.execute(
                            "UPDATE import_sessions SET image = ?3 WHERE user_id = ?1 AND key = ?2",
                            streetlevel_db::params![user_id, key, id_to_sql(image.0)],
                        )?;
                    }
                }
                // The counts in the same write as the state: whoever reads the job published
                // reads its final counts.
                let (duplicates, refused) = counts(earlier, files);
                let time_sources: serde_json::Map<String, serde_json::Value> =
                    crate::notes::time_source_counts(files)
                        .into_iter()
                        .map(|(source, count)| (source.as_str().to_owned(), count.into()))
                        .collect();
                let now = transaction.now_millis()?;
                let marked = transaction.execute(
                    "UPDATE import_jobs SET state = 'published', reason = NULL, images = ?2,
                        duplicates = ?3, refused = ?4, updated_at = ?5, time_sources = ?6,
                        warnings = ?7, lease_until = NULL
                     WHERE id = ?1 AND state = 'processing' AND worker = ?8",
                    streetlevel_db::params![
                        job,
                        i64::try_from(outcome.inserted.len()).unwrap_or(i64::MAX),
                        duplicates,
                        &serde_json::to_string(&refused).unwrap_or_default(),
                        now,
                        &serde_json::Value::Object(time_sources).to_string(),
                        &serde_json::to_string(&crate::notes::warnings(files)).unwrap_or_default(),
                        worker
                    ],
                )?;
                if marked != 1 {
                    return Err(DbError::Statement(String::from(
                        "the job's lease is another worker's",
                    )));
                }
                Ok(())
            })),
        )?;
        Ok(())
    }

    /// The image each session became when an earlier job processed it.
    fn images_of_sessions(
        &self,
        user_id: u64,
        keys: &[String],
    ) -> Result<Vec<(String, Option<ImageId>)>, ImportError> {
        self.db().read(|connection| {
            keys.iter()
                .map(|key| {
                    let image: Option<i64> = connection
                        .query_value::<Option<i64>>(
                            "SELECT image FROM import_sessions WHERE user_id = ?1 AND key = ?2",
                            params![id_to_sql(user_id), key],
                        )?
                        .flatten();
                    Ok((key.clone(), image.map(|id| ImageId(id_from_sql(id)))))
                })
                .collect()
        })
    }
}
