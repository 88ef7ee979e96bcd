"""Fault injection in the spirit of SQLite's own: a matrix of manifest mutations, project-folder faults (kills at
random points, concurrent writers) and language-model replies, each asserting a clear message that names what to
fix, no traceback, nothing stored that was not complete, and a re-run that finishes. Plus a bounded fuzz run of the
manifest reader (hypothesis-generated CSV and Parquet)."""
from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from hibug_core.cli import main
from hibug_core.tasks import task_of

HEADER = "id,image,label,prediction,confidence,split,attr:color"
ROWS = ["s0,images/0.png,dog,cat,0.5,val,red", "s1,images/1.png,cat,cat,0.6,val,blue",
        "s2,images/2.png,dog,cat,0.7,val,red", "s3,images/3.png,cat,cat,0.8,val,blue",
        "s4,images/4.png,,cat,0.9,pool,red", "s5,images/5.png,,cat,0.9,pool,blue"]  # pool rows are unlabelled


def _base() -> str:
    return "\n".join([HEADER, *ROWS]) + "\n"


def _replace_cell(row: int, column: str, value: str):
    def mutate(text: str) -> str:
        lines = text.split("\n")
        cells = lines[row].split(",")
        cells[HEADER.split(",").index(column)] = value
        lines[row] = ",".join(cells)
        return "\n".join(lines)
    return mutate


# name -> (mutation of the manifest text or bytes, expected: "ok" with the rows imported, or the message's start)
MUTATIONS = {
    # encodings
    "utf-8 with BOM": (lambda t: "\ufeff" + t, 6),
    "CRLF line ends": (lambda t: t.replace("\n", "\r\n"), 6),
    "blank lines at the end": (lambda t: t + "\n\n\n", 6),
    "latin-1 bytes in a label": (lambda t: t.replace("s1,images/1.png,cat", "s1,images/1.png,caf\xe9").encode(
        "latin-1"), "row 2, column 'label': text is not valid UTF-8 (byte 0xe9)"),
    "utf-16": (lambda t: t.encode("utf-16"), "header: text is not valid UTF-8"),
    "a NUL byte in a cell": (_replace_cell(1, "attr:color", "re\x00d"), "row 1, column 'attr:color': 're\\x00d' holds "
                                                                         "the control character U+0000; remove it"),
    # headers
    "no image column": (lambda t: t.replace(",image,", ",picture,", 1), "column 'image': required column is missing"),
    "no label column": (lambda t: t.replace(",label,", ",class,", 1), "column 'label': required column is missing"),
    "Image in capitals": (lambda t: t.replace(",image,", ",Image,", 1), "column 'image': required column is missing"),
    "the same column twice": (lambda t: t.replace("attr:color", "label", 1), "column 'label': the column appears 2"),
    "spaces around names": (lambda t: t.replace(",image,", ", image ,", 1), 6),
    "header only": (lambda t: HEADER + "\n", "the manifest has a header but no rows"),
    "empty file": (lambda t: "", "the file is empty; a manifest needs a header row"),
    "only whitespace": (lambda t: " \n\n \n", "the file is empty; a manifest needs a header row"),
    "an unknown column": (lambda t: "\n".join(line + (",notes" if n == 0 else ",x") for n, line in
                                              enumerate(t.rstrip("\n").split("\n"))) + "\n", 6),
    "an empty attribute name": (lambda t: t.replace("attr:color", "attr:"), 6),
    # quoting
    "an unbalanced quote": (lambda t: t.replace("s2,images/2.png,dog", 's2,images/2.png,"dog'), "row"),
    "a quoted comma in a label": (lambda t: t.replace("s0,images/0.png,dog", 's0,images/0.png,"dog, small"'), 6),
    "a quoted newline in a label": (lambda t: t.replace("s0,images/0.png,dog", 's0,images/0.png,"dog\nsmall"'),
                                    "row 1, column 'label': 'dog\\nsmall' holds a line break or tab (U+000A)"),
    "a row with an extra field": (lambda t: t.replace("s3,", "s3,extra,", 1), "row 4: expected 7 fields, found 8"),
    "a row with a missing field": (lambda t: t.replace(",val,", ",", 1), "row 1: expected 7 fields, found 6"),
    # values
    "an empty label on val": (_replace_cell(2, "label", ""), "row 2, column 'label': empty label"),
    "a confidence that is text": (_replace_cell(1, "confidence", "high"), "row 1, column 'confidence'"),
    "a confidence above 1": (_replace_cell(1, "confidence", "1.5"), "row 1, column 'confidence'"),
    "a confidence that is nan": (_replace_cell(1, "confidence", "nan"), 6),  # a missing value's spelling
    "split 'validation'": (_replace_cell(1, "split", "validation"), "row 1, column 'split': unknown split"),
    "an empty split": (_replace_cell(1, "split", ""), "row 1, column 'split': empty split"),
    "a missing image file": (_replace_cell(1, "image", "images/none.png"), "row 1, column 'image': file not found"),
    "a file that is not an image": (_replace_cell(1, "image", "images/notes.png"), "row 1, column 'image': not an "
                                                                                    "image"),
    "a truncated image": (_replace_cell(1, "image", "images/truncated.png"), "row 1, column 'image': corrupt"),
    "a folder as the image": (_replace_cell(1, "image", "images"), "row 1, column 'image': is a folder"),
    "a path out of the folder": (_replace_cell(1, "image", "../../../../etc/passwd"), "row 1, column 'image'"),
    "the same id twice": (_replace_cell(2, "id", "s0"), "row 2, column 'id'"),
    "numbers as labels": (lambda t: t.replace(",dog,cat,", ",2,1,").replace(",cat,cat,", ",01,1,")
                          .replace(",,cat,", ",,1,"), 6),
    "a label written as Markdown": (_replace_cell(1, "label", "![x](http://h/p.png)"), 6),
    # sizes
    "one row": (lambda t: "\n".join(t.split("\n")[:2]) + "\n", 1),
    "a 1 MB cell": (_replace_cell(1, "attr:color", "r" * 2 ** 20),
                    "row 1, column 'attr:color': 'rrrrrrrr"),  # ... is 1,048,576 characters long, more than ...
    "a 1 MB label": (_replace_cell(1, "label", "c" * 2 ** 20), "row 1, column 'label': 'cccc"),
    "a label of 1,000 characters": (_replace_cell(1, "label", "c" * 1000), 6),
    "199 attribute columns": (lambda t: "\n".join(
        [line + "".join(f",{'attr:a' + str(k) if n == 0 else 'v' + str(k % 3)}" for k in range(199))
         for n, line in enumerate(t.rstrip("\n").split("\n"))]) + "\n", 6),
    "2,000 attribute columns": (lambda t: "\n".join(
        [line + "".join(f",{'attr:a' + str(k) if n == 0 else 'v' + str(k % 3)}" for k in range(2000))
         for n, line in enumerate(t.rstrip("\n").split("\n"))]) + "\n",
        "2,001 attribute columns (attr:*), more than the 200 a project holds"),
}


@pytest.fixture(scope="module")
def mutation_project(tmp_path_factory):
    """A project with one import already in it, and the images the mutations point at."""
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    root = tmp_path_factory.mktemp("mutations")
    (root / "images").mkdir()
    for i in range(6):
        Image.new("RGB", (24, 24), (40 * i, 90, 200 - 30 * i)).save(root / "images" / f"{i}.png")
    good = (root / "images" / "0.png").read_bytes()
    (root / "images" / "truncated.png").write_bytes(good[: len(good) // 2])
    (root / "images" / "notes.png").write_text("not an image")
    first = root / "first"
    first.mkdir()
    Image.new("RGB", (24, 24), (1, 2, 3)).save(first / "x.png")
    (first / "m.csv").write_text("image,label,prediction\nx.png,cat,cat\n")
    Project.create_from_manifest(root / "project", load_manifest(first / "m.csv")).close()
    return root


def _count(folder: Path) -> int:
    with sqlite3.connect(folder / "hibug.sqlite") as connection:
        return connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0]


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_manifest_mutation_imports_whole_or_names_what_to_fix(mutation_project, tmp_path, name, capsys):
    import shutil

    mutate, expected = MUTATIONS[name]
    raw = mutate(_base())
    path = mutation_project / f"{abs(hash(name))}.csv"
    path.write_bytes(raw if isinstance(raw, bytes) else raw.encode("utf-8"))
    target = shutil.copytree(mutation_project / "project", tmp_path / "project")
    before = _count(target)
    code = main(["import", str(target), "--manifest", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if isinstance(expected, int):
        assert code == 0, err
        assert _count(target) == before + expected
    else:
        assert code == 2 and "nothing was imported" in err, err
        assert expected in err, err
        assert _count(target) == before, "a refused manifest must import nothing"


def test_the_mutation_matrix_is_the_size_the_readme_says():
    assert len(MUTATIONS) == 41


# ----- fuzzing the manifest reader ---------------------------------------------------------------------------------
def _fuzz_strategies():
    from hypothesis import strategies as st

    names = st.sampled_from(["image", "label", "prediction", "confidence", "split", "id", "attr:color", "prob:cat",
                             "prob:dog", "pred:m", "confidence:m", " label", "attr:color ", "attr: a:b", "score",
                             "notes", "", "IMAGE"])
    cells = st.one_of(st.sampled_from(["", "images/0.png", "images/1.png", "images/notes.png", "cat", "dog", "val",
                                       "pool", "train", "0.5", "1.5", "nan", "-0", "1e400", '"', ",", "\n", "\r"]),
                      st.text(st.characters(exclude_categories=("Cs",)), max_size=10))
    return st, names, cells


def _fuzz_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "images").mkdir()
    for i in range(2):
        Image.new("RGB", (8, 8), (i * 90, 20, 20)).save(folder / "images" / f"{i}.png")
    (folder / "images" / "notes.png").write_text("not an image")
    return folder


def _loads_or_names_the_problem(path: Path) -> None:
    from hibug_core.errors import ManifestError
    from hibug_core.tasks import load_manifest

    try:
        manifest = load_manifest(path)
    except ManifestError as error:
        assert error.messages and all(message.strip() for message in error.messages)
    else:
        assert manifest.n_rows >= 1


@pytest.fixture(scope="module")
def fuzz_folder(tmp_path_factory):
    return _fuzz_folder(tmp_path_factory)


def test_fuzzed_csv_manifests_load_or_are_refused_with_messages(fuzz_folder):
    import csv
    import io

    from hypothesis import HealthCheck, given, settings

    st, names, cells = _fuzz_strategies()

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(header=st.lists(names, min_size=1, max_size=7), rows=st.lists(st.lists(cells, max_size=8), max_size=5),
           raw=st.booleans())
    def check(header, rows, raw):
        if raw:  # joined by hand: broken quoting, ragged rows
            text = "\n".join(",".join(line) for line in [header, *rows])
        else:
            buffer = io.StringIO()
            csv.writer(buffer).writerows([header, *rows])
            text = buffer.getvalue()
        path = fuzz_folder / "fuzz.csv"
        path.write_text(text, encoding="utf-8")
        _loads_or_names_the_problem(path)

    check()


def test_fuzzed_parquet_manifests_load_or_are_refused_with_messages(fuzz_folder):
    import pandas as pd
    from hypothesis import HealthCheck, given, settings

    st, names, cells = _fuzz_strategies()
    column = st.one_of(st.lists(cells, min_size=3, max_size=3),
                       st.lists(st.integers(-5, 10 ** 12), min_size=3, max_size=3),
                       st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=3, max_size=3),
                       st.lists(st.booleans(), min_size=3, max_size=3),
                       st.lists(st.one_of(st.none(), st.sampled_from(["images/0.png", "cat"])), min_size=3,
                                max_size=3))

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(table=st.dictionaries(names, column, min_size=1, max_size=7))
    def check(table):
        path = fuzz_folder / "fuzz.parquet"
        pd.DataFrame(table).to_parquet(path)
        _loads_or_names_the_problem(path)

    check()


# ----- SIGKILL at random points of import, embed, tag and repair ---------------------------------------------------
def _hibug(*args: str) -> list[str]:
    return [sys.executable, "-m", "hibug_core.cli", *args]


def _killed_at_random(command: list[str], rng: random.Random, window_s: float) -> bool:
    """Start `command`; once its work has begun (its first progress line), SIGKILL it after a random delay of up to
    window_s. Returns whether the kill landed (False: it had finished by then)."""
    import threading

    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started = threading.Event()

    def watch() -> None:
        while process.stderr.read(1):
            started.set()
    threading.Thread(target=watch, daemon=True).start()
    started.wait(timeout=120)
    time.sleep(rng.uniform(0.0, window_s))
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


def _kill_or_skip(command: list[str], seed: int, window_s: float) -> None:
    if not _killed_at_random(command, random.Random(seed), window_s):
        pytest.skip("the command finished before the kill (it is fast on this machine)")


def _sound(folder: Path) -> None:
    with sqlite3.connect(folder / "hibug.sqlite") as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.fixture(scope="module")
def many_images(tmp_path_factory):
    """A project of 300 distinct images with the colour as known truth (an attribute schema included), and a
    manifest of 1,500 more."""
    from hibug_core.attributes import Attribute, AttributeSchema
    from hibug_core.store.attribute_versions import save_schema
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    root = tmp_path_factory.mktemp("kills")
    for folder, n, offset in (("first", 300, 0), ("more", 1500, 300)):
        (root / folder).mkdir()
        lines = ["image,label,prediction,attr:color"]
        for i in range(n):
            k = i + offset
            colour = ("red", "green", "blue")[k % 3]
            Image.new("RGB", (20, 20), ((k * 7) % 256, (k * 13) % 256, (k * 29) % 256)).save(root / folder / f"{k}.png")
            lines.append(f"{k}.png,{'ab'[k % 2]},a,{colour}")
        (root / folder / "m.csv").write_text("\n".join(lines) + "\n")
    with Project.create_from_manifest(root / "project", load_manifest(root / "first" / "m.csv")) as project:
        save_schema(project, AttributeSchema(attributes=(Attribute(name="color", tags=("red", "green", "blue")),)))
    return root


KILL_SEEDS = (0, 1)


@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_a_killed_import_lands_whole_or_not_at_all_and_runs_again(many_images, tmp_path, seed):
    import shutil

    target = shutil.copytree(many_images / "project", tmp_path / "project")
    command = _hibug("import", str(target), "--manifest", str(many_images / "more" / "m.csv"))
    _kill_or_skip(command, seed, 0.3)
    _sound(target)
    assert _count(target) in (300, 1800), "an import is all or nothing"
    if _count(target) == 300:
        assert subprocess.run(command, capture_output=True).returncode == 0
    assert _count(target) == 1800
    assert not list(target.rglob("*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_a_killed_embedding_keeps_its_parts_and_the_rerun_finishes(many_images, tmp_path, seed):
    import shutil

    from hibug_core.embeddings.compute import stored_embeddings
    from hibug_core.store.project import Project

    target = shutil.copytree(many_images / "project", tmp_path / "project")
    command = _hibug("embed", str(target), "--encoder", "tiny-open_clip")
    _kill_or_skip(command, seed, 1.0)
    _sound(target)
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with Project.open(target) as project:
        assert stored_embeddings(project, "tiny-open_clip").embedding.shape[0] == 300
    assert not list(target.rglob("*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_a_killed_tagging_run_leaves_the_tags_before_and_the_rerun_finishes(many_images, tmp_path, seed):
    import shutil

    from hibug_core.store import tag_store
    from hibug_core.store.project import Project
    from hibug_core.tagging.run import current_tags

    target = shutil.copytree(many_images / "project", tmp_path / "project")
    command = _hibug("tag", str(target), "--encoder", "tiny-open_clip", "--attributes", "color")
    _kill_or_skip(command, seed, 1.0)
    _sound(target)
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with Project.open(target) as project:
        runs = tag_store.runs(project)
        assert runs["status"].iat[-1] == "finished"
        assert current_tags(project).tags["color"].notna().sum() == 300


@pytest.mark.slow
@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_a_killed_repair_keeps_the_project_sound_and_the_rerun_finishes(demo_project, tmp_path, seed):
    import shutil

    target = shutil.copytree(demo_project, tmp_path / "demo")
    command = _hibug("repair", str(target), "--budget", "0.05", "--seeds", "0", "--epochs", "2", "--no-control",
                     "--baseline", "none")
    _kill_or_skip(command, seed, 3.0)
    _sound(target)
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr


# ----- concurrent writers ------------------------------------------------------------------------------------------
def test_concurrent_attribute_edits_lose_nothing_and_refuse_with_a_message(many_images, tmp_path):
    """Two people's scripts editing one project at once: each edit lands whole or is refused as stale (never a lost
    edit, never a traceback), and the versions are exactly the edits that landed."""
    import shutil

    from hibug_core.store.attribute_versions import load_schema, schema_history
    from hibug_core.store.project import Project

    target = shutil.copytree(many_images / "project", tmp_path / "project")
    script = ("import sys\nfrom hibug_core.cli import main\n"
              "codes = [main(['attributes', 'edit', sys.argv[1], 'color', '--add-tag', f'{sys.argv[2]}{i}'])"
              " for i in range(8)]\nprint('codes:', *codes)")
    writers = [subprocess.Popen([sys.executable, "-c", script, str(target), name], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for name in ("ann", "bob")]
    results = [writer.communicate(timeout=300) for writer in writers]
    landed = []
    for (out, err), name in zip(results, ("ann", "bob")):
        assert "Traceback" not in err
        codes = next(line for line in out.splitlines() if line.startswith("codes:")).split()[1:]
        assert set(codes) <= {"0", "2"} and len(codes) == 8
        landed += [f"{name}{i}" for i, code in enumerate(codes) if code == "0"]
        assert err.count("changed since you started editing") == codes.count("2")
        assert err.count("run the same command again") == codes.count("2") and "merge_schemas" not in err
    with Project.open(target) as project:
        assert set(load_schema(project)["color"].tags) == {"red", "green", "blue", *landed}
        assert len(schema_history(project)) == 1 + len(landed)


# ----- language-model replies --------------------------------------------------------------------------------------
TAG_REPLIES = ("junk", "deep", "huge", "truncated", "empty", "refusal", "wrong_types", "bad_tag", "http500", "slow")


@pytest.mark.parametrize("mode", TAG_REPLIES)
def test_a_bad_tagging_reply_fails_the_run_with_a_short_message_and_a_good_server_finishes_it(colour_project, mode):
    from hibug_core.errors import HibugError
    from hibug_core.llm.client import LLMConfig
    from hibug_core.store import tag_store
    from hibug_core.tagging.mllm import tag_with_llm
    from hibug_core.tagging.run import current_tags

    from fake_openai import FakeOpenAIServer

    # Only the silent server is meant to time out; every other reply gets time enough on a busy machine.
    settings = dict(model="fake-vision", timeout_s=0.5 if mode == "slow" else 30.0, transport_retries=0, concurrency=3,
                    abort_after=2)
    before = current_tags(colour_project).tags.copy()
    with FakeOpenAIServer(mode=mode) as server, pytest.raises(HibugError) as raised:
        tag_with_llm(colour_project, LLMConfig(base_url=server.url, **settings), views=task_of(colour_project).views)
    assert len(str(raised.value)) < 1500
    assert current_tags(colour_project).tags.equals(before), "a failed run changes no tag in force"
    assert tag_store.runs(colour_project)["status"].tolist() == ["failed"]
    with FakeOpenAIServer() as server:
        tag_with_llm(colour_project, LLMConfig(base_url=server.url, **{**settings, "timeout_s": 30.0}),
                     views=task_of(colour_project).views)
    assert tag_store.runs(colour_project)["status"].iat[-1] == "finished"


PROPOSAL_REPLIES = {
    "junk": ["Sure! Here are some attributes: colour, size"] * 3,
    "truncated JSON": ['{"attributes": [{"name": "colour", "tags": ["red", "bl'] * 3,
    "deep JSON": ['{"attributes": ' + "[" * 100_000 + "]" * 100_000 + "}"] * 3,
    "wrong types": ['{"attributes": "colour"}'] * 3,
    "empty": [""] * 3,
    "refusal": [{"refusal": "I can't help with that."}] * 3,
    "a 1 MB name": [json.dumps({"attributes": [{"name": "x" * 2 ** 20, "tags": ["a", "b"]}]})] * 3,
}


@pytest.mark.parametrize("reply", list(PROPOSAL_REPLIES))
def test_a_bad_proposal_reply_stores_nothing_and_says_why(colour_project, reply, capsys):
    from hibug_core.store.attribute_versions import latest_version

    from fake_openai import FakeOpenAIServer

    before = latest_version(colour_project)
    with FakeOpenAIServer() as server:
        server.text_replies = list(PROPOSAL_REPLIES[reply]) * 2
        code = main(["attributes", "propose", str(colour_project.folder), "--purpose", "shapes", "--llm-model", "x",
                     "--llm-base-url", server.url, "--llm", "--method", "hibug2"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err) < 1500, err
    assert latest_version(colour_project) == before


def test_a_proposal_of_a_thousand_attributes_is_capped_and_stored(colour_project, capsys):
    from hibug_core.attributes.schema import MAX_ATTRIBUTES
    from hibug_core.store.attribute_versions import load_schema

    from fake_openai import FakeOpenAIServer

    many = json.dumps({"attributes": [{"name": f"attribute {i}", "tags": ["a", "b"]} for i in range(1000)]})
    with FakeOpenAIServer() as server:
        server.text_replies = [many] * 6
        code = main(["attributes", "propose", str(colour_project.folder), "--purpose", "shapes", "--llm-model", "x",
                     "--llm-base-url", server.url, "--llm", "--method", "hibug"])
    assert code == 0, capsys.readouterr().err
    assert len(load_schema(colour_project).attributes) <= MAX_ATTRIBUTES


# ----- store damage: a damaged database or array is found, said, and never written to ------------------------------
def _zero_pages(database: Path, pages) -> None:
    with open(database, "r+b") as handle:
        for page in pages:
            handle.seek(page * 16_384)
            handle.write(b"\0" * 16_384)


# name -> the damage done to a copy of the demo's database (16 KiB pages; tables and indexes spread over ~145)
DATABASE_DAMAGE = {
    "zeroed table pages": lambda db: _zero_pages(db, (60, 61, 62, 63, 90, 91)),
    "one zeroed index page": lambda db: _zero_pages(db, (_root_page(db, "ix_samples_split") - 1,)),
    "random bytes in a page": lambda db: _scribble(db, _root_page(db, "samples") - 1),  # 0-based, as _zero_pages
    # read by pandas, which wraps the driver's error in its own: `report` showed a traceback
    "the pages of tag corrections zeroed": lambda db: _zero_pages(db, range(21, 27)),
    "the pages of reviews zeroed": lambda db: _zero_pages(db, range(27, 33)),
}


def _root_page(database: Path, table: str) -> int:
    """The first page of a table's B-tree (1-based, as SQLite counts): damage there is damage to the table, wherever
    a new version of the schema puts it."""
    with sqlite3.connect(database) as connection:
        return int(connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0])


def _scribble(database: Path, page: int) -> None:
    """Random bytes over the end of a page (0-based): where a B-tree page keeps its cells (its start may be free)."""
    with open(database, "r+b") as handle:
        handle.seek((page + 1) * 16_384 - 4_100)
        handle.write(random.Random(page).randbytes(4_000))


@pytest.fixture(scope="module")
def damaged_copies(demo_project, tmp_path_factory):
    import shutil

    copies = {}
    for name, damage in DATABASE_DAMAGE.items():
        folder = tmp_path_factory.mktemp("damaged") / "demo"
        shutil.copytree(demo_project, folder)
        damage(folder / "hibug.sqlite")
        copies[name] = folder
    return copies


@pytest.mark.parametrize("damage", list(DATABASE_DAMAGE))
def test_a_damaged_database_is_named_without_a_traceback_and_never_written(damaged_copies, damage, tmp_path):
    folder = damaged_copies[damage]
    before = (folder / "hibug.sqlite").read_bytes()
    check = subprocess.run(_hibug("info", str(folder), "--check"), capture_output=True, text=True, timeout=300)
    assert check.returncode == 1 and "damaged: database:" in check.stdout, check.stdout + check.stderr
    for args in (["attributes", "edit", str(folder), "shape", "--add-tag", "oval"],
                 ["tags", str(folder), "--choose", "shape=auto"],
                 ["slices", str(folder)], ["report", str(folder), "--output", str(tmp_path / "f.html")]):
        run = subprocess.run(_hibug(*args), capture_output=True, text=True, timeout=300)
        assert "Traceback" not in run.stderr, (args, run.stderr)
        if run.returncode != 0:  # a read that meets the damage says so; a write is refused before it starts
            assert "the project's database is damaged" in run.stderr and "hibug info PROJECT --check" in run.stderr
        else:
            assert args[0] in ("slices", "report"), f"{args[0]} wrote into a damaged database"
    assert (folder / "hibug.sqlite").read_bytes() == before


# name -> what is done to the first of two tagging runs' array file
ARRAY_DAMAGE = {
    "deleted": lambda path: path.unlink(),
    "cut short": lambda path: path.write_bytes(path.read_bytes()[:40]),
    "replaced by junk": lambda path: path.write_bytes(b"not a zip file at all"),
    "a link leading out": lambda path: (path.unlink(), path.symlink_to("/etc/hostname")),
}


@pytest.mark.parametrize("damage", list(ARRAY_DAMAGE))
def test_a_missing_or_damaged_tags_array_makes_only_its_own_run_unavailable(tmp_path, capsys, damage):
    import numpy as np
    import pandas as pd

    from hibug_core.store import tag_store
    from hibug_core.store.project import Project

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("image,label,prediction,attr:hue\na.png,cat,cat,warm\n")
    folder = tmp_path / "p"
    assert main(["new", str(folder), "--manifest", str(tmp_path / "m.csv")]) == 0
    with Project.open(folder) as project:
        ids = pd.read_sql_query("SELECT id FROM samples ORDER BY id", project.engine)["id"].to_numpy()
        ones = np.ones((len(ids), 1), np.float32)
        runs = [tag_store.save_run(project, tag_store.TagResult(ids, {"hue": ("warm", "cold")},
                                                                np.full((len(ids), 1), i, np.int16), ones, ones),
                                   method="manual") for i in range(2)]
    assert main(["info", str(folder), "--check"]) == 0
    ARRAY_DAMAGE[damage](folder / "arrays" / "tags" / f"run-{runs[0]}.npz")
    capsys.readouterr()
    assert main(["info", str(folder), "--check"]) == 1
    assert f"tagging run #{runs[0]}" in capsys.readouterr().out
    assert main(["tags", str(folder), "--choose", f"hue=run:{runs[1]}"]) == 0  # the project's tags still work
    with Project.open(folder) as project:
        assert len(tag_store.load_run(project, runs[0]).sample_ids) == 0  # unavailable, and said on the run
        assert tag_store.load_run(project, runs[1]).tag_index.tolist() == [[1]]  # the other run is intact
        status = tag_store.runs(project).set_index("id")
        assert status.at[runs[0], "status"] == "failed" and f"run #{runs[0]} could not be read" in \
            status.at[runs[0], "message"]
    capsys.readouterr()
    assert main(["info", str(folder), "--check"]) == 0  # set aside: the store is whole again, less that run
