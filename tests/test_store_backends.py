"""The store on SQLite and on PostgreSQL: the same migrations, imports, versioned edits and refusals of stale
writes, with concurrent writers from threads."""
from __future__ import annotations

import threading

import pytest
from PIL import Image

from hibug_core.attributes import Attribute, AttributeSchema
from hibug_core.jobs.store import JobBusyError, create_job
from hibug_core.review.board import StaleReviewError, add_comment, comments, ensure_review, members, update_review
from hibug_core.review.views import save_view, saved_views
from hibug_core.store.attribute_versions import StaleSchemaError, latest_version, save_schema
from hibug_core.store.migrations import LATEST_VERSION, applied_versions
from hibug_core.store.project import Project
from hibug_core.store.tag_store import StaleTagError, correct_tags, corrections
from hibug_core.store.undo import undo
from hibug_core.tasks import load_manifest


def image_manifest(folder, rows: list[tuple[str, str, str, str]]):
    """A manifest of one small image per row (label, prediction, split, colour), written into `folder`."""
    folder.mkdir()
    lines = ["image,label,prediction,split,attr:color"]
    for i, (label, prediction, split, colour) in enumerate(rows):
        Image.new("RGB", (16, 16), (40 * i, 100, 200)).save(folder / f"{i}.png")
        lines.append(f"{i}.png,{label},{prediction},{split},{colour}")
    (folder / "manifest.csv").write_text("\n".join(lines) + "\n")
    return load_manifest(folder / "manifest.csv")


@pytest.fixture
def project(store_url, tmp_path):
    manifest = image_manifest(tmp_path / "images", [("cat" if i % 2 else "dog", "cat", "val" if i < 4 else "pool",
                                                     ("red", "blue")[i % 2]) for i in range(6)])
    made = Project.create(tmp_path / "project", name="backends", db_url=store_url)
    made.import_manifest(manifest, author="ana")
    yield made
    made.close()


def test_migrations_import_and_reads(project, store_url):
    assert applied_versions(project.engine) == list(range(1, LATEST_VERSION + 1))
    assert project.engine.dialect.name == store_url.split(":", 1)[0].split("+", 1)[0]
    samples = project.samples("model")
    assert len(samples) == 6 and samples["correct"].tolist()[:4] == [False, True, False, True]
    assert project.known_tags()["color"].tolist() == ["red", "blue"] * 3
    assert project.split_counts() == {"val": 4, "pool": 2}
    reopened = Project.open(project.folder, db_url=store_url)
    assert reopened.name == "backends"
    reopened.close()


def test_imported_tags_are_columns_that_older_projects_migrate_into_and_removal_leaves_out(project, store_url,
                                                                                         tmp_path):
    from sqlalchemy import text

    from hibug_core.store.removal import remove_samples

    more = image_manifest(tmp_path / "more", [("cat", "dog", "val", c) for c in ("green", "", "red")])
    more.known_tags["size"] = ["big", None, "big"]
    project.import_manifest(more)
    expected = {"color": ["red", "blue", "red", "blue", "red", "blue", "green", None, "red"],
                "size": [None] * 6 + ["big", None, "big"]}  # of samples 1 to 9: sample 8 has none

    def stored(p) -> dict:
        tags = p.known_tags()
        assert all(tags.dtypes == "category")
        return {c: [None if v != v else v for v in tags[c].reindex(range(1, 10)).tolist()] for c in tags.columns}

    assert stored(project) == expected
    with project.engine.begin() as connection:  # one row per import and attribute
        assert connection.execute(text("SELECT import_id, attribute, code_bytes FROM known_tag_columns "
                                       "ORDER BY 1, 2")).all() == [(1, "color", 1), (2, "color", 1), (2, "size", 1)]
        # as a project made before migration 16 kept them: a row per tag
        connection.execute(text("CREATE TABLE known_tags (attribute TEXT NOT NULL, sample_id INTEGER NOT NULL "
                                "REFERENCES samples(id), tag TEXT NOT NULL, PRIMARY KEY (attribute, sample_id))"))
        for name, tags in expected.items():
            for sample_id, tag in enumerate(tags, start=1):
                if tag is not None:
                    connection.execute(text("INSERT INTO known_tags VALUES (:a, :s, :t)"),
                                       {"a": name, "s": sample_id, "t": tag})
        connection.execute(text("DROP TABLE known_tag_columns"))
        connection.execute(text("DELETE FROM schema_migrations WHERE version = 16"))
    project.close()
    older = Project.open(project.folder, db_url=store_url)
    assert applied_versions(older.engine) == list(range(1, LATEST_VERSION + 1))
    assert stored(older) == expected
    remove_samples(older, [7, 2], reason="imported by mistake")
    assert 2 not in older.known_tags().index and 7 not in older.known_tags().index
    assert stored(older) == {c: [None if i in (2, 7) else v for i, v in enumerate(tags, start=1)]
                             for c, tags in expected.items()}
    older.close()


def test_sample_ids_are_kept_as_runs_of_consecutive_ids():
    import numpy as np

    from hibug_core.store.known_tag_columns import id_runs, ids_of_runs

    ids = np.array([3, 4, 5, 9, 11, 12], dtype=np.int64)
    assert id_runs(ids).tolist() == [3, 3, 9, 1, 11, 2]
    assert ids_of_runs(id_runs(ids)).tolist() == ids.tolist()
    assert ids_of_runs(id_runs(np.arange(10**6, dtype=np.int64))).tolist()[-1] == 10**6 - 1
    assert len(id_runs(np.zeros(0, dtype=np.int64))) == len(ids_of_runs(id_runs(np.zeros(0, dtype=np.int64)))) == 0


def test_versioned_edits_refuse_stale_writes_and_undo(project):
    schema = AttributeSchema(attributes=(Attribute(name="color", tags=("red", "blue")),))
    first = save_schema(project, schema, author="ana", base_version=None)
    with pytest.raises(StaleSchemaError):
        save_schema(project, schema, author="bo", base_version=None)
    assert latest_version(project) == first
    correct_tags(project, "color", [1], "blue", author="ana", seen={1: None})
    with pytest.raises(StaleTagError):
        correct_tags(project, "color", [1], "red", author="bo", seen={1: None})
    entry = int(project.audit_log()["id"].iat[-1])
    undo(project, entry, author="cy")
    assert corrections(project).empty
    picked = ensure_review(project, kind="selection", key="odd ones", members=[1, 3], author="ana")
    assert members(project, picked.id) == [1, 3]
    save_view(project, "odd", "Error_slices", {"slice": "x"}, author="ana")
    assert saved_views(project)["link"].tolist() == ["/Error_slices?slice=x"]
    create_job(project, "tag", {}, author="ana")
    with pytest.raises(JobBusyError):
        create_job(project, "tag", {}, author="bo")


def test_concurrent_writers_one_wins_each_version_and_no_comment_is_lost(project):
    review = ensure_review(project, (("color", "blue"),), author="ana")
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def edit(i: int) -> None:
        barrier.wait()
        try:
            update_review(project, review.id, version=1, status="fixed", assignee=f"p{i}", author=f"p{i}")
            outcomes.append("saved")
        except StaleReviewError:
            outcomes.append("refused")
        for n in range(5):
            add_comment(project, review.id, f"comment {n} from p{i}", author=f"p{i}")

    threads = [threading.Thread(target=edit, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused"] * 7 + ["saved"]
    thread_comments = comments(project, review.id)
    assert len(thread_comments) == 40 and thread_comments["body"].is_unique
    log = project.audit_log()
    assert (log["action"] == "comment").sum() == 40 and (log["action"] == "update review").sum() == 1


def test_objects_import_and_read_the_same_on_both_stores(store_url, tmp_path):
    from test_objects import _tide_case, _write

    from hibug_core.tasks import load_coco

    truth_file, results = _write(tmp_path / "data", *(_tide_case()[:1]), {"m": _tide_case()[1]})
    made = Project.create(tmp_path / "objects", db_url=store_url)
    try:
        made.import_manifest(load_coco(truth_file, results), author="ana")
        objects = made.objects("m")
        assert made.task == "detection" and len(objects) == 9
        assert objects["error_type"].tolist() == ["", "classification", "missed", "localization", "duplicate",
                                                  "classification", "localization", "background", "both"]
        assert objects["box_w"].tolist()[:4] == [40.0, 40.0, 20.0, 30.0]
        assert made.object_evaluation("m")["per_class"]["class"].tolist() == ["cat", "dog"]
    finally:
        made.close()


def test_hostile_text_and_missing_values_round_trip(store_url, tmp_path):
    """What an import writes (SQLite: multi-row INSERTs; PostgreSQL: COPY of pyarrow's CSV) reads back unchanged."""
    import csv

    images = tmp_path / "images"
    images.mkdir()
    # (a line break inside a value and a bare NULL no longer enter a project: hibug_core.values)
    labels = ['a,b', 'say "hi"', "back\\slash", "escaped\\nbreak", "ünï 中", "\\N", "Null Island", "x"]
    with open(images / "manifest.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "prediction", "split", "confidence", "attr:note"])
        for i, label in enumerate(labels):
            Image.new("RGB", (8, 8), (30 * i, 0, 0)).save(images / f"{i}.png")
            writer.writerow([f"{i}.png", label if i != 7 else "", labels[-1 - i] if i != 0 else "x",
                             "pool" if i == 7 else "val", "" if i % 3 == 0 else f"0.{i}5", label if i % 2 else ""])
    with Project.create(tmp_path / "project", db_url=store_url) as project:
        project.import_manifest(load_manifest(images / "manifest.csv"))
        samples = project.samples("model")
        assert samples["label"].tolist()[:7] == labels[:7] and samples["label"].isna().tolist() == [False] * 7 + [True]
        assert samples["prediction"].tolist() == ["x"] + labels[::-1][1:]
        assert [None if c != c else c for c in samples["confidence"]] == [
            None if i % 3 == 0 else float(f"0.{i}5") for i in range(8)]
        assert samples["correct"].tolist()[:7] == [label == prediction for label, prediction in
                                                   zip(labels[:7], ["x"] + labels[::-1][1:])]
        assert project.known_tags()["note"].dropna().to_dict() == {i + 1: labels[i] for i in (1, 3, 5, 7)}


def foreign_keys(project) -> list[tuple]:
    from sqlalchemy import text

    with project.engine.connect() as connection:
        if project.engine.dialect.name == "sqlite":
            return [(table, *row[2:5]) for table in ("samples", "predictions", "known_tag_columns")
                    for row in connection.exec_driver_sql(f"PRAGMA foreign_key_list({table})")]
        return connection.execute(text("SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
                                       "FROM pg_constraint WHERE contype = 'f' ORDER BY 1, 2")).all()


def test_a_first_bulk_import_checks_its_keys_once_at_the_end_and_keeps_them(store_url, tmp_path):
    import dataclasses

    from sqlalchemy.exc import IntegrityError

    from hibug_core.store.db import keys_checked_at_end, write_transaction

    manifest = image_manifest(tmp_path / "images", [("cat", "cat" if i % 2 else "dog", "val", "red") for i in range(4)])
    made = Project.create(tmp_path / "project", db_url=store_url)
    keys = foreign_keys(made)
    assert len(keys) > 3
    made.config = dataclasses.replace(made.config, bulk_rows=1)  # these 4 rows are a bulk import, the first
    made.import_manifest(manifest)
    assert foreign_keys(made) == keys  # dropped for the load (PostgreSQL), added again, exactly as they were
    assert made.samples("model")["correct"].tolist() == [False, True, False, True]
    assert made.known_tags()["color"].tolist() == ["red"] * 4
    # a row that breaks a key fails the whole write when the keys come back (SQLite: at the insert), keys kept
    before = made.samples("model")
    with pytest.raises(IntegrityError):
        with write_transaction(made.engine) as connection, keys_checked_at_end(connection, ("predictions",)):
            connection.exec_driver_sql("INSERT INTO predictions (model_id, sample_id, prediction) VALUES (1, 999, 'x')")
    assert foreign_keys(made) == keys
    assert made.known_tags().columns.tolist() == ["color"] and len(made.samples("model")) == len(before)
    made.close()


def test_query_results_are_read_in_blocks_into_typed_columns(store_url, monkeypatch):
    import numpy as np
    from sqlalchemy import text

    from hibug_core.store import row_blocks
    from hibug_core.store.db import make_engine, read_connection

    engine = make_engine(store_url)
    rows = [(1, 10, 0.5, "car", "a", None, None), (2, 11, None, "car", "b", None, None),
            (3, 12, 1.5, "bus", "c", None, None), (4, 13, 2.5, "car", "d", None, None),
            (5, None, 3.5, None, "e", None, "late"), (6, 15, 4.5, "car", "f", None, "later"),
            (7, 16, 5.5, "car", "g", None, None)]
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (id INTEGER, n INTEGER, x REAL, word TEXT, name TEXT, blank TEXT, "
                                "late TEXT)"))
        connection.execute(text("INSERT INTO t VALUES (:a, :b, :c, :d, :e, :f, :g)"),
                           [dict(zip("abcdefg", row)) for row in rows])
    monkeypatch.setattr(row_blocks, "BLOCK_ROWS", 4)  # two blocks: a NULL or a text first seen in the second
    with read_connection(engine) as connection:
        columns = row_blocks.read_columns(connection, "SELECT * FROM t WHERE id > ? ORDER BY id", (0,))
        empty = row_blocks.read_columns(connection, "SELECT id, word FROM t WHERE id > 99")
        frame = row_blocks.read_frame(connection, "SELECT id, x FROM t ORDER BY id", index_col="id")
    engine.dispose()
    assert columns["id"].dtype == np.int64 and columns["id"].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert columns["n"].dtype == np.float64  # a NULL in the second block: numbers with NaN, not objects
    np.testing.assert_array_equal(columns["n"], [10, 11, 12, 13, np.nan, 15, 16])
    np.testing.assert_array_equal(columns["x"], [0.5, np.nan, 1.5, 2.5, 3.5, 4.5, 5.5])
    assert columns["word"].tolist() == ["car", "car", "bus", "car", None, "car", "car"]
    assert columns["word"][0] is columns["word"][1]  # each distinct text held once
    assert columns["name"].tolist() == list("abcdefg")
    assert columns["blank"].tolist() == [None] * 7
    assert columns["late"].tolist() == [None, None, None, None, "late", "later", None]
    assert {name: len(values) for name, values in empty.items()} == {"id": 0, "word": 0}
    assert frame.index.tolist() == [1, 2, 3, 4, 5, 6, 7] and frame.index.name == "id"
    assert frame["x"].iloc[3] == 2.5
