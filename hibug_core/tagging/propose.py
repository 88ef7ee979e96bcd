"""Attribute proposal by a language model (HiBug's flow and HiBug2's structured flow), with validation rules that
repair or reject every answer, bounded retries and a self-check pass; nothing unchecked is ever stored."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ValidationError

from hibug_core.attributes.schema import (
    BINARY_TAGS,
    MAX_ATTRIBUTES,
    MAX_NAME,
    NOT_VISIBLE,
    Attribute,
    AttributeSchema,
    template_problem,
)
from hibug_core.errors import HibugError
from hibug_core.llm.client import LLMAnswerError, LLMConfig, LLMUnavailable, ask_json, make_client


class ProposalError(HibugError):
    """The language model gave nothing that could be turned into attributes; nothing was stored."""


class ProposedAttribute(BaseModel):
    name: str
    group: Literal["main object", "background", "global"] = "main object"
    kind: Literal["binary", "descriptive"] = "descriptive"
    tags: list[str]
    templates: list[str] = []
    reason: str = ""


class Proposal(BaseModel):
    attributes: list[ProposedAttribute]


@dataclass
class ProposalResult:
    schema: AttributeSchema
    notes: list[str] = field(default_factory=list)  # every repair and rejection, for the person to review
    method: str = "hibug2"
    source: str = ""  # who proposed it, for the version's note


HIBUG_PROMPT = """You help debug an image model. Task: {task}. Classes: {classes}.
List the visual attributes of the images that could matter for this task. For each attribute decide whether it is
binary (yes/no) or descriptive, propose its tags, and one or two prompt templates for a CLIP model with {{tag}} and
{{label}} placeholders, e.g. "a photo of a {{label}} with {{tag}} hair"."""

HIBUG2_PROMPT = """You help debug an image model. Task: {task}. Classes: {classes}.
Propose visual attributes in three groups: "main object" (properties of the object of interest), "background" and
"global" (lighting, image quality, style). Rules:
- a yes/no attribute is named "is ..." (e.g. "is wearing glasses") and has the tags "yes" and "no";
- add the tag "not visible" where the element may be absent from the image;
- tags of one attribute have the same granularity, with no duplicates or synonyms;
- {focus}
Give one or two CLIP prompt templates per attribute with {{tag}} and {{label}} placeholders."""

PROMPTS = {"hibug": HIBUG_PROMPT, "hibug2": HIBUG2_PROMPT}  # the flows that ask from the task's words
DEFAULT_FOCUS = ("include attributes that blur the boundary between two similar classes, since those are where the "
                 "model is likely to fail")  # a classifier's; each task states its own (hibug_core.tasks)

FORMAT = """Answer with one JSON object: {"attributes": [{"name": ..., "group": "main object" | "background" | "global",
"kind": "binary" | "descriptive", "tags": [...], "templates": [...], "reason": ...}]}."""

SELF_CHECK = """Here are proposed attributes for the task "{task}":
{attributes}
Remove attributes that overlap with another one or are too vague to judge from an image, and merge synonymous tags.
Return the cleaned list in the same JSON format."""


def _clean(text: str) -> str:
    return " ".join(str(text).strip().split())


def repair(proposal: Proposal, source: str = "llm") -> tuple[list[Attribute], list[str]]:
    """Apply the schema's rules to a model's proposal: fix what can be fixed, reject the rest; notes say which."""
    attributes, notes, seen = [], [], set()
    for position, item in enumerate(proposal.attributes):
        if len(attributes) == MAX_ATTRIBUTES:
            notes.append(f"kept the first {MAX_ATTRIBUTES} attributes (the most a schema holds); "
                         f"{len(proposal.attributes) - position} more were not read")
            break
        name = _clean(item.name).lower()
        if not name:
            notes.append("rejected an attribute without a name")
            continue
        if len(name) > MAX_NAME:
            notes.append(f"rejected an attribute whose name is {len(name):,} characters long (at most {MAX_NAME})")
            continue
        tags, duplicates = [], []
        for tag in (_clean(t).lower() for t in item.tags):
            if tag in tags:
                duplicates.append(tag)
            elif tag:
                tags.append(tag)
        if duplicates:
            notes.append(f"'{name}': removed duplicate tags {', '.join(sorted(set(duplicates)))}")
        kind = item.kind
        if kind == "descriptive" and set(tags) <= {*BINARY_TAGS, NOT_VISIBLE} and "yes" in tags:
            kind = "binary"
        if kind == "binary":
            if not name.startswith("is "):
                notes.append(f"'{name}': a yes/no attribute is named 'is ...'; renamed to 'is {name}'")
                name = f"is {name}"
            wanted = ["yes", "no"] + ([NOT_VISIBLE] if NOT_VISIBLE in tags else [])
            extra = [t for t in tags if t not in wanted]
            if extra:
                notes.append(f"'{name}': a yes/no attribute takes the tags yes / no; dropped {', '.join(extra)}")
            tags = wanted
        if len(tags) < 2:
            notes.append(f"rejected '{name}': it has {len(tags)} tag{'s' if len(tags) != 1 else ''}; "
                         "an attribute needs at least two")
            continue
        if name in seen:
            notes.append(f"rejected a second attribute named '{name}'")
            continue
        templates = [t for t in (_clean(t) for t in item.templates) if t]
        dropped = [t for t in templates if kind == "descriptive" and "{tag}" not in t]
        if dropped:
            notes.append(f"'{name}': dropped templates without {{tag}}: {'; '.join(dropped)}")
        templates = [t for t in templates if t not in dropped and template_problem(t) is None]
        try:
            attributes.append(Attribute(name=name, group=item.group, kind=kind, tags=tuple(tags),
                                        templates=tuple(templates), source=source, description=_clean(item.reason)))
            seen.add(name)
        except ValidationError as error:
            notes.append(f"rejected '{name}': {error.errors()[0]['msg']}")
    return attributes, notes


def ask_structured(client, config: LLMConfig, messages: list[dict]) -> tuple[Proposal | None, str]:
    """One structured attribute request with bounded retries; (proposal or None, last problem)."""
    try:
        return ask_json(client, config, messages, Proposal, name="attributes", format_hint=FORMAT), ""
    except LLMAnswerError as error:
        return None, error.problem
    except LLMUnavailable as error:
        raise ProposalError(f"{error}. Check the server, or use the built-in library (no language model)") from None


def propose_with_llm(task: str, classes: list[str], config: LLMConfig, *, method: str = "hibug2",
                     focus: str = DEFAULT_FOCUS, api_key: str | None = None,
                     self_check: bool = True) -> ProposalResult:
    """Attributes for `task` from a language model told what to look for (`focus`), repaired and self-checked. Raises
    ProposalError, storing nothing, when no usable attribute comes back."""
    if method not in PROMPTS:
        raise ValueError(f"method is one of {', '.join(PROMPTS)}")
    client = make_client(config, api_key)
    prompt = PROMPTS[method].format(
        task=task, classes=", ".join(classes) or "unknown", focus=focus)
    proposal, problem = ask_structured(client, config, [{"role": "user", "content": f"{prompt}\n{FORMAT}"}])
    if proposal is None:
        raise ProposalError(f"{config.describe()} gave no usable attributes after {config.attempts} attempts: "
                            f"{problem}")
    attributes, notes = repair(proposal)
    if not attributes:
        raise ProposalError("every proposed attribute was rejected: " + "; ".join(notes))
    if self_check:
        listing = json.dumps({"attributes": [{"name": a.name, "group": a.group, "kind": a.kind, "tags": list(a.tags),
                                               "templates": list(a.templates)} for a in attributes]})
        checked, problem = ask_structured(client, config, [{"role": "user", "content":
                                                  SELF_CHECK.format(task=task, attributes=listing) + "\n" + FORMAT}])
        checked_attributes, check_notes = repair(checked) if checked is not None else ([], [])
        if checked_attributes:
            removed = sorted({a.name for a in attributes} - {a.name for a in checked_attributes})
            if removed:
                notes.append(f"self-check removed {', '.join(removed)}")
            attributes, notes = checked_attributes, notes + check_notes
        else:
            notes.append(f"self-check gave nothing usable ({problem or 'every attribute rejected'}); kept the first "
                         "proposal")
    return ProposalResult(AttributeSchema(attributes=tuple(attributes), task=task), notes, method)


