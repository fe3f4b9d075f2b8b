"""An OpenAlex works snapshot for the synthetic scale corpus of :mod:`bench.scale_corpus`.

The scale corpus writes its extract tables directly and has no OpenAlex to ask, so without
this the ``openalex`` stage describes nothing there. This module writes, beside the corpus, a
folder in OpenAlex's snapshot layout (``works/updated_date=<date>/part_NNN.gz``, one work
object per JSON line) that ``python -m pipeline openalex --openalex DIR`` reads through its
own snapshot route (:func:`pipeline.corpus.openalex.snapshot_lookup`).

Which works: every work of the corpus model's two pools that the works stage can look up,
whether or not a corpus paper cites it (a real snapshot holds every work; the stage asks for
the cited ones): every arXiv work (found by its DataCite DOI ``10.48550/arxiv.<id>``, its
journal DOI or its OpenAlex id ``W<index + 1e9>``, the id the corpus's bib entries carry) and
every work outside arXiv with a DOI or an OpenAlex id, less :data:`NOT_IN_OPENALEX` of them.
The proceedings-volume DOIs of the junk guard name no work and get no record.

What a record says (every share a named constant below, with where it comes from):

* title: a corpus paper's own title (read from the generated ``papers`` table); any other
  work the title its citers' bib strings carry (the same words, from the same pool index);
* year and date from the pool, venue: ``arXiv (Cornell University)`` for an arXiv work
  without a journal DOI, else the venue its bib strings name; type ``preprint`` or
  ``article``; language ``en``;
* primary topic: the work's own synthetic topic (its area, the words its title names), under
  the subfield of that area (:data:`AREA_SUBFIELDS`) or, for :data:`CATEGORY_SUBFIELD_SHARE`
  of works, the subfield of its arXiv category's field (:data:`CATEGORY_SUBFIELDS`): OpenAlex's
  classifier reads the title, the abstract, the venue and the citations, so both pull;
* abstract (``abstract_inverted_index``): a corpus paper's arXiv abstract, another arXiv work's
  with :data:`ARXIV_ABSTRACT_SHARE`, a work outside arXiv's with the share OpenAlex documents
  for its year (:func:`abstract_share`); licence: an arXiv work's from the arXiv licences the
  corpus draws from, a work outside arXiv's open with :data:`EXTERNAL_OPEN_LICENSE`.

Label-free by construction: whether a work has a record, an abstract or an open licence is a
function of its pool index, kind and year alone (a hash, never a draw that knows who cites it),
so a survey's listed works are described exactly as often as the other works of the same
year and kind. Real OpenAlex may describe cited works more often (they are more often
journal articles with deposited abstracts); the scale corpus has no measured figure for it,
so the snapshot does not invent one. Same ``(papers, seed)`` and corpus tables, same bytes.

Usage: ``python bench/scale_openalex.py --papers 20000 --out bench_out/scale/n20000``
(writes ``<out>_openalex/``; the corpus's extract tables must exist).
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import scale_corpus as SC  # noqa: E402
from pipeline.core import schema as S  # noqa: E402
from pipeline.core.files import atomic_path  # noqa: E402

UPDATED = "2024-06-01"
RECORDS_PER_FILE = 100_000  # the snapshot's own parts hold up to a few hundred thousand
OPENALEX_ARXIV_BASE = 1_000_000_000  # W<index + base>: the ids the corpus's bib entries carry
OPENALEX_EXTERNAL_BASE = 3_000_000_000
OPENALEX_DOI_ONLY_BASE = 5_000_000_000  # a work its citers name by DOI only still has an id

# ----------------------------------------------------------------- shares
# OpenAlex's work-object docs ("Abstract inverted index coverage"): "over 60% of works in
# 2022 have abstract data, compared to 45% for works older than 2000"; linear in between.
ABSTRACT_SHARE_OLD, ABSTRACT_SHARE_2022 = 0.45, 0.60
# arXiv deposits every preprint's abstract with its DataCite DOI, which OpenAlex ingests;
# assumed, not measured: most arXiv works carry one.
ARXIV_ABSTRACT_SHARE = 0.90
# works outside arXiv whose OpenAlex location names a CC or public-domain licence: assumed,
# not measured (about a third of recent articles are gold or hybrid open access).
EXTERNAL_OPEN_LICENSE = 0.30
# works with a DOI or OpenAlex id that the snapshot lacks: assumed, not measured (books,
# reports and old proceedings with DOIs OpenAlex never ingested).
NOT_IN_OPENALEX = 0.03
# of works, the share whose primary topic sits under their arXiv category's subfield rather
# than their title area's: not measured; OpenAlex's classifier reads title, abstract, venue
# and citations, so the area (title words) and the category (citations, venue) both pull.
CATEGORY_SUBFIELD_SHARE = 0.4

# ----------------------------------------------------------------- OpenAlex's vocabulary
# Subfields of OpenAlex's field 17 "Computer Science" and a few of fields 26 (Mathematics)
# and 31 (Physics and Astronomy), by their display names (developers.openalex.org).
CS_FIELD, MATH_FIELD, PHYSICS_FIELD = "Computer Science", "Mathematics", "Physics and Astronomy"
DOMAIN = "Physical Sciences"  # the domain of all three fields
# the scale corpus's CS areas (scale_corpus._CS_AREAS, in order) -> the subfield of the
# OpenAlex topics that name them
AREA_SUBFIELDS = (
    "Computer Vision and Pattern Recognition", "Artificial Intelligence", "Information Systems",
    "Artificial Intelligence", "Software", "Artificial Intelligence", "Artificial Intelligence",
    "Computer Vision and Pattern Recognition", "Signal Processing", "Information Systems",
    "Software", "Computer Networks and Communications", "Artificial Intelligence",
    "Computer Networks and Communications", "Artificial Intelligence", "Information Systems",
    "Information Systems", "Computational Theory and Mathematics", "Hardware and Architecture",
    "Computer Networks and Communications", "Artificial Intelligence",
    "Human-Computer Interaction", "Computer Vision and Pattern Recognition",
    "Computer Vision and Pattern Recognition", "Computer Networks and Communications",
    "Software", "Computer Networks and Communications",
    "Computer Vision and Pattern Recognition", "Artificial Intelligence",
    "Hardware and Architecture",
)  # fmt: skip
# the scale corpus's other areas (scale_corpus._OTHER_AREAS, in order) -> (subfield, field)
OTHER_AREA_SUBFIELDS = (
    ("Astronomy and Astrophysics", PHYSICS_FIELD), ("Condensed Matter Physics", PHYSICS_FIELD),
    ("Astronomy and Astrophysics", PHYSICS_FIELD), ("Statistical and Nonlinear Physics", PHYSICS_FIELD),
    ("Algebra and Number Theory", MATH_FIELD), ("Statistical and Nonlinear Physics", PHYSICS_FIELD),
    ("Nuclear and High Energy Physics", PHYSICS_FIELD), ("Astronomy and Astrophysics", PHYSICS_FIELD),
    ("Computational Mechanics", "Engineering"), ("Astronomy and Astrophysics", PHYSICS_FIELD),
    ("Atomic and Molecular Physics, and Optics", PHYSICS_FIELD),
    ("Condensed Matter Physics", PHYSICS_FIELD),
)  # fmt: skip
# an arXiv category -> the subfield OpenAlex files most of its works under (by the category's
# name; a category not listed falls under its field's general subfield)
CATEGORY_SUBFIELDS = {
    "cs.LG": "Artificial Intelligence", "cs.AI": "Artificial Intelligence",
    "cs.CL": "Artificial Intelligence", "cs.NE": "Artificial Intelligence",
    "cs.MA": "Artificial Intelligence", "cs.CV": "Computer Vision and Pattern Recognition",
    "cs.GR": "Computer Graphics and Computer-Aided Design",
    "cs.CG": "Computer Graphics and Computer-Aided Design",
    "cs.RO": "Control and Systems Engineering", "cs.SY": "Control and Systems Engineering",
    "cs.CR": "Computer Networks and Communications", "cs.NI": "Computer Networks and Communications",
    "cs.DC": "Computer Networks and Communications", "cs.IT": "Signal Processing",
    "cs.SD": "Signal Processing", "cs.MM": "Signal Processing",
    "cs.DS": "Computational Theory and Mathematics", "cs.CC": "Computational Theory and Mathematics",
    "cs.LO": "Computational Theory and Mathematics", "cs.FL": "Computational Theory and Mathematics",
    "cs.DM": "Computational Theory and Mathematics", "cs.GT": "Computational Theory and Mathematics",
    "cs.SE": "Software", "cs.PL": "Software", "cs.MS": "Software", "cs.OS": "Software",
    "cs.HC": "Human-Computer Interaction", "cs.IR": "Information Systems",
    "cs.DB": "Information Systems", "cs.DL": "Information Systems", "cs.SI": "Information Systems",
    "cs.CY": "Information Systems", "cs.AR": "Hardware and Architecture",
    "cs.ET": "Hardware and Architecture", "cs.PF": "Hardware and Architecture",
    "math.PR": "Statistics and Probability", "stat.ME": "Statistics and Probability",
    "stat.ML": "Artificial Intelligence", "math.AP": "Applied Mathematics",
    "math.OC": "Control and Optimization", "math.CO": "Discrete Mathematics and Combinatorics",
    "math.AG": "Geometry and Topology", "math.NT": "Algebra and Number Theory",
    "hep-th": "Nuclear and High Energy Physics", "hep-ph": "Nuclear and High Energy Physics",
    "astro-ph.GA": "Astronomy and Astrophysics", "astro-ph.CO": "Astronomy and Astrophysics",
    "astro-ph.SR": "Astronomy and Astrophysics", "astro-ph.HE": "Astronomy and Astrophysics",
    "gr-qc": "Astronomy and Astrophysics", "quant-ph": "Atomic and Molecular Physics, and Optics",
    "physics.optics": "Atomic and Molecular Physics, and Optics",
    "cond-mat.mes-hall": "Condensed Matter Physics", "cond-mat.str-el": "Condensed Matter Physics",
    "cond-mat.mtrl-sci": "Condensed Matter Physics",
    "cond-mat.stat-mech": "Statistical and Nonlinear Physics",
    "physics.flu-dyn": "Computational Mechanics", "eess.SP": "Signal Processing",
    "eess.IV": "Computer Vision and Pattern Recognition",
    "q-bio.NC": "Cognitive Neuroscience", "econ.EM": "Economics and Econometrics",
    "q-fin.ST": "Finance",
}  # fmt: skip
SUBFIELD_FIELDS = {
    "Control and Systems Engineering": "Engineering", "Computational Mechanics": "Engineering",
    "Statistics and Probability": MATH_FIELD, "Applied Mathematics": MATH_FIELD,
    "Control and Optimization": MATH_FIELD, "Discrete Mathematics and Combinatorics": MATH_FIELD,
    "Geometry and Topology": MATH_FIELD, "Algebra and Number Theory": MATH_FIELD,
    "Nuclear and High Energy Physics": PHYSICS_FIELD, "Astronomy and Astrophysics": PHYSICS_FIELD,
    "Atomic and Molecular Physics, and Optics": PHYSICS_FIELD,
    "Condensed Matter Physics": PHYSICS_FIELD, "Statistical and Nonlinear Physics": PHYSICS_FIELD,
    "Cognitive Neuroscience": "Neuroscience", "Economics and Econometrics": "Economics, Econometrics and Finance",
    "Finance": "Economics, Econometrics and Finance",
}  # fmt: skip
FIELD_DOMAINS = {"Neuroscience": "Life Sciences",
                 "Economics, Econometrics and Finance": "Social Sciences"}  # fmt: skip
ARXIV_VENUE = "arXiv (Cornell University)"  # the source OpenAlex files arXiv preprints under
_ARXIV_LICENSES = ("cc-by", "cc-by-nc-sa", None, None)  # scale_corpus._LICENSES as OpenAlex ids


def _unit(key: np.ndarray, salt: int) -> np.ndarray:
    """A uniform number in [0, 1) per key: a fixed hash of (key, salt), no random state."""
    x = key.astype(np.uint64) + np.uint64(salt * 0x9E3779B97F4A7C15 % (1 << 64))
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def abstract_share(year: np.ndarray) -> np.ndarray:
    """The share of OpenAlex works of ``year`` with an abstract (:data:`ABSTRACT_SHARE_OLD`
    up to 2000, :data:`ABSTRACT_SHARE_2022` from 2022, linear in between)."""
    t = np.clip((year - 2000) / 22.0, 0.0, 1.0)
    return ABSTRACT_SHARE_OLD + (ABSTRACT_SHARE_2022 - ABSTRACT_SHARE_OLD) * t


def _subfield(area: np.ndarray, is_cs: np.ndarray, cat_names: list[str], cats: np.ndarray,
              by_category: np.ndarray) -> list[str]:  # fmt: skip
    by_area = np.where(
        is_cs,
        np.array(AREA_SUBFIELDS, dtype=object)[area % len(AREA_SUBFIELDS)],
        np.array([s for s, _ in OTHER_AREA_SUBFIELDS], dtype=object)[
            area % len(OTHER_AREA_SUBFIELDS)
        ],
    )
    of_cat = np.array([CATEGORY_SUBFIELDS.get(c, "General Computer Science") for c in cat_names],
                      dtype=object)[cats]  # fmt: skip
    return list(np.where(by_category, of_cat, by_area))


def _field(subfield: str) -> str:
    return SUBFIELD_FIELDS.get(subfield, CS_FIELD)


def _inverted(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, word in enumerate(text.split()):
        out.setdefault(word, []).append(i)
    return out


def _bib_titles(index: np.ndarray, arxiv: bool, area: np.ndarray, is_cs: np.ndarray) -> pl.Series:
    """The title a work's citers write (scale_corpus's raw strings: the same pool key)."""
    key = index * 2 + (0 if arxiv else 1)
    return pl.select(
        pl.concat_str(
            SC._pick(SC._ADJ, key), pl.lit(" "), SC._pick(SC._NOUNS, key // 16), pl.lit(" for "),
            SC._pick(SC._MODIFIERS, key // 256), pl.lit(" "), SC._area_names(area, is_cs),
        )
    ).to_series()  # fmt: skip


def _abstracts(titles: pl.Series, rng: np.random.Generator) -> pl.Series:
    """An abstract shaped like the corpus's own (``scale_corpus``: an opener naming the work's
    title words, then eight neutral sentences, about 1,000 characters): a journal abstract is
    as long as an arXiv one, so the source of an abstract does not show in its length."""
    n = titles.len()
    opener = pl.select(pl.concat_str(pl.lit("We propose novel "), titles, pl.lit("."))).to_series()
    sentences = [SC._sentences(rng, n) for _ in range(8)]
    return pl.select(pl.concat_str([opener, *sentences], separator=" ")).to_series()


def _date_strings(days: np.ndarray) -> pl.Series:
    return pl.Series(days.astype(np.int32)).cast(pl.Date).dt.to_string("%Y-%m-%d")


CHUNK = 50_000  # works built at once: memory holds one chunk's strings, not the snapshot's


def _years(days: np.ndarray) -> np.ndarray:
    return days.astype("datetime64[D]").astype("datetime64[Y]").astype(int) + 1970


def _arxiv_works(corpus: SC.ScaleCorpus, own: pl.DataFrame, lo: int, hi: int) -> list[dict]:
    """The work objects of arXiv pool indices ``[lo, hi)``, in index (= id) order."""
    ai = np.arange(lo, hi, dtype=np.int64)
    ids = corpus.arxiv_ids.slice(lo, hi - lo)
    frame = pl.DataFrame({S.PAPER_ID: ids}).join(own, on=S.PAPER_ID, how="left",
                                                 maintain_order="left")  # fmt: skip
    area, cats = corpus.arxiv_area[lo:hi], corpus.arxiv_cats[lo:hi]
    cs = cats < corpus.n_cs
    bib = _bib_titles(ai, True, area, cs)
    rng = np.random.default_rng([corpus.seed, corpus.papers, 7, 0, lo])  # sentences only
    title = frame[S.TITLE].fill_null(bib).to_list()
    abstract = frame[S.ABSTRACT].fill_null(_abstracts(bib, rng)).to_list()
    has_abstract = corpus.in_corpus[lo:hi] | (_unit(ai, 1) < ARXIV_ABSTRACT_SHARE)
    license_pick = (_unit(ai, 2) * len(_ARXIV_LICENSES)).astype(np.int64)
    subfield = _subfield(area, cs, corpus.cat_names, cats, _unit(ai, 3) < CATEGORY_SUBFIELD_SHARE)
    topic = SC._area_names(area, cs).to_list()
    dates = _date_strings(corpus.arxiv_dates[lo:hi]).to_list()
    years = _years(corpus.arxiv_dates[lo:hi])
    venues = SC._pick(SC._VENUES, ai * 2 // 3).to_list()
    doi = pl.select(SC._doi_expr(pl.Series(ai), "a")).to_series().to_list()
    journal = corpus.arxiv_has_doi[lo:hi]
    return [
        _work(
            OPENALEX_ARXIV_BASE + lo + k,
            doi[k] if journal[k] else f"10.48550/arxiv.{arxiv_id}",
            title[k], dates[k], int(years[k]), venues[k] if journal[k] else ARXIV_VENUE,
            "article" if journal[k] else "preprint", topic[k], subfield[k],
            abstract[k] if has_abstract[k] else None, _ARXIV_LICENSES[license_pick[k]],
            f"https://arxiv.org/abs/{arxiv_id}",
        )
        for k, arxiv_id in enumerate(ids.to_list())
    ]  # fmt: skip


def _external_works(corpus: SC.ScaleCorpus, index: np.ndarray, base: int) -> list[dict]:
    """The work objects of the external pool's ``index`` (sorted), ids ``W<base + index>``."""
    ei = index.astype(np.int64)
    area, cats = corpus.external_area[ei], corpus.external_cats[ei]
    cs = cats < corpus.n_cs
    bib = _bib_titles(ei, False, area, cs)
    rng = np.random.default_rng([corpus.seed, corpus.papers, 7, base, int(ei[0])])
    abstracts = _abstracts(bib, rng).to_list()
    bib = bib.to_list()
    years = _years(corpus.external_dates[ei])
    has_abstract = _unit(ei, 11) < abstract_share(years)
    open_license = _unit(ei, 12) < EXTERNAL_OPEN_LICENSE
    subfield = _subfield(area, cs, corpus.cat_names, cats, _unit(ei, 14) < CATEGORY_SUBFIELD_SHARE)
    topic = SC._area_names(area, cs).to_list()
    dates = _date_strings(corpus.external_dates[ei]).to_list()
    venues = SC._pick(SC._VENUES, (ei * 2 + 1) // 3).to_list()
    doi = pl.select(SC._doi_expr(pl.Series(ei), "j")).to_series().to_list()
    has_doi = corpus.external_has_doi[ei]
    return [
        _work(
            base + i, doi[k] if has_doi[k] else None, bib[k], dates[k], int(years[k]),
            venues[k], "article", topic[k], subfield[k],
            abstracts[k] if has_abstract[k] else None, "cc-by" if open_license[k] else None,
            None,
        )
        for k, i in enumerate(ei.tolist())
    ]  # fmt: skip


def records(corpus: SC.ScaleCorpus, papers: pl.DataFrame) -> Iterator[list[dict[str, Any]]]:
    """Every work object of the snapshot, in chunks, in OpenAlex id order (arXiv works, then
    works outside arXiv with an OpenAlex id, then those known by DOI only). ``papers``: the
    corpus's ``extract`` papers (``paper_id``, ``title``, ``abstract``)."""
    own = papers.select(S.PAPER_ID, S.TITLE, S.ABSTRACT)
    for lo in range(0, len(corpus.arxiv_dates), CHUNK):
        yield _arxiv_works(corpus, own, lo, min(lo + CHUNK, len(corpus.arxiv_dates)))
    ei = np.arange(len(corpus.external_dates), dtype=np.int64)
    present = (corpus.external_has_doi | corpus.external_has_openalex) & (
        _unit(ei, 13) >= NOT_IN_OPENALEX
    )
    for base, which in ((OPENALEX_EXTERNAL_BASE, corpus.external_has_openalex),
                        (OPENALEX_DOI_ONLY_BASE, ~corpus.external_has_openalex)):  # fmt: skip
        index = np.flatnonzero(present & which)
        for lo in range(0, len(index), CHUNK):
            yield _external_works(corpus, index[lo : lo + CHUNK], base)


def _work(number: int, doi: str | None, title: str, date: str, year: int, venue: str,
          kind: str, topic: str, subfield: str, abstract: str | None, license_id: str | None,
          arxiv_url: str | None) -> dict[str, Any]:  # fmt: skip
    wid = f"https://openalex.org/W{number}"
    field = _field(subfield)
    location = {"source": {"display_name": venue}, "license": license_id,
                "landing_page_url": arxiv_url or (f"https://doi.org/{doi}" if doi else None)}  # fmt: skip
    return {
        "id": wid,
        "doi": f"https://doi.org/{doi}" if doi else None,
        "title": title,
        "display_name": title,
        "publication_year": year,
        "publication_date": date,
        "type": kind,
        "language": "en",
        "is_retracted": False,
        "updated_date": f"{UPDATED}T00:00:00.000000",
        "ids": {"openalex": wid, **({"doi": f"https://doi.org/{doi}"} if doi else {})},
        "primary_location": location,
        "locations": [location],
        "primary_topic": {
            "display_name": topic,
            "subfield": {"display_name": subfield},
            "field": {"display_name": field},
            "domain": {"display_name": FIELD_DOMAINS.get(field, DOMAIN)},
        },
        "abstract_inverted_index": _inverted(abstract) if abstract else None,
    }


def snapshot_dir(out: Path) -> Path:
    """Where the snapshot of the corpus in work directory ``out`` goes: beside it, never in
    it (the work directory's layout belongs to :mod:`pipeline.engine.workdir`)."""
    return out.parent / f"{out.name}_openalex"


def write_snapshot(out: Path, papers: int, seed: int = 1,
                   papers_per_file: int = SC.PAPERS_PER_FILE) -> Path:  # fmt: skip
    """Write the snapshot of the corpus in ``out`` (its extract tables must exist) to
    :func:`snapshot_dir`; returns that folder. Same corpus, same bytes."""
    corpus = SC.ScaleCorpus(papers, seed, papers_per_file)
    files = sorted((out / "extract" / "papers").glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no extract papers under {out}: build the corpus first")
    table = pl.read_parquet(files, columns=[S.PAPER_ID, S.TITLE, S.ABSTRACT])
    root = snapshot_dir(out)
    part_dir = root / "works" / f"updated_date={UPDATED}"
    part_dir.mkdir(parents=True, exist_ok=True)
    for old in part_dir.glob("*.gz"):
        old.unlink()
    encode = msgspec.json.Encoder(order="sorted").encode
    lines: list[bytes] = []
    parts = 0

    def flush() -> None:
        nonlocal parts
        with atomic_path(part_dir / f"part_{parts:03d}.gz") as tmp:
            tmp.write_bytes(gzip.compress(b"".join(lines), compresslevel=6, mtime=0))
        parts += 1
        lines.clear()

    for chunk in records(corpus, table):
        for work in chunk:
            lines.append(encode(work) + b"\n")
            if len(lines) == RECORDS_PER_FILE:
                flush()
    if lines or not parts:
        flush()
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, required=True, help="corpus papers")
    ap.add_argument("--out", type=Path, required=True, help="the corpus's work directory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--papers-per-file", type=int, default=SC.PAPERS_PER_FILE)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    root = write_snapshot(args.out, args.papers, args.seed, args.papers_per_file)
    print(f"wrote the OpenAlex snapshot {root} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
