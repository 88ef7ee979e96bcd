"""The scale benchmark's generator (benchmarks/scale.py) at a small size: its manifest is what a user's object manifest
would be, it imports through `hibug new`, and its images are links to a few files."""
from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import numpy as np
import pandas as pd


def _scale():
    script = Path(__file__).parents[1] / "benchmarks" / "scale.py"
    spec = importlib.util.spec_from_file_location("_scale_benchmark", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_objects_import_as_a_users_object_manifest(tmp_path, capsys):
    from hibug_core.cli import main
    from hibug_core.metrics import BACKGROUND
    from hibug_core.store.project import Project

    scale = _scale()
    scale.LINKS_PER_FILE = 12  # a file takes so many links (ext4: 65,000), then the next one is made
    manifest = scale.generate(tmp_path / "data", 300)
    frame = pd.read_parquet(manifest)
    objects = frame[frame["box"] != ""]
    assert len(objects) == 300 and len(frame) == 315  # 5% more rows: detections on no object
    assert frame["image"].nunique() <= 30 and len([c for c in frame if c.startswith("attr:")]) == 50
    assert pd.read_parquet(scale.generate(tmp_path / "again", 300)).equals(frame)  # seeded
    paths = [tmp_path / "data" / name for name in frame["image"].unique()]
    bases = sorted((tmp_path / "data").glob("base-*.png"))
    assert len(bases) == 3 and {p.stat().st_ino for p in paths} == {b.stat().st_ino for b in bases}  # hard links
    assert max(b.stat().st_nlink for b in bases) == 13
    planted = (objects["attr:t00"] == "a") & (objects["attr:t01"] == "b")
    found = objects["pred_box"] != ""
    assert found[planted].mean() < 0.5 < found[~planted].mean()

    assert main(["new", str(tmp_path / "project"), "--manifest", str(manifest)]) == 0
    with Project.open(tmp_path / "project", read_only=True) as project:
        samples = project.samples()
        assert project.task == "detection"
        assert int((samples["label"] != BACKGROUND).sum()) == 300  # and 15 detections on no object
        assert set(project.known_tags().columns) >= {f"t{c:02d}" for c in range(50)}
    assert np.isfinite(scale.bare_load([manifest], tmp_path / "bare.sqlite"))

    # In parts of whole images: `hibug new` with the first, `hibug import` with the others, as the benchmark's --parts
    parts = scale.split_manifest(manifest, 3)
    frames = [pd.read_parquet(part) for part in parts]
    assert sum(map(len, frames)) == len(frame) and all(len(f) for f in frames)
    assert sum(f["image"].nunique() for f in frames) == frame["image"].nunique()  # no image in two parts
    assert main(["new", str(tmp_path / "in-parts"), "--manifest", str(parts[0])]) == 0
    for part in parts[1:]:
        assert main(["import", str(tmp_path / "in-parts"), "--manifest", str(part)]) == 0
    with Project.open(tmp_path / "in-parts", read_only=True) as project:
        assert len(project.samples()) == len(samples)
        assert project.known_tags()["t00"].notna().sum() == 300
    assert np.isfinite(scale.bare_load(parts, tmp_path / "bare-parts.sqlite"))


def test_a_second_detector_comes_in_the_same_manifest_with_the_planted_slice_fixed(tmp_path):
    from hibug_core.store.project import Project

    scale = _scale()
    frame = pd.read_parquet(scale.generate(tmp_path / "data", 2000, models=2))
    objects = frame[frame["box"] != ""]
    planted = (objects["attr:t00"] == "a") & (objects["attr:t01"] == "b")
    found = objects["pred_box:detector-v2"] != ""
    assert abs(found[planted].mean() - found[~planted].mean()) < 0.1  # its fix: the planted slice found as often
    assert (found == (objects["pred:detector-v2"] != "")).all()
    assert (found == (objects["confidence:detector-v2"] != "")).all()
    scale.import_project([tmp_path / "data" / "objects.parquet"], tmp_path / "project")  # as the benchmark does
    with Project.open(tmp_path / "project", read_only=True) as project:
        assert set(project.models()) == {"detector", "detector-v2"}
    # --commands: each command a process of its own, timed with its peak; results kept in the project (by a
    # dashboard, or by a command: a reading one keeps its tables and results too) removed before each run
    timed = scale.timed_commands(tmp_path / "project", models=2, repeat=1)
    assert [name.split(" (")[0] for name, _, _ in timed] == [
        "hibug info", "hibug slices", "hibug compare", "the first comparison made by the dashboard's job",
        "hibug compare reading the kept comparison"]
    assert all(len(seconds) == 1 and seconds[0] > 0 and 0.05 < peak < 8 for _, seconds, peak in timed)
    columns = tmp_path / "project" / "columns"
    assert not list(columns.glob("comparison-*"))  # the job's files removed after
    assert {"objects.arrow", "outcomes-1.arrow"} <= {f.name for f in columns.glob("*.arrow")}
    for kept in ("slice-report-0123-slices.arrow", "slice-tags-0123.arrow", "false-positives-0123-slices.arrow"):
        (columns / kept).write_bytes(b"")  # as a dashboard or a command keeps them
    scale.remove_kept_results(tmp_path / "project")
    assert not [f for f in columns.glob("*") if f.name.startswith(("slice-", "false-positives-", "comparison-"))]
    assert (columns / "outcomes-1.arrow").exists()  # the tables stay: what any process after the first reads


def test_the_generated_layout_is_a_map_the_embedding_map_page_draws_and_the_first_read_is_timed(tmp_path, monkeypatch):
    from hibug_core.embeddings.projection import stored_map
    from hibug_core.store.project import Project

    from page_support import open_page

    scale = _scale()
    scale.import_project([scale.generate(tmp_path / "data", 300)], tmp_path / "project")
    assert scale.generated_map(tmp_path / "project") >= 0
    seconds, peak = scale.first_read(tmp_path / "project")  # every table from SQL, in a process of its own
    assert seconds > 0 and peak > 0
    with Project.open(tmp_path / "project", read_only=True) as project:
        points = stored_map(project, scale.GENERATED_MAP)
        samples = project.samples("detector")
        tags = project.known_tags().reindex(samples.index)
    assert points is not None and points.index.equals(samples.index)  # every object and false positive, once
    planted = ((tags["t00"] == "a") & (tags["t01"] == "b")).to_numpy()
    by_class = points.groupby(samples["label"].to_numpy())[["x", "y"]].mean()
    assert len(by_class) == len(scale.CLASSES) + 1  # a cluster per class, and the detections on no object
    assert points["x"][planted].mean() - points["x"][~planted].mean() > 2  # the planted slice to one side
    at = open_page(monkeypatch, "pages/3_Embedding_map.py", tmp_path / "project", encoder=scale.GENERATED_MAP,
                   method="umap", color="label")
    assert not at.exception
    assert at.caption[0].value.startswith(f"{len(samples)} objects · click a point")


def test_the_benchmark_imports_into_postgresql_and_copies_its_peer_there(tmp_path, postgres_database, monkeypatch):
    from sqlalchemy import create_engine, text

    from hibug_core.store.project import Project

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))  # as when run: its peers' helpers
    scale = _scale()
    # databases of this test's own: the server may be one a benchmark is importing into (its names are the defaults)
    own = f"hibug_scale_test_{uuid.uuid4().hex[:8]}"
    parts = scale.split_manifest(scale.generate(tmp_path / "data", 300), 2)
    seconds, _ = scale.import_project(parts, tmp_path / "project", postgres_database, database=own + "_project")
    assert seconds > 0 and (tmp_path / "project" / "hibug.postgres").is_file()
    with Project.open(tmp_path / "project", read_only=True) as project:
        assert project.engine.dialect.name == "postgresql" and project.engine.url.database == own + "_project"
        assert project.known_tags()["t00"].notna().sum() == 300
    assert np.isfinite(scale.bare_load(parts, tmp_path / "unused.sqlite", postgres_database, database=own + "_bare"))
    engine = create_engine(postgres_database.rsplit("/", 1)[0] + f"/{own}_bare")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM objects")).scalar() == 315
    engine.dispose()
    admin = create_engine(postgres_database, isolation_level="AUTOCOMMIT")  # the server is shared by the tests
    with admin.connect() as connection:
        for name in (own + "_project", own + "_bare"):
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()


def test_a_split_imported_in_parts_shows_each_imports_coco_evaluation_not_one_for_all(tmp_path, monkeypatch, capsys):
    from hibug_core.cli import main
    from hibug_core.store.project import Project

    from page_support import open_page

    scale = _scale()
    scale.LINKS_PER_FILE = 100
    parts = scale.split_manifest(scale.generate(tmp_path / "data", 600), 3)
    assert main(["new", str(tmp_path / "project"), "--manifest", str(parts[0])]) == 0
    for part in parts[1:]:
        assert main(["import", str(tmp_path / "project"), "--manifest", str(part)]) == 0
    with Project.open(tmp_path / "project", read_only=True) as project:
        per_import = project.evaluations_per_import("model", "val")
        assert per_import["import"].tolist() == [3, 2, 1]  # newest first
        assert per_import["AP"].iat[0] == project.object_evaluation("model", "val")["summary"]["AP"]  # the newest
        # each import's COCO objects are its own part's (every split's: COCO evaluated the import whole)
        assert per_import["objects"].tolist() == [int((pd.read_parquet(p)["box"] != "").sum()) for p in parts[::-1]]
        coco = project.describe()["coco"]
        assert list(coco) == ["model (import #1; train,val)", "model (import #2; train,val)",
                              "model (import #3; train,val)"]
        assert [coco[f"model (import #{i}; train,val)"]["AP"] for i in (3, 2, 1)] == per_import["AP"].tolist()
        assert len(set(per_import["AP"])) == 3  # three evaluations, not one shown three times
    capsys.readouterr()
    assert main(["info", str(tmp_path / "project")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("COCO")]
    assert [line.split()[1:4] for line in lines] == [["model", "(import", f"#{i};"] for i in (1, 2, 3)]

    at = open_page(monkeypatch, "app.py", tmp_path / "project")
    assert not at.exception and not at.error
    said = [c.value for c in at.caption if c.value.startswith("The val split came in 3 imports")]
    low, high = per_import["AP"].min(), per_import["AP"].max()
    assert len(said) == 1 and f"AP {low:.3f} to {high:.3f}" in said[0] and "are import #3's" in said[0]
    table = next(d.value for d in at.dataframe if "import" in d.value.columns)
    assert table["import"].tolist() == [3, 2, 1] and table["AP"].tolist() == per_import["AP"].tolist()
    assert table["objects"].tolist() == per_import["objects"].tolist()
