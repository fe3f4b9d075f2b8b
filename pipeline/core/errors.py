"""Expected failures and the one-line messages a user can act on.

Every failure the pipeline expects (bad input or config, a refused request, a stage that
cannot go on) is a :class:`PipelineError`. The CLI (:func:`pipeline.cli.main`) reports it,
and Hub and operating-system errors (:func:`user_message`), as one line on stderr with exit
code 2. Anything else, a ``ValueError`` of a library included, is a bug: one line too, exit
code 1, with the traceback under ``-v``. Hub failures are told apart here, in one place:
no token, a token the Hub refuses, a Hub that cannot be reached.
"""

from __future__ import annotations

import os
import re

TOKEN_HELP = "set HF_TOKEN or run `hf auth login`"
INTERRUPTED = "interrupted; rerun the same command to resume"
TERMINATED = "terminated (SIGTERM); rerun the same command to resume"


class PipelineError(Exception):
    """An expected failure: its message says what went wrong and what to do."""


class UsageError(PipelineError, ValueError):
    """A request a command or an API function cannot serve (an unknown mode, nothing to
    evaluate, a bad command line)."""


class StageError(PipelineError, RuntimeError):
    """A stage that cannot run or finish on what it was given: an upstream stage not done,
    more failed inputs than allowed, an audit that failed, outputs that cannot be trusted."""


class TokenError(PipelineError, RuntimeError):
    """No Hugging Face token where a command needs one (checked before any network call)."""


def option(flag: str, keyword: str | None = None) -> str:
    """An option as a message names it: the command line's flag and the Python API's keyword
    argument, since the same message reaches a CLI user and an API caller
    (``option("--lenient")`` is ``--lenient (lenient=True in Python)``)."""
    keyword = keyword or f"{flag.lstrip('-').replace('-', '_')}=True"
    return f"{flag} ({keyword} in Python)"


def hub_endpoint() -> str:
    """The Hub endpoint requests go to (``HF_ENDPOINT`` or huggingface.co)."""
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def require_token(command: str) -> str:
    """The Hugging Face token, before ``command`` makes any network call.

    Raises:
        TokenError: no ``HF_TOKEN`` and no token saved by ``hf auth login``.
    """
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise TokenError(f"{command}: no Hugging Face token; {TOKEN_HELP}")
    return token


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def _one_line(exc: BaseException) -> str:
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    return "; ".join(lines) if lines else type(exc).__name__


def transport_errors() -> tuple[type[BaseException], ...]:
    """Exception types of a request that never got an HTTP answer (DNS, refused, timeout).

    huggingface_hub 2.x sends requests with httpx2, 1.x with httpx, 0.x with requests.
    """
    import importlib

    found: list[type[BaseException]] = []
    for module, name in (
        ("httpx2", "TransportError"),
        ("httpx", "TransportError"),
        ("requests", "ConnectionError"),
        ("requests", "Timeout"),
    ):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _hub_message(exc: BaseException) -> str | None:
    """The message for a huggingface_hub or HTTP transport error, None for anything else."""
    try:
        from huggingface_hub import errors as hf
    except ImportError:
        return None
    if isinstance(exc, hf.LocalTokenNotFoundError):
        return f"no Hugging Face token; {TOKEN_HELP}"
    if isinstance(exc, hf.OfflineModeIsEnabled):
        return f"the Hub is needed but HF_HUB_OFFLINE is set ({_first_line(exc)})"
    if isinstance(exc, (hf.LocalEntryNotFoundError, *transport_errors())):
        return (
            f"cannot reach the Hugging Face Hub at {hub_endpoint()} ({_first_line(exc)}); "
            "check the network connection or HF_ENDPOINT"
        )
    if isinstance(exc, hf.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            return (
                f"the Hub refused the request (HTTP {status}: {_first_line(exc)}); the token is "
                f"missing, invalid or lacks access: {TOKEN_HELP} with a token that has it"
            )
        if isinstance(exc, hf.RepositoryNotFoundError):
            return f"{_first_line(exc)} (if the repo is private: {TOKEN_HELP})"
        return f"Hub error: {_first_line(exc)}"
    return None


# Rust's std::io::Error ends its text with "(os error N)"; Polars passes it on inside a
# ComputeError ("parquet: ... underlying IO error: No space left on device (os error 28)")
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_error_in(exc: BaseException) -> bool:
    """Whether ``exc`` is, wraps or reports an operating-system error (a full disk, a lost
    mount): an ``OSError`` (pyarrow's ``ArrowIOError`` is one) anywhere in its cause chain,
    or a Polars error whose text carries the OS error (Polars does not raise ``OSError``
    for a failed write)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and not isinstance(current, TimeoutError):
            return True
        if type(current).__module__.startswith("polars") and _RUST_OS_ERROR.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def _os_message(exc: BaseException) -> str:
    """An operating-system error as its path(s) and the system's words, without the
    exception's class: ``OSError: [Errno 39] Directory not empty: ...`` named a class where
    the one-line rule wants what went wrong."""
    if isinstance(exc, OSError) and exc.strerror:
        paths = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        return f"{paths}: {exc.strerror}" if paths else exc.strerror
    return _one_line(exc)


def user_message(exc: BaseException) -> str | None:
    """One line for an expected failure, or None when ``exc`` is a bug.

    Expected: a :class:`PipelineError` (``InputError``, ``ConfigError``, ``EvalSetError``,
    ``RunError``, :class:`StageError`, ...), Hub errors, a timeout, and operating-system
    errors (missing files, a file where a directory belongs, a full disk), also when Polars
    or pyarrow report them (:func:`os_error_in`).
    """
    hub = _hub_message(exc)
    if hub is not None:
        return hub
    if isinstance(exc, NotADirectoryError):
        return f"{exc.filename or _first_line(exc)}: a file is in the way where a directory belongs"
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename}: no such file or directory" if exc.filename else _one_line(exc)
    if os_error_in(exc):
        return _os_message(exc)
    if isinstance(exc, (PipelineError, TimeoutError)):
        return _one_line(exc)
    return None
