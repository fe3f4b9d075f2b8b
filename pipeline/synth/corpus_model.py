"""The synthetic corpus model: topics and their filler text, outside works and their
popularity pools, and every paper's metadata (ids, dates, categories, authors, what it
cites), drawn once from the seed (:class:`_Corpus`); :mod:`pipeline.synth.records` writes
the records. See :mod:`pipeline.synth.generator` for what the corpus mirrors."""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeline.synth.vocabulary import (
    ADJECTIVES,
    CAPTIONS,
    CROSS_LISTS,
    CS_FAMILIES,
    CS_TOPICS,
    CS_VENUES,
    CS_WEIGHTS,
    DISCIPLINES,
    FILLER_WORDS,
    FIRST_NAMES,
    LAST_DAY,
    LAST_NAMES,
    LATEX,
    NAME_HEADS,
    NAME_TAILS,
    NONCS_FAMILIES,
    NONCS_TOPICS,
    NONCS_VENUES,
    NONCS_WEIGHTS,
    TEX_ACCENTS,
    TRAP_SHARE,
    TRAP_SUFFIXES,
    TRAPS,
    YEAR_WEIGHTS,
)

# A same-length placeholder for the per-paper part of formula/figure ids: filled in on
# the serialised line, so prebuilt chunks keep their span offsets.
SALT = "@@@@@@@@"


POOL_STRIDE = 1_000  # more than the largest pool


CORPUS_OPENALEX = 1_000_000  # OpenAlex counters of corpus papers start here


def _discipline(category: str) -> str:
    return DISCIPLINES.get(category.split(".")[0], "Physics")


def _pick(rng: random.Random, seq: Any) -> Any:
    # Several times faster than rng.choice (one float draw, no rejection loop); the
    # hot paths call it millions of times.
    return seq[int(rng.random() * len(seq))]


def _hex(rng: random.Random, bits: int = 160) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


def _uuid_tail(rng: random.Random) -> str:
    return f"{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-{rng.choice('89ab')}{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"


def _scramble(n: int) -> int:
    # Bijective on [0, 2**31): unique, random-looking OpenAlex numbers from a counter.
    return 4_000_000_000 + (n * 2_654_435_761 + 12_345) % (1 << 31)


def _wrap(text: str, width: int = 79, sep: str = "\n  ") -> str:
    # arXiv metadata hard-wraps long titles/authors/abstracts near 80 columns.
    lines: list[str] = []
    cur = ""
    for word in text.split(" "):
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    lines.append(cur)
    return sep.join(lines)


def _tex(name: str) -> str:
    return "".join(TEX_ACCENTS.get(c, c) for c in name)


# ------------------------------------------------------------------ filler chunks
@dataclass(frozen=True, slots=True)
class _Chunk:
    text: str
    n: int
    spans: tuple[tuple[int, int, str, str], ...]  # (start, end, marker text, ref id)
    entries: dict[str, dict[str, str]]


_CHUNK_CACHE: dict[str, tuple[_Chunk, ...]] = {}


def _make_chunk(
    rng: random.Random, sentences: int, formula_rate: float, float_rate: float
) -> _Chunk:
    parts: list[str] = []
    spans: list[tuple[int, int, str, str]] = []
    entries: dict[str, dict[str, str]] = {}
    off = 0
    for s in range(sentences):
        words = rng.choices(FILLER_WORDS, k=rng.randint(6, 22))
        words[0] = words[0].capitalize()
        if s:
            parts.append(". ")
            off += 2
        for w_i, word in enumerate(words):
            if w_i:
                parts.append(" ")
                off += 1
            parts.append(word)
            off += len(word)
            if rng.random() < formula_rate:
                kind = "formula"
                r = rng.random()
                if r < float_rate:
                    kind = "figure" if r < float_rate / 2 else "table"
                rid = f"{SALT}-{_uuid_tail(rng)}"
                marker = f"{{{{{kind}:{rid}}}}}"
                parts.append(" ")
                spans.append((off + 1, off + 1 + len(marker), marker, rid))
                parts.append(marker)
                off += 1 + len(marker)
                if kind == "formula":
                    entries[rid] = {"latex": rng.choice(LATEX), "type": "formula"}
                else:
                    entries[rid] = {"caption": rng.choice(CAPTIONS), "type": kind}
    text = "".join(parts)
    assert len(text) == off
    return _Chunk(text, off, tuple(spans), entries)


def _chunks(kind: str) -> tuple[_Chunk, ...]:
    """Prebuilt filler (fixed seed, independent of the corpus seed), built once per process."""
    if kind not in _CHUNK_CACHE:
        rng = random.Random(20221222 if kind == "normal" else 20221223)
        if kind == "normal":
            built = [_make_chunk(rng, rng.randint(1, 3), 0.06, 0.04) for _ in range(512)]
        else:
            built = [_make_chunk(rng, 1, 0.04, 0.0) for _ in range(128)]
        _CHUNK_CACHE[kind] = tuple(built)
    return _CHUNK_CACHE[kind]


# ------------------------------------------------------------------------ topics
@dataclass(frozen=True, slots=True)
class _Topic:
    index: int
    category: str
    name: str
    cs: bool


TOPICS: tuple[_Topic, ...] = tuple(
    _Topic(i, cat, name, cat.startswith("cs."))
    for i, (cat, name) in enumerate(
        [(c, n) for c, names in CS_TOPICS.items() for n in names]
        + [(c, n) for c, names in NONCS_TOPICS.items() for n in names]
    )
)


TOPICS_BY_CATEGORY: dict[str, tuple[int, ...]] = {}


for _t in TOPICS:
    TOPICS_BY_CATEGORY[_t.category] = (*TOPICS_BY_CATEGORY.get(_t.category, ()), _t.index)


_TOPIC_SENTENCES: dict[int, tuple[_Chunk, ...]] = {}


def _topic_sentences(topic: int) -> tuple[_Chunk, ...]:
    """Per-topic sentences mixed into paragraphs, so body text carries topic words."""
    if topic not in _TOPIC_SENTENCES:
        t = TOPICS[topic]
        rng = random.Random(7_000 + topic)
        fams = CS_FAMILIES if t.cs else NONCS_FAMILIES
        name = t.name.lower()
        templates = (
            "Recent work on {t} has explored {f} to improve {w}",
            "{T} remains challenging when {w} is limited",
            "We focus on {t} with {f} under realistic {w} constraints",
            "Most approaches to {t} rely on {f} and large amounts of {w}",
            "In {t}, {f} offer a trade-off between {w} and accuracy",
        )
        out = []
        for _ in range(24):
            text = rng.choice(templates).format(
                t=name,
                T=t.name,
                f=rng.choice(fams).lower(),
                w=rng.choice(("data", "compute", "supervision", "memory", "time")),
            )
            out.append(_Chunk(text, len(text), (), {}))
        _TOPIC_SENTENCES[topic] = tuple(out)
    return _TOPIC_SENTENCES[topic]


# ------------------------------------------------------------------------- works
@dataclass(slots=True)
class _Work:
    """Anything that can be cited: an outside work or a corpus paper."""

    title: str
    authors: str  # bibliography form, "J. Smith, A. Lee, and K. Wu"
    venue: str
    year: int
    key: int  # year * 12 + month - 1, compared with the citing paper's key
    doi: str  # canonical lower-case, "" if none
    arxiv: str  # "" if none
    openalex: int  # 0 if none
    discipline: str
    pubmed: str = ""


@dataclass(slots=True)
class _Pool:
    works: list[_Work]  # sorted by key
    keys: list[int]
    cum: list[float]  # cumulative popularity weights in the same order


@dataclass(slots=True)
class _Paper:
    idx: int
    category: str
    categories: str
    topic: int
    kind: str  # survey | trap | regular | review (a non-CS review)
    when: datetime
    family: str
    authors: list[tuple[str, str]]
    trap: int = -1
    arxiv_id: str = ""
    title: str = ""
    doi: str = ""
    stamp: int = 0
    work: _Work | None = None


def _bib_authors(rng: random.Random, k: int) -> str:
    names = [f"{_pick(rng, FIRST_NAMES)[0]}. {_pick(rng, LAST_NAMES)}" for _ in range(k)]
    if k == 1:
        return names[0]
    return ", ".join(names[:-1]) + (", and " if k > 2 else " and ") + names[-1]


# ---------------------------------------------------------------------- generator
class _Corpus:
    """Planned corpus: papers with their ids and dates, and lazily built outside-work pools."""

    def __init__(
        self, papers: int, seed: int, small: bool, survey_share: float, cs_share: float
    ) -> None:
        self.seed = seed
        self.small = small
        self.rng = random.Random(seed)
        self.pools: dict[int, _Pool] = {}
        self.plan = [self._plan_paper(i, survey_share, cs_share, self.rng) for i in range(papers)]
        self._assign_ids(self.plan, self.rng)
        self.by_topic: dict[int, list[_Paper]] = {}
        for p in sorted(self.plan, key=lambda p: (p.stamp, p.arxiv_id)):
            self.by_topic.setdefault(p.topic, []).append(p)
        self.topic_stamps = {t: [p.stamp for p in ps] for t, ps in self.by_topic.items()}

    # ---------------------------------------------------------------- planning
    def _plan_paper(
        self, idx: int, survey_share: float, cs_share: float, rng: random.Random
    ) -> _Paper:
        trap = -1
        if rng.random() < cs_share:
            category = rng.choices(list(CS_WEIGHTS), weights=list(CS_WEIGHTS.values()))[0]
            if rng.random() < survey_share:
                kind = "survey"
            elif rng.random() < TRAP_SHARE:
                kind, trap = "trap", rng.randrange(len(TRAPS))
                category = TRAPS[trap][0]
            else:
                kind = "regular"
        else:
            category = rng.choices(list(NONCS_WEIGHTS), weights=list(NONCS_WEIGHTS.values()))[0]
            kind = "review" if rng.random() < survey_share / 2 else "regular"
        topic = rng.choice(TOPICS_BY_CATEGORY[category])
        cats = [category]
        if rng.random() < 0.4:
            cats += rng.sample(
                CROSS_LISTS[category], rng.randint(1, min(2, len(CROSS_LISTS[category])))
            )
        year = rng.choices(list(YEAR_WEIGHTS), weights=list(YEAR_WEIGHTS.values()))[0]
        month = rng.randint(1, 12)
        start = datetime(year, month, 1)
        nxt = datetime(year + (month == 12), month % 12 + 1, 1)
        when = start + timedelta(seconds=rng.randrange(int((nxt - start).total_seconds())))
        when = min(when, LAST_DAY)
        fams = CS_FAMILIES if category.startswith("cs.") else NONCS_FAMILIES
        n_auth = rng.choices((1, 2, 3, 4, 5, 6, 8), weights=(12, 22, 25, 18, 11, 7, 5))[0]
        authors = [(rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)) for _ in range(n_auth)]
        p = _Paper(
            idx, category, " ".join(cats), topic, kind, when, rng.choice(fams), authors, trap
        )
        p.title = self._title(p, rng)
        return p

    def _title(self, p: _Paper, rng: random.Random) -> str:
        topic = TOPICS[p.topic].name
        fam = p.family
        if p.kind == "survey":
            forms = (
                f"A Survey on {topic}",
                f"{topic}: A Systematic Literature Review",
                f"A Comprehensive Review of {topic}",
                f"{fam} for {topic}: A Survey",
                f"Recent Advances in {topic}: A Survey",
                f"A Review of {fam} Methods for {topic}",
            )
            return rng.choice(forms)
        if p.kind == "review":
            return rng.choice(
                (f"A Review of {topic}", f"{topic}: A Review", f"Progress in {topic}: A Review")
            )
        if p.kind == "trap":
            return TRAPS[p.trap][1].format(family=fam, suffix=rng.choice(TRAP_SUFFIXES))
        adj = rng.choice(ADJECTIVES)
        if not TOPICS[p.topic].cs:
            return rng.choice(
                (
                    f"On {adj.lower()} estimates for {topic.lower()}",
                    f"{fam} in {topic}",
                    f"A note on {topic.lower()} and {fam.lower()}",
                    f"Zeros, limits and {fam.lower()} in {topic.lower()} with a growing number of parameters",
                )
            )
        name = rng.choice(NAME_HEADS) + rng.choice(NAME_TAILS)
        return rng.choice(
            (
                f"{adj} {fam} for {topic}",
                f"Towards {adj} {topic} with {fam}",
                f"{name}: {adj} {fam} for {topic}",
                f"On the Role of {fam} in {topic}",
                f"Rethinking {topic}: {adj} {fam} with Limited Supervision",
            )
        )

    def _assign_ids(self, plan: list[_Paper], rng: random.Random) -> None:
        by_month: dict[tuple[int, int], list[_Paper]] = {}
        for p in plan:
            by_month.setdefault((p.when.year, p.when.month), []).append(p)
        for (year, month), ps in sorted(by_month.items()):
            ps.sort(key=lambda p: (p.when, p.idx))
            # Corpus numbers stay below 20000, the range of outside works' ids.
            gap = max(1, min(40, 19_000 // len(ps)))
            number = rng.randint(1, 400)
            for p in ps:
                p.arxiv_id = f"{year % 100:02d}{month:02d}.{number:05d}"
                number += rng.randint(1, gap)
        epoch = datetime(2000, 1, 1)
        for p in plan:
            p.stamp = int((p.when - epoch).total_seconds())
            if rng.random() < 0.2:
                p.doi = self._paper_doi(p, rng)
            p.work = _Work(
                title=p.title,
                authors=_bib_authors_of(p.authors),
                venue=""
                if not p.doi
                else rng.choice(CS_VENUES if TOPICS[p.topic].cs else NONCS_VENUES),
                year=p.when.year,
                key=p.when.year * 12 + p.when.month - 1,
                doi=p.doi.lower(),
                arxiv=p.arxiv_id,
                openalex=_scramble(CORPUS_OPENALEX + p.idx),
                discipline=_discipline(p.category),
            )

    @staticmethod
    def _paper_doi(p: _Paper, rng: random.Random) -> str:
        # Publisher DOIs keep their mixed case in arXiv metadata; bib ids are lower-case.
        # The paper index makes them unique, and the patterns differ from outside works'.
        form = int(rng.random() * 3)
        if TOPICS[p.topic].cs:
            if form == 0:
                return f"10.1109/TPAMI.{p.when.year}.{3_100_000 + p.idx}"
            if form == 1:
                return f"10.1145/{3_600_000 + p.idx}.{rng.randint(3400000, 3699999)}"
            return f"10.18653/v1/{p.when.year}.acl-long.{p.idx}"
        if form == 0:
            return f"10.1103/PhysRevB.{rng.randint(90, 112)}.{200_000 + p.idx}"
        if form == 1:
            return f"10.1090/tran/{100_000 + p.idx}"
        return f"10.1093/bioinformatics/btac{p.idx}"

    # ------------------------------------------------------------------- pools
    def pool(self, topic: int) -> _Pool:
        """Outside works of a topic, built on first use from a topic-specific stream.

        A pool depends only on (seed, topic, small, papers of the topic), never on
        when it is first needed: its ids are unique by construction, not by lookup.
        """
        if topic not in self.pools:
            self.pools[topic] = self._build_pool(topic)
        return self.pools[topic]

    def _build_pool(self, topic: int) -> _Pool:
        t = TOPICS[topic]
        rng = random.Random(self.seed * 1_000_003 + 7919 * (topic + 1))
        n_papers = len(self.by_topic.get(topic, ()))
        size = 600 if not self.small else max(120, min(600, 20 * n_papers))
        fams = CS_FAMILIES if t.cs else NONCS_FAMILIES
        venues = CS_VENUES if t.cs else NONCS_VENUES
        disc = _discipline(t.category)
        works = []
        taken: set[str] = set()
        for j in range(size):
            u = topic * POOL_STRIDE + j  # unique over all pools
            year = max(1985, 2025 - int(rng.expovariate(1 / 9)))
            month = rng.randint(1, 12)
            r = rng.random()
            has_doi = r < (0.72 if t.cs else 0.85)
            has_arxiv = year >= 1995 and (
                rng.random() < (0.55 if t.cs else 0.45) or not has_doi and r < 0.95
            )
            arxiv = self._outside_arxiv(rng, t, year, month, taken) if has_arxiv else ""
            doi = self._outside_doi(rng, t, year, u) if has_doi else ""
            suffix = rng.choice(
                (
                    "",
                    "",
                    " with limited supervision",
                    " at scale",
                    ": a benchmark",
                    " revisited",
                    ": a survey",
                )
            )
            title = (
                f"{rng.choice(ADJECTIVES)} {rng.choice(fams).lower()} for {t.name.lower()}{suffix}"
            )
            title = title[0].upper() + title[1:]
            works.append(
                _Work(
                    title=title,
                    authors=_bib_authors(rng, rng.randint(1, 5)),
                    venue=rng.choice(venues) if doi or not arxiv else "",
                    year=year,
                    key=year * 12 + month - 1,
                    doi=doi,
                    arxiv=arxiv,
                    openalex=_scramble(u + 1) if rng.random() < 0.85 else 0,
                    discipline=disc,
                    pubmed=str(rng.randint(20_000_000, 36_000_000))
                    if t.category.startswith("q-bio") and rng.random() < 0.5
                    else "",
                )
            )
        # Skewed popularity in random order, so some works are cited by most papers of a topic.
        weights = [1.0 / (rank + 1) ** 1.1 for rank in range(size)]
        rng.shuffle(weights)
        order = sorted(range(size), key=lambda i: (works[i].key, i))
        works = [works[i] for i in order]
        cum, acc = [], 0.0
        for i in order:
            acc += weights[i]
            cum.append(acc)
        return _Pool(works, [w.key for w in works], cum)

    @staticmethod
    def _outside_arxiv(
        rng: random.Random, t: _Topic, year: int, month: int, taken: set[str]
    ) -> str:
        # Number n with n % len(TOPICS) == topic: pools never collide with each other,
        # and corpus papers (numbers < 20000) never collide with pools.
        stride = len(TOPICS)
        for _ in range(20):
            if year >= 2015:
                aid = f"{year % 100:02d}{month:02d}.{20_000 + t.index + stride * rng.randrange(1_200):05d}"
            elif year >= 2007:
                aid = f"{year % 100:02d}{month:02d}.{1_000 + t.index + stride * rng.randrange(140):04d}"
            else:
                archive = "cs" if t.cs else t.category.split(".")[0]
                aid = f"{archive}/{year % 100:02d}{month:02d}{1 + t.index + stride * rng.randrange(16):03d}"
            if aid not in taken:
                taken.add(aid)
                return aid
        return ""

    @staticmethod
    def _outside_doi(rng: random.Random, t: _Topic, year: int, u: int) -> str:
        # ``u`` is unique over all pools, so every DOI is too.
        form = int(rng.random() * 5)
        r = int(rng.random() * 1_000_000)
        if t.cs:
            return (
                f"10.1145/3{u:06d}.{3_000_000 + r}",
                f"10.1109/cvpr.{year}.{u:05d}",
                f"10.18653/v1/{year}.emnlp-main.{u}",
                f"10.1007/978-3-030-{u:05d}-{1 + r % 9}_{1 + r % 60}",
                f"10.1016/j.neucom.{year}.{u:06d}",
            )[form]
        return (
            f"10.1103/physrevb.{50 + r % 63}.{u:06d}",
            f"10.1090/tran/{u}",
            f"10.1007/s00440-0{10 + r % 15}-{u:05d}-{r % 10}",
            f"10.1093/bioinformatics/bt{'abcdefghijklmnopqrstuvwxyz'[r % 26]}{u}",
            f"10.1080/01621459.{year}.{u:07d}",
        )[form]

    def draw(
        self, rng: random.Random, topic: int, before: int, k: int, taken: set[int]
    ) -> list[_Work]:
        """Up to ``k`` distinct popularity-weighted works of ``topic`` dated before ``before``."""
        pool = self.pool(topic)
        n = bisect.bisect_left(pool.keys, before)
        if n == 0 or k <= 0:
            return []
        cum = pool.cum[:n]
        out: list[_Work] = []
        for _ in range(6):
            for i in rng.choices(range(n), cum_weights=cum, k=2 * (k - len(out)) + 4):
                w = pool.works[i]
                if id(w) not in taken:
                    taken.add(id(w))
                    out.append(w)
                    if len(out) == k:
                        return out
        # The popular head is exhausted: fill from the tail uniformly.
        rest = [w for w in pool.works[:n] if id(w) not in taken]
        for w in rng.sample(rest, min(k - len(out), len(rest))):
            taken.add(id(w))
            out.append(w)
        return out


def _bib_authors_of(authors: list[tuple[str, str]]) -> str:
    names = [f"{first[0]}. {last}" for first, last in authors[:5]]
    if len(authors) > 5:
        return ", ".join(names) + ", et al."
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + (", and " if len(names) > 2 else " and ") + names[-1]
