"""streetlevel's driver of pycolmap: one reconstruction of one part of a sequence or an area.

Run by streetlevel-sfm as `python -I -B driver.py WORK_DIR` (isolated mode: no user site,
no environment variables read by Python itself, no bytecode written). WORK_DIR holds
`input.json` and `images/`; the driver writes `database.db`, one COLMAP text model per
reconstruction under `model/<k>/` (in the east-north-up frame of the GPS positions it was
given, aligned to them) and, last, `report.json`. It exits 0 when it wrote a report (also one
that says nothing could be reconstructed), non-zero otherwise, with the reason as the last
line on standard error. It reads nothing but WORK_DIR and fetches nothing.
"""

import json
import os
import resource
import sys
import time


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(2)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def progress(stage):
    sys.stdout.write(stage + "\n")
    sys.stdout.flush()


def write_json_atomically(path, value):
    temporary = path + ".partial"
    with open(temporary, "w") as out:
        json.dump(value, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def level_and_refit(np, pycolmap, model, names, locations):
    """Levels `model` (its cameras' mean up vector made vertical: street cameras are held
    about level, and a similarity fitted to the positions of a nearly straight track leaves
    the roll about it free), then fits the rotation about the vertical, the scale and the
    translation to the GPS positions again (horizontally, dropping positions off by more than
    three times the median twice; the height by the median offset). Returns the scale."""
    images = [image for image in model.images.values() if image.has_pose]
    ups = np.array([-image.cam_from_world().rotation.matrix()[1] for image in images])
    up = ups.mean(axis=0)
    up /= np.linalg.norm(up)
    vertical = np.array([0.0, 0.0, 1.0])
    axis = np.cross(up, vertical)
    sine = np.linalg.norm(axis)
    if sine > 1e-12:
        angle = np.arctan2(sine, float(up @ vertical))
        rotation = pycolmap.Rotation3d(axis / sine * angle).matrix()
        centroid = np.array([image.projection_center() for image in images]).mean(axis=0)
        model.transform(
            pycolmap.Sim3d(1.0, pycolmap.Rotation3d(rotation), centroid - rotation @ centroid)
        )
    prior = dict(zip(names, locations))
    centres = np.array([image.projection_center() for image in images])
    gps = np.array([prior[image.name] for image in images])
    keep = np.ones(len(images), dtype=bool)
    for _ in range(3):
        source, target = centres[keep, :2], gps[keep, :2]
        mean_source, mean_target = source.mean(axis=0), target.mean(axis=0)
        a, b = source - mean_source, target - mean_target
        cross = (a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]).sum()
        dot = (a * b).sum()
        theta = np.arctan2(cross, dot)
        scale = np.hypot(cross, dot) / max((a * a).sum(), 1e-12)
        cosine, sine = np.cos(theta), np.sin(theta)
        turn = np.array([[cosine, -sine], [sine, cosine]])
        shift = mean_target - scale * turn @ mean_source
        residuals = np.linalg.norm((scale * (turn @ centres[:, :2].T)).T + shift - gps[:, :2], axis=1)
        keep = residuals <= max(3 * np.median(residuals[keep]), 1.0)
    height = np.median(gps[keep, 2] - scale * centres[keep, 2])
    turn3 = np.array([[cosine, -sine, 0.0], [sine, cosine, 0.0], [0.0, 0.0, 1.0]])
    model.transform(
        pycolmap.Sim3d(float(scale), pycolmap.Rotation3d(turn3), np.append(shift, height))
    )
    return float(scale)


def main():
    if len(sys.argv) != 2:
        fail("usage: driver.py WORK_DIR")
    work = sys.argv[1]
    try:
        import numpy as np
        import pycolmap
    except ImportError as error:
        fail(f"the engine is not installed: {error}")
    pycolmap.logging.minloglevel = 1
    with open(os.path.join(work, "input.json")) as source:
        job = json.load(source)
    threads = int(job["threads"])
    images_dir = os.path.join(work, "images")
    database_path = os.path.join(work, "database.db")
    if os.path.exists(database_path):
        os.remove(database_path)
    stages = {}
    started_cpu = cpu_seconds()
    started_wall = time.time()

    progress("cameras")
    database = pycolmap.Database.open(database_path)
    camera_ids = []
    for camera in job["cameras"]:
        if camera["model"] == "EQUIRECTANGULAR":
            made = pycolmap.Camera.create_from_model_id(
                0, pycolmap.CameraModelId.EQUIRECTANGULAR, 0.0, camera["width"], camera["height"]
            )
        else:
            focal = camera.get("focal")
            made = pycolmap.Camera.create_from_model_id(
                0,
                pycolmap.CameraModelId.RADIAL,
                focal if focal else 1.2 * max(camera["width"], camera["height"]),
                camera["width"],
                camera["height"],
            )
            made.has_prior_focal_length = bool(focal)
        camera_ids.append(database.write_camera(made))
    database.close()

    progress("extract")
    extraction = pycolmap.FeatureExtractionOptions(
        num_threads=threads, use_gpu=False, max_image_size=int(job["max_image_size"])
    )
    extraction.sift.max_num_features = int(job["max_features"])
    # COLMAP's default (-1) doubles the picture first: four times the pixels to search, for
    # features smaller than a 2048 px street picture needs (docs/PERFORMANCE.md).
    extraction.sift.first_octave = int(job["first_octave"])
    for index, camera_id in enumerate(camera_ids):
        names = [image["name"] for image in job["images"] if image["camera"] == index]
        if not names:
            continue
        pycolmap.extract_features(
            database_path,
            images_dir,
            image_names=names,
            camera_mode=pycolmap.CameraMode.SINGLE,
            reader_options=pycolmap.ImageReaderOptions(existing_camera_id=camera_id),
            extraction_options=extraction,
            device=pycolmap.Device.cpu,
        )
    stages["extract"] = cpu_seconds() - started_cpu

    # The GPS positions as priors (replacing any the extraction read from a file's Exif).
    database = pycolmap.Database.open(database_path)
    database.clear_pose_priors()
    for image in job["images"]:
        stored = database.read_image_with_name(image["name"])
        sigma = float(image["sigma"])
        database.write_pose_prior(
            pycolmap.PosePrior(
                position=np.array(image["position"], dtype=float),
                position_covariance=np.diag([sigma**2, sigma**2, (2 * sigma) ** 2]),
                coordinate_system=pycolmap.PosePriorCoordinateSystem.CARTESIAN,
                corr_data_id=stored.data_id,
            )
        )
    database.close()

    progress("match")
    before = cpu_seconds()
    pycolmap.match_sequential(
        database_path,
        matching_options=pycolmap.FeatureMatchingOptions(num_threads=threads, use_gpu=False),
        pairing_options=pycolmap.SequentialPairingOptions(
            overlap=int(job["overlap"]), quadratic_overlap=False
        ),
        device=pycolmap.Device.cpu,
    )
    if int(job.get("spatial_neighbors", 0)) > 0:
        # Across sequences (an area): each image with its nearest by GPS position too; pairs
        # matched along the sequence already are not matched again.
        pycolmap.match_spatial(
            database_path,
            matching_options=pycolmap.FeatureMatchingOptions(num_threads=threads, use_gpu=False),
            pairing_options=pycolmap.SpatialPairingOptions(
                max_num_neighbors=int(job["spatial_neighbors"]),
                max_distance=float(job["spatial_distance"]),
                ignore_z=True,
            ),
            device=pycolmap.Device.cpu,
        )
    stages["match"] = cpu_seconds() - before

    names = [image["name"] for image in job["images"]]
    locations = np.array([image["position"] for image in job["images"]], dtype=float)
    total = len(names)
    best = None
    for mapper in job["mappers"]:
        progress("map " + mapper)
        before = cpu_seconds()
        output = os.path.join(work, "sparse-" + mapper)
        os.makedirs(output, exist_ok=True)
        # A focal length from Exif is kept: refined on a forward-moving street sequence it
        # drifts, trading off with the distortion terms (docs/PERFORMANCE.md).
        refine = bool(job["refine_intrinsics"])
        if mapper == "global":
            options = pycolmap.GlobalPipelineOptions(num_threads=threads, random_seed=int(job["seed"]))
            options.mapper.bundle_adjustment.refine_focal_length = refine
            options.mapper.bundle_adjustment.refine_extra_params = refine
            models = pycolmap.global_mapping(database_path, images_dir, output, options)
        else:
            options = pycolmap.IncrementalPipelineOptions(
                num_threads=threads, random_seed=int(job["seed"])
            )
            # Street sequences move forward: the defaults refuse every initial pair.
            options.mapper.init_max_forward_motion = 1.0
            options.mapper.init_min_tri_angle = 4.0
            options.use_prior_position = True
            options.use_robust_loss_on_prior_position = True
            options.ba_refine_focal_length = refine
            options.ba_refine_extra_params = refine
            options.mapper.abs_pose_refine_focal_length = refine
            options.mapper.abs_pose_refine_extra_params = refine
            models = pycolmap.incremental_mapping(database_path, images_dir, output, options)
        stages["map " + mapper] = cpu_seconds() - before
        # The largest reconstruction counts: two pieces of a walk are not one walk.
        registered = max((model.num_reg_images() for model in models.values()), default=0)
        if best is None or registered > best[1]:
            best = (mapper, registered, models)
        if registered >= float(job["min_registered_share"]) * total:
            break

    progress("align")
    report_models = []
    if best is not None:
        mapper, _, models = best
        for index, model in sorted(models.items()):
            similarity = pycolmap.align_reconstruction_to_locations(
                model,
                names,
                locations,
                3,
                pycolmap.RANSACOptions(max_error=float(job["alignment_max_error"])),
            )
            entry = {
                "registered": model.num_reg_images(),
                "points": model.num_points3D(),
                "aligned": similarity is not None,
            }
            if similarity is not None:
                model.transform(similarity)
                refit = level_and_refit(np, pycolmap, model, names, locations)
                directory = os.path.join("model", str(index))
                os.makedirs(os.path.join(work, directory), exist_ok=True)
                model.write_text(os.path.join(work, directory))
                entry["dir"] = directory
                entry["scale"] = float(similarity.scale) * refit
            report_models.append(entry)
    report = {
        "engine": f"pycolmap {pycolmap.__version__}",
        "mapper": None if best is None else best[0],
        "images": total,
        "models": report_models,
        "cpu_seconds": stages,
        "cpu_total_seconds": cpu_seconds() - started_cpu,
        "wall_seconds": time.time() - started_wall,
        "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    write_json_atomically(os.path.join(work, "report.json"), report)
    progress("done")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as error:  # the reason goes to streetlevel, as the last line
        fail(f"{type(error).__name__}: {error}")
