"""Secrets never reach a message, a traceback, a log record or a file the pipeline writes.

A server's answer may quote the request back (the Hub's ``Invalid credentials in
Authorization header: Bearer hf_...``, a proxy in front of Qdrant echoing the ``api-key``
header), a URL may carry its key (OpenAlex takes ``api_key=`` as a query parameter), and
an exception's text ends up in the one-line error, under ``-v`` in the traceback, and in
the failure records of a run. The secrets are the values of :data:`SECRET_ENV` (and the
token ``hf auth login`` saved); :func:`redact` replaces them, and every string shaped like
a credential, in any text. :class:`SecretFilter` rewrites every record the CLI logs (its
message, its formatted traceback and stack) before any handler formats it; the writers of
error text into files (a failed input's record, a command's printed plan) call
:func:`redact` themselves.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

REDACTED = "<redacted>"

# what a secret looks like wherever it is quoted: an Authorization value, a key or token
# given as a parameter or a header (``api_key=...`` in a URL, ``"api-key": "..."``,
# ``authToken=...``), a URL's user:password, or a Hugging Face user or org token (hf_ /
# api_org_ and 30+ letters and digits, as the Hub issues them)
_AUTHORIZATION = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s\"',;)\]}<]+")
_NAMED = re.compile(
    r"(?i)(\b(?:api[_-]?key|(?:access|auth)[_-]?token|token|password)[\"']?\s*[=:]\s*[\"']?)"
    r"[^\s\"'&,;)\]}<>]+"
)
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@")
_HF_TOKEN = re.compile(r"\b(hf_|api_org_)[A-Za-z0-9]{30,}\b")
# environment variables whose value is a secret: the Hugging Face token huggingface_hub
# reads, the OpenAlex and Qdrant API keys, and the Turso database tokens
SECRET_ENV = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_API_TOKEN",
    "OPENALEX_API_KEY",
    "QDRANT_API_KEY",
    "TURSO_AUTH_TOKEN",
    "TURSO_DB_TOKEN",
)


def known_secrets() -> tuple[str, ...]:
    """The secret values this process holds: those of :data:`SECRET_ENV` and the token saved
    by ``hf auth login``, longest first so a value is replaced before its parts."""
    values = {os.environ.get(name, "") for name in SECRET_ENV}
    try:
        from huggingface_hub import get_token

        values.add(get_token() or "")
    except Exception:  # noqa: BLE001 - no token source readable: nothing more to hide
        pass
    return tuple(sorted((v for v in values if len(v) >= 8), key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret value and every token-like string replaced by ``<redacted>``."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _NAMED.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _HF_TOKEN.sub(REDACTED, text)


def redact(text: str) -> str:
    """``text`` scrubbed of the secrets this process holds (:func:`known_secrets`) and of
    every credential-shaped string: what an error text goes through before it is printed
    or written."""
    return scrub(text, known_secrets())


class SecretFilter(logging.Filter):
    """Rewrites a log record's message, traceback and stack through :func:`scrub`.

    The record is changed in place, so every handler after the filter (the console,
    pytest's capture, a file) sees the scrubbed text only.
    """

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        super().__init__()
        self.secrets = tuple(known_secrets() if secrets is None else secrets)

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        message = record.getMessage()
        clean = scrub(message, self.secrets)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info, self.secrets)
        return True
