"""The scale benchmark's generator (benchmarks/scale.py) at a small size: its manifest is what a user's object manifest
would be, it imports through `hibug new`, and its images are links to a few files."""
from __future__ import annotations

import importlib.util
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


def test_the_benchmark_imports_into_postgresql_and_copies_its_peer_there(tmp_path, postgres_database, monkeypatch):
    from sqlalchemy import create_engine, text

    from hibug_core.store.project import Project

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))  # as when run: its peers' helpers
    scale = _scale()
    parts = scale.split_manifest(scale.generate(tmp_path / "data", 300), 2)
    seconds, _ = scale.import_project(parts, tmp_path / "project", postgres_database)
    assert seconds > 0 and (tmp_path / "project" / "hibug.postgres").is_file()
    with Project.open(tmp_path / "project", read_only=True) as project:
        assert project.engine.dialect.name == "postgresql" and project.engine.url.database == "hibug_scale_project"
        assert project.known_tags()["t00"].notna().sum() == 300
    assert np.isfinite(scale.bare_load(parts, tmp_path / "unused.sqlite", postgres_database))
    engine = create_engine(postgres_database.rsplit("/", 1)[0] + "/hibug_scale_bare")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM objects")).scalar() == 315
    engine.dispose()
    admin = create_engine(postgres_database, isolation_level="AUTOCOMMIT")  # the server is shared by the tests
    with admin.connect() as connection:
        for name in ("hibug_scale_project", "hibug_scale_bare"):
            connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()
