"""Attribute proposal through a local OpenAI-compatible server: realistic replies, repairs, rejections, refusals."""
from __future__ import annotations

import json

import pytest

from fake_openai import FakeOpenAIServer
from hibug_core.attributes.propose import ProposalError, propose_with_llm
from hibug_core.llm.client import LLMConfig

TASK, CLASSES = "classify bird species in photos", ["sparrow", "finch", "wren"]
GOOD = {"attributes": [
    {"name": "Beak shape", "group": "main object", "kind": "descriptive", "tags": ["conical", "thin", "hooked"],
     "templates": ["a photo of a {label} with a {tag} beak"], "reason": "sparrows and finches differ by beak"},
    {"name": "wearing a ring", "group": "main object", "kind": "binary", "tags": ["yes", "no", "not visible"],
     "templates": []},
    {"name": "perch", "group": "background", "kind": "descriptive", "tags": ["branch", "Branch", "wire", "ground"],
     "templates": ["a {label} sitting on a {tag}", "a bird {broken"]},
    {"name": "plumage", "group": "main object", "kind": "descriptive", "tags": ["brown"], "templates": []},
    {"name": "lighting", "group": "global", "kind": "descriptive", "tags": ["daylight", "overcast", "dusk"],
     "templates": ["a {label} in light"]},
]}


def config(server, **overrides) -> LLMConfig:
    return LLMConfig(base_url=server.url, model="fake-llm", transport_retries=0, **overrides)


def test_a_realistic_proposal_is_repaired_and_self_checked():
    checked = {"attributes": [a for a in GOOD["attributes"] if a["name"] != "lighting"]}
    with FakeOpenAIServer() as server:
        server.text_replies = [json.dumps(GOOD), "```json\n" + json.dumps(checked) + "\n```"]
        result = propose_with_llm(TASK, CLASSES, config(server))
    schema = result.schema
    assert schema.names() == ["beak shape", "is wearing a ring", "perch"]
    assert schema["is wearing a ring"].kind == "binary" and schema["is wearing a ring"].tags == ("yes", "no", "not visible")
    assert schema["perch"].tags == ("branch", "wire", "ground") and schema["perch"].group == "background"
    assert schema["perch"].templates == ("a {label} sitting on a {tag}",)
    assert {a.source for a in schema.attributes} == {"llm"}
    assert "'wearing a ring': a yes/no attribute is named 'is ...'; renamed to 'is wearing a ring'" in result.notes
    assert "'perch': removed duplicate tags branch" in result.notes
    assert "rejected 'plumage': it has 1 tag; an attribute needs at least two" in result.notes
    assert "self-check removed lighting" in result.notes
    first = server.requests[0]["messages"][0]["content"]
    assert "blur the boundary between two similar classes" in first and "sparrow, finch, wren" in first
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert "Remove attributes that overlap" in server.requests[1]["messages"][0]["content"]


def test_malformed_json_is_retried_with_the_reason():
    with FakeOpenAIServer() as server:
        server.text_replies = ['{"attributes": [{"name": "beak shape", "tags": ["conical", "thin"', json.dumps(GOOD)]
        result = propose_with_llm(TASK, CLASSES, config(server), self_check=False)
    assert "beak shape" in result.schema.names()
    follow_up = server.requests[1]["messages"][-1]["content"]
    assert "could not be used (the reply is not JSON" in follow_up


def test_a_refusal_ends_in_a_clear_message():
    with FakeOpenAIServer() as server:
        server.text_replies = [{"refusal": "I can't help with that."}] * 3
        with pytest.raises(ProposalError, match="no usable attributes after 3 attempts: the model refused: I can't help"):
            propose_with_llm(TASK, CLASSES, config(server))


def test_nothing_usable_is_rejected_not_stored():
    bad = {"attributes": [{"name": "plumage", "tags": ["brown"]}, {"name": "", "tags": ["a", "b"]}]}
    with FakeOpenAIServer() as server:
        server.text_reply = json.dumps(bad)
        with pytest.raises(ProposalError, match="every proposed attribute was rejected: rejected 'plumage'"):
            propose_with_llm(TASK, CLASSES, config(server))


def test_a_dead_server_says_what_to_do():
    with pytest.raises(ProposalError, match="could not ask fake-llm at http://127.0.0.1:9/v1: .*built-in library"):
        propose_with_llm(TASK, CLASSES, LLMConfig(base_url="http://127.0.0.1:9/v1", model="fake-llm",
                                                  transport_retries=0, timeout_s=2))


def test_a_junk_self_check_keeps_the_first_proposal():
    with FakeOpenAIServer() as server:
        server.text_replies = [json.dumps(GOOD), "no", "still no", "nope"]
        result = propose_with_llm(TASK, CLASSES, config(server), method="hibug")
    assert result.schema.names() == ["beak shape", "is wearing a ring", "perch", "lighting"]
    assert any(note.startswith("self-check gave nothing usable") for note in result.notes)
    assert "with {tag} hair" in server.requests[0]["messages"][0]["content"]


def test_cli_proposes_with_a_language_model_and_stores_a_version(colour_project, capsys):
    from hibug_core.cli import main
    from hibug_core.store.attribute_versions import load_schema, schema_history

    with FakeOpenAIServer() as server:
        server.text_replies = [json.dumps(GOOD), json.dumps(GOOD)]
        code = main(["attributes", "propose", str(colour_project.folder), "--task", TASK, "--llm",
                     "--llm-model", "fake-llm", "--llm-base-url", server.url])
    assert code == 0
    out = capsys.readouterr().out
    assert "note: rejected 'plumage'" in out and "saved version 2: 4 attributes proposed by fake-llm (hibug2 flow)" in out
    assert load_schema(colour_project).names() == ["beak shape", "is wearing a ring", "perch", "lighting"]
    assert schema_history(colour_project)["note"].iat[0] == "proposed by fake-llm (hibug2 flow)"
