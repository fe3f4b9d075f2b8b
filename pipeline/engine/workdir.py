"""The work directory's layout, in one place: where every stage's outputs, markers,
manifests and records are, and what can be read from them.

::

    <out>/
      extract/                        a map stage: one file per input file (per unit of
                                      an archive: ``<archive key>.<index>``)
        <table>/<file key>.parquet    its tables
        _manifests/<file key>.json    counts, config, code version (or the failure)
        _markers/<file key>.json      written last: input identity, config hash, schema
                                      version, and every output's size and sha256
        _archives/<archive key>.json  an archive read to its end: its parts, its units,
                                      its member counts
        _inputs/<I>-of-<N>.json       per shard: the whole input list it started with
        _summary.json                 totals over the manifests
      works/ surveys/ ... release/    a reduce stage: its files, and _SUCCESS.json last
      .<stage>.<temp tag>/            a reduce stage being written (replaces <stage>/)
      .<stage>.old.<temp tag>/        its previous folder, removed once the new one is in
      eval/                           what ``evaluate`` (and ``run``) writes
      openalex_cache/answers-*.jsonl  OpenAlex answers by lookup key, kept across runs and
                                      configs (stage ``openalex``; keep it with the work
                                      directory to rebuild a release with no network)
      _locks/<config hash>.lock       held (flock, shared) by every run of that config
      _locks/stages/<stage>.lock      a reduce stage's lock: exclusive while it runs, shared
                                      while a later stage reads it (:func:`stage_lock`)
      _published.json                 what the last ``push`` of a Job published

The runner (:mod:`pipeline.engine.runner`) writes these files at the paths given here; the
API, the CLI and the Jobs ask this module where they are and what they say. A marker
is keyed by input identity, config hash and schema version (``runner.map_marker_key``),
never by worker rank, so a rerun with another worker count still resumes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.core.errors import PipelineError, StageError, option
from pipeline.core.files import (
    atomic_path,
    owner_alive,
    sha256_file,
    sha256_text,
    temp_tag,
    write_json,
)
from pipeline.core.release_files import CARD_FILE, EVAL_FILE, METADATA_FILE
from pipeline.core.schema import SCHEMA_VERSION
from pipeline.corpus.sources import InputError, InputFile, display
from pipeline.engine.stage import FAILED

if TYPE_CHECKING:
    from pipeline.engine.stage import Stage

log = logging.getLogger("pipeline")

MARKERS = "_markers"
MANIFESTS = "_manifests"
SUCCESS = "_SUCCESS.json"
INPUTS = "_inputs.json"  # a map stage's full input list, by file key (older versions)
SHARD_INPUTS = "_inputs"  # <I>-of-<N>.json per shard: the whole input list it was started with
SUMMARY = "_summary.json"  # extract: totals over its manifests
ARCHIVES = "_archives"  # a map stage's archive inputs read to their end, by archive key
PUBLISHED = "_published.json"  # work dir root: what the last push published, and from what
RELEASE = "release"  # the stage whose folder is the release
LOCKS = "_locks"  # work dir root: one lock file per config that runs here, and the gate


CACHE = "_cache"  # a stage's cache folder is <stage>_cache (openalex_cache)


# --------------------------------------------------------------------- paths
def stage_dir(out: Path, stage: str) -> Path:
    """A stage's folder."""
    return out / stage


def cache_dir(out: Path, stage: str) -> Path:
    """A stage's cache (the OpenAlex lookups): outside every stage folder, so a stage redone
    with another config, or a killed run, keeps the answers already paid for."""
    return out / f"{stage}{CACHE}"


def map_output(out: Path, stage: str, table: str, key: str) -> Path:
    """A map stage's table for one input file (by its file key)."""
    return out / stage / table / f"{key}.parquet"


def marker_path(out: Path, stage: str, key: str) -> Path:
    """A map stage's completion marker for one input file, written last."""
    return out / stage / MARKERS / f"{key}.json"


def manifest_path(out: Path, stage: str, key: str) -> Path:
    """A map stage's manifest for one input file (counts, or the failure)."""
    return out / stage / MANIFESTS / f"{key}.json"


def marker_paths(out: Path, stage: str) -> list[Path]:
    """Every marker of a map stage, sorted (their stems are the file keys)."""
    return sorted((out / stage / MARKERS).glob("*.json"))


def manifest_paths(out: Path, stage: str) -> list[Path]:
    """Every manifest of a map stage, sorted (their stems are the file keys)."""
    return sorted((out / stage / MANIFESTS).glob("*.json"))


def archive_record_path(out: Path, stage: str, key: str) -> Path:
    """What a map stage found in an archive it read to the end (its units, its members)."""
    return out / stage / ARCHIVES / f"{key}.json"


def archive_record_paths(out: Path, stage: str) -> list[Path]:
    """Every archive record of a map stage, sorted."""
    return sorted((out / stage / ARCHIVES).glob("*.json"))


def archive_records(out: Path, stage: Stage, cfg: Config) -> dict[str, dict[str, Any]]:
    """Archive records written with ``cfg``'s sections and this schema, by archive key."""
    want = cfg.section_hash(*stage.hashed_sections)
    found = {}
    for p in archive_record_paths(out, stage.name):
        with contextlib.suppress(OSError):
            data = read_record(p, "key")
            if data is not None and _is_current(data["key"], want):
                found[p.stem] = data
    return found


def unit_archive(key: str) -> str:
    """The archive key of a unit's file key (``<archive key>.<index>``); else ``key``."""
    head, dot, tail = key.rpartition(".")
    return head if dot and tail.isdigit() else key


def summary_path(out: Path, stage: str = "extract") -> Path:
    """A map stage's totals over its manifests (:data:`SUMMARY`)."""
    return stage_dir(out, stage) / SUMMARY


def success_path(out: Path, stage: str) -> Path:
    """A reduce stage's ``_SUCCESS.json``, written last."""
    return out / stage / SUCCESS


def reduce_output(out: Path, stage: str, table: str) -> Path:
    """A finished reduce stage's table."""
    return out / stage / f"{table}.parquet"


def upstream_files(out: Path, stages: Mapping[str, Stage], stage: str, table: str) -> list[Path]:
    """Parquet files of a stage's table (map: one per input file; reduce: one, if there)."""
    if stages[stage].kind == "map":
        return sorted((out / stage / table).glob("*.parquet"))
    p = reduce_output(out, stage, table)
    return [p] if p.exists() else []


def reduce_temp_dir(out: Path, stage: str) -> Path:
    """A fresh owner-tagged folder a reduce stage writes into before it replaces its own."""
    return out / f".{stage}.{temp_tag()}"


def reduce_scratch_dir(tmp_dir: Path) -> Path:
    """A reduce stage's scratch folder inside its temporary directory (the runner removes
    it before the stage's files are listed)."""
    return tmp_dir / "_scratch"


def reduce_old_dir(out: Path, stage: str) -> Path:
    """Where a reduce stage's previous folder goes while the new one takes its place
    (owner-tagged like a temp: :func:`clean_stale_temps` leaves a live run's alone)."""
    return out / f".{stage}.old.{temp_tag()}"


def release_dir(out: Path) -> Path:
    """The release folder."""
    return out / RELEASE


def eval_file(out: Path) -> Path:
    """The release's eval table."""
    return release_dir(out) / EVAL_FILE


def published_path(out: Path) -> Path:
    """What the last push of a Job published, and from what."""
    return out / PUBLISHED


# --------------------------------------------------------------------- records
_DAMAGED: set[tuple[str, int, int]] = set()  # records already warned about, this process


def read_record(path: Path, *required: str) -> dict[str, Any] | None:
    """A JSON record of the work directory (marker, manifest, ``_SUCCESS.json``, shard or
    publish record), or None when it is missing or damaged.

    Every read of these files goes through here. A damaged record (a write cut short: not
    JSON, not an object, or without one of the ``required`` keys) means what a deleted one
    means, "redo what it vouches for", with a warning naming the file, never a crash of
    every later run and ``status``.

    Raises:
        OSError: the file exists but cannot be read (permissions, I/O); names the file.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    problem = None
    try:
        record = json.loads(data)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        problem = f"not JSON: {e}"
    else:
        if not isinstance(record, dict):
            problem = f"a JSON {type(record).__name__}, not an object"
        elif any(k not in record for k in required):
            problem = f"no {', '.join(k for k in required if k not in record)}"
    if problem is None:
        return record
    with contextlib.suppress(OSError):
        st = path.stat()
        seen = (str(path), st.st_size, st.st_mtime_ns)
        if seen not in _DAMAGED:
            _DAMAGED.add(seen)
            log.warning(
                "%s is damaged (%s): treated as missing, what it records is redone", path, problem
            )
    return None


def is_damaged(path: Path) -> bool:
    """Whether a record is there but cannot be read (:func:`read_record`)."""
    return path.exists() and read_record(path) is None


# --------------------------------------------------------------------- file records
def check_files(base: Path, records: dict[str, dict[str, Any]], checksum: bool) -> str | None:
    """The first file under ``base`` that does not match its record, as a message; else None.

    Sizes are always compared (a stat); contents only with ``checksum``.
    """
    for rel, want in sorted(records.items()):
        path = base / rel
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return f"{path} is missing"
        if size != want["bytes"]:
            return f"{path} is {size} bytes, its marker says {want['bytes']}"
        if checksum and sha256_file(path) != want["sha256"]:
            return f"{path} has sha256 {sha256_file(path)[:12]}..., its marker says {want['sha256'][:12]}..."
    return None


# A reduce stage's own files are compared in full (sha256) on every run when they total at
# most this much: the release is tens of MB at 2.3M papers, hashed at 1.2 GB/s in well under
# a second. Larger stages are compared by size (and in full with --verify); the files a
# later stage reads are hashed in full before it reads them anyway (runner.run_reduce).
FULL_HASH_BYTES = 1 << 30


def cheap_to_hash(records: dict[str, dict[str, Any]]) -> bool:
    """Whether the files of ``records`` total at most :data:`FULL_HASH_BYTES`."""
    return sum(int(r.get("bytes", 0)) for r in records.values()) <= FULL_HASH_BYTES


def map_output_problem(out: Path, stage: str, marker: dict[str, Any], checksum: bool) -> str | None:
    """Why a map marker's output files cannot be trusted, or None."""
    if "outputs" not in marker:
        return "its marker records no file sizes (written by an older version)"
    return check_files(out / stage, marker["outputs"], checksum)


def _is_current(key: Any, config_hash: str) -> bool:
    return (
        isinstance(key, dict)
        and key.get("config_hash") == config_hash
        and key.get("schema_version") == SCHEMA_VERSION
    )


def current_markers(out: Path, stage: Stage, cfg: Config) -> dict[str, dict[str, Any]]:
    """Markers of a map stage written with ``cfg``'s sections and this schema, by file key."""
    want = cfg.section_hash(*stage.hashed_sections)
    found = {}
    for m in marker_paths(out, stage.name):
        data = read_record(m, "key")
        if data is not None and _is_current(data["key"], want):
            found[m.stem] = data
    return found


def stage_key(
    out: Path, name: str, cfg: Config, stages: Mapping[str, Stage], own_dir: Path | None = None
) -> str | None:
    """Key of a stage's current outputs as they should be; None when a map stage has none.

    ``own_dir``: where the stage's files are, for its ``key_extra`` (default: its folder;
    the runner passes the temporary folder it has just written).
    """
    stage = stages[name]
    if stage.kind == "map":
        keys = [data["key"] for data in current_markers(out, stage, cfg).values()]
        return sha256_text(name, keys) if keys else None
    ups = [stage_key(out, r, cfg, stages) for r in stage.reads]
    parts: list[Any] = [name, SCHEMA_VERSION, cfg.section_hash(*stage.hashed_sections), ups]
    if stage.key_extra is not None:
        parts.append(stage.key_extra(own_dir if own_dir is not None else stage_dir(out, name)))
    return sha256_text(*parts)


def reduce_problem(
    out: Path, name: str, cfg: Config, stages: Mapping[str, Stage], checksum: bool | None = False
) -> str | None:
    """Why a reduce stage's outputs are not usable as they are, or None.

    ``"not done"``, ``"stale"`` (key differs from config and upstream), or a message naming
    the first file that differs from what its ``_SUCCESS.json`` records (size; sha256 with
    ``checksum``, or with ``checksum=None`` when :func:`cheap_to_hash`).
    """
    marker = success_path(out, name)
    if not marker.exists():
        return "not done"
    data = read_record(marker)
    if data is None:
        return f"{marker} is damaged"
    if data.get("key") != stage_key(out, name, cfg, stages):
        return "stale"
    if "files" not in data:
        return f"{marker} records no file sizes (written by an older version)"
    if checksum is None:
        checksum = cheap_to_hash(data["files"])
    return check_files(out / name, data["files"], checksum)


def reduce_done(
    out: Path, name: str, cfg: Config, stages: Mapping[str, Stage], checksum: bool = False
) -> bool:
    """Whether a reduce stage is done with the current config and its files are intact."""
    return reduce_problem(out, name, cfg, stages, checksum) is None


def reduce_finished(out: Path, stage: str) -> bool:
    """Whether a reduce stage ever finished (with any config)."""
    return success_path(out, stage).exists()


def reduce_counts(out: Path, stage: str) -> dict[str, Any] | None:
    """The counts a finished reduce stage recorded, or None."""
    data = read_record(success_path(out, stage), "counts")
    return data["counts"] if data is not None else None


# --------------------------------------------------------------------- map stage inputs
def shard_record_path(out: Path, name: str, index: int, count: int) -> Path:
    """Where shard ``index/count`` of a map stage records the input list it was started with."""
    return out / name / SHARD_INPUTS / f"{index}-of-{count}.json"


def write_shard_record(
    out: Path, name: str, index: int, count: int, specs: list[str], keys: list[str]
) -> None:
    """Record a shard's whole input list (every shard's, not only its own files)."""
    record = {"shard": [index, count], "input": [display(s) for s in specs], "files": sorted(keys)}
    write_json(shard_record_path(out, name, index, count), record)


def shard_records(out: Path, name: str) -> dict[str, dict[str, Any]]:
    """Every shard record of a map stage, by shard name (``"0-of-4"``)."""
    found = {}
    for p in sorted((out / name / SHARD_INPUTS).glob("*.json")):
        record = read_record(p, "shard", "input", "files")
        if record is not None:  # a damaged record is rewritten by its shard's next run
            found[p.stem] = record
    return found


def disagreement(records: dict[str, dict[str, Any]]) -> str | None:
    """A message when shard records name different input lists, else None."""
    lists = {}
    for shard, rec in records.items():
        lists.setdefault(tuple(rec["files"]), []).append((shard, rec))
    if len(lists) < 2:
        return None
    (a, *_), (b, *_) = list(lists.values())[:2]
    return (
        f"shards were started with different --input lists: shard {a[0]} with --input "
        f"{' '.join(a[1]['input'])} ({len(a[1]['files'])} files), shard {b[0]} with --input "
        f"{' '.join(b[1]['input'])} ({len(b[1]['files'])} files); start every shard with the "
        "same --input, or use a fresh --out"
    )


def input_list(out: Path, name: str, reader: str) -> list[str] | None:
    """The input list every shard of a map stage agrees on (None when none was recorded).

    Raises:
        RuntimeError: shards recorded different input lists (names both).
    """
    records = shard_records(out, name)
    if not records:
        legacy = read_record(out / name / INPUTS, "files")
        return legacy["files"] if legacy is not None else None
    problem = disagreement(records)
    if problem is not None:
        raise StageError(f"{reader}: {problem}")
    return next(iter(records.values()))["files"]


def record_shard_inputs(
    out: Path,
    stage: str,
    shard_of: tuple[int, int],
    specs: Sequence[str],
    every: Sequence[InputFile],
    prune: bool,
) -> None:
    """Record this shard's whole input list; refuse (recording nothing) when another shard
    recorded a different one. With ``prune`` the disagreeing records are deleted instead.

    Raises:
        InputError: another shard recorded another input list (names both).
    """
    index, count = shard_of
    name = f"{index}-of-{count}"
    keys = sorted(f.key for f in every)
    others = {k: r for k, r in shard_records(out, stage).items() if k != name}
    differ = {k: r for k, r in others.items() if r["files"] != keys}
    if differ and not prune:
        first = next(iter(differ))
        mine = {"shard": [index, count], "input": list(specs), "files": keys}
        problem = disagreement({first: differ[first], name: mine})
        raise InputError(
            f"{stage}: {problem} (or add {option('--prune')} to drop the other shards' records)"
        )
    for rec in differ.values():
        shard_record_path(out, stage, *rec["shard"]).unlink(missing_ok=True)
    if differ:
        log.warning(
            "%s: --prune removed %d shard record(s) of another input list", stage, len(differ)
        )
    write_shard_record(out, stage, index, count, list(specs), keys)


def check_foreign_outputs(
    out: Path, stage: Stage, inputs: Sequence[InputFile], prune: bool
) -> None:
    """Refuse to mix corpora: a map stage's finished files in ``out`` must all be inputs.

    Later stages read every finished extract file in the work directory (that is how
    shards from several machines come together), so outputs of files that are not
    inputs (a moved corpus, another corpus, files removed from it) would silently join
    the benchmark. ``prune`` deletes them instead.

    Raises:
        InputError: such outputs exist and ``prune`` is off.
    """
    keys = {f.key for f in inputs}
    archives = {f.key for f in inputs if f.is_archive}

    def ours(key: str) -> bool:
        return key in keys or unit_archive(key) in archives

    for m in manifest_paths(out, stage.name):
        if not ours(m.stem) and not marker_path(out, stage.name, m.stem).exists():
            m.unlink(missing_ok=True)  # a failed file that is no longer an input: no outputs
    for p in archive_record_paths(out, stage.name):
        if p.stem not in archives:
            p.unlink(missing_ok=True)
    foreign = [m.stem for m in marker_paths(out, stage.name) if not ours(m.stem)]
    if not foreign:
        return
    if not prune:
        raise InputError(
            f"{len(foreign)} finished {stage.name} file(s) in {stage_dir(out, stage.name)} are "
            f"not in --input (e.g. {foreign[0]}); later stages would read them too. Use a "
            f"fresh --out, or add {option('--prune')} to delete them."
        )
    for key in foreign:
        remove_map_input(out, stage, key)
    log.warning(
        "%s: --prune removed the outputs of %d file(s) not in --input", stage.name, len(foreign)
    )


def remove_map_input(out: Path, stage: Stage, key: str) -> None:
    """Delete one input's (or archive unit's) outputs, manifest and marker, marker first:
    whatever a crash leaves behind is redone."""
    marker_path(out, stage.name, key).unlink(missing_ok=True)
    for table in stage.tables:
        map_output(out, stage.name, table, key).unlink(missing_ok=True)
    manifest_path(out, stage.name, key).unlink(missing_ok=True)


def failed_inputs(out: Path, stage: Stage, cfg: Config) -> list[dict[str, Any]]:
    """Input files of a map stage that failed with the current config and have no output.

    Returns:
        ``{"file", "source_key", "reason", "lines_read"}`` per failed file, sorted by key;
        ``file`` is the name tables would record as ``source_file``.
    """
    want = cfg.section_hash(*stage.hashed_sections)
    markers = {m.stem for m in marker_paths(out, stage.name)}
    failed = []
    for p in manifest_paths(out, stage.name):
        m = read_record(p, "key")
        if m is None or m.get("status") != FAILED or p.stem in markers:
            continue
        if not _is_current(m["key"], want) or "source_file" not in m or FAILED not in m:
            continue
        failed.append(
            {
                "file": m["source_file"],
                "source_key": p.stem,
                "reason": m[FAILED]["reason"],
                "lines_read": m[FAILED]["lines_read"],
            }
        )
    return failed


# --------------------------------------------------------------------- totals and status
def map_totals(out: Path, stage: str) -> tuple[int, dict[str, int]]:
    """Finished (not failed) manifests of a map stage, and the sum of their integer counts."""
    manifests = [read_record(p, "counts") for p in manifest_paths(out, stage)]
    manifests = [m for m in manifests if m is not None and m.get("status") != FAILED]
    totals: dict[str, int] = {}
    for m in manifests:
        for k, v in m["counts"].items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
    return len(manifests), totals


def status(out: Path, cfg: Config, stages: Mapping[str, Stage]) -> dict[str, dict[str, Any]]:
    """Per stage, in pipeline order: whether it is done for ``cfg``, with its counts.

    A map stage: ``files_done``, ``current``, ``files_failed`` and its count totals; a
    reduce stage: ``done`` and, when it ever finished, ``counts``.
    """
    report: dict[str, dict[str, Any]] = {}
    for name, stage in stages.items():
        if stage.kind == "map":
            files_done, totals = map_totals(out, name)
            report[name] = {
                "files_done": files_done,
                "current": stage_key(out, name, cfg, stages) is not None,
                "files_failed": [
                    {k: f[k] for k in ("file", "reason", "lines_read")}
                    for f in failed_inputs(out, stage, cfg)
                ],
                **totals,
            }
        else:
            entry: dict[str, Any] = {"done": reduce_done(out, name, cfg, stages)}
            counts = reduce_counts(out, name)
            if counts is not None:
                entry["counts"] = counts
            report[name] = entry
    return report


def has_work(out: Path, stages: Mapping[str, Stage]) -> bool:
    """Whether any stage has a folder in ``out``."""
    return any(stage_dir(out, name).is_dir() for name in stages)


# --------------------------------------------------------------------- the lock
class WorkDirBusyError(PipelineError, RuntimeError):
    """A run with another config is using the work directory."""


# what flock raises on a file system without locks (NFS without a lock manager, FUSE)
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL}


@contextlib.contextmanager
def run_lock(out: Path, cfg: Config) -> Iterator[None]:
    """Hold ``out`` for a run with ``cfg`` while the block runs.

    Runs with the same config share the work directory (shards, or one command started
    twice, cooperate as before: markers, owner-tagged temps, atomic replaces). A run with
    another config would replace files the first one is reading, so it is refused at once.
    Each config's lock file is held with a shared ``flock`` and the check is made under an
    exclusive gate, so of two runs started together exactly one is refused. The kernel
    drops the locks of a process however it ends (kill -9 included). On a file system
    without locks (a Jobs bucket mount, see ``MOUNTS.md``) the run goes ahead unlocked,
    with a warning.

    Raises:
        WorkDirBusyError: a run with another config holds ``out``.
    """
    folder = out / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    mine = None
    gate = os.open(folder / "gate", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _lock_or_warn(gate, out):
            try:
                busy = _other_configs(folder, cfg.hash)
                if busy:
                    raise WorkDirBusyError(
                        f"{out} is in use by a run with another config (config hash "
                        f"{busy[0]}); wait for it to finish, or use another --out"
                    )
                mine = os.open(folder / f"{cfg.hash}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(mine, fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        if mine is not None:
            os.close(mine)  # releases its lock
        os.close(gate)


def _lock_or_warn(gate: int, out: Path) -> bool:
    """Take the gate (waiting for another run's check); False where there are no locks."""
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
    except OSError as e:
        if e.errno not in _NO_LOCKS:
            raise
        log.warning(
            "%s: the file system has no file locks (%s): a run with another config on this "
            "--out is not detected (see docs/MOUNTS.md)",
            out,
            os.strerror(e.errno or 0),
        )
        return False
    return True


def _other_configs(folder: Path, config_hash: str) -> list[str]:
    """Config hashes of other runs holding their lock in ``folder`` (the gate is held).

    The lock file of a config no run holds is removed: nobody can be between opening it
    and locking it, since both happen under the gate.
    """
    busy = []
    for path in sorted(folder.glob("*.lock")):
        if path.stem == config_hash:
            continue
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy.append(path.stem)
        else:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return busy


STAGE_LOCKS = "stages"  # under LOCKS: one lock file per reduce stage


@contextlib.contextmanager
def stage_lock(out: Path, stage: str, reads: Sequence[str] = ()) -> Iterator[None]:
    """Hold reduce stage ``stage`` exclusively and the reduce stages it ``reads`` shared
    while the block runs.

    Two runs of one config on one ``out`` may both find a stage not done: without this,
    both wrote it and both swapped their folder in (``os.replace(final, old)`` then
    ``os.replace(tmp, final)``), and the loser's second rename met the winner's folder:
    ``ENOTEMPTY``. Held, the second run waits here, then finds the stage done
    and skips it; a stage is never swapped while another run reads it.

    ``reads`` must be in pipeline order and ``stage`` after them: every run takes the locks
    in that one order, so two runs never wait on each other in a cycle. The kernel drops
    the locks of a process however it ends. Where the file system has no locks (a Jobs
    bucket mount, ``docs/MOUNTS.md``) the block runs unlocked: :func:`run_lock` has
    already warned.
    """
    if not out.is_dir():  # nothing to guard: the stage refuses (its upstream is not done)
        yield
        return
    folder = out / LOCKS / STAGE_LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    held: list[int] = []
    try:
        for name, mode in [*((r, fcntl.LOCK_SH) for r in reads), (stage, fcntl.LOCK_EX)]:
            fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            held.append(fd)
            if not _flock_waiting(fd, mode, stage, name):
                break  # no locks on this file system
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # releases its lock


def _flock_waiting(fd: int, mode: int, stage: str, name: str) -> bool:
    """Take ``mode`` on ``fd``, saying so when another run makes this one wait; False
    where the file system has no locks."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        what = "writing" if mode == fcntl.LOCK_SH else "writing or reading"
        log.info("%s: another run on this --out is %s %s; waiting for it", stage, what, name)
        fcntl.flock(fd, mode)
    except OSError as e:
        if e.errno not in _NO_LOCKS:
            raise
        return False
    return True


# --------------------------------------------------------------------- temps
def clean_stale_temps(out: Path) -> None:
    """Remove temp files/dirs that killed runs left behind (they are never read).

    Only leftovers of dead processes on this host are removed, so concurrent runs
    (shards on one machine, or on several machines sharing ``out``) do not delete
    each other's work in progress. A live run's temp folder is not entered at all, and a
    folder that disappears while it is listed is another run's (a temp folder renamed into
    place, a scratch folder removed): both were found crashing a run that cleaned while an
    identical run on the same ``out`` finished a stage.
    """
    for p in _stale_temps(out):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
    # previous stage folders of versions before their names carried an owner tag
    for p in out.glob(".*.old-*"):
        shutil.rmtree(p, ignore_errors=True)


def _stale_temps(folder: Path) -> Iterator[Path]:
    """Temp files and folders under ``folder`` whose owner is dead (:func:`owner_alive`);
    the folders of live owners are not entered."""
    try:
        with os.scandir(folder) as entries:
            found = list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return  # removed or renamed by the run that owns it while this one walked
    for entry in found:
        path = Path(entry.path)
        if ".tmp-" in entry.name:
            if not owner_alive(entry.name):
                yield path
            continue
        with contextlib.suppress(FileNotFoundError):
            if entry.is_dir(follow_symlinks=False):
                yield from _stale_temps(path)


# --------------------------------------------------------------------- the release
def is_publishable(rel: PurePosixPath) -> bool:
    """Release files are everything except runner markers (``_*``), hidden and temp files."""
    return not any(p.startswith(("_", ".")) or ".tmp-" in p for p in rel.parts)


def release_files(release: Path) -> list[tuple[str, Path]]:
    """``(path in repo, local path)`` of every publishable file of a release folder, sorted.

    Raises:
        FileNotFoundError: ``release`` is not a finished release directory.
    """
    if not (release / CARD_FILE).is_file() or not (release / METADATA_FILE).is_file():
        raise FileNotFoundError(
            f"{release}: no {CARD_FILE} and {METADATA_FILE}; run the release stage first"
        )
    found = []
    for p in sorted(release.rglob("*")):
        rel = PurePosixPath(p.relative_to(release).as_posix())
        if p.is_file() and is_publishable(rel):
            found.append((str(rel), p))
    return found


def release_file_problem(path: Path) -> str | None:
    """Why a file of a release folder differs from the release's own record, or None.

    The record is the release folder's ``_SUCCESS.json`` (a work directory's release) and
    its ``eval_metadata.json`` (published with it): both list every file, by its path in the
    release, with its sha256. The release folder is the file's own or its parent's (a
    file of ``candidates/`` or ``aspects/``). A file that neither lists, or a folder
    without them, is not judged here.
    """
    for folder in (path.parent, path.parent.parent):
        rel = path.relative_to(folder).as_posix()
        for record_path, files in (
            (folder / SUCCESS, release_records(folder)),
            (folder / METADATA_FILE, (read_record(folder / METADATA_FILE) or {}).get("files")),
        ):
            want = (files or {}).get(rel)
            if not isinstance(want, dict) or "sha256" not in want:
                continue
            got = sha256_file(path)
            if got != want["sha256"]:
                return (
                    f"{path} has sha256 {got[:12]}..., the release record {record_path} says "
                    f"{want['sha256'][:12]}...: it changed after the release stage wrote it; "
                    "rerun the release (run --out with the same --input) or fetch it again"
                )
    return None


def replace_release_file(out: Path, rel: str, data: bytes) -> None:
    """Replace one file of ``out``'s finished release and its size and sha256 in the
    release's ``_SUCCESS.json``, so a rerun still finds the stage done and ``push`` still
    finds every file as recorded (``run`` renders the card again once the release is
    evaluated: :func:`pipeline.hub.card.add_results`).

    Raises:
        RuntimeError: the release has no record, or its record does not list ``rel``.
    """
    record_path = success_path(out, RELEASE)
    record = read_record(record_path, "files")
    if record is None or rel not in record["files"]:
        raise StageError(
            f"{record_path}: no record of {rel}; rebuild the release before replacing it"
        )
    path = release_dir(out) / rel
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    record["files"][rel] = {"bytes": len(data), "sha256": sha256_file(path)}
    write_json(record_path, record)


def release_records(release: Path) -> dict[str, dict[str, Any]] | None:
    """The files the runner recorded for a release folder (its ``_SUCCESS.json``), or None."""
    record = read_record(release / SUCCESS)
    return record.get("files") if record is not None else None


# --------------------------------------------------------------------- summary
def map_summary(out: Path, name: str = "extract") -> dict[str, Any]:
    """Totals over every finished input file of a map stage, plus papers (its ``papers``
    table's ``paper_id``) present in more than one file.

    Written to ``<out>/extract/_summary.json`` after each extract run (``api.extract``).
    The copy kept for a paper found in several files is the one whose ``source_file`` sorts
    first (:func:`pipeline.rules.tables.papers_winner`).
    """
    import polars as pl  # here: every command reads this module, few sum a map stage

    totals: dict[str, Any] = {"files": 0, "rejects": {}, "failed_files": []}
    for path in manifest_paths(out, name):
        manifest = read_record(path, "counts")
        if manifest is None:  # damaged: its file is redone (runner.run_map)
            continue
        if manifest.get("status") == FAILED:
            if not marker_path(out, name, path.stem).exists():
                totals["failed_files"].append({"file": manifest["source_file"], **manifest[FAILED]})
            continue
        counts = manifest["counts"]
        totals["files"] += 1
        for k, v in counts.items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
        for reason, n in counts.get("rejects", {}).items():
            totals["rejects"][reason] = totals["rejects"].get(reason, 0) + n
    # only outputs that match their marker's sizes: a damaged file of another shard is
    # redone by that shard, and is checked again before any later stage reads it
    papers = []
    for marker in marker_paths(out, name):
        data = read_record(marker)
        if data is not None and map_output_problem(out, name, data, checksum=False) is None:
            papers.append(map_output(out, name, "papers", marker.stem))
    if papers:
        ids = pl.scan_parquet(papers).select(S.PAPER_ID)
        stats = ids.select(
            pl.len().alias("rows"), pl.col(S.PAPER_ID).n_unique().alias("unique")
        ).collect()
        totals["duplicate_papers_across_files"] = int(stats["rows"][0] - stats["unique"][0])
        totals["unique_papers"] = int(stats["unique"][0])
    members: dict[str, int] = {}
    for path in archive_record_paths(out, name):
        record = read_record(path, "members")
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            for kind, n in (record or {}).get("members", {}).items():
                members[kind] = members.get(kind, 0) + int(n)
    if members:
        # archives' members by kind: JSONL members (read), empty and non-JSONL members and
        # directories (skipped), over every archive read to its end
        totals["archive_members"] = dict(sorted(members.items()))
    write_json(summary_path(out, name), totals)
    return totals
