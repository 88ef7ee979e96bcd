"""Error slices from an enumeration: per-model scores, the parent rule, the error threshold, statistics and ranking."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from numba import njit

from hibug_core.bounds import Bound, check_bounds
from hibug_core.registry import Registry
from hibug_core.rows import positions_in
from hibug_core.slices.bitsets import pack_rows
from hibug_core.slices.enumeration import MAX_DEPTH, Enumeration, enumerate_slices, pack_keys
from hibug_core.stats import EXACT_BELOW, benjamini_hochberg, wilson_interval, worse_than_rest_p_values
from hibug_core.tagging.sources import TRUST_FLOOR

CLASS = "class"  # pseudo-attribute: the true label
RANKINGS = Registry("ranking")  # orders of error slices (SliceConfig.rank_by); each builds its sort columns
RANKINGS.add("confident_gap", "the overall score minus the upper end of the slice's interval, so that a small slice "
             "worse by chance does not outrank the larger one it was cut from", lambda: ["confident_gap", "count"])
RANKINGS.add("gap", "the overall score minus the slice's", lambda: ["gap", "count"])
RANKINGS.add("size", "the largest first", lambda: ["count", "gap"])
RANKINGS.add("sliceline", "SliceLine's score (error and size weighed by sliceline_alpha)",
             lambda: ["sliceline_score", "gap"])


@dataclass(frozen=True)
class SliceConfig:
    """Slice search settings (HiBug2's, with C and the parent test chosen by the planted-bug benchmark)."""

    max_depth: int = 3  # most (attribute = tag) pairs in a slice
    min_support: int = 10  # M: slices with fewer samples are not considered
    gap: float = 0.1  # C: an error slice scores below the overall score minus this (chosen by `hibug bench`)
    threshold: float | None = None  # or, when set, below this absolute score
    # confident_gap: overall score minus the upper end of the slice's interval, so that a small slice that is worse
    # by chance does not outrank the larger slice it was cut from.
    rank_by: str = "confident_gap"  # a RANKINGS entry
    # The one significance rule of a reported slice: significantly worse than the whole (Benjamini-Hochberg over
    # every slice tested, at this false discovery rate) and, below the first level, than each parent (at
    # parent_alpha; None: the same alpha). 1: no test (HiBug's plain rule, for the benchmarks' comparison).
    alpha: float = 0.05
    parent_alpha: float | None = None
    # HiBug2's post-processing: below the first level, a slice is kept only when it fails more than each of its
    # parents. False: HiBug's own rule, every slice below the cut whatever its parents do (no parent test either).
    parents: bool = True
    sliceline_alpha: float = 0.95  # weight of the error term in the SliceLine score
    z: float = 1.96  # Wilson interval width (95%)
    by_class: bool = True  # also slice by the label (attribute CLASS), e.g. "class = triangle & size = small"
    # Slices whose tags are measured less precise than this (upper end of the 95% interval, against known or
    # audited tags) are flagged and ranked after the others; also the floor below which an attribute's tags are
    # called too poor to trust.
    min_tag_precision: float = TRUST_FLOOR
    # A slice with at least this share of its failures inside one slice ranked above it repeats that slice (often
    # the same images named by other attributes): it is listed after the distinct slices. 1: off.
    max_overlap: float = 0.8

    # Every number's rule, said once: checked here and reused by the operations that set them (bounds.configured).
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "max_depth": Bound(f"most (attribute = tag) pairs per slice (1-{MAX_DEPTH})", ge=1, le=MAX_DEPTH,
                           integer=True),
        "min_support": Bound("minimum samples in a slice (M)", ge=1, integer=True),
        "gap": Bound("error slices score below overall minus this (C)", ge=0, le=1),
        "threshold": Bound("or below this absolute score", ge=0, le=1, optional=True),
        "alpha": Bound("false discovery rate: a slice is reported only when it is significantly worse than the whole "
                       "(Benjamini-Hochberg over every slice tested) and than each parent; 1: no test", gt=0, le=1),
        "parent_alpha": Bound("false discovery rate of the parent test (None: alpha)", gt=0, le=1, optional=True),
        "sliceline_alpha": Bound("weight of the error term in the SliceLine score", ge=0, le=1),
        "z": Bound("width of the Wilson interval", gt=0),
        "min_tag_precision": Bound("tags measured less precise than this are too poor to trust", ge=0, le=1),
        "max_overlap": Bound("a slice with this share of its failures in one ranked above repeats it", gt=0, le=1)}

    @property
    def parent_test(self) -> float:
        """The false discovery rate of the parent test in force."""
        return self.alpha if self.parent_alpha is None else self.parent_alpha

    def __post_init__(self):
        check_bounds(self, self.BOUNDS, {"rank_by": (self.rank_by in RANKINGS,
                                                     f"one of {', '.join(RANKINGS.names())}")})


def codes_among(values: pd.Series, names: list[str]) -> np.ndarray:
    """Each value's position in `names` (compared as text; -1 where missing or not among them): a categorical's
    codes renumbered, so ten million rows of a few tags cost an index lookup, not ten million string compares."""
    values = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    position = pd.Index(names, dtype=object).get_indexer(values.cat.categories.astype(str))
    codes = values.cat.codes.to_numpy()
    if not len(position):
        return np.full(len(codes), -1, dtype=np.int64)
    return np.where(codes >= 0, position[codes], -1).astype(np.int64)


ROW_BLOCK = 2 ** 16  # rows of the codes written at a time: the block's rows of every column stay in the cache


def row_major(columns: list[np.ndarray], rows: int | np.ndarray) -> np.ndarray:
    """(rows, columns) int16 from one code array per column (rows: how many, or the positions to take, -1 for an
    untagged row), a block of rows at a time: np.stack along the second axis writes each column strided across the
    whole matrix (3.9 s against 1.3 s for 58 columns of eight million)."""
    positions = None if isinstance(rows, (int, np.integer)) else np.asarray(rows, dtype=np.int64)
    n = int(rows) if positions is None else len(positions)
    codes = np.empty((n, len(columns)), dtype=np.int16)
    for start in range(0, n, ROW_BLOCK):
        block = codes[start:start + ROW_BLOCK]
        taken = None if positions is None else positions[start:start + ROW_BLOCK]
        for i, column in enumerate(columns):
            block[:, i] = column[start:start + ROW_BLOCK] if taken is None else column[taken]
        if taken is not None:
            block[taken < 0] = -1
    return codes


@dataclass
class TagMatrix:
    """The tags of a set of samples as integer codes: what the enumeration runs on."""

    sample_ids: np.ndarray
    attributes: list[str]
    tags: list[list[str]]
    codes: np.ndarray  # (n, A) int16, -1 where a sample has no tag

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, ids=None) -> TagMatrix:
        """From one categorical column per attribute (as TagTable.tags); with `ids`, only the rows of these sample ids
        in their order (one not in the frame untagged), taken as the codes are laid out (no frame of them made)."""
        columns = [frame[c] if isinstance(frame[c].dtype, pd.CategoricalDtype) else frame[c].astype("category")
                   for c in frame.columns]
        rows = len(frame) if ids is None else positions_in(frame.index, ids)
        codes = row_major([c.cat.codes.to_numpy() for c in columns], rows)
        return cls(frame.index.to_numpy() if ids is None else np.asarray(ids), list(frame.columns),
                   [list(map(str, c.cat.categories)) for c in columns], codes)

    def without(self, *, untagged: bool = False, whole_set: bool = False) -> TagMatrix:
        """Without the attributes no row has a tag of (untagged), or those with one tag on every row (whole_set: they
        name the whole set again). Each is one pass over the row-major codes (a column of them is strided)."""
        keep = np.ones(len(self.attributes), dtype=bool)
        if len(self.codes) and untagged:
            keep &= (self.codes >= 0).any(axis=0)
        if len(self.codes) and whole_set:
            low, high = self.codes.min(axis=0), self.codes.max(axis=0)
            keep &= ~((low >= 0) & (low == high))
        chosen = np.flatnonzero(keep)
        if len(chosen) == len(self.attributes):
            return self
        return TagMatrix(self.sample_ids, [self.attributes[a] for a in chosen], [self.tags[a] for a in chosen],
                         np.ascontiguousarray(self.codes[:, chosen]))

    def aligned(self, frame: pd.DataFrame) -> TagMatrix:
        """Other samples' tags (same attribute columns) coded with this matrix's tag lists."""
        codes = row_major([codes_among(frame[a], self.tags[i]).astype(np.int16)
                           for i, a in enumerate(self.attributes)], len(frame))
        return TagMatrix(frame.index.to_numpy(), self.attributes, self.tags, codes)

    def definition(self, features: np.ndarray, enumeration: Enumeration) -> tuple[tuple[str, str], ...]:
        return tuple((self.attributes[enumeration.feature_attribute[f]],
                      self.tags[enumeration.feature_attribute[f]][enumeration.feature_tag[f]]) for f in features)

    def mask(self, definition) -> np.ndarray:
        """Rows in the slice `definition` ((attribute, tag) pairs): a slice back into its samples, in one pass over
        the rows (a column of the row-major codes is strided: a tenth of a second per condition at ten million)."""
        attributes = [self.attributes.index(attribute) for attribute, _ in definition]
        wanted = [self.tags[a].index(tag) for a, (_, tag) in zip(attributes, definition)]
        return _rows_with(self.codes, np.array(attributes, dtype=np.int64), np.array(wanted, dtype=np.int64))

    def bitsets(self, definitions) -> np.ndarray:
        """(slices, words) uint64: each slice's rows packed as bitsets.pack_rows packs them, 1.25 MB a slice at ten
        million rows where a mask takes 10 MB; each attribute's column is read once for all of them (a column of the
        row-major codes is strided: a tenth of a second at ten million rows)."""
        pairs = [[(self.attributes.index(a), self.tags[self.attributes.index(a)].index(t)) for a, t in d]
                 for d in definitions]
        every = pack_rows(np.ones(len(self.codes), dtype=bool))[0]
        out = np.tile(every, (len(pairs), 1))
        by_attribute: dict[int, list[int]] = {}
        for k, slice_pairs in enumerate(pairs):
            for a, _ in slice_pairs:
                by_attribute.setdefault(a, []).append(k)
        for a, slices in by_attribute.items():
            column = np.ascontiguousarray(self.codes[:, a])
            packed: dict[int, np.ndarray] = {}
            for k in slices:
                code = next(t for b, t in pairs[k] if b == a)
                if code not in packed:
                    packed[code] = pack_rows(column == code)[0]
                out[k] &= packed[code]
        return out


def slice_id(definition) -> str:
    """A stable id of a slice: the same pairs give the same id whatever the order or numbering."""
    canonical = "&".join(f"{a}={t}" for a, t in sorted(definition))
    return hashlib.blake2b(canonical.encode(), digest_size=6).hexdigest()


def describe(definition) -> str:
    return " & ".join(f"{a} = {t}" for a, t in definition)


def parse_definition(text: str) -> tuple[tuple[str, str], ...]:
    """Inverse of describe(): "color = blue & size = small" -> (("color", "blue"), ("size", "small"))."""
    pairs = []
    for part in text.split("&"):
        attribute, sep, tag = part.partition("=")
        if not sep:
            raise ValueError(f"'{part.strip()}' is not 'attribute = tag'")
        pairs.append((attribute.strip(), tag.strip()))
    return tuple(pairs)


def _worse_than_every_parent(enumeration: Enumeration, counts: list[np.ndarray], errors: list[np.ndarray], alpha: float,
                             candidates: list[np.ndarray], binary: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per level, (True where the slice is worse than every parent (HiBug2's post-processing) and, unless alpha is 1,
    significantly so; True where it is worse at all): against the rest of each parent, with Benjamini-Hochberg over
    the tests of the candidate slices (those that score below the cut, which alone could be reported), so that a child
    that is worse only by chance does not crowd out the slice it was cut from, while slices that could never be
    reported do not dilute the test."""
    kept, weakest = [np.ones(len(counts[0]), dtype=bool)], []
    for depth in range(2, len(enumeration.levels) + 1):
        level, parents = enumeration.levels[depth - 1], enumeration.levels[depth - 2]
        rate = errors[depth - 1] / counts[depth - 1]
        keep = np.ones(len(level.keys), dtype=bool)
        p_max = np.zeros(len(level.keys))
        for skip in range(depth):
            at = np.searchsorted(parents.keys, pack_keys(np.delete(level.features, skip, axis=1)))
            parent_count, parent_errors = counts[depth - 2][at], errors[depth - 2][at]
            keep &= rate > parent_errors / parent_count
            if alpha < 1:
                rest_rate = (parent_errors - errors[depth - 1]) / np.maximum(parent_count - counts[depth - 1], 1)
                pooled = parent_errors / parent_count
                p = worse_than_rest_p_values(errors[depth - 1], counts[depth - 1], parent_errors, parent_count,
                                             pooled * (1 - pooled), binary=binary)
                p_max = np.maximum(p_max, np.where(rest_rate >= rate, 1.0, p))
        kept.append(keep)
        weakest.append(p_max)
    if alpha < 1 and weakest:
        tested = np.concatenate(candidates[1:])
        p_all = np.concatenate(weakest)
        q_all = np.ones(len(p_all))
        q_all[tested] = benjamini_hochberg(p_all[tested])
        q = np.split(q_all, np.cumsum([len(w) for w in weakest])[:-1])
        return [kept[0]] + [k & (qq < alpha) for k, qq in zip(kept[1:], q)], kept
    return kept, kept


def smallest_significant_gap(n: int, overall_score: float, size: int, alpha: float, tested: int, *,
                             binary: bool = False) -> float:
    """The smallest drop below the overall score (a share) at which a slice of `size` of `n` samples is reported
    significant, at false discovery rate `alpha` over `tested` slices when it is the most significant one (its p-value
    times `tested` under alpha), by the test score_slices makes (exact for a small slice of 0/1 errors); inf when no
    slice of that size can be."""
    from scipy.special import ndtri

    if size >= n or size < 1:
        return float("inf")
    error = 1 - overall_score
    level = min(alpha / max(tested, 1), 0.5)
    if binary and size * min(error, 1 - error) < EXACT_BELOW:
        # the fewest errors whose exact p-value passes, among a slice's possible counts
        total = round(error * n)
        errors = np.arange(0, min(size, total) + 1, dtype=float)
        p = worse_than_rest_p_values(errors, np.full(len(errors), size), total, n, error * (1 - error), binary=True)
        passing = np.flatnonzero((p <= level) & (errors / size > error))
        gap = errors[passing[0]] / size - error if len(passing) else float("inf")
        return float(gap) if gap <= overall_score else float("inf")
    variance = max(error * (1 - error), 1e-12)
    z = float(ndtri(1 - level))
    against_rest = z * np.sqrt(variance * (1 / size + 1 / (n - size)))  # the test compares with the rest
    gap = against_rest * (n - size) / n  # the same drop, measured from the overall score
    return float(gap) if gap <= overall_score else float("inf")


@dataclass(frozen=True)
class _Reported:
    """The rule's verdict over one model column of an enumeration, with what it measured on every slice."""

    chosen: np.ndarray  # flat indices (levels in order) of the reported slices
    counts: list
    n: int
    total: float
    overall_error: float
    overall_score: float
    cut: float
    score: np.ndarray
    all_count: np.ndarray
    all_errors: np.ndarray
    p_values: np.ndarray
    q_values: np.ndarray
    significant: np.ndarray


def _reported(enumeration: Enumeration, model: int, config: SliceConfig, keep: np.ndarray | None) -> _Reported:
    """The one rule of a reported slice, for one model column: its flat index among the enumerated slices (levels in
    order) when it scores under the cut, passes the parent rule in force and, unless alpha is 1, is significant."""
    counts = [level.count for level in enumeration.levels]
    errors = [level.errors[:, model] for level in enumeration.levels]
    n = enumeration.n_rows
    total = float(enumeration.total_errors[model])
    overall_error = total / n
    variance = overall_error * (1 - overall_error)
    all_count, all_errors = np.concatenate(counts), np.concatenate(errors)
    binary = bool(enumeration.binary_errors[model])
    p_values = worse_than_rest_p_values(all_errors, all_count, total, n, variance, binary=binary)
    q_values = benjamini_hochberg(p_values)
    score = 1 - all_errors / all_count
    overall_score = 1 - overall_error
    cut = config.threshold if config.threshold is not None else overall_score - config.gap
    candidates = [1 - e / c < cut for e, c in zip(errors, counts)]
    if config.parents:
        tested, worse = _worse_than_every_parent(enumeration, counts, errors, config.parent_test, candidates, binary)
    else:  # HiBug's rule: no slice is measured against its parents
        tested = worse = [np.ones(len(c), dtype=bool) for c in counts]
    kept = np.concatenate(tested)
    if keep is not None:
        kept |= keep & np.concatenate(worse)
    significant = q_values < config.alpha if config.alpha < 1 else np.ones(len(q_values), dtype=bool)
    return _Reported(np.flatnonzero(kept & (score < cut) & significant), counts, n, total, overall_error,
                     overall_score, cut, score, all_count, all_errors, p_values, q_values, significant)


def count_error_slices(enumeration: Enumeration, *, model: int = 0, config: SliceConfig = SliceConfig()) -> int:
    """How many slices the rule reports for one model column, without describing them (HiBug2's error-slice counts
    per model, which run to thousands)."""
    return int(len(_reported(enumeration, model, config, None).chosen))


def score_slices(enumeration: Enumeration, tags: TagMatrix, *, model: int = 0,
                 config: SliceConfig = SliceConfig(), keep: np.ndarray | None = None) -> pd.DataFrame:
    """Error slices for one model column of the enumeration, ranked, with statistics. keep: per enumerated slice
    (levels in order), True for one that other evidence shows is a bug of its own: it is reported when under the cut
    and worse than each parent, even if not significantly (a child no worse than a parent fails as that parent does,
    whatever else is true of it).

    The p-values are corrected (Benjamini-Hochberg) over every enumerated slice, not only the reported ones. The
    per-sample error variance is taken as mean * (1 - mean): exact for 0/1 errors, an upper bound for scores.
    """
    rule = _reported(enumeration, model, config, keep)
    chosen, counts, n, total, score = rule.chosen, rule.counts, rule.n, rule.total, rule.score
    overall_error, overall_score, cut, significant = rule.overall_error, rule.overall_score, rule.cut, rule.significant
    all_count, all_errors, p_values, q_values = rule.all_count, rule.all_errors, rule.p_values, rule.q_values
    depth = np.concatenate([np.full(len(c), d + 1) for d, c in enumerate(counts)])
    row = np.concatenate([np.arange(len(c)) for c in counts])
    low, high = wilson_interval(all_count[chosen] - all_errors[chosen], all_count[chosen], config.z)
    with np.errstate(divide="ignore", invalid="ignore"):
        sliceline = (config.sliceline_alpha * ((all_errors[chosen] / all_count[chosen]) / overall_error - 1)
                     - (1 - config.sliceline_alpha) * (n / all_count[chosen] - 1))
    definitions = [tags.definition(enumeration.levels[d - 1].features[r], enumeration)
                   for d, r in zip(depth[chosen], row[chosen])]
    frame = pd.DataFrame({
        "slice_id": [slice_id(d) for d in definitions],
        "description": [describe(d) for d in definitions],
        "definition": definitions,
        "depth": depth[chosen],
        "count": all_count[chosen],
        "failures": all_errors[chosen],
        "score": score[chosen],
        "gap": overall_score - score[chosen],
        "score_low": low,
        "score_high": high,
        "p_value": p_values[chosen],
        "q_value": q_values[chosen],
        "coverage": all_errors[chosen] / total if total else np.nan,
        "sliceline_score": sliceline,
    })
    frame["confident_gap"] = overall_score - frame["score_high"]
    order = RANKINGS.get(config.rank_by).build()
    frame = frame.sort_values(order, ascending=False, kind="stable").reset_index(drop=True)
    frame.index.name = "rank"
    frame.attrs.update(overall_score=overall_score, cut=cut, enumerated=int(len(all_count)),
                       candidates=enumeration.candidates, total_failures=total, alpha=config.alpha,
                       under_cut_not_significant=int(((score < cut) & ~significant).sum()))
    return frame


def find_error_slices(tags: TagMatrix, errors: np.ndarray, config: SliceConfig = SliceConfig(), *,
                      model: int = 0) -> pd.DataFrame:
    """Enumerate and score in one call; errors: (n,) or (n, models) of 1 - score per sample."""
    errors = np.asarray(errors, dtype=float)
    enumeration = enumerate_slices(tags.codes, [len(t) for t in tags.tags], errors, max_depth=config.max_depth,
                                   min_support=config.min_support)
    return score_slices(enumeration, tags, model=model, config=config)


__all__ = ["SliceConfig", "TagMatrix", "codes_among", "count_error_slices", "describe", "find_error_slices",
           "parse_definition", "score_slices", "slice_id", "smallest_significant_gap"]


@njit(cache=True)
def _rows_with(codes, attributes, wanted):
    out = np.ones(codes.shape[0], dtype=np.bool_)
    for row in range(codes.shape[0]):
        for k in range(attributes.shape[0]):
            if codes[row, attributes[k]] != wanted[k]:
                out[row] = False
                break
    return out
