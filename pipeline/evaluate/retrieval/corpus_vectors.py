"""The corpus's vectors: encoded once per model and corpus, resumable, read back in chunks.

Retrieval mode with an encoder (:mod:`pipeline.evaluate.retrieval.model_runs`) needs a vector for
every document of the split's corpus, hundreds of thousands at full scale; with ``--passages``
one for every passage of it (:mod:`pipeline.evaluate.retrieval.passage_units`, a
:class:`TextRows` like the corpus, keyed by its own sha256), kept the same way. They are kept
in the evaluation cache under ``vectors/<key>/``, where the key is the model's identity
(:func:`pipeline.evaluate.systems.models.model_identity`: its name and the sha256 of its code or
folder), the sha256 of the corpus file and the batch size (a sentence-transformers model
pads a batch to its longest text, so its vectors move in the last bits with the batch).

Encoding is resumable: each batch of ``batch_size`` texts, in the corpus file's row order,
is written to ``batches/<first row>.npy`` (atomically) as soon as the model returns it, so
a process killed part-way (``kill -9`` included) loses at most the batch it was in, and a
rerun encodes only the batches that have no file. When every batch is there, they are
joined into one ``vectors.npy`` (streamed, one batch in memory at a time) and the batch
files removed. Memory is bounded by the batch size while encoding and by the chunk size
while reading (:func:`iter_chunks` reads rows with ``numpy.fromfile``, not a memory map,
so the pages read are not kept mapped in the process).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from pipeline.core.files import atomic_path, sha256_file, sha256_text
from pipeline.core.progress import steps
from pipeline.core.release_files import view_of_eval_file
from pipeline.core.schema import BEIR_ID, BEIR_TEXT, BEIR_TITLE
from pipeline.rules.text_match import paper_text

VECTORS_DIR = "vectors"  # under the evaluation cache
VECTORS_FILE = "vectors.npy"
BATCHES_DIR = "batches"
META_FILE = "meta.json"
VECTORS_FORMAT = 1


@dataclass(frozen=True)
class Corpus:
    """The split's corpus as a model reads it.

    Attributes:
        path: the corpus Parquet file (``corpus/test.parquet`` of the release).
        ids: document ids, in the file's row order (row i of the vectors embeds ids[i]).
        sha256: the file's sha256 (part of the vectors' cache key).
    """

    path: Path
    ids: pl.Series
    sha256: str

    @property
    def rows(self) -> int:
        """Documents, one vector each."""
        return self.ids.len()

    @property
    def name(self) -> str:
        """What ``meta.json`` names as the encoded file."""
        return self.path.name

    def batches(self, batch_size: int) -> Iterator[tuple[int, list[str]]]:
        """``(first row, texts)`` of consecutive rows, ``batch_size`` at a time, in file order
        (:func:`pipeline.rules.text_match.paper_text`); one Parquet batch in memory at a time."""
        pending: list[str] = []
        start = 0
        for batch in pq.ParquetFile(self.path).iter_batches(
            batch_size=batch_size, columns=[BEIR_TITLE, BEIR_TEXT]
        ):
            frame = pl.DataFrame(pl.from_arrow(batch))
            text = paper_text(pl.col(BEIR_TITLE), pl.col(BEIR_TEXT))
            pending += frame.select(text).to_series().to_list()
            while len(pending) >= batch_size:
                yield start, pending[:batch_size]
                pending, start = pending[batch_size:], start + batch_size
        if pending:
            yield start, pending


def load_corpus(eval_path: Path, split: str = "eval") -> Corpus | None:
    """The corpus of ``split`` beside the eval file, or None when there is none (an eval
    Parquet alone, a Hub eval set without its corpus config)."""
    path = view_of_eval_file(eval_path, "corpus", split)
    if path is None:
        return None
    return Corpus(path, pl.read_parquet(path, columns=[BEIR_ID])[BEIR_ID], sha256_file(path))


class TextRows(Protocol):
    """What :func:`encode_corpus` encodes: ``rows`` texts, read back in order by
    ``batches``, whose bytes ``sha256`` names (the cache key): a :class:`Corpus`, or the
    passages of one (:class:`pipeline.evaluate.retrieval.passage_units.PassageUnits`)."""

    @property
    def rows(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    def batches(self, batch_size: int) -> Iterator[tuple[int, list[str]]]: ...


@dataclass(frozen=True)
class StoredVectors:
    """A finished ``vectors.npy``: its path, shape and what was encoded this time."""

    path: Path
    rows: int
    dimension: int
    batches_encoded: int
    batches_reused: int


def vectors_folder(cache_dir: Path, model_identity: str, corpus: TextRows, batch_size: int) -> Path:
    """``<cache>/vectors/<key>``: the key is the model, the texts' source bytes (the corpus
    file's sha256, or what :class:`TextRows` names by it) and the batch size."""
    key = sha256_text(VECTORS_FORMAT, model_identity, corpus.sha256, batch_size)
    return cache_dir / VECTORS_DIR / key


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset of an ``.npy`` file (C order, as written here)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0}.get(
            version, np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read(f)
        if fortran:
            raise ValueError(f"{path}: Fortran-ordered array, not written by this module")
        return shape, dtype, f.tell()


def iter_chunks(path: Path, chunk_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, rows)`` of a 2-d ``.npy`` file, ``chunk_rows`` rows at a time.

    Each chunk is read into its own array (``numpy.fromfile``), so the process holds one
    chunk, whatever the file's size.
    """
    (rows, dimension), dtype, offset = _npy_header(path)
    with open(path, "rb") as f:
        for start in range(0, rows, chunk_rows):
            count = min(chunk_rows, rows - start)
            f.seek(offset + start * dimension * dtype.itemsize)
            block = np.fromfile(f, dtype=dtype, count=count * dimension)
            yield start, block.reshape(count, dimension)


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(array))


def _join(batch_files: list[Path], target: Path, rows: int) -> int:
    """Stream the batch files into one ``.npy`` (atomically); returns the dimension."""
    first = np.load(batch_files[0])
    dimension, dtype = first.shape[1], first.dtype
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": (rows, dimension)}  # fmt: skip
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for path in batch_files:
            block = np.load(path)
            if block.shape[1] != dimension or block.dtype != dtype:
                raise ValueError(
                    f"{path}: vectors {block.shape[1]} x {block.dtype} after "
                    f"{dimension} x {dtype}; remove {target.parent} and rerun"
                )
            f.write(np.ascontiguousarray(block).tobytes())
    return dimension


def encode_corpus(
    encode: Callable[[list[str]], np.ndarray],
    corpus: TextRows,
    folder: Path,
    batch_size: int,
    desc: str,
) -> StoredVectors:
    """The corpus's vectors in ``folder/vectors.npy``, encoding only the batches not on disk.

    Args:
        encode: texts -> one checked vector per text (float32 or float64 rows).
        corpus: the split's corpus, or another :class:`TextRows` (its passages).
        folder: :func:`vectors_folder`.
        batch_size: texts per model call, and per batch file.
        desc: the progress bar's label.
    """
    target = folder / VECTORS_FILE
    rows = corpus.rows
    if target.is_file():
        (n, dimension), _, _ = _npy_header(target)
        if n == rows:
            return StoredVectors(target, n, dimension, 0, -(-rows // batch_size))
    batches = folder / BATCHES_DIR
    batches.mkdir(parents=True, exist_ok=True)
    starts = list(range(0, rows, batch_size))
    files = {start: batches / f"{start:012d}.npy" for start in starts}
    todo = [start for start in starts if not files[start].is_file()]
    texts = corpus.batches(batch_size)
    for start in steps(todo, desc, unit="batch"):
        first, batch = next(texts)
        while first < start:  # a batch encoded before an interruption
            first, batch = next(texts)
        _save_npy(files[start], encode(batch))
    dimension = _join([files[s] for s in starts], target, rows) if rows else 0
    meta = {"format": VECTORS_FORMAT, "corpus": corpus.name, "corpus_sha256": corpus.sha256,
            "rows": rows, "dimension": dimension, "batch_size": batch_size}  # fmt: skip
    with atomic_path(folder / META_FILE) as tmp:
        tmp.write_text(json.dumps(meta, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(batches, ignore_errors=True)
    return StoredVectors(target, rows, dimension, len(todo), len(starts) - len(todo))
