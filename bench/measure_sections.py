"""Print the issue-11 figures on the real sample (tests/fixtures): structure changes,
role changes of the real headings, and 2024-vs-2022 label agreement.

    .venv/bin/python bench/measure_sections.py

The "before" figures of the card (commit 40a3633, before issue 11) were measured with
the same extract/works/surveys/labels runs; this script needs the issue-11 reader.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
import tempfile
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.cli import main  # noqa: E402
from pipeline.corpus.layout import to_2024_layout  # noqa: E402
from pipeline.stages.extract.records import DECODER  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
SAMPLE = FIXTURES / "unarxive-2022-sample" / "arXiv_src_2212_086.jsonl.gz"
ALL_AS_SURVEYS = (
    '[surveys]\ncategory_prefix = ""\nextra_title_cues = ["."]\nmin_resolved_refs = 1\n'
)


def structure_changes() -> None:
    """Occurrences whose top-level section differs from the old sec_type-order rule."""
    moved = {"dotted": 0, "restarted numbers": 0, "letters": 0}
    occurrences, papers = 0, set()
    for line in gzip.open(SAMPLE):
        rec = DECODER.decode(line)
        occs = occurrences(rec)
        bib = rec.bib_entries or {}
        old_top = None
        for i, o in enumerate(occs):
            if o.unnamed:
                continue
            if o.level == 1 or old_top is None:
                old_top = i
            if o.top != old_top:
                occurrences += 1
                papers.add(rec.metadata.id)
                kind = (
                    "dotted"
                    if "." in o.number
                    else "letters"
                    if o.number[:1].isalpha()
                    else "restarted numbers"
                )
                moved[kind] += sum(1 for rid in o.cited if rid in bib)
    print(
        f"structure: {occurrences} occurrences in {len(papers)} papers changed top-level section;"
    )
    print(f"  cite spans moved: {moved}")


def heading_roles() -> None:
    with (FIXTURES / "real_headings.tsv").open(encoding="utf-8") as f:
        rows = list(
            csv.DictReader(
                (x for x in f if not x.startswith("#")),
                delimiter="\t",
                quoting=csv.QUOTE_NONE,
                escapechar="\\",
            )
        )
    inst = [r for r in rows if r["sec_type"] != "(unnamed)"]
    changed = [r for r in inst if r["role_before"] != r["expected_role"]]
    print(f"heading roles: {len(changed)}/{len(inst)} changed ({len(changed) / len(inst):.3f})")


def agreement(tmp: Path, roles: str = "") -> None:
    recs = [json.loads(x) for x in gzip.open(SAMPLE)]
    for name, survey_cfg in (
        ("the survey 2212.11774", ""),
        ("all papers as surveys", ALL_AS_SURVEYS),
    ):
        cfg = tmp / f"{name[:3]}{len(roles)}.toml"
        cfg.write_text(roles + survey_cfg)
        labels = {}
        for layout, rs in (("2022", recs), ("2024", [to_2024_layout(r) for r in recs])):
            src = tmp / f"in{layout}" / "s.jsonl"
            src.parent.mkdir(exist_ok=True)
            src.write_text("".join(json.dumps(r) + "\n" for r in rs))
            out = tmp / f"o{layout}{name[:3]}{len(roles)}"
            args = ["--config", str(cfg)]
            assert (
                main(["extract", "--input", str(src), "--out", str(out), "--workers", "1", *args])
                == 0
            )
            for stage in ("works", "surveys", "labels"):
                assert main([stage, "--out", str(out), *args]) == 0
            labels[layout] = pl.read_parquet(out / "labels" / "labels.parquet")
        j = labels["2022"].join(labels["2024"], on=["survey_id", "work_id"], suffix="_24")
        same = int((j["label"] == j["label_24"]).sum())
        moves = (
            j.filter(pl.col("label") != pl.col("label_24"))
            .group_by("label", "label_24")
            .len()
            .sort("label", "label_24")
            .rows()
        )
        print(f"agreement {roles.strip().replace(chr(10), ' ') or '(defaults)'}, {name}: {same}/{j.height} "
              f"({same / j.height:.3f}); (2022 tier, 2024 tier, n): {moves}")  # fmt: skip


if __name__ == "__main__":
    import logging

    logging.disable(logging.INFO)
    structure_changes()
    heading_roles()
    with tempfile.TemporaryDirectory() as d:
        agreement(Path(d))
        agreement(Path(d), "[roles]\nbackground_run_2024 = true\n")
