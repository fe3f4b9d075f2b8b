"""Hostile user files for the bibliography readers, the evaluation cache and the glob
expander (issue 52, items 3, 4, 6 and 7): each is refused in one line naming the file (and
line) and the limit, or read with every file counted once; nothing is written beside the
release."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.evaluate.bibliography import formats as F
from tests.test_bibliography import write_tiny_release

MB = 1024 * 1024


def _bomb(levels: int) -> str:
    """@string macros that double at each level: a few hundred bytes, 2**levels characters."""
    lines = ['@string{m0 = "xx"}']
    lines += [f"@string{{m{i} = m{i - 1} # m{i - 1}}}" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"@article{{k, title = m{levels}}}", ""])


def _bounded(code: str, *, memory: int = 1024 * MB, cpu_seconds: int = 30) -> str:
    """Run ``code`` in a fresh interpreter under an address-space and a CPU-time limit (the
    wall-clock timeout is generous: a loaded machine must not fail it); its stdout."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=300, preexec_fn=limits, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# --------------------------------------------------------------------- BibTeX macros
@pytest.mark.parametrize("levels", [22, 26, 28, 40])
def test_a_bibtex_macro_bomb_is_refused_before_it_grows(levels: int) -> None:
    """Item 3: 22 levels took 4 s and 245 MB, 26 levels 1.47 GB, 28 over 5 GB. Now the
    macros' added text is bounded by the file's size, at any nesting: refused at once,
    naming the line, the macro and the limit; the peak stays far under 500 MB."""
    code = f"""
from pipeline.evaluate.bibliography import formats as F
from tests.test_hostile_readers import _bomb
text = _bomb({levels})
try:
    F.parse_bibtex(text, "bomb.bib")
    print("parsed")
except F.BibFormatError as e:
    print(e)
# VmHWM: this program's own peak (ru_maxrss keeps the forking pytest worker's size)
print(next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM")) // 1024)
"""
    message, peak_mb = _bounded(code, cpu_seconds=5).splitlines()
    limit = F.MACRO_TEXT_RATIO * len(_bomb(levels))
    assert message.startswith("bomb.bib:") and "macro 'm" in message, message
    assert f"{limit:,} characters" in message and "times the text's size" in message
    assert int(peak_mb) < 500


def test_real_macros_are_expanded_within_the_limit() -> None:
    """A venue macro used by every entry (as libraries use them) is no bomb."""
    venue = "Advances in Neural Information Processing Systems"
    entries = "".join(
        f"@inproceedings{{k{i}, title={{T{i}}}, booktitle=nips}}\n" for i in range(50)
    )
    parsed = F.parse_bibtex(f'@string{{nips = "{venue}"}}\n' + entries, "lib.bib")
    assert len(parsed.references) == 50 and all(venue in r["raw"] for r in parsed.references)


def test_a_bibtex_year_of_many_digits_is_no_year() -> None:
    """A 5,000-digit ``year`` raised Python's ValueError for long integers ("unexpected");
    a superscript digit passed ``str.isdigit`` and failed ``int``. A year is a small
    number: anything else is no year, as ``19xx`` is."""
    for year in ("9" * 5000, "²⁰¹⁷", "20170"):
        (ref,) = F.parse_bibtex(f"@article{{a, title={{T}}, year={{{year}}}}}", "x").references
        assert ref["year"] is None
    (ref,) = F.parse_bibtex("@article{a, title={T}, year=2017}", "x").references
    assert ref["year"] == 2017


# --------------------------------------------------------------------- Markdown
MARKDOWN_RUNS = {
    "brackets": "[" * 80_000,
    "unclosed links": "[a](b" * 16_000,
    "autolinks": "<http://" * 10_000,
    "underscores between words": "a" + "_" * 80_000 + "a",
}


def test_the_markdown_reader_is_linear_on_runs_of_link_and_emphasis_marks() -> None:
    """Item 3: a list item of 80k ``[`` took 13-30 s (0.29 / 1.17 / 3.73 / 13.2 s at
    10k / 20k / 40k / 80k: every ``[`` scanned to the text's end), and a run of ``_``
    between two words was worse. Each is now read in one pass: all four items together
    within 5 s of CPU, each kept as its text."""
    code = """
from pipeline.evaluate.bibliography import formats as F
from tests.test_hostile_readers import MARKDOWN_RUNS
for body in MARKDOWN_RUNS.values():
    (ref,) = F.parse_markdown("- " + body + "\\n").references
    print(len(ref["raw"] or ""))
"""
    lengths = [int(n) for n in _bounded(code, cpu_seconds=5).split()]
    expected = [len(F.markdown_text(body)) for body in MARKDOWN_RUNS.values()]
    assert lengths == expected
    assert lengths[0] == 80_000 and lengths[3] == 80_002  # kept: a word touches both ends


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see [Title](https://doi.org/10.1/x) now", "see Title https://doi.org/10.1/x now"),
        ("[a [b](u) c", "a [b u c"),  # the text runs from the first '[' to the next ']'
        ("[a](b [c](d)", "[a](b c d"),  # a space ends the first URL: not a link
        ("[a](b(c)d)", "a b(cd)"),  # the first ')' ends the URL
        ("[x]] (y) [z](w)", "[x]] (y) z w"),
        ("<https://x.org/a> and <http://a<b>", "https://x.org/a and <http://a<b>"),
    ],
)
def test_markdown_links_read_as_before(text: str, expected: str) -> None:
    """The one-pass link reader gives what the regular expression gave (an autolink holds
    no '<', as CommonMark says)."""
    assert F.markdown_links(text) == expected


# --------------------------------------------------------------------- bibliography files
def _cli(release: Path, bibliography: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``evaluate --bibliography``, with a wall-clock limit generous for a loaded machine (it
    turns a hang into a failure)."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "evaluate", "--release", str(release),
         "--bibliography", str(bibliography), "--out", str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def _line(survey: str, references: str) -> bytes:
    return b'{"survey_id": "%s", "references": %s}\n' % (survey.encode(), references.encode())


HOSTILE_BIBLIOGRAPHIES = {
    # JSONL: a RecursionError, Python's long-integer ValueError, a UnicodeDecodeError
    "nested 100k deep": (
        "bib.jsonl",
        _line("s1", "[]") + _line("s2", "[" * 100_000 + "]" * 100_000),
        "bib.jsonl:2: JSON nested deeper than the reader's limit",
    ),
    "a 5,000-digit year": (
        "bib.jsonl",
        _line("s1", '[{"title": "T", "year": %s}]' % ("9" * 5000)),
        "bib.jsonl:1: a number of 5,000 digits; a bibliography's numbers are years "
        "(at most 20 digits are read)",
    ),
    "a year of six digits": (
        "bib.jsonl",
        _line("s1", '[{"title": "T", "year": 201700}]'),
        "bib.jsonl:1: reference 1: year 201700 is no year (at most 9999)",
    ),
    "a Latin-1 byte": (
        "bib.jsonl",
        _line("s1", "[]") + _line("s2", '["Caf\xe9 society"]').replace(b"\xc3\xa9", b"\xe9"),
        "bib.jsonl:2: not UTF-8 text (byte 0xe9 at column 40); save the file as UTF-8",
    ),
    "a BibTeX bomb in a JSON string": (
        "bib.jsonl",
        _line("s1", json.dumps([_bomb(30)])),
        "bib.jsonl:1: reference 1:13: macro 'm11': the text @string macros add passes",
    ),
    # the folder form: a UnicodeDecodeError
    "a Latin-1 .bib": (
        "lists/s1.bib",
        b"@article{a,\n  title = {Caf\xe9 society}\n}\n",
        "s1.bib:2: not UTF-8 text (byte 0xe9 at column 15); save the file as UTF-8",
    ),
    "a binary .bib": (
        "lists/s1.bib",
        bytes(range(256)) * 4,
        "s1.bib:2: not UTF-8 text (byte 0x80 at column 118)",
    ),
    "a macro bomb .bib": (
        "lists/s1.bib",
        _bomb(40).encode(),
        "s1.bib:13: macro 'm11': the text @string macros add passes",
    ),
}


@pytest.mark.parametrize("entry", ["fifo", "device"])
def test_a_list_that_is_not_a_regular_file_is_refused(tmp_path: Path, entry: str) -> None:
    """A FIFO named ``<survey>.bib`` blocked the reader until a writer came; a link to a
    device was read as a list (``/dev/zero`` until memory ran out; ``/dev/null`` here, an
    empty list). Each is refused in one line naming it."""
    release = write_tiny_release(tmp_path / "release")
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "s1.md").write_text("- A title\n", encoding="utf-8")
    if entry == "fifo":
        os.mkfifo(lists / "s2.bib")
    else:
        (lists / "s2.bib").symlink_to("/dev/null")
    done = _cli(release, lists, tmp_path / "out")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert f"{lists}/s2.bib: " in lines[0] and "not a regular file, not read" in lines[0]


@pytest.mark.parametrize("case", list(HOSTILE_BIBLIOGRAPHIES))
def test_a_hostile_bibliography_is_one_line_naming_file_and_line(tmp_path: Path, case: str) -> None:
    """Item 4: each of these ended in "unexpected ..." (rc 1) or, for the bomb, ran for
    minutes; each is now one line, exit 2, naming the file and line, and nothing is written."""
    name, data, says = HOSTILE_BIBLIOGRAPHIES[case]
    release = write_tiny_release(tmp_path / "release")
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    target = path if name.endswith(".jsonl") else path.parent
    done = _cli(release, target, tmp_path / "out")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert f"{tmp_path}/" in lines[0] and says in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_a_bom_at_the_start_of_a_bibliography_is_no_error(tmp_path: Path) -> None:
    """Editors on Windows start a UTF-8 file with a BOM: read as the text it marks."""
    from pipeline.evaluate.bibliography.score import read_input

    (tmp_path / "bib.jsonl").write_bytes(b"\xef\xbb\xbf" + _line("s1", '["A title"]'))
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "s1.md").write_bytes(b"\xef\xbb\xbf- A title\n")
    for target in (tmp_path / "bib.jsonl", tmp_path / "lists"):
        (bibliography,) = read_input(target).bibliographies
        assert [r.raw for r in bibliography.references] == ["A title"]


# --------------------------------------------------------------------- the evaluation cache
def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder`` with its size and mtime."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def test_evaluate_writes_its_cache_under_out_never_beside_the_release(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Item 6: the baselines' cache went to ``<release>/../eval/cache/baselines/``, outside
    ``--out``: a read-only release broke it, and users of one release shared it unasked. Now
    it is ``<out>/cache``; the folder holding the release (read-only here; tests may run as
    root, whom chmod does not stop, so the check is that nothing in it changed) is not
    written."""
    import shutil

    from pipeline import api
    from pipeline.core.config import Config, EvaluateConfig
    from tests.test_negatives import synthetic_release_dir

    work = tmp_path / "work"
    shutil.copytree(synthetic_release_dir(tmp_path_factory) / "release", work / "release")
    before = _files(work)
    modes = {p: p.stat().st_mode for p in [work, *work.rglob("*")]}
    for path in modes:
        path.chmod(modes[path] & ~0o222)
    config = Config(evaluate=EvaluateConfig(bootstrap_samples=20, random_seeds=1))
    try:
        result = api.evaluate(work / "release", out=tmp_path / "out", config=config, learned=False)
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert result.results["baselines"]
    assert _files(work) == before
    assert list((tmp_path / "out" / "cache" / "baselines").glob("*.parquet"))


def test_no_cache_and_a_cache_folder_are_refused_together(tmp_path: Path) -> None:
    """``--cache-dir`` names the cache's folder; with ``--no-cache`` one of them is wrong."""
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "evaluate", "--release", str(tmp_path),
         "--no-cache", "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "--no-cache and --cache-dir" in done.stderr, done.stderr
    assert not (tmp_path / "c").exists() and not (tmp_path / "out").exists()


# --------------------------------------------------------------------- globs through a loop
def _looped_folder(root: Path, sample_lines: list[bytes], *, loops: int = 1) -> Path:
    """Two data files, a symlink loop and a dangling symlink, and a symlink to the folder
    itself (with ``loops=2``, also one from a subfolder to its parent)."""
    folder = root / "input"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.jsonl").write_bytes(b"\n".join(sample_lines[:3]) + b"\n")
    (folder / "sub" / "more.jsonl").write_bytes(b"\n".join(sample_lines[3:5]) + b"\n")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "dangling.jsonl").symlink_to(folder / "missing.jsonl")
    (folder / "self").symlink_to(folder, target_is_directory=True)
    if loops == 2:
        (folder / "sub" / "up").symlink_to("..", target_is_directory=True)
    return folder


def test_a_glob_through_a_symlink_loop_names_each_real_file_once(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    """Item 7: ``dir/**/*.jsonl`` followed ``dir/self`` 40 levels deep: 41 paths per entry,
    each failing entry a failed input of its own. Now as the folder form: each once."""
    from pipeline.corpus.sources import InputError, resolve_inputs

    folder = _looped_folder(tmp_path, sample_lines)
    expected = ["dangling.jsonl", "good.jsonl", "loop.jsonl", "sub/more.jsonl"]
    for spec in (f"{folder}/**/*.jsonl", f"{folder}/**", str(folder)):
        assert sorted(f.name for f in resolve_inputs([spec])) == expected, spec
    # without '**' a glob goes as deep as it says; what it reaches twice is listed once
    names = sorted(f.name for f in resolve_inputs([f"{folder}/*/*.jsonl"]))
    assert names == ["self/dangling.jsonl", "self/good.jsonl", "self/loop.jsonl", "sub/more.jsonl"]
    with pytest.raises(InputError, match="no .* file"):  # a trailing '/' names folders only
        resolve_inputs([f"{folder}/**/"])


def test_a_run_on_a_glob_through_a_symlink_loop_reads_each_file_once(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    """Item 7, as a user runs it: the two failing entries are two failed inputs (within
    ``--max-failed-files 2``), not 82, and each data file is read once. With two loops
    glob's own ``**`` had 2**40 paths to list: the run never started (the timeout)."""
    folder = _looped_folder(tmp_path, sample_lines, loops=2)
    argv = [sys.executable, "-m", "pipeline", "extract", "--input", f"{folder}/**/*.jsonl"]
    argv += ["--workers", "1", "--out", str(tmp_path / "work"), "--max-failed-files", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "work" / "extract" / "_summary.json").read_text())
    assert sorted(f["file"] for f in summary["failed_files"]) == ["dangling.jsonl", "loop.jsonl"]
    assert summary["files"] == 2 and summary["lines_read"] == 5
    assert summary["duplicate_papers_across_files"] == 0


def test_a_bibliography_line_or_list_file_past_the_limit_is_refused_unread(
    tmp_path: Path,
) -> None:
    """A JSONL line without an end (3 GB of NUL bytes, a sparse file) was read whole: out of
    memory under a 1 GB limit. Now reading stops at ``MAX_LINE_BYTES`` with one line naming
    the file and line; a list file past the limit is refused by its size before it is read."""
    line = tmp_path / "bibliographies.jsonl"
    with open(line, "wb") as f:
        f.write(b'{"survey_id": "s1", "references": []}\n')
        f.truncate(3 << 30)
    lists = tmp_path / "lists"
    lists.mkdir()
    with open(lists / "s1.bib", "wb") as f:
        f.truncate(100 << 20)
    code = f"""
from pathlib import Path
from pipeline.evaluate.bibliography import score
for target in (Path({str(line)!r}), Path({str(lists)!r})):
    try:
        score.read_input(target)
        print("read")
    except score.BibliographyError as e:
        print(e)
"""
    first, second = _bounded(code).splitlines()
    assert first == f"{line}:2: a line of more than 64 MB; a line holds one survey's references"
    assert second.startswith(f"{lists}/s1.bib: 104,857,600 bytes, more than 64 MB")
