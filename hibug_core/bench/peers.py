"""The slice finders an engineer could use instead of hibug, each run as its own library on the same tags and the same
errors, beside hibug's search and HiBug's rule: every one answers with slices (conjunctions of attribute = tag),
best first, so that one scoring (hibug_core.bench.ranking) judges them all."""
from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import metadata

import numpy as np
import pandas as pd

from hibug_core.bench.scoring import hibug_search
from hibug_core.errors import HibugError
from hibug_core.registry import Registry
from hibug_core.slices.redundancy import mark_repeats
from hibug_core.slices.search import SliceConfig, TagMatrix, find_error_slices


@dataclass(frozen=True)
class SliceTask:
    """What every method is given: per evaluated sample its tags (one column per attribute, text; None: untagged), its
    error (1 - its score: 0 or 1 for a classifier, graded for objects and people) and, for the methods that cluster,
    the encoder's embedding; the smallest slice worth reporting and the most conditions in one."""

    tags: pd.DataFrame
    errors: np.ndarray
    embeddings: np.ndarray | None = None
    min_support: int = 10
    max_depth: int = 3
    report: object = None  # hibug's own report on the problem's project (SliceReport), where the problem has one

    def __post_init__(self):
        if len(self.tags) != len(self.errors):
            raise HibugError(f"{len(self.tags)} tagged samples but {len(self.errors)} errors: give one error each")
        if self.embeddings is not None and len(self.embeddings) != len(self.errors):
            raise HibugError(f"{len(self.embeddings)} embeddings but {len(self.errors)} errors: give one each")


@dataclass(frozen=True)
class Found:
    """A method's answer: slices best first (each a tuple of (attribute, tag) pairs), how many of them it reports as
    findings by its own rule (the rest it only ranks), and the bug type of each where the method names one."""

    definitions: list[tuple[tuple[str, str], ...]]
    reported: int
    bug_types: list[str | None] | None = None


@dataclass(frozen=True)
class SliceFinder:
    name: str
    package: str  # the package it runs, with its version ("sliceline 0.3.0"), or hibug's own
    find: Callable[[SliceTask], Found]


def package_version(package: str) -> str:
    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"{package} (not installed: pip install -e '.[bench]')"


def need(package: str):
    """The peer's package, or a refusal that says how to install it (the peers are the `bench` extra)."""
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError as error:
        raise HibugError(f"the peer '{package}' is not installed: pip install -e '.[bench]'") from error


def _pairs(row: pd.Series) -> tuple[tuple[str, str], ...]:
    return tuple((str(attribute), str(tag)) for attribute, tag in row.items() if tag is not None and tag == tag)


def _matrix(task: SliceTask) -> TagMatrix:
    return TagMatrix.from_frame(task.tags.reset_index(drop=True))


# ----- hibug ------------------------------------------------------------------------------------------------------
def _hibug(config: SliceConfig) -> Callable[[SliceTask], Found]:
    def find(task: SliceTask) -> Found:
        if task.report is not None and config == SliceConfig():  # the whole report, types and folding, as a user sees
            slices = task.report.slices
            return Found(list(slices["definition"]), len(slices), slices["bug_type"].tolist())
        settings = replace(config, min_support=task.min_support, max_depth=task.max_depth)
        tags = _matrix(task)
        slices = find_error_slices(tags, task.errors, settings)
        slices = mark_repeats(slices, tags, task.errors, settings.max_overlap)
        return Found(list(slices["definition"]), len(slices))
    return find




# ----- single-attribute scan (FiftyOne's scenario analysis) ---------------------------------------------------------
def _single_attribute(task: SliceTask) -> Found:
    """Every value of every attribute on its own, ranked by how much worse it does than the whole (the per-scenario
    table a scenario analysis shows); none reported by a rule of its own, so all of them count as its answer."""
    rows = []
    overall = float(np.mean(task.errors))
    for attribute in task.tags.columns:
        values = task.tags[attribute]
        for tag, positions in values.groupby(values, sort=True).indices.items():
            if len(positions) >= task.min_support:
                rows.append((((str(attribute), str(tag)),), float(np.mean(task.errors[positions])) - overall,
                             len(positions)))
    rows.sort(key=lambda r: (-r[1], -r[2]))
    worse = [definition for definition, gap, _ in rows if gap > 0]
    return Found(worse, len(worse))


# ----- SliceLine ----------------------------------------------------------------------------------------------------
def _sliceline(k: int = 25, alpha: float = 0.95) -> Callable[[SliceTask], Found]:
    def find(task: SliceTask) -> Found:
        sliceline = need("sliceline")
        frame = task.tags.astype(object).where(task.tags.notna(), "(untagged)").astype(str)
        finder = sliceline.Slicefinder(alpha=alpha, k=k, max_l=task.max_depth, min_sup=task.min_support,
                                       verbose=False)
        try:
            finder.fit(frame, np.asarray(task.errors, float))
        except (ValueError, RuntimeError):  # no slice better than the whole: nothing found
            return Found([], 0)
        found = pd.DataFrame(np.asarray(finder.top_slices_, dtype=object), columns=frame.columns)
        definitions = [tuple(p for p in _pairs(row) if p[1] != "(untagged)") for _, row in found.iterrows()]
        definitions = [d for d in definitions if d]
        return Found(definitions, len(definitions))
    return find


# ----- DivExplorer --------------------------------------------------------------------------------------------------
def _divexplorer(t_value: float = 2.0) -> Callable[[SliceTask], Found]:
    """Frequent patterns (support at least min_support samples, at most max_depth items) ranked by their divergence in
    error from the whole; reported: those whose t value (Welch's, as the library computes it) is at least `t_value`,
    the threshold the DivExplorer paper uses for a significant divergence."""
    def find(task: SliceTask) -> Found:
        divexplorer = need("divexplorer")
        frame = task.tags.astype(object).where(task.tags.notna(), None)
        frame = frame.assign(error=np.asarray(task.errors, float))
        binary = np.isin(frame["error"], (0.0, 1.0)).all()
        explorer = divexplorer.DivergenceExplorer(frame)
        outcome = {"boolean_outcomes": ["error"]} if binary else {"quantitative_outcomes": ["error"]}
        with _longest_pattern(divexplorer, task.max_depth):
            patterns = explorer.get_pattern_divergence(min_support=task.min_support / len(frame), **outcome)
        patterns = patterns[patterns["itemset"].map(len).between(1, task.max_depth)]
        patterns = patterns[patterns["error_div"] > 0].sort_values(["error_div", "support"], ascending=False,
                                                                  kind="stable")
        definitions = [tuple(sorted(tuple(item.split("=", 1)) for item in itemset)) for itemset in patterns["itemset"]]
        significant = patterns["error_t"].to_numpy() >= t_value
        order = np.concatenate([np.flatnonzero(significant), np.flatnonzero(~significant)])
        return Found([definitions[i] for i in order], int(significant.sum()))
    return find


@contextlib.contextmanager
def _longest_pattern(divexplorer, depth: int):
    """DivExplorer mines patterns of every length (its FP-growth takes max_len; its API does not pass it on): with
    twenty attributes that is combinatorial. Every finder gets the same depth, so its miner is given it too."""
    module = divexplorer.divexplorer
    mine = module.fpgrowth_cm
    module.fpgrowth_cm = functools.partial(mine, max_len=depth)
    try:
        yield
    finally:
        module.fpgrowth_cm = mine


# ----- cleanlab's underperforming group -----------------------------------------------------------------------------
def _cleanlab(task: SliceTask) -> Found:
    """Datalab's underperforming_group on the embeddings (its own clustering: DBSCAN over a k-nearest-neighbour graph),
    each sample's label quality its score (1 - its error; a two-class problem whose given label is right with that
    probability). Its clusters, worst first, are read by the tags that describe each best (the conjunction of at most
    max_depth tags whose samples overlap the cluster most, by Jaccard), as an engineer would read a cluster; reported:
    the one cluster Datalab flags."""
    cleanlab = need("cleanlab")
    if task.embeddings is None:
        raise HibugError("cleanlab's underperforming_group clusters the embeddings: embed the samples first")
    errors = np.clip(np.asarray(task.errors, float), 0.0, 1.0)
    lab = cleanlab.Datalab(data={"label": np.ones(len(errors), dtype=int)}, label_name="label", verbosity=0)
    lab.find_issues(features=np.asarray(task.embeddings, np.float32), pred_probs=np.column_stack([errors, 1 - errors]),
                    issue_types={"underperforming_group": {"min_cluster_samples": task.min_support}})
    stats = lab.get_info("underperforming_group")["clustering"]["stats"]
    clusters, worst = np.asarray(stats["cluster_ids"]), stats["underperforming_cluster_id"]
    issues = lab.get_issues("underperforming_group")
    scores = issues["underperforming_group_score"].to_numpy()
    ranked = sorted({int(c) for c in clusters if c >= 0 and scores[clusters == c][0] < 1},
                    key=lambda c: scores[clusters == c][0])
    definitions = [_described(task, clusters == c) for c in ranked]
    return Found(definitions, int(worst in ranked))


def _described(task: SliceTask, members: np.ndarray) -> tuple[tuple[str, str], ...]:
    """The conjunction of at most max_depth tags whose samples match `members` best (Jaccard)."""
    return described(task.tags, members, task.max_depth)[0][0]


def described(tags: pd.DataFrame, members: np.ndarray, max_depth: int, *, count: int = 1,
              min_support: int = 1) -> list[tuple[tuple[tuple[str, str], ...], float]]:
    """The `count` conjunctions of at most `max_depth` tags (each of at least `min_support` samples) whose samples
    match `members` best, by Jaccard, best first, each with its Jaccard: how an engineer reads a set of flagged or
    clustered samples by their tags."""
    columns = {(a, t): (tags[a] == t).to_numpy() for a in tags.columns for t in tags[a].dropna().unique()}
    singles = sorted(columns, key=lambda key: -_jaccard(columns[key], members))[:12]  # the conjunctions worth trying
    scored = [((), -1.0)]
    for depth in range(1, max_depth + 1):
        for combination in itertools.combinations(singles, depth):
            if len({a for a, _ in combination}) < depth:
                continue
            mask = np.logical_and.reduce([columns[key] for key in combination])
            if mask.sum() >= min_support:
                scored.append((tuple(sorted(combination)), _jaccard(mask, members)))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:count] if len(scored) > 1 else scored


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


SLICE_FINDERS = Registry("slice finder")  # the methods the benchmark compares, in the tables' order
SLICE_FINDERS.add("hibug", "hibug's search as a user gets it (HiBug2's enumeration, significance, parents, folding)",
                  lambda: SliceFinder("hibug", "hibug", _hibug(SliceConfig())))
SLICE_FINDERS.add("hibug-rule", "HiBug's own rule: every slice below the whole by C, ranked by the gap, no test",
                  lambda: SliceFinder("hibug-rule", "hibug", _hibug(hibug_search(SliceConfig()))))
SLICE_FINDERS.add("single-attribute", "one attribute at a time, as FiftyOne's scenario analysis shows it",
                  lambda: SliceFinder("single-attribute", "hibug (a per-value table)", _single_attribute))
SLICE_FINDERS.add("sliceline", "SliceLine (Sagadeeva and Boehm), its package: the top 25 by its score, alpha 0.95",
                  lambda: SliceFinder("sliceline", package_version("sliceline"), _sliceline()))
SLICE_FINDERS.add("divexplorer", "DivExplorer (Pastor et al.), its package: frequent patterns by error divergence",
                  lambda: SliceFinder("divexplorer", package_version("divexplorer"), _divexplorer()))
SLICE_FINDERS.add("cleanlab", "cleanlab's Datalab underperforming_group: clusters of the embeddings, read by tags",
                  lambda: SliceFinder("cleanlab", package_version("cleanlab"), _cleanlab))
