"""PRISM's coverage measure for embedding systems: the convex-hull volume (CHV) ratio.

PRISM reports next to Recall@K how much of the space of the gold set a system's top
results span. The definition here (there is no reference implementation to match, so
it is written out and fixed):

* the system's own embedding of every candidate of a survey (the vectors its scores
  come from: the ``dense`` baseline, ``--encoder``, ``--sentence-transformer``), each
  scaled to unit length;
* one fixed projection to :data:`CHV_DIMENSIONS` (3) dimensions: an orthonormal basis
  (QR of a standard-normal ``d x 3`` matrix from ``numpy.random.default_rng([CHV_SEED, d])``),
  the same for every survey and for every system of embedding size ``d``; it depends on
  nothing in the data;
* gold set G = the survey's candidates with label >= 1 (R of them); retrieved set T =
  the system's top R candidates in the ranking of the evaluation (score descending,
  the tie rule of :mod:`pipeline.evaluate.scoring.ties`);
* ``chv_ratio`` = volume(convex hull of T's projected points) / volume(convex hull of
  G's), volumes by ``scipy.spatial.ConvexHull`` (Qhull). A set with fewer than 4
  points, or flat (Qhull refuses it), has volume 0; a survey whose gold hull has
  volume 0 is excluded (null).

What it measures: whether the top of the ranking spreads over as much of the embedding
space (as the projection sees it) as the survey's reading list does; 1.0 for a ranking
whose top R is the gold set. What it does not: relevance (a spread-out set of wrong
papers can reach or exceed 1.0; read it next to R@K and nDCG, never alone), anything
lost by the 3-dimensional projection, and comparisons between systems with different
embeddings (each system's volumes are measured in its own space). It exists only for
systems that expose embeddings, not for runs or scorers.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID
from pipeline.evaluate.scoring.measures import RELEVANT_LABEL
from pipeline.evaluate.scoring.ties import TIE_KEY, with_tie_keys

CHV_RATIO = "chv_ratio"
CHV_DIMENSIONS = 3
CHV_SEED = 22  # fixed: the projection must not change between runs or systems
CHV_DOC = (
    "chv_ratio = volume of the convex hull of the system's top-R candidates over that of the "
    "survey's relevant candidates (label >= 1, R of them), both in the system's own embeddings "
    f"(unit length) projected to {CHV_DIMENSIONS} dimensions by one fixed orthonormal "
    f"projection (QR of a standard-normal matrix, numpy default_rng([{CHV_SEED}, d])); Qhull "
    "volumes (scipy). Coverage of the reading list's space, not relevance: read it next to "
    "R@K. A survey whose relevant candidates span no volume is excluded."
)


def projection(dimension: int) -> np.ndarray:
    """The fixed ``dimension x 3`` orthonormal projection of embeddings of that size."""
    rng = np.random.default_rng([CHV_SEED, dimension])
    basis, _ = np.linalg.qr(rng.standard_normal((dimension, CHV_DIMENSIONS)))
    return basis


def hull_volume(points: np.ndarray) -> float:
    """Convex-hull volume of projected points; 0.0 for fewer than 4 or flat points."""
    from scipy.spatial import ConvexHull, QhullError

    if len(points) <= CHV_DIMENSIONS:
        return 0.0
    try:
        return float(ConvexHull(points).volume)
    except QhullError:
        return 0.0


def chv_ratios(judged: pl.DataFrame, vectors: np.ndarray) -> pl.DataFrame:
    """``chv_ratio`` per survey.

    Args:
        judged: rows with ``survey_id``, ``candidate_id``, ``label`` and ``score`` (null =
            unscored, ranked last).
        vectors: one embedding per row of ``judged``, in its row order.

    Returns:
        ``survey_id``, ``chv_ratio`` (null where the gold hull has no volume), sorted.
    """
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors, dtype=np.float64), where=norms > 0)
    points = unit @ projection(vectors.shape[1])
    frame, _ = with_tie_keys(
        judged.select(
            SURVEY_ID, CANDIDATE_ID, LABEL, pl.col(SCORE).cast(pl.Float64).fill_null(float("-inf"))
        ).with_row_index("_row")
    )
    ordered = frame.sort(
        [SURVEY_ID, SCORE, TIE_KEY, CANDIDATE_ID], descending=[False, True, False, False]
    )
    ratios: list[tuple[str, float | None]] = []
    for (survey,), group in ordered.group_by(SURVEY_ID, maintain_order=True):
        rows = group["_row"].to_numpy()
        relevant = group[LABEL].to_numpy() >= RELEVANT_LABEL
        n_relevant = int(relevant.sum())
        gold = hull_volume(points[rows[relevant]])
        top = hull_volume(points[rows[:n_relevant]])
        ratios.append((survey, top / gold if gold > 0 else None))
    return pl.DataFrame(
        ratios, schema={SURVEY_ID: pl.String, CHV_RATIO: pl.Float64}, orient="row"
    ).sort(SURVEY_ID)
