"""The real-record bench corpus (bench/real_corpus.py): every copy of a bundled paper is a
distinct paper to extract, and otherwise the real record's bytes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.real_corpus import real_corpus, real_lines, shape
from pipeline.rules.ids import strip_version


def test_copies_are_distinct_papers_and_otherwise_the_real_records(tmp_path: Path) -> None:
    lines = real_lines()
    one_copy_mb = sum(len(line) + 1 for line in lines) / 1e6
    files = real_corpus(tmp_path, size_mb=2 * one_copy_mb, file_mb=one_copy_mb)
    assert len(files) == 2
    ids, originals = [], []
    for f in files:
        for j, line in enumerate(f.read_bytes().splitlines()):
            rec = json.loads(line)
            # extract keys a paper by its normalised arXiv id: a suffix on the real id
            # would make every copy the same paper
            ids.append(strip_version(rec["metadata"]["id"]))
            assert strip_version(rec["paper_id"]) == ids[-1]
            source = json.loads(lines[j])
            originals.append(source["paper_id"])
            rec["paper_id"], rec["metadata"]["id"] = source["paper_id"], source["metadata"]["id"]
            assert rec == source  # nothing but the ids changed
    assert len(ids) == 2 * len(lines) == len(set(ids))
    assert set(originals) == {json.loads(line)["paper_id"] for line in lines}
    got = shape(files)
    assert got["papers_per_mb"] > 0 and got["bib_entries_per_mb"] > 0
    assert 0 < got["ascii_bib_strings"] < 1
