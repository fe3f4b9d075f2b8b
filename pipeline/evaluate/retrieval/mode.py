"""Retrieval mode: runs over the whole corpus of a split, with trec_eval's semantics.

The default mode re-ranks the judged candidates of each survey (the benchmark's
protocol): every judged candidate is ranked, the ones a run did not score after all
scored ones, and pairs outside the judged ones are refused. In retrieval mode (the
BEIR/MTEB habit) a run may score any document of the split's corpus (the release's
``corpus`` config, when the eval file sits in a release folder), typically its top
100 or 1000, and a survey's ranking is what the run retrieved, in score order with
the tie rule of :mod:`pipeline.evaluate.scoring.ties`. A retrieved document without a
judgment for the survey is not relevant (:data:`~pipeline.evaluate.scoring.measures.UNJUDGED_LABEL`:
gain 0, not a hard negative). A judged candidate the run did not retrieve has no rank:
it counts in the number of relevant candidates R (recall, AP, Rprec) and in the ideal
DCG of nDCG, and nowhere else (``ranked="scored"`` of
:func:`pipeline.evaluate.scoring.compute.per_survey_metrics`). That is trec_eval's rule, so the
values equal trec_eval / ir_measures on top-k runs as on runs over the whole corpus
(tested to 1e-9 against ir_measures: ``tests/test_evaluate_retrieval.py``). A survey a
run has no row for scores 0 (trec_eval's ``-c``). ``hard_negative_auc`` compares the
judged positives with the judged hard negatives, the ones not retrieved sharing the
lowest score. Unjudged documents have no known domain, so they fall in the OUT subset.

Cutoffs: retrieval mode reports nDCG@K and R@K at :data:`RETRIEVAL_KS` (5 to 300, the
citation-recommendation protocol's cutoffs) besides the config's ``ks``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl

from pipeline.core.errors import option
from pipeline.core.release_files import view_of_eval_file
from pipeline.core.schema import BEIR_ID
from pipeline.evaluate.columns import CANDIDATE_ID, IN_DOMAIN, LABEL, LINE_NUMBER, SCORE, SURVEY_ID
from pipeline.evaluate.scoring.measures import UNJUDGED_LABEL
from pipeline.evaluate.systems.runs import Run, RunError, RunWarning, _at

RERANK, RETRIEVAL = "rerank", "retrieval"
MODES = (RERANK, RETRIEVAL)
RETRIEVAL_KS = (5, 10, 20, 50, 100, 300)


def corpus_ids(eval_path: Path, split: str = "eval") -> pl.Series | None:
    """Document ids of the split's corpus next to the eval file (None when there is none)."""
    path = view_of_eval_file(eval_path, "corpus", split)
    if path is None:
        return None
    return pl.read_parquet(path, columns=[BEIR_ID])[BEIR_ID].rename(CANDIDATE_ID)


def restrict_to_corpus(
    run: Run, eval_pairs: pl.DataFrame, corpus: pl.Series | None, lenient: bool = False
) -> Run:
    """Keep the rows of eval surveys whose document is in the corpus.

    Args:
        run: a run (file or in memory).
        eval_pairs: the eval set's ``survey_id`` and ``candidate_id``.
        corpus: the split's document ids, or None to accept any document id.
        lenient: drop unknown surveys or documents (counted, with a warning) instead of failing.

    Raises:
        RunError: a survey not in the eval set or a document not in the corpus (unless
            ``lenient``), naming the first offending line.
    """
    known = pl.col(SURVEY_ID).is_in(eval_pairs[SURVEY_ID].unique().implode())
    if corpus is not None:
        allowed = pl.concat([corpus, eval_pairs[CANDIDATE_ID]]).unique()
        known = known & pl.col(CANDIDATE_ID).is_in(allowed.implode())
    bad = run.scores.filter(~known)
    if bad.height == 0:
        return run
    line, survey, doc = bad.select(LINE_NUMBER, SURVEY_ID, CANDIDATE_ID).row(0)
    where = _at(run.where, run.format, line)
    what = (
        f"{SURVEY_ID} {survey!r} is not in the eval set"
        if survey not in set(eval_pairs[SURVEY_ID].to_list())
        else f"document {doc!r} is not in the split's corpus"
    )
    if not lenient:
        raise RunError(
            f"{where}: {what} ({bad.height} such row(s); {option('--lenient')} drops them)"
        )
    warnings.warn(
        f"{run.where}: dropped {bad.height} of {run.n_rows} row(s) (first at {where}: {what})",
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
    """Judged candidates (with the run's score, null = not retrieved) plus the run's unjudged
    documents (label :data:`~pipeline.evaluate.scoring.measures.UNJUDGED_LABEL`); rank it with
    ``ranked="scored"``."""
    keys = [SURVEY_ID, CANDIDATE_ID]
    judged = eval_set.select(*keys, LABEL, IN_DOMAIN).join(
        run.scores.select(*keys, SCORE), on=keys, how="left", maintain_order="left"
    )
    unjudged = (
        run.scores.select(*keys, SCORE)
        .join(eval_set.select(keys), on=keys, how="anti")
        .with_columns(
            pl.lit(UNJUDGED_LABEL, dtype=judged.schema[LABEL]).alias(LABEL),
            pl.lit(None, dtype=pl.Boolean).alias(IN_DOMAIN),
        )
        .select(judged.columns)
    )
    return pl.concat([judged, unjudged]).sort(keys)
