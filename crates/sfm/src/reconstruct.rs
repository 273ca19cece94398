//! One reconstruction job: a sequence's images (public and hidden, in capture order) split
//! into overlapping parts, each part reconstructed by one run of the engine on the images'
//! thumbnails with their GPS positions as priors, each resulting model checked
//! (`validate.rs`), the believed pieces joined (each image takes its pose from the piece in
//! which it is most central; pieces that agree on the images they share are one connected
//! component, `merge_cc`), and everything written in one transaction: the store's computed
//! fields and this crate's clusters and shots, with the job marked done only if this worker
//! still holds it.
//!
//! Resumable: the job's work directory (`<data>/sfm-work/<sequence hash>/`) keeps the plan
//! and each finished part's model, so a job interrupted (a shutdown, a crash, a killed
//! server) starts again at the first part not finished, as long as the sequence's images are
//! the same. The work directory is removed when the job ends.
//!
//! Nothing holds the store's lock or the database's write lock while pictures are read or
//! the engine runs: the store is read once under its read lock at the start, its write lock
//! is taken to reserve IDs and for the final transaction.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Digest as _;
use streetlevel_model::{ImageId, MediaId, Point};
use streetlevel_store::{Computed, ComputedUpdate, Store};

use crate::cluster::{ClusterRow, ShotRow, StoredPoint};
use crate::colmap::Model;
use crate::engine::{DriverReport, Engine};
use crate::geo::{Lla, Topocentric};
use crate::jobs::{JobState, Queue, mark_done};
use crate::validate::{Given, Lens, Piece, validate};
use crate::{SfmError, cluster};

mod area;
mod join;
mod plan;
mod report;

use join::join;
use plan::{Plan, image_name};

/// The folder of the jobs' work directories in the data directory (never served).
pub const WORK_DIR: &str = "sfm-work";

/// A thumbnail as the engine reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thumbnail {
    /// JPEG bytes.
    pub bytes: Vec<u8>,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// Where a job's pictures come from (the data directory's media, in a server).
pub trait Pictures: Send + Sync {
    /// The blurred, upright thumbnail of an image, at most 2048 pixels wide.
    fn thumbnail(&self, image: ImageId) -> Result<Thumbnail, String>;
    /// The lens's focal length as a 35 mm camera's (millimetres), from the original's Exif.
    fn focal_length_35mm(&self, image: ImageId) -> Option<f64>;
}

/// What a reconstruction costs and how it is split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Images per part.
    pub part_images: usize,
    /// Images two consecutive parts share.
    pub part_overlap: usize,
    /// Features per image.
    pub max_features: usize,
    /// The longest side the engine reads pictures at.
    pub max_image_size: u32,
    /// The SIFT octave features are looked for from (-1 doubles the picture first, as
    /// COLMAP's default does; 0 starts at its size).
    pub first_octave: i32,
    /// Each image is matched with this many that follow it.
    pub matching_overlap: usize,
    /// How far the GPS may be off (metres): the priors' standard deviation.
    pub gps_sigma: f64,
    /// The alignment to the GPS positions tolerates this much (metres).
    pub alignment_max_error: f64,
    /// The mappers tried, in order, until one registers `min_registered_share`.
    pub mappers: Vec<String>,
    /// See `mappers`.
    pub min_registered_share: f64,
    /// Sequences of own imagery whose images come this near each other (metres) are
    /// reconstructed together, as an area (0: each alone).
    pub area_metres: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            part_images: 100,
            part_overlap: 20,
            max_features: 4096,
            max_image_size: 2048,
            first_octave: 0,
            matching_overlap: 10,
            gps_sigma: 5.0,
            alignment_max_error: 10.0,
            mappers: vec![String::from("global"), String::from("incremental")],
            min_registered_share: 0.8,
            area_metres: 25.0,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The sequence.
    pub sequence: String,
    /// Done, failed or skipped; `Queued` when it was given back (interrupted) or lost.
    pub state: JobState,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// The report (for a done or failed job).
    pub report: Option<Value>,
}

/// Runs reconstruction jobs.
pub struct Reconstructor {
    queue: Queue,
    store: Arc<RwLock<Store>>,
    engine: Result<Engine, String>,
    pictures: Arc<dyn Pictures>,
    work_root: PathBuf,
    settings: Settings,
}

impl std::fmt::Debug for Reconstructor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconstructor")
            .field("work_root", &self.work_root)
            .field("engine", &self.engine.as_ref().map(|_| "ready"))
            .finish_non_exhaustive()
    }
}

/// The job's own failures that are not errors of the queue.
enum Ended {
    Skipped(String),
    Failed(String, Option<Value>),
}

impl Reconstructor {
    /// A reconstructor on `queue` and `store`, with `engine` (or why there is none), reading
    /// pictures from `pictures` and working under `data_dir/sfm-work`.
    pub fn new(
        queue: Queue,
        store: Arc<RwLock<Store>>,
        engine: Result<Engine, SfmError>,
        pictures: Arc<dyn Pictures>,
        data_dir: &Path,
        settings: Settings,
    ) -> Self {
        Reconstructor {
            queue,
            store,
            engine: engine.map_err(|error| error.to_string()),
            pictures,
            // Absolute: the engine runs in its work directory and is given paths in it.
            work_root: std::path::absolute(data_dir.join(WORK_DIR))
                .unwrap_or_else(|_| data_dir.join(WORK_DIR)),
            settings,
        }
    }

    /// The queue.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Why no engine runs, if none does.
    pub fn engine_missing(&self) -> Option<&str> {
        self.engine.as_ref().err().map(String::as_str)
    }

    /// Claims the next job for `worker` (among `only`, when given) and runs it; `None` when
    /// no job waits. `stop` interrupts it (the job is given back and resumed by the next
    /// worker); `progress` hears where it is.
    #[allow(clippy::too_many_lines)] // the claim, the lease's renewal and every way a job ends
    pub fn run_next(
        &self,
        worker: &str,
        only: Option<&[String]>,
        stop: &AtomicBool,
        progress: &dyn Fn(&str, &str),
    ) -> Result<Option<Outcome>, SfmError> {
        let Some((sequence, taken_over)) = self.queue.claim(worker, only)? else {
            return Ok(None);
        };
        if taken_over {
            tracing::warn!(
                sequence,
                worker,
                "taking over a reconstruction whose worker's lease ran out"
            );
        } else {
            tracing::info!(sequence, worker, "reconstructing a sequence");
        }
        let lost = AtomicBool::new(false);
        // The job's key (its work directory's): the sequence's, or its area's.
        let work_key = std::cell::OnceCell::new();
        let result = std::thread::scope(|scope| {
            let (working, renewal) = std::sync::mpsc::channel::<()>();
            let lost = &lost;
            let queue = &self.queue;
            let sequence = sequence.as_str();
            scope.spawn(move || {
                let mut held_until = Instant::now() + queue.lease;
                loop {
                    match renewal.recv_timeout(queue.lease / 4) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let asked = Instant::now();
                    match queue.renew(sequence, worker) {
                        Ok(true) => held_until = asked + queue.lease,
                        Ok(false) => {
                            lost.store(true, Ordering::Relaxed);
                            return;
                        }
                        Err(error) => {
                            tracing::warn!(sequence, %error, "cannot renew a reconstruction's lease");
                            if Instant::now() >= held_until {
                                lost.store(true, Ordering::Relaxed);
                                return;
                            }
                        }
                    }
                }
            });
            let result = self.reconstruct(sequence, worker, stop, lost, progress, &work_key);
            drop(working);
            result
        });
        let work_key = work_key.get().unwrap_or(&sequence).clone();
        let outcome = |state: JobState, reason: Option<String>, report: Option<Value>| Outcome {
            sequence: sequence.clone(),
            state,
            reason,
            report,
        };
        match result {
            Ok(report) => Ok(Some(outcome(JobState::Done, None, Some(report)))),
            Err(Err(SfmError::LeaseLost)) => {
                tracing::warn!(
                    sequence,
                    worker,
                    "a reconstruction's lease ran out before it was written: left to the worker that took it over"
                );
                Ok(Some(outcome(
                    JobState::Queued,
                    Some(String::from("lease lost")),
                    None,
                )))
            }
            Err(Err(SfmError::Interrupted)) if lost.load(Ordering::Relaxed) => {
                tracing::warn!(
                    sequence,
                    worker,
                    "a reconstruction's lease ran out: left to the worker that took it over"
                );
                Ok(Some(outcome(
                    JobState::Queued,
                    Some(String::from("lease lost")),
                    None,
                )))
            }
            Err(Err(SfmError::Interrupted)) => {
                self.queue.give_back(worker)?;
                tracing::info!(
                    sequence,
                    "a reconstruction was interrupted: the next worker resumes it"
                );
                Ok(Some(outcome(
                    JobState::Queued,
                    Some(String::from("interrupted")),
                    None,
                )))
            }
            Err(Err(SfmError::EngineMissing(reason)) | Ok(Ended::Skipped(reason))) => {
                tracing::info!(sequence, %reason, "a sequence was not reconstructed");
                self.queue.end(worker, JobState::Skipped, &reason, None)?;
                self.remove_work(&work_key);
                Ok(Some(outcome(JobState::Skipped, Some(reason), None)))
            }
            Err(Ok(Ended::Failed(reason, report))) => {
                tracing::warn!(sequence, %reason, "a reconstruction found nothing to believe");
                self.queue
                    .end(worker, JobState::Failed, &reason, report.as_ref())?;
                self.remove_work(&work_key);
                Ok(Some(outcome(JobState::Failed, Some(reason), report)))
            }
            Err(Err(error)) if error.is_unavailable() => {
                // The database went away: the lease runs out and the job is taken up again.
                Err(error)
            }
            Err(Err(error)) => {
                let reason = error.to_string();
                tracing::warn!(sequence, %reason, "a reconstruction failed");
                self.queue.end(worker, JobState::Failed, &reason, None)?;
                self.remove_work(&work_key);
                Ok(Some(outcome(JobState::Failed, Some(reason), None)))
            }
        }
    }

    fn work_dir(&self, sequence: &str) -> PathBuf {
        let digest = sha2::Sha256::digest(sequence.as_bytes());
        self.work_root.join(hex::encode(&digest[..12]))
    }

    fn remove_work(&self, sequence: &str) {
        let dir = self.work_dir(sequence);
        if let Err(error) = std::fs::remove_dir_all(&dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %dir.display(), %error, "cannot remove a reconstruction's work directory");
        }
    }

    #[allow(clippy::too_many_lines)] // the job's steps in order, each short
    fn reconstruct(
        &self,
        sequence: &str,
        worker: &str,
        stop: &AtomicBool,
        lost: &AtomicBool,
        progress: &dyn Fn(&str, &str),
        work_key: &std::cell::OnceCell<String>,
    ) -> Result<Value, Result<Ended, SfmError>> {
        let started = Instant::now();
        let interrupted = || stop.load(Ordering::Relaxed) || lost.load(Ordering::Relaxed);
        let mut area = self.area(sequence).map_err(Err)?;
        let others: Vec<(String, u64)> = area
            .iter()
            .filter(|(member, _)| member != sequence)
            .map(|(member, images)| {
                let newest = images.iter().map(|image| image.id.0).max().unwrap_or(0);
                (member.clone(), newest)
            })
            .collect();
        if !others.is_empty() {
            let joined = self
                .queue
                .join_area(sequence, worker, &others)
                .map_err(Err)?;
            area.retain(|(member, _)| member == sequence || joined.contains(member));
            if area.len() > 1 {
                tracing::info!(sequence, with = ?joined, "reconstructing an area of sequences together");
            }
        }
        let count: usize = area.iter().map(|(_, images)| images.len()).sum();
        if count < crate::validate::MIN_REGISTERED {
            return Err(Ok(Ended::Skipped(format!(
                "{count} images, fewer than the {} a reconstruction needs",
                crate::validate::MIN_REGISTERED
            ))));
        }
        let engine = self
            .engine
            .as_ref()
            .map_err(|reason| Err(SfmError::EngineMissing(reason.clone())))?;
        let plan = self.plan(&area);
        let images: Vec<streetlevel_model::Image> =
            area.into_iter().flat_map(|(_, images)| images).collect();
        let key = work_key.get_or_init(|| plan.sequence.clone());
        let work = self.work_dir(key);
        let plan_file = work.join("plan.json");
        let previous: Option<Plan> = std::fs::read(&plan_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        if previous.as_ref() != Some(&plan) {
            let _ = std::fs::remove_dir_all(&work);
            std::fs::create_dir_all(&work).map_err(|error| Err(error.into()))?;
            let text = serde_json::to_vec(&plan).unwrap_or_default();
            std::fs::write(&plan_file, text).map_err(|error| Err(error.into()))?;
        }
        let frame = Topocentric::new(Lla {
            lat: plan.reference[0],
            lon: plan.reference[1],
            alt: plan.reference[2],
        });
        let mut pieces: Vec<(usize, Piece)> = Vec::new();
        let mut refusals: Vec<Value> = Vec::new();
        let mut reports: Vec<DriverReport> = Vec::new();
        let parts = plan.parts.len();
        let mut reused = 0;
        for (index, members) in plan.parts.iter().enumerate() {
            if interrupted() {
                return Err(Err(SfmError::Interrupted));
            }
            let dir = work.join(format!("part-{index:03}"));
            let report = if let Some(report) = report::finished_report(&dir) {
                reused += 1;
                report
            } else {
                let label = format!("part {} of {parts}", index + 1);
                let _ = self.queue.progress(worker, &format!("{label}: pictures"));
                progress(sequence, &format!("{label}: pictures"));
                self.prepare_part(&plan, index, &dir, engine).map_err(Err)?;
                engine
                    .run(&dir, &interrupted, &|stage| {
                        let text = format!("{label}: {stage}");
                        let _ = self.queue.progress(worker, &text);
                        progress(sequence, &text);
                    })
                    .map_err(|error| {
                        if interrupted() {
                            Err(SfmError::Interrupted)
                        } else {
                            Err(error)
                        }
                    })?
            };
            let given: Vec<Given> = members
                .iter()
                .enumerate()
                .map(|(position, &image)| Given {
                    name: image_name(position, plan.images[image].id),
                    gps: plan.images[image].gps,
                    has_altitude: plan.images[image].has_altitude,
                })
                .collect();
            for (model_index, model) in report.models.iter().enumerate() {
                let refusal = |reason: String| json!({"part": index, "model": model_index, "registered": model.registered, "reason": reason});
                let Some(directory) = model.directory(&dir) else {
                    refusals.push(refusal(String::from(
                        "it could not be aligned to the GPS positions",
                    )));
                    continue;
                };
                let checked = Model::read(&directory)
                    .and_then(|read| validate(&read, model.scale.unwrap_or(f64::NAN), &given));
                match checked {
                    Ok(mut piece) => {
                        // From the part's positions to the plan's.
                        for shot in &mut piece.shots {
                            shot.image = members[shot.image];
                        }
                        for point in &mut piece.points {
                            for observer in &mut point.observers {
                                *observer = members[*observer];
                            }
                        }
                        for refused in &mut piece.refused {
                            refused.0 = members[refused.0];
                        }
                        pieces.push((index, piece));
                    }
                    Err(error) => refusals.push(refusal(error.to_string())),
                }
            }
            reports.push(report);
        }
        if interrupted() {
            return Err(Err(SfmError::Interrupted));
        }
        let joined = join(&plan, &pieces);
        let mut report = report::report(
            &plan,
            &pieces,
            &joined,
            &refusals,
            &reports,
            started.elapsed(),
        );
        // Parts an earlier, interrupted run of the job had finished.
        report["parts_reused"] = json!(reused);
        if joined.home.iter().all(Option::is_none) {
            let reason = format!(
                "nothing of it was believed: {}",
                refusals
                    .iter()
                    .filter_map(|refusal| refusal["reason"].as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            report["registered"] = json!(0);
            return Err(Ok(Ended::Failed(
                if refusals.is_empty() {
                    String::from("the engine reconstructed nothing")
                } else {
                    reason
                },
                Some(report),
            )));
        }
        // IDs: one per cluster, per component and per registered image's mesh.
        let clusters: Vec<usize> = (0..pieces.len())
            .filter(|&piece| joined.home.iter().flatten().any(|&(home, _)| home == piece))
            .collect();
        let components: Vec<usize> = {
            let mut roots: Vec<usize> = clusters
                .iter()
                .map(|&piece| joined.component[piece])
                .collect();
            roots.sort_unstable();
            roots.dedup();
            roots
        };
        let registered = joined.home.iter().flatten().count();
        let count =
            u64::try_from(clusters.len() + components.len() + registered).unwrap_or(u64::MAX);
        let first = self
            .store
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .reserve_ids(count)
            .map_err(|error| Err(error.into()))?;
        let mut next = first;
        let mut take = || {
            let id = next;
            next += 1;
            id
        };
        let cluster_ids: HashMap<usize, MediaId> = clusters
            .iter()
            .map(|&piece| (piece, MediaId(take())))
            .collect();
        let component_ids: HashMap<usize, u64> =
            components.iter().map(|&root| (root, take())).collect();
        let reference = frame.reference();
        let mut updates = Vec::with_capacity(plan.images.len());
        let mut shots: Vec<ShotRow> = Vec::with_capacity(registered);
        for (index, planned) in plan.images.iter().enumerate() {
            let id = ImageId(planned.id);
            let Some((piece_index, shot_index)) = joined.home[index] else {
                // Not registered now: back to its own values if an earlier run gave it some.
                let had = images
                    .iter()
                    .any(|image| image.id == id && image.mesh.is_some());
                if had {
                    updates.push((id, ComputedUpdate::Original));
                }
                continue;
            };
            let piece = &pieces[piece_index].1;
            let shot = &piece.shots[shot_index];
            let centre = frame.to_lla(shot.pose.centre());
            let compass = shot.pose.compass();
            let merge_cc = component_ids[&joined.component[piece_index]];
            let mesh = MediaId(take());
            let cluster = cluster_ids[&piece_index];
            updates.push((
                id,
                ComputedUpdate::Reconstructed(Computed {
                    computed_geometry: Point::new(centre.lon, centre.lat),
                    computed_altitude: centre.alt,
                    computed_compass_angle: compass,
                    computed_rotation: shot.pose.angle_axis(),
                    camera_parameters: match shot.lens {
                        Lens::Perspective { focal, k1, k2 } => Some(vec![focal, k1, k2]),
                        Lens::Spherical => None,
                    },
                    atomic_scale: piece.scale,
                    merge_cc,
                    mesh,
                    sfm_cluster: cluster,
                }),
            ));
            shots.push(ShotRow {
                image: id,
                cluster,
                mesh,
                camera: planned.camera.clone(),
                rotation: shot.pose.angle_axis(),
                translation: shot.pose.translation,
                gps: planned.gps,
                scale: piece.scale,
                merge_cc,
                capture_time: planned.captured_at,
                compass: Some(compass),
            });
        }
        let rows: Vec<ClusterRow> = clusters
            .iter()
            .map(|&piece_index| {
                let piece = &pieces[piece_index].1;
                let homes: HashSet<usize> = joined
                    .home
                    .iter()
                    .enumerate()
                    .filter(|(_, home)| home.is_some_and(|(home, _)| home == piece_index))
                    .map(|(image, _)| image)
                    .collect();
                let mut cameras = Map::new();
                for shot in piece
                    .shots
                    .iter()
                    .filter(|shot| homes.contains(&shot.image))
                {
                    let planned = &plan.images[shot.image];
                    cameras
                        .entry(planned.camera.clone())
                        .or_insert_with(|| report::camera_json(planned, shot.lens));
                }
                #[allow(clippy::cast_possible_truncation)] // metres from the reference
                let points = piece
                    .points
                    .iter()
                    .filter_map(|point| {
                        let observers: Vec<ImageId> = point
                            .observers
                            .iter()
                            .filter(|observer| homes.contains(observer))
                            .map(|&observer| ImageId(plan.images[observer].id))
                            .collect();
                        (observers.len() >= cluster::MIN_OBSERVERS).then(|| StoredPoint {
                            xyz: point.xyz.map(|value| value as f32),
                            color: point.color,
                            observers,
                        })
                    })
                    .collect();
                ClusterRow {
                    id: cluster_ids[&piece_index],
                    sequence: plan.sequence.clone(),
                    reference,
                    cameras,
                    points,
                }
            })
            .collect();
        let newest: Vec<u64> = (0..plan.sequences.len())
            .map(|member| {
                plan.images
                    .iter()
                    .filter(|image| image.member == member)
                    .map(|image| image.id)
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let _ = self.queue.progress(worker, "writing");
        progress(sequence, "writing");
        let mut store = self.store.write().unwrap_or_else(PoisonError::into_inner);
        let written = store.set_computed(&updates, |connection, held| {
            let held: HashSet<ImageId> = held.iter().copied().collect();
            // The earlier clusters of these sequences, and of their images (an earlier area's).
            let mut old: Vec<MediaId> = Vec::new();
            for member in &plan.sequences {
                old.extend(cluster::clusters_of_sequence(connection, member)?);
            }
            let planned: Vec<ImageId> = plan.images.iter().map(|image| ImageId(image.id)).collect();
            old.extend(
                cluster::shots_of_images(connection, &planned)?
                    .into_iter()
                    .map(|shot| shot.cluster),
            );
            old.sort_unstable_by_key(|id| id.0);
            old.dedup();
            for old in old {
                cluster::delete_cluster(connection, old)?;
            }
            // Shots of images taken down meanwhile are not written, nor are they observers.
            let gone: HashSet<ImageId> = plan
                .images
                .iter()
                .map(|image| ImageId(image.id))
                .filter(|id| !held.contains(id))
                .collect();
            for row in &rows {
                let mut row = row.clone();
                row.points = cluster::without_observers(std::mem::take(&mut row.points), &gone);
                if shots
                    .iter()
                    .any(|shot| shot.cluster == row.id && held.contains(&shot.image))
                {
                    cluster::insert_cluster(connection, &row)?;
                }
            }
            for shot in shots.iter().filter(|shot| held.contains(&shot.image)) {
                cluster::insert_shot(connection, shot)?;
            }
            for (member, newest) in plan.sequences.iter().zip(&newest) {
                mark_done(connection, member, worker, *newest, &report)?;
            }
            Ok(())
        });
        drop(store);
        match written {
            Ok(_) => {}
            Err(streetlevel_store::StoreError::Database(streetlevel_db::DbError::Stopped)) => {
                return Err(Err(SfmError::LeaseLost));
            }
            Err(error) => return Err(Err(error.into())),
        }
        self.remove_work(key);
        report["wall_seconds"] = json!(started.elapsed().as_secs_f64());
        Ok(report)
    }
}
