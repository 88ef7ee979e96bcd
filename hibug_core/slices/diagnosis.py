"""Why a slice fails, as HiBug names it: rare case, distribution shift, spurious correlation or hard case, and for a
model of objects what its training annotations show (missing annotations, bad boxes); the evidence kept beside the
verdict."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.metrics import share
from hibug_core.objects.summary import error_mix

SWAPPED = "left and right swapped"  # people: their keypoints annotated with the body's sides exchanged
KEYPOINTS_MISSING = "keypoints missing"  # people: annotated, but most of their keypoints left out
BAD_MASKS = "bad masks"  # objects outlined by masks: annotated with masks that do not outline them
ANNOTATION_BUGS = ("missing annotations", "bad boxes", SWAPPED, KEYPOINTS_MISSING, BAD_MASKS)  # what the training
#                                                                                    annotations did to the model
NO_CLEAR_CAUSE = "no clear cause"  # a significant slice whose evidence shows no bug type significantly
BUG_TYPES = ("spurious correlation", "rare case", "distribution shift", *ANNOTATION_BUGS, "hard case",
             NO_CLEAR_CAUSE)
NOT_CLASSES = ("(missed)", "(background)")  # objects: no detection, no object; never a shortcut's class


@dataclass(frozen=True)
class ObjectEvidence:
    """What a model of objects shows beyond its predictions, per training row and per evaluation row."""

    train_object: np.ndarray  # (training rows,) bool: a true object (not a false positive's row)
    annotated: np.ndarray | None  # (training rows,) bool: annotated where it was trained (None: not known)
    train_box_ratio: np.ndarray | None  # (training rows,) its training box's area over its own (NaN: none)
    eval_box_ratio: np.ndarray  # (evaluation rows,) the found prediction's box area over the object's (NaN: none)
    train_mirrored: np.ndarray | None = None  # (training rows,) 1.0: its training keypoints have left and right
    #                                           swapped, 0.0: not, NaN: nothing to compare (None: boxes)
    train_keypoints_missing: np.ndarray | None = None  # (training rows,) 1.0: its training annotation leaves out
    #                                                    most of its keypoints, 0.0: not, NaN: none (None: boxes)
    nouns: str = "objects"  # what the rows are, as the reasons say it ("people")
    train_mask_wrong: np.ndarray | None = None  # (training rows,) 1.0: its training mask does not outline it (mask
    #                                             IoU with its true mask below 0.5), 0.0: it does, NaN: none (None: no
    #                                             masks)


@dataclass(frozen=True)
class DiagnosisConfig:
    """Thresholds of the bug types (HiBug's definitions; one place for all of them)."""

    rare_share: float = 0.01  # rare case: under this share of the training split
    shift_ratio: float = 2.0  # distribution shift: evaluation share at least this many times the training share
    alpha: float = 0.8  # spurious correlation: one predicted label has at least this share of the slice's
    #                     predictions (and is not its usual label), or of its failures
    min_failures: int = 5  # failures needed before their predicted labels count as evidence
    association: float = 0.8  # spurious correlation learnt in training: at least this share of the training images
    #                           with the slice's tags (class conditions left out) are of one class, and
    shortcut: float = 0.5  # more than this share of the slice's failures are predicted as that class
    min_shortcut_evidence: int = 20  # ... and at least this many training samples carry the slice's tags: a
    #                                  shortcut learnt from 3 images is no finding worth a reader's time, however
    #                                  small its p-value (fewer: the slice is told by the rules after this one)
    swapped_share: float = 0.5  # left and right swapped: at least this share of its training people annotated so
    keypoints_missing_share: float = 0.5  # keypoints missing: at least this share of its training people annotated
    #                                       with most of their keypoints left out
    bad_masks_share: float = 0.5  # bad masks: at least this share of its training objects annotated with a mask that
    #                               does not outline them
    missing_share: float = 0.5  # missing annotations: at most this share of its objects in training images annotated
    missing_gap: float = 0.25  # ... and this far below the share of all objects annotated
    box_factor: float = 1.33  # bad boxes: the median box area this many times too large, or this many times too small


def diagnose(definition_masks: list[np.ndarray], train_masks: list[np.ndarray] | None, labels: np.ndarray,
             predictions: np.ndarray, errors: np.ndarray, config: DiagnosisConfig = DiagnosisConfig(), *,
             tag_train_masks: list[np.ndarray | None] | None = None,
             train_labels: np.ndarray | None = None, error_types: np.ndarray | None = None,
             objects: ObjectEvidence | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """One row of evidence and a bug type per slice (given as boolean masks over the evaluation rows).

    train_masks: the same slices over the training rows (None when the training split has no tags).
    tag_train_masks: the training rows with each slice's tags, its class conditions left out (None for a slice of
    class conditions only), with train_labels: evidence that a tag goes with a class in training, which tells a
    spurious correlation (the model learnt the tag as a shortcut) from a rare case (the combination is just rare).
    error_types: objects' error type per evaluation row (TIDE's; a person's keypoint error): every slice's failures
    are then described by their mix.
    objects: a model of objects' evidence: its training annotations per tag combination (an object common in training
    images but rarely annotated there: missing annotations; training boxes systematically smaller or larger than the
    objects: bad boxes), else its own boxes on the found objects (systematically small or large: bad boxes). This
    evidence comes first: a detector taught that something is background misses it however common it is.
    alpha: each bug type is given only where its own evidence is significant at this level (a one-sided binomial
    test against what the whole split would show); else "no clear cause" (1: no test).
    """
    n_eval = len(labels)
    n_train = len(train_masks[0]) if train_masks else 0
    classes = _Classes()  # labels and predictions as codes of one vocabulary, made once
    labels, predictions = classes.codes(labels), classes.codes(predictions)
    train_labels = classes.codes(train_labels) if train_labels is not None else None
    shown = _Significance(alpha, labels, predictions, errors, train_labels, classes)
    rows = []
    for i, mask in enumerate(definition_masks):
        slice_labels, slice_predictions = labels[mask], predictions[mask]
        failed = errors[mask] > 0.5
        top_label, label_count = classes.most_common(slice_labels)
        top_prediction, prediction_count = classes.most_common(slice_predictions)
        failure_top, failure_count = classes.most_common(slice_predictions[failed])
        eval_share = mask.sum() / n_eval
        train_count = int(train_masks[i].sum()) if train_masks else None
        train_share = train_count / n_train if train_masks and n_train else np.nan
        prediction_share = prediction_count / max(mask.sum(), 1)
        failure_share = failure_count / max(failed.sum(), 1)
        tag_rows = tag_train_masks[i] if tag_train_masks is not None else None
        associated, association = classes.most_common(train_labels[tag_rows] if tag_rows is not None else [])
        association_share = association / tag_rows.sum() if associated is not None else np.nan
        annotation_bug = _annotation_bug(objects, train_masks[i] if train_masks else None, mask, failed, config,
                                         alpha)
        learnt = (associated is not None and int(tag_rows.sum()) >= config.min_shortcut_evidence
                  and shown.learnt(associated, association, int(tag_rows.sum())))
        rare = bool(train_masks) and train_share < config.rare_share  # by the thresholds; `rarer`: significantly
        shifted = bool(train_masks) and eval_share >= config.shift_ratio * max(train_share, 1e-12)
        rarer = (rare or shifted) and shown.rarer_in_training(train_count, n_train, eval_share)
        # A shortcut learnt from training (its tags go with the class its failures are predicted as) comes first:
        # the combinations it fails on are often rare in training too, but rarity is not why it fails. Rarity comes
        # before the prediction rule: a combination never seen in training is mostly predicted as one class too.
        if annotation_bug is not None:
            bug, reason = annotation_bug
        elif (associated is not None and associated == failure_top and associated not in NOT_CLASSES
                and failed.sum() >= config.min_failures
                and association_share >= config.association and failure_share > config.shortcut and learnt):
            bug, reason = "spurious correlation", (f"in training, {association_share:.0%} of those with its tags "
                                                   f"are '{associated}', and {failure_share:.0%} of its failures are "
                                                   f"predicted '{associated}'")
        elif rare and rarer:
            bug, reason = "rare case", (f"{train_count} in training ({share(train_share)} of training, "
                                        f"under {config.rare_share:.0%})")
        elif (top_prediction is not None and top_prediction != top_label and prediction_share >= config.alpha
              and top_prediction not in NOT_CLASSES
              and shown.predicted_more(top_prediction, prediction_count, mask)):
            bug, reason = "spurious correlation", (f"{prediction_share:.0%} of it is predicted "
                                                   f"'{top_prediction}', though most of it is '{top_label}'")
        elif shifted and rarer:
            bug, reason = "distribution shift", (f"{share(eval_share)} of evaluation but {share(train_share)} "
                                                 "of training")
        elif (failed.sum() >= config.min_failures and failure_share >= config.alpha and failure_top not in NOT_CLASSES
              and shown.failures_predicted_more(failure_top, failure_count, mask)):
            bug, reason = "spurious correlation", (f"{failure_share:.0%} of its failures are predicted "
                                                   f"'{failure_top}'")
        elif not train_masks:
            bug, reason = NO_CLEAR_CAUSE, ("no tagged training split to compare with, and no other evidence "
                                           "significant at this size")
        elif rare or shifted:
            bug, reason = NO_CLEAR_CAUSE, (f"{train_count} in training ({train_share:.1%}) against {eval_share:.1%} "
                                           "of evaluation: too few to tell rare from common")
        elif error_types is not None:
            bug, reason = "hard case", f"common in training; its failures: {error_mix(error_types[mask][failed])}"
        else:
            bug, reason = "hard case", "common in training, no dominant wrong prediction"
        if error_types is not None and bug not in ("hard case", NO_CLEAR_CAUSE) and failed.any():  # objects: always
            reason += f"; its failures: {error_mix(error_types[mask][failed])}"
        rows.append({"bug_type": bug, "reason": reason, "train_count": train_count, "train_share": train_share,
                     "eval_share": eval_share, "top_label": top_label, "top_prediction": top_prediction,
                     "top_prediction_share": prediction_share, "failure_top_prediction": failure_top,
                     "failure_top_share": failure_share if failed.any() else np.nan,
                     "train_tag_label": associated, "train_tag_label_share": association_share})
    return pd.DataFrame(rows, columns=["bug_type", "reason", "train_count", "train_share", "eval_share", "top_label",
                                       "top_prediction", "top_prediction_share", "failure_top_prediction",
                                       "failure_top_share", "train_tag_label", "train_tag_label_share"])


def _annotation_bug(objects: ObjectEvidence | None, train_mask: np.ndarray | None, mask: np.ndarray,
                    failed: np.ndarray, config: DiagnosisConfig, alpha: float = 1.0) -> tuple[str, str] | None:
    """(missing annotations | bad boxes, reason) when a model of objects' evidence shows one for the slice: its
    training annotations where they are known, else its own boxes on the found objects. Missing annotations are
    given only where fewer of its training objects are annotated than of all objects, significantly at `alpha`."""
    if objects is None or failed.sum() < config.min_failures:
        return None
    for bug in TAUGHT_BUGS:
        reason = _taught_wrong(bug, objects, train_mask, config, alpha)
        if reason is not None:
            return bug, reason
    for bug in ANNOTATION_BUGS[:2]:
        if _annotation_evidence(bug, objects, train_mask, mask, config) and (
                bug != "missing annotations" or _fewer_annotated(objects, train_mask, config, alpha)):
            return bug, _annotation_reason(bug, objects, train_mask, mask, config)
    return None


@dataclass(frozen=True)
class _TaughtBug:
    """A bug of how each training object was annotated (a person's keypoints, an object's mask): which evidence flags
    each training object, the config's share of the slice's training objects it takes, and how the reason says it."""

    evidence: str  # the ObjectEvidence field
    share: str  # the DiagnosisConfig field
    annotated: str  # "annotated with left and right swapped"
    consequence: str


TAUGHT_BUGS = {
    SWAPPED: _TaughtBug("train_mirrored", "swapped_share", "annotated with left and right swapped",
                        "the model learnt their sides the wrong way round"),
    KEYPOINTS_MISSING: _TaughtBug("train_keypoints_missing", "keypoints_missing_share",
                                  "annotated with most of their keypoints left out",
                                  "the model was seldom shown where their keypoints are"),
    BAD_MASKS: _TaughtBug("train_mask_wrong", "bad_masks_share", "annotated with a mask that does not outline them",
                          "the model learnt to outline them so"),
}


def _taught_flags(bug: str, objects: ObjectEvidence, train_rows: np.ndarray | None) -> np.ndarray | None:
    """The flags of these training rows' objects where known (None: no such evidence, or no training rows)."""
    flags = getattr(objects, TAUGHT_BUGS[bug].evidence)
    if flags is None or train_rows is None:
        return None
    return flags[train_rows & np.isfinite(flags)]


def _taught_wrong(bug: str, objects: ObjectEvidence, train_mask: np.ndarray | None, config: DiagnosisConfig,
                  alpha: float) -> str | None:
    """Why the slice's objects were taught wrong (at least the config's share of its training objects annotated so,
    significantly more than of all objects), or None: a model learns the keypoints and masks it is shown, so these
    objects fail wherever they are annotated right."""
    from scipy.stats import binom

    mine = _taught_flags(bug, objects, train_mask)
    if mine is None or len(mine) < config.min_failures:
        return None
    everyone = _taught_flags(bug, objects, np.ones(len(objects.train_object), bool))
    share, overall = float(mine.mean()), float(everyone.mean())
    if share < getattr(config, TAUGHT_BUGS[bug].share) or (
            alpha < 1 and not binom.sf(mine.sum() - 1, len(mine), overall) < alpha):
        return None
    return (f"{len(mine)} in training, {share:.0%} of them {TAUGHT_BUGS[bug].annotated} in the training annotations "
            f"({overall:.0%} of all {objects.nouns}): {TAUGHT_BUGS[bug].consequence}")


def _fewer_annotated(objects: ObjectEvidence, train_mask: np.ndarray | None, config: DiagnosisConfig,
                     alpha: float) -> bool:
    from scipy.stats import binom

    train_rows = _training_rows(objects, train_mask, config)
    if alpha >= 1 or train_rows is None:
        return True  # no test asked, or read from the model's own boxes (no annotation counts)
    share, overall, count = _annotated_share(objects, train_rows, config)
    return bool(binom.cdf(round(share * count), count, overall) < alpha)


class _Classes:
    """Class names (labels, predictions) as codes of one vocabulary: a slice's most common one is a bincount of its
    codes, where a Counter of its names took a second a million rows, and the rest of the split is compared by code."""

    def __init__(self):
        self.names: list = []
        self._code: dict = {}

    def codes(self, values) -> np.ndarray:
        """Each value's code (every missing value one code)."""
        codes, uniques = pd.factorize(values if isinstance(values, pd.Series) else np.asarray(values, dtype=object),
                                      use_na_sentinel=False)
        own = np.array([self.code(value) for value in uniques], dtype=np.int64)
        return own[codes] if len(codes) else np.zeros(0, dtype=np.int64)

    def code(self, value) -> int:
        """The code of a name (a new one for a name not seen yet)."""
        key = _MISSING if pd.isna(value) else value
        if key not in self._code:
            self._code[key] = len(self.names)
            self.names.append(value)
        return self._code[key]

    def most_common(self, codes) -> tuple:
        """(name, count) of the most common code, the first seen of those tied (as Counter.most_common gives it);
        (None, 0) for none."""
        codes = np.asarray(codes, dtype=np.int64)
        if not len(codes):
            return None, 0
        counts = np.bincount(codes)
        tied = np.flatnonzero(counts == counts.max())
        first = tied[0] if len(tied) == 1 else codes[np.isin(codes, tied)][0]
        return self.names[first], int(counts[first])


_MISSING = object()  # the one key of every missing class name


class _Significance:
    """One-sided binomial tests of a slice's evidence against what the rest of the split shows (alpha 1: every test
    passes; a test with nothing to compare with passes too, the slice's own test having been made). Labels and
    predictions come as codes of `classes`."""

    def __init__(self, alpha: float, labels, predictions, errors, train_labels, classes: _Classes):
        self.alpha, self.classes = alpha, classes
        self.labels, self.predictions = labels, predictions
        self.failed = np.asarray(errors) > 0.5
        self.train_label_rate = _rates(train_labels) if train_labels is not None else {}

    def _more(self, count: int, n: int, rate: float | None) -> bool:
        from scipy.stats import binom

        return self.alpha >= 1 or rate is None or (n > 0 and bool(binom.sf(count - 1, n, rate) < self.alpha))

    def learnt(self, label, count: int, n: int) -> bool:
        """Training rows with the slice's tags are of `label` more often than training rows are."""
        return self._more(count, n, self.train_label_rate.get(self.classes.code(label), 0.0))

    def predicted_more(self, label, count: int, mask: np.ndarray) -> bool:
        """The slice is predicted `label` more often than the rest is wrongly predicted `label`."""
        code = self.classes.code(label)
        others = ~mask & (self.labels != code)
        rate = float((self.predictions[others] == code).mean()) if others.any() else None
        return self._more(count, int(mask.sum()), rate)

    def failures_predicted_more(self, label, count: int, mask: np.ndarray) -> bool:
        """The slice's failures are predicted `label` more often than the rest's failures are."""
        others = ~mask & self.failed
        rate = float((self.predictions[others] == self.classes.code(label)).mean()) if others.any() else None
        return self._more(count, int((mask & self.failed).sum()), rate)

    def rarer_in_training(self, train_count: int | None, n_train: int, eval_share: float) -> bool:
        """Fewer in training than its share of evaluation would give."""
        from scipy.stats import binom

        if self.alpha >= 1:
            return True
        return train_count is not None and n_train > 0 and bool(binom.cdf(train_count, n_train, eval_share)
                                                                < self.alpha)


def _rates(codes: np.ndarray) -> dict:
    """Each code's share of the rows."""
    if not len(codes):
        return {}
    counts = np.bincount(codes)
    return {int(code): counts[code] / len(codes) for code in np.flatnonzero(counts)}


def _training_rows(objects: ObjectEvidence, train_rows: np.ndarray | None,
                   config: DiagnosisConfig) -> np.ndarray | None:
    """The training rows the annotation evidence is read from: where the training annotations are known and these
    rows hold enough objects to tell; else None, and the model's own boxes on the evaluation rows are read."""
    if objects.annotated is None or train_rows is None or _annotated_share(objects, train_rows, config) is None:
        return None
    return train_rows


def _annotation_reason(bug: str, objects: ObjectEvidence, train_rows: np.ndarray | None, eval_rows: np.ndarray,
                       config: DiagnosisConfig) -> str:
    train_rows = _training_rows(objects, train_rows, config)
    if bug == "missing annotations":
        share, overall, count = _annotated_share(objects, train_rows, config)
        return (f"{count} in training images, but only {share:.0%} of them annotated in the training annotations "
                f"({overall:.0%} of all {objects.nouns})")
    ratio, usual = _box_ratios(objects, train_rows, eval_rows)
    if train_rows is not None:
        return (f"its training boxes cover {ratio:.0%} of its {objects.nouns}' area (median; {usual:.0%} for all "
                f"{objects.nouns})")
    return (f"the model's boxes cover {ratio:.0%} of its {objects.nouns}' area (median; {usual:.0%} for all "
            f"{objects.nouns}), as if taught with boxes of that size")


def _annotated_share(objects: ObjectEvidence, train_rows: np.ndarray,
                     config: DiagnosisConfig) -> tuple[float, float, int] | None:
    """(share of these training objects annotated, share of all, how many) with enough objects to tell, else None."""
    everyone = objects.train_object
    mine = train_rows & everyone
    if mine.sum() < config.min_failures:
        return None
    return float(objects.annotated[mine].mean()), float(objects.annotated[everyone].mean()), int(mine.sum())


def _box_ratios(objects: ObjectEvidence, train_rows: np.ndarray | None,
                eval_rows: np.ndarray | None) -> tuple[float, float]:
    """(median box ratio of these rows, of all): the training boxes' where training rows are given, else the model's."""
    if train_rows is not None:
        annotated = objects.train_object & objects.annotated
        return _median(objects.train_box_ratio[train_rows & annotated]), _median(objects.train_box_ratio[annotated])
    return _median(objects.eval_box_ratio[eval_rows]), _median(objects.eval_box_ratio)


def _annotation_evidence(bug: str, objects: ObjectEvidence, train_rows: np.ndarray | None, eval_rows: np.ndarray,
                         config: DiagnosisConfig) -> bool | None:
    """Whether these rows alone show the annotation bug (the test of _annotation_bug, failures aside): from their
    training annotations, else from the model's own boxes; None where they are too few to tell."""
    if bug in TAUGHT_BUGS:
        mine = _taught_flags(bug, objects, train_rows)
        if mine is None or len(mine) < config.min_failures:
            return None
        return bool(mine.mean() >= getattr(config, TAUGHT_BUGS[bug].share))
    train_rows = _training_rows(objects, train_rows, config)
    if train_rows is not None:
        share, overall, _ = _annotated_share(objects, train_rows, config)
        if bug == "missing annotations":
            return share <= config.missing_share and share <= overall - config.missing_gap
        return _off(*_box_ratios(objects, train_rows, None), config.box_factor)
    if np.isfinite(objects.eval_box_ratio[eval_rows]).sum() < config.min_failures:
        return None
    return bug == "bad boxes" and _off(*_box_ratios(objects, None, eval_rows), config.box_factor)


def explained_annotation_bugs(bug_types, definition_masks: list[np.ndarray], train_masks: list[np.ndarray] | None,
                              objects: ObjectEvidence | None, config: DiagnosisConfig = DiagnosisConfig(),
                              groups=None) -> list[int | None]:
    """Per slice, the slice whose annotation bug explains its own (None: none does). A slice's missing annotations
    or bad boxes are another's when that other slice (same bug type, same group) shows the bug without the first
    one's objects, and the first's own objects outside it, enough to tell, show it no more (wide objects at the top
    whose training boxes are shrunk only because half of them are cut by the border, whose boxes were shrunk). Of
    several, the broader (more training objects) explains it."""
    n = len(definition_masks)
    explained: list[int | None] = [None] * n
    if objects is None:
        return explained
    groups = list(groups) if groups is not None else [None] * n
    train = objects.train_object
    annotation = [i for i in range(n) if bug_types[i] in ANNOTATION_BUGS]
    size = {i: int((train_masks[i] & train).sum()) if train_masks else int(definition_masks[i].sum())
            for i in annotation}

    def without(i: int, j: int) -> bool | None:
        """Whether slice i's bug shows on its rows outside slice j (None: too few to tell)."""
        train_rows = train_masks[i] & ~train_masks[j] if train_masks is not None else None
        return _annotation_evidence(bug_types[i], objects, train_rows, definition_masks[i] & ~definition_masks[j],
                                    config)

    for i in annotation:  # only a broader slice explains a narrower one, so explanations never go round in a circle
        candidates = [j for j in annotation if (size[j], -j) > (size[i], -i) and bug_types[j] == bug_types[i]
                      and groups[j] == groups[i] and without(i, j) is False and without(j, i)]
        if candidates:
            explained[i] = max(candidates, key=lambda j: (size[j], -j))
    for i in range(n):  # a chain ends at the slice nothing explains
        while explained[i] is not None and explained[explained[i]] is not None:
            explained[i] = explained[explained[i]]
    return explained


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else np.nan


def _off(ratio: float, usual: float, factor: float) -> bool:
    """A median area ratio this far from 1 and from the usual one."""
    if not (np.isfinite(ratio) and np.isfinite(usual)):
        return False
    return (ratio <= 1 / factor or ratio >= factor) and abs(np.log(ratio / usual)) >= np.log(factor)


def rare_classes(train_labels: np.ndarray, eval_labels: np.ndarray, eval_errors: np.ndarray,
                 config: DiagnosisConfig = DiagnosisConfig()) -> pd.DataFrame:
    """Classes under `rare_share` of the training split, with their evaluation score."""
    vocabulary = _Classes()  # compared as codes: a Python set and == of ten million names took seconds
    train, evaluated = vocabulary.codes(train_labels), vocabulary.codes(eval_labels)
    train_counts = np.bincount(train, minlength=len(vocabulary.names))
    eval_counts = np.bincount(evaluated, minlength=len(vocabulary.names))
    rows = []
    for code in sorted(range(len(vocabulary.names)), key=lambda c: vocabulary.names[c]):
        label, train_count = vocabulary.names[code], int(train_counts[code])
        share = train_count / max(len(train), 1)
        rows.append({"class": label, "train_count": train_count, "train_share": share,
                     "eval_count": int(eval_counts[code]),
                     "eval_score": float(1 - eval_errors[evaluated == code].mean()) if eval_counts[code] else np.nan,
                     "rare": share < config.rare_share})
    return pd.DataFrame(rows)
