"""Render the measured figures of ``bench/results/*.json`` into ``docs/``.

A doc marks where a benchmark's figures go with ``<!-- figures:NAME -->`` ...
``<!-- /figures:NAME -->``; this script replaces what is between the two with the block
:data:`BLOCKS` renders from the file the benchmark wrote (:mod:`bench.results`). Prose
around a block says what was measured, never how much, so no figure is typed twice.

    python bench/render_docs.py           # rewrite the blocks (make docs)
    python bench/render_docs.py --check   # exit 1, naming the doc, when a block is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.results import RESULTS_DIR, read  # noqa: E402

DOCS_DIR = ROOT / "docs"
_BLOCK = re.compile(r"(<!-- figures:(\w+) -->\n)(.*?)(<!-- /figures:\2 -->)", re.S)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _papers(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def _source(record: dict[str, Any]) -> str:
    m = record.get("machine") or {}
    where = f"{m.get('cpus')} cores, {m.get('memory_gb')} GB"
    load = m.get("load_average")
    if load:
        where += f", load average {load[0]} at the end"
    note = f"; {record['transcribed']}" if record.get("transcribed") else ""
    return f"`{record.get('command')}`, {record.get('measured')}, on {where}{note}."


def render_scale(record: dict[str, Any]) -> str:
    """``make bench-scale``: every reduce stage at every size, totals, growth, batch check."""
    from pipeline.stages import STAGES

    f = record["figures"]
    sizes = f["sizes"]
    # the results file's keys are sorted: show the stages in pipeline order
    order = [s.name for s in STAGES if s.name in f["stages"]]
    stages = {name: f["stages"][name] for name in [*order, *sorted(set(f["stages"]) - set(order))]}
    from bench.bench_scale import ratio_cell, total_ratios

    # runs made before the reference queries (bench/stage_references.py) have no ratio column
    with_ref = any("reference" in e for entries in stages.values() for e in entries)
    rows = []
    for stage, entries in stages.items():
        cells = []
        for e in entries:
            if "rows_out" not in e:
                cells.append(e.get("error") or "skipped")
                continue
            cpu = e.get("cpu_seconds")
            cells.append(
                f"{e['seconds']:,.0f}" + (f" ({cpu:,.0f})" if cpu is not None else "")
                + f" / {e['peak_rss_mb']:,.0f} / {e['rows_out']:,}"
                + (f" / {ratio_cell(e)}" if with_ref else "")
            )  # fmt: skip
        rows.append([stage, *cells])
    wall = [sum(stages[s][i].get("seconds", 0) for s in stages) for i in range(len(sizes))]
    cpu = [sum(stages[s][i].get("cpu_seconds") or 0 for s in stages) for i in range(len(sizes))]
    totals = [f"{w:,.0f} s ({c:,.0f})" for w, c in zip(wall, cpu, strict=True)]
    if with_ref:
        totals = [
            f"{t} / "
            + ratio_cell({"ratio_to_reference": total_ratios([e[i] for e in stages.values()])})
            for i, t in enumerate(totals)
        ]
    rows.append(["all reduce", *totals])
    table = _table(["stage", *(_papers(n) for n in sizes)], rows)
    last = len(sizes) - 1
    peak_stage = max(stages, key=lambda s: stages[s][last].get("peak_rss_mb", 0))
    text = [
        "Wall seconds (CPU seconds) / peak RSS MB / rows out"
        + (
            " / the stage's wall time (CPU time) as a multiple of its reference query's"
            " (`bench/stage_references.py`, run right after it on the same work dir)"
            if with_ref
            else ""
        )
        + ", per stage and corpus size:",
        "",
        table,
        "",
        f"At {_papers(sizes[last])} papers the reduce stages take {wall[last] / 60:.0f} minutes "
        f"together ({cpu[last] / 60:.0f} CPU minutes); the largest peak is `{peak_stage}`'s, "
        f"{stages[peak_stage][last]['peak_rss_mb'] / 1000:.1f} GB.",
    ]
    if last:
        ratio = sizes[last] / sizes[last - 1]
        grow = []
        for stage, entries in stages.items():
            a, b = entries[last - 1], entries[last]
            if "rows_out" in a and "rows_out" in b and a["seconds"]:
                grow.append(
                    f"{stage} {b['seconds'] / a['seconds']:.2f}x "
                    f"({b['peak_rss_mb'] / a['peak_rss_mb']:.2f}x memory)"
                )
        text.append(
            f"From {_papers(sizes[last - 1])} to {_papers(sizes[last])} papers "
            f"({ratio:.1f}x the input), time grows: " + ", ".join(grow) + "."
        )
    from bench.bench_scale import FULL_CORPUS_PAPERS, project_peaks

    runs = [
        {"size": {"papers": n}, "stages": {s: e[i] for s, e in stages.items()}}
        for i, n in enumerate(sizes)
    ]
    projected = project_peaks(runs, list(stages), FULL_CORPUS_PAPERS)
    if projected:
        limit = f.get("max_rss_mb", 12 * 1024) / 1024
        text.append(
            f"Peak RSS projected to {_papers(FULL_CORPUS_PAPERS)} papers along the "
            f"growth from {_papers(sizes[last - 1])} to {_papers(sizes[last])} (limit "
            f"{limit:g} GB): " + ", ".join(f"{s} {mb / 1024:.1f} GB" for s, mb in projected.items())
            + "."
        )  # fmt: skip
    from bench.bench_scale import audit_lines

    for n, entry in zip(sizes, stages.get("release", []), strict=False):
        for line in audit_lines(entry["audit"]) if entry.get("audit") else []:
            text.append(f"At {_papers(n)} papers, {line}.")
    checks = f.get("batch_check") or []
    for check in checks:
        verdict = "identical" if not check["differ"] else f"DIFFERENT: {', '.join(check['differ'])}"
        same = all({**c, "papers": 0} == {**check, "papers": 0} for c in checks)
        where = "every size" if same and len(checks) == len(sizes) else _papers(check["papers"])
        text.append(
            f"Batch check at {where}: {', '.join(check['stages'])} rerun with every batch size "
            f"divided by {check['divide']}: {check['files']} files {verdict}."
        )
        if where == "every size":
            break
    text += ["", "Source: " + _source(record)]
    return "\n".join(text)


def _pair_rows(f: dict[str, Any]) -> list[list[str]]:
    """The (a) and (b) rows of one corpus's figures (``bench_extract.time_pairs``)."""
    return [
        ["(a) extract, one worker", f"{f['extract_mb_s']:,.1f} MB/s", ""],
        [
            "(b) msgspec typed decode alone",
            f"{f['decode_only_mb_s']:,.1f} MB/s",
            f"(a)/(b) >= 0.6: **{f['ratio_vs_decode']:.2f}**",
        ],
    ]


def render_extract(record: dict[str, Any]) -> str:
    """``make bench``: extract vs decode-only and naive, peak RSS, the split tar.gz."""
    f = record["figures"]
    naive = f"{f['naive_mb_s']:,.1f} MB/s" if f.get("naive_mb_s") is not None else "not recorded"
    text = [
        f"On {f['corpus_mb']:,.0f} MB of synthetic JSONL, one worker:",
        "",
        _table(
            ["measure", "figure", "target"],
            [
                *_pair_rows(f),
                [
                    "(c) orjson + dict walk, same extraction",
                    naive,
                    f"(a)/(c) >= 3: **{f['ratio_vs_naive']:.2f}**",
                ],
                [
                    f"peak RSS of one worker, {f['quarter_mb']:,.0f} MB / {f['corpus_mb']:,.0f} MB",
                    f"{f['peak_rss_mb_quarter']:,.0f} MB / {f['peak_rss_mb_full']:,.0f} MB",
                    "<= 1 GB, flat",
                ],
            ],
        ),  # fmt: skip
    ]
    real = f.get("real")
    if real:
        shapes = [("synthetic", f.get("shape")), ("real", real.get("shape"))]
        text += [
            "",
            f"On {real['corpus_mb']:,.0f} MB of the real records (the bundled papers in the "
            "2024 layout, repeated with new ids: `bench/real_corpus.py`), one worker:",
            "",
            _table(["measure", "figure", "target"], _pair_rows(real)),
            "",
            _table(
                ["per MB of JSONL", "papers", "bib entries", "cite spans", "ASCII bib strings"],
                [
                    [
                        name,
                        f"{g['papers_per_mb']:.1f}",
                        f"{g['bib_entries_per_mb']:.0f}",
                        f"{g['cite_spans_per_mb']:.0f}",
                        f"{g['ascii_bib_strings']:.0%}",
                    ]
                    for name, g in shapes
                    if g
                ],
            ),  # fmt: skip
        ]
        if real.get("decompress_mb_s"):
            text += [
                "",
                f"The real records packed as the Hub publishes the corpus "
                f"({real['archive_mb']:,.0f} MB of tar.gz, "
                f"{real['corpus_mb'] / real['archive_mb']:.2f}x; the published corpus: 371 GB "
                f"in 105 GB, 3.53x): decompression alone, MB of JSONL per second: "
                + ", ".join(
                    f"{name} {v:,.0f}"
                    for name, v in sorted(real["decompress_mb_s"].items(), key=lambda kv: -kv[1])
                )
                + (
                    f"; the archive reader as extract runs it (ours: parts, ISA-L, tar members "
                    f"and units, no workers) {real['reader_mb_s']:,.0f}."
                    if real.get("reader_mb_s")
                    else "."
                ),
            ]
    if f.get("decompress_mb_s"):
        text += [
            "",
            f"The synthetic files packed as the Hub publishes the corpus (one tar.gz, "
            f"{f.get('archive_mb', 0):,.0f} MB, in three parts): MB of JSONL per second.",
            "",
            _table(
                ["decompression alone", "MB/s"],
                [
                    [name, f"{v:,.0f}"]
                    for name, v in sorted(f["decompress_mb_s"].items(), key=lambda kv: -kv[1])
                ]
                + (
                    [
                        [
                            "the archive reader (ours: parts, ISA-L, tar, units)",
                            f"{f['reader_mb_s']:,.0f}",
                        ]
                    ]
                    if f.get("reader_mb_s")
                    else []
                ),  # fmt: skip
            ),
            "",
            _table(
                [
                    "extract (whole stage, start-up included)",
                    "plain JSONL",
                    "split tar.gz",
                    "ratio",
                ],
                [
                    [
                        f"{w} worker(s)",
                        f"{f[f'extract_plain_mb_s_{w}w']:,.0f} MB/s",
                        f"{f[f'extract_archive_mb_s_{w}w']:,.0f} MB/s",
                        f"{f[f'archive_vs_plain_{w}w']:.2f}",
                    ]
                    for w in (1, 2)
                    if f"extract_plain_mb_s_{w}w" in f
                ],
            ),  # fmt: skip
        ]
        if f.get("start_up_s_2w") is not None and f.get("extract_plain_mb_s_2w_after_start_up"):
            text += [
                "",
                f"Two workers are two spawned processes that import the pipeline first: "
                f"{f['start_up_s_2w']:.2f} s (timed on two one-line files), a large share of a "
                f"1 GB run and none of the real corpus's. Without it, two workers extract "
                f"{f['extract_plain_mb_s_2w_after_start_up']:,.0f} MB/s from the plain files "
                f"and {f['extract_archive_mb_s_2w_after_start_up']:,.0f} MB/s from the parts "
                f"(ratio {f['extract_archive_mb_s_2w_after_start_up'] / f['extract_plain_mb_s_2w_after_start_up']:.2f}): "
                "on two cores, the reader's decompression takes a share of the cores the "
                "plain files leave to the workers.",
            ]
    if f.get("stages"):
        text += ["", "Later stages on the extracted corpus (wall seconds / peak RSS MB):",
                 "", _table(["stage", "seconds", "peak RSS MB"],
                            [[s, e["seconds"], f"{e['peak_rss_mb']:,.0f}"]
                             for s, e in f["stages"].items()])]  # fmt: skip
    text += ["", "Source: " + _source(record)]
    return "\n".join(text)


def render_eval(record: dict[str, Any]) -> str:
    """``make bench-eval``: metric speed against pytrec_eval, and agreement."""
    f = record["figures"]
    return "\n".join(
        [
            f"{f['surveys']:,} surveys x {f['candidates_per_survey']:,} candidates "
            f"({f['rows']:,} rows, {f['polars_threads']} Polars threads): all "
            f"{f['ours_all_metrics_count']} metrics in {f['ours_all_metrics_s']:.1f} s, the "
            f"measures pytrec_eval has in {f['ours_trec_measures_s']:.1f} s; pytrec_eval "
            f"{f['pytrec_eval_s']:.1f} s for those ({f['pytrec_eval_with_conversion_s']:.1f} s "
            f"with building its dicts): {f['ratio_pytrec_over_ours_same_measures']:.1f}x "
            f"faster on the same measures. A fully tied run (constant scores) takes "
            f"{f['ours_all_metrics_constant_run_s']:.1f} s for all metrics. Largest per-survey "
            f"difference from pytrec_eval: {f['max_abs_diff_per_survey']:.1e}.",
            "",
            "Source: " + _source(record),
        ]
    )


def render_retrieval(record: dict[str, Any]) -> str:
    """``make bench-retrieval``: exact and faiss search at the full eval corpus's size."""
    f = record["figures"]
    e, a = f["exact"], f["faiss"]
    size = "projected from bench-scale" if f["documents_projected"] else "given"
    return "\n".join(
        [
            f"{f['documents']:,} documents ({size}), {f['queries']:,} surveys, "
            f"{f['dimension']}-d float32 vectors ({f['vectors_mb']:,} MB), top {f['k']}:",
            "",
            _table(
                ["search", "build s", "search s", "wall s (CPU s)", "peak RSS MB"],
                [
                    [
                        "exact (`search.exact_top_k`)",
                        "-",
                        f"{e['search_s']:.1f}",
                        f"{e['wall_s']:.1f} ({e['cpu_s']:.1f})",
                        f"{e['peak_rss_mb']:,.0f}",
                    ],
                    [
                        "faiss HNSW (`ann`, one thread)",
                        f"{a['build_s']:.1f}",
                        f"{a['search_s']:.1f}",
                        f"{a['wall_s']:.1f} ({a['cpu_s']:.1f})",
                        f"{a['peak_rss_mb']:,.0f}",
                    ],
                ],
            ),  # fmt: skip
            "",
            f"faiss recall@{f['k']} against exact search: {f['faiss_recall_at_100']:.4f}.",
            "",
            "Source: " + _source(record),
        ]
    )


BLOCKS: dict[str, Callable[[dict[str, Any]], str]] = {
    "scale": render_scale,
    "extract": render_extract,
    "eval": render_eval,
    "retrieval": render_retrieval,
}


def render(text: str, results_dir: Path = RESULTS_DIR) -> str:
    """``text`` with every figures block rendered from the results files.

    Raises:
        KeyError: a block names no known benchmark (lists the known ones).
    """

    def sub(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in BLOCKS:
            raise KeyError(f"figures block {name!r}: available: {sorted(BLOCKS)}")
        return f"{m.group(1)}{BLOCKS[name](read(name, results_dir))}\n{m.group(4)}"

    return _BLOCK.sub(sub, text)


def stale(docs_dir: Path = DOCS_DIR, results_dir: Path = RESULTS_DIR) -> list[Path]:
    """The docs whose figures blocks differ from what the results files render."""
    return [
        p
        for p in sorted(docs_dir.glob("*.md"))
        if render(p.read_text(encoding="utf-8"), results_dir) != p.read_text(encoding="utf-8")
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when a doc's figures are stale")
    args = ap.parse_args()
    if args.check:
        bad = stale()
        for p in bad:
            print(f"{p.relative_to(ROOT)}: figures differ from bench/results; run make docs")
        return 1 if bad else 0
    for p in sorted(DOCS_DIR.glob("*.md")):
        text = p.read_text(encoding="utf-8")
        new = render(text)
        if new != text:
            p.write_text(new, encoding="utf-8")
            print(f"rendered {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
