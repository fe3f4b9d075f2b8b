"""``export --format beir DIR``: one split of a release as the files BEIR's loader reads.

BEIR's ``GenericDataLoader(DIR).load(split="test")`` reads ``corpus.jsonl`` (``_id``,
``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and ``qrels/test.tsv`` (a
header row, then ``query-id``, ``corpus-id``, ``score`` tab-separated). The release's
``qrels``, ``corpus`` and ``queries`` configs hold exactly these rows
(:mod:`pipeline.stages.release`); this writes them as such, one split to a folder (the
eval split as ``test``, the name BEIR asks for; ``train`` as ``train``), so a retrieval
over ``corpus.jsonl`` searches the split's corpus and nothing else. ``top_ranked.jsonl``
(``query-id``, ``corpus-ids``) lists each query's judged candidates: the re-ranking
protocol's input (hard negatives are in qrels with score 0, so re-ranking these lists
with BEIR's ``EvaluateRetrieval.evaluate`` gives this benchmark's re-ranking numbers).

Files are written whole to temp files and renamed, rows in the release's order (by id),
JSON with the keys in BEIR's order and non-ASCII text as is: the same release gives the
same bytes.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import polars as pl

from pipeline.core.errors import UsageError
from pipeline.core.files import atomic_path
from pipeline.core.release_files import RETRIEVAL_SPLITS, beir_file
from pipeline.core.schema import (
    BEIR_CORPUS_ID,
    BEIR_CORPUS_IDS,
    BEIR_ID,
    BEIR_QUERY_ID,
    BEIR_SCORE,
    BEIR_TEXT,
    BEIR_TITLE,
)
from pipeline.engine.workdir import release_file_problem

log = logging.getLogger("pipeline")

BEIR = "beir"
FORMATS = (BEIR,)
CORPUS_JSONL, QUERIES_JSONL, TOP_RANKED_JSONL = "corpus.jsonl", "queries.jsonl", "top_ranked.jsonl"
QRELS_TSV = "qrels/{split}.tsv"


def _read(release: Path, view: str, split: str, columns: list[str]) -> pl.DataFrame:
    path = release / beir_file(view, split)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: the release has no {view} for split {split!r} (check --release and --split)"
        )
    problem = release_file_problem(path)
    if problem is not None:
        raise UsageError(problem)
    return pl.read_parquet(path, columns=columns)


def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def export_release(
    release: Path, out: Path, fmt: str = BEIR, split: str = "eval"
) -> dict[str, int]:
    """Write ``split`` of ``release`` into ``out`` in format ``fmt``; return file -> rows.

    Raises:
        ValueError: an unknown format or split; a release file that differs from its record.
        FileNotFoundError: the release has no such split.
    """
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: unknown; available: {', '.join(FORMATS)}")
    if split not in RETRIEVAL_SPLITS:
        raise UsageError(f"--split {split!r}: unknown; available: {', '.join(RETRIEVAL_SPLITS)}")
    corpus = _read(release, "corpus", split, [BEIR_ID, BEIR_TITLE, BEIR_TEXT])
    queries = _read(release, "queries", split, [BEIR_ID, BEIR_TEXT])
    qrels = _read(release, "qrels", split, [BEIR_QUERY_ID, BEIR_CORPUS_ID, BEIR_SCORE])
    top_ranked = _read(release, "top_ranked", split, [BEIR_QUERY_ID, BEIR_CORPUS_IDS])
    name = RETRIEVAL_SPLITS[split]
    qrels_path = out / QRELS_TSV.format(split=name)
    qrels_path.parent.mkdir(parents=True, exist_ok=True)
    _jsonl(out / CORPUS_JSONL, corpus.select(BEIR_ID, BEIR_TITLE, BEIR_TEXT).to_dicts())
    _jsonl(out / QUERIES_JSONL, queries.select(BEIR_ID, BEIR_TEXT).to_dicts())
    _jsonl(out / TOP_RANKED_JSONL, top_ranked.to_dicts())
    with atomic_path(qrels_path) as tmp, tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow([BEIR_QUERY_ID, BEIR_CORPUS_ID, BEIR_SCORE])
        writer.writerows(qrels.iter_rows())
    files = {
        CORPUS_JSONL: corpus.height,
        QUERIES_JSONL: queries.height,
        QRELS_TSV.format(split=name): qrels.height,
        TOP_RANKED_JSONL: top_ranked.height,
    }
    log.info(
        "export: %s split %r of %s as %s in %s (%s)",
        fmt,
        split,
        release,
        name,
        out,
        ", ".join(f"{f} {n:,} rows" for f, n in files.items()),
    )
    return files
