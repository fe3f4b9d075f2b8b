"""The files the benchmarks write their figures to, ``bench/results/<name>.json``.

Each benchmark ends by writing its figures here (besides printing them), and
``bench/render_docs.py`` renders the tables and sentences of ``docs/`` from these files,
so a measured figure is written once, by the run that measured it, and the docs cannot
drift from it (``tests/test_docs.py``).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
NAMES = (
    "extract",
    "scale",
    "eval",
    "retrieval",
)  # make bench, bench-scale, bench-eval, bench-retrieval


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        return None
    return round(kb / 2**20, 1)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "cpus": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        # a shared machine's load when the run ended (1, 5, 15 min): above the CPU count,
        # other work took cores from the benchmark
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def write(name: str, figures: dict[str, Any], results_dir: Path = RESULTS_DIR) -> Path:
    """Write ``figures`` of benchmark ``name`` with the command, date and machine."""
    if name not in NAMES:
        raise ValueError(f"bench results {name!r}: available: {list(NAMES)}")
    record = {
        "command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv)),
        "measured": date.today().isoformat(),
        "machine": machine(),
        "figures": figures,
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    print(f"figures written to {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def read(name: str, results_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """The last record benchmark ``name`` wrote."""
    return json.loads((results_dir / f"{name}.json").read_text(encoding="utf-8"))
