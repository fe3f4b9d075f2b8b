"""Failure limits: how many input files of a map stage may fail before a run fails
(``--max-failed-files``, a count or a share), and the checks that apply it: to a map run
(:func:`check_map_failures`) and, before a reduce stage reads a map stage's outputs, to
that stage as a whole (:func:`check_map_complete`, which also waits for every shard)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.errors import StageError, UsageError
from pipeline.corpus.sources import InputFile
from pipeline.engine import workdir as W
from pipeline.engine.stage import Stage
from pipeline.engine.workdir import failed_inputs, input_list

DEFAULT_MAX_FAILED = "1%"


def max_failed_share(spec: str) -> float | None:
    """The share (0-1) that ``--max-failed-files`` names, or None when it names a count.

    Raises:
        UsageError: neither a count 0, 1, 2, ... nor a share 0%-100% (``nan%``, ``inf%``,
            ``-1``, ``150%``, ``1.5``).
    """
    text = str(spec).strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1]) / 100
            if not (math.isfinite(share) and 0 <= share <= 1):
                raise ValueError(text)
            return share
        if int(text) < 0:
            raise ValueError(text)
    except ValueError:
        raise UsageError(
            "max_failed_files (--max-failed-files) takes a count (e.g. 3) or a share of the "
            f"input files from 0% to 100% (e.g. 1%); got {spec!r}"
        ) from None
    return None


def allowed_failures(spec: str, total: int) -> int:
    """How many of ``total`` input files may fail: ``spec`` is a count (``"3"``) or a share
    of the files (``"1%"``, rounded down).

    Raises:
        UsageError: ``spec`` is neither (:func:`max_failed_share`).
    """
    share = max_failed_share(spec)
    return int(share * total) if share is not None else int(str(spec).strip())


def check_failures(failed: list[dict[str, Any]], total: int, max_failed: str, reader: str) -> None:
    """Fail when more input files failed than ``--max-failed-files`` allows.

    Raises:
        RuntimeError: names every failed file with its reason.
    """
    allowed = allowed_failures(max_failed, total)
    if len(failed) > allowed:
        listed = "; ".join(f"{f['file']} ({f['reason']})" for f in failed[:10])
        raise StageError(
            f"{reader}: {len(failed)} of {total} input files failed, more than "
            f"--max-failed-files (max_failed_files) {max_failed} allows ({allowed}): {listed}"
            + (" ..." if len(failed) > 10 else "")
            + "; replace the damaged files and rerun (failed files are retried), or raise "
            "--max-failed-files (max_failed_files in Python)"
        )


def check_map_complete(
    out: Path, stage: Stage, cfg: Config, reader: str, max_failed: str = DEFAULT_MAX_FAILED
) -> None:
    """Refuse to reduce over part of a corpus: every file of the map stage's input list
    (written by each shard) must be done with the current config, or have failed (at most
    ``max_failed`` of them: later stages then run on the files that succeeded)."""
    name = stage.name
    listed = input_list(out, name, reader)
    if listed is None:
        return
    want = set(listed)
    done = set(W.current_markers(out, stage, cfg))
    # an archive is done when it was read to its end and every unit it holds is done
    for key, record in W.archive_records(out, stage, cfg).items():
        if set(record.get("units", [])) <= done:
            done.add(key)
    failed = [f for f in failed_inputs(out, stage, cfg) if f["source_key"] in want]
    missing = sorted(want - done - {f["source_key"] for f in failed})
    if missing:
        raise StageError(
            f"{reader}: {name} has {len(want) - len(missing)} of {len(want)} input files done "
            f"(missing e.g. {missing[0]}); run the remaining shards first"
        )
    check_failures(failed, len(want), max_failed, reader)


def check_map_failures(
    stage: Stage, out: Path, cfg: Config, inputs: list[InputFile], max_failed: str
) -> None:
    """Refuse a map run in which more of ``inputs`` failed than ``max_failed`` allows."""
    keys = {f.key for f in inputs}
    failed = [f for f in W.failed_inputs(out, stage, cfg) if f["source_key"] in keys]
    check_failures(failed, len(inputs), max_failed, stage.name)
