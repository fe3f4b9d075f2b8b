"""argparse ``type=`` functions for the command line's Hub names, durations and counts.

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
    """A TOML config file that exists and whose values are valid (:func:`pipeline.config.load_config`).

    Raises:
        argparse.ArgumentTypeError: the file is missing, not TOML, or holds a bad value.
    """
    from pipeline.config import ConfigError, load_config

    path = Path(value)
    try:
        load_config(path)
    except (ConfigError, OSError) as e:
        raise argparse.ArgumentTypeError(" ".join(str(e).split())) from None
    return path
