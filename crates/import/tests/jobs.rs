//! The processing queue through the library: a job interrupted by a crash is redone with the
//! IDs it reserved and publishes everything once; the pipeline's bookkeeping is atomic.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::RwLock;

use streetlevel_import::{Blurring, JobState, UploadLimits, UploaderGeneration, Uploads};
use streetlevel_store::Store;

mod common;
use common::{Street, scratch, upload};

const STREET: Street = Street {
    latitude: 55.8,
    longitude: 13.3,
};

#[test]
fn a_job_interrupted_by_a_crash_is_redone_with_the_ids_it_reserved() {
    let data = scratch("crash");
    let first_id;
    let job;
    {
        let uploads = Uploads::open(&data, UploadLimits::default())
            .unwrap()
            .with_blurring(Blurring::Off);
        job = STREET.upload_and_finish(&uploads, 3, "uuid_a.json");
        // What a worker that crashed mid-job leaves: IDs reserved and recorded, the state
        // `processing`, perhaps some media written, nothing in the store.
        let mut store = Store::open(&data).unwrap();
        first_id = store.reserve_ids(3).unwrap();
        let connection = rusqlite::Connection::open(Store::database_path(&data)).unwrap();
        connection
            .execute(
                "UPDATE import_jobs SET state = 'processing', first_id = ?2 WHERE id = ?1",
                rusqlite::params![job.cast_signed(), first_id.cast_signed()],
            )
            .unwrap();
        std::fs::create_dir_all(data.join(format!("media/img/{first_id}"))).unwrap();
        std::fs::write(
            data.join(format!("media/img/{first_id}/original.jpg")),
            b"half",
        )
        .unwrap();
        assert!(STREET.images_near(&store).is_empty());
    }
    // The restart.
    let uploads = Uploads::open(&data, UploadLimits::default())
        .unwrap()
        .with_blurring(Blurring::Off);
    let store = RwLock::new(Store::open(&data).unwrap());
    assert_eq!(uploads.process_next(&store).unwrap(), Some(job));
    assert_eq!(uploads.process_next(&store).unwrap(), None);
    let done = uploads.job(job).unwrap().unwrap();
    assert_eq!(done.state, JobState::Published, "{done:?}");
    assert_eq!((done.images, done.duplicates), (3, 0));
    let mut ids = STREET.images_near(&store.read().unwrap());
    ids.sort_unstable();
    assert_eq!(ids, [first_id, first_id + 1, first_id + 2]);
    // The half-written original was replaced by the real one.
    let original = std::fs::read(data.join(format!("media/img/{first_id}/original.jpg"))).unwrap();
    assert_eq!(original, STREET.photo(0));
    // The sessions' bytes are gone, and their offsets stay what they were.
    assert!(!data.join("uploads/1/mly_tools_0.jpg").exists());
    assert_eq!(
        uploads.offset(1, "mly_tools_0.jpg").unwrap(),
        STREET.photo(0).len() as u64
    );
    // Another process sees the same: the store on disk holds the three images.
    let reopened = Store::open(&data).unwrap();
    assert_eq!(STREET.images_near(&reopened).len(), 3);
}

/// Two servers on one database (replicas) each run a worker: a job another worker holds under
/// a lease that has not run out is not taken, however often this one looks; once the lease
/// has run out unrenewed (its worker died), it is taken over and published once.
#[test]
fn a_job_another_worker_holds_is_taken_over_only_when_its_lease_runs_out() {
    let data = scratch("two-workers");
    let first = Uploads::open(&data, UploadLimits::default())
        .unwrap()
        .with_blurring(Blurring::Off);
    let second = Uploads::open(&data, UploadLimits::default())
        .unwrap()
        .with_blurring(Blurring::Off);
    let store = RwLock::new(Store::open(&data).unwrap());
    assert_eq!(second.process_next(&store).unwrap(), None);
    let handle = upload(&first, "mly_tools_4.jpg", &STREET.photo(4));
    let manifest = serde_json::json!({"image_handles": [handle]}).to_string();
    let manifest = upload(&first, "uuid_c.json", manifest.as_bytes());
    let job = first
        .finish(1, "dana", &manifest, "mly_bundle_manifest", None)
        .unwrap();
    // Another worker claimed it a moment ago, with a minute's lease.
    let connection = rusqlite::Connection::open(Store::database_path(&data)).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let now = i64::try_from(now).unwrap();
    connection
        .execute(
            "UPDATE import_jobs SET state = 'processing', worker = 'elsewhere', lease_until = ?2
             WHERE id = ?1",
            rusqlite::params![job.cast_signed(), now + 60_000],
        )
        .unwrap();
    for _ in 0..3 {
        assert_eq!(second.process_next(&store).unwrap(), None);
    }
    assert_eq!(
        second.job(job).unwrap().unwrap().state,
        JobState::Processing
    );
    assert!(STREET.images_near(&store.read().unwrap()).is_empty());

    // Its worker died: the lease ran out a moment ago, unrenewed.
    connection
        .execute(
            "UPDATE import_jobs SET lease_until = ?2 WHERE id = ?1",
            rusqlite::params![job.cast_signed(), now - 1],
        )
        .unwrap();
    assert_eq!(second.process_next(&store).unwrap(), Some(job));
    let done = second.job(job).unwrap().unwrap();
    assert_eq!(done.state, JobState::Published, "{done:?}");
    assert_eq!(done.images, 1);
    assert_eq!(STREET.images_near(&store.read().unwrap()).len(), 1);
    // The dead worker's name no longer holds it; nothing is left to take.
    let holder: Option<String> = connection
        .query_row(
            "SELECT worker FROM import_jobs WHERE id = ?1",
            rusqlite::params![job.cast_signed()],
            |row| row.get(0),
        )
        .unwrap();
    assert_ne!(holder.as_deref(), Some("elsewhere"));
    assert_eq!(first.process_next(&store).unwrap(), None);
}

#[test]
fn a_session_handed_to_a_job_takes_no_more_bytes() {
    let data = scratch("finished");
    let uploads = Uploads::open(&data, UploadLimits::default())
        .unwrap()
        .with_blurring(Blurring::Off);
    let bytes = STREET.photo(5);
    let handle = upload(&uploads, "mly_tools_5.jpg", &bytes);
    let manifest = serde_json::json!({"image_handles": [handle]}).to_string();
    let manifest = upload(&uploads, "uuid_b.json", manifest.as_bytes());
    uploads
        .finish(1, "dana", &manifest, "mly_bundle_manifest", None)
        .unwrap();
    let stored = bytes.len() as u64;
    let mut appender = uploads
        .append(1, "mly_tools_5.jpg", stored, UploaderGeneration::Current)
        .unwrap();
    assert!(appender.write(b"more").is_err());
    assert_eq!(uploads.offset(1, "mly_tools_5.jpg").unwrap(), stored);
    // An empty append still answers the handle, as the uploader expects.
    let appender = uploads
        .append(1, "mly_tools_5.jpg", stored, UploaderGeneration::Current)
        .unwrap();
    assert_eq!(appender.finish().unwrap(), handle);
    // Another user's session of the same key is separate.
    assert_eq!(uploads.offset(2, "mly_tools_5.jpg").unwrap(), 0);
}

#[test]
fn limits_refuse_the_excess_and_keep_what_was_stored() {
    let data = scratch("limits");
    let uploads = Uploads::open(
        &data,
        UploadLimits {
            max_session_bytes: 100,
            max_pending_bytes_per_user: 150,
            ..UploadLimits::default()
        },
    )
    .unwrap();
    let mut appender = uploads
        .append(1, "a.jpg", 0, UploaderGeneration::Current)
        .unwrap();
    appender.write(&[1; 60]).unwrap();
    assert!(matches!(
        appender.write(&[2; 60]),
        Err(streetlevel_import::ImportError::SessionTooLarge { limit: 100 })
    ));
    appender.finish().unwrap();
    assert_eq!(uploads.offset(1, "a.jpg").unwrap(), 60);
    let mut appender = uploads
        .append(1, "b.jpg", 0, UploaderGeneration::Current)
        .unwrap();
    appender.write(&[3; 90]).unwrap();
    assert!(matches!(
        appender.write(&[4; 10]),
        Err(streetlevel_import::ImportError::QuotaExceeded { limit: 150 })
    ));
    assert_eq!(uploads.offset(1, "b.jpg").unwrap(), 90);
    // Another user has their own allowance.
    let mut appender = uploads
        .append(2, "a.jpg", 0, UploaderGeneration::Current)
        .unwrap();
    appender.write(&[5; 100]).unwrap();
}

/// A job becomes `published` with its final counts: a client polling it (the uploader, or the
/// SDK suite through replicas, where each poll may reach another process) never reads a
/// published job whose duplicates are still uncounted. A trigger keeps the row as it was at
/// the moment its state became `published`, which is what a poll then would have read.
#[test]
fn a_job_is_published_with_its_final_counts() {
    let data = scratch("published-counts");
    let uploads = Uploads::open(&data, UploadLimits::default())
        .unwrap()
        .with_blurring(Blurring::Off);
    let store = RwLock::new(Store::open(&data).unwrap());
    let handles: Vec<String> = (0..2)
        .map(|index| {
            upload(
                &uploads,
                &format!("mly_tools_{index}.jpg"),
                &STREET.photo(index),
            )
        })
        .collect();
    let manifest = serde_json::json!({"image_handles": handles}).to_string();
    let manifest = upload(&uploads, "uuid_first.json", manifest.as_bytes());
    let first = uploads
        .finish(1, "dana", &manifest, "mly_bundle_manifest", None)
        .unwrap();
    assert_eq!(uploads.process_next(&store).unwrap(), Some(first));

    let connection = rusqlite::Connection::open(Store::database_path(&data)).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE published_as (job INTEGER, images INTEGER, duplicates INTEGER,
                 refused TEXT);
             CREATE TRIGGER keep_published AFTER UPDATE OF state ON import_jobs
             WHEN NEW.state = 'published' AND OLD.state <> 'published'
             BEGIN
                 INSERT INTO published_as
                 VALUES (NEW.id, NEW.images, NEW.duplicates, NEW.refused);
             END;",
        )
        .unwrap();
    // Again: the two sessions the first job processed, the first photo's bytes under a new
    // name, and a file that is no photo.
    let copy = upload(&uploads, "mly_tools_copy.jpg", &STREET.photo(0));
    let junk = upload(&uploads, "mly_tools_junk.jpg", b"not a photo");
    let again = [handles.clone(), vec![copy, junk]].concat();
    let manifest = serde_json::json!({"image_handles": again}).to_string();
    let manifest = upload(&uploads, "uuid_again.json", manifest.as_bytes());
    let second = uploads
        .finish(1, "dana", &manifest, "mly_bundle_manifest", None)
        .unwrap();
    assert_eq!(uploads.process_next(&store).unwrap(), Some(second));

    let done = uploads.job(second).unwrap().unwrap();
    assert_eq!(done.state, JobState::Published, "{done:?}");
    assert_eq!(
        (done.images, done.duplicates, done.refused.len()),
        (0, 3, 1)
    );
    let published_as: (i64, i64, String) = connection
        .query_row(
            "SELECT images, duplicates, refused FROM published_as WHERE job = ?1",
            [second.cast_signed()],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        published_as,
        (0, 3, serde_json::to_string(&done.refused).unwrap()),
        "the job as it read when it became published"
    );
}
