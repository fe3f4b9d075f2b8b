"""Retrieval with the user's own index under hostile input (issue 52): a Qdrant server that
quotes the API key back, ``--query-vectors`` files that are broken in every way a user's
file is, local-mode folders that are not qdrant-client's, collections of another size.

Each case is one line (exit code 2 on the command line, a :class:`PipelineError` in
Python) naming the file or folder, and where it applies the survey, the row and both
sizes; the key appears in no output and no file; a refused folder is left as it was.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core.errors import PipelineError, user_message
from pipeline.core.release_files import beir_file
from pipeline.evaluate.examples import HASHED_DIMENSION
from tests.loopback import LoopbackStub
from tests.test_retrieval_search import CONFIG, _release

pytest.importorskip("qdrant_client", reason="the [qdrant] extra is not installed")

SECRET = "qk-0123456789-must-never-show"
DIM = 16  # the corpus vectors' size in the collections made here
ENCODER = "pipeline.evaluate.examples:hashed_words"  # HASHED_DIMENSION-d vectors


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _release(tmp_path_factory.mktemp("hostile-retrieval"))


@pytest.fixture(scope="module")
def eval_surveys(release: Path) -> list[str]:
    return sorted(
        pl.read_parquet(release / "eval_survey_reading_lists.parquet")["survey_id"].unique()
    )


def _collection(folder: Path, release: Path, name: str = "papers", size: int = DIM) -> Path:
    """A local-mode collection of the corpus's documents, random ``size``-d vectors."""
    from qdrant_client import QdrantClient, models

    ids = pl.read_parquet(release / beir_file("corpus", "eval"))["_id"].to_list()
    vectors = np.random.default_rng(5).standard_normal((len(ids), size))
    client = QdrantClient(path=str(folder))
    try:
        params = models.VectorParams(size=size, distance=models.Distance.COSINE)
        client.create_collection(name, vectors_config=params)
        client.upload_collection(name, vectors=vectors.tolist(), payload=[{"_id": d} for d in ids],
                                 ids=list(range(len(ids))))  # fmt: skip
    finally:
        client.close()
    return folder


@pytest.fixture(scope="module")
def store(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _collection(tmp_path_factory.mktemp("store") / "qdrant", release)


def _evaluate(release: Path, out: Path, **kwargs: Any) -> dict[str, Any]:
    return api.evaluate(
        release, out=out, mode="retrieval", top_k=20, config=CONFIG, learned=False, cache=False,
        collection="papers", **kwargs,
    ).results  # fmt: skip


def _refusal(release: Path, out: Path, **kwargs: Any) -> str:
    """The one line a refused evaluation prints (what ``python -m pipeline`` logs, exit 2)."""
    with pytest.raises(PipelineError) as caught:
        _evaluate(release, out, **kwargs)
    message = user_message(caught.value)
    assert message is not None and "\n" not in message
    return message


def _good_vectors(ids: list[str], size: int = DIM) -> list[list[float]]:
    return np.random.default_rng(8).standard_normal((len(ids), size)).tolist()


# ------------------------------------------------------------ 1: the key never shows
class QdrantEcho(LoopbackStub):
    """Enough of Qdrant's REST API for qdrant-client to reach a collection ``papers`` of
    :data:`HASHED_DIMENSION`-d vectors; a search is ``refused`` with a body that quotes the
    request's ``api-key`` header (as a misconfigured proxy does), or answered with a body
    that is not Qdrant's and quotes it too."""

    def __init__(self, answer: str) -> None:
        self.keys_seen: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, obj: Any) -> None:
                status, headers, body = stub._json(obj, status)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                stub.keys_seen.append(self.headers.get("api-key") or "")
                if self.path == "/":
                    return self._answer(200, {"title": "qdrant", "version": "1.20.0"})
                if self.path == "/collections/papers/exists":
                    return self._answer(200, {"result": {"exists": True}, "status": "ok"})
                if self.path == "/collections/papers":
                    return self._answer(200, {"result": _collection_info(HASHED_DIMENSION),
                                              "status": "ok"})  # fmt: skip
                return self._answer(404, {"status": {"error": "not found"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers.get("api-key") or ""
                stub.keys_seen.append(key)
                if answer == "refused":
                    self._answer(403, {"status": {"error": f"refused request with api-key {key}"}})
                else:  # 200 with what no client can parse, the key in it
                    self._answer(200, {"result": [{"points": f"api-key {key}"}]})

        self.url = self._serve(Handler)


def _collection_info(size: int) -> dict[str, Any]:
    return {
        "status": "green", "optimizer_status": "ok", "segments_count": 1, "payload_schema": {},
        "config": {
            "params": {"vectors": {"size": size, "distance": "Cosine"}},
            "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
            "optimizer_config": {"default_segment_number": 0, "flush_interval_sec": 5},
        },
    }  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("refused", "HTTP 403 to the queries of collection papers (refused request with api-key <redacted>)"),
        ("garbage", "the answer to the queries of collection papers is not Qdrant's API"),
    ],
    ids=["refused", "garbage"],
)  # fmt: skip
@pytest.mark.parametrize("verbose", [[], ["-v"]], ids=["plain", "verbose"])
def test_a_qdrant_server_quoting_the_api_key_never_shows_it(
    release: Path, tmp_path: Path, verbose: list[str], answer: str, says: str
) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "QDRANT_API_KEY": SECRET, "NO_PROXY": "*", "no_proxy": "*"}
    with QdrantEcho(answer) as server:
        argv = [sys.executable, "-m", "pipeline", *verbose, "evaluate", "--release", str(release),
                "--mode", "retrieval", "--qdrant", server.url, "--collection", "papers",
                "--encoder", ENCODER, "--no-learned", "--no-cache", "--out", str(out)]  # fmt: skip
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert SECRET in server.keys_seen  # the key went to the server, which quoted it back
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, proc.stderr
    assert says in errors[0], errors[0]
    assert "unexpected" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    if verbose:
        assert "Traceback" in proc.stderr
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path


def test_redaction_knows_every_configured_secret_and_credential_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipeline.corpus.openalex import KEY_ENV
    from pipeline.evaluate.retrieval.qdrant_index import API_KEY_ENV
    from pipeline.rules.redact import SECRET_ENV, redact, scrub

    for name in (KEY_ENV, API_KEY_ENV, "TURSO_AUTH_TOKEN", "TURSO_DB_TOKEN", "HF_TOKEN"):
        assert name in SECRET_ENV
        monkeypatch.setenv(name, f"value-of-{name.lower()}-42")
        assert (
            redact(f"the server said value-of-{name.lower()}-42.") == "the server said <redacted>."
        )
    said = (
        "GET https://api.openalex.org/works?filter=doi:x&api_key=k3y&per-page=50 failed; "
        'headers {"api-key": "abc"}; libsql://db.turso.io?authToken=eyJ.a.b; '
        "https://user:pa55@qdrant.example:6333/collections"
    )
    assert scrub(said) == (
        "GET https://api.openalex.org/works?filter=doi:x&api_key=<redacted>&per-page=50 failed; "
        'headers {"api-key": "<redacted>"}; libsql://db.turso.io?authToken=<redacted>; '
        "https://<redacted>@qdrant.example:6333/collections"
    )
    assert scrub(scrub(said)) == scrub(said)
    assert scrub("OPENALEX_API_KEY is not set; 3 tokens: fine") == (
        "OPENALEX_API_KEY is not set; 3 tokens: fine"
    )


def test_a_failed_inputs_record_holds_no_secret_its_reader_was_told(
    tmp_path: Path, sample_lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's refusal quoted in a failed input's reason (the Hub's ``Bearer hf_...``, a
    URL with ``api_key=``) is redacted in the failure record the run writes."""
    from pipeline.corpus.sources import InputReadError

    monkeypatch.setenv("HF_TOKEN", SECRET)
    said = f"HfHubHTTPError: 401 for Bearer {SECRET} at https://h.example/x?api_key=k3y-2"

    def refused(f: Any, *args: Any, **kwargs: Any) -> Any:
        raise InputReadError(f.path, said, 0)
        yield  # a generator, as the reader is

    monkeypatch.setattr("pipeline.stages.extract.driver.iter_lines", refused)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_bytes(sample_lines[0] + b"\n")
    out = tmp_path / "out"
    api.extract([corpus], out, workers=1, max_failed_files="100%")
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"HfHubHTTPError: 401 for Bearer <redacted>" in written  # the record is there
    assert SECRET.encode() not in written and b"k3y-2" not in written


# ------------------------------------------------- 4, 5: the --query-vectors file
def _frame(ids: list[Any], vectors: list[Any]) -> pl.DataFrame:
    return pl.DataFrame({"_id": ids, "vector": vectors})


def _damaged(frame: pl.DataFrame) -> bytes:
    """``frame`` as zstd Parquet whose footer reads and whose first pages do not."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd")
    data = bytearray(buffer.getvalue())
    for i in range(8, 200):
        data[i] ^= 0x5A
    return bytes(data)


def _case_says(ids: list[str]) -> dict[str, tuple[Any, list[str]]]:
    """Each case: the file (a frame, or raw bytes) and what its one line must say."""
    first, last, n = repr(ids[0]), repr(ids[-1]), len(ids)
    good = _good_vectors(ids)
    return {
        "other dimension": (
            _frame(ids, _good_vectors(ids, 8)),
            ["--collection papers", f"size {DIM}", "size 8", "queries.parquet"],
        ),
        "NaN": (
            _frame(ids, [[float("nan")] * DIM, *good[1:]]),
            ["queries.parquet", f"survey {first} (row 1)", "NaN"],
        ),
        "inf": (
            _frame(ids, [*good[:-1], [1.0] * (DIM - 1) + [float("inf")]]),
            ["queries.parquet", f"survey {last} (row {n})", "an infinite value"],
        ),
        "strings": (
            _frame(ids, [[str(x) for x in v] for v in good]),
            ["queries.parquet", "column vector holds List(String)", "list of numbers"],
        ),
        "not parquet": (
            b'{"_id": "x", "vector": [1, 2]}\n',
            ["queries.parquet", "not a readable Parquet file"],
        ),
        "empty file": (b"", ["queries.parquet", "the file is empty"]),
        "damaged pages": (
            _damaged(_frame(ids, good)),
            ["queries.parquet", "not a readable Parquet file"],
        ),
        "no rows": (
            pl.DataFrame(schema={"_id": pl.String, "vector": pl.List(pl.Float64)}),
            ["queries.parquet", "no rows"],
        ),
        "no eval survey": (
            _frame([f"other:{i}" for i in range(n)], good),
            ["queries.parquet", f"none of its {n} id(s) is an eval survey", "'other:0'", first],
        ),
        "integer ids": (
            _frame(list(range(n)), good),
            ["queries.parquet", "column _id holds Int64", f"strings such as {first}"],
        ),
        "null vector": (
            _frame(ids, [None, *good[1:]]),
            ["queries.parquet", f"survey {first} (row 1)", "no vector (null)"],
        ),
        "null value": (
            _frame(ids, [[None, *[1.0] * (DIM - 1)], *good[1:]]),
            ["queries.parquet", f"survey {first} (row 1)", "null values"],
        ),
        "two sizes": (
            _frame(ids, [*good[:-1], [1.0] * (DIM + 1)]),
            ["queries.parquet", f"survey {last}", f"size {DIM + 1}", f"size {DIM}"],
        ),
        "a survey twice": (
            _frame([ids[0], *ids], [good[0], *good]),
            ["queries.parquet", f"survey {first}", "more than one vector"],
        ),
    }


QUERY_CASES = list(_case_says(["s"]))


@pytest.mark.parametrize("case", QUERY_CASES)
def test_a_broken_query_vectors_file_is_one_line_naming_it(
    release: Path, store: Path, eval_surveys: list[str], tmp_path: Path, case: str
) -> None:
    contents, says = _case_says(eval_surveys)[case]
    path = tmp_path / "queries.parquet"
    if isinstance(contents, bytes):
        path.write_bytes(contents)
    else:
        contents.write_parquet(path)
    message = _refusal(release, tmp_path / "out", qdrant=str(store), query_vectors=path)
    for text in says:
        assert text in message, (case, text, message)


def test_query_vectors_of_other_splits_are_counted_and_the_rest_evaluated(
    release: Path, store: Path, eval_surveys: list[str], tmp_path: Path
) -> None:
    ids = [*eval_surveys, "train:1", "train:2"]
    path = tmp_path / "queries.parquet"
    _frame(ids, _good_vectors(ids)).write_parquet(path)
    results = _evaluate(release, tmp_path / "out", qdrant=str(store), query_vectors=path)
    facts = results["models"]["papers"]
    assert facts["query_vectors_not_in_eval"] == 2
    assert facts["points_returned"] == 20 * len(eval_surveys)


# ------------------------------------------------------------ 4, 6: the local folder
def _listing(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


META_CASES = {
    "empty folder": (None, "not a qdrant-client local-mode folder (no meta.json)"),
    "a user's folder": ({"notes.txt": b"my notes\n"}, "no meta.json"),
    "garbage meta.json": ({"meta.json": b"\x00\xffgarbage{"}, "meta.json is not JSON"),
    "meta.json a list": ({"meta.json": b"[]"}, "meta.json is not qdrant-client's"),
    "collections a list": (
        {"meta.json": b'{"collections": [], "aliases": {}}'},
        "meta.json is not qdrant-client's",
    ),
    "no aliases": ({"meta.json": b'{"collections": {}}'}, "meta.json is not qdrant-client's"),
    "a config the client cannot load": (
        {"meta.json": b'{"collections": {"papers": {"vectors": {"size": "big"}}}, "aliases": {}}'},
        "cannot open it (ValidationError: vectors.VectorParams.size: Input should be a valid",
    ),
}


@pytest.mark.parametrize("case", list(META_CASES))
def test_a_folder_that_is_not_a_local_store_is_refused_and_left_as_it_was(
    release: Path, tmp_path: Path, case: str
) -> None:
    files, says = META_CASES[case]
    folder = tmp_path / "folder"
    folder.mkdir()
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
    before = _listing(folder)
    message = _refusal(release, tmp_path / "out", qdrant=str(folder), encoders=[ENCODER])
    assert message.startswith(f"--qdrant {folder}: ") and says in message, message
    assert _listing(folder) == before
    assert sorted(os.listdir(folder)) == sorted(files or {})


def test_a_local_store_another_client_holds_is_one_line_naming_it(
    release: Path, store: Path, tmp_path: Path
) -> None:
    from qdrant_client import QdrantClient

    holder = QdrantClient(path=str(store))  # the user's notebook, still open
    try:
        message = _refusal(release, tmp_path / "out", qdrant=str(store), encoders=[ENCODER])
    finally:
        holder.close()
    assert message.startswith(f"--qdrant {store}: qdrant-client cannot open it (RuntimeError: ")
    assert "already accessed by another instance" in message


# ------------------------------------------------------ 4: the collection's size
def test_a_collection_of_another_size_than_the_encoder_is_one_line(
    release: Path, store: Path, tmp_path: Path
) -> None:
    message = _refusal(release, tmp_path / "out", qdrant=str(store), encoders=[ENCODER])
    assert message == (
        f"--collection papers in local folder qdrant holds vectors of size {DIM}; "
        f"--encoder hashed_words gives vectors of size {HASHED_DIMENSION}"
    )


def test_the_cli_refuses_a_query_vectors_file_with_one_line_and_exit_2(
    release: Path, store: Path, eval_surveys: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "queries.parquet"
    _frame(eval_surveys, [[float("inf")] * DIM for _ in eval_surveys]).write_parquet(path)
    argv = [sys.executable, "-m", "pipeline", "evaluate", "--release", str(release), "--mode",
            "retrieval", "--qdrant", str(store), "--collection", "papers", "--query-vectors",
            str(path), "--no-learned", "--no-cache", "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and str(path) in errors[0] and repr(eval_surveys[0]) in errors[0]
    assert "infinite" in errors[0]
