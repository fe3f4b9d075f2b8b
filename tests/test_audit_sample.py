"""The leak audits' sample of whole surveys (pipeline.rules.audit_sample): bounded by
``release.audit_sample_rows``, independent of row order, recorded in the metadata, and
never a change to a data file of the release."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.config import load_config
from pipeline.rules.audit_sample import keep, sample_record, sample_surveys
from tests.test_batch_sizes import default_run  # noqa: F401 (fixture)
from tests.test_negatives import run_stage


def _per(counts: dict[str, int]) -> pl.DataFrame:
    return pl.DataFrame({"survey_id": list(counts), "len": list(counts.values())})


def _key(survey_id: str) -> int:
    # the documented rule, spelled out independently of the module
    return int.from_bytes(hashlib.sha1(f"audit-sample\x1f{survey_id}".encode()).digest()[:8], "big")


def test_within_the_limit_every_survey_is_read() -> None:
    per = _per({"a": 3, "b": 4})
    assert sample_surveys(per, 7) is None
    record = sample_record(per, None, 7)
    assert (record["sampled"], record["surveys"], record["rows"]) == (False, 2, 7)


def test_sample_takes_surveys_in_key_order_up_to_the_limit() -> None:
    counts = {f"s{i:02d}": 1 + i % 5 for i in range(40)}
    per = _per(counts)
    chosen = sample_surveys(per, 30)
    assert chosen is not None
    expected, total = [], 0
    for sid in sorted(counts, key=lambda s: (_key(s), s)):
        if total + counts[sid] > 30 and expected:
            break
        expected.append(sid)
        total += counts[sid]
    assert chosen.to_list() == sorted(expected)
    assert sum(counts[s] for s in chosen) <= 30
    # row order of the input does not matter
    shuffled = per.sample(fraction=1.0, shuffle=True, seed=3)
    assert sample_surveys(shuffled, 30).to_list() == chosen.to_list()
    record = sample_record(per, chosen, 30)
    assert (
        record["sampled"] and record["rows"] == total and record["of_rows"] == sum(counts.values())
    )
    frame = pl.DataFrame({"survey_id": ["s00", "s01", "zz"], "x": [1, 2, 3]})
    assert set(keep(frame, chosen)["survey_id"]) <= set(chosen)


def test_one_long_survey_is_still_read() -> None:
    chosen = sample_surveys(_per({"a": 50, "b": 60}), 10)
    assert chosen is not None and chosen.len() == 1


@pytest.mark.slow
def test_sampled_audit_changes_only_the_metadata(tmp_path: Path, default_run: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    shutil.copytree(default_run, out)
    release = out / "release"
    before = {p.relative_to(release).as_posix(): p.read_bytes() for p in release.rglob("*.parquet")}
    full = json.loads((release / "eval_metadata.json").read_text())
    cfg = load_config(overrides={"release": {"audit_sample_rows": 1000}})
    shutil.rmtree(release)
    run_stage(out, "release", cfg)
    after = {p.relative_to(release).as_posix(): p.read_bytes() for p in release.rglob("*.parquet")}
    assert after == before
    meta = json.loads((release / "eval_metadata.json").read_text())
    for split, record in meta["leak_audit"]["sample"].items():
        assert record["rows"] <= 1000 or record["surveys"] == 1, split
        assert record["of_rows"] == full["leak_audit"]["sample"][split]["of_rows"]
    sampled = [
        r
        for r in [
            *meta["leak_audit"]["sample"].values(),
            *meta["aspects"]["leak_audit"]["sample"].values(),
        ]
        if r["sampled"]
    ]
    assert sampled, "the synthetic release should be larger than 1000 rows in some split"
    probe = meta["leak_audit"]["reading_free_probe"]
    if "sample" in probe:
        assert probe["sample"]["train"]["rows"] <= 1000 or probe["sample"]["train"]["surveys"] == 1


@pytest.mark.parametrize("folder", ["", "aspects"])
def test_sampled_read_equals_the_whole_split_kept(default_run: Path, folder: str) -> None:  # noqa: F811
    # the probe reads only the sampled queries from the file; it must see the rows that
    # reading the whole split and keeping the sample gives, in the same order
    from pipeline.rank.release import query_sizes, read_judgments, read_view

    release = default_run / "release" / folder
    for split in ("train", "eval"):
        sizes = query_sizes(release, split)
        whole = read_view(release, split)
        assert sizes.equals(whole.group_by("survey_id").len().sort("survey_id"), null_equal=True)
        chosen = sample_surveys(sizes, max(int(sizes["len"].sum()) // 3, 1))
        assert chosen is not None and 0 < chosen.len() < sizes.height
        assert read_view(release, split, chosen).equals(keep(whole, chosen))
        judged = read_judgments(release, split)
        assert read_judgments(release, split, chosen).equals(keep(judged, chosen))
