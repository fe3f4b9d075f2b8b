"""`make bench-scale`: every reduce stage on corpora of 100k to 2.3M papers.

For each size N (``--sizes``/``SCALE``, comma-separated; default 100k, 300k, 1M,
2.3M papers) it builds the extract tables of an N-paper corpus shaped like unarXive
2024 (:mod:`bench.scale_corpus`; kept between runs and regenerated only when its
parameters change), then runs each reduce stage (works through release) in its own
process with ``--force``, and prints per stage: wall time, peak RSS (the process's
own VmHWM), rows out (of the stage's main table), and, between consecutive sizes,
the growth exponents ``log(t2/t1) / log(N2/N1)`` of time and memory (1.0 = linear).
Right after each stage its reference query (:mod:`bench.stage_references`: the plainest
Polars query reading the same inputs and writing output of the same size) runs in its own
process on the same work dir, and the stage's wall and CPU time are printed as multiples
of the reference's (``ratio_to_reference``): both run under the same load, so the ratio
says how far the stage is from what Polars does with its inputs, on a quiet machine or
not (``--no-references`` skips them).
A stage over ``--max-rss-gb`` (default 12: what a stage may use on the recommended Job
flavour) is killed, recorded and the later stages of that size are skipped, so a run never
starves the machine; each stage's peak is printed as a share of that limit. After the
release stage, the leak audit's verdict and the reading-free probe's figures against BM25
(``eval_metadata.json``) are printed next to the memory, so a scale run shows both.

With ``--openalex`` each corpus also gets its OpenAlex works snapshot
(:mod:`bench.scale_openalex`, written beside it as ``n<N>_openalex/``), which the openalex stage
reads (``--openalex DIR``); without it the stage has no source and describes nothing.

Extract is not run: its share is projected from the ``make bench`` figure in
``bench/results/extract.json`` (MB/s per worker) and the corpus size (unarXive 2024: ~500 GB for 2.28M
papers), with one worker per core, and printed next to the reduce stages.

Ends with one JSON line:
``{"sizes": [N, ...], "stages": {"works": [{"papers": N, "seconds": s,
"peak_rss_mb": m, "rows_out": r, "reference": {"seconds": s, "cpu_seconds": c,
"peak_rss_mb": m}, "ratio_to_reference": {"wall": x, "cpu": x}}, ...], ...}, ...}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.measure import run_measured  # noqa: E402
from pipeline.core.files import sha256_file  # noqa: E402

DEFAULT_SIZES = (100_000, 300_000, 1_000_000, 2_300_000)
FULL_CORPUS_BYTES = 371e9  # unarXive 2024 JSONL unpacked (the card: about 371 GB)
FULL_CORPUS_PAPERS = 2.28e6
# the stage's main output, whose rows are reported as rows_out (glob in its directory)
MAIN_OUTPUT = {
    "works": "works.parquet",
    "surveys": "surveys.parquet",
    "labels": "labels.parquet",
    "negatives": "negatives.parquet",
    "split": "candidates.parquet",
    "release": "*_survey_reading_lists.parquet",
}
# stage counts (from _SUCCESS.json) worth printing next to the rows
EXTRA_COUNTS = {"works": ("bib_entries", "aliases"), "negatives": ("negative_candidates",)}


def reduce_stages() -> list[str]:
    """Reduce stages in run order, from the stage list."""
    from pipeline.stages import STAGES

    return [s.name for s in STAGES if s.kind == "reduce"]


def extract_mb_s() -> float | None:
    """The ``make bench`` figure (a), extract MB/s of one worker, from the file it wrote."""
    from bench.results import read

    try:
        return read("extract")["figures"].get("extract_mb_s")
    except FileNotFoundError:
        return None


def parquet_rows(paths: list[Path]) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


def stage_rows(out: Path, stage: str) -> dict[str, int]:
    """Rows of every Parquet file a stage wrote, by path relative to its directory."""
    d = out / stage
    return {str(p.relative_to(d)): parquet_rows([p]) for p in sorted(d.rglob("*.parquet"))}


def growth(a: float, b: float, n_a: int, n_b: int) -> float | None:
    """``log(b/a) / log(n_b/n_a)``: 1.0 grows like the input, 2.0 with its square."""
    if a <= 0 or b <= 0 or n_a == n_b:
        return None
    return math.log(b / a) / math.log(n_b / n_a)


def run_size(
    n: int,
    work: Path,
    stages: list[str],
    max_rss_mb: float,
    seed: int,
    openalex: bool = False,
    references: bool = True,
) -> dict[str, Any]:
    """Generate (or reuse) the corpus of ``n`` papers and run every stage on it, each followed
    by its reference query (unless not ``references``); with ``openalex``, also its OpenAlex
    snapshot (:mod:`bench.scale_openalex`), which the openalex stage then reads
    (``--openalex DIR``)."""
    gen = run_measured(
        "bench/scale_corpus.py",
        ["--papers", str(n), "--out", str(work), "--seed", str(seed)],
        max_rss_mb=max_rss_mb,
    )
    if gen.returncode != 0:
        raise RuntimeError(f"scale_corpus --papers {n} failed with exit code {gen.returncode}")
    summary = json.loads((work / "extract" / "_summary.json").read_text())
    size = {
        "papers": n,
        "generate_seconds": round(gen.seconds, 1),
        "generate_peak_rss_mb": round(gen.peak_rss_mb),
        "bib_entries": summary.get("references", 0),
        "mention_rows": summary.get("mentions_rows", 0),
        "extract_parquet_mb": round(
            sum(p.stat().st_size for p in (work / "extract").rglob("*.parquet")) / 1e6
        ),
    }
    print(
        f"\n== {n:,} papers: {size['bib_entries']:,} bib entries, {size['mention_rows']:,} "
        f"mention rows, {size['extract_parquet_mb']:,} MB of extract Parquet "
        f"(generated or reused in {gen.seconds:.0f} s, peak {gen.peak_rss_mb:,.0f} MB)",
        flush=True,
    )
    stage_args: dict[str, list[str]] = {}
    if openalex:
        from bench.scale_openalex import snapshot_dir

        snap = run_measured(
            "bench/scale_openalex.py",
            ["--papers", str(n), "--out", str(work), "--seed", str(seed)],
            max_rss_mb=max_rss_mb,
        )
        if snap.returncode != 0:
            raise RuntimeError(
                f"scale_openalex --papers {n} failed with exit code {snap.returncode}"
            )
        size["openalex_snapshot_seconds"] = round(snap.seconds, 1)
        size["openalex_snapshot_peak_rss_mb"] = round(snap.peak_rss_mb)
        stage_args["openalex"] = ["--openalex", str(snapshot_dir(work))]
        print(
            f"   OpenAlex snapshot written in {snap.seconds:.0f} s (peak {snap.peak_rss_mb:,.0f} MB)",
            flush=True,
        )
    results: dict[str, Any] = {}
    failed = None
    for stage in stages:
        if failed is not None:
            results[stage] = {"papers": n, "skipped_after": failed}
            continue
        got = run_measured(
            "pipeline",
            [stage, "--out", str(work), "--force", *stage_args.get(stage, [])],
            max_rss_mb=max_rss_mb,
        )
        entry: dict[str, Any] = {
            "papers": n,
            "seconds": round(got.seconds, 2),
            "cpu_seconds": None if got.cpu_seconds is None else round(got.cpu_seconds, 1),
            "peak_rss_mb": round(got.peak_rss_mb, 1),
        }
        if got.returncode != 0:
            entry["error"] = (
                f"killed over {got.killed_over_mb:,.0f} MB RSS"
                if got.killed_over_mb
                else f"exit code {got.returncode}"
            )
            failed = stage
            print(
                f"   {stage:<10} {got.seconds:9.1f} s {got.peak_rss_mb:9,.0f} MB  {entry['error']}"
            )
            results[stage] = entry
            continue
        rows = stage_rows(work, stage)
        main = [k for k in rows if Path(k).match(MAIN_OUTPUT.get(stage, "*.parquet"))]
        entry["rows_out"] = sum(rows[k] for k in main)
        entry["outputs"] = rows
        counts = json.loads((work / stage / "_SUCCESS.json").read_text()).get("counts", {})
        entry["stage_seconds"] = json.loads((work / stage / "_SUCCESS.json").read_text()).get(
            "seconds"
        )
        for key in EXTRA_COUNTS.get(stage, ()):
            entry[key] = counts.get(key)
        extra = "  ".join(f"{k}={entry[k]:,}" for k in EXTRA_COUNTS.get(stage, ()) if entry.get(k))
        print(
            f"   {stage:<10} {got.seconds:9.1f} s {got.cpu_seconds or 0:9.1f} cpu-s "
            f"{got.peak_rss_mb:9,.0f} MB ({got.peak_rss_mb / max_rss_mb:4.0%} of the limit) "
            f"{entry['rows_out']:>13,} rows  {extra}",
            flush=True,
        )
        if references:
            entry["reference"] = run_reference(stage, work, max_rss_mb)
            entry["ratio_to_reference"] = ratios(entry)
            print(f"      {reference_line(entry)}", flush=True)
        if stage == "release":
            entry["audit"] = audit_summary(work / "release" / "eval_metadata.json")
            for line in audit_lines(entry["audit"]):
                print(f"      {line}", flush=True)
        results[stage] = entry
    return {"size": size, "stages": results}


def run_reference(stage: str, work: Path, max_rss_mb: float) -> dict[str, Any] | None:
    """Run ``stage``'s reference query (:mod:`bench.stage_references`) on ``work`` in its own
    process, measured like the stage; ``None`` when the stage has none."""
    from bench.stage_references import REFERENCES

    if stage not in REFERENCES:
        return None
    scratch = work.with_name(work.name + "_reference")
    got = run_measured(
        "bench/stage_references.py",
        [stage, "--out", str(work), "--scratch", str(scratch)],
        max_rss_mb=max_rss_mb,
    )
    shutil.rmtree(scratch, ignore_errors=True)  # the child deletes it, unless it was killed
    ref: dict[str, Any] = {
        "seconds": round(got.seconds, 2),
        "cpu_seconds": None if got.cpu_seconds is None else round(got.cpu_seconds, 1),
        "peak_rss_mb": round(got.peak_rss_mb, 1),
    }
    if got.returncode != 0:
        ref["error"] = f"exit code {got.returncode}"
    return ref


def ratios(entry: dict[str, Any]) -> dict[str, float | None]:
    """The stage's wall and CPU seconds as multiples of its reference's (None without one)."""
    ref = entry.get("reference") or {}
    if "error" in ref or not ref:
        return {"wall": None, "cpu": None}

    def one(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    return {
        "wall": one(entry.get("seconds"), ref.get("seconds")),
        "cpu": one(entry.get("cpu_seconds"), ref.get("cpu_seconds")),
    }


def reference_line(entry: dict[str, Any]) -> str:
    """``reference <s> s <cpu> cpu-s <MB> MB: stage x<wall> wall, x<cpu> CPU``."""
    ref = entry.get("reference")
    if not ref:
        return "no reference"
    if "error" in ref:
        return f"reference failed: {ref['error']}"
    r = ratios(entry)
    cells = [f"x{r[k]:.1f} {k}" for k in ("wall", "cpu") if r[k] is not None]
    return (
        f"reference {ref['seconds']:.1f} s {ref['cpu_seconds'] or 0:.1f} cpu-s "
        f"{ref['peak_rss_mb']:,.0f} MB: the stage takes " + (", ".join(cells) or "-")
    )


def total_ratios(entries: Any) -> dict[str, float | None]:
    """The whole reduce's wall and CPU seconds as multiples of its references' (the stages
    that finished with a reference)."""
    done = [e for e in entries if "rows_out" in e and (e.get("reference") or {}).get("seconds")]
    if not done or any("error" in e["reference"] for e in done):
        return {"wall": None, "cpu": None}
    return ratios(
        {
            "seconds": sum(e["seconds"] for e in done),
            "cpu_seconds": sum(e.get("cpu_seconds") or 0 for e in done),
            "reference": {
                "seconds": sum(e["reference"]["seconds"] for e in done),
                "cpu_seconds": sum(e["reference"].get("cpu_seconds") or 0 for e in done),
            },
        }
    )


def ratio_cell(entry: dict[str, Any]) -> str:
    """``x<wall> (x<cpu>)``: the stage's time as a multiple of its reference's; ``-`` without."""
    r = entry.get("ratio_to_reference") or {}
    if r.get("wall") is None:
        return "-"
    return f"x{r['wall']:.1f}" + (f" (x{r['cpu']:.1f})" if r.get("cpu") is not None else "")


def project_peaks(runs: list[dict[str, Any]], stages: list[str], papers: float) -> dict[str, float]:
    """Each stage's peak RSS at ``papers``, along its memory growth between the last two
    sizes (``peak * (papers / n) ** exponent``); empty with fewer than two sizes or when
    the largest size is not below ``papers``."""
    if len(runs) < 2 or runs[-1]["size"]["papers"] >= papers:
        return {}
    a, b = runs[-2], runs[-1]
    na, nb = a["size"]["papers"], b["size"]["papers"]
    out = {}
    for stage in stages:
        ea, eb = a["stages"][stage], b["stages"][stage]
        if "rows_out" in ea and "rows_out" in eb:
            exponent = growth(ea["peak_rss_mb"], eb["peak_rss_mb"], na, nb) or 1.0
            out[stage] = round(eb["peak_rss_mb"] * (papers / nb) ** max(exponent, 0.0))
    return out


def audit_summary(meta_path: Path) -> dict[str, Any]:
    """The leak audits' verdicts, problems and reading-free probe figures of a release."""
    meta = json.loads(meta_path.read_text())

    def one(leak: dict[str, Any]) -> dict[str, Any]:
        probe = leak.get("reading_free_probe") or {}
        return {
            "passed": leak.get("passed"),
            "problems": leak.get("problems", []),
            "outside_bounds": leak.get("outside_bounds", {}),
            "relative_outside_bounds": (leak.get("relative") or {}).get("outside_bounds", {}),
            "probe": probe.get("metrics") or {"skipped": probe.get("skipped")},
        }

    aspects = (meta.get("aspects") or {}).get("leak_audit")
    return {
        "reading_lists": one(meta["leak_audit"]),
        **({"aspects": one(aspects)} if aspects else {}),
    }


def audit_lines(summary: dict[str, Any]) -> list[str]:
    """``audit <task>: passed|FAILED; probe <metric> <probe> vs BM25 <bm25>, ...``."""
    lines = []
    for task, a in summary.items():
        probe = a["probe"]
        figures = (
            ", ".join(
                f"{metric} {row.get('lgbm-reading-free')} vs BM25 {row.get('bm25')}"
                + (" (beats)" if row.get("beats") else "")
                for metric, row in sorted(probe.items())
                if isinstance(row, dict)
            )
            or f"skipped: {probe.get('skipped')}"
        )
        verdict = "passed" if a["passed"] else "FAILED"
        flagged = [f"{s}: {', '.join(v)}" for s, v in sorted(a["outside_bounds"].items())]
        flagged += [
            f"{s} (relative): {', '.join(v)}"
            for s, v in sorted(a["relative_outside_bounds"].items())
        ]
        lines.append(
            f"audit {task}: {verdict}; reading-free probe {figures}"
            + (f"; outside the bounds: {'; '.join(flagged)}" if flagged else "")
        )
    return lines


def _file_hashes(out: Path, stages: list[str]) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): sha256_file(p)
        for stage in stages
        for p in sorted((out / stage).rglob("*"))
        if p.is_file() and not p.name.startswith("_")
    }


def batch_check(work: Path, stages: list[str], divide: int, max_rss_mb: float) -> dict[str, Any]:
    """Rerun ``stages`` on a hard-linked copy of ``work`` with batch sizes divided by
    ``divide`` (:mod:`bench.small_batches`) and compare every output file's sha256."""
    other = work.with_name(work.name + "_batches")
    shutil.rmtree(other, ignore_errors=True)
    other.mkdir(parents=True)
    for d in work.iterdir():
        if d.is_dir() and d.name not in stages:
            shutil.copytree(d, other / d.name, copy_function=os.link)
    for stage in stages:
        got = run_measured(
            "bench/small_batches.py",
            [stage, "--out", str(other), "--divide", str(divide)],
            max_rss_mb=max_rss_mb,
        )
        if got.returncode != 0:
            raise RuntimeError(f"small_batches {stage} failed with exit code {got.returncode}")
    a, b = _file_hashes(work, stages), _file_hashes(other, stages)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    shutil.rmtree(other, ignore_errors=True)
    return {"stages": stages, "divide": divide, "files": len(a), "differ": differ}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        default=os.environ.get("SCALE") or ",".join(str(n) for n in DEFAULT_SIZES),
        help="papers per corpus, comma-separated (default: $SCALE or 100k,300k,1M,2.3M)",
    )
    ap.add_argument("--dir", type=Path, default=ROOT / "bench_out" / "scale")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stages", default="", help="comma-separated subset (default: all reduce)")
    ap.add_argument(
        "--max-rss-gb", type=float, default=12.0, help="kill a stage above this RSS (default 12)"
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="for the projection")
    ap.add_argument("--delete", action="store_true", help="delete each corpus after its run")
    ap.add_argument(
        "--batch-check",
        default="",
        help="comma-separated stages to rerun at every size with batch sizes divided by "
        "--divide, comparing every output file's bytes (e.g. negatives,split,release)",
    )
    ap.add_argument("--divide", type=int, default=7)
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/scale.json")
    ap.add_argument(
        "--no-references",
        action="store_true",
        help="do not run each stage's reference query (bench/stage_references.py) after it",
    )
    ap.add_argument(
        "--openalex",
        action="store_true",
        help="write each corpus's OpenAlex snapshot (bench/scale_openalex.py) and have the "
        "openalex stage read it (default: no snapshot, the stage describes nothing)",
    )
    args = ap.parse_args()

    sizes = sorted({int(float(s)) for s in args.sizes.split(",") if s.strip()})
    stages = [s for s in args.stages.split(",") if s] or reduce_stages()
    mb_s = extract_mb_s()
    print(f"sizes {sizes}; stages {stages}; kill over {args.max_rss_gb:g} GB", flush=True)

    runs = []
    for n in sizes:
        work = args.dir / f"n{n}"
        runs.append(
            run_size(
                n,
                work,
                stages,
                args.max_rss_gb * 1024,
                args.seed,
                args.openalex,
                references=not args.no_references,
            )
        )
        checked = [s for s in args.batch_check.split(",") if s]
        complete = all("rows_out" in e for e in runs[-1]["stages"].values())
        if checked and not complete:
            print("   batch check skipped: a stage did not finish", flush=True)
        elif checked:
            got = batch_check(work, checked, args.divide, args.max_rss_gb * 1024)
            runs[-1]["batch_check"] = got
            verdict = "identical" if not got["differ"] else f"DIFFER: {', '.join(got['differ'])}"
            print(
                f"   batch check ({', '.join(checked)}; batch sizes / {args.divide}): "
                f"{got['files']} files {verdict}",
                flush=True,
            )
        if args.delete:
            shutil.rmtree(work, ignore_errors=True)

    # ---------------------------------------------------------------- summary
    print(
        "\nper stage: wall seconds (CPU seconds) / peak RSS MB / rows out "
        "/ x wall (x CPU) of its reference query"
    )
    header = f"{'stage':<12}" + "".join(f"{n:>48,}" for n in sizes)
    print(header)
    for stage in stages:
        cells = []
        for r in runs:
            e = r["stages"][stage]
            if "rows_out" in e:
                cells.append(
                    f"{e['seconds']:.0f} s ({e.get('cpu_seconds') or 0:.0f}) / "
                    f"{e['peak_rss_mb']:,.0f} / {e['rows_out']:,} / {ratio_cell(e)}"
                )
            else:
                cells.append(e.get("error") or "skipped")
        print(f"{stage:<12}" + "".join(f"{c:>48}" for c in cells))
    totals = [
        sum(e.get("seconds", 0) for e in r["stages"].values() if "rows_out" in e) for r in runs
    ]
    cpu_totals = [
        sum(e.get("cpu_seconds") or 0 for e in r["stages"].values() if "rows_out" in e)
        for r in runs
    ]
    whole = [ratio_cell({"ratio_to_reference": total_ratios(r["stages"].values())}) for r in runs]
    print(
        f"{'all reduce':<12}"
        + "".join(
            f"{f'{t:.0f} s ({c:.0f}) / {w}':>48}"
            for t, c, w in zip(totals, cpu_totals, whole, strict=True)
        )
    )
    for r in runs:
        audit = r["stages"].get("release", {}).get("audit")
        for line in audit_lines(audit) if audit else []:
            print(f"{r['size']['papers']:>12,} {line}")
    projection = []
    if mb_s:
        for n in sizes:
            corpus_bytes = FULL_CORPUS_BYTES * n / FULL_CORPUS_PAPERS
            seconds = corpus_bytes / (mb_s * 1e6 * args.workers)
            projection.append(
                {"papers": n, "corpus_gb": round(corpus_bytes / 1e9, 1), "seconds": round(seconds)}
            )
        cells = [f"~{p['seconds']:,} s ({p['corpus_gb']:g} GB)" for p in projection]
        print(f"{'extract*':<12}" + "".join(f"{c:>48}" for c in cells))
        print(
            f"* projected: {mb_s:g} MB/s per worker (make bench) x {args.workers} workers; "
            "reading from the Hub and decompression not included"
        )

    growths: dict[str, list[dict[str, Any]]] = {}
    if len(runs) > 1:
        print("\ngrowth exponents between consecutive sizes (time / memory; 1.0 = linear)")
        for stage in stages:
            row = []
            for a, b in zip(runs, runs[1:], strict=False):
                ea, eb = a["stages"][stage], b["stages"][stage]
                if "rows_out" not in ea or "rows_out" not in eb:
                    row.append(None)
                    continue
                na, nb = a["size"]["papers"], b["size"]["papers"]
                row.append(
                    {
                        "from": na,
                        "to": nb,
                        "time": growth(ea["seconds"], eb["seconds"], na, nb),
                        "memory": growth(ea["peak_rss_mb"], eb["peak_rss_mb"], na, nb),
                    }
                )
            growths[stage] = row
            cells = [
                f"{g['time']:.2f} / {g['memory']:.2f}" if g and g["time"] is not None else "-"
                for g in row
            ]
            print(f"{stage:<12}" + "".join(f"{c:>16}" for c in cells))

    projected = project_peaks(runs, stages, FULL_CORPUS_PAPERS)
    if projected:
        print(
            f"\npeak RSS projected to {FULL_CORPUS_PAPERS:,.0f} papers along the last growth "
            f"(limit {args.max_rss_gb:g} GB): "
            + ", ".join(f"{s} {mb / 1024:.1f} GB" for s, mb in projected.items())
        )
    figures = {
        "sizes": sizes,
        "max_rss_mb": args.max_rss_gb * 1024,
        "stages": {s: [r["stages"][s] for r in runs] for s in stages},
        "inputs": [r["size"] for r in runs],
        "batch_check": [
            {"papers": r["size"]["papers"], **r["batch_check"]} for r in runs if "batch_check" in r
        ],
        "growth": growths,
        "all_reduce_ratio_to_reference": [total_ratios(r["stages"].values()) for r in runs],
        "extract_projection": {
            "mb_s_per_worker": mb_s,
            "workers": args.workers,
            "sizes": projection,
        },
    }
    print(json.dumps(figures, sort_keys=True))
    if not args.no_write:
        from bench.results import write

        write("scale", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
