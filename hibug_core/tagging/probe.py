"""Tags taught by example: a person marks a few images per tag; a linear probe on stored embeddings tags the rest."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hibug_core.attributes.schema import Attribute
from hibug_core.errors import TaggingError
from hibug_core.store.tag_store import TagResult


@dataclass(frozen=True)
class ProbeConfig:
    """The probe is a logistic regression on standardised features; CV folds as many as the rarest tag allows."""

    regularization: float = 1.0  # inverse strength C of the L2 penalty
    max_folds: int = 5
    min_examples_per_tag: int = 2
    seed: int = 0


@dataclass(frozen=True)
class ProbeReport:
    attribute: str
    examples: dict[str, int]  # examples per tag
    cv_accuracy: float  # mean accuracy over the folds (nan with fewer than 2 folds possible)
    cv_std: float
    folds: int


def _pipeline(config: ProbeConfig):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=config.regularization, max_iter=2000,
                                                              class_weight="balanced"))


def teach_probe(attribute: Attribute, features: np.ndarray, sample_ids: np.ndarray, examples: dict[int, str],
                config: ProbeConfig = ProbeConfig()) -> tuple[TagResult, ProbeReport]:
    """Fit on the examples (sample id -> tag), report cross-validated accuracy, tag every sample."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    unknown = sorted({t for t in examples.values() if t not in attribute.tags})
    if unknown:
        raise TaggingError(f"examples use tags that '{attribute.name}' does not have: {', '.join(unknown)}")
    counts = {tag: sum(1 for t in examples.values() if t == tag) for tag in attribute.tags}
    taught = [t for t, c in counts.items() if c > 0]
    short = [t for t in taught if counts[t] < config.min_examples_per_tag]
    if len(taught) < 2 or short:
        raise TaggingError(f"teach '{attribute.name}' at least {config.min_examples_per_tag} examples of at least two "
                           f"tags; now: " + ", ".join(f"{t}: {c}" for t, c in counts.items()))
    row_of = {int(s): i for i, s in enumerate(sample_ids)}
    missing = [s for s in examples if int(s) not in row_of]
    if missing:
        raise TaggingError(f"example sample {missing[0]} has no embedding in this set; embed it first")
    rows = np.array([row_of[int(s)] for s in examples])
    targets = np.array([attribute.tags.index(t) for t in examples.values()])
    folds = min(config.max_folds, min(counts[t] for t in taught))
    if folds >= 2:
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=config.seed)
        scores = cross_val_score(_pipeline(config), features[rows], targets, cv=splitter)
        accuracy, spread = float(scores.mean()), float(scores.std())
    else:
        accuracy = spread = float("nan")
    probe = _pipeline(config).fit(features[rows], targets)
    probabilities = probe.predict_proba(features)
    ordered = np.sort(probabilities, axis=1)
    second = ordered[:, -2] if probabilities.shape[1] > 1 else np.zeros(len(features))
    chosen = probe.classes_[probabilities.argmax(axis=1)].astype(np.int16)
    result = TagResult(np.asarray(sample_ids, dtype=np.int64), {attribute.name: attribute.tags}, chosen[:, None],
                       ordered[:, -1:].astype(np.float32), (ordered[:, -1] - second)[:, None].astype(np.float32))
    return result, ProbeReport(attribute.name, counts, accuracy, spread, folds)
