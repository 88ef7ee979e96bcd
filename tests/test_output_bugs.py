"""Planted-bug problems with their bugs planted in a model's outputs (pose, masks): drawn per seed with distinct bug
types on slices that share no condition; built with the training split and annotations each bug needs, and outputs
that fail exactly the planted objects (hibug_core.bench.output_bugs)."""
from __future__ import annotations

import numpy as np
import pytest

from hibug_core.bench.output_bugs import OutputProblem, build_output_problem, draw_problems, members
from hibug_core.demo.build import PlantedBug
from hibug_core.errors import HibugError


def test_problems_are_drawn_per_seed_with_distinct_bugs_on_slices_of_their_own_size():
    from hibug_core.bench.masks import MASK_WORLD, mask_problems
    from hibug_core.bench.pose import POSE_WORLD, pose_problems

    pose = pose_problems(3, seed=1)
    assert [p.id for p in pose] == ["out0", "out1", "out2"]
    assert [(b.diagnosed_as, b.slice) for b in pose[2].demo.bugs] == [
        ("hard case", {"facing": "front", "shirt colour": "green", "background": "noisy"}),
        ("left and right swapped", {"pose": "lying"}), ("distribution shift", {"pose": "sitting"})]
    masks = mask_problems(2, seed=0)
    assert [p.id for p in masks] == ["demo", "out0"] and masks[0].build is None  # seed 0 starts with the demo
    assert [(b.diagnosed_as, b.slice) for b in masks[1].demo.bugs] == [
        ("missing annotations", {"class": "bar"}), ("bad masks", {"object aspect ratio": "tall"}),
        ("hard case", {"object aspect ratio": "wide"})]
    with pytest.raises(HibugError, match="no slice holds 30 to 30% of its .* validation objects; give more val_scenes"):
        draw_problems(POSE_WORLD, 1, seed=0, val_scenes=4)  # too few people for any slice: refused, not bug-free
    for world, problems in ((POSE_WORLD, pose), (MASK_WORLD, masks[1:])):
        for problem in problems:
            config = problem.demo
            val = world.render(config.val_scenes, config.seed * 10 + 2).objects
            types = [b.diagnosed_as for b in config.bugs]
            assert len(types) == 3 and len(set(types)) == 3
            pairs = [pair for b in config.bugs for pair in b.slice.items()]
            assert len(pairs) == len(set(pairs))  # no condition shared
            for bug in config.bugs:
                assert config.min_objects <= members(val, bug.slice).sum() <= config.max_share * len(val)


@pytest.mark.parametrize("task", ["pose", "segmentation"])
def test_a_planted_problem_fails_exactly_its_bugs_objects_and_records_their_training_evidence(tmp_path, task):
    """Every planted object fails (fail_share 1) and no other does (base_miss 0); the training annotations leave the
    missing slice out and change the annotation bug's objects, as hibug's training evidence reads them."""
    from hibug_core.bench.contest import task_of_report
    from hibug_core.objects.training_evidence import annotation_evidence
    from hibug_core.slices.report import error_slices

    if task == "pose":
        from hibug_core.bench.pose import MODEL_NAME, POSE_WORLD

        world = POSE_WORLD
        taught = PlantedBug("swapped", {"shirt colour": "red"}, "", "left and right swapped")
        bugs = (PlantedBug("hard", {"pose": "sitting"}, "", "hard case"),
                PlantedBug("missing", {"shirt colour": "blue"}, "", "missing annotations"), taught)
        attributes, evidence = ["pose", "shirt colour"], "mirrored"
    else:
        from hibug_core.bench.masks import MASK_WORLD, MODEL_NAME

        world = MASK_WORLD
        taught = PlantedBug("bad", {"color": "red"}, "", "bad masks")
        bugs = (PlantedBug("hard", {"class": "ring"}, "", "hard case"),
                PlantedBug("missing", {"color": "blue"}, "", "missing annotations"), taught)
        attributes, evidence = ["color"], "mask_wrong"
    problem = OutputProblem("t", 5, bugs, train_scenes=40, val_scenes=40, fail_share=1.0, base_miss=0.0)
    said = []
    project = build_output_problem(tmp_path / "p", world, problem, MODEL_NAME,
                                   progress=lambda stage, done, total: said.append((stage, done, total)))
    try:
        report = error_slices(project, MODEL_NAME, split="val", attributes=attributes, tags="imported",
                              check_tags=False)
        slices = task_of_report(report)
        planted = np.zeros(len(slices.tags), bool)
        for bug in bugs:
            planted |= members(slices.tags, bug.slice)
        assert planted.sum() >= 10 and (slices.errors > 0.5).tolist() == planted.tolist()
        samples = project.samples(MODEL_NAME)
        objects = project.objects(MODEL_NAME)
        train = objects[(objects["object_kind"] == "object") & samples["split"].reindex(objects.index).eq("train")]
        read = annotation_evidence(project, MODEL_NAME, train.assign(label=samples["label"]))
        tags = project.known_tags().reindex(train.index)
        missing, changed = members(tags, bugs[1].slice), members(tags, taught.slice)
        assert missing.sum() >= 5 and read["annotated"][missing].mean() <= 0.2 and read["annotated"][~missing].all()
        assert changed.sum() >= 5 and read[evidence][changed & ~missing].mean() >= 0.8
        assert read[evidence][~changed & ~missing].sum() == 0
        assert said[-1] == ("planting outputs: t", 3, 3)
    finally:
        project.close()


@pytest.mark.parametrize("task", ["pose", "segmentation"])
def test_every_finder_runs_on_a_tiny_planted_output_problem_and_its_bug_free_twin(tmp_path, task):
    """The task's benchmark harness end to end on one tiny problem: every slice finder on both tag sources and their
    bug-free twins, scored by the one scoring; hibug finds the two planted bugs (every planted object fails, no other
    does) with the types it should name, and reports nothing on the twins."""
    from dataclasses import replace

    from hibug_core.bench import masks, pose
    from hibug_core.bench.contest import gathered
    from hibug_core.bench.demo_bugs import DemoProblem, run_demo_benchmark
    from hibug_core.bench.peers import SLICE_FINDERS

    if task == "pose":
        bench, build_planted = pose.POSE_BENCH, pose.pose_problems(2, seed=1)[0].build
        bugs = (PlantedBug("hard", {"pose": "sitting"}, "", "hard case"),
                PlantedBug("missing", {"shirt colour": "blue"}, "", "missing annotations"))
    else:
        bench, build_planted = masks.MASK_BENCH, masks.mask_problems(2, seed=1)[0].build
        bugs = (PlantedBug("hard", {"class": "ring"}, "", "hard case"),
                PlantedBug("missing", {"color": "blue"}, "", "missing annotations"))
    problem = OutputProblem("tiny", 3, bugs, train_scenes=80, val_scenes=80, fail_share=1.0, base_miss=0.0)
    tiny = replace(bench, problems=lambda count, seed: [DemoProblem("tiny", problem, build=build_planted)])
    contests: list = []
    drawn = run_demo_benchmark(tmp_path, tiny, 1, contests=contests, encoder="tiny-open_clip")
    assert drawn["problem"].tolist() == ["tiny"]
    found, problems = gathered(contests)
    assert set(problems["method"]) == set(SLICE_FINDERS.names()) and not problems["failed"].any()
    assert len(problems) == 2 * 2 * len(SLICE_FINDERS.names())  # two tag sources, each with its bug-free twin
    hibug = found[(found["method"] == "hibug") & (found["tags"] == "truth")]
    assert hibug["find_tag"].all() and hibug["type_right"].all()
    twins = problems[(problems["method"] == "hibug") & problems["bug_free"]]
    assert (twins["reported"] == 0).all()
