"""The bundled demo corpus that ``python -m pipeline demo`` runs every stage on.

It comes in the form unarXive 2024 is published in on the Hub: one gzip-compressed tar of
``processed_unarxive_extended_data/.../*.jsonl`` members in the 2024 layout, byte-split
into ``unarXive_2024.tar.gz.part_aa``, ``_ab``, ``_ac`` (:func:`pipeline.corpus.archive.pack`).
Its members, built deterministically:

* synthetic unarXive records (one generated world in four members, each holding many
  papers, with a few malformed lines to show rejects), converted from the generator's
  2022 layout by the publisher's grouping rule (:func:`pipeline.corpus.layout.group_sections`:
  stripped paragraphs with unshifted spans, ``"null"`` for a null heading); every 40th
  paper has a paragraph without a heading, which the publisher files under
  ``"Unknown Section"``;
* the real records shipped as package data in ``pipeline/demo_data``: 49 papers of the
  2022 sample in one member (converted the same way: 9 of their paragraphs have a null
  heading) and the 2024-layout preview paper in another, with their licences as
  non-JSONL members;
* one empty member, as the corpus has.

The tests read the real samples as ``tests/fixtures/...`` (a link to that folder).
``demo`` (:func:`pipeline.api.demo`) then runs every stage into ``<out>/`` and
evaluates the baselines.
"""

from __future__ import annotations

import importlib.resources
from importlib.resources.abc import Traversable
from pathlib import Path


def demo_data() -> Traversable:
    """``pipeline/demo_data``: the real samples, package data (works from a wheel too)."""
    return importlib.resources.files("pipeline") / "demo_data"


REAL_FILES = (
    "unarxive-2022-sample/arXiv_src_2212_086.jsonl.gz",
    "unarxive-2024-preview/preview.jsonl",
)


ROOT = "processed_unarxive_extended_data/unarXive_01981221"
ARCHIVE = "unarXive_2024.tar.gz"
NO_HEADING_EVERY = 40  # every 40th synthetic paper loses one paragraph's heading


def _to_2024(data: bytes, drop_heading_every: int = 0) -> bytes:
    """JSONL in the 2022 layout -> the 2024 layout (malformed lines kept as they are);
    with ``drop_heading_every``, that line's last paragraph loses its heading first."""
    from pipeline.corpus.layout import convert_line

    def drop_heading(record: dict) -> dict:
        body = [dict(p) for p in record["body_text"]]
        if body:
            body[-1].pop("section", None)
        return {**record, "body_text": body}

    out = []
    for i, line in enumerate(data.splitlines()):
        if line.strip():
            edit = drop_heading if drop_heading_every and i % drop_heading_every == 0 else None
            out.append(convert_line(line, edit)[0])
    return b"\n".join(out) + b"\n"


def corpus_members(
    papers: int,
    fixtures: Traversable | Path | None = None,
    scratch: Path | None = None,
    openalex_root: Path | None = None,
) -> list[tuple[str, bytes | None]]:
    """The demo archive's members, in archive order (see the module docstring); with
    ``openalex_root``, also the OpenAlex works file of the works its synthetic papers cite
    (:mod:`pipeline.synth.openalex_works`) in that folder."""
    import gzip
    import tempfile

    from pipeline.synth.generator import generate

    fixtures = demo_data() if fixtures is None else fixtures
    members: list[tuple[str, bytes | None]] = [
        ("processed_unarxive_extended_data", None),
        (ROOT, None),
    ]
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        paths = generate(
            Path(tmp), papers=papers, layout="2022", seed=0, small=True, malformed=6, files=4
        )
        members.append((f"{ROOT}/synthetic", None))
        if openalex_root is not None:
            from pipeline.synth.openalex_works import write_works_file

            lines = (line for p in paths for line in p.read_bytes().splitlines())
            write_works_file(openalex_root, lines, papers, seed=0, small=True)
        for p in paths:
            data = _to_2024(p.read_bytes(), NO_HEADING_EVERY)
            members.append((f"{ROOT}/synthetic/{p.name}", data))
    for rel in REAL_FILES:
        src = fixtures.joinpath(*rel.split("/"))
        if not src.is_file():
            raise FileNotFoundError(f"demo: real sample {src} is missing")
        folder, leaf = rel.split("/")
        with importlib.resources.as_file(src) as local:
            data = Path(local).read_bytes()
        if leaf.endswith(".gz"):
            data = gzip.decompress(data)
            leaf = leaf[: -len(".gz")]
        if "2022" in folder:
            data = _to_2024(data)
        members.append((f"{ROOT}/{folder}", None))
        members.append((f"{ROOT}/{folder}/{leaf}", data))
        lic = fixtures.joinpath(folder, "LICENSE")
        if lic.is_file():
            with importlib.resources.as_file(lic) as local:
                members.append((f"{ROOT}/{folder}/LICENSE", Path(local).read_bytes()))
    members.append((f"{ROOT}/synthetic/arXiv_src_empty.jsonl", b""))
    return members


def build_corpus(
    corpus: Path,
    papers: int,
    fixtures: Traversable | Path | None = None,
    openalex_root: Path | None = None,
) -> list[Path]:
    """Write the demo corpus into ``corpus`` as the 3 parts of one tar.gz (idempotent: same
    bytes every time), and its OpenAlex works file under ``openalex_root`` if given; returns
    the parts' paths."""
    from pipeline.corpus.archive import pack

    corpus.mkdir(parents=True, exist_ok=True)
    members = corpus_members(papers, fixtures, scratch=corpus, openalex_root=openalex_root)
    return pack(members, corpus, ARCHIVE, parts=3)
