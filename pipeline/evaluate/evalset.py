"""Finding and loading the eval table (one row per survey x judged candidate)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from pipeline.core.errors import PipelineError
from pipeline.core.schema import CANDIDATES_VIEW, LABEL_NAMES
from pipeline.engine.workdir import release_file_schema
from pipeline.evaluate.columns import (
    CANDIDATE_ABSTRACT,
    CANDIDATE_ID,
    CANDIDATE_PRIOR_CITATIONS,
    CANDIDATE_TITLE,
    EVAL_FILENAME,
    IN_DOMAIN,
    LABEL,
    SURVEY_ABSTRACT,
    SURVEY_DATE,
    SURVEY_ID,
    SURVEY_TITLE,
    SURVEY_YEAR,
)
from pipeline.rules.aspect_queries import as_queries, present_query_columns

EVAL_COLUMNS = {
    SURVEY_ID: pl.String,
    SURVEY_TITLE: pl.String,
    SURVEY_ABSTRACT: pl.String,
    SURVEY_DATE: pl.Date,
    CANDIDATE_ID: pl.String,
    CANDIDATE_TITLE: pl.String,
    CANDIDATE_ABSTRACT: pl.String,
    LABEL: pl.Int8,
    IN_DOMAIN: pl.Boolean,
    CANDIDATE_PRIOR_CITATIONS: pl.Int64,
}

HUB_PREFIX = "hf://datasets/"
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+(@[\w./-]+)?$")


class EvalSetError(PipelineError, ValueError):
    """The eval table is missing columns or breaks one of its invariants."""


def _hub_download(spec: str) -> Path:
    """Fetch the eval table of a Hub dataset (``owner/name[@rev]`` or ``hf://datasets/...``)."""
    from huggingface_hub import HfApi, constants, hf_hub_download  # only for Hub inputs
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    from pipeline.core.errors import hub_endpoint, transport_errors

    rest = spec.removeprefix(HUB_PREFIX)
    owner, name, *inner = [*rest.split("/"), ""] if "/" not in rest else rest.split("/")
    name, _, revision = name.partition("@")
    if not _valid_repo_id(f"{owner}/{name}"):
        raise FileNotFoundError(f"{spec}: not a Hub dataset id hf://datasets/OWNER/NAME[/PATH]")
    filename = "/".join(inner)
    if not filename.endswith(".parquet"):
        filename = f"{filename}/{EVAL_FILENAME}" if filename else EVAL_FILENAME
    local_hint = "" if spec.startswith(HUB_PREFIX) else "no such local file or folder, and "
    # One quick request first: hf_hub_download retries an unreachable Hub for ~25 s, and a
    # mistyped local path (`make eval` before `make demo`) looks like owner/name.
    try:
        if not constants.HF_HUB_OFFLINE:  # offline, hf_hub_download reads its cache
            HfApi().dataset_info(f"{owner}/{name}", revision=revision or None)
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise FileNotFoundError(
            f"{spec}: {local_hint}no Hub dataset {owner}/{name}"
            + (f"@{revision}" if revision else "")
            + f" ({type(e).__name__}; if it is private, set HF_TOKEN or run `hf auth login`)"
        ) from e
    except transport_errors() as e:
        raise FileNotFoundError(
            f"{spec}: {local_hint}the Hugging Face Hub at {hub_endpoint()} cannot be reached "
            f"to look it up as a dataset id ({e})"
        ) from e
    local = hf_hub_download(
        repo_id=f"{owner}/{name}", filename=filename, repo_type="dataset", revision=revision or None
    )
    return Path(local)


def _valid_repo_id(owner_name: str) -> bool:
    """Whether huggingface_hub accepts ``owner/name`` (``./x`` and ``../x`` look like one to
    a pattern, but name a local folder)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(owner_name)
    except HFValidationError:
        return False
    return True


def is_hub_spec(spec: str | Path) -> bool:
    """Whether :func:`resolve_eval_file` reads ``spec`` from the Hub (it is not a local path)."""
    text = str(spec)
    if Path(spec).exists():
        return False
    if text.startswith(HUB_PREFIX):
        return True
    return bool(
        _REPO_ID.match(text)
        and not text.endswith(".parquet")
        and _valid_repo_id(text.partition("@")[0])
    )


def resolve_eval_file(spec: str | Path) -> Path:
    """Local path of the eval Parquet named by ``spec``.

    Args:
        spec: an eval Parquet file; a release folder (its ``eval_survey_reading_lists.parquet``);
            a Hub dataset id ``owner/name[@revision]``; or ``hf://datasets/owner/name[@revision]/path``
            (a file, or a folder holding the eval file). Hub inputs are downloaded
            with ``huggingface_hub`` into its cache.

    Raises:
        FileNotFoundError: a local folder without the eval file, or a path that is neither
            a local file/folder nor a Hub dataset id.
    """
    path = Path(spec)
    if path.is_dir():
        inner = path / EVAL_FILENAME
        if not inner.is_file():
            raise FileNotFoundError(f"{path}: folder has no {EVAL_FILENAME}")
        return inner
    if path.is_file():
        return path
    if is_hub_spec(spec):
        return _hub_download(str(spec))
    raise FileNotFoundError(f"{spec}: no such eval file or folder, and not a Hub dataset id")


def load_eval_set(path: Path) -> pl.DataFrame:
    """The eval table in canonical order (survey_id, candidate_id) with a ``survey_year`` column.

    Raises:
        EvalSetError: a release file whose sha256 differs from the release's record; not
            Parquet; a required column is missing or cannot be cast; null ids, dates
            or labels; a label outside 0-4; a repeated (survey_id, candidate_id).
    """
    schema = release_file_schema(path, EvalSetError)  # a damaged release file is not scored
    missing = [c for c in EVAL_COLUMNS if c not in schema]
    if missing:
        raise EvalSetError(f"{path}: missing column(s) {missing}; has {list(schema)}")
    try:
        # an aspects table is read keyed by aspect (pipeline.rules.aspect_queries)
        frame = (
            pl.scan_parquet(path)
            .select(*EVAL_COLUMNS, *present_query_columns(schema))
            .collect()
            .pipe(as_queries)
            .lazy()
            .select([pl.col(c).cast(t) for c, t in EVAL_COLUMNS.items()])
            .sort(SURVEY_ID, CANDIDATE_ID)
            .with_columns(pl.col(SURVEY_DATE).dt.year().alias(SURVEY_YEAR))
            .collect()
        )
    except pl.exceptions.PolarsError as e:
        raise EvalSetError(f"{path}: cannot read eval columns ({e})") from e
    for column in (SURVEY_ID, CANDIDATE_ID, SURVEY_DATE, LABEL, IN_DOMAIN):
        nulls = frame[column].null_count()
        if nulls:
            raise EvalSetError(f"{path}: {nulls} row(s) with null {column}")
    bad = frame.filter(~pl.col(LABEL).is_in(list(LABEL_NAMES)))
    if bad.height:
        row = bad.row(0, named=True)
        raise EvalSetError(
            f"{path}: label {row[LABEL]} for ({row[SURVEY_ID]!r}, {row[CANDIDATE_ID]!r}) "
            f"is not one of {sorted(LABEL_NAMES)}"
        )
    repeated = frame.filter(pl.struct(SURVEY_ID, CANDIDATE_ID).is_duplicated())
    if repeated.height:
        row = repeated.row(0, named=True)
        raise EvalSetError(
            f"{path}: ({row[SURVEY_ID]!r}, {row[CANDIDATE_ID]!r}) appears more than once"
        )
    return frame


def answer_free(eval_set: pl.DataFrame) -> pl.DataFrame:
    """The columns of the eval set that the release's ``candidates`` view holds (no judgment)."""
    return eval_set.select([c for c in CANDIDATES_VIEW.names if c in eval_set.columns])
