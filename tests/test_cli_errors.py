"""Every expected failure of ``python -m pipeline``: exit code non-zero, one line on
stderr, no traceback (the traceback only with ``-v``).

Each case runs the real command in a subprocess, with no Hugging Face token (an empty
``HF_HOME``, no ``HF_TOKEN``) unless the case gives one, and ``HF_ENDPOINT`` pointing at
127.0.0.1: nothing here reaches huggingface.co.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pipeline import __version__

ROOT = Path(__file__).resolve().parents[1]


def _closed_port() -> int:
    """A local port nothing listens on (connection refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path: Path, token: str | None = None, endpoint: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(
        HF_HOME=str(tmp_path / "hf_home"),  # no token saved by `hf auth login` here
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_ENDPOINT=endpoint or f"http://127.0.0.1:{_closed_port()}",
        PYTHONPATH=str(ROOT),
    )
    if token:
        env["HF_TOKEN"] = token
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


# the one error format of every command: a log line, "<date> <time> ERROR <message>"
ERROR_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ERROR \S.*")


def _one_line_failure(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ERROR_LINE.fullmatch(lines[0]), lines[0]
    return lines[0]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A work directory with one file of stage outputs ."""
    d = tmp_path / "work"
    (d / "extract").mkdir(parents=True)
    (d / "extract" / "part.txt").write_text("x\n")
    return d


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    p = tmp_path / "a_file"
    p.write_text("not a directory\n")
    return p


TOKEN_CASES = {
    "push": ["push", "--repo-id", "someone/data", "--release", "nowhere"],
    "submit": ["submit"],  # no --namespace: whoami would be the first network call
    "job": ["job", "--step", "all", "--repo-id", "someone/data"],
}


@pytest.mark.parametrize("name", sorted(TOKEN_CASES))
def test_missing_token_is_named_before_any_network_call(
    name: str, tmp_path: Path, work: Path
) -> None:
    line = _one_line_failure(_run(TOKEN_CASES[name], _env(tmp_path), tmp_path))
    assert "HF_TOKEN" in line and "hf auth login" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["extract", "--input", "hf://datasets/someone/corpus/*.jsonl", "--out", "work"],
        ["evaluate", "--eval-file", "hf://datasets/someone/bench"],
    ],
    ids=lambda a: a[0],
)
def test_unreachable_hub_fails_fast_in_one_line(
    args: list[str], tmp_path: Path, work: Path
) -> None:
    start = time.monotonic()
    line = _one_line_failure(_run(args, _env(tmp_path, token="hf_fake"), tmp_path))
    assert "cannot be reached" in line or "cannot reach the Hugging Face Hub" in line, line
    assert time.monotonic() - start < 20  # no 25 s of huggingface_hub retries


class _Refuses(BaseHTTPRequestHandler):
    """A Hub that refuses every token, as huggingface.co does for a wrong one."""

    def _reply(self) -> None:
        body = json.dumps({"error": "Invalid username or password."}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _reply

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "--namespace", "someone"],
        ["evaluate", "--eval-file", "someone/bench"],
    ],
    ids=lambda a: a[0],
)
def test_auth_error_names_the_token(
    args: list[str], tmp_path: Path, work: Path, refusing_hub: str
) -> None:
    env = _env(tmp_path, token="hf_wrong", endpoint=refusing_hub)
    if args[0] == "submit":  # a config submit accepts: the card's authors and year are set
        (tmp_path / "card.toml").write_text("[release]\nauthors = ['Doe, Jane']\nyear = 2026\n")
        args = [*args, "--config", "card.toml"]
    line = _one_line_failure(_run(args, env, tmp_path))
    assert "HF_TOKEN" in line and "hf auth login" in line, line
    assert "hf_wrong" not in line


def test_eval_before_demo_fails_fast_naming_the_path(tmp_path: Path) -> None:
    """`make eval` before `make demo`: demo_out/release is neither a local folder nor reachable."""
    start = time.monotonic()
    proc = _run(["evaluate", "--eval-file", "demo_out/release"], _env(tmp_path), tmp_path)
    line = _one_line_failure(proc)
    assert "demo_out/release: no such local file or folder" in line, line
    assert time.monotonic() - start < 20
    line = _one_line_failure(
        _run(["evaluate", "--eval-file", "missing.parquet"], _env(tmp_path), tmp_path)
    )
    assert "missing.parquet" in line


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--out", "a_file"],
        ["run", "--input", "a_file", "--out", "a_file"],
        ["works", "--out", "a_file"],
        ["evaluate", "--eval-file", "a_file", "--out", "a_file"],
    ],
    ids=lambda a: a[0],
)
def test_out_is_a_file(args: list[str], tmp_path: Path, a_file: Path) -> None:
    line = _one_line_failure(_run(args, _env(tmp_path), tmp_path))
    assert "a_file is a file" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--out", "work", "--config", "missing.toml"],
        ["run", "--input", "x", "--out", "work", "--config", "missing.toml"],
        ["evaluate", "--eval-file", "x", "--config", "missing.toml"],
        ["roles", "--config", "missing.toml"],
    ],
    ids=lambda a: a[0],
)
def test_missing_config(args: list[str], tmp_path: Path, work: Path) -> None:
    line = _one_line_failure(_run(args, _env(tmp_path), tmp_path))
    assert "missing.toml not found" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--input", "x", "--workers", "0"],
        ["extract", "--input", "x", "--workers", "-3"],
        ["demo", "--workers", "0"],
        ["job", "--step", "all", "--workers", "0"],
        ["submit", "--workers", "two"],
    ],
    ids=lambda a: f"{a[0]}{a[-1]}",
)
def test_bad_workers(args: list[str], tmp_path: Path) -> None:
    line = _one_line_failure(_run(args, _env(tmp_path), tmp_path))
    assert "--workers" in line and ">= 1" in line, line


def test_status_of_a_missing_or_empty_work_directory(tmp_path: Path) -> None:
    line = _one_line_failure(_run(["status", "--out", "nowhere"], _env(tmp_path), tmp_path))
    assert "no such work directory" in line
    (tmp_path / "empty").mkdir()
    proc = _run(["status", "--out", "empty"], _env(tmp_path), tmp_path)
    assert proc.returncode == 0
    assert "holds no pipeline work" in proc.stderr
    assert proc.stdout.splitlines()[1].split()[:3] == ["extract", "not", "run"]


def test_traceback_only_with_verbose(tmp_path: Path, a_file: Path) -> None:
    for flags in (["-v", "status"], ["status", "-v"]):  # before or after the subcommand
        proc = _run([*flags, "--out", "a_file"], _env(tmp_path), tmp_path)
        assert proc.returncode == 2 and "Traceback" in proc.stderr, proc.stderr
    proc = _run(["status", "-q", "--out", "a_file"], _env(tmp_path), tmp_path)
    _one_line_failure(proc)


def test_version_and_quiet(tmp_path: Path, work: Path) -> None:
    proc = _run(["--version"], _env(tmp_path), tmp_path)
    assert proc.returncode == 0 and __version__ in proc.stdout
    proc = _run(["status", "-q", "--out", "work"], _env(tmp_path), tmp_path)
    assert proc.returncode == 0 and proc.stderr == "" and "extract" in proc.stdout


def test_ctrl_c_says_how_to_resume(tmp_path: Path) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it, mid-run."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "demo", "--out", "d", "--workers", "2"],
        env=_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # wait until the run has started extracting (its workers exist), then interrupt
    deadline = time.monotonic() + 60
    while not (tmp_path / "d" / "extract").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("interrupted; rerun the same command to resume")


def _subcommands() -> list[str]:
    import argparse

    from pipeline.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_reports_a_bad_command_line_in_the_one_format(
    name: str, tmp_path: Path
) -> None:
    """A usage error is one line in the format of every other expected failure, exit 2."""
    proc = _run([name, "--no-such-option"], _env(tmp_path), tmp_path)
    assert proc.returncode == 2
    line = _one_line_failure(proc)
    # the option, or an argument the subcommand requires, is named
    assert f"pipeline {name}: " in line and "(see --help)" in line
    assert "--no-such-option" in line or "arguments are required" in line, line


# an expected failure of each command, beyond the usage error above
EXPECTED_FAILURES = {
    "extract": (["--input", "nowhere/*.jsonl", "--out", "w"], "nowhere"),
    "works": (["--out", "w"], "extract"),
    "run": (["--out", "w"], "run needs --input"),
    "status": (["--out", "nowhere"], "no such work directory"),
    "evaluate": (["--release", "nowhere"], "nowhere"),
    "features": (["--release", "nowhere", "--out", "f"], "nowhere"),
    "train": (["--release", "nowhere", "--out", "m"], "nowhere"),
    "push": (["--repo-id", "someone/x", "--release", "nowhere", "--dry-run"], "nowhere"),
    "synth": (["--out", "s", "--papers", "5", "--files", "0"], "files"),
    "demo": (["--out", "d", "--fixtures", "nowhere"], "nowhere"),
    "job": (["--step", "shard", "--input", "nowhere", "--out", "w"], "shard"),
    "submit": (["--dry-run", "--namespace", "someone"], "[release] authors"),
    "roles": (["--out", "nowhere"], "nowhere"),
    "export": (["--release", "nowhere", "--out", "e"], "nowhere"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURES))
def test_expected_failures_follow_the_one_error_format(name: str, tmp_path: Path) -> None:
    args, needle = EXPECTED_FAILURES[name]
    proc = _run([name, *args], _env(tmp_path), tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = _one_line_failure(proc)
    assert needle in line, line


def test_status_prints_whole_counter_names(tmp_path: Path) -> None:
    from pipeline.cli import STATUS_WIDTH

    work = tmp_path / "work"
    (work / "works").mkdir(parents=True)
    counts = {f"a_counter_with_a_long_name_{i:02d}": 10**i for i in range(12)}
    (work / "works" / "_SUCCESS.json").write_text(json.dumps({"counts": counts, "files": {}}))
    proc = _run(["status", "--out", "work"], _env(tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = " ".join(proc.stdout.split())
    for name, value in counts.items():
        assert f"{name} {value:,}" in printed  # never cut, never apart from its value
    assert all(len(line) <= STATUS_WIDTH for line in proc.stdout.splitlines())
