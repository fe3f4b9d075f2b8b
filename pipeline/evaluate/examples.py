"""Example models for ``evaluate --encoder`` and ``--scorer``, with no dependency.

``make eval`` evaluates :func:`hashed_words` as a submitted encoder, and the tests use
both; they show the shape of what a user's code gives:

* an encoder takes a list of texts and returns one vector per text;
* a scorer takes a query text and a list of candidate texts and returns one score each.

Neither reads anything but the texts, so both are reading systems.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

HASHED_DIMENSION = 256
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def hashed_words(texts: list[str]) -> np.ndarray:
    """Bag of words hashed into :data:`HASHED_DIMENSION` signed buckets, log counts.

    Every word goes to a bucket and a sign chosen by BLAKE2b of the word, so the vectors
    are the same on every machine; an empty text is the zero vector.
    """
    out = np.zeros((len(texts), HASHED_DIMENSION), dtype=np.float64)
    for row, text in enumerate(texts):
        for word in _words(text):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            out[row, value % HASHED_DIMENSION] += 1.0 if (value >> 32) & 1 else -1.0
    return np.sign(out) * np.log1p(np.abs(out))


def word_overlap(query: str, texts: list[str]) -> list[float]:
    """Share of a candidate's distinct words that the query has (0 for an empty text)."""
    query_words = set(_words(query))
    scores = []
    for text in texts:
        words = set(_words(text))
        scores.append(len(words & query_words) / len(words) if words else 0.0)
    return scores
