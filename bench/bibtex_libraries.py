"""Our BibTeX reader (:mod:`pipeline.evaluate.bibliography.formats`) against two well-kept libraries,
``bibtexparser`` 1.x and ``pybtex``, on real ``.bib`` files and on the broken entries
generators print.

The project adds a dependency only when a library does the job better than its own code,
so this measures the job ``evaluate --bibliography`` needs: per entry, the title, DOI and
arXiv id (``eprint``), in file order, and a clear error naming the line of an entry that
does not parse. For each file: entries read, and per field how many entries the library
gives the same value as ours (the libraries' raw values go through our
:func:`~pipeline.evaluate.bibliography.formats.latex_to_text`, so LaTeX clean-up is not compared);
then the time to read all files repeated ``--repeat`` times; then what each does with
each broken text (:data:`BROKEN`).

The libraries are not dependencies: ``pip install --target DIR "bibtexparser<2" pybtex``
and pass ``--libs DIR``. The real files are other people's work and are not in the
repository; docs/evaluation.md names the ones measured (repository and commit).

Usage: ``python bench/bibtex_libraries.py --libs DIR FILE.bib ...``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.evaluate.bibliography.formats import BibFormatError, latex_to_text, parse_bibtex

FIELDS = ("title", "doi", "arxiv_id")
# What generators print when they get BibTeX wrong (seen in LLM outputs): each must give a
# clear error or a counted drop, never a silently wrong or missing reference.
BROKEN = {
    "unclosed brace": "@article{a,\n title={Attention is all you need,\n year={2017}\n}\n"
    "@article{b, title={Deep residual learning}, year={2016}}\n",
    "missing comma": "@article{a,\n title={Attention is all you need}\n year={2017}\n}\n",
    "markdown fence": "```bibtex\n@article{a, title={Attention is all you need}}\n```\n",
    "duplicate key": "@article{a, title={One}}\n@article{a, title={Two}}\n",
    "no key": "@article{title={Attention is all you need}, year={2017}}\n",
}


def _ours(text: str, where: str) -> list[dict[str, Any]]:
    return parse_bibtex(text, where).references


def _bibtexparser(text: str, where: str) -> list[dict[str, Any]]:
    import bibtexparser
    from bibtexparser.bparser import BibTexParser

    parser = BibTexParser(common_strings=True, ignore_nonstandard_types=False)
    entries = bibtexparser.loads(text, parser=parser).entries
    out = []
    for e in entries:
        eprint = e.get("eprint")
        if eprint and e.get("archiveprefix", "arxiv").lower() != "arxiv":
            eprint = None
        out.append({"title": e.get("title"), "doi": e.get("doi"), "arxiv_id": eprint})
    return out


def _pybtex(text: str, where: str) -> list[dict[str, Any]]:
    from pybtex.database import parse_string
    from pybtex.errors import set_strict_mode

    set_strict_mode(False)  # else a duplicate field or key stops the whole file

    data = parse_string(text, "bibtex")
    out = []
    for e in data.entries.values():
        f = {k.lower(): v for k, v in e.fields.items()}
        eprint = f.get("eprint")
        if eprint and f.get("archiveprefix", "arxiv").lower() != "arxiv":
            eprint = None
        out.append({"title": f.get("title"), "doi": f.get("doi"), "arxiv_id": eprint})
    return out


READERS = {"ours": _ours, "bibtexparser": _bibtexparser, "pybtex": _pybtex}


def _clean(value: Any) -> str | None:
    return latex_to_text(value) or None if isinstance(value, str) else None


def _outcome(reader, text: str) -> str:
    try:
        got = reader(text, "broken.bib")
    except BibFormatError as e:
        return f"error: {e}"
    except Exception as e:  # a library's own error: its type and first line
        return f"error ({type(e).__name__}): {str(e).splitlines()[0][:70] if str(e) else ''}"
    return f"{len(got)} entries: " + "; ".join(str(r.get("title"))[:32] for r in got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--libs", type=Path, required=True, help="where the libraries are")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, str(args.libs))
    import bibtexparser
    import pybtex

    print(f"bibtexparser {bibtexparser.__version__}, pybtex {pybtex.__version__}")
    texts = {f.name: f.read_text(encoding="utf-8", errors="replace") for f in args.files}
    agree: dict[str, Counter] = {name: Counter() for name in READERS}
    for name, text in texts.items():
        ours = _ours(text, name)
        row = [f"{name[:44]:44s} ours {len(ours):4d}"]
        for lib, reader in READERS.items():
            if lib == "ours":
                continue
            try:
                theirs = reader(text, name)
            except Exception as e:
                row.append(f"{lib} error ({type(e).__name__})")
                continue
            agree[lib]["entries_ours"] += len(ours)
            agree[lib]["entries_theirs"] += len(theirs)
            if len(theirs) == len(ours):
                for a, b in zip(ours, theirs, strict=True):
                    for f in FIELDS:
                        agree[lib][f"{f}_same"] += a[f] == _clean(b[f])
                        agree[lib][f"{f}_present_ours"] += a[f] is not None
                        agree[lib][f"{f}_present_theirs"] += b[f] is not None
            row.append(f"{lib} {len(theirs):4d}")
        print("  ".join(row))
    for lib, counts in agree.items():
        if counts:
            print(f"{lib}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    big = "\n".join(texts.values()) * args.repeat
    print(f"## time: {len(big) / 1e6:.1f} MB ({args.repeat} x the files)")
    for lib, reader in READERS.items():
        start = time.perf_counter()
        n = len(reader(big, "big.bib"))
        print(f"  {lib:12s} {time.perf_counter() - start:7.2f} s  {n} entries (keys repeat)")
    print("## broken entries")
    for case, text in BROKEN.items():
        print(f"  {case}:")
        for lib, reader in READERS.items():
            print(f"    {lib:12s} {_outcome(reader, text)}")


if __name__ == "__main__":
    main()
