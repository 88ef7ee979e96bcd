"""Shared fixtures: small real image files, manifests written on the fly, and the demo project built once."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

os.environ.setdefault("HIBUG_USER", "tester")


@pytest.fixture
def image_dir(tmp_path: Path) -> Path:
    """Six small real PNG images a.png .. f.png, plus a corrupt one and a non-image."""
    folder = tmp_path / "images"
    folder.mkdir()
    for i, name in enumerate("abcdef"):
        Image.new("RGB", (32, 24), (40 * i, 100, 200 - 30 * i)).save(folder / f"{name}.png")
    good = (folder / "a.png").read_bytes()
    (folder / "truncated.png").write_bytes(good[: len(good) // 2])
    (folder / "notes.png").write_text("this is not an image")
    return folder


@pytest.fixture
def write_csv(tmp_path: Path):
    """Write a manifest next to the images folder; returns its path."""

    def write(text: str, name: str = "manifest.csv", encoding: str | None = "utf-8") -> Path:
        path = tmp_path / name
        path.write_bytes(text.encode(encoding) if encoding else text)
        return path

    return write


# Building the detection, pose or segmentation demo trains a network (30-100 s): every test that needs one is slow,
# and they all run on one worker, which builds each demo once (a test that reaches a demo through getfixturevalue says
# so with the `demos` marker).
SLOW_FIXTURES = {"detection_demo", "detection_demo_build", "pose_demo", "pose_demo_build", "segmentation_demo",
                 "segmentation_demo_build"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group marks into the ids it schedules by
def pytest_collection_modifyitems(config, items):
    for item in items:
        demos = bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))) or item.get_closest_marker("demos")
        if demos:
            item.add_marker(pytest.mark.slow)
        # The demos' tests and the browser tests run one after another on one worker (the browser tests each use both
        # cores, two at once thrash); every other test, slow ones included, is spread over both workers, so that the
        # other worker is not idle half the run (--dist loadgroup, pyproject.toml). Two groups, the demos' and the
        # browser tests' on a worker each, thrashed: CI 43 min against 35 (7 Dec).
        if demos or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.xdist_group("heavy"))


RAISED_PEAK: list[tuple[float, str]] = []  # (GiB the test raised this process's peak by, test), the larger ones
COLLECTED_IN_FULL_FOR: list[str] = [""]  # the test module at whose start the collector last looked at everything


@pytest.fixture(autouse=True)
def _nothing_left_open(request):
    """After each test: the projects it left open closed (their database connections and pools), the tables read
    from them dropped, the dashboard's caches (AppTest runs pages in this process) emptied and the test's garbage
    collected, so a worker's memory does not grow with every test it has run. A test that raises the process's peak
    memory by 0.25 GiB or more is noted for the summary.

    What outlives a test (modules, libraries, fixtures of a wider scope) is frozen out of the collector's later passes:
    a full pass over a worker's heap took 1-2 s, a quarter of the suite's time when made after every test (7 Dec); the
    garbage of a module's own fixtures is collected in full when the next module's first test starts."""
    import gc
    import resource

    module = request.node.nodeid.split("::")[0]
    if COLLECTED_IN_FULL_FOR[0] != module:
        COLLECTED_IN_FULL_FOR[0] = module
        gc.unfreeze()
        gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    raised = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2 ** 20
    if raised >= 0.25:
        RAISED_PEAK.append((raised, request.node.nodeid))
    reached = SLOW_FIXTURES & set(request.fixturenames)  # getfixturevalue's too
    if reached and not any(m.args == ("heavy",) for m in request.node.iter_markers("xdist_group")):
        pytest.fail(f"{request.node.nodeid} reached {', '.join(sorted(reached))} through getfixturevalue: mark it "
                    "pytest.mark.demos, or another worker than the heavy one builds that demo again", pytrace=False)
    from hibug_core.store import project as project_module

    for project in list(project_module.OPEN_PROJECTS):
        project.close()
    project_module.IMPORT_TABLES.clear()
    import sys

    if "streamlit" in sys.modules:
        import streamlit as st

        st.cache_resource.clear()
        st.cache_data.clear()
    gc.collect()  # what this test made and left behind: the rest is frozen
    gc.freeze()


MEMORY_DIR = "HIBUG_TEST_MEMORY_DIR"  # where each worker leaves its peak resident memory, for the summary
MEMORY_BUDGET_GIB = float(os.environ.get("HIBUG_TEST_MEMORY_BUDGET_GIB", "6"))  # per test process: two
# workers and the browser beside them stay well inside the 24 GiB machine


def pytest_configure(config):
    import tempfile

    if not hasattr(config, "workerinput"):  # the controller: one folder for every worker's figure
        os.environ[MEMORY_DIR] = tempfile.mkdtemp(prefix="hibug-test-memory-")


def pytest_sessionfinish(session):
    import resource

    folder = os.environ.get(MEMORY_DIR)
    if folder:
        name = getattr(session.config, "workerinput", {}).get("workerid", "main")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB
        Path(folder, name).write_text(str(peak))
        Path(folder, name + ".raised").write_text("".join(f"{gib:.2f}\t{test}\n" for gib, test in RAISED_PEAK))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The peak resident memory of each test process, and a failure when one passed the budget."""
    folder = os.environ.get(MEMORY_DIR)
    if hasattr(config, "workerinput") or not folder or not Path(folder).is_dir():
        return
    peaks = {p.name: int(p.read_text()) / 2 ** 30 for p in sorted(Path(folder).iterdir()) if not p.suffix}
    if not peaks:
        return
    terminalreporter.write_line("peak memory per test process: " + ", ".join(
        f"{name} {gib:.2f} GiB" for name, gib in peaks.items()) + f" (budget {MEMORY_BUDGET_GIB:g} GiB each)")
    raised = sorted((line.split("\t") for p in Path(folder).glob("*.raised") for line in p.read_text().splitlines()),
                    key=lambda row: -float(row[0]))
    for gib, test in raised[:8]:
        terminalreporter.write_line(f"  raised its process's peak by {gib} GiB: {test}")
    over = {name: gib for name, gib in peaks.items() if gib > MEMORY_BUDGET_GIB}
    if over:
        terminalreporter.write_line(f"memory budget exceeded: {over}", red=True)
        terminalreporter._session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def demo_project(tmp_path_factory) -> Path:
    """The full demo project, built once per test session from the shipped checkpoint."""
    from hibug_core.demo import build_demo

    folder = tmp_path_factory.mktemp("demo") / "hibug-demo"
    build_demo(folder).close()
    return folder


COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}


@pytest.fixture
def demo_copy(demo_project, tmp_path) -> Path:
    """A copy of the session's demo project that a test may change (modules with their own demo_copy override it)."""
    import shutil

    folder = tmp_path / "demo"
    shutil.copytree(demo_project, folder)
    return folder


def _demo_built_by_the_cli(tmp_path_factory, task: str, folder_name: str):
    """(folder, the finished process): a demo built by the command a user runs, `hibug demo --task TASK
    --build-only`, from its shipped model."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp(task) / folder_name
    run = subprocess.run([sys.executable, "-m", "hibug_core.cli", "demo", "--task", task, "--build-only",
                          "--dir", str(folder)], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return folder, run


@pytest.fixture(scope="session")
def detection_demo_build(tmp_path_factory):
    """The detection demo built once per test session by the command, from the shipped detector."""
    return _demo_built_by_the_cli(tmp_path_factory, "detection", "hibug-detection-demo")


@pytest.fixture(scope="session")
def detection_demo(detection_demo_build) -> Path:
    """The detection demo project (built once per test session)."""
    return detection_demo_build[0]


@pytest.fixture(scope="session")
def pose_demo_build(tmp_path_factory):
    """The pose demo built once per test session by the command, from the shipped keypoint model."""
    return _demo_built_by_the_cli(tmp_path_factory, "pose", "hibug-pose-demo")


@pytest.fixture(scope="session")
def pose_demo(pose_demo_build) -> Path:
    """The pose demo project (built once per test session); tests open it read-only."""
    return pose_demo_build[0]


@pytest.fixture(scope="session")
def segmentation_demo_build(tmp_path_factory):
    """The segmentation demo built once per test session by the command, from the shipped mask model."""
    return _demo_built_by_the_cli(tmp_path_factory, "segmentation", "hibug-segmentation-demo")


@pytest.fixture(scope="session")
def segmentation_demo(segmentation_demo_build) -> Path:
    """The segmentation demo project (built once per test session); tests open it read-only."""
    return segmentation_demo_build[0]


@pytest.fixture
def colour_project(tmp_path: Path):
    """A 12-image project of red, green and blue circles and squares on white, with the colour as known truth,
    and an attribute schema (colour, a binary "is round", and the measured attributes)."""
    from PIL import ImageDraw

    from hibug_core.attributes import Attribute, AttributeSchema
    from hibug_core.attributes.measured import measured_attributes
    from hibug_core.store.attribute_versions import save_schema
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    folder = tmp_path / "data"
    folder.mkdir()
    rows = ["image,label,prediction,split,attr:color"]
    for i in range(12):
        colour = list(COLOURS)[i % 3]
        shape = "circle" if i % 2 else "square"
        image = Image.new("RGB", (48, 48), (255, 255, 255))
        draw = ImageDraw.Draw(image)
        (draw.ellipse if shape == "circle" else draw.rectangle)((10, 10, 38, 38), fill=COLOURS[colour])
        image.save(folder / f"{i}.png")
        split = "pool" if i >= 10 else "val"
        label = "" if split == "pool" else shape
        rows.append(f"{i}.png,{label},{'circle' if i % 4 else 'square'},{split},{colour}")
    (folder / "manifest.csv").write_text("\n".join(rows) + "\n")
    project = Project.create_from_manifest(tmp_path / "project", load_manifest(folder / "manifest.csv"))
    schema = AttributeSchema(attributes=(
        Attribute(name="color", tags=("red", "green", "blue")),
        Attribute(name="is round", kind="binary", tags=("yes", "no")),
        *measured_attributes()))
    save_schema(project, schema, note="test schema")
    yield project
    project.close()


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium driven by Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    from browser_support import CHROMIUM, CHROMIUM_ARGS, require_chromium

    require_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A fresh, empty database per test: SQLite in the test folder, or a new database on the PostgreSQL server at
    HIBUG_TEST_POSTGRES_URL (.ci/run starts one with .ci/postgres; elsewhere the PostgreSQL case is skipped)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite'}"
        return
    yield from _new_postgres_database()


@pytest.fixture
def postgres_database():
    """The URL of a new, empty database on the test PostgreSQL server (see store_url), dropped afterwards."""
    yield from _new_postgres_database()


def _new_postgres_database():
    import os
    import uuid

    server = os.environ.get("HIBUG_TEST_POSTGRES_URL")
    if not server:
        if os.environ.get("CI"):
            pytest.fail("HIBUG_TEST_POSTGRES_URL is not set; .ci/run starts PostgreSQL with .ci/postgres")
        pytest.skip("no PostgreSQL server (export HIBUG_TEST_POSTGRES_URL=$(.ci/postgres))")
    from sqlalchemy import create_engine, text

    name = f"hibug_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    yield server.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as connection:
        connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()


SLICE_VAL = [("blue", "circle", 5, 5), ("blue", "square", 5, 3), ("red", "circle", 15, 1), ("red", "square", 15, 1)]
SLICE_POOL = [("blue", "circle", (0.9, 0.2, 0.5)), ("blue", "square", (0.4, 0.8, 0.6)),
        ("red", "circle", (0.95, 0.3, 0.7, 0.1)), ("red", "square", (0.35, 0.45, 0.55, 0.65))]


@pytest.fixture
def slice_project(tmp_path: Path):
    """40 validation images whose failures sit in blue (8 of 10) and red circles (1 of 15), and 14 pool images with
    known confidences; one tiny image file serves them all."""
    import pandas as pd

    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    Image.new("RGB", (8, 8), (200, 200, 200)).save(tmp_path / "x.png")
    rows = []
    for colour, shape, n, failures in SLICE_VAL:
        for i in range(n):
            rows.append({"id": f"v-{colour}-{shape}-{i}", "image": "x.png", "label": "a", "split": "val",
                         "prediction": "b" if i < failures else "a", "confidence": 0.5,
                         "attr:color": colour, "attr:shape": shape})
    for colour, shape, confidences in SLICE_POOL:
        for i, c in enumerate(confidences):
            rows.append({"id": f"p-{colour}-{shape}-{i}", "image": "x.png", "label": "", "split": "pool",
                         "prediction": "a", "confidence": c, "attr:color": colour, "attr:shape": shape})
    rows.append({"id": "t-0", "image": "x.png", "label": "a", "split": "train", "prediction": "a", "confidence": 0.9,
                 "attr:color": "red", "attr:shape": "square"})
    pd.DataFrame(rows).to_csv(tmp_path / "manifest.csv", index=False)
    project = Project.create_from_manifest(tmp_path / "project", load_manifest(tmp_path / "manifest.csv"))
    yield project
    project.close()
