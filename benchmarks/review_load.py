"""Load test of team review: many people editing one project at once, and not one edit lost or doubled.

20 writers (half threads in this process, half separate processes) edit one project for 60 s: tag corrections
(each checks the tag it saw), attribute saves (each from the version it read), review status changes (from the
version it read) and comments. A refused stale edit is an expected answer, not an error; any other exception
reaching a writer (such as "database is locked") is an error. Afterwards every writer's own record of what it
saved is compared with the audit log and with the final state: counts per person and kind, the comment bodies,
the schema versions, the review's version, and each sample's tag in force.
Usage: python benchmarks/review_load.py [--writers 20] [--seconds 60] [--db-url postgresql+psycopg://...]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

KINDS = ("tag", "attribute", "review", "comment")
AUDIT_ACTION = {"tag": "correct tag", "attribute": "save attributes", "review": "update review", "comment": "comment"}
TAGS = ("red", "green", "blue")
N_SAMPLES = 200


def build(folder: Path, db_url: str | None) -> None:
    from PIL import Image

    from hibug_core.attributes import Attribute, AttributeSchema
    from hibug_core.review.board import ensure_review
    from hibug_core.store.attribute_versions import save_schema
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    data = folder / "data"
    data.mkdir(parents=True)
    Image.new("RGB", (8, 8), (120, 120, 120)).save(data / "x.png")
    rows = ["id,image,label,prediction,split"] + [f"s{i},x.png,a,{'ab'[i % 2]},val" for i in range(N_SAMPLES)]
    (data / "manifest.csv").write_text("\n".join(rows) + "\n")
    project = Project.create(folder / "project", db_url=db_url)
    project.import_manifest(load_manifest(data / "manifest.csv"), author="setup")
    save_schema(project, AttributeSchema(attributes=(Attribute(name="color", tags=TAGS),)), author="setup")
    ensure_review(project, (("color", "blue"),), author="setup")
    project.close()


def write(folder: str, db_url: str | None, author: str, seconds: float, seed: int, out: str) -> None:
    """One person editing until the time is up; what it saved goes to `out` (JSON lines)."""
    from hibug_core.attributes import AttributeSchema
    from hibug_core.review.board import StaleReviewError, add_comment, get_review, update_review
    from hibug_core.store.attribute_versions import StaleSchemaError, latest_version, load_schema, save_schema
    from hibug_core.store.db import read_connection
    from hibug_core.store.project import Project
    from hibug_core.store.tag_store import StaleTagError, correct_tags, latest_corrections

    project = Project.open(folder, db_url=db_url)
    ids = project.samples().index.to_numpy().tolist()
    rng = random.Random(seed)
    records, n = [], 0
    deadline = time.time() + seconds
    while time.time() < deadline:
        kind = rng.choice(KINDS)
        started = time.perf_counter()
        outcome, detail = "saved", {}
        try:
            if kind == "tag":
                sample = rng.choice(ids)
                with read_connection(project.engine) as connection:
                    seen = latest_corrections(connection, "color", [sample]).get(sample)
                tag = rng.choice(TAGS)
                correct_tags(project, "color", [sample], tag, author=author, seen={sample: seen})
                detail = {"sample": sample, "tag": tag}
            elif kind == "attribute":
                version = latest_version(project)
                schema = load_schema(project, version)
                attribute = schema.attributes[0].model_copy(update={"description": f"{author} edit {n}"})
                saved = save_schema(project, AttributeSchema(attributes=(attribute,)), author=author,
                                    note=f"{author} edit {n}", base_version=version)
                detail = {"version": saved}
            elif kind == "review":
                review = get_review(project, 1)
                update_review(project, 1, version=review.version, assignee=f"{author}-{n}", author=author)
            else:
                body = f"{author} says {n}"
                add_comment(project, 1, body, author=author)
                detail = {"body": body}
        except (StaleTagError, StaleSchemaError, StaleReviewError):
            outcome = "refused"
        except Exception as error:  # noqa: BLE001 - anything else reached the person: counted as an error
            outcome, detail = "error", {"error": f"{type(error).__name__}: {error}"[:300]}
        records.append({"author": author, "kind": kind, "outcome": outcome,
                        "ms": (time.perf_counter() - started) * 1000, **detail})
        n += 1
    project.close()
    with open(out, "a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)


def verify(folder: Path, db_url: str | None, records: list[dict]) -> dict:
    """Compare what the writers saved with the audit log and the final state; returns the mismatches found."""
    import pandas as pd

    from hibug_core.review.board import comments, get_review
    from hibug_core.store.attribute_versions import schema_history
    from hibug_core.store.project import Project
    from hibug_core.store.tag_store import corrections

    saved = [r for r in records if r["outcome"] == "saved"]
    project = Project.open(folder, db_url=db_url)
    log = project.audit_log()
    log = log[log["actor"] != "setup"]
    problems = {}
    mine = Counter((r["author"], AUDIT_ACTION[r["kind"]]) for r in saved)
    logged = Counter(zip(log["actor"], log["action"]))
    if mine != logged:
        problems["audit counts"] = {str(k): (mine.get(k, 0), logged.get(k, 0)) for k in set(mine) | set(logged)
                                    if mine.get(k, 0) != logged.get(k, 0)}
    bodies = [r["body"] for r in saved if r["kind"] == "comment"]
    stored = comments(project, 1)["body"].tolist()
    if sorted(bodies) != sorted(stored) or len(set(stored)) != len(stored):
        problems["comments"] = (len(bodies), len(stored), len(set(stored)))
    versions = sorted(r["version"] for r in saved if r["kind"] == "attribute")
    history = schema_history(project)
    if versions != sorted(history.loc[history["author"] != "setup", "version"].tolist()):
        problems["attribute versions"] = (len(versions), int((history["author"] != "setup").sum()))
    updates = sum(r["kind"] == "review" for r in saved)
    if get_review(project, 1).version != 1 + updates:
        problems["review version"] = (1 + updates, get_review(project, 1).version)
    tag_log = log[log["action"] == "correct tag"].sort_values("id")
    last = {}
    for after in tag_log["after_json"]:
        value = json.loads(after)
        for sample in value["samples"]:
            last[int(sample)] = value["tag"]
    in_force = corrections(project, "color").set_index("sample_id")["tag"].to_dict()
    if last != in_force:
        problems["tags in force"] = len(set(last.items()) ^ set(in_force.items()))
    edits = sum(r["kind"] == "tag" for r in saved)
    with project.engine.connect() as connection:
        rows = pd.read_sql_query("SELECT COUNT(*) AS n FROM tag_corrections", connection)["n"].iat[0]
    if rows != edits:
        problems["tag rows"] = (edits, int(rows))
    project.close()
    return problems


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--db-url", help="a fresh PostgreSQL database (default: SQLite in the project folder)")
    parser.add_argument("--dir", help="work folder (default: a temporary one)")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="review-load-"))
    shutil.rmtree(root, ignore_errors=True)
    build(root, args.db_url)
    folder = str(root / "project")
    out = str(root / "records.jsonl")
    n_processes = args.writers // 2
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=write, args=(folder, args.db_url, f"proc{i}", args.seconds, 1000 + i, out))
                 for i in range(n_processes)]
    threads = [threading.Thread(target=write, args=(folder, args.db_url, f"thread{i}", args.seconds, i, out))
               for i in range(args.writers - n_processes)]
    started = time.time()
    for worker in (*processes, *threads):
        worker.start()
    for worker in (*processes, *threads):
        worker.join()
    elapsed = time.time() - started
    records = [json.loads(line) for line in Path(out).read_text().splitlines()]
    problems = verify(Path(folder), args.db_url, records)
    backend = "PostgreSQL" if args.db_url else "SQLite (WAL)"
    print(f"{args.writers} writers ({n_processes} processes, {args.writers - n_processes} threads) for "
          f"{args.seconds:.0f} s on {backend}; {elapsed:.0f} s with start-up\n")
    print("| edit | tried | saved | refused as stale | errors | saved per s | median ms | p95 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in KINDS:
        mine = [r for r in records if r["kind"] == kind]
        ms = sorted(r["ms"] for r in mine if r["outcome"] == "saved") or [0.0]
        counts = Counter(r["outcome"] for r in mine)
        print(f"| {kind} | {len(mine)} | {counts['saved']} | {counts['refused']} | {counts['error']} | "
              f"{counts['saved'] / args.seconds:.1f} | {statistics.median(ms):.0f} | "
              f"{ms[int(0.95 * (len(ms) - 1))]:.0f} |")
    errors = [r["error"] for r in records if r["outcome"] == "error"]
    print(f"\nerrors reaching a writer: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print("lost or duplicated edits: " + ("none: the audit log, the comments, the attribute versions, the review's "
                                          "version and every tag in force agree with what the writers saved"
                                          if not problems else json.dumps(problems, default=str)[:2000]))
    if problems or errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
