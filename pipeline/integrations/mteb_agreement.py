"""The project's evaluator on MTEB's own rankings: for each reference model and task of the
bundle, nDCG@10 of ``mteb.evaluate`` beside this project's evaluator's nDCG@10 for the very
ranking MTEB scored, which must agree (to :data:`TOLERANCE`).

``mteb.evaluate`` saves each model's ranking of a task (``prediction_folder``: one
``<Task>_predictions.json`` per task, ``{subset: {split: {query: {document: score}}}}``,
each query's top 1,000). :func:`prediction_run` reads it as a run in the order MTEB scores
it: pytrec_eval ranks equal scores by document id, descending (MTEB's own MRR sorts so to
match it), so the run's scores are the ranks' negatives and the project's evaluator, which
breaks ties by a hash of the ids, ranks the same list. :func:`project_ndcg` scores that run
with :func:`pipeline.evaluate.evaluation.run_evaluation` (no baselines) in the task's mode:

* ``Retrieval``: retrieval mode on the release (the split's whole corpus);
* ``Reranking``: re-ranking mode on the release (the judged candidates);
* ``AspectsReranking``: re-ranking mode on the release's ``aspects/`` folder
  (``evaluate --task aspects``);
* ``LiteRetrieval``: retrieval mode on the lite folder's own judgments: the release's eval
  table cut to the lite's surveys and to its qrels' pairs (the lite drops judged candidates
  past 250 documents, and MTEB's ideal DCG counts only the qrels it reads), with the lite's
  corpus beside it (:func:`lite_eval_folder`).

:func:`project_model_ndcg` is the evaluator running a model itself (``evaluate
--sentence-transformer``): its own encoding, search and ranking, the same value when both
sides compute the same vectors.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.files import atomic_path
from pipeline.core.release_files import EVAL_FILE, beir_file
from pipeline.integrations.mteb import ASPECTS, LITE, RERANKING, RETRIEVAL, SPLIT, MtebError

TOLERANCE = 1e-4  # the issue's; MTEB rounds its means to 5 decimals
METRIC = "nDCG@10"  # the project's name of MTEB's ndcg_at_10
_SUBSET = "default"
_LITE_EVAL = "lite_eval"  # the lite's eval table and corpus, under the bundle's evaluator/


@dataclass(frozen=True)
class Agreement:
    """One model on one task: MTEB's nDCG@10 and the project's for the same ranking."""

    model: str
    task: str
    mteb: float
    project: float
    agree: bool
    own_run: float | None = None  # the project's evaluator running the model itself

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def prediction_run(path: Path) -> pl.DataFrame:
    """MTEB's predictions file as a run (``query-id``, ``corpus-id``, ``score``): each
    query's documents in pytrec_eval's order (score, then document id, both descending),
    scored by minus their rank, so any tie rule ranks them in that order."""
    ranked = json.loads(path.read_text(encoding="utf-8"))[_SUBSET][SPLIT]
    rows = []
    for query, scores in ranked.items():
        order = sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
        rows += [(query, doc, -float(rank)) for rank, (doc, _) in enumerate(order, 1)]
    return pl.DataFrame(
        rows, schema={"query-id": pl.String, "corpus-id": pl.String, "score": pl.Float64},
        orient="row",
    )  # fmt: skip


def lite_eval_folder(release: str | Path, lite: Path, folder: Path) -> Path:
    """An eval folder of the lite task for the project's evaluator (see the module):
    ``folder/<eval file>`` and ``folder/corpus/test.parquet``; returns ``folder``."""
    from pipeline.evaluate.columns import CANDIDATE_ID, SURVEY_ID
    from pipeline.evaluate.evalset import resolve_eval_file

    pairs = pl.read_parquet(lite / "qrels" / f"{SPLIT}.parquet").select(
        pl.col("query-id").alias(SURVEY_ID), pl.col("corpus-id").alias(CANDIDATE_ID)
    )
    table = pl.read_parquet(resolve_eval_file(release)).join(
        pairs, on=[SURVEY_ID, CANDIDATE_ID], how="semi"
    )
    with atomic_path(folder / EVAL_FILE) as tmp:
        table.write_parquet(tmp)
    corpus = folder / beir_file("corpus", "eval")
    corpus.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(lite / "corpus" / f"{SPLIT}.parquet", corpus)
    return folder


def _eval_file(kind: str, release: str | Path, lite_folder: Path | None) -> tuple[str | Path, str]:
    """What the project's evaluator reads for a task of ``kind``, and its mode."""
    if kind == RETRIEVAL:
        return release, "retrieval"
    if kind == RERANKING:
        return release, "rerank"
    if kind == ASPECTS:
        from pipeline.evaluate.aspects import aspects_spec

        return aspects_spec(release), "rerank"
    if kind == LITE and lite_folder is not None:
        return lite_folder, "retrieval"
    raise MtebError(f"no project evaluation of the {kind} task (the lite task needs its folder)")


def _mean(request: Any, name: str) -> float:
    from pipeline.evaluate.evaluation import run_evaluation

    results = run_evaluation(request).results
    return float(results["systems"][name][METRIC]["mean"])


def project_ndcg(
    kind: str, release: str | Path, run: pl.DataFrame, lite_folder: Path | None = None
) -> float:
    """The project's evaluator's nDCG@10 of ``run`` on the task of ``kind`` (no baselines,
    nothing written)."""
    from pipeline.evaluate.evaluation import EvaluationRequest

    eval_file, mode = _eval_file(kind, release, lite_folder)
    request = EvaluationRequest(
        eval_file, scores={"mteb": run}, mode=mode, baselines=False, learned=False
    )
    return _mean(request, "mteb")


def project_model_ndcg(
    kind: str, release: str | Path, model: Path, cache: Path, lite_folder: Path | None = None
) -> float:
    """The project's evaluator's nDCG@10 of the sentence-transformers model in ``model``
    run by the evaluator itself (``evaluate --sentence-transformer``; retrieval tasks: its
    top 1,000 of the corpus), embeddings kept in ``cache``."""
    from pipeline.evaluate.evaluation import EvaluationRequest
    from pipeline.evaluate.systems.models import SENTENCE_TRANSFORMER, ModelSpec

    eval_file, mode = _eval_file(kind, release, lite_folder)
    request = EvaluationRequest(
        eval_file,
        models=(ModelSpec(SENTENCE_TRANSFORMER, str(model), "own"),),
        mode=mode,
        baselines=False,
        learned=False,
        cache_dir=cache,
    )
    return _mean(request, "own")


def agreement(
    model: str, task: str, mteb: float, project: float, own_run: float | None = None
) -> Agreement:
    return Agreement(model, task, mteb, project, abs(mteb - project) <= TOLERANCE, own_run)
