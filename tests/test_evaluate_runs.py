"""Run files: parsing, validation errors with file and line, lenient mode, missing candidates."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.core.config import EvaluateConfig
from pipeline.evaluate import RunError, RunWarning, load_run, missing_surveys, read_run, tie_key
from pipeline.evaluate.columns import (
    CANDIDATE_ID,
    IN_DOMAIN,
    LABEL,
    LINE_NUMBER,
    SCORE,
    SUBSET,
    SURVEY_ID,
)
from pipeline.evaluate.scoring.subsets import SUBSET_ALL, per_survey_subsets
from pipeline.evaluate.systems.submitted import aligned

EVAL_PAIRS = pl.DataFrame(
    {
        SURVEY_ID: ["s1", "s1", "s1", "s2", "s2"],
        CANDIDATE_ID: ["a", "b", "c", "x", "y"],
    }
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ TREC
def test_trec_run_is_parsed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mine.run",
        "s1 Q0 a 1 2.5 sysA\ns1\tQ0\tb  2   1.0 sysA\n\ns2 Q0 x 1 -3e-1 sysA\n",
    )
    run = load_run(path, EVAL_PAIRS)
    assert run.name == "sysA" and run.format == "trec"
    assert run.scores[SCORE].to_list() == [2.5, 1.0, -0.3]
    assert run.scores[LINE_NUMBER].to_list() == [1, 2, 4]
    assert run.n_rows == 3 and run.n_dropped_unknown == 0


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("s1 Q0 a 1 2.5 t\ns1 Q0 b 2 1.0\n", 2, "expected 6 whitespace-separated fields"),
        ("s1 Q0 a 1 2.5 t extra\n", 1, "got 7"),
        ("s1 Q0 a 1 2.5 t\ns1 Q0 b 2 abc t\n", 2, "'abc' is not a number"),
        ("s1 Q0 a 1 nan t\n", 1, "not finite"),
        ("s1 Q0 a 1 2.5 t\n\ns1 Q0 b 2 inf t\n", 3, "not finite"),
        ("s1 Q0 a 1 2.5 t\ns1 Q0 b 2 1.0 t\ns1 Q0 a 3 0.5 t\n", 3, "duplicate"),
        ("s1 Q0 a 1 2.5 t\ns1 Q0 b 2 1.0 u\n", 2, "tag 'u' differs"),
    ],
)
def test_trec_errors_name_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(RunError) as info:
        read_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message


def test_duplicate_names_the_first_occurrence(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.trec", "s1 Q0 a 1 2.5 t\ns1 Q0 b 2 1.0 t\ns1 Q0 a 3 0.5 t\n")
    with pytest.raises(RunError, match=r"first given at line 1"):
        read_run(path)


def test_empty_trec_run(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="no run lines"):
        read_run(write(tmp_path, "empty.run", "\n\n"))


def test_missing_file() -> None:
    with pytest.raises(FileNotFoundError):
        read_run("/nonexistent/run.trec")


# ------------------------------------------------------------------ CSV
def test_csv_run_is_parsed(tmp_path: Path) -> None:
    path = write(
        tmp_path, "my_system.csv", "score,survey_id,candidate_id,note\n0.5,s1,a,x\n1,s2,y,\n"
    )
    run = load_run(path, EVAL_PAIRS)
    assert run.name == "my_system" and run.format == "csv"
    assert run.scores.select(SURVEY_ID, CANDIDATE_ID, SCORE).rows() == [
        ("s1", "a", 0.5),
        ("s2", "y", 1.0),
    ]
    assert run.scores[LINE_NUMBER].to_list() == [2, 3]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("survey_id,candidate,score\ns1,a,1\n", 1, "missing column(s) ['candidate_id']"),
        ("survey_id,candidate_id,score\ns1,a,1\ns1,b\n", 3, "expected 3 comma-separated fields"),
        ("survey_id,candidate_id,score\ns1,a,1\ns1,b,NaN\n", 3, "not finite"),
        ("survey_id,candidate_id,score\ns1,a,\n", 2, "missing score"),
        ("survey_id,candidate_id,score\ns1,a,1\ns1,b,x1\n", 3, "is not a number"),
        ("survey_id,candidate_id,score\ns1,a,1\ns1,a,2\n", 3, "duplicate"),
        ("survey_id,candidate_id,score\n,a,1\n", 2, "empty survey_id"),
    ],
)
def test_csv_errors_name_file_and_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(RunError) as info:
        read_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message


# ------------------------------------------------------------------ Parquet
def test_parquet_run_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "pq_system.parquet"
    pl.DataFrame({SURVEY_ID: ["s1", "s1"], CANDIDATE_ID: ["b", "c"], SCORE: [3, 1]}).write_parquet(
        path
    )
    run = load_run(path, EVAL_PAIRS)
    assert run.name == "pq_system" and run.format == "parquet"
    assert run.scores[SCORE].to_list() == [3.0, 1.0]


@pytest.mark.parametrize(
    ("frame", "fragment"),
    [
        (
            pl.DataFrame({SURVEY_ID: ["s1"], "cand": ["a"], SCORE: [1.0]}),
            "missing column(s) ['candidate_id']",
        ),
        (
            pl.DataFrame(
                {SURVEY_ID: ["s1", "s1"], CANDIDATE_ID: ["a", "b"], SCORE: [1.0, float("nan")]}
            ),
            "row 2: score",
        ),
        (
            pl.DataFrame({SURVEY_ID: ["s1", "s1"], CANDIDATE_ID: ["a", "b"], SCORE: ["1", "high"]}),
            "row 2: score 'high'",
        ),
        (
            pl.DataFrame({SURVEY_ID: ["s1", "s1"], CANDIDATE_ID: ["a", "a"], SCORE: [1.0, 2.0]}),
            "row 2: duplicate",
        ),
        (
            pl.DataFrame(
                {SURVEY_ID: ["s1"], CANDIDATE_ID: ["a"], SCORE: [None]},
                schema_overrides={SCORE: pl.Float64},
            ),
            "row 1: missing score",
        ),
        (
            pl.DataFrame({SURVEY_ID: ["s1"], CANDIDATE_ID: ["a"], SCORE: [[1.0]]}),
            "expected a number",
        ),
    ],
)
def test_parquet_errors_name_file_and_row(
    tmp_path: Path, frame: pl.DataFrame, fragment: str
) -> None:
    path = tmp_path / "bad.parquet"
    frame.write_parquet(path)
    with pytest.raises(RunError) as info:
        read_run(path)
    assert str(info.value).startswith(f"{path}: ")
    assert fragment in str(info.value)


def test_not_parquet(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="not a readable Parquet file"):
        read_run(write(tmp_path, "broken.parquet", "not parquet"))


# ------------------------------------------------------------------ eval-set ids
def test_unknown_ids_fail_with_line(tmp_path: Path) -> None:
    path = write(tmp_path, "u.run", "s1 Q0 a 1 1 t\ns1 Q0 zz 2 0.5 t\ns9 Q0 a 3 0.2 t\n")
    with pytest.raises(RunError) as info:
        load_run(path, EVAL_PAIRS)
    message = str(info.value)
    assert message.startswith(f"{path}:2: ")
    assert "'zz' is not a judged candidate of survey 's1'" in message
    assert "2 row(s)" in message
    path = write(tmp_path, "v.run", "s9 Q0 a 3 0.2 t\n")
    with pytest.raises(RunError, match=r"v\.run:1: survey_id 's9' is not in the eval set"):
        load_run(path, EVAL_PAIRS)


def test_lenient_drops_counts_and_warns(tmp_path: Path) -> None:
    path = write(
        tmp_path, "u.run", "s1 Q0 a 1 1 t\ns1 Q0 zz 2 0.5 t\ns9 Q0 a 3 0.2 t\ns2 Q0 y 4 0.1 t\n"
    )
    with pytest.warns(RunWarning, match=r"dropped 2 of 4 row\(s\)"):
        run = load_run(path, EVAL_PAIRS, lenient=True)
    assert run.n_rows == 4 and run.n_dropped_unknown == 2
    assert run.scores.select(SURVEY_ID, CANDIDATE_ID).rows() == [("s1", "a"), ("s2", "y")]


def test_missing_candidates_rank_below_scored_ones(tmp_path: Path) -> None:
    # Only the hard negative c is scored, and negatively; a and b (relevant) are
    # missing, so they still rank below it, ordered among themselves by the tie
    # key: a then b (asserted below; the key is pinned in test_evaluate_metrics).
    assert tie_key("s1", "a") < tie_key("s1", "b")
    eval_set = pl.DataFrame(
        {
            SURVEY_ID: ["s1"] * 3,
            CANDIDATE_ID: ["a", "b", "c"],
            LABEL: pl.Series([4, 1, 0], dtype=pl.Int8),
            IN_DOMAIN: [True, True, False],
        }
    )
    path = write(tmp_path, "neg.run", "s1 Q0 c 1 -100 t\n")
    run = load_run(path, eval_set.select(SURVEY_ID, CANDIDATE_ID))
    row = (
        per_survey_subsets(aligned(eval_set, run.scores), EvaluateConfig().ks)
        .filter(pl.col(SUBSET) == SUBSET_ALL)
        .row(0, named=True)
    )
    assert row["RR(rel=3)"] == pytest.approx(1 / 2)
    assert row["hard_negative_auc"] == 0.0
    assert row["AP"] == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_missing_surveys_are_listed(tmp_path: Path) -> None:
    path = write(tmp_path, "half.run", "s1 Q0 a 1 1 t\ns1 Q0 b 2 0.5 t\n")
    run = load_run(path, EVAL_PAIRS)
    assert missing_surveys(run, EVAL_PAIRS) == ["s2"]
    full = load_run(write(tmp_path, "full.run", "s1 Q0 a 1 1 t\ns2 Q0 y 2 0.5 t\n"), EVAL_PAIRS)
    assert missing_surveys(full, EVAL_PAIRS) == []


# ------------------------------------------------------------------ the field's formats
EXPECTED_ROWS = [("s1", "a", 0.5), ("s1", "b", 0.25), ("s2", "y", 1.0)]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("beir.csv", "query-id,corpus-id,score\ns1,a,0.5\ns1,b,0.25\ns2,y,1\n"),
        ("snake.csv", "score,query_id,corpus_id\n0.5,s1,a\n0.25,s1,b\n1,s2,y\n"),
        ("headed.tsv", "query-id\tcorpus-id\tscore\ns1\ta\t0.5\ns1\tb\t0.25\ns2\ty\t1\n"),
        ("bare.tsv", "s1\ta\t0.5\ns1\tb\t0.25\ns2\ty\t1\n"),
    ],
)
def test_beir_and_mteb_layouts_are_read(tmp_path: Path, name: str, text: str) -> None:
    run = load_run(write(tmp_path, name, text), EVAL_PAIRS)
    assert run.scores.select(SURVEY_ID, CANDIDATE_ID, SCORE).rows() == EXPECTED_ROWS
    assert run.name == Path(name).stem and run.format == name.rsplit(".", 1)[1]
    first_line = 1 if name == "bare.tsv" else 2
    assert run.scores[LINE_NUMBER].to_list() == [first_line, first_line + 1, first_line + 2]


def test_parquet_with_beir_columns(tmp_path: Path) -> None:
    path = tmp_path / "mteb.parquet"
    pl.DataFrame(
        {"query-id": ["s1", "s1", "s2"], "corpus-id": ["a", "b", "y"], "score": [0.5, 0.25, 1.0]}
    ).write_parquet(path)
    assert load_run(path, EVAL_PAIRS).scores.select(SURVEY_ID, CANDIDATE_ID, SCORE).rows() == (
        EXPECTED_ROWS
    )


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("both.csv", "survey_id,query-id,candidate_id,score\ns1,s1,a,1\n", "name the same field"),
        ("none.tsv", "qid\tdoc\tscore\ns1\ta\t1\n", "missing column(s) ['candidate_id']"),
        ("short.tsv", "s1\ta\t0.5\ns1\tb\n", "expected 3 tab-separated fields"),
    ],
)
def test_format_errors_name_the_columns(tmp_path: Path, name: str, text: str, fragment) -> None:
    with pytest.raises(RunError) as info:
        read_run(write(tmp_path, name, text))
    assert fragment in str(info.value)
    assert "query-id" in str(info.value) or "tab-separated" in str(info.value)


def test_a_three_column_trec_file_names_the_tsv_suffix(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"got 3; a 3-column run .* named \*\.tsv"):
        read_run(write(tmp_path, "three.run", "s1 a 0.5\n"))


def test_name_replaces_the_tag_so_two_runs_with_one_tag_can_be_compared(tmp_path: Path) -> None:
    a = write(tmp_path, "a.trec", "s1 Q0 a 1 2 same\n")
    b = write(tmp_path, "b.trec", "s1 Q0 b 1 2 same\n")
    assert read_run(a).name == read_run(b).name == "same"
    assert read_run(a, "first").name == "first" and read_run(b, "second").name == "second"
    with pytest.raises(RunError, match="--name"):
        read_run(a, " padded")


def test_unknown_ids_name_the_lenient_flag(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"--lenient \(lenient=True in Python\) drops them"):
        load_run(write(tmp_path, "u.run", "s1 Q0 zz 1 1 t\n"), EVAL_PAIRS)


def test_in_memory_scores_are_checked_like_a_file(tmp_path: Path) -> None:
    from pipeline.evaluate.systems.runs import scores_run

    as_dict = scores_run({"s1": {"a": 0.5, "b": 0.25}, "s2": {"y": 1.0}}, "mine")
    frame = pl.DataFrame(
        {"query-id": ["s1", "s1", "s2"], "corpus-id": ["a", "b", "y"], "score": [0.5, 0.25, 1]}
    )
    as_frame = scores_run(frame, "mine")
    as_pandas = scores_run(frame.to_pandas(), "mine")
    for run in (as_dict, as_frame, as_pandas):
        assert run.scores.select(SURVEY_ID, CANDIDATE_ID, SCORE).rows() == EXPECTED_ROWS
        assert run.path is None and run.format == "scores"
    with pytest.raises(RunError, match="scores of 'mine': row 2: score 'NaN' is not finite"):
        scores_run({"s1": {"a": 0.5, "b": float("nan")}}, "mine")
    with pytest.raises(RunError, match="expected a"):
        scores_run([("s1", "a", 1.0)], "mine")
