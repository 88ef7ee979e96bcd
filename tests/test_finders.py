"""Who finds bugs best: every slice finder (hibug's search, HiBug's rule, a single-attribute scan, and the peers run as
their own packages) runs on one tiny problem and its bug-free twin, and the one scoring scores a hand-checked ranking
exactly. The figures are the benchmark's (`hibug bench`, docs/results.md), not these tests'."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hibug_core.bench.contest import contest, null_twin
from hibug_core.bench.peers import SLICE_FINDERS, Found, SliceTask
from hibug_core.bench.ranking import PlantedBug, formatted, score_answer, summary_table

BUG = PlantedBug((("color", "blue"), ("size", "small")), "rare case")


def tiny_problem(seed: int = 0) -> SliceTask:
    """600 samples, three attributes; 10% of them wrong at random, 75% of the small blue ones (the planted bug); the
    embeddings place blue and small apart, as an encoder that sees them would."""
    rng = np.random.default_rng(seed)
    n = 600
    tags = pd.DataFrame({"color": rng.choice(["red", "blue", "green"], n), "size": rng.choice(["small", "large"], n),
                         "shape": rng.choice(["circle", "square"], n)})
    bug = ((tags["color"] == "blue") & (tags["size"] == "small")).to_numpy()
    errors = np.where(bug, rng.random(n) < 0.75, rng.random(n) < 0.1).astype(float)
    embeddings = np.column_stack([3.0 * (tags["color"] == "blue") + rng.normal(0, 0.3, n),
                                  3.0 * (tags["size"] == "small") + rng.normal(0, 0.3, n), rng.normal(0, 0.3, n)])
    return SliceTask(tags, errors, embeddings)


def test_a_hand_checked_ranking_is_scored_exactly():
    other = PlantedBug((("shape", "square"),), "spurious correlation")
    found = Found([(("color", "blue"),),  # names the attribute, not the tag pair: no hit
                   (("color", "blue"), ("size", "small"), ("shape", "circle")),  # a sub-case of BUG: a hit at 2
                   (("size", "large"),),
                   (("shape", "square"),)],  # other, at 4
                  reported=3, bug_types=[None, "rare case", None, "hard case"])
    bugs, problem = score_answer(found, [BUG, other], top=3)
    assert bugs == [
        {"bug": "color = blue & size = small", "bug_type": "rare case", "rank": 2, "find_attr": True, "find_tag": True,
         "type_right": True},
        {"bug": "shape = square", "bug_type": "spurious correlation", "rank": 4, "find_attr": True,  # shape, in 2
         "find_tag": False, "type_right": False}]
    assert problem == {"listed": 4, "reported": 3, "recall": 0.5, "P@10": 0.5, "P@25": 0.5}
    # nothing planted (a bug-free problem): precision is not defined, what it reports is counted
    assert score_answer(found, [])[1] == {"listed": 4, "reported": 3, "recall": pytest.approx(np.nan, nan_ok=True),
                                          "P@10": pytest.approx(np.nan, nan_ok=True),
                                          "P@25": pytest.approx(np.nan, nan_ok=True)}


def test_every_finder_runs_on_the_problem_and_its_bug_free_twin():
    task = tiny_problem()
    bugs, problems = contest(task, [BUG], labels={"problem": "tiny", "tags": "truth"})
    assert sorted(problems["method"].unique()) == sorted(SLICE_FINDERS.names())
    assert not problems["failed"].any(), problems
    assert all(sorted(twins) == [False, True] for twins in problems.groupby("method")["bug_free"].agg(list))
    ranks = bugs.set_index("method")["rank"]
    # the searches over conjunctions find the planted pair first; one attribute at a time cannot name it
    for method in ("hibug", "hibug-rule", "sliceline", "divexplorer"):
        assert ranks[method] <= 2, (method, ranks[method])
    assert pd.isna(ranks["single-attribute"])
    free = problems[problems["bug_free"]].set_index("method")["reported"]
    assert free["hibug"] == 0  # shuffled errors: no slice is significantly worse than the whole
    assert free["hibug-rule"] > 0  # HiBug's rule reports whatever falls below the cut
    package = problems.drop_duplicates("method").set_index("method")["package"]
    assert package["sliceline"].startswith("sliceline 0.") and package["cleanlab"].startswith("cleanlab 2.")


def test_the_twin_keeps_the_tags_and_the_error_rate_and_loses_the_bug():
    task = tiny_problem()
    twin = null_twin(task, seed=3)
    assert twin.tags is task.tags and twin.errors.sum() == task.errors.sum()
    blue_small = ((task.tags["color"] == "blue") & (task.tags["size"] == "small")).to_numpy()
    assert task.errors[blue_small].mean() > 0.6 > 0.3 > twin.errors[blue_small].mean()


def test_the_summary_gives_each_figure_with_its_interval():
    bugs, problems = contest(tiny_problem(), [BUG], finders=["hibug", "sliceline"],
                             labels={"problem": "tiny", "tags": "truth"})
    table = formatted(summary_table(bugs, problems, ["tags", "method"]))
    hibug = table.set_index("method").loc["hibug"]
    assert hibug["Find Tag@10"] == "100% [21, 100]"  # one bug found: Wilson's interval on 1 of 1
    assert hibug["bug-free: reported"] == "0.0 [0.0, 0.0]" and hibug["problems"] == "1 + 1 bug-free"


def test_a_peer_without_embeddings_is_said_not_to_run(caplog):
    from dataclasses import replace

    task = replace(tiny_problem(), embeddings=None)
    _, problems = contest(task, [BUG], finders=["cleanlab"])
    assert problems.empty
    assert "cleanlab's underperforming_group clusters the embeddings: embed the samples first" in caplog.text


@pytest.mark.parametrize("task", ["classification", "detection", "pose", "segmentation"])
def test_each_tasks_planted_bugs_are_scored_one_way(task):
    """Every task's planted bugs reach the one scoring with the type hibug should name, and another tag source's name
    for a planted attribute counts (the pose benchmark's measured body orientation for the true pose)."""
    from hibug_core.bench.demo_bugs import DemoProblem, planted_bugs, same_attribute
    from hibug_core.bench.pose import POSE_BENCH
    from hibug_core.demo.build import DemoConfig
    from hibug_core.demo.detection import DetectionDemoConfig
    from hibug_core.demo.pose import PoseDemoConfig
    from hibug_core.demo.segmentation import SegmentationDemoConfig

    config = {"classification": DemoConfig(), "detection": DetectionDemoConfig(), "pose": PoseDemoConfig(),
              "segmentation": SegmentationDemoConfig()}[task]
    bugs = planted_bugs(DemoProblem("demo", config))
    expected = {"classification": ["spurious correlation", "rare case"],
                "detection": ["missing annotations", "bad boxes", "missing annotations"],
                "pose": ["distribution shift", "left and right swapped", "missing annotations", "distribution shift"],
                "segmentation": ["bad masks", "missing annotations", "rare case"]}[task]
    assert [bug.bug_type for bug in bugs] == expected
    if task == "pose":
        same = same_attribute(POSE_BENCH.same_as)
        found = Found([(("body orientation", "lying"),), (("facing", "back"), ("object size", "small"))], 2,
                      ["distribution shift", "left and right swapped"])
        scored, problem = score_answer(found, bugs, same=same)
        # the second slice finds the swap (right type) and the small figures (whose type it does not name)
        assert [(b["rank"], b["type_right"]) for b in scored] == [(1, True), (2, True), (None, None), (2, False)]
        assert problem["P@10"] == 1.0 and problem["recall"] == 0.75
