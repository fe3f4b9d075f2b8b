"""Names of the files of a release folder (what ``push`` publishes), in one place.

The release stage writes them, the card names them (its ``configs`` and snippets),
``evaluate`` finds the eval table by :data:`EVAL_FILE`.
"""

from __future__ import annotations

READING_LISTS_FILE = "{split}_survey_reading_lists.parquet"
BEIR_FILE = "{view}/{split}.parquet"
BEIR_VIEWS = ("queries", "corpus", "qrels")
CANDIDATES_FILE = "candidates/{split}.parquet"
METADATA_FILE = "eval_metadata.json"
CARD_FILE = "README.md"
METHODS_FILE = "METHODS.md"  # beside the card: every rule of the build and the audit tables
EVAL_FILE = READING_LISTS_FILE.format(split="eval")
