"""Names of the files of a release folder (what ``push`` publishes), in one place.

The release stage writes them, the card names them (its ``configs`` and snippets),
``evaluate`` finds the eval table by :data:`EVAL_FILE` and bibliography resolution the
works table by :data:`WORKS_TABLE_FILE`.
"""

from __future__ import annotations

from pathlib import Path

READING_LISTS_FILE = "{split}_survey_reading_lists.parquet"
BEIR_FILE = "{view}/{split}.parquet"
# The retrieval views in MTEB's layout: qrels first (the card's default config, which
# MTEB's loader reads when there is no config named "default"), top_ranked = each
# query's candidate list (MTEB's re-ranking input).
BEIR_VIEWS = ("qrels", "corpus", "queries", "top_ranked")
# The retrieval views name the eval split "test", the split MTEB's and BEIR's loaders ask
# for ("Split test not found in ['train', 'eval']" otherwise); the reading lists and the
# candidates view keep "eval".
RETRIEVAL_SPLITS = {"eval": "test", "train": "train"}
CANDIDATES_FILE = "candidates/{split}.parquet"
METADATA_FILE = "eval_metadata.json"
CARD_FILE = "README.md"
METHODS_FILE = "METHODS.md"  # beside the card: every rule of the build and the audit tables
EVAL_FILE = READING_LISTS_FILE.format(split="eval")
# Every work the corpus knows, keyed as bibliography resolution keys it (``schema.WORKS_TABLE``):
# evaluator-side, read by ``evaluate --bibliography``; no config of the card, since no system
# ranks it.
WORKS_TABLE_FILE = "works.parquet"
# Judgment-side baseline bibliographies of the eval surveys, built from the corpus's citations
# (``schema.EVAL_BIBLIOGRAPHY_BASELINES``); no config of the card, since no system may read it
BIBLIOGRAPHY_BASELINES_FILE = "baselines/eval_bibliographies.parquet"
# The section-level reading lists: a folder laid out as a release of its own
# (the same file names, one query per aspect), so that ``evaluate``, ``train`` and the
# reading-free probe read it as they read the release (``evaluate --task aspects``).
ASPECTS_DIR = "aspects"
ASPECT_READING_LISTS_FILE = f"{ASPECTS_DIR}/{READING_LISTS_FILE}"
ASPECT_CANDIDATES_FILE = f"{ASPECTS_DIR}/{CANDIDATES_FILE}"
# The full-text view: one row per section of each document whose licence permits it, laid out
# as a retrieval view (``corpus_sections/{test,train}.parquet``; pipeline.stages.corpus_sections)
FULL_TEXT_VIEW = "corpus_sections"


def beir_file(view: str, split: str) -> str:
    """The file of retrieval view ``view`` (:data:`BEIR_VIEWS`) of release split ``split``
    (``train`` or ``eval``), named by its retrieval split name (:data:`RETRIEVAL_SPLITS`)."""
    return BEIR_FILE.format(view=view, split=RETRIEVAL_SPLITS[split])


def view_of_eval_file(eval_path: Path, view: str, split: str = "eval") -> Path | None:
    """The file of view ``view`` (``corpus``, :data:`FULL_TEXT_VIEW`, ...) of ``split`` for an
    eval file: beside it, or for the eval file of the aspects folder in the release the folder
    is part of (its aspects rank the documents of the same split); None when there is none."""
    name = beir_file(view, split)
    folders = [eval_path.parent]
    if eval_path.parent.name == ASPECTS_DIR:
        folders.append(eval_path.parent.parent)
    return next((folder / name for folder in folders if (folder / name).is_file()), None)
