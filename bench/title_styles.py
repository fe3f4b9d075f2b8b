"""How often the title parsed from a reference string is not the title, per citation style.

The parsed title (:mod:`pipeline.rules.titles`: an entry's title key) is what the release
shows for a work no OpenAlex record describes, so a key that is an author list or a venue
is a candidate text that is not a title. Measured on two hand-titled sets:

* ``tests/fixtures/reference_styles.tsv``: 45 references of well-known papers written out in
  nine styles (IEEE; ACM, year before the title; APA; natbib with authors joined by "and";
  LNCS; sentence case (Vancouver, Elsevier); arXiv exports; Chinese and accented names),
  the title of each written by hand;
* ``reference_titles.tsv`` and ``reference_titles_2.tsv``: 100 real raw references of the
  unarXive 2022 sample with their titles written by hand (empty when a reference names
  none), their style told by the marks they carry (:func:`real_style`).

Each reference's title key is one of: ``right``; ``author_list`` (wrong, and found in the
string before the title), ``venue`` (wrong, after it), ``partial`` (wrong, inside it: the
title was cut), ``missed`` (no key); for a reference without a title, ``spurious`` or
``none``. ``python bench/title_styles.py`` prints one table per set.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from pipeline.rules import titles as T

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
STYLES = FIXTURES / "reference_styles.tsv"
REAL = (FIXTURES / "reference_titles.tsv", FIXTURES / "reference_titles_2.tsv")
OUTCOMES = ("right", "author_list", "venue", "partial", "missed", "spurious", "none")
# marks of a real string's style, first match wins
_REAL_STYLES = (
    ("quoted (IEEE, physics)", r"“|``|\""),
    ("LNCS (authors end '.:')", r"\.:\s"),
    ("APA / Springer ((year) title)", r"\(\d{4}[a-z]?\)\.?\s+\p{Lu}"),
    ("ACM (year. title)", r"\.\s(?:19|20)\d\d[a-z]?\.\s"),
    ("authors joined by 'and'", r"\band\b"),
)


def real_style(raw: pl.Expr) -> pl.Expr:
    """A real string's style, told by the marks it carries (``other`` when none)."""
    out = pl.lit("other")
    for name, pattern in reversed(_REAL_STYLES):
        out = pl.when(raw.str.contains(pattern)).then(pl.lit(name)).otherwise(out)
    return out


def outcomes(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (``raw``, ``title``, ``style``) with the parsed ``key`` and its ``outcome``."""
    rows = rows.with_row_index("i")
    keys = (
        T.segment_keys(rows.lazy(), "raw", ["i"])
        .filter(pl.col(T.SEGMENT_RANK) == 0)
        .select("i", pl.col(T.KEY).alias("key"))
        .collect()
    )
    rows = rows.join(keys, on="i", how="left").with_columns(
        T.title_key(pl.col("title")).alias("want"), T.title_key(pl.col("raw")).alias("_whole")
    )
    out = []
    for want, key, whole in rows.select("want", "key", "_whole").iter_rows():
        if want is None:
            out.append("spurious" if key else "none")
        elif key is None:
            out.append("missed")
        elif key == want:
            out.append("right")
        elif key in want:
            out.append("partial")
        else:
            at, title_at = (whole or "").find(key), (whole or "").find(want)
            out.append("author_list" if 0 <= at < max(title_at, 0) else "venue")
    return rows.with_columns(pl.Series("outcome", out)).drop("i", "_whole")


def table(rows: pl.DataFrame) -> pl.DataFrame:
    """Per style: references, each outcome's count, and the share of titled references whose
    key is not their title (author list, venue or a cut title)."""
    counts = rows.group_by("style").agg(
        pl.len().alias("refs"), *[(pl.col("outcome") == o).sum().alias(o) for o in OUTCOMES]
    )
    titled = pl.sum_horizontal("right", "author_list", "venue", "partial", "missed")
    total = counts.select(pl.lit("ALL").alias("style"), pl.exclude("style").sum())
    return pl.concat([counts.sort("style"), total]).with_columns(
        ((pl.col("author_list") + pl.col("venue") + pl.col("partial")) / titled)
        .round(3)
        .alias("not_a_title_rate")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-wrong", action="store_true", help="print every wrong key")
    args = parser.parse_args(argv)
    styled = outcomes(pl.read_csv(STYLES, separator="\t", quote_char=None))
    real = pl.concat(
        [pl.read_csv(p, separator="\t", quote_char='"').select("raw", "title") for p in REAL]
    )
    real = outcomes(real.with_columns(real_style(pl.col("raw")).alias("style")))
    with pl.Config(tbl_rows=30, tbl_cols=20, tbl_width_chars=200):
        for name, rows in (("style set (hand-written)", styled), ("real strings", real)):
            print(f"## {name}\n{table(rows)}")
            if args.show_wrong:
                wrong = rows.filter(~pl.col("outcome").is_in(["right", "none"]))
                for style, outcome, key, want in wrong.select(
                    "style", "outcome", "key", "want"
                ).iter_rows():
                    print(f"  {style}: {outcome}: {key!r} (title: {want!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
