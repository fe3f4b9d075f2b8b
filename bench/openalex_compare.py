"""Compare finished work directories (e.g. a scale release without and with its OpenAlex
snapshot, or with ``[negatives] subfield_as_field`` off and on): one JSON object per
directory and a Markdown table of the figures docs/scale.md quotes.

Per directory: the OpenAlex record rates, the candidate-text sources (rows per source, positives
and negatives), the leak audit (verdict, features outside the bounds, the reading-free probe
against BM25), evaluate's metadata probe, the baselines' nDCG@10, AP and hard-negative AUC,
the negatives (count, candidates, sources, match rounds, share outside arXiv, in-domain shares),
the matched strata, and the AUC of the judgment-side OpenAlex columns (year, venue, subfield)
were they shown: what item 4 of issue 36 asks before any of them joins the candidates view.

Usage: ``python bench/openalex_compare.py bench_out/scale/n20000 bench_out/scale/n20000oa``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_scale import audit_lines, audit_summary  # noqa: E402
from pipeline.core import schema as S  # noqa: E402
from pipeline.rules import visible as V  # noqa: E402
from pipeline.rules.aliases import id_kind  # noqa: E402

SYSTEMS = ("random", "bm25", "lgbm", "lgbm-metadata", "lgbm-reading-free")
METRICS = ("nDCG@10", "AP", "hard_negative_auc")


def auc(frame: pl.DataFrame, value: str) -> dict[str, float | None]:
    """Pooled and mean per-survey AUC of ``value`` for label >= 1 against label 0 (ties one
    half), over rows where it is not null."""
    rows = frame.filter(pl.col(value).is_not_null()).select(
        S.SURVEY_ID, (pl.col(S.LABEL) >= 1).alias("y"), pl.col(value).cast(pl.Float64).alias("v")
    )

    def one(g: pl.DataFrame) -> float | None:
        pos, neg = int(g["y"].sum()), int((~g["y"]).sum())
        if not pos or not neg:
            return None
        r = g["v"].rank("average")
        return (float(r.filter(g["y"]).sum()) - pos * (pos + 1) / 2) / (pos * neg)

    per = [one(g) for _, g in rows.group_by(S.SURVEY_ID)]
    per = [a for a in per if a is not None]
    pooled = one(rows)
    return {
        "pooled": None if pooled is None else round(pooled, 4),
        "per_survey": round(sum(per) / len(per), 4) if per else None,
    }


def openalex_columns_audit(rows: pl.DataFrame) -> dict[str, Any]:
    """AUCs of the judgment-side OpenAlex columns, were they in the candidates view."""
    missing = {
        c: pl.col(c).fill_null("") == ""
        for c in (S.CANDIDATE_VENUE, S.CANDIDATE_SUBFIELD)
    }  # fmt: skip
    frame = rows.with_columns(
        pl.col(S.CANDIDATE_YEAR).alias("candidate_year"),
        pl.col(S.CANDIDATE_YEAR).is_null().alias("candidate_year_missing"),
        missing[S.CANDIDATE_VENUE].alias("candidate_venue_missing"),
        (pl.col(S.CANDIDATE_VENUE) == "arXiv (Cornell University)").alias("venue_is_arxiv"),
        missing[S.CANDIDATE_SUBFIELD].alias("candidate_subfield_missing"),
        # relative: the share of the survey's list sharing the candidate's subfield / venue
        pl.len().over(S.SURVEY_ID, S.CANDIDATE_SUBFIELD).truediv(pl.len().over(S.SURVEY_ID))
        .alias("subfield_share_in_list"),
        pl.len().over(S.SURVEY_ID, S.CANDIDATE_VENUE).truediv(pl.len().over(S.SURVEY_ID))
        .alias("venue_share_in_list"),
        (pl.col(S.SURVEY_DATE).dt.year() - pl.col(S.CANDIDATE_YEAR)).alias("year_gap"),
    )  # fmt: skip
    names = ("candidate_year", "candidate_year_missing", "candidate_venue_missing",
             "venue_is_arxiv", "candidate_subfield_missing", "subfield_share_in_list",
             "venue_share_in_list", "year_gap")  # fmt: skip
    return {n: auc(frame, n) for n in names}


def strata(rows: pl.DataFrame) -> dict[str, Any]:
    """Distinct strata (text kind, in-domain, age, prior citations, prior citing surveys) of
    the positives and of the negatives, and the pooled strata whose counts agree."""
    has_abstract = pl.col(S.CANDIDATE_ABSTRACT).fill_null("") != ""
    has_title = pl.col(S.CANDIDATE_TITLE).fill_null("") != ""
    kind = (
        pl.when(has_abstract)
        .then(pl.lit("abstract"))
        .otherwise(
            pl.when(has_title).then(pl.lit("title_")).otherwise(pl.lit("none_"))
            + id_kind(pl.col(S.CANDIDATE_ID)).fill_null("other")
        )
    )
    frame = rows.with_columns(
        kind.alias(V.TEXT_KIND), pl.col(S.CANDIDATE_DATE).alias(S.KNOWN_DATE),
        pl.col(S.CANDIDATE_PRIOR_CITATIONS), pl.col(S.N_CITING_SURVEYS),
    ).with_columns(V.stratum_columns())  # fmt: skip
    keys = list(V.STRATUM_COLUMNS)
    counts = frame.group_by(keys).agg(
        (pl.col(S.LABEL) >= 1).sum().alias("p"), (pl.col(S.LABEL) == 0).sum().alias("n")
    )
    return {
        "strata_with_positives": int((counts["p"] > 0).sum()),
        "strata_with_negatives": int((counts["n"] > 0).sum()),
        "strata_with_both": int(((counts["p"] > 0) & (counts["n"] > 0)).sum()),
        "strata_equal_counts": int((counts["p"] == counts["n"]).sum()),
    }


def summary(work: Path) -> dict[str, Any]:
    meta = json.loads((work / "release" / "eval_metadata.json").read_text())
    results = json.loads((work / "eval" / "eval_results.json").read_text())
    rows = pl.read_parquet(sorted((work / "release").glob("*_survey_reading_lists.parquet")))
    neg = rows.filter(pl.col(S.LABEL) == 0)
    pos = rows.filter(pl.col(S.LABEL) >= 1)
    text: dict[str, dict[str, int]] = {}
    for split in meta["candidate_text"].values():
        for source, c in split.items():
            t = text.setdefault(source, {"positives": 0, "negatives": 0})
            t["positives"] += c["positives"]
            t["negatives"] += c["negatives"]
    negatives = meta["negatives"]
    outside = id_kind(pl.col(S.CANDIDATE_ID)) != "arxiv"
    return {
        "work": str(work),
        "openalex": {
            k: meta["openalex"].get(k)
            for k in (
                "works",
                "works_with_record",
                "title_rate",
                "abstract_rate",
                "abstract_carried_rate",
                "subfield_rate",
            )
        },  # fmt: skip
        "candidate_text": text,
        "audit": audit_summary(work / "release" / "eval_metadata.json"),
        "audit_outside_within_chance": meta["leak_audit"].get("outside_bounds_within_chance"),
        "metadata_probe": results.get("leak_probe"),
        "baselines": {
            s: {m: round(results["systems"][s][m]["mean"], 4) for m in METRICS}
            for s in SYSTEMS
            if s in results["systems"]
        },
        "negatives": {
            "negatives": negatives["negatives"],
            "negative_candidates": negatives["negative_candidates"],
            "shortfall": negatives["shortfall"],
            "by_source": negatives["negatives_by_source"],
            "by_match_round": negatives["negatives_by_match_round"],
            "outside_arxiv_share": round(neg.select(outside.mean()).item(), 4),
            "positives_outside_arxiv_share": round(pos.select(outside.mean()).item(), 4),
            "in_domain_share_negatives": round(neg[S.IN_DOMAIN].mean(), 4),
            "in_domain_share_positives": round(pos[S.IN_DOMAIN].mean(), 4),
            "in_domain_outside_arxiv_negatives": int(neg.filter(outside)[S.IN_DOMAIN].sum()),
            "in_domain_outside_arxiv_positives": int(pos.filter(outside)[S.IN_DOMAIN].sum()),
        },
        "strata": strata(rows),
        "openalex_columns_auc": openalex_columns_audit(rows),
    }


def main(argv: list[str]) -> int:
    got = [summary(Path(a)) for a in argv]
    for g in got:
        print(json.dumps(g, sort_keys=True))
        for line in audit_lines(g["audit"]):
            print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
