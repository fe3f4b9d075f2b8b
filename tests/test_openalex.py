"""OpenAlex lookups: the API route against a local stub (every shape of bad answer), the
snapshot route, the cache, and the stage on the real 2024-layout record."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.corpus import openalex as OA
from tests.openalex_stub import OpenAlexStub, oa_work

KEY = "oa-test-key"
FIXTURES = Path(__file__).parent / "fixtures"
PREVIEW = FIXTURES / "unarxive-2024-preview" / "preview.jsonl"


def _client(stub: OpenAlexStub, **kw: Any) -> tuple[OA.ApiClient, OA.Tally, list[float]]:
    slept: list[float] = []
    kw.setdefault("requests_per_second", 0)  # no throttle: ``slept`` holds the backoffs only
    settings = OA.ApiSettings(base_url=stub.url, api_key=kw.pop("key", KEY), backoff_s=0.01,
                              timeout_s=kw.pop("timeout_s", 5.0), **kw)  # fmt: skip
    tally = OA.Tally()
    return OA.ApiClient(settings, tally, sleep=slept.append), tally, slept


def _lookup(
    stub: OpenAlexStub, keys: list[str], **kw: Any
) -> tuple[dict[str, OA.Answer], OA.Tally]:
    client, tally, _ = _client(stub, **kw)
    out: dict[str, OA.Answer] = {}
    for batch in OA.api_lookup(keys, client):
        out.update({a.key: a for a in batch})
    return out, tally


def _lists(stub: OpenAlexStub) -> list[dict[str, Any]]:
    return [r for r in stub.requests if r["path"] == "/works"]


# --------------------------------------------------------------------- documented use
def test_batched_filters_select_and_cost() -> None:
    works = [oa_work(f"W{i}", f"Title {i}", doi=f"10.1/x{i}") for i in range(1, 251)]
    with OpenAlexStub(works) as stub:
        keys = [f"doi:10.1/x{i}" for i in range(1, 201)] + [
            f"openalex:W{i}" for i in range(201, 251)
        ]
        got, tally = _lookup(stub, keys)
    lists = _lists(stub)
    assert len(lists) == 3  # 200 DOIs in 2 calls of 100, 50 OpenAlex ids in 1
    for r in lists:
        field, _, values = r["query"]["filter"].partition(":")
        assert field in ("doi", "ids.openalex") and len(values.split("|")) <= OA.MAX_OR_VALUES
        assert r["query"]["select"] == OA.SELECT and "cited_by_count" not in OA.SELECT
        assert r["query"]["per_page"] == "100" and r["query"]["api_key"] == KEY
    assert all(a.found for a in got.values()) and len(got) == 250
    assert got["doi:10.1/x7"].record.title == "Title 7"
    assert got["doi:10.1/x7"].record.abstract == "a short abstract of the work"
    assert got["doi:10.1/x7"].record.venue == "Journal of Tests"
    assert got["doi:10.1/x7"].record.subfield == "Software"
    assert tally.list_calls == 3 and tally.singleton_calls == 0
    assert tally.cost_usd == pytest.approx(3 * OA.LIST_CALL_USD)


def test_arxiv_ids_are_asked_as_their_datacite_doi() -> None:
    work = oa_work("W9", "An arXiv paper", doi="10.48550/arxiv.2104.06921", arxiv="2104.06921")
    with OpenAlexStub([work]) as stub:
        got, _ = _lookup(stub, ["arxiv:2104.06921"])
    assert _lists(stub)[0]["query"]["filter"] == "doi:10.48550/arxiv.2104.06921"
    assert got["arxiv:2104.06921"].record.arxiv_id == "2104.06921"


# --------------------------------------------------------------------- bad answers
@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_the_lookups_without_naming_the_key(status: int) -> None:
    with OpenAlexStub([oa_work("W1", "T")]) as stub:
        stub.script.append((status, {}, b'{"error": "Invalid API key"}', 0.0))
        with pytest.raises(OA.LookupStopped) as e:
            _lookup(stub, ["openalex:W1"])
    assert f"HTTP {status}" in str(e.value) and KEY not in str(e.value)
    assert len(stub.requests) == 1  # not retried


def test_a_deleted_work_is_not_found_after_its_singleton_404() -> None:
    with OpenAlexStub([oa_work("W1", "Kept")]) as stub:
        got, tally = _lookup(stub, ["openalex:W1", "openalex:W2"])
    assert got["openalex:W1"].found and not got["openalex:W2"].found
    assert [r["path"] for r in stub.requests] == ["/works", "/works/W2"]
    assert tally.singleton_calls == 1 and tally.cost_usd == pytest.approx(OA.LIST_CALL_USD)


def test_a_merged_id_answers_with_the_work_it_was_merged_into() -> None:
    with OpenAlexStub([oa_work("W20", "The surviving record")]) as stub:
        stub.merged["W10"] = "W20"
        got, tally = _lookup(stub, ["openalex:W10"])
    answer = got["openalex:W10"]
    assert answer.found and answer.record.openalex_id == "W20"
    assert answer.record.title == "The surviving record" and tally.merged == 1
    # the redirect is followed with the client's own parameters (select, key)
    assert stub.requests[-1]["path"] == "/works/W20"
    assert stub.requests[-1]["query"]["select"] == OA.SELECT


def test_a_cut_answer_is_retried() -> None:
    body = json.dumps({"meta": {"count": 1}, "results": [oa_work("W1", "T")]}).encode()
    with OpenAlexStub([oa_work("W1", "Whole")]) as stub:
        stub.script.append((200, {"Content-Length": str(len(body))}, body[: len(body) // 2], 0.0))
        got, tally = _lookup(stub, ["openalex:W1"])
    assert got["openalex:W1"].record.title == "Whole" and tally.retries == 1


def test_invalid_json_is_retried_then_ends_the_lookups() -> None:
    with OpenAlexStub([oa_work("W1", "Whole")]) as stub:
        stub.script.append((200, {}, b'{"meta": {"count": 1}, "results": [', 0.0))
        got, tally = _lookup(stub, ["openalex:W1"])
        assert got["openalex:W1"].found and tally.retries == 1
        stub.script.extend([(200, {}, b"<html>busy</html>", 0.0)] * 3)
        with pytest.raises(OA.LookupStopped, match="invalid JSON|failed"):
            _lookup(stub, ["openalex:W1"], max_retries=2)


def test_empty_results_fall_back_to_singletons() -> None:
    with OpenAlexStub([oa_work("W1", "One"), oa_work("W2", "Two")]) as stub:
        stub.hide_in_lists = {"W1", "W2"}
        got, tally = _lookup(stub, ["openalex:W1", "openalex:W2"])
    assert {k: a.record.title for k, a in got.items()} == {
        "openalex:W1": "One",
        "openalex:W2": "Two",
    }
    assert tally.list_calls == 1 and tally.singleton_calls == 2


def test_missing_fields() -> None:
    sparse = {"id": "https://openalex.org/W3"}  # every other field missing
    no_id = {"title": "a record without an id"}
    with OpenAlexStub([sparse]) as stub:
        stub.extra_results = [no_id]
        got, tally = _lookup(stub, ["openalex:W3"])
        record = got["openalex:W3"].record
        assert got["openalex:W3"].found and record.title is None and record.abstract is None
        assert record.venue is None and record.is_retracted is False
        assert tally.invalid_records == 1
        # an answer without its results field is not the documented JSON: retried, then ends
        stub.script.extend([(200, {}, b'{"meta": {"count": 0}}', 0.0)] * 3)
        with pytest.raises(OA.LookupStopped):
            _lookup(stub, ["openalex:W3"], max_retries=1)


def test_a_timeout_is_retried() -> None:
    with OpenAlexStub([oa_work("W1", "Late")]) as stub:
        stub.script.append((200, {}, b"{}", 1.5))
        got, tally = _lookup(stub, ["openalex:W1"], timeout_s=0.3)
    assert got["openalex:W1"].record.title == "Late" and tally.retries == 1


def test_a_record_for_an_id_not_asked_is_dropped_and_counted() -> None:
    with OpenAlexStub([oa_work("W1", "Asked")]) as stub:
        stub.extra_results = [oa_work("W99", "Not asked")]
        got, tally = _lookup(stub, ["openalex:W1"])
    assert list(got) == ["openalex:W1"] and got["openalex:W1"].record.openalex_id == "W1"
    assert tally.unasked_records == 1


def test_429_and_5xx_back_off_and_a_long_retry_after_stops() -> None:
    with OpenAlexStub([oa_work("W1", "T")]) as stub:
        stub.script += [(429, {"Retry-After": "2"}, b"{}", 0.0), (503, {}, b"{}", 0.0)]
        client, tally, slept = _client(stub)
        got = [a for b in OA.api_lookup(["openalex:W1"], client) for a in b]
        assert got[0].found and slept[:2] == [2.0, 0.02] and tally.retries == 2
        stub.script.append((429, {"Retry-After": "86400"}, b"{}", 0.0))
        with pytest.raises(OA.LookupStopped, match="wait 86400 s"):
            _lookup(stub, ["openalex:W1"])


def test_the_budget_stops_before_a_call_would_pass_it() -> None:
    works = [oa_work(f"W{i}", f"T{i}") for i in range(1, 301)]
    with OpenAlexStub(works) as stub:
        client, tally, _ = _client(stub, budget_usd=2 * OA.LIST_CALL_USD)
        answered = []
        with pytest.raises(OA.LookupStopped, match="budget"):
            for batch in OA.api_lookup([f"openalex:W{i}" for i in range(1, 301)], client):
                answered += batch
    assert len(answered) == 200 and tally.list_calls == 2


# --------------------------------------------------------------------- snapshot and cache
def _snapshot(root: Path, works: list[dict[str, Any]]) -> Path:
    part = root / "works" / "updated_date=2025-01-01" / "part_000.gz"
    part.parent.mkdir(parents=True)
    with gzip.open(part, "wt", encoding="utf-8") as f:
        for w in works:
            f.write(json.dumps(w) + "\n")
        f.write("{not json\n")
    return root


def test_snapshot_route_reads_the_same_records(tmp_path: Path) -> None:
    root = _snapshot(tmp_path / "oa", [oa_work("W1", "From the snapshot", doi="10.1/a")])
    tally = OA.Tally()
    got = {
        a.key: a for b in OA.snapshot_lookup(["doi:10.1/a", "openalex:W5"], root, tally) for a in b
    }
    assert got["doi:10.1/a"].record.title == "From the snapshot"
    assert got["doi:10.1/a"].source == "snapshot" and not got["openalex:W5"].found
    assert tally.invalid_records == 1


def test_cache_keeps_a_record_over_not_found_and_skips_a_damaged_line(tmp_path: Path) -> None:
    """A key answered twice keeps its first record, whatever "not found" came before it (a
    run with another source found it); a damaged line is skipped."""
    cache = OA.LookupCache(tmp_path / "c", flush_keys=1)
    cache.add([OA.Answer(key="doi:10.1/a", found=False, source="api")])
    for wid in ("W1", "W2"):
        cache.add([OA.Answer(key="doi:10.1/a", found=True, source="api",
                             record=OA.Described(openalex_id=wid))])  # fmt: skip
    cache.add([OA.Answer(key="doi:10.1/c", found=False, source="api")])
    with cache.segments()[0].open("ab") as f:
        f.write(b'{"key": "doi:10.1/b", "fou')  # a segment damaged on disk
    assert not [p for p in (tmp_path / "c").iterdir() if ".tmp-" in p.name]
    loaded = cache.load()
    assert list(loaded) == ["doi:10.1/a", "doi:10.1/c"]
    assert loaded["doi:10.1/a"].record.openalex_id == "W1" and not loaded["doi:10.1/c"].found


def _merged_ids(root: Path, rows: list[tuple[str, str, str]], name: str) -> None:
    """A merged-works list as the snapshot publishes it: ``merged_ids/works/<date>.csv.gz``
    with the header ``merge_date,id,merge_into_id``."""
    path = root / "merged_ids" / "works" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("merge_date,id,merge_into_id\n")
        f.writelines(f"{d},{old},{new}\n" for d, old, new in rows)


def test_snapshot_answers_a_merged_id_with_the_work_it_was_merged_into(tmp_path: Path) -> None:
    """W10 was merged into W20, later W20 into W30 (a chain across two dated lists): the
    snapshot holds W30 only, and it answers W10 and W20, each counted as merged."""
    root = _snapshot(tmp_path / "oa", [oa_work("W30", "The surviving record")])
    _merged_ids(
        root, [("2024-01-02", "W10", "W20"), ("2024-01-02", "W77", "W78")], "2024-01-02.csv.gz"
    )
    _merged_ids(root, [("2024-03-05", "W20", "W30")], "2024-03-05.csv.gz")
    tally = OA.Tally()
    keys = ["openalex:W10", "openalex:W20", "openalex:W30", "openalex:W5"]
    got = {a.key: a for b in OA.snapshot_lookup(keys, root, tally) for a in b}
    assert {k: a.record.openalex_id for k, a in got.items() if a.found} == {
        "openalex:W10": "W30", "openalex:W20": "W30", "openalex:W30": "W30",
    }  # fmt: skip
    assert not got["openalex:W5"].found and tally.merged == 2
    # the merged-works lists are not read as works files
    assert all("merged_ids" not in p.parts for p in OA.snapshot_files(root))


def test_snapshot_in_the_buckets_own_layout(tmp_path: Path) -> None:
    """``DIR/data/works/updated_date=.../*.gz`` and ``DIR/data/merged_ids/works/*.csv.gz``."""
    data = tmp_path / "oa" / "data"
    _snapshot(data, [oa_work("W2", "Kept")])
    _merged_ids(data, [("2024-01-02", "https://openalex.org/W1", "https://openalex.org/W2")],
                "2024-01-02.csv.gz")  # fmt: skip
    root = tmp_path / "oa"
    assert [p.parent.parent.name for p in OA.snapshot_files(root)] == ["works"]
    tally = OA.Tally()
    got = [a for b in OA.snapshot_lookup(["openalex:W1"], root, tally) for a in b]
    assert got[0].found and got[0].record.openalex_id == "W2" and tally.merged == 1


def test_stage_on_a_snapshot_records_merges_and_caches_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot route through the stage, on the real 2024-layout record: a merged id's
    row names the id its record answers with, the keys the snapshot lacks are cached as not
    found, and a rerun reads nothing of the snapshot (it may even be gone)."""
    monkeypatch.delenv(OA.KEY_ENV, raising=False)
    ids = sorted(_preview_ids().items())
    (old, _), *kept = ids
    served = [oa_work(w, f"Real title {w}", doi=d) for w, d in kept[1:]]  # kept[0]: a miss
    served.append(oa_work("W1", "The record W" + old[1:] + " was merged into"))
    root = _snapshot(tmp_path / "oa", served)
    _merged_ids(root, [("2024-01-02", old, "W1")], "2024-01-02.csv.gz")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[openalex_lookup]\nsnapshot = "{root.as_posix()}"\n', encoding="utf-8")
    out = tmp_path / "w"
    api.run([PREVIEW], out, workers=1, config=cfg)
    records = pl.read_parquet(out / "openalex" / "records.parquet")
    merged = records.filter(pl.col(S.LOOKUP_KEY) == f"openalex:{old}")
    assert merged[S.OA_ANSWERED_ID].to_list() == ["W1"] and merged[S.OA_FOUND].all()
    summary = json.loads((out / "openalex" / "_summary.json").read_text())
    assert summary["records"]["merged"] == 1 and summary["lookups"]["merged"] == 1
    missed = records.filter(~pl.col(S.OA_FOUND))
    assert f"openalex:{kept[0][0]}" in missed[S.LOOKUP_KEY].to_list()
    assert set(missed[S.OA_SOURCE]) == {"snapshot"}
    assert (
        summary["records"]["works_not_looked_up"] == summary["lookups"]["works_without_lookup_key"]
    )
    before = (out / "openalex" / "records.parquet").read_bytes()
    for f in root.rglob("*.gz"):
        f.unlink()  # a rerun that read the snapshot would now find nothing
    api.run([PREVIEW], out, workers=1, config=cfg)
    again = json.loads((out / "openalex" / "_summary.json").read_text())["lookups"]
    assert again["route"] == "cache only" and again["ids_asked"] == 0
    assert again["ids_cached_before"] == summary["lookups"]["ids_wanted"]
    assert (out / "openalex" / "records.parquet").read_bytes() == before


# --------------------------------------------------------------------- the stage, real record
def _preview_ids() -> dict[str, str]:
    """OpenAlex id -> DOI of the real 2024-layout record's bib entries that carry both."""
    rec = json.loads(PREVIEW.read_text(encoding="utf-8"))
    out = {}
    for entry in rec["bib_entries"].values():
        ids = entry["ids"]
        if ids.get("open_alex_id") and ids.get("doi"):
            out[ids["open_alex_id"].rsplit("/", 1)[-1]] = ids["doi"].removeprefix(
                "https://doi.org/"
            )
    return out


def _stage_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stub: OpenAlexStub) -> Path:
    monkeypatch.setenv(OA.KEY_ENV, KEY)
    monkeypatch.setenv(OA.URL_ENV, stub.url)
    out = tmp_path / "work"
    api.run([PREVIEW], out, workers=1)
    return out


def test_stage_on_the_real_record_and_a_rerun_asks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ids = _preview_ids()
    assert len(ids) >= 20  # 23 of the 24 entries carry an OpenAlex id and a DOI
    works = [oa_work(w, f"Real title {w}", doi=d) for w, d in sorted(ids.items())]
    with OpenAlexStub(works) as stub, caplog.at_level(logging.INFO, logger="pipeline"):
        out = _stage_run(tmp_path, monkeypatch, stub)
        asked = len(stub.requests)
        records = pl.read_parquet(out / "openalex" / "records.parquet")
        before = (out / "openalex" / "records.parquet").read_bytes()
        api.run([PREVIEW], out, workers=1)
    assert asked >= 1 and len(stub.requests) == asked  # the rerun asked nothing
    assert (out / "openalex" / "records.parquet").read_bytes() == before
    found = records.filter(pl.col(S.OA_FOUND))
    assert found.height >= 20
    assert (found[S.OA_TITLE] == "Real title " + found[S.OA_ANSWERED_ID]).all()
    summary = json.loads((out / "openalex" / "_summary.json").read_text())
    assert summary["records"]["venue_rate"] > 0.5 and summary["lookups"]["ids_asked"] == 0
    # the key is in no log line and no file of the work directory
    assert KEY not in caplog.text
    for p in out.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p


def test_no_key_no_snapshot_builds_and_says_how_many_were_not_looked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(OA.KEY_ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="pipeline"):
        api.run([PREVIEW], tmp_path / "w", workers=1)
    lines = [r.getMessage() for r in caplog.records if "not looked up" in r.getMessage()]
    assert len(lines) == 1 and "no OPENALEX_API_KEY" in lines[0]
    counts = json.loads((tmp_path / "w" / "openalex" / "_SUCCESS.json").read_text())["counts"]
    assert counts["works_not_looked_up"] == counts["works"] > 0


def test_service_down_still_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OA.KEY_ENV, KEY)
    monkeypatch.setenv(OA.URL_ENV, "http://127.0.0.1:9")  # nothing listens there
    cfg = tmp_path / "c.toml"
    cfg.write_text("[openalex_lookup]\nmax_retries = 1\nbackoff_s = 0.01\n")
    api.run([PREVIEW], tmp_path / "w", workers=1, config=cfg)
    summary = json.loads((tmp_path / "w" / "openalex" / "_summary.json").read_text())
    assert summary["lookups"]["stopped"] and summary["records"]["works_with_record"] == 0


# --------------------------------------------------------------------- the demo, offline
def test_demo_shows_the_records_of_its_works_file(tmp_path: Path) -> None:
    """The demo reads its works file through the snapshot route (no network): every
    candidate with a record shows the record's title exactly, and the rates are counted."""
    out = tmp_path / "demo"
    api.demo(out, papers=300, workers=1)
    records = pl.read_parquet(out / "openalex" / "records.parquet").filter(pl.col(S.OA_FOUND))
    rows = pl.read_parquet(sorted((out / "release").glob("*_survey_reading_lists.parquet")))
    shown = rows.join(records, left_on=S.CANDIDATE_ID, right_on=S.WORK_ID, how="inner")
    assert shown.height > 0
    assert (shown[S.CANDIDATE_TITLE] == shown[S.OA_TITLE]).all()
    assert (shown[S.CANDIDATE_OPENALEX_ID] == shown[S.OA_ANSWERED_ID]).all()
    summary = json.loads((out / "openalex" / "_summary.json").read_text())["records"]
    assert summary["works_not_looked_up"] == 0 and summary["by_source"] == {
        "snapshot": summary["works"]
    }
    assert 0 < summary["abstract_carried_rate"] < summary["abstract_rate"]
    assert summary["venue_rate"] > 0
    meta = json.loads((out / "release" / "eval_metadata.json").read_text())
    assert (
        meta["openalex"]["records_sha256"]
        and "lack a record" in (out / "release" / "README.md").read_text()
    )

    # the card's text table says where each shown text came from: an OpenAlex title is never
    # counted as a parsed one (what the rows show, labelled by hand from their columns)
    def has(c: str) -> pl.Expr:
        return pl.col(c).fill_null("").str.strip_chars() != ""

    record = pl.col(S.CANDIDATE_OPENALEX_ID).is_not_null()
    corpus = pl.col(S.CANDIDATE_CATEGORIES).is_not_null()
    label = (
        pl.when(has(S.CANDIDATE_ABSTRACT) & corpus).then(pl.lit("arxiv_abstract"))
        .when(has(S.CANDIDATE_ABSTRACT)).then(pl.lit("openalex_abstract"))
        .when(has(S.CANDIDATE_TITLE) & record).then(pl.lit("openalex_title"))
        .when(has(S.CANDIDATE_TITLE) & corpus).then(pl.lit("corpus_title"))
        .when(has(S.CANDIDATE_TITLE)).then(pl.lit("parsed_title"))
        .otherwise(pl.lit("none"))
    )  # fmt: skip
    for split, by_source in meta["candidate_text"].items():
        part = pl.read_parquet(out / "release" / f"{split}_survey_reading_lists.parquet")
        want = dict(part.group_by(label.alias("t")).len().iter_rows())
        got = {k: c["positives"] + c["negatives"] for k, c in by_source.items()}
        assert got == {k: want.get(k, 0) for k in got}, split
        assert set(want) <= set(got)
    assert sum(c["openalex_title"]["positives"] for c in meta["candidate_text"].values()) > 0
    methods = (out / "release" / "METHODS.md").read_text()
    assert "| `openalex_title` |" in methods


# --------------------------------------------------------------------- killed mid-lookups
def _answered_keys(out: Path) -> set[str]:
    keys = set()
    for seg in sorted((out / "openalex_cache").glob("answers-*.jsonl")):
        for line in seg.read_text(encoding="utf-8").splitlines():
            keys.add(json.loads(line)["key"])
    return keys


def _release_bytes(out: Path) -> dict[str, bytes]:
    release = out / "release"
    return {
        p.relative_to(release).as_posix(): p.read_bytes()
        for p in sorted(release.rglob("*"))
        if p.is_file() and not p.name.startswith("_")
    }


def test_kill_minus_9_during_the_lookups_then_rerun_asks_only_the_rest(tmp_path: Path) -> None:
    """A run killed (SIGKILL) while it looks works up keeps the answers it flushed; the rerun
    asks only for the other keys and writes the release an uninterrupted run writes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    ids = _preview_ids()
    works = [oa_work(w, f"Real title {w}", doi=d) for w, d in sorted(ids.items())]
    cfg = tmp_path / "slow.toml"
    # one id per call, a segment per answer, four calls a second: the kill lands mid-lookups
    cfg.write_text(
        "[openalex_lookup]\nbatch_ids = 1\nflush_keys = 1\nrequests_per_second = 4.0\n",
        encoding="utf-8",
    )
    with OpenAlexStub(works) as stub:
        env = {**os.environ, OA.KEY_ENV: KEY, OA.URL_ENV: stub.url}
        killed = tmp_path / "killed"
        cmd = [sys.executable, "-m", "pipeline", "run", "--input", str(PREVIEW), "--out",
               str(killed), "--config", str(cfg), "--workers", "1", "-q"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while len(_answered_keys(killed)) < 5 and proc.poll() is None:
                assert time.monotonic() < deadline, "the run never reached its lookups"
                time.sleep(0.05)
            assert proc.poll() is None, "the run ended before it could be killed"
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
        cached = _answered_keys(killed)
        asked_before = len(stub.requests)
        assert 5 <= len(cached) < len(ids)
        subprocess.run(cmd, env=env, check=True)
        rerun = stub.requests[asked_before:]
        whole = tmp_path / "whole"
        subprocess.run([str(whole) if c == str(killed) else c for c in cmd], env=env, check=True)
    # the rerun asked for keys the cache lacked, and for none it had
    asked = set().union(*(_asked_values(r) for r in rerun))
    assert asked and not asked & {OA.asked_as(k)[1] for k in cached}
    assert _release_bytes(killed) == _release_bytes(whole)


def _asked_values(request: dict[str, Any]) -> set[str]:
    """The ids a stub request asked for: a filter's OR-ed values, or a singleton's id."""
    if request["path"] == "/works":
        return {v.lower() for v in request["query"].get("filter", "").partition(":")[2].split("|")}
    return {request["path"].removeprefix("/works/").removeprefix("doi:").lower()}


# --------------------------------------------------------------------- the projection
def test_the_projection_counts_calls_cost_and_time_by_hand() -> None:
    """The closing note's full-corpus figures, by hand: OpenAlex ids in calls of 100 (41,000),
    DOIs and arXiv ids together as DOIs (1,935,054 in 19,351 calls): 60,351 calls at $0.10
    per 1,000 is $6.04, and at 100 calls/s 603.5 s."""
    got = OA.lookup_projection({"openalex": 4_100_000, "doi": 1_600_000, "arxiv": 335_054})
    assert got["works_to_look_up"] == 6_035_054 and got["list_calls"] == 60_351
    assert got["cost_usd"] == 6.04 and got["minutes"] == 10.1 and got["runs_at_budget"] == 7
    small = OA.lookup_projection({"openalex": 1, "doi": 0}, batch_ids=1, requests_per_second=0)
    assert small["list_calls"] == 1 and small["minutes"] is None


def test_submit_prints_the_projection_of_a_work_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    offline: Path,
) -> None:
    """``submit --dry-run --lookups-from OUT`` counts the works of OUT's works table that its
    cache does not answer; after the lookups ran, none is left to ask."""
    from pipeline.cli.app import main

    monkeypatch.delenv(OA.KEY_ENV, raising=False)
    out = tmp_path / "w"
    api.run([PREVIEW], out, workers=1, evaluate_release=False)
    keys = pl.read_parquet(out / "openalex" / "records.parquet")  # empty: nothing looked up
    assert keys.height == 0
    works = pl.read_parquet(out / "works" / "works.parquet")
    from pipeline.stages.openalex import lookup_key

    wanted = works.select(lookup_key(pl.col(S.ALIASES))).to_series().drop_nulls().unique()
    n_oa = int(wanted.str.starts_with("openalex:").sum())
    card = tmp_path / "card.toml"
    card.write_text("[release]\nauthors = ['Doe, Jane']\nyear = 2026\n", encoding="utf-8")
    argv = ["submit", "--dry-run", "--namespace", "me", "--config", str(card),
            "--constraints", str(Path(__file__).parents[1] / "constraints.txt")]  # fmt: skip
    assert main([*argv, "--lookups-from", str(out)]) == 0
    plan = json.loads(capsys.readouterr().out)["openalex_projection"]
    n = wanted.len()
    assert plan["works_to_look_up"] == n and plan["ids_cached"] == 0 and n > 20
    assert plan["list_calls"] == -(-n_oa // 100) + -(-(n - n_oa) // 100)
    assert plan["cost_usd"] == round(plan["list_calls"] * OA.LIST_CALL_USD, 2)
    ids = _preview_ids()
    with OpenAlexStub([oa_work(w, f"T {w}", doi=d) for w, d in sorted(ids.items())]) as stub:
        _stage_run(tmp_path, monkeypatch, stub)  # into tmp_path / "work"
    assert main([*argv, "--lookups-from", str(tmp_path / "work")]) == 0
    plan = json.loads(capsys.readouterr().out)["openalex_projection"]
    assert plan["works_to_look_up"] == 0 and plan["ids_cached"] == n and plan["list_calls"] == 0
    assert main(argv) == 0  # without a work directory: says what it needs
    assert (
        "--lookups-from"
        in json.loads(capsys.readouterr().out)["openalex_projection"]["not_projected"]
    )


# --------------------------------------------------------------------- real records, packed
def _real_ids() -> dict[str, str | None]:
    """OpenAlex id -> DOI (or None) of every bib entry of the real records (the 2022 sample
    and the 2024 preview) that carries an OpenAlex id."""
    from tests.conftest import SAMPLE_2022

    lines = gzip.decompress(SAMPLE_2022.read_bytes()).splitlines()
    lines.append(PREVIEW.read_bytes())
    out: dict[str, str | None] = {}
    for line in lines:
        for entry in json.loads(line)["bib_entries"].values():
            ids = entry.get("ids") or {}
            if ids.get("open_alex_id"):
                wid = ids["open_alex_id"].rsplit("/", 1)[-1]
                doi = (ids.get("doi") or "").removeprefix("https://doi.org/").lower()
                out[wid] = out.get(wid) or doi or None
    return out


def test_real_records_packed_as_the_hub_publishes_them_show_the_records_titles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The real records as ``ines-besrour/unarxive_2024`` publishes them (one tar.gz of JSONL
    members cut into ``part_aa``..``_ac``, tests/test_archive.py), with ``OPENALEX_URL`` at
    the stub serving a record in the documented shape for every OpenAlex id they cite: every
    candidate of the real survey (2212.11774) that has a record shows the record's title
    exactly, not a title key parsed from a reference string; the rates are counted."""
    from pipeline.corpus.archive import pack
    from tests.test_archive import CONFIG, _members

    parts = tmp_path / "parts"
    pack(_members(), parts)
    assert sorted(p.name for p in parts.iterdir())[-1] == "unarXive_2024.tar.gz.part_ac"
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    ids = _real_ids()
    assert len(ids) > 600  # 633 bib entries of the 2022 sample carry an OpenAlex id
    # every other record without an abstract or a venue, so the rates are not trivially 1
    works = [
        oa_work(w, f"The Record Title of {w}: As OpenAlex Writes It", doi=d,
                abstract=None if i % 2 else "what the work is about", venue=None if i % 3 else "ICSE")
        for i, (w, d) in enumerate(sorted(ids.items()))
    ]  # fmt: skip
    monkeypatch.setenv(OA.KEY_ENV, KEY)
    with OpenAlexStub(works) as stub, caplog.at_level(logging.INFO, logger="pipeline"):
        monkeypatch.setenv(OA.URL_ENV, stub.url)
        out = tmp_path / "w"
        api.run([parts], out, workers=1, config=cfg, evaluate_release=False)
    assert KEY not in caplog.text
    records = pl.read_parquet(out / "openalex" / "records.parquet").filter(pl.col(S.OA_FOUND))
    rows = pl.read_parquet(sorted((out / "release").glob("*_survey_reading_lists.parquet")))
    survey = rows.filter(pl.col(S.SURVEY_ID) == "2212.11774")
    assert survey.height >= 31
    shown = survey.join(records, left_on=S.CANDIDATE_ID, right_on=S.WORK_ID, how="inner")
    assert shown.height >= survey.height // 2  # most of the survey's candidates have a record
    assert (shown[S.CANDIDATE_TITLE] == shown[S.OA_TITLE]).all()
    assert shown[S.CANDIDATE_TITLE].str.starts_with("The Record Title of W").all()
    assert (shown[S.CANDIDATE_OPENALEX_ID] == shown[S.OA_ANSWERED_ID]).all()
    # the candidates without a record keep the parsed title key (lower-case, no punctuation)
    bare = survey.filter(
        pl.col(S.CANDIDATE_OPENALEX_ID).is_null() & (pl.col(S.CANDIDATE_RAW) != "")
    )
    assert (bare[S.CANDIDATE_TITLE] == bare[S.CANDIDATE_TITLE].str.to_lowercase()).all()
    summary = json.loads((out / "openalex" / "_summary.json").read_text())["records"]
    assert 0 < summary["abstract_rate"] < summary["record_rate"]
    assert 0 < summary["venue_rate"] < summary["record_rate"]
    meta = json.loads((out / "release" / "eval_metadata.json").read_text())
    counted = meta["candidate_text"]
    assert sum(c["openalex_title"]["positives"] + c["openalex_abstract"]["positives"]
               for c in counted.values()) >= shown.filter(pl.col(S.LABEL) >= 1).height  # fmt: skip
