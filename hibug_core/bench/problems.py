"""Planted-bug problems in the easy-vqa shape world: which bug, how the training split is biased, the ground truth."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.bench.output_bugs import members
from hibug_core.demo.easyvqa import SHAPES, ShapeWorld

SPURIOUS, RARE, SHIFT, HARD = "spurious correlation", "rare case", "distribution shift", "hard case"
PLANT_ATTRIBUTES = ("color", "size", "horizontal position", "vertical position")
SPURIOUS_STRENGTHS = (0.9, 0.95, 0.99)  # share of the tag's training images that are of the class
RARE_STRENGTHS = (0.0, 0.02, 0.05)  # share of the combination's training images kept
SHIFT_STRENGTHS = (0.3, 0.4)  # the same for a shift: fewer in training than elsewhere (under half), not rare
OF_A_CLASS = (RARE, SHIFT)  # bugs that live in a tag and a class (a spurious correlation lives in its tag alone)
IN_TRAINING = (SPURIOUS, RARE, SHIFT)  # planted in the training split (a model trained per problem); HiBug's tables
HARD_FAILING = 0.85  # a hard case's share of outputs made wrong (planted in the outputs of one unbiased model)
HARD_SHARE = (0.015, 0.15)  # a hard case's slice holds this share of the world's images, at least and at most


@dataclass(frozen=True)
class PlantedProblem:
    """One bug planted in a training split.

    spurious correlation: in training, `tag` of `attribute` goes with class `label` (a share `strength` of the tag's
    images are of that class), so the model learns the tag as a shortcut; rare case: images of class `label` with
    the tag are made rare (a share `strength` of them kept); distribution shift: the same, fewer but not rare; hard
    case: a conjunction of the tag, the `more` conditions and the class (when `label` is given) is common in training
    and the model, trained on an unbiased split, is made to fail a share `strength` of it in its outputs."""

    id: str
    bug_type: str
    attribute: str
    tag: str
    label: str
    strength: float
    seed: int
    more: tuple[tuple[str, str], ...] = ()  # a hard case's other conditions (attribute, tag)

    def conditions(self) -> tuple[tuple[str, str], ...]:
        """The planted slice: the tag, any other conditions, and the class where the bug lives in one."""
        of_class = self.bug_type in OF_A_CLASS or (self.bug_type == HARD and self.label)
        return ((self.attribute, self.tag), *self.more) + ((("shape", self.label),) if of_class else ())

    def failing_part(self, attributes: pd.DataFrame) -> np.ndarray:
        """Rows the bug should make the model fail on: conflicting rows (the tag, another class), the rare rows or the
        hard case's."""
        if self.bug_type == HARD:
            return members(attributes, dict(self.conditions()))
        has_tag = (attributes[self.attribute] == self.tag).to_numpy()
        of_label = (attributes["shape"] == self.label).to_numpy()
        return has_tag & (of_label if self.bug_type in OF_A_CLASS else ~of_label)

    def reference(self, attributes: pd.DataFrame) -> np.ndarray:
        """Rows to compare the failing part with: the same classes without the tag (so a class that is weak anyway
        does not count as a planted bug); for a hard case, every row outside it."""
        if self.bug_type == HARD:
            return ~self.failing_part(attributes)
        has_tag = (attributes[self.attribute] == self.tag).to_numpy()
        of_label = (attributes["shape"] == self.label).to_numpy()
        return ~has_tag & (of_label if self.bug_type in OF_A_CLASS else ~of_label)

    def describe(self) -> str:
        if self.bug_type == HARD:
            return (" & ".join(f"{a} = {t}" for a, t in self.conditions()) + f": common in training, "
                    f"{self.strength:.0%} of its outputs wrong")
        if self.bug_type == SPURIOUS:
            return f"{self.attribute} = {self.tag} goes with {self.label} ({self.strength:.0%} of its training images)"
        how = "rare" if self.bug_type == RARE else "fewer in training"
        return f"{self.tag} {self.label}s ({self.attribute}) {how}: {self.strength:.0%} kept in training"


@dataclass(frozen=True)
class SplitConfig:
    """How the shape world is split for every problem (the same unbiased validation and pool sets for all)."""

    val_from_train: int = 712  # easy-vqa's test images plus this many of its train images are the validation split
    pool: int = 400
    train_size: int = 1500  # the biased training split is drawn down to this size, so every model sees as many
    other_keep: float = 0.5  # spurious: share kept of the class's training images without the tag (both directions)
    seed: int = 0


def candidate_problems(world: ShapeWorld, seed: int = 0) -> list[PlantedProblem]:
    """Every (bug type, attribute, tag, class, strength) combination, in a seeded random order, types alternating
    (the shifts drawn apart, so that adding them left every other problem as it was)."""
    def grid(strengths) -> list:
        return [(a, t, k, s) for a in PLANT_ATTRIBUTES for t in sorted(world.attributes[a].unique())
                if t != "not visible" for k in SHAPES for s in strengths]

    rng = np.random.default_rng(seed)
    kinds = {SPURIOUS: SPURIOUS_STRENGTHS, RARE: RARE_STRENGTHS}
    lists = {kind: [g[i] for g in (grid(strengths),) for i in rng.permutation(len(g))]
             for kind, strengths in kinds.items()}
    shifts = grid(SHIFT_STRENGTHS)
    shifts = [shifts[i] for i in np.random.default_rng([seed, 1]).permutation(len(shifts))]
    problems = []
    for i, (pair, shift) in enumerate(itertools.zip_longest(zip(lists[SPURIOUS], lists[RARE]), shifts)):
        for k, (kind, (attribute, tag, label, strength)) in enumerate(zip(kinds, pair)):
            short = "sc" if kind == SPURIOUS else "rc"
            problems.append(PlantedProblem(f"{short}{i:03d}", kind, attribute, tag, label, strength,
                                           seed=seed * 10_000 + 2 * i + k))
        if shift is not None:
            problems.append(PlantedProblem(f"ds{i:03d}", SHIFT, *shift, seed=seed * 10_000 + 5_000 + i))
    return problems


def hard_cases(world: ShapeWorld, seed: int, count: int = 60) -> list[PlantedProblem]:
    """`count` hard cases in a seeded order, of two and three conditions in turn (a class among them or not), each
    slice holding HARD_SHARE of the world's images; all of a seed's share one model (`unbiased`)."""
    rng = np.random.default_rng([seed, 2])
    attributes = world.attributes
    problems: list[PlantedProblem] = []
    while len(problems) < count:
        names = rng.choice((*PLANT_ATTRIBUTES, "shape"), size=2 + len(problems) % 2, replace=False)
        chosen = {str(a): str(rng.choice(sorted(set(attributes[a].unique()) - {"not visible"}))) for a in names}
        if not HARD_SHARE[0] <= members(attributes, chosen).mean() <= HARD_SHARE[1]:
            continue
        label = chosen.pop("shape", "")
        (attribute, tag), *more = chosen.items()
        problems.append(PlantedProblem(f"hc{len(problems):03d}", HARD, attribute, tag, label, HARD_FAILING,
                                       seed=seed * 10_000 + 8_000 + len(problems), more=tuple(more)))
    return problems


def unbiased(problem: PlantedProblem) -> PlantedProblem:
    """What the model under an output-planted problem is trained for: one unbiased split, the same for every such
    problem of a seed, so one model serves them all."""
    return PlantedProblem("unbiased", HARD, "", "", "", 0.0, seed=problem.seed - problem.seed % 10_000 + 9_999)


def plant_outputs(probabilities: np.ndarray, problem: PlantedProblem, attributes: pd.DataFrame) -> np.ndarray:
    """The model's probabilities with a hard case planted: on a seeded share `strength` of its rows (every split),
    the top class's probability swapped with another class's, drawn at random (no dominant wrong prediction)."""
    rng = np.random.default_rng(problem.seed)
    planted = probabilities.copy()
    rows = np.flatnonzero(problem.failing_part(attributes) & (rng.random(len(planted)) < problem.strength))
    top = planted[rows].argmax(axis=1)
    other = (top + rng.integers(1, planted.shape[1], len(rows))) % planted.shape[1]
    planted[rows, top], planted[rows, other] = planted[rows, other], planted[rows, top]
    return planted


def base_splits(world: ShapeWorld, config: SplitConfig = SplitConfig()) -> np.ndarray:
    """'val' and 'pool' (unbiased, shared by every problem) and 'candidate' (the training split is drawn from it)."""
    rng = np.random.default_rng(config.seed)
    split = np.full(len(world.images), "candidate", dtype=object)
    source = world.source_splits
    split[source == "test"] = "val"
    from_train = np.flatnonzero(source == "train")
    rng.shuffle(from_train)
    split[from_train[: config.val_from_train]] = "val"
    split[from_train[config.val_from_train : config.val_from_train + config.pool]] = "pool"
    return split


def plant(world: ShapeWorld, base: np.ndarray, problem: PlantedProblem,
          config: SplitConfig = SplitConfig()) -> np.ndarray:
    """The problem's splits: the candidates thinned to plant the bug, then drawn down to `train_size` as 'train';
    the rest of the candidates 'unused'."""
    rng = np.random.default_rng(problem.seed)
    attributes = world.attributes
    candidate = base == "candidate"
    draw = rng.random(len(base))
    if problem.bug_type != HARD:
        has_tag = (attributes[problem.attribute] == problem.tag).to_numpy()
        of_label = (attributes["shape"] == problem.label).to_numpy()
    if problem.bug_type == SPURIOUS:
        with_label = (candidate & has_tag & of_label).sum()
        conflicting = candidate & has_tag & ~of_label
        # keep a share q of the conflicting rows so that the class has `strength` of the tag's rows
        keep = min(1.0, with_label * (1 - problem.strength) / problem.strength / max(conflicting.sum(), 1))
        dropped = (conflicting & (draw >= keep)) | (candidate & ~has_tag & of_label & (draw >= config.other_keep))
    elif problem.bug_type == HARD:  # planted in the outputs: an unbiased draw
        dropped = np.zeros(len(base), bool)
    else:  # a rare case or a shift: the combination thinned
        dropped = candidate & has_tag & of_label & (draw >= problem.strength)
    kept = np.flatnonzero(candidate & ~dropped)
    chosen = rng.permutation(kept)[: config.train_size]
    split = np.where(candidate, "unused", base).astype(object)
    split[chosen] = "train"
    return split


def thin_validation(split: np.ndarray, share: float, seed: int) -> np.ndarray:
    """The splits with only a seeded share of the 'val' rows kept as 'val' (the rest 'unused'): a smaller validation
    set drawn from the same one, to see how bug discovery depends on its size (HiBug's Table 6)."""
    if share >= 1.0:
        return split
    val = np.flatnonzero(split == "val")
    dropped = np.random.default_rng(seed).permutation(val)[round(share * len(val)):]
    thinned = split.copy()
    thinned[dropped] = "unused"
    return thinned


def ground_truth(problem: PlantedProblem) -> dict:
    """What a debugging tool should report: the bug type and the slice, as stored with the problem."""
    return {"bug_type": problem.bug_type, "attribute": problem.attribute, "tag": problem.tag, "label": problem.label,
            "slice": list(problem.conditions())}
