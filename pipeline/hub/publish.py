"""Publish a release on the Hugging Face Hub: what ``push`` (:func:`pipeline.api.push`) does
and what it verifies first.

``push`` creates the dataset repo if needed and uploads the release folder in **one**
commit (``HfApi.create_commit`` with a ``CommitOperationAdd`` per file), then tags
that commit (``--revision`` names another branch, created from ``main`` when missing, and
``--commit-message`` / ``--commit-description`` the commit's text, as ``hf upload`` takes
them). Runner markers (``_SUCCESS.json``) and temp files are not release files
and are never uploaded. Files that a previous release had and this one lacks stay in
the repo (the card's ``configs`` name exact files, so they are not loaded).

Before anything is uploaded (and in a dry run) ``push`` refuses, in one line: a release
whose files differ from its record; a release built from synthetic papers or papers of
unknown provenance, unless ``--allow-synthetic`` (:mod:`pipeline.corpus.provenance`); a card
that still holds a placeholder (``OWNER/...``, ``{AUTHORS}``, ``{YEAR}``) or names another
repo than ``--repo-id`` (:func:`pipeline.hub.card.publish_problem`).

Authentication is huggingface_hub's own (``HF_TOKEN`` or ``hf auth login``). The
token is never printed, logged or written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.core.errors import StageError
from pipeline.core.files import sha256_file
from pipeline.core.release_files import CARD_FILE, METADATA_FILE
from pipeline.corpus.provenance import verdict as provenance_verdict
from pipeline.engine.workdir import (  # noqa: F401 - release_files is also imported from here
    SUCCESS,
    is_publishable,
    release_files,
    release_records,
)

REPO_TYPE = "dataset"
DEFAULT_REVISION = "main"
ENDPOINT_HELP = "Hub endpoint (default: $HF_ENDPOINT, else huggingface.co)"


# --------------------------------------------------------------------- release files
def verify_release(release: Path, files: list[dict[str, Any]]) -> None:
    """Refuse a release whose files differ from what the release stage recorded.

    The release's own record is the runner's ``_SUCCESS.json`` (size and sha256 of every
    file the stage wrote, the card, figures and metadata included); the Parquet files are
    also checked against ``eval_metadata.json``. Every file ``push`` would upload must be
    listed there with the same size and sha256, and every listed file must be present: an
    edited card, a replaced figure or an added script is refused, and so is a release
    without its record (it cannot be checked).

    Raises:
        RuntimeError: names the record that is missing or damaged, or the first file that
            differs, is missing or is not listed.
    """
    try:
        by_runner = release_records(release)
    except (ValueError, AttributeError) as e:  # half-written or not a JSON object
        raise StageError(
            f"push: {release / SUCCESS} is damaged ({' '.join(str(e).split())}); rebuild the "
            "release"
        ) from e
    if not isinstance(by_runner, dict):
        raise StageError(
            f"push: {release / SUCCESS} is missing, damaged or lists no files, so the release "
            "files cannot be checked against what the release stage wrote; rebuild the release"
        )
    meta = json.loads((release / METADATA_FILE).read_text())
    recorded: dict[str, dict[str, Any]] = {**by_runner, **dict(meta.get("files", {}))}
    have = {f["path"]: f for f in files}
    for rel, want in sorted(recorded.items()):
        if rel == SUCCESS or not is_publishable(PurePosixPath(rel)):
            continue
        got = have.get(rel)
        if got is None:
            raise StageError(f"push: {release / rel} is missing; rebuild the release")
        if got["bytes"] != want["bytes"] or got["sha256"] != want["sha256"]:
            raise StageError(
                f"push: {release / rel} differs from the release record ({got['bytes']} bytes, "
                f"sha256 {got['sha256'][:12]}...; recorded {want['bytes']} bytes, sha256 "
                f"{want['sha256'][:12]}...); refusing to publish it: rebuild the release"
            )
    extra = sorted(set(have) - set(recorded))
    if extra:
        raise StageError(
            f"push: {release / extra[0]} is not a file the release stage wrote (not in "
            f"{SUCCESS}); refusing to publish it"
        )


def hub_api(endpoint: str | None = None) -> Any:
    """An ``HfApi`` on ``endpoint`` (default: ``$HF_ENDPOINT``, else huggingface.co)."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None)


# --------------------------------------------------------------------- push
def publish_refusal(
    release: Path, meta: dict[str, Any], repo_id: str, allow_synthetic: bool
) -> str | None:
    """Why this release must not be published to ``repo_id`` as it is, in one line; else None.

    A release built from synthetic papers, or papers of unknown provenance, is refused
    unless ``allow_synthetic`` (:func:`pipeline.corpus.provenance.push_refusal`); a card that still
    holds a placeholder, or names another repo than ``repo_id``, always
    (:func:`pipeline.hub.card.publish_problem`).
    """
    from pipeline.corpus.provenance import push_refusal
    from pipeline.hub.card import publish_problem

    if not allow_synthetic:
        refusal = push_refusal(meta)
        if refusal is not None:
            return refusal
    return publish_problem((release / CARD_FILE).read_text(encoding="utf-8"), meta, repo_id)


def push_plan(
    release: Path,
    repo_id: str,
    tag: str | None,
    private: bool,
    *,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    allow_synthetic: bool = False,
) -> dict[str, Any]:
    """What ``push`` does, as data: the repo, the one commit with its files, the tag.

    Args:
        revision: the branch to commit to (default ``main``; created from ``main`` when
            missing), as ``hf upload --revision``.
        commit_message: the commit's summary (default ``Release <version>``).
        commit_description: the commit's description (default none).
        allow_synthetic: publish a release built from synthetic papers.

    Raises:
        RuntimeError: a release file differs from its record, or the release must not be
            published (:func:`publish_refusal`).
    """
    meta = (
        json.loads((release / METADATA_FILE).read_text())
        if (release / METADATA_FILE).exists()
        else {}
    )
    files = [
        {"path": rel, "bytes": p.stat().st_size, "sha256": sha256_file(p)}
        for rel, p in release_files(release)
    ]
    verify_release(release, files)
    refusal = publish_refusal(release, meta, repo_id, allow_synthetic)
    if refusal is not None:
        raise StageError(refusal)
    version = meta.get("version", "")
    branch = revision or DEFAULT_REVISION
    return {
        "repo_id": repo_id,
        "repo_type": REPO_TYPE,
        "private": private,
        "create_repo": "if missing (exist_ok)",
        "revision": branch,
        "create_branch": None
        if branch == DEFAULT_REVISION
        else f"if missing, from {DEFAULT_REVISION}",
        "commit_message": commit_message
        or (f"Release {version}".strip() if version else "Release"),
        "commit_description": commit_description,
        "provenance": provenance_verdict(meta),
        "files": files,
        "tag": tag,
    }


def push_release(
    release: Path,
    repo_id: str,
    tag: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
    *,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    allow_synthetic: bool = False,
) -> dict[str, Any]:
    """Create the repo (and the branch) if needed, upload the release in one commit, tag it;
    return what was done. Arguments as for :func:`push_plan`."""
    from huggingface_hub import CommitOperationAdd
    from huggingface_hub.errors import RevisionNotFoundError

    plan = push_plan(
        release,
        repo_id,
        tag,
        private,
        revision=revision,
        commit_message=commit_message,
        commit_description=commit_description,
        allow_synthetic=allow_synthetic,
    )
    hf = hub_api(endpoint)
    # private=None (not False) keeps the namespace's default visibility for new repos
    hf.create_repo(repo_id, repo_type=REPO_TYPE, private=private or None, exist_ok=True)
    branch = plan["revision"]
    if branch != DEFAULT_REVISION:
        # as `hf upload --revision` does: a missing branch is created from main first
        try:
            hf.repo_info(repo_id, repo_type=REPO_TYPE, revision=branch)
        except RevisionNotFoundError:
            hf.create_branch(repo_id, branch=branch, repo_type=REPO_TYPE, exist_ok=True)
    ops = [
        CommitOperationAdd(path_in_repo=f["path"], path_or_fileobj=str(release / f["path"]))
        for f in plan["files"]
    ]
    info = hf.create_commit(
        repo_id,
        ops,
        commit_message=plan["commit_message"],
        commit_description=plan["commit_description"],
        repo_type=REPO_TYPE,
        revision=branch,
    )
    if tag:
        hf.create_tag(
            repo_id,
            tag=tag,
            revision=info.oid,
            repo_type=REPO_TYPE,
            tag_message=plan["commit_message"],
        )
    return {
        "repo_id": repo_id,
        "revision": branch,
        "commit": info.oid,
        "commit_url": str(info.commit_url),
        "tag": tag,
        "files": len(ops),
    }
