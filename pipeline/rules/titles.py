"""Title keys: identity of a cited work from its title when a bib entry carries no identifier.

In the real 2022 sample only 41% of bib entries carry an identifier (71% in CS
papers), so identity by identifier alone misses most of a bibliography, and a work a
survey cites without an identifier could become that survey's hard negative. Titles
recover part of it.

**Key.** A title's key is its text NFKD-normalised, accents dropped, lower-cased,
every run of non-letters/digits replaced by one space: ``"Legion: Massively
Composable Fuzzing"`` -> ``"legion massively composable fuzzing"``.

**Titles in raw references.** There is no reliable field split in a raw reference
(real styles seen in the sample: ``A. B, C. D, and E. F, “Title,” Venue 70, 3214
(1979).``, ``A B and C D. Title. In Proceedings of ...``, ``A, B., and C, D. Title.
Journal 45 (1997)``, ``A B, Title, Journal 14, 595 (2018).``), so every raw string
is cut into *segments* at quotes, sentence ends (``. ``, ``? ``, ``! ``), ``; `` and,
in a second cut, also at ``, ``. A segment is *title-like* when its key has at least
:data:`MIN_WORDS` words and :data:`MIN_CHARS` characters, no venue or publisher word
(:data:`VENUE_WORDS`), at most a quarter of digit-only words (volume/page runs), at
most a fifth of one-letter words (initials; a letter joined by "&", ``D&c``, is none),
does not start with "and " and does not
hold "et al" (author lists), and the segment itself holds fewer than two commas
(an author list cut only at sentence ends). An entry's *title key* is its longest
title-like segment: a quoted one first (``“Title,”``, ``"Title"``, LaTeX
````Title,''``), else one of the cut at commas too, else one of the cut without
commas (first on ties; ``A, B, and C. Yuan, Title, Journal`` would otherwise glue a
name to the title); all its title-like segments of every cut are its *segment keys*.
The LNCS author end ``D.A.: Title`` is a cut too. A title holding a question is one
segment across its ``? `` when the part after it is title-like on its own (``Where should the
bugs be fixed? More accurate ...``; ``Is attention interpretable? In ACL`` stays cut). A
segment whose key opens as a container does (``in ...``, ``advances in ...``: ``In Advances
in Neural Information Processing Systems``, APA's ``Advances in Neural ..., 30``) is ranked
after every other title-like segment of its string, whatever its length.

Measured on 100 real raw references of the 2022 sample, titles written by hand
(``tests/fixtures/reference_titles.tsv``, ``reference_titles_2.tsv``;
``tests/test_no_reading_shortcuts.py`` prints the figures): 55 of the 56 titled ones
right, one missed, one spurious key among the 44 without a title. On all 1,786 real bib
strings of the sample 59% give a title key. Per citation style
(``tests/fixtures/reference_styles.tsv``: 45 references in nine styles, titles by hand;
``bench/title_styles.py``): all 45 right; 35 right before the question and container
rules, 44 before the Vancouver rule (the abbreviated ``Adv Neural Inf Process Syst. 2017;30``
is longer than its title ``Attention is all you need``, so it was the key). The question
and container rules change 15 title keys of the 1,786 real strings: 10 venues or cut
titles become the title, 5 strings naming no title stay without one. The Vancouver rule
matches 8 of the real strings (biophysics citations in NLM style) and changes none of
their keys: their titles are longer than their journals.

**Display.** The title key of a work outside the corpus (the most common one among its
citing entries: ``works.parsed_title``) is also the text the release shows for it: it
keeps no citing paper's quotes, casing, authors, venue or tails.

**Use.** ``works`` links an entry without identifier to a work when one of its
segment keys equals the key of a corpus paper's title, or when its title key equals
the title key of entries with identifiers elsewhere; a key shared by two works links
nothing (ambiguous). ``negatives`` never draws a candidate whose title keys equal a
segment key of any raw string of the survey, whatever resolution reached.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.schema import RAW_TITLE_KEY, TITLE, WORK_ID
from pipeline.core.schema import TITLE_KEY as KEY

MIN_WORDS = 3
MIN_CHARS = 15
SEGMENT = "_segment"
SEGMENT_RANK = "_segment_rank"
# Whole words that mark a venue, publisher, locator or author list, never a title.
VENUE_WORDS = (
    "proceedings proc conference conf journal transactions trans workshop symposium "
    "arxiv preprint vol volume pp pages press publishers publisher springer elsevier "
    "ieee acm editor editors eds lecture notes university thesis retrieved accessed "
    "available online http https www doi isbn tech rep letters lett phys rev"
).split()
_STRONG = r"[“”\"]|``|''|\.:\s+|\.\s+|[?!;]\s+|\s\(\d{4}[a-z]?\)"
# a quoted title (IEEE and physics styles): “...”, "..." or LaTeX ``...''
_QUOTED = r"“[^”]+”|\"[^\"]+\"|``.+?''"
# a title holding a question (“Where should the bugs be fixed? More accurate ...”): one
# sentence across a "? ", kept only when the part after it is title-like too
_QUESTION = r"[^.?!;“”\"]+\?\s+[^.?!;“”\"]+"
# a key that opens as a container does: a venue (“In Advances in Neural ...”, APA's
# “Advances in Neural Information Processing Systems, 30”), ranked after every other
# title-like segment of its string
_CONTAINER = r"^(?:in|advances in) "
_WITH_COMMA = _STRONG + r"|,\s+"
_SEP = "\x1f"
_RAW_ID = "_raw_id"
_RAW = "_raw"
_LAST_USED = "_last_used"
_AFTER_QUESTION_KEY = "_after_question_key"
_PLACEHOLDER = r"\{\{[a-z]+:[^}]*\}\}"  # unarXive's {{formula:...}} / {{cite:...}} markers
# Vancouver's journal, abbreviated and followed by its locator ``2017;30:5998`` (NLM style:
# ``Title. Adv Neural Inf Process Syst. 2017;30:5998-6008.``): the sentence before a
# ``year;volume`` is the journal, never the title, and is cut out before segmenting (the
# abbreviation is as long as many titles, so the longest-segment rule cannot tell them apart)
_VANCOUVER_JOURNAL = r"(^|[.?!]\s+)[^.?!;“”\"]+?\.?\s+(\d{4}[a-z]?\s*;\s*\d)"
_VENUE = r"\b(?:" + "|".join(VENUE_WORDS) + r")\b"


def title_key(expr: pl.Expr) -> pl.Expr:
    """The key of a title (module docstring); empty strings become null."""
    key = (
        expr.str.normalize("NFKD")
        .str.replace_all(r"\p{M}+", "")
        .str.to_lowercase()
        .str.replace_all(r"[^\p{L}\p{N}]+", " ")
        .str.strip_chars()
    )
    return pl.when(key != "").then(key)


def title_like(segment: pl.Expr, key: pl.Expr) -> pl.Expr:
    """Whether a raw-string segment (and its key) looks like a title (module docstring)."""
    words = key.str.count_matches(" ") + 1
    digits = key.str.count_matches(r"\b\d+\b")
    # a letter joined to a word by "&" is part of a name ("D&c", "R&D"), not an initial: its
    # key splits it into one-letter words all the same
    letters = (
        key.str.count_matches(r"\b\p{L}\b")
        - segment.str.count_matches(r"\b\p{L}&")
        - segment.str.count_matches(r"&\p{L}\b")
    )
    return (
        (words >= MIN_WORDS)
        & (key.str.len_chars() >= MIN_CHARS)
        & ~key.str.contains(_VENUE)
        & (digits * 4 <= words)
        & (letters * 5 <= words)
        & ~key.str.starts_with("and ")
        & ~key.str.contains(r"\bet al\b")
        & (segment.str.count_matches(",") < 2)
    )


def _segments_text(raw: pl.Expr) -> pl.Expr:
    """A raw string without what is never part of a title: placeholders, Vancouver's journal."""
    return raw.str.replace_all(_PLACEHOLDER, " ").str.replace_all(_VANCOUVER_JOURNAL, "${1}${2}")


def segment_keys(lf: pl.LazyFrame, raw: str, keys: list[str]) -> pl.LazyFrame:
    """``(*keys, title_key, _segment_rank)``: the title-like segment keys of each raw string.

    ``_segment_rank`` is 0 for the entry's title key (module docstring) and 1 for
    the others. Each key appears once per row of ``lf``.
    """

    def cut(pattern: str, order: int) -> pl.LazyFrame:
        return (
            lf.select(
                *keys,
                _segments_text(pl.col(raw))
                .str.replace_all(pattern, _SEP)
                .str.split(_SEP)
                .alias(SEGMENT),
            )
            # a segment's position in its raw string (one row per raw string, so no window)
            .with_columns(pl.int_ranges(0, pl.col(SEGMENT).list.len()).alias("_pos"))
            .explode(SEGMENT, "_pos")
            .with_columns(pl.lit(order).alias("_cut"))
        )

    quoted = (
        lf.select(
            *keys,
            _segments_text(pl.col(raw)).str.extract_all(_QUOTED).alias(SEGMENT),
        )
        .with_columns(pl.int_ranges(0, pl.col(SEGMENT).list.len()).alias("_pos"))
        .explode(SEGMENT, "_pos")
        .with_columns(
            # a sentence end inside the quotes ends the title (“Title. emnlp,” seen)
            pl.col(SEGMENT).str.strip_chars("“”\"`'").str.split(". ").list.first(),
            pl.lit(2).alias("_cut"),
        )
    )
    question = (
        lf.select(
            *keys,
            _segments_text(pl.col(raw)).str.extract_all(_QUESTION).alias(SEGMENT),
        )
        .with_columns(pl.int_ranges(0, pl.col(SEGMENT).list.len()).alias("_pos"))
        .explode(SEGMENT, "_pos")
        .with_columns(pl.lit(1).alias("_cut"))
    )
    segs = pl.concat([cut(_STRONG, 0), cut(_WITH_COMMA, 1), quoted, question]).with_columns(
        # a title's own trailing comma or period (“Title,”) is not part of it
        pl.col(SEGMENT).str.strip_chars(" ,.;:")
    )
    # Keys of distinct segments only: initials, years, venues and titles cited many times
    # repeat across entries (and a segment without a comma is in both cuts), and the key
    # (NFKD, regexes) is what costs; measured on the bench corpus, 6.5M segments -> 0.15M.
    after_question = pl.col(SEGMENT).str.split("? ").list.last()
    title_like_keys = (
        segs.select(pl.col(SEGMENT).unique())
        # both keys as columns before the filter: inlined there, each was computed once per
        # use (title_like reads its key seven times), 90% of segment_keys' time
        .with_columns(
            title_key(pl.col(SEGMENT)).alias(KEY),
            title_key(after_question).fill_null("").alias(_AFTER_QUESTION_KEY),
        )
        .filter(
            pl.col(KEY).is_not_null()
            & title_like(pl.col(SEGMENT), pl.col(KEY))
            & (
                ~pl.col(SEGMENT).str.contains(r"\?\s")
                | title_like(after_question, pl.col(_AFTER_QUESTION_KEY))
            )
        )
        .drop(_AFTER_QUESTION_KEY)
    )
    segs = segs.join(title_like_keys, on=SEGMENT, how="inner")
    longest = pl.col(KEY).str.len_chars().cast(pl.Int64)
    return (
        segs.sort([*keys, "_cut", "_pos"])
        .group_by(*keys, KEY, maintain_order=True)
        .agg(pl.col("_cut").max(), pl.col("_pos").min())
        .with_columns(
            pl.int_range(pl.len())
            .over(
                keys,
                order_by=[
                    -pl.col("_cut"),
                    pl.col(KEY).str.contains(_CONTAINER),
                    -longest,
                    pl.col("_pos"),
                ],
            )  # fmt: skip
            .clip(0, 1)
            .cast(pl.Int8)
            .alias(SEGMENT_RANK)
        )
        .select(*keys, KEY, SEGMENT_RANK)
    )


def segment_keys_per_string(frame: pl.DataFrame, raw: str, keys: list[str]) -> pl.LazyFrame:
    """:func:`segment_keys` of ``frame``, computed once per distinct raw string.

    The rows are those of :func:`segment_keys` (in another order): an entry's segment
    keys and title key depend on its raw string only. Raw strings repeat (a paper
    cited many times in one style, duplicated bibliographies); measured on one
    25k-paper file of the bench corpus, 0.94M raw strings -> 0.11M distinct and
    7.5 s -> 1.8 s. ``frame`` is a DataFrame so that the numbering of the distinct
    strings is made once.
    """
    distinct = frame.select(pl.col(raw).drop_nulls().unique()).with_row_index(_RAW_ID)
    per_string = segment_keys(distinct.lazy(), raw, [_RAW_ID])
    return (
        frame.lazy()
        .select(*keys, raw)
        .join(distinct.lazy(), on=raw, how="inner")
        .join(per_string, on=_RAW_ID, how="inner")
        .select(*keys, KEY, SEGMENT_RANK)
    )


class SegmentKeyMemo:
    """:func:`segment_keys_per_string` over a sequence of frames (the reference files of a
    reduce), each distinct raw string's keys computed once across all of them.

    Raw strings repeat across files as within one (a work cited in one style by papers of
    many files): on the bench corpus the per-file distinct strings summed are 2.5 times the
    distinct strings of the whole corpus at 100k papers and 4.7 times at 300k, and their keys
    were 44% of the ``works`` stage's time at 300k. Held: each string seen, numbered, with
    its keys (none for a string without a title-like segment) and the last call that used
    it; over ``max_strings`` strings, the least recently used are dropped down to half of
    it. What is held changes only what is computed again, never a key. A call looks its
    strings up in the held ones once; the rest goes by number (hashing every held string
    once per lookup was a third of a call's time).
    """

    def __init__(self, max_strings: int) -> None:
        self.max_strings = max(max_strings, 1)
        self.calls = 0
        self.numbered = 0  # strings numbered so far (held or dropped)
        self.strings = pl.DataFrame(
            schema={_RAW: pl.String, _RAW_ID: pl.Int64, _LAST_USED: pl.Int64}
        )
        self.keys_of = pl.DataFrame(
            schema={_RAW_ID: pl.Int64, KEY: pl.String, SEGMENT_RANK: pl.Int8}
        )

    def keys(self, frame: pl.DataFrame, raw: str, keys: list[str]) -> pl.DataFrame:
        """:func:`segment_keys_per_string` of ``frame`` (the same rows, in another order)."""
        self.calls += 1
        looked = (
            frame.select(pl.col(raw).drop_nulls().unique().alias(_RAW))
            .join(self.strings.select(_RAW, _RAW_ID), on=_RAW, how="left")
        )  # fmt: skip
        seen = looked.filter(pl.col(_RAW_ID).is_not_null())
        new = (
            looked.filter(pl.col(_RAW_ID).is_null())
            .drop(_RAW_ID)
            .with_row_index(_RAW_ID, offset=self.numbered)
            .select(_RAW, pl.col(_RAW_ID).cast(pl.Int64))
        )
        self.numbered += new.height
        new_keys = segment_keys(new.lazy(), _RAW, [_RAW_ID]).collect()
        # own buffers: views into this file's strings would keep all of them alive
        self.keys_of = pl.concat([self.keys_of, _own_buffers(new_keys)])
        self.strings = pl.concat(
            [
                self.strings.with_columns(
                    pl.when(pl.col(_RAW_ID).is_in(seen[_RAW_ID].implode()))
                    .then(pl.lit(self.calls, pl.Int64))
                    .otherwise(pl.col(_LAST_USED))
                    .alias(_LAST_USED)
                ),
                _own_buffers(new.with_columns(pl.lit(self.calls, pl.Int64).alias(_LAST_USED))),
            ]
        )
        got = (
            frame.lazy()
            .select(*keys, pl.col(raw).alias(_RAW))
            .join(pl.concat([seen, new]).lazy(), on=_RAW, how="inner")
            .join(self.keys_of.lazy(), on=_RAW_ID, how="inner")
            .select(*keys, KEY, SEGMENT_RANK)
            .collect()
        )
        if self.strings.height > self.max_strings:
            self._forget()
        return got

    def _forget(self) -> None:
        """Keep the ``max_strings // 2`` most recently used strings (and their keys)."""
        kept = self.strings.sort(_LAST_USED, descending=True).head(self.max_strings // 2)
        self.strings = _own_buffers(kept)
        self.keys_of = _own_buffers(self.keys_of.join(kept.select(_RAW_ID), on=_RAW_ID, how="semi"))


def _own_buffers(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with buffers of its own: a string column picked from a larger table is views
    into that table's buffers, which stay alive while it does."""
    return pl.from_arrow(df.to_arrow())  # type: ignore[return-value]


def identifying_title_key(expr: pl.Expr) -> pl.Expr:
    """The key of a title long enough to identify a work (:data:`MIN_WORDS` words,
    :data:`MIN_CHARS` characters), else null."""
    key = title_key(expr)
    words = key.str.count_matches(" ") + 1
    return pl.when((words >= MIN_WORDS) & (key.str.len_chars() >= MIN_CHARS)).then(key)


def corpus_title_keys(corpus: pl.LazyFrame) -> pl.LazyFrame:
    """``(work_id, title_key)`` of the corpus papers' titles (long enough to identify a work)."""
    return corpus.select(WORK_ID, identifying_title_key(pl.col(TITLE)).alias(KEY)).drop_nulls(KEY)


def work_title_keys(works: pl.DataFrame, title: str, raw: str) -> pl.DataFrame:
    """``(work_id, title_key, raw_title_key)``, one row per row of ``works`` (one per work), in
    its order:
    the identifying key of the work's title (column ``title``) and the title key of its bib
    string (column ``raw``; null when it has none or gives none). What bibliography
    resolution keys a work by, for the release's works table and for a release without one.
    """
    raw_keys = (
        segment_keys_per_string(works.filter(pl.col(raw).fill_null("") != ""), raw, [WORK_ID])
        .filter(pl.col(SEGMENT_RANK) == 0)
        .select(WORK_ID, pl.col(KEY).alias(RAW_TITLE_KEY))
    )
    return (
        works.lazy()
        .select(WORK_ID, identifying_title_key(pl.col(title)).alias(KEY))
        .join(raw_keys, on=WORK_ID, how="left", maintain_order="left")
        .collect()
    )
