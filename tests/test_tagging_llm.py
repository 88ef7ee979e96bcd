"""Multimodal-LLM tagging against a local OpenAI-compatible server: valid answers, retries, and every way it fails."""
from __future__ import annotations

import socket

import pytest

from hibug_core.errors import TaggingError
from hibug_core.llm.client import LLMConfig
from hibug_core.store import tag_store
from hibug_core.tagging.mllm import tag_with_llm
from hibug_core.tagging.run import current_tags, project_tag_quality
from hibug_core.tasks import task_of

from fake_openai import FakeOpenAIServer

# A timeout long enough that a busy machine is no failure; the tests of timeouts set a short one themselves.
FAST = dict(model="fake-vision", timeout_s=30.0, transport_retries=0, concurrency=3, abort_after=2)


def config(server, **overrides) -> LLMConfig:
    return LLMConfig(base_url=server.url, **{**FAST, **overrides})


def test_one_request_per_image_returns_every_attribute(colour_project):
    with FakeOpenAIServer() as server:
        run_id = tag_with_llm(colour_project, config(server), views=task_of(colour_project).views)
    assert len(server.requests) == 12
    assert server.max_in_flight <= 3
    request = server.requests[0]
    assert request["model"] == "fake-vision"
    properties = request["response_format"]["json_schema"]["schema"]["properties"]
    assert properties["color"]["enum"] == ["red", "green", "blue"]
    assert tag_store.runs(colour_project).set_index("id").at[run_id, "status"] == "finished"
    tags = current_tags(colour_project).tags
    assert list(tags["color"].astype(str)) == ["red", "green", "blue"] * 4
    assert set(tags["is round"].astype(str)) == {"yes"}
    assert project_tag_quality(colour_project).accuracy("color") == 1.0


def test_invalid_replies_are_retried_with_the_reason(colour_project):
    with FakeOpenAIServer(mode="flaky") as server:
        tag_with_llm(colour_project, config(server), views=task_of(colour_project).views)
    assert len(server.requests) == 24
    follow_up = server.requests[-1]["messages"][-1]["content"]
    assert "could not be used" in follow_up and "not JSON" in follow_up
    assert list(current_tags(colour_project).tags["color"].astype(str)) == ["red", "green", "blue"] * 4


def _tag_once_then(colour_project, mode: str, **overrides):
    with FakeOpenAIServer() as server:
        tag_with_llm(colour_project, config(server), views=task_of(colour_project).views)
    before = current_tags(colour_project).tags.copy()
    runs_before = len(tag_store.runs(colour_project))
    with FakeOpenAIServer(mode=mode) as server:
        with pytest.raises(TaggingError) as raised:
            tag_with_llm(colour_project, config(server, **overrides), resume=False, views=task_of(colour_project).views)
    after = current_tags(colour_project).tags
    assert after.equals(before), "tags stored before a failed run must stay in force"
    runs = tag_store.runs(colour_project)
    assert len(runs) == runs_before + 1 and runs["status"].iat[-1] == "failed"
    return str(raised.value)


def test_junk_json_ends_in_a_clear_message_and_keeps_tags(colour_project):
    message = _tag_once_then(colour_project, "junk")
    assert "no valid answer for any of 12 image(s)" in message and "not JSON" in message
    assert "tags stored before are unchanged" in message


def test_a_tag_outside_the_list_is_refused(colour_project):
    message = _tag_once_then(colour_project, "bad_tag")
    assert '"color": "ultraviolet" is not one of [\'red\', \'green\', \'blue\']' in message


def test_http_500_ends_the_run_with_advice(colour_project):
    message = _tag_once_then(colour_project, "http500")
    assert "answered HTTP 500" in message and "run again to resume" in message


def test_timeout_ends_the_run_with_advice(colour_project):
    message = _tag_once_then(colour_project, "slow", timeout_s=0.3)
    assert "could not reach fake-vision" in message and "timed out" in message.lower()


def test_unreachable_server(colour_project):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TaggingError, match="could not reach fake-vision at http://127.0.0.1"):
        tag_with_llm(colour_project, LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", **FAST),
                     views=task_of(colour_project).views)
    assert tag_store.runs(colour_project)["status"].tolist() == ["failed"]


def test_a_stopped_run_resumes_where_it_ended(colour_project):
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.fail_after = 5
        with pytest.raises(TaggingError, match="answered HTTP 500"):
            tag_with_llm(colour_project, config(server, concurrency=1), views=task_of(colour_project).views)
    first_run = int(tag_store.runs(colour_project)["id"].iat[-1])
    with FakeOpenAIServer() as server:
        run_id = tag_with_llm(colour_project, config(server), views=task_of(colour_project).views)
    assert run_id == first_run
    assert len(server.requests) == 12 - 5, "answered images are not asked again"
    assert list(current_tags(colour_project).tags["color"].astype(str)) == ["red", "green", "blue"] * 4


def test_no_key_and_no_server_is_a_clear_message(colour_project, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from hibug_core.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="no API key: set OPENAI_API_KEY"):
        tag_with_llm(colour_project, LLMConfig(), views=task_of(colour_project).views)
