"""End to end: write_evaluation() and the CLI on a small synthetic eval set written by the test."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.config import EvaluateConfig
from pipeline.evaluate import (
    RunError,
    RunWarning,
    metric_registry,
    resolve_eval_file,
    write_evaluation,
)
from pipeline.evaluate.columns import (
    CANDIDATE_ID,
    EVAL_FILENAME,
    LABEL,
    SCORE,
    SUBSET,
    SURVEY_ID,
    SURVEY_YEAR,
    SYSTEM,
)
from pipeline.evaluate.report.figures import CAPTIONS, FIGURES_DIR
from pipeline.evaluate.synthetic import synthetic_eval_set

CONFIG = EvaluateConfig(bootstrap_samples=40, random_seeds=2)
STAT_KEYS = {"mean", "ci_low", "ci_high", "n"}
TEST_KEYS = {"system", "baseline", "metric", "diff", "p_value", "ci_low", "ci_high"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("eval_inputs")
    eval_set = synthetic_eval_set(24, 20, seed=11, years=(2023, 2024))
    release = root / "release"
    release.mkdir()
    eval_path = release / EVAL_FILENAME
    eval_set.write_parquet(eval_path)
    rng = np.random.default_rng(0)
    noisy = eval_set.select(
        SURVEY_ID,
        CANDIDATE_ID,
        (pl.col(LABEL) + pl.Series(rng.random(eval_set.height) * 3)).alias(SCORE),
    )
    trec = root / "noisy.trec"
    trec.write_text(
        "".join(
            f"{s} Q0 {c} {i + 1} {v!r} noisy_label\n" for i, (s, c, v) in enumerate(noisy.rows())
        ),
        encoding="utf-8",
    )
    # a CSV run that leaves a third of the candidates unscored
    csv = root / "partial.csv"
    noisy.gather_every(3).with_columns(pl.col(SCORE) * -1).write_csv(csv)
    return {"release": release, "eval": eval_path, "trec": trec, "csv": csv}


def test_results_structure_and_byte_identical_rerun(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "work"
    runs = [inputs["trec"], inputs["csv"]]
    results = write_evaluation(inputs["eval"], runs=runs, out_dir=out, config=CONFIG)
    eval_dir = out / "eval"
    on_disk = json.loads((eval_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert on_disk == results

    assert results["n_surveys"] == 24
    systems = {"random", "popularity", "bm25", "oracle", "noisy_label", "partial"}
    assert set(results["systems"]) == systems
    metrics = set(metric_registry(CONFIG.ks))
    for system in systems:
        assert set(results["systems"][system]) == metrics
        for stat in results["systems"][system].values():
            assert set(stat) == STAT_KEYS
    assert set(results["subsets"]) == {"ALL", "IN", "OUT", "year=2023", "year=2024"}
    assert results["subsets"]["ALL"] == results["systems"]
    assert results["subset_surveys"]["year=2023"] + results["subset_surveys"]["year=2024"] == 24
    ndcg = results["systems"]["noisy_label"]["nDCG@10"]
    assert ndcg["ci_low"] <= ndcg["mean"] <= ndcg["ci_high"] and ndcg["n"] == 24
    assert results["systems"]["oracle"]["nDCG@10"]["mean"] == 1.0

    assert results["best_baseline"] in {"random", "popularity", "bm25"}
    main = results["main_metrics"]
    compared = {"random", "popularity", "bm25"}  # the oracle is an upper bound, not tested
    # every system (the oracle aside) against every baseline but itself, per headline metric
    expected = {(s, b) for s in systems - {"oracle"} for b in compared if b != s}
    assert {(t["system"], t["baseline"]) for t in results["tests"]} == expected
    assert len(results["tests"]) == len(expected) * len(main)
    for test in results["tests"]:
        assert TEST_KEYS <= set(test)
        assert 0 < test["p_value"] <= test["p_holm"] <= 1
        assert test["significant"] == (test["p_holm"] < results["alpha"])
    # the two submitted runs against each other
    assert {(t["system"], t["other"]) for t in results["pairwise"]} == {("noisy_label", "partial")}
    assert len(results["pairwise"]) == len(main)
    assert "tie key" in results["tie_breaking"] and "BLAKE2b" in results["tie_breaking"]
    assert "docid descending" in results["tie_breaking"]
    assert results["runs"]["partial"]["missing_judged"] == 24 * 20 - 160
    assert results["runs"]["partial"]["missing_surveys"] == 0
    assert results["runs"]["noisy_label"]["file"] == {
        "name": "noisy.trec",
        "sha256": sha256(inputs["trec"]),
    }
    assert results["eval_file"] == {"name": EVAL_FILENAME, "sha256": sha256(inputs["eval"])}
    assert results["tier_distribution"]["0"]["name"] == "hard_negative"

    per_survey = pl.read_parquet(eval_dir / "per_survey.parquet")
    assert per_survey.columns[:4] == [SYSTEM, SUBSET, SURVEY_ID, SURVEY_YEAR]
    assert set(per_survey.columns[4:]) == metrics
    all_rows = per_survey.filter(pl.col(SUBSET) == "ALL")
    assert all_rows.height == len(systems) * 24
    assert set(per_survey[SUBSET].unique()) == {"ALL", "IN", "OUT"}

    report = (eval_dir / "report.md").read_text(encoding="utf-8")
    for name in main:
        assert name in report
    assert "In-domain and out-of-domain" in report and "Tier distribution" in report
    assert "## Submitted systems\n" in report and "`noisy.trec`" in report
    assert "## Submitted systems against each other (nDCG@10)" in report
    # no internal jargon up front: the tie rule's constants are in the JSON, not the report
    assert "splitmix64" not in report and "0xBF58476D1CE4E5B9" not in report

    def files() -> dict[str, bytes]:
        found = [p for p in eval_dir.rglob("*") if p.is_file()]
        return {p.relative_to(eval_dir).as_posix(): p.read_bytes() for p in found}

    before = files()
    write_evaluation(inputs["eval"], runs=runs, out_dir=out, config=CONFIG)
    after = files()
    assert sorted(before) == [
        "eval_results.json",
        *(f"{FIGURES_DIR}/{name}" for name in sorted(CAPTIONS)),
        "per_survey.parquet",
        "report.md",
    ]  # no temp files
    assert after == before


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_results_do_not_depend_on_the_checkout(inputs: dict[str, Path], tmp_path: Path) -> None:
    """The same inputs under two different folders give byte-identical outputs (no paths)."""
    outputs = []
    for checkout in ("a", "elsewhere/b"):
        root = tmp_path / checkout
        shutil.copytree(inputs["release"], root / "release")
        shutil.copy(inputs["trec"], root / "noisy.trec")
        shutil.copy(inputs["csv"], root / "partial.csv")
        out = root / "work"
        write_evaluation(
            root / "release",
            runs=[root / "noisy.trec", root / "partial.csv"],
            out_dir=out,
            config=CONFIG,
        )
        files = [p for p in (out / "eval").rglob("*") if p.is_file()]
        outputs.append({p.relative_to(out / "eval").as_posix(): p.read_bytes() for p in files})
        text = (out / "eval" / "eval_results.json").read_text(encoding="utf-8")
        assert str(tmp_path) not in text
        assert str(tmp_path) not in (out / "eval" / "report.md").read_text(encoding="utf-8")
    assert outputs[0] == outputs[1]


def _without_survey(inputs: dict[str, Path], tmp_path: Path, survey: str) -> Path:
    path = tmp_path / "gappy.csv"
    pl.read_csv(inputs["csv"]).filter(pl.col(SURVEY_ID) != survey).write_csv(path)
    return path


def test_missing_surveys_are_counted_and_warned(inputs: dict[str, Path], tmp_path: Path) -> None:
    run = _without_survey(inputs, tmp_path, "S000003")
    with pytest.warns(
        RunWarning, match=r"gappy\.csv: no row for 1 of 24 eval survey\(s\) \(first: 'S000003'\)"
    ):
        results = write_evaluation(
            inputs["eval"], runs=[run], out_dir=tmp_path / "out", config=CONFIG
        )
    assert results["runs"]["gappy"]["missing_surveys"] == 1
    report = (tmp_path / "out" / "eval" / "report.md").read_text(encoding="utf-8")
    assert "`gappy` has no row for 1 of 24 surveys" in report
    with pytest.raises(RunError) as info:
        write_evaluation(
            inputs["eval"],
            runs=[run],
            out_dir=tmp_path / "out2",
            config=CONFIG,
            require_complete=True,
        )
    assert str(info.value).startswith(
        f"{run}: no row for 1 of 24 eval survey(s) (first: 'S000003')"
    )
    assert not (tmp_path / "out2").exists()


def test_hub_eval_file_is_recorded_as_given(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    cache = tmp_path / "cache" / "snapshots" / "abc"
    cache.mkdir(parents=True)
    shutil.copy(inputs["eval"], cache / EVAL_FILENAME)

    def fake_download(repo_id: str, filename: str, repo_type: str, revision: str | None) -> str:
        return str(cache / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    # the quick existence check before the download (an unreachable Hub fails fast)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, repo_id, revision: None)
    monkeypatch.chdir(tmp_path)
    results = write_evaluation(
        "owner/name@v1", baselines_only=True, out_dir=tmp_path / "o", config=CONFIG
    )
    assert results["eval_file"] == {
        "name": EVAL_FILENAME,
        "sha256": sha256(inputs["eval"]),
        "hub": "owner/name@v1",
    }
    report = (tmp_path / "o" / "eval" / "report.md").read_text(encoding="utf-8")
    assert "from the Hub as `owner/name@v1`" in report


def test_release_folder_and_baselines_only(inputs: dict[str, Path], tmp_path: Path) -> None:
    results = write_evaluation(
        inputs["release"], baselines_only=True, out_dir=tmp_path, config=CONFIG
    )
    assert set(results["systems"]) == {"random", "popularity", "bm25", "oracle"}
    # the baselines are tested against each other (not against themselves, nor the oracle)
    assert {t["system"] for t in results["tests"]} == {"random", "popularity", "bm25"}
    assert all(t["system"] != t["baseline"] != "oracle" for t in results["tests"])
    assert results["submitted"] == [] and results["pairwise"] == []
    with pytest.raises(ValueError, match="--baselines-only"):
        write_evaluation(
            inputs["release"], runs=[inputs["trec"]], baselines_only=True, out_dir=tmp_path
        )


def test_metric_names_are_the_same_in_json_parquet_and_report(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    results = write_evaluation(
        inputs["release"], baselines_only=True, out_dir=tmp_path, config=CONFIG
    )
    names = set(results["metrics"])
    assert {"R(rel=3)@10", "recall@10_tier=3", "RR(rel=3)"} <= names
    assert not any(n.endswith("_tier3") for n in names)
    columns = set(pl.read_parquet_schema(tmp_path / "eval" / "per_survey.parquet"))
    assert names <= columns
    assert set(results["systems"]["bm25"]) <= names
    assert set(results["metric_aliases"]) <= names
    report = (tmp_path / "eval" / "report.md").read_text(encoding="utf-8")
    for name in results["main_metrics"]:
        assert f"`{name}`" in report
    assert "R(rel=3)@10" in results["main_metrics"]


def test_run_name_clash_is_an_error(inputs: dict[str, Path], tmp_path: Path) -> None:
    clash = tmp_path / "noisy_label.csv"
    pl.read_csv(inputs["csv"]).write_csv(clash)
    with pytest.raises(RunError, match="already used.*--name"):
        write_evaluation(
            inputs["eval"], runs=[inputs["trec"], clash], out_dir=tmp_path, config=CONFIG
        )


def _cli(argv: list[str]) -> int:
    from pipeline.cli import main

    return main(argv)


def test_cli(inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[evaluate]\nbootstrap_samples = 20\nrandom_seeds = 1\n", encoding="utf-8")
    out = tmp_path / "out"
    code = _cli(
        [
            "evaluate",
            "--eval-file",
            str(inputs["eval"]),
            "--baselines-only",
            "--out",
            str(out),
            "--config",
            str(config),
        ]
    )
    assert code == 0
    assert "# Survey reading lists: evaluation" in capsys.readouterr().out
    # --out DIR is the directory the command writes
    results = json.loads((out / "eval_results.json").read_text(encoding="utf-8"))
    assert results["config"]["bootstrap_samples"] == 20

    unknown = tmp_path / "unknown.trec"
    unknown.write_text("S000000 Q0 NOPE 1 1.0 u\n", encoding="utf-8")
    base = [
        "evaluate",
        "--eval-file",
        str(inputs["eval"]),
        "--run",
        str(unknown),
        "--out",
        str(out),
        "--config",
        str(config),
    ]
    assert _cli(base) == 2
    assert f"{unknown}:1:" in capsys.readouterr().err
    assert _cli([*base, "--lenient"]) == 0
    # the CLI prints warnings as one log line each
    messages = capsys.readouterr().err
    assert "dropped 1 of 1" in messages
    # nothing of the run is left, so every survey is missing from it
    assert "no row for 24 of 24 eval survey(s)" in messages
    assert _cli([*base, "--baselines-only"]) == 2  # a run and --baselines-only contradict
    gappy = _without_survey(inputs, tmp_path, "S000005")
    gappy_args = [*base[:4], str(gappy), *base[5:]]
    assert _cli(gappy_args) == 0
    assert "no row for 1 of 24" in capsys.readouterr().err
    assert _cli([*gappy_args, "--require-complete"]) == 2
    err = capsys.readouterr().err
    assert f"{gappy}: no row for 1 of 24 eval survey(s) (first: 'S000005')" in err
    assert "--require-complete" in err
    out = tmp_path / "default"
    # neither --run nor --baselines-only: the baselines are evaluated
    assert (
        _cli(
            [
                "evaluate",
                "--eval-file",
                str(inputs["eval"]),
                "--out",
                str(out),
                "--config",
                str(config),
            ]
        )
        == 0
    )
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results["systems"]) == {"random", "popularity", "bm25", "oracle"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("owner/name", ("owner/name", EVAL_FILENAME, None)),
        ("owner/name@v1.0", ("owner/name", EVAL_FILENAME, "v1.0")),
        ("hf://datasets/owner/name/data", ("owner/name", f"data/{EVAL_FILENAME}", None)),
        ("hf://datasets/owner/name@main/x/e.parquet", ("owner/name", "x/e.parquet", "main")),
    ],
)
def test_hub_specs_resolve_without_network(
    spec: str, expected: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    calls = []

    def fake_download(repo_id: str, filename: str, repo_type: str, revision: str | None) -> str:
        calls.append((repo_id, filename, revision))
        assert repo_type == "dataset"
        return str(tmp_path / "downloaded.parquet")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    # the quick existence check before the download (an unreachable Hub fails fast)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, repo_id, revision: None)
    monkeypatch.chdir(tmp_path)  # so that the spec is not a local path
    assert resolve_eval_file(spec) == tmp_path / "downloaded.parquet"
    assert calls == [expected]
    with pytest.raises(FileNotFoundError):
        resolve_eval_file("missing/local.parquet")
