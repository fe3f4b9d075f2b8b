"""Run one reduce stage with other batch sizes than the defaults (for ``bench_scale --batch-check``).

The batch sizes are the stages' limits (:class:`pipeline.engine.stage.Limits`, outside the
config and its hash); this runs the stage in this process with ``force`` and every limit
divided, as ``tests/test_batch_sizes.py`` does at its smallest. The outputs must have the
same bytes as with the defaults: each batch's rows depend only on its own surveys,
works or files.

Usage: ``python bench/small_batches.py negatives --out DIR [--divide 7]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.core.config import load_config  # noqa: E402
from pipeline.engine.reduce import run_reduce  # noqa: E402
from pipeline.engine.stage import Limits  # noqa: E402
from pipeline.stages import GRAPH  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--divide", type=int, default=7, help="batch sizes = defaults // this")
    args = ap.parse_args()
    limits = Limits().divided(max(args.divide, 1))
    # the config stays the default: it is recorded in every output's metadata
    run_reduce(
        GRAPH[args.stage], args.out, load_config(None), force=True, stages=GRAPH, limits=limits
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
