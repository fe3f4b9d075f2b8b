"""Issue 52, items 2, 4, 5 and 8 (OpenAlex): a snapshot or a service that yields nothing
caches no "not found", damaged snapshot files are refused naming the file, a year out of
range nulls the year (counted), and a bad or huge API answer ends the lookups in one line
naming the URL (never the key) and the limit. Hostile inputs are built in each test."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.cli import main
from pipeline.core import schema as S
from pipeline.corpus import openalex as OA
from pipeline.corpus.sources import InputError
from tests.openalex_stub import OpenAlexStub, oa_work
from tests.test_openalex import KEY, PREVIEW, _client, _lookup, _merged_ids, _preview_ids

ROOT = Path(__file__).resolve().parents[1]


def _gz_lines(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0))
    return path


def _works_file(root: Path, works: list[dict[str, Any]], name: str = "part_000.gz") -> Path:
    lines = [json.dumps(w).encode() for w in works]
    return _gz_lines(root / "works" / "updated_date=2025-01-01" / name, lines)


def _real_snapshot(root: Path) -> tuple[Path, set[str]]:
    """A snapshot holding every work the preview record cites by OpenAlex id but one (a
    key the snapshot rightly does not have); the OpenAlex ids it holds."""
    ids = sorted(_preview_ids().items())[1:]
    _works_file(root, [oa_work(w, f"Snapshot title {w}", doi=d) for w, d in ids])
    return root, {w for w, _ in ids}


def _run(
    out: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> tuple[int, list[str]]:
    """``pipeline run`` on the preview record with ``snapshot``: its exit code and its
    ERROR lines."""
    monkeypatch.delenv(OA.KEY_ENV, raising=False)
    cfg = out.parent / f"{out.name}.toml"
    cfg.write_text(f'[openalex_lookup]\nsnapshot = "{snapshot.as_posix()}"\n', encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline"):
        rc = main(["run", "--input", str(PREVIEW), "--out", str(out), "--config", str(cfg),
                   "--workers", "1", "-q"])  # fmt: skip
    return rc, [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def _cached(out: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for seg in sorted((out / "openalex_cache").glob("answers-*.jsonl"))
        for line in seg.read_text(encoding="utf-8").splitlines()
    ]


def _described(out: Path) -> set[str]:
    records = pl.read_parquet(out / "openalex" / "records.parquet")
    return set(records.filter(pl.col(S.OA_FOUND))[S.OA_ANSWERED_ID].to_list())


# --------------------------------------------------------------------- item 2: empty sources
def _empty_folder(root: Path) -> str:
    root.mkdir()
    return "no works/ folder and no *.gz file (it is empty)"


def _works_without_files(root: Path) -> str:
    (root / "works" / "updated_date=2025-01-01").mkdir(parents=True)
    (root / "works" / "manifest").write_text("{}")
    return "no *.gz file in"


def _one_empty_gz(root: Path) -> str:
    (root / "works").mkdir(parents=True)
    (root / "works" / "part_000.gz").write_bytes(b"")
    return "only empty works files (1 of 0 bytes, the first works/part_000.gz)"


def _gzip_of_nothing(root: Path) -> str:
    _gz_lines(root / "works" / "part_000.gz", [])
    return "holds no work record: 1 works files read, 0 lines"


def _only_garbage_lines(root: Path) -> str:
    _gz_lines(root / "works" / "part_000.gz", [b"{not json", b'{"title": "no id"}'])
    return "holds no work record: 1 works files read, 2 lines"


@pytest.mark.parametrize(
    "make", [_empty_folder, _works_without_files, _one_empty_gz, _gzip_of_nothing,
             _only_garbage_lines],
)  # fmt: skip
def test_an_empty_snapshot_is_refused_then_the_real_one_describes_every_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, make: Any
) -> None:
    """The poisoned-cache sequence: a snapshot that holds no work is refused in one line
    naming the folder and what it holds, and caches nothing; the rerun with the real
    snapshot on the same work directory describes every work the snapshot has."""
    empty = tmp_path / "empty"
    found = make(empty)
    out = tmp_path / "w"
    rc, errors = _run(out, empty, monkeypatch, caplog)
    assert rc == 2 and len(errors) == 1, errors
    assert str(empty) in errors[0] and found in errors[0] and "\n" not in errors[0]
    assert _cached(out) == []  # no "not found" from a source that holds nothing
    real, held = _real_snapshot(tmp_path / "real")
    rc, errors = _run(out, real, monkeypatch, caplog)
    assert rc == 0 and errors == []
    assert _described(out) == held and len(held) >= 20


def test_a_cache_poisoned_by_an_older_version_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache an older version wrote from an empty snapshot (every key "not found", no
    source named) is asked again of the real snapshot; the real snapshot's own "not found"
    holds on the rerun after (nothing is asked: the snapshot may even be gone)."""
    keys = [f"openalex:{w}" for w in _preview_ids()]
    out = tmp_path / "w"
    (out / "openalex_cache").mkdir(parents=True)
    poisoned = b"".join(
        json.dumps({"key": k, "found": False, "source": "snapshot"}).encode() + b"\n" for k in keys
    )
    (out / "openalex_cache" / f"answers-{0:020d}-000000000000.jsonl").write_bytes(poisoned)
    real, held = _real_snapshot(tmp_path / "real")
    rc, _ = _run(out, real, monkeypatch, caplog)
    assert rc == 0 and _described(out) == held
    before = (out / "openalex" / "records.parquet").read_bytes()
    for f in real.rglob("*.gz"):
        f.unlink()
    rc, _ = _run(out, real, monkeypatch, caplog)
    summary = json.loads((out / "openalex" / "_summary.json").read_text())["lookups"]
    assert rc == 0 and summary["ids_asked"] == 0
    assert (out / "openalex" / "records.parquet").read_bytes() == before


def test_another_snapshot_is_asked_what_the_first_did_not_have(tmp_path: Path) -> None:
    """A "not found" holds for the snapshot that gave it: the cache, loaded for another
    snapshot, leaves it out so the key is asked again; loaded for the same one, keeps it."""
    old, _ = _real_snapshot(tmp_path / "old")
    new = tmp_path / "new"
    _works_file(new, [oa_work("W1", "Only in the new snapshot")])
    tally = OA.Tally()
    cache = OA.LookupCache(tmp_path / "c")
    cache.add(a for b in OA.snapshot_lookup(["openalex:W1"], old, tally) for a in b)
    cache.flush()
    assert not cache.load(OA.snapshot_identity(old))["openalex:W1"].found
    assert "openalex:W1" not in cache.load(OA.snapshot_identity(new))
    assert not cache.load()["openalex:W1"].found  # no source to ask: every answer counts


def test_a_service_that_holds_no_work_caches_no_not_found(tmp_path: Path) -> None:
    """A server that answers 404 to everything (a wrong OPENALEX_URL) has not shown that it
    holds works: the keys it did not find are not answered, and the lookups stop in a line
    naming the URL, never the key. A service that answers lists does answer "not found"."""
    with OpenAlexStub([]) as stub:
        stub.script += [(404, {}, b"{}", 0.0)] * 3
        client, _, _ = _client(stub)
        got = []
        with pytest.raises(OA.LookupStopped) as e:
            got += [a for b in OA.api_lookup(["openalex:W1", "doi:10.1/x"], client) for a in b]
        answered, _ = _lookup(stub, ["openalex:W1"])
    assert got == [] and f"{stub.url}/works" in str(e.value) and KEY not in str(e.value)
    assert "2 ids" in str(e.value)
    assert not answered["openalex:W1"].found  # asked of a service that answers lists


# --------------------------------------------------------------------- items 4, 5: damaged files
def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _not_gzip(path: Path) -> None:
    path.write_bytes(gzip.decompress(path.read_bytes()))  # the JSON lines, as they are


def _bad_crc(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF  # the trailer's CRC-32
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "said"),
    [(_truncated, "truncated"), (_not_gzip, "not gzip data"),
     (_bad_crc, "checksum does not match")],
)  # fmt: skip
@pytest.mark.parametrize("which", ["works", "merged_ids"])
def test_a_damaged_snapshot_file_is_refused_naming_it(
    tmp_path: Path, damage: Any, said: str, which: str
) -> None:
    root = tmp_path / "oa"
    works = [oa_work(f"W{i}", f"Title {i}", abstract="word " * 200) for i in range(1, 200)]
    part = _works_file(root, works)
    _merged_ids(root, [("2024-01-02", f"W{i}", "W1") for i in range(1000, 3000)], "m.csv.gz")
    path = part if which == "works" else root / "merged_ids" / "works" / "m.csv.gz"
    damage(path)
    with pytest.raises(InputError) as e:
        list(OA.snapshot_lookup(["openalex:W1", "openalex:W5000"], root, OA.Tally()))
    message = str(e.value)
    assert str(path) in message and said in message and "\n" not in message
    assert "lines" in message and "bytes" in message  # where the reading got to


def test_a_merged_ids_line_that_is_not_utf8_is_refused_naming_the_line(tmp_path: Path) -> None:
    root = tmp_path / "oa"
    _works_file(root, [oa_work("W1", "T")])
    path = _gz_lines(
        root / "merged_ids" / "works" / "m.csv.gz",
        [b"merge_date,id,merge_into_id", b"2024-01-02,W2,W1", b"2024-01-02,W\xe93,W1"],
    )
    with pytest.raises(InputError, match=f"{path}: line 3 is not UTF-8"):
        list(OA.snapshot_lookup(["openalex:W2"], root, OA.Tally()))


def test_a_truncated_works_file_stops_the_run_with_rc_2_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the command line: rc 2, one line naming the file; the works answered before
    the damage stay cached (they are right), and no key is cached as not found."""
    root, _ = _real_snapshot(tmp_path / "oa")
    ids = sorted(_preview_ids())
    _works_file(root, [oa_work(ids[0], "after the others")], name="part_001.gz")
    _truncated(root / "works" / "updated_date=2025-01-01" / "part_001.gz")
    rc, errors = _run(tmp_path / "w", root, monkeypatch, caplog)
    assert rc == 2 and len(errors) == 1 and "part_001.gz" in errors[0] and "truncated" in errors[0]
    cached = _cached(tmp_path / "w")
    assert cached and all(a["found"] for a in cached)


# --------------------------------------------------------------------- item 4: the year
@pytest.mark.parametrize(
    "year", ["1099511627776", "-5", "0", "10000", '"2020"', "2020.0", "1e400", "[2020]"]
)
def test_a_year_out_of_range_nulls_the_year_and_is_counted(tmp_path: Path, year: str) -> None:
    """The record is kept (its title, abstract and ids are still the work's description; a
    rejected record would make the work "not found"), its year null, and counted."""
    work = json.dumps(oa_work("W1", "A work with a strange year"))
    line = work.replace('"publication_year": 2020', f'"publication_year": {year}')
    assert line != work
    root = tmp_path / "oa"
    _gz_lines(root / "works" / "part_000.gz", [line.encode()])
    tally = OA.Tally()
    (answer,) = [a for b in OA.snapshot_lookup(["openalex:W1"], root, tally) for a in b]
    assert answer.found and answer.record.title == "A work with a strange year"
    assert answer.record.publication_year is None and tally.invalid_years == 1
    assert tally.invalid_records == 0


def test_an_abstract_of_more_words_than_the_limit_is_dropped_and_counted() -> None:
    """Putting 25M positions in order took 64 bytes each (1.6 GB for one record of 50 MB);
    an index over the limit is not an abstract, and the rest of the record is kept."""
    index = {"word": list(range(OA.MAX_ABSTRACT_WORDS)), "one": [OA.MAX_ABSTRACT_WORDS]}
    tally = OA.Tally()
    assert OA.abstract_text(index, tally) is None and tally.long_abstracts == 1
    del index["one"]
    assert OA.abstract_text(index, tally) == " ".join(["word"] * OA.MAX_ABSTRACT_WORDS)
    assert tally.long_abstracts == 1


def test_a_year_of_2_to_the_40_through_the_stage_and_from_an_older_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The stage writes the record with a null year (no Int32 overflow) and counts it; a
    cache line an older version wrote with that year does not decode, so its key is asked
    again."""
    ids = sorted(_preview_ids().items())
    works = [oa_work(w, f"T {w}", doi=d) for w, d in ids]
    works[0]["publication_year"] = 2**40
    root = tmp_path / "oa"
    _works_file(root, works)
    out = tmp_path / "w"
    (out / "openalex_cache").mkdir(parents=True)
    old = {"key": f"openalex:{ids[1][0]}", "found": True, "source": "snapshot",
           "record": {"openalex_id": ids[1][0], "publication_year": 2**40}}  # fmt: skip
    (out / "openalex_cache" / f"answers-{0:020d}-000000000000.jsonl").write_text(
        json.dumps(old) + "\n"
    )
    rc, errors = _run(out, root, monkeypatch, caplog)
    assert rc == 0 and errors == []
    records = pl.read_parquet(out / "openalex" / "records.parquet").filter(pl.col(S.OA_FOUND))
    years = dict(zip(records[S.OA_ANSWERED_ID], records[S.OA_YEAR], strict=True))
    assert years[ids[0][0]] is None and years[ids[1][0]] == 2020 and len(years) == len(ids)
    summary = json.loads((out / "openalex" / "_summary.json").read_text())["lookups"]
    assert summary["invalid_years"] == 1


# --------------------------------------------------------------------- items 4, 8: API answers
BODY = json.dumps({"meta": {"count": 1}, "results": [oa_work("W1", "T")]}).encode()


@pytest.mark.parametrize(
    ("length", "body", "said"),
    [("not-a-number", BODY, "a cut answer"), ("-1", BODY, "a cut answer"),
     (str(len(BODY) - 7), BODY, "not the documented JSON"),
     (str(len(BODY) + 50), BODY, "a cut answer")],
    ids=["not-a-number", "negative", "body-longer-than-said", "body-shorter-than-said"],
)  # fmt: skip
def test_an_answer_whose_length_is_wrong_stops_in_one_line_naming_the_url(
    length: str, body: bytes, said: str
) -> None:
    with OpenAlexStub([oa_work("W1", "T")]) as stub:
        # the stub takes each answer's Content-Length from its own headers
        stub.script += [(200, {"Content-Length": length}, body, 0.0) for _ in range(2)]
        with pytest.raises(OA.LookupStopped) as e:
            _lookup(stub, ["openalex:W1"], max_retries=1)
        message = str(e.value)
        assert f"{stub.url}/works" in message and said in message, message
        assert KEY not in message and "api_key" not in message and "\n" not in message
        stub.script.append((200, {"Content-Length": length}, body, 0.0))
        got, tally = _lookup(stub, ["openalex:W1"])  # retried: the next answer is whole
    assert got["openalex:W1"].found and tally.retries == 1


@pytest.mark.parametrize("length", [None, "not-a-number"])
def test_an_answer_over_the_limit_is_refused_naming_the_limit(length: str | None) -> None:
    """Said too large in its Content-Length: refused before it is read; with no length to
    go by (http.client reads to the end of the connection): refused once the limit is read."""
    big = b'{"meta": {}, "results": [' + b'{"id": "https://openalex.org/W2"},' * 100_000 + b"{}]}"
    with OpenAlexStub([oa_work("W1", "T")]) as stub:
        stub.script.append((200, {"Content-Length": length} if length else {}, big, 0.0))
        with pytest.raises(OA.LookupStopped) as e:
            _lookup(stub, ["openalex:W1"], max_answer_bytes=1 << 20)
    said = f"{len(big):,} bytes" if length is None else "more than 1,048,576 bytes"
    assert str(e.value) == (
        f"OpenAlex answered {stub.url}/works with {said}, over the limit of 1,048,576 bytes "
        "for one answer"
    )


_PEAK = """
import sys
from pipeline.corpus import openalex as OA
settings = OA.ApiSettings(base_url=sys.argv[1], api_key="{key}", requests_per_second=0)
try:
    list(OA.api_lookup(["openalex:W1"], OA.ApiClient(settings, OA.Tally())))
except OA.LookupStopped as e:
    print(e)
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM")][0]
print(int(hwm.split()[1]) // 1024)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_a_50_mb_answer_is_read_no_further_than_the_limit(tmp_path: Path) -> None:
    """A 50 MB answer (one work whose abstract index is 25M positions) whose Content-Length
    is not a number, so the client reads until the limit: the lookups stop naming the limit,
    and the process peaks far below the answer decoded. Measured (VmHWM,
    ``bench/openalex_answer_memory.py``): with its true length, 2,247 MB before the limit
    and 26 MB with it; with this length, a ValueError before and 42 MB with it."""
    positions = b"1," * 25_000_000 + b"1"
    big = (
        b'{"meta": {}, "results": [{"id": "https://openalex.org/W1", '
        b'"abstract_inverted_index": {"word": [' + positions + b"]}}]}"
    )
    with OpenAlexStub([oa_work("W1", "T")]) as stub:
        stub.script.append((200, {"Content-Length": "not-a-number"}, big, 0.0))
        child = subprocess.run(
            [sys.executable, "-c", _PEAK.format(key=KEY), stub.url],
            capture_output=True, text=True, cwd=ROOT, timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    assert child.returncode == 0, child.stderr
    stopped, peak_mb = child.stdout.splitlines()
    assert f"over the limit of {OA.MAX_ANSWER_BYTES:,} bytes" in stopped
    assert int(peak_mb) < 200, child.stdout


def test_a_snapshot_line_longer_than_any_work_is_counted_never_held(tmp_path: Path) -> None:
    """A gzip works file whose first line is 2 GB of one byte (2 MB on disk) was read whole
    into memory; now it is read no further than :data:`MAX_ANSWER_BYTES`, counted invalid,
    and the work on the next line still answers its key, under a 1 GB address-space limit.
    A merged-works list with such a line counts it and still follows the rows after it."""
    root = tmp_path / "snapshot"
    path = root / "works" / "updated_date=2025-01-01" / "part_000.gz"
    path.parent.mkdir(parents=True)
    block = gzip.compress(b"x" * (64 << 20), compresslevel=1, mtime=0)  # one member, 64 MB
    work = json.dumps(oa_work("W7", "A work after the long line")).encode()
    path.write_bytes(block * 32 + gzip.compress(b"\n" + work + b"\n", mtime=0))
    merged = root / "merged_ids" / "works" / "2025-01-02.csv.gz"
    _gz_lines(merged, [b"merge_date,id,merge_into_id", b"y" * (20 << 20), b"2025-01-02,W9,W7"])
    code = f"""
import resource
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from pathlib import Path
from pipeline.corpus import openalex as OA
tally = OA.Tally()
answers = [a for b in OA.snapshot_lookup(["openalex:W7", "openalex:W9"], Path({str(root)!r}), tally) for a in b]
print(sorted((a.key, a.found) for a in answers), tally.invalid_records, tally.merged)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [
        "[('openalex:W7',", "True),", "('openalex:W9',", "True)]", "2", "1",
    ]  # fmt: skip


def test_a_merged_ids_field_over_csvs_limit_is_refused_naming_the_line(tmp_path: Path) -> None:
    """A merged-works row with a 1 MB field ended the run in ``_csv.Error`` (rc 1)."""
    root = tmp_path / "snapshot"
    _works_file(root, [oa_work("W7", "A work")])
    merged = root / "merged_ids" / "works" / "2025-01-02.csv.gz"
    _gz_lines(merged, [b"merge_date,id,merge_into_id", b"2025-01-02,W9," + b"W" * (1 << 20)])
    with pytest.raises(InputError, match=r"2025-01-02\.csv\.gz: line 2 is no merged-works row"):
        list(OA.snapshot_lookup(["openalex:W9"], root, OA.Tally()))
