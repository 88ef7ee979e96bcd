"""Choosing unlabeled pool images to label for the worst error slices under a budget (HiBug, HiBug2, baselines)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from hibug_core.bounds import Bound, check_bounds
from hibug_core.csv_export import write_csv
from hibug_core.embeddings.base import normalize_rows
from hibug_core.errors import HibugError
from hibug_core.registry import Registry
from hibug_core.repair import pool_outputs
from hibug_core.repair.active_learning import badge, k_center_greedy, smallest_margins
from hibug_core.repair.expected_failures import failure_chance, spread_out
from hibug_core.repair.pool_outputs import OWN_FEATURES
from hibug_core.slices.search import CLASS, describe

SELECTION_METHODS = Registry("selection method")
COLUMNS = ["image_path", "split", "slice_id", "slice", "reason", "confidence", "order"]


class SelectionError(HibugError):
    """A selection that cannot be made (no pool, no error slices, a bad budget)."""


BUDGET_RULE = ("a count of images (a whole number, 1 or more) or a share of the training images (a decimal between 0 "
               "and 1)")


def budget_problem(budget) -> str | None:
    """What is wrong with a budget, or None: a count is an int of 1 or more, a share a float in (0, 1)."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        return f"must be {BUDGET_RULE}, not {type(budget).__name__}"
    if isinstance(budget, int):
        return None if budget >= 1 else f"a count must be 1 or more, not {budget}"
    if 0 < budget < 1:
        return None
    hint = f"; for a count write {int(budget)}" if budget >= 1 and float(budget).is_integer() else ""
    return f"a share must be between 0 and 1, not {budget}{hint}"


def parse_budget(text: str) -> int | float:
    """A budget typed as text: '40' is a count, '0.1' or '10%' a share."""
    text = str(text).strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else int(text) if text.lstrip("+-").isdigit() \
            else float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not {BUDGET_RULE}") from None


def describe_budget(budget: int | float, n_train: int, images: str = "images") -> str:
    """Both readings of a budget: '40 images, 10.0% of the 400 training images'."""
    count = resolve_budget(budget, n_train)
    share = f", {count / n_train:.1%} of the {n_train:,} training {images}" if n_train else ""
    return f"{count:,} {images}{share}"


@dataclass(frozen=True)
class SelectionConfig:
    method: str = "expected failures"  # a name in SELECTION_METHODS; the default won benchmarks/repair.py (README)
    budget: int | float = 0.1  # images to select: a count (int >= 1) or a share of the training images (float < 1)
    beta: float = 0.9  # hibug: take slices until their failures cover this share of all validation failures
    pool_split: str = "pool"
    seed: int = 0  # random selection, and ties in confidence
    features: str = OWN_FEATURES  # coreset, BADGE, diversity: the model's own features, or an encoder's embeddings

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "beta": Bound("hibug: share of validation failures the slices cover", gt=0, le=1),
        "seed": Bound("random seed", ge=0, integer=True)}

    def __post_init__(self):
        check_bounds(self, self.BOUNDS, {
            "method": (self.method in SELECTION_METHODS.names(hidden=True),
                       f"one of {', '.join(SELECTION_METHODS.names())}"),
            "budget": (budget_problem(self.budget) is None, BUDGET_RULE)})


def resolve_budget(budget: int | float, n_train: int) -> int:
    """A budget as a number of images: a count (int) stays, a share (float) is of `n_train`, the training images
    the model learnt from (its task states which: hibug_core.tasks)."""
    problem = budget_problem(budget)
    if problem:
        raise SelectionError(f"the budget {problem}")
    count = budget if isinstance(budget, int) else int(round(budget * n_train))
    if count < 1:
        raise SelectionError(f"a budget of {budget:.0%} of {n_train} training images selects nothing; raise it")
    return count


def labelled_training_images(samples: pd.DataFrame) -> int:
    """What a classifier learnt from, and so what a budget's share is of: the labelled images of the training split."""
    return int(((samples["split"] == "train") & samples["label"].notna()).sum())


def apportion(weights: np.ndarray, total: int, capacity: np.ndarray) -> np.ndarray:
    """Split `total` in proportion to `weights` (largest remainders), never above `capacity`; what a full slice cannot
    take goes to the others in the same proportion."""
    weights = np.asarray(weights, float)
    capacity = np.asarray(capacity, int)
    quota = np.zeros(len(weights), int)
    left = min(total, int(capacity.sum()))
    while left > 0:
        open_ = (quota < capacity) & (weights > 0)
        if not open_.any():
            open_ = quota < capacity
            share = open_.astype(float)
        else:
            share = np.where(open_, weights, 0.0)
        exact = share / share.sum() * left
        add = np.floor(exact).astype(int)
        remainder = left - add.sum()
        order = np.lexsort((np.arange(len(exact)), -(exact - add)))  # largest remainder, then slice order
        add[order[:remainder]] += 1
        add = np.minimum(add, capacity - quota)
        quota += add
        left -= int(add.sum())
    return quota


def _pool_matches(definition, pool_tags: pd.DataFrame, pool: pd.DataFrame) -> np.ndarray:
    """Pool rows in a slice. A class condition uses the label where the pool has one, else the model's prediction."""
    mask = np.ones(len(pool_tags), bool)
    for attribute, tag in definition:
        if attribute == CLASS:
            known = pool["label"].where(pool["label"].notna(), pool["prediction"])
            mask &= (known == tag).to_numpy()
        elif attribute in pool_tags.columns:
            mask &= (pool_tags[attribute].astype(object) == tag).to_numpy()
        else:
            mask[:] = False
    return mask


def _by_confidence(pool: pd.DataFrame, rows: np.ndarray, seed: int) -> np.ndarray:
    """Rows from least to most confident (unknown confidence last), ties in a seeded order."""
    confidence = pool["confidence"].to_numpy(float)[rows]
    tie = np.random.default_rng(seed).random(len(rows))
    return rows[np.lexsort((tie, np.nan_to_num(confidence, nan=2.0)))]


def select_pool(report, config: SelectionConfig | None = None, *, n_train: int | None = None,
                project=None) -> pd.DataFrame:
    """Pool images to label, one row each (index: sample id), with the slice it was chosen for and why. Methods that
    read the model's stored probabilities or features (margin, coreset, BADGE, expected failures) need `project`.
    The budget's share is of `n_train` (default: labelled_training_images)."""
    # 1. Check inputs (the method is checked when the config is built): the pool, the budget.
    config = config or SelectionConfig()
    samples = report.samples
    pool = samples[samples["split"] == config.pool_split]
    if pool.empty:
        raise SelectionError(f"the project has no '{config.pool_split}' images to select from; import unlabeled "
                             f"images with split = {config.pool_split}")
    if n_train is None:
        n_train = labelled_training_images(samples)
    budget = min(resolve_budget(config.budget, n_train), len(pool))
    # 2. Select with the method.
    return SELECTION_METHODS.build(config.method, report=report, pool=pool, budget=budget, config=config,
                                   project=project)


@SELECTION_METHODS.register("random", "baseline: a random draw")
def _random(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig,
            project=None) -> pd.DataFrame:
    chosen = np.random.default_rng(config.seed).choice(len(pool), budget, replace=False)
    return frame(pool, chosen, [None] * budget, ["random draw"] * budget, budget)


@SELECTION_METHODS.register("uncertainty", "baseline: the least confident pool images")
def _uncertainty(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig,
                 project=None) -> pd.DataFrame:
    chosen = _by_confidence(pool, np.arange(len(pool)), config.seed)[:budget]
    return frame(pool, chosen, [None] * budget, ["lowest confidence in the pool"] * budget, budget)


@SELECTION_METHODS.register("hibug", "HiBug: every slice worse than the whole by error rate, until they cover β of "
                            "the validation failures; the budget split by failures, least confident first")
def _hibug(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig,
           project=None) -> pd.DataFrame:
    errors = report.evaluation["error"].to_numpy()
    slices = taken_slices(report, config.beta)
    taken = list(range(len(slices)))
    masks = [report.tags.mask(d) for d in slices["definition"]]
    failures = np.array([errors[mask].sum() for mask in masks])
    matches = _pool_rows(report, slices, taken, pool)
    # Each pool image belongs to the first (worst) taken slice it is in, so quotas never count an image twice.
    owner = np.full(len(pool), -1)
    for k, rows in enumerate(matches):
        owner[rows[owner[rows] < 0]] = k
    capacity = np.bincount(owner[owner >= 0], minlength=len(taken))
    quota = apportion(failures, budget, capacity)
    chosen, slice_rows, reasons = [], [], []
    for k, i in enumerate(taken):
        ordered = _by_confidence(pool, np.flatnonzero(owner == k), config.seed)[:quota[k]]
        chosen += list(ordered)
        slice_rows += [i] * len(ordered)
        reasons += [f"hibug: {quota[k]} of the budget for the slice's {failures[k]:.0f} validation failures; "
                    "least confident first"] * len(ordered)
    return frame(pool, np.array(chosen, int), [slices.iloc[i] for i in slice_rows], reasons, budget,
                 poor=report.poor)


@SELECTION_METHODS.register("hibug2", "HiBug2: the reported slices by score, filled from the worst down, least "
                            "confident first")
def _hibug2(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig,
            project=None) -> pd.DataFrame:
    slices = report.slices  # ranked by slice score
    _need_slices(slices)
    return _worst_first(report, slices, pool, budget, config, "hibug2: slice ranked #{rank} by score")


@SELECTION_METHODS.register("hibug rule", "HiBug2's Table 2 arm for HiBug: HiBug's slices (every slice below the cut, "
                            "no parent filter, nothing folded), taken by HiBug2's rule (the worst first, least "
                            "confident first), so the two arms differ only in their slices")
def _hibug_rule(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig,
                project=None) -> pd.DataFrame:
    slices = hibug_rule_slices(report)
    _need_slices(slices)
    return _worst_first(report, slices, pool, budget, config, "HiBug's rule: slice #{rank} by score")


def hibug_rule_slices(report) -> pd.DataFrame:
    """HiBug's error slices of a report's enumeration: every slice scoring below the cut (the threshold, or the overall
    score less C), whatever its parents do, worst first (larger first on a tie)."""
    config = report.config
    return report.slices_below(config.threshold if config.threshold is not None else report.overall_score - config.gap)


def _worst_first(report, slices: pd.DataFrame, pool: pd.DataFrame, budget: int, config: SelectionConfig,
                 reason: str) -> pd.DataFrame:
    """The budget filled from the first slice down (each slice's pool images least confident first, an image taken
    once), the slices' pool images found only until the budget is spent."""
    pool_tags = report.all_tags.reindex(pool.index)
    chosen, slice_rows, reasons = [], [], []
    used = np.zeros(len(pool), bool)
    for i in range(len(slices)):
        rows = np.flatnonzero(_pool_matches(slices["definition"].iat[i], pool_tags, pool))
        for r in _by_confidence(pool, rows[~used[rows]], config.seed)[:budget - len(chosen)]:
            used[r] = True
            chosen.append(r)
            slice_rows.append(i)
            reasons.append(reason.format(rank=i + 1) + ", filled from the worst down; least confident first")
        if len(chosen) == budget:
            break
    return frame(pool, np.array(chosen, int), [slices.iloc[i] for i in slice_rows], reasons, budget,
                 poor=report.poor)


def _labelled_train(report) -> pd.Index:
    samples = report.samples
    return samples.index[(samples["split"] == "train") & samples["label"].notna()]


def taken_slices(report, beta: float) -> pd.DataFrame:
    """HiBug's slices: every enumerated slice worse than the whole (HiBug ranks them all, reported or not), worst
    error rate first, until together they cover beta of the validation failures."""
    errors = report.evaluation["error"].to_numpy()
    slices = report.slices_below(report.overall_score)
    _need_slices(slices)
    covered = np.zeros(len(errors), bool)
    for taken, definition in enumerate(slices["definition"], start=1):  # noqa: B007 - read after the loop
        covered |= report.tags.mask(definition)
        if errors[covered].sum() >= beta * errors.sum():
            break
    return slices.iloc[:taken].reset_index(drop=True)


def _need_slices(slices: pd.DataFrame) -> None:
    if slices.empty:
        raise SelectionError("no error slices to select for; change the slice settings, or use random or "
                             "uncertainty selection")


def _pool_rows(report, slices: pd.DataFrame, taken: list[int], pool: pd.DataFrame) -> list[np.ndarray]:
    """Per taken slice, the pool rows (positions) it holds."""
    pool_tags = report.all_tags.reindex(pool.index)
    return [np.flatnonzero(_pool_matches(slices["definition"].iat[i], pool_tags, pool)) for i in taken]


def pool_masks(report, slices: pd.DataFrame, pool: pd.DataFrame) -> list[np.ndarray]:
    """Per slice, a mask of the pool rows it holds."""
    masks = [np.zeros(len(pool), bool) for _ in range(len(slices))]
    for mask, rows in zip(masks, _pool_rows(report, slices, list(range(len(slices))), pool)):
        mask[rows] = True
    return masks


def frame(pool: pd.DataFrame, rows: np.ndarray, slices: list, reasons: list[str], budget: int, *,
          poor: dict[str, str] | None = None) -> pd.DataFrame:
    """The selection table; attrs: budget, unspent (when the slices' pool images run out). A slice on an attribute in
    `poor` (the report's tags too poor to trust) is flagged ⚠ with why, in its name and its reason."""
    poor = poor or {}
    warnings = [None if s is None else "; ".join(f"{a}: {poor[a]}" for a, _ in s["definition"] if a in poor)
                for s in slices]
    frame = pd.DataFrame({
        "image_path": pool["image_path"].to_numpy()[rows],
        "split": pool["split"].to_numpy()[rows],
        "slice_id": [None if s is None else s["slice_id"] for s in slices],
        "slice": [None if s is None else ("⚠ " if w else "") + describe(s["definition"])
                  for s, w in zip(slices, warnings)],
        "reason": [r + (f"; ⚠ its tags are too poor to trust ({w})" if w else "") for r, w in zip(reasons, warnings)],
        "confidence": pool["confidence"].to_numpy(float)[rows],
        "order": np.arange(len(rows)),
    }, index=pd.Index(pool.index.to_numpy()[rows], name="sample_id"))
    frame = frame[COLUMNS]
    frame.attrs.update(budget=budget, unspent=budget - len(frame))
    return frame


def export_selection(selection: pd.DataFrame, path: str | Path) -> Path:
    """Write a selection as CSV or Parquet (by the file's suffix)."""
    path = Path(path)
    table = selection.reset_index()
    if path.suffix.lower() == ".parquet":
        table.to_parquet(path, index=False)
    elif path.suffix.lower() == ".csv":
        write_csv(table, path)
    else:
        raise SelectionError(f"export to .csv or .parquet, not '{path.suffix or path.name}'")
    return path


@SELECTION_METHODS.register("margin", "baseline: the pool images with the smallest margin between the model's two "
                            "most probable classes")
def _margin(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig, project=None) -> pd.DataFrame:
    chosen = smallest_margins(pool_outputs.probabilities(project, report.model, pool.index), budget, config.seed)
    return frame(pool, chosen, [None] * len(chosen), ["smallest margin in the pool"] * len(chosen), budget)


@SELECTION_METHODS.register("coreset", "baseline (the one HiBug compares with): k-center greedy on the model's "
                            "features, farthest from the training split and from each other")
def _coreset(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig, project=None) -> pd.DataFrame:
    points, labelled = (normalize_rows(pool_outputs.features(project, report.model, ids, config.features))
                        for ids in (pool.index, _labelled_train(report)))
    chosen = k_center_greedy(points, labelled, budget)
    return frame(pool, chosen, [None] * len(chosen), ["coreset: farthest from what is labelled"] * len(chosen),
                 budget)


@SELECTION_METHODS.register("badge", "baseline: BADGE, k-means++ seeding on gradient embeddings (uncertain and "
                            "diverse at once)")
def _badge(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig, project=None) -> pd.DataFrame:
    chosen = badge(pool_outputs.probabilities(project, report.model, pool.index),
                   pool_outputs.features(project, report.model, pool.index, config.features), budget, config.seed)
    return frame(pool, chosen, [None] * len(chosen), ["BADGE: k-means++ on gradient embeddings"] * len(chosen),
                 budget)


@SELECTION_METHODS.register("expected failures", "hibug's slices and the model's margin, learned on val, give each "
                            "pool image a chance of failing; the most expected failures, spread out by the model's "
                            "features")
def _expected_failures(*, report, pool: pd.DataFrame, budget: int, config: SelectionConfig,
                       project=None) -> pd.DataFrame:
    slices = taken_slices(report, config.beta)
    chance, owner = failure_chance(report, slices, pool, pool_masks(report, slices, pool), project)
    try:
        features, labelled = (pool_outputs.features(project, report.model, ids, config.features)
                              for ids in (pool.index, _labelled_train(report)))
    except pool_outputs.PoolOutputsError:
        features = labelled = None  # no stored features: by expected failures alone
    chosen = spread_out(chance, features, budget, labelled)
    reasons = [f"expected failures: chance {chance[i]:.2f} of failing" for i in chosen]
    return frame(pool, chosen, [slices.iloc[owner[i]] if owner[i] >= 0 else None for i in chosen], reasons, budget,
                 poor=report.poor)
