"""The corpus as the Hub publishes it: one tar.gz of JSONL members, byte-split into parts.

The fixture archive is packed from the real records (tests/fixtures, see SOURCE.md) the
way ``ines-besrour/unarxive_2024`` is: ``processed_unarxive_extended_data/.../*.jsonl``
members in the 2024 layout (converted by the publisher's grouping rule, its quirks
included), members holding several papers, an empty member, non-JSONL members, cut into
``unarXive_2024.tar.gz.part_aa``, ``_ab``, ``_ac``.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from pipeline import api, jobs
from pipeline.corpus.archive import ArchiveReader, pack
from pipeline.corpus.sources import InputError, resolve_inputs
from pipeline.synth.demo_corpus import ROOT, _to_2024
from tests.conftest import PREVIEW_2024, SAMPLE_2022

REPO = Path(__file__).resolve().parents[1]
CONFIG = "[archive]\nunit_mb = 1\n"  # ~1 MB units: the fixture archive has several


def _members(synthetic: int = 0, tmp: Path | None = None) -> list[tuple[str, bytes | None]]:
    """The fixture archive's members: the real 2022 sample (2024 layout) in 8 members of
    6-7 papers, the real 2024 preview, a LICENSE, an empty member; and ``synthetic``
    synthetic papers in two members (for a release with several surveys)."""
    lines = gzip.decompress(SAMPLE_2022.read_bytes()).splitlines()
    real = _to_2024(b"\n".join(lines))
    records = real.splitlines()
    members: list[tuple[str, bytes | None]] = [(ROOT, None), (f"{ROOT}/22", None)]
    for i in range(8):
        part = b"\n".join(records[i::8]) + b"\n"
        members.append((f"{ROOT}/22/arXiv_src_2212_{80 + i:03d}.jsonl", part))
    members.append((f"{ROOT}/23/arXiv_src_2310_001.jsonl", PREVIEW_2024.read_bytes()))
    members.append((f"{ROOT}/23/arXiv_src_2310_002.jsonl", b""))
    members.append((f"{ROOT}/LICENSE", (SAMPLE_2022.parent / "LICENSE").read_bytes()))
    if synthetic:
        from pipeline.synth.generator import generate

        assert tmp is not None
        for p in generate(tmp / "synth", papers=synthetic, small=True, files=2):
            members.append((f"{ROOT}/synthetic/{p.name}", _to_2024(p.read_bytes())))
    return members


def _unpacked(members: list[tuple[str, bytes | None]], root: Path) -> Path:
    for name, data in members:
        path = root / name
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return root


def _config(tmp: Path) -> Path:
    path = tmp / "config.toml"
    path.write_text(CONFIG)
    return path


def _release_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "release").glob("*.parquet"))}


def _unit_markers(out: Path) -> dict[str, int]:
    return {p.stem: p.stat().st_mtime_ns for p in (out / "extract" / "_markers").glob("*.json")}


def _parts_end(out: Path) -> dict[str, int]:
    """Each finished unit's last part (the index its marker records)."""
    return {
        p.stem: json.loads(p.read_text())["key"]["parts_end"]
        for p in (out / "extract" / "_markers").glob("*.json")
    }


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("parts")
    pack(_members(), folder)
    return folder


# --------------------------------------------------------------------- finding the parts
def test_the_parts_are_one_input_from_the_folder_or_the_first_part(parts: Path) -> None:
    (archive,) = resolve_inputs([str(parts)])
    assert archive.is_archive and archive.name == "unarXive_2024.tar.gz"
    assert [p.name for p in archive.parts] == [
        "unarXive_2024.tar.gz.part_aa",
        "unarXive_2024.tar.gz.part_ab",
        "unarXive_2024.tar.gz.part_ac",
    ]
    assert archive.size == sum(p.stat().st_size for p in parts.iterdir())
    (first,) = resolve_inputs([str(parts / "unarXive_2024.tar.gz.part_aa")])
    assert first == archive


def test_numbered_parts_and_a_whole_archive_are_inputs_too(tmp_path: Path) -> None:
    members = _members()[:4]
    pack(members, tmp_path / "n", numbered=True)
    (numbered,) = resolve_inputs([str(tmp_path / "n")])
    assert [p.name[-3:] for p in numbered.parts] == ["001", "002", "003"]
    pack(members, tmp_path / "w", name="corpus.tar.gz", parts=1)
    (whole,) = resolve_inputs([str(tmp_path / "w")])
    assert whole.parts and whole.name == "corpus.tar.gz"


def test_a_missing_middle_part_is_named(parts: Path, tmp_path: Path) -> None:
    folder = tmp_path / "gap"
    folder.mkdir()
    for name in ("unarXive_2024.tar.gz.part_aa", "unarXive_2024.tar.gz.part_ac"):
        (folder / name).write_bytes((parts / name).read_bytes())
    with pytest.raises(InputError, match=r"unarXive_2024\.tar\.gz\.part_ab is missing"):
        resolve_inputs([str(folder)])


# --------------------------------------------------------------------- reading the stream
def test_members_are_read_in_order_and_counted(parts: Path) -> None:
    (archive,) = resolve_inputs([str(parts)])
    reader = ArchiveReader(archive, 1 << 20)
    names = []
    for unit in reader.units():
        for member, stream in unit.members_data():
            names.append(member.name)
            while stream.read(1 << 16):
                pass
    assert names == [n for n, d in _members() if d and n.endswith(".jsonl")]
    # 2 folders; 9 JSONL members with papers; the empty member; the LICENSE
    assert reader.members == {"directory": 2, "jsonl": 9, "empty": 1, "non_jsonl": 1}


@pytest.mark.parametrize("direct", [True, False], ids=["below tarfile", "through tarfile"])
@pytest.mark.parametrize("read_size", [1000, 1 << 16, 4 << 20])
def test_member_data_is_the_members_bytes_however_it_is_read(
    parts: Path, direct: bool, read_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # member data is read from the stream under tarfile's (its read-ahead first, then
    # its position moved on); without those attributes, through tarfile's own reads
    import pipeline.corpus.archive as A

    made = A._MemberData.__init__

    def init(self: A._MemberData, tar_stream: object, size: int) -> None:
        made(self, tar_stream, size)
        assert self._direct  # the tarfile of this Python has them
        self._direct = direct

    monkeypatch.setattr(A._MemberData, "__init__", init)
    (archive,) = resolve_inputs([str(parts)])
    got = {}
    for unit in ArchiveReader(archive, 1 << 20).units():
        for member, stream in unit.members_data():
            chunks = []
            while chunk := stream.read(read_size):
                chunks.append(chunk)
            got[member.name] = b"".join(chunks)
    assert got == {n: d for n, d in _members() if d and n.endswith(".jsonl")}


def test_archive_hub_and_unpacked_tree_give_identical_releases(tmp_path: Path) -> None:
    members = _members(synthetic=400, tmp=tmp_path)
    pack(members, tmp_path / "parts")
    tree = _unpacked(members, tmp_path / "tree")
    cfg = _config(tmp_path)
    from_parts = api.run([tmp_path / "parts"], tmp_path / "a", config=cfg, workers=2)
    from_tree = api.run([tree], tmp_path / "c", config=cfg, workers=2)
    assert from_parts.release is not None and from_tree.release is not None
    a, c = _release_bytes(tmp_path / "a"), _release_bytes(tmp_path / "c")
    assert a and a == c
    # the same rows, with the same source_file, whichever form the corpus came in
    key = ["paper_id", "source_file", "line_number"]
    papers_a = pl.read_parquet(tmp_path / "a" / "extract" / "papers").sort(key)
    papers_c = pl.read_parquet(tmp_path / "c" / "extract" / "papers").sort(key)
    assert papers_a.equals(papers_c)
    record = json.loads(next((tmp_path / "a" / "extract" / "_archives").glob("*.json")).read_text())
    assert record["members"] == {"directory": 2, "empty": 1, "jsonl": 11, "non_jsonl": 1}
    assert len(record["units"]) >= 3
    summary = json.loads((tmp_path / "a" / "extract" / "_summary.json").read_text())
    assert summary["archive_members"] == record["members"]


def test_shards_over_an_archive_together_equal_one_run(parts: Path, tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    whole = tmp_path / "whole"
    api.run([parts], whole, config=cfg, workers=1)
    out = tmp_path / "sharded"
    api.extract([parts], out, config=cfg, workers=1, shard_of=(0, 2))
    first = set(_unit_markers(out))
    api.extract([parts], out, config=cfg, workers=1, shard_of=(1, 2))
    second = set(_unit_markers(out)) - first
    assert first and second and first.isdisjoint(second)
    assert all(int(k.rsplit(".", 1)[1]) % 2 == 0 for k in first)
    api.run([parts], out, config=cfg, workers=1)
    assert _release_bytes(out) == _release_bytes(whole)


def test_kill_mid_archive_then_rerun_skips_finished_units(
    parts: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _config(tmp_path)
    reference = tmp_path / "reference"
    api.extract([parts], reference, config=cfg, workers=1)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "pipeline", "extract", "--input", str(parts)]
    cmd += ["--out", str(out), "--workers", "1", "--config", str(cfg)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    markers = out / "extract" / "_markers"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(markers.glob("*.json"))) < 2:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _unit_markers(out)
    total = len(_unit_markers(reference))
    assert 2 <= len(before) < total, "the kill should land part-way through the archive"
    caplog.set_level("INFO", logger="pipeline")
    api.extract([parts], out, config=cfg, workers=2)
    after = _unit_markers(out)
    assert {k: after[k] for k in before} == before, "finished units are not decoded again"
    assert f"{len(before)} skipped as done" in caplog.text
    assert len(after) == total

    def tables(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted((root / "extract").glob("*/*.parquet"))
        }

    assert tables(out) == tables(reference)
    assert not list(out.rglob("*.tmp-*"))


# --------------------------------------------------------------------- damage
def _copy(parts: Path, dest: Path) -> Path:
    dest.mkdir()
    for p in parts.iterdir():
        (dest / p.name).write_bytes(p.read_bytes())
    return dest


def _extract_fails(folder: Path, out: Path, cfg: Path) -> str:
    with pytest.raises(RuntimeError) as err:
        api.extract([folder], out, config=cfg, workers=1)
    (archive,) = resolve_inputs([str(folder)])
    status = json.loads((out / "extract" / "_manifests" / f"{archive.key}.json").read_text())
    assert status["status"] == "failed"
    assert str(err.value).count("\n") == 0
    return status["failed"]["reason"]


def test_parts_in_the_wrong_order_are_named(parts: Path, tmp_path: Path) -> None:
    folder = _copy(parts, tmp_path / "swapped")
    aa, ab = folder / "unarXive_2024.tar.gz.part_aa", folder / "unarXive_2024.tar.gz.part_ab"
    data_a, data_b = aa.read_bytes(), ab.read_bytes()
    aa.write_bytes(data_b)
    ab.write_bytes(data_a)
    reason = _extract_fails(folder, tmp_path / "out", _config(tmp_path))
    assert reason.startswith("unarXive_2024.tar.gz.part_aa: does not start with a gzip header")


def test_a_truncated_last_part_keeps_what_was_read_and_the_fix_redoes_only_the_rest(
    parts: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _config(tmp_path)
    folder = _copy(parts, tmp_path / "cut")
    last = folder / "unarXive_2024.tar.gz.part_ac"
    whole = last.read_bytes()
    last.write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "out"
    reason = _extract_fails(folder, out, cfg)
    assert reason.startswith("unarXive_2024.tar.gz.part_ac: ")
    assert "truncated" in reason
    kept = _unit_markers(out)
    assert kept, "units read completely before the damage are kept"
    ends = _parts_end(out)
    last.write_bytes(whole)
    caplog.set_level("INFO", logger="pipeline")
    api.extract([folder], out, config=cfg, workers=1)
    after = _unit_markers(out)
    # units read from parts aa and ab only are not redone; those reaching into ac are
    assert {k: after[k] for k in kept if ends[k] < 2} == {k: kept[k] for k in kept if ends[k] < 2}
    assert any(e < 2 for e in ends.values())
    reference = tmp_path / "reference"
    api.extract([parts], reference, config=cfg, workers=1)
    assert len(after) == len(_unit_markers(reference))
    assert not (
        out / "extract" / "_manifests" / f"{resolve_inputs([str(folder)])[0].key}.json"
    ).exists()


def _flip(parts: Path, dest: Path, sums: bool) -> Path:
    folder = _copy(parts, dest)
    if sums:  # the published sha256 of each part, as sha256sum writes them
        import hashlib

        lines = [
            f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n"
            for p in sorted(folder.iterdir())
        ]
        (folder / "SHA256SUMS").write_text("".join(lines))
    middle = folder / "unarXive_2024.tar.gz.part_ab"
    data = bytearray(middle.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a string: deflate decodes on, only a check finds it
    middle.write_bytes(bytes(data))
    return folder


def test_a_flipped_byte_in_part_2_is_named_by_its_published_sha256(
    parts: Path, tmp_path: Path
) -> None:
    cfg = _config(tmp_path)
    folder = _flip(parts, tmp_path / "flip", sums=True)
    out = tmp_path / "out"
    reason = _extract_fails(folder, out, cfg)
    assert reason.startswith("unarXive_2024.tar.gz.part_ab: its sha256 is "), reason
    # what was read from part aa alone is kept; nothing read from ab is
    ends = _parts_end(out)
    assert ends and all(e == 0 for e in ends.values())


def test_a_flipped_byte_without_published_sums_discards_the_run(
    parts: Path, tmp_path: Path
) -> None:
    folder = _flip(parts, tmp_path / "flip", sums=False)
    out = tmp_path / "out"
    reason = _extract_fails(folder, out, _config(tmp_path))
    assert reason.startswith("unarXive_2024.tar.gz: the gzip checksum at the end"), reason
    assert not list((out / "extract" / "_markers").glob("*.json")), "no damaged unit is kept"


def test_a_part_changed_between_two_runs_redoes_what_was_read_from_it(
    parts: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _config(tmp_path)
    folder = _copy(parts, tmp_path / "changed")
    out = tmp_path / "out"
    api.extract([folder], out, config=cfg, workers=1)
    first = _unit_markers(out)
    ends = _parts_end(out)
    last = folder / "unarXive_2024.tar.gz.part_ac"
    last.write_bytes(last.read_bytes())  # same bytes, new identity (mtime), as a re-upload
    os.utime(last, ns=(time.time_ns(), time.time_ns() + 10**9))
    caplog.set_level("INFO", logger="pipeline")
    api.extract([folder], out, config=cfg, workers=1)
    assert "unarXive_2024.tar.gz.part_ac" in caplog.text and "changed" in caplog.text
    after = _unit_markers(out)
    for k, end in ends.items():
        assert (after[k] == first[k]) == (end < 2), k


def test_a_part_that_changed_size_while_listed_is_named(parts: Path, tmp_path: Path) -> None:
    folder = _copy(parts, tmp_path / "grown")
    (archive,) = resolve_inputs([str(folder)])
    middle = folder / "unarXive_2024.tar.gz.part_ab"
    middle.write_bytes(middle.read_bytes()[:-100])
    reader = ArchiveReader(archive, 1 << 20)
    with pytest.raises(Exception, match=r"^unarXive_2024\.tar\.gz\.part_ab: ends at byte"):
        for unit in reader.units():
            unit.drain()


# --------------------------------------------------------------------- the Hub
def test_run_over_the_hub_repo_matches_the_local_parts(parts: Path, tmp_path: Path) -> None:
    from tests.test_hub import HubStub

    cfg = _config(tmp_path)
    with HubStub() as stub:
        repo = "ines-besrour/unarxive_2024"
        stub.repos[repo] = {p.name: p.read_bytes() for p in sorted(parts.iterdir())}
        stub.head[repo] = "1" * 40
        env = {
            **os.environ,
            "HF_ENDPOINT": stub.endpoint,
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(tmp_path / "hf"),
        }
        cmd = [sys.executable, "-m", "pipeline", "run", "--input", f"hf://datasets/{repo}"]
        cmd += ["--out", str(tmp_path / "b"), "--workers", "2", "--config", str(cfg)]
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    api.run([parts], tmp_path / "a", config=cfg, workers=2)
    assert _release_bytes(tmp_path / "b") == _release_bytes(tmp_path / "a")
    record = json.loads(next((tmp_path / "b" / "extract" / "_archives").glob("*.json")).read_text())
    assert [p["name"] for p in record["parts"]] == sorted(p.name for p in parts.iterdir())


def test_submit_and_job_dry_runs_show_the_parts_they_found(parts: Path, tmp_path: Path) -> None:
    from tests.test_hub import HubStub

    with HubStub() as stub:
        repo = "ines-besrour/unarxive_2024"
        stub.repos[repo] = {p.name: p.read_bytes() for p in sorted(parts.iterdir())}
        stub.head[repo] = "1" * 40
        env = {**os.environ, "HF_ENDPOINT": stub.endpoint, "HF_HOME": str(tmp_path / "hf")}
        env["HF_TOKEN"] = "hf_" + "x" * 30
        cmd = [sys.executable, "-m", "pipeline", "submit", "--dry-run", "--namespace", "me"]
        card = tmp_path / "card.toml"  # submit refuses a config without the card's authors, year
        card.write_text("[release]\nauthors = ['Doe, Jane']\nyear = 2026\n")
        cmd += ["--config", str(card)]
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    assert "archives" in plan["input_found"], plan["input_found"]
    (archive,) = plan["input_found"]["archives"]
    assert [p["name"] for p in archive["parts"]] == sorted(p.name for p in parts.iterdir())
    projection = plan["extract_projection"]
    assert projection["flavor"] == "cpu-upgrade" and projection["decoding_workers"] == 7
    full = jobs.extract_projection(int(104.8e9), "cpu-upgrade")
    parts_of = (full["read_hours"], full["decompress_hours"], full["decode_hours_per_job"])
    assert full["projected_hours"] == max(parts_of)
    cmd = [sys.executable, "-m", "pipeline", "job", "--step", "all", "--dry-run"]
    cmd += ["--input", str(parts), "--out", str(tmp_path / "work")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads(done.stdout)
    assert plan["found"]["archives"][0]["name"] == "unarXive_2024.tar.gz"
    assert plan["unchanged_since_release"] is False


def test_a_scheduled_run_sees_the_same_identity_until_a_part_changes(
    parts: Path, tmp_path: Path
) -> None:
    from pipeline.core.config import Config

    folder = _copy(parts, tmp_path / "p")
    first = jobs.run_identity(str(folder), Config())
    assert first == jobs.run_identity(str(folder), Config()) and first["input_files"] == "1"
    part = folder / "unarXive_2024.tar.gz.part_ab"
    os.utime(part, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert jobs.run_identity(str(folder), Config())["input"] != first["input"]
