"""Error slices the validation set cannot show (HiBug2): tag substitution by text similarity, and a language model's
guesses by instruction; each prediction is checked against data where tags exist (pool counts, labelled
held-out scores)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core import metrics
from hibug_core.attributes.schema import NOT_VISIBLE, AttributeSchema
from hibug_core.errors import TaggingError
from hibug_core.registry import LANGUAGE_MODEL, Registry
from hibug_core.slices.report import SliceError, SliceReport, one_row_per_bug
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


PREDICTION_PROMPT = """A model for {task_name} ({task}) is evaluated on {samples} described by these attributes
(name: tags):
{attributes}
Its classes are: {classes}.{findings}
List up to {count} combinations likely to make such a model fail, especially ones validation data seldom contain.
Look for {likely}.
Answer with JSON: {{"slices": [{{"class": one class or null, "conditions": [{{"attribute": ..., "tag": ...}}],
"reason": short text}}]}}, using only the listed classes, attributes and tags."""

# HiBug2's instruction is few-shot: worked examples unlike any project's, shown before the question (a bird classifier,
# a vehicle detector, a pose model of athletes).
EXAMPLES = (
    (dict(task_name="classification", task="classify bird species", samples="images",
          classes="sparrow, finch, warbler",
          attributes={"background": ["sky", "branch", "feeder", "water"], "bird size": ["small", "large"],
                      "lighting": ["bright", "dim"]},
          likely="classes easily confused with each other, and tags that blur the difference between them"),
     [{"class": "warbler", "conditions": [{"attribute": "background", "tag": "feeder"}],
       "reason": "feeders are where finches are photographed; a warbler there looks like a finch"},
      {"class": "sparrow", "conditions": [{"attribute": "lighting", "tag": "dim"},
                                          {"attribute": "bird size", "tag": "small"}],
       "reason": "small birds in dim light lose the streaks that tell sparrows from finches"}]),
    (dict(task_name="detection", task="detect vehicles in street scenes", samples="objects",
          classes="car, truck, bicycle",
          attributes={"occlusion": ["none", "partial", "heavy"], "time of day": ["day", "night"],
                      "object size": ["small", "medium", "large"]},
          likely="objects the detector is likely to miss or to box badly: small, occluded or crowded objects"),
     [{"class": "bicycle", "conditions": [{"attribute": "occlusion", "tag": "heavy"}],
       "reason": "a bicycle's thin frame disappears behind parked cars"},
      {"class": None, "conditions": [{"attribute": "time of day", "tag": "night"},
                                     {"attribute": "object size", "tag": "small"}],
       "reason": "small objects at night are a few dark pixels"}]),
    (dict(task_name="pose", task="estimate the pose of athletes", samples="people",
          classes="person",
          attributes={"activity": ["running", "swimming", "gymnastics"], "view": ["front", "side", "back"]},
          likely="people whose keypoints the model is likely to miss or swap: unusual poses, people seen from behind"),
     [{"class": None, "conditions": [{"attribute": "activity", "tag": "gymnastics"},
                                     {"attribute": "view", "tag": "back"}],
       "reason": "upside-down bodies seen from behind invert left and right"}]),
)


def _prompt(task_name: str, task: str, samples: str, classes: str, attributes: dict[str, list], count: int,
            likely: str, findings: str = "") -> str:
    return PREDICTION_PROMPT.format(
        task_name=task_name, task=task, samples=samples, classes=classes, count=count, likely=likely,
        findings=findings, attributes="\n".join(f"- {name}: {', '.join(tags)}" for name, tags in attributes.items()))


def prediction_messages(report: SliceReport, schema: AttributeSchema, task, classes: list[str], count: int, *,
                        findings: bool = False) -> list[dict]:
    """HiBug2's instruction for unseen slices, in the task's words (tasks.Task.likely_failures): the attributes and
    tags and the classes, asked few-shot and "without any prior information about the model" (HiBug2, 4.2). With
    `findings` (hibug's variant, "instruction with findings"), asked without examples and told each trusted bug the
    validation set shows, once."""
    attributes = {a.name: list(a.tags) for a in schema.attributes if a.name in report.tags.attributes}
    question = dict(task_name=task.name, task=schema.task or task.help, samples=task.nouns.samples,
                    classes=", ".join(classes), attributes=attributes, count=count, likely=task.likely_failures)
    if findings:
        shown = one_row_per_bug(report.slices)  # the model is told of each bug once, and not of slices on junk tags
        shown = shown[shown.get("trusted", pd.Series(True, index=shown.index)).astype(bool)]
        worst = "\n".join(f"- {d} (score {s:.0%})" for d, s in
                          zip(shown["description"].head(10), shown["score"].head(10))) or "- none"
        return [{"role": "user", "content": _prompt(**question, findings=f" Its worst slices on validation data "
                                                                          f"are:\n{worst}")}]
    shots = []
    for example, answer in EXAMPLES:
        shots += [{"role": "user", "content": _prompt(**example, count=count)},
                  {"role": "assistant", "content": json.dumps({"slices": answer})}]
    return [*shots, {"role": "user", "content": _prompt(**question)}]


def predict_with_llm(report: SliceReport, schema: AttributeSchema, llm_config, *, task, classes: list[str],
                     count: int = 10, api_key: str | None = None, findings: bool = False,
                     config: UnseenConfig = UnseenConfig()) -> pd.DataFrame:
    """Ask a language model for likely failure slices (HiBug2's prediction by instruction); each usable one is checked
    on the data that match it. What cannot be used is not kept: the frame's attrs["dropped"] says why, one line per
    answer left out. TaggingError when the answer is not JSON or the server cannot be reached."""
    from hibug_core.llm.client import LLMAnswerError, LLMUnavailable, ask, make_client, parse_json_reply

    messages = prediction_messages(report, schema, task, classes, count, findings=findings)
    client = make_client(llm_config, api_key)
    try:
        answer = ask(client, llm_config, messages, parse=parse_json_reply,
                     format_hint="Answer with the JSON object described above.",
                     response_format={"type": "json_object"})
    except LLMAnswerError as error:
        raise TaggingError(f"the language model's answer could not be used: {error.problem}") from None
    except LLMUnavailable as error:
        raise TaggingError(str(error)) from None
    tags_of = {a.name: set(a.tags) for a in schema.attributes if a.name in report.tags.attributes}
    items = answer.get("slices") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise TaggingError('the language model\'s answer has no "slices" list; nothing was predicted')
    rows, seen, dropped = [], set(), []
    for number, item in enumerate(items[:count * 2], start=1):
        definition, why = _usable(item, tags_of, classes)
        identifier = slice_id(definition) if definition else None
        if definition and identifier in seen:
            why = "it repeats an earlier answer"
        if why:
            dropped.append(f"answer {number}: {why}")
            continue
        seen.add(identifier)
        rows.append({"slice_id": identifier, "description": describe(definition), "definition": definition,
                     "method": "instruction with findings" if findings else "instruction",
                     "source": llm_config.model, "reason": str(item.get("reason", ""))[:300],
                     "predicted_score": np.nan, **_check(report, definition, config)})
    if len(items) > count * 2:
        dropped.append(f"{len(items) - count * 2} answers beyond the {count * 2} read")
    frame = _finish(rows, report)
    frame.attrs["dropped"] = dropped
    return frame


def how_they_fail(predicted: pd.DataFrame, report: SliceReport, config: UnseenConfig = UnseenConfig()) -> dict:
    """HiBug2's Table 1 measure: the mean score on the check split over the predicted slices it holds enough of
    (`scored` of them), against the model's score on the whole check split; `relative_change` is the paper's figure
    (the mean over the whole, less 1: -0.184 reads "-18.4%"), `points` the same gap in points."""
    scored = predicted["check_score"].dropna()
    mean = float(scored.mean()) if len(scored) else np.nan
    overall = _check_split_score(report, config)
    return {"split": config.check_split, "scored": int(len(scored)), "predicted": len(predicted),
            "mean_score": mean, "overall_score": overall, "points": mean - overall,
            "relative_change": mean / overall - 1 if overall else np.nan}


def _check_split_score(report: SliceReport, config: UnseenConfig) -> float:
    """The model's mean score over the check split's labelled, predicted samples (NaN without any)."""
    samples = report.samples
    if samples is None:
        return np.nan
    rows = metrics.labelled(samples[samples["split"] == config.check_split])
    return float(rows["score"].mean()) if len(rows) else np.nan


def found_slices_hold(report: SliceReport, config: UnseenConfig = UnseenConfig()) -> pd.DataFrame:
    """HiBug's Table 3 measure: each bug the report found (one row per bug, trusted ones), scored on the check split
    where it holds at least the minimum size, and whether it is still an error slice there (below the check split's
    score by the report's gap, or below its threshold)."""
    overall = _check_split_score(report, config)
    cut = report.config.threshold if report.config.threshold is not None else overall - report.config.gap
    bugs = one_row_per_bug(report.slices)
    bugs = bugs[bugs["trusted"]] if "trusted" in bugs.columns else bugs
    table = pd.DataFrame([{"description": row["description"], **_check(report, row["definition"], config)}
                          for _, row in bugs.iterrows()],
                         columns=["description", "n_eval", "eval_score", "n_pool", "n_check", "check_score"])
    table["holds"] = table["check_score"] < cut
    table.attrs.update(split=config.check_split, overall_score=overall, cut=cut)
    return table


def matching_data_scores(report: SliceReport, gaps=(0.0, 0.1, 0.2),
                         config: UnseenConfig = UnseenConfig()) -> pd.DataFrame:
    """HiBug's Table 3 as the paper measures it: the model's score on the check split's data that match HiBug's
    slices (every enumerated slice, its parents unasked) whose evaluation score is at or below the
    overall score less each gap ("Model Acc.", "Model Acc.- 0.1", ...), and on the data matching any slice ("All
    slices"). One row per column of the paper's table: the slices taken, the check rows they match, their score."""
    matrix, rows = report.split_matrix(config.check_split, labelled=True)
    scores = rows["score"].to_numpy(float)
    every = report.every_slice()  # each holds the minimum support
    columns = [("All slices", np.ones(len(every), bool))]
    columns += [("Model Acc." if gap == 0 else f"Model Acc.- {gap:g}",
                 (every["score"] <= report.overall_score - gap + 1e-12).to_numpy()) for gap in gaps]
    table = []
    for name, taken in columns:
        matched = np.zeros(len(rows), bool)
        for definition in every["definition"].to_numpy(object)[taken]:
            matched |= _mask(matrix, rows, definition)
        table.append({"slices": name, "taken": int(taken.sum()), "matched": int(matched.sum()),
                      "score": float(scores[matched].mean()) if matched.any() else np.nan})
    frame = pd.DataFrame(table)
    frame.attrs.update(split=config.check_split, overall_score=_check_split_score(report, config))
    return frame


UNSEEN_METHODS = Registry("way to predict unseen slices")  # HiBug2's two, and hibug's variant of the second; each:
# (project, report, *, task, llm_config, count, api_key, encoder) -> the predicted slices, checked


@UNSEEN_METHODS.register("substitution", "similar tags swapped into the top error slices (by text embedding, "
                         "offline)")
def _by_substitution(*, report: SliceReport, encoder: str | None = None, **_) -> pd.DataFrame:
    """Tag similarity by the offline text model, or by an encoder's text side (HiBug2's: CLIP's)."""
    if encoder is None:
        return substitute_tags(report)
    from hibug_core.embeddings.registry import load_encoder

    loaded = load_encoder(encoder)
    return substitute_tags(report, embed=lambda texts: np.asarray(loaded.encode_texts(list(texts)), np.float32))


def _by_instruction(project, report: SliceReport, *, task, llm_config, count: int, api_key: str | None,
                    findings: bool, **_) -> pd.DataFrame:
    from hibug_core.store.attribute_versions import load_schema

    classes = [c for c in (project.model_classes(report.model) or sorted(report.evaluation["label"].dropna().unique()))
               if not str(c).startswith("(")]  # not "(background)" nor "(missed)": no class of the model's
    return predict_with_llm(report, load_schema(project), llm_config, task=task, classes=classes, count=count,
                            api_key=api_key, findings=findings)


UNSEEN_METHODS.add("instruction", "a language model, few-shot, told nothing of the model (HiBug2)",
                   lambda *, project, report, **options: _by_instruction(project, report, findings=False, **options),
                   needs=(LANGUAGE_MODEL,), secret="OPENAI_API_KEY")
UNSEEN_METHODS.add("instruction with findings", "a language model told the worst validation slices (hibug's variant)",
                   lambda *, project, report, **options: _by_instruction(project, report, findings=True, **options),
                   needs=(LANGUAGE_MODEL,), secret="OPENAI_API_KEY")


def asks_a_language_model(method: str) -> bool:
    """Whether a way of predicting unseen slices asks a language model."""
    return LANGUAGE_MODEL in UNSEEN_METHODS.get(method).needs


def predict_unseen(project, report: SliceReport, method: str, *, task, llm_config=None, count: int = 10,
                   api_key: str | None = None, encoder: str | None = None) -> pd.DataFrame:
    """Slices the report's split barely shows, predicted to fail by `method` (an UNSEEN_METHODS entry) and checked on
    the data that match them (`llm_config`: where the language model is, for the methods that ask one; `encoder`:
    whose text side measures tag similarity, for substitution; None: the offline text model)."""
    if UNSEEN_METHODS.find(method) is None:
        raise SliceError(f"unknown way to predict unseen slices '{method}'; use one of: "
                         f"{', '.join(UNSEEN_METHODS.names())}")
    return UNSEEN_METHODS.build(method, project=project, report=report, task=task, llm_config=llm_config, count=count,
                                api_key=api_key, encoder=encoder)


def _usable(item, tags_of: dict[str, set], classes: list[str]) -> tuple[tuple | None, str]:
    """(the slice an answer names, "") or (None, why it cannot be used)."""
    if not isinstance(item, dict):
        return None, "not an object"
    conditions = item.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        return None, "no conditions"
    pairs = []
    for condition in conditions:
        if not isinstance(condition, dict):
            return None, "a condition is not an object"
        attribute, tag = condition.get("attribute"), condition.get("tag")
        if attribute not in tags_of:
            return None, f"unknown attribute {str(attribute)[:60]!r}"
        if tag not in tags_of[attribute]:
            return None, f"{str(tag)[:60]!r} is not a tag of {attribute!r}"
        pairs.append((attribute, tag))
    if len({a for a, _ in pairs}) != len(pairs):
        return None, "an attribute named twice"
    label = item.get("class")
    if label is not None and label not in classes:
        return None, f"unknown class {str(label)[:60]!r}"
    return tuple(pairs + ([(CLASS, label)] if label is not None else [])), ""


__all__ = ["CLASS", "UNSEEN_METHODS", "UnseenConfig", "how_they_fail", "predict_unseen", "predict_with_llm",
           "matching_data_scores", "prediction_messages", "substitute_tags"]
