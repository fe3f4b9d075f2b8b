"""How often the heading rule of per-section coverage matches a generated heading to the right
section, before and after function words and plurals were folded.

The headings are real: every distinct section heading of each paper in the real samples
(``tests/fixtures``' sources, ``../shared/data``: 50 papers; pass ``--data``). Each paper's
headings play its aspects, and a generator's heading is one of them rewritten as
generators write them:

* ``same``: the heading itself, in capitals (the rule must match it);
* ``number``: its last word's grammatical number flipped by English's regular endings
  (``Related Works`` -> ``Related Work``, ``Strategy`` -> ``Strategies``);
* ``overview``: ``An overview of <heading>``.

Each variant ends ``right`` (matched its own heading), ``wrong`` (another heading of the
paper) or ``none``. ``collisions`` counts, per rule, the distinct headings of a paper that the
rule matches to another heading of the same paper with the heading itself left out: two
different sections the rule cannot tell apart. The variants follow the same regular
endings the rule folds, so ``number`` shows the reach of the rule, not its accuracy on
irregular words; ``collisions`` is the cost.

Usage: ``python bench/heading_rule.py [--data ../shared/data]``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from pipeline.evaluate.bibliography.aspects import match_headings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
VARIANTS = ("same", "number", "overview")


def paper_headings(data: Path) -> dict[str, list[str]]:
    """Distinct section headings of each paper of the JSONL files under ``data``, in order."""
    out: dict[str, list[str]] = {}
    for path in sorted(data.rglob("*")):
        if not path.is_file() or path.suffix not in ("", ".jsonl"):
            continue
        for line in path.open(encoding="utf-8"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            headings = out.setdefault(record["paper_id"], [])
            for paragraph in record.get("body_text") or []:
                heading = (paragraph.get("section") or "").strip()
                if heading and "{{" not in heading and heading not in headings:
                    headings.append(heading)
    return out


def flip_number(heading: str) -> str:
    """``heading`` with its last word's grammatical number flipped (regular English endings)."""
    head, _, last = heading.rpartition(" ")
    low = last.lower()
    if low.endswith("ies"):
        last = last[:-3] + "y"
    elif low.endswith(("ches", "shes", "xes", "sses")):
        last = last[:-2]
    elif low.endswith("s") and not low.endswith(("ss", "us", "is")):
        last = last[:-1]
    elif low.endswith("y") and low[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    elif low.endswith(("ch", "sh", "x", "ss")):
        last += "es"
    else:
        last += "s"
    return f"{head} {last}".strip()


def variant(heading: str, kind: str) -> str:
    if kind == "same":
        return heading.upper()
    if kind == "number":
        return flip_number(heading)
    return f"An overview of {heading}"


def measure(papers: dict[str, list[str]], *, stem: bool) -> dict[str, Counter]:
    out = {kind: Counter() for kind in (*VARIANTS, "collisions")}
    for headings in papers.values():
        aspects = [(f"{i:03d}", h, i) for i, h in enumerate(headings)]
        for kind in VARIANTS:
            written = {variant(h, kind): f"{i:03d}" for i, h in enumerate(headings)}
            got = match_headings(list(written), aspects, stem=stem)
            for text, own in written.items():
                hit = got[text]
                out[kind]["none" if hit is None else "right" if hit == own else "wrong"] += 1
        for i, h in enumerate(headings):
            others = [a for a in aspects if a[0] != f"{i:03d}"]
            out["collisions"]["collides" if match_headings([h], others, stem=stem)[h] else "apart"] += 1  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    papers = paper_headings(args.data)
    print(f"{len(papers)} papers, {sum(map(len, papers.values()))} distinct headings")
    for stem in (False, True):
        got = measure(papers, stem=stem)
        rule = "after (function words, plurals)" if stem else "before (words as written)"
        print(f"## {rule}")
        for kind, counts in got.items():
            print(f"  {kind:10s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
