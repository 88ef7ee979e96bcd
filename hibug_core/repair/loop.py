"""The whole repair loop: error slices -> new data (selected pool images or generated ones) -> retrained models ->
per-slice change on a held-out split, for the chosen method, a baseline and a no-new-data control, over seeds."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from hibug_core.errors import HibugError, check_fields
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.repair.compare import slice_changes
from hibug_core.models.finetune import DecodedImages
from hibug_core.repair.retrain import RetrainConfig, retrain
from hibug_core.repair.runs import finish_run, start_run
from hibug_core.repair.selection import SELECTION_METHODS, SelectionConfig, resolve_budget, select_pool
from hibug_core.slices.report import error_slices
from hibug_core.slices.search import SliceConfig, TagMatrix, slice_id

logger = logging.getLogger(__name__)

GENERATED = "generated"
CONTROL = "no new data"
DATA_SOURCES = ("selection", GENERATED)  # where a repair's new training data come from


class RepairError(HibugError):
    """A repair that cannot run as asked."""


@dataclass(frozen=True)
class RepairConfig:
    model: str | None = None  # default: the project's first model
    data: str = "selection"  # "selection": label pool images chosen by `selection`; "generated": the generated split
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
    labels: str | None = None  # a detector's selected pool images: their COCO annotations (default: the project's)

    def __post_init__(self):
        check_fields(self, {
            "data": (self.data in DATA_SOURCES, f"one of {', '.join(DATA_SOURCES)}"),
            "seeds": (len(self.seeds) > 0, "at least one seed"),
            "top_slices": (self.top_slices >= 1, "at least 1"),
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


def _new_data(project, report, config: RepairConfig, method: str, seed: int, n_images: int | None):
    if method == CONTROL:
        return np.zeros(0, np.int64), None
    if method == GENERATED:
        samples = report.samples
        ids = samples.index[samples["split"] == GENERATED].to_numpy()
        if not len(ids):
            raise RepairError("the project has no generated images yet; generate some first (Repair page or "
                              "`hibug generate`)")
        return ids, None
    budget = n_images if n_images is not None else config.selection.budget
    selection = select_pool(report, replace(config.selection, method=method, budget=budget, seed=seed),
                            project=project)
    return selection.index.to_numpy(), selection


def run_repair(project, config: RepairConfig | None = None, *, author: str | None = None,
               progress: ProgressCallback = no_progress) -> RepairResult:
    """Run the loop for every seed and return (and store) the comparison. The progress callback may cancel between
    retrained models (by raising); the run then stays unfinished and nothing is recorded as its result."""
    # 1. Check inputs: the configuration is checked when built; here, a labelled held-out split to compare on.
    config = config or RepairConfig()
    if project.task != "classification":
        from hibug_core.objects.repair import run_object_repair

        return run_object_repair(project, config, author=author, progress=progress)
    progress("finding error slices", 0, 1)
    report = error_slices(project, config.model, split=config.slice_split, config=config.slices)
    model = report.model
    held_tags, held = report.split_matrix(config.eval_split, labelled=True)
    if held.empty:
        raise RepairError(f"no labelled '{config.eval_split}' images to compare before and after on; import a "
                          "held-out split or choose another")
    # 2. The slices compared: the top reported ones and the planted ones (demo and benchmark problems).
    planted = planted_definitions(project)
    found = [d for d in report.slices["definition"].head(config.top_slices) if slice_id(d) not in
             {slice_id(p) for p in planted}]
    # Planted slices are measured with the true tags (imported), the found ones with the tags they were found with.
    true_tags = TagMatrix.from_frame(project.known_tags().reindex(held.index).astype("category")) if planted else None
    before = (held["prediction"] == held["label"]).to_numpy()
    main = GENERATED if config.data == GENERATED else config.selection.method
    methods = [main] + ([config.baseline] if config.baseline else []) + ([CONTROL] if config.control else [])
    n_train = int(((report.samples["split"] == "train") & report.samples["label"].notna()).sum())
    # 3. Every seed, every method: new data, retrain, record the model, compare slice by slice.
    run_id = start_run(project, "retrain", {"config": asdict(config)}, author=author)
    images = DecodedImages()
    rows, changes, selections = [], [], {}
    steps = len(methods) * len(config.seeds)
    for seed in config.seeds:
        n_new = None
        for method in methods:
            ids, selection = _new_data(project, report, config, method, seed, n_new)
            if method == main:
                n_new = len(ids) if config.data == GENERATED else resolve_budget(config.selection.budget, n_train)
            if selection is not None:
                selections[(method, seed)] = selection
            retrained = replace(config.retrain, seed=seed,
                                fine_tune=replace(config.retrain.fine_tune, seed=seed))
            made: dict = {}
            sample_ids, probabilities, classes = retrain(project, model, ids, retrained, images=images, outputs=made)
            name = f"{model} · repair {run_id} {method} s{seed}"
            if config.record_models:
                project.add_predictions(name, sample_ids, probabilities, classes, author=author,
                                        note={"repair_run": run_id, "method": method, "seed": seed, **made})
            predicted = pd.Series(np.asarray(classes, dtype=object)[probabilities.argmax(axis=1)], index=sample_ids)
            after = (predicted.reindex(held.index) == held["label"]).to_numpy()
            table = slice_changes(held_tags, before, after, found)
            if planted:
                table = pd.concat([table, slice_changes(true_tags, before, after, planted).iloc[1:]],
                                  ignore_index=True)
            table.insert(0, "seed", seed)
            table.insert(0, "method", method)
            changes.append(table)
            rows.append({"method": method, "seed": seed, "model": name, "new_images": len(ids),
                         "before": float(before.mean()), "after": float(after.mean()),
                         "checkpoint": made.get("checkpoint")})
            progress("retraining and comparing", len(rows), steps)
            logger.info("repair %s seed %d: %d new images, %.3f -> %.3f", method, seed, len(ids), before.mean(),
                        after.mean())
    # 4. Summarise over seeds and store the run's result.
    changes = pd.concat(changes, ignore_index=True)
    changes["planted"] = changes["slice_id"].isin({slice_id(d) for d in planted})
    result = RepairResult(run_id, pd.DataFrame(rows), changes, summarise(changes), selections)
    finish_run(project, run_id, {
        "model": model, "runs": result.runs.to_dict("records"), "summary": result.summary.to_dict("records"),
        "changes": changes.to_dict("records")}, author=author)
    return result


def method_difference(changes: pd.DataFrame, method: str, baseline: str) -> pd.DataFrame:
    """Per comparison ("overall held-out" and "error slices", the mean over the compared slices), the paired
    difference in accuracy after of `method` minus `baseline` across seeds: mean, 95% t-interval, seeds won."""
    from scipy import stats

    def per_seed(name: str) -> pd.DataFrame:
        rows = changes[changes["method"] == name]
        overall = rows[rows["slice_id"] == "overall"].set_index("seed")["after"]
        slices = rows[(rows["slice_id"] != "overall") & (rows["n"] > 0)].groupby("seed")["after"].mean()
        return pd.DataFrame({"overall held-out": overall, "error slices": slices})

    difference = per_seed(method) - per_seed(baseline)
    out = []
    for comparison in difference.columns:
        values = difference[comparison].dropna().to_numpy()
        n, mean = len(values), float(values.mean()) if len(values) else np.nan
        if n > 1 and values.std(ddof=1) > 0:
            half = float(stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n))
        else:
            half = np.nan if n < 2 else 0.0
        out.append({"comparison": comparison, "seeds": n, "difference": mean, "low": mean - half,
                    "high": mean + half, "won": int((values > 0).sum())})
    return pd.DataFrame(out)


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
    for row in table.itertuples():
        if np.isnan(row.difference):
            continue
        call = (f"{main} beat {baseline}" if row.low > 0 else f"{baseline} beat {main}" if row.high < 0
                else f"no clear winner between {main} and {baseline}")
        text.append(f"On the {row.comparison}: {call} ({row.difference * 100:+.1f} points, 95% interval "
                    f"{row.low * 100:+.1f} to {row.high * 100:+.1f}, better on {row.won} of {row.seeds} seeds).")
    return " ".join(text)


def summarise(changes: pd.DataFrame) -> pd.DataFrame:
    """Mean and spread (standard deviation over seeds) of accuracy after and of the change, per method and slice."""
    grouped = changes.groupby(["slice_id", "method"], sort=False)
    summary = grouped.agg(slice=("slice", "first"), planted=("planted", "first"), n=("n", "first"),
                          before=("before", "first"), after=("after", "mean"), after_sd=("after", "std"),
                          change=("change", "mean"), change_sd=("change", "std"), seeds=("seed", "nunique"),
                          worse=("verdict", lambda v: int((v == "worse").sum())))
    return summary.reset_index()
