//! Structure from motion through the real binary (issue 39): the Lund walk of
//! `../shared/data/opensfm-blur-pairs` (29 photos whose Exif compass says about 184° while the
//! walk goes about 341°) imported with `streetlevel import` and its defaults, reconstructed by
//! a server's worker with the engine `cargo xtask test` installs (pycolmap), killed in the
//! middle of the job and resumed by the next server; then what the API, the media routes and
//! the computed coverage tiles give, and what a takedown leaves. And, with a stand-in engine
//! that writes a model with a NaN or with every camera kilometres from its GPS position, that
//! such a model is refused and leaves the GPS values; without the engine, that nothing breaks;
//! and that two sequences that meet are reconstructed together, as an area, into one
//! connected component.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use streetlevel_tests::{
    Response, Server, create_app, run_with_env, test_models_dir, test_sfm_engine_dir,
};

const BINARY: &str = env!("CARGO_BIN_EXE_streetlevel");
/// The Lund walk's photos.
const LUND: std::ops::RangeInclusive<u32> = 1..=29;

fn photos_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opensfm-blur-pairs");
    assert!(
        dir.is_dir(),
        "the test photos are missing: {} (see ../shared/data/README.md)",
        dir.display()
    );
    dir
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("streetlevel-sfm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copies the unblurred Lund photos `numbers` into `root/photos` and imports them into
/// `root/data` with `streetlevel import`'s defaults (blurring on, with the models the
/// project's setup installs; off only where they are missing outside CI).
fn import(root: &Path, numbers: std::ops::RangeInclusive<u32>, blur: bool) -> PathBuf {
    import_folder(root, "photos", numbers, blur)
}

/// As [`import`], from the folder `root/folder` (a folder is a sequence of its own).
fn import_folder(
    root: &Path,
    folder: &str,
    numbers: std::ops::RangeInclusive<u32>,
    blur: bool,
) -> PathBuf {
    let folder = root.join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    for number in numbers {
        let name = format!("before_lund_images_{number:02}.jpg");
        std::fs::copy(photos_dir().join(&name), folder.join(&name)).unwrap();
    }
    let data = root.join("data");
    let models = test_models_dir().filter(|_| blur);
    let models_text = models
        .as_ref()
        .map(|dir| dir.to_string_lossy().into_owned());
    let mut env = vec![(
        "STREETLEVEL_BLUR",
        if models.is_some() { "true" } else { "false" },
    )];
    if let Some(models) = &models_text {
        env.push(("STREETLEVEL_BLUR_MODELS_DIR", models));
    }
    let printed = run_with_env(
        Path::new(BINARY),
        &[
            "import",
            "--data",
            &data.to_string_lossy(),
            &folder.to_string_lossy(),
        ],
        &env,
    );
    assert!(printed.contains("imported"), "{printed}");
    data
}

fn sqlite(data: &Path) -> rusqlite::Connection {
    let connection = rusqlite::Connection::open(data.join("streetlevel.sqlite")).unwrap();
    connection.busy_timeout(Duration::from_secs(10)).unwrap();
    connection
}

/// A job's row.
struct JobRow {
    sequence: String,
    state: String,
    reason: Option<String>,
    progress: Option<String>,
    report: Option<String>,
}

/// The job rows.
fn jobs(data: &Path) -> Vec<JobRow> {
    let connection = sqlite(data);
    let Ok(mut statement) =
        connection.prepare("SELECT sequence, state, reason, progress, report FROM sfm_jobs")
    else {
        return Vec::new();
    };
    statement
        .query_map([], |row| {
            Ok(JobRow {
                sequence: row.get(0)?,
                state: row.get(1)?,
                reason: row.get(2)?,
                progress: row.get(3)?,
                report: row.get(4)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn wait_for<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {} s",
            limit.as_secs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The path and query of an absolute media URL.
fn local(url: &str) -> &str {
    let rest = url.strip_prefix("http://").unwrap();
    &rest[rest.find('/').unwrap()..]
}

/// The initial bearing from one point to another (degrees).
fn bearing(from: [f64; 2], to: [f64; 2]) -> f64 {
    let (lon1, lat1) = (from[0].to_radians(), from[1].to_radians());
    let (lon2, lat2) = (to[0].to_radians(), to[1].to_radians());
    let y = (lon2 - lon1).sin() * lat2.cos();
    let x = lat1.cos() * lat2.sin() - lat1.sin() * lat2.cos() * (lon2 - lon1).cos();
    (y.atan2(x).to_degrees() + 360.0) % 360.0
}

fn metres(a: [f64; 2], b: [f64; 2]) -> f64 {
    let north = (b[1] - a[1]).to_radians() * 6_371_000.0;
    let east = (b[0] - a[0]).to_radians() * 6_371_000.0 * a[1].to_radians().cos();
    north.hypot(east)
}

fn angle_between(a: f64, b: f64) -> f64 {
    let difference = (a - b).rem_euclid(360.0);
    difference.min(360.0 - difference)
}

fn point(value: &Value) -> [f64; 2] {
    let coordinates = value["coordinates"].as_array().unwrap();
    [
        coordinates[0].as_f64().unwrap(),
        coordinates[1].as_f64().unwrap(),
    ]
}

/// The direction of travel at each image of a track: the bearing of the GPS track from the
/// last position at least 25 m behind to the first at least 25 m ahead (the ends: as far as
/// the track goes), which a few metres of GPS noise between neighbours cannot turn.
fn travel(track: &[[f64; 2]]) -> Vec<f64> {
    (0..track.len())
        .map(|index| {
            let behind = (0..index)
                .rev()
                .find(|&other| metres(track[other], track[index]) >= 25.0)
                .unwrap_or(0);
            let ahead = (index + 1..track.len())
                .find(|&other| metres(track[index], track[other]) >= 25.0)
                .unwrap_or(track.len() - 1);
            bearing(track[behind], track[ahead])
        })
        .collect()
}

/// Inflates a zlib body.
fn inflate(body: &[u8]) -> Value {
    let mut text = String::new();
    flate2::read::ZlibDecoder::new(body)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A mesh's vertices and faces from the viewer's unpacked protobuf.
fn decode_mesh(body: &[u8]) -> (Vec<[f32; 3]>, Vec<u32>) {
    let mut floats = Vec::new();
    let mut faces = Vec::new();
    let mut at = 0;
    while at < body.len() {
        match body[at] {
            0x0D => {
                floats.push(f32::from_le_bytes(body[at + 1..at + 5].try_into().unwrap()));
                at += 5;
            }
            0x10 => {
                let mut value = 0u32;
                let mut shift = 0;
                at += 1;
                loop {
                    let byte = body[at];
                    at += 1;
                    value |= u32::from(byte & 0x7F) << shift;
                    shift += 7;
                    if byte & 0x80 == 0 {
                        break;
                    }
                }
                faces.push(value);
            }
            other => panic!("unexpected protobuf tag {other:#x} at {at}"),
        }
    }
    assert_eq!(floats.len() % 3, 0);
    let vertices = floats.chunks_exact(3).map(|v| [v[0], v[1], v[2]]).collect();
    (vertices, faces)
}

/// Processes whose command line names `needle` (the engine's driver of a data directory).
fn processes_naming(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).contains(needle))
        })
        .collect()
}

const FIELDS: &str = "id,captured_at,geometry,computed_geometry,compass_angle,computed_compass_angle,\
computed_rotation,computed_altitude,altitude,camera_parameters,atomic_scale,merge_cc,mesh,sfm_cluster";

fn images_of(server: &Server, token: &str, sequence: &str) -> Vec<Value> {
    let response = server.request(
        "GET",
        &format!("/images?sequence_ids={sequence}&fields={FIELDS}"),
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    let mut images: Vec<Value> = response.json()["data"].as_array().unwrap().clone();
    images.sort_by_key(|image| image["captured_at"].as_i64());
    images
}

fn media(server: &Server, url: &str) -> Response {
    server.get(local(url))
}

/// The cluster at `url` once its shot of `image` is there (`present`) or not, within 10 s.
fn cluster_once(server: &Server, url: &str, image: u64, present: bool, what: &str) -> Value {
    wait_for(what, Duration::from_secs(10), || {
        let response = media(server, url);
        if response.status != 200 {
            return None;
        }
        let reconstruction = inflate(&response.body);
        let has = reconstruction[0]["shots"]
            .as_object()
            .unwrap()
            .contains_key(&image.to_string());
        (has == present).then_some(reconstruction)
    })
}

/// Runs `streetlevel images ACTION ID` on the data directory a server serves.
fn take_down(server: &Server, data: &str, action: &str, image: u64) {
    run_with_env(
        Path::new(BINARY),
        &["images", action, &image.to_string(), "--data", data],
        &server.admin_env(),
    );
}

#[test]
#[allow(clippy::too_many_lines)] // one walk through import, a crash, the results and takedowns
fn the_lund_walk_is_reconstructed_resumed_after_a_crash_served_and_taken_down() {
    let Some(engine) = test_sfm_engine_dir() else {
        return;
    };
    let engine = engine.to_string_lossy().into_owned();
    let root = temp_dir("lund");
    let data = import(&root, LUND, true);
    let token = create_app(Path::new(BINARY), &data, "read");
    // Parts of 12 images (the walk is three, joined), so that a crash falls between parts;
    // a lease of 3 s, so that the next server takes the job over soon.
    let flags = [
        "--sfm-workers",
        "1",
        "--sfm-engine-dir",
        &engine,
        "--sfm-settle-seconds",
        "0",
        "--sfm-part-images",
        "12",
        "--sfm-lease-seconds",
        "3",
    ];
    let mut first = Server::start_captured(Path::new(BINARY), &data, &flags, &[]);
    let sequence = wait_for(
        "the job reaches its second part",
        Duration::from_secs(600),
        || {
            jobs(&data).into_iter().find_map(|job| {
                (job.state == "running"
                    && job
                        .progress
                        .is_some_and(|progress| progress.starts_with("part 2 of 3")))
                .then_some(job.sequence)
            })
        },
    );
    // Killed as a crash kills it: the engine's child dies with it.
    let work = data.join(streetlevel_sfm::WORK_DIR);
    let work_text = work.to_string_lossy().into_owned();
    kill_hard(first.pid());
    assert!(
        !first.is_running() || {
            std::thread::sleep(Duration::from_millis(500));
            !first.is_running()
        }
    );
    wait_for(
        "the engine dies with the server",
        Duration::from_secs(10),
        || processes_naming(&work_text).is_empty().then_some(()),
    );
    drop(first);
    let second = Server::start_captured(Path::new(BINARY), &data, &flags, &[]);
    let (state, reason, report) = wait_for("the job ends", Duration::from_secs(900), || {
        jobs(&data).into_iter().find_map(|job| {
            matches!(job.state.as_str(), "done" | "failed" | "skipped")
                .then_some((job.state, job.reason, job.report))
        })
    });
    assert_eq!(state, "done", "{reason:?} {report:?}\n{}", second.stderr());
    let report: Value = serde_json::from_str(&report.unwrap()).unwrap();
    eprintln!("report: {report}");
    assert!(report["parts_reused"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(report["parts"], 3, "{report}");
    assert!(
        !work.join("plan.json").exists(),
        "the work directory is removed"
    );

    // What the API gives.
    let images = images_of(&second, &token, &sequence);
    // The last two photos were taken at one spot facing one way: the import keeps one.
    assert_eq!(images.len(), 28);
    let track: Vec<[f64; 2]> = images
        .iter()
        .map(|image| point(&image["geometry"]))
        .collect();
    let directions = travel(&track);
    let registered: Vec<usize> = (0..images.len())
        .filter(|&index| images[index]["sfm_cluster"].is_object())
        .collect();
    assert!(
        registered.len() * 10 >= images.len() * 9,
        "{} of {} registered",
        registered.len(),
        images.len()
    );
    let mut agreeing = 0;
    let mut distances = Vec::new();
    let mut exif_off = Vec::new();
    for &index in &registered {
        let image = &images[index];
        let computed = image["computed_compass_angle"].as_f64().unwrap();
        if angle_between(computed, directions[index]) <= 15.0 {
            agreeing += 1;
        }
        exif_off.push(angle_between(
            image["compass_angle"].as_f64().unwrap(),
            directions[index],
        ));
        distances.push(metres(
            point(&image["geometry"]),
            point(&image["computed_geometry"]),
        ));
        let scale = image["atomic_scale"].as_f64().unwrap();
        assert!(scale > 0.01 && scale < 50.0, "{image}");
        assert!(image["merge_cc"].is_number(), "{image}");
        let parameters: Vec<f64> = image["camera_parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|value| value.as_f64().unwrap())
            .collect();
        assert_eq!(parameters.len(), 3, "{image}");
        assert!((0.5..2.0).contains(&parameters[0]), "focal: {image}");
        let rotation = image["computed_rotation"].as_array().unwrap();
        assert_eq!(rotation.len(), 3, "{image}");
        assert!(
            image["computed_altitude"].as_f64().unwrap().is_finite(),
            "{image}"
        );
    }
    distances.sort_by(f64::total_cmp);
    exif_off.sort_by(f64::total_cmp);
    let median_distance = distances[distances.len() / 2];
    eprintln!(
        "{} of {} registered, {agreeing} with the computed compass within 15° of travel, median \
         distance to GPS {median_distance:.1} m, the Exif compass a median {:.0}° off",
        registered.len(),
        images.len(),
        exif_off[exif_off.len() / 2]
    );
    assert!(
        agreeing * 10 >= registered.len() * 9,
        "{agreeing} of {} agree",
        registered.len()
    );
    assert!(median_distance < 10.0, "{median_distance}");
    // The camera's own compass, kept as `compass_angle`, is the wrong one.
    assert!(exif_off[exif_off.len() / 2] > 90.0, "{exif_off:?}");

    // The computed coverage tiles show the computed positions; the original ones, the GPS.
    let probe = &images[registered[registered.len() / 2]];
    let id: u64 = probe["id"].as_str().unwrap().parse().unwrap();
    for (tileset, field, compass) in [
        (
            "svc1_computed_public",
            "computed_geometry",
            "computed_compass_angle",
        ),
        ("svc1_public", "geometry", "compass_angle"),
    ] {
        let [lon, lat] = point(&probe[field]);
        let tile = streetlevel_mvt::TileId::containing(lon, lat, 14).unwrap();
        let response = second.get(&format!(
            "/maps/vtp/{tileset}/2/14/{}/{}?access_token={token}",
            tile.x(),
            tile.y()
        ));
        assert_eq!(response.status, 200);
        let decoded = streetlevel_mvt::decode(&response.body).unwrap();
        let layer = decoded
            .layers
            .iter()
            .find(|layer| layer.name == "image")
            .unwrap();
        let feature = layer
            .features
            .iter()
            .find(|feature| {
                matches!(feature.properties.get("id"), Some(streetlevel_mvt::Value::Uint(value)) if *value == id)
                    || matches!(feature.properties.get("id"), Some(streetlevel_mvt::Value::Int(value)) if u64::try_from(*value).ok() == Some(id))
            })
            .unwrap_or_else(|| panic!("image {id} in {tileset}"));
        let streetlevel_mvt::Geometry::Points(points) = &feature.geometry else {
            panic!("a point");
        };
        let shown = points.0[0];
        let (world_x, world_y) = streetlevel_mvt::lon_lat_to_world(lon, lat);
        let extent = f64::from(layer.extent);
        let expected_x = (world_x * 16384.0 - f64::from(tile.x())) * extent;
        let expected_y = (world_y * 16384.0 - f64::from(tile.y())) * extent;
        assert!(
            (f64::from(shown.x()) - expected_x).abs() <= 1.0
                && (f64::from(shown.y()) - expected_y).abs() <= 1.0,
            "{tileset} shows {id} at {shown:?}, its {field} is at ({expected_x}, {expected_y})"
        );
        // Map clients draw the viewing cone from the tile's `compass_angle`: the computed
        // tiles give the computed heading, the original ones the camera's own.
        // (Rounded as the tiles round: whole degrees.)
        let expected: i64 = probe[compass]
            .as_f64()
            .unwrap()
            .round()
            .to_string()
            .parse()
            .unwrap();
        assert_eq!(
            feature.properties.get("compass_angle"),
            Some(&streetlevel_mvt::Value::Int(expected)),
            "{tileset}: the compass of {id}, its {compass} rounded"
        );
    }

    // The mesh and the cluster through the media routes.
    let mesh = media(&second, probe["mesh"]["url"].as_str().unwrap());
    assert_eq!(mesh.status, 200);
    assert_eq!(mesh.header("content-type"), Some("application/x-protobuf"));
    let (vertices, faces) = decode_mesh(&mesh.body);
    assert!(vertices.len() > 20, "{} vertices", vertices.len());
    assert!(faces.len() % 3 == 0 && faces.iter().all(|&index| (index as usize) < vertices.len()));
    assert!(
        vertices[..4].iter().all(|corner| corner[2] > 0.0),
        "{:?}",
        &vertices[..4]
    );
    assert_eq!(
        mesh.header("surrogate-key"),
        Some(format!("image/{id}").as_str())
    );
    let cluster_url = probe["sfm_cluster"]["url"].as_str().unwrap().to_owned();
    let cluster = media(&second, &cluster_url);
    assert_eq!(cluster.status, 200);
    let reconstruction = inflate(&cluster.body);
    let shots = reconstruction[0]["shots"].as_object().unwrap();
    assert!(shots.contains_key(&id.to_string()));
    assert!(reconstruction[0]["points"].as_object().unwrap().len() > 50);
    assert!(reconstruction[0]["reference_lla"]["latitude"].is_number());
    let keys = cluster.header("surrogate-key").unwrap().to_owned();
    assert!(
        keys.split(' ').any(|key| key == format!("image/{id}")),
        "{keys}"
    );

    // Taking down: an erased image leaves no trace in its cluster; a hidden one is left out
    // until it is restored.
    let data_text = data.to_string_lossy().into_owned();
    let members: Vec<u64> = shots.keys().map(|key| key.parse().unwrap()).collect();
    let hidden = *members.iter().find(|&&member| member != id).unwrap();
    take_down(&second, &data_text, "delete", id);
    let reconstruction = cluster_once(
        &second,
        &cluster_url,
        id,
        false,
        "the erased image's cluster is rebuilt",
    );
    // Image IDs are shot keys and nowhere else in a cluster (points are keyed by index):
    // no shot and no string names it.
    assert!(
        !reconstruction[0]["shots"]
            .as_object()
            .unwrap()
            .contains_key(&id.to_string())
    );
    assert!(
        !strings_in(&reconstruction).contains(&id.to_string()),
        "the erased image's ID is still in its cluster"
    );
    assert_eq!(
        media(&second, probe["mesh"]["url"].as_str().unwrap()).status,
        404
    );
    {
        let connection = sqlite(&data);
        let shots: i64 = connection
            .query_row(
                "SELECT count(*) FROM sfm_shots WHERE image_id = ?1",
                [id.cast_signed()],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(shots, 0);
        let mut statement = connection
            .prepare("SELECT points FROM sfm_clusters")
            .unwrap();
        let blobs: Vec<Vec<u8>> = statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for blob in blobs {
            let points = streetlevel_sfm::cluster::decode_points(&blob).unwrap();
            assert!(
                points
                    .iter()
                    .all(|point| !point.observers.contains(&streetlevel_model::ImageId(id)))
            );
            assert!(points.iter().all(|point| point.observers.len() >= 2));
        }
    }
    let hidden_images = images_of(&second, &token, &sequence);
    let hidden_mesh = hidden_images
        .iter()
        .find(|image| image["id"].as_str() == Some(hidden.to_string().as_str()))
        .unwrap()["mesh"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    take_down(&second, &data_text, "hide", hidden);
    cluster_once(
        &second,
        &cluster_url,
        hidden,
        false,
        "the hidden image leaves its cluster",
    );
    assert_eq!(media(&second, &hidden_mesh).status, 404);
    take_down(&second, &data_text, "restore", hidden);
    cluster_once(
        &second,
        &cluster_url,
        hidden,
        true,
        "the restored image is back in its cluster",
    );
    assert_eq!(media(&second, &hidden_mesh).status, 200);
    drop(second);
    let _ = std::fs::remove_dir_all(&root);
}

/// Every string value in a JSON value.
fn strings_in(value: &Value) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => {
                found.insert(text.clone());
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.values()),
            _ => {}
        }
    }
    found
}

/// SIGKILL, as a crash or the OOM killer ends a process.
fn kill_hard(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A stand-in for the engine's interpreter: answers the version check as pycolmap 4.2.1 and,
/// run on a work directory, writes a model of every image given, each camera at identity
/// rotation `translation` (`X Y Z`, `NaN` allowed) from its place, and the report.
fn fake_engine(root: &Path, translation: &str) -> PathBuf {
    let dir = root.join(format!("fake-engine-{}", translation.replace(' ', "_")));
    std::fs::create_dir_all(dir.join("venv/bin")).unwrap();
    let script = format!(
        r#"#!/bin/sh
# python -I -B -c "import pycolmap; ..." | python -I -B driver.py WORK
if [ "$3" = "-c" ]; then echo 4.2.1; exit 0; fi
work="$4"
mkdir -p "$work/model/0"
echo "1 RADIAL 1024 768 1000 512 384 0 0" > "$work/model/0/cameras.txt"
: > "$work/model/0/images.txt"
count=0
for name in $(ls "$work/images"); do
  count=$((count + 1))
  echo "$count 1 0 0 0 {translation} 1 $name" >> "$work/model/0/images.txt"
  echo "" >> "$work/model/0/images.txt"
done
echo "1 0 0 10 1 2 3 0.5 1 0 2 0" > "$work/model/0/points3D.txt"
echo "{{\"engine\": \"pycolmap 4.2.1\", \"mapper\": \"global\", \"images\": $count, \"models\": [{{\"registered\": $count, \"points\": 1, \"aligned\": true, \"dir\": \"model/0\", \"scale\": 1.0}}], \"cpu_seconds\": {{}}, \"cpu_total_seconds\": 0, \"wall_seconds\": 0, \"peak_rss_kb\": 0}}" > "$work/report.json"
"#
    );
    let python = dir.join("venv/bin/python");
    std::fs::write(&python, script).unwrap();
    let mut permissions = std::fs::metadata(&python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&python, permissions).unwrap();
    dir
}

/// An image's location, computed location, computed compass angle and cluster.
type Values = (f64, f64, Option<f64>, Option<f64>, Option<f64>, Option<i64>);

/// The computed values of the images in the data directory's `SQLite` file, by ID.
fn computed_values(data: &Path) -> BTreeMap<i64, Values> {
    let connection = sqlite(data);
    let mut statement = connection
        .prepare("SELECT id, lon, lat, computed_lon, computed_lat, computed_compass_angle, sfm_cluster FROM store_images")
        .unwrap();
    statement
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                (
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                ),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_model_with_a_nan_or_a_wild_position_is_refused_and_leaves_the_gps_values() {
    let root = temp_dir("refused");
    let data = import(&root, 1..=6, false);
    let before = computed_values(&data);
    assert_eq!(before.len(), 6);
    for (id, (lon, lat, computed_lon, computed_lat, _, cluster)) in &before {
        assert_eq!(
            (Some(*lon), Some(*lat)),
            (*computed_lon, *computed_lat),
            "{id}"
        );
        assert_eq!(*cluster, None);
    }
    let data_text = data.to_string_lossy().into_owned();
    for (translation, refusal) in [
        ("0 nan 0", "not a number"),
        ("-5000 0 0", "from their GPS positions"),
    ] {
        let engine = fake_engine(&root, translation);
        let printed = run_with_env(
            Path::new(BINARY),
            &[
                "sfm",
                "--data",
                &data_text,
                "--all",
                "--sfm-engine-dir",
                &engine.to_string_lossy(),
            ],
            &[],
        );
        assert!(printed.contains("failed"), "{printed}");
        assert!(printed.contains(refusal), "{printed}");
        assert_eq!(
            computed_values(&data),
            before,
            "the GPS values stay: {printed}"
        );
        let job = jobs(&data).into_iter().next().unwrap();
        assert_eq!(job.state, "failed");
        assert!(job.reason.unwrap().contains(refusal));
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn without_the_engine_nothing_breaks_and_the_job_says_why() {
    let root = temp_dir("no-engine");
    let data = import(&root, 1..=4, false);
    let before = computed_values(&data);
    let data_text = data.to_string_lossy().into_owned();
    let missing = root.join("no-engine-here");
    let printed = run_with_env(
        Path::new(BINARY),
        &[
            "sfm",
            "--data",
            &data_text,
            "--sfm-engine-dir",
            &missing.to_string_lossy(),
        ],
        &[],
    );
    assert!(printed.contains("skipped"), "{printed}");
    assert!(printed.contains("cargo xtask models"), "{printed}");
    assert_eq!(computed_values(&data), before);
    // A server without the engine serves as before and says why in its log.
    let server = Server::start_captured(
        Path::new(BINARY),
        &data,
        &[
            "--sfm-workers",
            "1",
            "--sfm-engine-dir",
            &missing.to_string_lossy(),
        ],
        &[],
    );
    let token = create_app(Path::new(BINARY), &data, "read");
    let id = before.keys().next().unwrap();
    let response = server.request(
        "GET",
        &format!("/{id}?fields=computed_geometry,geometry,sfm_cluster"),
        &[("Authorization", &format!("OAuth {token}"))],
        b"",
    );
    assert_eq!(response.status, 200);
    let image = response.json();
    assert_eq!(image["computed_geometry"], image["geometry"]);
    assert!(
        image.get("sfm_cluster").is_none_or(Value::is_null),
        "{image}"
    );
    let log = server.stderr_once_it_contains("structure from motion cannot run");
    assert!(log.contains("cargo xtask models"), "{log}");
    let sequences: BTreeSet<String> = jobs(&data).into_iter().map(|job| job.sequence).collect();
    assert_eq!(sequences.len(), 1);
    let _ = std::fs::remove_dir_all(&root);
}

/// An image of the data directory's `SQLite` file: its sequence, position, computed compass
/// angle and `merge_cc`.
type Placed = (String, [f64; 2], Option<f64>, Option<i64>);

/// Every image, in capture order.
fn images_in_capture_order(data: &Path) -> Vec<Placed> {
    let connection = sqlite(data);
    let mut statement = connection
        .prepare(
            "SELECT sequence, lon, lat, computed_compass_angle, merge_cc FROM store_images
             ORDER BY captured_at, id",
        )
        .unwrap();
    statement
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                [row.get(1)?, row.get(2)?],
                row.get(3)?,
                row.get(4)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The Lund walk recorded as two sequences (its first 14 photos, then the rest, imported
/// from two folders) that meet where one ends and the other starts: `streetlevel sfm --bbox`
/// around them reconstructs them in one job, as an area, in one engine run over both (matched
/// along each and across them by position), and every registered image of both sequences
/// ends in one connected component (`merge_cc`), with a computed compass along the walk.
#[test]
fn two_sequences_that_meet_are_reconstructed_as_one_area_with_one_merge_cc() {
    let Some(engine) = test_sfm_engine_dir() else {
        return;
    };
    let engine = engine.to_string_lossy().into_owned();
    let root = temp_dir("area");
    let data = import_folder(&root, "first", 1..=14, false);
    import_folder(&root, "second", 15..=29, false);
    let data_text = data.to_string_lossy().into_owned();
    let images = images_in_capture_order(&data);
    let sequences: BTreeSet<&str> = images.iter().map(|image| image.0.as_str()).collect();
    assert_eq!(sequences.len(), 2, "two folders, two sequences");
    let track: Vec<[f64; 2]> = images.iter().map(|image| image.1).collect();
    let directions = travel(&track);
    let (mut west, mut south, mut east, mut north): (f64, f64, f64, f64) =
        (180.0, 90.0, -180.0, -90.0);
    for position in &track {
        west = west.min(position[0]);
        east = east.max(position[0]);
        south = south.min(position[1]);
        north = north.max(position[1]);
    }
    let bbox = format!("{west},{south},{east},{north}");
    {
        let printed = run_with_env(
            Path::new(BINARY),
            &[
                "sfm",
                "--data",
                &data_text,
                "--bbox",
                &bbox,
                "--sfm-engine-dir",
                &engine,
            ],
            &[],
        );
        eprintln!("{printed}");
        assert!(
            printed.contains("reconstructed with 1 other sequences as an area"),
            "{printed}"
        );
        assert!(printed.contains("1 connected components"), "{printed}");
        let jobs = jobs(&data);
        assert_eq!(jobs.len(), 2);
        for job in &jobs {
            assert_eq!(job.state, "done", "{}: {:?}", job.sequence, job.reason);
            let report: Value = serde_json::from_str(job.report.as_deref().unwrap()).unwrap();
            assert_eq!(report["sequences"].as_array().unwrap().len(), 2, "{report}");
            assert_eq!(report["parts"], 1, "{report}");
        }
        let images = images_in_capture_order(&data);
        let registered: Vec<usize> = (0..images.len())
            .filter(|&index| images[index].3.is_some())
            .collect();
        let components: BTreeSet<i64> = images.iter().filter_map(|image| image.3).collect();
        let agreeing = registered
            .iter()
            .filter(|&&index| {
                images[index]
                    .2
                    .is_some_and(|compass| angle_between(compass, directions[index]) <= 15.0)
            })
            .count();
        eprintln!(
            "{} of {} registered, {agreeing} within 15° of travel, \
             components {components:?}",
            registered.len(),
            images.len()
        );
        assert!(registered.len() * 10 >= images.len() * 9);
        assert!(agreeing * 10 >= registered.len() * 9);
        assert_eq!(components.len(), 1, "one merge_cc: {components:?}");
        for sequence in &sequences {
            assert!(
                registered.iter().any(|&index| images[index].0 == *sequence),
                "{sequence} has registered images"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
