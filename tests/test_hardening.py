"""The hostile and clumsy cases of the hardening issue, one test per case: each failed before its fix."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from hibug_core.cli import main


def _versions(project) -> int:
    from hibug_core.store.attribute_versions import latest_version

    return latest_version(project)


def test_an_edit_that_would_make_the_schema_invalid_is_refused_and_nothing_is_stored(colour_project, capsys):
    folder = str(colour_project.folder)
    before = _versions(colour_project)
    assert main(["attributes", "edit", folder, "color", "--rename", "is round"]) == 2
    assert ("edit of 'color' refused, nothing saved: duplicate attribute names: is round"
            in capsys.readouterr().err)
    assert main(["attributes", "edit", folder, "color", "--template", "a {label} {tag} {oops}"]) == 2
    assert ("template 'a {label} {tag} {oops}' uses {oops}; only {label}, {tag}, {attribute}, {phrase} can be "
            "filled in") in capsys.readouterr().err
    assert main(["attributes", "edit", folder, "color", "--template", "a {tag.__class__.__mro__}"]) == 2
    assert "uses {tag.__class__.__mro__}" in capsys.readouterr().err
    assert main(["attributes", "edit", folder, "color", "--template", "a {tag} }"]) == 2
    assert "is not a valid format string" in capsys.readouterr().err
    assert _versions(colour_project) == before
    assert main(["attributes", "edit", folder, "color", "--template", "a {label} in {tag}"]) == 0
    assert main(["tag", folder, "--encoder", "tiny-open_clip", "--attributes", "color"]) == 0


def test_a_schema_built_without_validation_is_refused_by_save(colour_project):
    from hibug_core.errors import SchemaError
    from hibug_core.store.attribute_versions import load_schema, save_schema

    schema = load_schema(colour_project)
    broken = schema.model_copy(update={"attributes": (*schema.attributes, schema.attributes[0])})
    with pytest.raises(SchemaError, match="duplicate attribute names: color"):
        save_schema(colour_project, broken)
    with pytest.raises(SchemaError, match="duplicate attribute names: color"):
        schema.edited(attributes=(*schema.attributes, schema.attributes[0]))


def test_an_invalid_stored_schema_is_named_not_a_traceback(colour_project, capsys):
    from hibug_core.errors import ProjectError
    from hibug_core.store.attribute_versions import load_schema

    raw = json.loads(load_schema(colour_project).to_json())
    raw["attributes"].append(dict(raw["attributes"][0]))  # as an older hibug stored it
    with colour_project.engine.begin() as connection:
        connection.execute(text("INSERT INTO attribute_schemas (schema_json, author, created_at, note) "
                                "VALUES (:s, 'old', '2026-01-01', '')"), {"s": json.dumps(raw)})
    with pytest.raises(ProjectError, match="stored as the newest version are not valid .duplicate attribute names"):
        load_schema(colour_project)
    folder = str(colour_project.folder)
    assert main(["attributes", "show", folder, "--history"]) == 0
    assert main(["attributes", "show", folder]) == 2
    assert main(["slices", folder]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Save a corrected schema" in err
    assert main(["attributes", "show", folder, "--version", "1"]) == 0


def test_runaway_schemas_are_capped(colour_project):
    from hibug_core.attributes.schema import MAX_ATTRIBUTES, Attribute, AttributeSchema
    from hibug_core.errors import SchemaError

    with pytest.raises(ValueError, match="the attribute name 'x+'... is 1,048,576 characters long; at most 100"):
        Attribute(name="x" * 2 ** 20, tags=("a", "b"))
    many = tuple(Attribute(name=f"a{i}", tags=("x", "y")) for i in range(1000))
    with pytest.raises(ValueError, match=f"1000 attributes; a schema can have at most {MAX_ATTRIBUTES}"):
        AttributeSchema(attributes=many)
    with pytest.raises(SchemaError, match="60 tags; an attribute can have at most 50"):
        many[0].edited(tags=tuple(f"t{i}" for i in range(60)))


def _llm(server, **overrides):
    from hibug_core.llm.client import LLMConfig

    return LLMConfig(base_url=server.url, **{**dict(model="fake-vision", timeout_s=1.0, transport_retries=0,
                                                   concurrency=3, abort_after=2), **overrides})


@pytest.mark.parametrize("mode, problem", [("deep", "the reply is JSON nested too deeply to read"),
                                           ("huge", "... (1,200,0")])
def test_deep_or_huge_llm_replies_end_the_run_with_a_short_message(colour_project, mode, problem):
    from fake_openai import DEEP, FakeOpenAIServer

    from hibug_core.attributes.propose import ProposalError, propose_with_llm
    from hibug_core.errors import TaggingError
    from hibug_core.store import tag_store
    from hibug_core.tagging.mllm import tag_with_llm

    with FakeOpenAIServer(mode=mode) as server:
        server.text_reply = DEEP if mode == "deep" else json.dumps({"attributes": [{"name": "x" * 2 ** 20, "tags": ["a", "b"]}]})
        with pytest.raises(TaggingError) as raised:
            tag_with_llm(colour_project, _llm(server))
        if mode == "deep":
            with pytest.raises(ProposalError, match="nested too deeply"):
                propose_with_llm("shapes", ["circle"], _llm(server))
        else:
            with pytest.raises(ProposalError, match="whose name is 1,048,576 characters long .at most 100."):
                propose_with_llm("shapes", ["circle"], _llm(server))
    assert problem in str(raised.value) and len(str(raised.value)) < 1000
    assert tag_store.runs(colour_project)["status"].tolist() == ["failed"]


def test_a_silent_server_is_reported_while_waiting(colour_project, monkeypatch):
    from fake_openai import FakeOpenAIServer

    from hibug_core.errors import TaggingError
    from hibug_core.tagging import mllm

    monkeypatch.setattr(mllm, "HEARTBEAT_S", 0.2)
    seen = []
    with FakeOpenAIServer(delay_s=3.0) as server, pytest.raises(TaggingError, match="timed out"):
        mllm.tag_with_llm(colour_project, _llm(server, timeout_s=1.5), progress=lambda s, d, t: seen.append(s))
    waiting = [s for s in seen if "no answer for" in s]
    assert waiting and "(a request is given up after 2 s)" in waiting[0]


def test_a_proposal_of_a_thousand_attributes_keeps_the_cap(colour_project):
    from hibug_core.attributes.propose import Proposal, repair
    from hibug_core.attributes.schema import MAX_ATTRIBUTES

    proposal = Proposal.model_validate({"attributes": [{"name": f"a{i}", "tags": ["x", "y"]} for i in range(1000)]})
    attributes, notes = repair(proposal)
    assert len(attributes) == MAX_ATTRIBUTES
    assert notes == [f"kept the first {MAX_ATTRIBUTES} attributes (the most a schema holds); 800 more were not read"]
