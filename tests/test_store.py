"""The project store: versioned migrations, concurrent openers, atomic arrays, path confinement."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text

from hibug_core.errors import ProjectError
from hibug_core.store.db import write_transaction
from hibug_core.store.migrations import LATEST_VERSION, applied_versions
from hibug_core.store.project import Project
from hibug_core.tasks import load_manifest


def test_new_project_records_each_migration(tmp_path):
    project = Project.create(tmp_path / "p", name="Cats")
    assert applied_versions(project.engine) == list(range(1, LATEST_VERSION + 1))
    assert project.name == "Cats"
    assert project.schema_version() == LATEST_VERSION


def test_open_refuses_a_folder_that_is_no_project(tmp_path):
    with pytest.raises(ProjectError, match="is not a hibug project"):
        Project.open(tmp_path)


def test_newer_schema_is_refused_with_advice(tmp_path):
    project = Project.create(tmp_path / "p")
    with write_transaction(project.engine) as connection:
        connection.execute(text("INSERT INTO schema_migrations VALUES (999, 'future', 'now')"))
    with pytest.raises(ProjectError, match="schema version 999, newer than this hibug understands"):
        Project.open(tmp_path / "p")


def test_many_processes_open_one_project_at_once(tmp_path):
    Project.create(tmp_path / "p").close()
    script = "import sys; from hibug_core import Project; print(Project.open(sys.argv[1]).schema_version())"
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "p")], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [out.strip() for out, _ in outputs] == [str(LATEST_VERSION)] * 8, [err for _, err in outputs]
    assert applied_versions(Project.open(tmp_path / "p").engine) == list(range(1, LATEST_VERSION + 1))


def test_arrays_are_published_only_on_commit(tmp_path):
    project = Project.create(tmp_path / "p")
    staged = project.arrays.stage("embeddings/demo", matrix=np.arange(6.0).reshape(2, 3))
    assert not project.arrays.exists("embeddings/demo")
    staged.commit()
    assert project.arrays.load("embeddings/demo")["matrix"].tolist() == [[0, 1, 2], [3, 4, 5]]
    leftover = project.arrays.stage("embeddings/crashed", matrix=np.zeros(2))
    assert leftover.temporary.exists()
    reopened = Project.open(tmp_path / "p")  # a crashed write's temporary file is cleaned on open
    assert not leftover.temporary.exists()
    assert reopened.arrays.names() == ["embeddings/demo"]
    with pytest.raises(ProjectError, match="invalid array name"):
        reopened.arrays.path("../escape")


def test_arrays_staged_in_a_block_are_published_together_or_not_at_all(tmp_path):
    project = Project.create(tmp_path / "p")
    with pytest.raises(RuntimeError, match="the database write failed"):
        with project.arrays.publishing() as batch:
            batch.stage("runs/a", x=np.zeros(2))
            batch.stage("runs/b", x=np.ones(2))
            raise RuntimeError("the database write failed")
    assert project.arrays.names() == [] and not list((tmp_path / "p").rglob("*.tmp*"))
    with project.arrays.publishing() as batch:
        batch.stage("runs/a", x=np.zeros(2))
        batch.stage("runs/b", x=np.ones(2))
        assert project.arrays.names() == []  # nothing shows before the block ends
    assert project.arrays.names() == ["runs/a", "runs/b"]
    assert project.arrays.load("runs/b")["x"].tolist() == [1.0, 1.0]


def test_samples_probabilities_and_paths_round_trip(image_dir, write_csv, tmp_path):
    path = write_csv("image,label,prediction,split,prob:cat,prob:dog,attr:color\n"
                     "images/a.png,cat,cat,train,0.9,0.1,red\nimages/b.png,dog,cat,val,0.6,0.4,blue\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(path))
    samples = project.samples("model")
    assert samples["label"].tolist() == ["cat", "dog"]
    assert samples["correct"].tolist() == [True, False]
    assert samples["confidence"].round(6).tolist() == [0.9, 0.6]
    ids, probabilities, classes = project.probabilities("model")
    assert ids.tolist() == samples.index.tolist() and classes == ["cat", "dog"]
    np.testing.assert_allclose(probabilities, [[0.9, 0.1], [0.6, 0.4]], rtol=1e-6)
    assert project.known_tags().to_dict() == {"color": {1: "red", 2: "blue"}} and project.has_known_tags()
    assert project.image_path(1) == (image_dir / "a.png").resolve()
    assert project.split_counts() == {"train": 1, "val": 1}
    scores = project.model_scores().set_index("split")["mean_score"].to_dict()
    assert scores == {"train": 1.0, "val": 0.0}
    log = project.audit_log()
    assert log["action"].tolist() == ["import"] and log["actor"].tolist() == ["tester"]
    with pytest.raises(ProjectError, match="no model named 'vit'"):
        project.samples("vit")


def test_second_import_adds_rows_and_a_new_model(image_dir, write_csv, tmp_path):
    first = write_csv("image,label,prediction\nimages/a.png,cat,cat\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(first))
    assert not project.has_known_tags()
    second = write_csv("image,label,pred:vit\nimages/b.png,dog,dog\n", name="second.csv")
    summary = project.import_manifest(load_manifest(second))
    assert summary.import_id == 2 and summary.models == ["vit"]
    assert project.models() == ["model", "vit"]
    assert len(project.samples()) == 2
    assert project.samples("vit")["prediction"].dropna().tolist() == ["dog"]


def test_project_folder_can_move(image_dir, write_csv, tmp_path):
    """Images inside the project folder are stored relative to it."""
    project_folder = tmp_path / "p"
    project = Project.create(project_folder)
    inner = project_folder / "data"
    (inner / "images").mkdir(parents=True)
    for name in ("a.png", "b.png"):
        (inner / "images" / name).write_bytes((image_dir / name).read_bytes())
    manifest = inner / "m.csv"
    manifest.write_text("image,label,prediction\nimages/a.png,cat,cat\nimages/b.png,dog,cat\n")
    project.import_manifest(load_manifest(manifest))
    assert len(project.samples()) == 2  # its column file written, with the paths as stored: joined where it is now
    project.close()
    moved = tmp_path / "moved"
    project_folder.rename(moved)
    reopened = Project.open(moved)
    assert all(Path(p).exists() for p in reopened.samples()["image_path"])


def test_a_new_process_reads_the_import_tables_from_their_column_files(image_dir, write_csv, tmp_path, monkeypatch,
                                                                         caplog):
    from hibug_core.store.project import IMPORT_TABLES

    def fresh_process() -> Project:
        IMPORT_TABLES.clear()
        return Project.open(tmp_path / "p")

    path = write_csv("image,label,prediction,split,attr:color\nimages/a.png,cat,cat,train,red\n"
                     "images/b.png,,dog,pool,\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(path))
    from_sql, known_from_sql = project.samples("model"), project.known_tags()
    assert (tmp_path / "p" / "columns" / "samples.arrow").is_file()
    assert (tmp_path / "p" / "columns" / "known-tags.arrow").is_file()
    with monkeypatch.context() as patched:  # the database's rows are not read again
        patched.setattr(Project, "_read_sample_rows", lambda *args, **kwargs: pytest.fail("read from SQL"))
        patched.setattr(Project, "_read_known_tag_rows", lambda *args, **kwargs: pytest.fail("read from SQL"))
        patched.setattr(Project, "_read_prediction_rows", lambda *args, **kwargs: pytest.fail("read from SQL"))
        reopened = fresh_process()
        pd.testing.assert_frame_equal(reopened.samples("model"), from_sql)
        pd.testing.assert_frame_equal(reopened.known_tags(), known_from_sql)
        assert known_from_sql.to_dict() == {"color": {1: "red"}}
        assert reopened.samples()["label"].isna().tolist() == [False, True]
    # a model added later (a repaired one) has its own file; the others stay as they are
    reopened.add_predictions("repaired", [2, 1], np.array([[0.2, 0.8], [0.7, 0.3]]), ["cat", "dog"])
    assert reopened.samples("repaired")["prediction"].tolist() == ["cat", "dog"]
    assert fresh_process().samples("model")["prediction"].tolist() == ["cat", "dog"]
    assert sorted(p.name for p in (tmp_path / "p" / "columns").iterdir()) == [
        "known-tags.arrow", "predictions-1.arrow", "predictions-2.arrow", "samples.arrow"]
    # a new import makes the files stale: read again, and written again
    reopened.import_manifest(load_manifest(write_csv("image,label,prediction,attr:color\nimages/c.png,dog,dog,"
                                                     "blue\n", name="second.csv")))
    again = fresh_process()
    assert [Path(p).name for p in again.samples()["image_path"]] == ["a.png", "b.png", "c.png"]
    assert again.known_tags().to_dict() == {"color": {1: "red", 3: "blue"}}
    assert again.samples("model")["prediction"].tolist() == ["cat", "dog", "dog"]
    # a damaged file is read around (from SQL) and written again
    (tmp_path / "p" / "columns" / "samples.arrow").write_bytes(b"ARROW1 cut short")
    with caplog.at_level("WARNING"):
        assert [Path(p).name for p in fresh_process().samples()["image_path"]] == ["a.png", "b.png", "c.png"]
    assert "cannot be read" in caplog.text
    with monkeypatch.context() as patched:
        patched.setattr(Project, "_read_sample_rows", lambda *args, **kwargs: pytest.fail("read from SQL"))
        assert len(fresh_process().samples()) == 3


def test_column_files_give_back_object_columns_with_their_missing_values(tmp_path):
    from hibug_core.store.column_files import ColumnFiles

    index = pd.Index([10, 11, 12, 13], name="id")
    frame = pd.DataFrame({"tag": pd.Series(["red", np.nan, "blue", "red"], index=index, dtype=object),
                          "reason": pd.Series(["a", None, None, "b"], index=index, dtype=object),
                          "nothing": pd.Series([None] * 4, index=index, dtype=object), "count": [1, 2, 3, 4]},
                         index=index)
    files = ColumnFiles(tmp_path)
    files.save("t", "v1", frame)
    loaded = files.load("t", "v1")
    pd.testing.assert_frame_equal(loaded, frame)
    assert loaded["reason"].iat[1] is None and loaded["nothing"].iat[0] is None
    assert isinstance(loaded["tag"].iat[1], float) and loaded["tag"].iat[0] == "red"
    assert files.load("t", "v2") is None  # another version: not this file's


def test_a_read_only_project_writes_no_column_file(image_dir, write_csv, tmp_path):
    Project.create(tmp_path / "p").close()
    with Project.open(tmp_path / "p") as project:
        project.import_manifest(load_manifest(write_csv("image,label,prediction\nimages/a.png,cat,cat\n")))
    from hibug_core.store.project import IMPORT_TABLES

    IMPORT_TABLES.clear()
    with Project.open(tmp_path / "p", read_only=True) as project:
        assert project.samples()["label"].tolist() == ["cat"]
    assert not (tmp_path / "p" / "columns").exists()


def test_a_stored_path_that_leaves_its_data_root_is_never_served(image_dir, write_csv, tmp_path):
    csv = write_csv("image,label,prediction\na.png,cat,cat\nb.png,dog,cat\n", name="m.csv")
    (image_dir / "m.csv").write_text(csv.read_text())
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(image_dir / "m.csv"))
    with write_transaction(project.engine) as connection:  # someone edits the shared database by hand
        connection.execute(text("UPDATE samples SET path = '../../../../etc/hostname' WHERE id = 2"))
    project = Project.open(tmp_path / "p")
    paths = project.samples()["image_path"].tolist()
    assert paths[0].endswith("a.png") and paths[1] == ""
    with pytest.raises(ProjectError, match="leaves its data root"):
        project.image_path(2)


def test_per_split_scores_are_kept_by_writers_and_backfilled_for_older_projects(image_dir, write_csv, tmp_path):
    path = write_csv("image,label,prediction,split\nimages/a.png,cat,cat,val\nimages/b.png,dog,cat,val\n"
                     "images/c.png,cat,cat,test\nimages/d.png,,dog,pool\n")
    with Project.create_from_manifest(tmp_path / "p", load_manifest(path)) as project:
        expected = [("model", "pool", 0, None), ("model", "test", 1, 1.0), ("model", "val", 2, 0.5)]
        scores = project.model_scores()
        assert [(m, s, int(n), None if pd.isna(v) else v) for m, s, n, v in scores.itertuples(index=False)] == expected
        with project.engine.begin() as connection:  # as a project made before migration 8 was
            connection.execute(text("DROP TABLE model_split_scores"))
            connection.execute(text("DELETE FROM schema_migrations WHERE version = 8"))
    with Project.open(tmp_path / "p") as project:
        scores = project.model_scores()
        assert [(m, s, int(n), None if pd.isna(v) else v) for m, s, n, v in scores.itertuples(index=False)] == expected
        more = write_csv("image,id,label,prediction,split\nimages/a.png,a2,dog,dog,val\nimages/b.png,b2,,cat,pool\n"
                         "images/c.png,c2,cat,dog,train\n", name="more.csv")
        project.import_manifest(load_manifest(more))  # an import adds its rows' counts and sums to the aggregate
        scores = project.model_scores()
        assert [(m, s, int(n), None if pd.isna(v) else v) for m, s, n, v in scores.itertuples(index=False)] == [
            ("model", "pool", 0, None), ("model", "test", 1, 1.0), ("model", "train", 1, 0.0),
            ("model", "val", 3, 2 / 3)]


def _connection_settings(raw) -> tuple:
    return tuple(raw.execute(f"PRAGMA {name}").fetchone()[0] for name in ("foreign_keys", "cache_size", "journal_mode"))


def test_a_bulk_write_is_atomic_and_leaves_its_connection_as_it_was(tmp_path):
    project = Project.create(tmp_path / "p")
    project.engine.dispose()  # one connection from here on: the one every write below reuses
    with project.engine.connect() as connection:
        before = _connection_settings(connection.connection.driver_connection)
    assert before == (1, -2000, "wal")
    with write_transaction(project.engine, bulk=True, private=True) as connection:
        inside = _connection_settings(connection.connection.driver_connection)
        connection.execute(text("INSERT INTO project_meta (key, value) VALUES ('kept', 'yes')"))
    assert inside == (0, -262_144, "delete")  # references unchecked, a big cache, the rollback journal
    with pytest.raises(RuntimeError, match="mid-write"):
        with write_transaction(project.engine, bulk=True, private=True) as connection:
            connection.execute(text("INSERT INTO project_meta (key, value) VALUES ('lost', 'yes')"))
            raise RuntimeError("mid-write")
    assert project.engine.pool.checkedin() == 1
    with project.engine.connect() as connection:
        assert _connection_settings(connection.connection.driver_connection) == before
    assert project.meta().get("kept") == "yes" and "lost" not in project.meta()
    with project.engine.connect() as other:  # another connection open: the journal stays WAL
        other.exec_driver_sql("SELECT 1").all()
        with write_transaction(project.engine, bulk=True, private=True) as connection:
            assert _connection_settings(connection.connection.driver_connection)[2] == "wal"


def test_a_large_new_project_is_written_in_bulk_with_every_reference_sound(image_dir, write_csv, tmp_path):
    n = 10_000  # StoreConfig.bulk_rows
    rows = "".join(f"images/{'ab'[i % 2]}.png,s{i},{'cat' if i % 3 else 'dog'},cat,{'red' if i % 2 else ''},"
                   f"{'small' if i % 5 else 'large'}\n" for i in range(n))
    path = write_csv("image,id,label,prediction,attr:color,attr:size\n" + rows)
    with Project.create_from_manifest(tmp_path / "p", load_manifest(path)) as project:
        with project.engine.connect() as connection:
            raw = connection.connection.driver_connection
            assert _connection_settings(raw) == (1, -2000, "wal")
            assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
            counts = raw.execute("SELECT (SELECT COUNT(*) FROM samples), (SELECT COUNT(*) FROM predictions), "
                                 "(SELECT COUNT(*) FROM known_tag_columns)").fetchone()
        assert counts == (n, n, 2)  # a row per imported attribute
        samples = project.samples("model")
        assert samples["sample_key"].iloc[[0, -1]].tolist() == ["s0", f"s{n - 1}"]
        assert samples["correct"].sum() == n - len(range(0, n, 3))
        tags = project.known_tags()
        assert tags["color"].value_counts().to_dict() == {"red": n // 2}
        assert tags["size"].value_counts().to_dict() == {"small": n - n // 5, "large": n // 5}


def test_a_second_open_of_a_project_in_one_process_keeps_every_write_visible(colour_project):
    """Opening the same project twice in one process (as a dashboard's caches may) must not drop the first one's
    SQLite locks: a worker that then writes and closes the project would take the WAL for unused and delete it, and
    the first one's later writes would be seen by nobody else (or fail with a disk I/O error)."""
    import sqlite3
    import subprocess
    import sys

    from hibug_core.review.views import save_view
    from hibug_core.store.project import Project

    save_view(colour_project, "first", "", {}, author="ann")
    with Project.open(colour_project.folder) as second:
        save_view(second, "second", "", {}, author="ann")
        subprocess.run([sys.executable, "-c", "import sys; from hibug_core.store.project import Project; "
                        "from hibug_core.review.views import save_view; project = Project.open(sys.argv[1]); "
                        "save_view(project, 'worker', '', {}); project.close()", str(colour_project.folder)],
                       check=True)
        save_view(colour_project, "first again", "", {}, author="ann")
        save_view(second, "second again", "", {}, author="ann")
    with sqlite3.connect(colour_project.folder / "hibug.sqlite") as elsewhere:
        names = [row[0] for row in elsewhere.execute("SELECT name FROM saved_views ORDER BY id")]
    assert names == ["first", "second", "worker", "first again", "second again"]


def test_two_jobs_that_stored_the_same_images_at_once_read_back_one_row_each(colour_project):
    """An embedding job and a map job on one project both embed the images missing when they start; each stores a
    part, and reads keep the first row of each content (it read 'Reindexing only valid with uniquely valued Index')."""
    import numpy as np

    from hibug_core.embeddings.cache import ContentCache

    cache = ContentCache(colour_project, "embeddings/test")
    cache.add(["a", "b"], {"embedding": np.array([[1.0, 0.0], [0.0, 1.0]])})
    cache.add(["b", "c"], {"embedding": np.array([[0.0, 1.0], [0.5, 0.5]])})
    assert len(cache) == 3
    np.testing.assert_array_equal(cache.get(["c", "b", "a"]), [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])


def test_a_model_s_predictions_alone_are_what_samples_joins(image_dir, write_csv, tmp_path):
    path = write_csv("image,label,prediction,score,split\nimages/a.png,cat,cat,1,train\nimages/b.png,dog,cat,0,val\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(path))
    model = project.models()[0]
    alone = project.predictions(model)
    joined = project.samples(model)[["prediction", "confidence", "score"]]
    pd.testing.assert_frame_equal(alone.sort_index(), joined.loc[alone.index].sort_index())
    assert alone["prediction"].tolist() == ["cat", "cat"] and alone["score"].tolist() == [1.0, 0.0]
    with pytest.raises(ProjectError, match="no model named 'other'"):
        project.predictions("other")


def test_split_counts_follow_every_change_of_the_samples(image_dir, write_csv, tmp_path):
    from hibug_core.store.removal import remove_samples

    path = write_csv("image,label,prediction,split\nimages/a.png,cat,cat,train\nimages/b.png,dog,cat,val\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(path))
    assert project.split_counts() == {"train": 1, "val": 1}
    project.split_counts()["train"] = 7  # a caller's copy: the kept counts stay as they are
    assert project.split_counts() == {"train": 1, "val": 1}
    remove_samples(project, [1], reason="blurred", author="ana")
    assert project.split_counts() == {"val": 1}
    more = write_csv("id,image,label,prediction,split\nc,images/a.png,cat,cat,test\n", name="more.csv")
    project.import_manifest(load_manifest(more))
    assert project.split_counts() == {"test": 1, "val": 1}
    # kept in a table by the import and the removal; a project from before it (migration 17) counts them once
    with project.engine.begin() as connection:
        assert connection.execute(text("SELECT split, n FROM split_counts ORDER BY split")).all() == [
            ("test", 1), ("train", 0), ("val", 1)]
        connection.execute(text("DROP TABLE split_counts"))
        connection.execute(text("DELETE FROM schema_migrations WHERE version = 17"))
    project.close()
    assert Project.open(tmp_path / "p").split_counts() == {"test": 1, "val": 1}
