"""Attributes and tags from the data: representative images by k-means on stored embeddings, the values a
multimodal model (or, offline, the zero-shot encoder over a candidate vocabulary) sees on them, merged into each
attribute's tags; a refinement pass over validation images; and HiBug2's comparative method on image pairs."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hibug_core.attributes.library import COLOURS
from hibug_core.attributes.schema import MAX_DESCRIPTION, MAX_NAME, MAX_TAGS, NOT_VISIBLE, AttributeSchema
from hibug_core.llm.client import (
    LLMAnswerError,
    LLMConfig,
    LLMUnavailable,
    ask,
    image_data_url,
    make_client,
    parse_json_reply,
)
from hibug_core.tagging.propose import FORMAT, ProposalError, ProposalResult, ask_structured, repair

# Candidate values the zero-shot encoder chooses among when there is no multimodal model, by attribute keyword.
VOCABULARY = {
    "colo": COLOURS + ("teal", "beige", "silver", "gold", "multicolored"),
    "size": ("tiny", "small", "medium", "large", "huge"),
    "position": ("left", "center", "right", "top", "bottom"),
    "background": ("plain", "white", "indoor", "street", "forest", "grass", "water", "sky", "snow", "sand", "room"),
    "texture": ("plain", "striped", "spotted", "checkered", "furry", "shiny", "rough"),
    "viewpoint": ("front", "side", "back", "top", "bottom"),
    "pose": ("standing", "sitting", "lying", "walking", "running", "jumping", "flying"),
    "style": ("photo", "drawing", "painting", "cartoon", "sketch", "3d render"),
    "shape": ("round", "square", "triangular", "rectangular", "oval", "irregular"),
}


@dataclass
class TagProposal:
    schema: AttributeSchema
    added: dict[str, list[str]] = field(default_factory=dict)  # attribute -> tags added
    notes: list[str] = field(default_factory=list)


def representative_images(sample_ids: np.ndarray, embedding: np.ndarray, k: int = 12, seed: int = 0) -> np.ndarray:
    """The sample nearest to each k-means centre of the embeddings, in cluster-size order (fewer than k when the
    embeddings have fewer distinct points, e.g. duplicate images)."""
    from sklearn.cluster import KMeans

    k = min(k, len(np.unique(embedding, axis=0)))
    model = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(embedding)
    order = np.argsort(-np.bincount(model.labels_, minlength=k))
    chosen = []
    for cluster in order:
        members = np.flatnonzero(model.labels_ == cluster)
        if len(members) == 0:
            continue
        distance = np.linalg.norm(embedding[members] - model.cluster_centers_[cluster], axis=1)
        chosen.append(sample_ids[members[np.argmin(distance)]])
    return np.array(chosen)


def _merge(schema: AttributeSchema, seen: dict[str, Counter], min_count: int) -> TagProposal:
    """Add values seen at least `min_count` times to descriptive attributes (never to yes/no ones)."""
    result = TagProposal(schema)
    for attribute in schema.attributes:
        counts = seen.get(attribute.name, Counter())
        if attribute.kind == "binary" or attribute.measured:
            continue
        known = {t.lower() for t in attribute.tags}
        new = [value for value, n in counts.most_common() if n >= min_count and value.lower() not in known
               and value != NOT_VISIBLE and len(value) <= MAX_NAME][:max(0, MAX_TAGS - len(attribute.tags))]
        if new:
            result.schema = result.schema.replace(attribute.edited(tags=(*attribute.tags, *new)))
            result.added[attribute.name] = new
    return result


def _values_from_llm(paths: list[str], labels: list[str | None], schema: AttributeSchema, config: LLMConfig,
                     api_key: str | None) -> tuple[dict[str, Counter], list[str]]:
    client = make_client(config, api_key)
    asked = [a for a in schema.attributes if a.kind == "descriptive" and not a.measured]
    seen: dict[str, Counter] = {a.name: Counter() for a in asked}
    notes = []
    for path, label in zip(paths, labels):
        text = ("For each attribute, name the value it takes in this image in one to three words; use one of the "
                "examples if it fits, otherwise your own word (or 'not visible').\n" +
                "\n".join(f'- "{a.name}", e.g. {", ".join(a.tags)}' for a in asked) +
                f"\nThe image shows a {label}." * bool(label) + "\nAnswer with one JSON object: attribute -> value.")
        content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": image_data_url(path)}}]
        try:
            answer = ask(client, config, [{"role": "user", "content": content}], parse=parse_json_reply,
                         format_hint="Answer with one JSON object: attribute -> value.",
                         response_format={"type": "json_object"})
        except LLMAnswerError as error:
            notes.append(f"an answer was skipped: {error.problem}")
            continue
        except LLMUnavailable as error:  # the server is down: the pass ends
            raise ProposalError(f"{error}; nothing was changed") from None
        for attribute in asked:
            value = answer.get(attribute.name)
            if isinstance(value, str) and 0 < len(value.split()) <= 3:
                seen[attribute.name][" ".join(value.lower().split())] += 1
    return seen, notes


def _values_from_vocabulary(sample_ids, embedding, labels, schema: AttributeSchema, encoder) -> dict[str, Counter]:
    from hibug_core.attributes.schema import Attribute
    from hibug_core.tagging.zero_shot import zero_shot_tags

    seen = {}
    for attribute in schema.attributes:
        if attribute.kind == "binary" or attribute.measured:
            continue
        vocabulary = next((v for key, v in VOCABULARY.items() if key in attribute.name.lower()), None)
        if vocabulary is None:
            continue
        candidates = tuple(dict.fromkeys((*attribute.tags, *vocabulary)))
        probe = Attribute(name=attribute.name, tags=candidates, templates=attribute.templates)
        result = zero_shot_tags(sample_ids, embedding, labels, [probe], encoder)
        seen[attribute.name] = Counter(candidates[i] for i in result.tag_index[:, 0] if i >= 0)
    return seen


def propose_tags_from_data(project, schema: AttributeSchema, *, encoder: str = "conse", sample_ids=None, k: int = 12,
                           llm_config: LLMConfig | None = None, api_key: str | None = None, min_count: int = 2,
                           seed: int = 0) -> TagProposal:
    """Tags each attribute's values take on representative images (k-means on the stored embeddings), asked of a
    multimodal model or, without one, chosen by the zero-shot encoder from a candidate vocabulary."""
    from hibug_core.embeddings.compute import embed_project
    from hibug_core.embeddings.registry import load_encoder
    from hibug_core.tagging.choice import prompt_labels

    embeddings = embed_project(project, encoder, sample_ids=sample_ids)
    chosen = representative_images(embeddings.sample_ids, embeddings.embedding, k, seed)
    samples = project.samples().loc[chosen]
    labels = prompt_labels(project, samples, None)
    if llm_config is not None:
        seen, notes = _values_from_llm(list(samples["image_path"]), list(labels), schema, llm_config, api_key)
    else:
        rows = pd.Index(embeddings.sample_ids).get_indexer(chosen)
        seen = _values_from_vocabulary(chosen, embeddings.embedding[rows], labels, schema, load_encoder(encoder))
        notes = [f"no multimodal model: values chosen by the {encoder} encoder from a candidate vocabulary"]
    result = _merge(schema, seen, min_count)
    result.notes = notes + [f"'{a}': added {', '.join(t)}" for a, t in result.added.items()]
    return result


def refine_tags(project, schema: AttributeSchema, *, split: str = "val", n: int = 60, seed: int = 0,
                **options) -> TagProposal:
    """The refinement pass: the same question over a random subset of `split`, adding tags the data need
    (values seen on at least `min_count` images, default 3)."""
    samples = project.samples()
    pool = samples.index[samples["split"] == split].to_numpy()
    chosen = np.random.default_rng(seed).choice(pool, min(n, len(pool)), replace=False)
    options.setdefault("min_count", 3)
    return propose_tags_from_data(project, schema, sample_ids=np.sort(chosen), k=len(chosen), seed=seed, **options)


def suggest_tags(project, schema: AttributeSchema, op, *, api_key: str | None = None) -> TagProposal:
    """A SuggestTags operation on a project: tags from representative images, or the refinement pass over validation
    images (op.refine); a multimodal model's (op.llm) or the encoder's vocabulary's. Nothing is stored."""
    config = op.llm_config() if op.llm else None
    if op.refine:
        return refine_tags(project, schema, encoder=op.encoder, llm_config=config, api_key=api_key)
    return propose_tags_from_data(project, schema, encoder=op.encoder, llm_config=config, api_key=api_key)


def added_tags(found: TagProposal) -> str:
    """The tags a suggestion adds, per attribute: "color: teal, pink; texture: striped"."""
    return "; ".join(f"{a}: {', '.join(t)}" for a, t in found.added.items())


def added_note(found: TagProposal) -> str:
    """The history note of a version saved from suggested tags."""
    return f"tags from the data: {added_tags(found)}"


COMPARE_PROMPT = """Both images are labelled "{label}". A model classified the first one correctly and the second one
wrongly (as "{prediction}"). Which visual attributes tell the two images apart and could explain the mistake? Follow
the attribute rules: yes/no attributes are named "is ..." with tags yes / no; tags of one attribute have the same
granularity; add "not visible" where an element may be absent."""


COMPARE_VIEWS = (" Each is an object outlined in red: first its crop, then its whole image; the right one's two images "
                 "come first.")


def propose_by_comparison(project, model: str, config: LLMConfig, *, pairs: int = 4, split: str = "val",
                          seed: int = 0, api_key: str | None = None, outlined: bool = False) -> ProposalResult:
    """HiBug2's comparative method: for pairs of a correct and a wrong prediction of the same class, ask the
    multimodal model which attributes tell them apart; the answers are repaired like any proposal. outlined: the
    samples are objects, each shown as its outlined crop and its whole image (tasks' SampleViews.outlined)."""
    from hibug_core.tagging.mllm import object_boxes, sample_views

    samples = project.samples(model)
    boxes = object_boxes(project.objects(model)) if outlined else {}
    labelled = samples[(samples["split"] == split) & samples["correct"].notna()]
    rng = np.random.default_rng(seed)
    wrong_by_class = labelled[labelled["correct"] == False].groupby("label")  # noqa: E712 (nullable boolean)
    classes = sorted(wrong_by_class.groups, key=lambda c: -len(wrong_by_class.groups[c]))
    client = make_client(config, api_key)
    attributes, notes = [], []
    for label in (classes * pairs)[:pairs]:
        right = labelled[(labelled["label"] == label) & (labelled["correct"] == True)]  # noqa: E712
        wrong = labelled.loc[wrong_by_class.groups[label]]
        if right.empty:
            continue
        good, bad = right.iloc[rng.integers(len(right))], wrong.iloc[rng.integers(len(wrong))]
        views = [sample_views(row["image_path"], boxes.get(int(row.name))) for row in (good, bad)]
        shown = COMPARE_VIEWS if outlined else ""
        content = [{"type": "text", "text": COMPARE_PROMPT.format(label=label, prediction=bad["prediction"])
                    + shown + "\n" + FORMAT},
                   *({"type": "image_url", "image_url": {"url": url}} for urls in views for url in urls)]
        proposal, problem = ask_structured(client, config, [{"role": "user", "content": content}])
        if proposal is None:
            notes.append(f"pair of '{label}': no usable answer ({problem})")
            continue
        found, repair_notes = repair(proposal)
        notes += repair_notes
        for attribute in found:
            if attribute.name not in {a.name for a in attributes}:
                described = f"tells a right from a wrong '{label}': {attribute.description}"
                attributes.append(attribute.edited(description=described[:MAX_DESCRIPTION]))
    if not attributes:
        why = f": {'; '.join(notes)}" if notes else " (no class has both right and wrong predictions)"
        raise ProposalError("the comparisons gave no usable attribute" + why)
    return ProposalResult(AttributeSchema(attributes=tuple(attributes)), notes, "comparative")


__all__ = ["TagProposal", "added_note", "added_tags", "propose_by_comparison", "propose_tags_from_data",
           "representative_images", "refine_tags", "suggest_tags"]
