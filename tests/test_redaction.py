"""No secret is shown, logged or stored: keys planted in the base URL (user:password), its query, a header and the
environment, through runs that fail against a server that repeats everything it was sent."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from hibug_core.redaction import HIDDEN, carries_secret, redact, remember_secret

from fake_openai import FakeOpenAIServer

# Not shaped like any known key: only their being configured can hide them.
SECRETS = {"environment": "Zq8plantedEnv0001", "password": "Pw8plantedUrl0002", "query": "Qk8plantedQuery0003"}


def _leaks(text: str) -> list[str]:
    return [place for place, secret in SECRETS.items() if secret in text or quote(secret, safe="") in text]


def _files_leaking(folder: Path) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(folder)}: {place}" for place, secret in SECRETS.items()
                      if secret.encode() in data]
    return found


@pytest.mark.parametrize("text, expected", [
    ("http://user:hunter2secret@host/v1", f"http://{HIDDEN}@host/v1"),
    ("http://tokenonly@host:8000/v1", f"http://{HIDDEN}@host:8000/v1"),
    ("https://host/v1?api-version=2024&api-key=abc123def", f"https://host/v1?api-version=2024&api-key={HIDDEN}"),
    ("GET /v1?access_token=xyz98765&x=1", f"GET /v1?access_token={HIDDEN}&x=1"),
    ("{'Authorization': 'Bearer abcdefgh1234'}", f"{{'Authorization': 'Bearer {HIDDEN}'}}"),
    ("x-api-key: 0123456789", f"x-api-key: {HIDDEN}"),
    ('{"api_key": "s3cr3tvalue"}', f'{{"api_key": "{HIDDEN}"}}'),
    ("Incorrect API key provided: sk-proj-abcdefghijk", f"Incorrect API key provided: {HIDDEN}"),
    ("a tag colour = red, model resnet at 0.5", "a tag colour = red, model resnet at 0.5"),  # nothing to hide
    ("column 'keypoints': must be a list", "column 'keypoints': must be a list"),
    ("column 'attr:key': empty label", "column 'attr:key': empty label"),
    ("max tokens: 300; keys: 4", "max tokens: 300; keys: 4"),
    ("/v1/people?keypoints=17&monkey=3", "/v1/people?keypoints=17&monkey=3"),
    ("password=hunter22 and token: abc12345", f"password={HIDDEN} and token: {HIDDEN}"),
])
def test_every_kind_of_secret_is_hidden_and_nothing_else(text, expected):
    assert redact(text) == expected
    assert carries_secret(text) == (text != expected)


def test_json_stays_json_with_its_secrets_hidden():
    import json

    from hibug_core.redaction import redact_json

    record = {"status": "open", "assignee": None, "api_key": "abc12345", "url": "http://u:pw123456@h/v1", "n": 3}
    assert json.loads(redact_json(record)) == {"status": "open", "assignee": None, "api_key": HIDDEN,
                                               "url": f"http://{HIDDEN}@h/v1", "n": 3}
    assert json.loads(redact_json({"note": "api_key: abc12345"})) == {"note": f"api_key: {HIDDEN}"}


def test_a_configured_key_is_hidden_as_written_and_url_encoded(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "plain/value+with=odd")
    remember_secret("fromStreamlitSecrets42")
    assert redact("a plain/value+with=odd b") == f"a {HIDDEN} b"
    assert redact("q=plain%2Fvalue%2Bwith%3Dodd") == f"q={HIDDEN}"
    assert redact("key fromStreamlitSecrets42 shown") == f"key {HIDDEN} shown"


def test_a_key_typed_into_the_server_url_is_refused_without_echoing_it():
    from pydantic import ValidationError

    from hibug_core.operations import LLMSettings

    with pytest.raises(ValidationError) as raised:
        LLMSettings(llm_base_url=f"http://me:{SECRETS['password']}@127.0.0.1/v1")
    assert "the server URL carries a key" in str(raised.value) and not _leaks(str(raised.value))


def test_keys_in_the_url_its_query_a_header_and_the_environment_never_reach_a_message_log_or_file(
        colour_project, tmp_path, caplog):
    """A tagging run from the command line (stdout, stderr, -v logs) and one in this process (every logger at
    DEBUG, the error raised), both ending in the server's error that repeats the request; then every file of the
    project, its database included."""
    from hibug_core.errors import HibugError
    from hibug_core.llm.client import LLMConfig
    from hibug_core.store.tag_store import runs
    from hibug_core.tagging.mllm import tag_with_llm
    from hibug_core.tasks import task_of

    with FakeOpenAIServer(mode="echo") as server:
        host = server.url.removeprefix("http://")
        base_url = f"http://hibug:{SECRETS['password']}@{host}?api-key={SECRETS['query']}"
        environment = {**os.environ, "OPENAI_API_KEY": SECRETS["environment"], "HIBUG_LLM_BASE_URL": base_url,
                       "HIBUG_LLM_CONCURRENCY": "1"}
        folder = colour_project.folder
        colour_project.close()
        command = subprocess.run([sys.executable, "-m", "hibug_core.cli", "-v", "tag", str(folder), "--llm"],
                                 env=environment, capture_output=True, text=True, timeout=300)
        assert command.returncode != 0 and "401" in command.stderr + command.stdout
        assert _leaks(command.stdout + command.stderr) == [], command.stderr

        from hibug_core.store.project import Project

        project = Project.open(folder)
        for name, value in (("OPENAI_API_KEY", SECRETS["environment"]), ("HIBUG_LLM_BASE_URL", base_url)):
            os.environ[name] = value
        try:
            with caplog.at_level(logging.DEBUG):
                with pytest.raises(HibugError) as raised:
                    tag_with_llm(project, LLMConfig.from_env(attempts=1, transport_retries=0),
                                 views=task_of(project).views, resume=False)
        finally:
            for name in ("OPENAI_API_KEY", "HIBUG_LLM_BASE_URL"):
                os.environ.pop(name, None)
        assert "401" in str(raised.value) and HIDDEN in str(raised.value)
        assert _leaks(str(raised.value)) == [] and _leaks(caplog.text) == []
        stored = runs(project)
        assert (stored["status"] == "failed").sum() == 2 and _leaks(stored.to_string()) == []
        project.close()
    assert _files_leaking(folder) == []
