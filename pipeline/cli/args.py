"""argparse ``type=`` functions for the command line's Hub names, durations and counts, and
the two arguments every command spells the same way (:func:`add_release_arg`,
:func:`add_out_arg`).

Each refuses a bad value while the arguments are parsed, so ``--dry-run`` refuses what
the real command would fail on later (after uploading code, or an hour into a Job):
the CLI prints one line and exits 2. Repo ids, bucket ids and namespaces are checked
with huggingface_hub's own validator; durations with huggingface_hub's parser, limited
to the units a Job's ``timeout`` understands.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

# the units huggingface_hub's Job spec converts (_jobs_api._create_job_spec)
JOB_TIMEOUT_UNITS = ("s", "m", "h", "d")


def _hub_name_problem(value: str) -> str | None:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(value)
    except HFValidationError as e:
        return " ".join(str(e).split())
    return None


def repo_id(value: str) -> str:
    """A Hub repo or bucket id ``OWNER/NAME`` (huggingface_hub's ``validate_repo_id``).

    Raises:
        argparse.ArgumentTypeError: no owner, more than one ``/``, or a name the Hub refuses.
    """
    problem = _hub_name_problem(value)
    if problem is None and value.count("/") != 1:
        problem = "need OWNER/NAME"
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a Hub id OWNER/NAME: {problem}")
    return value


def namespace(value: str) -> str:
    """A Hub user or organisation name (no ``/``; huggingface_hub's ``validate_repo_id``).

    Raises:
        argparse.ArgumentTypeError: a ``/`` or characters the Hub refuses.
    """
    problem = "a namespace has no '/'" if "/" in value else _hub_name_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a Hub user or org name: {problem}")
    return value


def job_duration(value: str) -> str:
    """A Job timeout: seconds, or a whole number with a unit s, m, h or d (``1d``, ``90m``).

    Parsed by huggingface_hub's ``parse_duration``; returned as given (the Job spec converts it).

    Raises:
        argparse.ArgumentTypeError: not a duration, another unit, or not above 0.
    """
    from huggingface_hub.utils._parsing import parse_duration

    text = value.strip()
    unit = text.lstrip("0123456789")
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a duration ({e}); use e.g. 3600, 90m, 12h or 2d"
        ) from None
    if unit and unit.lower() not in JOB_TIMEOUT_UNITS:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a Job timeout takes the units {list(JOB_TIMEOUT_UNITS)}; got {unit!r}"
        )
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: a duration must be above 0")
    return text


def positive_seconds(value: str) -> float:
    """A finite number of seconds above 0 (``--poll``).

    Raises:
        argparse.ArgumentTypeError: not a number, not finite, or not above 0.
    """
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"need a number of seconds above 0; got {value!r}")
    return number


def non_negative_seconds(value: str) -> float:
    """A finite number of seconds, 0 or more (``--wait``).

    Raises:
        argparse.ArgumentTypeError: not a number, not finite, or below 0.
    """
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise argparse.ArgumentTypeError(f"need a number of seconds >= 0; got {value!r}")
    return number


def config_file(value: str) -> Path:
    """A TOML config file that exists and whose values are valid (:func:`pipeline.core.config.load_config`).

    Raises:
        argparse.ArgumentTypeError: the file is missing, not TOML, or holds a bad value.
    """
    from pipeline.core.config import ConfigError, load_config

    path = Path(value)
    try:
        load_config(path)
    except (ConfigError, OSError) as e:
        raise argparse.ArgumentTypeError(" ".join(str(e).split())) from None
    return path


# ----------------------------------------------------------------- shared arguments
# the namespace attribute where deprecated spellings note themselves while the command
# line is parsed; the CLI logs the notes once its log handler is in place
DEPRECATED_NOTES = "_deprecated_notes"
REQUIRES_RELEASE = "_requires_release"


def note_deprecated(namespace: argparse.Namespace, used: str, instead: str) -> None:
    """Record that the command line used ``used``, a deprecated spelling of ``instead``."""
    notes = list(getattr(namespace, DEPRECATED_NOTES, None) or [])
    notes.append(f"{used} is deprecated and will be removed; use {instead}")
    setattr(namespace, DEPRECATED_NOTES, notes)


class DeprecatedOption(argparse.Action):
    """An old spelling of an option that still works: it stores its value where the new
    spelling does, and the command warns (one log line) that it is deprecated."""

    def __init__(self, option_strings: list[str], dest: str, instead: str, **kwargs) -> None:
        self.instead = instead
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[no-untyped-def]
        setattr(namespace, self.dest, values)
        note_deprecated(namespace, option_string or self.dest, self.instead)


def add_release_arg(
    p: argparse.ArgumentParser, *, default: Path | None = None, hub: bool = False
) -> None:
    """``--release DIR``: the release a command reads, one name in every command
    (``evaluate``, ``features``, ``train``, ``push``).

    ``evaluate`` (``hub``) also reads an eval Parquet file, and takes ``--eval-file`` as
    another name of the option; the other commands read a release folder only, where
    ``--eval-file`` is a deprecated spelling that still works, with a warning.

    Args:
        default: the default folder; None makes the argument required.
        hub: the command also reads a release's eval Parquet or a Hub dataset.
    """
    what = (
        "a release folder, its eval Parquet, or a Hub dataset (OWNER/NAME or hf://datasets/...)"
        if hub
        else "a release folder"
    )
    names = ["--release", "--eval-file"] if hub else ["--release"]
    p.add_argument(
        *names,
        dest="release",
        required=default is None and hub,
        default=default,
        type=str if hub else Path,
        metavar="DIR",
        help=f"the release to read: {what}"
        + (f" (default: {default})" if default is not None else "")
        + ("; --eval-file is the same option" if hub else ""),
    )
    if not hub:
        if default is None:  # required, by either spelling: checked after parsing
            p.set_defaults(**{REQUIRES_RELEASE: True})
        p.add_argument(
            "--eval-file",
            dest="release",
            action=DeprecatedOption,
            instead="--release",
            type=Path,
            metavar="DIR",
            help="deprecated spelling of --release (this command reads a release folder)",
        )


def add_out_arg(
    p: argparse.ArgumentParser,
    writes: str,
    *,
    default: Path | None = None,
    default_text: str | None = None,
) -> None:
    """``--out DIR``: the directory the command writes, in every command that writes.

    Args:
        writes: what the command writes there (for the help text).
        default: the default directory.
        default_text: the default in words, when the command works it out (``default`` is
            then None and the option is not required).
    """
    required = default is None and default_text is None
    shown = default_text or (str(default) if default is not None else None)
    p.add_argument(
        "--out",
        type=Path,
        required=required,
        default=default,
        metavar="DIR",
        help=f"the directory this command writes: {writes}"
        + (f" (default: {shown})" if shown else ""),
    )


def shard_arg(value: str) -> tuple[int, int]:
    """argparse type: ``I/N`` with 0 <= I < N (``--shard``)."""
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/N, e.g. 0/4; got {value!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {value}: need 0 <= I < N")
    return i, n


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1 (``--workers``)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"need a whole number >= 1; got {value!r}")
    return number
