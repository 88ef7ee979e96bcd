"""Safe inputs: a server's limits follow its exposure, a project is served only whole inside its root, named files are
checked before they are read, every CSV export neutralises formula cells, people's words take the stored form, and
values are refused or warned by rule (hibug_core.serving.policy, safe_files, csv_export, values, store.db)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from hibug_core.access import AccessDenied, Actor, Role, acting_as
from hibug_core.errors import ManifestError
from hibug_core.serving.policy import NotServed, ServerPolicy

from serving_support import make_project


# ----- 1. what a server limits follows who can reach it -------------------------------------------------------------
@pytest.mark.parametrize("exposure, shared", [
    ({}, False),
    ({"sign_in": True, "roles": {"editor": ["*@example.com"]}}, True),
    ({"roles": {"admin": ["ada@example.com"]}}, True),
    ({"read_only": True}, True),
    ({"open_to_anyone": True}, True),
    ({"address": "127.0.0.2", "open_to_anyone": True}, True),
    ({"address": "0.0.0.0", "read_only": True}, True),
])
def test_limits_follow_exposure_never_the_bind_address_alone(tmp_path, exposure, shared):
    policy = ServerPolicy.build(projects_root=tmp_path, **{"address": "localhost", **exposure})
    assert policy.shared is shared
    assert (policy.reach() is not None) is shared
    assert (policy.anonymous_role() == Role.ADMIN) is (not shared)


def test_a_signed_in_server_on_localhost_refuses_a_typed_llm_url_an_outside_path_and_code(tmp_path, monkeypatch):
    from hibug_core.llm.client import LLMConfig, make_client
    from hibug_core.models.registry import load_model

    data, root = tmp_path / "data", tmp_path / "projects"
    data.mkdir()
    root.mkdir()
    (tmp_path / "secrets.toml").write_text("[auth]\ncookie_secret = 'x'\n")  # the server's own, outside both
    monkeypatch.setenv("HIBUG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    policy = ServerPolicy.build(projects_root=root, data_roots=(data,), address="localhost", sign_in=True,
                                roles={"editor": ["eddie@example.com"]})
    with acting_as(Actor("eddie@example.com", Role.EDITOR, policy.reach())):
        with pytest.raises(AccessDenied, match="contacts only the language-model server it was started with"):
            make_client(LLMConfig(base_url="http://127.0.0.1:8000/v1"))
        with pytest.raises(AccessDenied, match="outside this server's data roots"):
            load_model(f"timm:resnet18:{tmp_path / 'secrets.toml'}")
        with pytest.raises(AccessDenied, match="outside this server's data roots"):
            load_model(f"transformers:{data}/../secrets.toml")
        with pytest.raises(AccessDenied, match="would run code of its own"):
            load_model("python:os:getcwd")


def test_hibug_serve_says_who_a_shared_localhost_server_is_open_to():
    from hibug_ui.launch import describe

    root = Path(__file__).parent
    assert "this machine only" in describe(ServerPolicy.build(projects_root=root))
    assert "sign-in required" in describe(ServerPolicy.build(projects_root=root, sign_in=True,
                                                             roles={"admin": ["a@example.com"]}))


# ----- 2. a project is served only whole inside the projects root ---------------------------------------------------
@pytest.fixture
def root_with_links(tmp_path):
    root, data = tmp_path / "projects", tmp_path / "data"
    root.mkdir()
    make_project(root / "good", data / "good")
    secret = make_project(tmp_path / "elsewhere" / "secret", tmp_path / "elsewhere" / "images")
    (root / "db-link").mkdir()
    (root / "db-link" / "hibug.sqlite").symlink_to(secret / "hibug.sqlite")
    make_project(root / "arrays-link", data / "arrays-link")
    (root / "arrays-link" / "leak").symlink_to(secret)
    (root / "hard-link").mkdir()
    os.link(secret / "hibug.sqlite", root / "hard-link" / "hibug.sqlite")
    (root / "folder-link").symlink_to(root / "good")
    return ServerPolicy.build(projects_root=root, data_roots=(data,), read_only=True), tmp_path


def test_a_database_or_entry_linked_into_the_root_is_not_served(root_with_links):
    policy, _ = root_with_links
    assert list(policy.served_projects()) == ["good"]
    for name in ("db-link", "arrays-link", "hard-link", "folder-link"):
        with pytest.raises(NotServed):
            policy.project_folder(name)


def test_links_leading_out_of_a_projects_stores_are_not_read(tmp_path):
    from hibug_core.store.arrays import ArrayStore, DamagedArraysError
    from hibug_core.thumbnails import ensure_thumbnail, thumbnail_path

    outside = tmp_path / "outside"
    outside.mkdir()
    np.savez(outside / "secret.npz", x=np.arange(3))
    store = ArrayStore(tmp_path / "project" / "arrays")
    (store.root / "tags").mkdir(parents=True)
    (store.root / "tags" / "run-1.npz").symlink_to(outside / "secret.npz")
    with pytest.raises(DamagedArraysError, match="a link leading out"):
        store.load("tags/run-1")
    image = tmp_path / "big.png"
    Image.new("RGB", (300, 200), (10, 20, 30)).save(image)
    target = thumbnail_path(tmp_path / "project", "ab" * 16, 128)
    target.parent.mkdir(parents=True)
    (outside / "shadow").write_text("secret")
    target.symlink_to(outside / "shadow")
    made = ensure_thumbnail(tmp_path / "project", image, "ab" * 16, 128)
    assert made == target and not made.is_symlink() and Image.open(made).size == (128, 85)
    assert (outside / "shadow").read_text() == "secret"


def test_no_write_of_a_project_goes_through_a_link_leading_out(tmp_path):
    """A thumbnails, arrays, columns or logs folder linked out of the project: refused, nothing written there."""
    from hibug_core.objects.crops import ObjectPicture, ensure_object_picture
    from hibug_core.safe_files import FileRefused, folder_within, open_for_append
    from hibug_core.store.arrays import ArrayStore
    from hibug_core.thumbnails import ensure_enlarged, ensure_thumbnail

    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir(), outside.mkdir()
    image = tmp_path / "big.png"
    Image.new("RGB", (300, 200), (10, 20, 30)).save(image)
    (project / "thumbs").mkdir()
    (project / "thumbs" / "128").symlink_to(outside)  # the case found: thumbs/128 leading out of the root
    (project / "arrays").symlink_to(outside)
    with pytest.raises(FileRefused, match="is a link; hibug writes only inside the project"):
        ensure_thumbnail(project, image, "ab" * 16, 128)
    (project / "thumbs" / "x4").symlink_to(outside)
    with pytest.raises(FileRefused, match="is a link"):
        ensure_enlarged(project, image, "ab" * 16, 4)
    (project / "thumbs" / "objects").symlink_to(outside)
    with pytest.raises(FileRefused, match="is a link"):
        ensure_object_picture(project, image, "ab" * 16, ObjectPicture((1.0, 1.0, 20.0, 20.0), None, "near miss"))
    with pytest.raises(FileRefused, match="is a link"):
        ArrayStore(project / "arrays").save("tags/run-1", x=np.arange(3))
    with pytest.raises(FileRefused, match="hibug writes only inside a project"):
        folder_within(project, project / ".." / "outside")
    (project / "jobs").mkdir()
    (project / "jobs" / "job-1.log").symlink_to(outside / "log")
    with pytest.raises(FileRefused, match="is a link"):
        open_for_append(project / "jobs" / "job-1.log")
    assert list(outside.iterdir()) == []


def _big_image_project(tmp_path: Path) -> Path:
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    images = tmp_path / "data"
    images.mkdir()
    for i, colour in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200)]):
        Image.new("RGB", (400, 300), colour).save(images / f"{i}.png")  # larger than a thumbnail: one is made
    (images / "manifest.csv").write_text("image,label,prediction,split\n0.png,red,red,val\n1.png,green,red,val\n"
                                         "2.png,blue,blue,val\n")
    folder = tmp_path / "projects" / "shapes"
    Project.create_from_manifest(folder, load_manifest(images / "manifest.csv")).close()
    return folder


def _files_of(folder: Path) -> dict[str, int]:
    """Every entry of a project and when it last changed, less SQLite's shared-memory index (-shm), which every
    reader of a WAL database maps and stamps, read-only readers too: it holds no data."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.suffix != ".sqlite-shm"}


def test_a_read_only_server_writes_nothing_into_a_project(tmp_path, monkeypatch):
    from page_support import open_page, serve

    folder = _big_image_project(tmp_path)
    before = _files_of(folder)
    serve(monkeypatch, project=folder, read_only=True, data_roots=(tmp_path / "data",))
    at = open_page(monkeypatch, "app.py", None)
    assert not at.exception
    shown = at.get("image")
    assert shown, "the Overview shows its sample images"
    assert _files_of(folder) == before  # its thumbnails were made outside the project


def test_a_served_project_shows_files_only_inside_the_servers_data_roots(tmp_path):
    from hibug_core.errors import ProjectError
    from hibug_core.store.project import Project

    folder = _big_image_project(tmp_path)
    project = Project.open(folder)
    with project.engine.begin() as connection:  # a database that names / as its data root (crafted or moved)
        from sqlalchemy import text

        connection.execute(text("UPDATE data_roots SET path = '/'"))
    secret = Path("/etc/hostname") if Path("/etc/hostname").exists() else Path("/etc/passwd")
    assert project.served_image(str(secret)) == secret.resolve()  # one's own machine: the project's word goes
    project.served_within = (tmp_path / "data", folder.parent)  # a shared server's data roots and projects
    with pytest.raises(ProjectError, match="outside this server's data roots; not shown"):
        project.served_image(str(secret))
    assert project.served_image(str(tmp_path / "data" / "0.png")) == (tmp_path / "data" / "0.png").resolve()
    project.close()


def test_a_stored_path_that_climbs_out_of_its_root_is_named_never_shown(tmp_path):
    import shutil

    from sqlalchemy import text

    from hibug_core.errors import ProjectError
    from hibug_core.store.project import IMPORT_TABLES, Project

    folder = _big_image_project(tmp_path)
    with Project.open(folder) as project, project.engine.begin() as connection:  # a changed or crafted database
        connection.execute(text("UPDATE samples SET path = '../../../etc/passwd' WHERE id = 1"))
    shutil.rmtree(folder / "columns", ignore_errors=True)
    IMPORT_TABLES.clear()
    with Project.open(folder) as project:
        leaving = project.samples().loc[1, "image_path"]
        with pytest.raises(ProjectError, match="this sample's stored image path leads out of its data root") as said:
            project.served_image(leaving)
        assert str(Path.cwd()) not in str(said.value)


# ----- 3. every named file is checked before it is read -------------------------------------------------------------
def _in_time(function, seconds: float = 20):
    """function() run in a thread; its result, or a failure when it has not returned in `seconds` (a hang)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = function()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s"
    return outcome, time.monotonic() - started


def test_devices_pipes_and_oversized_files_are_refused_at_once(tmp_path, monkeypatch):
    from hibug_core import safe_files
    from hibug_core.image_loader import ImageUnreadable, open_image
    from hibug_core.objects.coco import read_json
    from hibug_core.tasks import load_manifest

    pipe = tmp_path / "pipe.png"
    os.mkfifo(pipe)
    Image.new("RGB", (8, 8)).save(tmp_path / "ok.png")
    (tmp_path / "m.csv").write_text(f"image,label,prediction\n/dev/zero,a,a\n{pipe.name},b,b\nok.png,a,a\n")
    outcome, took = _in_time(lambda: load_manifest(tmp_path / "m.csv"))
    assert isinstance(outcome.get("error"), ManifestError) and took < 20
    assert outcome["error"].messages == [
        "row 1, column 'image': is a device, not an image file; name a regular file: /dev/zero",
        "row 2, column 'image': is a pipe (FIFO), not an image file; name a regular file: pipe.png"]
    for reader, path in ((load_manifest, tmp_path / "manifest.csv"), (read_json, tmp_path / "coco.json")):
        os.mkfifo(path)
        outcome, _ = _in_time(lambda reader=reader, path=path: reader(path))
        assert isinstance(outcome.get("error"), ManifestError)
        assert "is a pipe (FIFO)" in str(outcome["error"])
    outcome, _ = _in_time(lambda: open_image(pipe))
    assert isinstance(outcome.get("error"), ImageUnreadable) and "pipe" in str(outcome["error"])
    with pytest.raises(ImageUnreadable, match="is a device"):
        open_image("/dev/zero")
    (tmp_path / "big.bin").write_bytes(b"x" * 6400)
    with pytest.raises(safe_files.FileRefused, match="is 6,400 bytes, more than the 100 bytes"):
        safe_files.read_checked(tmp_path / "big.bin", max_bytes=100)
    monkeypatch.setattr("hibug_core.ingest.images.IMAGE_MAX_BYTES", 50)
    (tmp_path / "m.csv").write_text("image,label,prediction\nok.png,a,a\n")
    with pytest.raises(ManifestError, match="more than the 50 bytes hibug reads as an image file"):
        load_manifest(tmp_path / "m.csv")


def test_hibug_new_refuses_dev_zero_and_a_fifo_within_seconds(tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")
    (tmp_path / "m.csv").write_text("image,label,prediction\n/dev/zero,a,a\npipe.jpg,b,b\n")
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "hibug_core.cli", "new", str(tmp_path / "p"), "--manifest",
                          str(tmp_path / "m.csv")], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and time.monotonic() - started < 120
    assert "is a device, not an image file" in run.stderr and "is a pipe (FIFO)" in run.stderr
    assert not (tmp_path / "p").exists()


def test_hibug_new_runs_under_an_address_space_limit_and_reads_no_image_whole_before_its_header(tmp_path):
    """`ulimit -v 4000000` (a container without overcommit): every read allocates what it reads, never the cap; 16
    sparse 500 MB files named as images are refused by their header, memory flat."""
    images = tmp_path / "data"
    images.mkdir()
    for i, colour in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200)]):
        Image.new("RGB", (32, 32), colour).save(images / f"{i}.png")
    (images / "m.csv").write_text("image,label,prediction\n0.png,red,red\n1.png,green,red\n2.png,blue,blue\n")
    for i in range(16):
        with open(images / f"sparse-{i}.png", "wb") as handle:
            handle.truncate(500 * (1 << 20))
    (images / "sparse.csv").write_text("image,label,prediction\n" + "".join(f"sparse-{i}.png,a,a\n"
                                                                          for i in range(16)))
    # The peak is this process's own (VmHWM): ru_maxrss would carry the pytest worker's, which a child made by
    # vfork inherits at exec.
    hibug = ("import sys\nfrom hibug_core.cli import main\ncode = main(sys.argv[1:])\n"
             "status = open('/proc/self/status').read().splitlines()\n"
             "print('peak', int(next(l for l in status if l.startswith('VmHWM:')).split()[1]) // 1024, "
             "file=sys.stderr)\nsys.exit(code)\n")
    limited = f"ulimit -v 4000000 && exec {sys.executable} -c \"$0\" new"
    run = subprocess.run(["bash", "-c", f"{limited} {tmp_path / 'p'} --manifest {images / 'm.csv'}", hibug],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "created" in run.stdout, run.stderr[-2000:]
    run = subprocess.run(["bash", "-c", f"{limited} {tmp_path / 'q'} --manifest {images / 'sparse.csv'}", hibug],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr and "MemoryError" not in run.stderr, run.stderr
    assert run.stderr.count("not an image, or a format Pillow cannot read") == 16
    peak = int(run.stderr.split("peak ")[1].split()[0])
    assert peak < 600, f"peak {peak} MB"  # was 3.8 GB: each file was read whole before its header was looked at


# ----- 4. every CSV export neutralises formula cells; people's words take the stored form ---------------------------
def test_the_csv_writer_neutralises_formulas_and_keeps_numbers():
    from hibug_core.csv_export import csv_text, neutralised

    assert [neutralised(v) for v in ["=1+2", "+cmd", "-x", "@SUM(A1)", "\t=1", "\r=1", "-5", "+1.5e3", "-12%",
                                     "a=b", "", 3.0, -2]] == \
        ["'=1+2", "'+cmd", "'-x", "'@SUM(A1)", "'\t=1", "'\r=1", "-5", "+1.5e3", "-12%", "a=b", "", 3.0, -2]
    frame = pd.DataFrame({"=name": ["=HYPERLINK(\"http://x\",\"y\")", "ok"], "score": [-0.5, 1.0]})
    assert csv_text(frame) == "'=name,score\n\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",-0.5\nok,1.0\n"


@pytest.fixture
def formula_project(tmp_path):
    """Two models (one named '-cand') on 300 images whose tags start like formulas; '-cand' fails on '=1+2'."""
    from compare_support import manifest_project

    rng = np.random.default_rng(7)
    colors = np.repeat(["red", "=1+2", "@SUM(A1)"], 100)
    right = rng.random(300) > 0.1
    cand = right.copy()
    cand[rng.choice(np.flatnonzero((colors == "=1+2") & right), 40, replace=False)] = False
    rows = [f"s{i},x.png,+cat,{'+cat' if right[i] else 'dog'},{'+cat' if cand[i] else 'dog'},val,{colors[i]}"
            for i in range(300)]
    manifest_project(tmp_path, "id,image,label,pred:base,pred:-cand,split,attr:color", rows).close()
    return tmp_path / "p"


def _cells(path: Path) -> list[str]:
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        return [cell for row in csv.reader(handle) for cell in row]


def test_every_csv_export_neutralises_formula_cells(formula_project, tmp_path, capsys):
    from hibug_core.cli import main
    from hibug_core.repair.selection import export_selection
    from hibug_core.review.board import ensure_review, update_review
    from hibug_core.review.findings import findings, report_csv
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(formula_project) as project:
        report = error_slices(project, "-cand")
        review = ensure_review(project, report.slices["definition"].iat[0])
        update_review(project, review.id, version=review.version, assignee='=HYPERLINK("http://evil","x")')
        table = findings(project, report)
        export_selection(pd.DataFrame({"slice": ["=1+2"], "reason": ["@cmd"]}, index=pd.Index([1], name="sample_id")),
                         tmp_path / "selection.csv")
        (tmp_path / "review.csv").write_bytes(report_csv(table))
    assert main(["slices", str(formula_project), "--model=-cand", "--output", str(tmp_path / "slices.csv")]) == 0
    assert main(["compare", str(formula_project), "--models=base,-cand", "--output", str(tmp_path / "c.csv")]) == 0
    assert main(["report", str(formula_project), "--model=-cand", "--output", str(tmp_path / "f.csv")]) == 0
    capsys.readouterr()
    written = {name: _cells(tmp_path / name) for name in ("slices.csv", "c.csv", "f.csv", "review.csv",
                                                          "selection.csv")}
    for name, cells in written.items():
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or c[:1] == "-" and not
                    c.lstrip("-").replace(".", "", 1).replace("e-", "", 1).isdigit()], name
    assert "'-cand" in written["c.csv"] and "'+cat" in written["slices.csv"]
    assert "'=HYPERLINK(\"http://evil\",\"x\")" in written["f.csv"] and written["f.csv"] == written["review.csv"]
    assert "'=1+2" in written["selection.csv"] and "'@cmd" in written["selection.csv"]
    assert pd.read_csv(tmp_path / "f.csv")["score"].dtype.kind == "f"  # numbers stay numbers


def test_peoples_words_take_the_stored_form(tmp_path):
    from hibug_core.review.board import add_comment, comments, ensure_review, get_review, update_review
    from hibug_core.store.project import Project
    from hibug_core.values import ValueRefused

    with Project.open(make_project(tmp_path / "p", tmp_path / "images")) as project:
        review = ensure_review(project, (("label", "red"),), author="ada")
        for bad in ("eve\x1b[2J", "eve\x00", "eve\u202egnp.exe"):
            with pytest.raises(ValueRefused):
                update_review(project, review.id, version=review.version, assignee=bad)
            with pytest.raises(ValueRefused):
                add_comment(project, review.id, f"looks fine {bad}", author="ada")
            with pytest.raises(ValueRefused):
                add_comment(project, review.id, "fine", author=bad)
        assert get_review(project, review.id).version == review.version  # nothing was written
        update_review(project, review.id, version=review.version, assignee="  bob\u200b  ")
        add_comment(project, review.id, "first line\r\n\tsecond\u200b line  \n", author="  ada ")
        assert get_review(project, review.id).assignee == "bob"
        assert comments(project)[["author", "body"]].values.tolist() == [["ada", "first line\nsecond line"]]


# ----- 5. settings from a link are clamped or refused in words -----------------------------------------------------
@pytest.mark.parametrize("page, query", [
    ("pages/4_Error_slices.py", {"support": "-5"}),
    ("pages/4_Error_slices.py", {"support": "1" + "0" * 30, "depth": "99"}),
    ("pages/4_Error_slices.py", {"gap": "nan", "depth": "-1"}),
    ("pages/4_Error_slices.py", {"gap": "inf", "support": "1e400"}),
    ("pages/7_Compare.py", {"support": "99999999999999999999", "alpha": "nan", "depth": "0"}),
    ("pages/6_Review.py", {"review": "99999999999999999999999"}),
    ("pages/3_Embedding_map.py", {"color": "zzz", "method": "x"}),
    ("pages/2_Tagging.py", {"attribute": "zzz"}),
])
def test_a_crafted_link_is_clamped_never_a_traceback(monkeypatch, demo_project, page, query):
    from page_support import open_page

    at = open_page(monkeypatch, page, demo_project, **query)
    assert not at.exception
    numbers = {n.key: n.value for n in at.number_input}
    if page.endswith("Error_slices.py"):
        assert 1 <= numbers["slices_depth"] <= 4 and 1 <= numbers["slices_support"] <= 2**53 - 1
        assert 0 <= numbers["slices_gap"] <= 1


def test_numbers_from_a_link_are_clamped_with_or_without_a_maximum():
    from hibug_ui.fields import MAX_SAFE_INTEGER, within_limits

    assert within_limits(-5, 30, int, {"min_value": 1}) == 1
    assert within_limits(10**30, 30, int, {"min_value": 1}) == MAX_SAFE_INTEGER
    assert within_limits(7, 2, int, {"min_value": 1, "max_value": 4}) == 4
    assert within_limits(float("nan"), 0.1, float, {"min_value": 0, "max_value": 1}) == 0.1
    assert within_limits(float("inf"), 0.1, float, {"min_value": 0, "max_value": 1}) == 1.0
    assert within_limits("junk", 30, int, {"min_value": 1}) == 30


# ----- 7. values refused or warned by rule ---------------------------------------------------------------------------
def test_shares_outside_zero_to_one_are_refused_in_every_format(tmp_path):
    from hibug_core.objects.coco import parse_ground_truth, parse_results
    from hibug_core.tasks import load_manifest

    Image.new("RGB", (64, 64)).save(tmp_path / "a.png")
    (tmp_path / "objects.csv").write_text(
        "image,box,label,pred_box,prediction,confidence\n"
        "a.png,1 1 10 10,cat,1 1 10 10,cat,5.0\na.png,20 20 10 10,cat,20 20 10 10,cat,-3\n"
        "a.png,30 30 10 10,cat,30 30 10 10,cat,0.5\n")
    with pytest.raises(ManifestError) as raised:
        load_manifest(tmp_path / "objects.csv")
    assert [m.split(":")[0] for m in raised.value.messages] == ["row 1, column 'confidence'",
                                                                "row 2, column 'confidence'"]
    assert "outside 0 to 1" in raised.value.messages[0]
    (tmp_path / "c.csv").write_text("image,label,prediction,confidence\na.png,cat,cat,1.5\n")
    with pytest.raises(ManifestError, match="confidence"):
        load_manifest(tmp_path / "c.csv")
    truth = parse_ground_truth({
        "images": [{"id": 1, "file_name": "a.png", "width": 64, "height": 64}],
        "categories": [{"id": 1, "name": "cat"}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10], "area": 100,
                         "iscrowd": 0}]}, str(tmp_path / "truth.json"))
    with pytest.raises(ManifestError) as raised:
        parse_results([{"image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10], "score": s} for s in (5.0, -3, 0.9)],
                      truth, str(tmp_path / "r.json"), model="m")
    assert len(raised.value.issues) == 2 and all("from 0 to 1" in m for m in raised.value.messages)


def test_a_prediction_without_its_probability_column_is_refused_and_confidence_is_its_own(tmp_path):
    from hibug_core.tasks import load_manifest

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("image,label,prediction,prob:cat,prob:dog\na.png,cat,bird,0.7,0.3\n")
    with pytest.raises(ManifestError, match="'bird' has no probability among prob:"):
        load_manifest(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text("image,label,prediction,prob:cat,prob:dog\na.png,cat,dog,0.7,0.3\n")
    assert load_manifest(tmp_path / "m.csv").models["model"].confidence.tolist() == [pytest.approx(0.3)]


def test_classes_equal_up_to_case_and_punctuation_are_warned_with_the_groups(tmp_path, capsys):
    from hibug_core.cli import main
    from hibug_core.values import near_duplicates

    assert near_duplicates(["Cat", "cat.", "dog", "cat", "Dog ", "bird"]) == [("Cat", "cat", "cat."), ("Dog ", "dog")]
    for name in "abc":
        Image.new("RGB", (8, 8)).save(tmp_path / f"{name}.png")
    (tmp_path / "m.csv").write_text("image,label,prediction\na.png,Cat,cat\nb.png,cat.,Cat\nc.png,dog,dog\n")
    assert main(["new", str(tmp_path / "p"), "--manifest", str(tmp_path / "m.csv")]) == 0
    assert ("warning: 1 group of classes differ only by case or punctuation and are kept apart: 'Cat' and 'cat' and "
            "'cat.'") in capsys.readouterr().out


def test_invalid_choices_of_a_tag_source_are_refused_and_change_nothing(tmp_path, capsys):
    from hibug_core.cli import main
    from hibug_core.store import tag_store
    from hibug_core.store.project import Project

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("image,label,prediction,attr:size\na.png,cat,cat,small\n")
    main(["new", str(tmp_path / "p"), "--manifest", str(tmp_path / "m.csv")])
    capsys.readouterr()
    for choice, why in (("size=run:999", "there is no such run"), ("nosuch=auto", "is not an attribute"),
                        ("size=run:x", "unknown tag source"), ("size=run:", "unknown tag source")):
        assert main(["tags", str(tmp_path / "p"), "--choose", choice]) == 2, choice
        assert why in capsys.readouterr().err
    with Project.open(tmp_path / "p") as project:
        assert tag_store.chosen_sources(project) == {}
    assert main(["tags", str(tmp_path / "p"), "--choose", "size=imported"]) == 0


def test_problem_counts_say_how_many_there_are_in_all(tmp_path):
    from hibug_core.tasks import load_manifest

    rows = "".join(f"{i}.png,cat,cat,1.{i + 1}\n" for i in range(250))
    (tmp_path / "m.csv").write_text("image,label,prediction,confidence\n" + rows)
    with pytest.raises(ManifestError) as raised:
        load_manifest(tmp_path / "m.csv")
    head = str(raised.value).splitlines()[0]
    assert head.endswith("m.csv: 250 problems found, the first 20 below; the images were not checked yet; nothing "
                         "was imported.")
    assert str(raised.value).splitlines()[-1] == "  ... and 230 more"


def test_a_model_spec_naming_a_pipe_or_a_device_is_refused_before_its_loader_runs(tmp_path):
    from hibug_core import safe_files
    from hibug_core.models.registry import load_model

    os.mkfifo(tmp_path / "net.pth")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "folder" / "config.json")
    for spec, what in ((f"timm:resnet18:{tmp_path / 'net.pth'}", "is a pipe (FIFO), not a model file"),
                       ("shape-cnn:/dev/zero", "is a device, not a model file"),
                       (f"transformers:{tmp_path / 'folder'}", "config.json is a pipe (FIFO)")):
        outcome, took = _in_time(lambda spec=spec: load_model(spec))
        assert isinstance(outcome.get("error"), safe_files.FileRefused) and what in str(outcome["error"]), outcome
        assert took < 20
