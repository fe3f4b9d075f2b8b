"""Extract-level tables of a synthetic corpus shaped like unarXive 2024, written directly.

``make bench-scale`` runs the reduce stages on corpora of 100k to 2.3M papers. Going
through JSONL and ``extract`` would cost about 500 GB of text at full size, so this
module writes the four ``extract`` tables (``schema.PAPERS``, ``REFERENCES``,
``MENTIONS``, ``REJECTS``) with numpy and Polars, one input "file" of
:data:`PAPERS_PER_FILE` papers at a time (memory is bounded by one file plus the
work pools, under 1 GB at 2.3M papers). The runner's own map-stage machinery
(:func:`pipeline.engine.map_stage.run_map`) moves the files into place and writes their
manifests and completion markers, so ``python -m pipeline run --out DIR`` and every
per-stage command treat ``extract`` as done. ``pipeline synth`` stays what the demo
and the tests use: it writes real JSONL records through ``extract``.

Shape (every share is a named constant below, with where it comes from):

* papers dated 2000-2025, yearly volume growing like arXiv's; about 26% have a
  ``cs.*`` primary category, skewed like arXiv's CS categories; cross-lists;
* about 2% of CS papers are surveys (titles and abstracts with survey cues, so
  ``surveys`` detects them) with 50-1,100 bib entries, mean about 300, a long tail
  (:func:`survey_bib_sizes`); other papers have 15-60;
* cited works: arXiv works (85% of them corpus papers) and works outside arXiv
  (DOI and/or OpenAlex id); always older than the citing paper; popularity
  heavy-tailed (Pareto "fitness", so in-degrees follow a power law); most
  citations stay in the citing paper's category, and about half of those in its
  topic;
* every work has a topic (one of :data:`_CS_AREAS`, or of :data:`_OTHER_AREAS`
  outside CS) that its title names, in its own record and in the bib strings citing
  it: a survey's reading list shares its words more often than the other works of
  its field do, so a system that reads (BM25) can tell them apart, as on real
  surveys; without it, the reading-free probe of the leak audit had only chance to
  beat;
* about 30% of CS bib entries carry no identifier; some cite a corpus paper only by
  its DOI, an arXiv work by its DataCite DOI, or a work by a shared proceedings DOI
  (the ``works`` junk guard);
* mentions under 2024-layout section headings with every role (introduction,
  related work, background, method, experiment, discussion, conclusion) and, in
  surveys, a topical core, with and without section numbers;
* full text (``section_texts``) for every paper whose licence some release may carry, as
  extract keeps it, with the real records' mean section count and section length
  (:data:`SECTIONS_PER_PAPER`, :data:`SECTION_CHARS`); the text itself is cheap: slices
  of one word pool (:func:`word_pool`), so its Parquet bytes are not the real ones (the
  view's size on disk is projected with :data:`REAL_BYTES_PER_CHAR`).

Same ``(papers, seed, papers_per_file)`` give the same tables; a file's rows depend
only on the global pools and its own index.

Usage: ``python bench/scale_corpus.py --papers 100000 --out bench_out/scale/n100000``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.core import schema as S  # noqa: E402
from pipeline.core.config import Config  # noqa: E402
from pipeline.core.files import write_json  # noqa: E402
from pipeline.corpus.provenance import SYNTHETIC_GENERATORS, SYNTHETIC_PAPERS  # noqa: E402
from pipeline.corpus.sources import InputFile  # noqa: E402
from pipeline.engine.map_stage import run_map  # noqa: E402
from pipeline.engine.workdir import INPUTS  # noqa: E402
from pipeline.rules.licences import extractable  # noqa: E402
from pipeline.stages import GRAPH  # noqa: E402
from pipeline.stages.extract.rows import DICTIONARY_COLUMNS  # noqa: E402

log = logging.getLogger("pipeline")

GENERATOR_VERSION = 4  # part of every file's identity: changing the generator redoes its files
PAPERS_PER_FILE = 25_000

# ----------------------------------------------------------------- shares
# 608k of the 2.28M unarXive 2024 papers have a cs.* primary category (issue 10).
CS_SHARE = 0.26
# Primary-category shares among CS papers: rough figures chosen to follow arXiv's skew
# (cs.LG, cs.CV and cs.CL hold about 45% of CS submissions, a long tail of small
# categories); not measured on the corpus. Normalised in code.
CS_CATEGORIES = {
    "cs.LG": 0.17, "cs.CV": 0.16, "cs.CL": 0.10, "cs.AI": 0.05, "cs.RO": 0.04,
    "cs.CR": 0.04, "cs.IT": 0.04, "cs.NI": 0.03, "cs.DS": 0.03, "cs.SE": 0.03,
    "cs.DC": 0.03, "cs.HC": 0.025, "cs.IR": 0.025, "cs.SI": 0.02, "cs.LO": 0.02,
    "cs.CY": 0.02, "cs.SY": 0.02, "cs.NE": 0.015, "cs.GT": 0.015, "cs.DB": 0.015,
    "cs.PL": 0.015, "cs.DM": 0.012, "cs.CC": 0.01, "cs.CG": 0.01, "cs.GR": 0.01,
    "cs.SD": 0.01, "cs.NA": 0.01, "cs.MA": 0.008, "cs.CE": 0.008, "cs.FL": 0.007,
    "cs.MM": 0.006, "cs.ET": 0.005, "cs.AR": 0.005, "cs.DL": 0.005, "cs.OH": 0.005,
    "cs.PF": 0.003, "cs.MS": 0.003, "cs.SC": 0.003, "cs.OS": 0.002, "cs.GL": 0.001,
}  # fmt: skip
# The rest of arXiv, coarsely (physics, maths, statistics, EESS, ...): not measured.
OTHER_CATEGORIES = {
    "math.PR": 0.05, "math.AP": 0.05, "math.CO": 0.05, "math.AG": 0.04, "math.OC": 0.04,
    "math.NT": 0.03, "hep-th": 0.07, "hep-ph": 0.07, "astro-ph.GA": 0.05,
    "astro-ph.CO": 0.04, "astro-ph.SR": 0.04, "astro-ph.HE": 0.03,
    "cond-mat.mes-hall": 0.05, "cond-mat.str-el": 0.04, "cond-mat.mtrl-sci": 0.05,
    "cond-mat.stat-mech": 0.04, "quant-ph": 0.08, "gr-qc": 0.03, "physics.optics": 0.03,
    "physics.flu-dyn": 0.02, "stat.ME": 0.02, "stat.ML": 0.02, "eess.SP": 0.03,
    "eess.IV": 0.02, "q-bio.NC": 0.01, "econ.EM": 0.01, "q-fin.ST": 0.01,
}  # fmt: skip
# Extra (cross-listed) categories of a CS paper: P(0, 1, 2); drawn from the CS shares.
CS_CROSS_LISTS = (0.5, 0.35, 0.15)
# A non-CS paper cross-lists one more category of its own field / one CS category.
OTHER_CROSS_LIST = 0.10
OTHER_CS_CROSS_LIST = 0.03

SURVEY_SHARE = 0.02  # of CS papers (issue 10: "a few percent of those surveys")
OTHER_REVIEW_SHARE = 0.01  # non-CS reviews: survey cue, but never a CS survey
FALSE_CUE_SHARE = 0.003  # CS non-surveys whose title has a masked cue ("code review")
# Bib entries of a survey: log-normal, redrawn outside [SURVEY_REFS_MIN, SURVEY_REFS_MAX]
# (:func:`survey_bib_sizes`: mean about 298, median 250, 13% over 500, 0.5% over 1,000).
# Measured: 21 human-written CS surveys of 2018-2025 read by hand for issue 47 cite 98 to
# 1,052 works each, mean about 330, several over 500. Looked up, no per-survey figure
# taken: SurGE (Su et al. 2025, arXiv 2508.15658, github.com/oneal2000/SurGE: 205 CS
# surveys with their full citation lists) and SurveyBank (Ding et al., ICDE 2022, arXiv
# 2110.06354, github.com/JiayuanDing100/Reading-Path-Generation: 9,321 CS surveys) publish
# their lists on Google Drive / Dropbox and no reference-count distribution in their
# repositories; SurveyBench (SurveyForge, huggingface.co/datasets/InternScience/SurveyBench)
# counts 441 to 912 references per topic of about ten surveys each; Clarivate's JCR calls
# an item citing more than 100 references a review.
SURVEY_REFS_MEDIAN = 250  # assumption: puts the mean near 300 (issue 47: about 330)
SURVEY_REFS_SIGMA = 0.65  # assumption: log-normal spread; 13% over 500 ("several" of 21)
SURVEY_REFS_MIN = 50  # assumption: short surveys exist (the old model's floor; real 98)
SURVEY_REFS_MAX = 1_100  # issue 47: the longest of the 21 real surveys cites 1,052
PAPER_REFS = (15, 60)  # other papers: 15 + 45 * Beta(2, 2) (mean ~37)

FIRST_YEAR, LAST_YEAR = 2000, 2025
# arXiv's yearly submissions grew from ~30k (2000) to ~280k (2024): about 9.3% a year.
YEARLY_GROWTH = 0.093
EXTERNAL_FIRST_YEAR = 1970  # works outside arXiv (journals, conferences, books)
EXTERNAL_GROWTH = 0.05

CORPUS_COVERAGE = 0.85  # arXiv works with a corpus record; the rest are cited by id only
EXTERNAL_WORKS_PER_PAPER = 2.0  # size of the pool of cited works outside arXiv
ARXIV_TARGET_SHARE = 0.55  # of bib entries: cite an arXiv work (else a work outside arXiv)
SAME_CATEGORY = 0.60  # a citation stays in the citing paper's primary category
SAME_CATEGORY_SURVEY = 0.75  # surveys stay closer to their field
# of the citations that stay in the category, the share drawn from the citing paper's own
# topic (not measured: chosen so that a survey's topic words find about half its list)
SAME_TOPIC = 0.5
POPULARITY_SHAPE = 1.5  # Pareto fitness: in-degree tail exponent about 2.5

NO_ID_CS = 0.30  # CS bib entries without any identifier (issue 10)
NO_ID_OTHER = 0.25  # other fields: assumed similar
PAPER_DOI_SHARE = 0.40  # corpus papers with a journal DOI in their metadata
ARXIV_ENTRY_DOI = 0.15  # entry citing an arXiv work also carries the work's DOI (if any)
ARXIV_ENTRY_DOI_ONLY = 0.05  # ... carries only that DOI (resolved through the paper's metadata)
ARXIV_ENTRY_DATACITE = 0.02  # ... carries only the DataCite DOI 10.48550/arxiv.<id>
ARXIV_ENTRY_OPENALEX = 0.30
EXTERNAL_HAS_DOI = 0.80
EXTERNAL_HAS_OPENALEX = 0.60
EXTERNAL_ENTRY_DOI = 0.90  # entry carries the work's DOI when the work has one
EXTERNAL_ENTRY_OPENALEX = 0.70
VOLUME_DOI_SHARE = 0.002  # entry carries a proceedings-volume DOI shared by many works
PAPERS_PER_VOLUME_DOI = 5_000

MENTION_SECTIONS = (0.08, 0.62, 0.22, 0.08)  # P(cited in 0, 1, 2, 3 section occurrences)
MENTION_SECTIONS_SURVEY = (0.05, 0.55, 0.28, 0.12)
MENTIONS_PER_SECTION = 0.65  # n_mentions = Geometric(0.65): 1 (65%), 2 (23%), ...
NUMBERED_HEADINGS = (0.4, 0.4, 0.2)  # a paper's headings: unnumbered, "3 ...", "III. ..."

# ----------------------------------------------------------------- full text (issue 51)
# Measured on the real sample (../shared/data; bench/measure_full_text.py): extract's
# section_texts of the 49 papers of the 2022 sample converted to the 2024 layout (the
# corpus's layout) hold 647 sections, 13.20 per paper (sd 10.49; 14.24 in the 2022 layout,
# where subsections are occurrences of their own), 3,233 characters per section (median
# 2,066, sd 9,241, max 225,845): 42,689 characters per paper. The 2024 preview paper has
# 12 sections of 1,282 characters. A paper's section count and its sections' lengths are
# log-normal with these means (the real spread, not its tail: the mean is what sizes cost).
SECTIONS_PER_PAPER = (13.20, 10.49)  # mean, sd
SECTION_CHARS = (3_233, 2_066)  # mean, median
SECTION_CHARS_MAX = 230_000  # the real sample's longest section: 225,845 characters
# neutral tokens per 1,000 characters of the real texts (2024 layout): [CITATION] 1.45,
# [FORMULA] 9.52 (inline maths is a marker of its own), [FIGURE] 0.14, [TABLE] 0.03
TOKENS_PER_1000_CHARS = {"[CITATION]": 1.45, "[FORMULA]": 9.52, "[FIGURE]": 0.14, "[TABLE]": 0.03}
# The real section texts written as the view writes them (zstd, 2,000-row groups) take
# 0.306 bytes per character (2022 layout 0.303; the preview paper alone 0.59, too short
# for the compressor to find much): the generated text compresses better (a small
# vocabulary), so the view's bytes at full size are projected from its characters.
REAL_BYTES_PER_CHAR = 0.306
# The real sample is unarXive's permissively licensed subset (48 CC BY 4.0, 1 CC BY-SA
# 4.0, 1 CC0 of its 50 papers), so it gives no licence mix of the corpus: the bench keeps
# its papers' mix (_LICENSES, a quarter each: arXiv non-exclusive, CC BY 4.0, CC BY-NC-SA
# 4.0, none): half carry full text in extract, a quarter in a commercial release. For
# scale: Common Pile's arxiv_papers counts 304,048 papers under CC BY, CC BY-SA or CC0 of
# about 2.4M (13%), so the bench's quarter is the upper side.
WORD_POOL_CHARS = 16_000_000  # far larger than a Parquet page: slices rarely repeat in one

# ----------------------------------------------------------------- vocabulary
_MODIFIERS = (
    "Graph-Based", "Federated", "Self-Supervised", "Robust", "Explainable", "Distributed",
    "Neural", "Probabilistic", "Efficient", "Adversarial", "Multimodal", "Online", "Secure",
    "Scalable", "Interactive", "Causal", "Continual", "Quantum", "Embedded",
    "Privacy-Preserving", "Low-Resource", "Large-Scale", "Real-Time", "Energy-Aware",
)  # fmt: skip
_CS_AREAS = (
    "Image Segmentation", "Machine Translation", "Recommender Systems", "Anomaly Detection",
    "Code Generation", "Reinforcement Learning", "Question Answering", "Object Detection",
    "Speech Recognition", "Knowledge Graphs", "Program Synthesis", "Intrusion Detection",
    "Motion Planning", "Edge Computing", "Time Series Forecasting", "Entity Linking",
    "Information Retrieval", "Graph Clustering", "Job Scheduling", "Consensus Protocols",
    "Text Summarization", "Dialogue Systems", "Point Cloud Processing", "Visual Tracking",
    "Malware Detection", "Software Testing", "Sensor Networks", "Image Generation",
    "Relation Extraction", "Model Compression",
)  # fmt: skip
N_AREAS = 30  # topics per category: as many as _CS_AREAS
_OTHER_AREAS = (
    "Dark Matter Halos", "Topological Insulators", "Gravitational Waves", "Random Matrices",
    "Elliptic Curves", "Spin Glasses", "Neutrino Oscillations", "Black Hole Mergers",
    "Turbulent Flows", "Galaxy Clusters", "Quantum Error Correction", "Superconductivity",
)  # fmt: skip
_ADJ = (
    "Sparse", "Hierarchical", "Contrastive", "Lightweight", "Adaptive", "Bayesian",
    "Differentiable", "Attention-Based", "Latent", "Recurrent", "Convolutional", "Modular",
    "Stochastic", "Variational", "Incremental", "Decentralized",
)  # fmt: skip
_NOUNS = (
    "Transformers", "Networks", "Embeddings", "Solvers", "Kernels", "Autoencoders",
    "Policies", "Estimators", "Codes", "Protocols", "Planners", "Encoders", "Retrievers",
    "Classifiers", "Simulators", "Optimizers",
)  # fmt: skip
_SURVEY_TITLES = (
    "A Survey of {}", "{}: A Survey", "A Comprehensive Review of {}",
    "A Systematic Literature Review of {}", "{}: An Overview", "Recent Advances in {}",
)  # fmt: skip
_SURVEY_OPENERS = (
    "In this survey, we review work on {}.", "This paper surveys {}.",
    "This article provides a comprehensive review of {}.",
    "We present a comprehensive overview of {}.",
)  # fmt: skip
_FALSE_CUE_TITLES = ("Automated Code Review with {}", "Peer Review Assignment with {}")
_SENTENCES = (
    "The {} are trained on {} examples and evaluated on {} held-out tasks.",
    "Our analysis shows that {} reduce the error by {} percent on {} benchmarks.",
    "We describe the {} in detail and discuss their behaviour on {} settings with {} runs.",
    "Results for the {} on {} public datasets are stable over {} seeds.",
    "The {} need {} times less memory than {} baselines.",
    "We study how {} scale with the number of parameters and report {} ablations over {} runs.",
)  # fmt: skip
_LICENSES = (
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "http://creativecommons.org/licenses/by/4.0/",
    "http://creativecommons.org/licenses/by-nc-sa/4.0/",
    None,
)
_AUTHORS = tuple(
    f"{a}. {b}"
    for a in "ABCDEFGHJKLMNPRSTW"
    for b in (
        "Smith", "Wang", "Garcia", "Müller", "Kumar", "Chen", "Rossi", "Kim", "Nguyen",
        "Silva", "Ivanov", "Tanaka", "Okafor", "Cohen", "Novak", "Larsen",
    )
)  # fmt: skip
_VENUES = (
    "In Proceedings of NeurIPS", "In Proceedings of CVPR", "In Proceedings of ACL",
    "Journal of Machine Learning Research", "IEEE Transactions on Information Theory",
    "Physical Review Letters", "Annals of Mathematics", "arXiv preprint",
    "In Proceedings of the ACM Conference on Computer and Communications Security",
    "Astrophysical Journal", "Communications of the ACM", "Nature",
)  # fmt: skip

# Section slots of a paper: (heading variants, weight of a citation starting there).
# Variants are fixed strings except "{}", filled from the topical pool.
_PAPER_SLOTS = (
    (("Introduction", "Introduction and Motivation", "Motivation"), 0.28),
    (("Related Work", "Related Works", "Prior Work", "Background and Related Work"), 0.32),
    (("Background", "Preliminaries", "Problem Formulation", "Notation"), 0.08),
    (("Method", "Methodology", "Proposed Method", "Our Approach", "Model Architecture"), 0.12),
    (("{}",), 0.06),  # a method's own name as a top-level heading: role "other"
    (("Experiments", "Experimental Results", "Evaluation", "Results", "Ablation Study"), 0.10),
    (("Discussion", "Limitations"), 0.02),
    (("Conclusion", "Conclusions", "Conclusion and Future Work", "Concluding Remarks"), 0.02),
)  # fmt: skip
_SURVEY_SLOTS = (
    (("Introduction", "Introduction and Motivation"), 0.08),
    (("Background", "Preliminaries", "Fundamentals"), 0.07),
    (("Methodology", "Survey Methodology", "Research Method"), 0.02),  # the survey's own
    *[(("{}",), 0.09)] * 8,  # the topical core
    (("Open Challenges", "Discussion"), 0.05),
    (("Future Directions", "Future Research Directions"), 0.03),
    (("Conclusion", "Conclusions", "Concluding Remarks"), 0.03),
)  # fmt: skip
_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV")


def _categories() -> tuple[list[str], np.ndarray, int]:
    """Category names (CS first), their shares of all papers, and the number of CS ones."""
    cs = np.array(list(CS_CATEGORIES.values()))
    other = np.array(list(OTHER_CATEGORIES.values()))
    shares = np.concatenate([CS_SHARE * cs / cs.sum(), (1 - CS_SHARE) * other / other.sum()])
    return [*CS_CATEGORIES, *OTHER_CATEGORIES], shares, len(CS_CATEGORIES)


def _dates(rng: np.random.Generator, n: int, first: int, growth: float) -> np.ndarray:
    """``n`` sorted dates (days since 1970) from ``first`` to LAST_YEAR, growing yearly."""
    years = np.arange(first, LAST_YEAR + 1)
    weights = np.exp(growth * (years - first))
    year = rng.choice(years, size=n, p=weights / weights.sum())
    start = np.array([date(y, 1, 1).toordinal() for y in years]) - date(1970, 1, 1).toordinal()
    days = start[year - first] + rng.integers(0, 365, size=n)
    return np.sort(days).astype(np.int32)


def _pick(table: tuple[str, ...], index: np.ndarray) -> pl.Series:
    return pl.Series(table, dtype=pl.String).gather(index % len(table))


def _area_names(area: np.ndarray, is_cs: np.ndarray) -> pl.Series:
    """The topic's name: of :data:`_CS_AREAS` for a CS work, of :data:`_OTHER_AREAS` else."""
    names = pl.Series([*_CS_AREAS, *_OTHER_AREAS], dtype=pl.String)
    return names.gather(np.where(is_cs, area, len(_CS_AREAS) + area % len(_OTHER_AREAS)))


class _Pool:
    """Works of one kind sorted by date, with cumulative popularity per category."""

    def __init__(self, dates: np.ndarray, cats: np.ndarray, weights: np.ndarray, n_cats: int):
        self.dates = dates
        self.cats = cats
        self.cumw = np.cumsum(weights)
        order = np.argsort(cats, kind="stable")  # grouped by category, date order kept
        bounds = np.searchsorted(cats[order], np.arange(n_cats + 1))
        self.by_cat = []
        for c in range(n_cats):
            idx = order[bounds[c] : bounds[c + 1]]
            self.by_cat.append((idx, dates[idx], np.cumsum(weights[idx])))

    def key_of(self, index: np.ndarray) -> np.ndarray:
        """The category (group key) of each pool index; -1 for -1."""
        return np.where(index >= 0, self.cats[np.maximum(index, 0)], -1)

    @staticmethod
    def _draw(dates: np.ndarray, cumw: np.ndarray, before: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Popularity-weighted index of a work dated strictly before ``before``; -1: none."""
        bound = np.searchsorted(dates, before, side="left")
        ok = bound > 0
        out = np.full(len(before), -1, dtype=np.int64)
        if ok.any():
            top = cumw[bound[ok] - 1]
            j = np.searchsorted(cumw, u[ok] * top, side="right")
            out[ok] = np.minimum(j, bound[ok] - 1)
        return out

    def sample(self, cats: np.ndarray, before: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Pool index per row: a work of the row's category (-1: any category) before ``before``."""
        out = np.full(len(cats), -1, dtype=np.int64)
        order = np.argsort(cats, kind="stable")
        sorted_cats = cats[order]
        for c in np.unique(sorted_cats):
            if c < 0:
                continue
            lo, hi = np.searchsorted(sorted_cats, [c, c + 1])
            rows = order[lo:hi]
            idx, dates, cumw = self.by_cat[c]
            if len(idx) == 0:
                continue
            j = self._draw(dates, cumw, before[rows], u[rows])
            out[rows] = np.where(j >= 0, idx[np.maximum(j, 0)], -1)
        missing = out < 0
        if missing.any():
            out[missing] = self._draw(self.dates, self.cumw, before[missing], u[missing])
        return out


def _draw_topical(
    by_cat: _Pool,
    by_topic: _Pool,
    cats: np.ndarray,
    topic_keys: np.ndarray,
    topical: np.ndarray,
    before: np.ndarray,
    u: np.ndarray,
) -> np.ndarray:
    """Pool index per row: of the row's (category, topic) where ``topical`` and the topic has
    an earlier work, else of its category (:meth:`_Pool.sample`)."""
    out = np.full(len(cats), -1, dtype=np.int64)
    if topical.any():
        got = by_topic.sample(topic_keys[topical], before[topical], u[topical])
        # _Pool.sample falls back to any category: keep only draws of the topic's own
        out[topical] = np.where(by_topic.key_of(got) == topic_keys[topical], got, -1)
    rest = out < 0
    out[rest] = by_cat.sample(cats[rest], before[rest], u[rest])
    return out


def survey_bib_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` survey bibliography sizes: log-normal around :data:`SURVEY_REFS_MEDIAN` with
    spread :data:`SURVEY_REFS_SIGMA`, a size outside [:data:`SURVEY_REFS_MIN`,
    :data:`SURVEY_REFS_MAX`] drawn again (a clip would pile surveys on the cap)."""
    mu = np.log(SURVEY_REFS_MEDIAN)
    sizes = np.rint(rng.lognormal(mu, SURVEY_REFS_SIGMA, n))
    outside = (sizes < SURVEY_REFS_MIN) | (sizes > SURVEY_REFS_MAX)
    while outside.any():
        sizes[outside] = np.rint(rng.lognormal(mu, SURVEY_REFS_SIGMA, int(outside.sum())))
        outside = (sizes < SURVEY_REFS_MIN) | (sizes > SURVEY_REFS_MAX)
    return sizes.astype(np.int64)


@dataclasses.dataclass
class ScaleCorpus:
    """The global pools of one corpus: every arXiv work (corpus papers among them) and
    every work outside arXiv, with dates, categories, popularity and identifiers."""

    papers: int
    seed: int = 1
    papers_per_file: int = PAPERS_PER_FILE
    survey_share: float = SURVEY_SHARE

    def __post_init__(self) -> None:
        rng = np.random.default_rng([self.seed, self.papers, 0])
        self.cat_names, shares, self.n_cs = _categories()
        n_cats = len(self.cat_names)
        self.cs_shares = shares[: self.n_cs] / shares[: self.n_cs].sum()
        self.other_shares = shares[self.n_cs :] / shares[self.n_cs :].sum()

        n_arxiv = max(self.papers, round(self.papers / CORPUS_COVERAGE))
        self.arxiv_dates = _dates(rng, n_arxiv, FIRST_YEAR, YEARLY_GROWTH)
        self.arxiv_cats = rng.choice(n_cats, size=n_arxiv, p=shares).astype(np.int64)
        arxiv_weights = rng.pareto(POPULARITY_SHAPE, size=n_arxiv) + 1.0
        self.arxiv = _Pool(self.arxiv_dates, self.arxiv_cats, arxiv_weights, n_cats)
        self.arxiv_area = rng.integers(0, N_AREAS, size=n_arxiv)
        self.arxiv_topic = _Pool(
            self.arxiv_dates, self.arxiv_cats * N_AREAS + self.arxiv_area, arxiv_weights,
            n_cats * N_AREAS,
        )  # fmt: skip
        self.corpus = np.sort(rng.choice(n_arxiv, size=self.papers, replace=False))
        self.in_corpus = np.zeros(n_arxiv, dtype=bool)
        self.in_corpus[self.corpus] = True
        self.arxiv_has_doi = rng.random(n_arxiv) < PAPER_DOI_SHARE
        # new-style ids YYMM.NNNNN numbered in date order within each month (old-style
        # ids before 2007 are not imitated: the stages treat both alike)
        d = pl.Series(self.arxiv_dates).cast(pl.Date)
        months = (d.dt.year() % 100) * 100 + d.dt.month()
        frame = pl.DataFrame({"m": months}).with_row_index("i")
        seq = frame.select(pl.col("i").rank("ordinal").over("m").cast(pl.Int64))["i"]
        self.arxiv_ids = pl.DataFrame({"m": months, "s": seq}).select(
            pl.concat_str(
                pl.col("m").cast(pl.String).str.zfill(4),
                pl.lit("."),
                pl.col("s").cast(pl.String).str.zfill(5),
            )
        )[:, 0]

        n_external = round(self.papers * EXTERNAL_WORKS_PER_PAPER)
        self.external_dates = _dates(rng, n_external, EXTERNAL_FIRST_YEAR, EXTERNAL_GROWTH)
        external_cats = rng.choice(n_cats, size=n_external, p=shares).astype(np.int64)
        external_weights = rng.pareto(POPULARITY_SHAPE, size=n_external) + 1.0
        self.external = _Pool(self.external_dates, external_cats, external_weights, n_cats)
        self.external_cats = external_cats
        self.external_area = rng.integers(0, N_AREAS, size=n_external)
        self.external_topic = _Pool(
            self.external_dates, external_cats * N_AREAS + self.external_area,
            external_weights, n_cats * N_AREAS,
        )  # fmt: skip
        self.external_has_doi = rng.random(n_external) < EXTERNAL_HAS_DOI
        self.external_has_openalex = rng.random(n_external) < EXTERNAL_HAS_OPENALEX
        self.n_volumes = max(1, self.papers // PAPERS_PER_VOLUME_DOI)

    @property
    def n_files(self) -> int:
        return -(-self.papers // self.papers_per_file)

    # ------------------------------------------------------------- one file
    def file_tables(self, index: int) -> dict[str, pa.Table]:
        """The extract tables of input file ``index`` (its papers in date order)."""
        rng = np.random.default_rng([self.seed, self.papers, 1, index])
        lo = index * self.papers_per_file
        gidx = self.corpus[lo : lo + self.papers_per_file]  # arXiv-pool index of each paper
        n = len(gidx)
        source = source_name(index)
        cat = self.arxiv_cats[gidx]
        is_cs = cat < self.n_cs
        u = rng.random(n)
        survey = is_cs & (u < self.survey_share)
        review = ~is_cs & (u < OTHER_REVIEW_SHARE)
        false_cue = is_cs & ~survey & (rng.random(n) < FALSE_CUE_SHARE)
        n_refs = np.where(
            survey,
            survey_bib_sizes(rng, n),
            PAPER_REFS[0] + (PAPER_REFS[1] - PAPER_REFS[0]) * rng.beta(2.0, 2.0, n),
        ).astype(np.int64)
        papers = self._papers(rng, gidx, cat, is_cs, survey, review, false_cue, n_refs, source)
        refs = self._references(rng, gidx, cat, is_cs, survey, n_refs, source)
        mentions = self._mentions(rng, gidx, survey, n_refs, source)
        rejects = pa.Table.from_pylist([], schema=REJECTS_OUT)
        return {
            "papers": papers,
            "references": refs,
            "mentions": mentions,
            "sections": _sections(mentions),
            "rejects": rejects,
        }

    @functools.cached_property
    def pool(self) -> bytes:
        """The corpus's word pool (:func:`word_pool`), made on first use."""
        return word_pool(self.seed)

    def section_texts(self, index: int, papers: pa.Table, batch_papers: int) -> Iterator[pa.Table]:
        """``section_texts`` of input file ``index`` (``papers``: its ``papers`` table), one
        table per ``batch_papers`` papers, as extract writes a row group per batch.

        Every paper whose licence some release may carry (:func:`extractable`, as extract
        keeps texts) gets :data:`SECTIONS_PER_PAPER` sections of :data:`SECTION_CHARS`
        characters, each a slice of :attr:`pool`; section ``i`` is the ``i``-th key, so the
        cited slots (``sections``) have their headings. Drawn from a stream of its own, so
        the other tables are those of a corpus without text; the rows do not depend on
        ``batch_papers``.
        """
        rng = np.random.default_rng([self.seed, self.papers, 2, index])
        licence = papers.column(S.LICENSE).to_pylist()
        keeps = np.array([extractable(url) for url in licence], dtype=bool)
        n_sections = np.zeros(papers.num_rows, dtype=np.int64)
        n_sections[keeps] = _log_normal_counts(rng, int(keeps.sum()), *SECTIONS_PER_PAPER)
        lengths = _section_lengths(rng, int(n_sections.sum()))
        starts = rng.integers(0, len(self.pool) - SECTION_CHARS_MAX, len(lengths))
        ids = papers.column(S.PAPER_ID)
        source = papers.column(S.SOURCE_FILE)[0].as_py() if papers.num_rows else ""
        first = np.cumsum(n_sections) - n_sections  # each paper's first section row
        for lo in range(0, papers.num_rows, batch_papers):
            hi = min(lo + batch_papers, papers.num_rows)
            rows = slice(int(first[lo]), int(first[hi - 1] + n_sections[hi - 1]))
            count = n_sections[lo:hi]
            if count.sum() == 0:
                continue
            pool = memoryview(self.pool)
            texts = b"".join(
                pool[a : a + b] for a, b in zip(starts[rows], lengths[rows], strict=True)
            )
            offsets = np.zeros(len(lengths[rows]) + 1, dtype=np.int32)
            np.cumsum(lengths[rows], out=offsets[1:])
            text = pa.StringArray.from_buffers(
                len(lengths[rows]), pa.py_buffer(offsets), pa.py_buffer(texts)
            )
            which = np.repeat(np.arange(lo, hi), count)
            yield pa.table(
                {
                    S.PAPER_ID: ids.take(which),
                    S.SECTION_INDEX: pa.array(
                        np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count),
                        pa.int32(),
                    ),
                    S.SECTION_TEXT: text,
                    S.SOURCE_FILE: pa.array([source] * len(which), pa.string()),
                },
                schema=S.SECTION_TEXTS,
            )

    def _papers(
        self,
        rng: np.random.Generator,
        gidx: np.ndarray,
        cat: np.ndarray,
        is_cs: np.ndarray,
        survey: np.ndarray,
        review: np.ndarray,
        false_cue: np.ndarray,
        n_refs: np.ndarray,
        source: str,
    ) -> pa.Table:
        n = len(gidx)
        topic = pl.select(
            pl.concat_str(
                _pick(_MODIFIERS, rng.integers(0, len(_MODIFIERS), n)),
                pl.lit(" "),
                _area_names(self.arxiv_area[gidx], is_cs),
            )
        ).to_series()
        method = pl.select(
            pl.concat_str(
                _pick(_ADJ, rng.integers(0, len(_ADJ), n)),
                pl.lit(" "),
                _pick(_NOUNS, rng.integers(0, len(_NOUNS), n)),
            )
        ).to_series()
        kind = rng.integers(0, 1 << 30, n)
        title = (
            pl.DataFrame(
                {"t": topic, "m": method, "k": kind, "s": survey, "r": review, "f": false_cue}
            )
            .select(
                pl.when(pl.col("s") | pl.col("r"))
                .then(_format(_SURVEY_TITLES, pl.col("k"), pl.col("t")))
                .when(pl.col("f"))
                .then(_format(_FALSE_CUE_TITLES, pl.col("k"), pl.col("m")))
                .otherwise(pl.concat_str(pl.col("m"), pl.lit(" for "), pl.col("t")))
            )
            .to_series()
        )
        opener = (
            pl.DataFrame({"t": topic, "m": method, "k": kind, "s": survey | review})
            .select(
                pl.when(pl.col("s"))
                .then(_format(_SURVEY_OPENERS, pl.col("k") // 7, pl.col("t")))
                .otherwise(
                    pl.concat_str(
                        pl.lit("We propose novel "),
                        pl.col("m"),
                        pl.lit(" for "),
                        pl.col("t"),
                        pl.lit("."),
                    )
                )
            )
            .to_series()
        )
        sentences = [_sentences(rng, n) for _ in range(8)]  # ~1,000 characters in all
        abstract = pl.select(pl.concat_str([opener, *sentences], separator=" ")).to_series()
        categories = self._category_lists(rng, cat, is_cs)
        first = pl.Series(self.arxiv_dates[gidx]).cast(pl.Date)
        update = pl.Series(self.arxiv_dates[gidx] + rng.integers(0, 400, n)).cast(pl.Date)
        doi = _doi(pl.Series(gidx), "a", self.arxiv_has_doi[gidx])
        frame = pl.DataFrame(
            {
                S.PAPER_ID: self.arxiv_ids.gather(gidx),
                S.TITLE: title,
                S.ABSTRACT: abstract,
                S.CATEGORIES: categories,
                S.PRIMARY_CATEGORY: _pick(tuple(self.cat_names), cat),
                S.FIRST_VERSION_DATE: first,
                # the last version's date (the text the corpus holds): the update date
                S.TEXT_DATE: update,
                S.UPDATE_DATE: update,
                S.LICENSE: _pick(_LICENSES, rng.integers(0, len(_LICENSES), n)),
                S.DOI: doi,
                S.N_BIB_ENTRIES: n_refs.astype(np.int32),
                S.LAYOUT: pl.Series(["2024"] * n),
                S.SOURCE_FILE: pl.Series([source] * n),
                S.LINE_NUMBER: np.arange(1, n + 1, dtype=np.int64),
            }
        )
        return _arrow(frame, S.PAPERS)

    def _category_lists(
        self, rng: np.random.Generator, cat: np.ndarray, is_cs: np.ndarray
    ) -> pl.Series:
        n = len(cat)
        n_cs_extra = rng.choice(3, size=n, p=CS_CROSS_LISTS)
        cs_extra = rng.choice(self.n_cs, size=(n, 2), p=self.cs_shares)
        other_extra = self.n_cs + rng.choice(len(self.other_shares), size=n, p=self.other_shares)
        v = rng.random(n)
        extra1 = np.where(
            is_cs,
            np.where(n_cs_extra >= 1, cs_extra[:, 0], -1),
            np.where(
                v < OTHER_CROSS_LIST,
                other_extra,
                np.where(v < OTHER_CROSS_LIST + OTHER_CS_CROSS_LIST, cs_extra[:, 0], -1),
            ),
        )
        extra2 = np.where(is_cs & (n_cs_extra == 2), cs_extra[:, 1], -1)
        extra1 = np.where(extra1 == cat, -1, extra1)
        extra2 = np.where((extra2 == cat) | (extra2 == extra1), -1, extra2)
        grid = np.stack([cat, extra1, extra2], axis=1)
        valid = grid >= 0
        offsets = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int32)
        values = pa.array(self.cat_names).take(pa.array(grid[valid]))
        return pl.Series(pa.ListArray.from_arrays(pa.array(offsets), values))

    def _references(
        self,
        rng: np.random.Generator,
        gidx: np.ndarray,
        cat: np.ndarray,
        is_cs: np.ndarray,
        survey: np.ndarray,
        n_refs: np.ndarray,
        source: str,
    ) -> pa.Table:
        m = int(n_refs.sum())
        row_paper = np.repeat(np.arange(len(gidx)), n_refs)
        ref_no = np.arange(m) - np.repeat(np.cumsum(n_refs) - n_refs, n_refs)
        citing_cat = cat[row_paper]
        citing_cs = is_cs[row_paper]
        before = self.arxiv_dates[gidx][row_paper]
        # target category: the citing paper's own, else one of its field (CS or not)
        stay = rng.random(m) < np.where(survey[row_paper], SAME_CATEGORY_SURVEY, SAME_CATEGORY)
        elsewhere = np.where(
            citing_cs,
            rng.choice(self.n_cs, size=m, p=self.cs_shares),
            self.n_cs + rng.choice(len(self.other_shares), size=m, p=self.other_shares),
        )
        target_cat = np.where(stay, citing_cat, elsewhere)
        # a draw of the citing paper's own topic: the works of (category, topic)
        topical = stay & (rng.random(m) < SAME_TOPIC)
        topic_key = citing_cat * N_AREAS + self.arxiv_area[gidx][row_paper]
        to_arxiv = rng.random(m) < ARXIV_TARGET_SHARE
        u = rng.random(m)
        target = np.full(m, -1, dtype=np.int64)
        target[to_arxiv] = _draw_topical(
            self.arxiv, self.arxiv_topic, target_cat[to_arxiv], topic_key[to_arxiv],
            topical[to_arxiv], before[to_arxiv], u[to_arxiv],
        )  # fmt: skip
        # no earlier arXiv work (early papers): cite a work outside arXiv instead
        to_arxiv &= target >= 0
        ext = ~to_arxiv
        target[ext] = _draw_topical(
            self.external, self.external_topic, target_cat[ext], topic_key[ext], topical[ext],
            before[ext], u[ext],
        )  # fmt: skip
        no_id = (rng.random(m) < np.where(citing_cs, NO_ID_CS, NO_ID_OTHER)) | (target < 0)

        r = rng.random((m, 4))
        ta = np.where(to_arxiv, target, 0)  # index into the arXiv pool
        te = np.where(ext & (target >= 0), target, 0)  # index into the external pool
        # arXiv targets: the id, sometimes with (or only) the work's DOI or its DataCite DOI
        a_doi = self.arxiv_has_doi[ta] & to_arxiv
        doi_only = to_arxiv & a_doi & (r[:, 0] < ARXIV_ENTRY_DOI_ONLY)
        datacite = to_arxiv & ~doi_only & (r[:, 0] > 1 - ARXIV_ENTRY_DATACITE)
        has_arxiv = to_arxiv & ~doi_only & ~datacite & ~no_id
        has_a_doi = to_arxiv & a_doi & (doi_only | (r[:, 1] < ARXIV_ENTRY_DOI)) & ~no_id
        has_a_oa = to_arxiv & ~datacite & (r[:, 2] < ARXIV_ENTRY_OPENALEX) & ~no_id
        # external targets: DOI and/or OpenAlex id; a shared volume DOI now and then
        w_doi = ext & self.external_has_doi[te]
        w_oa = ext & self.external_has_openalex[te]
        e_doi = w_doi & (r[:, 1] < EXTERNAL_ENTRY_DOI)
        e_oa = w_oa & (r[:, 2] < EXTERNAL_ENTRY_OPENALEX)
        # an entry keeps at least one identifier its work has
        e_doi |= w_doi & ~e_oa
        e_oa |= w_oa & ~e_doi
        volume = ext & (r[:, 3] < VOLUME_DOI_SHARE)
        no_id |= ext & ~e_doi & ~e_oa & ~volume
        e_doi &= ~no_id & ~volume
        e_oa &= ~no_id
        volume &= ~no_id
        t = np.where(to_arxiv, ta, te)

        ids = pl.DataFrame(
            {
                "t": t,
                "has_arxiv": has_arxiv,
                "a_doi": has_a_doi,
                "datacite": datacite & ~no_id,
                "a_oa": has_a_oa,
                "e_doi": e_doi,
                "e_oa": e_oa,
                "volume": volume,
                "vol": t % self.n_volumes,
            }
        )
        arxiv_id = self.arxiv_ids.gather(ta)
        frame = ids.select(
            pl.when(pl.col("has_arxiv")).then(arxiv_id).alias(S.ARXIV_ID),
            pl.when(pl.col("a_doi"))
            .then(_doi_expr(pl.col("t"), "a"))
            .when(pl.col("datacite"))
            .then(pl.lit("10.48550/arxiv.") + arxiv_id)
            .when(pl.col("e_doi"))
            .then(_doi_expr(pl.col("t"), "j"))
            .when(pl.col("volume"))
            .then(pl.lit("10.1007/vol.") + pl.col("vol").cast(pl.String))
            .alias(S.DOI),
            pl.when(pl.col("a_oa"))
            .then(pl.lit("W") + (pl.col("t") + 1_000_000_000).cast(pl.String))
            .when(pl.col("e_oa"))
            .then(pl.lit("W") + (pl.col("t") + 3_000_000_000).cast(pl.String))
            .alias(S.OPENALEX_ID),
        )
        year = (
            pl.Series(
                np.where(
                    to_arxiv,
                    self.arxiv_dates[ta],
                    self.external_dates[te],
                )
            )
            .cast(pl.Date)
            .dt.year()
        )
        # a work's title words follow from its pool index, so its entries look alike; its
        # topic is its own
        key = np.where(to_arxiv, t * 2, t * 2 + 1)
        area = np.where(to_arxiv, self.arxiv_area[ta], self.external_area[te])
        area_cs = np.where(to_arxiv, self.arxiv_cats[ta], self.external_cats[te]) < self.n_cs
        raw = pl.select(
            pl.concat_str(
                [
                    _pick(_AUTHORS, key * 7919),
                    _pick(_AUTHORS, key * 104729 + 3),
                    pl.concat_str(
                        _pick(_ADJ, key),
                        pl.lit(" "),
                        _pick(_NOUNS, key // 16),
                        pl.lit(" for "),
                        _pick(_MODIFIERS, key // 256),
                        pl.lit(" "),
                        _area_names(area, area_cs),
                    ),
                    _pick(_VENUES, key // 3),
                    year.cast(pl.String),
                ],
                separator=". ",
            )
        ).to_series()
        paper_ids = self.arxiv_ids.gather(gidx)
        frame = frame.with_columns(
            paper_ids.gather(row_paper).alias(S.PAPER_ID),
            (pl.lit("b") + pl.Series(ref_no).cast(pl.String)).alias(S.REF_ID),
            raw.alias(S.RAW),
            pl.lit(source).alias(S.SOURCE_FILE),
        )
        return _arrow(frame, S.REFERENCES)

    def _mentions(
        self,
        rng: np.random.Generator,
        gidx: np.ndarray,
        survey: np.ndarray,
        n_refs: np.ndarray,
        source: str,
    ) -> pa.Table:
        m = int(n_refs.sum())
        row_paper = np.repeat(np.arange(len(gidx)), n_refs)
        ref_no = np.arange(m) - np.repeat(np.cumsum(n_refs) - n_refs, n_refs)
        row_survey = survey[row_paper]
        k = np.where(
            row_survey,
            rng.choice(4, size=m, p=MENTION_SECTIONS_SURVEY),
            rng.choice(4, size=m, p=MENTION_SECTIONS),
        )
        paper_w = np.array([w for _, w in _PAPER_SLOTS])
        survey_w = np.array([w for _, w in _SURVEY_SLOTS])
        start = np.where(
            row_survey,
            rng.choice(len(survey_w), size=m, p=survey_w / survey_w.sum()),
            rng.choice(len(paper_w), size=m, p=paper_w / paper_w.sum()),
        )
        # the k-th mention of an entry goes to the next section: distinct occurrences
        row = np.repeat(np.arange(m), k)
        step = np.arange(len(row)) - np.repeat(np.cumsum(k) - k, k)
        n_slots = np.where(row_survey[row], len(_SURVEY_SLOTS), len(_PAPER_SLOTS))
        slot = (start[row] + step) % n_slots
        paper = row_paper[row]
        headings = self._headings(rng, gidx)
        # heading of (paper, slot): a paper's numbering style and its variant per slot
        survey_slot = survey[paper]
        hidx = (
            np.where(survey_slot, len(_PAPER_SLOTS) + slot, slot)
            + (len(_PAPER_SLOTS) + len(_SURVEY_SLOTS)) * paper
        )
        heading = headings.gather(hidx)
        paper_ids = self.arxiv_ids.gather(gidx)
        n_mentions = rng.geometric(MENTIONS_PER_SECTION, size=len(row)).astype(np.int32)
        frame = pl.DataFrame(
            {
                S.PAPER_ID: paper_ids.gather(paper),
                S.REF_ID: pl.Series(ref_no[row]).cast(pl.String),
                S.SECTION: heading,
                S.TOP_SECTION: heading,
                S.SECTION_INDEX: slot.astype(np.int32),
                S.N_MENTIONS: n_mentions,
                S.SOURCE_FILE: pl.Series([source] * len(row)),
            }
        ).with_columns((pl.lit("b") + pl.col(S.REF_ID)).alias(S.REF_ID))
        return _arrow(frame, S.MENTIONS)

    def _headings(self, rng: np.random.Generator, gidx: np.ndarray) -> pl.Series:
        """Every slot heading of every paper of a file: paper-major, paper slots then survey slots."""
        slots = [*_PAPER_SLOTS, *_SURVEY_SLOTS]
        n, s = len(gidx), len(slots)
        style = np.repeat(rng.choice(3, size=n, p=NUMBERED_HEADINGS), s)
        slot_no = np.tile(np.arange(s), n)
        pos = np.tile(
            np.concatenate([np.arange(len(_PAPER_SLOTS)), np.arange(len(_SURVEY_SLOTS))]), n
        )
        pick = rng.integers(0, 1 << 30, n * s)
        topical = pl.concat_str(
            _pick(_MODIFIERS, pick // 7),
            pl.lit(" "),
            _pick(_ADJ, pick // 131),
            pl.lit(" "),
            _pick(_NOUNS, pick // 997),
        )
        variants = [v for vs, _ in slots for v in vs]
        first = np.cumsum([0] + [len(vs) for vs, _ in slots])[:-1]
        count = np.array([len(vs) for vs, _ in slots])
        base = pl.Series(variants).gather(first[slot_no] + pick % count[slot_no])
        number = pl.Series([str(i + 1) + " " for i in range(16)]).gather(pos)
        roman = pl.Series([r + ". " for r in _ROMAN] + ["XV. ", "XVI. "]).gather(pos)
        return (
            pl.DataFrame({"b": base, "st": style, "n": number, "r": roman})
            .select(
                pl.concat_str(
                    pl.when(pl.col("st") == 1)
                    .then(pl.col("n"))
                    .when(pl.col("st") == 2)
                    .then(pl.col("r"))
                    .otherwise(pl.lit("")),
                    pl.when(pl.col("b") == "{}").then(topical).otherwise(pl.col("b")),
                )
            )
            .to_series()
        )


def _format(templates: tuple[str, ...], which: pl.Expr, value: pl.Expr) -> pl.Expr:
    """``templates[which % len]`` with its ``{}`` replaced by ``value``."""
    parts = [t.split("{}") for t in templates]
    choice = which % len(templates)
    expr = pl.when(choice == 0).then(pl.concat_str(pl.lit(parts[0][0]), value, pl.lit(parts[0][1])))
    for i, (head, tail) in enumerate(parts[1:], 1):
        expr = expr.when(choice == i).then(pl.concat_str(pl.lit(head), value, pl.lit(tail)))
    return expr


def _sentences(rng: np.random.Generator, n: int) -> pl.Series:
    """One neutral abstract sentence per row (no survey cue, no contribution claim)."""
    which = rng.integers(0, len(_SENTENCES), n)
    nouns = pl.concat_str(
        _pick(_ADJ, rng.integers(0, len(_ADJ), n)).str.to_lowercase(),
        pl.lit(" "),
        _pick(_NOUNS, rng.integers(0, len(_NOUNS), n)).str.to_lowercase(),
    )
    numbers = [pl.Series(rng.integers(2, 500, n)).cast(pl.String) for _ in range(2)]
    frame = pl.DataFrame({"w": which, "a": numbers[0], "b": numbers[1]}).with_columns(
        nouns.alias("x")
    )
    exprs = []
    for i, template in enumerate(_SENTENCES):
        head, mid1, mid2, tail = template.split("{}")
        exprs.append(
            (
                i,
                pl.concat_str(
                    pl.lit(head),
                    pl.col("x"),
                    pl.lit(mid1),
                    pl.col("a"),
                    pl.lit(mid2),
                    pl.col("b"),
                    pl.lit(tail),
                ),
            )
        )
    expr = pl.when(pl.col("w") == exprs[0][0]).then(exprs[0][1])
    for i, e in exprs[1:]:
        expr = expr.when(pl.col("w") == i).then(e)
    return frame.select(expr).to_series()


def word_pool(seed: int, chars: int = WORD_POOL_CHARS) -> bytes:
    """``chars`` ASCII characters of words drawn from the generator's vocabulary (lower
    case) with the neutral tokens at the real texts' rates (:data:`TOKENS_PER_1000_CHARS`);
    the same for a seed."""
    rng = np.random.default_rng([seed, 2])
    words = sorted(
        {
            w.lower()
            for phrase in (*_MODIFIERS, *_CS_AREAS, *_OTHER_AREAS, *_ADJ, *_NOUNS, *_SENTENCES)
            for w in phrase.replace("{}", " ").replace(".", " ").replace(",", " ").split()
        }
    )
    mean_word = float(np.mean([len(w) + 1 for w in words]))
    tokens = list(TOKENS_PER_1000_CHARS)
    # per drawn word: a token with probability (its rate per character) x (word length)
    p_tokens = np.array([TOKENS_PER_1000_CHARS[t] / 1000 * mean_word for t in tokens])
    vocabulary = [*words, *tokens]
    p = np.concatenate([np.full(len(words), (1 - p_tokens.sum()) / len(words)), p_tokens])
    n = int(chars / mean_word * 1.1) + 1
    text = " ".join(np.array(vocabulary, dtype=object)[rng.choice(len(vocabulary), n, p=p)])
    return text.encode("ascii")[:chars]


def _log_normal_counts(rng: np.random.Generator, n: int, mean: float, sd: float) -> np.ndarray:
    """``n`` counts of at least 1, log-normal with about this mean and sd."""
    sigma2 = np.log1p((sd / mean) ** 2)
    mu = np.log(mean) - sigma2 / 2
    return np.maximum(1, np.rint(rng.lognormal(mu, np.sqrt(sigma2), n))).astype(np.int64)


def _section_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` section lengths (characters): log-normal with :data:`SECTION_CHARS`' mean and
    median, at most :data:`SECTION_CHARS_MAX`."""
    mean, median = SECTION_CHARS
    sigma = np.sqrt(2 * np.log(mean / median))
    lengths = np.rint(rng.lognormal(np.log(median), sigma, n)).astype(np.int64)
    return np.clip(lengths, 1, SECTION_CHARS_MAX)


def _doi_expr(index: pl.Expr, kind: str) -> pl.Expr:
    return pl.concat_str(
        pl.lit("10."),
        (index % 4000 + 1000).cast(pl.String),
        pl.lit(f"/{kind}."),
        index.cast(pl.String).str.zfill(8),
    )


def _doi(index: pl.Series, kind: str, present: np.ndarray) -> pl.Series:
    return (
        pl.DataFrame({"i": index, "p": present})
        .select(pl.when(pl.col("p")).then(_doi_expr(pl.col("i"), kind)))
        .to_series()
    )


REJECTS_OUT = pa.schema(list(S.REJECTS) + [pa.field("detail", pa.string())])


def _sections(mentions: pa.Table) -> pa.Table:
    """The ``sections`` table of 2024-layout papers: one top-level key per cited heading."""
    frame = pl.from_arrow(mentions)
    assert isinstance(frame, pl.DataFrame)
    keys = (
        frame.select(S.PAPER_ID, S.SECTION_INDEX, S.SECTION, S.SOURCE_FILE)
        .unique([S.PAPER_ID, S.SECTION_INDEX])
        .sort(S.PAPER_ID, S.SECTION_INDEX)
        .with_columns(
            pl.lit(None, pl.String).alias(S.SEC_NUMBER),
            pl.lit(0, pl.Int8).alias(S.LEVEL),  # a 2024-layout key
            pl.col(S.SECTION_INDEX).alias(S.TOP_INDEX),
            pl.lit(False).alias(S.UNNAMED),
            pl.lit(False).alias(S.APPENDIX),
        )
    )
    return _arrow(keys, S.SECTIONS)


def _arrow(frame: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    return frame.select(schema.names).to_arrow().cast(schema).combine_chunks()


def source_name(index: int) -> str:
    """``source_file`` of input file ``index`` (what ``extract`` records: the name under --input)."""
    return f"scale-{index:05d}.jsonl"


# ----------------------------------------------------------------- runner glue
def input_files(corpus: ScaleCorpus) -> list[InputFile]:
    """One virtual input file per part; its identity names every generator parameter, so
    a corpus of another size, seed or generator version is generated again."""
    files = []
    for i in range(corpus.n_files):
        name = source_name(i)
        identity = (
            f"scale_corpus|v{GENERATOR_VERSION}|papers={corpus.papers}|seed={corpus.seed}"
            f"|per_file={corpus.papers_per_file}|survey_share={corpus.survey_share}|file={i}"
        )
        files.append(InputFile(f"scale-corpus/{name}", 0, identity, "", name))
    return files


def _generate_file(corpus: ScaleCorpus):
    def fn(source: InputFile, outputs: dict[str, Path], cfg: Config, progress: Any) -> dict:
        t0 = time.monotonic()
        index = int(source.name.split("-")[1].split(".")[0])
        tables = corpus.file_tables(index)
        for name, table in tables.items():
            pq.write_table(
                table,
                outputs[name],
                compression=cfg.common.compression,
                row_group_size=cfg.extract.row_group_rows,
                use_dictionary=[c for c in DICTIONARY_COLUMNS if c in table.column_names],
            )
        n_texts = text_chars = 0
        with pq.ParquetWriter(
            outputs["section_texts"],
            S.SECTION_TEXTS,
            compression=cfg.common.compression,
            use_dictionary=[c for c in DICTIONARY_COLUMNS if c in S.SECTION_TEXTS.names],
        ) as writer:
            for batch in corpus.section_texts(index, tables["papers"], cfg.extract.batch_papers):
                writer.write_table(batch, row_group_size=cfg.extract.row_group_rows)
                n_texts += batch.num_rows
                text_chars += batch.column(S.SECTION_TEXT).combine_chunks().buffers()[2].size
        papers = tables["papers"].num_rows
        progress(papers, 0, 0)
        return {
            "lines_read": papers,
            "papers_written": papers,
            "bytes_read": 0,
            "references": tables["references"].num_rows,
            "mentions_rows": tables["mentions"].num_rows,
            "cite_spans_missing_bib": 0,
            "section_texts_rows": n_texts,
            "section_texts_skipped": 0,
            "section_text_chars": text_chars,
            "layouts": {"2022": 0, "2024": papers},
            # every paper is generated: a release built from them says so (pipeline.corpus.provenance)
            SYNTHETIC_PAPERS: papers,
            SYNTHETIC_GENERATORS: {"bench/scale_corpus.py": papers},
            "rejects": {},
            "rejects_total": 0,
            "seconds": round(time.monotonic() - t0, 3),
            "generated_by": f"bench/scale_corpus.py v{GENERATOR_VERSION}",
        }

    return fn


@contextlib.contextmanager
def _extract_generating(corpus: ScaleCorpus) -> Iterator[Any]:
    """The ``extract`` stage with the generator as its per-file function.

    The runner is handed this stage, so with one in-process worker its own code writes
    the outputs, manifests and markers exactly as for a real extract.
    """
    yield dataclasses.replace(GRAPH["extract"], fn=_generate_file(corpus), fn_many=None)


def build(
    out: Path,
    papers: int,
    seed: int = 1,
    papers_per_file: int = PAPERS_PER_FILE,
    survey_share: float = SURVEY_SHARE,
    cfg: Config | None = None,
) -> dict[str, Any]:
    """Write the extract tables of a ``papers``-paper corpus into ``out/extract``.

    Files already generated with the same parameters are kept (their markers match).
    Returns the summed manifest counts (``extract``'s ``_summary.json``).
    """
    from pipeline.engine.status import map_summary

    cfg = cfg or Config()
    corpus = ScaleCorpus(papers, seed, papers_per_file, survey_share)
    files = input_files(corpus)
    # a corpus of another size must not mix in: drop outputs of files not in this list
    keys = {f.key for f in files}
    for marker in sorted((out / "extract" / "_markers").glob("*.json")):
        if marker.stem not in keys:
            for table in S.EXTRACT_TABLES:
                (out / "extract" / table / f"{marker.stem}.parquet").unlink(missing_ok=True)
            (out / "extract" / "_manifests" / marker.name).unlink(missing_ok=True)
            marker.unlink()
    write_json(out / "extract" / INPUTS, {"files": sorted(keys)})
    with _extract_generating(corpus) as stage:
        run_map(stage, files, out, cfg, workers=1, force=False)
    return map_summary(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, required=True, help="corpus papers")
    ap.add_argument("--out", type=Path, required=True, help="work directory (gets extract/)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--papers-per-file", type=int, default=PAPERS_PER_FILE)
    ap.add_argument("--survey-share", type=float, default=SURVEY_SHARE, help="of CS papers")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    t0 = time.perf_counter()
    totals = build(args.out, args.papers, args.seed, args.papers_per_file, args.survey_share)
    print(
        f"generated {totals.get('papers_written', 0):,} papers, {totals.get('references', 0):,} "
        f"bib entries, {totals.get('mentions_rows', 0):,} mention rows in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
