"""Operations on the attribute schema: propose attributes for the task, suggest tags from the data; each saves what it
found as a new version (the Attributes page shows the draft first and saves it by hand)."""
from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from hibug_core.attributes.library import LIBRARY
from hibug_core.operations.base import Encoder, LLMSettings, OneOf, Operation, Result
from hibug_core.progress import no_progress
from hibug_core.tagging.project_proposal import PROPOSAL_METHODS


class ProposeAttributes(Operation, LLMSettings):
    kind: ClassVar[str] = "propose"
    summary: ClassVar[str] = "propose attributes for the task (a language model, or the built-in library)"
    purpose: str | None = Field(None, description="what the model does, in words, e.g. 'classify bird species in "
                                                  "photos' (default: the project's name)")
    library: Annotated[str | None, OneOf(LIBRARY)] = Field(
        None, description="built-in library entry (default: chosen from the task)")
    llm: bool = Field(False, description="ask a language model (OpenAI-compatible)")
    method: Annotated[str, OneOf(PROPOSAL_METHODS)] = Field(
        "hibug2", description="the language model's flow: " + PROPOSAL_METHODS.help_text())
    replace: bool = Field(False, description="replace the attributes in force with the proposal (default: add the "
                                             "proposal's new attributes to them, keeping every current one)")

    def proposal(self, project, *, model: str | None = None, api_key: str | None = None):
        """The proposal (a ProposalResult), nothing stored."""
        from hibug_core.tagging.project_proposal import propose_for_project
        from hibug_core.tasks import task_of

        return propose_for_project(project, self, task=task_of(project), model=model, api_key=api_key)

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.attributes.diff import proposal_note, proposed_version, schema_diff
        from hibug_core.attributes.schema import MAX_ATTRIBUTES
        from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema

        base = latest_version(project)
        found = self.proposal(project)
        lines = [f"  note: {note}" for note in found.notes]
        current = load_schema(project) if base is not None else None
        schema, left_out = proposed_version(current, found.schema, replace=self.replace)
        if left_out:
            lines.append(f"  note: {left_out} proposed attributes left out: a schema holds at most {MAX_ATTRIBUTES}")
        changes = schema_diff(current, schema) if current is not None else None
        if changes is not None and changes.empty:
            return Result(f"nothing new: the {len(found.schema.attributes)} attributes proposed by {found.source} are "
                          f"all in version {base} already; nothing saved (--replace replaces it with the proposal)",
                          {"version": base}, lines)
        version = save_schema(project, schema, base_version=base, author=author,
                              note=proposal_note(base, found.source, replace=self.replace))
        how = "replaced by" if self.replace else "with the new attributes of"
        said = (f"saved version {version}: {len(schema.attributes)} attributes"
                + (f" (version {base} {how} the {len(found.schema.attributes)} proposed by {found.source})"
                   if current is not None else f" proposed by {found.source}"))
        lines += [f"  {row.change}: {row.attribute} ({row.what})"
                  for row in (changes.itertuples() if changes is not None else ())]
        return Result(said, {"version": version}, lines)


class SuggestTags(Operation, LLMSettings):
    kind: ClassVar[str] = "suggest tags"
    summary: ClassVar[str] = "suggest tags from representative images (a multimodal LLM, or the encoder's vocabulary)"
    encoder: Encoder = Field("conse", description="encoder for representative images")
    refine: bool = Field(False, description="a pass over validation images instead")
    llm: bool = Field(False, description="ask a multimodal language model")

    def suggestion(self, project, schema, *, api_key: str | None = None):
        """The tags found (a TagProposal), nothing stored."""
        from hibug_core.tagging.suggest import suggest_tags

        return suggest_tags(project, schema, self, api_key=api_key)

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema
        from hibug_core.tagging.suggest import added_note, added_tags

        base = latest_version(project)
        found = self.suggestion(project, load_schema(project))
        lines = [f"  note: {note}" for note in found.notes]
        if not found.added:
            return Result("no new tags needed; nothing saved", {"version": base}, lines)
        version = save_schema(project, found.schema, note=added_note(found), base_version=base, author=author)
        return Result(f"saved version {version}: added {added_tags(found)}", {"version": version}, lines)
