"""Run the pipeline as Hugging Face Jobs: ``submit`` (the Job specs) and ``job`` (what a Job runs).

A Job is built from huggingface_hub 2.4's own parts, no Docker image of ours:

* ``run_uv_job`` / ``create_scheduled_uv_job`` on the uv image: the runtime
  dependencies are ``uv run --with NAME==VERSION`` pins taken from ``constraints.txt``
  (a release is byte-identical only under the same library versions).
* Three volumes (``huggingface_hub.Volume``):
  ``/data``: the input dataset repo, read-only, at a pinned revision (one-off runs
  pin the commit ``main`` is at when submitting; a schedule mounts the revision it
  names, so every run sees the dataset as it is then);
  ``/work``: the work directory on a Storage Bucket, read-write, created if missing
  (``create_bucket``), so a scheduled run resumes from what earlier runs finished;
  ``/code``: this package's source and the ``--config`` file, uploaded in one commit
  to a private dataset repo and mounted read-only at that commit (``PYTHONPATH=/code``).
* The Job runs ``python -m pipeline job --step all --input /data --out /work ...``:
  ``run`` then ``push``, the same stages a user runs locally.

With ``--fan-out N``, N shard Jobs run ``job --step shard --shard I/N`` into the same
bucket and a finishing Job runs ``job --step finish``: it waits until every input
file has its extract marker in ``/work`` (the work directory's own markers), then
runs the reduce stages and pushes. A one-off ``submit`` (no schedule) waits for the
shard Jobs with ``wait_for_job`` and starts the finishing Job only when all completed.

Every step first compares the input (identities of its files), the config hash and
the code (version and source hash) with ``/work/_published.json``, written after each
successful push: when all three are unchanged it says so and exits without work.

What the bucket mount promises, and what the runner relies on: ``docs/MOUNTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from pipeline import __version__, api
from pipeline import workdir as W
from pipeline.config import Config
from pipeline.errors import require_token
from pipeline.evaluate.report import render_report
from pipeline.files import write_json
from pipeline.publish import ENDPOINT_HELP, hub_api
from pipeline.sources import InputError

log = logging.getLogger("pipeline")

DISTRIBUTION = "survey-reading-lists"
DEFAULT_INPUT_REPO = "ines-besrour/unarxive_2024"
DEFAULT_RELEASE_NAME = "survey-reading-lists"
DEFAULT_BUCKET_NAME = "survey-reading-lists-work"
DEFAULT_CODE_NAME = "survey-reading-lists-code"
NAMESPACE_PLACEHOLDER = "<namespace>"
INPUT_MOUNT = "/data"
WORK_MOUNT = "/work"
CODE_MOUNT = "/code"
# no .toml suffix: run_uv_job refuses arguments ending in .py/.sh/.yaml/.yml/.toml that are
# not local files (it would upload them); the file is TOML all the same
CONFIG_IN_CODE = "pipeline_config"
# constraints.txt is resolved and tested under 3.11 (the venv `make` builds)
PYTHON = "3.11"
TOKEN_SECRET = "HF_TOKEN"
SCHEDULE_ALIASES = ("@annually", "@yearly", "@monthly", "@weekly", "@daily", "@hourly")
PUBLISHED = W.PUBLISHED  # work dir root: what the last push published, and from what


# --------------------------------------------------------------------- identity of a run
def code_fingerprint() -> str:
    """``<version>+<sha256 of the package's files>``: changes with any source edit."""
    digest = hashlib.sha256()
    for rel, data in _package_files():
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def _package_files() -> list[tuple[str, bytes]]:
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
    from pipeline.sources import resolve_inputs

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
    judged as the runner judges them (:func:`pipeline.runner.input_problem`). On a bucket
    mount another Job's marker can become visible before the files it vouches for
    (uploads are flushed asynchronously, see MOUNTS.md), so a marker counts only once
    every output it records is there with its recorded size.
    """
    from pipeline.runner import input_problem, map_marker_key
    from pipeline.sources import resolve_inputs
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


# --------------------------------------------------------------------- planning
# `make bench`'s figures (bench/results/extract.json, which a Job's code upload does not
# ship: tests/test_docs.py checks these equal it), on the synthetic bench corpus packed as
# the Hub packs unarXive 2024; the bench corpus compresses better than the real one, so real
# decompression per MB of output may be slower. Flavours' vCPUs are the Hub's published
# sizes, not checked here (`HfApi().list_jobs_hardware()`).
GZIP_MB_S = 881.0  # ISA-L over the parts (our reader), one core, MB of JSONL per second
EXTRACT_MB_S_PER_WORKER = 438.5  # extract, one worker, MB of JSONL per second
ARCHIVE_RATIO = 371 / 105  # unarXive 2024: 371 GB of JSONL in 105 GB of parts
MOUNT_MB_S = 200.0  # assumed read rate of the /data mount: not documented, not measured
PUBLISHED_ARCHIVE_GB = 104.8  # the three parts' sizes on the Hub (39.8 + 39.8 + 25.2 GB)
FLAVOR_VCPUS = {"cpu-basic": 2, "cpu-upgrade": 8, "cpu-performance": 8, "cpu-xl": 16}


def input_summary(input_spec: str) -> dict[str, Any]:
    """What ``--input`` names: its archives with their parts, and its JSONL files."""
    from pipeline.sources import display, resolve_inputs

    found = resolve_inputs([input_spec])
    archives = [
        {
            "name": display(f.name),
            "bytes": f.size,
            "parts": [
                {"name": display(p.name), "bytes": p.size, "sha256": p.sha256 or None}
                for p in f.parts
            ],
        }
        for f in found
        if f.is_archive
    ]
    plain = [f for f in found if not f.is_archive]
    return {
        "input": input_spec,
        "archives": archives,
        "jsonl_files": len(plain),
        "jsonl_bytes": sum(f.size for f in plain),
    }


def extract_projection(
    archive_bytes: int, flavor: str, fan_out: int = 1, workers: int | None = None
) -> dict[str, Any]:
    """Projected wall time of extract over ``archive_bytes`` of tar.gz parts: every Job
    reads and decompresses the whole stream (one core), its other cores decode its
    units; the slowest of reading, decompressing and decoding sets the pace."""
    vcpus = FLAVOR_VCPUS.get(flavor, 2)
    decoders = workers or max(1, vcpus - 1)
    jsonl = archive_bytes * ARCHIVE_RATIO
    mount_s = archive_bytes / (MOUNT_MB_S * 1e6)
    read_s = jsonl / (GZIP_MB_S * 1e6)
    decode_s = jsonl / max(fan_out, 1) / (EXTRACT_MB_S_PER_WORKER * 1e6 * decoders)
    return {
        "flavor": flavor,
        "vcpus": vcpus,
        "decoding_workers": decoders,
        "jsonl_gb": round(jsonl / 1e9, 1),
        "read_hours": round(mount_s / 3600, 2),
        "decompress_hours": round(read_s / 3600, 2),
        "decode_hours_per_job": round(decode_s / 3600, 2),
        "projected_hours": round(max(mount_s, read_s, decode_s) / 3600, 2),
        "rates": {
            "mount_mb_s_assumed": MOUNT_MB_S,
            "gzip_mb_s": GZIP_MB_S,
            "extract_mb_s_per_worker": EXTRACT_MB_S_PER_WORKER,
            "source": "make bench on the 2-core development machine, not measured on Jobs",
        },
    }


# --------------------------------------------------------------------- job (what a Job runs)
def run_step(
    step: str,
    input_spec: str,
    out: Path,
    config: api.ConfigLike = None,
    repo_id: str | None = None,
    tag: str | None = None,
    private: bool = False,
    shard: tuple[int, int] | None = None,
    workers: int | None = None,
    wait: float = 0.0,
    poll: float = 60.0,
    endpoint: str | None = None,
    allow_synthetic: bool = False,
) -> dict[str, Any]:
    """One Job's work: ``all`` (run, push), ``shard`` (extract I/N) or ``finish``
    (wait for every extract marker, run the reduce stages, push).

    The card names ``repo_id``: a config whose ``[release] repo_id`` is empty gets it (so
    the release is built for the repo it goes to); one that names another repo is refused.

    Returns:
        ``{"step", "skipped": bool, ...}``: ``skipped`` when input, config and code are
        unchanged since the last published release (nothing was run or pushed).

    Raises:
        TimeoutError: ``finish`` waited ``wait`` seconds and files are still missing.
    """
    cfg = release_config_for(api.config_of(config), repo_id, f"job --step {step}")
    identity = run_identity(input_spec, cfg)
    last = unchanged_since_release(out, identity)
    if last is not None:
        log.info(
            "job: input (%s files), config and code unchanged since the release published "
            "in commit %s%s; nothing to do",
            identity["input_files"],
            last.get("commit"),
            f" (tag {last['tag']})" if last.get("tag") else "",
        )
        return {"step": step, "skipped": True, "published": last}
    if step == "shard":
        i, n = shard or (0, 1)
        api.extract(input_spec, out, config=cfg, workers=workers, shard_of=(i, n))
        return {"step": step, "skipped": False, "shard": [i, n]}
    if step == "finish":
        deadline = time.monotonic() + wait
        while missing := extract_missing(out, input_spec, cfg):
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"job --step finish: {len(missing)} input file(s) have no extract marker "
                    f"in {out} after {wait:.0f} s (e.g. {missing[0]}); are the shard Jobs running?"
                )
            log.info(
                "job: waiting for the extract of %d file(s), e.g. %s", len(missing), missing[0]
            )
            time.sleep(poll)
    result = api.run(input_spec if step != "finish" else None, out, config=cfg, workers=workers)
    if result.evaluation is not None:
        print(render_report(result.evaluation.results))
    if repo_id is None:
        raise InputError(f"job --step {step}: missing --repo-id")
    done = api.push(
        result.release,
        repo_id,
        tag=tag,
        private=private,
        endpoint=endpoint,
        allow_synthetic=allow_synthetic,
    ).done
    write_json(W.published_path(out), {**identity, **done})
    return {"step": step, "skipped": False, "published": done}


def release_config_for(cfg: Config, repo_id: str | None, command: str) -> Config:
    """``cfg`` with ``[release] repo_id`` set to ``repo_id`` when it names none.

    Raises:
        InputError: the config names another repo (the card would point elsewhere).
    """
    if repo_id is None or cfg.release.repo_id == repo_id:
        return cfg
    if cfg.release.repo_id:
        raise InputError(
            f"{command}: the config's [release] repo_id is {cfg.release.repo_id!r}, the card "
            f"would name it, but --repo-id is {repo_id!r}; make them the same"
        )
    return dataclasses.replace(cfg, release=dataclasses.replace(cfg.release, repo_id=repo_id))


def cmd_job(args: argparse.Namespace) -> int:
    if args.dry_run:
        cfg = release_config_for(api.config_of(args.config), args.repo_id, "job")
        found = input_summary(args.input)
        identity = run_identity(args.input, cfg)
        plan = {
            "dry_run": True,
            "step": args.step,
            "found": found,
            "identity": identity,
            "unchanged_since_release": unchanged_since_release(args.out, identity) is not None,
        }
        print(json.dumps(plan, indent=2))
        return 0
    if args.step != "shard":
        require_token(f"job --step {args.step}")  # these steps push at their end
    if args.step == "shard" and args.shard is None:
        raise InputError("job --step shard: missing --shard I/N")
    done = run_step(
        args.step,
        args.input,
        args.out,
        args.config,
        args.repo_id,
        args.tag,
        args.private,
        args.shard,
        args.workers,
        args.wait,
        args.poll,
        args.endpoint,
        args.allow_synthetic,
    )
    print(json.dumps(done, indent=2))
    return 0


# --------------------------------------------------------------------- specs
@dataclass
class JobSpec:
    """One Hugging Face Job: the arguments of ``run_uv_job`` / ``create_scheduled_uv_job``."""

    name: str
    script_args: list[str]
    flavor: str
    timeout: str
    volumes: list[dict[str, Any]]
    dependencies: list[str]
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    secret_names: list[str] = field(default_factory=list)
    schedule: str | None = None
    attempts: int = 1

    @property
    def command(self) -> list[str]:
        """The container command, as ``run_uv_job`` builds it (``uv run --with ... python ...``)."""
        uv = [a for d in self.dependencies for a in ("--with", d)]
        return ["uv", "run", *uv, "--python", PYTHON, "python", *self.script_args]

    def printable(self) -> dict[str, Any]:
        """The spec as printed by ``--dry-run``: secrets by name only."""
        return {
            "name": self.name,
            "kind": "scheduled uv job" if self.schedule else "uv job",
            "schedule": self.schedule,
            "image": self.image or "huggingface_hub's default uv image",
            "command": self.command,
            "python": PYTHON,
            "dependencies": self.dependencies,
            "volumes": self.volumes,
            "env": self.env,
            "secrets": self.secret_names,
            "flavor": self.flavor,
            "timeout": self.timeout,
            "attempts": self.attempts,
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


def pinned_dependencies(constraints: Path) -> list[str]:
    """``NAME==VERSION`` of the package's runtime dependencies and theirs, from ``constraints``.

    The closure is walked through the installed distributions' metadata (extras left
    out); a package missing from ``constraints`` is pinned at its installed version.

    Raises:
        InputError: ``constraints`` does not exist.
    """
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    if not constraints.is_file():
        raise InputError(f"{constraints}: no such constraints file (run submit from a checkout)")
    pins = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name)] = f"{name.strip()}=={version.strip()}"
    seen: set[str] = set()
    todo = [DISTRIBUTION]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for req in metadata.requires(name) or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    seen.discard(canonicalize_name(DISTRIBUTION))
    for name in sorted(seen - set(pins)):
        # constraints.txt predates some transitive packages (e.g. narwhals): pin the
        # version this environment runs, so the Job still resolves exactly
        log.warning("submit: %s is not in %s; pinning the installed version", name, constraints)
        pins[name] = f"{name}=={metadata.version(name)}"
    return sorted((pins[n] for n in seen), key=str.lower)


def job_specs(
    args: argparse.Namespace, namespace: str, code_revision: str, input_revision: str
) -> list[JobSpec]:
    """The Jobs ``submit`` creates: one, or ``fan_out`` shard Jobs plus a finishing Job."""
    repo_id = args.repo_id or f"{namespace}/{DEFAULT_RELEASE_NAME}"
    bucket = args.bucket or f"{namespace}/{DEFAULT_BUCKET_NAME}"
    code_repo = args.code_repo or f"{namespace}/{DEFAULT_CODE_NAME}"
    volumes = [
        {
            "type": "dataset",
            "source": args.input_repo,
            "mountPath": INPUT_MOUNT,
            "revision": input_revision,
            "readOnly": True,
        },
        {"type": "bucket", "source": bucket, "mountPath": WORK_MOUNT, "readOnly": False},
        {
            "type": "dataset",
            "source": code_repo,
            "mountPath": CODE_MOUNT,
            "revision": code_revision,
            "readOnly": True,
        },
    ]
    base = ["-m", "pipeline", "job", "--input", INPUT_MOUNT, "--out", WORK_MOUNT]
    if args.config:
        base += ["--config", f"{CODE_MOUNT}/{CONFIG_IN_CODE}"]
    publish = (
        ["--repo-id", repo_id]
        + (["--tag", args.tag] if args.tag else [])
        + (["--private"] if args.private else [])
    )
    workers = ["--workers", str(args.workers)] if args.workers else []
    common = {
        "volumes": volumes,
        "dependencies": pinned_dependencies(args.constraints),
        "image": args.image,
        "env": {"PYTHONPATH": CODE_MOUNT, "PYTHONUNBUFFERED": "1"},
        "secret_names": [TOKEN_SECRET],
        "schedule": args.schedule,
    }
    if not args.fan_out or args.fan_out <= 1:
        return [
            JobSpec(
                name="survey-reading-lists",
                script_args=[*base, "--step", "all", *publish, *workers],
                flavor=args.flavor,
                timeout=args.timeout,
                **common,
            )
        ]
    n = args.fan_out
    specs = [
        JobSpec(
            name=f"survey-reading-lists-extract-{i}-of-{n}",
            script_args=[*base, "--step", "shard", "--shard", f"{i}/{n}", *workers],
            flavor=args.flavor,
            timeout=args.timeout,
            attempts=2,  # a retried shard resumes from its own markers in the bucket
            **common,
        )
        for i in range(n)
    ]
    finish = [*base, "--step", "finish", "--wait", str(args.wait), *publish, *workers]
    specs.append(
        JobSpec(
            name="survey-reading-lists-finish",
            script_args=finish,
            flavor=args.finish_flavor or args.flavor,
            timeout=args.finish_timeout,
            **common,
        )
    )
    return specs


# --------------------------------------------------------------------- submit
def upload_code(hf: Any, code_repo: str, config: Path | None) -> str:
    """Upload the package's files (and ``config`` as ``pipeline_config``) in one commit; its oid."""
    from huggingface_hub import CommitOperationAdd

    ops = [
        CommitOperationAdd(path_in_repo=rel, path_or_fileobj=data) for rel, data in _package_files()
    ]
    if config is not None:
        ops.append(
            CommitOperationAdd(path_in_repo=CONFIG_IN_CODE, path_or_fileobj=config.read_bytes())
        )
    hf.create_repo(code_repo, repo_type="dataset", private=True, exist_ok=True)
    info = hf.create_commit(
        code_repo, ops, commit_message=f"code {code_fingerprint()}", repo_type="dataset"
    )
    return info.oid


def submit(args: argparse.Namespace, namespace: str) -> dict[str, Any]:
    """Create the bucket and the code commit, then the Jobs; wait for shards when not scheduled."""
    from huggingface_hub import Volume

    from pipeline.config import load_config

    token = require_token("submit")
    if args.config is not None:
        load_config(args.config)  # a bad value fails here, not in the Job an hour later
    hf = hub_api(args.endpoint)
    bucket = args.bucket or f"{namespace}/{DEFAULT_BUCKET_NAME}"
    hf.create_bucket(bucket, private=True, exist_ok=True)
    code_repo = args.code_repo or f"{namespace}/{DEFAULT_CODE_NAME}"
    code_revision = upload_code(hf, code_repo, args.config)
    input_revision = args.input_revision
    if not args.schedule:  # a one-off run reads exactly the commit the input is at now
        input_revision = hf.dataset_info(args.input_repo, revision=input_revision).sha
    specs = job_specs(args, namespace, code_revision, input_revision)
    for spec in specs:
        for arg in spec.script_args:
            # run_uv_job uploads local files named in the arguments and mounts them at /data
            if Path(arg).is_file():
                raise InputError(f"submit: job argument {arg!r} is a local file; refusing")

    def create(spec: JobSpec) -> Any:
        kwargs: dict[str, Any] = {
            "script_args": spec.script_args,
            "dependencies": spec.dependencies,
            "python": PYTHON,
            "image": spec.image,
            "env": spec.env,
            "secrets": {TOKEN_SECRET: token},
            "flavor": spec.flavor,
            "timeout": spec.timeout,
            "attempts": spec.attempts,
            "name": spec.name,
            "volumes": [Volume(**v) for v in spec.volumes],
            "namespace": namespace,
        }
        if spec.schedule:
            return hf.create_scheduled_uv_job("python", schedule=spec.schedule, **kwargs)
        return hf.run_uv_job("python", **kwargs)

    done = []
    shards, finish = (specs[:-1], specs[-1]) if len(specs) > 1 else ([], specs[0])
    infos = [create(s) for s in shards]
    done += [
        {"name": s.name, "id": i.id, "schedule": s.schedule}
        for s, i in zip(shards, infos, strict=True)
    ]
    if shards and not args.schedule:
        # a one-off fan-out: start the finishing Job only once every shard completed
        final = hf.wait_for_job([i.id for i in infos], namespace=namespace, poll_interval=args.poll)
        failed = [
            (s.name, f.status.stage)
            for s, f in zip(shards, final, strict=True)
            if f.status.stage != "COMPLETED"
        ]
        if failed:
            raise RuntimeError(
                f"submit: shard Job(s) did not complete: {failed}; resubmit to resume"
            )
    info = create(finish)
    done.append({"name": finish.name, "id": info.id, "schedule": finish.schedule})
    return {
        "bucket": bucket,
        "code": {"repo": code_repo, "revision": code_revision},
        "input": {"repo": args.input_repo, "revision": input_revision},
        "jobs": done,
    }


def check_release_config(config: Path | None, repo: str) -> None:
    """Refuse, before any Job runs, a config whose release ``push`` would refuse at the end:
    one that names another repo than ``repo``, or leaves the card's authors or year unset.

    Raises:
        InputError: names the fields to set.
    """
    from pipeline.card import unset_fields

    cfg = release_config_for(api.config_of(config), repo, "submit")
    missing = [f for f in unset_fields(cfg.to_dict()["release"]) if f != "repo_id"]
    if missing:
        raise InputError(
            f"submit: the config does not set [release] {', '.join(missing)}, which the card's "
            "citation names; the Jobs' push would refuse the release: set them in --config"
        )


def cmd_submit(args: argparse.Namespace) -> int:
    if args.schedule and args.tag:
        # every run that finds something changed pushes: the second would reuse the tag
        raise InputError("submit: --tag with --schedule would tag every run's release the same")
    namespace = args.namespace
    if args.dry_run:
        check_release_config(
            args.config,
            args.repo_id or f"{namespace or NAMESPACE_PLACEHOLDER}/{DEFAULT_RELEASE_NAME}",
        )
        specs = job_specs(
            args,
            namespace or NAMESPACE_PLACEHOLDER,
            "<commit of the code upload>",
            args.input_revision
            if args.schedule
            else f"<commit {args.input_revision} is at when submitting>",
        )
        archive_gb = PUBLISHED_ARCHIVE_GB
        try:
            found: dict[str, Any] = input_summary(
                f"hf://datasets/{args.input_repo}@{args.input_revision}"
            )
            archive_gb = sum(a["bytes"] for a in found["archives"]) / 1e9 or archive_gb
        except Exception as e:  # noqa: BLE001 - a dry run plans without the Hub too
            found = {"input": args.input_repo, "not_listed": f"{type(e).__name__}: {e}"[:300]}
        plan = {
            "dry_run": True,
            "input_found": found,
            "extract_projection": extract_projection(
                int(archive_gb * 1e9), args.flavor, max(args.fan_out, 1), args.workers or None
            ),
            "bucket": f"{args.bucket or f'{namespace or NAMESPACE_PLACEHOLDER}/{DEFAULT_BUCKET_NAME}'} (created private if missing)",
            "code_upload": sorted(rel for rel, _ in _package_files())
            + ([f"{CONFIG_IN_CODE} (from {args.config})"] if args.config else []),
            "code_version": code_fingerprint(),
            "wait_for_shards": "wait_for_job" if args.fan_out > 1 and not args.schedule else None,
            "jobs": [s.printable() for s in specs],
        }
        print(json.dumps(plan, indent=2))
        return 0
    require_token("submit")
    if namespace is None:
        namespace = hub_api(args.endpoint).whoami()["name"]
    check_release_config(args.config, args.repo_id or f"{namespace}/{DEFAULT_RELEASE_NAME}")
    print(json.dumps({"submitted": submit(args, namespace)}, indent=2))
    return 0


# --------------------------------------------------------------------- parsers
def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``job`` and ``submit``."""
    from pipeline.arg_types import (
        add_out_arg,
        config_file,
        job_duration,
        namespace,
        non_negative_seconds,
        positive_seconds,
        repo_id,
    )
    from pipeline.cli import _shard_arg, positive_int

    p = sub.add_parser(
        "job",
        help="what a Hugging Face Job runs: all | shard | finish (see `submit`)",
        description="The command `submit` gives a Job. Every step first compares the input, "
        f"config and code with {W.PUBLISHED} in --out and exits when nothing changed since the "
        "last push. --step all: every stage (run), then push the release to --repo-id. --step "
        "shard: extract the units I of N (--shard I/N) into --out, nothing else. --step "
        "finish: wait until every input file has its extract marker in --out (the shard "
        "Jobs'), run the remaining stages, then push. The card names --repo-id: the config's "
        "[release] repo_id must be empty or the same.",
    )
    p.add_argument(
        "--step",
        choices=("all", "shard", "finish"),
        required=True,
        help="all: run every stage, then push; shard: extract --shard I/N only; finish: wait "
        "for the shards' extract markers, run the other stages, then push",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the input found (archives and their parts), its identity and whether "
        "it is unchanged since the last release; run nothing",
    )
    p.add_argument(
        "--input",
        default=INPUT_MOUNT,
        metavar="PATH",
        help=f"the corpus: a file, folder or hf://datasets/... (default: {INPUT_MOUNT}, the "
        "input dataset's mount)",
    )
    add_out_arg(
        p,
        "the work directory (default: the Storage Bucket's mount)",
        default=Path(WORK_MOUNT),
    )
    p.add_argument("--config", type=Path, default=None, metavar="FILE", help="TOML config file")
    p.add_argument(
        "--workers", type=positive_int, default=None, help="worker processes (default: CPU count)"
    )
    p.add_argument(
        "--repo-id",
        type=repo_id,
        default=None,
        metavar="OWNER/NAME",
        help="the dataset repo the release is pushed to (steps all, finish)",
    )
    p.add_argument("--tag", default=None, help="tag of the release commit")
    p.add_argument("--private", action="store_true", help="create the release repo private")
    p.add_argument(
        "--allow-synthetic",
        action="store_true",
        help="push a release built from synthetic papers all the same (see push)",
    )
    p.add_argument(
        "--shard", type=_shard_arg, default=None, metavar="I/N", help="step shard: which units"
    )
    p.add_argument(
        "--wait",
        type=non_negative_seconds,
        default=12 * 3600,
        help="step finish: seconds to wait for the shards",
    )
    p.add_argument(
        "--poll", type=positive_seconds, default=60.0, help="step finish: seconds between checks"
    )
    p.add_argument("--endpoint", default=None, metavar="URL", help=ENDPOINT_HELP)
    p.set_defaults(func=cmd_job)

    p = sub.add_parser(
        "submit",
        help="run the whole pipeline as Hugging Face Jobs (scheduled, fanned out)",
        description="Uploads this package and --config to a private code repo, then creates "
        "the Job(s) that run `job` on huggingface_hub's uv image with the input dataset at "
        f"{INPUT_MOUNT}, the work directory's Storage Bucket at {WORK_MOUNT} and the code at "
        f"{CODE_MOUNT}: one Job, or --fan-out N shard Jobs and a finishing Job, once or on "
        "--schedule. The config must name the card's authors and year ([release] authors, "
        "year): the Jobs push the release. --dry-run prints every spec and submits nothing.",
    )
    p.add_argument(
        "--input-repo",
        type=repo_id,
        default=DEFAULT_INPUT_REPO,
        help=f"input dataset repo, mounted at {INPUT_MOUNT} (default: {DEFAULT_INPUT_REPO})",
    )
    p.add_argument(
        "--input-revision",
        default="main",
        help="branch, tag or commit of the input (default: main; a one-off run pins its commit)",
    )
    p.add_argument(
        "--repo-id",
        type=repo_id,
        default=None,
        help=f"release repo (default: NAMESPACE/{DEFAULT_RELEASE_NAME})",
    )
    p.add_argument(
        "--bucket",
        type=repo_id,
        default=None,
        help=f"Storage Bucket of the work dir, mounted at {WORK_MOUNT} (default: NAMESPACE/{DEFAULT_BUCKET_NAME})",
    )
    p.add_argument(
        "--code-repo",
        type=repo_id,
        default=None,
        help=f"private dataset repo the code is uploaded to, mounted at {CODE_MOUNT} (default: NAMESPACE/{DEFAULT_CODE_NAME})",
    )
    p.add_argument(
        "--config", type=config_file, default=None, help="TOML config file, shipped with the code"
    )
    p.add_argument(
        "--constraints",
        type=Path,
        default=Path("constraints.txt"),
        help="pinned versions (default: constraints.txt)",
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
        "--fan-out",
        type=positive_int,
        default=1,
        help="N extract shard Jobs plus one finishing Job (default 1: one Job runs everything)",
    )
    p.add_argument(
        "--image",
        default=None,
        help="another Docker image with uv (default: huggingface_hub's uv image)",
    )
    p.add_argument(
        "--flavor",
        default="cpu-upgrade",
        help="hardware of the (shard) Jobs (default: cpu-upgrade)",
    )
    p.add_argument(
        "--finish-flavor", default="cpu-xl", help="hardware of the finishing Job (default: cpu-xl)"
    )
    p.add_argument(
        "--timeout",
        type=job_duration,
        default="1d",
        help="max duration of each (shard) Job (default: 1d)",
    )
    p.add_argument(
        "--finish-timeout",
        type=job_duration,
        default="2d",
        help="max duration of the finishing Job (default: 2d)",
    )
    p.add_argument(
        "--wait",
        type=int,
        default=12 * 3600,
        help="finishing Job: seconds to wait for the shards' markers (default: 43200)",
    )
    p.add_argument(
        "--poll",
        type=positive_seconds,
        default=60.0,
        help="seconds between status checks of shard Jobs (default: 60)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="worker processes per Job (default: CPU count)",
    )
    p.add_argument(
        "--namespace",
        type=namespace,
        default=None,
        help="user or org running the Jobs (default: the token's user)",
    )
    p.add_argument("--dry-run", action="store_true", help="print every Job spec, submit nothing")
    p.add_argument("--endpoint", default=None, metavar="URL", help=ENDPOINT_HELP)
    p.set_defaults(func=cmd_submit)
