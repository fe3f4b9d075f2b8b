"""The passages of a split's corpus as an encoder reads them, streamed from the release's files
(``evaluate --passages --mode retrieval``, :mod:`pipeline.evaluate.systems.full_text`).

A passage is a section of a corpus document with full text (a ``corpus_sections`` row: its
heading and text cut to ``--passage-chars``, :func:`pipeline.evaluate.passages.passage_text_expr`),
or, for a document without full text, its title and abstract (its one passage). Their order,
which row i of the passages' vectors follows:

1. the documents with full text in the order of ``corpus_sections`` (the release writes each
   document's sections together; a document whose rows are apart is an error), each one's
   passages by passage id (the order :func:`pipeline.evaluate.passages.passage_texts` gives,
   in which ``mean-top-k`` sums a document's best scores); sections of a document that is not
   in the corpus file are skipped;
2. then the documents without full text, in the corpus file's order.

:func:`passage_units` reads the view's document ids once (:data:`READ_ROWS` rows at a time)
to lay the passages out: per document, never per passage (:class:`PassageLayout`). The texts
are read again only to be encoded (:meth:`PassageUnits.batches`, one Parquet batch and one
document at a time), by :func:`pipeline.evaluate.retrieval.corpus_vectors.encode_corpus`, which
keeps the vectors on disk and in its cache, keyed by the model, both files' bytes and the cut
(:attr:`PassageUnits.sha256`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.core.errors import UsageError
from pipeline.core.files import sha256_file, sha256_text
from pipeline.evaluate import passages as P
from pipeline.evaluate.retrieval.corpus_vectors import Corpus
from pipeline.rules.text_match import paper_text

READ_ROWS = 8_192  # sections read at a time: a few MB of text at the real mean of 3,000 chars
UNITS_FORMAT = 1  # the passages' order and texts, in the vectors' cache key
_RUN = "_run"


@dataclass(frozen=True)
class PassageLayout:
    """Where each document's passages are among the passages' rows (per document).

    Attributes:
        doc_rows: each document's row in the corpus file, in passage order.
        ends: one past each document's last passage row (``ends[-1]`` passages in all).
    """

    doc_rows: np.ndarray
    ends: np.ndarray

    @property
    def rows(self) -> int:
        """Passages in all."""
        return int(self.ends[-1]) if len(self.ends) else 0

    @property
    def counts(self) -> np.ndarray:
        """Passages of each document."""
        return np.diff(self.ends, prepend=0)


@dataclass(frozen=True)
class PassageUnits:
    """The passages of a split's corpus (the module doc), a
    :class:`~pipeline.evaluate.retrieval.corpus_vectors.TextRows` to encode.

    Attributes:
        corpus: the split's corpus.
        sections: its ``corpus_sections`` file.
        max_chars: ``--passage-chars`` (0: not cut).
        layout: each document's passages' rows.
        documents_with_full_text: corpus documents with at least one section.
        sha256: the cache key of the texts: both files' sha256, the cut and
            :data:`UNITS_FORMAT`.
    """

    corpus: Corpus
    sections: Path
    max_chars: int
    layout: PassageLayout
    documents_with_full_text: int
    sha256: str

    @property
    def rows(self) -> int:
        return self.layout.rows

    @property
    def name(self) -> str:
        return f"{self.sections.parent.name}/{self.sections.name}"

    def batches(self, batch_size: int) -> Iterator[tuple[int, list[str]]]:
        """``(first row, texts)`` of consecutive passages, ``batch_size`` at a time."""
        pending: list[str] = []
        start = 0
        for texts in self._texts():
            pending += texts
            while len(pending) >= batch_size:
                yield start, pending[:batch_size]
                pending, start = pending[batch_size:], start + batch_size
        if start + len(pending) != self.rows:  # the files changed since the layout was read
            raise UsageError(
                f"{self.sections}: {start + len(pending)} passages read, {self.rows} laid out; "
                "were the release's files replaced while evaluating?"
            )
        if pending:
            yield start, pending

    def _texts(self) -> Iterator[list[str]]:
        """The passages' texts in order, a Parquet batch at a time."""
        ids = self.corpus.ids.implode()
        carry: pl.DataFrame | None = None
        columns = [S.BEIR_CORPUS_ID, S.SECTION_ORDER, S.HEADING, S.SECTION_TEXT]
        for batch in _read(self.sections, columns):
            frame = batch.filter(pl.col(S.BEIR_CORPUS_ID).is_in(ids))
            frame = frame if carry is None else pl.concat([carry, frame])
            if frame.height == 0:
                continue
            frame = frame.with_columns(_run_expr())
            last = frame[_RUN][-1]
            carry = frame.filter(pl.col(_RUN) == last).drop(_RUN)  # may go on in the next batch
            yield _ordered_texts(frame.filter(pl.col(_RUN) != last), self.max_chars)
        if carry is not None and carry.height:
            yield _ordered_texts(carry.with_columns(_run_expr()), self.max_chars)
        without = self.layout.doc_rows[self.documents_with_full_text :]
        first = 0
        for batch in _read(self.corpus.path, [S.BEIR_TITLE, S.BEIR_TEXT]):
            low, high = np.searchsorted(without, [first, first + batch.height])
            rows = without[low:high] - first
            first += batch.height
            if len(rows):
                text = paper_text(pl.col(S.BEIR_TITLE), pl.col(S.BEIR_TEXT))
                yield batch.select(text).to_series().gather(rows).to_list()


def _read(path: Path, columns: list[str]) -> Iterator[pl.DataFrame]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=READ_ROWS, columns=columns):
        yield pl.DataFrame(pl.from_arrow(batch))


def _run_expr() -> pl.Expr:
    """Numbers the runs of equal document ids (a document's rows, together)."""
    doc = pl.col(S.BEIR_CORPUS_ID)
    return (doc != doc.shift(1)).fill_null(True).cum_sum().alias(_RUN)


def _ordered_texts(frame: pl.DataFrame, max_chars: int) -> list[str]:
    """The texts of whole documents' sections: documents in the frame's order, each one's
    passages by passage id."""
    return (
        frame.select(_RUN, P.passage_id_expr().alias(P.PASSAGE), P.passage_text_expr(max_chars))
        .sort(_RUN, P.PASSAGE)
        .to_series(2)
        .to_list()
    )


def passage_units(corpus: Corpus, sections: Path, max_chars: int) -> PassageUnits:
    """The passages of ``corpus`` with its full-text view ``sections`` (module doc).

    Raises:
        UsageError: a document's rows in ``sections`` are not together.
    """
    docs = corpus.ids.to_frame(P.DOCUMENT).with_row_index("doc")
    has_text = np.zeros(corpus.rows, dtype=bool)
    text_rows: list[int] = []
    counts: list[int] = []
    last: str | None = None
    for batch in _read(sections, [S.BEIR_CORPUS_ID]):
        runs = (
            batch.select(pl.col(S.BEIR_CORPUS_ID).rle())
            .unnest(S.BEIR_CORPUS_ID)
            .join(docs, left_on="value", right_on=P.DOCUMENT, how="left", maintain_order="left")
        )
        for length, doc_id, row in runs.select("len", "value", "doc").iter_rows():
            if doc_id == last:  # the document of the batch before goes on
                if row is not None:
                    counts[-1] += length
                continue
            last = doc_id
            if row is None:  # not a document of this corpus
                continue
            if has_text[row]:
                raise UsageError(
                    f"{sections}: the sections of {doc_id} are not together (the release "
                    "writes each document's sections in one run of rows)"
                )
            has_text[row] = True
            text_rows.append(row)
            counts.append(length)
    without = np.flatnonzero(~has_text)
    layout = PassageLayout(
        np.concatenate([np.asarray(text_rows, dtype=np.int64), without]),
        np.cumsum(np.concatenate([np.asarray(counts, dtype=np.int64), np.ones_like(without)])),
    )
    key = sha256_text(UNITS_FORMAT, corpus.sha256, sha256_file(sections), max_chars)
    return PassageUnits(corpus, sections, max_chars, layout, len(text_rows), key)
