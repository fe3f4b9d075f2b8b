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

from pipeline.engine.workdir import PUBLISHED
from pipeline.jobs.identity import (
    code_fingerprint,
    extract_missing,
    run_identity,
    unchanged_since_release,
)
from pipeline.jobs.plan import EXTRACT_MB_S_PER_WORKER, GZIP_MB_S, extract_projection
from pipeline.jobs.specs import JobSpec, SubmitOptions, job_specs, pinned_dependencies
from pipeline.jobs.step import run_step
from pipeline.jobs.submit import submit

__all__ = [
    "EXTRACT_MB_S_PER_WORKER",
    "GZIP_MB_S",
    "PUBLISHED",
    "JobSpec",
    "SubmitOptions",
    "code_fingerprint",
    "extract_missing",
    "extract_projection",
    "job_specs",
    "pinned_dependencies",
    "run_identity",
    "run_step",
    "submit",
    "unchanged_since_release",
]
