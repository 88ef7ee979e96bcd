"""Every slice finder on one problem: the same tags and the same errors handed to each (hibug_core.bench.peers), each
answer scored one way (hibug_core.bench.ranking); and the problem's bug-free twin, its errors shuffled across the
samples so that they depend on no attribute, on which every slice a method reports is a false finding."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from hibug_core.bench.peers import SLICE_FINDERS, SliceTask
from hibug_core.bench.ranking import PlantedBug, same_name, score_answer
from hibug_core.errors import HibugError

logger = logging.getLogger(__name__)


def task_of_report(report, embeddings: np.ndarray | None = None) -> SliceTask:
    """The tags and errors hibug's report searched (its evaluated samples, its tags, the class where it slices by
    class), with the embeddings where given (aligned with report.evaluation)."""
    tags = report.tags
    frame = pd.DataFrame({attribute: [names[c] if c >= 0 else None for c in tags.codes[:, k]]
                          for k, (attribute, names) in enumerate(zip(tags.attributes, tags.tags))})
    config = report.config
    return SliceTask(frame, report.evaluation["error"].to_numpy(float), embeddings,
                     min_support=config.min_support, max_depth=config.max_depth, report=report)


def embeddings_of(project, report, encoder: str) -> np.ndarray:
    """The encoder's embedding of each sample the report evaluated, in its order (objects seen as their crops; only
    contents not embedded yet are encoded)."""
    from hibug_core.embeddings.compute import embed_project

    embedded = embed_project(project, encoder, sample_ids=report.evaluation.index)
    position = pd.Series(np.arange(len(embedded.sample_ids)), index=embedded.sample_ids)
    return embedded.embedding[position.reindex(report.evaluation.index).to_numpy()]


def null_twin(task: SliceTask, seed: int) -> SliceTask:
    """The same tags with the errors shuffled across the samples (the same rate, independent of every attribute)."""
    shuffled = np.random.default_rng(seed).permutation(task.errors)
    return replace(task, errors=shuffled, report=None)


def contest(task: SliceTask, planted: list[PlantedBug], *, finders=None, same: Callable = same_name,
            seed: int = 0, labels: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each finder (default: every one registered) on the problem and on its bug-free twin: one row per (finder,
    planted bug) and one per (finder, problem), both carrying `labels` (the problem, the tags, ...)."""
    labels = labels or {}
    bugs, problems = [], []
    for name in finders or SLICE_FINDERS.names():
        finder = SLICE_FINDERS.get(name).build()
        for twin, (mine, bugs_planted) in enumerate(((task, planted), (null_twin(task, seed), []))):
            start = time.perf_counter()
            try:
                found = finder.find(mine)
            except HibugError as error:  # a peer that cannot run here (not installed, no embeddings) is said once
                logger.warning("%s: %s", name, error)
                break
            except Exception as error:  # noqa: BLE001 (a peer's own failure is its result, not the benchmark's)
                logger.warning("%s failed: %s: %s", name, type(error).__name__, error)
                found = None
            if found is None:
                problems.append({**labels, "method": name, "package": finder.package, "bug_free": bool(twin),
                                 "planted": len(bugs_planted), "failed": True})
                continue
            scored, summary = score_answer(found, bugs_planted, same=same)
            seconds = round(time.perf_counter() - start, 3)
            problems.append({**labels, "method": name, "package": finder.package, "bug_free": bool(twin),
                             "planted": len(bugs_planted), "failed": False, "seconds": seconds, **summary})
            bugs += [{**labels, "method": name, **row} for row in scored]
    return pd.DataFrame(bugs), pd.DataFrame(problems)


def gathered(contests: list[tuple[pd.DataFrame, pd.DataFrame]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The (bugs, problems) rows of many contests, each as one table."""
    if not contests:
        return pd.DataFrame(), pd.DataFrame()
    return (pd.concat([bugs for bugs, _ in contests], ignore_index=True),
            pd.concat([problems for _, problems in contests], ignore_index=True))


def finders_table(contests: list[tuple[pd.DataFrame, pd.DataFrame]], keys=("tags", "method")) -> pd.DataFrame:
    """The benchmark's table of every slice finder (hibug_core.bench.ranking.summary_table, in words)."""
    from hibug_core.bench.ranking import formatted, summary_table

    bugs, problems = gathered(contests)
    return formatted(summary_table(bugs, problems, list(keys))) if len(problems) else pd.DataFrame()
