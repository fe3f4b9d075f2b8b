"""The README is for users and in their order; docs/ holds the rest, and every measured
figure in it is rendered from the file the benchmark wrote (``bench/results``), so none can
drift."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench import render_docs, results

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# a throughput or a speed-up typed in prose is a measured figure
MEASURED = re.compile(r"\d[\d,.]*\s?(?:MB/s|GB/s|MB of JSONL per second)|\b\d+\.\d+x\b")


def _outside_blocks(text: str) -> str:
    return re.sub(r"<!-- figures:(\w+) -->.*?<!-- /figures:\1 -->", "", text, flags=re.S)


def test_the_readme_answers_a_users_questions_in_order() -> None:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[:5] == [
        "Get the benchmark",
        "Evaluate your model",
        "Build it from unarXive",
        "Run it as scheduled Jobs",
        "Develop",
    ]
    lines = text.splitlines()
    first = {k: next(i for i, line in enumerate(lines) if k in line) for k in (
        "load_dataset(", "pipeline evaluate --release", "pipeline run --input", "pipeline submit",
        "make test   #")}  # fmt: skip
    assert list(first.values()) == sorted(first.values())
    assert first["load_dataset("] < 25 and first["pipeline evaluate --release"] < 45
    assert len(lines) < 120
    assert "--eval-file" not in text  # one option name for the release: --release


def test_docs_figures_are_rendered_from_the_files_the_benchmarks_wrote() -> None:
    assert render_docs.stale() == [], "run make docs"
    assert set(render_docs.BLOCKS) == set(results.NAMES)
    found = set()
    for path in sorted(DOCS.glob("*.md")):
        found |= set(re.findall(r"<!-- figures:(\w+) -->", path.read_text(encoding="utf-8")))
    assert found == set(results.NAMES)  # every benchmark's figures are on a page


def test_a_new_measurement_changes_the_docs(tmp_path: Path) -> None:
    """The blocks follow the files: a benchmark that writes another figure changes the page."""
    shutil.copytree(results.RESULTS_DIR, tmp_path / "results")
    record = json.loads((tmp_path / "results" / "extract.json").read_text())
    record["figures"]["extract_mb_s"] = 123456.7
    (tmp_path / "results" / "extract.json").write_text(json.dumps(record))
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert "123,456.7 MB/s" in render_docs.render(page, tmp_path / "results")
    assert "123,456.7 MB/s" not in page
    with pytest.raises(KeyError, match="available"):
        render_docs.render("<!-- figures:nope -->\n<!-- /figures:nope -->", tmp_path / "results")


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_no_measured_figure_is_typed_outside_a_rendered_block(path: Path) -> None:
    text = _outside_blocks(path.read_text(encoding="utf-8"))
    assert MEASURED.findall(text) == [], path


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(path: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        assert (path.parent / target).exists(), (path.name, target)


def test_the_scale_projection_reads_the_extract_figure_from_its_file() -> None:
    from bench.bench_scale import extract_mb_s

    assert extract_mb_s() == results.read("extract")["figures"]["extract_mb_s"]


def test_the_jobs_projection_uses_the_measured_extract_figures() -> None:
    from pipeline import jobs

    real = results.read("extract")["figures"]["real"]  # the real records' rates
    assert jobs.GZIP_MB_S == real["reader_mb_s"]  # decompression and tar, as extract reads
    assert jobs.EXTRACT_MB_S_PER_WORKER == real["extract_mb_s"]


@pytest.mark.parametrize(
    "left_behind",
    ["build/lib/pipeline/__init__.py", "dist/x.whl", "survey_reading_lists.egg-info/PKG-INFO"],
)
def test_what_an_install_or_a_build_leaves_is_ignored_by_git(left_behind: str) -> None:
    """`pip install .` leaves build/ (and a build dist/, an egg-info) in the checkout."""
    import subprocess

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", left_behind], cwd=ROOT, check=False
    )
    assert proc.returncode == 0, f"{left_behind} is not in .gitignore"


def test_the_scale_table_shows_each_stages_ratio_to_its_reference(tmp_path: Path) -> None:
    """A bench-scale run with reference queries (issue 53) gets a ratio in every stage's cell
    and in the whole reduce's; one without them renders as before."""
    shutil.copytree(results.RESULTS_DIR, tmp_path / "results")
    path = tmp_path / "results" / "scale.json"
    record = json.loads(path.read_text())
    page = (DOCS / "scale.md").read_text(encoding="utf-8")
    for entries in record["figures"]["stages"].values():
        for e in entries:
            e.pop("reference", None)
            e.pop("ratio_to_reference", None)
    path.write_text(json.dumps(record))
    before = render_docs.render(page, tmp_path / "results")
    assert "multiple of its reference query" not in before
    for entries in record["figures"]["stages"].values():
        for e in entries:
            if "rows_out" in e:
                e["reference"] = {"seconds": e["seconds"] / 4, "cpu_seconds": 1.0}
                e["ratio_to_reference"] = {"wall": 4.0, "cpu": 2.5}
    path.write_text(json.dumps(record))
    after = render_docs.render(page, tmp_path / "results")
    assert "as a multiple of its reference query's" in after
    works = next(line for line in after.splitlines() if line.startswith("| works |"))
    assert works.count("/ x4.0 (x2.5)") == len(record["figures"]["sizes"])
    whole = next(line for line in after.splitlines() if line.startswith("| all reduce |"))
    assert "/ x4.0 (x" in whole
