"""Hugging Face Hub: publish a release, move work tables, and run the pipeline as Jobs.

Subcommands (added to ``python -m pipeline`` by :func:`add_parser`):

``push``
    Create the dataset repo if needed and upload the release folder in **one** commit
    (``HfApi.create_commit`` with a ``CommitOperationAdd`` per file), then tag that
    commit. Runner markers (``_SUCCESS.json``) and temp files are not release files
    and are never uploaded. Files that a previous release had and this one lacks stay
    in the repo (the card's ``configs`` name exact files, so they are not loaded).
``push-work`` / ``pull-work``
    Upload a stage's outputs (tables, markers, manifests) from a work dir to a Hub
    dataset repo used as shared storage, and download them again. With ``--shard I/N``
    a shard record ``shards/N/I.json`` names the files and the input revision and
    config they were built from; ``pull-work --shards N`` waits until all N records
    exist for the current input revision and config, then downloads exactly the files
    they list (older shards' files in the repo are ignored).
``job``
    What a Hugging Face Job runs, as one command: ``--step all`` (``run`` then ``push``),
    ``--step shard`` (``extract --shard I/N`` then ``push-work``), ``--step finish``
    (``pull-work`` then ``run`` without ``--input``, then ``push``).
``submit``
    Submit ``job`` as Hugging Face Jobs (``HfApi.run_job``; ``--schedule`` makes
    them scheduled jobs with ``HfApi.create_scheduled_job``). ``--fan-out N`` submits
    N shard jobs and one finishing job. ``--dry-run`` prints every job spec.

Authentication is huggingface_hub's own (``HF_TOKEN`` or ``hf auth login``). The
token is never printed, logged or written; jobs receive it as a *secret* and specs
printed by ``--dry-run`` name the secret, never its value.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.errors import require_token
from pipeline.runner import sha256_file
from pipeline.sources import InputError

log = logging.getLogger("pipeline")

REPO_TYPE = "dataset"
DEFAULT_INPUT = "hf://datasets/ines-besrour/unarxive_2024"
DEFAULT_RELEASE_NAME = "survey-reading-lists"
DEFAULT_WORK_NAME = "survey-reading-lists-work"
# A Docker image with this repository checked out at its working directory and
# installed (``pip install .``): the job commands are ``python -m pipeline ...``.
DEFAULT_IMAGE = "hf.co/spaces/{namespace}/survey-reading-lists-runner"
NAMESPACE_PLACEHOLDER = "<namespace>"
TOKEN_SECRET = "HF_TOKEN"
SCHEDULE_ALIASES = ("@annually", "@yearly", "@monthly", "@weekly", "@daily", "@hourly")
SHARD_RECORDS = "shards"
RETRY_STATUS = (409, 412, 429, 500, 502, 503, 504)


# --------------------------------------------------------------------- release files
def verify_release(release: Path, files: list[dict[str, Any]]) -> None:
    """Refuse a release whose files differ from what the release stage recorded.

    Parquet files are checked against ``eval_metadata.json`` (size and sha256, and no file
    missing or extra); every file, the card and the metadata included, against the
    runner's ``_SUCCESS.json`` when it is there.

    Raises:
        RuntimeError: names the first file that differs.
    """
    meta = json.loads((release / "eval_metadata.json").read_text())
    recorded: dict[str, dict[str, Any]] = dict(meta.get("files", {}))
    success = release / "_SUCCESS.json"
    by_runner = json.loads(success.read_text()).get("files") if success.exists() else None
    recorded = {**(by_runner or {}), **recorded}
    have = {f["path"]: f for f in files}
    for rel, want in sorted(recorded.items()):
        if rel == "_SUCCESS.json" or not is_publishable(PurePosixPath(rel)):
            continue
        got = have.get(rel)
        if got is None:
            raise RuntimeError(f"push: {release / rel} is missing; rebuild the release")
        if got["bytes"] != want["bytes"] or got["sha256"] != want["sha256"]:
            raise RuntimeError(
                f"push: {release / rel} differs from the release record ({got['bytes']} bytes, "
                f"sha256 {got['sha256'][:12]}...; recorded {want['bytes']} bytes, sha256 "
                f"{want['sha256'][:12]}...); refusing to publish it: rebuild the release"
            )
    extra = sorted(set(have) - set(recorded))
    if extra and (by_runner is not None or any(p.endswith(".parquet") for p in extra)):
        raise RuntimeError(
            f"push: {release / extra[0]} is not a file the release stage wrote; refusing to "
            "publish it"
        )


def is_publishable(rel: PurePosixPath) -> bool:
    """Release files are everything except runner markers (``_*``), hidden and temp files."""
    return not any(p.startswith(("_", ".")) or ".tmp-" in p for p in rel.parts)


def release_files(release: Path) -> list[tuple[str, Path]]:
    """``(path in repo, local path)`` of every release file, sorted.

    Raises:
        FileNotFoundError: ``release`` is not a finished release directory.
    """
    if not (release / "README.md").is_file() or not (release / "eval_metadata.json").is_file():
        raise FileNotFoundError(
            f"{release}: no README.md and eval_metadata.json; run the release stage first"
        )
    out = []
    for p in sorted(release.rglob("*")):
        rel = PurePosixPath(p.relative_to(release).as_posix())
        if p.is_file() and is_publishable(rel):
            out.append((str(rel), p))
    return out


def _retry(what: str, fn: Callable[[], Any], attempts: int = 4) -> Any:
    """Call ``fn``; retry Hub conflicts and transient errors with exponential backoff."""
    from huggingface_hub.errors import HfHubHTTPError

    for i in range(attempts):
        try:
            return fn()
        except HfHubHTTPError as e:
            status = e.response.status_code if e.response is not None else None
            if status not in RETRY_STATUS or i == attempts - 1:
                raise
            log.warning("%s: HTTP %s, retrying in %d s", what, status, 2**i)
            time.sleep(2**i)
    raise AssertionError("unreachable")


def _api(endpoint: str | None) -> Any:
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None)


# --------------------------------------------------------------------- push
def push_plan(release: Path, repo_id: str, tag: str | None, private: bool) -> dict[str, Any]:
    """What ``push`` does, as data: the repo, the one commit with its files, the tag."""
    meta = (
        json.loads((release / "eval_metadata.json").read_text())
        if (release / "eval_metadata.json").exists()
        else {}
    )
    files = [
        {"path": rel, "bytes": p.stat().st_size, "sha256": sha256_file(p)}
        for rel, p in release_files(release)
    ]
    verify_release(release, files)
    version = meta.get("version", "")
    return {
        "repo_id": repo_id,
        "repo_type": REPO_TYPE,
        "private": private,
        "create_repo": "if missing (exist_ok)",
        "revision": "main",
        "commit_message": f"Release {version}".strip() if version else "Release",
        "files": files,
        "tag": tag,
    }


def push_release(
    release: Path,
    repo_id: str,
    tag: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Create the repo if needed, upload the release in one commit, tag it; return what was done."""
    from huggingface_hub import CommitOperationAdd

    plan = push_plan(release, repo_id, tag, private)
    api = _api(endpoint)
    # private=None (not False) keeps the namespace's default visibility for new repos
    api.create_repo(repo_id, repo_type=REPO_TYPE, private=private or None, exist_ok=True)
    ops = [
        CommitOperationAdd(path_in_repo=f["path"], path_or_fileobj=str(release / f["path"]))
        for f in plan["files"]
    ]
    info = api.create_commit(
        repo_id, ops, commit_message=plan["commit_message"], repo_type=REPO_TYPE
    )
    if tag:
        api.create_tag(
            repo_id,
            tag=tag,
            revision=info.oid,
            repo_type=REPO_TYPE,
            tag_message=plan["commit_message"],
        )
    return {
        "repo_id": repo_id,
        "commit": info.oid,
        "commit_url": str(info.commit_url),
        "tag": tag,
        "files": len(ops),
    }


def cmd_push(args: argparse.Namespace) -> int:
    if not args.dry_run:
        require_token("push")
    plan = push_plan(args.release, args.repo_id, args.tag, args.private)
    if args.dry_run:
        print(json.dumps({"dry_run": True, **plan}, indent=2))
        return 0
    done = push_release(args.release, args.repo_id, args.tag, args.private, args.endpoint)
    print(json.dumps(done, indent=2))
    return 0


# --------------------------------------------------------------------- work tables
def _stage_files(out: Path, stage: str) -> list[str]:
    d = out / stage
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no outputs of stage {stage!r}")
    return sorted(
        p.relative_to(out).as_posix()
        for p in d.rglob("*")
        # every finished output, whatever its name (input files may start with a dot);
        # only temp files of unfinished writes stay behind
        if p.is_file() and ".tmp-" not in p.name
    )


def _record_path(index: int, count: int) -> str:
    return f"{SHARD_RECORDS}/{count}/{index}.json"


def _extract_identity(out: Path, files: list[str]) -> dict[str, Any]:
    """Input revision(s), extract config hash and schema version of a work dir's extract outputs."""
    revisions, hashes, schemas = set(), set(), set()
    for rel in files:
        if "/_markers/" in f"/{rel}":
            key = json.loads((out / rel).read_text())["key"]
            hashes.add(key["config_hash"])
            schemas.add(key["schema_version"])
        if "/_manifests/" in f"/{rel}":
            revisions.add(json.loads((out / rel).read_text()).get("revision") or "")
    return {
        "input_revisions": sorted(revisions),
        "config_hashes": sorted(hashes),
        "schema_versions": sorted(schemas),
    }


def push_work(
    out: Path,
    repo_id: str,
    stage: str,
    shard: tuple[int, int] | None = None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Upload ``out/<stage>/`` (and a shard record) to ``repo_id`` in one commit."""
    from huggingface_hub import CommitOperationAdd

    from pipeline import __version__

    files = _stage_files(out, stage)
    ops = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(out / rel)) for rel in files]
    record = None
    if shard is not None:
        record = {
            "shard": list(shard),
            "stage": stage,
            "code_version": __version__,
            "files": files,
            **_extract_identity(out, files),
        }
        blob = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
        ops.append(CommitOperationAdd(path_in_repo=_record_path(*shard), path_or_fileobj=blob))
    api = _api(endpoint)
    api.create_repo(repo_id, repo_type=REPO_TYPE, private=True, exist_ok=True)
    message = f"{stage} outputs" + (f" of shard {shard[0]}/{shard[1]}" if shard else "")
    info = _retry(
        "push-work",
        lambda: api.create_commit(repo_id, ops, commit_message=message, repo_type=REPO_TYPE),
    )
    return {
        "repo_id": repo_id,
        "commit": info.oid,
        "files": len(ops),
        "shard_record": record is not None,
    }


def current_revision(input_spec: str) -> str:
    """Commit sha an ``hf://`` input resolves to now ('' for local inputs)."""
    from pipeline.sources import resolve_inputs

    revisions = {f.revision for f in resolve_inputs([input_spec])}
    return ",".join(sorted(r for r in revisions if r))


def _read_records(api: Any, repo_id: str, count: int, tmp: Path) -> dict[int, dict[str, Any]]:
    from huggingface_hub.errors import EntryNotFoundError, RemoteEntryNotFoundError

    records = {}
    for i in range(count):
        try:
            p = api.hf_hub_download(
                repo_id,
                _record_path(i, count),
                repo_type=REPO_TYPE,
                local_dir=tmp,
                force_download=True,
            )
        except (EntryNotFoundError, RemoteEntryNotFoundError):
            continue
        records[i] = json.loads(Path(p).read_text())
    return records


def pull_work(
    out: Path,
    repo_id: str,
    stage: str,
    shards: int | None = None,
    revision: str | None = None,
    wait: float = 0.0,
    poll: float = 60.0,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Download a stage's outputs from ``repo_id`` into ``out``.

    Without ``shards``: every file under ``<stage>/``. With ``shards``: wait up to
    ``wait`` seconds until the N shard records exist (for ``revision`` when given),
    then download the files they list.

    Raises:
        TimeoutError: the shard records are not all there in time (says which are missing).
    """
    api = _api(endpoint)
    # one request without retries first: an unreachable Hub or a missing repo fails now,
    # not after huggingface_hub's ~25 s of retries of the listing below
    api.repo_info(repo_id, repo_type=REPO_TYPE)
    if shards is None:
        files = sorted(
            f
            for f in api.list_repo_files(repo_id, repo_type=REPO_TYPE)
            if f.startswith(f"{stage}/")
        )
    else:
        deadline = time.monotonic() + wait
        while True:
            records = _read_records(api, repo_id, shards, out / ".shard-records")
            ok = {
                i: r
                for i, r in records.items()
                if not revision or r.get("input_revisions") == [revision]
            }
            missing = sorted(set(range(shards)) - set(ok))
            if not missing:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"pull-work: shard record(s) {missing} of {shards} missing in {repo_id}"
                    + (f" for input revision {revision}" if revision else "")
                )
            log.info("pull-work: waiting for shard(s) %s of %d", missing, shards)
            time.sleep(poll)
        hashes = {h for r in ok.values() for h in r.get("config_hashes", [])}
        if len(hashes) > 1:
            raise RuntimeError(
                f"pull-work: shards were extracted with different configs: {sorted(hashes)}"
            )
        files = sorted({f for r in ok.values() for f in r["files"]})
    for rel in files:
        api.hf_hub_download(repo_id, rel, repo_type=REPO_TYPE, local_dir=out)
    return {"repo_id": repo_id, "files": len(files)}


def cmd_push_work(args: argparse.Namespace) -> int:
    require_token("push-work")
    print(
        json.dumps(
            push_work(args.out, args.repo_id, args.stage, args.shard, args.endpoint), indent=2
        )
    )
    return 0


def cmd_pull_work(args: argparse.Namespace) -> int:
    revision = current_revision(args.input) if args.input else None
    done = pull_work(
        args.out,
        args.repo_id,
        args.stage,
        args.shards,
        revision,
        args.wait,
        args.poll,
        args.endpoint,
    )
    print(json.dumps({**done, "out": str(args.out)}, indent=2))
    return 0


# --------------------------------------------------------------------- job (what a Job runs)
def _cli(argv: list[str]) -> None:
    from pipeline.cli import main

    rc = main(argv)
    if rc != 0:
        raise RuntimeError(f"`python -m pipeline {' '.join(argv)}` exited with {rc}")


def cmd_job(args: argparse.Namespace) -> int:
    require_token(f"job --step {args.step}")  # every step pushes at its end
    out = str(args.out)
    workers = ["--workers", str(args.workers)] if args.workers else []
    if args.step == "all":
        _cli(["run", "--input", args.input, "--out", out, *workers])
        push_release(args.out / "release", args.repo_id, args.tag, args.private)
    elif args.step == "shard":
        i, n = args.shard
        _cli(["extract", "--input", args.input, "--shard", f"{i}/{n}", "--out", out, *workers])
        push_work(args.out, args.work_repo, "extract", (i, n))
    else:
        pull_work(
            args.out,
            args.work_repo,
            "extract",
            args.shards,
            current_revision(args.input),
            args.wait,
        )
        _cli(["run", "--out", out, *workers])
        push_release(args.out / "release", args.repo_id, args.tag, args.private)
    return 0


# --------------------------------------------------------------------- submit
@dataclass
class JobSpec:
    """One Hugging Face Job: the arguments of ``run_job`` / ``create_scheduled_job``."""

    name: str
    image: str
    command: list[str]
    flavor: str
    timeout: str
    env: dict[str, str] = field(default_factory=dict)
    secret_names: list[str] = field(default_factory=list)
    schedule: str | None = None
    attempts: int = 1

    def printable(self) -> dict[str, Any]:
        """The spec as printed by ``--dry-run``: secrets by name only."""
        return {
            "name": self.name,
            "image": self.image,
            "command": self.command,
            "flavor": self.flavor,
            "timeout": self.timeout,
            "env": self.env,
            "secrets": self.secret_names,
            "schedule": self.schedule,
            "attempts": self.attempts,
            "kind": "scheduled job" if self.schedule else "job",
        }


def check_schedule(value: str) -> str:
    """``@monthly``-style alias or a 5-field cron expression.

    Raises:
        argparse.ArgumentTypeError: anything else (lists the aliases).
    """
    if value in SCHEDULE_ALIASES or re.fullmatch(r"\S+( \S+){4}", value.strip()):
        return value.strip()
    raise argparse.ArgumentTypeError(
        f"--schedule {value!r}: use one of {list(SCHEDULE_ALIASES)} or a 5-field cron"
    )


def job_specs(args: argparse.Namespace, namespace: str) -> list[JobSpec]:
    """The jobs ``submit`` creates: one, or ``fan_out`` shard jobs plus a finishing job."""
    repo_id = args.repo_id or f"{namespace}/{DEFAULT_RELEASE_NAME}"
    work_repo = args.work_repo or f"{namespace}/{DEFAULT_WORK_NAME}"
    image = args.image or DEFAULT_IMAGE.format(namespace=namespace)
    base = ["python", "-m", "pipeline", "job", "--input", args.input, "--out", "work"]
    publish = (
        ["--repo-id", repo_id]
        + (["--tag", args.tag] if args.tag else [])
        + (["--private"] if args.private else [])
    )
    workers = ["--workers", str(args.workers)] if args.workers else []
    common = {
        "image": image,
        "env": {"PYTHONUNBUFFERED": "1"},
        "secret_names": [TOKEN_SECRET],
        "schedule": args.schedule,
    }
    if not args.fan_out or args.fan_out <= 1:
        return [
            JobSpec(
                name="survey-reading-lists",
                command=[*base, "--step", "all", *publish, *workers],
                flavor=args.flavor,
                timeout=args.timeout,
                **common,
            )
        ]
    n = args.fan_out
    specs = [
        JobSpec(
            name=f"survey-reading-lists-extract-{i}-of-{n}",
            command=[
                *base,
                "--step",
                "shard",
                "--shard",
                f"{i}/{n}",
                "--work-repo",
                work_repo,
                *workers,
            ],
            flavor=args.flavor,
            timeout=args.timeout,
            attempts=2,
            **common,
        )
        for i in range(n)
    ]
    finish = [
        *base,
        "--step",
        "finish",
        "--shards",
        str(n),
        "--work-repo",
        work_repo,
        "--wait",
        str(args.wait),
        *publish,
    ]
    specs.append(
        JobSpec(
            name="survey-reading-lists-finish",
            command=[*finish, *workers],
            flavor=args.finish_flavor or args.flavor,
            timeout=args.finish_timeout,
            **common,
        )
    )
    return specs


def submit(
    specs: list[JobSpec], namespace: str | None, endpoint: str | None = None
) -> list[dict[str, Any]]:
    """Create the jobs (scheduled when the spec has a schedule); return their ids."""
    token = require_token("submit")
    api = _api(endpoint)
    done = []
    for spec in specs:
        kwargs: dict[str, Any] = {
            "image": spec.image,
            "command": spec.command,
            "env": spec.env,
            "secrets": {TOKEN_SECRET: token},
            "flavor": spec.flavor,
            "timeout": spec.timeout,
            "attempts": spec.attempts,
            "name": spec.name,
            "namespace": namespace,
        }
        if spec.schedule:
            info = api.create_scheduled_job(schedule=spec.schedule, **kwargs)
        else:
            info = api.run_job(**kwargs)
        done.append({"name": spec.name, "id": getattr(info, "id", None), "schedule": spec.schedule})
    return done


def cmd_submit(args: argparse.Namespace) -> int:
    namespace = args.namespace
    if not args.dry_run:
        require_token("submit")
    if namespace is None and not args.dry_run:
        namespace = _api(args.endpoint).whoami()["name"]
    specs = job_specs(args, namespace or NAMESPACE_PLACEHOLDER)
    if args.dry_run:
        print(json.dumps({"dry_run": True, "jobs": [s.printable() for s in specs]}, indent=2))
        return 0
    print(json.dumps({"submitted": submit(specs, namespace, args.endpoint)}, indent=2))
    return 0


# --------------------------------------------------------------------- parsers
def _shard(value: str) -> tuple[int, int]:
    from pipeline.cli import _shard_arg

    return _shard_arg(value)


def positive_int(value: str) -> int:
    from pipeline.cli import positive_int as check

    return check(value)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``push``, ``push-work``, ``pull-work``, ``job`` and ``submit``."""
    endpoint_help = "Hub endpoint (default: $HF_ENDPOINT, else huggingface.co)"

    p = sub.add_parser(
        "push", help="upload the release folder to a Hub dataset repo in one commit, then tag it"
    )
    p.add_argument(
        "--repo-id", required=True, help="OWNER/NAME of the dataset repo (created if missing)"
    )
    p.add_argument(
        "--release",
        type=Path,
        default=Path("work/release"),
        help="release folder (default: work/release)",
    )
    p.add_argument("--tag", default=None, help="tag the commit, e.g. v0.1.0")
    p.add_argument(
        "--private", action="store_true", help="create the repo private (ignored if it exists)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the planned operations, change nothing"
    )
    p.add_argument("--endpoint", default=None, help=endpoint_help)
    p.set_defaults(func=cmd_push)

    p = sub.add_parser(
        "push-work", help="upload a stage's outputs from a work dir to a Hub dataset repo"
    )
    p.add_argument(
        "--repo-id", required=True, help="OWNER/NAME of the work repo (created private if missing)"
    )
    p.add_argument(
        "--stage", default="extract", help="stage whose outputs to upload (default: extract)"
    )
    p.add_argument("--out", type=Path, default=Path("work"), help="work directory (default: work)")
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        help="I/N: also write the shard record shards/N/I.json",
    )
    p.add_argument("--endpoint", default=None, help=endpoint_help)
    p.set_defaults(func=cmd_push_work)

    p = sub.add_parser(
        "pull-work", help="download a stage's outputs from a Hub dataset repo into a work dir"
    )
    p.add_argument("--repo-id", required=True, help="OWNER/NAME of the work repo")
    p.add_argument(
        "--stage", default="extract", help="stage whose outputs to download (default: extract)"
    )
    p.add_argument("--out", type=Path, default=Path("work"), help="work directory (default: work)")
    p.add_argument(
        "--shards", type=int, default=None, help="N: download the files of shard records 0..N-1"
    )
    p.add_argument(
        "--input",
        default=None,
        help="only accept shard records built from this input's current revision",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        help="seconds to wait for missing shard records (default: 0)",
    )
    p.add_argument(
        "--poll",
        type=float,
        default=60.0,
        help="seconds between checks while waiting (default: 60)",
    )
    p.add_argument("--endpoint", default=None, help=endpoint_help)
    p.set_defaults(func=cmd_pull_work)

    p = sub.add_parser(
        "job", help="what a Hugging Face Job runs: all | shard | finish (see `submit`)"
    )
    p.add_argument(
        "--step",
        choices=("all", "shard", "finish"),
        required=True,
        help="which part of the pipeline",
    )
    p.add_argument("--input", default=DEFAULT_INPUT, help=f"corpus (default: {DEFAULT_INPUT})")
    p.add_argument("--out", type=Path, default=Path("work"), help="work directory (default: work)")
    p.add_argument(
        "--workers", type=positive_int, default=None, help="worker processes (default: CPU count)"
    )
    p.add_argument("--repo-id", default=None, help="release dataset repo (steps all, finish)")
    p.add_argument("--tag", default=None, help="tag of the release commit")
    p.add_argument("--private", action="store_true", help="create the release repo private")
    p.add_argument("--shard", type=_shard, default=None, help="I/N (step shard)")
    p.add_argument("--shards", type=int, default=None, help="N (step finish)")
    p.add_argument(
        "--work-repo", default=None, help="dataset repo holding the shards' extract outputs"
    )
    p.add_argument(
        "--wait", type=float, default=6 * 3600, help="step finish: seconds to wait for the shards"
    )
    p.set_defaults(func=_checked_job)

    p = sub.add_parser(
        "submit",
        help="run the whole pipeline as Hugging Face Jobs (optionally scheduled, fanned out)",
    )
    p.add_argument("--input", default=DEFAULT_INPUT, help=f"corpus (default: {DEFAULT_INPUT})")
    p.add_argument(
        "--repo-id", default=None, help=f"release repo (default: NAMESPACE/{DEFAULT_RELEASE_NAME})"
    )
    p.add_argument("--tag", default=None, help="tag of the release commit")
    p.add_argument("--private", action="store_true", help="create the release repo private")
    p.add_argument(
        "--schedule",
        type=check_schedule,
        default=None,
        help="@monthly, @weekly, ... or a cron expression",
    )
    p.add_argument(
        "--fan-out", type=int, default=0, help="N extract shard jobs plus one finishing job"
    )
    p.add_argument(
        "--work-repo",
        default=None,
        help=f"repo for shard outputs (default: NAMESPACE/{DEFAULT_WORK_NAME})",
    )
    p.add_argument(
        "--image",
        default=None,
        help="Docker image with this repo installed (default: " + DEFAULT_IMAGE + ")",
    )
    p.add_argument(
        "--flavor",
        default="cpu-upgrade",
        help="hardware of the (shard) jobs (default: cpu-upgrade)",
    )
    p.add_argument(
        "--finish-flavor", default="cpu-xl", help="hardware of the finishing job (default: cpu-xl)"
    )
    p.add_argument("--timeout", default="1d", help="max duration of each (shard) job (default: 1d)")
    p.add_argument(
        "--finish-timeout", default="2d", help="max duration of the finishing job (default: 2d)"
    )
    p.add_argument(
        "--wait",
        type=int,
        default=12 * 3600,
        help="finishing job: seconds to wait for shards (default: 43200)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="worker processes per job (default: CPU count)",
    )
    p.add_argument(
        "--namespace", default=None, help="user or org running the jobs (default: the token's user)"
    )
    p.add_argument("--dry-run", action="store_true", help="print every job spec, submit nothing")
    p.add_argument("--endpoint", default=None, help=endpoint_help)
    p.set_defaults(func=cmd_submit)


def _checked_job(args: argparse.Namespace) -> int:
    need = {
        "all": ("repo_id",),
        "shard": ("shard", "work_repo"),
        "finish": ("shards", "work_repo", "repo_id"),
    }
    missing = [f"--{n.replace('_', '-')}" for n in need[args.step] if getattr(args, n) is None]
    if missing:
        raise InputError(f"job --step {args.step}: missing {', '.join(missing)}")
    return cmd_job(args)
