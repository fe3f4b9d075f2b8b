"""How the pipeline draws a figure: matplotlib's Agg backend, a pinned look, PNG bytes that
depend on the data only.

Used by the evaluation report's figures (:mod:`pipeline.evaluate.report.figures`) and the
dataset card's (:mod:`pipeline.hub.card`): a fixed size and DPI, a font shipped with
matplotlib, and no metadata in the PNG (no software version, no date), so the same
numbers give the same bytes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.core.files import atomic_path

DPI = 100
# pinned look, independent of the user's matplotlibrc
STYLE = {
    "font.family": "DejaVu Sans",  # shipped with matplotlib
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "path.simplify": False,
}


def _own_matplotlib_config() -> None:
    """Give matplotlib a config and cache directory this process owns, removed at exit.

    Without it, the first run on a fresh ``$HOME`` writes matplotlib's font cache to
    ``~/.cache/matplotlib``, outside ``--out``, and a user's ``matplotlibrc`` there could
    change a figure. An ``MPLCONFIGDIR`` the
    user set is kept; so is the directory of a matplotlib imported before this.
    """
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    path = tempfile.mkdtemp(prefix="pipeline-matplotlib-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["MPLCONFIGDIR"] = path  # matplotlib reads it once, at import


@contextlib.contextmanager
def pyplot() -> Iterator[Any]:
    """``matplotlib.pyplot`` on the Agg backend, inside the pinned style."""
    _own_matplotlib_config()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(STYLE):
        yield plt


def save_png(fig: Any, path: Path, plt: Any) -> None:
    """Lay out ``fig``, write it to ``path`` atomically as a metadata-free PNG, close it."""
    try:
        fig.tight_layout()
        with atomic_path(path) as tmp:
            # metadata None: no "Software" (matplotlib version) chunk in the PNG
            fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
    finally:
        plt.close(fig)
