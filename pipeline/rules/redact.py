"""Secrets never reach a message, a traceback or a log record.

A Hub answer may quote the request back (``Invalid credentials in Authorization header:
Bearer hf_...``), and an exception's text ends up in the one-line error and, under
``-v``, in the traceback. :class:`SecretFilter` rewrites every record the CLI logs (its
message, its formatted traceback and stack) through :func:`scrub` before any handler
formats it, whatever the text came from.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

REDACTED = "<redacted>"

# what a secret looks like wherever it is quoted: an Authorization value, or a Hugging Face
# user or org token (hf_ / api_org_ and 30+ letters and digits, as the Hub issues them)
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s\"',;)\]}]+"),
    re.compile(r"\b(hf_|api_org_)[A-Za-z0-9]{30,}\b"),
)
# environment variables whose value is a secret (the token huggingface_hub reads)
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_API_TOKEN")


def known_secrets() -> tuple[str, ...]:
    """The secret values this process holds: the Hugging Face token (from the environment
    or saved by ``hf auth login``), longest first so a value is replaced before its parts."""
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
    text = _PATTERNS[0].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _PATTERNS[1].sub(REDACTED, text)


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
