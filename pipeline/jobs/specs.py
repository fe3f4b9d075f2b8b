"""The Jobs ``submit`` creates: typed options in, ``JobSpec``s out (nothing is submitted here)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.corpus.openalex import KEY_ENV as OPENALEX_KEY_ENV
from pipeline.corpus.sources import InputError
from pipeline.hub.card import SOURCE_DATASET

log = logging.getLogger("pipeline")

DISTRIBUTION = "survey-reading-lists"
DEFAULT_INPUT_REPO = SOURCE_DATASET  # the corpus the card names
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


@dataclass(frozen=True)
class SubmitOptions:
    """What ``submit`` is asked for: its flags, typed (their defaults are the flags')."""

    input_repo: str = DEFAULT_INPUT_REPO
    input_revision: str = "main"  # a one-off run pins the commit it is at when submitting
    repo_id: str | None = (
        None  # default: the config's [release] repo_id, else NAMESPACE/DEFAULT_RELEASE_NAME
    )
    bucket: str | None = None  # default: NAMESPACE/DEFAULT_BUCKET_NAME
    code_repo: str | None = None  # default: NAMESPACE/DEFAULT_CODE_NAME
    config: Path | None = None
    constraints: Path = Path("constraints.txt")
    tag: str | None = None
    private: bool = False
    schedule: str | None = None
    fan_out: int = 1
    image: str | None = None
    flavor: str = "cpu-upgrade"
    finish_flavor: str = "cpu-xl"
    timeout: str = "1d"
    finish_timeout: str = "2d"
    wait: int = 12 * 3600
    poll: float = 60.0
    workers: int | None = None
    namespace: str | None = None
    endpoint: str | None = None
    lookups_from: Path | None = None  # a work directory whose works table projects the lookups

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SubmitOptions:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})

    def release_repo(self, namespace: str) -> str:
        """``--repo-id``, else the config's ``[release] repo_id`` (which the README has the
        user set before publishing), else ``NAMESPACE/survey-reading-lists``."""
        if self.repo_id:
            return self.repo_id
        from pipeline.core.config import load_config

        configured = load_config(self.config).release.repo_id if self.config else ""
        return configured or f"{namespace}/{DEFAULT_RELEASE_NAME}"

    def bucket_repo(self, namespace: str) -> str:
        return self.bucket or f"{namespace}/{DEFAULT_BUCKET_NAME}"

    def code_repo_of(self, namespace: str) -> str:
        return self.code_repo or f"{namespace}/{DEFAULT_CODE_NAME}"


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


def optional_secrets() -> list[str]:
    """Secrets the Jobs get when the submitter's environment has them: the OpenAlex key, so
    the Jobs' openalex stage looks works up (without it they build the release from the
    bucket's cache alone, and the card counts what was not looked up)."""
    return [name for name in (OPENALEX_KEY_ENV,) if os.environ.get(name)]


def job_specs(
    opts: SubmitOptions, namespace: str, code_revision: str, input_revision: str
) -> list[JobSpec]:
    """The Jobs ``submit`` creates: one, or ``fan_out`` shard Jobs plus a finishing Job."""
    repo_id = opts.release_repo(namespace)
    bucket = opts.bucket_repo(namespace)
    code_repo = opts.code_repo_of(namespace)
    volumes = [
        {
            "type": "dataset",
            "source": opts.input_repo,
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
    if opts.config:
        base += ["--config", f"{CODE_MOUNT}/{CONFIG_IN_CODE}"]
    publish = (
        ["--repo-id", repo_id]
        + (["--tag", opts.tag] if opts.tag else [])
        + (["--private"] if opts.private else [])
    )
    workers = ["--workers", str(opts.workers)] if opts.workers else []
    common = {
        "volumes": volumes,
        "dependencies": pinned_dependencies(opts.constraints),
        "image": opts.image,
        "env": {"PYTHONPATH": CODE_MOUNT, "PYTHONUNBUFFERED": "1"},
        "secret_names": [TOKEN_SECRET, *optional_secrets()],
        "schedule": opts.schedule,
    }
    if not opts.fan_out or opts.fan_out <= 1:
        return [
            JobSpec(
                name="survey-reading-lists",
                script_args=[*base, "--step", "all", *publish, *workers],
                flavor=opts.flavor,
                timeout=opts.timeout,
                **common,
            )
        ]
    n = opts.fan_out
    specs = [
        JobSpec(
            name=f"survey-reading-lists-extract-{i}-of-{n}",
            script_args=[*base, "--step", "shard", "--shard", f"{i}/{n}", *workers],
            flavor=opts.flavor,
            timeout=opts.timeout,
            attempts=2,  # a retried shard resumes from its own markers in the bucket
            **common,
        )
        for i in range(n)
    ]
    finish = [*base, "--step", "finish", "--wait", str(opts.wait), *publish, *workers]
    specs.append(
        JobSpec(
            name="survey-reading-lists-finish",
            script_args=finish,
            flavor=opts.finish_flavor or opts.flavor,
            timeout=opts.finish_timeout,
            **common,
        )
    )
    return specs
