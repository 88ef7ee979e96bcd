"""The whole repair loop: error slices -> new data (selected pool images or generated ones) -> retrained models ->
per-slice change on a held-out split, for the chosen method, a baseline and a no-new-data control, over seeds."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from hibug_core.bounds import Bound, check_bounds
from hibug_core.errors import HibugError
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry
from hibug_core.repair.compare import slice_changes
from hibug_core.repair.names import repaired_name
from hibug_core.repair.retrain import RetrainConfig
from hibug_core.repair.runs import finish_run, start_run
from hibug_core.repair.selection import SELECTION_METHODS, SelectionConfig, resolve_budget
from hibug_core.slices.report import error_slices, one_row_per_bug
from hibug_core.slices.search import SliceConfig, TagMatrix, slice_id

logger = logging.getLogger(__name__)

GENERATED = "generated"
CONTROL = "no new data"
SELECTION = "selection"
# Where a repair's new training data come from; needs: what the project's task must be able to do for it.
DATA_SOURCES = Registry("data source")
DATA_SOURCES.add(SELECTION, "pool images chosen by the selection method, labelled")
DATA_SOURCES.add(GENERATED, "the generated split (Repair page or `hibug generate`)", needs=("generate",))


class RepairError(HibugError):
    """A repair that cannot run as asked."""


@dataclass(frozen=True)
class RepairConfig:
    model: str | None = None  # default: the project's first model
    data: str = SELECTION  # "selection": label pool images chosen by `selection`; "generated": the generated split
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    baseline: str | None = "random"  # a selection method run the same way with the same number of images
    control: bool = True  # also retrain with no new data, so more training alone is not taken for a repair
    retrain: RetrainConfig = field(default_factory=RetrainConfig)
    seeds: tuple[int, ...] = (0, 1, 2)  # one seed is noise: retraining alone moves accuracy by about a point
    slice_split: str = "val"  # where the error slices are found
    eval_split: str = "test"  # held out: where before and after are compared
    slices: SliceConfig = field(default_factory=SliceConfig)
    top_slices: int = 10  # reported slices compared, besides the planted ones
    record_models: bool = True  # store each retrained model's predictions in the project
    labels: str | None = None  # an object model's selected pool images: their COCO annotations (default: the project's)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "top_slices": Bound("error slices compared (planted ones are added)", ge=1, integer=True)}

    def __post_init__(self):
        check_bounds(self, self.BOUNDS, {
            "data": (self.data in DATA_SOURCES, f"one of {', '.join(DATA_SOURCES.names())}"),
            "seeds": (len(self.seeds) > 0, "at least one seed"),
            "baseline": (self.baseline is None or self.baseline in SELECTION_METHODS.names(hidden=True),
                         f"None or one of {', '.join(SELECTION_METHODS.names())}")})


@dataclass
class RepairResult:
    run_id: int
    runs: pd.DataFrame  # one row per (method, seed): model name, new images, overall before / after
    changes: pd.DataFrame  # one row per (method, seed, slice): slice_changes columns
    summary: pd.DataFrame  # per (method, slice): mean and spread over seeds
    selections: dict[tuple[str, int], pd.DataFrame]

    measure: str = "accuracy"  # what before and after are: "accuracy", or "objects found" for a detector

    def verdict(self) -> str:
        return repair_verdict(self.changes, self.measure)


def planted_definitions(project) -> list[tuple[tuple[str, str], ...]]:
    """Slices where bugs were planted (the demo's meta), so their repair can be measured."""
    demo = project.meta().get("demo")
    if not demo:
        return []
    return [tuple(bug["slice"].items()) for bug in json.loads(demo).get("planted_bugs", [])]


@dataclass
class RoundResult:
    """One retrained model's outcome: each held-out sample's outcome after, and what the run's table adds."""

    after: np.ndarray  # bool per held-out sample, in the round's order
    new_samples: int  # how many new training samples (images) it learnt from
    extra: dict = field(default_factory=dict)  # more columns of the run's row (checkpoint, AP before and after)


class RepairRound:
    """A task's half of a repair run (a Task's repair_round builds it, checking what it needs first): the held-out
    samples with their tags and outcome before, then per method and seed the new data and the retrained model's
    outcome after. The loop below does the rest, the same for every task."""

    measure: str  # what before and after are ("accuracy", "objects found")
    samples: str  # what the held-out samples are ("images", "objects", "people")
    held_tags: TagMatrix  # the held-out samples' tags, for the reported slices
    planted_tags: TagMatrix  # the same samples' tags for the planted slices (the true tags where known)
    before: np.ndarray  # bool per held-out sample: its outcome before the repair
    training_count: int  # what a budget's share is of (training images of the model)

    def new_data(self, method: str, seed: int, budget: int):
        """(what to train on, the selection table or None, how many samples) for a method ("no new data", "generated"
        or a selection method choosing `budget` pool images)."""
        raise NotImplementedError

    def retrain(self, method: str, seed: int, data, run_id: int) -> RoundResult:
        raise NotImplementedError


def run_repair(project, config: RepairConfig | None = None, *, task, author: str | None = None,
               progress: ProgressCallback = no_progress) -> RepairResult:
    """Run the loop for every seed and return (and store) the comparison; `task` is the project's Task
    (hibug_core.tasks.task_of), whose repair round supplies new data, retraining and the outcome measured. The progress
    callback may cancel between retrained models (by raising); the run then stays unfinished and nothing is recorded
    as its result."""
    # 1. Check inputs: the configuration is checked when built; the task must be able to use its data and its
    # retraining (the Repair operation refuses the same before it starts); the task's round checks the rest.
    config = config or RepairConfig()
    refused = task.refusal(DATA_SOURCES.get(config.data).needs) or \
        task.capabilities.retrain_refusal(config.retrain.method, task.nouns)
    if refused:
        raise RepairError(refused)
    progress("finding error slices", 0, 1)
    report = error_slices(project, config.model, split=config.slice_split, config=config.slices)
    repair_round = task.repair_round(project, report, config, progress=progress, author=author)
    # 2. The slices compared (the top reported ones and the planted ones), the methods, the budget once.
    planted = planted_definitions(project)
    # one slice per bug (a slice that repeats one above it would restate it in every chart and table)
    found = [d for d in one_row_per_bug(report.slices)["definition"].head(config.top_slices) if slice_id(d) not in
             {slice_id(p) for p in planted}]
    before = repair_round.before
    main = GENERATED if config.data == GENERATED else config.selection.method
    methods = [main] + ([config.baseline] if config.baseline else []) + ([CONTROL] if config.control else [])
    budget = resolve_budget(config.selection.budget, repair_round.training_count)
    # 3. Every seed, every method: new data, retrain, compare slice by slice.
    run_id = start_run(project, "retrain", {"config": asdict(config), "measure": repair_round.measure},
                       author=author)
    rows, changes, selections = [], [], {}
    steps = len(methods) * len(config.seeds)
    for seed in config.seeds:
        for method in methods:
            data, selection, n_new = repair_round.new_data(method, seed, budget)
            if method == GENERATED:
                budget = n_new  # the baseline gets as many new images as were generated
            if selection is not None:
                selections[(method, seed)] = selection
            outcome = repair_round.retrain(method, seed, data, run_id)
            after = outcome.after
            overall = f"all held-out {repair_round.samples}"
            table = slice_changes(repair_round.held_tags, before, after, found, overall=overall, poor=report.poor)
            if planted:
                table = pd.concat([table, slice_changes(repair_round.planted_tags, before, after, planted,
                                                        overall=overall).iloc[1:]], ignore_index=True)
            table.insert(0, "seed", seed)
            table.insert(0, "method", method)
            changes.append(table)
            rows.append({"method": method, "seed": seed, "model": repaired_name(report.model, run_id, method, seed),
                         "new_images": outcome.new_samples, "before": float(before.mean()),
                         "after": float(after.mean()), **outcome.extra})
            progress("retraining and comparing", len(rows), steps)
            logger.info("repair %s seed %d: %d new images, %s %.3f -> %.3f", method, seed, outcome.new_samples,
                        repair_round.measure, before.mean(), after.mean())
    # 4. Summarise over seeds and store the run's result.
    changes = pd.concat(changes, ignore_index=True)
    changes["planted"] = changes["slice_id"].isin({slice_id(d) for d in planted})
    result = RepairResult(run_id, pd.DataFrame(rows), changes, summarise(changes), selections, repair_round.measure)
    finish_run(project, run_id, {
        "model": report.model, "measure": repair_round.measure, "runs": result.runs.to_dict("records"),
        "summary": result.summary.to_dict("records"), "changes": changes.to_dict("records")}, author=author)
    return result


def method_difference(changes: pd.DataFrame, method: str, baseline: str) -> pd.DataFrame:
    """Per comparison ("overall held-out" and "error slices", the mean over the compared slices), the paired
    difference in accuracy after of `method` minus `baseline` across seeds: mean, 95% t-interval, seeds won."""

    def per_seed(name: str) -> pd.DataFrame:
        rows = changes[changes["method"] == name]
        overall = rows[rows["slice_id"] == "overall"].set_index("seed")["after"]
        slices = rows[(rows["slice_id"] != "overall") & (rows["n"] > 0)].groupby("seed")["after"].mean()
        return pd.DataFrame({"overall held-out": overall, "error slices": slices})

    difference = per_seed(method) - per_seed(baseline)
    return pd.DataFrame([{"comparison": comparison, **paired_interval(difference[comparison].dropna().to_numpy())}
                         for comparison in difference.columns])


def paired_interval(values: np.ndarray) -> dict:
    """Paired differences over seeds (one per seed): their count, mean, 95% t-interval and how many are above 0."""
    from scipy import stats

    n, mean = len(values), float(values.mean()) if len(values) else np.nan
    if n > 1 and values.std(ddof=1) > 0:
        half = float(stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n))
    else:
        half = np.nan if n < 2 else 0.0
    return {"seeds": n, "difference": mean, "low": mean - half, "high": mean + half, "won": int((values > 0).sum())}


def repair_won(changes: pd.DataFrame) -> bool:
    """Whether the repair method beat its first baseline significantly on some comparison, over two or more seeds
    (what repair_verdict says in words)."""
    methods = list(dict.fromkeys(changes["method"]))
    baselines = [m for m in methods[1:] if m != CONTROL]
    if not baselines:
        return False
    table = method_difference(changes, methods[0], baselines[0])
    return int(table["seeds"].max()) >= 2 and bool((table["low"] > 0).any())


def repair_verdict(changes: pd.DataFrame, measure: str = "accuracy") -> str:
    """Whether the repair method beat its baseline, in one plain paragraph (one seed: says that is noise). `measure`
    names what the rows' before and after are ("accuracy"; for a detector, "objects found")."""
    methods = list(dict.fromkeys(changes["method"]))
    main = methods[0]
    baselines = [m for m in methods[1:] if m != CONTROL]
    overall = changes[(changes["slice_id"] == "overall")].groupby("method", sort=False)["after"]
    before = float(changes.loc[changes["slice_id"] == "overall", "before"].iloc[0])
    text = [f"Held-out {measure} {before:.1%} before; after, {main} {overall.mean()[main]:.1%}"]
    if not baselines:
        return text[0] + " (no baseline to compare with)."
    baseline = baselines[0]
    text[0] += f", {baseline} {overall.mean()[baseline]:.1%}"
    if CONTROL in methods:
        text[0] += f", no new data {overall.mean()[CONTROL]:.1%}"
    text[0] += "."
    table = method_difference(changes, main, baseline)
    seeds = int(table["seeds"].max())
    if seeds < 2:
        row = table.iloc[0]
        return " ".join(text + [f"With one seed the difference ({row['difference'] * 100:+.1f} points) is noise: "
                                "run 3 or more seeds to tell whether {main} beats {baseline}.".replace(
                                    "{main}", main).replace("{baseline}", baseline)])
    calls = []
    for row in table.itertuples():
        if np.isnan(row.difference):
            continue
        calls.append("won" if row.low > 0 else "lost" if row.high < 0 else "unclear")
        call = {"won": f"{main} beat {baseline}", "lost": f"{baseline} beat {main}",
                "unclear": f"no clear winner between {main} and {baseline}"}[calls[-1]]
        text.append(f"On the {row.comparison}: {call} ({row.difference * 100:+.1f} points, 95% interval "
                    f"{row.low * 100:+.1f} to {row.high * 100:+.1f}, better on {row.won} of {row.seeds} seeds).")
    if "lost" in calls:
        text.append(f"Next: try another selection method than {main}, a larger budget, or generated images for the "
                    "worst slices.")
    elif "unclear" in calls:
        text.append(f"Next: to tell them apart, run more seeds (this run had {seeds}) or give a larger budget.")
    return " ".join(text)


def summarise(changes: pd.DataFrame) -> pd.DataFrame:
    """Mean and spread (standard deviation over seeds) of accuracy after and of the change, per method and slice."""
    grouped = changes.groupby(["slice_id", "method"], sort=False)
    summary = grouped.agg(slice=("slice", "first"), planted=("planted", "first"), n=("n", "first"),
                          before=("before", "first"), after=("after", "mean"), after_sd=("after", "std"),
                          change=("change", "mean"), change_sd=("change", "std"), seeds=("seed", "nunique"),
                          worse=("verdict", lambda v: int((v == "worse").sum())))
    return summary.reset_index()
