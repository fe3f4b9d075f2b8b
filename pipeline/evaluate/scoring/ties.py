"""The tie-breaking rule of the ranking, and its tie keys.

Ranking rule (ties are deterministic and neutral): within a survey, candidates are
ordered by score descending; equal scores are ordered by the tie key
:func:`tie_key` of (survey_id, candidate_id) ascending, then by candidate_id
ascending (only reached if two tie keys are equal); judged candidates that a run
does not score (score null) come after every scored candidate, ordered among
themselves by the same two keys. The tie key is a pseudo-random permutation of a
survey's candidates that carries no information from the form of the ids (labels
correlate with the id type ``arxiv:`` / ``doi:`` / ``openalex:``, so ordering ties by
the id itself would not be neutral), and it is the same on every machine, Python
and Polars version and run (BLAKE2b and fixed 64-bit arithmetic; neither Python's
``hash()`` nor Polars' ``.hash()``). ``hard_negative_auc`` compares scores, not
ranks, so equal scores (and unscored candidates among themselves) count as half a
correctly ordered pair.

trec_eval orders equal scores by docid descending, and reads scores as 32-bit floats
(0.3 and 0.3 + 1e-9 are a tie to it), so values agree with trec_eval / pytrec_eval /
ir_measures for runs without ties in single precision (within a survey) only.

Tie keys are computed only for the rows that share their survey and score with
another row: one BLAKE2b digest in Python per distinct id among them, combined in
Polars with wrapping UInt64 arithmetic.
"""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID

TIE_BREAKING = (
    "Within a survey, candidates are ranked by score descending. Equal scores are ordered by a "
    "tie key, a fixed pseudo-random function of (survey_id, candidate_id), ascending, then by "
    "candidate_id ascending (reached only if two tie keys are equal); so a tie carries no "
    "information from the ids (such as their arxiv:/doi:/openalex: prefix) and is broken the "
    "same way on every machine, version and run. tie_key = splitmix64(h(survey_id) XOR "
    "h(candidate_id)), where h(x) is the 8-byte BLAKE2b digest of the UTF-8 bytes of x read as a "
    "little-endian unsigned 64-bit integer and splitmix64(z) is z ^= z >> 30; z *= "
    "0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31 (modulo 2^64). "
    "Judged candidates missing from a run are ranked after all scored candidates, among "
    "themselves by the same tie key. trec_eval orders equal scores by docid descending, so "
    "agreement with trec_eval/pytrec_eval holds for runs without ties. hard_negative_auc "
    "compares scores, not ranks: a (positive, hard negative) pair with equal scores, or with "
    "both candidates missing from the run, counts 0.5."
)


TIE_KEY = "_tie_key"  # the column :func:`with_tie_keys` adds
_TIED = "_tied"
_SURVEY_HASH = "_survey_hash"
_CANDIDATE_HASH = "_candidate_hash"

# splitmix64 finaliser constants (Steele, Lea and Flood 2014; Vigna's splitmix64.c)
_MASK64 = (1 << 64) - 1
_MIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
_MIX_SHIFTS = (30, 27, 31)


def id_hash64(value: str) -> int:
    """h(value): the 8-byte BLAKE2b digest of the UTF-8 bytes of ``value``, little-endian."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def splitmix64(z: int) -> int:
    """The splitmix64 finaliser of a 64-bit unsigned integer (arithmetic modulo 2**64)."""
    (m1, m2), (s1, s2, s3) = _MIX_MULTIPLIERS, _MIX_SHIFTS
    z ^= z >> s1
    z = (z * m1) & _MASK64
    z ^= z >> s2
    z = (z * m2) & _MASK64
    return z ^ (z >> s3)


def tie_key(survey_id: str, candidate_id: str) -> int:
    """The tie key of a (survey, candidate) pair: splitmix64(h(survey_id) XOR h(candidate_id)).

    Equal scores within a survey are ordered by this key ascending (then by
    candidate_id). It depends on the two ids only, through BLAKE2b and fixed 64-bit
    arithmetic, so it is the same on every machine, Python and Polars version and
    run. This is the scalar reference; ranking uses the vectorised :func:`tie_keys`.
    """
    return splitmix64(id_hash64(survey_id) ^ id_hash64(candidate_id))


def id_hashes(ids: list[str]) -> np.ndarray:
    """h(id) (:func:`id_hash64`) of every id, as a uint64 array in their order."""
    blake2b = hashlib.blake2b
    digests = b"".join([blake2b(v.encode("utf-8"), digest_size=8).digest() for v in ids])
    # "<u8": the 8 digest bytes read as a little-endian uint64 on any machine, as id_hash64
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def splitmix64_array(z: np.ndarray) -> np.ndarray:
    """:func:`splitmix64` of a uint64 array (numpy's uint64 arithmetic wraps modulo 2**64)."""
    (m1, m2), (s1, s2, s3) = _MIX_MULTIPLIERS, _MIX_SHIFTS
    z = z.astype(np.uint64, copy=True)
    z ^= z >> np.uint64(s1)
    z *= np.uint64(m1)
    z ^= z >> np.uint64(s2)
    z *= np.uint64(m2)
    return z ^ (z >> np.uint64(s3))


def _hash_ids(ids: pl.Series, column: str) -> pl.DataFrame:
    """``ids`` (distinct strings) with h(id) (see :func:`id_hash64`) as UInt64 column ``column``."""
    hashes = id_hashes(ids.to_list())
    return pl.DataFrame({ids.name: ids, column: pl.Series(hashes, dtype=pl.UInt64)})


def _splitmix64_expr(z: pl.Expr) -> pl.Expr:
    """:func:`splitmix64` on a UInt64 expression (Polars UInt64 arithmetic wraps)."""
    (m1, m2), (s1, s2, s3) = _MIX_MULTIPLIERS, _MIX_SHIFTS

    def shifted(x: pl.Expr, bits: int) -> pl.Expr:  # logical right shift
        return x // pl.lit(1 << bits, dtype=pl.UInt64)

    z = (z ^ shifted(z, s1)) * pl.lit(m1, dtype=pl.UInt64)
    z = (z ^ shifted(z, s2)) * pl.lit(m2, dtype=pl.UInt64)
    return z ^ shifted(z, s3)


def _unique(frame: pl.DataFrame, column: str) -> pl.Series:
    # the lazy engine's unique ran about twice as fast as Series.unique in bench/bench_eval.py
    return frame.lazy().select(pl.col(column).unique()).collect().to_series()


def _add_tie_keys(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (with ``survey_id``, ``candidate_id``) plus ``_tie_key``; row order NOT kept.

    One BLAKE2b digest in Python per distinct survey id and per distinct candidate
    id, joined onto the rows and mixed with wrapping UInt64 arithmetic in Polars.
    """
    surveys = _hash_ids(_unique(frame, SURVEY_ID), _SURVEY_HASH)
    candidates = _hash_ids(_unique(frame, CANDIDATE_ID), _CANDIDATE_HASH)
    return (
        frame.lazy()
        # no maintain_order: the ranking sorts by its keys anyway, and keeping the
        # order doubled the cost of the candidate join
        .join(surveys.lazy(), on=SURVEY_ID, how="left")
        .join(candidates.lazy(), on=CANDIDATE_ID, how="left")
        .with_columns(
            _splitmix64_expr(pl.col(_SURVEY_HASH) ^ pl.col(_CANDIDATE_HASH)).alias(TIE_KEY)
        )
        .drop(_SURVEY_HASH, _CANDIDATE_HASH)
        .collect()
    )


def tie_keys(pairs: pl.DataFrame) -> pl.Series:
    """:func:`tie_key` of every (``survey_id``, ``candidate_id``) row of ``pairs``, in row order.

    The vectorised computation the ranking uses, as a UInt64 Series.
    """
    row = "_row"
    return (
        _add_tie_keys(pairs.select(SURVEY_ID, CANDIDATE_ID).with_row_index(row))
        .sort(row)[TIE_KEY]
        .rename("tie_key")
    )


def with_tie_keys(frame: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """``frame`` with a ``_tie_key`` column, and whether any score is tied within a survey.

    The key only matters between rows of equal score in the same survey, so it is
    computed for those rows alone (0 elsewhere): a run without ties pays for one
    duplicate check. Row order is not kept.
    """
    tied = pl.col(SCORE).is_duplicated().over(SURVEY_ID)
    flagged = frame.with_columns(tied.alias(_TIED))
    if not flagged[_TIED].any():
        return frame.with_columns(pl.lit(0, dtype=pl.UInt64).alias(TIE_KEY)), False
    ties = _add_tie_keys(flagged.filter(pl.col(_TIED)))
    rest = flagged.filter(~pl.col(_TIED)).with_columns(pl.lit(0, dtype=pl.UInt64).alias(TIE_KEY))
    return pl.concat([ties, rest]).drop(_TIED), True
