//! A job's report: what was registered and how well, for the whole job and, for an area,
//! for each of its sequences (what `streetlevel sfm` prints, one line per sequence).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::join::Joined;
use super::plan::{Plan, Planned};
use crate::engine::DriverReport;
use crate::pose::angle_between;
use crate::validate::{Lens, Piece, median};

/// A heading changed by more than this counts in the report.
const HEADING_CHANGED_DEGREES: f64 = 15.0;

/// The report of a job whose pieces are joined.
pub(super) fn report(
    plan: &Plan,
    pieces: &[(usize, Piece)],
    joined: &Joined,
    refusals: &[Value],
    reports: &[DriverReport],
    elapsed: Duration,
) -> Value {
    let refused_images: Vec<Value> = pieces
        .iter()
        .flat_map(|(_, piece)| piece.refused.iter())
        .filter(|(image, _)| joined.home[*image].is_none())
        .map(|(image, reason)| json!({"image": plan.images[*image].id.to_string(), "reason": reason}))
        .collect();
    let mut report = summary(plan, pieces, joined, None);
    let mut components: Vec<usize> = joined
        .home
        .iter()
        .flatten()
        .map(|&(piece, _)| joined.component[piece])
        .collect();
    components.sort_unstable();
    components.dedup();
    let more = json!({
        "sequence": plan.sequence,
        "sequences": (0..plan.sequences.len())
            .map(|member| summary(plan, pieces, joined, Some(member)))
            .collect::<Vec<_>>(),
        "parts": plan.parts.len(),
        "crossing_parts": plan.spatial.iter().filter(|&&spatial| spatial).count(),
        "clusters": pieces.iter().enumerate().filter(|(piece, _)| joined.home.iter().flatten().any(|&(home, _)| home == *piece)).count(),
        "components": components.len(),
        "refused_images": refused_images,
        "refused_models": refusals,
        "engine": reports.first().map(|report| report.engine.clone()),
        "mappers": reports.iter().map(|report| report.mapper.clone()).collect::<Vec<_>>(),
        "engine_cpu_seconds": round(reports.iter().map(|report| report.cpu_total_seconds).sum(), 1),
        "engine_wall_seconds": round(reports.iter().map(|report| report.wall_seconds).sum(), 1),
        "engine_peak_rss_kb": reports.iter().map(|report| report.peak_rss_kb).max(),
        "wall_seconds": round(elapsed.as_secs_f64(), 1),
    });
    if let (Value::Object(report), Value::Object(more)) = (&mut report, more) {
        report.extend(more);
    }
    report
}

/// Images, registered, medians and headings of the job's images (`member`: of one of its
/// sequences).
fn summary(
    plan: &Plan,
    pieces: &[(usize, Piece)],
    joined: &Joined,
    member: Option<usize>,
) -> Value {
    let mut distances = Vec::new();
    let mut changes = Vec::new();
    let mut homes = Vec::new();
    let mut images = 0;
    let mut components: Vec<usize> = Vec::new();
    for (index, home) in joined.home.iter().enumerate() {
        if member.is_some_and(|member| plan.images[index].member != member) {
            continue;
        }
        images += 1;
        let Some((piece, shot)) = *home else {
            continue;
        };
        homes.push(piece);
        components.push(joined.component[piece]);
        let shot = &pieces[piece].1.shots[shot];
        distances.push(shot.gps_distance);
        if let Some(compass) = plan.images[index].compass {
            changes.push(angle_between(shot.pose.compass(), compass));
        }
    }
    homes.sort_unstable();
    homes.dedup();
    components.sort_unstable();
    components.dedup();
    let errors = pieces
        .iter()
        .enumerate()
        .filter(|(index, _)| member.is_none() || homes.contains(index))
        .map(|(_, (_, piece))| piece.median_error);
    let mut value = json!({
        "images": images,
        "registered": distances.len(),
        "median_reprojection_error_px": round(median(errors), 3),
        "median_gps_distance_m": round(median(distances.into_iter()), 2),
        "heading_change": {
            "median_degrees": round(median(changes.iter().copied()), 1),
            "over_15_degrees": changes.iter().filter(|&&change| change > HEADING_CHANGED_DEGREES).count(),
        },
    });
    if let Some(member) = member {
        value["sequence"] = json!(plan.sequences[member]);
        value["components"] = json!(components.len());
    }
    value
}

/// The report of a part whose run finished, if it did.
pub(super) fn finished_report(dir: &Path) -> Option<DriverReport> {
    let bytes = std::fs::read(dir.join("report.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A cluster's camera as the viewer reads it.
pub(super) fn camera_json(planned: &Planned, lens: Lens) -> Value {
    match lens {
        Lens::Perspective { focal, k1, k2 } => json!({
            "projection_type": "perspective",
            "width": planned.width,
            "height": planned.height,
            "focal": focal,
            "k1": k1,
            "k2": k2,
        }),
        Lens::Spherical => json!({
            "projection_type": "equirectangular",
            "width": planned.width,
            "height": planned.height,
        }),
    }
}

/// `value` rounded to `digits` decimals.
pub(super) fn round(value: f64, digits: i32) -> f64 {
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}
