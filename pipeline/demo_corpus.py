"""The bundled demo corpus that ``python -m pipeline demo`` runs every stage on.

The demo corpus is built deterministically: synthetic unarXive records (one
generated world, its last file converted to the 2024 layout, with a few malformed
lines to show rejects) plus the real records shipped as package data in
``pipeline/demo_data`` (49 papers in the 2022 layout, one in the 2024 layout, with
their licences; the tests read them as ``tests/fixtures/...``, links to that folder).
``demo`` (:func:`pipeline.api.demo`) then runs every stage into ``<out>/`` and
evaluates the baselines.
"""

from __future__ import annotations

import importlib.resources
import shutil
from importlib.resources.abc import Traversable
from pathlib import Path


def demo_data() -> Traversable:
    """``pipeline/demo_data``: the real samples, package data (works from a wheel too)."""
    return importlib.resources.files("pipeline") / "demo_data"


REAL_FILES = (
    "unarxive-2022-sample/arXiv_src_2212_086.jsonl.gz",
    "unarxive-2024-preview/preview.jsonl",
)


def build_corpus(
    corpus: Path, papers: int, fixtures: Traversable | Path | None = None
) -> list[Path]:
    """Write the demo corpus into ``corpus`` (idempotent: same bytes every time)."""
    from pipeline.layout import convert_file
    from pipeline.synth import generate

    corpus.mkdir(parents=True, exist_ok=True)
    # One synthetic world (so citations between its papers hold), four files; the last
    # file is served in the 2024 layout, converted by the documented grouping rule.
    paths = generate(corpus, papers=papers, layout="2022", seed=0, small=True, malformed=6, files=4)
    last = paths.pop()
    converted = last.with_name(last.name.replace("synth_2022", "synth_2024"))
    if not converted.exists():
        convert_file(last, converted)
    last.unlink()
    paths.append(converted)
    fixtures = demo_data() if fixtures is None else fixtures
    for rel in REAL_FILES:
        src = fixtures.joinpath(*rel.split("/"))
        if not src.is_file():
            raise FileNotFoundError(f"demo: real sample {src} is missing")
        dst = corpus / f"real_{src.name}"
        with importlib.resources.as_file(src) as local:
            shutil.copyfile(local, dst)
        paths.append(dst)
    return paths
