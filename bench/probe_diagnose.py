"""Why the reading-free probe ranks as it does on a release: its features' gains, each
feature alone and each pair of its top features, told apart on the eval split.

Trains the release's probe (LightGBM lambdarank on the ``reading-free`` set, the ``[train]``
config) on the train split (a sample of whole surveys above ``--max-rows``, the audit's
rule), then prints

* the gain of every feature in the trained booster;
* per feature alone, the mean per-survey AUC of positives (label >= 1) against hard
  negatives (label 0) on the eval split, folded to ``max(auc, 1 - auc)`` (a model learns
  either direction);
* per pair of the ``--top`` features by gain, the same AUC of a LightGBM trained on that
  pair alone;
* the first two again by survey size (tertiles of list length);
* the nDCG@10 of the probe and of BM25 on the graded labels, on binary labels and among the
  positives alone, which says whether the probe wins by finding positives or by ordering
  the tiers;
* the same without each kind of feature (citations, dates, format, other metadata).

Usage: ``python bench/probe_diagnose.py bench_out/scale/n300000/release``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.core.config import load_config  # noqa: E402
from pipeline.evaluate.scoring.compute import per_survey_metrics  # noqa: E402
from pipeline.evaluate.scoring.measures import ndcg_name  # noqa: E402
from pipeline.rank.features import (  # noqa: E402
    FEATURES,
    READING_FREE_SET,
    compute_features,
    feature_set,
)
from pipeline.rank.release import query_sizes, read_judgments, read_view  # noqa: E402
from pipeline.rules.audit_sample import sample_surveys  # noqa: E402


def _sample(release: Path, split: str, max_rows: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    chosen = sample_surveys(query_sizes(release, split), max_rows)
    return read_view(release, split, chosen), read_judgments(release, split, chosen)


def ndcg_parts(test: pl.DataFrame, score: str) -> dict[str, float]:
    """Mean nDCG@10 of ``score`` on the graded labels, on the labels made binary (a positive
    against a negative), and among the positives alone (the order of the tiers)."""
    name = ndcg_name(10)
    run = test.select("survey_id", "candidate_id", "label", pl.col(score).alias("score"))
    views = {
        "graded": run,
        "binary": run.with_columns((pl.col("label") >= 1).cast(pl.Int64).alias("label")),
        "tiers": run.filter(pl.col("label") >= 1),
    }
    return {k: float(per_survey_metrics(v, [name])[name].mean()) for k, v in views.items()}


def per_survey_auc(frame: pl.DataFrame, column: str) -> float:
    """Mean over surveys with both classes of the folded Mann-Whitney AUC of ``column``."""
    ranked = frame.filter(pl.col(column).is_not_null()).with_columns(
        pl.col(column).rank("average").over("survey_id").alias("_r"),
        (pl.col("label") >= 1).alias("_y"),
    )
    per = (
        ranked.group_by("survey_id")
        .agg(
            pl.col("_y").sum().alias("p"),
            (~pl.col("_y")).sum().alias("n"),
            pl.col("_r").filter(pl.col("_y")).sum().alias("rs"),
        )
        .filter((pl.col("p") > 0) & (pl.col("n") > 0))
    )
    auc = (pl.col("rs") - pl.col("p") * (pl.col("p") + 1) / 2) / (pl.col("p") * pl.col("n"))
    value = float(per.select(auc.mean()).item()) if per.height else 0.5
    return max(value, 1 - value)


def ablations(names: list[str]) -> dict[str, list[str]]:
    """The probe's features by kind (:data:`pipeline.rank.features.FEATURES`), dates apart."""
    kinds: dict[str, list[str]] = {}
    for f in FEATURES:
        if f.name in names:
            kind = "dates" if f.name in ("age_days", "relative_date_gap_days") else f.kind
            kinds.setdefault(kind, []).append(f.name)
    return kinds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("release", type=Path)
    ap.add_argument("--max-rows", type=int, default=500_000)
    ap.add_argument("--top", type=int, default=6)
    args = ap.parse_args()
    import lightgbm as lgb

    cfg = load_config(None).train
    names = list(feature_set(READING_FREE_SET))
    data = {}
    for split in ("train", "eval"):
        view, judged = _sample(args.release, split, args.max_rows)
        feats = compute_features(view, names).join(judged, on=["survey_id", "candidate_id"])
        data[split] = feats.sort("survey_id", "candidate_id")
    train, test = data["train"], data["eval"]
    groups = train.group_by("survey_id", maintain_order=True).len()["len"].to_list()

    def fit(cols: list[str]) -> lgb.Booster:
        ds = lgb.Dataset(train.select(cols).to_numpy(), label=train["label"].to_numpy(),
                         group=groups, feature_name=cols)  # fmt: skip
        params = {"objective": "lambdarank", "verbosity": -1, "seed": cfg.seed,
                  "num_threads": 1, "deterministic": True}  # fmt: skip
        return lgb.train(params, ds, num_boost_round=100)

    def fitted_auc(cols: list[str]) -> float:
        booster = fit(cols)
        scored = test.with_columns(pl.Series("_s", booster.predict(test.select(cols).to_numpy())))
        return per_survey_auc(scored, "_s")

    booster = fit(names)
    gains = dict(zip(names, booster.feature_importance("gain"), strict=True))
    print(f"train {train.height:,} rows, eval {test.height:,} rows")
    print(f"all {len(names)} features: hard-negative AUC {fitted_auc(names):.3f}")
    bm25 = compute_features(_sample(args.release, "eval", args.max_rows)[0], ["bm25"])
    probe = test.with_columns(pl.Series("_s", booster.predict(test.select(names).to_numpy())))
    probe = probe.join(bm25, on=["survey_id", "candidate_id"], how="left")
    for system, column in (("probe", "_s"), ("bm25", "bm25")):
        parts = ndcg_parts(probe, column)
        print(f"  {system:>5} nDCG@10: " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))
    print("\nthe probe without one kind of feature:")
    for kind, dropped in ablations(names).items():
        cols = [n for n in names if n not in dropped]
        scored = test.with_columns(pl.Series("_s", fit(cols).predict(test.select(cols).to_numpy())))
        parts = ndcg_parts(scored, "_s")
        print(f"  -{kind:<10} AUC {per_survey_auc(scored, '_s'):.3f}, nDCG@10 "
              + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))  # fmt: skip
    print(f"\n{'gain':>12} {'alone':>6}  feature")
    for name in sorted(names, key=lambda n: -gains[n]):
        print(f"{gains[name]:12.1f} {per_survey_auc(test, name):6.3f}  {name}")
    top = sorted(names, key=lambda n: -gains[n])[: args.top]
    print("\npairs of the top features (LightGBM on the pair alone):")
    for a, b in itertools.combinations(top, 2):
        print(f"  {fitted_auc([a, b]):.3f}  {a} + {b}")
    sizes = test.group_by("survey_id").len()
    cuts = sizes["len"].quantile(1 / 3), sizes["len"].quantile(2 / 3)
    print(f"\nby survey size (list length tertiles at {cuts[0]:.0f}, {cuts[1]:.0f}):")
    for lo, hi, label in (
        (0, cuts[0], "short"),
        (cuts[0], cuts[1], "middle"),
        (cuts[1], 1e12, "long"),
    ):
        ids = sizes.filter((pl.col("len") > lo) & (pl.col("len") <= hi))["survey_id"]
        part = test.filter(pl.col("survey_id").is_in(ids.implode()))
        print(f"  {label:>6}: {ids.len():5} surveys, " + ", ".join(
            f"{n} {per_survey_auc(part, n):.3f}" for n in top[:2]))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
