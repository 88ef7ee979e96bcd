"""The hibug command line: new, import, info and their error messages."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hibug_core.cli import main

MANIFEST = "image,label,prediction,split\nimages/a.png,cat,cat,val\nimages/b.png,dog,cat,val\nimages/c.png,,dog,pool\n"


def test_new_then_info(image_dir, write_csv, tmp_path, capsys):
    path = write_csv(MANIFEST)
    assert main(["new", str(tmp_path / "p"), "--manifest", str(path), "--model-name", "resnet"]) == 0
    assert "created" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "p"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["splits"] == {"pool": 1, "val": 2}
    assert info["models"] == ["resnet"]
    val = [row for row in info["scores"] if row["split"] == "val"][0]
    assert (val["n"], val["mean_score"]) == (2, 0.5)
    assert main(["info", str(tmp_path / "p")]) == 0
    assert "resnet               val    mean score 0.5000 over 2" in capsys.readouterr().out
    # info answers without pandas or pyarrow (a third of its time at a million rows)
    script = ("import sys; from hibug_core.cli import main; main(['info', sys.argv[1]]); "
              "print('loaded:', sorted({'pandas', 'pyarrow'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "p")], capture_output=True, text=True,
                          timeout=120)
    assert "loaded: []" in done.stdout, done.stderr[-2000:]


def test_bad_manifest_exits_2_with_the_message(image_dir, write_csv, tmp_path, capsys):
    path = write_csv(MANIFEST.replace("images/b.png", "images/zz.png"))
    assert main(["new", str(tmp_path / "p"), "--manifest", str(path)]) == 2
    err = capsys.readouterr().err
    assert "1 problem found; nothing was imported." in err
    assert "row 2, column 'image': file not found: images/zz.png" in err
    assert not (tmp_path / "p").exists()


def test_import_into_existing_project(image_dir, write_csv, tmp_path, capsys):
    main(["new", str(tmp_path / "p"), "--manifest", str(write_csv(MANIFEST))])
    more = write_csv("image,label,prediction\nimages/d.png,cat,cat\n", name="more.csv")
    assert main(["import", str(tmp_path / "p"), "--manifest", str(more)]) == 0
    capsys.readouterr()
    main(["info", str(tmp_path / "p"), "--json"])
    assert json.loads(capsys.readouterr().out)["splits"] == {"pool": 1, "val": 3}


def test_image_folder_needs_predictions(tmp_path, capsys):
    assert main(["new", str(tmp_path / "p"), "--image-folder", str(tmp_path)]) == 2
    assert "--image-folder needs --predictions" in capsys.readouterr().err


def test_console_script_runs(tmp_path):
    result = subprocess.run([sys.executable, "-m", "hibug_core.cli", "info", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "is not a hibug project" in result.stderr


def test_embed_tag_and_teach_commands(colour_project, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    folder = str(colour_project.folder)
    assert main(["embed", folder, "--encoder", "tiny-open_clip", "--split", "val"]) == 0
    assert "10 images embedded with tiny-open_clip (dimension 64)." in capsys.readouterr().out
    assert main(["tag", folder, "--encoder", "tiny-open_clip", "--attributes", "color,dominant colour"]) == 0
    out = capsys.readouterr().out
    # the run is measured against the imported true colours as it finishes, and does not replace them
    assert out.splitlines()[:3] == [
        "dominant colour: run #1 (measured) computed from the pixels; now in force",
        "warning: color: run #2 (zero-shot, tiny-open_clip) 25.0% right on 12 with known tags or audits, "
        "worse than imported tags (the reference), which stays in force",
        "Tagging run(s) #1, #2 stored. " + out.splitlines()[2].split(" stored. ", 1)[1]]
    examples = tmp_path / "examples.csv"
    examples.write_text("sample,tag\n0.png,red\n3.png,red\n1.png,green\n4.png,green\n2.png,blue\n5.png,blue\n")
    assert main(["teach", folder, "color", "--examples", str(examples), "--encoder", "tiny-open_clip"]) == 0
    assert "Taught 'color' from 6 examples: cross-validated accuracy" in capsys.readouterr().out
    assert main(["tag", folder, "--attributes", "colour"]) == 2
    assert "unknown attribute(s) colour; the schema has: color, is round" in capsys.readouterr().err


@pytest.mark.slow
def test_slices_command_prints_ranked_explained_slices(demo_project, tmp_path, capsys):
    import shutil

    import numpy as np

    from hibug_core.store import tag_store
    from hibug_core.store.attribute_versions import load_schema
    from hibug_core.store.project import Project

    folder = tmp_path / "demo"
    shutil.copytree(demo_project, folder)
    with Project.open(folder) as project:
        # nothing tagged yet: the imported true tags stand in for the schema's attributes
        assert main(["slices", str(folder), "--depth", "1"]) == 0
        assert "1. color = blue" in capsys.readouterr().out
        known, schema = project.known_tags(), load_schema(project)
        index = np.array([[schema["color"].tags.index(t)] for t in known["color"]], dtype=np.int16)
        ones = np.ones(index.shape, np.float32)
        tag_store.save_run(project, tag_store.TagResult(known.index.to_numpy(), {"color": schema["color"].tags},
                                                        index, ones, ones), method="ground truth")
    assert main(["slices", str(folder), "--depth", "1", "--output", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out
    assert "shape-cnn on val: accuracy 87.9% over 800 images" in out
    assert "1. color = blue" in out and "spurious correlation" in out
    assert "(tags right on 100% of 415 checked)" in out  # the run's colours checked against imported ones
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines[0].startswith("rank,slice_id,description") and lines[1].startswith("1,")  # as printed
    # the class is sliced by default; --no-by-class leaves it out
    assert main(["slices", str(folder), "--depth", "2", "--attributes", "color,known: size"]) == 0
    line = ("2. known: size = small & class = triangle             n=103   accuracy  69.9% [60%, 78%] q=1.1e-06  rare "
            "case")
    assert line in capsys.readouterr().out
    assert main(["slices", str(folder), "--depth", "2", "--no-by-class", "--attributes", "color,known: size"]) == 0
    assert "class =" not in capsys.readouterr().out
    assert main(["slices", str(folder), "--attributes", "colour"]) == 2
    assert "no tags for attribute(s) colour; choose from: " in capsys.readouterr().err


def test_slices_without_any_tags_say_what_to_do(tmp_path, capsys):
    from PIL import Image

    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 8)).save(tmp_path / name)
    (tmp_path / "m.csv").write_text("image,label,prediction\na.png,cat,cat\nb.png,dog,cat\n")
    assert main(["new", str(tmp_path / "p"), "--manifest", str(tmp_path / "m.csv")]) == 0
    assert main(["slices", str(tmp_path / "p")]) == 2
    assert "no attribute has tags yet; run a tagger first" in capsys.readouterr().err


def test_attributes_show_propose_edit_and_history(colour_project, capsys):
    folder = str(colour_project.folder)
    assert main(["attributes", "show", folder]) == 0
    out = capsys.readouterr().out
    assert "main object:\n  color" in out and "global:\n  brightness" in out
    assert main(["attributes", "edit", folder, "color", "--add-tag", "pink", "--remove-tag", "green"]) == 0
    assert "saved version 2: edited 'color': tags -> ('red', 'blue', 'pink')" in capsys.readouterr().out
    assert main(["attributes", "edit", folder, "is round", "--disable"]) == 0
    assert main(["attributes", "edit", folder, "color", "--remove-tag", "red", "--remove-tag", "blue"]) == 2
    assert "edit of 'color' refused" in capsys.readouterr().err
    assert main(["attributes", "propose", folder, "--purpose", "classify dog breeds"]) == 0
    assert "proposed by the built-in 'animals' library" in capsys.readouterr().out
    assert main(["attributes", "show", folder, "--history"]) == 0
    history = capsys.readouterr().out.splitlines()
    assert len(history) == 4 and history[0].startswith("v4") and "animals" in history[0]
    assert main(["attributes", "show", folder, "--version", "2", "--json"]) == 0
    assert '"pink"' in capsys.readouterr().out


def test_report_repair_and_generate_commands(demo_project, tmp_path, capsys):
    import shutil

    assert main(["report", str(demo_project), "--output", str(tmp_path / "findings.md")]) == 0
    text = (tmp_path / "findings.md").read_text()
    assert text.startswith("# Findings: easy-vqa shapes demo") and "| 1 | color = blue |" in text
    assert main(["report", str(demo_project), "--output", str(tmp_path / "findings.txt")]) == 2
    assert ".html, .md or .csv" in capsys.readouterr().err
    shutil.copytree(demo_project, tmp_path / "demo")
    assert main(["select", str(tmp_path / "demo"), "--budget", "20",
                 "--export", str(tmp_path / "selection.csv")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("20 pool images selected by expected failures (budget 20, unspent 0)")
    assert len((tmp_path / "selection.csv").read_text().splitlines()) == 21
    assert main(["generate", str(tmp_path / "demo"), "--dry-run", "--top", "1"]) == 0
    assert "A photo of a blue triangle" in capsys.readouterr().out


def test_a_reader_that_goes_away_is_not_a_traceback(demo_project):
    command = (f"{sys.executable} -m hibug_core.cli slices {demo_project} --top 500 --depth 3 --gap 0 | head -c 10; "
               f"{sys.executable} -m hibug_core.cli info {demo_project} --json | head -1")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.stderr == "" and done.stdout.startswith("shape-cnn ") and done.stdout.endswith("{\n")


def test_serve_help_describes_its_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    assert "the one project to serve (or --projects-root)" in out and "port of the dashboard (default: 8501)" in out
    assert "--projects-root DIR" in out and "--data-root DIR" in out and "--open-to-anyone" in out
    assert "0.0.0.0 to share it on the network" in " ".join(out.split())


def test_a_reading_command_keeps_its_tables_and_report_for_the_next_where_the_folder_can_be_written(
        slice_project, monkeypatch, capsys):
    import os
    import shutil
    from pathlib import Path

    from hibug_core.slices import report_files
    from hibug_core.slices.report import ENUMERATIONS
    from hibug_core.store.project import IMPORT_TABLES

    folder = slice_project.folder
    slice_project.close()
    shutil.rmtree(folder / "columns", ignore_errors=True)
    before = (folder / "hibug.sqlite").read_bytes()

    def as_a_new_process():
        IMPORT_TABLES.clear()
        ENUMERATIONS.clear()

    as_a_new_process()
    assert main(["slices", str(folder), "--depth", "1"]) == 0
    first = capsys.readouterr().out
    assert "color = blue" in first
    kept = {p.name for p in (folder / "columns").glob("*.arrow")}
    assert {"samples.arrow", "predictions-1.arrow"} <= kept and any(n.startswith("slice-report-") for n in kept)
    assert (folder / "hibug.sqlite").read_bytes() == before  # the database itself untouched
    as_a_new_process()
    with monkeypatch.context() as patched:  # the next command reads what the first kept
        patched.setattr(report_files, "error_slices", lambda *a, **k: pytest.fail("computed again"))
        assert main(["slices", str(folder), "--depth", "1"]) == 0
    assert capsys.readouterr().out == first
    # where the folder cannot be written, a reading command keeps nothing and still answers
    shutil.rmtree(folder / "columns")
    as_a_new_process()
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == folder else access(path, mode))
    assert main(["slices", str(folder), "--depth", "1"]) == 0
    assert capsys.readouterr().out == first
    assert not (folder / "columns").exists()
