"""The OpenAI-compatible client: base URL, model and key from settings or the environment; the key is never stored."""
from __future__ import annotations

import base64
import io
import json
import logging
import os
import re
from dataclasses import dataclass, replace

from hibug_core.access import check_spec, check_url
from hibug_core.errors import ModelLoadError
from hibug_core.llm.errors import LLMAnswerError, LLMUnavailable
from hibug_core.redaction import redact, remember_secret

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMConfig:
    """Where the (multimodal) language model lives. The key is never part of the config: only where to find it."""

    base_url: str | None = None  # None: the OpenAI API
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key
    timeout_s: float = 60.0
    transport_retries: int = 2  # the client's own retries of timeouts, connection errors and HTTP 5xx
    attempts: int = 3  # tries per request when the reply is not valid (the model is told what was wrong)
    concurrency: int = 8  # requests in flight at once
    abort_after: int = 3  # consecutive transport failures that end the run (the server is down, not one image)

    @classmethod
    def from_env(cls, **overrides) -> LLMConfig:
        """Settings from HIBUG_LLM_BASE_URL / OPENAI_BASE_URL, HIBUG_LLM_MODEL and HIBUG_LLM_CONCURRENCY, then
        `overrides`."""
        config = cls(base_url=os.environ.get("HIBUG_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None,
                     model=os.environ.get("HIBUG_LLM_MODEL") or cls.model)
        concurrency = os.environ.get("HIBUG_LLM_CONCURRENCY", "").strip()
        if concurrency:
            if not concurrency.isdigit() or int(concurrency) < 1:
                raise ModelLoadError(f"HIBUG_LLM_CONCURRENCY must be a whole number of at least 1, not {concurrency!r}")
            config = replace(config, concurrency=int(concurrency))
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})

    def longest_wait_s(self) -> float:
        """How long one request can take before it is given up (the client's own retries included)."""
        return self.timeout_s * (self.transport_retries + 1)

    def describe(self) -> str:
        from hibug_core.llm.local import is_local

        return f"{self.model} in process" if is_local(self.model) else \
            f"{self.model} at {redact(self.base_url or 'api.openai.com')}"


def make_client(config: LLMConfig, api_key: str | None = None):
    """An openai.OpenAI client; the key comes from the argument (e.g. Streamlit secrets) or the environment. A model
    named "transformers:<folder or hub id>" runs in this process instead (no server, no key)."""
    from hibug_core.llm.local import LocalClient, is_local, load_vlm

    if is_local(config.model):
        check_spec("language model", config.model)
        return LocalClient(load_vlm(config.model))
    check_url("language model server", config.base_url)
    try:
        import openai
    except ImportError as error:
        raise ModelLoadError("the openai package is missing; reinstall hibug (`pip install -e .`)") from error
    key = api_key or os.environ.get(config.api_key_env)
    remember_secret(key)
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

    from hibug_core.image_loader import as_rgb, open_image

    small = as_rgb(image) if isinstance(image, Image.Image) else open_image(image, size_hint=max_side)
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
    except RecursionError:
        raise ValueError("the reply is JSON nested too deeply to read") from None
    if not isinstance(value, dict):
        raise ValueError(f"the reply is JSON but not an object: {text[:80]!r}")
    return value


def ask(client, config: LLMConfig, messages: list[dict], *, parse, format_hint: str,
        response_format: dict | None = None):
    """The one way hibug asks a language model. `parse(content)` returns the value or raises ValueError with what
    was wrong; an unusable reply (invalid, refused, or a 4xx the model caused) is asked again, telling the model what
    was wrong, up to config.attempts times, then LLMAnswerError. Unreachable servers, bad keys, unknown models, rate
    limits and 5xx (after the client's own retries) raise LLMUnavailable. Nothing logged carries the key."""
    import openai

    problem = "no attempt made"
    for attempt in range(1, config.attempts + 1):
        logger.debug("asking %s (attempt %d of %d)", config.describe(), attempt, config.attempts)
        options = {"response_format": response_format} if response_format else {}
        content = ""
        try:
            reply = client.chat.completions.create(model=config.model, messages=messages, temperature=0, **options)
        except (openai.APIConnectionError, openai.APITimeoutError) as error:
            raise LLMUnavailable(f"could not reach {config.describe()}: {redact(str(error)).rstrip('.')}") \
                from None
        except openai.APIStatusError as error:
            if error.status_code >= 500 or error.status_code in (401, 403, 404, 429):
                raise LLMUnavailable(f"{config.describe()} answered HTTP {error.status_code}: "
                                     f"{redact(str(error.message)).rstrip('.')}") from None
            problem = f"HTTP {error.status_code}: {redact(str(error.message))}"
        else:
            message = reply.choices[0].message if reply.choices else None
            content = getattr(message, "content", None) or ""
            if getattr(message, "refusal", None):
                problem = f"the model refused: {message.refusal}"
            else:
                try:
                    return parse(content)
                except ValueError as error:
                    problem = str(error).splitlines()[0] if str(error) else type(error).__name__
        messages = [*messages, {"role": "assistant", "content": content},
                    {"role": "user", "content": f"That answer could not be used ({problem}). {format_hint}"}]
    logger.info("no valid answer from %s: %s", config.describe(), problem)
    raise LLMAnswerError(config, problem)


def ask_json(client, config: LLMConfig, messages: list[dict], schema, *, name: str, format_hint: str):
    """ask() for a JSON object matching the pydantic model `schema` (structured outputs where the server has them)."""
    from pydantic import ValidationError

    def parse(content: str):
        try:
            return schema.model_validate(parse_json_reply(content))
        except ValidationError as failure:
            first = failure.errors()[0]
            raise ValueError(f"the JSON does not match the format: {first['loc']} {first['msg']}") from None

    return ask(client, config, messages, parse=parse, format_hint=format_hint, response_format={
        "type": "json_schema", "json_schema": {"name": name, "schema": schema.model_json_schema()}})
