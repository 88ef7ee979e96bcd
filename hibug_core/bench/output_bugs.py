"""Planted-bug problems whose bugs are planted in a model's outputs, for the tasks whose networks take too long to train
per problem on two cores (pose, masks): each problem renders its task's scenes on its own seed, changes the training
split and the annotations its model is recorded as trained on as each bug needs (a slice made rare or shifted in
training; left unannotated, its sides swapped, its keypoints left out, outlined by its box), and writes the model's
outputs: every true object predicted as it is, a little off, except a planted bug's objects, predicted as a model
taught that way fails them (missed, badly placed, sides swapped, outlined by the box)."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.demo.build import PlantedBug, new_demo_folder
from hibug_core.errors import HibugError, check_fields
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.store.project import Project
from hibug_core.store.recorded_models import RecordedModel, record_model

# What each bug type does to the training split: scenes holding its objects dropped but for this share (rare case:
# the slice under 1% of training; distribution shift: a third of its share elsewhere, still above 1%).
TRAINING_KEPT = {"rare case": 0.01, "distribution shift": 0.2}
MISSING = "missing annotations"  # its objects left out of the training annotations, and missed
OUTPUT_SPEC = "planted-outputs"  # the recorded model's spec: its outputs were written by the benchmark, no network


@dataclass(frozen=True)
class Scenes:
    """A split's rendered scenes: its images, one row per true object (scene, x, y, w, h and its attributes, as the
    task's truth tags name them) and each object's annotation (keypoints or a mask), in the rows' order."""

    images: list
    objects: pd.DataFrame
    annotations: list


Change = Callable[[pd.Series, object, np.random.Generator], object]  # (object row, its annotation, rng) -> annotation


@dataclass(frozen=True)
class OutputWorld:
    """What the problems need of a task's scenes: how they are rendered, the attributes a bug may be planted on, the bug
    types planted, the COCO files written, and what an annotation bug teaches and how a failing output looks."""

    render: Callable[[int, int], Scenes]  # (scenes, seed)
    attributes: tuple[str, ...]  # the objects' columns a bug's conditions are drawn from (the truth tags' names)
    bug_types: tuple[str, ...]
    truth_file: Callable[[str, list, pd.DataFrame, list], dict]  # (split, images, objects, annotations) -> COCO
    result: Callable[[pd.Series, object], dict]  # (object row, predicted annotation) -> a COCO result's fields
    close: Change  # a prediction a little off (what a good model gives)
    wrong: Change  # a failing prediction (rare case, distribution shift, hard case; what `taught` names otherwise)
    taught: dict[str, tuple[Change, bool]]  # annotation bug -> (its training annotation, whether the model predicts
    #                                         that too (sides swapped, box masks); else its predictions are `wrong`)
    max_conditions: int = 2  # conditions of a drawn bug's slice, at most


@dataclass(frozen=True)
class OutputProblem:
    """One problem: its seed, its planted bugs (the slice, how, the type hibug should name) and its sizes."""

    id: str
    seed: int
    bugs: tuple[PlantedBug, ...]
    train_scenes: int = 1000
    val_scenes: int = 500
    fail_share: float = 0.85  # a planted bug's objects predicted as it makes the model fail, but for the rest
    base_miss: float = 0.03  # any other object missed at this rate, independent of every attribute
    min_objects: int = 30  # a drawn slice holds at least this many validation objects...
    max_share: float = 0.3  # ... and at most this share of them

    def __post_init__(self):
        check_fields(self, {"train_scenes": (self.train_scenes >= 1, "1 or more"),
                            "val_scenes": (self.val_scenes >= 1, "1 or more"),
                            "fail_share": (0 < self.fail_share <= 1, "a share in (0, 1]"),
                            "base_miss": (0 <= self.base_miss < 1, "a share in [0, 1)"),
                            "min_objects": (self.min_objects >= 1, "1 or more"),
                            "max_share": (0 < self.max_share <= 1, "a share in (0, 1]")})

    def planted_bugs(self) -> list[PlantedBug]:
        return list(self.bugs)


def draw_problems(world: OutputWorld, count: int, seed: int, *, prefix: str = "out", bugs: int = 3,
                  **sizes) -> list[OutputProblem]:
    """`count` problems of `bugs` bugs each, of distinct types, on slices of one to world.max_conditions conditions
    that share no condition and hold enough validation objects (a distribution shift on one attribute, so that a
    third of its share stays above 1% of training)."""
    problems = []
    for k in range(count):
        problem_seed = seed * 1000 + k
        rng = np.random.default_rng(problem_seed)
        shape = OutputProblem(f"{prefix}{k}", problem_seed, (), **sizes)
        scenes = world.render(shape.val_scenes, _split_seed(problem_seed, "val"))
        val = scenes.objects
        types = rng.choice(world.bug_types, size=min(bugs, len(world.bug_types)), replace=False)
        used: set[tuple[str, str]] = set()
        planted = []
        for bug_type in types:
            most = 1 if bug_type == "distribution shift" else world.max_conditions
            for _ in range(200):
                attributes = rng.choice(world.attributes, size=int(rng.integers(1, most + 1)), replace=False)
                conditions = {str(a): str(rng.choice(sorted(val[a].astype(str).unique()))) for a in attributes}
                inside = members(val, conditions)
                if (shape.min_objects <= inside.sum() <= shape.max_share * len(val)
                        and not used & set(conditions.items()) and _changes(world, str(bug_type), scenes, inside)):
                    break
            else:
                continue
            used |= set(conditions.items())
            planted.append(PlantedBug(str(bug_type), conditions, _how(str(bug_type), world), str(bug_type)))
        if not planted:  # scored, a problem without a bug would count as a bug-free twin
            raise HibugError(f"problem {shape.id}: no slice holds {shape.min_objects} to {shape.max_share:.0%} of its "
                             f"{len(val)} validation objects; give more val_scenes or a smaller min_objects")
        problems.append(OutputProblem(shape.id, problem_seed, tuple(planted), **sizes))
    return problems


def _changes(world: OutputWorld, bug_type: str, scenes: Scenes, inside: np.ndarray) -> bool:
    """Whether an annotation bug changes most of its slice's annotations (a rectangle outlined by its box is not
    outlined badly); any other bug type: True."""
    if bug_type not in world.taught:
        return True
    change, rng = world.taught[bug_type][0], np.random.default_rng(0)
    rows = np.flatnonzero(inside)
    same = [np.array_equal(np.asarray(change(scenes.objects.iloc[i], scenes.annotations[i], rng)),
                           np.asarray(scenes.annotations[i])) for i in rows]
    return float(np.mean(same)) <= 0.2


def _how(bug_type: str, world: OutputWorld) -> str:
    if bug_type in TRAINING_KEPT:
        return f"its training scenes kept at {TRAINING_KEPT[bug_type]:.0%}; its outputs fail"
    if bug_type == MISSING:
        return "left out of the training annotations (but 5%); its objects missed"
    if bug_type in world.taught:
        return "its training annotations changed (but 5%); its outputs " + (
            "as taught" if world.taught[bug_type][1] else "fail")
    return "common in training; its outputs fail"


def _split_seed(seed: int, split: str) -> int:
    return seed * 10 + ("train", "val").index(split) + 1


def build_output_problem(folder: str | Path, world: OutputWorld, problem: OutputProblem, model: str, *,
                         progress: ProgressCallback = no_progress) -> Project:
    """The problem's project in `folder` (new): its training and validation splits imported as COCO files with the
    planted outputs as `model`'s results, and the model recorded with the annotations it was trained on."""
    from hibug_core.tasks import load_coco

    # 1. Check the folder; render the splits (the training split thinned where a bug needs it).
    folder = new_demo_folder(folder)
    rng = np.random.default_rng(problem.seed)
    splits = {"train": _thinned(world.render(problem.train_scenes, _split_seed(problem.seed, "train")), problem, rng),
              "val": world.render(problem.val_scenes, _split_seed(problem.seed, "val"))}
    project = Project.create(folder, name=f"planted outputs {problem.id}")
    data = folder / "data"
    # 2. Each split: images, true annotations, the planted outputs; imported.
    for step, (split, scenes) in enumerate(splits.items()):
        progress(f"planting outputs: {problem.id}", step, 3)
        (data / "images" / split).mkdir(parents=True, exist_ok=True)
        for index, image in enumerate(scenes.images):
            image.save(data / "images" / split / f"{index:05d}.png")
        truth = data / f"truth_{split}.json"
        truth.write_text(json.dumps(world.truth_file(split, scenes.images, scenes.objects, scenes.annotations)))
        results = data / f"{model}_{split}.json"
        results.write_text(json.dumps(_outputs(world, problem, scenes, rng)))
        project.import_manifest(load_coco(truth, {model: results}, split=split, progress=progress),
                                author="benchmark", kind="coco")
    # 3. What the model was trained on, recorded with it (the evidence that types annotation bugs).
    progress(f"planting outputs: {problem.id}", 2, 3)
    train = splits["train"]
    objects, annotations = _taught(world, problem, train, rng)
    (data / "train_annotations.json").write_text(json.dumps(world.truth_file("train", train.images, objects,
                                                                           annotations)))
    record_model(project, RecordedModel(model, OUTPUT_SPEC, training="data/train_annotations.json"),
                 author="benchmark")
    progress(f"planting outputs: {problem.id}", 3, 3)
    return project


def members(objects: pd.DataFrame, conditions: dict[str, str]) -> np.ndarray:
    """The objects in a slice (a planted bug's: its `slice`)."""
    return np.logical_and.reduce([objects[a].astype(str).eq(t).to_numpy() for a, t in conditions.items()])


def _thinned(scenes: Scenes, problem: OutputProblem, rng: np.random.Generator) -> Scenes:
    """The training scenes without those that hold a rare-case or shifted slice's objects, but for their kept share
    (the scenes renumbered in order)."""
    drop = np.zeros(len(scenes.images), bool)
    for bug in problem.bugs:
        if bug.diagnosed_as in TRAINING_KEPT:
            holding = np.unique(scenes.objects["scene"].to_numpy()[members(scenes.objects, bug.slice)])
            drop[holding[rng.random(len(holding)) >= TRAINING_KEPT[bug.diagnosed_as]]] = True
    kept = np.flatnonzero(~drop)
    renumber = pd.Series(np.arange(len(kept)), index=kept)
    rows = scenes.objects["scene"].isin(kept).to_numpy()
    objects = scenes.objects[rows].assign(scene=lambda o: renumber[o["scene"]].to_numpy()).reset_index(drop=True)
    return Scenes([scenes.images[i] for i in kept], objects,
                  [a for a, keep in zip(scenes.annotations, rows) if keep])


def _taught(world: OutputWorld, problem: OutputProblem, scenes: Scenes, rng: np.random.Generator
            ) -> tuple[pd.DataFrame, list]:
    """The training annotations: the true ones, but a missing-annotation bug's objects left out and an annotation
    bug's changed (5% of each kept as they are)."""
    keep = np.ones(len(scenes.objects), bool)
    annotations = list(scenes.annotations)
    wrong = rng.random(len(keep)) >= 0.05
    for bug in problem.bugs:
        chosen = members(scenes.objects, bug.slice) & wrong
        if bug.diagnosed_as == MISSING:
            keep &= ~chosen
        elif bug.diagnosed_as in world.taught:
            change = world.taught[bug.diagnosed_as][0]
            for i in np.flatnonzero(chosen):
                annotations[i] = change(scenes.objects.iloc[i], annotations[i], rng)
    rows = np.flatnonzero(keep)
    return scenes.objects.iloc[rows].reset_index(drop=True), [annotations[i] for i in rows]


def _outputs(world: OutputWorld, problem: OutputProblem, scenes: Scenes, rng: np.random.Generator) -> list[dict]:
    """The model's COCO results on a split: each true object predicted a little off (or missed at the base rate),
    a planted bug's objects as the bug makes the model fail them (but for 1 - fail_share)."""
    how = np.full(len(scenes.objects), "", dtype=object)
    for bug in problem.bugs:
        how[members(scenes.objects, bug.slice) & (rng.random(len(how)) < problem.fail_share) & (how == "")] = \
            bug.diagnosed_as
    results = []
    for i, annotation in enumerate(scenes.annotations):
        row, bug = scenes.objects.iloc[i], how[i]
        if bug == MISSING or (not bug and rng.random() < problem.base_miss):
            continue
        if not bug:
            predicted = world.close(row, annotation, rng)
        elif bug in world.taught and world.taught[bug][1]:
            predicted = world.taught[bug][0](row, annotation, rng)
        else:
            predicted = world.wrong(row, annotation, rng)
        results.append({"image_id": int(row["scene"]) + 1, "score": round(float(rng.uniform(0.5, 0.99)), 3),
                        **world.result(row, predicted)})
    return results
