"""The OpenAI-compatible client: base URL, model and key from settings or the environment; the key is never stored."""
from __future__ import annotations

import base64
import io
import json
import os
import re
from dataclasses import dataclass, replace

from hibug_core.errors import ModelLoadError


@dataclass(frozen=True)
class LLMConfig:
    """Where the (multimodal) language model lives. The key itself is never part of the config: only where to find it."""

    base_url: str | None = None  # None: the OpenAI API
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key
    timeout_s: float = 60.0
    transport_retries: int = 2  # the client's own retries of timeouts, connection errors and HTTP 5xx
    attempts: int = 3  # tries per request when the reply is not valid (the model is told what was wrong)
    concurrency: int = 8  # requests in flight at once
    abort_after: int = 3  # consecutive transport failures that end the run (the server is down, not one image)

    @classmethod
    def from_env(cls, **overrides) -> "LLMConfig":
        """Settings from HIBUG_LLM_BASE_URL / OPENAI_BASE_URL and HIBUG_LLM_MODEL, then `overrides`."""
        config = cls(base_url=os.environ.get("HIBUG_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None,
                     model=os.environ.get("HIBUG_LLM_MODEL", cls.model))
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})

    def describe(self) -> str:
        return f"{self.model} at {self.base_url or 'api.openai.com'}"


def make_client(config: LLMConfig, api_key: str | None = None):
    """An openai.OpenAI client; the key comes from the argument (e.g. Streamlit secrets) or the environment."""
    try:
        import openai
    except ImportError as error:
        raise ModelLoadError("the openai package is missing; reinstall hibug (`pip install -e .`)") from error
    key = api_key or os.environ.get(config.api_key_env)
    if not key:
        if config.base_url is None:
            raise ModelLoadError(f"no API key: set {config.api_key_env} in the environment (or Streamlit secrets), "
                                 "or set a base URL for a local OpenAI-compatible server")
        key = "not-needed"  # local servers ignore it, the client insists on one
    return openai.OpenAI(base_url=config.base_url, api_key=key, timeout=config.timeout_s,
                         max_retries=config.transport_retries)


def image_data_url(image, max_side: int = 512) -> str:
    """An image (a file path or a PIL image) as a base64 PNG data URL, downscaled to at most max_side pixels."""
    from PIL import Image

    if isinstance(image, Image.Image):
        small = image.convert("RGB")
    else:
        with Image.open(image) as opened:
            small = opened.convert("RGB")
    small.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    small.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def parse_json_reply(content: str | None) -> dict:
    """The JSON object in a reply, tolerating a Markdown code fence; ValueError with the reason otherwise."""
    if not content:
        raise ValueError("the reply was empty")
    text = content.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the reply is not JSON ({error.msg} at character {error.pos}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"the reply is JSON but not an object: {text[:80]!r}")
    return value


def ask_json(client, config: LLMConfig, messages: list[dict], schema, *, name: str, format_hint: str, error,
             fallback: str):
    """A structured request (JSON matching the pydantic model `schema`) with bounded retries, each telling the model
    what was wrong; (parsed reply or None, last problem). A transport failure raises `error` naming `fallback`."""
    from pydantic import ValidationError

    problem = "no attempt made"
    for _ in range(config.attempts):
        try:
            reply = client.chat.completions.create(
                model=config.model, messages=messages, temperature=0,
                response_format={"type": "json_schema", "json_schema": {
                    "name": name, "schema": schema.model_json_schema()}})
        except Exception as failure:  # openai transport / status errors
            raise error(f"could not ask {config.describe()}: {failure}. Check the server, or {fallback}.") from None
        message = reply.choices[0].message if reply.choices else None
        content = getattr(message, "content", None)
        if getattr(message, "refusal", None):
            problem = f"the model refused: {message.refusal}"
        else:
            try:
                return schema.model_validate(parse_json_reply(content)), ""
            except (ValueError, ValidationError) as failure:
                problem = str(failure).splitlines()[0] if not isinstance(failure, ValidationError) else \
                    f"the JSON does not match the format: {failure.errors()[0]['loc']} {failure.errors()[0]['msg']}"
        messages = [*messages, {"role": "assistant", "content": content or ""},
                    {"role": "user", "content": f"That answer could not be used ({problem}). {format_hint}"}]
    return None, problem
