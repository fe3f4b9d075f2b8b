"""Hard negatives: hand-made upstream tables with expected outputs written out by hand,
then (end to end) every row of a synthetic-corpus release checked against the rules."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import date
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.config import NEGATIVE_SAMPLINGS, Config, load_config
from pipeline.core.files import file_record, write_json
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Limits
from pipeline.engine.workdir import reduce_scratch_dir
from pipeline.rules import visible as V
from pipeline.stages import GRAPH
from pipeline.stages.negatives import rules as NR
from pipeline.stages.negatives import sampling as NS
from pipeline.stages.negatives.strategies import HARDNESS, STRATEGIES

# --------------------------------------------------------------------- hand-made work dir
# Surveys (all cs.CL except S3):          S2 2021-03-01 < S1 2021-05-15 < S3 2022-01-10 < S4 2023-02-01
S1, S2, S3, S4 = "2101.00001", "2102.00002", "2201.00003", "2301.00004"
SURVEYS = {
    S1: ("cs.CL", date(2021, 5, 15)),
    S2: ("cs.CL", date(2021, 3, 1)),
    S3: ("cs.CV", date(2022, 1, 10)),
    S4: ("cs.CL", date(2023, 2, 1)),
}
A, B, C, D, E = (
    "arxiv:1901.00001",
    "doi:10.1/b",
    "doi:10.1/c",
    "arxiv:2104.00001",
    "arxiv:2107.00001",
)
F, G, H, M = "arxiv:1801.00001", "doi:10.1/g", "arxiv:2001.00001", "arxiv:2105.09999"
K = "arxiv:1905.00005"  # a cs.LG corpus paper that a cs.CL survey cites
P1, P2 = "doi:10.1/p1", "doi:10.1/p2"
# work -> (corpus paper id or None, categories, known_date, extra aliases)
WORKS = {
    A: ("1901.00001", ["cs.CL"], date(2019, 1, 15), []),
    B: (None, None, None, []),
    C: (None, None, None, []),
    D: ("2104.00001", ["cs.CL"], date(2021, 4, 20), []),
    E: ("2107.00001", ["cs.CL"], date(2021, 7, 1), []),
    F: ("1801.00001", ["cs.CL"], date(2018, 1, 10), ["doi:10.1/f"]),
    G: (None, None, None, []),
    H: ("2001.00001", ["cs.CV", "cs.CL"], date(2020, 1, 5), []),
    K: ("1905.00005", ["cs.LG"], date(2019, 5, 10), []),
    M: (None, None, date(2021, 5, 1), []),  # arXiv id outside the corpus: month only
    P1: (None, None, None, []),
    P2: (None, None, None, []),
}
# (survey, work) -> label; every labelled pair is also a resolved bib entry of the survey
LABELS = {
    (S1, G): 4, (S1, P1): 3, (S1, P2): 1,
    (S2, A): 2, (S2, C): 1, (S2, F): 3, (S2, G): 4, (S2, K): 1,
    (S3, B): 1, (S3, H): 3,
    (S4, D): 4, (S4, E): 3, (S4, M): 1,
}  # fmt: skip
# two ordinary papers citing A (for candidate_prior_citations)
X1, X2 = "2005.00001", "2106.00001"
OTHER_PAPERS = {X1: ("cs.CL", date(2020, 5, 1), [A, G]), X2: ("cs.CL", date(2021, 6, 10), [A])}

# What the rules admit, by hand (see the module docstring of pipeline.stages.negatives.rules):
# S1: A own, C via S2 (earlier survey, no date), D own (2021-04-20 < 2021-05-15), H own (cs.CL among
#     its categories), K via S2 (a cs.LG corpus paper a cs.CL survey cites). Not B (cs.CV only),
#     E (later), F (S1 cites doi:10.1/f, an alias of F, in an entry that did not resolve),
#     M (month 2021-05 ends after S1).
# S2: H only. D, E, M later; P1, P2 undated and first cited by S1, which is later than S2.
# S3: none (no other cs.CV survey; H is cited by S3 itself): flagged.
# S4: A, C, F, G, H, K, P1, P2 (B is cs.CV only; D, E, M cited by S4).
EXPECTED_CANDIDATES = {
    S1: {A: "own_category", C: "citing_survey_category", D: "own_category", H: "own_category",
         K: "citing_survey_category"},
    S2: {H: "own_category"},
    S3: {},
    S4: {
        A: "own_category", C: "citing_survey_category", F: "own_category", G: "citing_survey_category",
        H: "own_category", K: "citing_survey_category", P1: "citing_survey_category",
        P2: "citing_survey_category",
    },
}  # fmt: skip
# (n_citing_surveys, n_citing_surveys_same_category) of each candidate pair: OTHER surveys citing
# the work first posted strictly before the survey (all, and those of its primary category).
# D is cited by S4 only, which is later than S1: 0 for S1 (all-time it would be 1).
# H is cited by S3 (cs.CV, 2022-01-10): before S4, but not of S4's category.
PRIOR_COUNTS = {
    (S1, A): (1, 1), (S1, C): (1, 1), (S1, D): (0, 0), (S1, H): (0, 0), (S1, K): (1, 1),
    (S2, H): (0, 0),
    (S4, A): (1, 1), (S4, C): (1, 1), (S4, F): (1, 1), (S4, G): (2, 2), (S4, H): (1, 0), (S4, K): (1, 1),
    (S4, P1): (1, 1), (S4, P2): (1, 1),
}  # fmt: skip


def _write(df: pl.DataFrame, schema, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(S.check(df.to_arrow(), schema, path.name), path)


def _cited(paper: str) -> list[str]:
    if paper in OTHER_PAPERS:
        return OTHER_PAPERS[paper][2]
    return sorted(w for (s, w) in LABELS if s == paper)


def build_handmade(out: Path) -> None:
    """Upstream tables (extract, works, surveys, labels) for the hand-made case, in ``out``."""
    papers = {
        **{s: (c, d) for s, (c, d) in SURVEYS.items()},
        **{x: (c, d) for x, (c, d, _) in OTHER_PAPERS.items()},
    }
    for pid, cats, known, _ in WORKS.values():
        if pid is not None:
            papers[pid] = (cats[0], known)
    rows = []
    for pid, (cat, d) in sorted(papers.items()):
        cats = WORKS[f"arxiv:{pid}"][1] if f"arxiv:{pid}" in WORKS else [cat]
        rows.append(
            {
                S.PAPER_ID: pid,
                S.TITLE: f"Title of {pid}",
                S.ABSTRACT: f"Abstract of {pid}.",
                S.CATEGORIES: cats,
                S.PRIMARY_CATEGORY: cats[0],
                S.FIRST_VERSION_DATE: d,
                S.UPDATE_DATE: d,
                S.LICENSE: None,
                S.DOI: None,
                S.N_BIB_ENTRIES: len(_cited(pid)),
                S.LAYOUT: "2022",
                S.SOURCE_FILE: "hand.jsonl",
                S.LINE_NUMBER: len(rows) + 1,
            }
        )
    _write(
        pl.DataFrame(rows, schema=S.polars_schema(S.PAPERS)),
        S.PAPERS,
        out / "extract/papers/hand.parquet",
    )

    refs, cites = [], []
    for pid in sorted(papers):
        for i, w in enumerate(_cited(pid)):
            kind, _, value = w.partition(":")
            refs.append(
                {
                    S.PAPER_ID: pid,
                    S.REF_ID: f"b{i}",
                    S.ARXIV_ID: value if kind == "arxiv" else None,
                    S.DOI: value if kind == "doi" else None,
                    S.OPENALEX_ID: None,
                    S.RAW: f"Raw {w}",
                    S.SOURCE_FILE: "hand.jsonl",
                }
            )
            cites.append({S.PAPER_ID: pid, S.REF_ID: f"b{i}", S.WORK_ID: w})
    # S1 cites F under its DOI alias in an entry that did not resolve
    refs.append(
        {
            S.PAPER_ID: S1,
            S.REF_ID: "bf",
            S.ARXIV_ID: None,
            S.DOI: "10.1/f",
            S.OPENALEX_ID: None,
            S.RAW: "F, by DOI",
            S.SOURCE_FILE: "hand.jsonl",
        }
    )
    cites.append({S.PAPER_ID: S1, S.REF_ID: "bf", S.WORK_ID: None})
    _write(
        pl.DataFrame(refs, schema=S.polars_schema(S.REFERENCES)),
        S.REFERENCES,
        out / "extract/references/hand.parquet",
    )
    _write(
        pl.DataFrame(cites, schema=S.polars_schema(S.CITES)), S.CITES, out / "works/cites.parquet"
    )

    works = []
    for w, (pid, cats, known, extra) in sorted(WORKS.items()):
        works.append(
            {
                S.WORK_ID: w,
                S.ALIASES: sorted([w, *extra]),
                S.PAPER_ID: pid,
                S.TITLE: f"Title of {w}" if pid else None,
                S.ABSTRACT: f"Abstract of {w}." if pid else None,
                S.CATEGORIES: cats,
                S.FIRST_VERSION_DATE: known if pid else None,
                S.RAW: None if pid else f"Raw {w}",
                S.PARSED_TITLE: None if pid else f"parsed title of {w}",
                S.KNOWN_DATE: known,
                S.DATE_SOURCE: None if known is None else "corpus" if pid else "arxiv_id",
                S.N_CITING_PAPERS: sum(1 for c in cites if c[S.WORK_ID] == w),
            }
        )
    _write(
        pl.DataFrame(works, schema=S.polars_schema(S.WORKS)), S.WORKS, out / "works/works.parquet"
    )

    surveys = [
        {
            S.PAPER_ID: s,
            S.TITLE: f"Title of {s}",
            S.PRIMARY_CATEGORY: c,
            S.FIRST_VERSION_DATE: d,
            S.N_REFS: len(_cited(s)) + (s == S1),
            S.N_RESOLVED: len(_cited(s)),
            S.RESOLVED_FRAC: len(_cited(s)) / (len(_cited(s)) + (s == S1)),
            S.REASON: "title",
        }
        for s, (c, d) in sorted(SURVEYS.items())
    ]
    _write(
        pl.DataFrame(surveys, schema=S.polars_schema(S.SURVEYS)),
        S.SURVEYS,
        out / "surveys/surveys.parquet",
    )

    labels = []
    for (s, w), label in sorted(LABELS.items()):
        roles = {c: 0 for c in S.ROLE_COUNT_COLUMNS} | {
            "n_related_work": label,
            "n_introduction": 1,
        }
        labels.append(
            {S.SURVEY_ID: s, S.WORK_ID: w, S.LABEL: label, S.N_MENTIONS: label + 1, **roles}
        )
    _write(
        pl.DataFrame(labels, schema=S.polars_schema(S.LABELS)),
        S.LABELS,
        out / "labels/labels.parquet",
    )
    write_json(out / "works/_SUCCESS.json", {"counts": {}})
    write_json(out / "surveys/_SUCCESS.json", {"counts": {}})
    write_json(out / "labels/_SUCCESS.json", {"counts": {}})
    run_stage(out, "openalex", _cfg())  # no key, no snapshot: no records


def run_stage(out: Path, name: str, cfg: Config, limits: Limits | None = None) -> dict:
    """Call a reduce stage's function directly, writing into ``out/<name>/`` (as the runner
    would, scratch folder removed)."""
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    ctx = ReduceContext(
        out=out, cfg=cfg, stage=GRAPH[name], tmp_dir=d, stages=GRAPH, limits=limits or Limits()
    )
    try:
        counts = GRAPH[name].fn(ctx)
    finally:
        shutil.rmtree(reduce_scratch_dir(d), ignore_errors=True)
    files = {
        p.relative_to(d).as_posix(): file_record(p)
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name != "_SUCCESS.json"
    }
    write_json(d / "_SUCCESS.json", {"counts": counts, "files": files})
    return counts


def _cfg(**negatives) -> Config:
    return load_config(overrides={"negatives": negatives} if negatives else None)


def _negatives(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "negatives" / "negatives.parquet")


# --------------------------------------------------------------------- hand-made tests
def _every_candidate(out: Path) -> pl.DataFrame:
    """Every admissible pair with its source and counts, drawn by the stage itself: with the
    whole pool considered and far more negatives wanted than there are candidates, the last
    matching round (survey only) takes every candidate."""
    run_stage(out, "negatives", _cfg(negatives_per_positive=1000.0, candidates_per_negative=0))
    got = _negatives(out)
    per = pl.read_parquet(out / "negatives" / "negative_surveys.parquet")
    assert per[S.N_NEGATIVE_CANDIDATES].sum() == got.height  # every candidate was drawn
    return got


def test_candidates_follow_the_three_rules(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    got = _every_candidate(tmp_path)
    found: dict[str, dict[str, str]] = {s: {} for s in SURVEYS}
    for s, w, src in got.select(S.SURVEY_ID, S.WORK_ID, S.NEGATIVE_SOURCE).iter_rows():
        found[s][w] = src
    assert found == EXPECTED_CANDIDATES
    prior = {
        (s, w): (n, n_same)
        for s, w, n, n_same in got.select(
            S.SURVEY_ID, S.WORK_ID, S.N_CITING_SURVEYS, S.N_CITING_SURVEYS_SAME_CATEGORY
        ).iter_rows()
    }
    assert prior == PRIOR_COUNTS


def test_every_survey_gets_floor_ratio_times_positives_when_the_pool_allows(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    pool = _every_candidate(tmp_path)
    counts = run_stage(tmp_path, "negatives", _cfg())
    neg = _negatives(tmp_path)
    assert neg[S.LABEL].to_list() == [0] * neg.height
    n_pos = {s: sum(1 for (t, _) in LABELS if t == s) for s in SURVEYS}
    for s in SURVEYS:
        admissible = set(pool.filter(pl.col(S.SURVEY_ID) == s)[S.WORK_ID])
        got = neg.filter(pl.col(S.SURVEY_ID) == s)[S.WORK_ID].to_list()
        assert set(got) <= admissible and len(got) == min(n_pos[s], len(admissible)), s
    per = pl.read_parquet(tmp_path / "negatives" / "negative_surveys.parquet")
    s3 = per.filter(pl.col(S.SURVEY_ID) == S3).row(0, named=True)
    assert (s3[S.N_NEGATIVES], s3[S.N_SHORTFALL], s3[S.HAS_NEGATIVES]) == (0, 2, False)
    assert counts["surveys"] == 4 and counts["surveys_without_negatives"] == 1
    assert counts["negatives"] + counts["shortfall"] == counts["negatives_wanted"] == 13
    assert sum(counts["negatives_by_source"].values()) == counts["negatives"]
    assert sum(counts["negatives_by_match_round"].values()) == counts["negatives"]


def test_ratio_is_floored(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    run_stage(tmp_path, "negatives", _cfg(negatives_per_positive=0.5))
    got = _negatives(tmp_path).group_by(S.SURVEY_ID).len().sort(S.SURVEY_ID)
    # floor(0.5 * 3) = 1 for S1 and S4, floor(0.5 * 5) = 2 for S2 but it has 1 candidate
    assert dict(got.iter_rows()) == {S1: 1, S2: 1, S4: 1}


def _stratum(kind: str, in_domain: bool, age: int, citations: int, surveys: int) -> dict:
    return {
        V.TEXT_KIND: kind, S.IN_DOMAIN: in_domain, V.AGE_BIN: age, V.CITATIONS_BIN: citations,
        V.SURVEYS_BIN: surveys, NR.AGE_COARSE: age // 2, NR.CITATIONS_COARSE: (citations + 1) // 2,
        NR.AGE_KNOWN: age >= 0, NR.SURVEYS_COARSE: (surveys + 1) // 2,
    }  # fmt: skip


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows).with_columns(
        pl.col(
            V.AGE_BIN,
            V.CITATIONS_BIN,
            V.SURVEYS_BIN,
            NR.AGE_COARSE,
            NR.CITATIONS_COARSE,
            NR.SURVEYS_COARSE,
        ).cast(pl.Int8)
    )


# three positives of survey "s" and their strata; candidates a-e by hand
_POSITIVES = [
    {S.SURVEY_ID: "s", S.WORK_ID: "p1", NS.PAIR_HASH: 1, **_stratum("abstract", True, 2, 3, 1)},
    {S.SURVEY_ID: "s", S.WORK_ID: "p2", NS.PAIR_HASH: 2, **_stratum("raw_doi", False, -1, 0, 0)},
    {S.SURVEY_ID: "s", S.WORK_ID: "p3", NS.PAIR_HASH: 3, **_stratum("raw_doi", False, 3, 1, 0)},
]
_PAIRS = [  # pool 0 = A (cited by surveys), 1 = B (wider)
    {S.SURVEY_ID: "s", S.WORK_ID: "a", NR.POOL: 0, NS.PAIR_HASH: 9, HARDNESS: 0,
     **_stratum("abstract", True, 2, 3, 1)},  # p1's stratum exactly
    {S.SURVEY_ID: "s", S.WORK_ID: "b", NR.POOL: 1, NS.PAIR_HASH: 1, HARDNESS: 5,
     **_stratum("abstract", True, 2, 3, 1)},  # same, but pool B
    {S.SURVEY_ID: "s", S.WORK_ID: "c", NR.POOL: 0, NS.PAIR_HASH: 3, HARDNESS: 0,
     **_stratum("raw_doi", False, 0, 0, 0)},  # p2 but for its age: round 2 keeps popularity
    {S.SURVEY_ID: "s", S.WORK_ID: "d", NR.POOL: 0, NS.PAIR_HASH: 4, HARDNESS: 0,
     **_stratum("raw_doi", False, 5, 6, 0)},  # p3 only by kind, domain, known age: round 5
    {S.SURVEY_ID: "s", S.WORK_ID: "e", NR.POOL: 0, NS.PAIR_HASH: 5, HARDNESS: 0,
     **_stratum("raw_arxiv", False, 0, 0, 0)},  # no positive's kind: the last round only
]  # fmt: skip


def _match(slots: pl.DataFrame, pairs: pl.DataFrame, hardest: bool) -> pl.DataFrame:
    return NS.match(slots, pairs, STRATEGIES["hardest" if hardest else "hash"].prefer)


def _matched(per_positive: float, hardest: bool = False) -> dict[str, int]:
    got = _match(NS.slots(_frame(_POSITIVES), per_positive), _frame(_PAIRS), hardest)
    return dict(got.select(S.WORK_ID, S.MATCH_ROUND).iter_rows())


def test_matching_takes_the_positive_stratum_first_then_relaxes_it() -> None:
    # one slot per positive: p1 <- a (exact, pool A before B), p2 <- c (round 2), p3 <- d (round 5)
    assert _matched(1.0) == {"a": 0, "c": 2, "d": 5}
    # two per positive: b fills p1's second exact slot; e is the only candidate left (survey only)
    assert _matched(2.0) == {"a": 0, "b": 0, "c": 2, "d": 5, "e": 7}
    # floor(0.5 * 3) = 1 slot: positive i gets floor(0.5(i+1)) - floor(0.5i), so p2 gets it
    assert _matched(0.5) == {"c": 2}
    assert NS.slots(_frame(_POSITIVES), 1 / 3).height == 1


def test_hardest_orders_by_co_citation_within_the_stratum() -> None:
    # within p1's stratum the pool comes first, then hardness: a (pool A) still precedes b
    assert _matched(1.0, hardest=True) == {"a": 0, "c": 2, "d": 5}
    p1 = NS.slots(_frame(_POSITIVES[:1]), 1.0)
    pairs = _frame(_PAIRS).with_columns(pl.lit(0).alias(NR.POOL))  # both in pool A now
    assert _match(p1, pairs, hardest=True)[S.WORK_ID].to_list() == ["b"]  # hardness 5 > 0
    assert _match(p1, pairs, hardest=False)[S.WORK_ID].to_list() == ["b"]  # hash 1 < 9
    pairs = pairs.with_columns(
        pl.when(pl.col(S.WORK_ID) == "a")
        .then(0)
        .otherwise(pl.col(NS.PAIR_HASH))
        .alias(NS.PAIR_HASH)
    )
    assert _match(p1, pairs, hardest=False)[S.WORK_ID].to_list() == ["a"]  # hash 0 < 1
    assert _match(p1, pairs, hardest=True)[S.WORK_ID].to_list() == ["b"]  # hardness first


def test_seed_changes_the_draw_and_output_is_reproducible(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    run_stage(tmp_path, "negatives", _cfg())
    first = (tmp_path / "negatives" / "negatives.parquet").read_bytes()
    run_stage(tmp_path, "negatives", _cfg())
    assert (tmp_path / "negatives" / "negatives.parquet").read_bytes() == first
    draws = set()
    for seed in range(8):
        run_stage(tmp_path, "negatives", _cfg(seed=seed))
        draws.add(
            tuple(_negatives(tmp_path).filter(pl.col(S.SURVEY_ID) == S4)[S.WORK_ID].to_list())
        )
    assert len(draws) > 1


def test_survey_batches_do_not_change_the_output(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    run_stage(tmp_path, "negatives", _cfg())
    whole = {p.name: p.read_bytes() for p in (tmp_path / "negatives").glob("*.parquet")}
    run_stage(tmp_path, "negatives", _cfg(survey_batch_size=1))
    assert {p.name: p.read_bytes() for p in (tmp_path / "negatives").glob("*.parquet")} == whole


def _pool_order() -> pl.DataFrame:
    # one pool of 10 works in hash order: w0..w5 existed in 2019, w6..w9 only from 2021
    return pl.DataFrame(
        {
            S.PRIMARY_CATEGORY: ["cs.CL"] * 10,
            NR.POOL: pl.Series([0] * 10, dtype=pl.Int8),
            NS.POOL_POSITION: pl.Series(range(10), dtype=pl.Int64),
            S.WORK_ID: [f"w{i}" for i in range(10)],
            NS.EXISTS_FROM: [date(2019, 1, 1)] * 6 + [date(2021, 1, 1)] * 4,
        }
    )


def _windows(monkeypatch: pytest.MonkeyPatch, per_negative: int) -> dict[str, list[str]]:
    monkeypatch.setattr(NS, "WINDOW_FLOOR", 3)
    surveys = pl.DataFrame(
        {
            S.SURVEY_ID: ["small", "big", "early", "undated"],
            S.PRIMARY_CATEGORY: ["cs.CL"] * 4,
            S.SURVEY_DATE: [date(2020, 6, 1), date(2020, 6, 1), date(2018, 1, 1), None],
            S.N_POSITIVES: [2, 6, 2, 2],
        }
    )
    order = _pool_order()
    got = NS.window_pairs(
        NS.windows(surveys, order, pl.col(S.N_POSITIVES), per_negative, 13), order
    ).collect()
    return {
        s: got.filter(pl.col(S.SURVEY_ID) == s)[S.WORK_ID].to_list()
        for s in ("small", "big", "early", "undated")
    }


def test_window_is_a_cyclic_run_of_the_hash_order_scaled_to_the_works_that_existed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    got = _windows(monkeypatch, per_negative=1)
    # "small" wants 2 -> size max(1 * 2, floor 3) = 3 of the 6 works that existed before it:
    # ceil(3 * 10 / 6) = 5 consecutive works of the 10, from floor(h * 10 / 2**32)
    start = NS.id_hash(13, "small") * 10 // 2**32
    assert set(got["small"]) == {f"w{(start + j) % 10}" for j in range(5)}
    assert len(got["small"]) == 5
    assert set(got["big"]) == {f"w{i}" for i in range(10)}  # size 6 >= 6 that existed
    assert got["early"] == []  # nothing existed before it
    assert got["undated"] == []


def test_window_zero_means_the_whole_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _windows(monkeypatch, per_negative=0)
    assert len(got["small"]) == 10 and len(set(got["small"])) == 10


def _fmix32(x: int) -> int:
    """MurmurHash3's 32-bit finaliser in Python integers: the reference for ``fmix32_expr``."""
    x ^= x >> 16
    x = (x * 0x85EBCA6B) % 2**32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) % 2**32
    return x ^ (x >> 16)


def _pair_hash(seed: int, survey_id: str, work_id: str) -> int:
    """The pair hash the stage computes in Polars (``sampling.with_pair_hash``), in Python."""
    return _fmix32(NS.id_hash(seed, survey_id) ^ NS.id_hash(seed, work_id))


def test_pair_hash_is_pinned() -> None:
    # Values fixed once: a change here means every release's negatives change.
    assert NS.id_hash(13, S1) == int.from_bytes(
        hashlib.sha1(b"13\x1f2101.00001").digest()[:4], "big"
    )
    assert NS.id_hash(13, S1) == 1313759635
    assert _pair_hash(13, S1, A) == 1819063075
    assert _pair_hash(0, "2212.11774", "doi:10.1/x") == 879932002
    assert _fmix32(0) == 0 and _fmix32(1) == 0x514E28B7  # MurmurHash3 fmix32 test vector
    frame = pl.DataFrame({"x": [0, 1, 2**32 - 1]}, schema={"x": pl.UInt64})
    got = frame.select(NS.fmix32_expr(pl.col("x")))["x"].to_list()
    assert got == [_fmix32(v) for v in (0, 1, 2**32 - 1)]
    pairs = pl.LazyFrame({S.SURVEY_ID: [S1, "2212.11774"], S.WORK_ID: [A, "doi:10.1/x"]})
    hashed = NS.with_pair_hash(
        pairs, NS.id_hash_frame(pairs, S.WORK_ID, 13), NS.survey_hash_frame(pairs, 13)
    ).collect()
    # by survey: a join keeps no row order (the stage orders by the hash afterwards)
    assert dict(hashed.select(S.SURVEY_ID, NS.PAIR_HASH).iter_rows()) == {
        S1: 1819063075,
        "2212.11774": _pair_hash(13, "2212.11774", "doi:10.1/x"),
    }


def test_every_sampling_the_config_allows_is_a_strategy() -> None:
    assert tuple(STRATEGIES) == NEGATIVE_SAMPLINGS


def test_bad_sampling_names_the_choices(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    with pytest.raises(ValueError, match="available: \\['hash', 'hardest'\\]"):
        run_stage(tmp_path, "negatives", _cfg(negative_sampling="random"))


# --------------------------------------------------------------------- an alias across surveys
# The review's reproduction: survey SV cites W only by DOI 10.1/w; another paper's bib entry
# carries both arXiv:1706.03762 and that DOI; four more entries pair the arXiv id with four
# different OpenAlex ids. An earlier survey ST of the same category cites the arXiv id.
ATTENTION = "arxiv:1706.03762"
ST, SV, MP = "2201.00010", "2301.00020", "2105.00030"


def write_attention_corpus(out: Path) -> None:
    from tests.test_works import paper, ref, write_extract

    papers = [
        paper(ST, "A Survey of Sequence Models", cats="cs.CL", day=date(2022, 1, 10)),
        paper(SV, "Transformers in NLP: A Survey", cats="cs.CL", day=date(2023, 1, 20)),
        paper(MP, "A Method Paper", cats="cs.CL", day=date(2021, 5, 3)),
    ]
    refs = [
        ref(ST, "t0", arxiv="1706.03762"),
        *[ref(ST, f"t{i}", arxiv=f"1801.{i:05d}") for i in range(1, 25)],
        ref(SV, "s0", doi="10.1/w"),
        *[ref(SV, f"s{i}", arxiv=f"1802.{i:05d}") for i in range(1, 25)],
        ref(MP, "m0", arxiv="1706.03762", doi="10.1/w"),
        *[ref(MP, f"m{i}", arxiv="1706.03762", oa=f"W{i}") for i in range(1, 5)],
    ]
    write_extract(out, papers, refs, [])


def _attention_run(tmp_path: Path, config: str | None) -> Path:
    from tests.test_works import run_stages

    out = tmp_path / "work"
    write_attention_corpus(out)
    path = None
    if config is not None:
        path = tmp_path / "c.toml"
        path.write_text(config)
    run_stages(out, "works", "openalex", "surveys", "labels", "negatives", config=path)
    surveys = pl.read_parquet(out / "surveys" / "surveys.parquet")
    assert sorted(surveys[S.PAPER_ID]) == [ST, SV]
    return out


def test_a_work_cited_by_doi_is_not_a_negative_of_its_survey(tmp_path: Path) -> None:
    out = _attention_run(tmp_path, None)
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    by_ref = {(p, r): w for p, r, w in cites.select(S.PAPER_ID, S.REF_ID, S.WORK_ID).iter_rows()}
    # one work_id for the DOI and the arXiv id, in every paper
    assert by_ref[(SV, "s0")] == by_ref[(ST, "t0")] == by_ref[(MP, "m0")] == ATTENTION
    assert {by_ref[(MP, f"m{i}")] for i in range(1, 5)} == {ATTENTION}
    works = pl.read_parquet(out / "works" / "works.parquet")
    assert works.filter(pl.col(S.WORK_ID) == ATTENTION)[S.ALIASES].to_list() == [
        [ATTENTION, "doi:10.1/w", *[f"openalex:W{i}" for i in range(1, 5)]]
    ]
    assert json.loads((out / "works" / "_SUCCESS.json").read_text())["counts"]["junk_aliases"] == 0
    labels = pl.read_parquet(out / "labels" / "labels.parquet")
    assert labels.filter((pl.col(S.SURVEY_ID) == SV) & (pl.col(S.WORK_ID) == ATTENTION)).height == 1
    neg = _negatives(out)
    assert neg.filter((pl.col(S.SURVEY_ID) == SV) & (pl.col(S.WORK_ID) == ATTENTION)).is_empty()
    # the stage did run: SV gets ST's other works (cited by an earlier cs.CL survey)
    assert sorted(neg.filter(pl.col(S.SURVEY_ID) == SV)[S.WORK_ID]) == [
        f"arxiv:1801.{i:05d}" for i in range(1, 25)
    ]


def test_raw_co_occurrence_excludes_a_work_that_works_kept_apart(tmp_path: Path) -> None:
    # With max_alias_partners = 0 every DOI and OpenAlex id linked to an arXiv id is junk, so
    # `works` keeps doi:10.1/w apart from the arXiv id. The entry that carries both still
    # shows SV cites it: negatives excludes it over the raw link.
    out = _attention_run(tmp_path, "[works]\nmax_alias_partners = 0\n")
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    by_ref = {(p, r): w for p, r, w in cites.select(S.PAPER_ID, S.REF_ID, S.WORK_ID).iter_rows()}
    assert by_ref[(SV, "s0")] == "doi:10.1/w" and by_ref[(ST, "t0")] == ATTENTION
    neg = _negatives(out)
    assert neg.filter((pl.col(S.SURVEY_ID) == SV) & (pl.col(S.WORK_ID) == ATTENTION)).is_empty()
    assert neg.filter(pl.col(S.SURVEY_ID) == SV).height == 24


# --------------------------------------------------------------------- end to end, every row
SYNTH_PAPERS = 1500
_SYNTH: dict[str, Path] = {}


def synthetic_corpus(root: Path) -> Path:
    """The synthetic corpus every end-to-end test uses (2022 layout, seed 0, small records)."""
    from pipeline.synth.generator import generate

    corpus = root / "corpus"
    if not corpus.exists():
        generate(corpus, SYNTH_PAPERS, layout="2022", seed=0, small=True)
    return corpus


def run_pipeline(corpus: Path, out: Path) -> None:
    """Every stage and the baselines' evaluation (:func:`pipeline.api.run`), one worker."""
    api.run(corpus, out, workers=1)


def synthetic_release_dir(factory: pytest.TempPathFactory) -> Path:
    """Work dir of one pipeline run on the synthetic corpus, built once per session."""
    if "out" not in _SYNTH:
        root = factory.mktemp("synthetic")
        run_pipeline(synthetic_corpus(root), root / "out")
        _SYNTH["root"], _SYNTH["out"] = root, root / "out"
    return _SYNTH["out"]


@pytest.fixture
def synthetic_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory)


def check_every_negative(out: Path) -> int:
    """Check the three rules on every hard negative of a release against the raw tables.

    Citations are checked against the extract references (every identifier of every
    bib entry of the survey), not only against ``works``' resolution. Returns the
    number of negatives checked.
    """
    refs = pl.read_parquet(sorted((out / "extract" / "references").glob("*.parquet")))
    papers = pl.read_parquet(sorted((out / "extract" / "papers").glob("*.parquet")))
    works = pl.read_parquet(out / "works" / "works.parquet")
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    surveys = pl.read_parquet(out / "surveys" / "surveys.parquet")
    rows = pl.concat(
        [
            pl.read_parquet(p)
            for p in sorted((out / "release").glob("*_survey_reading_lists.parquet"))
        ]
    )
    ids_of = {}
    for pid, arxiv, doi, oa in refs.select(
        S.PAPER_ID, S.ARXIV_ID, S.DOI, S.OPENALEX_ID
    ).iter_rows():
        s = ids_of.setdefault(pid, set())
        s.update(
            x
            for x in (arxiv and f"arxiv:{arxiv}", doi and f"doi:{doi}", oa and f"openalex:{oa}")
            if x
        )
        if doi and doi.startswith("10.48550/arxiv."):
            s.add("arxiv:" + doi.removeprefix("10.48550/arxiv."))
    cited_by = {}
    for pid, wid in cites.drop_nulls(S.WORK_ID).select(S.PAPER_ID, S.WORK_ID).iter_rows():
        cited_by.setdefault(wid, set()).add(pid)
    survey_info = {r[S.PAPER_ID]: r for r in surveys.iter_rows(named=True)}
    work_info = {r[S.WORK_ID]: r for r in works.iter_rows(named=True)}
    paper_cats = dict(papers.select(S.PAPER_ID, S.CATEGORIES).iter_rows())
    paper_primary = dict(papers.select(S.PAPER_ID, S.PRIMARY_CATEGORY).iter_rows())
    paper_date = dict(papers.select(S.PAPER_ID, S.FIRST_VERSION_DATE).iter_rows())
    negatives = rows.filter(pl.col(S.LABEL) == 0)
    for r in negatives.iter_rows(named=True):
        s, w = r[S.SURVEY_ID], r[S.CANDIDATE_ID]
        work = work_info[w]
        sv = survey_info[s]
        # never cited by its survey, under any alias
        assert not set(work[S.ALIASES]) & ids_of.get(s, set()), (s, w)
        assert s not in cited_by.get(w, set()), (s, w)
        citing_surveys = cited_by.get(w, set()) & set(survey_info)
        category = sv[S.PRIMARY_CATEGORY]
        # same field: a corpus paper by its own categories; any work (a corpus paper of
        # another category too) by the categories of the surveys citing it
        own = work[S.PAPER_ID] is not None and category in paper_cats[work[S.PAPER_ID]]
        if r[S.NEGATIVE_SOURCE] == "cited_in_category":  # the wider pool B
            if work[S.PAPER_ID] is not None:
                assert own, (s, w)
            citers = {p for p in cited_by.get(w, set()) if paper_primary.get(p) == category}
            assert citers - {s}, (s, w)
            first_cited = min(paper_date[p] for p in citers)
        else:
            assert citing_surveys - {s}, (s, w)
            if own:
                assert r[S.NEGATIVE_SOURCE] == "own_category"
            else:
                cats = {survey_info[c][S.PRIMARY_CATEGORY] for c in citing_surveys}
                assert category in cats, (s, w)
                assert r[S.NEGATIVE_SOURCE] == "citing_survey_category"
            first_cited = min(survey_info[c][S.FIRST_VERSION_DATE] for c in citing_surveys)
        # in_domain: a corpus paper with the survey's category; never a work outside the corpus
        assert r[S.IN_DOMAIN] == own, (s, w)
        # predates the survey's text date
        assert r[S.SURVEY_DATE] == (sv[S.TEXT_DATE] or sv[S.FIRST_VERSION_DATE])
        if work[S.KNOWN_DATE] is not None:
            assert work[S.KNOWN_DATE] < r[S.SURVEY_DATE], (s, w)
            assert r[S.CANDIDATE_DATE] < r[S.SURVEY_DATE]
        else:
            assert first_cited < r[S.SURVEY_DATE], (s, w)
    return negatives.height


def test_every_negative_of_a_synthetic_release_obeys_the_rules(synthetic_release: Path) -> None:
    n = check_every_negative(synthetic_release)
    assert n > 0
    meta = json.loads((synthetic_release / "release" / "eval_metadata.json").read_text())
    assert meta["leakage"]["candidates_dated_after_survey"] == 0
    assert meta["leakage"]["surveys_in_both_splits"] == 0
    assert sum(meta["splits"][s]["negatives"] for s in S.SPLIT_NAMES) == n
