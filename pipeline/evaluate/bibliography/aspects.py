"""Per-section coverage: a generated survey's bibliography given per section heading,
scored against the survey's aspects (the release's ``aspects/`` lists, one per topical
section of the expert's survey).

**Input.** The references keep the heading they are listed under (``section``): a Markdown
list's heading above them, or a JSONL line's ``sections`` object (heading -> references).

**Heading rule.** A heading's words are the words of its title key
(:func:`pipeline.rules.titles.title_key`) that are not all digits (section numbers such as
``3.2`` go) and not function words (:data:`FUNCTION_WORDS`: ``of``, ``and``, ``for`` ...),
each reduced to its singular by :func:`singular` (``Approaches`` and ``Approach``,
``Strategies`` and ``Strategy`` are one word: a generator writes either). A generated heading is matched to the survey's aspect whose heading has the
highest Jaccard similarity of words with it (shared words / words of either), when that
is at least :data:`MIN_SIMILARITY`; on equal similarity the aspect first in the survey
(lowest ``aspect_rank``, then ``aspect_id``). Several headings may match one aspect; a
heading that matches none is counted (``headings_unmatched``) and its references cover no
aspect.

**Metrics** per aspect, ``listed`` = the aspect's works with label >= 1:

* ``coverage``: listed works named by a reference under a heading matched to the aspect /
  listed (0 when no heading matched it);
* ``coverage_anywhere``: listed works named anywhere in the bibliography / listed.

A reference names a work when it resolved to one (every class with a work, duplicates
too: a work cited again under another heading counts there). Means are over the aspects of
the surveys the bibliography gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.release_files import ASPECT_READING_LISTS_FILE
from pipeline.evaluate.bibliography.score import Bibliography, SurveyScore
from pipeline.rules.titles import title_key

MIN_SIMILARITY = 0.5
COVERAGE = "coverage"
COVERAGE_ANYWHERE = "coverage_anywhere"
# Words that join a heading's terms and name none: they add to the union of two headings'
# words without ever being the reason two headings are the same section. "a" is not one:
# in headings it is as often a label (``Appendix A``) as an article.
FUNCTION_WORDS = frozenset(
    "an and the of for in on to with via by from its their vs versus or".split()
)
# English plurals that end like a singular does (``analysis``, ``bus``, ``class``) keep their s
_KEEP_S = ("ss", "us", "is")


def singular(word: str) -> str:
    """A heading word's singular by English's regular plural endings (a light stemmer in the
    spirit of Harman's S-stemmer, which leaves ``approaches`` -> ``approache``): ``-ies`` ->
    ``-y``; ``-es`` after ``s``, ``x``, ``z``, ``ch``, ``sh`` dropped; else a final ``-s``
    dropped unless the word ends as :data:`_KEEP_S` does or is at most three letters."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(_KEEP_S):
        return word[:-1]
    return word


def heading_words(headings: Sequence[str | None], *, stem: bool = True) -> list[frozenset[str]]:
    """The word set of each heading (module docstring's rule).

    Args:
        stem: False gives the rule before function words and plurals were folded, for
            ``bench/heading_rule.py``'s comparison.
    """
    keys = pl.select(title_key(pl.Series(list(headings), dtype=pl.String)).alias("k"))["k"]
    out = []
    for key in keys.to_list():
        words = [w for w in (key or "").split() if not w.isdigit()]
        if stem:
            words = [singular(w) for w in words if w not in FUNCTION_WORDS]
        out.append(frozenset(words))
    return out


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared words / words of either (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def load_aspects(release: Path) -> pl.DataFrame:
    """``(survey_id, aspect_id, aspect_heading, aspect_rank, candidate_id, label)`` of every
    split's aspect lists.

    Raises:
        FileNotFoundError: a release built without aspects.
    """
    files = [release / ASPECT_READING_LISTS_FILE.format(split=split) for split in S.SPLIT_NAMES]
    present = [f for f in files if f.is_file()]
    if not present:
        raise FileNotFoundError(f"{release}: no aspects/ reading lists (a release without aspects)")
    columns = [S.SURVEY_ID, S.ASPECT_ID, S.ASPECT_HEADING, S.ASPECT_RANK, S.CANDIDATE_ID, S.LABEL]
    return pl.concat([pl.read_parquet(f, columns=columns) for f in present])


def match_headings(
    headings: Sequence[str], aspects: Sequence[tuple[str, str, int]], *, stem: bool = True
) -> dict[str, str | None]:
    """Each generated heading's aspect (module docstring's rule), or None.

    Args:
        headings: the generated headings.
        aspects: ``(aspect_id, aspect_heading, aspect_rank)`` of one survey.
        stem: passed to :func:`heading_words`.
    """
    ordered = sorted(aspects, key=lambda a: (a[2], a[0]))
    aspect_words = heading_words([a[1] for a in ordered], stem=stem)
    out: dict[str, str | None] = {}
    for heading, words in zip(headings, heading_words(headings, stem=stem), strict=True):
        best, best_similarity = None, MIN_SIMILARITY
        for (aspect_id, _, _), other in zip(ordered, aspect_words, strict=True):
            similarity = jaccard(words, other)
            if similarity > best_similarity or (best is None and similarity >= best_similarity):
                best, best_similarity = aspect_id, similarity
        out[heading] = best
    return out


def aspect_coverage(
    bibliographies: Sequence[Bibliography], scores: Sequence[SurveyScore], aspects: pl.DataFrame
) -> dict[str, Any]:
    """Per survey and aspect, the coverage (module docstring), the headings' matches, and the
    means over aspects."""
    per_survey: dict[str, Any] = {}
    values: dict[str, list[float]] = {COVERAGE: [], COVERAGE_ANYWHERE: []}
    headings_matched = headings_unmatched = 0
    by_survey = {s.survey_id: s for s in scores}
    for bibliography in bibliographies:
        rows = aspects.filter(pl.col(S.SURVEY_ID) == bibliography.survey_id)
        if rows.is_empty():
            continue
        resolved = by_survey[bibliography.survey_id].resolved
        named = [
            (ref.section, r.work_id)
            for ref, r in zip(bibliography.references, resolved, strict=True)
            if r.work_id is not None
        ]
        headings = list(dict.fromkeys(ref.section for ref in bibliography.references if ref.section))  # fmt: skip
        listed_aspects = rows.select(S.ASPECT_ID, S.ASPECT_HEADING, S.ASPECT_RANK).unique()
        matches = match_headings(headings, list(listed_aspects.iter_rows()))
        headings_matched += sum(1 for a in matches.values() if a is not None)
        headings_unmatched += sum(1 for a in matches.values() if a is None)
        anywhere = {w for _, w in named}
        entries = []
        for (aspect_id, heading), aspect_rows in rows.sort(S.ASPECT_RANK, S.ASPECT_ID).group_by(
            [S.ASPECT_ID, S.ASPECT_HEADING], maintain_order=True
        ):
            listed = set(aspect_rows.filter(pl.col(S.LABEL) >= 1)[S.CANDIDATE_ID])
            if not listed:
                continue
            in_section = {w for section, w in named if section and matches[section] == aspect_id}
            entry = {
                S.ASPECT_ID: aspect_id,
                S.ASPECT_HEADING: heading,
                "headings": [h for h, a in matches.items() if a == aspect_id],
                "n_listed": len(listed),
                COVERAGE: len(listed & in_section) / len(listed),
                COVERAGE_ANYWHERE: len(listed & anywhere) / len(listed),
            }
            values[COVERAGE].append(entry[COVERAGE])
            values[COVERAGE_ANYWHERE].append(entry[COVERAGE_ANYWHERE])
            entries.append(entry)
        per_survey[bibliography.survey_id] = {"headings": matches, "aspects": entries}
    return {
        "rule": (
            f"Jaccard of heading words (function words dropped, plurals folded) >= "
            f"{MIN_SIMILARITY}, best aspect, first on ties"
        ),
        "n_aspects": len(values[COVERAGE]),
        "headings_matched": headings_matched,
        "headings_unmatched": headings_unmatched,
        "metrics": {name: (sum(v) / len(v) if v else None) for name, v in values.items()},
        "per_survey": per_survey,
    }
