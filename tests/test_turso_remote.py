"""A remote Turso database (issue 49): the libsql client against a server that speaks Hrana 3
over HTTP (:mod:`tests.hrana_stub`, over the owner's features file), one that refuses the
token and quotes it back, and one that stops answering, which must end the run in one line
within ``--turso-timeout`` instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.errors import PipelineError
from pipeline.evaluate.external import ExternalOptions
from pipeline.evaluate.external.turso_remote import RemoteConnection, RemoteError
from tests.hrana_stub import HranaStub
from tests.test_external_model import ROOT, SECRET, _evaluate, _per_survey, owner  # noqa: F401

pytest.importorskip("libsql")


def test_the_remote_client_streams_rows_and_survives_an_error(tmp_path: Path) -> None:
    import libsql

    database = tmp_path / "f.db"
    local = libsql.connect(str(database))
    local.execute("CREATE TABLE t (id TEXT, n INTEGER, x REAL, b BLOB, z)")
    rows = [(f"2101.{i:05d}", i, i / 3, bytes([i % 256]), None) for i in range(2_500)]
    local.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    local.commit()
    with HranaStub(database, SECRET) as url:
        remote = RemoteConnection(url, SECRET, timeout_s=30)
        cursor = remote.execute("SELECT * FROM t WHERE n >= ? ORDER BY n", (7,))
        read = []
        while batch := cursor.fetchmany(1_000):
            assert len(batch) <= 1_000
            read += batch
        assert read == rows[7:]
        with pytest.raises(RemoteError, match="no such table"):
            remote.execute("SELECT * FROM nowhere").fetchall()
        assert remote.execute("SELECT count(*) FROM t").fetchall() == [(2_500,)]
        remote.close()


def test_a_remote_turso_gives_the_local_files_metrics(
    owner: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    stub = HranaStub(owner["database"], SECRET)
    with stub as url:
        remote = _evaluate(owner, tmp_path / "remote", external=ExternalOptions(
            turso_url=url, turso_token=SECRET))  # fmt: skip
    local = _evaluate(owner, tmp_path / "local", external=ExternalOptions(
        turso_url=str(owner["database"])))  # fmt: skip
    assert _per_survey(remote, "reranker_v2").equals(_per_survey(local, "reranker_v2"))
    assert stub.served >= 3 and set(stub.authorizations) == {f"Bearer {SECRET}"}
    assert not any(
        SECRET in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
    )


def _error(owner: dict[str, Path], tmp_path: Path, **options) -> str:  # noqa: F811
    with pytest.raises(PipelineError) as info:
        _evaluate(owner, tmp_path / "out", external=ExternalOptions(**options))
    message = str(info.value)
    assert "\n" not in message and SECRET not in message
    return message


def test_a_server_that_stops_answering_ends_the_run_in_one_line(
    owner: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    # wedged from the first request (while connecting), then after the connection's two
    for served, doing in ((0, "cannot be reached"), (2, "no answer within 2 s")):
        with HranaStub(owner["database"], SECRET, stall_after=served) as url:
            message = _error(owner, tmp_path, turso_url=url, turso_token=SECRET,
                             turso_timeout_s=2.0)  # fmt: skip
        assert doing in message and "no answer within 2 s" in message and url in message


def test_a_refused_token_is_never_quoted_back(
    owner: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    with HranaStub(owner["database"], SECRET) as url:
        message = _error(owner, tmp_path, turso_url=url, turso_token=SECRET[::-1])
        assert "401" in message and "cannot be reached" in message
        assert SECRET[::-1] not in message
        cmd = [sys.executable, "-m", "pipeline", "evaluate", "--eval-file", str(owner["release"]),
               "--model-file", str(owner["home"] / "reranker_v2.txt"), "--no-learned",
               "--no-cache", "--turso-url", url, "--turso-timeout", "20",
               "--out", str(tmp_path / "o")]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TURSO_AUTH_TOKEN": SECRET[::-1]}
        proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "401" in line and SECRET[::-1] not in line
