"""Section-level reading lists: what an aspect is, its judgments and candidates on the
real survey 2212.11774 in both layouts, the answer-free view, the audit, loading and evaluation."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.config import ConfigError, describe, load_config
from pipeline.core.release_files import ASPECT_CANDIDATES_FILE, ASPECT_READING_LISTS_FILE
from pipeline.corpus.layout import to_2024_layout
from pipeline.rules.aspect_queries import as_queries, query_title_expr
from pipeline.rules.leak_audit import ASPECT_SCOPES, aspect_audit, audit_values, outside
from pipeline.stages.aspects import units
from tests.conftest import SAMPLE_2022, SURVEY_ID
from tests.test_negatives import synthetic_release_dir


# --------------------------------------------------------------------- units, by hand
def _sections(rows: list[tuple]) -> pl.LazyFrame:
    """``sections`` rows of paper P from (index, heading, level, top, appendix)."""
    return pl.LazyFrame(
        [
            {
                S.PAPER_ID: "P",
                S.SECTION_INDEX: i,
                S.SECTION: h,
                S.SEC_NUMBER: "",
                S.LEVEL: lvl,
                S.TOP_INDEX: top,
                S.UNNAMED: False,
                S.APPENDIX: app,
                S.SOURCE_FILE: "f",
            }
            for i, h, lvl, top, app in rows
        ],  # fmt: skip
        schema=S.polars_schema(S.SECTIONS),
    )


def _aspect_units(rows: list[tuple]) -> pl.DataFrame:
    return units(_sections(rows), load_config()).collect().sort(S.SECTION_INDEX)


def _core(got: pl.DataFrame) -> pl.DataFrame:
    """The unit rows that can be aspects."""
    return got.filter(pl.col("_core") & (pl.col(S.SECTION_INDEX) == pl.col("_unit")))


def test_units_of_a_2022_survey_by_hand() -> None:
    got = _aspect_units(
        [
            (0, "Introduction", 1, 0, False),
            (1, "Search strategy", 1, 1, False),  # the review's own protocol
            (2, "Graph learning", 1, 2, False),  # its text before 2.1: not an aspect
            (3, "Graph methods", 2, 2, False),
            (4, "Methodology", 3, 2, False),  # a reviewed tool's: rolls up into 2.1
            (5, "Text methods", 2, 2, False),
            (6, "Open challenges", 1, 6, False),
            (7, "Conclusion", 1, 7, False),
            (8, "Related work", 1, 8, True),  # an appendix
        ]
    )
    assert got["_unit"].to_list() == [0, 1, 2, 3, 3, 5, 6, 7, 8]
    core = _core(got)
    assert core[S.SECTION_INDEX].to_list() == [3, 5, 6]
    assert core[S.ASPECT_PARENT_HEADING].to_list() == ["Graph learning", "Graph learning", None]
    assert core[S.ASPECT_LEVEL].to_list() == ["subsection", "subsection", "section"]
    assert core[S.ASPECT_KIND].to_list() == ["topical", "topical", "discussion"]


def test_units_of_a_2024_survey_are_its_heading_keys() -> None:
    got = _aspect_units(
        [
            (0, "Introduction", 0, 0, False),
            (1, "Graph methods", 0, 1, False),
            # the publisher merged every "Methodology" of the reviewed tools into one key
            (2, "Methodology", 0, 2, False),
            (3, "Conclusions", 0, 3, False),
        ]
    )
    assert got["_unit"].to_list() == [0, 1, 2, 3]
    core = _core(got)
    assert core[S.ASPECT_HEADING].to_list() == ["Graph methods", "Methodology"]
    assert core[S.ASPECT_LEVEL].to_list() == ["key", "key"]
    assert core[S.ASPECT_KIND].to_list() == ["topical", "method"]
    assert core[S.ASPECT_PARENT_HEADING].to_list() == [None, None]


# --------------------------------------------------------------------- schema, query, config
def test_the_aspect_view_holds_no_judgment() -> None:
    view = set(S.ASPECT_CANDIDATES_VIEW.names)
    assert not view & S.JUDGMENT_COLUMNS
    assert S.NEGATIVE_KIND in S.JUDGMENT_COLUMNS and S.NEGATIVE_KIND in S.ASPECT_READING_LISTS.names
    assert view <= set(S.ASPECT_READING_LISTS.names)
    # the view is the main task's answer-free view plus the aspect query
    assert set(S.CANDIDATES_VIEW.names) <= view


def test_an_aspect_is_read_as_a_query() -> None:
    frame = pl.DataFrame(
        {
            S.ASPECT_ID: ["2212.11774#001", "2212.11774#002"],
            S.SURVEY_ID: [SURVEY_ID, SURVEY_ID],
            S.ASPECT_HEADING: ["Convolutional Neural Network", "Graph methods"],
            S.ASPECT_PARENT_HEADING: ["Discussion", None],
            S.SURVEY_TITLE: ["A literature review", ""],
        }
    )
    assert frame.select(query_title_expr())[:, 0].to_list() == [
        "Convolutional Neural Network — Discussion — A literature review",
        "Graph methods",
    ]
    queried = as_queries(frame)
    assert queried[S.SURVEY_ID].to_list() == frame[S.ASPECT_ID].to_list()
    # a table of whole surveys is read as it is
    surveys = frame.drop(S.ASPECT_ID)
    assert as_queries(surveys).equals(surveys)


def test_min_works_is_a_config_value() -> None:
    text = describe()
    assert "[aspects]" in text and "min_works = 5" in text.split("[aspects]")[1]
    assert load_config(overrides={"aspects": {"min_works": 3}}).aspects.min_works == 3
    with pytest.raises(ConfigError, match="min_works"):
        load_config(overrides={"aspects": {"min_works": 0}})


# --------------------------------------------------------------------- audit
def test_the_aspect_audit_flags_a_feature_that_tells_the_labels() -> None:
    n = 40
    y = [i % 4 == 0 for i in range(n)]
    values = pl.DataFrame(
        {
            S.SURVEY_ID: ["S1"] * 20 + ["S2"] * 20,
            "_aspect": [f"S{1 + i // 20}#{1 + (i // 10) % 2:03d}" for i in range(n)],
            "_positive": y,
            # in more of the survey's lists when positive: a shortcut
            "lists": [3.0 if p else 1.0 for p in y],
            "noise": [float((i * 7) % 5) for i in range(n)],
        }
    )
    table = aspect_audit(values)
    assert table["lists"]["pooled"] == 1.0 and table["lists"]["per_aspect"] == 1.0
    assert table["lists"]["aspects"] == 4 and table["lists"]["surveys"] == 2
    bad = outside(table, 0.4, 0.6, ASPECT_SCOPES)
    assert any(b.startswith("lists (per_aspect)") for b in bad)
    assert not any(b.startswith("noise") for b in bad)


def _shared_lists(surveys: int, seed: int = 3) -> tuple[pl.DataFrame, np.ndarray, list]:
    """Aspect-view values of ``surveys`` surveys of 3 aspects over the same 30 candidates,
    whose positives overlap as the reviewed tools of the real survey do (the same works
    under "Methodology" and "Advantages"), and a feature ``x`` carrying nothing."""
    rng = np.random.default_rng(seed)
    m, rows = 30, []
    xs = rng.integers(0, 8, (surveys, m)).astype(float)  # ties, like a year
    for s in range(surveys):
        core = rng.random(m) < 0.35
        for a in range(3):
            flip = rng.random(m) < 0.08
            for c in range(m):
                rows.append(
                    (f"S{s}", f"S{s}#{a + 1:03d}", f"c{c}", bool(core[c] ^ flip[c]), xs[s, c])
                )
    values = pl.DataFrame(rows, schema=[S.SURVEY_ID, "_aspect", "_candidate", "_positive", "x"],
                          orient="row")  # fmt: skip
    return values, xs, rows


def _permuted_half_widths(values: pl.DataFrame, xs: np.ndarray, times: int = 1500) -> dict:
    """Half-widths of the 95% ranges of the per-aspect mean and the pooled AUC of ``x`` when
    each survey's values are shuffled over its candidates (the same in every aspect)."""
    rng = np.random.default_rng(11)
    surveys, m = xs.shape
    s_idx = values[S.SURVEY_ID].str.slice(1).cast(pl.Int64).to_numpy()
    c_idx = values["_candidate"].str.slice(1).cast(pl.Int64).to_numpy()
    groups = values["_aspect"].to_numpy()
    y = values["_positive"].to_numpy()
    per, pooled = [], []

    def auc(x: np.ndarray, yy: np.ndarray) -> float:
        r = pl.Series(x).rank("average").to_numpy()
        p = yy.sum()
        return (r[yy].sum() - p * (p + 1) / 2) / (p * (len(yy) - p))

    masks = [groups == g for g in np.unique(groups)]
    for _ in range(times):
        perm = np.array([rng.permutation(m) for _ in range(surveys)])
        x = xs[s_idx, perm[s_idx, c_idx]]
        per.append(np.mean([auc(x[k], y[k]) for k in masks]))
        pooled.append(auc(x, y))
    return {k: float(np.subtract(*np.percentile(v, [97.5, 2.5])) / 2)
            for k, v in (("per_aspect", per), ("pooled", pooled))}  # fmt: skip


def test_the_aspect_audits_chance_covers_lists_shared_by_aspects() -> None:
    """A survey's aspects rank the same candidates, so a candidate's value is one observation
    in all of them: counted as independent rows, chance is too narrow and noise is flagged
    (the real survey in the 2024 layout was); counted as shared, it covers the range the
    shuffled values reach."""
    values, xs, _ = _shared_lists(surveys=2)
    shared = aspect_audit(values)["x"]
    # every row an observation of its own: each aspect a survey of the main audit
    by_aspect = values.drop(S.SURVEY_ID, "_candidate").rename({"_aspect": S.SURVEY_ID})
    as_rows = {
        "per_aspect": audit_values(by_aspect)["x"]["per_survey_chance"],
        "pooled": audit_values(values.drop("_aspect", "_candidate"))["x"]["pooled_chance"],
    }
    got = _permuted_half_widths(values, xs)
    for scope in ("per_aspect", "pooled"):
        assert got[scope] <= shared[f"{scope}_chance"] * 1.05, (scope, got, shared)
        assert got[scope] > as_rows[scope] * 1.3, (scope, got, as_rows)


def test_a_feature_of_the_aspect_is_counted_once_per_aspect() -> None:
    """A heading's length is one value over its aspect's list: three aspects are three
    observations, however long their lists. Three hundred surveys of the same pattern are
    flagged."""

    def frame(surveys: int) -> pl.DataFrame:
        rows = []
        for s in range(surveys):
            for a, (length, positives) in enumerate(((11, 11), (10, 22), (28, 9))):
                for c in range(31):
                    rows.append((f"S{s}", f"S{s}#{a + 1:03d}", f"c{c}", c < positives,
                                 float(length)))  # fmt: skip
        return pl.DataFrame(
            rows, schema=[S.SURVEY_ID, "_aspect", "_candidate", "_positive",
                          "aspect_heading_length"], orient="row",
        )  # fmt: skip

    one = aspect_audit(frame(1))["aspect_heading_length"]
    assert one["per_aspect"] == 0.5 and one["per_aspect_chance"] == 0.0  # constant per query
    assert one["pooled"] < 0.4 and one["pooled_chance"] > abs(one["pooled"] - 0.5)
    assert not outside({"f": one}, 0.4, 0.6, ASPECT_SCOPES)
    many = aspect_audit(frame(300))["aspect_heading_length"]
    assert many["pooled"] == one["pooled"] and many["pooled_chance"] < 0.05
    assert outside({"f": many}, 0.4, 0.6, ASPECT_SCOPES)


# --------------------------------------------------------------------- the real survey
def _run(tmp_path: Path, source: Path, aspects: dict | None = None) -> Path:
    out = tmp_path / "out"
    config = load_config(overrides={"aspects": aspects}) if aspects else None
    api.run(source, out, workers=1, config=config)
    return out


# hand-checked in the record (tests/fixtures): "4.4 Convolutional Neural Network" cites 10
# bib entries (one, Deng and Yu's "Deep learning: methods and applications", has no identifier),
# Polisetty et al. in 7 paragraphs and the heading; "4.10 PredFL" cites 5, Jiang et al. in 9
# paragraphs and the heading. "4.11 PRFL" cites 5, one of them (Page et al.) without identifier.
REAL_ASPECTS = {
    "Convolutional Neural Network": {
        "arxiv:1907.08588": (4, 8),  # On usefulness of the deep-learning-based bug localization...
        "openalex:W2163605009": (3, 1),  # ImageNet classification with deep CNNs
        "doi:10.3115/v1/d14-1181": (3, 1),  # Convolutional neural networks for sentence class.
        "doi:10.1109/msp.2012.2205597": (3, 1),  # Deep neural networks for acoustic modeling
        "doi:10.1145/2931037.2931051": (3, 1),  # Practitioners' expectations on automated FL
        "doi:10.1007/s10994-005-0466-3": (3, 1),  # Logistic model trees
        "doi:10.24963/ijcai.2017/265": (3, 1),  # Enhancing the unified features ...
        "doi:10.1109/icse.2012.6227210": (3, 1),  # Where should the bugs be fixed?
        "doi:10.1109/ase.2013.6693093": (3, 1),  # Improving bug localization using structured IR
    },
    "PredFL": {
        "doi:10.1109/ase.2019.00054": (4, 10),  # Combining spectrum-based FL and statistical deb.
        "doi:10.1145/2970276.2970308": (3, 1),  # Fine-tuning spectrum based fault localisation
        "doi:10.1145/3092703.3092731": (3, 1),  # Boosting spectrum-based FL using PageRank
        "doi:10.1145/1064978.1065014": (3, 1),  # Scalable statistical bug isolation
        "arxiv:1803.09939": (3, 1),  # An empirical study of fault localization families
    },
}


@pytest.fixture(scope="module")
def real_2022(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("real2022"), SAMPLE_2022.parent)


def test_real_survey_aspects_are_its_topical_subsections(real_2022: Path) -> None:
    rows = pl.read_parquet(real_2022 / "release" / ASPECT_READING_LISTS_FILE.format(split="train"))
    aspects = rows.unique(S.ASPECT_ID).sort(S.ASPECT_ID)
    assert aspects[S.ASPECT_ID].to_list() == [f"{SURVEY_ID}#001", f"{SURVEY_ID}#002"]
    assert aspects[S.ASPECT_HEADING].to_list() == list(REAL_ASPECTS)
    assert set(aspects[S.ASPECT_PARENT_HEADING]) == {"Discussion"}
    assert set(aspects[S.ASPECT_LEVEL]) == {"subsection"} and set(aspects[S.ASPECT_KIND]) == {
        "topical"
    }
    for heading, works in REAL_ASPECTS.items():
        got = rows.filter((pl.col(S.ASPECT_HEADING) == heading) & (pl.col(S.LABEL) >= 1))
        assert {r[S.CANDIDATE_ID]: (r[S.LABEL], r[S.N_MENTIONS])
                for r in got.iter_rows(named=True)} == works  # fmt: skip
    # every aspect ranks the survey's whole list (31 positives, no hard negative in the sample)
    survey = pl.read_parquet(real_2022 / "release" / "train_survey_reading_lists.parquet")
    for _, part in rows.group_by(S.ASPECT_ID):
        assert sorted(part[S.CANDIDATE_ID]) == sorted(survey[S.CANDIDATE_ID])
    negatives = rows.filter(pl.col(S.LABEL) == 0)
    assert set(negatives[S.NEGATIVE_KIND]) == {"in_survey"} and negatives.height == 62 - 14
    assert rows.filter(pl.col(S.LABEL) >= 1)[S.NEGATIVE_KIND].null_count() == 14
    meta = json.loads((real_2022 / "release" / "eval_metadata.json").read_text())
    assert meta["aspects"]["splits"]["train"]["aspects"] == 2
    assert meta["aspects"]["splits_written"] == ["train"]
    view = pl.read_parquet(real_2022 / "release" / ASPECT_CANDIDATES_FILE.format(split="train"))
    assert view.columns == S.ASPECT_CANDIDATES_VIEW.names and view.height == rows.height


def test_a_lower_minimum_makes_more_aspects(tmp_path: Path) -> None:
    out = _run(tmp_path, SAMPLE_2022.parent, {"min_works": 4})
    aspects = pl.read_parquet(out / "aspects" / "aspects.parquet")
    # PRFL, CooBa and DNNLoc cite 4 resolved works each; CBT 3 (of its 4 entries, Liu et
    # al.'s "SOBER" has no identifier)
    assert set(aspects[S.ASPECT_HEADING]) == {*REAL_ASPECTS, "PRFL", "CooBa", "DNNLoc"}
    assert (aspects[S.N_POSITIVES] >= 4).all()


def test_the_2024_layout_keeps_merged_headings_as_one_aspect(
    tmp_path: Path, sample_records: list[dict]
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with gzip.open(src / "sample_2024.jsonl.gz", "wt", encoding="utf-8") as f:
        for record in sample_records:
            f.write(json.dumps(to_2024_layout(record)) + "\n")
    out = _run(tmp_path, src)
    aspects = pl.read_parquet(out / "aspects" / "aspects.parquet").filter(
        pl.col(S.SURVEY_ID) == SURVEY_ID
    )
    # each key merges the same-named subsubsections of the eleven reviewed tools
    assert aspects[S.ASPECT_HEADING].to_list() == [
        "Methodology", "Evaluation", "Advantages and Disadvantages",
    ]  # fmt: skip
    assert (
        set(aspects[S.ASPECT_LEVEL]) == {"key"}
        and aspects[S.ASPECT_PARENT_HEADING].null_count() == 3
    )
    assert aspects[S.ASPECT_KIND].to_list() == ["method", "method", "topical"]
    meta = json.loads((out / "release" / "eval_metadata.json").read_text())
    assert meta["aspects"]["splits"]["train"]["by_level"]["key"] == aspects.height
    # One survey, three aspects that list the same 31 candidates: its reviewed tools are newer
    # and have longer titles than its background works, which one survey cannot tell from
    # chance once the rows are counted as the observations they are (leak_audit docstring).
    audit = meta["aspects"]["leak_audit"]
    assert audit["passed"], audit["problems"]
    listed = " ".join(audit["outside_bounds_within_chance"]["train"])
    assert "candidate_date (per_aspect) = 0.6732" in listed
    assert "aspect_heading_length (pooled) = 0.3119" in listed
    relative = " ".join(audit["relative"]["outside_bounds_within_chance"]["train"])
    assert "relative_shape_similarity (per_aspect) = 0.6551" in relative


# --------------------------------------------------------------------- the synthetic release
@pytest.fixture
def synthetic_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory)


def test_aspects_load_with_datasets(
    synthetic_release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    release = synthetic_release / "release"
    meta = json.loads((release / "eval_metadata.json").read_text())
    assert meta["aspects"]["splits_written"] == list(S.SPLIT_NAMES)
    for config, pattern, schema in (
        ("aspects", ASPECT_READING_LISTS_FILE, S.ASPECT_READING_LISTS),
        ("aspect_candidates", ASPECT_CANDIDATES_FILE, S.ASPECT_CANDIDATES_VIEW),
    ):
        ds = datasets.load_dataset(str(release), config, cache_dir=str(tmp_path / "cache"))
        assert set(ds) == set(S.SPLIT_NAMES), config
        for split in S.SPLIT_NAMES:
            assert ds[split].num_rows == meta["files"][pattern.format(split=split)]["rows"]
            assert ds[split].column_names == schema.names
    assert not set(ds["eval"].column_names) & S.JUDGMENT_COLUMNS


def test_the_aspect_audit_passes_on_the_synthetic_release(synthetic_release: Path) -> None:
    meta = json.loads((synthetic_release / "release" / "eval_metadata.json").read_text())
    audit = meta["aspects"]["leak_audit"]
    assert audit["passed"], audit["problems"]
    for split in S.SPLIT_NAMES:
        table = audit["splits"][split]
        # the features a system could use without reading, besides the main audit's
        for feature in ("aspect_rank", "aspect_relative_position", "candidate_aspect_lists",
                        "candidate_aspect_lists_share", "aspect_list_length", "n_citing_surveys"):  # fmt: skip
            assert feature in table
        low, high = audit["bounds"]
        assert outside(table, low, high, ASPECT_SCOPES) == []
        # which lists hold a candidate says nothing: every list is the survey's whole list
        assert table["candidate_aspect_lists_share"]["per_aspect"] == 0.5
        # the answers would: that is why they stay on the judgment side
        assert audit["judgment_side"][split]["sections_citing_work"]["per_aspect"] > 0.6


def test_evaluate_task_aspects(synthetic_release: Path, tmp_path: Path) -> None:
    config = tmp_path / "fast.toml"
    config.write_text("[evaluate]\nbootstrap_samples = 20\nrandom_seeds = 1\n", encoding="utf-8")
    result = api.evaluate(
        synthetic_release / "release", out=tmp_path / "ev", config=config, task="aspects"
    )
    results = result.results
    meta = json.loads((synthetic_release / "release" / "eval_metadata.json").read_text())
    assert results["task"] == "aspects"
    assert results["n_surveys"] == meta["aspects"]["splits"]["eval"]["aspects"]
    assert {"random", "popularity", "bm25", "lgbm", "lgbm-metadata"} <= set(results["systems"])
    assert {"bm25@survey", "lgbm@survey"} <= set(results["whole_survey"])
    assert results["kinds"]["bm25@survey"] == "whole-survey baseline"
    kinds = [g for g in results["query_groups"] if g.startswith("kind=")]
    assert kinds and all(g in results["subsets"] for g in kinds)
    assert sum(results["subset_surveys"][g] for g in kinds) == results["n_surveys"]
    report = (tmp_path / "ev" / "report.md").read_text()
    assert "## Whole-survey systems per aspect" in report and "## By aspect kind" in report
    # the default output is eval/aspects/ beside the release, never inside it
    assert not (synthetic_release / "release" / "aspects" / "eval").exists()


def test_a_changed_aspects_file_is_not_scored(tmp_path: Path) -> None:
    from pipeline.core.release_files import EVAL_FILE
    from pipeline.engine.workdir import release_file_problem as recorded_problem
    from pipeline.evaluate.evalset import EvalSetError, load_eval_set

    release = tmp_path / "release"
    (release / "aspects").mkdir(parents=True)
    path = release / "aspects" / EVAL_FILE
    path.write_bytes(b"rows")
    from pipeline.core.files import sha256_file

    files = {f"aspects/{EVAL_FILE}": {"sha256": sha256_file(path)}}
    (release / "eval_metadata.json").write_text(json.dumps({"files": files}))
    assert recorded_problem(path) is None
    path.write_bytes(b"other rows")
    assert "changed after the release stage wrote it" in (recorded_problem(path) or "")
    with pytest.raises(EvalSetError, match="changed after the release stage wrote it"):
        load_eval_set(path)  # the loader every evaluation goes through checks it


def test_aspect_rows_do_not_depend_on_the_batches(synthetic_release: Path, tmp_path: Path) -> None:
    from pipeline.core.files import sha256_file
    from pipeline.engine.context import ReduceContext
    from pipeline.engine.stage import Limits
    from pipeline.stages import GRAPH
    from pipeline.stages import aspects as stage

    ctx = ReduceContext(
        out=synthetic_release, cfg=load_config(), stage=GRAPH["aspects"], tmp_dir=tmp_path,
        stages=GRAPH, limits=Limits(aspects_batch_rows=500),  # a few surveys per batch
    )  # fmt: skip
    counts = stage.build_aspects(ctx)
    assert counts["rows"] > 10 * 500
    for name in ("aspects.parquet", "aspect_candidates.parquet"):
        assert sha256_file(tmp_path / name) == sha256_file(synthetic_release / "aspects" / name)


def test_lists_shared_by_aspects_are_placed_once() -> None:
    from datetime import date

    from pipeline.rules.leak_audit import _relative_values, relative_values

    titles = ["“Legion: fuzzing,” in Proc. ASE, 2020.", "Deep learning", "A survey: of it",
              "On bugs (2019)", "Graphs, in: NeurIPS"]  # fmt: skip
    survey = pl.DataFrame(
        {
            S.CANDIDATE_ID: [f"doi:10.1/{i}" for i in range(5)],
            S.CANDIDATE_TITLE: titles,
            S.CANDIDATE_ABSTRACT: ["", "an abstract here", "", "", "more words, of text"],
            S.CANDIDATE_DATE: [date(2015 + i, 1, 1) for i in range(5)],
        }
    )
    one = survey.with_columns(pl.lit("S").alias(S.SURVEY_ID))
    # three aspects of S list its candidates; another survey T lists three of them
    aspects = pl.concat(
        [survey.with_columns(pl.lit(f"S#{k:03d}").alias(S.SURVEY_ID)) for k in (1, 2, 3)]
        + [survey.head(3).with_columns(pl.lit("T#001").alias(S.SURVEY_ID))]
    )
    got = relative_values(aspects)
    want = _relative_values(one, None)
    for k in range(3):
        assert got.slice(5 * k, 5).equals(want)
    assert got.slice(15, 3).equals(_relative_values(aspects.slice(15, 3), None))
