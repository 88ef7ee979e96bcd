"""Benchmark: `hibug new` on a large manifest (100,000 rows by default; --rows 1000000) and `hibug info` on it.

Prints wall times against the targets (100,000 rows: new < 60 s, info < 2 s; 1,000,000 rows: new < 30 s and within
3x of the peer, info < 1 s) and against a peer measured in the same run: pandas.read_csv + DataFrame.to_sql into
SQLite, which stores the raw table with no validation, no keys and no indexes at all.
With --postgres URL it also imports the same manifest into a project stored on that PostgreSQL server (an empty
database: its tables are made), times it against read_csv + to_sql into the same server, and checks that the project
on PostgreSQL describes itself with the same figures as the one on SQLite (`hibug info`: splits, per-model and
per-split score sums, and the first and last sample).
Each is run --repeat times (3 by default), alternated, and the medians compared: a shared machine's busy spells
move single runs by a fifth either way.
Then the first read of the sample table with the model's predictions and the known tags in a new process, as a page
of a newly started dashboard does: the first after the import (from SQL; it writes the column files) and a later one
(mapped from the column files), against the peer's pandas.read_sql of its whole table.
Usage: python benchmarks/ingest.py [--rows 100000] [--images 2000] [--dir /tmp/hibug-bench] [--repeat 3]
       [--postgres URL]
"""
from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

CLASSES = ["cat", "dog", "bird", "car", "ship"]


def make_data(folder: Path, rows: int, images: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    image_dir = folder / "images"
    image_dir.mkdir(parents=True)
    for i in range(images):
        pixels = rng.integers(0, 255, size=(48, 48, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(image_dir / f"{i}.png")
    labels = rng.integers(0, len(CLASSES), rows)
    predictions = np.where(rng.random(rows) < 0.8, labels, rng.integers(0, len(CLASSES), rows))
    logits = rng.normal(size=(rows, len(CLASSES)))
    logits[np.arange(rows), predictions] += 3
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    frame = pd.DataFrame({
        "id": [f"s{i}" for i in range(rows)],
        "image": [f"images/{i % images}.png" for i in range(rows)],
        "label": np.array(CLASSES)[labels],
        "prediction": np.array(CLASSES)[predictions],
        "split": rng.choice(["train", "val", "test", "pool"], rows, p=[0.5, 0.2, 0.2, 0.1]),
        **{f"prob:{c}": probabilities[:, j].round(6) for j, c in enumerate(CLASSES)},
        "attr:color": rng.choice(["red", "green", "blue"], rows),
        "attr:size": rng.choice(["small", "large"], rows),
    })
    # rounding can move a row's sum by a few 1e-6; renormalise the last column
    frame[f"prob:{CLASSES[-1]}"] = (1 - frame[[f"prob:{c}" for c in CLASSES[:-1]]].sum(axis=1)).round(6)
    path = folder / "manifest.csv"
    frame.to_csv(path, index=False)
    return path


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return elapsed


def peer_seconds(manifest: Path, database: Path) -> float:
    start = time.perf_counter()
    frame = pd.read_csv(manifest)
    with sqlite3.connect(database) as connection:
        frame.to_sql("manifest", connection, index=False)
    return time.perf_counter() - start


FIRST_READ = """
import sys, time
start = time.perf_counter()
from hibug_core.store.project import Project
with Project.open(sys.argv[1]) as project:
    samples, known = project.samples("model"), project.known_tags()
print(time.perf_counter() - start, len(samples), known.shape[1])
"""


def first_read_seconds(project: Path) -> float:
    """The sample table with the model's predictions and the known tags, read in a new process (imports included)."""
    result = subprocess.run([sys.executable, "-c", FIRST_READ, str(project)], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"reading {project} failed:\n{result.stderr[-3000:]}")
    return float(result.stdout.split()[0])


def peer_read_seconds(database: Path) -> float:
    start = time.perf_counter()
    with sqlite3.connect(database) as connection:
        pd.read_sql("SELECT * FROM manifest", connection)
    return time.perf_counter() - start


def copy_rows(table, connection, columns, rows) -> None:
    """pandas.to_sql's insertion by PostgreSQL's COPY (the fastest way pandas can load PostgreSQL)."""
    with connection.connection.cursor() as cursor:
        names = ", ".join(f'"{c}"' for c in columns)
        with cursor.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)


def on_postgres(url: str, manifest: Path, folder: Path, sqlite_project: Path) -> None:
    """The same import into a PostgreSQL store: its time, the peer's on the same server, and the same figures."""
    import sqlalchemy

    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:  # a fresh schema for each run
        connection.exec_driver_sql("DROP SCHEMA public CASCADE")
        connection.exec_driver_sql("CREATE SCHEMA public")
    start = time.perf_counter()
    project = Project.create(folder / "pg-project", db_url=url)
    project.import_manifest(load_manifest(manifest))
    new_s = time.perf_counter() - start
    start = time.perf_counter()
    pd.read_csv(manifest).to_sql("peer_manifest", engine, index=False, method=copy_rows)
    peer_s = time.perf_counter() - start
    engine.dispose()

    def figures(project) -> dict:
        described = project.describe()
        samples = project.samples("model")
        return {"splits": described["splits"], "scores": [(r["model"], r["split"], r["n"], round(r["mean_score"], 12))
                                                          for r in described["scores"]],
                "ends": samples.iloc[[0, -1]][["label", "split", "prediction"]].to_dict("records")}

    with Project.open(sqlite_project, read_only=True) as reference:
        same = figures(project) == figures(reference)
    project.close()
    print(f"on PostgreSQL: hibug new {new_s:6.2f} s, {new_s / peer_s:.1f}x the time of read_csv+to_sql into the same "
          f"server ({peer_s:.2f} s); same figures as on SQLite: {'yes' if same else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--images", type=int, default=2_000)
    parser.add_argument("--dir", default="/tmp/hibug-bench-ingest")
    parser.add_argument("--repeat", type=int, default=3, help="runs of hibug new and of the peer, alternated; the "
                        "medians are compared (default 3)")
    parser.add_argument("--postgres", help="also import into a project stored on this PostgreSQL URL "
                        "(postgresql+psycopg://...; its public schema is emptied first)")
    args = parser.parse_args()
    folder = Path(args.dir)
    shutil.rmtree(folder, ignore_errors=True)
    manifest = make_data(folder / "data", args.rows, args.images)
    hibug = [sys.executable, "-m", "hibug_core.cli"]
    new_runs, peer_runs = [], []
    for _ in range(args.repeat):  # alternated, so that a busy spell of a shared machine weighs on both
        shutil.rmtree(folder / "project", ignore_errors=True)
        (folder / "peer.sqlite").unlink(missing_ok=True)
        new_runs.append(timed([*hibug, "new", str(folder / "project"), "--manifest", str(manifest)]))
        peer_runs.append(peer_seconds(manifest, folder / "peer.sqlite"))
    info_s = min(timed([*hibug, "info", str(folder / "project")]) for _ in range(3))
    new_s, peer_s = float(np.median(new_runs)), float(np.median(peer_runs))
    million = args.rows >= 1_000_000
    new_target, info_target = (30, 1) if million else (60, 2)
    ratio = new_s / peer_s
    ratio_verdict = f" (target <= 3x: {'PASS' if ratio <= 3 else 'FAIL'})" if million else ""
    runs = f"median of {args.repeat}: " if args.repeat > 1 else ""
    print(f"rows={args.rows} distinct images={args.images}")
    print(f"hibug new : {new_s:6.2f} s  (target < {new_target} s: {'PASS' if new_s < new_target else 'FAIL'}); "
          f"{ratio:.1f}x the time of read_csv+to_sql without validation ({peer_s:.2f} s){ratio_verdict}")
    if args.repeat > 1:
        print(f"            {runs}hibug new {', '.join(f'{t:.2f}' for t in new_runs)} s; "
              f"peer {', '.join(f'{t:.2f}' for t in peer_runs)} s")
    print(f"hibug info: {info_s:6.2f} s  (target < {info_target} s: {'PASS' if info_s < info_target else 'FAIL'}; "
          "best of 3, including interpreter start)")
    after_import = first_read_seconds(folder / "project")
    later = min(first_read_seconds(folder / "project") for _ in range(3))
    peer_read = min(peer_read_seconds(folder / "peer.sqlite") for _ in range(3))
    print(f"first read in a new process (samples, predictions, known tags): {after_import:.2f} s after the import "
          f"({after_import / peer_read:.1f}x pandas.read_sql of the peer's table, {peer_read:.2f} s), then "
          f"{later:.2f} s from the column files ({later / peer_read:.2f}x; best of 3, imports included)")
    if args.postgres:
        on_postgres(args.postgres, manifest, folder, folder / "project")


if __name__ == "__main__":
    main()
