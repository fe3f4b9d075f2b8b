"""The bibliography evaluation's whole-corpus baselines: the field's most-cited works (built
with the release) against a brute-force count, and BM25's top N over the eval corpus against
the retrieval mode's BM25."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.release_files import BIBLIOGRAPHY_BASELINES_FILE, beir_file
from pipeline.evaluate.bibliography import baselines as BB
from pipeline.evaluate.bibliography import score as B
from pipeline.evaluate.evalset import load_eval_set
from pipeline.evaluate.retrieval.corpus_vectors import load_corpus
from pipeline.evaluate.retrieval.model_runs import DEFAULT_TOP_K, bm25_retrieval
from pipeline.evaluate.scoring.ties import tie_key
from pipeline.evaluate.systems import field_baselines as F
from pipeline.rules.tables import scan_extract
from pipeline.rules.text_match import BM25Index, paper_text, survey_text, tokenize


def brute_force(
    papers: dict[str, tuple[str, date | None]],
    cites: set[tuple[str, str]],
    itself: dict[str, str],
    surveys: list[tuple[str, str, date, int]],
) -> dict[str, list[str]]:
    """Per survey (id, category, date, N): count, for every work, the papers of the category
    posted before the date that cite it (the survey not among them), drop the survey itself,
    and keep the N most cited by (count desc, tie key, id)."""
    out = {}
    for survey_id, category, when, n in surveys:
        counts: Counter[str] = Counter()
        for paper_id, work_id in cites:
            cat, posted = papers[paper_id]
            if paper_id != survey_id and cat == category and posted is not None and posted < when:
                counts[work_id] += 1
        counts.pop(itself.get(survey_id, ""), None)
        ranked = sorted(counts, key=lambda w: (-counts[w], tie_key(survey_id, w), w))
        out[survey_id] = ranked[:n]
    return out


def _by_id(work_id: str) -> dict[str, str]:
    """A reference naming a work by its id, as a generator would write it."""
    return {k: v for k, v in asdict(BB.id_reference(work_id)).items() if v is not None}


def _as_lists(rows: pl.DataFrame) -> dict[str, list[str]]:
    lists: dict[str, list[str]] = {}
    for survey_id, rank, work_id in rows.select(
        S.SURVEY_ID, S.BASELINE_RANK, S.WORK_ID
    ).iter_rows():
        assert rank == len(lists.setdefault(survey_id, [])) + 1
        lists[survey_id].append(work_id)
    return lists


@pytest.mark.parametrize("seed", range(8))
def test_the_field_s_most_cited_works_equal_a_brute_force_count(seed: int) -> None:
    """Random small corpora, surveys of two fields at different dates with lists of different
    sizes, so that counts grow between the surveys' dates (the memory bound's case)."""
    rng = random.Random(seed)
    start = date(2020, 1, 1)
    papers = {
        f"p{i}": (rng.choice(["cs.a", "cs.b"]), None if rng.random() < 0.05 else start + timedelta(rng.randrange(700)))
        for i in range(80)
    }  # fmt: skip
    works = [f"arxiv:w{i}" for i in range(25)]
    itself = {f"p{i}": f"arxiv:p{i}" for i in range(0, 80, 3)}  # some papers are cited works
    targets = works + list(itself.values())
    cites = {(p, rng.choice(targets)) for p in papers for _ in range(rng.randrange(12))}
    dated = [p for p, (_, d) in papers.items() if d is not None]
    chosen = rng.sample(dated, 7)
    surveys = [
        (p, papers[p][0], papers[p][1] + timedelta(rng.choice([0, 0, 30, 200])), rng.randrange(1, 9))
        for p in chosen
    ]  # fmt: skip
    want = brute_force(papers, cites, itself, surveys)

    papers_frame = pl.DataFrame(
        [(p, c, d) for p, (c, d) in papers.items()],
        schema={S.PAPER_ID: pl.String, S.PRIMARY_CATEGORY: pl.String, S.FIRST_VERSION_DATE: pl.Date},
        orient="row",
    )  # fmt: skip
    cites_frame = pl.DataFrame(
        sorted(cites), schema={S.PAPER_ID: pl.String, S.WORK_ID: pl.String}, orient="row"
    )
    works_frame = pl.DataFrame(
        [(w, p) for p, w in itself.items()],
        schema={S.WORK_ID: pl.String, S.PAPER_ID: pl.String},
        orient="row",
    )
    split_surveys = pl.DataFrame(
        [(s, c, papers[s][1], d) for s, c, d, _ in surveys],
        schema={S.SURVEY_ID: pl.String, S.PRIMARY_CATEGORY: pl.String,
                S.FIRST_VERSION_DATE: pl.Date, S.SURVEY_DATE: pl.Date},
        orient="row",
    )  # fmt: skip
    candidates = pl.DataFrame(
        [(s, f"x{i}", "eval", 1) for s, _, _, n in surveys for i in range(n)]
        + [(surveys[0][0], "neg", "eval", 0)],
        schema={S.SURVEY_ID: pl.String, S.WORK_ID: pl.String, S.SPLIT: pl.String, S.LABEL: pl.Int8},
        orient="row",
    )  # fmt: skip
    got = F.field_popularity(
        papers_frame.lazy(),
        cites_frame.lazy(),
        works_frame.lazy(),
        F.eval_surveys(candidates.lazy(), split_surveys.lazy()),
    )
    assert got[S.BASELINE].unique().to_list() == [F.FIELD_POPULARITY]
    lists = _as_lists(got)
    assert {s: lists.get(s, []) for s in want} == want
    assert any(len(v) == n for (_, _, _, n), v in zip(surveys, want.values(), strict=True))


# --------------------------------------------------------------------- on the demo
@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    api.demo(out, papers=400, workers=1)
    return out / "release"


def test_the_release_s_popularity_file_is_the_brute_force_count(demo_release: Path) -> None:
    out = demo_release.parent
    lists = pl.read_parquet(demo_release / B.READING_LISTS_FILE.format(split="eval"))
    surveys = (
        lists.group_by(S.SURVEY_ID)
        .agg(
            pl.col(S.SURVEY_PRIMARY_CATEGORY).first(),
            pl.col(S.SURVEY_DATE).first(),
            (pl.col(S.LABEL) >= 1).sum().alias("n"),
        )
        .sort(S.SURVEY_ID)
        .rows()
    )
    extract = {table: sorted((out / "extract" / table).glob("*.parquet")) for table in ("papers",)}
    papers = {
        p: (c, d)
        for p, c, d in scan_extract(extract, "papers")
        .select(S.PAPER_ID, S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE)
        .collect()
        .iter_rows()
    }
    cites = {
        (p, w)
        for p, w in pl.read_parquet(out / "works" / "cites.parquet", columns=[S.PAPER_ID, S.WORK_ID])
        .drop_nulls()
        .iter_rows()
        if p in papers
    }  # fmt: skip
    itself = dict(
        pl.read_parquet(out / "works" / "works.parquet", columns=[S.PAPER_ID, S.WORK_ID])
        .drop_nulls()
        .iter_rows()
    )
    want = brute_force(papers, cites, itself, surveys)
    got = _as_lists(pl.read_parquet(demo_release / BIBLIOGRAPHY_BASELINES_FILE))
    assert got == want
    assert all(len(v) == n for (_, _, _, n), v in zip(surveys, want.values(), strict=True))
    # judgment-side and recorded: no card config names it, the metadata has its sha256
    meta = json.loads((demo_release / "eval_metadata.json").read_text())
    assert BIBLIOGRAPHY_BASELINES_FILE in meta["files"]
    front_matter = (demo_release / "README.md").read_text().split("---\n")[1]
    assert "configs:" in front_matter and BIBLIOGRAPHY_BASELINES_FILE not in front_matter


def test_bm25_over_the_corpus_is_the_retrieval_mode_s_top_n(demo_release: Path) -> None:
    eval_file = demo_release / B.READING_LISTS_FILE.format(split="eval")
    eval_set = load_eval_set(eval_file)
    sizes = dict(eval_set.filter(pl.col(S.LABEL) >= 1).group_by(S.SURVEY_ID).len().iter_rows())
    got = BB.corpus_bm25_lists(eval_set, eval_file, sizes)
    assert got is not None and set(got) == set(sizes)
    # the run evaluate --mode retrieval scores (its default top k), cut at each list's size
    corpus = load_corpus(eval_file)
    run = bm25_retrieval(eval_set, corpus, DEFAULT_TOP_K, "bm25").run.scores
    assert got == BB.top_n(run, sizes)
    # and BM25 over the corpus file computed here, ranked by the tie rule
    docs = pl.read_parquet(demo_release / beir_file("corpus", "eval"))
    tokens = docs.select(tokenize(paper_text(pl.col(S.BEIR_TITLE), pl.col(S.BEIR_TEXT))))
    index = BM25Index(tokens.to_series().to_list())
    ids = docs[S.BEIR_ID].to_list()
    queries = eval_set.unique(S.SURVEY_ID).select(S.SURVEY_ID, tokenize(survey_text()).alias("q"))
    for survey_id, query in queries.iter_rows():
        scores = index.scores(query)
        order = sorted(
            range(len(ids)), key=lambda i: (-scores[i], tie_key(survey_id, ids[i]), ids[i])
        )
        assert got[survey_id] == [ids[i] for i in order[: sizes[survey_id]]], survey_id


def test_on_the_demo_the_whole_corpus_baselines_sit_between_nothing_and_the_list(
    demo_release: Path, tmp_path: Path
) -> None:
    lists = pl.read_parquet(demo_release / B.READING_LISTS_FILE.format(split="eval"))
    oracle = [
        {"survey_id": s, "references": [_by_id(w) for w in ids]}
        for s, ids in lists.filter(pl.col(S.LABEL) >= 1)
        .group_by(S.SURVEY_ID)
        .agg(pl.col(S.CANDIDATE_ID))
        .iter_rows()
    ]
    path = tmp_path / "oracle.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in oracle))
    report = api.evaluate_bibliography(demo_release, path, out=tmp_path, run=False).results
    baselines = report["baselines"]
    assert list(baselines) == list(BB.BIBLIOGRAPHY_BASELINES)
    for metric in (B.RECALL, B.PRECISION):
        assert report["metrics"][metric]["mean"] == 1.0
        assert baselines["oracle"]["metrics"][metric]["mean"] == 1.0
        for name in BB.BIBLIOGRAPHY_BASELINES[-4:]:
            assert 0.0 < baselines[name]["metrics"][metric]["mean"] < 1.0, (name, metric)
    # the whole-corpus baselines name works that are no candidate of the survey
    for name in ("popularity", "bm25"):
        counts = baselines[name]["counts"]
        assert counts[B.KNOWN] + counts[B.UNMATCHED] > 0, name
        assert counts["references"] == sum(counts[c] for c in B.CLASSES)
    # the candidate-only versions name judged works only
    for name in (BB.POPULARITY_CANDIDATES, BB.BM25_CANDIDATES):
        counts = baselines[name]["counts"]
        assert counts[B.LISTED] + counts[B.HARD_NEGATIVE] == counts["references"]
    # recall of popularity = its listed works / the list's size, computed here
    got = _as_lists(pl.read_parquet(demo_release / BIBLIOGRAPHY_BASELINES_FILE))
    listed = {
        s: set(ids)
        for s, ids in lists.filter(pl.col(S.LABEL) >= 1)
        .group_by(S.SURVEY_ID)
        .agg(pl.col(S.CANDIDATE_ID))
        .iter_rows()
    }
    recall = sum(len(set(got.get(s, [])) & ids) / len(ids) for s, ids in listed.items())
    assert baselines["popularity"]["metrics"][B.RECALL]["mean"] == pytest.approx(
        recall / len(listed)
    )
    # paired tests against each baseline: the list minus the baseline
    assert baselines["bm25"]["paired"][B.RECALL]["diff"] == pytest.approx(
        1 - baselines["bm25"]["metrics"][B.RECALL]["mean"]
    )


def test_a_release_without_the_file_skips_popularity(demo_release: Path, tmp_path: Path) -> None:
    import shutil

    release = tmp_path / "release"
    shutil.copytree(demo_release, release)
    (release / BIBLIOGRAPHY_BASELINES_FILE).unlink()
    survey = pl.read_parquet(release / B.READING_LISTS_FILE.format(split="eval"))[S.SURVEY_ID][0]
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"survey_id": survey, "references": []}) + "\n")
    report = api.evaluate_bibliography(release, path, out=tmp_path / "out", run=False).results
    assert report["baselines"]["popularity"] == {"skipped": BB.NO_BASELINES_FILE}
    assert "recall" in report["baselines"]["bm25"]["metrics"]
