"""The work directory's formats, in one place: where every stage's outputs, markers,
manifests and records are, how each record is written, and what can be read from them.

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
                                      while a later stage reads it (:mod:`~pipeline.engine.locks`)
      _published.json                 what the last ``push`` of a Job published

Every marker, manifest, archive record, shard input list and ``_SUCCESS.json`` is written
by a function here and read by one here, beside the check a rerun resumes by
(:func:`input_problem`, :func:`unit_problem`, :func:`reduce_problem`); the executor
(:mod:`~pipeline.engine.map_files`, :mod:`~pipeline.engine.archive_stream`,
:mod:`~pipeline.engine.reduce`) calls them, and the API, the CLI and the Jobs ask this
module where files are and what they say. A marker is keyed by input identity, config
hash and schema version (:func:`map_marker_key`), never by worker rank, so a rerun with
another worker count still resumes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pipeline import __version__
from pipeline.core.config import Config
from pipeline.core.errors import StageError, option
from pipeline.core.files import (
    atomic_path,
    file_record,
    owner_alive,
    sha256_file,
    sha256_text,
    temp_tag,
    write_json,
)
from pipeline.core.parquet import readable_schema
from pipeline.core.release_files import CARD_FILE, EVAL_FILE, METADATA_FILE
from pipeline.core.schema import SCHEMA_VERSION
from pipeline.corpus.archive import Unit, unit_identity, unit_key
from pipeline.corpus.sources import InputError, InputFile, display, source_name
from pipeline.engine.stage import FAILED
from pipeline.rules.redact import redact

if TYPE_CHECKING:
    import polars as pl

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
# later stage reads are hashed in full before it reads them anyway (reduce.run_reduce).
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


# --------------------------------------------------------------------- markers and manifests
# Written here and read here: what a finished input file, a failed one, an archive read to
# its end and a finished reduce stage leave in the work directory, and whether each is done.
def run_record(cfg: Config) -> dict[str, Any]:
    """What every manifest and ``_SUCCESS.json`` says of the run that wrote it: the resolved
    config, its hash and the code version."""
    return {"config": cfg.to_dict(), "config_hash": cfg.hash, "code_version": __version__}


def map_marker_key(stage: Stage, source: InputFile, cfg: Config) -> dict[str, Any]:
    """The key a map stage's marker of ``source`` holds: input identity, the hash of the
    config sections the stage depends on and the schema version, never the worker rank."""
    return {
        "stage": stage.name,
        "identity": source.identity,
        "config_hash": cfg.section_hash(*stage.hashed_sections),
        "schema_version": SCHEMA_VERSION,
    }


def unit_marker_key(stage: Stage, cfg: Config) -> dict[str, Any]:
    """The key of an archive unit's marker, before the unit is read to its end (which sets
    ``identity`` and ``parts_end``: :func:`pipeline.corpus.archive.unit_identity`)."""
    return {
        "stage": stage.name,
        "identity": None,  # set when the unit is read to its end (unit_identity)
        "parts_end": None,
        "config_hash": cfg.section_hash(*stage.hashed_sections),
        "schema_version": SCHEMA_VERSION,
    }


def write_map_done(
    out: Path,
    stage: Stage,
    source: InputFile,
    key: dict[str, Any],
    counts: dict[str, Any],
    cfg: Config,
    finals: dict[str, Path],
) -> dict[str, Any]:
    """Record input ``source`` of map stage ``stage`` done, once its tables are in place at
    ``finals``: its manifest, then (last) its marker with every output's size and sha256.
    Returns the manifest."""
    manifest = {
        "stage": stage.name,
        "source": display(source.path),
        "source_key": source.key,
        "revision": source.revision,
        "key": key,
        "counts": counts,
        **run_record(cfg),
        "outputs": {t: str(p.relative_to(out)) for t, p in finals.items()},
    }
    write_json(manifest_path(out, stage.name, source.key), manifest)
    base = stage_dir(out, stage.name)
    outputs = {p.relative_to(base).as_posix(): file_record(p) for p in finals.values()}
    marker = {"key": key, "source": display(source.path), "outputs": outputs}
    write_json(marker_path(out, stage.name, source.key), marker)
    return manifest


def write_map_failure(
    out: Path,
    stage: Stage,
    source: InputFile,
    key: dict[str, Any],
    failure: dict[str, Any],
    cfg: Config,
) -> dict[str, Any]:
    """Record input ``source`` failed (``failure``: its reason, the lines read before it):
    a manifest and no marker, so the next run retries it. Returns the manifest. The reason
    holds a library's or a server's words (a Hub answer may quote the token): redacted
    before it is written."""
    manifest = {
        "stage": stage.name,
        "status": FAILED,
        "source": display(source.path),
        "source_file": source_name(source),
        "source_key": source.key,
        "revision": source.revision,
        "key": key,
        FAILED: {**failure, "reason": redact(str(failure["reason"]))},
        "counts": {"lines_read": failure["lines_read"]},
        **run_record(cfg),
    }
    write_json(manifest_path(out, stage.name, source.key), manifest)
    return manifest


def input_problem(
    stage: Stage, source: InputFile, out: Path, cfg: Config, verify: bool = False
) -> str | None:
    """Why input ``source`` of map stage ``stage`` is not done with ``cfg``, or None: what
    :func:`pipeline.engine.map_files.run_files` skips by, and what a finishing Job waits on
    (``jobs.extract_missing``).

    A file is done when its marker's key matches (input identity, config hash, schema
    version), its outputs have the sizes (with ``verify``, the sha256) the marker records,
    and its manifest is not damaged. An archive is done when a run read it to its end with
    that key (its archive record) and every unit the record lists is done the same way.
    ``"not done"`` and ``"stale"`` (the input or the config changed) are the quiet answers;
    any other names what is wrong.
    """
    key = map_marker_key(stage, source, cfg)
    if source.is_archive:
        record = archive_records(out, stage, cfg).get(source.key)
        if record is None:
            return "not done"
        if record.get("key") != key:
            return "stale"
        for unit in record.get("units", []):
            marker = read_record(marker_path(out, stage.name, unit))
            if marker is None:
                return f"its unit {unit} is not done"
            problem = map_output_problem(out, stage.name, marker, verify)
            if problem is not None:
                return f"its unit {unit}: {problem}"
        return None
    path = marker_path(out, stage.name, source.key)
    marker = read_record(path)
    if marker is None:
        return f"its marker {path} is damaged" if path.exists() else "not done"
    if marker.get("key") != key:
        return "stale"
    problem = map_output_problem(out, stage.name, marker, verify)
    manifest = manifest_path(out, stage.name, source.key)
    if problem is None and is_damaged(manifest):
        problem = f"its manifest {manifest} is damaged"
    return problem


def unit_problem(
    stage: Stage, archive: InputFile, unit: Unit, out: Path, cfg: Config, verify: bool
) -> str | None:
    """None when the unit's marker matches it and its outputs are intact; else why not."""
    path = marker_path(out, stage.name, unit_key(archive, unit.index))
    if not path.exists():
        return "not done"
    marker = read_record(path, "key")
    try:
        key = marker["key"]  # type: ignore[index]
        end = key["parts_end"]
    except (KeyError, TypeError) as e:
        return f"its marker {path} is damaged ({type(e).__name__})"
    if not isinstance(end, int) or not 0 <= end < len(archive.parts):
        return "its marker names no part"
    want = unit_marker_key(stage, cfg) | {
        "identity": unit_identity(archive, unit, end),
        "parts_end": end,
    }
    if key != want:
        return "its members, a part it was read from, or the config changed"
    return map_output_problem(out, stage.name, marker, verify)


def write_archive_record(
    path: Path,
    stage: Stage,
    archive: InputFile,
    cfg: Config,
    units: list[str],
    members: dict[str, int],
    decompressed: int,
) -> None:
    """Record an archive read to its end: its parts, every unit's file key, its members by
    kind and the bytes decompressed."""
    record = {
        "key": map_marker_key(stage, archive, cfg),
        "archive": display(archive.path),
        "name": display(archive.name),
        "parts": [
            {"name": display(p.name), "bytes": p.size, "identity": p.identity}
            for p in archive.parts
        ],
        "units": units,
        "members": members,
        "bytes_decompressed": decompressed,
    }
    write_json(path, record)


def archived_parts(path: Path) -> list[Any] | None:
    """The identities of the parts an archive record lists, or None when there is no record
    or it is damaged."""
    record = read_record(path, "parts")
    try:
        return [p["identity"] for p in record["parts"]]  # type: ignore[index]
    except (KeyError, TypeError):
        return None


def write_success(
    tmp: Path, stage: str, key: str | None, counts: dict[str, Any], cfg: Config, started: float
) -> dict[str, Any]:
    """Write a reduce stage's ``_SUCCESS.json`` into its temporary folder ``tmp``, last: its
    key, the size and sha256 of every file in ``tmp``, its counts and its seconds since
    ``started`` (``time.monotonic()``). Returns it."""
    files = {
        p.relative_to(tmp).as_posix(): file_record(p) for p in sorted(tmp.rglob("*")) if p.is_file()
    }
    manifest = {
        "stage": stage,
        "key": key,
        "files": files,
        "counts": counts,
        "seconds": round(time.monotonic() - started, 3),
        **run_record(cfg),
    }
    write_json(tmp / SUCCESS, manifest)
    return manifest


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


# --------------------------------------------------------------------- temps
def clean_stale_temps(out: Path) -> None:
    """Remove temp files/dirs that killed runs left behind (they are never read).

    Only leftovers of dead processes on this host are removed, so concurrent runs
    (shards on one machine, or on several machines sharing ``out``) do not delete
    each other's work in progress. A live run's temp folder is not entered at all, and a
    folder that disappears while it is listed is another run's (a temp folder renamed into
    place, a scratch folder removed): both happen when a run cleans while an identical run
    on the same ``out`` finishes a stage.
    """
    for p in _stale_temps(out):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
    # previous stage folders whose names carry no owner tag: no run writes these names
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


def release_file_schema(path: Path, error: type[Exception]) -> pl.Schema:
    """The Parquet schema of a release file whose bytes are the release's record's
    (:func:`release_file_problem`).

    Raises:
        error: the file differs from the record, or is not a readable Parquet file (one
            line naming it, with the caller's own error type).
    """
    problem = release_file_problem(path)  # a damaged release file is not read
    if problem is not None:
        raise error(problem)
    return readable_schema(path, error)


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
