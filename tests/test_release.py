"""Split and release: hand-made cases with expected values, the synthetic corpus end to end
(every config loads with ``datasets``, two runs are byte-identical), and the real 2022 sample."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import date
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.release_files import (
    BEIR_VIEWS,
    BIBLIOGRAPHY_BASELINES_FILE,
    CANDIDATES_FILE,
    READING_LISTS_FILE,
    RETRIEVAL_SPLITS,
    WORKS_TABLE_FILE,
    beir_file,
)
from pipeline.hub import card as CARD
from pipeline.stages import split as SP
from tests.conftest import SAMPLE_2022, SURVEY_ID
from tests.test_negatives import (
    P1,
    S1,
    S2,
    S3,
    S4,
    A,
    B,
    C,
    D,
    G,
    H,
    _cfg,
    build_handmade,
    run_pipeline,
    run_stage,
    synthetic_corpus,
    synthetic_release_dir,
)


def handmade_release(root: Path, release: dict | None = None) -> Path:
    """The hand-made work dir of ``test_negatives`` run through negatives, split and release
    (``release``: ``[release]`` config values, e.g. the repo, authors and year the card names)."""
    from pipeline.core.config import load_config

    build_handmade(root)
    cfg = load_config(overrides={"release": release}) if release else _cfg()
    for name in ("negatives", "split", "aspects", "release"):
        run_stage(root, name, cfg)
    return root


@pytest.fixture
def synthetic_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _release_files(release: Path) -> dict[str, str]:
    return {
        p.relative_to(release).as_posix(): _sha256(p)
        for p in sorted(release.rglob("*"))
        if p.is_file() and not p.name.startswith("_")
    }


def _rows(release: Path) -> pl.DataFrame:
    return pl.concat(
        [pl.read_parquet(p) for p in sorted(release.glob("*_survey_reading_lists.parquet"))]
    )


# --------------------------------------------------------------------- hand-made
@pytest.fixture
def handmade(tmp_path: Path) -> Path:
    return handmade_release(tmp_path)


def test_split_by_survey_date(handmade: Path) -> None:
    surveys = pl.read_parquet(handmade / "split" / "split_surveys.parquet")
    assert dict(surveys.select(S.SURVEY_ID, S.SPLIT).iter_rows()) == {
        S1: "train", S2: "train", S3: "train", S4: "eval"
    }  # fmt: skip
    cands = pl.read_parquet(handmade / "split" / "candidates.parquet")
    assert cands.filter(pl.col(S.SURVEY_ID) == S4)[S.SPLIT].unique().to_list() == ["eval"]
    # 13 positives (labels) + 3 + 1 + 0 + 3 negatives
    assert cands.height == 13 + 7
    assert cands.filter(pl.col(S.LABEL) == 0)[S.N_MENTIONS].to_list() == [0] * 7
    assert cands.sort(S.SURVEY_ID, S.WORK_ID).equals(cands)


def test_leakage_audit_counts() -> None:
    d = date
    rows = [  # survey, work, label, split, survey date, candidate date
        ("s1", "w1", 0, "train", d(2020, 1, 1), d(2019, 1, 1)),
        ("s1", "w2", 3, "train", d(2020, 1, 1), d(2021, 1, 1)),  # positive dated after
        ("s1", "arxiv:s2", 0, "train", d(2020, 1, 1), None),  # an eval survey as a train candidate
        ("s2", "w1", 4, "eval", d(2023, 5, 1), d(2019, 1, 1)),  # w1 in both splits
        ("s2", "w3", 0, "eval", d(2023, 5, 1), d(2023, 6, 1)),  # negative dated after
        ("s2", "w4", 1, "eval", d(2023, 5, 1), d(2023, 5, 1)),  # same day: "on or after"
    ]
    cols = [S.SURVEY_ID, S.WORK_ID, S.LABEL, S.SPLIT, S.SURVEY_DATE, S.CANDIDATE_DATE]
    cands = pl.DataFrame(rows, schema=cols, orient="row")
    survey_works = pl.DataFrame({S.PAPER_ID: ["s2"], S.WORK_ID: ["arxiv:s2"]})
    assert SP.leakage_audit(cands, survey_works) == {
        "surveys_in_both_splits": 0,
        "candidates_dated_after_survey": 3,
        "candidates_without_date": 1,
        "works_in_both_splits": 1,
        "eval_surveys_as_train_candidates": 1,
    }


def test_split_fails_when_a_negative_postdates_its_survey(handmade: Path) -> None:
    path = handmade / "negatives" / "negatives.parquet"
    neg = pl.read_parquet(path)
    # pretend S1 got E (2021-07-01) as a negative, though S1 is dated 2021-05-15
    bad = neg.with_columns(
        pl.when(pl.col(S.SURVEY_ID) == S1)
        .then(pl.lit("arxiv:2107.00001"))
        .otherwise(pl.col(S.WORK_ID))
        .alias(S.WORK_ID)
    )
    pq.write_table(bad.to_arrow(), path)
    with pytest.raises(RuntimeError, match="candidates_dated_after_survey"):
        run_stage(handmade, "split", _cfg())


def test_prior_citations_in_domain_and_citing_surveys_by_hand(handmade: Path) -> None:
    rows = _rows(handmade / "release")
    got = {
        (r[S.SURVEY_ID], r[S.CANDIDATE_ID]): (
            r[S.CANDIDATE_PRIOR_CITATIONS],
            r[S.IN_DOMAIN],
            r[S.N_CITING_SURVEYS],
        )
        for r in rows.iter_rows(named=True)
    }
    # citing papers and dates: S2 2021-03-01 (A, C, F, G), X1 2020-05-01 (A, G), X2 2021-06-10 (A),
    # S1 2021-05-15 (G, P1, P2); only strictly earlier papers count, never the survey itself.
    # in_domain: a corpus paper whose own categories include the survey's primary category.
    # n_citing_surveys: OTHER surveys citing the work, first posted strictly before the survey.
    assert got[(S1, G)] == (2, False, 1)  # S2 and X1; G is outside the corpus; S2 cites it earlier
    assert got[(S1, P1)] == (0, False, 0)  # cited by S1 only; outside the corpus
    assert got[(S2, A)] == (1, True, 0)  # X1 (S2 itself does not count); A is a cs.CL paper
    assert got[(S2, G)] == (1, False, 0)  # X1; S1 is later (for citations and citing surveys)
    assert got[(S2, C)] == (0, False, 0)
    assert got[(S3, H)] == (0, True, 0)  # corpus paper with cs.CV among its categories
    assert got[(S3, B)] == (0, False, 0)
    assert got[(S4, D)] == (0, True, 0)
    if (S4, A) in got:  # a sampled negative: S2, X1, X2 all precede S4; S2 cites it
        assert got[(S4, A)] == (3, True, 1)
    if (S4, G) in got:  # a sampled negative outside the corpus: out of domain
        assert got[(S4, G)] == (3, False, 2)  # X1, S2, S1 cite it; S2 and S1 are surveys
    assert rows[S.IN_DOMAIN].null_count() == 0
    negatives = rows.filter(pl.col(S.LABEL) == 0)
    assert negatives[S.IN_DOMAIN].to_list() == [
        src == "own_category" for src in negatives[S.NEGATIVE_SOURCE]
    ]
    assert not negatives[S.IN_DOMAIN].all() and negatives[S.IN_DOMAIN].any()
    assert {S1, S2, S3, S4} == set(rows[S.SURVEY_ID])


def test_release_fails_on_a_repeated_pair(handmade: Path) -> None:
    path = handmade / "split" / "candidates.parquet"
    cands = pl.read_parquet(path)
    twice = cands.filter((pl.col(S.SURVEY_ID) == S2) & (pl.col(S.WORK_ID) == A))
    pq.write_table(pl.concat([cands, twice, twice]).to_arrow(), path)
    with pytest.raises(
        RuntimeError, match=r"\('2102\.00002', 'arxiv:1901\.00001'\) appears 3 times; 1 pair"
    ):
        run_stage(handmade, "release", _cfg())


def test_release_tables_match_schema_and_are_sorted(handmade: Path) -> None:
    release = handmade / "release"
    for split in S.SPLIT_NAMES:
        t = pq.read_table(release / f"{split}_survey_reading_lists.parquet")
        assert t.schema.remove_metadata() == S.READING_LISTS
        df = pl.from_arrow(t)
        assert df.sort(S.SURVEY_ID, S.CANDIDATE_ID).equals(df)
        assert df[S.LABEL_NAME].to_list() == [S.LABEL_NAMES[x] for x in df[S.LABEL].to_list()]
        assert df.filter(pl.col(S.LABEL) == 0)[S.NEGATIVE_SOURCE].null_count() == 0
        assert (
            df.filter(pl.col(S.LABEL) > 0)[S.NEGATIVE_SOURCE].null_count()
            == df.filter(pl.col(S.LABEL) > 0).height
        )
        qrels = pl.read_parquet(release / beir_file("qrels", split))
        assert qrels.height == df.height
        assert (qrels[S.BEIR_SCORE] == 0).sum() == (df[S.LABEL] == 0).sum()
        queries = pl.read_parquet(release / beir_file("queries", split))
        assert queries[S.BEIR_ID].to_list() == sorted(df[S.SURVEY_ID].unique().to_list())
        corpus = pl.read_parquet(release / beir_file("corpus", split))
        assert corpus[S.BEIR_ID].to_list() == sorted(df[S.CANDIDATE_ID].unique().to_list())
        # MTEB's re-ranking input: each query's candidates, the qrels' pairs exactly
        top = pl.read_parquet(release / beir_file("top_ranked", split))
        assert top.schema == pl.Schema(
            {S.BEIR_QUERY_ID: pl.String, S.BEIR_CORPUS_IDS: pl.List(pl.String)}
        )
        pairs = top.explode(S.BEIR_CORPUS_IDS).rename({S.BEIR_CORPUS_IDS: S.BEIR_CORPUS_ID})
        assert pairs.equals(qrels.select(S.BEIR_QUERY_ID, S.BEIR_CORPUS_ID))
    queries = pl.read_parquet(release / "queries" / "train.parquet")
    # a survey without negatives is counted in the metadata, not flagged in a view a
    # system reads (has_negatives is a judgment); no date either (MTEB's data loader
    # collates every query column and takes no date: candidates has survey_date)
    assert queries.columns == S.BEIR_QUERIES.names and S.HAS_NEGATIVES not in queries.columns
    assert S.SURVEY_DATE not in queries.columns
    meta = json.loads((release / "eval_metadata.json").read_text())
    assert meta["splits"]["train"]["surveys_without_negatives"] == 1  # S3
    rows = pl.read_parquet(release / "train_survey_reading_lists.parquet")
    # a query's text is the survey's title + " " + abstract, the string models read
    expected = rows.select(
        S.SURVEY_ID, pl.concat_str([S.SURVEY_TITLE, S.SURVEY_ABSTRACT], separator=" ")
    ).unique()
    assert dict(queries.select(S.BEIR_ID, S.BEIR_TEXT).iter_rows()) == dict(expected.iter_rows())
    corpus = pl.read_parquet(release / "corpus" / "train.parquet")
    # text = the abstract, '' without one (BEIR and MTEB then read the title alone); the
    # title of a work outside the corpus is parsed from the bib strings, never raw
    texts = {doc: (title, text) for doc, title, text in corpus.iter_rows()}
    assert texts[A][1] == f"Abstract of {A}."
    assert texts[G] == (f"parsed title of {G}", "")
    assert not corpus[S.BEIR_TEXT].str.contains("Raw ").any()
    # one representation for missing text: '' everywhere, never null
    for path in sorted(release.rglob("*.parquet")):
        table = pl.read_parquet(path)
        for column in S.TEXT_COLUMNS & set(table.columns):
            assert table[column].null_count() == 0, (path, column)
    for key, value in dict(corpus.select(S.BEIR_ID, S.BEIR_TITLE).iter_rows()).items():
        shown = rows.filter(pl.col(S.CANDIDATE_ID) == key)[S.CANDIDATE_TITLE]
        if shown.len():
            assert shown[0] == value  # the same '' where a work shows no title
    view = pl.read_parquet(release / "candidates" / "train.parquet")
    assert S.CANDIDATE_RAW not in view.columns
    assert view.filter(pl.col(S.CANDIDATE_ID) == G)[S.CANDIDATE_TITLE].to_list()[0] == (
        f"parsed title of {G}"
    )


def test_works_table_holds_every_work_with_its_ids_and_title_keys(handmade: Path) -> None:
    import re

    from tests.test_negatives import WORKS

    release = handmade / "release"
    table = pq.read_table(release / WORKS_TABLE_FILE)
    assert table.schema.remove_metadata() == S.WORKS_TABLE
    # nothing beyond the id, the aliases and the title keys: no count, category or date
    assert table.column_names == ["work_id", "aliases", "title_key", "raw_title_key"]
    works = pl.from_arrow(table)
    assert works[S.WORK_ID].to_list() == sorted(WORKS)  # candidates or not, sorted by id

    def key(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()

    for w, aliases, title_key, raw_title_key in works.iter_rows():
        pid, _, _, extra = WORKS[w]
        assert aliases == sorted([w, *extra])
        # a corpus paper's title, else the title parsed from its bib strings (works)
        assert title_key == key(f"Title of {w}" if pid else f"parsed title of {w}")
        assert raw_title_key is None  # "Raw doi:..." names a venue word, no title
    rows = _rows(release)
    for w, aliases in rows.select(S.CANDIDATE_ID, S.CANDIDATE_ALIASES).iter_rows():
        assert works.filter(pl.col(S.WORK_ID) == w)[S.ALIASES].to_list() == [aliases]


def test_card_placeholders() -> None:
    assert CARD.render_card("a {x} @misc{key, {B}} {{x}}", {"x": "1"}) == "a 1 @misc{key, {B}} {1}"
    with pytest.raises(KeyError, match="available: \\['x'\\]"):
        CARD.render_card("{y}", {"x": "1"})
    assert CARD.size_category(999) == "n<1K" and CARD.size_category(1000) == "1K<n<10K"


# --------------------------------------------------------------------- synthetic, end to end
def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def test_synthetic_release_card_and_metadata(synthetic_release: Path) -> None:
    release = synthetic_release / "release"
    meta = json.loads((release / "eval_metadata.json").read_text())
    files = {k: v for k, v in _release_files(release).items() if k.endswith(".parquet")}
    assert {k: v["sha256"] for k, v in meta["files"].items()} == files
    for name, entry in meta["files"].items():
        assert entry["rows"] == pq.ParquetFile(release / name).metadata.num_rows
    assert meta["splits"]["train"]["surveys"] > 0 and meta["splits"]["eval"]["surveys"] > 0
    assert meta["code_version"] and meta["input"]["files"][0]["file"].startswith("synth_2022_0_")
    text = (release / "eval_metadata.json").read_text()
    assert str(synthetic_release.parent) not in text and "/tmp" not in text
    card = (release / "README.md").read_text()
    fm = _front_matter(card)
    assert fm["license"] == "cc-by-sa-4.0"
    assert {"text-retrieval", "text-ranking"} <= set(fm["task_categories"])
    configs = {c["config_name"]: c for c in fm["configs"]}
    retrieval_views = {*BEIR_VIEWS, "corpus_sections"}
    assert set(configs) == {"reading_lists", "candidates", "aspects", "aspect_candidates",
                            *retrieval_views}  # fmt: skip
    assert [name for name, c in configs.items() if c.get("default")] == ["qrels"]
    for name, c in configs.items():
        # MTEB and BEIR ask for "test" (BEIR's HFDataLoader takes the first split)
        splits = ["test", "train"] if name in retrieval_views else ["train", "eval"]
        assert [d["split"] for d in c["data_files"]] == splits
        for d in c["data_files"]:
            assert (release / d["path"]).is_file()
    total = sum(meta["splits"][s]["rows"] for s in S.SPLIT_NAMES)
    assert total == meta["totals"]["rows"]
    assert f"| (survey, candidate) rows | {total:,}:" in card
    assert fm["size_categories"] == [CARD.size_category(total)]
    for needle in ("Saier", "Besrour", "topical sections", "Limitations and biases",
                   "another detected survey"):  # fmt: skip
        assert needle in card


def test_candidate_prior_citations_use_only_earlier_papers(synthetic_release: Path) -> None:
    out = synthetic_release
    papers = pl.read_parquet(sorted((out / "extract" / "papers").glob("*.parquet")))
    date_of = dict(papers.select(S.PAPER_ID, S.FIRST_VERSION_DATE).iter_rows())
    citing: dict[str, set[str]] = {}
    cites = pl.read_parquet(out / "works" / "cites.parquet").drop_nulls(S.WORK_ID)
    for pid, wid in cites.select(S.PAPER_ID, S.WORK_ID).iter_rows():
        citing.setdefault(wid, set()).add(pid)
    rows = _rows(out / "release")
    for s, w, sdate, got in rows.select(
        S.SURVEY_ID, S.CANDIDATE_ID, S.SURVEY_DATE, S.CANDIDATE_PRIOR_CITATIONS
    ).iter_rows():
        want = sum(
            1
            for p in citing.get(w, ())
            if p != s and date_of.get(p) is not None and date_of[p] < sdate
        )
        assert got == want, (s, w)
    assert rows[S.CANDIDATE_PRIOR_CITATIONS].sum() > 0


def test_in_domain_and_citing_surveys_of_every_row(synthetic_release: Path) -> None:
    out = synthetic_release
    surveys = pl.read_parquet(out / "surveys" / "surveys.parquet")
    survey_date = dict(surveys.select(S.PAPER_ID, S.FIRST_VERSION_DATE).iter_rows())
    works = pl.read_parquet(out / "works" / "works.parquet")
    work_paper = dict(works.select(S.WORK_ID, S.PAPER_ID).iter_rows())
    work_cats = dict(works.select(S.WORK_ID, S.CATEGORIES).iter_rows())
    citing: dict[str, set[str]] = {}
    cites = pl.read_parquet(out / "works" / "cites.parquet").drop_nulls(S.WORK_ID)
    for pid, wid in cites.select(S.PAPER_ID, S.WORK_ID).iter_rows():
        if pid in survey_date:
            citing.setdefault(wid, set()).add(pid)
    rows = _rows(out / "release")
    assert rows[S.IN_DOMAIN].null_count() == 0
    for r in rows.iter_rows(named=True):
        s, w, sdate = r[S.SURVEY_ID], r[S.CANDIDATE_ID], r[S.SURVEY_DATE]
        in_domain = work_paper[w] is not None and r[S.SURVEY_PRIMARY_CATEGORY] in (
            work_cats[w] or []
        )
        assert r[S.IN_DOMAIN] == in_domain, (s, w)
        before = {
            t
            for t in citing.get(w, ())
            if t != s and survey_date[t] is not None and survey_date[t] < sdate
        }
        assert r[S.N_CITING_SURVEYS] == len(before), (s, w)
    negatives = rows.filter(pl.col(S.LABEL) == 0)
    # every negative source occurs, and the citing_survey_category ones are all out of domain
    assert set(negatives[S.NEGATIVE_SOURCE]) == set(S.NEGATIVE_SOURCES)
    assert (
        not negatives.filter(pl.col(S.IN_DOMAIN))[S.NEGATIVE_SOURCE]
        .is_in(["citing_survey_category"])
        .any()
    )


def test_every_config_and_split_loads_with_datasets(
    synthetic_release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    release = synthetic_release / "release"
    meta = json.loads((release / "eval_metadata.json").read_text())
    for config in ("reading_lists", "candidates", *BEIR_VIEWS):
        ds = datasets.load_dataset(str(release), config, cache_dir=str(tmp_path / "cache"))
        retrieval = config in BEIR_VIEWS
        names = {s: RETRIEVAL_SPLITS[s] if retrieval else s for s in S.SPLIT_NAMES}
        assert set(ds) == set(names.values()), config
        for split, name in names.items():
            path = (
                READING_LISTS_FILE.format(split=split)
                if config == "reading_lists"
                else beir_file(config, split)
                if retrieval
                else f"{config}/{split}.parquet"
            )
            assert ds[name].num_rows == meta["files"][path]["rows"], (config, split)
            if config == "candidates":  # the answer-free view holds no judgment
                assert set(ds[split].column_names) == set(S.CANDIDATES_VIEW.names)
                assert not set(ds[split].column_names) & S.JUDGMENT_COLUMNS
    default = datasets.load_dataset(str(release), cache_dir=str(tmp_path / "cache"))
    assert set(default["test"].column_names) == set(S.BEIR_QRELS.names)  # MTEB's default


def test_two_runs_give_identical_release_files(synthetic_release: Path, tmp_path: Path) -> None:
    # Second run: a copy of the corpus somewhere else, another work dir.
    corpus = tmp_path / "elsewhere" / "corpus"
    shutil.copytree(synthetic_corpus(synthetic_release.parent), corpus)
    run_pipeline(corpus, tmp_path / "out")
    first = _release_files(synthetic_release / "release")
    second = _release_files(tmp_path / "out" / "release")
    assert first == second
    assert "README.md" in first and "eval_metadata.json" in first and len(first) == 24
    # the full-text view, both splits, byte for byte too
    assert {"corpus_sections/train.parquet", "corpus_sections/test.parquet"} <= set(first)
    assert WORKS_TABLE_FILE in first  # the works table, byte for byte too
    assert BIBLIOGRAPHY_BASELINES_FILE in first  # the field's most-cited works, judgment-side
    # the section-level reading lists and their view, both splits
    assert {f"aspects/{split}_survey_reading_lists.parquet" for split in S.SPLIT_NAMES} <= set(
        first
    )
    assert {f"aspects/candidates/{split}.parquet" for split in S.SPLIT_NAMES} <= set(first)
    assert CARD.METHODS_FILE in first
    # the card's tier distribution figure is rebuilt byte for byte too
    assert CARD.TIER_FIGURE in first


# --------------------------------------------------------------------- the real 2022 sample
def test_real_sample_survey_in_train_without_negatives(tmp_path: Path) -> None:
    out = tmp_path / "out"
    api.run(SAMPLE_2022.parent, out, workers=1)
    split = pl.read_parquet(out / "split" / "split_surveys.parquet")
    assert split.row(0, named=True) | {S.FIRST_VERSION_DATE: None, S.SURVEY_DATE: None} == {
        S.SURVEY_ID: SURVEY_ID, S.SPLIT: "train", S.PRIMARY_CATEGORY: "cs.SE", S.FIRST_VERSION_DATE: None,
        S.SURVEY_DATE: None,
        S.N_POSITIVES: 31, S.N_NEGATIVES: 0, S.HAS_NEGATIVES: False,
    }  # fmt: skip
    assert split.height == 1
    release = out / "release"
    rows = pl.read_parquet(release / "train_survey_reading_lists.parquet")
    # all 31, "D&c: A divide-and-conquer approach..." (openalex:W2914114221) too: its title is
    # the bib string's quoted one, whose "D&c" is no pair of initials (pipeline.rules.titles)
    assert rows.height == 31 and (rows[S.LABEL] > 0).all() and set(rows[S.SURVEY_ID]) == {SURVEY_ID}
    dc = rows.filter(pl.col(S.CANDIDATE_ID) == "openalex:W2914114221")
    assert dc[S.CANDIDATE_TITLE].to_list() == [
        "d c a divide and conquer approach to ir based bug localization"
    ]
    assert not (
        release / "eval_survey_reading_lists.parquet"
    ).exists()  # no eval survey in the sample
    queries = pl.read_parquet(release / "queries" / "train.parquet")
    assert queries[S.BEIR_ID].to_list() == [SURVEY_ID]
    meta = json.loads((release / "eval_metadata.json").read_text())
    # real records only: the release says so, and its card has no warning
    assert meta["provenance"] == {"generators": {}, "papers": 49, "synthetic_papers": 0,
                                  "unknown_papers": 0, "verdict": "real"}  # fmt: skip
    assert "SYNTHETIC" not in (release / "README.md").read_text()
    assert meta["splits"]["train"]["surveys_without_negatives"] == 1
    assert meta["text_exclusion"]["splits"]["train"]["no_text"] == {"positives": 0, "negatives": 0}
    assert meta["text_exclusion"]["works"] == {"no_text": 0, "duplicate_text": 0}
    assert meta["splits"]["eval"]["rows"] == 0 and meta["splits_written"] == ["train"]
    assert meta["negatives"]["surveys_without_negatives"] == 1
    fm = _front_matter((release / "README.md").read_text())
    assert all([d["split"] for d in c["data_files"]] == ["train"] for c in fm["configs"])


def test_leak_audit_of_the_synthetic_release(synthetic_release: Path) -> None:
    """No visible feature alone tells positives from hard negatives, on either split."""
    release = synthetic_release / "release"
    meta = json.loads((release / "eval_metadata.json").read_text())
    leak = meta["leak_audit"]
    assert leak["bounds"] == [0.4, 0.6] and leak["passed"] and leak["outside_bounds"] == {}
    for split in S.SPLIT_NAMES:
        table = leak["splits"][split]
        assert S.N_CITING_SURVEYS in table and "candidate_age_days" in table
        for name, row in table.items():
            for scope in ("pooled", "per_survey"):
                assert 0.4 <= row[scope] <= 0.6, (split, name, scope, row)
        rows = pl.read_parquet(release / READING_LISTS_FILE.format(split=split))
        assert (
            rows[S.CANDIDATE_DATE].drop_nulls()
            < rows[S.SURVEY_DATE].filter(rows[S.CANDIDATE_DATE].is_not_null())
        ).all()
    # the relative audit and the reading-free probe
    from pipeline.rules.leak_audit import RELATIVE_FEATURES, WITHOUT_ABSTRACT_SCOPE

    assert leak["relative"]["outside_bounds"] == {}
    for split in S.SPLIT_NAMES:
        table = leak["relative"]["splits"][split]
        assert set(RELATIVE_FEATURES) <= set(table)
        assert f"{RELATIVE_FEATURES[0]}@{WITHOUT_ABSTRACT_SCOPE}" in table
        for name, row in table.items():
            for scope in ("pooled", "per_survey"):
                assert row[scope] is None or 0.4 <= row[scope] <= 0.6, (split, name, row)
    probe = leak["reading_free_probe"]
    assert probe["feature_set"] == "reading-free" and not probe["flagged"], probe
    assert set(RELATIVE_FEATURES) <= set(probe["features"])
    assert not {"bm25", "query_coverage"} & set(probe["features"])
    for metric in ("nDCG@10", "hard_negative_auc"):
        row = probe["metrics"][metric]
        assert row["lgbm-reading-free"] <= row["bm25"], (metric, row)
    texts = meta["candidate_text"]
    assert set(texts) == set(S.SPLIT_NAMES)
    assert texts["eval"]["parsed_title"]["positives"] > 0
    card = (release / "README.md").read_text()
    methods = (release / CARD.METHODS_FILE).read_text()
    assert "| leak audit | passed" in card
    assert "## Leak audit" in methods and "passed" in methods
    assert "### Relative audit" in methods and "| `relative_shape_similarity` |" in methods
    assert "| `nDCG@10` |" in methods and "## Candidate text" in methods
    for f in S.CANDIDATES_VIEW:
        assert f"| `reading_lists`, `candidates` | `{f.name}` | {f.type} | input |" in card
    assert f"| `reading_lists` | `{S.LABEL}` | int8 | **judgment** |" in card
    # popularity: audited (the negatives are matched on it), judgment-side, never read
    for name in S.POPULARITY_COLUMNS:
        for config in ("reading_lists", "aspects"):
            assert f"| `{config}` | `{name}` | int64 | **judgment** |" in card, (config, name)
        assert name not in pq.read_schema(release / CANDIDATES_FILE.format(split="eval")).names
        assert not any(name in f or "citations" in f for f in probe["features"]), name


@pytest.mark.parametrize("which", ["relative", "probe"])
def test_the_relative_audit_and_the_probe_fail_the_build_in_error_mode(
    synthetic_release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """Under ``release.leak_audit = "error"`` a relative feature outside the bounds, or a
    reading-free probe that beats BM25, fails the release."""
    import shutil

    from pipeline import api
    from pipeline.stages.release import audit, splits

    out = tmp_path / "work"
    shutil.copytree(synthetic_release, out)
    config = tmp_path / "error.toml"
    config.write_text('[release]\nleak_audit = "error"\n')
    if which == "relative":
        monkeypatch.setattr(splits, "relative_audit", lambda values: {
            "relative_shape_similarity": {"pooled": 0.81, "per_survey": 0.83, "surveys": 3}})  # fmt: skip
        expected = "relative_shape_similarity (pooled) = 0.81"
    else:
        row = {"lgbm-reading-free": 0.7, "bm25": 0.6, "beats": True}
        monkeypatch.setattr(audit, "reading_free_probe", lambda release, cfg, max_rows=None, full_text=None: {
            "probe": "lgbm-reading-free", "reference": "bm25", "metrics": {"nDCG@10": row},
            "flagged": True})  # fmt: skip
        expected = "the reading-free probe beats BM25: nDCG@10 0.7 > 0.6"
    with pytest.raises(RuntimeError, match="leak audit") as err:
        api.reduce("release", out, config=config, force=True)
    assert expected in str(err.value)
