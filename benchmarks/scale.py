"""Benchmark: a detection project of --objects objects (10 a image; 10,000,000 for the issue "Ten million") from a
seeded generator, brought in as a user's object manifest would bring it (`hibug new --manifest objects.parquet`),
against the bare load of the same rows in the same run: pyarrow's Parquet read and one bulk insert of the table into
an SQLite file (no validation, no keys, no matching).

The generator (`generate`): objects spread over the images at random, a box each, one of five classes, 50 tag columns
(attr:t00 ... attr:t49, two to five values each) and a detection by the model `detector`: found at 85%, a little off
and mostly of the right class, at 25% inside the planted slice "t00 = a & t01 = b" (so slices have something to
find); 5% more rows are detections on no object. Every image is a hard link to a small PNG, one for every 50,000
images (an image's path is its identity; a million distinct files would fill the disk), so the images cost directory
entries, not space. The files are written once into --dir and reused.

Prints each step's wall time and the peak resident memory of the process that ran it (the import runs as the
command a user runs), and the import's ratio to the bare load.
--parts N brings the objects in as N manifests of whole images, one after another (`hibug new` with the first,
`hibug import` with each other), as a team adds data in parts; the bare load reads and inserts the same N files.
One import of ten million objects needs about 75 GiB (its COCO records are Python objects); in parts of a million,
each import's peak is a part's.
--models 2 adds a second detector (`detector-v2`, the planted slice fixed) to the same rows, for Compare.
--database URL imports into a project whose tables are on that PostgreSQL server (`hibug new --database`), against
the same read and a COPY into a table there.
--map (after a run that built the project; nothing is imported) stores a generated 2-D layout of every object as the
map 'generated-layout' (generated_map), so that `benchmarks/ui.py --project` times the Embedding map page at this size
(the map's drawing, recolouring and lasso, not an encoder's work).
--first-read (after a run that built the project; nothing is imported) times reading every table of it from SQL, as a
newly started dashboard first does, in a process of its own, with its peak memory.
--commands (after a run that built the project; nothing is imported) times `hibug info`, `hibug slices` and, with
--models 2, `hibug compare` on it, each run a process of its own (--repeat runs), with the wall time and peak memory;
then the same comparison made as the dashboard makes a big project's first one (a background job, which keeps it) and
`hibug compare` reading what it kept.
Usage: python benchmarks/scale.py [--objects 1000000] [--dir /tmp/hibug-scale] [--repeat 1] [--parts 1] [--models 1]
       [--database URL] [--map] [--first-read] [--commands]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

CLASSES = ("car", "person", "bicycle", "dog", "sign")
TAGS = 50
PER_IMAGE = 10
PLANTED = (("t00", "a"), ("t01", "b"))  # objects missed more often here
IMAGE_SIZE = (640, 480)
LINKS_PER_FILE = 50_000  # hard links to one file (ext4 allows 65,000)
# The databases --database makes (emptied first) on the server; a test passes names of its own, so that running the
# tests against a server a benchmark uses never drops the benchmark's project.
PROJECT_DATABASE, BARE_DATABASE = "hibug_scale_project", "hibug_scale_bare"


def tag_values(column: int) -> list[str]:
    """The values of tag column `column`: two to five letters."""
    return list("abcde"[: 2 + column % 4])


def generate(folder: Path, objects: int, seed: int = 0, models: int = 1) -> Path:
    """Write folder/objects.parquet (and folder/images/...) for `objects` objects; return the manifest's path. With
    models=2 a second detector, `detector-v2`, finds the planted slice's objects as often as the others (its fix)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    manifest = folder / "objects.parquet"
    images = max(objects // PER_IMAGE, 1)
    folder.mkdir(parents=True, exist_ok=True)
    # 1. Small PNGs, and a hard link to one per image (1,000 to a folder; a file takes at most LINKS_PER_FILE).
    names = np.array([f"images/{i // 1000:04d}/{i % 1000:03d}.png" for i in range(images)], dtype=object)
    for i, name in enumerate(names):
        path = folder / name
        base = folder / f"base-{i // LINKS_PER_FILE}.png"
        if i % LINKS_PER_FILE == 0 and not base.exists():
            Image.new("RGB", IMAGE_SIZE, (90, 110, 130)).save(base)
        if i % 1000 == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            os.link(base, path)
    # 2. The objects: an image, a box, a class, the tags.
    image = np.sort(rng.integers(0, images, objects))
    width, height = rng.uniform(8, 200, objects), rng.uniform(8, 200, objects)
    x, y = rng.uniform(0, IMAGE_SIZE[0] - width), rng.uniform(0, IMAGE_SIZE[1] - height)
    label = rng.integers(0, len(CLASSES), objects)
    tags = {f"attr:t{c:02d}": rng.integers(0, len(tag_values(c)), objects) for c in range(TAGS)}
    planted = np.logical_and.reduce([tags[f"attr:{a}"] == tag_values(int(a[1:])).index(v) for a, v in PLANTED])
    # 3. The detector: found at 85% (25% in the planted slice), a little off, mostly of the right class.
    found = rng.random(objects) < np.where(planted, 0.25, 0.85)
    jitter = rng.normal(0, 0.05, (objects, 4)) * np.c_[width, height, width, height]
    predicted = np.where(rng.random(objects) < 0.95, label, rng.integers(0, len(CLASSES), objects))
    extra = int(0.05 * objects)  # detections on no object
    extra_image = rng.integers(0, images, extra)
    extra_box = np.c_[rng.uniform(0, 500, extra), rng.uniform(0, 350, extra), rng.uniform(8, 120, (extra, 2))]
    split = np.where(rng.random(images) < 0.8, "val", "train")
    # 4. One table: the objects' rows, then the detections on no object.
    boxes = np.c_[x, y, width, height]
    frame = pd.DataFrame({
        "image": np.r_[names[image], names[extra_image]],
        "split": np.r_[split[image], split[extra_image]],
        "box": np.r_[_box_text(boxes), np.full(extra, "")],
        "label": np.r_[np.array(CLASSES, dtype=object)[label], np.full(extra, "")],
        "pred_box": np.r_[np.where(found, _box_text(np.maximum(boxes + jitter, 1)), ""), _box_text(extra_box)],
        "prediction": np.r_[np.where(found, np.array(CLASSES, dtype=object)[predicted], ""),
                            np.array(CLASSES, dtype=object)[rng.integers(0, len(CLASSES), extra)]],
        "confidence": np.r_[np.where(found, rng.uniform(0.3, 1.0, objects).round(3), np.nan),
                            rng.uniform(0.05, 0.6, extra).round(3)],
        **{column: pd.Categorical(np.r_[np.array(tag_values(c), dtype=object)[codes], np.full(extra, "")])
           for c, (column, codes) in enumerate(tags.items())}})
    frame["confidence"] = frame["confidence"].map(lambda v: "" if v != v else f"{v:g}")
    if models == 2:  # 5. the fixed version: found at 85% everywhere, its own jitter and detections on no object
        found = rng.random(objects) < 0.85
        jitter = rng.normal(0, 0.05, (objects, 4)) * np.c_[width, height, width, height]
        extra_box = np.c_[rng.uniform(0, 500, extra), rng.uniform(0, 350, extra), rng.uniform(8, 120, (extra, 2))]
        frame["pred_box:detector-v2"] = np.r_[np.where(found, _box_text(np.maximum(boxes + jitter, 1)), ""),
                                              _box_text(extra_box)]
        frame["pred:detector-v2"] = np.r_[np.where(found, np.array(CLASSES, dtype=object)[label], ""),
                                          np.array(CLASSES, dtype=object)[rng.integers(0, len(CLASSES), extra)]]
        frame["confidence:detector-v2"] = np.r_[np.where(found, np.char.mod("%g", rng.uniform(0.3, 1.0, objects)
                                                                            .round(3)).astype(object), ""),
                                                np.char.mod("%g", rng.uniform(0.05, 0.6, extra).round(3))]
    frame.to_parquet(manifest, index=False)
    return manifest


def _box_text(boxes: np.ndarray) -> np.ndarray:
    """'x y w h' per row, to one decimal."""
    rounded = np.round(boxes, 1).astype(str)
    return np.char.add(np.char.add(np.char.add(np.char.add(np.char.add(np.char.add(
        rounded[:, 0], " "), rounded[:, 1]), " "), rounded[:, 2]), " "), rounded[:, 3]).astype(object)


def split_manifest(manifest: Path, parts: int) -> list[Path]:
    """The manifest as `parts` files of whole images (consecutive runs of its images), written once beside it."""
    if parts == 1:
        return [manifest]
    paths = [manifest.with_name(f"{manifest.stem}-part-{k + 1}-of-{parts}.parquet") for k in range(parts)]
    if all(path.exists() for path in paths):
        return paths
    frame = pd.read_parquet(manifest)
    codes, images = pd.factorize(frame["image"], sort=True)
    part_of_row = codes * parts // len(images)
    for k, path in enumerate(paths):
        frame[part_of_row == k].to_parquet(path, index=False)
    return paths


def bare_load(manifests: list[Path], target: Path, server: str | None = None, database: str = BARE_DATABASE) -> float:
    """Seconds to read the manifest (or its parts) with pyarrow and insert every row into one SQLite table, in one
    transaction a file; with `server` (a PostgreSQL URL), into a table of a new database there (`database`) by COPY."""
    import pyarrow.parquet as pq

    target.unlink(missing_ok=True)
    engine = None
    if server:
        import sqlalchemy
        from ingest import copy_rows  # the same peer as benchmarks/ingest.py's on PostgreSQL

        engine = sqlalchemy.create_engine(new_database(server, database))
    started = time.perf_counter()
    for manifest in manifests:
        table = pq.read_table(manifest).to_pandas()
        if engine is not None:
            table.to_sql("objects", engine, index=False, chunksize=100_000, if_exists="append", method=copy_rows)
        else:
            with sqlite3.connect(target) as connection:
                table.to_sql("objects", connection, index=False, chunksize=100_000, if_exists="append")
        del table
    seconds = time.perf_counter() - started
    if engine is not None:
        engine.dispose()
    return seconds


def new_database(server: str, name: str) -> str:
    """The URL of database `name` on the PostgreSQL `server`, made empty (dropped first if there)."""
    import sqlalchemy

    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def import_project(manifests: list[Path], project: Path, server: str | None = None,
                   database: str = PROJECT_DATABASE) -> tuple[float, float]:
    """(seconds, peak GiB) of `hibug new PROJECT --manifest FIRST` and `hibug import PROJECT --manifest NEXT` for
    each other part, each run as its own process (the peak: the largest of them); with `server`, the project's tables
    on a new database there named `database` (`hibug new --database`)."""
    shutil.rmtree(project, ignore_errors=True)
    database = ["--database", new_database(server, database)] if server else []
    started = time.perf_counter()
    for k, manifest in enumerate(manifests):
        command = ["new", str(project), *database] if k == 0 else ["import", str(project)]
        run = subprocess.run([sys.executable, "-m", "hibug_core.cli", *command, "--manifest", str(manifest),
                              "--model-name", "detector"], capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"hibug {command[0]} failed:\n{run.stderr[-3000:]}")
        if k:
            print(f"  part {k + 1}: {time.perf_counter() - started:.0f} s so far", flush=True)
    seconds = time.perf_counter() - started
    # the largest child so far: this benchmark's only children are these imports
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2 ** 20


# What a newly started dashboard first reads of the project from SQL (no column file), run by first_read.
FIRST_READ = """
import resource, sys, time
from sqlalchemy import text
from hibug_core.store import known_tag_columns, object_store
from hibug_core.store.db import read_connection
from hibug_core.store.project import Project
with Project.open(sys.argv[1], read_only=True) as project, read_connection(project.engine) as connection:
    started = time.perf_counter()
    roots = {i: str(p) for i, p in project._roots(connection).items()}
    held = [project._read_sample_rows(connection, roots), object_store.read_object_rows(connection),
            known_tag_columns.read(connection)]
    for (model_id,) in connection.execute(text("SELECT id FROM models ORDER BY id")):
        held += [project._read_prediction_rows(connection, model_id),
                 object_store.read_outcome_rows(connection, model_id)]
    print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)
"""


def first_read(project_folder: Path) -> tuple[float, float]:
    """(seconds, peak GiB) of reading every table a newly started dashboard reads of the project from SQL (its
    samples, objects and imported tags, each model's predictions and outcomes, all held at once, as the dashboard
    holds them), in a process of its own; the project's column files are neither read nor written."""
    run = subprocess.run([sys.executable, "-c", FIRST_READ, str(project_folder)], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"the first read failed:\n{run.stderr[-3000:]}")
    seconds, peak = run.stdout.split()[-2:]
    return float(seconds), float(peak)


# The commands --commands times on the project, as a user runs them (each run computes: the results a run keeps are
# removed before the next; the tables it kept as column files stay, as for any process after the first).
COMMANDS = {"hibug info": ["info"], "hibug slices (error slices and false positives)": ["slices", "--top", "5"],
            "hibug compare (the first comparison of the two detectors)":
                ["compare", "--models", "detector,detector-v2", "--top", "3"]}


def timed_commands(project_folder: Path, models: int, repeat: int) -> list[tuple[str, list[float], float]]:
    """(command, seconds of each run, the largest peak GiB) of each of COMMANDS on the project (compare with two
    models only), every run a process of its own: the wall time a user waits and the memory the command needs."""
    timed = []
    for name, command in COMMANDS.items():
        if "compare" in command and models < 2:
            continue
        runs = []
        for _ in range(repeat):
            remove_kept_results(project_folder)
            runs.append(_timed([sys.executable, "-m", "hibug_core.cli", command[0], str(project_folder),
                                *command[1:]], name))
        timed.append((name, [r[0] for r in runs], max(r[1] for r in runs)))
    if models >= 2:
        remove_kept_results(project_folder)
        timed += timed_kept_comparison(project_folder, repeat)
    return timed


def remove_kept_results(project_folder: Path) -> None:
    """Remove the slice reports, false positives' slices and comparisons kept in the project (by a dashboard or a
    command): a timed command then computes them, as on a project nothing has been asked of yet."""
    from hibug_core.slices.kept_comparisons import PREFIX as COMPARISONS
    from hibug_core.slices.report_files import FALSE_POSITIVES_PREFIX, TAGS_PREFIX
    from hibug_core.slices.report_files import PREFIX as REPORTS

    for kept in (project_folder / "columns").glob("*"):
        if kept.name.startswith((REPORTS, FALSE_POSITIVES_PREFIX, COMPARISONS, TAGS_PREFIX)):
            kept.unlink()


def timed_kept_comparison(project_folder: Path, repeat: int) -> list[tuple[str, list[float], float]]:
    """The comparison `hibug compare` makes, made as the dashboard makes a big project's first one: by a background
    job (its worker process, timed with its peak), which keeps it; then `hibug compare` reading what it kept (each
    run a process of its own). The kept files are removed after: the project stays one the commands compute on."""
    from hibug_core.jobs.store import create_job
    from hibug_core.operations import CompareModels
    from hibug_core.slices.kept_comparisons import PREFIX as COMPARISONS
    from hibug_core.store.db import checked_environment
    from hibug_core.store.project import Project

    command = COMMANDS["hibug compare (the first comparison of the two detectors)"]
    op = CompareModels.build({"models": command[command.index("--models") + 1].split(",")})
    with Project.open(project_folder) as project:
        job_id = create_job(project, op.kind, op.params(), author="benchmark")  # a first write: checked whole here,
        # as a dashboard checks before its first; its jobs trust that check (store.db.checked_environment)
    try:
        made = _timed([sys.executable, "-m", "hibug_core.jobs.worker", str(project_folder), str(job_id)], "the job",
                      {**os.environ, **checked_environment()})
        with Project.open(project_folder, read_only=True) as project:
            if not op.is_kept(project, op.models):
                raise SystemExit("the comparison's job kept nothing; see its row in the jobs table")
        read = [_timed([sys.executable, "-m", "hibug_core.cli", command[0], str(project_folder), *command[1:]],
                       "hibug compare") for _ in range(repeat)]
    finally:
        for kept in (project_folder / "columns").glob(COMPARISONS + "*"):
            kept.unlink()
    return [("the first comparison made by the dashboard's job (kept)", [made[0]], made[1]),
            ("hibug compare reading the kept comparison", [r[0] for r in read], max(r[1] for r in read))]


def _timed(arguments: list[str], name: str, environment: dict | None = None) -> tuple[float, float]:
    """(seconds, peak GiB) of a process of its own; SystemExit with its last words when it fails."""
    started = time.perf_counter()
    child = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if status:
        raise SystemExit(f"{name} failed:\n{child.stderr.read().decode()[-3000:]}")
    return seconds, usage.ru_maxrss / 2 ** 20


# The name a generated layout is stored under (--map): not an encoder, so that no one takes it for one's map.
GENERATED_MAP = "generated-layout"


def generated_map(project_folder: Path, seed: int = 0) -> float:
    """Store a seeded 2-D layout of every object (a cluster per class, the planted slice's objects to one side) as
    the map of GENERATED_MAP, where the Embedding map page finds it (URL ?encoder=generated-layout): the page's
    drawing, recolouring and lasso then run on every object of the project. No encoder runs: an encoder over ten
    million crops is days on two CPU cores. Returns the seconds taken."""
    from hibug_core.embeddings.compute import encoder_views
    from hibug_core.embeddings.projection import save_map
    from hibug_core.store.project import Project

    started = time.perf_counter()
    with Project.open(project_folder) as project:
        samples = project.samples()
        views = encoder_views(project, samples, crops=True)
        tags = project.known_tags()
        first = ~views["content_hash"].duplicated().to_numpy()
        rng = np.random.default_rng(seed)
        labels = samples["label"].to_numpy(object)[first]
        angle = np.array([CLASSES.index(label) if label in CLASSES else len(CLASSES) for label in labels]) \
            * (2 * np.pi / (len(CLASSES) + 1))
        planted = np.ones(len(samples), dtype=bool)
        for attribute, value in PLANTED:
            planted &= (tags[attribute].reindex(samples.index) == value).to_numpy()
        layout = np.c_[6 * np.cos(angle), 6 * np.sin(angle)] + rng.normal(size=(len(labels), 2))
        layout[planted[first]] += (3.0, -3.0)
        save_map(project, GENERATED_MAP, views["content_hash"].to_numpy()[first], layout)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--dir", default="/tmp/hibug-scale")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side, alternated (medians compared)")
    parser.add_argument("--database", metavar="URL", help="import into a project on this PostgreSQL server "
                        "(databases hibug_scale_project and hibug_scale_bare are made there, emptied first), against "
                        "pyarrow's read and a COPY into the same server")
    parser.add_argument("--models", type=int, choices=(1, 2), default=1,
                        help="2: a second detector, detector-v2, in the same manifest (for Compare)")
    parser.add_argument("--parts", type=int, default=1, help="import the objects as this many manifests of whole "
                                                            "images, one after another")
    parser.add_argument("--map", action="store_true", help=f"store a generated layout of every object as the map "
                        f"'{GENERATED_MAP}' in the project a run without --map built (nothing is imported; for timing "
                        "the Embedding map page at this size, no encoder runs)")
    parser.add_argument("--commands", action="store_true", help="time `hibug info`, `hibug slices` and (with "
                        "--models 2) `hibug compare` on the project a run without it built, each run a process of its "
                        "own, --repeat times (nothing is imported; the results kept in the project are removed "
                        "before each run)")
    parser.add_argument("--first-read", action="store_true", help="time reading every table of the project a run "
                        "without it built from SQL, as a newly started dashboard first does (nothing is imported)")
    args = parser.parse_args()
    folder = Path(args.dir) / (f"objects-{args.objects}" + (f"-models-{args.models}" if args.models > 1 else ""))
    manifest = folder / "objects.parquet"
    if not manifest.exists():
        started = time.perf_counter()
        generate(folder, args.objects, models=args.models)
        print(f"generated {args.objects:,} objects on {max(args.objects // PER_IMAGE, 1):,} images in "
              f"{time.perf_counter() - started:.1f} s ({manifest.stat().st_size / 2 ** 20:.0f} MiB of Parquet)",
              flush=True)
    if args.first_read:  # of the project a run without --first-read built
        seconds, peak = first_read(folder / ("project-postgres" if args.database else "project"))
        print(f"every table read from SQL as a newly started dashboard first reads them: {seconds:.1f} s, "
              f"peak {peak:.2f} GiB")
        return
    if args.commands:  # on the project a run without --commands built
        for name, seconds, peak in timed_commands(folder / ("project-postgres" if args.database else "project"),
                                                  args.models, args.repeat):
            runs = ", ".join(f"{s:.1f}" for s in seconds)
            print(f"{name}: median {np.median(seconds):.1f} s of {len(seconds)} ({runs}), peak {peak:.2f} GiB",
                  flush=True)
        return
    if args.map:  # into the project a run without --map built
        seconds = generated_map(folder / ("project-postgres" if args.database else "project"))
        print(f"stored a generated layout of every object as the map '{GENERATED_MAP}' in {seconds:.0f} s")
        return
    manifests = split_manifest(manifest, args.parts)
    bare, imported, peaks = [], [], []
    for _ in range(args.repeat):
        bare.append(bare_load(manifests, folder / "bare.sqlite", args.database))
        seconds, peak = import_project(manifests, folder / ("project-postgres" if args.database else "project"),
                                       args.database)
        imported.append(seconds)
        peaks.append(peak)
    bare_s, import_s = float(np.median(bare)), float(np.median(imported))
    print(f"bare load (pyarrow read + {'a COPY into PostgreSQL' if args.database else 'one SQLite insert'}): "
          f"{bare_s:.1f} s")
    how = "hibug new --manifest" + (f" and import of {args.parts - 1} more parts" if args.parts > 1 else "")
    print(f"{how}: {import_s:.1f} s, {import_s / bare_s:.1f}x the bare load, peak {max(peaks):.2f} GiB")


if __name__ == "__main__":
    main()
