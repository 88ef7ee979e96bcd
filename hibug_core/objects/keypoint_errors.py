"""Ronchi and Perona's keypoint error types (ICCV 2017): every labelled keypoint of a person a prediction went with is
good, jitter, inversion, swap or miss by its keypoint similarity; and the keypoint AP if each type were fixed."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

GOOD, JITTER, INVERSION, SWAP, MISS = "good", "jitter", "inversion", "swap", "miss"
KEYPOINT_TYPES = (GOOD, JITTER, INVERSION, SWAP, MISS)
KEYPOINT_ERRORS = KEYPOINT_TYPES[1:]
CODES = {GOOD: "g", JITTER: "j", INVERSION: "i", SWAP: "s", MISS: "m"}  # one letter per keypoint in the store
UNLABELLED_CODE, UNPREDICTED_CODE = "-", "."  # no true position to compare with; no prediction to type
TYPE_OF_CODE = {code: name for name, code in CODES.items()}
GOOD_SIMILARITY, NEAR_SIMILARITY = 0.85, 0.5  # Ronchi and Perona's thresholds on a keypoint's similarity
_SIDES = re.compile(r"^(left|right|l|r)(?=[ _\-.]|(?-i:[A-Z]))(.*)$", re.IGNORECASE)  # "l_knee", "leftKnee"


@dataclass(frozen=True)
class Skeleton:
    """A category's keypoints: their names, each one's left/right counterpart (itself when it has none), the limbs
    drawn between them and the OKS sigma of each."""

    names: tuple[str, ...]
    mirror: tuple[int, ...]
    limbs: tuple[tuple[int, int], ...]
    sigmas: tuple[float, ...]

    def __post_init__(self):
        k = len(self.names)
        if not (len(self.mirror) == len(self.sigmas) == k):
            raise ValueError(f"a skeleton of {k} keypoints needs {k} mirrors and {k} sigmas; "
                             f"got {len(self.mirror)} and {len(self.sigmas)}")
        if any(not 0 <= a < k or not 0 <= b < k for a, b in self.limbs):
            raise ValueError(f"limbs: every end is a keypoint index from 0 to {k - 1}")

    @classmethod
    def from_names(cls, names, sigmas, limbs=()) -> Skeleton:
        """The skeleton whose left/right pairs are read from the names ("left knee"/"right knee", "l_knee"/"r_knee",
        "leftKnee"/"rightKnee")."""
        names = tuple(names)
        return cls(names, mirror_pairs(names), tuple((int(a), int(b)) for a, b in limbs), tuple(map(float, sigmas)))


def sides(names) -> list[tuple[str, str] | None]:
    """Per keypoint name, its side ("l" or "r") and the part it names ("knee"), or None for a keypoint of no side."""
    found = [_SIDES.match(name.strip()) for name in names]
    return [(m.group(1).lower()[0], m.group(2).strip(" _-.").lower()) if m else None for m in found]


def mirror_pairs(names) -> tuple[int, ...]:
    """Per keypoint, the index of its counterpart on the other side of the body, or its own index."""
    keys = {key: i for i, key in enumerate(sides(names)) if key is not None}
    mirror = list(range(len(names)))
    for (side, part), i in keys.items():
        other = keys.get(("r" if side == "l" else "l", part))
        if other is not None:
            mirror[i] = other
    return tuple(mirror)


def similarity(points: np.ndarray, truth: np.ndarray, area: float, sigmas: np.ndarray) -> np.ndarray:
    """COCO's keypoint similarity of predicted points (..., k, 2) to true points (k, 2) of a person of `area`:
    exp(-d^2 / (2 * area * (2 sigma)^2)), as pycocotools computes it inside OKS."""
    d2 = ((np.asarray(points, np.float64) - np.asarray(truth, np.float64)) ** 2).sum(axis=-1)
    return np.exp(-d2 / (2.0 * (2.0 * np.asarray(sigmas)) ** 2 * (area + np.spacing(1))))


def keypoint_types(predicted: np.ndarray, truth: np.ndarray, area: float, others: list[tuple[np.ndarray, float]],
                   skeleton: Skeleton) -> tuple[np.ndarray, np.ndarray]:
    """(type per keypoint, similarity per keypoint) of one prediction (k, 2) of a person (truth (k, 3): x, y,
    visibility) of `area`, among the image's other people (their truth and area).

    A labelled keypoint is good at similarity 0.85 or more, jitter at 0.5 or more; below, it is an inversion when it
    lies on the person's own counterpart keypoint (left for right), a swap when it lies on that keypoint or its
    counterpart of another person (similarity 0.5 or more in their scale), else a miss. An unlabelled keypoint (v 0)
    has no type (""), and a similarity of NaN."""
    k = len(skeleton.names)
    other_truth = np.asarray([o for o, _ in others], np.float64).reshape(len(others), k, 3)
    types, values = _typed(np.asarray(predicted, np.float64)[None], np.asarray(truth, np.float64)[None],
                           np.array([area], np.float64), np.zeros(len(others), np.int64), other_truth,
                           np.array([a for _, a in others], np.float64), skeleton)
    return types[0], values[0]


def _typed(predicted: np.ndarray, truth: np.ndarray, areas: np.ndarray, other_of: np.ndarray,
           other_truth: np.ndarray, other_areas: np.ndarray, skeleton: Skeleton) -> tuple[np.ndarray, np.ndarray]:
    """keypoint_types of n people at once: predicted (n, k, 2), truth (n, k, 3), areas (n,); their neighbours as
    rows (m, k, 3) with areas (m,), other_of (m,) naming the person each neighbours."""
    sigmas = np.asarray(skeleton.sigmas, np.float64)
    mirror = np.asarray(skeleton.mirror)
    n, k = truth.shape[:2]
    labelled = truth[:, :, 2] > 0
    own = similarity(predicted, truth[:, :, :2], areas[:, None], sigmas)
    inverted = similarity(predicted, truth[:, mirror, :2], areas[:, None], sigmas[mirror]) * labelled[:, mirror]
    swapped = np.zeros((n, k))
    for order in (np.arange(k), mirror):
        seen = other_truth[:, order, 2] > 0
        near = similarity(predicted[other_of], other_truth[:, order, :2], other_areas[:, None], sigmas[order]) * seen
        np.maximum.at(swapped, other_of, near)
    types = np.full((n, k), MISS, dtype=object)
    types[swapped >= NEAR_SIMILARITY] = SWAP
    types[(inverted >= NEAR_SIMILARITY) & (mirror != np.arange(k))[None, :]] = INVERSION
    types[own >= NEAR_SIMILARITY] = JITTER
    types[own >= GOOD_SIMILARITY] = GOOD
    types[~labelled] = ""
    return types, np.where(labelled, own, np.nan)


def encode(types) -> str:
    """A person's keypoint types as one letter each ("gjjm-..."), as the store keeps them."""
    return "".join(CODES.get(t, UNLABELLED_CODE) for t in types)


def type_people(annotations: pd.DataFrame, detections: pd.DataFrame, pairs: pd.Series,
                skeleton: Skeleton) -> pd.DataFrame:
    """Per person (annotation id) a prediction went with (`pairs`: annotation id -> detection record), its keypoint
    types as letters, each keypoint's similarity, and the person's worst type (the commonest error, ties to the more
    severe: miss, swap, inversion, jitter; good when every labelled keypoint is)."""
    k = len(skeleton.names)
    people = annotations[annotations["keypoints"].notna() & (annotations["iscrowd"] == 0)]
    position = pd.Series(np.arange(len(people)), index=people["id"].to_numpy())
    truth = np.array(people["keypoints"].tolist(), np.float64).reshape(len(people), k, 3)
    areas = people["area"].to_numpy(np.float64)
    mine = position.reindex(pairs.index).to_numpy()
    predictions = detections["keypoints"].to_numpy(object)[pairs.to_numpy(np.int64)]
    predicted = np.array(predictions.tolist(), np.float64).reshape(len(pairs), k, 3)[:, :, :2]
    # Every (paired person, another person of their image): the people a keypoint may be swapped with.
    image_ids = people["image_id"].to_numpy()
    members = pd.DataFrame({"image": image_ids, "person": np.arange(len(people))})
    paired = pd.DataFrame({"image": image_ids[mine], "pair": np.arange(len(pairs))})
    neighbours = paired.merge(members, on="image")
    neighbours = neighbours[neighbours["person"].to_numpy() != mine[neighbours["pair"].to_numpy()]]
    other = neighbours["person"].to_numpy()
    types, values = _typed(predicted, truth[mine], areas[mine], neighbours["pair"].to_numpy(), truth[other],
                           areas[other], skeleton)
    index = pd.Index(list(pairs.index), name="annotation_id")
    return pd.DataFrame({"keypoint_types": pd.Series([encode(t) for t in types], index=index, dtype=object),
                         "keypoint_similarity": pd.Series(list(values), index=index, dtype=object),
                         "keypoint_error": pd.Series([person_type(t) for t in types], index=index, dtype=object)},
                        index=index)


def person_type(types) -> str:
    """The commonest error type among a person's keypoints (ties to the more severe), or good."""
    counts = Counter(t for t in types if t in KEYPOINT_ERRORS)
    if not counts:
        return GOOD
    most = max(counts.values())
    return next(t for t in reversed(KEYPOINT_ERRORS) if counts.get(t) == most)


def keypoint_mix(codes) -> pd.Series:
    """Share of each error type among the typed, failed keypoints of some people (their stored letters)."""
    letters = pd.Series(list("".join(c for c in codes if isinstance(c, str))), dtype=object)
    counts = letters.map(TYPE_OF_CODE).dropna().value_counts()
    counts = counts.reindex(list(KEYPOINT_ERRORS), fill_value=0)
    total = counts.sum()
    return counts / total if total else counts.astype(float)


def fixed_results(records: list[dict], pairs: pd.Series, codes: pd.Series, annotations: pd.DataFrame,
                  fixing: str) -> list[dict]:
    """The results records with one error type fixed: every keypoint of that type, in a prediction that went with a
    person, moved onto the person's true keypoint (Ronchi and Perona's correction)."""
    people = dict(zip(annotations["id"].tolist(), annotations["keypoints"].tolist()))
    code_of = dict(zip(codes.index.tolist(), codes.tolist()))
    letter = CODES[fixing]
    fixed = list(records)
    for annotation_id, record in zip(pairs.index.tolist(), pairs.tolist()):
        code = code_of.get(annotation_id)
        if not isinstance(code, str) or letter not in code:
            continue
        truth = people[annotation_id]
        points = list(fixed[int(record)]["keypoints"])
        for j, c in enumerate(code):
            if c == letter:
                points[3 * j], points[3 * j + 1] = truth[3 * j], truth[3 * j + 1]
        fixed[int(record)] = {**fixed[int(record)], "keypoints": points}
    return fixed


def keypoint_summary(codes: str) -> str:
    """A person's keypoint types counted: "12 good, 3 inversion, 2 not labelled"."""
    counts = pd.Series([TYPE_OF_CODE.get(c, "not labelled") for c in codes], dtype=object).value_counts()
    order = [*KEYPOINT_TYPES, "not labelled"]
    return ", ".join(f"{int(counts[k])} {k}" for k in order if k in counts)
