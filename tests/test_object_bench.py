"""The planted-bug benchmark for objects: problems, scoring against planted slices, and a quick run end to end."""
from __future__ import annotations

import pandas as pd
import pytest

from hibug_core.bench.objects import (
    ObjectBenchConfig,
    ObjectProblem,
    object_problems,
    quick,
    run_object_benchmark,
)
from hibug_core.demo.detection import DetectionDemoConfig, ObjectBug, plant_bugs
from hibug_core.demo.scenes import render_scenes
from hibug_core.slices.search import CLASS


def test_problems_are_seeded_with_three_bugs_on_distinct_colours():
    problems = object_problems(4, seed=0)
    assert problems == object_problems(4, seed=0) and len(problems) == 4
    for problem in problems:
        single, pair, boxes = problem.bugs
        assert (single.kind, pair.kind, boxes.kind) == ("missing", "missing", "bad boxes")
        assert len(single.conditions) == 1 and len(pair.conditions) == 2
        assert boxes.conditions[1] == ("object size", "large")
        assert single.conditions[0][1] != pair.conditions[0][1]


def test_planting_drops_or_shrinks_exactly_the_planted_objects():
    _, objects = render_scenes(300, 4)
    bugs = (ObjectBug("missing", (("color", "red"),), 0.0),
            ObjectBug("bad boxes", (("class", "circle"), ("object size", "large")), 0.5))
    taught = plant_bugs(objects, bugs, DetectionDemoConfig(), seed=1)
    red = objects["color"] == "red"
    assert len(taught) == len(objects) - red.sum() and not (taught["color"] == "red").any()
    before = objects.loc[taught.index]
    large_circles = (taught["shape"] == "circle") & (before["w"] * before["h"] >= 26 ** 2)  # the box's area
    assert (taught.loc[large_circles, "w"] == objects.loc[taught.index[large_circles], "w"] / 2).all()
    untouched = taught.index[~large_circles]
    assert taught.loc[untouched, ["x", "y", "w", "h"]].equals(objects.loc[untouched, ["x", "y", "w", "h"]])


def test_scoring_against_the_planted_slices():
    """The one scoring (hibug_core.bench.ranking) with the detection problems' names: a measured colour stands for the
    colour, a conjunction is found in any order, half of one is not."""
    from hibug_core.bench.objects import _names, planted_bugs
    from hibug_core.bench.peers import Found
    from hibug_core.bench.ranking import score_answer

    problem = ObjectProblem("p", (ObjectBug("missing", (("color", "teal"),), 0.0),
                                  ObjectBug("missing", (("color", "red"), ("class", "triangle")), 0.0)), 0)
    definitions = [
        ((CLASS, "(background)"),),
        (("color", "red"),),  # one half of the conjunction: the attribute, not the whole bug
        (("dominant colour", "teal"), ("object size", "small")),  # a measured colour stands for color
        ((CLASS, "triangle"), ("color", "red")),  # the conjunction, in any order
    ]
    found, scores = score_answer(Found(definitions, 4), planted_bugs(problem), same=_names)
    assert [(r["find_attr"], r["find_tag"], r["rank"]) for r in found] == [(True, True, 3), (True, True, 4)]
    assert scores["P@10"] == pytest.approx(2 / 4)  # of the four listed
    found, scores = score_answer(Found(definitions[:2], 2), planted_bugs(problem), same=_names)
    # "color = red" names the colour attribute (Find Attr for teal) but neither bug whole
    assert [(r["find_attr"], r["find_tag"]) for r in found] == [(True, False), (False, False)]
    assert scores["P@10"] == 0.0


def test_a_quick_object_benchmark_runs_end_to_end_and_a_rerun_reuses_its_detectors(tmp_path, monkeypatch):
    from dataclasses import replace

    import hibug_core.bench.objects as objects
    from hibug_core.bench.contest import finders_table, gathered
    from hibug_core.bench.peers import SLICE_FINDERS

    contests, objectlab = [], []
    config = replace(quick(ObjectBenchConfig()), encoder="tiny-open_clip")
    rows = run_object_benchmark(tmp_path, config, contests=contests, objectlab=objectlab)
    # every slice finder ran on each problem's two tag sources and their bug-free twins, scored against 3 bugs each;
    # ObjectLab once per problem and its bug-free twin, on their training annotations read by their true tags
    bugs, problems = gathered(contests)
    finders = len(SLICE_FINDERS.names())
    assert len(problems) == 2 * 2 * 2 * finders + 2 * 2 and not problems["failed"].any()
    assert len(bugs) == 2 * 2 * 3 * finders + 2 * 3
    assert set(bugs["bug_type"]) == {"missing annotations", "bad boxes"}
    assert set(finders_table(contests)["method"]) == {*SLICE_FINDERS.names(), "objectlab"}
    lab = problems[problems["method"] == "objectlab"]
    assert lab["package"].str.startswith("cleanlab 2.").all() and lab["bug_free"].tolist() == [False, True] * 2
    assert (lab.loc[lab["bug_free"], "reported"] >= 0).all()
    assert [row["problem"] for row in objectlab] == ["p0", "p1"]
    for row in objectlab:  # its flags scored per object against the objects each planted bug changed
        assert row["planted objects"] > 0 and 0 <= row["recall"] <= 1
        assert row["flags"] == row["overlooked flags"] + row["badloc flags"] + row["swap flags"]
        assert len([k for k in row if k.startswith("recall: ")]) == 3 and row["bug-free twin: flags"] >= 0
    assert rows["problem"].tolist() == ["p0", "p1"] and rows["AP50"].between(0, 1).all()  # one row per problem

    # Run again into the same folder (as after an interruption): every detector, the problems' and their twins', is
    # the one stored, and everything measured is the same
    monkeypatch.setattr(objects, "train_detector", lambda *args, **kwargs: pytest.fail("a detector trained again"))
    again, again_lab = [], []
    assert run_object_benchmark(tmp_path, config, contests=again, objectlab=again_lab).equals(rows)
    assert again_lab == objectlab
    timeless = [frame.drop(columns="seconds", errors="ignore") for frame in gathered(contests)]
    assert all(a.equals(b) for a, b in zip(timeless, [f.drop(columns="seconds", errors="ignore")
                                                      for f in gathered(again)]))


def test_hibug_bench_runs_an_object_task_with_every_slice_finder(tmp_path, monkeypatch, capsys):
    """`hibug bench --task detection` (here with the quick config's few scenes and one epoch)."""
    import json

    import hibug_core.bench.objects as objects
    from hibug_core.bench.peers import SLICE_FINDERS
    from hibug_core.cli import main

    monkeypatch.setattr(objects, "ObjectBenchConfig", lambda: quick(ObjectBenchConfig()))
    assert main(["bench", "--task", "detection", "--problems", "1", "--seeds", "0,1", "--out", str(tmp_path),
                 "--encoder", "tiny-open_clip"]) == 0
    assert "| truth | hibug | hibug |" in capsys.readouterr().out
    assert "## who finds bugs best" in (tmp_path / "results.md").read_text()
    saved = json.loads((tmp_path / "results.json").read_text())
    rows = pd.DataFrame(saved["finder_problems"])
    assert sorted(rows["method"].unique()) == sorted([*SLICE_FINDERS.names(), "objectlab"])
    assert rows["problem"].nunique() == 1 and sorted(rows["seed"].unique()) == [0, 1]  # one problem of each seed
    assert (tmp_path / "seed-0" / "p0").is_dir() and (tmp_path / "seed-1" / "p0").is_dir()
    assert "## ObjectLab's flags per object" in (tmp_path / "results.md").read_text()
    per_type = pd.DataFrame(saved["found per bug type"])  # the one scoring, per planted bug type
    assert set(per_type["planted bug type"]) == {"missing annotations", "bad boxes"}
    assert per_type.loc[per_type["method"] == "hibug", "planted"].astype(int).sum() == 2 * 2 * 3  # seeds x tags x bugs
    assert [(row["problem"], row["seed"]) for row in saved["problems"]] == [("p0", 0), ("p0", 1)]
    by_conditions = pd.DataFrame(saved["found per number of conditions"])  # one colour; a colour and class; ...
    assert by_conditions.loc[by_conditions["method"] == "hibug"].groupby("conditions")["planted"].apply(
        lambda v: v.astype(int).sum()).to_dict() == {"1": 2 * 2, "2": 2 * 2 * 2}
    lab = saved["ObjectLab's flags per object"]  # each seed's problems, then their pooled figures
    assert [(row["problem"], row["seed"]) for row in lab] == [("p0", 0), ("all", 0), ("p0", 1), ("all", 1)]
    assert lab[1]["flags"] == lab[0]["flags"] and lab[1]["planted objects"] == lab[0]["planted objects"]
    for task in ("detection", "pose", "segmentation"):  # classification's planted problems are refused in words
        assert main(["bench", "--task", task, "--hard", "4", "--quick", "--out", str(tmp_path / "no")]) == 2
        assert f"--hard, --quick: classification's planted problems; the {task} benchmark plants its own" in \
            capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    assert main(["bench", "--task", "detection", "--seeds", "0,x"]) == 2
    assert "--seeds '0,x': give whole numbers" in capsys.readouterr().err
