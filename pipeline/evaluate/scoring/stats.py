"""Bootstrap confidence intervals and paired significance tests over surveys.

Inputs are matrices with one row per survey and one column per (system, metric);
NaN marks a survey excluded from that metric. Everything is vectorised with
numpy: a block of bootstrap resamples is a matrix of resample counts W
(resamples x surveys), and the resampled means of every column are
``(W @ values) / (W @ defined)`` in one product.

Randomness comes from ``numpy.random.default_rng([seed, crc32(key)])`` where the
key names what is resampled (e.g. the subset), so results are reproducible and
do not change when another system is added.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

CI_LEVEL = 0.95
_BLOCK = 128  # resamples per matrix product; fixed so results do not depend on memory


def rng_for(seed: int, *key: str) -> np.random.Generator:
    """A generator seeded from ``seed`` and a stable hash of ``key``."""
    return np.random.default_rng([seed, zlib.crc32("\x1f".join(key).encode("utf-8"))])


def _resample_counts(rng: np.random.Generator, n_resamples: int, n: int) -> np.ndarray:
    """How often each of n units is drawn in each of ``n_resamples`` bootstrap resamples."""
    draws = rng.integers(0, n, size=(n_resamples, n))
    offsets = (np.arange(n_resamples) * n)[:, None]
    return (
        np.bincount((draws + offsets).ravel(), minlength=n_resamples * n)
        .reshape(n_resamples, n)
        .astype(np.float64)
    )


def _percentile_interval(resampled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column, ignoring NaN resamples; NaN when a column has none."""
    tail = (1.0 - CI_LEVEL) / 2.0 * 100.0
    low = np.full(resampled.shape[1], np.nan)
    high = np.full(resampled.shape[1], np.nan)
    usable = ~np.all(np.isnan(resampled), axis=0)
    if usable.any():
        low[usable], high[usable] = np.nanpercentile(
            resampled[:, usable], [tail, 100.0 - tail], axis=0
        )
    return low, high


@dataclass(frozen=True)
class Summary:
    """Per-column mean, 95% bootstrap interval and number of surveys used (NaN mean when n = 0)."""

    mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    n: np.ndarray


def _defined_mean(
    values: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per column over the rows where it is defined: (defined mask, values with NaN as 0,
    count, mean); the mean is NaN for a column defined nowhere."""
    defined = ~np.isnan(values)
    filled = np.where(defined, values, 0.0)
    n = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(axis=0) / n
    return defined, filled, n, mean


def bootstrap_means(values: np.ndarray, n_resamples: int, rng: np.random.Generator) -> Summary:
    """Macro-average of each column with a 95% percentile bootstrap interval over surveys.

    Surveys (rows) are resampled with replacement; a resample's mean of a column is
    over the resampled surveys where that column is defined (not NaN).

    Args:
        values: surveys x columns, NaN where a survey is excluded.
        n_resamples: bootstrap resamples (0 gives NaN intervals).
        rng: the generator (see :func:`rng_for`).
    """
    values = np.asarray(values, dtype=np.float64)
    n_surveys, n_columns = values.shape
    defined, filled, n, mean = _defined_mean(values)
    if n_surveys == 0 or n_resamples <= 0:
        nan = np.full(n_columns, np.nan)
        return Summary(mean, nan, nan.copy(), n)
    resampled = np.empty((n_resamples, n_columns))
    defined_f = defined.astype(np.float64)
    for start in range(0, n_resamples, _BLOCK):
        counts = _resample_counts(rng, min(_BLOCK, n_resamples - start), n_surveys)
        with np.errstate(invalid="ignore", divide="ignore"):
            resampled[start : start + counts.shape[0]] = (counts @ filled) / (counts @ defined_f)
    low, high = _percentile_interval(resampled)
    return Summary(mean, low, high, n)


@dataclass(frozen=True)
class PairedTest:
    """Per-column paired comparison of a system against a baseline.

    Attributes:
        diff: mean over surveys of (system - baseline), surveys where both are defined.
        p_value: two-sided p-value of a paired randomisation (sign-flip) test.
        ci_low: lower end of the 95% paired bootstrap interval of ``diff``.
        ci_high: upper end of that interval.
        n: surveys used.
    """

    diff: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    n: np.ndarray


def paired_test(
    system: np.ndarray, baseline: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> PairedTest:
    """Paired randomisation test and bootstrap interval of the mean difference, per column.

    Under the null hypothesis the two systems are exchangeable on each survey, so
    each survey's difference keeps or flips its sign with probability 1/2. The
    p-value is (1 + #{resamples with |mean flipped diff| >= |observed diff|}) /
    (1 + n_resamples). The interval resamples surveys with replacement.

    Args:
        system: surveys x metrics, NaN where excluded.
        baseline: same shape and survey order as ``system``.
        n_resamples: sign-flip and bootstrap resamples each.
        rng: the generator (see :func:`rng_for`).

    Raises:
        ValueError: the two matrices differ in shape.
    """
    system = np.asarray(system, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    if system.shape != baseline.shape:
        raise ValueError(f"paired test needs equal shapes, got {system.shape} and {baseline.shape}")
    diffs = system - baseline  # NaN where either is excluded
    n_surveys, n_columns = diffs.shape
    defined, filled, n, observed = _defined_mean(diffs)
    if n_surveys == 0 or n_resamples <= 0:
        nan = np.full(n_columns, np.nan)
        return PairedTest(observed, nan, nan.copy(), nan.copy(), n)
    # Sums of +-d: a tolerance keeps "as extreme" robust to rounding in the product.
    threshold = np.abs(filled.sum(axis=0)) - 1e-9
    as_extreme = np.zeros(n_columns)
    for start in range(0, n_resamples, _BLOCK):
        block = min(_BLOCK, n_resamples - start)
        signs = rng.integers(0, 2, size=(block, n_surveys)) * 2.0 - 1.0
        as_extreme += (np.abs(signs @ filled) >= threshold).sum(axis=0)
    p_value = np.where(n > 0, (1.0 + as_extreme) / (1.0 + n_resamples), np.nan)
    resampled = np.empty((n_resamples, n_columns))
    defined_f = defined.astype(np.float64)
    for start in range(0, n_resamples, _BLOCK):
        counts = _resample_counts(rng, min(_BLOCK, n_resamples - start), n_surveys)
        with np.errstate(invalid="ignore", divide="ignore"):
            resampled[start : start + counts.shape[0]] = (counts @ filled) / (counts @ defined_f)
    low, high = _percentile_interval(resampled)
    return PairedTest(observed, p_value, low, high, n)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values of one family of tests (NaN: not a test).

    The i-th smallest of the m defined p-values becomes max over j <= i of
    min(1, (m - j + 1) * p_(j)); rejecting where the adjusted value is below alpha
    controls the family-wise error rate at alpha. The order is kept.
    """
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    defined = np.flatnonzero(~np.isnan(p))
    if defined.size == 0:
        return adjusted
    order = defined[np.argsort(p[defined], kind="stable")]
    m = order.size
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted
