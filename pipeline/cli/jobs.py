"""The ``job`` and ``submit`` commands: flags in, the typed calls of this package out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pipeline import api
from pipeline.cli.args import (
    add_out_arg,
    config_file,
    job_duration,
    namespace,
    non_negative_seconds,
    positive_int,
    positive_seconds,
    repo_id,
    shard_arg,
)
from pipeline.core.errors import require_token
from pipeline.corpus.sources import InputError
from pipeline.engine import workdir as W
from pipeline.hub.publish import ENDPOINT_HELP, hub_api
from pipeline.jobs.identity import (
    code_fingerprint,
    package_files,
    run_identity,
    unchanged_since_release,
)
from pipeline.jobs.plan import (
    PUBLISHED_ARCHIVE_GB,
    extract_projection,
    input_summary,
    openalex_projection,
)
from pipeline.jobs.specs import (
    CODE_MOUNT,
    CONFIG_IN_CODE,
    DEFAULT_BUCKET_NAME,
    DEFAULT_CODE_NAME,
    DEFAULT_INPUT_REPO,
    DEFAULT_RELEASE_NAME,
    INPUT_MOUNT,
    NAMESPACE_PLACEHOLDER,
    WORK_MOUNT,
    SubmitOptions,
    check_schedule,
    job_specs,
)
from pipeline.jobs.step import release_config_for, run_step
from pipeline.jobs.submit import check_release_config, submit
from pipeline.rules.redact import redact


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
            "openalex_projection": openalex_projection(args.out, cfg),
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
        config=args.config,
        repo_id=args.repo_id,
        tag=args.tag,
        private=args.private,
        shard=args.shard,
        workers=args.workers,
        wait=args.wait,
        poll=args.poll,
        endpoint=args.endpoint,
        allow_synthetic=args.allow_synthetic,
    )
    print(json.dumps(done, indent=2))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    opts = SubmitOptions.from_args(args)
    if opts.schedule and opts.tag:
        # every run that finds something changed pushes: the second would reuse the tag
        raise InputError("submit: --tag with --schedule would tag every run's release the same")
    if args.dry_run:
        print(json.dumps(dry_run_plan(opts), indent=2))
        return 0
    require_token("submit")
    namespace = opts.namespace or hub_api(opts.endpoint).whoami()["name"]
    check_release_config(opts.config, opts.release_repo(namespace))
    lookups = openalex_projection(opts.lookups_from, api.config_of(opts.config))
    print(json.dumps({"submitted": submit(opts, namespace), "openalex_projection": lookups},
                     indent=2))  # fmt: skip
    return 0


def dry_run_plan(opts: SubmitOptions) -> dict[str, Any]:
    """What ``submit --dry-run`` prints: every Job spec, the input found, the projection."""
    namespace = opts.namespace or NAMESPACE_PLACEHOLDER
    check_release_config(opts.config, opts.release_repo(namespace))
    specs = job_specs(
        opts,
        namespace,
        "<commit of the code upload>",
        opts.input_revision
        if opts.schedule
        else f"<commit {opts.input_revision} is at when submitting>",
    )
    archive_gb = PUBLISHED_ARCHIVE_GB
    try:
        found: dict[str, Any] = input_summary(
            f"hf://datasets/{opts.input_repo}@{opts.input_revision}"
        )
        archive_gb = sum(a["bytes"] for a in found["archives"]) / 1e9 or archive_gb
    except Exception as e:  # noqa: BLE001 - a dry run plans without the Hub too
        found = {"input": opts.input_repo, "not_listed": redact(f"{type(e).__name__}: {e}")[:300]}
    return {
        "dry_run": True,
        "input_found": found,
        "extract_projection": extract_projection(
            int(archive_gb * 1e9), opts.flavor, max(opts.fan_out, 1), opts.workers or None
        ),
        "bucket": f"{opts.bucket_repo(namespace)} (created private if missing)",
        "code_upload": sorted(rel for rel, _ in package_files())
        + ([f"{CONFIG_IN_CODE} (from {opts.config})"] if opts.config else []),
        "code_version": code_fingerprint(),
        "openalex_projection": openalex_projection(opts.lookups_from, api.config_of(opts.config)),
        "wait_for_shards": "wait_for_job" if opts.fan_out > 1 and not opts.schedule else None,
        "jobs": [s.printable() for s in specs],
    }


DEFAULTS = SubmitOptions()


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``job`` and ``submit``."""
    _add_job(sub)
    p = _add_submit(sub)
    _add_submit_repos(p)
    _add_submit_schedule(p)
    _add_submit_hardware(p)
    _add_submit_run(p)


def _add_job(sub: argparse._SubParsersAction) -> None:
    """``job``: what a Job runs."""
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
        "the work directory",
        default=Path(WORK_MOUNT),
        default_text=f"{WORK_MOUNT}, the Storage Bucket's mount",
    )
    p.add_argument("--config", type=Path, default=None, metavar="FILE", help="TOML config file")
    p.add_argument(
        "--workers",
        metavar="N",
        type=positive_int,
        default=None,
        help="worker processes (default: CPU count)",
    )
    p.add_argument(
        "--repo-id",
        type=repo_id,
        default=None,
        metavar="OWNER/NAME",
        help="the dataset repo the release is pushed to (steps all, finish)",
    )
    p.add_argument("--tag", metavar="TAG", default=None, help="tag of the release commit")
    p.add_argument("--private", action="store_true", help="create the release repo private")
    p.add_argument(
        "--allow-synthetic",
        action="store_true",
        help="push a release built from synthetic papers all the same (see push)",
    )
    p.add_argument(
        "--shard", type=shard_arg, default=None, metavar="I/N", help="step shard: which units"
    )
    p.add_argument(
        "--wait",
        metavar="SECONDS",
        type=non_negative_seconds,
        default=12 * 3600,
        help="step finish: seconds to wait for the shards",
    )
    p.add_argument(
        "--poll",
        metavar="SECONDS",
        type=positive_seconds,
        default=60.0,
        help="step finish: seconds between checks",
    )
    p.add_argument("--endpoint", default=None, metavar="URL", help=ENDPOINT_HELP)
    p.set_defaults(func=cmd_job)


def _add_submit(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``submit``: the parser; its options are added by the ``_add_submit_*`` below, in the
    order ``--help`` lists them."""
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
    p.set_defaults(func=cmd_submit)
    return p


def _add_submit_repos(p: argparse.ArgumentParser) -> None:
    """Where the input, release, work directory and code live."""
    p.add_argument(
        "--input-repo",
        metavar="OWNER/NAME",
        type=repo_id,
        default=DEFAULTS.input_repo,
        help=f"input dataset repo, mounted at {INPUT_MOUNT} (default: {DEFAULT_INPUT_REPO})",
    )
    p.add_argument(
        "--input-revision",
        metavar="REV",
        default=DEFAULTS.input_revision,
        help="branch, tag or commit of the input (default: main; a one-off run pins its commit)",
    )
    p.add_argument(
        "--repo-id",
        metavar="OWNER/NAME",
        type=repo_id,
        default=None,
        help=f"release repo (default: the config's [release] repo_id, else NAMESPACE/{DEFAULT_RELEASE_NAME})",
    )
    p.add_argument(
        "--bucket",
        metavar="OWNER/NAME",
        type=repo_id,
        default=None,
        help=f"Storage Bucket of the work dir, mounted at {WORK_MOUNT} (default: NAMESPACE/{DEFAULT_BUCKET_NAME})",
    )
    p.add_argument(
        "--code-repo",
        metavar="OWNER/NAME",
        type=repo_id,
        default=None,
        help=f"private dataset repo the code is uploaded to, mounted at {CODE_MOUNT} (default: NAMESPACE/{DEFAULT_CODE_NAME})",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        type=config_file,
        default=None,
        help="TOML config file, shipped with the code",
    )
    p.add_argument(
        "--constraints",
        metavar="FILE",
        type=Path,
        default=DEFAULTS.constraints,
        help="pinned versions (default: constraints.txt)",
    )
    p.add_argument("--tag", metavar="TAG", default=None, help="tag of the release commit")
    p.add_argument("--private", action="store_true", help="create the release repo private")


def _add_submit_schedule(p: argparse.ArgumentParser) -> None:
    """When the Jobs run and how many."""
    p.add_argument(
        "--schedule",
        metavar="SCHEDULE",
        type=check_schedule,
        default=None,
        help="@monthly, @weekly, ... or a cron expression",
    )
    p.add_argument(
        "--fan-out",
        metavar="N",
        type=positive_int,
        default=DEFAULTS.fan_out,
        help="N extract shard Jobs plus one finishing Job (default 1: one Job runs everything)",
    )


def _add_submit_hardware(p: argparse.ArgumentParser) -> None:
    """What the Jobs run on and for how long."""
    p.add_argument(
        "--image",
        metavar="IMAGE",
        default=None,
        help="another Docker image with uv (default: huggingface_hub's uv image)",
    )
    p.add_argument(
        "--flavor",
        metavar="FLAVOR",
        default=DEFAULTS.flavor,
        help="hardware of the (shard) Jobs (default: cpu-upgrade)",
    )
    p.add_argument(
        "--finish-flavor",
        metavar="FLAVOR",
        default=DEFAULTS.finish_flavor,
        help="hardware of the finishing Job (default: cpu-xl)",
    )
    p.add_argument(
        "--timeout",
        metavar="DURATION",
        type=job_duration,
        default=DEFAULTS.timeout,
        help="max duration of each (shard) Job (default: 1d)",
    )
    p.add_argument(
        "--finish-timeout",
        metavar="DURATION",
        type=job_duration,
        default=DEFAULTS.finish_timeout,
        help="max duration of the finishing Job (default: 2d)",
    )


def _add_submit_run(p: argparse.ArgumentParser) -> None:
    """How the Jobs run, and what ``submit`` itself does."""
    p.add_argument(
        "--wait",
        metavar="SECONDS",
        type=int,
        default=DEFAULTS.wait,
        help="finishing Job: seconds to wait for the shards' markers (default: 43200)",
    )
    p.add_argument(
        "--poll",
        metavar="SECONDS",
        type=positive_seconds,
        default=DEFAULTS.poll,
        help="seconds between status checks of shard Jobs (default: 60)",
    )
    p.add_argument(
        "--workers",
        metavar="N",
        type=positive_int,
        default=None,
        help="worker processes per Job (default: CPU count)",
    )
    p.add_argument(
        "--namespace",
        metavar="OWNER",
        type=namespace,
        default=None,
        help="user or org running the Jobs (default: the token's user)",
    )
    p.add_argument(
        "--lookups-from",
        metavar="OUT",
        type=Path,
        default=None,
        help="a work directory whose works stage is done (a run of the same input, or the "
        "bucket's copy): print the OpenAlex lookups' calls, cost and time it projects",
    )
    p.add_argument("--dry-run", action="store_true", help="print every Job spec, submit nothing")
    p.add_argument("--endpoint", default=None, metavar="URL", help=ENDPOINT_HELP)
