"""The hostile and clumsy cases of the hardening issue, one test per case: each failed before its fix."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from hibug_core.cli import main
from hibug_core.tasks import task_of


def _versions(project) -> int:
    from hibug_core.store.attribute_versions import latest_version

    return latest_version(project)


def test_an_edit_that_would_make_the_schema_invalid_is_refused_and_nothing_is_stored(colour_project, capsys):
    folder = str(colour_project.folder)
    before = _versions(colour_project)
    assert main(["attributes", "edit", folder, "color", "--rename", "is round"]) == 2
    assert ("edit of 'color' refused, nothing saved: duplicate attribute names: is round"
            in capsys.readouterr().err)
    assert main(["attributes", "edit", folder, "color", "--template", "a {label} {tag} {oops}"]) == 2
    assert ("template 'a {label} {tag} {oops}' uses {oops}; only {label}, {tag}, {attribute}, {phrase} can be "
            "filled in") in capsys.readouterr().err
    assert main(["attributes", "edit", folder, "color", "--template", "a {tag.__class__.__mro__}"]) == 2
    assert "uses {tag.__class__.__mro__}" in capsys.readouterr().err
    assert main(["attributes", "edit", folder, "color", "--template", "a {tag} }"]) == 2
    assert "is not a valid format string" in capsys.readouterr().err
    assert _versions(colour_project) == before
    assert main(["attributes", "edit", folder, "color", "--template", "a {label} in {tag}"]) == 0
    assert main(["tag", folder, "--encoder", "tiny-open_clip", "--attributes", "color"]) == 0


def test_a_schema_built_without_validation_is_refused_by_save(colour_project):
    from hibug_core.errors import SchemaError
    from hibug_core.store.attribute_versions import load_schema, save_schema

    schema = load_schema(colour_project)
    broken = schema.model_copy(update={"attributes": (*schema.attributes, schema.attributes[0])})
    with pytest.raises(SchemaError, match="duplicate attribute names: color"):
        save_schema(colour_project, broken)
    with pytest.raises(SchemaError, match="duplicate attribute names: color"):
        schema.edited(attributes=(*schema.attributes, schema.attributes[0]))


def test_an_invalid_stored_schema_is_named_not_a_traceback(colour_project, capsys):
    from hibug_core.errors import ProjectError
    from hibug_core.store.attribute_versions import load_schema

    raw = json.loads(load_schema(colour_project).to_json())
    raw["attributes"].append(dict(raw["attributes"][0]))  # as an older hibug stored it
    with colour_project.engine.begin() as connection:
        connection.execute(text("INSERT INTO attribute_schemas (schema_json, author, created_at, note) "
                                "VALUES (:s, 'old', '2026-01-01', '')"), {"s": json.dumps(raw)})
    with pytest.raises(ProjectError, match="stored as the newest version are not valid .duplicate attribute names"):
        load_schema(colour_project)
    folder = str(colour_project.folder)
    assert main(["attributes", "show", folder, "--history"]) == 0
    assert main(["attributes", "show", folder]) == 2
    assert main(["slices", folder]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Save a corrected schema" in err
    assert main(["attributes", "show", folder, "--version", "1"]) == 0


def test_runaway_schemas_are_capped(colour_project):
    from hibug_core.attributes.schema import MAX_ATTRIBUTES, Attribute, AttributeSchema
    from hibug_core.errors import SchemaError

    with pytest.raises(ValueError, match=r"the attribute name 'x+\.\.\. is 1,048,576 characters long, more than the "
                                         "1,000 hibug keeps"):  # the one normaliser's cap, before the schema's own
        Attribute(name="x" * 2 ** 20, tags=("a", "b"))
    many = tuple(Attribute(name=f"a{i}", tags=("x", "y")) for i in range(1000))
    with pytest.raises(ValueError, match=f"1000 attributes; a schema can have at most {MAX_ATTRIBUTES}"):
        AttributeSchema(attributes=many)
    with pytest.raises(SchemaError, match="60 tags; an attribute can have at most 50"):
        many[0].edited(tags=tuple(f"t{i}" for i in range(60)))


def _llm(server, **overrides):
    from hibug_core.llm.client import LLMConfig

    return LLMConfig(base_url=server.url, **{**dict(model="fake-vision", timeout_s=30.0, transport_retries=0,
                                                   concurrency=3, abort_after=2), **overrides})


@pytest.mark.parametrize("mode, problem", [("deep", "the reply is JSON nested too deeply to read"),
                                           ("huge", "characters long, more than the 1,000 hibug keeps")])
def test_deep_or_huge_llm_replies_end_the_run_with_a_short_message(colour_project, mode, problem):
    from hibug_core.errors import TaggingError
    from hibug_core.store import tag_store
    from hibug_core.tagging.mllm import tag_with_llm
    from hibug_core.tagging.propose import ProposalError, propose_with_llm

    from fake_openai import DEEP, FakeOpenAIServer

    with FakeOpenAIServer(mode=mode) as server:
        huge = {"attributes": [{"name": "x" * 2 ** 20, "tags": ["a", "b"]}]}
        server.text_reply = DEEP if mode == "deep" else json.dumps(huge)
        with pytest.raises(TaggingError) as raised:
            tag_with_llm(colour_project, _llm(server), views=task_of(colour_project).views)
        if mode == "deep":
            with pytest.raises(ProposalError, match="nested too deeply"):
                propose_with_llm("shapes", ["circle"], _llm(server))
        else:
            with pytest.raises(ProposalError, match="whose name is 1,048,576 characters long .at most 100."):
                propose_with_llm("shapes", ["circle"], _llm(server))
    assert problem in str(raised.value) and len(str(raised.value)) < 1000
    assert tag_store.runs(colour_project)["status"].tolist() == ["failed"]


def test_a_silent_server_is_reported_while_waiting(colour_project, monkeypatch):
    from hibug_core.errors import TaggingError
    from hibug_core.tagging import mllm

    from fake_openai import FakeOpenAIServer

    monkeypatch.setattr(mllm, "HEARTBEAT_S", 0.2)
    seen = []
    with FakeOpenAIServer(delay_s=3.0) as server, pytest.raises(TaggingError, match="timed out"):
        mllm.tag_with_llm(colour_project, _llm(server, timeout_s=1.5), progress=lambda s, d, t: seen.append(s),
                          views=task_of(colour_project).views)
    waiting = [s for s in seen if "no answer for" in s]
    assert waiting and "(a request is given up after 2 s)" in waiting[0]


def test_a_proposal_of_a_thousand_attributes_keeps_the_cap(colour_project):
    from hibug_core.attributes.schema import MAX_ATTRIBUTES
    from hibug_core.tagging.propose import Proposal, repair

    proposal = Proposal.model_validate({"attributes": [{"name": f"a{i}", "tags": ["x", "y"]} for i in range(1000)]})
    attributes, notes = repair(proposal)
    assert len(attributes) == MAX_ATTRIBUTES
    assert notes == [f"kept the first {MAX_ATTRIBUTES} attributes (the most a schema holds); 800 more were not read"]


def _damaged(tmp_path, colour_project, how: str):
    import hashlib
    import sqlite3

    folder = tmp_path / how
    folder.mkdir()
    database = folder / "hibug.sqlite"
    if how == "empty":
        database.write_bytes(b"")
    elif how == "junk":
        database.write_text("<html>not a database</html>")
    elif how == "folder":
        database.mkdir()
    elif how == "truncated":
        colour_project.close()
        whole = (colour_project.folder / "hibug.sqlite").read_bytes()
        database.write_bytes(whole[: len(whole) // 2])
    elif how == "foreign":
        with sqlite3.connect(database) as connection:
            connection.execute("CREATE TABLE invoices (id INTEGER)")
    before = hashlib.sha256(database.read_bytes()).hexdigest() if database.is_file() else None
    return folder, database, before


@pytest.mark.parametrize("how, message", [
    ("empty", "is empty (0 bytes): the project's database is lost"),
    ("junk", "is not a SQLite database (it starts with b'<html>not a data')"),
    ("folder", "is a folder, not a database"),
    ("truncated", "is cut short"),
    ("foreign", "is a database but not a hibug project (its tables: invoices)"),
])
def test_a_broken_database_is_named_and_never_written(tmp_path, colour_project, monkeypatch, capsys, how, message):
    import hashlib

    from page_support import open_page

    folder, database, before = _damaged(tmp_path, colour_project, how)
    for command in (["info", str(folder)], ["attributes", "show", str(folder)], ["slices", str(folder)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    after = hashlib.sha256(database.read_bytes()).hexdigest() if database.is_file() else None
    assert after == before, "opening a broken database must not write to it"
    assert sorted(p.name for p in folder.iterdir()) == ["hibug.sqlite"]
    at = open_page(monkeypatch, "app.py", folder)
    assert not at.exception and message in at.error[0].value.replace("\\", "")


def test_a_project_path_that_is_a_file_is_named(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    assert main(["info", str(tmp_path / "notes.txt")]) == 2
    assert "notes.txt is a file; give the folder of a hibug project" in capsys.readouterr().err


def test_a_read_only_project_opens_and_refuses_edits_with_a_message(colour_project, capsys):
    import hashlib

    from hibug_core.errors import ProjectError
    from hibug_core.store.project import Project

    folder = colour_project.folder
    colour_project.close()
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}
    with Project.open(folder, read_only=True) as project:
        assert project.read_only and len(project.samples()) == 12
        with pytest.raises(ProjectError, match="open read-only"):
            project.set_meta("name", "changed")
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}
    assert after["hibug.sqlite"] == before["hibug.sqlite"]
    assert set(after) <= {"hibug.sqlite", "hibug.sqlite-wal", "hibug.sqlite-shm"}  # SQLite's own bookkeeping
    assert (folder / "hibug.sqlite-wal").stat().st_size == 0 if "hibug.sqlite-wal" in after else True


def test_a_project_on_a_read_only_mount_opens_read_only(colour_project, tmp_path, capsys):
    import os
    import subprocess

    folder = colour_project.folder
    colour_project.close()
    mount = tmp_path / "mounted"
    mount.mkdir()
    os.chmod(folder, 0o555)
    target = folder
    if os.access(folder, os.W_OK):  # root ignores permissions: a read-only bind mount, where the machine allows it
        made = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(mount)], capture_output=True)
        if made.returncode != 0:
            pytest.skip("no way to make a read-only folder here (root, and mounting is not allowed)")
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=True)
        target = mount
    try:
        assert main(["info", str(target)]) == 0
        assert "samples   pool: 2, val: 10" in capsys.readouterr().out
        assert main(["attributes", "edit", str(target), "color", "--add-tag", "pink"]) == 2
        assert "open read-only" in capsys.readouterr().err
        # every writing command is refused before its work, in words (tag and embed raised an OSError after it)
        for command in (["tag", str(target), "--encoder", "tiny-open_clip"],
                        ["embed", str(target), "--encoder", "tiny-open_clip"],
                        ["remove", str(target), "--unreadable"],
                        ["import", str(target), "--manifest", str(tmp_path / "any.csv")]):
            assert main(command) == 2, command
            err = capsys.readouterr().err
            assert "is open read-only" in err and "nothing was done" in err and "Traceback" not in err, command
    finally:
        if target == mount:
            subprocess.run(["umount", str(mount)], check=True)
        os.chmod(folder, 0o755)


@pytest.mark.parametrize("header, expected", [
    ("image,label,prediction,attr:color,attr:color ",
     "column 'attr:color': the column appears 2 times ('attr:color', 'attr:color '; spaces around names, invisible "
     "characters and Unicode forms do not count); remove or rename all but one"),
    ("image,label,prediction,attr:a:b,attr: a:b ",
     "column 'attr: a:b': attribute 'a:b' is also given by column 'attr:a:b'; keep one of them"),
    ("image,label, label,prediction", "column 'label': the column appears 2 times ('label', ' label'"),
    ("image,label,image ,prediction", "column 'image': the column appears 2 times"),
    ("image,label,prediction,prob:a,prob: a ", "column 'prob: a': class 'a' is also given by column 'prob:a'"),
    ("image,label,prediction,attr:x,attr:x", "column 'attr:x': the column appears 2 times"),
])
def test_headers_that_clash_once_spaces_are_removed_are_named(image_dir, write_csv, tmp_path, header, expected):
    from hibug_core.errors import ManifestError
    from hibug_core.tasks import load_manifest

    cells = header.count(",") + 1
    rows = [header] + [",".join([f"images/{n}.png", "a", "b"] + ["red"] * (cells - 3)) for n in "ab"]
    with pytest.raises(ManifestError) as raised:
        load_manifest(write_csv("\n".join(rows) + "\n"))
    assert len(raised.value.messages) == 1 and raised.value.messages[0].startswith(expected)


def test_a_tsv_manifest_is_read_with_tabs(image_dir, write_csv):
    from hibug_core.tasks import load_manifest

    text = "image\tlabel\tprediction\tattr:color\nimages/a.png\tcat\tcat\tred\nimages/b.png\tdog\tcat\tblue\n"
    manifest = load_manifest(write_csv(text, name="manifest.tsv"))
    assert manifest.samples["label"].tolist() == ["cat", "dog"]
    assert manifest.known_tags["color"] == ["red", "blue"]


def _image(path, colour=(200, 40, 40), size=(16, 16)):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path


def test_a_link_made_inside_a_data_root_after_import_is_never_served(tmp_path, monkeypatch):
    from hibug_core.errors import ProjectError
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    from page_support import open_page

    for name in "ab":
        _image(tmp_path / "data" / f"{name}.png")
    secret = _image(tmp_path / "private" / "secret.png", (0, 0, 255))
    (tmp_path / "data" / "manifest.csv").write_text("image,label,prediction\na.png,x,y\nb.png,y,y\n")
    with Project.create_from_manifest(tmp_path / "p", load_manifest(tmp_path / "data" / "manifest.csv")) as project:
        (tmp_path / "data" / "a.png").unlink()
        (tmp_path / "data" / "a.png").symlink_to(secret)
        paths = project.samples()["image_path"]
        assert project.served_image(paths.iat[1]).name == "b.png"
        with pytest.raises(ProjectError, match="leads outside the project's image folders"):
            project.served_image(paths.iat[0])
    at = open_page(monkeypatch, "app.py", tmp_path / "p")
    assert not at.exception
    assert [c.value for c in at.caption if "not available" in c.value] == ["x → y (image not available)"]


def test_a_link_out_of_its_folder_is_refused_at_import(tmp_path):
    from hibug_core.errors import ManifestError
    from hibug_core.tasks import load_manifest

    _image(tmp_path / "data" / "a.png")
    (tmp_path / "data" / "b.png").symlink_to(_image(tmp_path / "elsewhere" / "b.png"))
    (tmp_path / "data" / "manifest.csv").write_text("image,label,prediction\na.png,x,x\nb.png,y,x\n")
    with pytest.raises(ManifestError) as raised:
        load_manifest(tmp_path / "data" / "manifest.csv")
    assert raised.value.messages == [f"row 2, column 'image': is a link to {tmp_path}/elsewhere/b.png, outside the "
                                     "image's folder; copy the file there instead: b.png"]


def test_images_in_distant_folders_get_their_own_data_roots(tmp_path):
    from sqlalchemy import text as sql

    from hibug_core.store.project import Project, data_roots
    from hibug_core.tasks import load_manifest

    _image(tmp_path / "x" / "a.png")
    _image(tmp_path / "x" / "inner" / "c.png")
    _image(tmp_path / "y" / "deep" / "b.png")
    manifest = tmp_path / "m.csv"
    manifest.write_text("image,label,prediction\nx/a.png,p,p\nx/inner/c.png,p,p\ny/deep/b.png,q,p\n")
    with Project.create_from_manifest(tmp_path / "p", load_manifest(manifest)) as project:
        with project.engine.connect() as connection:
            roots = sorted(connection.execute(sql("SELECT path FROM data_roots")).scalars())
        assert roots == [str(tmp_path / "x"), str(tmp_path / "y" / "deep")]
        assert [p.name for p in map(project.served_image, project.samples()["image_path"])] == ["a.png", "c.png",
                                                                                                "b.png"]
    assert data_roots([tmp_path / "a", tmp_path / "a-b", tmp_path / "a" / "c"]) == {
        tmp_path / "a": tmp_path / "a", tmp_path / "a-b": tmp_path / "a-b", tmp_path / "a" / "c": tmp_path / "a"}


def test_huge_images_are_named_too_large_and_large_ones_read_without_a_warning(tmp_path):
    import subprocess
    import sys

    from PIL import Image

    from hibug_core.errors import ManifestError
    from hibug_core.tasks import load_manifest

    Image.new("1", (13400, 13400)).save(tmp_path / "huge.png")  # 179.6 Mpx: above what Pillow reads
    Image.new("1", (12000, 12000)).save(tmp_path / "large.png")  # 144 Mpx: Pillow would warn
    (tmp_path / "m.csv").write_text("image,label,prediction\nhuge.png,x,x\nlarge.png,x,x\n")
    with pytest.raises(ManifestError) as raised:
        load_manifest(tmp_path / "m.csv")
    assert raised.value.messages == ["row 1, column 'image': image too large (179,560,000 pixels, more than the "
                                     "178,956,970 hibug reads); downscale it: huge.png"]
    (tmp_path / "m.csv").write_text("image,label,prediction\nlarge.png,x,x\n")
    run = subprocess.run([sys.executable, "-W", "default", "-m", "hibug_core.cli", "new", str(tmp_path / "p"),
                          "--manifest", str(tmp_path / "m.csv")], capture_output=True, text=True)
    assert run.returncode == 0 and "Warning" not in run.stderr, run.stderr


def _cut_short(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_damaged_embeddings_file_is_set_aside_and_computed_again(colour_project, capsys):
    from hibug_core.embeddings.cache import LOADED_PARTS
    from hibug_core.embeddings.compute import stored_embeddings

    folder = str(colour_project.folder)
    assert main(["embed", folder, "--encoder", "tiny-open_clip"]) == 0
    parts = sorted((colour_project.folder / "arrays").rglob("part-*.npz"))
    assert len(parts) == 1
    _cut_short(parts[0])
    LOADED_PARTS.clear()  # as a new process finds it
    assert main(["embed", folder, "--encoder", "tiny-open_clip"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert parts[0].with_name(parts[0].name + ".damaged").exists()
    assert stored_embeddings(colour_project, "tiny-open_clip").embedding.shape[0] == 12


def test_a_damaged_tags_file_sets_its_run_aside_and_tagging_again_repairs_it(colour_project, capsys):
    from hibug_core.store import tag_store
    from hibug_core.tagging.run import current_tags

    folder = str(colour_project.folder)
    assert main(["tag", folder, "--encoder", "tiny-open_clip", "--attributes", "color"]) == 0
    run_file = next((colour_project.folder / "arrays" / "tags").glob("run-*.npz"))
    _cut_short(run_file)
    assert main(["slices", folder, "--depth", "1"]) == 2  # read-only: said, nothing changed
    assert "could not be read" in capsys.readouterr().err and run_file.exists()
    assert main(["tag", folder, "--encoder", "tiny-open_clip", "--attributes", "color"]) == 0
    runs = tag_store.runs(colour_project)
    assert runs["status"].tolist() == ["failed", "finished"] and "tag again to replace them" in runs["message"].iat[0]
    assert main(["slices", folder, "--depth", "1"]) == 0
    assert current_tags(colour_project).tags["color"].notna().all()


def _manifest_of(tmp_path, n: int = 6):
    for i in range(n):
        _image(tmp_path / "data" / f"{i}.png", (i * 20 % 255, 90, 160))
    path = tmp_path / "data" / "manifest.csv"
    path.write_text("image,label,prediction\n" + "".join(f"{i}.png,a,{'ab'[i % 2]}\n" for i in range(n)))
    return path


def test_a_killed_hibug_new_leaves_nothing_that_the_next_one_does_not_remove(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    manifest = _manifest_of(tmp_path, 400)
    target = tmp_path / "p"
    process = subprocess.Popen([sys.executable, "-m", "hibug_core.cli", "new", str(target), "--manifest",
                                str(manifest)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not list(tmp_path.glob(".p.creating-*")) and time.time() < deadline and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    if target.exists():
        pytest.skip("the import finished before it could be killed")
    assert list(tmp_path.glob(".p.creating-*")), "the killed run's staging folder is what this test is about"
    assert main(["new", str(target), "--manifest", str(manifest)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "p"]


def test_two_hibug_new_on_one_folder_end_with_one_project_and_a_message(tmp_path, monkeypatch, capsys):
    from hibug_core.store.project import Project

    manifest = _manifest_of(tmp_path)
    real_import = Project.import_manifest

    def racing(self, *args, **kwargs):  # the other `hibug new` finishes while this one imports
        (tmp_path / "p").mkdir(exist_ok=True)
        (tmp_path / "p" / "hibug.sqlite").write_bytes(b"the other one")
        return real_import(self, *args, **kwargs)

    monkeypatch.setattr(Project, "import_manifest", racing)
    assert main(["new", str(tmp_path / "p"), "--manifest", str(manifest)]) == 2
    assert "was filled by another process while this one was being built" in capsys.readouterr().err
    assert (tmp_path / "p" / "hibug.sqlite").read_bytes() == b"the other one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "p"]


def test_teach_with_a_missing_or_non_utf8_examples_file_says_what_to_fix(colour_project, tmp_path, capsys):
    folder = str(colour_project.folder)
    assert main(["teach", folder, "color", "--examples", str(tmp_path / "none.csv")]) == 2
    assert "none.csv: 1 problem found" in capsys.readouterr().err
    (tmp_path / "latin.csv").write_bytes("sample,tag\n0.png,r\xe9d\n".encode("latin-1"))
    assert main(["teach", folder, "color", "--examples", str(tmp_path / "latin.csv")]) == 2
    err = capsys.readouterr().err
    assert "row 1, column 'tag': text is not valid UTF-8 (byte 0xe9); save the file as UTF-8" in err
    assert "Traceback" not in err


def test_report_into_a_missing_folder_says_so(demo_project, tmp_path, capsys):
    assert main(["report", str(demo_project), "--output", str(tmp_path / "missing" / "r.md")]) == 2
    assert "no folder" in capsys.readouterr().err


def test_an_output_named_like_a_file_that_is_a_folder_is_refused_in_words(demo_project, tmp_path, capsys):
    """`report --output` naming a folder showed an IsADirectoryError traceback; every file a person names for hibug
    to write (reports, tables, comparisons, verdicts) goes through one writer that says what is wrong."""
    for name, command in (("r.html", ["report", str(demo_project)]), ("t.csv", ["slices", str(demo_project)])):
        (tmp_path / name).mkdir()
        assert main([*command, "--output", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / name} is a folder; name a file to write the" in err and "Traceback" not in err


@pytest.fixture
def small_disk(tmp_path):
    """A 600 kB tmpfs: a real full disk, where this machine lets tests mount one."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("mounting a small tmpfs is not allowed here; the injected faults below cover the same paths")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_hibug_new_on_a_full_disk_says_so_and_leaves_nothing(tmp_path, small_disk, capsys):
    manifest = _manifest_of(tmp_path, 3000)
    assert main(["new", str(small_disk / "p"), "--manifest", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert "the disk holding the project is full" in err or "the disk is full" in err
    assert "Traceback" not in err and "[parameters:" not in err and "INSERT" not in err
    assert list(small_disk.iterdir()) == []


def test_an_import_that_fills_the_database_changes_nothing(colour_project, tmp_path, monkeypatch, capsys):
    """SQLite's own 'database or disk is full', made by capping the pages the database may use."""
    from sqlalchemy import event

    from hibug_core.store import project as project_module

    before = colour_project.describe()["splits"]
    colour_project.close()
    made = project_module.make_engine

    def capped(url, config=project_module.StoreConfig()):
        engine = made(url, config)

        @event.listens_for(engine, "connect")
        def _cap(connection, _):
            pages = connection.execute("PRAGMA page_count").fetchone()[0]
            connection.execute(f"PRAGMA max_page_count = {pages + 2}")
        return engine

    monkeypatch.setattr(project_module, "make_engine", capped)
    manifest = _manifest_of(tmp_path / "more", 2000)
    assert main(["import", str(colour_project.folder), "--manifest", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert "the disk holding the project is full (database or disk is full); nothing was changed" in err
    assert "[parameters:" not in err
    monkeypatch.undo()
    with project_module.Project.open(colour_project.folder) as project:
        assert project.describe()["splits"] == before


def test_tagging_onto_a_full_disk_keeps_the_tags_before(colour_project, monkeypatch, capsys):
    import errno

    import numpy as np

    from hibug_core.store import arrays, tag_store

    def full(handle, **_):
        handle.write(b"PK\x03\x04 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    assert main(["tag", str(colour_project.folder), "--encoder", "tiny-open_clip", "--attributes", "color"]) == 0
    monkeypatch.setattr(arrays.np, "savez", full)
    assert main(["tag", str(colour_project.folder), "--encoder", "tiny-open_clip", "--attributes", "color"]) == 2
    err = capsys.readouterr().err
    assert "is full; nothing was kept of tags/run-2" in err and "Traceback" not in err
    monkeypatch.setattr(arrays.np, "savez", np.savez)
    assert list((colour_project.folder / "arrays").rglob("*.tmp")) == []
    runs = tag_store.runs(colour_project)
    assert runs["status"].tolist()[0] == "finished"


def test_embedding_stores_its_work_every_few_seconds_not_only_every_4096_images(colour_project):
    from hibug_core.embeddings.compute import EmbedConfig, embed_project

    embed_project(colour_project, "tiny-open_clip", config=EmbedConfig(batch_size=2, workers=0, save_every_s=0.0))
    parts = list((colour_project.folder / "arrays" / "embeddings").rglob("part-*.npz"))
    assert len(parts) == 3, "6 distinct images in batches of 2: one part per batch when each takes longer"
    assert EmbedConfig().save_every_s <= 5.0


def _distinct_images(folder, n: int, name: str):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        if not (folder / f"{i}.png").exists():
            Image.new("RGB", (4, 4), (i % 256, (i // 256) % 256, 160)).save(folder / f"{i}.png")
    return folder


def _manifest_rows(folder, rows: range, name: str):
    path = folder / name
    path.write_text("image,label,prediction\n" + "".join(f"{i}.png,a,{'ab'[i % 2]}\n" for i in rows))
    return path


def test_a_checkpoint_stopped_by_a_full_disk_is_not_called_damage(tmp_path, capsys):
    """An import on a nearly full disk: committed whole in the write-ahead log, whose copy into the database file (the
    checkpoint) the disk stopped half-way. The file is shorter than its header says, and whole with its log: every
    command reads it, `info --check` passes, and the first write where there is room finishes the checkpoint."""
    import os
    import shutil
    import subprocess

    from hibug_core.store.project import Project

    data = _distinct_images(tmp_path / "data", 8000, "")
    first, rest = _manifest_rows(data, range(500), "first.csv"), _manifest_rows(data, range(500, 8000), "rest.csv")
    # 1. The sizes, where there is room: the database before and after the import.
    assert main(["new", str(tmp_path / "roomy"), "--manifest", str(first)]) == 0
    before = (tmp_path / "roomy" / "hibug.sqlite").stat().st_size
    assert main(["import", str(tmp_path / "roomy"), "--manifest", str(rest)]) == 0
    grown = (tmp_path / "roomy" / "hibug.sqlite").stat().st_size - before
    # 2. A disk with room for the import's log (about its growth) but not for copying it all into the file as well:
    # the first of a few sizes (the log's own size varies a little) that leaves the file cut short.
    disk = tmp_path / "disk"
    disk.mkdir()
    for share in (2.1, 1.9, 1.7, 1.5, 1.3):
        size = int(before + share * grown) // 1024 + 64
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", str(disk)],
                          capture_output=True).returncode != 0:
            pytest.skip("mounting a small tmpfs is not allowed here")
        try:
            assert main(["new", str(disk / "p"), "--manifest", str(first)]) == 0
            if main(["import", str(disk / "p"), "--manifest", str(rest)]) != 0:
                continue  # no room for the log itself: refused, nothing changed (tested elsewhere)
            database = disk / "p" / "hibug.sqlite"
            header = database.read_bytes()[:100]
            pages = int.from_bytes(header[28:32], "big") * int.from_bytes(header[16:18], "big")
            if database.stat().st_size == pages:
                continue  # room enough for the whole checkpoint
            capsys.readouterr()
            assert main(["info", str(disk / "p")]) == 0
            assert "val: 8000" in capsys.readouterr().out
            assert main(["info", str(disk / "p"), "--check"]) == 0
            assert "the store is whole" in capsys.readouterr().out
            shutil.copytree(disk / "p", tmp_path / "moved")  # to a disk with room
            break
        finally:
            subprocess.run(["umount", str(disk)], check=True)
    else:
        pytest.fail("no disk size left the checkpoint cut short")
    with Project.open(tmp_path / "moved") as project:  # a writable open finishes the checkpoint
        assert project.describe()["splits"] == {"val": 8000}
    assert not os.path.exists(tmp_path / "moved" / "hibug.sqlite-wal") or \
        os.path.getsize(tmp_path / "moved" / "hibug.sqlite-wal") == 0


def test_a_write_is_refused_once_the_whole_check_found_damage(demo_copy, capsys):
    """`info --check` (SQLite's integrity check) finds what the quick check before a write misses (an index whose
    entries disagree with its table): every later write is refused, in any process, until a whole check passes."""
    import sqlite3

    database = demo_copy / "hibug.sqlite"
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA writable_schema = ON")  # the index now claims another column than it holds
    connection.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX ix_samples_split ON samples (label)' "
                       "WHERE name = 'ix_samples_split'")
    connection.commit()
    connection.close()
    with sqlite3.connect(database) as connection:
        assert connection.execute("PRAGMA quick_check").fetchall() == [("ok",)]  # the quick check sees nothing
    before = database.read_bytes()
    assert main(["info", str(demo_copy), "--check"]) == 1
    assert "missing from index ix_samples_split" in capsys.readouterr().out
    assert (demo_copy / "hibug.sqlite.damaged").exists()
    assert main(["attributes", "edit", str(demo_copy), "color", "--rename", "colour"]) == 2
    err = capsys.readouterr().err
    assert "the project's database is damaged (found by `hibug info --check`" in err and "Traceback" not in err
    assert database.read_bytes() == before


def test_a_dropped_table_fails_the_whole_check_and_later_writes(demo_copy, capsys):
    import sqlite3

    with sqlite3.connect(demo_copy / "hibug.sqlite") as connection:
        connection.execute("DROP TABLE saved_views")
    assert main(["info", str(demo_copy), "--check"]) == 1
    assert "damaged: database: the table saved_views hibug keeps is missing" in capsys.readouterr().out
    assert main(["attributes", "edit", str(demo_copy), "color", "--rename", "colour"]) == 2
    assert "the table saved_views hibug keeps is missing" in capsys.readouterr().err


def _junk_pixels_png(path) -> None:
    """A PNG whose every chunk's checksum is right but whose pixel data cannot be decoded."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x07" * 10))
                     + chunk(b"IEND", b""))


@pytest.fixture
def project_with_a_junk_png(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        _image(data / f"{i}.png", (i * 60, 90, 160), size=(32, 32))
    _junk_pixels_png(data / "bad.png")
    (data / "m.csv").write_text("image,label,prediction\n0.png,a,a\n1.png,a,b\n2.png,b,b\n3.png,b,b\nbad.png,a,a\n")
    assert main(["new", str(tmp_path / "p"), "--manifest", str(data / "m.csv")]) == 0
    assert main(["attributes", "propose", str(tmp_path / "p"), "--purpose", "colours"]) == 0
    return tmp_path / "p"


def test_an_image_that_imports_but_cannot_be_decoded_is_named_then_removed(project_with_a_junk_png, capsys):
    """A PNG with valid checksums and junk pixels passes the import's check; tagging then names it and says how to
    remove it (it died with a KeyError, forever), `hibug remove --unreadable` removes it, and tagging finishes."""
    from hibug_core.store.project import Project

    folder = str(project_with_a_junk_png)
    capsys.readouterr()
    assert main(["tag", folder, "--encoder", "tiny-open_clip"]) == 2
    err = capsys.readouterr().err
    assert "1 image(s) could not be read, e.g. " in err and "bad.png" in err and "Traceback" not in err
    assert "`hibug remove PROJECT --unreadable`" in err
    assert main(["remove", folder, "--unreadable"]) == 0
    out = capsys.readouterr().out
    assert "unreadable: " in out and "bad.png: corrupt or truncated image data" in out
    assert "removed 1 sample from" in out
    assert main(["tag", folder, "--encoder", "tiny-open_clip"]) == 0
    assert main(["info", folder, "--check"]) == 0
    with Project.open(folder) as project:
        assert project.split_counts() == {"val": 4}
        described = project.describe()["scores"][0]  # the per-split aggregate follows: 3 of 4 right
        assert (described["n"], described["mean_score"]) == (4, 0.75)
        assert "remove samples" in project.audit_log()["action"].tolist()
    assert main(["remove", folder, "--sample", "nowhere.png"]) == 2
    assert "--sample: no sample 'nowhere.png' in this project" in capsys.readouterr().err


def test_removing_an_objects_image_removes_all_its_objects_and_their_outcomes(detection_demo, tmp_path):
    import shutil

    from hibug_core.store.project import Project

    folder = tmp_path / "det"
    shutil.copytree(detection_demo, folder)
    with Project.open(folder) as project:
        objects = project.objects()
        image = objects["image_key"].iloc[0]
        same = objects.index[objects["image_key"] == image]
        assert len(same) > 1
        key = project.samples().loc[same[0], "sample_key"]
        before = len(project.samples())
    assert main(["remove", str(folder), "--sample", key]) == 0
    with Project.open(folder) as project:
        assert len(project.samples()) == before - len(same)
        assert not project.objects()["image_key"].eq(image).any()
        model = project.models()[0]
        assert project.objects(model).index.isin(same).sum() == 0
    assert main(["info", str(folder), "--check"]) == 0


def test_the_overview_finds_and_removes_unreadable_images(project_with_a_junk_png, monkeypatch):
    from hibug_core.store.project import Project

    from page_support import open_page

    at = open_page(monkeypatch, "app.py", project_with_a_junk_png)
    assert not at.exception
    at.button(key="removal_find").click().run()
    assert any("1 image(s) cannot be read" in w.value and "bad.png" in w.value for w in at.warning)
    at.button(key="removal_unreadable").click().run()
    assert not at.exception
    with Project.open(project_with_a_junk_png) as project:
        assert project.split_counts() == {"val": 4}
    first = project_with_a_junk_png.parent / "data" / "0.png"
    at.text_area(key="removal_named").input(f"{first}\nnot-there.png").run()
    at.button(key="removal_named_submit").click().run()
    assert [e.value for e in at.error] == ["No sample 'not-there.png' in this project; nothing was removed."]
    at.text_area(key="removal_named").input(str(first)).run()
    at.button(key="removal_named_submit").click().run()
    with Project.open(project_with_a_junk_png) as project:
        assert project.split_counts() == {"val": 3}


def test_one_image_file_is_one_sample_however_it_is_named(tmp_path, capsys):
    """The same file reached through a link (or '..') was two samples with two predictions; byte-for-byte copies are
    samples of their own, and said."""
    data = tmp_path / "data"
    for name in ("a", "b"):
        _image(data / f"{name}.png", (10, 200, 30) if name == "a" else (200, 10, 30))
    (data / "link.png").symlink_to(data / "a.png")
    (data / "copy.png").write_bytes((data / "b.png").read_bytes())
    (data / "m.csv").write_text("image,label,prediction\na.png,x,x\nb.png,y,y\nlink.png,x,y\n")
    assert main(["new", str(tmp_path / "p"), "--manifest", str(data / "m.csv")]) == 2
    assert ("row 3, column 'image': 'link.png' is the same file as row 1's image 'a.png' (through a link or '..'); "
            "one image file is one sample") in capsys.readouterr().err
    (data / "m.csv").write_text("image,label,prediction\na.png,x,x\nb.png,y,y\nsub/../a.png,x,y\n")
    assert main(["new", str(tmp_path / "p"), "--manifest", str(data / "m.csv")]) == 2
    assert "row 3, column 'image': duplicate image 'sub/../a.png', already in row 1" in capsys.readouterr().err
    (data / "m.csv").write_text("image,label,prediction\na.png,x,x\nb.png,y,y\ncopy.png,y,x\n")
    assert main(["new", str(tmp_path / "p"), "--manifest", str(data / "m.csv")]) == 0
    assert "warning: 1 image(s) are byte-for-byte copies of others (e.g. b.png = copy.png)" in \
        capsys.readouterr().out
    (data / "m.csv").write_text("id,image,label,prediction\n1,a.png,x,x\n2,link.png,y,y\n")  # ids: several allowed
    assert main(["new", str(tmp_path / "q"), "--manifest", str(data / "m.csv")]) == 0


def test_a_coco_image_given_twice_through_a_link_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    _image(data / "images" / "one.png", size=(64, 48))
    (data / "images" / "again.png").symlink_to(data / "images" / "one.png")
    truth = {"images": [{"id": 1, "file_name": "images/one.png", "width": 64, "height": 48},
                        {"id": 2, "file_name": "images/again.png", "width": 64, "height": 48}],
             "categories": [{"id": 1, "name": "thing"}],
             "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10], "iscrowd": 0},
                             {"id": 2, "image_id": 2, "category_id": 1, "bbox": [1, 1, 10, 10], "iscrowd": 0}]}
    (data / "truth.json").write_text(json.dumps(truth))
    (data / "found.json").write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10],
                                                  "score": 0.9}]))
    assert main(["new", str(tmp_path / "p"), "--coco", str(data / "truth.json"), "--results",
                 f"m={data / 'found.json'}"]) == 2
    assert "'images/again.png' is the same file as image 1's 'images/one.png'; give each image once" in \
        capsys.readouterr().err
