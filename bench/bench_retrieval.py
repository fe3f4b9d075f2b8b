"""Benchmark: retrieval mode's search over a corpus the size of the full eval corpus.

Encode-free: the vectors are drawn, not encoded (fixed dimension, default 384 as
all-MiniLM-L6-v2's; clustered Gaussian directions, so that neighbours exist and an ANN
index has something to find; a seeded generator per chunk, so the same sizes give the same
vectors). The corpus size is the eval split's corpus (``corpus/test.parquet``) of the
2.3M-paper synthetic corpus: ``bench/results/scale.json`` has it at the sizes
``make bench-scale`` measured, and when 2.3M is not among them it is projected along the
power law through the two largest (an estimate, said so in the output); the same for the
number of eval surveys (``queries/test.parquet``).

Each search runs in a child process (``bench/measure.py``: wall time, CPU time, peak RSS):

* ``exact``: :func:`pipeline.evaluate.retrieval.exact.exact_top_k`, the top 100 of every survey;
* ``faiss``: :func:`pipeline.evaluate.retrieval.faiss_index.build_index` (HNSW, one thread) then
  :func:`pipeline.evaluate.retrieval.faiss_index.ann_top_k`, the build and the search timed apart.

Then the ANN top 100's recall against the exact top 100 (:func:`recall_against`). Prints
the figures, writes ``bench/results/retrieval.json``. Not a test.

Usage::

    .venv/bin/python bench/bench_retrieval.py [--docs N] [--queries N] [--dim 384]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from bench import results  # noqa: E402
from bench.measure import run_measured  # noqa: E402
from pipeline.evaluate.retrieval.exact import DocOrder, exact_top_k  # noqa: E402
from pipeline.evaluate.retrieval.faiss_index import ann_top_k, build_index, recall_against  # noqa: E402

FULL_PAPERS = 2_300_000
CLUSTERS = 2_000
NOISE = 0.8  # a vector = its cluster's centre + NOISE x a Gaussian, then unit length
CHUNK = 65_536  # vectors drawn and written at a time
K = 100


def projected(output: str, papers: int = FULL_PAPERS) -> tuple[int, bool]:
    """Rows of release output ``output`` at ``papers`` papers: measured by bench-scale, or
    projected along the power law through its two largest sizes (True: an estimate)."""
    record = results.read("scale")
    sizes = sorted(
        (run["papers"], run["outputs"][output])
        for run in record["figures"]["stages"]["release"]
        if output in run.get("outputs", {})
    )
    measured = dict(sizes)
    if papers in measured:
        return measured[papers], False
    (n1, r1), (n2, r2) = sizes[-2], sizes[-1]
    exponent = math.log(r2 / r1) / math.log(n2 / n1)
    return round(r2 * (papers / n2) ** exponent), True


def _centres(dim: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((CLUSTERS, dim)).astype(np.float32)


def _draw(rows: int, dim: int, seed: int, centres: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = centres[rng.integers(0, CLUSTERS, rows)] + NOISE * rng.standard_normal(
        (rows, dim), dtype=np.float32
    )
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def write_vectors(path: Path, rows: int, dim: int, seed: int) -> None:
    """``rows`` x ``dim`` float32 vectors as one ``.npy``, drawn and written a chunk at a time."""
    centres = _centres(dim)
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for number, start in enumerate(range(0, rows, CHUNK)):
            f.write(
                _draw(min(CHUNK, rows - start), dim, seed * 1_000_003 + number, centres).tobytes()
            )


def doc_ids(rows: int) -> pl.Series:
    return pl.Series("_id", [f"doc:{i:08d}" for i in range(rows)])


def child(mode: str, folder: Path, docs: int) -> None:
    """One measured search: the top ``K`` of every query, written to ``<mode>.parquet``."""
    queries = np.load(folder / "queries.npy")
    query_ids = [f"S{i:06d}" for i in range(len(queries))]
    order = DocOrder.of(doc_ids(docs))
    vectors = folder / "vectors.npy"
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if mode == "exact":
        found = exact_top_k(queries, query_ids, vectors, order, K)
        timings["search_s"] = time.perf_counter() - start
    else:
        index, _ = build_index(vectors)
        timings["build_s"] = time.perf_counter() - start
        start = time.perf_counter()
        found = ann_top_k(index, queries, query_ids, order, K)
        timings["search_s"] = time.perf_counter() - start
    found.write_parquet(folder / f"{mode}.parquet")
    (folder / f"{mode}.json").write_text(json.dumps(timings))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, help="corpus size (default: the 2.3M eval corpus)")
    parser.add_argument("--queries", type=int, help="surveys (default: the 2.3M eval surveys)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--child", choices=("exact", "faiss"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.dir, args.docs)
        return 0
    docs, docs_estimated = (args.docs, False) if args.docs else projected("corpus/test.parquet")
    queries, queries_estimated = (
        (args.queries, False) if args.queries else projected("queries/test.parquet")
    )
    print(f"corpus {docs:,} documents{' (projected from bench-scale)' if docs_estimated else ''}, "
          f"{queries:,} surveys{' (projected)' if queries_estimated else ''}, {args.dim}-d")  # fmt: skip
    figures: dict[str, object] = {
        "documents": docs, "documents_projected": docs_estimated, "queries": queries,
        "queries_projected": queries_estimated, "dimension": args.dim, "k": K,
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as scratch:
        folder = Path(scratch)
        write_vectors(folder / "vectors.npy", docs, args.dim, seed=1)
        np.save(folder / "queries.npy", _draw(queries, args.dim, 2, _centres(args.dim)))
        figures["vectors_mb"] = round((folder / "vectors.npy").stat().st_size / 2**20, 1)
        for mode in ("exact", "faiss"):
            argv = ["--child", mode, "--dir", str(folder), "--docs", str(docs)]
            measured = run_measured(str(Path(__file__).resolve()), argv)
            if measured.returncode != 0:
                raise SystemExit(
                    f"bench-retrieval: the {mode} child failed ({measured.returncode})"
                )
            timings = json.loads((folder / f"{mode}.json").read_text())
            figures[mode] = {**{k: round(v, 2) for k, v in timings.items()},
                             "wall_s": round(measured.seconds, 2),
                             "cpu_s": round(measured.cpu_seconds or 0.0, 2),
                             "peak_rss_mb": round(measured.peak_rss_mb, 1)}  # fmt: skip
            print(f"{mode}: {figures[mode]}")
        exact = pl.read_parquet(folder / "exact.parquet")
        approximate = pl.read_parquet(folder / "faiss.parquet")
        figures["faiss_recall_at_100"] = round(recall_against(approximate, exact), 5)
    print(f"faiss recall@{K} against exact: {figures['faiss_recall_at_100']}")
    results.write("retrieval", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
