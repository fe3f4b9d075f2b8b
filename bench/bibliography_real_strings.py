"""How often a real reference string, its identifiers stripped, resolves by title alone to
the right work (issue 39, "resolution accuracy on real raw strings").

The real records (the bundled 2022 sample and 2024 preview, :func:`bench.real_corpus.real_lines`)
carry bib entries whose identity is known: an arXiv id, DOI or OpenAlex id. Entries sharing
any of these name one work. Each such entry's raw string, with its URLs, DOIs and arXiv
ids cut out, is resolved as a generated reference is
(:func:`pipeline.evaluate.bibliography.score.resolve`), against an index keyed as a release keys
its works, built without the string itself (leave one out), so it cannot find itself:

* the title key of every *other* raw string citing the work (as ``candidate_raw``);
* the title of the work when it is one of the corpus papers (as ``candidate_title``).

No identifier is indexed, so only titles resolve. Outcomes: ``right`` (the one work named is
the entry's), ``wrong`` (another work), ``ambiguous``, ``unmatched``; ``resolvable`` counts
the entries whose work has a key at all (another citing string with a title key, or a
corpus title) — the others cannot come back by title from these records.

Run: ``python -m bench.bibliography_real_strings``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from pipeline.core import schema as S
from pipeline.evaluate.bibliography import score as B
from pipeline.rules import aliases as A
from pipeline.rules import ids
from pipeline.rules import titles as T

# what an identifier looks like in a raw string: URLs, DOIs, arXiv ids (new and old style)
_IDENTIFIER = re.compile(
    r"(?:https?|ftp)://\S+|\bwww\.\S+|\bdoi:?\s*10\.\S+|\b10\.\d{4,9}/\S+"
    r"|\barxiv:?\s*(?:abs/)?\S+|\b\d{4}\.\d{4,5}(?:v\d+)?\b|\b[a-z-]+(?:\.[A-Z]{2})?/\d{7}\b",
    re.IGNORECASE,
)
OUTCOMES = ("right", "wrong", "ambiguous", "unmatched")
# the one survey every string is resolved for; its works are indexed by hand (a WorkIndex)
_NO_TABLE = B.ReleaseWorks(
    {"real": {}}, frozenset(), pl.LazyFrame(schema=S.polars_schema(S.WORKS_TABLE))
)
HAND_TITLED = ("reference_titles.tsv", "reference_titles_2.tsv")


def strip_identifiers(raw: str) -> str:
    """A raw string without its URLs, DOIs and arXiv ids."""
    return " ".join(_IDENTIFIER.sub(" ", raw).split())


def _entry_aliases(entry: dict) -> list[str]:
    found = entry.get("ids") or {}
    out = []
    if arxiv := ids.normalize_arxiv(found.get("arxiv_id")):
        out.append(A.ARXIV_PREFIX + arxiv)
    if doi := ids.normalize_doi(found.get("doi")):
        out.append(A.DOI_PREFIX + doi)
    if openalex := ids.normalize_openalex(found.get("open_alex_id")):
        out.append(A.OPENALEX_PREFIX + openalex)
    return out


def known_entries(records: Iterable[dict]) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """``(work, raw)`` of every bib entry with an identifier and a raw string (a work: the
    smallest alias of the entries linked by shared aliases), and the corpus papers' titles by
    work."""
    records = list(records)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    entries = []
    for record in records:
        for entry in (record.get("bib_entries") or {}).values():
            aliases = _entry_aliases(entry)
            if aliases and entry.get("bib_entry_raw"):
                for alias in aliases[1:]:
                    a, b = sorted((find(aliases[0]), find(alias)))
                    parent[b] = a
                entries.append((aliases[0], entry["bib_entry_raw"]))
    titles = {}
    for record in records:
        meta = record.get("metadata") or {}
        arxiv = ids.normalize_arxiv(meta.get("id") or record.get("paper_id"))
        if arxiv and (A.ARXIV_PREFIX + arxiv) in parent and meta.get("title"):
            titles[find(A.ARXIV_PREFIX + arxiv)] = meta["title"]
    return [(find(alias), raw) for alias, raw in entries], titles


def measure(records: Iterable[dict]) -> dict[str, int]:
    """The outcome counts (module docstring) over the records' identified entries."""
    entries, titles = known_entries(records)
    frame = pl.DataFrame(
        {"row": list(range(len(entries))), "raw": [raw for _, raw in entries]},
        schema={"row": pl.Int64, "raw": pl.String},
    )
    raw_keys = dict(
        T.segment_keys_per_string(frame, "raw", ["row"])
        .filter(pl.col(T.SEGMENT_RANK) == 0)
        .select("row", T.KEY)
        .collect()
        .iter_rows()
    )
    title_frame = pl.DataFrame(
        {S.WORK_ID: list(titles), S.TITLE: list(titles.values())},
        schema={S.WORK_ID: pl.String, S.TITLE: pl.String},
    )
    by_title: dict[str, set[str]] = {}
    for work, key in (
        T.corpus_title_keys(title_frame.lazy()).drop_nulls(T.KEY).collect().iter_rows()
    ):
        by_title.setdefault(key, set()).add(work)
    raw_owners: dict[str, Counter[str]] = {}  # key -> work -> strings with that title key
    for row, key in raw_keys.items():
        raw_owners.setdefault(key, Counter())[entries[row][0]] += 1
    works_with_raw_key = Counter(entries[row][0] for row in raw_keys)
    titled_works = {w for ws in by_title.values() for w in ws}
    outcomes: Counter[str] = Counter()
    resolvable = 0
    for row, (work, raw) in enumerate(entries):
        own = raw_keys.get(row)
        # leave one out: this string's own title key does not key its work
        by_raw = {
            key: frozenset(w for w, n in owners.items() if n - (key == own and w == work) > 0)
            for key, owners in raw_owners.items()
        }
        resolvable += work in titled_works or works_with_raw_key[work] - (own is not None) > 0
        index = B.WorkIndex(
            {},
            {k: frozenset(v) for k, v in by_title.items()},
            {k: v for k, v in by_raw.items() if v},
        )
        bibliography = B.Bibliography("real", (B.Reference(raw=strip_identifiers(raw)),))
        (resolved,) = B.resolve(bibliography, _NO_TABLE, index)
        if resolved.cls == B.AMBIGUOUS:
            outcomes["ambiguous"] += 1
        elif resolved.work_id is None:
            outcomes["unmatched"] += 1
        else:
            outcomes["right" if resolved.work_id == work else "wrong"] += 1
    return {"entries": len(entries), "resolvable": resolvable} | {o: outcomes[o] for o in OUTCOMES}


def measure_titled(rows: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Real raw strings against their works' titles written by hand: each ``(title, raw)``
    row with a title is one work keyed by that title (as a release keys a work by its
    ``candidate_title``: a corpus or OpenAlex title); each raw string, identifiers stripped,
    is resolved against all of them. ``spurious`` counts the strings without a title
    (``title`` empty) that resolve to some work all the same."""
    rows = list(rows)
    titled = pl.DataFrame(
        {S.WORK_ID: [str(i) for i, (t, _) in enumerate(rows) if t],
         S.TITLE: [t for t, _ in rows if t]},
        schema={S.WORK_ID: pl.String, S.TITLE: pl.String},
    )  # fmt: skip
    by_title: dict[str, set[str]] = {}
    for work, key in T.corpus_title_keys(titled.lazy()).drop_nulls(T.KEY).collect().iter_rows():
        by_title.setdefault(key, set()).add(work)
    index = B.WorkIndex(by_title={k: frozenset(v) for k, v in by_title.items()})
    outcomes: Counter[str] = Counter()
    for i, (title, raw) in enumerate(rows):
        bibliography = B.Bibliography("real", (B.Reference(raw=strip_identifiers(raw)),))
        (resolved,) = B.resolve(bibliography, _NO_TABLE, index)
        if not title:
            outcomes["spurious"] += resolved.work_id is not None or resolved.cls == B.AMBIGUOUS
        elif resolved.cls == B.AMBIGUOUS:
            outcomes["ambiguous"] += 1
        elif resolved.work_id is None:
            outcomes["unmatched"] += 1
        else:
            outcomes["right" if resolved.work_id == str(i) else "wrong"] += 1
    n_titled = sum(1 for t, _ in rows if t)
    return (
        {"strings": len(rows), "titled": n_titled}
        | {o: outcomes[o] for o in OUTCOMES}
        | {"spurious": outcomes["spurious"]}
    )


def main() -> None:
    """Print the figures on the bundled real records and the hand-titled strings."""
    from bench.real_corpus import real_lines

    print("identified entries, leave one out:")
    print(json.dumps(measure(json.loads(line) for line in real_lines()), indent=1))
    fixtures = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
    print("hand-titled strings against their titles:")
    print(json.dumps(measure_titled(hand_titled(fixtures)), indent=1))


def hand_titled(fixtures: Path) -> list[tuple[str, str]]:
    """``(title, raw)`` of the 100 hand-titled real strings (``tests/fixtures``, SOURCE.md)."""
    rows = []
    for name in HAND_TITLED:
        frame = pl.read_csv(fixtures / name, separator="\t", quote_char='"')
        rows += frame.select(pl.col("title").fill_null(""), "raw").iter_rows()
    return rows


if __name__ == "__main__":
    main()
