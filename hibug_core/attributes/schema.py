"""The attribute schema: attributes grouped as main object / background / global, each with its tags and prompts."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

GROUPS = ("main object", "background", "global")
NOT_VISIBLE = "not visible"
BINARY_TAGS = ("yes", "no")


class Attribute(BaseModel):
    """One visual attribute. Binary attributes are named "is ..." and take the tags yes / no."""

    model_config = ConfigDict(frozen=True)

    name: str
    group: Literal["main object", "background", "global"] = "main object"
    kind: Literal["binary", "descriptive"] = "descriptive"
    tags: tuple[str, ...]
    # Prompt templates for zero-shot tagging; {tag} and {label} are filled in. Empty: the defaults below.
    templates: tuple[str, ...] = ()
    # Prompts for single tags, used instead of the templates (e.g. for "not visible").
    tag_prompts: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    enabled: bool = True
    source: str = "manual"  # manual, llm, library, measured
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("an attribute needs a name")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(" ".join(t.split()) for t in value)
        if any(not t for t in cleaned):
            raise ValueError("tags cannot be empty")
        lowered = [t.lower() for t in cleaned]
        duplicates = sorted({t for t in lowered if lowered.count(t) > 1})
        if duplicates:
            raise ValueError(f"duplicate tags: {', '.join(duplicates)}")
        if len(cleaned) < 2:
            raise ValueError("an attribute needs at least two tags")
        return cleaned

    @model_validator(mode="after")
    def _binary(self) -> "Attribute":
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
            return [f"a photo of a {label} where the {subject} is not visible", f"a photo of a {label} without {subject}"]
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

    def replace(self, attribute: Attribute) -> "AttributeSchema":
        """A new schema with `attribute` replacing the one of the same name, or added at the end."""
        kept = [a for a in self.attributes if a.name != attribute.name]
        position = next((i for i, a in enumerate(self.attributes) if a.name == attribute.name), len(kept))
        kept.insert(position, attribute)
        return self.model_copy(update={"attributes": tuple(kept)})

    def with_new_from(self, other: "AttributeSchema") -> "AttributeSchema":
        """This schema plus the attributes of `other` it does not have (merging a proposal into people's edits)."""
        merged = self
        for attribute in other.attributes:
            if attribute.name not in self.names():
                merged = merged.replace(attribute)
        return merged

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str) -> "AttributeSchema":
        return cls.model_validate_json(raw)
