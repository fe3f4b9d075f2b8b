"""Retrieval mode: runs over the whole corpus of a split, unjudged documents not relevant.

The default mode re-ranks the judged candidates of each survey (the benchmark's
protocol) and refuses pairs outside them. In retrieval mode (the BEIR/MTEB habit) a
run may score any document of the split's corpus (``corpus/<split>.parquet`` of the
release, when the eval file sits in a release folder): a document without a
judgment for the survey is not relevant (label 0). Each survey's ranking holds
every judged candidate and every document the run scored; judged candidates the run
did not score rank after the scored ones, as in re-ranking mode. With a run that
scores the whole corpus, ndcg@K, recall@K, map, r_precision and mrr_tier>=3 are then
trec_eval's values with unjudged documents at relevance 0 (tested against
pytrec_eval). ``hard_negative_auc`` in this mode counts every non-relevant scored
document as a negative (hard negatives and unjudged documents alike). Unjudged
documents have no known domain, so they fall in the OUT subset.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, IN_DOMAIN, LABEL, LINE_NUMBER, SCORE, SURVEY_ID
from pipeline.evaluate.runs import Run, RunError, RunWarning, _at, read_run

RERANK, RETRIEVAL = "rerank", "retrieval"
MODES = (RERANK, RETRIEVAL)
CORPUS_FILE = "corpus/{split}.parquet"
CORPUS_ID = "_id"


def corpus_ids(eval_path: Path, split: str = "eval") -> pl.Series | None:
    """Document ids of the split's corpus next to the eval file (None when there is none)."""
    path = eval_path.parent / CORPUS_FILE.format(split=split)
    if not path.is_file():
        return None
    return pl.read_parquet(path, columns=[CORPUS_ID])[CORPUS_ID].rename(CANDIDATE_ID)


def load_retrieval_run(
    path: str | Path,
    eval_pairs: pl.DataFrame,
    corpus: pl.Series | None,
    lenient: bool = False,
) -> Run:
    """Read a run and keep rows of eval surveys whose document is in the corpus.

    Args:
        path: a run file (any format of :mod:`pipeline.evaluate.runs`).
        eval_pairs: the eval set's ``survey_id`` and ``candidate_id``.
        corpus: the split's document ids, or None to accept any document id.
        lenient: drop unknown surveys or documents (counted, with a warning) instead of failing.

    Raises:
        RunError: a survey not in the eval set or a document not in the corpus (unless
            ``lenient``), naming the first offending line.
    """
    run = read_run(path)
    known = pl.col(SURVEY_ID).is_in(eval_pairs[SURVEY_ID].unique().implode())
    if corpus is not None:
        allowed = pl.concat([corpus, eval_pairs[CANDIDATE_ID]]).unique()
        known = known & pl.col(CANDIDATE_ID).is_in(allowed.implode())
    bad = run.scores.filter(~known)
    if bad.height == 0:
        return run
    line, survey, doc = bad.select(LINE_NUMBER, SURVEY_ID, CANDIDATE_ID).row(0)
    where = _at(run.path, run.format, line)
    what = (
        f"{SURVEY_ID} {survey!r} is not in the eval set"
        if survey not in set(eval_pairs[SURVEY_ID].to_list())
        else f"document {doc!r} is not in the split's corpus"
    )
    if not lenient:
        raise RunError(f"{where}: {what} ({bad.height} such row(s); lenient mode drops them)")
    warnings.warn(
        f"{run.path}: dropped {bad.height} of {run.n_rows} row(s) (first at {where}: {what})",
        RunWarning,
        stacklevel=2,
    )
    return Run(
        name=run.name,
        path=run.path,
        format=run.format,
        scores=run.scores.filter(known),
        n_rows=run.n_rows,
        n_dropped_unknown=bad.height,
    )


def retrieval_frame(eval_set: pl.DataFrame, run: Run) -> pl.DataFrame:
    """Judged candidates (with the run's score or null) plus the run's unjudged documents (label 0)."""
    keys = [SURVEY_ID, CANDIDATE_ID]
    judged = eval_set.select(*keys, LABEL, IN_DOMAIN).join(
        run.scores.select(*keys, SCORE), on=keys, how="left", maintain_order="left"
    )
    unjudged = (
        run.scores.select(*keys, SCORE)
        .join(eval_set.select(keys), on=keys, how="anti")
        .with_columns(
            pl.lit(0, dtype=judged.schema[LABEL]).alias(LABEL),
            pl.lit(None, dtype=pl.Boolean).alias(IN_DOMAIN),
        )
        .select(judged.columns)
    )
    return pl.concat([judged, unjudged]).sort(keys)
