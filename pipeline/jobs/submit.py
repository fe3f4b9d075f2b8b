"""Submit the Jobs: the bucket, the code commit, then the Jobs, on the Hub."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pipeline import api
from pipeline.core.errors import StageError, require_token
from pipeline.corpus.sources import InputError
from pipeline.hub.publish import hub_api
from pipeline.jobs.identity import code_fingerprint, package_files
from pipeline.jobs.specs import (
    CONFIG_IN_CODE,
    PYTHON,
    TOKEN_SECRET,
    JobSpec,
    SubmitOptions,
    job_specs,
    optional_secrets,
)
from pipeline.jobs.step import release_config_for


def upload_code(hf: Any, code_repo: str, config: Path | None) -> str:
    """Upload the package's files (and ``config`` as ``pipeline_config``) in one commit; its oid."""
    from huggingface_hub import CommitOperationAdd

    ops = [
        CommitOperationAdd(path_in_repo=rel, path_or_fileobj=data) for rel, data in package_files()
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


def submit(opts: SubmitOptions, namespace: str) -> dict[str, Any]:
    """Create the bucket and the code commit, then the Jobs; wait for shards when not scheduled."""
    from huggingface_hub import Volume

    from pipeline.core.config import load_config

    token = require_token("submit")
    if opts.config is not None:
        load_config(opts.config)  # a bad value fails here, not in the Job an hour later
    hf = hub_api(opts.endpoint)
    bucket = opts.bucket_repo(namespace)
    hf.create_bucket(bucket, private=True, exist_ok=True)
    code_repo = opts.code_repo_of(namespace)
    code_revision = upload_code(hf, code_repo, opts.config)
    input_revision = opts.input_revision
    if not opts.schedule:  # a one-off run reads exactly the commit the input is at now
        input_revision = hf.dataset_info(opts.input_repo, revision=input_revision).sha
    specs = job_specs(opts, namespace, code_revision, input_revision)
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
            # the values travel as the Job's secrets only, never in its arguments or env
            "secrets": {TOKEN_SECRET: token, **{n: os.environ[n] for n in optional_secrets()}},
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
    if shards and not opts.schedule:
        # a one-off fan-out: start the finishing Job only once every shard completed
        final = hf.wait_for_job([i.id for i in infos], namespace=namespace, poll_interval=opts.poll)
        failed = [
            (s.name, f.status.stage)
            for s, f in zip(shards, final, strict=True)
            if f.status.stage != "COMPLETED"
        ]
        if failed:
            raise StageError(f"submit: shard Job(s) did not complete: {failed}; resubmit to resume")
    info = create(finish)
    done.append({"name": finish.name, "id": info.id, "schedule": finish.schedule})
    return {
        "bucket": bucket,
        "code": {"repo": code_repo, "revision": code_revision},
        "input": {"repo": opts.input_repo, "revision": input_revision},
        "jobs": done,
    }


def check_release_config(config: Path | None, repo: str) -> None:
    """Refuse, before any Job runs, a config whose release ``push`` would refuse at the end:
    one that names another repo than ``repo``, or leaves the card's authors or year unset.

    Raises:
        InputError: names the fields to set.
    """
    from pipeline.hub.card import unset_fields

    cfg = release_config_for(api.config_of(config), repo, "submit")
    missing = [f for f in unset_fields(cfg.to_dict()["release"]) if f != "repo_id"]
    if missing:
        raise InputError(
            f"submit: the config does not set [release] {', '.join(missing)}, which the card's "
            "citation names; the Jobs' push would refuse the release: set them in --config"
        )
