"""Error slices the validation set cannot show (HiBug2): tag substitution by text similarity, and an LLM's
instruction-based guesses; each prediction is checked against data where tags exist (pool counts, labelled
held-out scores)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import NOT_VISIBLE, AttributeSchema
from hibug_core.errors import TaggingError
from hibug_core.slices.report import SliceReport, one_row_per_bug
from hibug_core.slices.search import CLASS, describe, slice_id


@dataclass(frozen=True)
class UnseenConfig:
    top: int = 20  # error slices whose tags are substituted
    neighbours: int = 2  # most similar tags tried per (attribute = tag) pair
    min_similarity: float = 0.3  # cosine similarity of "attribute: tag" texts below which no substitution is made
    check_split: str = "test"  # labelled split where predictions are checked


def _check(report: SliceReport, definition, config: UnseenConfig) -> dict:
    """Counts in the evaluation, pool and check splits, and the observed scores where there are enough samples."""
    out = {}
    for split, labelled in ((report.split, True), ("pool", False), (config.check_split, True)):
        matrix, rows = (report.split_matrix(split, labelled) if split != report.split
                        else (report.tags, report.evaluation))
        mask = _mask(matrix, rows, definition)
        name = "eval" if split == report.split else ("pool" if split == "pool" else "check")
        out[f"n_{name}"] = int(mask.sum())
        if labelled:
            enough = mask.sum() >= report.config.min_support
            out[f"{name}_score"] = float(rows["score"].to_numpy(float)[mask].mean()) if enough else np.nan
    return out


def _mask(matrix, rows: pd.DataFrame, definition) -> np.ndarray:
    conditions = [(a, t) for a, t in definition if a != CLASS]
    mask = matrix.mask(conditions) if conditions else np.ones(len(rows), dtype=bool)
    for attribute, tag in definition:
        if attribute == CLASS:
            mask &= rows["label"].to_numpy(object) == tag
    return mask


def substitute_tags(report: SliceReport, config: UnseenConfig = UnseenConfig(), *, embed=None) -> pd.DataFrame:
    """Swap one tag of a top error slice for the most similar tags of the same attribute; the new slice is predicted
    to fail too, with the gap scaled by the similarity."""
    if embed is None:
        from hibug_core.embeddings.text import embed_texts as embed
    known = set(report.slices["slice_id"])
    rows, seen = [], set()
    similarity = {}
    for attribute, tags in zip(report.tags.attributes, report.tags.tags):
        usable = [t for t in tags if t != NOT_VISIBLE]
        vectors = embed([f"{attribute}: {t}" for t in usable]) if len(usable) > 1 else None
        similarity[attribute] = (usable, vectors @ vectors.T if vectors is not None else None)
    for _, source in report.slices.head(config.top).iterrows():
        for position, (attribute, tag) in enumerate(source["definition"]):
            usable, matrix = similarity[attribute]
            if matrix is None or tag not in usable:
                continue
            scores = matrix[usable.index(tag)]
            made = 0
            for other in np.argsort(-scores):
                if usable[other] == tag or scores[other] < config.min_similarity:
                    continue
                definition = tuple((a, usable[other]) if i == position else (a, t)
                                   for i, (a, t) in enumerate(source["definition"]))
                identifier = slice_id(definition)
                if identifier in known or identifier in seen:
                    continue
                seen.add(identifier)
                predicted = report.overall_score - float(scores[other]) * float(source["gap"])
                rows.append({"slice_id": identifier, "description": describe(definition), "definition": definition,
                             "method": "tag substitution", "source": source["description"],
                             "reason": f"'{usable[other]}' is like '{tag}' (similarity {scores[other]:.2f})",
                             "predicted_score": predicted, **_check(report, definition, config)})
                made += 1
                if made >= config.neighbours:
                    break
    return _finish(rows, report)


def _finish(rows: list[dict], report: SliceReport) -> pd.DataFrame:
    columns = ["slice_id", "description", "definition", "method", "source", "reason", "predicted_score", "n_eval",
               "eval_score", "n_pool", "n_check", "check_score"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["unseen"] = frame["n_eval"] < report.config.min_support
    return frame.sort_values(["unseen", "predicted_score"], ascending=[False, True], kind="stable",
                             na_position="last").reset_index(drop=True)


PREDICTION_PROMPT = """A {task} model is evaluated with these attributes (name: tags):
{attributes}
Its classes are: {classes}. Its worst slices on validation data are:
{slices}
List up to {count} other combinations likely to make the model fail, especially ones the validation data barely
contain: classes easily confused with each other, and attribute tags that blur the difference between them.
Answer with JSON: {{"slices": [{{"class": one class or null, "conditions": [{{"attribute": ..., "tag": ...}}],
"reason": short text}}]}}, using only the listed classes, attributes and tags."""


def predict_with_llm(report: SliceReport, schema: AttributeSchema, llm_config, *, classes: list[str], count: int = 10,
                     api_key: str | None = None, config: UnseenConfig = UnseenConfig()) -> pd.DataFrame:
    """Ask a language model for likely failure slices; invalid entries are dropped, each kept one is checked."""
    from hibug_core.llm.client import LLMAnswerError, LLMUnavailable, ask, make_client, parse_json_reply

    attributes = [a for a in schema.attributes if a.name in report.tags.attributes]
    shown = one_row_per_bug(report.slices)  # the model is told of each bug once, and not of slices on junk tags
    shown = shown[shown.get("trusted", pd.Series(True, index=shown.index)).astype(bool)]
    prompt = PREDICTION_PROMPT.format(
        task=schema.task or "image classification", classes=", ".join(classes), count=count,
        attributes="\n".join(f"- {a.name}: {', '.join(a.tags)}" for a in attributes),
        slices="\n".join(f"- {d} (score {s:.0%})" for d, s in
                         zip(shown["description"].head(10), shown["score"].head(10))) or "- none")
    client = make_client(llm_config, api_key)
    try:
        answer = ask(client, llm_config, [{"role": "user", "content": prompt}], parse=parse_json_reply,
                     format_hint="Answer with the JSON object described above.",
                     response_format={"type": "json_object"})
    except LLMAnswerError as error:
        raise TaggingError(f"the language model's answer could not be used: {error.problem}") from None
    except LLMUnavailable as error:
        raise TaggingError(str(error)) from None
    tags_of = {a.name: set(a.tags) for a in attributes}
    rows, seen = [], set()
    for item in answer.get("slices", []) if isinstance(answer.get("slices"), list) else []:
        if not isinstance(item, dict):
            continue
        definition = [(CLASS, item["class"])] if item.get("class") in classes else []
        conditions = item.get("conditions") if isinstance(item.get("conditions"), list) else []
        valid = [(c.get("attribute"), c.get("tag")) for c in conditions if isinstance(c, dict)
                 and c.get("tag") in tags_of.get(c.get("attribute"), ())]
        if not valid or len(valid) != len(conditions) or len({a for a, _ in valid}) != len(valid):
            continue
        definition = tuple(valid + definition)
        identifier = slice_id(definition)
        if identifier in seen:
            continue
        seen.add(identifier)
        rows.append({"slice_id": identifier, "description": describe(definition), "definition": definition,
                     "method": "llm", "source": llm_config.model, "reason": str(item.get("reason", ""))[:300],
                     "predicted_score": np.nan, **_check(report, definition, config)})
    return _finish(rows, report)


__all__ = ["CLASS", "UnseenConfig", "predict_with_llm", "substitute_tags"]
