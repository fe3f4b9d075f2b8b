"""A cheap deterministic encoder for benchmarks (not a model): feature hashing of a text's
words into :data:`DIM` signed buckets, float32 like a sentence-transformers model's output.

Each lower-cased word (split on spaces) adds +1 or -1 to one bucket, both taken from its
64-bit Polars hash; a text's vector is the sum. It costs a few microseconds a text, so a
benchmark of ``evaluate --passages --mode retrieval`` measures the evaluator, not a model,
at a realistic vector size. Used as ``--encoder bench.hashed_encoder:encode`` from the
repository root (or ``hashed_encoder:encode`` with this file in the current directory).
"""

from __future__ import annotations

import numpy as np
import polars as pl

DIM = 384  # all-MiniLM-L6-v2's size


def encode(texts: list[str]) -> np.ndarray:
    """One float32 vector of :data:`DIM` per text."""
    words = pl.Series(texts, dtype=pl.String).str.to_lowercase().str.split(" ")
    lengths = words.list.len().to_numpy()
    hashes = words.explode().fill_null("").hash(seed=0).to_numpy()
    rows = np.repeat(np.arange(len(texts)), lengths)
    cells = rows * DIM + (hashes % np.uint64(DIM)).astype(np.int64)
    signs = np.where((hashes >> np.uint64(32)) & np.uint64(1), 1.0, -1.0)
    counts = np.bincount(cells, weights=signs, minlength=len(texts) * DIM)
    return counts.reshape(len(texts), DIM).astype(np.float32)
