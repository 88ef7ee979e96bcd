"""The attribute schema: attributes grouped as main object / background / global, each with its tags and prompts."""
from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hibug_core.errors import SchemaError, validation_reasons
from hibug_core.values import normalise_name

GROUPS = ("main object", "background", "global")
NOT_VISIBLE = "not visible"
BINARY_TAGS = ("yes", "no")
PLACEHOLDERS = ("label", "tag", "attribute", "phrase")  # what a prompt template may name, and nothing else
# Caps: a schema is read by people and sent to models on every tagging call, so a runaway LLM or paste is refused.
MAX_ATTRIBUTES, MAX_TAGS, MAX_TEMPLATES = 200, 50, 20
MAX_NAME, MAX_TEMPLATE, MAX_DESCRIPTION = 100, 300, 2000


def _validated(cls, data: dict):
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        raise SchemaError(validation_reasons(error)) from None


def _short(value: str, limit: int, what: str) -> str:
    if len(value) > limit:
        raise ValueError(f"{what} {value[:40]!r}... is {len(value):,} characters long; at most {limit} are allowed")
    return value


def template_problem(template: str) -> str | None:
    """Why a prompt template cannot be filled in safely, or None: only bare {label}, {tag}, {attribute} and
    {phrase} are allowed (no attribute access, indexing, conversions or formats)."""
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template)
                  if name is not None]
    except ValueError as error:
        return f"template {template!r} is not a valid format string ({error}); write braces as {{{{ and }}}}"
    for name, spec, conversion in fields:
        if name not in PLACEHOLDERS or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return (f"template {template!r} uses {shown}; only "
                    + ", ".join("{" + p + "}" for p in PLACEHOLDERS) + " can be filled in")
    return None


MEASURED = "measured"  # the source of an attribute computed exactly (Attribute.measured)


class Attribute(BaseModel):
    """One visual attribute. Binary attributes are named "is ..." and take the tags yes / no."""

    model_config = ConfigDict(frozen=True, revalidate_instances="always")  # a model_copy'd one is checked in a schema

    name: str
    group: Literal["main object", "background", "global"] = "main object"
    kind: Literal["binary", "descriptive"] = "descriptive"
    tags: tuple[str, ...]
    # Prompt templates for zero-shot tagging; {tag} and {label} are filled in. Empty: the defaults below.
    templates: tuple[str, ...] = ()
    # Prompts for single tags, used instead of the templates (e.g. for "not visible").
    tag_prompts: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    enabled: bool = True
    source: str = "manual"  # manual, llm, library, MEASURED
    description: str = ""

    @property
    def measured(self) -> bool:
        """Computed exactly from the pixels or the annotations, not guessed by a model or a person."""
        return self.source == MEASURED

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not str(value).strip():
            raise ValueError("an attribute needs a name")
        return _short(normalise_name(value, "the attribute name"), MAX_NAME, "the attribute name")

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not str(t).strip() for t in value):
            raise ValueError("tags cannot be empty")
        cleaned = tuple(normalise_name(t, "the tag", "tag") for t in value)
        if len(cleaned) > MAX_TAGS:
            raise ValueError(f"{len(cleaned)} tags; an attribute can have at most {MAX_TAGS}")
        for tag in cleaned:
            _short(tag, MAX_NAME, "the tag")
        lowered = [t.lower() for t in cleaned]
        duplicates = sorted({t for t in lowered if lowered.count(t) > 1})
        if duplicates:
            raise ValueError(f"duplicate tags: {', '.join(duplicates)}")
        if len(cleaned) < 2:
            raise ValueError("an attribute needs at least two tags")
        return cleaned

    @field_validator("tag_prompts")
    @classmethod
    def _tag_prompts(cls, value: dict) -> dict:
        return {normalise_name(tag, "the tag of a prompt", "tag"): prompts for tag, prompts in value.items()}

    @field_validator("templates")
    @classmethod
    def _templates(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_TEMPLATES:
            raise ValueError(f"{len(value)} templates; at most {MAX_TEMPLATES} are allowed")
        for template in value:
            _short(template, MAX_TEMPLATE, "the template")
            problem = template_problem(template)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        return _short(value, MAX_DESCRIPTION, "the description")

    def edited(self, **changes) -> Attribute:
        """A copy with `changes`, validated like a new one (SchemaError naming what is wrong; pydantic's
        model_copy would not check)."""
        return _validated(type(self), {**self.model_dump(), **changes})

    @model_validator(mode="after")
    def _binary(self) -> Attribute:
        if self.kind == "binary":
            if not self.name.lower().startswith("is "):
                raise ValueError(f"binary attribute '{self.name}' must be named 'is ...'")
            if set(t.lower() for t in self.tags) - {*BINARY_TAGS, NOT_VISIBLE}:
                raise ValueError(f"binary attribute '{self.name}' takes the tags yes / no (and '{NOT_VISIBLE}')")
        for tag in self.tag_prompts:
            if tag not in self.tags:
                raise ValueError(f"prompt given for '{tag}', which is not a tag of '{self.name}'")
        for template in self.templates:
            if "{tag}" not in template and self.kind == "descriptive":
                raise ValueError(f"template {template!r} of '{self.name}' has no {{tag}} placeholder")
        return self

    def prompts(self, label: str) -> list[list[str]]:
        """The prompts of every tag (one list per tag, in tag order) for an image of class `label`."""
        return [list(self.tag_prompts.get(tag) or self._default_prompts(tag, label)) for tag in self.tags]

    def _default_prompts(self, tag: str, label: str) -> list[str]:
        if tag == NOT_VISIBLE:
            subject = re.sub(r"^is\s+", "", self.name)
            return [f"a photo of a {label} where the {subject} is not visible",
                    f"a photo of a {label} without {subject}"]
        if self.kind == "binary":
            phrase = self.name if tag == "yes" else re.sub(r"^is\s+", "is not ", self.name)
            templates = self.templates or ("a photo of a {label} that {phrase}", "a {label} that {phrase}")
            return [t.format(label=label, phrase=phrase, tag=tag) for t in templates]
        templates = self.templates or ("a photo of a {label} with {tag} {attribute}", "a {tag} {label}",
                                       "a photo of a {label}, {attribute}: {tag}")
        return [t.format(label=label, tag=tag, attribute=self.name) for t in templates]


class AttributeSchema(BaseModel):
    """An ordered set of attributes with unique names; what one stored version holds."""

    model_config = ConfigDict(frozen=True)

    attributes: tuple[Attribute, ...] = ()
    task: str = ""  # the task description the attributes were made for

    @field_validator("attributes")
    @classmethod
    def _unique(cls, value: tuple[Attribute, ...]) -> tuple[Attribute, ...]:
        if len(value) > MAX_ATTRIBUTES:
            raise ValueError(f"{len(value)} attributes; a schema can have at most {MAX_ATTRIBUTES}")
        names = [a.name.lower() for a in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate attribute names: {', '.join(duplicates)}")
        return value

    def __getitem__(self, name: str) -> Attribute:
        for attribute in self.attributes:
            if attribute.name == name:
                return attribute
        raise KeyError(f"no attribute named '{name}'; known: {', '.join(self.names())}")

    def names(self, *, enabled_only: bool = False) -> list[str]:
        return [a.name for a in self.attributes if a.enabled or not enabled_only]

    def enabled(self) -> list[Attribute]:
        return [a for a in self.attributes if a.enabled]

    def edited(self, **changes) -> AttributeSchema:
        """A copy with `changes`, validated like a new schema (SchemaError naming what is wrong)."""
        return _validated(type(self), {**self.model_dump(), **changes})

    def validated(self) -> AttributeSchema:
        """This schema checked again (one built by model_copy or by hand skips pydantic's checks)."""
        return self.edited()

    def replace(self, attribute: Attribute, *, name: str | None = None) -> AttributeSchema:
        """A new, validated schema with `attribute` in place of the one named `name` (default: its own name), or
        added at the end."""
        name = name or attribute.name
        kept = [a for a in self.attributes if a.name != name]
        position = next((i for i, a in enumerate(self.attributes) if a.name == name), len(kept))
        kept.insert(position, attribute)
        return self.edited(attributes=tuple(kept))

    def without(self, name: str) -> AttributeSchema:
        return self.edited(attributes=tuple(a for a in self.attributes if a.name != name))

    def with_new_from(self, other: AttributeSchema) -> AttributeSchema:
        """This schema plus the attributes of `other` it does not have (merging a proposal into people's edits)."""
        merged = self
        for attribute in other.attributes:
            if attribute.name not in self.names():
                merged = merged.replace(attribute)
        return merged

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str) -> AttributeSchema:
        """The schema stored as `raw`; SchemaError naming what is wrong when it does not validate."""
        try:
            return cls.model_validate_json(raw)
        except ValidationError as error:
            raise SchemaError(validation_reasons(error)) from None
