"""A bibliography file or folder scored against a release: the whole report.

The pieces live apart: reading, resolution, metrics, intervals and tests in
:mod:`pipeline.evaluate.bibliography.score`, the baselines in
:mod:`pipeline.evaluate.bibliography.baselines`, per-section coverage in
:mod:`pipeline.evaluate.bibliography.aspects`; this module puts them in one report, so
none of them imports another's caller.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.core.files import file_identity
from pipeline.core.release_files import READING_LISTS_FILE, WORKS_TABLE_FILE
from pipeline.evaluate.bibliography.aspects import aspect_coverage, load_aspects
from pipeline.evaluate.bibliography.baselines import baseline_scores
from pipeline.evaluate.bibliography.score import (
    CLASSES,
    RUN_NAME,
    BibliographyEvaluation,
    BibliographyInput,
    ReleaseWorks,
    eval_survey_ids,
    evaluate_bibliographies,
    load_release_works,
    macro_means,
    paired_tests,
    read_input,
    run_metrics,
    with_intervals,
)
from pipeline.evaluate.evalset import load_eval_set
from pipeline.evaluate.scoring.stats import CI_LEVEL


def _input_identity(path: Path, given: BibliographyInput) -> dict[str, Any]:
    """A file's name and sha256; a folder's name, its lists' and its skipped files' counts."""
    if not path.is_dir():
        return file_identity(path)
    return {
        "name": path.name,
        "files": [file_identity(Path(b.where)) for b in given.bibliographies],
        "skipped_files": given.skipped_files,
    }


def evaluate_file(
    release: Path,
    path: Path,
    *,
    as_run: bool = True,
    baselines: bool = True,
    aspects: bool = False,
    against: Path | None = None,
    bootstrap_samples: int = 1000,
    seed: int = 7,
) -> dict[str, Any]:
    """Read, resolve and score a bibliography file or folder against a release folder; the
    report, with bootstrap intervals of the means, the baselines on the eval surveys it
    gives (:mod:`pipeline.evaluate.bibliography.baselines`) and, given ``against`` (a second
    bibliography of the same surveys), the paired tests of the first against it; with
    ``aspects``, the per-section coverage of the survey's aspects
    (:mod:`pipeline.evaluate.bibliography.aspects`).

    Raises:
        BibliographyError: a malformed line or a survey that is not in the release, or an
            ``against`` bibliography that shares no survey with the first.
        FileNotFoundError: no such file, or a folder that is not a release.
    """
    works = load_release_works(release)
    given = read_input(path)
    evaluation = evaluate_bibliographies(given.bibliographies, works)
    eval_file = release / READING_LISTS_FILE.format(split="eval")
    works_file = release / WORKS_TABLE_FILE
    report = evaluation.report(
        {
            "bibliography": _input_identity(path, given),
            "eval_file": file_identity(eval_file),
            # null: a release built before the works table, resolved against its candidates
            "works_table": file_identity(works_file) if works.complete else None,
        }
    )
    report["metrics"] = with_intervals(
        evaluation.means, evaluation.scores, bootstrap_samples, seed, key=RUN_NAME
    )
    report["bootstrap"] = {"samples": bootstrap_samples, "seed": seed, "level": CI_LEVEL}
    if against is not None:
        other_input = read_input(against)
        other = evaluate_bibliographies(other_input.bibliographies, works)
        report["paired"] = {
            "against": _input_identity(against, other_input),
            "against_counts": other.counts,
            "against_metrics": with_intervals(
                other.means, other.scores, bootstrap_samples, seed, key="against"
            ),
            **paired_tests(evaluation.scores, other.scores, bootstrap_samples, seed),
        }
    report["baselines"] = (
        baseline_report(evaluation, works, eval_file, bootstrap_samples, seed)
        if baselines
        else None
    )
    if aspects:
        report["aspects"] = aspect_coverage(
            given.bibliographies, evaluation.scores, load_aspects(release)
        )
    report["run"] = run_metrics(evaluation, release) if as_run else None
    return report


def baseline_report(
    evaluation: BibliographyEvaluation,
    works: ReleaseWorks,
    eval_file: Path,
    n_resamples: int,
    seed: int,
) -> dict[str, Any] | None:
    """Each baseline's counts and means with intervals on the eval surveys the bibliographies
    give, and the paired tests of the bibliography against it (:func:`paired_tests`); a
    baseline the release cannot give, with the reason; None when they give no eval survey."""
    surveys = {s.survey_id for s in evaluation.scores} & eval_survey_ids(eval_file.parent)
    if not surveys:
        return None
    out: dict[str, Any] = {}
    scored, skipped = baseline_scores(load_eval_set(eval_file), surveys, works, eval_file)
    for name, scores in scored.items():
        totals = Counter[str]()
        for s in scores:
            totals.update(s.counts)
        tested = paired_tests(evaluation.scores, scores, n_resamples, seed, key=f"vs {name}")
        out[name] = {
            "n_surveys": len(scores),
            "counts": {c: totals[c] for c in CLASSES}
            | {"references": sum(s.n_references for s in scores)},
            "metrics": with_intervals(macro_means(scores), scores, n_resamples, seed, key=name),
            # the bibliography minus the baseline, on the eval surveys it gives
            "paired": tested["metrics"],
        }
    out |= {name: {"skipped": why} for name, why in skipped.items()}
    return out
