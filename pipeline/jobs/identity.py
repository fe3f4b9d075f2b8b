"""What a run is built from (input files, config, code) and whether its extract is done.

A Job compares this identity with the work directory's ``_published.json`` before any
work, and the finishing Job of a fan-out waits on :func:`extract_missing`.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.engine import workdir as W


def code_fingerprint() -> str:
    """``<version>+<sha256 of the package's files>``: changes with any source edit."""
    digest = hashlib.sha256()
    for rel, data in package_files():
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def package_files() -> list[tuple[str, bytes]]:
    """``(path under the package's parent, bytes)`` of every source and data file, sorted."""
    out = []

    def walk(node: Any, rel: str) -> None:
        for child in node.iterdir():
            name = f"{rel}/{child.name}"
            if child.is_dir():
                if child.name != "__pycache__":
                    walk(child, name)
            elif not child.name.endswith((".pyc", ".pyo")):
                out.append((name, child.read_bytes()))

    walk(resources.files("pipeline"), "pipeline")
    return sorted(out)


def run_identity(input_spec: str, cfg: Any) -> dict[str, str]:
    """What a published release was built from: input files, config, code."""
    from pipeline.corpus.sources import resolve_inputs

    identities = sorted(f.identity for f in resolve_inputs([input_spec]))
    return {
        "input": hashlib.sha256("\n".join(identities).encode()).hexdigest()[:24],
        "input_files": str(len(identities)),
        "config_hash": cfg.hash,
        "code": code_fingerprint(),
    }


def unchanged_since_release(out: Path, identity: dict[str, str]) -> dict[str, Any] | None:
    """The last published record when input, config and code are all the same, else None."""
    record = W.read_record(W.published_path(out))
    if record is None:
        return None
    return record if {k: record.get(k) for k in identity} == identity else None


def extract_missing(out: Path, input_spec: str, cfg: Any) -> list[str]:
    """Input files without a finished (or recorded failed) extract for their current identity.

    What the finishing Job waits on: the markers and manifests shard Jobs write last,
    judged as the runner judges them (:func:`pipeline.engine.workdir.input_problem`). On a bucket
    mount another Job's marker can become visible before the files it vouches for
    (uploads are flushed asynchronously, see MOUNTS.md), so a marker counts only once
    every output it records is there with its recorded size.
    """
    from pipeline.corpus.sources import resolve_inputs
    from pipeline.engine.workdir import input_problem, map_marker_key
    from pipeline.stages import GRAPH

    stage = GRAPH["extract"]
    missing = []
    for f in resolve_inputs([input_spec]):
        if input_problem(stage, f, out, cfg) is None:
            continue
        # a file that could not be read is an outcome too
        manifest = W.read_record(W.manifest_path(out, stage.name, f.key)) or {}
        failed = manifest.get("status") == W.FAILED
        if not failed or manifest.get("key") != map_marker_key(stage, f, cfg):
            missing.append(f.name or f.path)
    return missing
