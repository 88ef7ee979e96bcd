"""Attribute proposal through a local OpenAI-compatible server: realistic replies, repairs, rejections, refusals."""
from __future__ import annotations

import json

import pytest

from hibug_core.llm.client import LLMConfig
from hibug_core.tagging.propose import ProposalError, propose_with_llm

from fake_openai import FakeOpenAIServer

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
    ring = schema["is wearing a ring"]
    assert ring.kind == "binary" and ring.tags == ("yes", "no", "not visible")
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
        with pytest.raises(ProposalError,
                           match="no usable attributes after 3 attempts: the model refused: I can't help"):
            propose_with_llm(TASK, CLASSES, config(server))


def test_nothing_usable_is_rejected_not_stored():
    bad = {"attributes": [{"name": "plumage", "tags": ["brown"]}, {"name": "", "tags": ["a", "b"]}]}
    with FakeOpenAIServer() as server:
        server.text_reply = json.dumps(bad)
        with pytest.raises(ProposalError, match="every proposed attribute was rejected: rejected 'plumage'"):
            propose_with_llm(TASK, CLASSES, config(server))


def test_a_dead_server_says_what_to_do():
    with pytest.raises(ProposalError, match="could not reach fake-llm at http://127.0.0.1:9/v1: Connection error. "
                                            "Check the server, or use the built-in library"):
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
        code = main(["attributes", "propose", str(colour_project.folder), "--purpose", TASK, "--llm",
                     "--llm-model", "fake-llm", "--llm-base-url", server.url])
    assert code == 0
    out = capsys.readouterr().out
    assert "note: rejected 'plumage'" in out
    # Merged into version 1 by default: its 11 attributes kept, the 4 proposed added, each change listed.
    assert "saved version 2: 15 attributes (version 1 with the new attributes of the 4 proposed by fake-llm " \
           "(hibug2 flow))" in out
    assert "  added: beak shape (" in out and "  removed: " not in out
    names = load_schema(colour_project).names()
    assert names[:2] == ["color", "is round"] and names[-4:] == ["beak shape", "is wearing a ring", "perch", "lighting"]
    assert schema_history(colour_project)["note"].iat[0] == ("version 1 with the new attributes of a proposal by "
                                                             "fake-llm (hibug2 flow)")
    # Replacing is asked for by name; the same proposal again adds nothing and saves nothing.
    with FakeOpenAIServer() as server:
        server.text_replies = [json.dumps(GOOD)] * 4
        llm = ["--purpose", TASK, "--llm", "--llm-model", "fake-llm", "--llm-base-url", server.url]
        assert main(["attributes", "propose", str(colour_project.folder), *llm]) == 0
        assert "nothing new" in capsys.readouterr().out and schema_history(colour_project)["version"].max() == 2
        assert main(["attributes", "propose", str(colour_project.folder), *llm, "--replace"]) == 0
    out = capsys.readouterr().out
    assert "saved version 3: 4 attributes (version 2 replaced by the 4 proposed by" in out and "  removed: color" in out
    assert load_schema(colour_project).names() == ["beak shape", "is wearing a ring", "perch", "lighting"]


def test_representative_images_are_the_samples_nearest_each_cluster_centre():
    import numpy as np

    from hibug_core.tagging.suggest import representative_images

    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10]], dtype=float)
    points = np.concatenate([c + rng.normal(0, 0.5, (n, 2)) for c, n in zip(centres, (30, 20, 10))])
    chosen = representative_images(np.arange(100, 160), points, k=3)
    expected = [100 + int(np.argmin(np.linalg.norm(points[a:b] - points[a:b].mean(axis=0), axis=1))) + a
                for a, b in ((0, 30), (30, 50), (50, 60))]
    assert list(chosen) == expected


def _two_colour_schema(project):
    from hibug_core.attributes import Attribute
    from hibug_core.store.attribute_versions import load_schema

    schema = load_schema(project)
    return schema.replace(Attribute(name="color", tags=("red", "green")))


@pytest.mark.slow
def test_tags_the_data_need_are_added_from_a_multimodal_model(colour_project, tmp_path, monkeypatch):
    from hibug_core.tagging.suggest import propose_tags_from_data, refine_tags

    from fake_openai import colour_of, images_of

    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    schema = _two_colour_schema(colour_project)
    with FakeOpenAIServer() as server:
        server.answer = lambda body: json.dumps({"color": colour_of(images_of(body)[0]), "is round": "maybe"})
        result = propose_tags_from_data(colour_project, schema, encoder="tiny-open_clip", k=12,
                                        llm_config=config(server))
        assert len(server.requests) == 6  # the 12 images hold 6 distinct pictures, two of them blue
        assert result.added == {"color": ["blue"]} and result.schema["color"].tags == ("red", "green", "blue")
        assert result.schema["is round"].tags == ("yes", "no"), "yes/no attributes are never extended"
        refined = refine_tags(colour_project, schema, split="val", n=50, encoder="tiny-open_clip",
                              llm_config=config(server), min_count=2)
    assert len(server.requests) == 12  # all 10 validation images, 6 distinct pictures
    assert refined.added == {"color": ["blue"]}


def test_offline_tag_proposal_scores_a_vocabulary_with_the_encoder(colour_project, tmp_path, monkeypatch):
    from hibug_core.tagging.suggest import VOCABULARY, propose_tags_from_data

    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    schema = _two_colour_schema(colour_project)
    result = propose_tags_from_data(colour_project, schema, encoder="tiny-open_clip", k=12, min_count=1)
    assert result.notes[0].startswith("no multimodal model: values chosen by the tiny-open_clip encoder")
    assert set(result.added) <= {"color"} and set(result.added.get("color", [])) <= set(VOCABULARY["colo"])
    assert result.schema["dominant colour"] == schema["dominant colour"]


def test_comparative_method_sends_a_right_and_a_wrong_image_of_one_class(colour_project):
    from hibug_core.tagging.suggest import propose_by_comparison

    from fake_openai import images_of

    answer = {"attributes": [{"name": "corner sharpness", "kind": "descriptive", "tags": ["sharp", "rounded"],
                              "reason": "rounded corners look like a circle"},
                             {"name": "touches the border", "kind": "binary", "tags": ["yes", "no"]}]}
    with FakeOpenAIServer() as server:
        server.answer = lambda body: json.dumps(answer) if len(images_of(body)) == 2 else None
        result = propose_by_comparison(colour_project, "model", config(server), pairs=2)
    assert len(server.requests) == 2
    assert 'labelled "square"' in server.requests[0]["messages"][0]["content"][0]["text"]
    assert result.schema.names() == ["corner sharpness", "is touches the border"]
    assert result.schema["corner sharpness"].description.startswith("tells a right from a wrong 'square'")
    assert result.method == "comparative"


def test_whole_flow_propose_then_tags_from_the_data_then_edit(colour_project, tmp_path, monkeypatch, capsys):
    from hibug_core.cli import main
    from hibug_core.store.attribute_versions import load_schema, schema_history

    from fake_openai import colour_of, images_of

    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    folder = str(colour_project.folder)
    proposal = {"attributes": [{"name": "color", "kind": "descriptive", "tags": ["red", "green", "Red"]},
                               {"name": "round", "kind": "binary", "tags": ["yes", "no"]}]}

    def answer(body):
        images = images_of(body)
        return json.dumps({"color": colour_of(images[0])}) if images else json.dumps(proposal)

    with FakeOpenAIServer() as server:
        server.answer = answer
        llm = ["--llm", "--llm-model", "fake-llm", "--llm-base-url", server.url]
        assert main(["attributes", "propose", folder, "--purpose", "classify shapes", *llm, "--replace"]) == 0
        assert main(["attributes", "suggest-tags", folder, "--encoder", "tiny-open_clip", *llm]) == 0
    out = capsys.readouterr().out
    assert "note: 'color': removed duplicate tags red" in out and "added color: blue" in out
    assert main(["attributes", "edit", folder, "is round", "--rename", "is circular"]) == 0
    schema = load_schema(colour_project)
    assert schema.names() == ["color", "is circular"] and schema["color"].tags == ("red", "green", "blue")
    assert schema_history(colour_project)["version"].tolist() == [4, 3, 2, 1]


def test_the_comparative_flow_from_the_cli_and_the_attributes_page(colour_project, monkeypatch, capsys):
    """`hibug attributes propose --llm --method comparative` and the page's comparative choice show a multimodal model
    pairs of a right and a wrong prediction of one class (the local test server) and merge what it proposes."""
    from hibug_core.cli import main
    from hibug_core.store.attribute_versions import load_schema

    from fake_openai import images_of
    from page_support import open_page

    answer = {"attributes": [{"name": "corner sharpness", "kind": "descriptive", "tags": ["sharp", "rounded"]}]}
    with FakeOpenAIServer() as server:
        server.answer = lambda body: json.dumps(answer) if len(images_of(body)) == 2 else None
        assert main(["attributes", "propose", str(colour_project.folder), "--llm", "--method", "comparative",
                     "--llm-model", "fake-vision", "--llm-base-url", server.url]) == 0
        out = capsys.readouterr().out
        assert "comparative flow, pairs of model's right and wrong images" in out
        assert "corner sharpness" in load_schema(colour_project).names()
        asked = len(server.requests)
        assert asked >= 1 and all(len(images_of(r)) == 2 for r in server.requests)

        at = open_page(monkeypatch, "pages/1_Attributes.py", colour_project.folder, user="ana")
        at.radio(key="propose_source").set_value("language model (comparative flow)")
        at.text_input(key="propose_llm_model").set_value("fake-vision")
        at.text_input(key="propose_llm_url").set_value(server.url)
        at.button(key="propose_submit").click().run()
    assert not at.exception and len(server.requests) > asked
    assert any("comparative flow" in m.value for m in at.markdown)


def test_the_comparative_flow_shows_objects_outlined_in_their_crop_and_whole_image(detection_demo):
    from hibug_core.llm.client import LLMConfig
    from hibug_core.store.project import Project
    from hibug_core.tagging.suggest import propose_by_comparison

    from fake_openai import images_of

    answer = {"attributes": [{"name": "corner sharpness", "kind": "descriptive", "tags": ["sharp", "rounded"]}]}
    with FakeOpenAIServer() as server, Project.open(detection_demo, read_only=True) as project:
        server.answer = lambda body: json.dumps(answer) if len(images_of(body)) == 4 else None  # 2 views, 2 objects
        result = propose_by_comparison(project, "shape-fcos", LLMConfig(base_url=server.url, model="fake",
                                                                        transport_retries=0), pairs=2, outlined=True)
    assert result.schema.names() == ["corner sharpness"] and len(server.requests) == 2
    assert "outlined in red: first its crop, then its whole image" in server.requests[0]["messages"][0]["content"][0][
        "text"]


def test_tags_from_the_data_on_the_attributes_page_are_shown_then_saved(colour_project, tmp_path, monkeypatch):
    """The Attributes page's "Tags from the data": a multimodal model (the local test server) sees the representative
    images, the tags they need are shown against the version in force, and saving makes a new version."""
    from hibug_core.store.attribute_versions import load_schema, save_schema, schema_history

    from fake_openai import colour_of, images_of
    from page_support import open_page

    monkeypatch.setenv("HIBUG_CACHE", str(tmp_path / "cache"))
    save_schema(colour_project, _two_colour_schema(colour_project), note="red and green only")  # blue is missing
    at = open_page(monkeypatch, "pages/1_Attributes.py", colour_project.folder, user="ana")
    with FakeOpenAIServer() as server:
        server.answer = lambda body: json.dumps({"color": colour_of(images_of(body)[0])})
        at.text_input(key="suggest_encoder").set_value("tiny-open_clip")
        at.checkbox(key="suggest_llm").check()
        at.text_input(key="suggest_llm_model").set_value("fake-vision")
        at.text_input(key="suggest_llm_url").set_value(server.url)
        at.button(key="suggest_submit").click().run()
    assert not at.exception, at.exception
    assert any(m.value == "**Adds to version 2**: color\\: blue" for m in at.markdown)  # Markdown-escaped
    at.button(key="suggest_save").click().run()
    assert not at.exception
    assert load_schema(colour_project)["color"].tags == ("red", "green", "blue")
    assert "tags from the data: color: blue" in schema_history(colour_project)["note"].tolist()
