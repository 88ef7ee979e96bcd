"""Generation prompts for error slices: HiBug's template filled from a slice's tags, and Chegini and Feizi's
uncommon backgrounds (listed by a language model or a built-in list, assigned to failures zero-shot)."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
from pydantic import BaseModel

from hibug_core.attributes.schema import NOT_VISIBLE, AttributeSchema
from hibug_core.errors import HibugError
from hibug_core.objects.coco import BACKGROUND, MISSED
from hibug_core.objects.geometry import GEOMETRY_PHRASES
from hibug_core.objects.pose_geometry import POSE_PHRASES
from hibug_core.registry import Registry
from hibug_core.slices.report import label_attributes
from hibug_core.slices.search import CLASS, describe

HIBUG_TEMPLATE = "A photo of {a} {b} {label} {c}, in a {d} background"
COLUMNS = ["prompt", "label", "slice_id", "slice", "weight"]
# Backgrounds that are uncommon for most everyday objects (used when no language model is configured).
DEFAULT_BACKGROUNDS = ("in the snow", "underwater", "in a desert", "at night", "in a kitchen", "on a beach",
                       "in a dense forest", "on a busy city street", "in the sky", "in fog", "on a stage",
                       "in a cave")


class PromptError(HibugError):
    """Prompts that cannot be built (no error slices, no failures, an unusable language-model reply)."""


def _article(phrase: str) -> str:
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def _strip_is(name: str) -> str:
    return re.sub(r"^is\s+", "", name)


def slice_prompt(definition, label: str, schema: AttributeSchema | None = None, *,
                 label_like: tuple[str, ...] = ()) -> str:
    """HiBug's template filled from a slice: main-object tags before the class ({a} {b}), yes/no and position
    attributes after it ({c}), an object's measured context after it too ("cut off by the picture's border", "among
    many other objects"), background tags as "in a {d} background"; empty slots close up."""
    groups = {a.name: a for a in schema.attributes} if schema else {}
    before, after, background, other = [], [], [], []
    for attribute, tag in definition:
        if attribute == CLASS or attribute in label_like or tag == NOT_VISIBLE:
            continue
        measured = GEOMETRY_PHRASES.get((attribute, tag)) or POSE_PHRASES.get((attribute, tag))
        if measured:  # an object's context measured from its box, a person's pose from the keypoints
            after.append(measured)
            continue
        known = groups.get(attribute)
        binary = known is not None and known.kind == "binary"
        if binary:
            phrase = _strip_is(attribute) if tag == "yes" else f"not {_strip_is(attribute)}"
        if known is not None and known.group == "background":
            background.append(phrase.replace("the background ", "") if binary else tag)
        elif binary:
            after.append(f"that is {phrase}")
        elif "position" in attribute:
            after.append(f"at the {tag}")
        elif known is not None and known.group == "global":
            other.append(f"{tag} {attribute}" if attribute not in tag else tag)
        else:
            before.append(tag)
    a_b = " ".join(before + [label])
    prompt = f"A photo of {_article(a_b)}"
    if after:
        prompt += " " + " ".join(after)
    if background:
        prompt += f", in a {' '.join(background)} background"
    if other:
        prompt += ", " + ", ".join(other)
    return prompt


def hibug_prompts(report, schema: AttributeSchema | None = None, *, top: int = 5,
                  min_share: float = 0.2) -> pd.DataFrame:
    """One prompt per (top error slice, class its failures belong to): the class from the slice's condition, else
    every class with at least `min_share` of the slice's failures. weight = the failures it stands for. Slices that
    only refine or repeat one above them (report column `repeats`) are left out: their failures are already in it;
    so are slices on tags too poor to trust (column `trusted`): an image drawn from junk tags shows nothing real."""
    slices = report.slices
    if "repeats" in slices.columns:
        slices = slices[slices["repeats"] == ""]
    if "trusted" in slices.columns:
        slices = slices[slices["trusted"].astype(bool)]
    slices = slices.head(top)
    if slices.empty:
        raise PromptError("no error slices on trusted tags to write prompts for; change the slice settings, or "
                          "measure or improve the tags (Tagging → Audit)")
    evaluation = report.evaluation
    label_like = tuple(label_attributes(report.all_tags, report.samples["label"]))
    rows = []
    for _, row in slices.iterrows():
        definition = row["definition"]
        mask = report.tags.mask(definition)
        failing = evaluation.loc[mask & (evaluation["error"].to_numpy() > 0.5), "label"]
        failing = failing[~failing.isin((BACKGROUND, MISSED))]  # a false positive's "class" is no object to draw
        named = [tag for attribute, tag in definition if attribute == CLASS or attribute in label_like]
        counts = failing.value_counts()
        labels = named[:1] or [c for c, n in counts.items() if n >= min_share * max(len(failing), 1)]
        for label in labels:
            rows.append({"prompt": slice_prompt(definition, str(label), schema, label_like=label_like),
                         "label": str(label), "slice_id": row["slice_id"], "slice": describe(definition),
                         "weight": float(counts.get(label, 0)) or 1.0})
    return pd.DataFrame(rows, columns=COLUMNS)


class Backgrounds(BaseModel):
    backgrounds: dict[str, list[str]]


BACKGROUND_REQUEST = """List {n} uncommon backgrounds or settings for photos of each of these classes: {classes}.
Uncommon means the class is rarely photographed there, yet the picture is plausible. Write each as a short phrase that
follows the class name in "A photo of a <class> <phrase>", e.g. "in the snow" or "on a kitchen table".
Answer with one JSON object: {{"backgrounds": {{"<class>": ["<phrase>", ...], ...}}}} with every class as a key."""


def uncommon_backgrounds(classes: list[str], *, llm=None, api_key: str | None = None,
                         per_class: int = 8) -> dict[str, list[str]]:
    """Uncommon backgrounds per class from a language model (an LLMConfig), or the built-in list without one."""
    if llm is None:
        return {c: list(DEFAULT_BACKGROUNDS) for c in classes}
    from hibug_core.llm.client import LLMAnswerError, LLMUnavailable, ask_json, make_client

    request = BACKGROUND_REQUEST.format(n=per_class, classes=", ".join(classes))
    try:
        reply = ask_json(make_client(llm, api_key), llm, [{"role": "user", "content": request}], Backgrounds,
                         name="backgrounds", format_hint=request.splitlines()[-1])
    except LLMAnswerError as error:
        raise PromptError(f"{llm.describe()} gave no usable backgrounds ({error.problem}); nothing was changed") \
            from None
    except LLMUnavailable as error:
        raise PromptError(f"{error}. Check the server, or leave the language model out to use the built-in "
                          "backgrounds") from None
    cleaned = {c: [" ".join(p.split()) for p in reply.backgrounds.get(c, []) if p.strip()][:per_class]
               for c in classes}
    missing = [c for c, phrases in cleaned.items() if not phrases]
    if missing:
        raise PromptError(f"{llm.describe()} listed no backgrounds for {', '.join(missing)}; try again or use the "
                          "built-in list")
    return cleaned


def background_prompts(report, backgrounds: dict[str, list[str]], embeddings: pd.DataFrame, encode_texts, *,
                       k: int = 3) -> pd.DataFrame:
    """Chegini and Feizi: every validation failure gets the background whose prompt "a photo of a <class>
    <background>" its image embedding matches best (zero-shot); the k most frequent per class become prompts.
    `embeddings`: normalised image embeddings indexed by sample id; encode_texts: prompts -> normalised rows."""
    evaluation = report.evaluation
    failures = evaluation[evaluation["error"] > 0.5]
    if failures.empty:
        raise PromptError("the model has no failures on this split to find backgrounds for")
    rows = []
    for label, group in failures.groupby("label", sort=True):
        options = backgrounds.get(str(label)) or []
        if not options:
            continue
        text = encode_texts([f"a photo of {_article(str(label))} {b}" for b in options])
        chosen = (embeddings.loc[group.index].to_numpy(np.float32) @ np.asarray(text, np.float32).T).argmax(axis=1)
        counts = pd.Series(chosen).value_counts()
        for index, n in counts.head(k).items():
            rows.append({"prompt": f"A photo of {_article(str(label))} {options[index]}", "label": str(label),
                         "slice_id": None, "slice": f"failures of class {label}", "weight": float(n)})
    if not rows:
        raise PromptError("no backgrounds for the classes the model fails on; list some for them")
    return pd.DataFrame(rows, columns=COLUMNS)


def images_per_prompt(prompts: pd.DataFrame, n_images: int) -> np.ndarray:
    """n_images split over the prompts in proportion to their weights."""
    from hibug_core.repair.selection import apportion

    return apportion(prompts["weight"].to_numpy(float), n_images, np.full(len(prompts), n_images))


def class_name_prompts(report) -> pd.DataFrame:
    """The baseline both generation papers measure against: "A photo of a {label}" for each class the model fails
    on, weighted by its failures (HiBug's class-name prompt; Chegini and Feizi's Random_debugging), so the images
    go where the failures are and only what the prompts say differs."""
    evaluation = report.evaluation
    failing = evaluation.loc[evaluation["error"].to_numpy() > 0.5, "label"]
    counts = failing[~failing.isin((BACKGROUND, MISSED))].astype(str).value_counts()
    if counts.empty:
        raise PromptError("the model fails on no image of any class here; there is nothing to write prompts for")
    return pd.DataFrame([{"prompt": f"A photo of a {label}", "label": label, "slice_id": "", "slice": "class name",
                          "weight": float(n)} for label, n in counts.sort_index().items()], columns=COLUMNS)


PROMPT_METHODS = Registry("prompt method")  # each: (project, report, *, top, k, llm, api_key, encoder, progress)
FROM_FAILURES = "the failures themselves"  # a method that writes its prompts from each failure (Entry.needs)


@PROMPT_METHODS.register("hibug", "HiBug's template over the top error slices")
def _hibug_template(*, project, report, top: int, **_) -> pd.DataFrame:
    from hibug_core.store.attribute_versions import latest_version, load_schema

    return hibug_prompts(report, load_schema(project) if latest_version(project) is not None else None, top=top)


@PROMPT_METHODS.register("backgrounds", "uncommon backgrounds per class (a language model's, or a built-in list), "
                         "assigned to the failures zero-shot by an encoder (Chegini and Feizi)", needs=(FROM_FAILURES,))
def _backgrounds(*, project, report, k: int, llm, api_key: str | None, encoder: str, progress, **_) -> pd.DataFrame:
    from hibug_core.embeddings.base import normalize_rows
    from hibug_core.embeddings.compute import embed_project
    from hibug_core.embeddings.registry import load_encoder

    classes = sorted(report.evaluation["label"].astype(str).unique())
    backgrounds = uncommon_backgrounds(classes, llm=llm, api_key=api_key)
    loaded = load_encoder(encoder)
    failing = report.evaluation.index[report.evaluation["error"] > 0.5]
    embedded = embed_project(project, loaded, sample_ids=failing, **({"progress": progress} if progress else {}))
    embeddings = pd.DataFrame(normalize_rows(np.asarray(embedded.embedding, np.float32)), index=embedded.sample_ids)
    return background_prompts(report, backgrounds, embeddings,
                              lambda texts: normalize_rows(np.asarray(loaded.encode_texts(texts), np.float32)), k=k)


@PROMPT_METHODS.register("class names", "'A photo of a {label}' per failing class, weighted by its failures (the "
                         "papers' baseline)", needs=(FROM_FAILURES,))
def _class_names(*, report, **_) -> pd.DataFrame:
    return class_name_prompts(report)


def pooled_prompts(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Chegini and Feizi's collective debugging (type 1): the prompts written from several models' failures as one
    set, a prompt written for more than one model weighted by all their failures, so that what fails more often gets
    more of the images."""
    rows = pd.concat(frames, ignore_index=True)
    pooled = rows.groupby(["prompt", "label"], sort=False, as_index=False).agg(
        slice_id=("slice_id", "first"), slice=("slice", "first"), weight=("weight", "sum"))
    return pooled.sort_values("weight", ascending=False, kind="stable").reset_index(drop=True)[COLUMNS]


def build_prompts(project, method: str = "hibug", *, model: str | None = None, split: str = "val", top: int = 5,
                  k: int = 3, llm=None, api_key: str | None = None, encoder: str = "conse",
                  progress=None, failures_of: list[str] | None = None, held_out=None) -> pd.DataFrame:
    """Prompts for the project's error slices: HiBug's template over the top slices, uncommon backgrounds assigned
    to the validation failures with `encoder` (embedding what is missing), or the class names alone (the baseline).
    failures_of: write them from these models' failures instead of `model`'s, pooled when more than one (Chegini and
    Feizi's collective debugging: type 1, a category's models pooled; type 2, one model's prompts for all).
    held_out: sample ids of failures the prompts must not see (Chegini and Feizi's debug held-out half), for the
    methods that write prompts from the failures themselves."""
    if failures_of:
        unknown = [m for m in failures_of if m not in project.models()]
        if unknown:
            raise PromptError(f"no model {', '.join(repr(m) for m in unknown)} in this project; known: "
                              f"{', '.join(project.models())}")
        frames = [build_prompts(project, method, model=m, split=split, top=top, k=k, llm=llm, api_key=api_key,
                                encoder=encoder, progress=progress, held_out=held_out)
                  for m in dict.fromkeys(failures_of)]
        return frames[0] if len(frames) == 1 else pooled_prompts(frames)
    if PROMPT_METHODS.find(method) is None:
        raise PromptError(f"unknown prompt method '{method}'; choose one of {', '.join(PROMPT_METHODS.names())}")
    from hibug_core.slices.report import error_slices

    report = error_slices(project, model, split=split)
    if held_out is not None:
        if FROM_FAILURES not in PROMPT_METHODS.get(method).needs:
            raise PromptError(f"'{method}' prompts come from the error slices of the whole split, so no failure can be "
                              "held out of them; hold failures out with prompts written from the failures "
                              f"({', '.join(e.name for e in PROMPT_METHODS if FROM_FAILURES in e.needs)})")
        report = replace(report, evaluation=report.evaluation.drop(index=pd.Index(held_out), errors="ignore"))
    return PROMPT_METHODS.build(method, project=project, report=report, top=top, k=k, llm=llm, api_key=api_key,
                                encoder=encoder, progress=progress)
