"""Zero-shot tagging: prompt-ensembled text embeddings per tag, softmax over an attribute's tags per image."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hibug_core.attributes.schema import Attribute
from hibug_core.cache import BoundedCache
from hibug_core.embeddings.base import Encoder, normalize_rows
from hibug_core.store.tag_store import TagResult


@dataclass(frozen=True)
class ZeroShotConfig:
    """Defaults of zero-shot tagging."""

    uncertain_margin: float = 0.1  # top-1 minus top-2 probability below this: flagged uncertain (TagTable.uncertain)
    label_fallback: str = "object"  # the noun in prompts for images with neither a label nor a prediction
    use_label: bool = True  # put each image's class (label, else prediction) into its prompts


class TextEmbeddings:
    """Text embeddings of one encoder, computed once per distinct prompt (an attribute edit re-encodes only its own);
    kept in the process-wide PROMPTS cache, so a long session's prompts stay bounded."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder

    def __call__(self, prompts: list[str]) -> np.ndarray:
        key = self.encoder.key
        new = [p for p in dict.fromkeys(prompts) if (key, p) not in PROMPTS]
        encoded = dict(zip(new, self.encoder.encode_texts(new))) if new else {}  # one batch for every new prompt
        return np.stack([PROMPTS.get_or_make((key, p), lambda p=p: encoded[p] if p in encoded else
                                             self.encoder.encode_texts([p])[0]) for p in prompts])


PROMPTS = BoundedCache("prompt embeddings", max_items=200_000)


def text_embeddings(encoder: Encoder) -> TextEmbeddings:
    return TextEmbeddings(encoder)


def tag_classifier(attribute: Attribute, label: str, encode: TextEmbeddings) -> np.ndarray:
    """(tags, d): per tag the normalised mean of its prompts' embeddings (prompt ensembling)."""
    per_tag = attribute.prompts(label)
    flat = encode([p for prompts in per_tag for p in prompts])
    bounds = np.cumsum([0] + [len(p) for p in per_tag])
    return normalize_rows(np.stack([flat[a:b].mean(axis=0) for a, b in zip(bounds[:-1], bounds[1:])]))


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def zero_shot_tags(sample_ids: np.ndarray, embedding: np.ndarray, labels: np.ndarray, attributes: list[Attribute],
                   encoder: Encoder, config: ZeroShotConfig = ZeroShotConfig()) -> TagResult:
    """Tag every image with every attribute; `labels` gives each image's class noun (or None)."""
    n = len(sample_ids)
    nouns = np.array([config.label_fallback if (not config.use_label or lab is None or lab != lab) else str(lab)
                      for lab in labels], dtype=object)
    encode = text_embeddings(encoder)
    groups = {noun: np.flatnonzero(nouns == noun) for noun in dict.fromkeys(nouns)}
    grouped = {noun: embedding[rows] for noun, rows in groups.items()}  # gathered once, not per attribute
    tag_index = np.full((n, len(attributes)), -1, dtype=np.int16)
    score = np.full((n, len(attributes)), np.nan, dtype=np.float32)
    margin = np.full((n, len(attributes)), np.nan, dtype=np.float32)
    for column, attribute in enumerate(attributes):
        for noun, rows in groups.items():
            probabilities = softmax(encoder.logit_scale * (grouped[noun] @ tag_classifier(attribute, noun, encode).T))
            top_two = np.sort(probabilities, axis=1)[:, -2:]
            tag_index[rows, column] = probabilities.argmax(axis=1)
            score[rows, column] = top_two[:, 1]
            margin[rows, column] = top_two[:, 1] - top_two[:, 0]
    return TagResult(np.asarray(sample_ids, dtype=np.int64), {a.name: a.tags for a in attributes}, tag_index, score,
                     margin)
