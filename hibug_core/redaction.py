"""The one redaction of secrets from everything hibug shows, logs or stores: passwords in URLs, key-like query
parameters, bearer tokens and key headers, and the values of the keys it was given (environment, Streamlit secrets)."""
from __future__ import annotations

import json
import logging
import os
import re
from urllib.parse import quote

HIDDEN = "[hidden]"
MIN_SECRET = 6  # shorter values are not searched for (they would hide ordinary words)
# A query parameter named by one of these words or ending in one after a separator (api-key, access_token, sig);
# not "keypoints" or "monkey".
_SECRET_QUERY = (r"(?:[\w.-]*[-_.])?(?:key|token|secret|password|passwd|pwd|signature|sig|credential|auth)|apikey|"
                 r"accesstoken")
# A name: value or name=value assignment that holds a key (api_key: ..., "x-api-key": ..., password=...).
_SECRET_SETTING = (r"(?:x-)?(?:api|access|auth|secret|private|client|subscription|session)[-_]?key|apikey|"
                   r"(?:access|auth|refresh|id|api|session|bearer)[-_]?token|token|client[-_]?secret|password|passwd|pwd")
_SECRET_FIELD = re.compile(_SECRET_SETTING, re.IGNORECASE)
_SECRET_ENVIRONMENT = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_PATTERNS = (
    # scheme://user:password@host (or a token as the user name)
    (re.compile(r"(?P<keep>\b[a-z][a-z0-9+.-]*://)[^/@\s?#'\"<>]+@", re.IGNORECASE), rf"\g<keep>{HIDDEN}@"),
    # ?api-key=..., &access_token=..., ;sig=...
    (re.compile(rf"(?P<keep>[?&;](?:{_SECRET_QUERY})=)[^&#\s'\"<>]+", re.IGNORECASE), rf"\g<keep>{HIDDEN}"),
    # Authorization: Bearer ..., x-api-key: ..., api_key="...", "api-key": "..."
    (re.compile(r"(?P<keep>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)"
                r"[^\s,;'\"<>]+", re.IGNORECASE), rf"\g<keep>{HIDDEN}"),
    (re.compile(rf"(?P<keep>\b(?:{_SECRET_SETTING})\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)"
                rf"(?!{re.escape(HIDDEN)}|(?:bearer|basic|token)\s)[^\s,;'\"<>&]+", re.IGNORECASE),
     rf"\g<keep>{HIDDEN}"),
    (re.compile(r"(?P<keep>\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), rf"\g<keep>{HIDDEN}"),
    # the shapes hosted APIs give their keys (sk-..., sk-proj-..., hf_...), even where nothing names them
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9*_\-]{8,}|\bhf_[A-Za-z0-9]{8,}"), HIDDEN),
)
_given: set[str] = set()  # keys handed over at run time (Streamlit secrets, an argument)


def remember_secret(value: str | None) -> None:
    """Hide this value wherever it shows from now on (a key read from Streamlit secrets or passed in)."""
    if value and len(value) >= MIN_SECRET:
        _given.add(value)


def _secret_values() -> list[str]:
    """The configured keys: every environment variable whose name says it holds one, and those remembered."""
    found = {value for name, value in os.environ.items()
             if _SECRET_ENVIRONMENT.search(name) and len(value) >= MIN_SECRET}
    return sorted(found | _given, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every secret replaced by [hidden]: the configured keys themselves (as written and URL-encoded),
    user:password in URLs, key-like query parameters and assignments, and bearer tokens."""
    if not text:
        return text
    for secret in _secret_values():
        if secret in text:
            text = text.replace(secret, HIDDEN)
        encoded = quote(secret, safe="")
        if encoded != secret and encoded in text:
            text = text.replace(encoded, HIDDEN)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_json(value) -> str:
    """json.dumps of `value` with every text in it (keys and values) redacted, and the value of a field named like a
    key (api_key, password) hidden: still valid JSON."""
    def walk(item):
        if isinstance(item, str):
            return redact(item)
        if isinstance(item, dict):
            return {walk(k) if isinstance(k, str) else k:
                    HIDDEN if isinstance(k, str) and _SECRET_FIELD.fullmatch(k) and v else walk(v)
                    for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return json.dumps(walk(value))


def carries_secret(text: str | None) -> bool:
    """Whether redact would change `text`: a URL or setting that holds a key (to refuse where keys may not be
    typed)."""
    return bool(text) and redact(text) != text


class _RedactingRecords:
    """A log record factory whose records carry their message already redacted (every logger: the HTTP client's
    request lines carry URLs)."""

    def __init__(self, factory):
        self.factory = factory

    def __call__(self, *args, **kwargs) -> logging.LogRecord:
        record = self.factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that does not format is left to logging to report
            return record
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return record


def redact_logs() -> None:
    """Make every log record of this process redacted (once; hibug_core's import does it)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _RedactingRecords):
        logging.setLogRecordFactory(_RedactingRecords(factory))
