"""A Hugging Face Job simulated locally: ``/data`` and ``/work`` as the plain folders the
mounts present, the release pushed to the loopback Hub stub of ``test_hub``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import jobs
from pipeline.core.config import load_config
from tests.test_hub import REPO, TOKEN, HubStub, _files_containing
from tests.test_negatives import synthetic_corpus


def _three_files(tmp_path: Path) -> Path:
    """The synthetic corpus of the end-to-end tests, split into three input files."""
    lines = next(synthetic_corpus(tmp_path / "gen").glob("*.jsonl")).read_bytes().splitlines()
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"part_{i}.jsonl").write_bytes(b"\n".join(lines[i::3]) + b"\n")
    return data


def _stamps(work: Path) -> dict[str, int]:
    """mtime of every extract marker and manifest: rewritten only when a file is redone."""
    return {
        p.relative_to(work).as_posix(): p.stat().st_mtime_ns
        for folder in ("_markers", "_manifests")
        for p in (work / "extract" / folder).glob("*.json")
    }


# the corpus is synth's: the Job pushes it only when told so, its card naming authors and year
# (the repo comes from --repo-id)
PUSHABLE = {
    "config": load_config(overrides={"release": {"authors": ["Doe, Jane"], "year": 2026}}),
    "allow_synthetic": True,
}


@pytest.fixture
def hub_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)


@pytest.mark.slow
def test_scheduled_runs_resume_from_the_persisted_work_dir(tmp_path: Path, hub_env: None) -> None:
    data, work = _three_files(tmp_path), tmp_path / "work"

    def run() -> dict:
        return jobs.run_step(
            "all", str(data), work, repo_id=REPO, workers=1, endpoint=stub.endpoint, **PUSHABLE
        )

    with HubStub() as stub:
        first = run()
        assert not first["skipped"] and len(stub.commits) == 1
        before = _stamps(work)
        assert len(before) == 6  # a marker and a manifest per input file
        record = json.loads((work / jobs.PUBLISHED).read_text())
        assert record["commit"] == stub.commits[0]["oid"] and record["input_files"] == "3"

        # the next scheduled run, nothing changed: no extract work, nothing published
        second = run()
        assert second["skipped"] and second["published"]["commit"] == stub.commits[0]["oid"]
        assert _stamps(work) == before and len(stub.commits) == 1

        # one input file changes: only that file is extracted again, and a release is pushed
        changed = data / "part_1.jsonl"
        changed.write_bytes(b"\n".join(changed.read_bytes().splitlines()[:-1]) + b"\n")
        third = run()
        after = _stamps(work)
        redone = sorted(k for k in after if after[k] != before.get(k))
        assert len(redone) == 2 and all("part_1" in k for k in redone), redone
        assert not third["skipped"] and len(stub.commits) == 2
    assert _files_containing(tmp_path, TOKEN.encode()) == []


@pytest.mark.slow
def test_fan_out_shards_share_the_work_dir_and_finish_waits_on_markers(
    tmp_path: Path, hub_env: None
) -> None:
    data, work = _three_files(tmp_path), tmp_path / "work"
    with HubStub() as stub:
        kw = {"repo_id": REPO, "workers": 1, "endpoint": stub.endpoint, **PUSHABLE}
        jobs.run_step("shard", str(data), work, shard=(0, 2), **kw)
        # shard 1/2 has not run: the finishing Job waits, then gives up naming a file
        with pytest.raises(TimeoutError, match=r"1 input file\(s\) have no extract marker"):
            jobs.run_step("finish", str(data), work, wait=0.2, poll=0.05, **kw)
        assert stub.commits == []
        jobs.run_step("shard", str(data), work, shard=(1, 2), **kw)
        # a marker whose outputs are not all there yet (another mount's late flush) is
        # not enough: the file counts as missing until its recorded sizes match
        from pipeline.core.config import load_config

        marker = json.loads(next((work / "extract" / "_markers").glob("*.json")).read_text())
        output = work / "extract" / next(iter(marker["outputs"]))
        kept = output.read_bytes()
        output.write_bytes(kept[:10])
        assert len(jobs.extract_missing(work, str(data), load_config())) == 1
        output.write_bytes(kept)
        assert jobs.extract_missing(work, str(data), load_config()) == []
        done = jobs.run_step("finish", str(data), work, wait=0, **kw)
        assert not done["skipped"] and len(stub.commits) == 1
        # a rerun of the whole schedule over the unchanged input does nothing
        assert jobs.run_step("shard", str(data), work, shard=(0, 2), **kw)["skipped"]
        assert jobs.run_step("finish", str(data), work, **kw)["skipped"]
        assert len(stub.commits) == 1


def test_a_job_step_runs_with_the_config_it_was_given(tmp_path: Path) -> None:
    """The Job calls the API with its ``--config`` (what ``submit`` ships as pipeline_config)."""
    import shutil

    from pipeline.core.config import Config, load_config
    from tests.conftest import SAMPLE_2022

    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    shutil.copyfile(SAMPLE_2022, data / SAMPLE_2022.name)
    config = tmp_path / "c.toml"
    config.write_text("[extract]\nbatch_papers = 2\n")
    done = jobs.run_step("shard", str(data), work, config=config, shard=(0, 1), workers=1)
    assert done == {"step": "shard", "skipped": False, "shard": [0, 1]}
    (manifest,) = [json.loads(p.read_text()) for p in (work / "extract" / "_manifests").iterdir()]
    assert manifest["config_hash"] == load_config(config).hash != Config().hash
    assert manifest["config"]["extract"]["batch_papers"] == 2
