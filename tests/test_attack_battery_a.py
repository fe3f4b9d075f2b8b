"""Cases 11 and 14-21 of issue 21's attack battery: each held input is refused with one
line (rc 2), or handled, instead of crashing, leaking or writing outside the run."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.config import Config, ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------- 16: integer ranges
def _int_fields() -> list[tuple[str, str]]:
    cfg = Config()
    found = []
    for sec in dataclasses.fields(cfg):
        section = getattr(cfg, sec.name)
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if isinstance(value, int) and not isinstance(value, bool):
                found.append((sec.name, f.name))
            if isinstance(value, tuple) and value and isinstance(value[0], int):
                found.append((sec.name, f.name))
    return found


@pytest.mark.parametrize(("section", "name"), _int_fields())
@pytest.mark.parametrize("value", [2**63, 2**64, 10**30])
def test_no_integer_past_64_bits_passes_config_validation(
    tmp_path: Path, caplog, section: str, name: str, value: int
) -> None:
    default = getattr(getattr(Config(), section), name)
    text = f"[{value}]" if isinstance(default, tuple) else str(value)
    path = tmp_path / "big.toml"
    path.write_text(f"[{section}]\n{name} = {text}\n")
    with pytest.raises(ConfigError, match=name):
        load_config(path)
    caplog.set_level(logging.ERROR, logger="pipeline")
    assert main(["status", "--out", str(tmp_path / "out"), "--config", str(path)]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert name in message and "\n" not in message


# --------------------------------------------------------------------- 18: disk full
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_disk_full_inside_a_polars_write_is_one_line_and_rc_2(
    tmp_path: Path, sample_lines: list[bytes], monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """Polars reports ENOSPC as a ComputeError, not an OSError: still an expected failure."""
    import polars as pl

    from pipeline import api

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "part.jsonl").write_bytes(b"\n".join(sample_lines) + b"\n")
    out = tmp_path / "out"
    api.extract(corpus, out, workers=1)
    real_write = pl.DataFrame.write_parquet

    def disk_full(self: pl.DataFrame, file, *args, **kwargs):
        return real_write(self, "/dev/full", *args, **kwargs)  # the real error of a full disk

    monkeypatch.setattr(pl.DataFrame, "write_parquet", disk_full)
    caplog.set_level(logging.ERROR, logger="pipeline")
    assert main(["works", "--out", str(out)]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "No space left on device" in message and "\n" not in message
    assert "unexpected" not in message


# --------------------------------------------------------------------- 21: SIGTERM
@pytest.mark.parametrize("group", [False, True], ids=["main-process", "process-group"])
def test_sigterm_says_how_to_resume_and_the_rerun_finishes(tmp_path: Path, group: bool) -> None:
    """SIGTERM (kill, timeout, a scheduler) mid-extract: one line, rc 143, resumable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "pipeline", "demo", "--out", "d", "--workers", "2"]
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "d" / "extract").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    if group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("rerun the same command to resume"), err
    rerun = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert (tmp_path / "d" / "release" / "_SUCCESS.json").is_file()


# --------------------------------------------------------------------- 11: push checks every file
@pytest.fixture(scope="module")
def built_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.test_release import handmade_release

    # a card naming the repo, authors and year (push refuses placeholders); hand-made tables
    # have no provenance, hence --allow-synthetic below
    card = {"repo_id": "someone/x", "authors": ["Doe, Jane"], "year": 2026}
    return handmade_release(tmp_path_factory.mktemp("release_work"), card) / "release"


def _edit_card(release: Path) -> Path:
    card = release / "README.md"
    card.write_text(card.read_text() + "\nedited after the release stage\n")
    return card


def _replace_figure(release: Path) -> Path:
    (figure,) = sorted((release / "figures").glob("*.png"))[:1]
    figure.write_bytes(figure.read_bytes()[::-1])
    return figure


def _add_script(release: Path) -> Path:
    script = release / "notes.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    return script


@pytest.mark.parametrize("record", ["kept", "deleted"])
@pytest.mark.parametrize("change", [_edit_card, _replace_figure, _add_script])
def test_push_refuses_any_file_the_release_record_does_not_list(
    built_release: Path, tmp_path: Path, caplog, change, record: str
) -> None:
    import shutil

    release = tmp_path / "release"
    shutil.copytree(built_release, release)
    args = ["push", "--repo-id", "someone/x", "--release", str(release), "--dry-run"]
    args.append("--allow-synthetic")
    assert main(args) == 0  # untouched: accepted
    changed = change(release)
    if record == "deleted":
        (release / "_SUCCESS.json").unlink()
    caplog.clear()
    caplog.set_level(logging.ERROR, logger="pipeline")
    assert main(args) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    named = changed if record == "kept" else release / "_SUCCESS.json"
    assert str(named) in message and "\n" not in message


def test_push_refuses_a_damaged_release_record(built_release: Path, tmp_path: Path, caplog) -> None:
    import shutil

    release = tmp_path / "release"
    shutil.copytree(built_release, release)
    success = release / "_SUCCESS.json"
    success.write_text(success.read_text()[:40])
    caplog.set_level(logging.ERROR, logger="pipeline")
    assert main(["push", "--repo-id", "someone/x", "--release", str(release), "--dry-run"]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert str(success) in message and "damaged" in message


# --------------------------------------------------------------------- 17: names, durations, counts
CONSTRAINTS = ROOT / "constraints.txt"


@pytest.mark.parametrize(
    "extra",
    [
        ["--fan-out", "0"],
        ["--fan-out", "-2"],
        ["--timeout", "forever"],
        ["--timeout", "0"],
        ["--timeout", "2w"],  # a unit the Job spec does not convert
        ["--finish-timeout", "soon"],
        ["--poll", "-1"],
        ["--poll", "nan"],
        ["--input-repo", "../../etc"],
        ["--namespace", "a b"],
        ["--namespace", "a/b"],
        ["--repo-id", "a/b/c"],
        ["--bucket", "owner"],
        ["--code-repo", "a b/c"],
        ["--config", "missing.toml"],
    ],
    ids=lambda x: " ".join(x),
)
def test_submit_dry_run_refuses_bad_names_durations_counts_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, extra: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["submit", "--dry-run", "--namespace", "someone", "--constraints", str(CONSTRAINTS)]
    assert main([*argv, *extra]) == 2  # usage errors: the one error line, exit 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and extra[0] in err, err


def test_submit_dry_run_still_takes_good_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.toml").write_text(
        "[surveys]\nmin_resolved_refs = 10\n[release]\nauthors = ['Doe, Jane']\nyear = 2026\n"
    )
    argv = ["submit", "--dry-run", "--namespace", "some-org", "--constraints", str(CONSTRAINTS)]
    argv += ["--fan-out", "3", "--timeout", "90m", "--finish-timeout", "7200", "--poll", "0.5"]
    argv += ["--input-repo", "ines-besrour/unarxive_2024", "--repo-id", "some-org/lists.v2"]
    argv += ["--config", "ok.toml"]
    assert main(argv) == 0
    assert '"timeout": "90m"' in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["../../etc", "a/b/c", "a b/c", "owner", "o/" + "n" * 200])
def test_push_dry_run_refuses_bad_repo_ids(built_release: Path, capsys, bad: str) -> None:
    assert main(["push", "--repo-id", bad, "--release", str(built_release), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--repo-id" in err, err


# --------------------------------------------------------------------- 20: secrets
class _QuotingHub:
    """A Hub that refuses every request and quotes its Authorization header back."""

    def __init__(self) -> None:
        import http.server
        import json
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _refuse(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                quoted = self.headers.get("Authorization", "")
                body = json.dumps(
                    {"error": f"Invalid credentials in Authorization header: {quoted}"}
                ).encode()
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Error-Message", f"Invalid credentials: {quoted}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_HEAD = do_PUT = _refuse  # noqa: N815

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _QuotingHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


HF_LIKE_TOKEN = "hf_" + "Ab3" * 12  # the shape of a real token: hf_ and 36 letters and digits


@pytest.mark.parametrize("token", ["hf_fake_secret_123", HF_LIKE_TOKEN])
@pytest.mark.parametrize("verbose", [[], ["-v"]], ids=["plain", "verbose"])
def test_a_hub_answer_quoting_the_token_never_prints_it(
    tmp_path: Path, token: str, verbose: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH=str(ROOT), HF_TOKEN=token)
    env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    cmd = [sys.executable, "-m", "pipeline", *verbose, "submit", "--namespace", "someone"]
    (tmp_path / "card.toml").write_text("[release]\nauthors = ['Doe, Jane']\nyear = 2026\n")
    cmd += ["--constraints", str(CONSTRAINTS), "--config", "card.toml"]
    with _QuotingHub() as hub:
        env["HF_ENDPOINT"] = hub.endpoint
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"401" in proc.stderr  # the refusal itself is reported
    assert token.encode() not in proc.stdout + proc.stderr
    if verbose:  # the traceback holds what the Hub quoted, scrubbed
        assert b"Traceback" in proc.stderr and b"Bearer <redacted>" in proc.stderr


def test_scrub_hides_secrets_the_process_does_not_know() -> None:
    from pipeline.rules.redact import scrub

    other = "hf_" + "Zz9" * 12
    said = f"Authorization: Bearer abc.def-ghi; org token api_org_{'x1' * 16} and {other}."
    clean = scrub(said)
    assert "abc.def-ghi" not in clean and other not in clean and "api_org_" not in clean
    assert clean.startswith("Authorization: Bearer <redacted>;")
    assert scrub("hf_home and hf_transfer stay") == "hf_home and hf_transfer stay"


# --------------------------------------------------------------------- 19: library caches
def test_a_run_on_a_fresh_home_writes_nothing_outside_out_and_its_temp_dir(tmp_path: Path) -> None:
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "HUGGING", "XDG_", "MPL")) and k != "PYTHONPYCACHEPREFIX"
    }
    env.update(HOME=str(home), TMPDIR=str(temp), PYTHONPATH=str(ROOT))
    env.update(PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pipeline", "demo", "--out", str(tmp_path / "d"), "--workers", "1"]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d" / "release" / "figures").is_dir()  # it drew its figures
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
    assert sorted(p.name for p in temp.iterdir()) == []  # the run's own temp dir is gone


# --------------------------------------------------------------------- 14: model files
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(release folder, a model.txt that `train` wrote for it, with its model.json)."""
    from pipeline.rank import train_release
    from tests.test_negatives import synthetic_release_dir

    release = synthetic_release_dir(tmp_path_factory) / "release"
    return release, train_release(release, tmp_path_factory.mktemp("model"))


def _set_first(text: str, key: str, value: str) -> str:
    """``key=a b c`` of the first tree -> ``key=value b c``."""
    start = text.index(f"\n{key}=") + len(key) + 2
    end = text.index("\n", start)
    rest = text[start:end].split(" ")[1:]
    return text[:start] + " ".join([value, *rest]) + text[end:]


def _cut_inside_a_tree(text: str) -> str:
    start = text.index("\nleft_child=", text.index("Tree=1"))
    return text[: start + 15]


MODEL_DAMAGE = {
    "cut-in-half": lambda t: t.encode()[: len(t) // 2],
    "cut-inside-a-tree": lambda t: _cut_inside_a_tree(t).encode(),
    "left-child-out-of-range": lambda t: _set_first(t, "left_child", "999999").encode(),
    "split-feature-out-of-range": lambda t: _set_first(t, "split_feature", "99999").encode(),
    "child-cycle": lambda t: _set_first(t, "right_child", "0").encode(),
    "binary": lambda t: bytes(range(256)) * 8,
}


@pytest.mark.parametrize("damage", sorted(MODEL_DAMAGE))
def test_a_damaged_model_file_is_one_line_naming_it_never_a_crash(
    trained: tuple[Path, Path], tmp_path: Path, damage: str
) -> None:
    import shutil

    release, model = trained
    bad = tmp_path / "bad.txt"
    bad.write_bytes(MODEL_DAMAGE[damage](model.read_text()))
    shutil.copy(model.with_suffix(".json"), bad.with_suffix(".json"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(PYTHONPATH=str(ROOT), HF_HOME=str(tmp_path / "hf_home"))
    cmd = [sys.executable, "-m", "pipeline", "evaluate", "--eval-file", str(release)]
    cmd += ["--model-file", str(bad), "--no-learned", "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    (line,) = proc.stderr.strip().splitlines()
    assert str(bad) in line and "LightGBM" in line, line


def test_every_cut_of_a_model_file_is_refused_or_loads(trained: tuple[Path, Path]) -> None:
    """No prefix of a good model file crashes LightGBM (in a child process: a crash is a signal)."""
    _, model = trained
    script = (
        "import sys, numpy as np, lightgbm as lgb\n"
        "from pathlib import Path\n"
        "from pipeline.rank.lgbm_text import ModelTextError, check_model_text\n"
        "data = Path(sys.argv[1]).read_bytes()\n"
        "step = max(1, len(data) // 3000)\n"
        "for cut in [*range(0, len(data), step), len(data)]:\n"
        "    try:\n"
        "        text = check_model_text(data[:cut], Path(sys.argv[1]))\n"
        "    except ModelTextError:\n"
        "        continue\n"
        "    booster = lgb.Booster(model_str=text)\n"
        "    booster.predict(np.random.rand(3, booster.num_feature()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(model)], env=env, capture_output=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]


# --------------------------------------------------------------------- 15: runs in bounded memory
_RSS_SCRIPT = """
import resource, sys
from pathlib import Path
import polars as pl
from pipeline.evaluate.systems.runs import read_run
pl.DataFrame({"a": ["x y"]}).with_columns(pl.col("a").str.split(" "))  # start Polars' pools
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run = read_run(Path(sys.argv[1]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(run.n_rows, (after - before) * 1024)
"""


@pytest.mark.parametrize("fmt", ["trec", "csv"])
def test_a_large_run_is_read_in_memory_near_its_own_size(tmp_path: Path, fmt: str) -> None:
    """The reader used to hold the whole text and a list of every line: 8x the file in
    RSS (a 2 GiB run passed 10 GB). Now it reads blocks of lines into compact columns."""
    surveys, candidates = 3000, 800
    path = tmp_path / f"big.{fmt}"
    with path.open("w") as f:
        if fmt == "csv":
            f.write("survey_id,candidate_id,score\n")
        for s in range(surveys):
            survey = f"{2000 + s % 100}.{s:05d}"
            if fmt == "csv":
                f.writelines(
                    f"{survey},{1000 + c}.{c:05d}v2,0.{c:06d}\n" for c in range(candidates)
                )
            else:
                f.writelines(
                    f"{survey} Q0 {1000 + c}.{c:05d}v2 {c + 1} 0.{c:06d} system\n"
                    for c in range(candidates)
                )
    size = path.stat().st_size
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows, growth = (int(x) for x in proc.stdout.split())
    assert rows == surveys * candidates
    assert growth < 3 * size, (
        f"peak RSS grew {growth / 2**20:.0f} MB for a {size / 2**20:.0f} MB run"
    )
