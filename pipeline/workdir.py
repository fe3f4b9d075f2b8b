"""The work directory's layout, in one place: where every stage's outputs, markers,
manifests and records are, and what can be read from them.

::

    <out>/
      extract/                      a map stage: one file per input file
        <table>/<file key>.parquet  its tables
        _manifests/<file key>.json  counts, config, code version (or the failure)
        _markers/<file key>.json    written last: input identity, config hash, schema
                                    version, and every output's size and sha256
        _inputs/<I>-of-<N>.json     per shard: the whole input list it started with
        _summary.json               totals over the manifests
      works/ surveys/ ... release/  a reduce stage: its files, and _SUCCESS.json last
      eval/                         what ``evaluate`` (and ``run``) writes
      _published.json               what the last ``push`` of a Job published

The runner writes these files; the CLI, the API and the Jobs ask this module where
they are and what they say, and never rebuild a path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import Config
from pipeline.release_files import EVAL_FILE
from pipeline.runner import (
    MANIFESTS,
    MARKERS,
    SUCCESS,
    Stage,
    disagreement,
    failed_inputs,
    reduce_done,
    shard_record_path,
    shard_records,
    stage_key,
    write_shard_record,
)
from pipeline.sources import InputError, InputFile

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class WorkDir:
    """A work directory (``--out``): paths of what the stages write, and reads of it."""

    root: Path

    def stage_dir(self, stage: str) -> Path:
        """A stage's folder."""
        return self.root / stage

    def success(self, stage: str) -> Path:
        """A reduce stage's ``_SUCCESS.json``."""
        return self.root / stage / SUCCESS

    def reduce_finished(self, stage: str) -> bool:
        """Whether a reduce stage ever finished (with any config)."""
        return self.success(stage).exists()

    def eval_file(self) -> Path:
        """The release's eval table."""
        return self.root / "release" / EVAL_FILE

    def has_work(self, stages: Mapping[str, Stage]) -> bool:
        """Whether any stage has a folder here."""
        return any(self.stage_dir(name).is_dir() for name in stages)

    # ----------------------------------------------------------------- map stage inputs
    def record_shard_inputs(
        self,
        stage: str,
        shard_of: tuple[int, int],
        specs: Sequence[str],
        every: Sequence[InputFile],
        prune: bool,
    ) -> None:
        """Record this shard's whole input list; refuse (recording nothing) when another
        shard recorded a different one. With ``prune`` the disagreeing records are deleted.

        Raises:
            InputError: another shard recorded another input list (names both).
        """
        index, count = shard_of
        name = f"{index}-of-{count}"
        keys = sorted(f.key for f in every)
        others = {k: r for k, r in shard_records(self.root, stage).items() if k != name}
        differ = {k: r for k, r in others.items() if r["files"] != keys}
        if differ and not prune:
            first = next(iter(differ))
            mine = {"shard": [index, count], "input": list(specs), "files": keys}
            problem = disagreement({first: differ[first], name: mine})
            raise InputError(
                f"{stage}: {problem} (or add --prune to drop the other shards' records)"
            )
        for rec in differ.values():
            shard_record_path(self.root, stage, *rec["shard"]).unlink(missing_ok=True)
        if differ:
            log.warning(
                "%s: --prune removed %d shard record(s) of another input list", stage, len(differ)
            )
        write_shard_record(self.root, stage, index, count, list(specs), keys)

    def check_foreign_outputs(self, stage: Stage, inputs: Sequence[InputFile], prune: bool) -> None:
        """Refuse to mix corpora: a map stage's finished files here must all be inputs.

        Later stages read every finished extract file in the work directory (that is how
        shards from several machines come together), so outputs of files that are not
        inputs (a moved corpus, another corpus, files removed from it) would silently
        join the benchmark. ``prune`` deletes them instead.

        Raises:
            InputError: such outputs exist and ``prune`` is off.
        """
        keys = {f.key for f in inputs}
        base = self.stage_dir(stage.name)
        for m in (base / MANIFESTS).glob("*.json"):
            if m.stem not in keys and not (base / MARKERS / m.name).exists():
                m.unlink(missing_ok=True)  # a failed file that is no longer an input
        foreign = sorted(m.stem for m in (base / MARKERS).glob("*.json") if m.stem not in keys)
        if not foreign:
            return
        if not prune:
            raise InputError(
                f"{len(foreign)} finished {stage.name} file(s) in {base} are not in --input "
                f"(e.g. {foreign[0]}); later stages would read them too. Use a fresh --out, "
                "or add --prune to delete them."
            )
        for key in foreign:
            for table in stage.tables:
                (base / table / f"{key}.parquet").unlink(missing_ok=True)
            (base / MANIFESTS / f"{key}.json").unlink(missing_ok=True)
            (base / MARKERS / f"{key}.json").unlink(missing_ok=True)
        log.warning(
            "%s: --prune removed the outputs of %d file(s) not in --input", stage.name, len(foreign)
        )

    # ----------------------------------------------------------------- status
    def status(self, cfg: Config, stages: Mapping[str, Stage]) -> dict[str, dict[str, Any]]:
        """Per stage, in pipeline order: whether it is done for ``cfg``, with its counts."""
        report: dict[str, dict[str, Any]] = {}
        for name, stage in stages.items():
            d = self.stage_dir(name)
            if stage.kind == "map":
                manifests = [
                    json.loads(p.read_text()) for p in sorted((d / MANIFESTS).glob("*.json"))
                ]
                manifests = [m for m in manifests if m.get("status") != "failed"]
                totals: dict[str, int] = {}
                for m in manifests:
                    for k, v in m["counts"].items():
                        if isinstance(v, int):
                            totals[k] = totals.get(k, 0) + v
                report[name] = {
                    "files_done": len(manifests),
                    "current": stage_key(self.root, name, cfg, stages) is not None,
                    "files_failed": [
                        {k: f[k] for k in ("file", "reason", "lines_read")}
                        for f in failed_inputs(self.root, stage, cfg)
                    ],
                    **totals,
                }
            else:
                success = self.success(name)
                entry: dict[str, Any] = {"done": reduce_done(self.root, name, cfg, stages)}
                if success.exists():
                    entry["counts"] = json.loads(success.read_text())["counts"]
                report[name] = entry
        return report
