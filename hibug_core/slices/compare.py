"""Two or more models on the samples they share: every slice's score per model, the change against the baseline (the
first model) with a paired test (exact McNemar for right/wrong scores, a paired t-test for IoU/OKS scores) and
Benjamini-Hochberg q-values over the slices compared; the same per class and overall; the samples where two models
disagree; and between every pair the overlap of their worst slices and of their failures."""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import ClassVar

import numpy as np
import pandas as pd

from hibug_core.bounds import Bound, check_bounds
from hibug_core.cache import new_identity
from hibug_core.progress import no_progress
from hibug_core.rows import rows_by_id
from hibug_core.slices.bitsets import masked_counts
from hibug_core.slices.redundancy import mark_repeats
from hibug_core.slices.report import (
    SLICE_PARTS,
    SliceError,
    enumerated_slices,
    enumeration_for,
    poor_attributes,
    slice_definition,
    tag_frame,
    tag_source,
)
from hibug_core.slices.search import SliceConfig, TagMatrix, codes_among, count_error_slices
from hibug_core.stats import benjamini_hochberg, mcnemar_p_values, paired_t_p_values

REGRESSION, IMPROVEMENT, UNCHANGED = "regression", "improvement", "no significant change"
MCNEMAR, PAIRED_T = "exact McNemar", "paired t-test"
STEPS = 4  # compare_models' steps after its checks, as its progress counts them


@dataclass(frozen=True)
class CompareConfig:
    """How changes between models are called and gated."""

    alpha: float = 0.05  # false discovery rate (Benjamini-Hochberg) at which a change is called significant
    max_drop: float = 0.02  # the gate fails on a significant drop larger than this (a share of the score)
    min_count: int | None = None  # the gate checks slices with at least this many shared samples (None: the
    # slice settings' minimum support; smaller slices are not enumerated at all)
    worst_share: float = 0.1  # each model's worst slices whose overlap is measured
    # HiBug2's C for counting each model's error slices (its §5.3: slices scoring below the model's overall score by
    # C, after its post-processing, no significance test), so models of different capacity can be set side by side
    error_gap: float = 0.2
    right_from: float = 0.5  # a sample is right for a model when its score is at least this (a correct class; an
    # object found at IoU 0.5)
    z: float = 1.96  # width of the interval behind confident_change, the order of regressions and improvements
    grouped: int = 300  # regressions (and improvements) checked for repeats of one another, in order

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "alpha": Bound("false discovery rate at which a change is significant (Benjamini-Hochberg over the slices)",
                       gt=0, lt=1),
        "max_drop": Bound("a drop of the score (a share: 0.02 is 2 points) that is tolerated", ge=0, le=1),
        "min_count": Bound("check slices of at least this many shared samples (None: the minimum slice size)", ge=1,
                           optional=True, integer=True),
        "worst_share": Bound("each model's worst slices whose overlap is measured", gt=0, le=1),
        "error_gap": Bound("HiBug2's C for counting each model's error slices", ge=0, le=1),
        "right_from": Bound("a sample is right for a model when its score is at least this", gt=0, le=1),
        "z": Bound("width of the interval behind confident_change", gt=0),
        "grouped": Bound("regressions (and improvements) checked for repeats of one another", ge=0, integer=True)}

    def __post_init__(self):
        check_bounds(self, self.BOUNDS)


# The slices models are compared on, by default: two conditions at most and 30 shared samples at least. A paired test
# on a slice of 10 has no power to call a change of a few points, and depth 3 multiplies the slices the q-values are
# corrected over; the search for one model's error slices (SliceConfig) goes deeper and smaller.
COMPARED_SLICES = SliceConfig(max_depth=2, min_support=30)


class SharedRows:
    """The samples a comparison shares and their tags: given, or made by `make` when first asked for, once (the tables
    of a kept comparison answer without them; at ten million objects they take ten seconds to read)."""

    def __init__(self, make: Callable[[], tuple[pd.DataFrame, TagMatrix]] | None = None, *,
                 evaluation: pd.DataFrame | None = None, tags: TagMatrix | None = None):
        if make is None and (evaluation is None or tags is None):
            raise ValueError("SharedRows needs the rows and their tags, or how to make them")
        self._make, self._made = make, None if make is not None else (evaluation, tags)
        self._lock = threading.Lock()  # pages of several visitors may ask at once: made by the first

    def get(self) -> tuple[pd.DataFrame, TagMatrix]:
        with self._lock:
            if self._made is None:
                self._made, self._make = self._make(), None
            return self._made


@dataclass
class ModelComparison:
    models: list[str]  # the baseline first, then the candidates
    split: str
    test: str  # MCNEMAR when every score is right or wrong, else PAIRED_T
    overall: pd.DataFrame  # per model: n, score, error_slices (HiBug2's count at config.error_gap), and against the
    # baseline: difference, p_value, change
    slices: pd.DataFrame  # per candidate and slice: the change against the baseline, regressions first
    classes: pd.DataFrame  # per candidate and class, the same columns
    worst_overlap: pd.DataFrame  # per model pair: their worst slices and how many they share (Jaccard)
    failure_iou: pd.DataFrame  # per model pair: the samples each gets wrong, and their intersection over union
    rows: SharedRows  # the shared samples and their tags (a kept comparison's are read when first asked for)
    config: CompareConfig = field(default_factory=CompareConfig)
    slice_config: SliceConfig = field(default_factory=SliceConfig)
    identity: str = field(default_factory=new_identity, repr=False, compare=False)  # what SLICE_PARTS keys it by

    @property
    def evaluation(self) -> pd.DataFrame:
        """The shared samples: label, and per model prediction:<m>, score:<m>."""
        return self.rows.get()[0]

    @property
    def tags(self) -> TagMatrix:
        """The shared samples' tags."""
        return self.rows.get()[1]

    @property
    def shared(self) -> int:
        """How many samples every model predicts (from the tables: the rows themselves are not read for it)."""
        return int(self.overall["n"].iat[0])

    @property
    def baseline(self) -> str:
        return self.models[0]

    @property
    def candidates(self) -> list[str]:
        return self.models[1:]

    def against(self, candidate: str | None = None) -> pd.DataFrame:
        """The slice table of one candidate (default: the first)."""
        candidate = candidate or self.candidates[0]
        if candidate not in self.candidates:
            raise SliceError(f"'{candidate}' is not compared here; candidates: {', '.join(self.candidates)}")
        return self.slices[self.slices["candidate"] == candidate]

    def definition(self, ref) -> tuple[tuple[str, str], ...]:
        """A slice by id, description ("color = blue & size = small") or definition."""
        return slice_definition(self.slices, ref, "this comparison")

    def change_counts(self, candidate: str | None = None) -> dict[str, int]:
        """How many slices the candidate made significantly worse and better (repeats included), of how many
        compared, and how many of the changed ones repeat another (the same samples named by other tags)."""
        table = self.against(candidate)
        moved = table[table["change"] != UNCHANGED]
        said = moved["change"].value_counts()
        return {"worse": int(said.get(REGRESSION, 0)), "better": int(said.get(IMPROVEMENT, 0)),
                "compared": len(table), "repeats": int((moved["repeats"] != "").sum())}

    def changes(self, candidate: str | None = None) -> pd.DataFrame:
        """What the candidate changed significantly, as `hibug compare` lists it: its classes, then its slices but
        those that repeat another; `kind` says which."""
        candidate = candidate or self.candidates[0]
        classes = self.classes[(self.classes["candidate"] == candidate) & (self.classes["change"] != UNCHANGED)]
        slices = self.against(candidate)
        slices = slices[(slices["change"] != UNCHANGED) & (slices["repeats"] == "")]
        return pd.concat([classes.assign(kind="class", repeats="", tag_warning=""), slices.assign(kind="slice")],
                         ignore_index=True)

    def right(self, model: str) -> pd.Series:
        """Whether each shared sample is right for `model` (score at least config.right_from)."""
        return self.evaluation[f"score:{model}"] >= self.config.right_from

    def disagreements(self, ref, first: str, second: str) -> pd.DataFrame:
        """The slice's shared samples that exactly one of the two models gets right, with `right` naming which
        (first's wins, then second's, each with the bigger score gap first); kept for the page's next run."""
        definition = tuple(self.definition(ref)) if ref is not None else None
        return SLICE_PARTS.get_or_make((self.identity, "disagreements", definition, first, second),
                                       lambda: self._disagreements(definition, ref, first, second)).copy(deep=False)

    def _disagreements(self, definition, ref, first: str, second: str) -> pd.DataFrame:
        try:
            mask = self.tags.mask(definition) if definition is not None else np.ones(len(self.evaluation), bool)
        except ValueError as error:
            raise SliceError(f"slice '{ref}' uses a tag these samples do not have: {error}") from None
        rows = self.evaluation[mask]
        a, b = rows[f"score:{first}"] >= self.config.right_from, rows[f"score:{second}"] >= self.config.right_from
        chosen = rows[a != b].assign(right=np.where(a[a != b], first, second),
                                     gap=(rows[f"score:{first}"] - rows[f"score:{second}"]).abs()[a != b])
        order = np.lexsort((-chosen["gap"].to_numpy(), chosen["right"].to_numpy() != first))
        return chosen.iloc[order].drop(columns="gap")

    def regressions(self, candidate: str | None = None) -> pd.DataFrame:
        """What fails the gate: the overall score and every slice or class of at least config.min_count shared
        samples that the candidate makes significantly worse (after Benjamini-Hochberg) by more than max_drop."""
        return self.checked(candidate).query("failed")

    def checked(self, candidate: str | None = None) -> pd.DataFrame:
        """Every check of the gate (overall, each class, each slice with enough samples) and whether it failed;
        `repeats` names the listed slice a slice's change belongs to (slices.redundancy)."""
        candidate = candidate or self.candidates[0]
        overall = self.overall[self.overall["model"] == candidate].assign(
            kind="overall", description="overall", slice_id="overall", q_value=lambda f: f["p_value"])
        least = self.config.min_count or self.slice_config.min_support
        classes = self.classes[self.classes["candidate"] == candidate]
        parts = [overall.assign(repeats="", tag_warning=""), classes.assign(kind="class", repeats="", tag_warning=""),
                 self.against(candidate).assign(kind="slice")]
        table = pd.concat([p.rename(columns={"n": "count"}) for p in parts], ignore_index=True)
        table = table[(table["kind"] == "overall") | (table["count"] >= least)]
        table["failed"] = ((table["q_value"] <= self.config.alpha) & (table["difference"] < -self.config.max_drop))
        return table[["kind", "description", "slice_id", "count", "baseline_score", "candidate_score", "difference",
                      "p_value", "q_value", "repeats", "tag_warning", "failed"]].reset_index(drop=True)


def compare_models(project, models: list[str], *, split: str = "val", slices: SliceConfig = SliceConfig(),
                   config: CompareConfig = CompareConfig(), attributes: list[str] | None = None,
                   tags: str = "in force", progress=no_progress) -> ModelComparison:
    """Compare `models` (the first is the baseline) on the labelled `split` samples that every one of them predicts,
    over the tags from `tags` (see slices.report.tag_frame); each step after the checks is told to `progress` (a
    job's, which may cancel between them)."""
    # 1. Check inputs: a known tag source, two or more distinct, known models sharing labelled samples of the split.
    tag_source(tags)  # an unknown source is refused before any work
    if len(models) < 2:
        raise SliceError("compare at least two models (the first is the baseline)")
    twice = sorted({m for m in models if models.count(m) > 1})
    if twice:
        raise SliceError(f"model(s) named more than once: {', '.join(twice)}")
    known = project.models()
    unknown = [m for m in models if m not in known]
    if unknown:
        raise SliceError(f"no model {', '.join(repr(m) for m in unknown)} in this project; known: "
                         f"{', '.join(known) or 'none yet'}")
    # 2. The shared samples with each model's prediction and score, and their tags.
    progress("reading the shared samples and their tags", 0, STEPS)
    evaluation, evaluated = shared_samples(project, models, split)
    rows = evaluation.index
    scores = evaluation[[f"score:{m}" for m in models]].to_numpy(float)
    if np.isnan(scores).any():
        raise SliceError("some shared samples have a prediction but no score; import a score for them")
    errors = 1.0 - scores
    binary = bool(np.isin(errors, (0.0, 1.0)).all())
    tag_matrix = compared_tags(project, rows, attributes, tags, slices)
    # 3. One enumeration over the errors and, per candidate, the squared difference from the baseline.
    progress("enumerating the slices", 1, STEPS)
    squared = (errors[:, :1] - errors[:, 1:]) ** 2
    columns = np.concatenate([errors, squared], axis=1)
    m = len(models)
    if not tag_matrix.attributes:
        table = pd.DataFrame({"definition": [], "slice_id": [], "description": [], "depth": [],
                              "count": np.zeros(0, dtype=np.int64)})
        sums = np.zeros((0, columns.shape[1]))
        counted = [0] * m
    else:
        enumeration = enumeration_for(project, tag_matrix, columns, ["compare", *models], split, slices)
        table, sums = enumerated_slices(tag_matrix, enumeration)
        hibug2 = replace(slices, gap=config.error_gap, threshold=None, alpha=1.0)
        counted = [count_error_slices(enumeration, model=k, config=hibug2) for k in range(m)]
    # Slices on tags measured too poor to trust are flagged, as error slices are.
    poor = poor_attributes(project, tag_matrix.attributes, tags, slices)
    table["tag_warning"] = ["; ".join(f"{a}: {poor[a]}" for a, _ in d if a in poor) for d in table["definition"]]
    # 4. Changes against the baseline: every slice, every class, overall.
    progress("testing every slice's change", 2, STEPS)
    test = MCNEMAR if binary else PAIRED_T
    total = columns.sum(axis=0)
    overall_change = (total[0] - total[1:m]) / len(rows)  # each candidate's, the level slices are ordered beyond
    slice_rows = [_grouped(_changes(table, sums[:, 0], sums[:, k], sums[:, m + k - 1], models[0], models[k], binary,
                                    config, overall=overall_change[k - 1]), tag_matrix, errors[:, 0], errors[:, k],
                           slices.max_overlap, config.grouped) for k in range(1, m)]
    labels, codes = _sorted_codes(evaluation["label"])
    per_class = np.stack([np.bincount(codes, weights=c, minlength=len(labels)) for c in columns.T], axis=1)
    class_table = pd.DataFrame({"description": [f"class = {c}" for c in labels],
                                "slice_id": [f"class:{c}" for c in labels],
                                "label": labels, "count": np.bincount(codes, minlength=len(labels))})
    class_rows = [_changes(class_table, per_class[:, 0], per_class[:, k], per_class[:, m + k - 1], models[0],
                           models[k], binary, config, overall=overall_change[k - 1]) for k in range(1, m)]
    overall = pd.DataFrame({"model": models, "evaluated": [evaluated[x] for x in models], "n": len(rows),
                            "score": 1 - total[:m] / len(rows), "error_slices": counted})
    for name in ("baseline_score", "candidate_score", "difference", "p_value", "change"):
        overall[name] = np.nan if name != "change" else ""
    for k in range(1, m):
        change = _changes(pd.DataFrame({"count": [len(rows)]}), total[:1], total[k:k + 1], total[m + k - 1:m + k],
                          models[0], models[k], binary, config, family=False)
        for name in ("baseline_score", "candidate_score", "difference", "p_value", "change"):
            overall.loc[k, name] = change[name].iat[0]
    # 5. Between every pair: overlap of their worst slices and of the samples they get wrong.
    progress("measuring the overlap of their failures", 3, STEPS)
    per_model = pd.DataFrame({x: 1 - sums[:, i] / table["count"].to_numpy() for i, x in enumerate(models)})
    worst_n = max(1, int(round(config.worst_share * len(table))))
    worst = {x: set(table["slice_id"].to_numpy()[np.argsort(per_model[x].to_numpy(), kind="stable")[:worst_n]])
             for x in models}
    failed = {x: scores[:, i] < config.right_from for i, x in enumerate(models)}  # a mask over the shared rows
    overlap, iou = [], []
    for a, b in combinations(models, 2):
        overlap.append({"model_a": a, "model_b": b, "worst_slices": len(worst[a]), "shared": len(worst[a] & worst[b]),
                        "jaccard": len(worst[a] & worst[b]) / max(len(worst[a] | worst[b]), 1)})
        both, either = np.count_nonzero(failed[a] & failed[b]), np.count_nonzero(failed[a] | failed[b])
        iou.append({"model_a": a, "model_b": b, "failures_a": np.count_nonzero(failed[a]),
                    "failures_b": np.count_nonzero(failed[b]), "both": both, "iou": both / max(either, 1)})
    progress("compared", STEPS, STEPS)
    return ModelComparison(list(models), split, test, overall, pd.concat(slice_rows, ignore_index=True),
                           pd.concat(class_rows, ignore_index=True), pd.DataFrame(overlap), pd.DataFrame(iou),
                           SharedRows(evaluation=evaluation, tags=tag_matrix), config, slices)


def shared_samples(project, models: list[str], split: str) -> tuple[pd.DataFrame, dict[str, int]]:
    """The labelled `split` samples every model predicts (label, and per model prediction:<m> and score:<m>), and
    how many of the split each model predicts."""
    base = project.samples()
    # each model's outputs laid out as the samples are (its own table, found by id; joining it to every sample took
    # 1.2 s a model at ten million)
    outputs = {m: rows_by_id(project.predictions(m)[["prediction", "score"]], base.index) for m in models}
    in_split = ((base["split"] == split) & base["label"].notna()).to_numpy(bool)
    evaluated = {m: int((in_split & outputs[m]["prediction"].notna().to_numpy(bool)).sum()) for m in models}
    shared = in_split.copy()
    for model in models:
        shared &= outputs[model]["prediction"].notna().to_numpy(bool)
    if not shared.any():
        raise SliceError(f"no labelled '{split}' samples that every one of {', '.join(models)} predicts")
    evaluation = pd.DataFrame({"label": base["label"][shared]})
    for model in models:
        evaluation[f"prediction:{model}"] = outputs[model]["prediction"].array[shared]
        evaluation[f"score:{model}"] = outputs[model]["score"].to_numpy(float)[shared]
    return evaluation, evaluated


def compared_tags(project, rows: pd.Index, attributes: list[str] | None, tags: str,
                  slices: SliceConfig) -> TagMatrix:
    """The tags models are compared over on the shared `rows` (slices.report.tag_frame; none yet is a matrix of no
    attributes: the models are then compared overall and per class), without attributes that name the whole set
    again (one tag on every shared sample, as one class): nothing to slice by."""
    frame = tag_frame(project, attributes, tags, by_class=slices.by_class, allow_empty=not attributes)
    return TagMatrix.from_frame(frame, rows).without(whole_set=True)


def _changes(table: pd.DataFrame, base_errors, candidate_errors, squared, baseline: str, candidate: str, binary: bool,
             config: CompareConfig, *, family: bool = True, overall: float = 0.0) -> pd.DataFrame:
    """Per row of `table` (a slice or class with its count): both scores, the difference (candidate - baseline), the
    paired test's p-value, the q-value over the rows (family) and the change; regressions first, then improvements,
    then the rest (smallest p first). Within regressions (improvements), the samples surely lost (gained) beyond the
    `overall` change order them: a slice where the change concentrates comes before one that only follows the
    overall change (a slice of nearly every sample), and a broad slice before the narrower ones cut from it."""
    n = table["count"].to_numpy(float)
    gain = np.asarray(base_errors, float) - np.asarray(candidate_errors, float)  # sum of (candidate - baseline) scores
    squared = np.asarray(squared, float)
    out = table.copy()
    out.insert(0, "candidate", candidate)
    out["baseline"] = baseline
    out["baseline_score"] = 1 - np.asarray(base_errors, float) / n
    out["candidate_score"] = 1 - np.asarray(candidate_errors, float) / n
    out["difference"] = gain / n
    if binary:  # discordant pairs: squared differences count them, the gain is their balance
        out["baseline_only"] = np.rint((squared - gain) / 2).astype(np.int64)
        out["candidate_only"] = np.rint((squared + gain) / 2).astype(np.int64)
        out["p_value"] = mcnemar_p_values(out["baseline_only"], out["candidate_only"])
    else:
        out["p_value"] = paired_t_p_values(gain, squared, n)
    out["q_value"] = benjamini_hochberg(out["p_value"].to_numpy()) if family else out["p_value"]
    with np.errstate(invalid="ignore", divide="ignore"):  # the paired differences' standard error
        spread = np.sqrt(np.maximum(squared - gain * gain / n, 0) / (n * (n - 1)))
    out["confident_change"] = np.maximum(np.abs(out["difference"]) - config.z * np.nan_to_num(spread), 0)
    significant = out["q_value"] <= config.alpha
    out["change"] = np.select([significant & (out["difference"] < 0), significant & (out["difference"] > 0)],
                              [REGRESSION, IMPROVEMENT], UNCHANGED)
    group = out["change"].map({REGRESSION: 0, IMPROVEMENT: 1, UNCHANGED: 2}).to_numpy()
    beyond = np.abs(out["difference"] - overall) - config.z * np.nan_to_num(spread)
    out["beyond_overall"] = np.where(np.sign(out["difference"] - overall) == np.sign(out["difference"]),
                                     np.maximum(beyond, 0), 0.0)
    # rounded: equal slices (one set of samples named twice) summed in other orders differ in the last bits
    within = np.round(np.where(group < 2, -out["beyond_overall"] * n, out["p_value"]), 9)
    then = np.round(np.where(group < 2, -out["confident_change"] * n, 0), 9)
    depth = out["depth"].to_numpy() if "depth" in out else np.zeros(len(out))
    return out.iloc[np.lexsort((-n, depth, then, within, group))].reset_index(drop=True)


def _grouped(rows: pd.DataFrame, tags: TagMatrix, base_errors: np.ndarray, candidate_errors: np.ndarray,
             max_overlap: float, top: int) -> pd.DataFrame:
    """The slice table with `repeats`: within the regressions (and the improvements), a slice whose lost (gained)
    samples are mostly those of another listed slice is marked as part of it and listed after the distinct ones
    (slices.redundancy, as error slices are), over the first `top` of each; slices on tags too poor to trust come
    after the others of their group, grouped among themselves; the rest keep their order."""
    parts = []
    for change, moved in ((REGRESSION, np.maximum(candidate_errors - base_errors, 0)),
                          (IMPROVEMENT, np.maximum(base_errors - candidate_errors, 0))):
        chosen = rows[rows["change"] == change]
        head, tail = chosen.head(top), chosen.iloc[top:].assign(repeats="")
        trusted = (head["tag_warning"] == "").to_numpy()
        # the broadest listed slice stands for its refinements: ranked by the change beyond the overall one, it is
        # where the change concentrates
        parts += [mark_repeats(head[trusted], tags, moved, max_overlap, narrow=False),
                  mark_repeats(head[~trusted], tags, moved, max_overlap, narrow=False), tail]
    parts.append(rows[rows["change"] == UNCHANGED].assign(repeats=""))
    return pd.concat(parts, ignore_index=True)


def error_mix_shifts(comparison: ModelComparison, error_types: dict[str, pd.Series], candidate: str | None = None, *,
                     top: int = 200) -> pd.DataFrame:
    """Slices whose failures' error-type mix differs between the baseline and `candidate` (objects: TIDE's or the
    keypoint types; `error_types`: per model, the error type of each sample, '' where it is right), over the first
    `top` slices of the candidate's table: each model's failures by type, the total variation distance between the
    two mixes and a chi-squared test of one mix, biggest shift first."""
    from scipy.stats import chi2_contingency

    candidate = candidate or comparison.candidates[0]
    models = (comparison.baseline, candidate)
    ids = comparison.evaluation.index
    kinds = {m: error_types[m].reindex(ids).astype("category") for m in models}
    types = sorted({str(t) for m in models for t in kinds[m].cat.categories if str(t)})
    # each sample's error type as a number (-1: right, or no type): slices are counted over their packed rows
    codes = {m: codes_among(kinds[m], types) for m in models}
    listed = comparison.against(candidate).head(top)
    rows = []
    for (_, row), bits in zip(listed.iterrows(), comparison.tags.bitsets(list(listed["definition"]))):
        counts = np.array([masked_counts(bits, codes[m], len(types)) for m in models])
        used = counts.sum(axis=0) > 0
        if counts.sum(axis=1).min() == 0:
            continue
        shares = counts / counts.sum(axis=1, keepdims=True)
        rows.append({"slice_id": row["slice_id"], "description": row["description"], "count": row["count"],
                     "shift": 0.5 * np.abs(shares[0] - shares[1]).sum(),
                     "p_value": chi2_contingency(counts[:, used]).pvalue if used.sum() > 1 else 1.0,
                     **{f"{t} ({m})": int(counts[i, j]) for i, m in enumerate(("baseline", "candidate"))
                        for j, t in enumerate(types)}})
    frame = pd.DataFrame(rows, columns=["slice_id", "description", "count", "shift", "p_value"] +
                         [f"{t} ({m})" for m in ("baseline", "candidate") for t in types])
    return frame.sort_values("shift", ascending=False, kind="stable").reset_index(drop=True)


def _sorted_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values as text, sorted; each row's position among them): np.unique's answer from the column's
    own codes (sorting eight million label strings took 19 s)."""
    codes, uniques = pd.factorize(values)
    if (codes < 0).any():  # a missing value is a value of its own there ("nan")
        return np.unique(values.astype(str).to_numpy(), return_inverse=True)
    names = np.asarray(pd.Index(uniques).astype(str), dtype=object)
    order = np.argsort(names, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return names[order], rank[codes]


def pair_matrix(pairs: pd.DataFrame, models: list[str], value: str) -> pd.DataFrame:
    """A symmetric model x model matrix of a pairwise measure (worst_overlap's 'jaccard', failure_iou's 'iou'), 1 on
    the diagonal."""
    matrix = pd.DataFrame(np.eye(len(models)), index=models, columns=models)
    for a, b, v in zip(pairs["model_a"], pairs["model_b"], pairs[value]):
        matrix.loc[a, b] = matrix.loc[b, a] = v
    return matrix


__all__ = ["IMPROVEMENT", "MCNEMAR", "PAIRED_T", "REGRESSION", "UNCHANGED", "CompareConfig",
           "ModelComparison", "SharedRows", "compare_models", "error_mix_shifts", "pair_matrix"]
