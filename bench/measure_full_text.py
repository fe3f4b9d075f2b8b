"""Print the full-text figures of the real sample (issue 51) that shape the bench corpus's
``section_texts`` (:mod:`bench.scale_corpus`: ``SECTIONS_PER_PAPER``, ``SECTION_CHARS``,
``TOKENS_PER_1000_CHARS``, ``REAL_BYTES_PER_CHAR``) and the licences of the sample.

    .venv/bin/python bench/measure_full_text.py

It runs ``extract`` on the real records (tests/fixtures: the 49 papers of the 2022 sample as
they are and converted to the 2024 layout, and the 2024 preview paper), then reads
``section_texts``: sections per paper, characters per section, neutral tokens per 1,000
characters, and the Parquet bytes per character of the texts written as the release's view
writes them (zstd, 2,000-row groups).
"""

from __future__ import annotations

import gzip
import io
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.cli import main  # noqa: E402
from pipeline.corpus.layout import to_2024_layout  # noqa: E402
from pipeline.stages.corpus_sections import GROUP_ROWS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
SAMPLE = FIXTURES / "unarxive-2022-sample" / "arXiv_src_2212_086.jsonl.gz"
PREVIEW = FIXTURES / "unarxive-2024-preview" / "preview.jsonl"
TOKENS = ("[CITATION]", "[FORMULA]", "[FIGURE]", "[TABLE]")


def figures(texts: pl.DataFrame) -> dict[str, float]:
    """The shape of one ``section_texts`` table."""
    per_paper = texts.group_by("paper_id").agg(pl.len().alias("n"))
    lengths = texts["text"].str.len_chars()
    chars = int(lengths.sum())
    buf = io.BytesIO()
    pq.write_table(
        pa.table({"text": texts["text"].to_arrow()}),
        buf,
        compression="zstd",
        row_group_size=GROUP_ROWS,
        use_dictionary=False,
    )
    return {
        "papers": per_paper.height,
        "sections": texts.height,
        "sections_per_paper": round(per_paper["n"].mean(), 2),
        "sections_per_paper_sd": round(per_paper["n"].std() or 0.0, 2),
        "chars_per_section": round(lengths.mean()),
        "chars_per_section_median": round(lengths.median()),
        "chars_per_section_sd": round(lengths.std() or 0.0),
        "chars_per_section_max": int(lengths.max()),
        "chars_per_paper": round(chars / per_paper.height),
        **{
            f"{t} per 1000 chars": round(
                int(texts["text"].str.count_matches(t, literal=True).sum()) / chars * 1000, 2
            )
            for t in TOKENS
        },
        "zstd_bytes_per_char": round(buf.tell() / chars, 3),
    }


def run(tmp: Path) -> None:
    records = [json.loads(x) for x in gzip.open(SAMPLE)]
    preview = [x.strip() for x in PREVIEW.read_text(encoding="utf-8").splitlines() if x.strip()]
    licences = Counter(r["metadata"].get("license") for r in records)
    licences.update(json.loads(x)["metadata"].get("license") for x in preview)
    print(f"licences of the sample: {dict(licences.most_common())}")
    for name, lines in (
        ("2022 layout", [json.dumps(r) for r in records]),
        ("2022 sample in the 2024 layout", [json.dumps(to_2024_layout(r)) for r in records]),
        ("2024 preview", preview),
    ):
        folder = tmp / name.replace(" ", "_")
        src = folder / "in" / "sample.jsonl"
        src.parent.mkdir(parents=True)
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out = folder / "out"
        if main(["extract", "--input", str(src), "--out", str(out), "--workers", "1"]) != 0:
            raise SystemExit(f"extract failed on {name}")
        texts = pl.read_parquet(out / "extract" / "section_texts" / "*.parquet")
        print(f"{name}: {figures(texts)}")


if __name__ == "__main__":
    import logging

    logging.disable(logging.INFO)
    with tempfile.TemporaryDirectory() as d:
        run(Path(d))
