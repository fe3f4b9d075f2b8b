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

With ``passages`` (``export --passages``), ``passages/`` is a second GenericDataLoader folder,
the release's full-text view (``corpus_sections``) as a passage corpus for a passage retriever
of BEIR or MTEB: ``passages/corpus.jsonl`` holds one passage per section, ``_id`` = the
document id, ``#`` (:data:`pipeline.evaluate.passages.PASSAGE_SEPARATOR`) and the section order
(``arxiv:2101.00001#3``), ``title`` its heading, ``text`` its text, and one passage per
document without full text, ``<doc>#abstract``, its title and abstract, so every document of
the split can be retrieved; ``passages/mapping.tsv`` maps each passage back to its document
(``passage-id``, ``corpus-id``, ``section_order``, empty for ``#abstract``); queries and qrels
are the split's (document-level: a passage run is scored by ``evaluate --passage-run``, which
aggregates it to documents by the same rule as ``--passages``, never by BEIR on passage ids).

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
from pipeline.core.release_files import FULL_TEXT_VIEW, RETRIEVAL_SPLITS, beir_file
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
from pipeline.evaluate.passages import passage_corpus_with_fallback, passage_map

log = logging.getLogger("pipeline")

BEIR = "beir"
FORMATS = (BEIR,)
CORPUS_JSONL, QUERIES_JSONL, TOP_RANKED_JSONL = "corpus.jsonl", "queries.jsonl", "top_ranked.jsonl"
QRELS_TSV = "qrels/{split}.tsv"
PASSAGES_DIR = "passages"
MAPPING_TSV = "mapping.tsv"
MAPPING_HEADER = ("passage-id", "corpus-id", "section_order")


def _checked(path: Path, missing: Exception) -> Path:
    """``path``, a readable release file; ``missing`` is raised when it is not there."""
    if not path.is_file():
        raise missing
    problem = release_file_problem(path)
    if problem is not None:
        raise UsageError(problem)
    return path


def _read(release: Path, view: str, split: str, columns: list[str]) -> pl.DataFrame:
    path = release / beir_file(view, split)
    missing = FileNotFoundError(
        f"{path}: the release has no {view} for split {split!r} (check --release and --split)"
    )
    return pl.read_parquet(_checked(path, missing), columns=columns)


def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _tsv(path: Path, header: tuple[str, ...] | list[str], rows: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)  # type: ignore[arg-type]


def _export_passages(
    release: Path, out: Path, split: str, corpus: pl.DataFrame, queries: pl.DataFrame,
    qrels: pl.DataFrame,
) -> dict[str, int]:  # fmt: skip
    """``passages/``: the split's full-text view as a passage corpus (module doc)."""
    path = release / beir_file(FULL_TEXT_VIEW, split)
    missing = UsageError(
        f"export --passages: {path} is missing (a release built without the full-text view)"
    )
    sections = pl.scan_parquet(_checked(path, missing))
    documents = corpus.lazy()
    passages = passage_corpus_with_fallback(sections, documents).collect()
    mapping = passage_map(sections, documents).collect()
    folder = out / PASSAGES_DIR
    name = RETRIEVAL_SPLITS[split]
    qrels_name = QRELS_TSV.format(split=name)
    folder.mkdir(parents=True, exist_ok=True)
    _jsonl(folder / CORPUS_JSONL, passages.select(BEIR_ID, BEIR_TITLE, BEIR_TEXT).to_dicts())
    _jsonl(folder / QUERIES_JSONL, queries.select(BEIR_ID, BEIR_TEXT).to_dicts())
    _tsv(folder / qrels_name, [BEIR_QUERY_ID, BEIR_CORPUS_ID, BEIR_SCORE], qrels.iter_rows())
    _tsv(folder / MAPPING_TSV, MAPPING_HEADER, mapping.iter_rows())
    return {
        f"{PASSAGES_DIR}/{CORPUS_JSONL}": passages.height,
        f"{PASSAGES_DIR}/{QUERIES_JSONL}": queries.height,
        f"{PASSAGES_DIR}/{qrels_name}": qrels.height,
        f"{PASSAGES_DIR}/{MAPPING_TSV}": mapping.height,
    }


def export_release(
    release: Path, out: Path, fmt: str = BEIR, split: str = "eval", passages: bool = False
) -> dict[str, int]:
    """Write ``split`` of ``release`` into ``out`` in format ``fmt``; return file -> rows.
    With ``passages``, also the split's passage corpus in ``passages/`` (module doc).

    Raises:
        ValueError: an unknown format or split; a release file that differs from its record;
            ``passages`` for a release without the full-text view.
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
    _tsv(qrels_path, [BEIR_QUERY_ID, BEIR_CORPUS_ID, BEIR_SCORE], qrels.iter_rows())
    files = {
        CORPUS_JSONL: corpus.height,
        QUERIES_JSONL: queries.height,
        QRELS_TSV.format(split=name): qrels.height,
        TOP_RANKED_JSONL: top_ranked.height,
    }
    if passages:
        files |= _export_passages(release, out, split, corpus, queries, qrels)
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
