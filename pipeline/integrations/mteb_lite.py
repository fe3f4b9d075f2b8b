"""The lite variant of the MTEB retrieval task: at most 1,000 eval surveys and 250
documents per survey, the size MTEB's leaderboard runs (the precedent of its
``*HardNegatives`` tasks: a retrieval task over the union of each query's mined documents).

The rule (:func:`build_lite`, deterministic, stated in the folder's ``lite.json``):

1. **Surveys**: every eval survey when there are at most ``max_surveys``; otherwise the
   ``max_surveys`` with the smallest sha256 of their id (a fixed pseudo-random sample,
   independent of order, dates and fields).
2. **Documents of a survey**, until ``max_docs``: its judged candidates (cited works by
   grade, highest first, then its hard negatives; ties by the sha256 of the document id),
   then the top of BM25 and of the dense baseline (all-MiniLM-L6-v2, when the ``dense``
   extra is installed) over the split's whole corpus, taken in turn (BM25's first, dense's
   first, BM25's second, ...), each document once. BM25 is the project's
   (:class:`pipeline.rules.text_match.BM25Index` over :func:`tokenize` of the texts MTEB reads).
   The miners search only for the surveys whose judged candidates leave room
   (``queries_mined``): a survey's top does not depend on the others.
3. **Corpus**: the union of the surveys' documents; **qrels**: the judgments of the kept
   surveys on the kept documents (a judged candidate dropped at step 2 leaves its judgment).

The folder is laid out as the release's MTEB configs (``corpus``, ``queries``, ``qrels``,
split ``test``, a card naming them), so MTEB's loader reads it as it reads the release, and
:func:`lite_task` is the full retrieval task's class with this folder as its dataset: both
variants are evaluated by the same code.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.files import atomic_path, sha256_file, write_json
from pipeline.integrations.mteb import (
    LITE,
    SPLIT,
    MtebError,
    minilm_folder,
    release_facts,
    task_class,
)

MAX_SURVEYS, MAX_DOCS = 1000, 250
MANIFEST = "lite.json"
_VIEWS = ("corpus", "queries", "qrels")
# the rule's last step as lite.json states it, by the number of miners that ran (the dense
# one is skipped without the dense extra, or with dense=False)
_MINERS = ("BM25's top", "BM25's and the dense baseline's top in turn")


@dataclass(frozen=True)
class LiteManifest:
    """What the lite folder holds and the rule that chose it."""

    rule: str
    max_surveys: int
    max_docs: int
    surveys: int
    surveys_in_release: int
    documents: int
    documents_in_release: int
    docs_per_survey_min: int
    docs_per_survey_max: int
    judged_dropped: int
    mined_by: list[str]
    # surveys with fewer judged candidates than max_docs: the only ones the miners search for
    queries_mined: int
    seconds: float


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _texts(frame: pl.DataFrame) -> list[str]:
    """The string MTEB reads for a corpus row: ``(title + " " + text).strip()``."""
    return [f"{t or ''} {x or ''}".strip() for t, x in frame.select("title", "text").iter_rows()]


def _dense_available() -> bool:
    """Whether the dense baseline can run (the ``dense`` extra and its weights)."""
    try:
        minilm_folder()
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401
    except (MtebError, ImportError):
        return False
    return True


def _dense_top(queries: list[str], docs: list[str], depth: int) -> np.ndarray:
    """The dense baseline's top ``depth`` documents per query (:func:`_dense_available`)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from pipeline.evaluate.systems.models import hub_offline

    folder = minilm_folder()

    torch.set_num_threads(1)
    with hub_offline():
        model = SentenceTransformer(str(folder), device="cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(
            model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        )

    doc_vectors = encode(docs)
    return _top((vector @ doc_vectors.T for vector in encode(queries)), len(queries), depth)


def _top(rows: Iterable[np.ndarray], n: int, depth: int) -> np.ndarray:
    """Per query (one score row at a time: a corpus of millions never makes a matrix of
    queries x documents), the indices of the ``depth`` highest scores, ties by index."""
    out = np.zeros((n, depth), dtype=np.int64)
    for i, row in enumerate(rows):
        out[i] = np.argsort(-np.asarray(row, dtype=np.float64), kind="stable")[:depth]
    return out


def _bm25_top(queries: list[str], docs: list[str], depth: int) -> np.ndarray:
    from pipeline.rules.text_match import BM25Index, tokenize

    def tokens(texts: list[str]) -> list[list[str]]:
        return pl.Series(texts).to_frame("t").select(tokenize(pl.col("t")))["t"].to_list()

    index = BM25Index(tokens(docs))
    return _top((index.scores(q) for q in tokens(queries)), len(queries), depth)


def build_lite(
    release: str | Path,
    out: str | Path,
    *,
    max_surveys: int = MAX_SURVEYS,
    max_docs: int = MAX_DOCS,
    dense: bool = True,
) -> LiteManifest:
    """Write the lite variant of a release folder's eval split into ``out`` (see the module)."""
    started = time.perf_counter()
    folder, out = Path(release), Path(out)
    if not (folder / "corpus" / f"{SPLIT}.parquet").is_file():
        raise MtebError(
            f"{release}: no corpus/{SPLIT}.parquet; build the lite from a release folder"
        )
    read = {view: pl.read_parquet(folder / view / f"{SPLIT}.parquet") for view in _VIEWS}
    corpus, queries, qrels = read["corpus"], read["queries"], read["qrels"]
    kept = sorted(queries["_id"].to_list(), key=_hash)[:max_surveys]
    queries_kept = queries.filter(pl.col("_id").is_in(kept)).sort("_id")
    doc_ids = corpus["_id"].to_list()
    depth = min(max_docs, len(doc_ids))
    judged = qrels.with_columns(
        pl.col("corpus-id").map_elements(_hash, return_dtype=pl.String).alias("_h")
    ).sort(["query-id", "score", "_h"], descending=[False, True, False])
    judged_by_query = {
        q: list(dict.fromkeys(group["corpus-id"].to_list()))
        for (q,), group in judged.group_by("query-id")
    }
    kept_ids = queries_kept["_id"].to_list()
    # the miners search only for the surveys their judged candidates leave room in: a
    # survey's top over the corpus does not depend on the other surveys, and at scale most
    # surveys have more judged candidates than max_docs
    room = [row for row, q in enumerate(kept_ids) if len(judged_by_query.get(q, [])) < max_docs]
    room_texts = [queries_kept["text"][row] for row in room]
    doc_texts = _texts(corpus) if room else []
    miners = {"bm25": _bm25_top}
    if dense and _dense_available():
        miners["dense"] = _dense_top
    mined = {
        name: top(room_texts, doc_texts, depth) if room else np.zeros((0, depth), np.int64)
        for name, top in miners.items()
    }
    mined_row = {row: i for i, row in enumerate(room)}
    chosen: dict[str, list[str]] = {}
    dropped = 0
    for row, query in enumerate(kept_ids):
        docs = judged_by_query.get(query, [])
        dropped += max(0, len(docs) - max_docs)
        picked = docs[:max_docs]
        seen = set(picked)
        for rank in range(depth if row in mined_row else 0):
            for top in mined.values():
                if len(picked) >= max_docs:
                    break
                doc = doc_ids[top[mined_row[row], rank]]
                if doc not in seen:
                    seen.add(doc)
                    picked.append(doc)
        chosen[query] = picked
    pairs = pl.DataFrame(
        [(q, d) for q, docs in chosen.items() for d in docs],
        schema={"query-id": pl.String, "corpus-id": pl.String},
        orient="row",
    )
    lite_corpus = corpus.join(pairs.select(pl.col("corpus-id").alias("_id")), on="_id", how="semi")
    lite_corpus = lite_corpus.sort("_id")
    lite_qrels = qrels.join(pairs, on=["query-id", "corpus-id"], how="semi").sort(
        "query-id", "corpus-id"
    )
    out.mkdir(parents=True, exist_ok=True)
    for view, frame in (("corpus", lite_corpus), ("queries", queries_kept), ("qrels", lite_qrels)):
        with atomic_path(out / view / f"{SPLIT}.parquet") as tmp:
            frame.write_parquet(tmp, compression="zstd", statistics=False)
    sizes = [len(d) for d in chosen.values()] or [0]
    manifest = LiteManifest(
        rule=(
            f"surveys: the {max_surveys} with the smallest sha256 of their id (all when fewer); "
            f"documents per survey until {max_docs}: judged candidates (grade desc, then "
            f"sha256 of the id), then {_MINERS[len(mined) - 1]} over the split's corpus, "
            "each document once"
        ),
        max_surveys=max_surveys,
        max_docs=max_docs,
        surveys=len(chosen),
        surveys_in_release=queries.height,
        documents=lite_corpus.height,
        documents_in_release=corpus.height,
        docs_per_survey_min=min(sizes),
        docs_per_survey_max=max(sizes),
        judged_dropped=dropped,
        mined_by=list(mined),
        queries_mined=len(room),
        seconds=round(time.perf_counter() - started, 3),
    )
    write_json(out / MANIFEST, asdict(manifest))
    _write_card(out, release_facts(release).name, manifest)
    return manifest


def _write_card(out: Path, name: str, manifest: LiteManifest) -> None:
    """The card naming the configs. Each config's description carries its file's sha256,
    as the release's card does: ``datasets`` caches a local folder's config under the
    folder's name and the config's hash, so two lite folders would otherwise share one
    cache entry and the second would be read as the first."""
    configs = "".join(
        f"- config_name: {view}\n"
        f"  description: data files sha256 {sha256_file(out / view / f'{SPLIT}.parquet')[:16]}\n"
        f"  data_files:\n  - split: {SPLIT}\n    path: {view}/{SPLIT}.parquet\n"
        for view in _VIEWS
    )
    text = (
        f"---\nconfigs:\n{configs}---\n\n# {name} (lite)\n\n"
        f"{manifest.surveys:,} surveys, {manifest.documents:,} documents: {manifest.rule}.\n"
    )
    with atomic_path(out / "README.md") as tmp:
        tmp.write_text(text, encoding="utf-8")


def lite_task(release: str | Path, lite: str | Path, revision: str | None = None) -> Any:
    """The lite task: the full retrieval task's class over the lite folder ``lite``."""
    facts = release_facts(release, revision)
    return task_class(facts, LITE, dataset_path=str(Path(lite).resolve()))()
