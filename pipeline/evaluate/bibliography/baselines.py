"""Baseline bibliographies: what a generator's numbers sit next to.

For each eval survey a bibliography is given for, each baseline is a bibliography of at
most N works, N the size of the survey's list, scored by
:func:`pipeline.evaluate.bibliography.score.score_survey` like a generated one:

* ``oracle``: the list itself, tier by tier (every metric at its best);
* ``oracle-without-tier-t``: the list with its tier-t works removed (t = 1..4), the
  cost of missing one tier;
* ``popularity``: cite the field's most-cited works: the N works most cited by corpus papers
  of the survey's primary category posted before the survey's date
  (:mod:`pipeline.evaluate.systems.field_baselines`, computed at build time, where the citations are,
  and read from the release's judgment-side
  :data:`~pipeline.core.release_files.BIBLIOGRAPHY_BASELINES_FILE`);
* ``bm25``: the N documents of the release's eval corpus (``corpus/test.parquet``) of
  highest BM25 against the survey's title and abstract: the retrieval mode's ``bm25``
  (:func:`pipeline.evaluate.retrieval.model_runs.bm25_retrieval`), its top N;
* ``popularity-candidates``, ``bm25-candidates``: the same two rankings over the survey's
  judged candidates only (its list and its hard negatives; the evaluation's ``popularity``
  score, ``candidate_prior_citations``, and its ``bm25`` score). Every work they name is
  judged, so they are upper bounds of the two above: kept to show how much of a whole-corpus
  baseline's gap is finding the field's works at all.

The two whole-corpus baselines name works that may be no candidate of the survey: such a
work is resolved as a generated reference naming it by its id would be
(:func:`pipeline.evaluate.bibliography.score.resolve`): ``known``, a work of the release's works
table (``unmatched`` on a release built before the table, unless another survey lists it). Their recall and precision differ only when the field has
fewer than N cited works (``popularity``) or the corpus fewer than N documents. Equal scores
are ordered by the evaluation's tie key (:mod:`pipeline.evaluate.scoring.ties`). A release without
the baselines file (built before it existed) or without a corpus with texts has no
``popularity`` or ``bm25``; :data:`SKIPPED` says why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import polars as pl

from pipeline.core import schema as S
from pipeline.core.release_files import BIBLIOGRAPHY_BASELINES_FILE
from pipeline.engine.workdir import release_file_problem
from pipeline.evaluate.bibliography.score import (
    HARD_NEGATIVE,
    LISTED,
    TIERS,
    Bibliography,
    BibliographyError,
    Reference,
    ReleaseWorks,
    Resolved,
    SurveyScore,
    references_index,
    resolve,
    score_survey,
)
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID
from pipeline.evaluate.evalset import answer_free
from pipeline.evaluate.scoring.ties import tie_keys
from pipeline.evaluate.systems.baselines import (
    BM25,
    ORACLE,
    POPULARITY,
    bm25_scores,
    popularity_scores,
)
from pipeline.evaluate.systems.field_baselines import FIELD_POPULARITY
from pipeline.rules import aliases as A

WITHOUT_TIER = "oracle-without-tier-{tier}"
CANDIDATES_ONLY = "{name}-candidates"
POPULARITY_CANDIDATES = CANDIDATES_ONLY.format(name=POPULARITY)
BM25_CANDIDATES = CANDIDATES_ONLY.format(name=BM25)
BIBLIOGRAPHY_BASELINES = (
    ORACLE,
    *(WITHOUT_TIER.format(tier=t) for t in TIERS),
    POPULARITY,
    BM25,
    POPULARITY_CANDIDATES,
    BM25_CANDIDATES,
)
RESOLVED_BY = "baseline"
NO_BASELINES_FILE = f"the release has no {BIBLIOGRAPHY_BASELINES_FILE} (built before it existed)"
NO_CORPUS = "no eval corpus with texts beside the eval file"

_TIE = "_tie"
_BY_ID = {A.ARXIV_PREFIX: "arxiv_id", A.DOI_PREFIX: "doi", A.OPENALEX_PREFIX: "openalex_id"}


def _bibliography(work_ids: Sequence[str], labels: dict[str, int]) -> list[Resolved]:
    """Judged works as a resolved bibliography, in the given order."""
    return [
        Resolved(i, LISTED if labels[w] >= 1 else HARD_NEGATIVE, w, labels[w], RESOLVED_BY)
        for i, w in enumerate(work_ids, start=1)
    ]


def id_reference(work_id: str) -> Reference:
    """A reference naming a work by its id alone (``arxiv:``, ``doi:``, ``openalex:``)."""
    for prefix, field in _BY_ID.items():
        if work_id.startswith(prefix):
            return Reference(**{field: work_id[len(prefix) :]})
    raise BibliographyError(f"work id {work_id!r} has none of the prefixes {sorted(_BY_ID)}")


def field_popularity_lists(release: Path, surveys: Collection[str]) -> dict[str, list[str]] | None:
    """The ``popularity`` bibliographies of ``surveys`` from the release's baselines file, in
    rank order (a survey without one: an empty list); None when the release has no file.

    Raises:
        BibliographyError: the file differs from the release's record.
    """
    path = release / BIBLIOGRAPHY_BASELINES_FILE
    if not path.is_file():
        return None
    problem = release_file_problem(path)
    if problem is not None:
        raise BibliographyError(problem)
    rows = (
        pl.scan_parquet(path)
        .filter((pl.col(S.BASELINE) == FIELD_POPULARITY) & pl.col(SURVEY_ID).is_in(list(surveys)))
        .sort(SURVEY_ID, S.BASELINE_RANK)
        .group_by(SURVEY_ID, maintain_order=True)
        .agg(pl.col(S.WORK_ID))
        .collect()
    )
    found = dict(rows.iter_rows())
    return {s: found.get(s, []) for s in surveys}


def corpus_bm25_lists(
    eval_set: pl.DataFrame, eval_file: Path, sizes: Mapping[str, int]
) -> dict[str, list[str]] | None:
    """Per survey of ``sizes``, the top N (its size) of the retrieval mode's BM25 over the
    eval corpus, in the evaluation's ranking order; None without a corpus with texts."""
    from pipeline.evaluate.retrieval.corpus_vectors import load_corpus
    from pipeline.evaluate.retrieval.model_runs import bm25_retrieval, has_texts

    corpus = load_corpus(eval_file)
    if corpus is None or not has_texts(corpus) or not sizes:
        return None
    wanted = eval_set.filter(pl.col(SURVEY_ID).is_in(list(sizes)))
    found = bm25_retrieval(wanted, corpus, max(sizes.values()), BM25).run.scores
    return top_n(found, sizes)


def top_n(run: pl.DataFrame, sizes: Mapping[str, int]) -> dict[str, list[str]]:
    """Per survey of ``sizes``, its first N documents of a run (``survey_id, candidate_id,
    score``) by the evaluation's ranking rule (:mod:`pipeline.evaluate.scoring.ties`)."""
    ranked = (
        run.select(SURVEY_ID, CANDIDATE_ID, SCORE)
        .with_columns(tie_keys(run).alias(_TIE))
        .sort([SURVEY_ID, SCORE, _TIE, CANDIDATE_ID], descending=[False, True, False, False])
        .group_by(SURVEY_ID, maintain_order=True)
        .agg(pl.col(CANDIDATE_ID))
    )
    found = dict(ranked.iter_rows())
    return {s: list(found.get(s, []))[:n] for s, n in sizes.items()}


def baseline_scores(
    eval_set: pl.DataFrame,
    surveys: Collection[str],
    works: ReleaseWorks,
    eval_file: Path,
) -> tuple[dict[str, list[SurveyScore]], dict[str, str]]:
    """Every baseline's score on each eval survey of ``surveys`` (module docstring), and the
    baselines skipped with the reason.

    Args:
        eval_set: the eval table (:func:`pipeline.evaluate.evalset.load_eval_set`).
        surveys: the surveys a bibliography is given for; others are not scored.
        works: the release's works (:func:`pipeline.evaluate.bibliography.score.load_release_works`).
        eval_file: the release's eval reading lists (its folder holds the baselines file
            and the corpus).

    Raises:
        BibliographyError: the baselines file differs from the release's record.
    """

    frame = eval_set.filter(pl.col(SURVEY_ID).is_in(list(surveys)))
    visible = answer_free(frame)  # a baseline reads what a system reads
    frame = frame.select(SURVEY_ID, CANDIDATE_ID, LABEL).with_columns(
        # popularity is judgment-side (schema.POPULARITY_COLUMNS): a reference, as in evaluate
        popularity_scores(frame).alias(POPULARITY_CANDIDATES),
        bm25_scores(visible).alias(BM25_CANDIDATES),
        tie_keys(frame).alias(_TIE),
    )
    sizes = dict(
        frame.filter(pl.col(LABEL) >= 1).group_by(SURVEY_ID).len().sort(SURVEY_ID).iter_rows()
    )
    whole: dict[str, dict[str, list[str]] | None] = {
        POPULARITY: field_popularity_lists(eval_file.parent, sizes),
        BM25: corpus_bm25_lists(eval_set, eval_file, sizes),
    }
    skipped = {
        name: NO_BASELINES_FILE if name == POPULARITY else NO_CORPUS
        for name, lists in whole.items()
        if lists is None
    }
    out: dict[str, list[SurveyScore]] = {
        name: [] for name in BIBLIOGRAPHY_BASELINES if name not in skipped
    }
    named = {
        (name, survey_id): Bibliography(survey_id, tuple(map(id_reference, work_ids)), name)
        for name, lists in whole.items()
        if lists is not None
        for survey_id, work_ids in lists.items()
    }
    # one pass over the works table for every baseline bibliography, not one per survey
    index = references_index(list(named.values()), works)
    for (survey_id,), rows in frame.sort(SURVEY_ID).group_by([SURVEY_ID], maintain_order=True):
        labels = {w: int(g) for w, g in rows.select(CANDIDATE_ID, LABEL).iter_rows()}
        listed = rows.filter(pl.col(LABEL) >= 1).sort(
            [LABEL, _TIE, CANDIDATE_ID], descending=[True, False, False]
        )
        ranked = {
            ORACLE: listed[CANDIDATE_ID].to_list(),
            **{
                WITHOUT_TIER.format(tier=t): listed.filter(pl.col(LABEL) != t)[
                    CANDIDATE_ID
                ].to_list()
                for t in TIERS
            },
            **{
                name: rows.sort([name, _TIE, CANDIDATE_ID], descending=[True, False, False])[
                    CANDIDATE_ID
                ]
                .head(listed.height)
                .to_list()
                for name in (POPULARITY_CANDIDATES, BM25_CANDIDATES)
            },
        }
        for name, work_ids in ranked.items():
            out[name].append(score_survey(survey_id, _bibliography(work_ids, labels), labels))
        for name, lists in whole.items():
            if lists is None:
                continue
            bibliography = named.get((name, survey_id)) or Bibliography(survey_id, (), name)
            resolved = resolve(bibliography, works, index)
            out[name].append(score_survey(survey_id, resolved, labels))
    return out, skipped
