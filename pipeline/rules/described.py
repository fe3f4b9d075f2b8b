"""What a candidate is shown as, once OpenAlex has described it: one rule, one owner.

Every work's text comes from one source, in one form, whoever cited it:

* title: its OpenAlex record's title, else a corpus paper's own title, else the title parsed
  from the bib strings citing it (``works.parsed_title``, applied by
  :func:`pipeline.rules.visible.shown_title`);
* abstract: a corpus paper's arXiv abstract, else its OpenAlex record's abstract where the
  release carries it (:func:`carried_abstract`).

Abstracts. OpenAlex's data is CC0, but an abstract is the publisher's or the authors' text,
under their terms: OpenAlex itself ships it only as an inverted index. A release therefore
carries by default (``[openalex] abstracts = "open"``) the abstracts of works whose OpenAlex
location names a Creative Commons or public-domain licence, and for every other work only its
ids (``candidate_openalex_id``), from which ``/works/<id>`` gives the abstract to whoever has
the right to use it. ``"all"`` carries every abstract (for a build that is not published),
``"none"`` none.

``negatives`` (its strata: which candidates have an abstract) and ``release`` (the text
shown) both read works through :func:`described_works`, so the hard negatives are matched on
the text the release shows.

Where a shown text came from (:data:`TEXT_SOURCES`, column ``text_source``: the card's
"Candidate text" table counts rows by it): the source of the abstract when one is shown, else
of the title alone, else ``none``. It is labelled here, beside the rule that picks the text,
because the shown title alone cannot tell an OpenAlex title from a parsed one.
"""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S

# licences whose text may be redistributed with attribution (OpenAlex's license ids)
OPEN_LICENSE = r"^(cc-by|cc0|public-domain)"
TEXT_SOURCE = "text_source"
# an abstract (arXiv's for a corpus paper, else OpenAlex's), else a title alone (OpenAlex's,
# a corpus paper's own, the one parsed from bib strings), else nothing
TEXT_SOURCES = ("arxiv_abstract", "openalex_abstract", "openalex_title", "corpus_title",
                "parsed_title", "none")  # fmt: skip


def carried_abstract(policy: str) -> pl.Expr:
    """The OpenAlex abstract a release carries under ``policy`` (``[openalex] abstracts``),
    over the ``openalex`` records' columns ``oa_abstract`` and ``oa_license``."""
    abstract = pl.col(S.OA_ABSTRACT)
    if policy == "all":
        return abstract
    if policy == "none":
        return pl.lit(None, pl.String)
    is_open = pl.col(S.OA_LICENSE).fill_null("").str.to_lowercase().str.contains(OPEN_LICENSE)
    return pl.when(is_open).then(abstract)


def _text(col: str) -> pl.Expr:
    return pl.when(pl.col(col).fill_null("").str.strip_chars() != "").then(pl.col(col))


def described_works(works: pl.LazyFrame, records: pl.LazyFrame) -> pl.LazyFrame:
    """``works`` with ``title`` and ``abstract`` as the release shows them and their
    ``text_source`` (module docstring), and the record's judgment-side columns
    (``oa_answered_id``, venue, year, subfield, retracted; null without a record). ``works``:
    the ``works`` stage's table; ``records``: the ``openalex`` stage's."""
    texts = (S.ABSTRACT, S.OA_ABSTRACT, S.OA_TITLE, S.TITLE, S.PARSED_TITLE)
    source = pl.coalesce(
        *[pl.when(_text(c).is_not_null()).then(pl.lit(label))
          for c, label in zip(texts, TEXT_SOURCES, strict=False)],
        pl.lit(TEXT_SOURCES[-1]),
    )  # fmt: skip
    records = (
        records
        .filter(pl.col(S.OA_FOUND))
        .select(
            S.WORK_ID, S.OA_TITLE, S.OA_ABSTRACT, S.OA_ANSWERED_ID, S.OA_VENUE, S.OA_YEAR,
            S.OA_SUBFIELD, S.OA_RETRACTED,
        )
    )  # fmt: skip
    return (
        works.join(records, on=S.WORK_ID, how="left", maintain_order="left")
        .with_columns(
            source.alias(TEXT_SOURCE),
            pl.coalesce(_text(S.OA_TITLE), pl.col(S.TITLE)).alias(S.TITLE),
            pl.coalesce(_text(S.ABSTRACT), _text(S.OA_ABSTRACT)).alias(S.ABSTRACT),
            pl.col(S.OA_RETRACTED).fill_null(False),
        )
        .drop(S.OA_TITLE, S.OA_ABSTRACT)
    )
