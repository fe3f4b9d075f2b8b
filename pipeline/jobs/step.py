"""What a Job runs: ``all`` (run, push), ``shard`` (extract I/N), ``finish`` (the rest, push)."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

from pipeline import api
from pipeline.core.config import Config
from pipeline.core.files import write_json
from pipeline.corpus.sources import InputError
from pipeline.engine import workdir as W
from pipeline.evaluate.report.markdown import render_report
from pipeline.jobs.identity import extract_missing, run_identity, unchanged_since_release

log = logging.getLogger("pipeline")


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
