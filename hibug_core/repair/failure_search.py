"""Generative failure search (Wiles et al.): generate a class from a baseline prompt, caption the failures, keep the
captions whose images fail significantly more often, and refine them by dropping sentences and adjectives."""
from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from hibug_core.errors import HibugError, check_fields
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import LANGUAGE_MODEL, Registry
from hibug_core.repair.generators import Generator, ShapeWorldRenderer
from hibug_core.repair.selection import apportion
from hibug_core.stats import benjamini_hochberg

logger = logging.getLogger(__name__)

# And q_value. failures_go_to: the label the caption's failures are given most; target_rate: the share of its images
# given that label, and baseline_target_rate the baseline's (Wiles et al.'s target-label rate, their Eq. 2: a caption
# whose images are called another class far more often than the baseline's points at a spurious cue for that class).
TYPED = "typed by a person"  # the origin of a caption a person typed (others: "baseline", "failure", "refined")
COLUMNS = ["caption", "origin", "images", "failures", "failure_rate", "p_value", "significant", "failures_go_to",
           "target_rate", "baseline_target_rate"]
# Wiles et al.'s captioner: few-shot, each shot a caption of four to seven short sentences on the subject, its place
# relative to the camera and its background, and "forced" to complete the baseline prompt so that every caption names
# the true class. A chat model cannot be forced, so it is asked to go on from the prompt, and the prompt is put in
# front of whatever it writes (once).
CAPTION_SHOTS = (
    "a realistic photograph of a fly (insect). the background is blurred. the fly is in focus. it is on a yellow "
    "flower. the background is green.",
    "a realistic photograph of a mug. the mug is white. it is on a wooden table. it is seen from above. there is a "
    "laptop behind it.",
    "a realistic photograph of a heron (bird). the heron is standing in shallow water. it is seen from the side. the "
    "water is grey. there are reeds behind it.",
)
CAPTION_REQUEST = ("Go on with this caption of the image: {prompt}\nAdd three to six short sentences: the subject "
                   "(its colour, size and position relative to the camera), then the background or context. Plain "
                   "sentences, no lists. Examples of whole captions:\n{shots}\nAnswer with the sentences to add "
                   "only.")
# Words that are adjectives whatever the sentence (colour, size, texture, light); others are found by their suffix.
_ADJECTIVES = {"small", "large", "big", "tiny", "huge", "medium", "little", "tall", "short", "long", "wide", "narrow",
               "bright", "dark", "light", "pale", "black", "white", "red", "blue", "green", "yellow", "brown", "gray",
               "grey", "teal", "orange", "purple", "pink", "old", "young", "new", "round", "flat", "plain", "dense"}
_ADJECTIVE_SUFFIXES = ("ful", "ous", "ive", "less", "ish", "ic", "y")


class FailureSearchError(HibugError):
    """A failure search that cannot run (no classifier for the model, no failures to caption)."""


@dataclass(frozen=True)
class FailureSearchConfig:
    baseline_images: int = 64
    images_per_caption: int = 32
    captions: int = 8  # failures captioned (distinct captions are tested)
    alpha: float = 0.05  # one-sided Fisher exact test against the baseline's failure rate, FDR over all captions
    refine: bool = True
    caption_failures: bool = True  # off: only the captions a person typed are tested
    cluster: bool = False  # caption one failure per cluster of the failures' embeddings (Wiles et al.), not the first
    # An image fails when its label is not among the model's top_k classes (1: the first is wrong); Wiles et al.'s
    # footnote names "the true label is not in the top-k predicted labels" as their other definition of a failure.
    top_k: int = 1
    # Wiles et al. sample "until we gather 20 images that are misclassified as the target label": with target_errors,
    # each caption's images are drawn a batch at a time until that many are given `target` (any wrong class when
    # target is None), at most max_images; without it, one batch.
    target: str | None = None
    target_errors: int | None = None
    max_images: int = 1024
    seed: int = 0

    def __post_init__(self):
        check_fields(self, {
            **{name: (getattr(self, name) >= 1, "1 or more") for name in
               ("baseline_images", "images_per_caption", "captions", "top_k")},
            "target_errors": (self.target_errors is None or self.target_errors >= 1, "None or 1 or more"),
            "max_images": (self.max_images >= max(self.baseline_images, self.images_per_caption),
                           "at least baseline_images and images_per_caption")})


class Captioner(Protocol):
    name: str

    def caption(self, image, prompt: str, seed: int) -> str: ...


class RendererCaption:
    """The shape-world renderer's own description of what it drew: the demo's offline stand-in for a captioning
    model (exact, unlike a real one)."""

    name = "shape-world renderer's scene description"

    def caption(self, image, prompt: str, seed: int) -> str:
        return ShapeWorldRenderer.describe(prompt, seed)


class LLMCaptioner:
    """Captions from a multimodal language model through the OpenAI-compatible client."""

    def __init__(self, config, api_key: str | None = None):
        from hibug_core.llm.client import make_client

        self.config = config
        self.client = make_client(config, api_key)
        self.name = config.describe()

    def caption(self, image, prompt: str, seed: int) -> str:
        from hibug_core.llm.client import LLMAnswerError, LLMUnavailable, ask, image_data_url

        def one_line(content: str) -> str:
            if not content.strip():
                raise ValueError("the caption was empty")
            return " ".join(content.split())

        request = CAPTION_REQUEST.format(prompt=prompt, shots="\n".join(f"- {shot}" for shot in CAPTION_SHOTS))
        messages = [{"role": "user", "content": [{"type": "text", "text": request},
                                                 {"type": "image_url", "image_url": {"url": image_data_url(image)}}]}]
        try:
            added = ask(self.client, self.config, messages, parse=one_line, format_hint="Answer with a few short "
                        "sentences about the image.")
        except (LLMAnswerError, LLMUnavailable) as error:
            raise FailureSearchError(f"could not caption with {self.name}: {error}") from None
        return completed(prompt, added)


CAPTIONERS = Registry("captioner")  # each: (settings: where the language model is, LLMSettings) -> a Captioner
CAPTIONERS.add("renderer", "the shape-world renderer's scene description (the demo's offline captioner)",
               lambda settings: RendererCaption())
CAPTIONERS.add("llm", "a multimodal language model (OpenAI-compatible)",
               lambda settings: LLMCaptioner(settings.llm_config()), secret="OPENAI_API_KEY", needs=(LANGUAGE_MODEL,))


@dataclass
class FailureSearchOutcome:
    """A failure search's table (COLUMNS, the baseline first) in words: what the job says, the command line prints and
    the Repair page shows, written once."""

    label: str
    table: pd.DataFrame

    @classmethod
    def stored(cls, result: dict) -> FailureSearchOutcome:
        """From a stored run's result (hibug_core.repair.runs)."""
        return cls(result["label"], pd.DataFrame(result["table"]))

    @property
    def significant(self) -> int:
        return int(self.table["significant"].sum())

    def headline(self) -> str:
        return (f"{len(self.table) - 1} captions of {self.label} tested; {self.significant} make the model fail "
                "significantly more often than the baseline prompt (FDR 5% over every caption tested).")

    def summary(self) -> str:
        """The headline, then the verdict on each caption a person typed."""
        return " ".join([self.headline(), *(text for _, text in self.verdicts())])

    def verdicts(self, quote: Callable[[str], str] = str) -> list[tuple[bool, str]]:
        """(significant, the verdict in words) for each caption a person typed; `quote` renders what came from
        outside (the caption, a label), e.g. escaped for Markdown."""
        baseline = self.table.iloc[0]
        said = []
        for row in self.table[self.table["origin"] == TYPED].itertuples():
            how = "significantly more often" if row.significant else "not significantly more often"
            goes = getattr(row, "failures_go_to", None)
            target = (f" Most of its failures are called '{quote(goes)}': {row.target_rate:.0%} of its images, against "
                      f"{row.baseline_target_rate:.0%} of the baseline's." if isinstance(goes, str) else "")
            said.append((bool(row.significant), f"Your caption '{quote(row.caption)}': {row.failures} of {row.images} "
                         f"images fail ({row.failure_rate:.0%}), {how} than the baseline's "
                         f"{baseline['failure_rate']:.0%} "
                         f"(q = {row.q_value:.3f}).{target}"))
        return said

    def lines(self) -> list[str]:
        """One line per caption, the significant ones marked, and the key."""
        lines = []
        for row in self.table.to_dict("records"):
            mark = "*" if row["significant"] else " "
            typed = "  (typed)" if row["origin"] == TYPED else ""
            goes = (f"  -> '{row['failures_go_to']}' {row['target_rate']:.0%} (baseline "
                    f"{row['baseline_target_rate']:.0%})" if isinstance(row.get("failures_go_to"), str) else "")
            lines.append(f"{mark} {row['failure_rate']:6.1%} ({row['failures']}/{row['images']})  {row['caption']}"
                         f"{typed}{goes}")
        return lines + ["* failure rate significantly above the baseline (first row), FDR 5% over every caption "
                        "tested; -> the label most of its failures are given, the share of its images given it and of "
                        "the baseline's"]


def completed(prompt: str, added: str) -> str:
    """The baseline prompt completed by a captioner's sentences (Wiles et al.: every caption starts with the prompt,
    so it names the true class), the prompt written once even when the captioner repeated it."""
    prompt = " ".join(prompt.split())
    if added.lower().startswith(prompt.lower()):
        added = added[len(prompt):]
    return f"{prompt} {added.strip()}".strip()


def sentences(caption: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", caption.strip()) if s.strip()]


def is_adjective(word: str) -> bool:
    plain = word.lower().strip(".,;:!?")
    return plain in _ADJECTIVES or (len(plain) > 4 and plain.endswith(_ADJECTIVE_SUFFIXES))


def reductions(caption: str, label: str) -> list[str]:
    """Shorter captions that still name `label`: each sentence dropped (when there are several), then each
    adjective dropped."""
    parts = sentences(caption)
    shorter = [" ".join(parts[:i] + parts[i + 1:]) for i in range(len(parts))] if len(parts) > 1 else []
    words = caption.split()
    for i, word in enumerate(words):
        if is_adjective(word):
            shorter.append(" ".join(words[:i] + words[i + 1:]))
    keep = re.compile(rf"\b{re.escape(label.lower())}", re.IGNORECASE)
    return list(dict.fromkeys(s for s in shorter if s and s != caption and keep.search(s)))


def typed_captions(captions, label: str) -> list[str]:
    """A person's captions, stripped and once each; each must name the class, since the generator draws what it
    says (FailureSearchError names the one that does not)."""
    typed = list(dict.fromkeys(" ".join(c.split()) for c in captions or () if c and c.strip()))
    named = re.compile(rf"\b{re.escape(label.lower())}", re.IGNORECASE)
    for caption in typed:
        if not named.search(caption):
            raise FailureSearchError(f"the caption '{caption}' does not name the class '{label}': the generator draws "
                                     "what a caption says, so write it about that class")
    return typed


def failures_to_caption(failed: np.ndarray, images: list, count: int, embed: Callable[[list], np.ndarray] | None,
                        seed: int, predicted: np.ndarray | None = None) -> list[int]:
    """Which of the `failed` positions to caption: the first `count`, or with `embed` one per cluster of their
    embeddings, the failure nearest each centre, the largest cluster first. With `predicted` (each image's predicted
    label), as Wiles et al. do: the failures are split by predicted label first and each group clustered apart, the
    `count` clusters shared among the groups by their size (largest remainders, at least one for each while any are
    left), largest group first."""
    if embed is None or len(failed) <= count:
        return [int(i) for i in failed[:count]]
    if predicted is None:
        return _nearest_centres(failed, images, count, embed, seed)
    labels = np.asarray(predicted, dtype=object)[failed].astype(str)
    groups = pd.Series(labels).groupby(labels, sort=True).indices
    ordered = sorted(groups, key=lambda g: (-len(groups[g]), g))
    sizes = np.array([len(groups[g]) for g in ordered])
    first = (np.arange(len(sizes)) < count).astype(int)  # one each while any are left, the rest by size
    shares = first + apportion(sizes, count - int(first.sum()), sizes - first)
    chosen = []
    for group, share in zip(ordered, shares):
        if share:
            chosen += _nearest_centres(failed[groups[group]], images, share, embed, seed)
    return chosen


def _nearest_centres(failed: np.ndarray, images: list, count: int, embed: Callable[[list], np.ndarray],
                     seed: int) -> list[int]:
    """One failure per k-means cluster of their embeddings (k = count), nearest its centre, the largest first."""
    if len(failed) <= count:
        return [int(i) for i in failed]
    from sklearn.cluster import KMeans

    vectors = np.asarray(embed([images[i] for i in failed]), dtype=np.float64)
    clusters = KMeans(n_clusters=count, n_init=10, random_state=seed).fit(vectors)
    chosen = []
    for cluster in np.argsort(-np.bincount(clusters.labels_, minlength=count), kind="stable"):
        members = np.flatnonzero(clusters.labels_ == cluster)
        nearest = members[np.argmin(((vectors[members] - clusters.cluster_centers_[cluster]) ** 2).sum(axis=1))]
        chosen.append(int(failed[nearest]))
    return chosen


def ranked_classes(answers) -> list[list[str]]:
    """A predictor's answers as each image's classes, most probable first (an answer may be one class name)."""
    return [[answer] if isinstance(answer, str) else list(answer) for answer in answers]


def failure_search(generator: Generator, predict: Callable[[list], list[str]], captioner: Captioner, label: str, *,
                   baseline_prompt: str | None = None, typed: list[str] | None = None,
                   embed: Callable[[list], np.ndarray] | None = None,
                   config: FailureSearchConfig = FailureSearchConfig(),
                   progress: ProgressCallback = no_progress) -> pd.DataFrame:
    """Captions of `label` images the model fails on, and the captions a person `typed`, each tested on new images
    generated from it: one row per tested caption (the baseline first), significant ones refined.
    predict(images) -> per image its predicted class name, or its class names most probable first (what
    config.top_k reads); embed(images) -> vectors, to cluster the failures (config.cluster) within each predicted
    label."""
    # 1. Check the inputs.
    typed = typed_captions(typed, label)
    if not config.caption_failures and not typed:
        raise FailureSearchError("nothing to test: type a caption, or let the search caption the failures")
    if config.cluster and embed is None:
        raise FailureSearchError("clustering the failures needs an image encoder to embed them")
    if config.target is not None and config.target == label:
        raise FailureSearchError(f"the target label must be another class than '{label}': the one the failures "
                                 "should be called")
    baseline_prompt = baseline_prompt or f"A photo of a {label}"
    seed_counter = iter(range(config.seed * 1_000_003, config.seed * 1_000_003 + 10_000_000))
    tested: dict[str, dict] = {}

    def draw(caption: str, n: int) -> tuple[list, list, list]:
        seeds = [next(seed_counter) for _ in range(n)]
        images = generator.generate([caption] * n, seeds)
        ranked = ranked_classes(predict(images))
        if config.top_k > 1 and any(len(r) < config.top_k for r in ranked):
            raise FailureSearchError(f"top_k = {config.top_k} needs the model's {config.top_k} most probable classes; "
                                     "this model gives fewer")
        return seeds, images, ranked

    def test(caption: str, n: int, origin: str) -> dict:
        if caption in tested:
            return tested[caption]
        seeds, images, ranked = draw(caption, n)
        while config.target_errors is not None and len(images) + n <= config.max_images:
            gathered = sum(r[0] == config.target if config.target else label not in r[:config.top_k] for r in ranked)
            if gathered >= config.target_errors:
                break
            more = draw(caption, n)
            seeds, images, ranked = seeds + more[0], images + more[1], ranked + more[2]
        n = len(images)
        predicted = np.array([r[0] for r in ranked], dtype=object)
        wrong = np.array([label not in r[:config.top_k] for r in ranked], dtype=bool)
        row = {"caption": caption, "origin": origin, "images": n, "failures": int(wrong.sum()),
               "failure_rate": float(wrong.mean()), "_images": images, "_seeds": seeds, "_wrong": wrong,
               "_predicted": predicted}
        tested[caption] = row
        progress("testing captions", len(tested), len(tested) + 1)
        return row

    # 2. The baseline: how often the class's plain prompt fails.
    base = test(baseline_prompt, config.baseline_images, "baseline")
    if not base["failures"] and config.caption_failures and not typed:
        raise FailureSearchError(f"none of {base['images']} images of '{baseline_prompt}' fails; there is nothing to "
                                 "caption (try another class or more images)")

    def significant(row: dict) -> tuple[float, bool]:
        from scipy.stats import fisher_exact  # here: scipy.stats takes 1-2 s to import, which every command paid

        table = [[row["failures"], row["images"] - row["failures"]],
                 [base["failures"], base["images"] - base["failures"]]]
        p = float(fisher_exact(table, alternative="greater")[1])
        return p, p < config.alpha

    def tested_and_refined(caption: str, origin: str) -> None:
        row = test(caption, config.images_per_caption, origin)
        row["p_value"], row["significant"] = significant(row)
        current = row
        while config.refine and current["significant"]:
            options = [test(c, config.images_per_caption, f"refined from: {current['caption']}")
                       for c in reductions(current["caption"], label)]
            for option in options:
                option["p_value"], option["significant"] = significant(option)
            kept = [o for o in options if o["significant"]]
            if not kept:
                break
            current = max(kept, key=lambda o: (o["failure_rate"], -len(o["caption"])))

    # 3. The captions a person typed, then the captions of the baseline's failures, each tested and refined.
    for caption in typed:
        tested_and_refined(caption, TYPED)
    if config.caption_failures:
        chosen = failures_to_caption(np.flatnonzero(base["_wrong"]), base["_images"], config.captions,
                                     embed if config.cluster else None, config.seed, base["_predicted"])
        for caption in dict.fromkeys(captioner.caption(base["_images"][i], baseline_prompt, base["_seeds"][i])
                                     for i in chosen):
            tested_and_refined(caption, "caption of a failure")
    # 4. What it reports is corrected for every caption it tested (the search steers by raw p-values), with the
    # label each caption's failures go to.
    base["p_value"], base["significant"] = np.nan, False
    for row in tested.values():
        row.update(target_label_rates(row["_predicted"], row["_wrong"], base["_predicted"]))
    table = pd.DataFrame([{k: v for k, v in row.items() if not k.startswith("_")} for row in tested.values()],
                         columns=COLUMNS)
    others = table["origin"] != "baseline"
    table["q_value"] = np.nan
    table.loc[others, "q_value"] = benjamini_hochberg(table.loc[others, "p_value"].to_numpy(float))
    table["significant"] = table["q_value"] < config.alpha
    # the baseline, then the typed captions, then the rest: significant first, by failure rate
    order = np.where(table["origin"] == "baseline", 0, np.where(table["origin"] == TYPED, 1, 2))
    return table.assign(_o=order).sort_values(["_o", "significant", "failure_rate"], ascending=[True, False, False],
                                              kind="stable").drop(columns="_o").reset_index(drop=True)


def target_label_rates(predicted: np.ndarray, wrong: np.ndarray, baseline_predicted: np.ndarray) -> dict:
    """The label most of the failures are given (ties: the first in name order; None without failures), the share
    of all the images given it, and the share of the baseline's images given it."""
    if not wrong.any():
        return {"failures_go_to": None, "target_rate": np.nan, "baseline_target_rate": np.nan}
    labels, counts = np.unique(predicted[wrong].astype(str), return_counts=True)
    target = str(labels[np.argmax(counts)])
    return {"failures_go_to": target, "target_rate": float(np.mean(predicted.astype(str) == target)),
            "baseline_target_rate": float(np.mean(baseline_predicted.astype(str) == target))}


def encoder_embedding(spec: str) -> Callable[[list], np.ndarray]:
    """embed(images) -> the L2-normalised embeddings of PIL images by the encoder `spec` (see ENCODERS)."""
    import torch

    from hibug_core.embeddings.registry import load_encoder

    encoder = load_encoder(spec)

    def embed(images: list) -> np.ndarray:
        batch = torch.stack([encoder.transform(image.convert("RGB")) for image in images])
        return encoder.encode_images(batch)["embedding"]

    return embed


def network_predictor(project, model: str) -> Callable[[list], list[list[str]]]:
    """predict(images) -> per image its class names, most probable first, with the network behind `model` (one
    `hibug predict` ran, or the demo CNN)."""
    from hibug_core.repair.retrain import model_network

    adapter = model_network(project, model)
    if adapter is None:
        raise FailureSearchError(f"hibug cannot run '{model}' (imported predictions), so new images cannot be "
                                 "classified; run your network with `hibug predict --model SPEC` and search that model")

    def predict(images: list) -> list[list[str]]:  # each image's classes, most probable first
        return [[adapter.classes[int(i)] for i in np.argsort(-np.asarray(p), kind="stable")]
                for p in adapter.predict(images)]

    return predict
