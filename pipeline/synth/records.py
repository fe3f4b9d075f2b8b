"""One synthetic paper as an unarXive record: its bib entries in one citation style per
paper, its section skeleton, where each cited work is mentioned, its abstract and
metadata (:func:`_build_record`), and the malformed lines a corpus mixes in."""

from __future__ import annotations

import bisect
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pipeline.corpus.layout import to_2024_layout
from pipeline.corpus.provenance import SYNTH_GENERATOR, SYNTHETIC_FIELD
from pipeline.synth.corpus_model import (
    SALT,
    TOPICS,
    TOPICS_BY_CATEGORY,
    _bib_authors,
    _chunks,
    _Corpus,
    _discipline,
    _hex,
    _Paper,
    _pick,
    _tex,
    _Topic,
    _topic_sentences,
    _Work,
    _wrap,
)
from pipeline.synth.vocabulary import (
    ADJECTIVES,
    ASPECTS,
    CS_FAMILIES,
    CS_VENUES,
    DAY_NAMES,
    LAST_DAY,
    LICENSES,
    MONTH_NAMES,
    NAME_HEADS,
    NAME_TAILS,
    NONCS_FAMILIES,
    NONCS_VENUES,
    PROTOCOL_STEPS,
    TRAPS,
)

MENTION_WEIGHTS = (58, 22, 9, 5, 4, 2)  # 1..6 mentions; about a fifth are cited 3+ times


# ------------------------------------------------------------------ citation styles
# A real bibliography is written in one style (one BibTeX style file): every entry of a
# paper has its quotes, title case, author form, "In:", "pp.", volume/issue and tails.
# Each synthetic paper draws one of these for its whole bibliography. The features are
# those of the real strings of the 2022 sample (tests/fixtures; examples in comments).
CITATION_STYLES = ("ieee", "acm", "aaai", "apa", "plainnat", "lncs", "export")


def _author_names(authors: str) -> tuple[list[tuple[str, str]], bool]:
    """``"J. Smith, A. Lee, and K. Wu"`` -> ``[("J.", "Smith"), ...]`` and whether "et al." ends it."""
    et_al = authors.endswith(", et al.")
    text = authors.removesuffix(", et al.").replace(", and ", ", ").replace(" and ", ", ")
    names = []
    for name in text.split(", "):
        first, _, last = name.partition(" ")
        names.append((first, last or first))
    return names, et_al


def _styled_authors(authors: str, style: str) -> str:
    names, et_al = _author_names(authors)
    if style in ("ieee", "acm", "plainnat"):  # J. Smith, A. Lee, and K. Wu
        text = authors.removesuffix(", et al.")
        return text + (", et al." if et_al else "")
    inverted = [f"{last}, {first}" for first, last in names]
    if style == "aaai":  # Ghosal, D.; Akhtar, M. S.; and Poria, S.
        head = "; ".join(inverted[:-1])
        text = f"{head}; and {inverted[-1]}" if len(inverted) > 1 else inverted[0]
        return text + ("; et al." if et_al else "")
    if style == "apa":  # Smith, J., Lee, A., & Wu, K.
        head = ", ".join(inverted[:-1])
        text = f"{head}, & {inverted[-1]}" if len(inverted) > 1 else inverted[0]
        return text + (", et al." if et_al else "")
    # lncs / export: Chen, H., Wang, Y., Xu, C.
    return ", ".join(inverted) + (", et al." if et_al else "")


def _styled_raw(rng: random.Random, w: _Work, style: str, venue: str, pages: bool) -> str:
    """The raw string of ``w`` in ``style`` (before identifier tails)."""
    a = _styled_authors(w.authors, style)
    first, last = rng.randint(1, 900), 0
    last = first + rng.randint(3, 18)
    vol, no = rng.randint(1, 60), rng.randint(1, 12)
    journal = not venue.startswith(("Proc", "In ", "Workshop")) and rng.random() < 0.4
    if style == "ieee":
        # “Title,” in Proc. Venue, 2020, pp. 1–10.  /  “Title,” Venue, vol. 4, no. 2, pp. 45–66, 2014.
        if journal:
            loc = f", vol. {vol}, no. {no}" + (f", pp. {first}–{last}" if pages else "")
            return f"{a}, “{w.title},” {venue}{loc}, {w.year}."
        return f"{a}, “{w.title},” in {venue}, {w.year}" + (
            f", pp. {first}–{last}." if pages else "."
        )
    if style == "acm":
        # Max Bain and Andrew Zisserman. 2021. Title. In ICCV. 1–10.
        if journal:
            return f"{a}. {w.year}. {w.title}. {venue} {vol}, {no} ({w.year})" + (
                f", {first}–{last}." if pages else "."
            )
        return f"{a}. {w.year}. {w.title}. In {venue}." + (f" {first}–{last}." if pages else "")
    if style == "aaai":
        # He, K.; Zhang, X.; and Sun, J. 2016. Title. In Proceedings of ..., 770–778.
        return f"{a} {w.year}. {w.title}. In {venue}" + (f", {first}–{last}." if pages else ".")
    if style == "apa":
        # Smith, J., & Lee, A. (2020). Title. Venue, 12(3), 45–67.
        if journal:
            return f"{a} ({w.year}). {w.title}. {venue}, {vol}({no})" + (
                f", {first}–{last}." if pages else "."
            )
        return f"{a} ({w.year}). {w.title}. In {venue}" + (
            f" (pp. {first}–{last})." if pages else "."
        )
    if style == "plainnat":
        # Sidi Lu and Weinan Zhang. Cot: cooperative training for ... In ICML, pages 4164–4172, 2019.
        title = w.title[0] + w.title[1:].lower()
        if journal:
            return f"{a}. {title}. {venue}, {vol}({no})" + (
                f":{first}–{last}, {w.year}." if pages else f", {w.year}."
            )
        return (
            f"{a}. {title}. In {venue}"
            + (f", pages {first}–{last}" if pages else "")
            + (f", {w.year}.")
        )
    if style == "lncs":
        # Chen, H., Xu, C.: Title. In: Proceedings of ..., pp. 1468–1477 (2020)
        if journal:
            return f"{a}: {w.title}. {venue} {vol}({no}), {first}–{last} ({w.year})"
        return (
            f"{a}: {w.title}. In: {venue}"
            + (f", pp. {first}–{last}" if pages else "")
            + (f" ({w.year})")
        )
    # export (Zotero / arXiv): Smith, J., Lee, A.: Title (2021). arXiv:2104.06921 [cs]
    if w.arxiv:
        return f"{a}: {w.title} ({w.year})"
    return f"{a}: {w.title}. {venue} ({w.year})"


# ------------------------------------------------------------------ bib entries
# Extra share of bib entries unarXive could not match to any identifier, by the citing
# paper's field (True: CS). With the presentations below (~11% and ~24% without any
# identifier) they give ~30% of entries without identifier in CS papers and ~60%
# elsewhere, near the real sample (29% in CS papers, 59% in all of it).
ID_LESS_EXTRA = {True: 0.21, False: 0.47}


def _bib_entry(
    rng: random.Random, w: _Work, style: str, corpus: bool, id_less: float = 0.0
) -> dict[str, Any]:
    """One bib entry for ``w`` in the citing paper's ``style`` (:data:`CITATION_STYLES`) with
    a randomly chosen identifier presentation; with probability ``id_less`` it carries no
    identifier at all (raw string only)."""
    if rng.random() < id_less:
        raw = _styled_raw(rng, w, style, w.venue or "Preprint", pages=False)
        return {"bib_entry_raw": raw, "contained_arXiv_ids": [], "contained_links": []}
    has_doi, has_arxiv = bool(w.doi), bool(w.arxiv)
    r = rng.random()
    use_doi = use_ids_arxiv = use_contained = use_oa = False
    none = False
    if has_doi and has_arxiv:
        if r < 0.30:
            use_doi = use_ids_arxiv = True
            use_oa = rng.random() < 0.8
        elif r < 0.55:
            use_doi, use_oa = True, rng.random() < 0.5
        elif r < 0.73:
            use_ids_arxiv, use_oa = True, rng.random() < 0.5
        elif r < 0.84:
            use_contained = True
        elif r < 0.90:
            use_oa = True
        else:
            none = True
    elif has_arxiv:
        if r < 0.45:
            use_ids_arxiv, use_oa = True, rng.random() < 0.6
        elif r < 0.77:
            use_contained = True
        elif r < 0.89:
            use_oa = True
        else:
            none = True
    elif has_doi:
        if r < 0.76:
            use_doi, use_oa = True, rng.random() < 0.7
        elif r < 0.90:
            use_oa = True
        else:
            none = True
    else:
        use_oa = r < 0.75
        none = not use_oa
    if use_oa and not w.openalex and not (use_doi or use_ids_arxiv or use_contained):
        # An OpenAlex-only citation of a work OpenAlex does not know: fall back to
        # another identifier rather than inflating the no-identifier share.
        use_oa = False
        use_doi, use_ids_arxiv = has_doi, has_arxiv and not has_doi
        none = not (use_doi or use_ids_arxiv)
    use_oa = use_oa and bool(w.openalex)
    if use_ids_arxiv and rng.random() < 0.3:
        use_contained = True  # the raw string mentions it too

    venue = w.venue or rng.choice(("Preprint", "Technical report", "CoRR"))
    raw = _styled_raw(rng, w, style, venue, pages=rng.random() < 0.7)
    contained: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    if use_contained:
        form = rng.randrange(4)
        text = (
            f"arXiv:{w.arxiv}v{rng.randint(1, 4)}",
            f"arXiv:{w.arxiv}",
            f"https://arxiv.org/abs/{w.arxiv}",
            f"http://arxiv.org/abs/{w.arxiv}.",
        )[form]
        if style == "export":  # a Zotero / arXiv export's tail: arXiv:2104.06921 [cs]
            form, text = 1, f"arXiv:{w.arxiv}"
        lead = (
            " arXiv preprint "
            if form == 1 and style != "export"
            else ". "
            if style == "export"
            else " "
        )
        start = len(raw) + len(lead)
        tail = " [cs]" if style == "export" else "" if text.endswith(".") else "."
        raw = f"{raw}{lead}{text}{tail}"
        contained.append({"id": w.arxiv, "text": text, "start": start, "end": start + len(text)})
    if use_doi and rng.random() < 0.2:
        # the DOI tail of the style: IEEE's "[Online]. Available:", ACM/APA's URL, "doi:"
        lead = {"ieee": " [Online]. Available: https://doi.org/", "acm": " https://doi.org/",
                "apa": " https://doi.org/"}.get(style, " doi: ")  # fmt: skip
        start = len(raw) + len(lead)
        raw = f"{raw}{lead}{w.doi}"
        links.append(
            {
                "url": f"http://doi.org/{w.doi}",
                "text": w.doi,
                "start": start,
                "end": start + len(w.doi),
            }
        )
    if not corpus and rng.random() < 0.04:
        url = f"https://github.com/{w.authors.split('. ')[1].split(',')[0].split(' ')[0].lower()}/{w.title.split(' ')[1].lower()}"
        start = len(raw) + 1
        raw = f"{raw} {url}"
        links.append({"url": url, "text": url, "start": start, "end": start + len(url)})
    entry: dict[str, Any] = {
        "bib_entry_raw": raw,
        "contained_arXiv_ids": contained,
        "contained_links": links,
    }
    # Like the real data, entries unarXive could not match carry no ids/discipline at all.
    if (
        none or (use_contained and not (use_doi or use_ids_arxiv or use_oa))
    ) and rng.random() < 0.5:
        return entry
    oa = f"W{w.openalex}" if use_oa else ""
    doi = ""
    if use_doi:
        doi = w.doi if rng.random() < 0.65 else f"https://doi.org/{w.doi}"
    entry["discipline"] = w.discipline if rng.random() < 0.9 else ""
    entry["ids"] = {
        "open_alex_id": f"https://openalex.org/{oa}" if oa else "",
        "sem_open_alex_id": f"https://semopenalex.org/work/{oa}"
        if oa and rng.random() < 0.7
        else "",
        "pubmed_id": w.pubmed if use_oa else "",
        "pmc_id": "",
        "doi": doi,
        "arxiv_id": w.arxiv if use_ids_arxiv else "",
    }
    return entry


# ------------------------------------------------------------------- skeletons
@dataclass(slots=True)
class _Unit:
    """One heading's run of paragraphs (a section lead, subsection or subsubsection)."""

    heading: str | None
    number: str
    sec_type: str
    role: str
    group: int
    weight: float
    cite_head: bool = False
    # a section that opens with a subsection: no paragraph of its own (its citations go
    # to its first subsection), as in 23 of the 49 real papers
    silent: bool = False


def _numbering(dotted: bool, parent: str, i: int) -> str:
    return f"{parent}.{i}" if dotted and parent else str(i)


class _Skeleton:
    """Units in document order, grouped by top-level section and by citation role.

    ``flat`` skeletons ignore subsections (small regular papers stay small).
    """

    def __init__(self, flat: bool = False) -> None:
        self.flat = flat
        self.units: list[_Unit] = []
        self.groups: list[list[int]] = []
        self.roles: dict[str, list[int]] = {}

    def section(
        self,
        heading: str | None,
        number: str,
        role: str,
        weight: float,
        sec_type: str = "section",
        silent: bool = False,
    ) -> int:
        """A top-level section; ``silent``: it opens with a subsection (give it some)."""
        g = len(self.groups)
        self.groups.append([len(self.units)])
        self.roles.setdefault(role, []).append(g)
        self.units.append(
            _Unit(heading, number, sec_type, role, g, weight, silent=silent and not self.flat)
        )
        return g

    def sub(
        self,
        g: int,
        heading: str | None,
        number: str,
        sec_type: str = "subsection",
        weight: float = 1.0,
        cite_head: bool = False,
    ) -> int:
        lead = self.units[self.groups[g][0]]
        if self.flat:
            return self.groups[g][0]
        if len(self.groups[g]) == 1:
            lead.weight *= 0.5  # a lead paragraph before subsections is short
        role = lead.role
        self.groups[g].append(len(self.units))
        self.units.append(_Unit(heading, number, sec_type, role, g, weight, cite_head))
        return len(self.units) - 1


def _survey_skeleton(rng: random.Random, p: _Paper, small: bool) -> _Skeleton:
    sk = _Skeleton()
    topic = TOPICS[p.topic].name
    fams = CS_FAMILIES if TOPICS[p.topic].cs else NONCS_FAMILIES
    n = 1
    g = sk.section("Introduction", str(n), "intro", 1.6)
    if rng.random() < 0.3:
        for i, h in enumerate(
            rng.sample(("Motivation", "Contributions", "Scope of this Survey"), 2), 1
        ):
            sk.sub(g, h, str(i))
    if rng.random() < 0.4:
        n += 1
        sk.section(rng.choice(("Background", "Preliminaries")), str(n), "bg", 1.0)
    # Systematic reviews (and some others) describe their own search protocol before
    # the core; works cited only there (guidelines, tools) become tier 2. Its steps are
    # subsections of a methodology section or top-level sections of their own.
    systematic = "Systematic" in p.title
    if systematic or rng.random() < 0.25:
        steps = rng.sample(PROTOCOL_STEPS, rng.randint(2, 4))
        if rng.random() < 0.4:
            for h in steps:
                n += 1
                sk.section(h, str(n), "method", 0.3)
        else:
            n += 1
            g = sk.section(
                rng.choice(("Research Methodology", "Survey Methodology", "Review Method")),
                str(n),
                "method",
                0.8,
            )
            if rng.random() < 0.6:
                for i, h in enumerate(steps, 1):
                    sk.sub(g, h, str(i))
    subsub = rng.random() < 0.3
    for fam in rng.sample(fams, rng.randint(3, 8)):
        n += 1
        heading = rng.choice(
            (
                f"{fam} for {topic}",
                f"{fam} for {topic}",
                f"{fam}-based Approaches",
                f"{fam} Methods",
                f"Approaches Based on {fam}",
            )
        )
        g = sk.section(heading, str(n), "topical", 1.0, silent=rng.random() < 0.25)
        for i in range(1, rng.randint(2, 5) + 1):
            if rng.random() < 0.5:
                name = (
                    rng.choice(NAME_HEADS)
                    + rng.choice(NAME_TAILS)
                    + rng.choice(("", "", "2", "++", "-X"))
                )
                u = sk.sub(g, name, str(i), cite_head=rng.random() < 0.8)
                if subsub and sk.units[u].cite_head and not small:
                    for j, h in enumerate(
                        ("Methodology", "Evaluation", "Advantages and Disadvantages"), 1
                    ):
                        sk.sub(g, h, str(j), "subsubsection", 0.6)
            else:
                sk.sub(g, rng.choice(ASPECTS), str(i))
    if rng.random() < 0.5:
        n += 1
        sk.section("Open Challenges and Future Directions", str(n), "disc", 0.8)
    n += 1
    sk.section("Discussion", str(n), "disc", 0.7)
    if systematic and rng.random() < 0.5:
        n += 1
        sk.section("Threats to Validity", str(n), "method", 0.3)
    n += 1
    sk.section("Conclusion", str(n), "concl", 0.5)
    sk.section("Acknowledgment", "-1", "back", 0.15)
    if rng.random() < 0.2:
        sk.section(rng.choice(("Search Strings", "List of Reviewed Papers")), "A", "back", 0.3)
    return sk


def _regular_skeleton(rng: random.Random, p: _Paper, small: bool) -> _Skeleton:
    sk = _Skeleton(flat=small)
    t = TOPICS[p.topic]
    dotted = rng.random() < 0.5
    trap = TRAPS[p.trap][2] if p.trap >= 0 else ""
    if rng.random() < 0.05:
        sk.section("", "-1", "pre", 0.3, sec_type="")
    sk.section("Introduction", "1", "intro", 1.6)
    if t.cs:
        _cs_sections(sk, rng, p, dotted, trap)
    else:
        _math_sections(sk, rng, dotted)
    _back_matter(sk, rng, small)
    return sk


def _math_sections(sk: _Skeleton, rng: random.Random, dotted: bool) -> None:
    """The body of a paper outside CS, after its introduction: results and proofs."""
    n = 2  # section 1 is the introduction
    sk.section(
        rng.choice(("Preliminaries", "Setup and Notation", "The Model")), str(n), "related", 1.0
    )
    n += 1
    g = sk.section("Main Results", str(n), "method", 1.4)
    if rng.random() < 0.5:
        for i in range(1, rng.randint(2, 3) + 1):
            sk.sub(
                g,
                rng.choice(
                    ("Upper Bounds", "Lower Bounds", "Proof of Theorem 1", "Auxiliary Lemmas")
                ),
                _numbering(dotted, str(n), i),
            )
    if rng.random() < 0.05:
        # Untitled subsubsections exist in the real data (section null).
        sk.sub(g, None, "1", "subsubsection")
    if rng.random() < 0.5:
        n += 1
        sk.section(
            rng.choice(("Numerical Results", "Numerical Experiments", "Simulations")),
            str(n),
            "exp",
            1.0,
        )
    n += 1
    sk.section(
        rng.choice(("Discussion", "Conclusion", "Comments and Open Problems")),
        str(n),
        "concl",
        0.6,
    )


def _cs_sections(sk: _Skeleton, rng: random.Random, p: _Paper, dotted: bool, trap: str) -> None:
    """The body of a CS paper, after its introduction: related work, method, experiments."""
    n = 2  # section 1 is the introduction
    g = sk.section(
        rng.choice(
            (
                "Related Work",
                "Related Work",
                "Related Works",
                "Background and Related Work",
                "Prior Work",
            )
        ),
        str(n),
        "related",
        1.2,
    )
    if rng.random() < 0.4:
        for i, h in enumerate(
            (p.family, TOPICS[p.topic].name, "Datasets and Benchmarks")[: rng.randint(2, 3)], 1
        ):
            sk.sub(g, h, _numbering(dotted, str(n), i))
    elif rng.random() < 0.4:
        # paragraph-level headings (empty sec_type, "2.0.0.1" or "-1"), sometimes
        # with no lead paragraph: real 2212.11790 goes from "1" to "2.0.0.1"
        sk.units[sk.groups[g][0]].silent = rng.random() < 0.5 and not sk.flat
        for i, h in enumerate((p.family, TOPICS[p.topic].name)[: rng.randint(1, 2)], 1):
            sk.sub(g, h, f"{n}.0.0.{i}" if dotted else "-1", "")
    n += 1
    method = {
        "questionnaire": "Survey Design",
        "survey_propagation": "Survey Propagation",
        "litreview_gen": "Literature Review Generation Pipeline",
    }.get(trap) or rng.choice(("Proposed Method", "Methodology", "Method", "Our Approach"))
    g = sk.section(method, str(n), "method", 1.5)
    if rng.random() < 0.6:
        sk.units[sk.groups[g][0]].silent = rng.random() < 0.3 and not sk.flat
        for i, h in enumerate(
            rng.sample(
                (
                    "Problem Formulation",
                    "Overview",
                    "Model Architecture",
                    "Training Objective",
                    "Inference",
                ),
                rng.randint(2, 4),
            ),
            1,
        ):
            sk.sub(g, h, _numbering(dotted, str(n), i))
    if trap == "questionnaire":
        n += 1
        sk.section("Survey Results", str(n), "exp", 1.4)
        n += 1
        sk.section("Threats to Validity", str(n), "disc", 0.5)
    elif rng.random() < 0.5:
        n += 1
        g = sk.section("Experiments", str(n), "exp", 1.5)
        heads = [
            "Experimental Setup",
            "Baselines",
            "Implementation Details",
            "Main Results",
            "Ablation Study",
        ]
        for i, h in enumerate(heads[: rng.randint(3, 5)], 1):
            sk.sub(g, h, _numbering(dotted, str(n), i))
    else:
        n += 1
        sk.section("Experimental Setup", str(n), "exp", 1.0)
        n += 1
        sk.section("Results", str(n), "exp", 1.2)
    if rng.random() < 0.4:
        n += 1
        sk.section(rng.choice(("Discussion", "Limitations")), str(n), "disc", 0.6)
    n += 1
    sk.section(
        rng.choice(("Conclusion", "Conclusions", "Conclusion and Future Work")),
        str(n),
        "concl",
        0.5,
    )


def _back_matter(sk: _Skeleton, rng: random.Random, small: bool) -> None:
    """Acknowledgements and appendices."""
    if rng.random() < 0.5:
        sk.section(
            rng.choice(("Acknowledgments", "Acknowledgements", "Acknowledgment")),
            "-1",
            "back",
            0.15,
        )
    if rng.random() < 0.2 and not small:
        g = sk.section(
            rng.choice(("Additional Results", "Implementation Details", "Proof of Theorem 1")),
            "A",
            "back",
            0.6,
        )
        if rng.random() < 0.5:
            sk.sub(g, "Hyperparameters", "A.1")
        if rng.random() < 0.5:
            # an appendix known only from its subsections ("D.1" with no "D")
            g = sk.section(None, "B", "back", 0.4, silent=True)
            sk.sub(g, "Additional Experiments", "B.1")


# Where a cited work's first mention goes (its "home") and where the others go.
HOME_REGULAR = {"intro": 0.28, "related": 0.40, "method": 0.17, "exp": 0.15}


# for the ~13% of a survey's works whose home is not a topical section
HOME_SURVEY = {"intro": 0.1, "bg": 0.05, "method": 0.06}


EXTRA_REGULAR = {
    "intro": 0.2,
    "related": 0.3,
    "method": 0.2,
    "exp": 0.2,
    "disc": 0.07,
    "concl": 0.03,
}


EXTRA_SURVEY = {
    "same": 0.45,
    "topical": 0.2,
    "intro": 0.15,
    "disc": 0.12,
    "concl": 0.05,
    "bg": 0.03,
}


class _RolePicker:
    """Weighted choice among the roles a skeleton actually has (built once per paper)."""

    __slots__ = ("cum", "roles", "total")

    def __init__(self, weights: dict[str, float], roles: dict[str, list[int]]) -> None:
        self.roles = [r for r in weights if r in roles or r == "same"] or ["intro"]
        self.cum: list[float] = []
        acc = 0.0
        for r in self.roles:
            acc += weights.get(r, 1.0)
            self.cum.append(acc)
        self.total = acc

    def __call__(self, rng: random.Random) -> str:
        i = bisect.bisect_right(self.cum, rng.random() * self.total)
        return self.roles[min(i, len(self.roles) - 1)]


# ---------------------------------------------------------------------- papers
# Share of a paper's outside citations that no other paper cites (True: a survey).
PRIVATE_SHARE = {True: 0.6, False: 0.4}


def _private_work(rng: random.Random, p: _Paper, t: _Topic, j: int) -> _Work:
    """A work only paper ``p`` cites: its topic's vocabulary, a year before the paper, a DOI
    unique to (paper, j) (never a pool's or a corpus paper's)."""
    fams = CS_FAMILIES if t.cs else NONCS_FAMILIES
    year = max(1985, p.when.year - 1 - int(rng.expovariate(1 / 5)))
    title = f"{_pick(rng, ADJECTIVES)} {_pick(rng, fams).lower()} for {t.name.lower()}"
    suffix = _pick(rng, ("", "", " revisited", ": a case study", " in practice"))
    return _Work(
        title=title[0].upper() + title[1:] + suffix,
        authors=_bib_authors(rng, rng.randint(1, 5)),
        venue=_pick(rng, CS_VENUES if t.cs else NONCS_VENUES),
        year=year,
        key=year * 12 + rng.randrange(12),
        doi=f"10.5555/p{p.idx}.{j}",
        arxiv="",
        openalex=0,
        discipline=_discipline(t.category),
    )


def _build_record(corpus: _Corpus, p: _Paper, rng: random.Random, small: bool) -> dict[str, Any]:
    # the passes draw from one rng in this order: the record depends on it
    survey = p.kind in ("survey", "review")
    t = TOPICS[p.topic]
    sk = _survey_skeleton(rng, p, small) if survey else _regular_skeleton(rng, p, small)
    bib = _bibliography(corpus, p, t, rng, small, survey)
    unit_cites = _mentions(sk, list(bib), rng, survey)
    body, ref_entries = _body_text(sk.units, unit_cites, p, t, rng, small, survey)
    meta = _metadata(rng, p, t)
    return {
        "paper_id": p.arxiv_id,
        "_pdf_hash": None,
        "_source_hash": _hex(rng),
        "_source_name": f"{p.arxiv_id}.gz",
        "metadata": meta,
        "discipline": _discipline(p.category),
        "abstract": {
            "section": "Abstract",
            "text": meta["abstract"],
            "cite_spans": [],
            "ref_spans": [],
        },
        "body_text": body,
        "bib_entries": bib,
        "ref_entries": ref_entries,
        # last, so a reject's head (the line's first bytes) is as before; see pipeline.corpus.provenance
        SYNTHETIC_FIELD: SYNTH_GENERATOR,
    }


def _bibliography(
    corpus: _Corpus, p: _Paper, t: _Topic, rng: random.Random, small: bool, survey: bool
) -> dict[str, dict[str, Any]]:
    """Which works the paper cites: its bib entries by ref id, in citing order."""
    if survey:
        n_refs = rng.randint(30, 50) if small else int(50 + 250 * rng.random() ** 1.5)
        corpus_share = 0.35
    else:
        n_refs = rng.randint(6, 12) if small else rng.randint(15, 60)
        corpus_share = 0.25 if t.cs else 0.15
    earlier = corpus.by_topic.get(p.topic, [])
    n_earlier = bisect.bisect_left(corpus.topic_stamps.get(p.topic, []), p.stamp)
    k_corpus = min(n_earlier, round(n_refs * corpus_share * (0.5 + rng.random())))
    cited: list[_Work] = [earlier[i].work for i in rng.sample(range(n_earlier), k_corpus)]  # type: ignore[misc]
    is_corpus = [True] * len(cited)
    n_out = n_refs - k_corpus
    siblings = [x for x in TOPICS_BY_CATEGORY[t.category] if x != p.topic]
    # Outside works: mostly the paper's own topic, some from sibling topics of the same
    # category (so surveys of one category overlap across topics), a few from anywhere.
    sib_share = (0.25 if survey else 0.15) if siblings else 0.0
    counts_by_topic: dict[int, int] = {p.topic: 0}
    for _ in range(n_out):
        r = rng.random()
        if r < sib_share:
            topic = _pick(rng, siblings)
        elif r < sib_share + 0.04:
            topic = int(rng.random() * len(TOPICS))
        else:
            topic = p.topic
        counts_by_topic[topic] = counts_by_topic.get(topic, 0) + 1
    plan = list(counts_by_topic.items())
    # A topic pool too small for a big early survey hands its shortfall to the siblings.
    plan += [(s, 0) for s in siblings]
    taken: set[int] = {id(w) for w in cited}
    short = 0
    key = p.when.year * 12 + p.when.month - 1
    for topic, k in plan:
        got = corpus.draw(rng, topic, key, k + short, taken)
        short = k + short - len(got)
        cited += got
        is_corpus += [False] * len(got)
    # The long tail: in real bibliographies most cited works are cited by no other survey,
    # so a work's only bib string is often its survey's own. Replace a share of the outside
    # works drawn with works only this paper cites (a DOI of their own).
    n_private = round(n_out * PRIVATE_SHARE[survey])
    for j, i in enumerate(
        rng.sample(range(k_corpus, len(cited)), min(n_private, len(cited) - k_corpus))
    ):
        cited[i] = _private_work(rng, p, t, j)
    order = list(range(len(cited)))
    rng.shuffle(order)
    style = CITATION_STYLES[rng.randrange(len(CITATION_STYLES))]  # one per bibliography
    ref_ids = [_hex(rng) for _ in order]
    bib = {
        rid: _bib_entry(rng, cited[i], style, is_corpus[i], ID_LESS_EXTRA[t.cs])
        for rid, i in zip(ref_ids, order, strict=True)
    }
    return bib


def _mentions(
    sk: _Skeleton, ref_ids: list[str], rng: random.Random, survey: bool
) -> list[list[str]]:
    """Where each work is mentioned: the ref ids cited in each unit of the skeleton (a
    cite-marked subsection heading gets its marker here)."""
    units = sk.units
    unit_cites: list[list[str]] = [[] for _ in units]
    counts = rng.choices(range(1, 7), weights=MENTION_WEIGHTS, k=len(ref_ids)) if ref_ids else []
    topical = sk.roles.get("topical", [])
    home_role = _RolePicker(HOME_SURVEY if survey else HOME_REGULAR, sk.roles)
    extra_role = _RolePicker(EXTRA_SURVEY if survey else EXTRA_REGULAR, sk.roles)
    homes: list[int] = []
    for _ in ref_ids:
        if survey and topical and rng.random() < 0.87:
            homes.append(_pick(rng, topical))
        else:
            homes.append(_pick(rng, sk.roles.get(home_role(rng)) or sk.roles["intro"]))
    first_unit = [_pick(rng, sk.groups[g]) for g in homes]
    # Cite-marked subsection headings name a work whose home is that section.
    by_home: dict[int, list[int]] = {}
    for i, g in enumerate(homes):
        by_home.setdefault(g, []).append(i)
    for u, unit in enumerate(units):
        if unit.cite_head:
            pool = by_home.get(unit.group) or []
            if pool:
                i = pool.pop(rng.randrange(len(pool)))
                unit.heading = f"{unit.heading} {{{{cite:{ref_ids[i]}}}}}"
                first_unit[i] = u
    for i, rid in enumerate(ref_ids):
        unit_cites[first_unit[i]].append(rid)
        for _ in range(counts[i] - 1):
            role = extra_role(rng)
            if role == "same":
                g = homes[i]
            elif role == "topical" and topical:
                g = _pick(rng, topical)
            else:
                g = _pick(rng, sk.roles.get(role) or sk.roles["intro"])
            unit_cites[_pick(rng, sk.groups[g])].append(rid)

    # a section that opens with a subsection has no paragraph: its citations move there
    for u, unit in enumerate(units):
        if unit.silent:
            members = sk.groups[unit.group]
            if len(members) > 1:
                unit_cites[members[1]].extend(unit_cites[u])
                unit_cites[u] = []
            else:
                unit.silent = False
    return unit_cites


def _body_text(
    units: list[_Unit],
    unit_cites: list[list[str]],
    p: _Paper,
    t: _Topic,
    rng: random.Random,
    small: bool,
    survey: bool,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """The paragraphs of every unit with their citation markers, and the ref entries their
    chunks bring."""
    chunks = _chunks("small" if small else "normal")
    tsent = _topic_sentences(p.topic)
    n_chunks = len(chunks)
    if small:
        total_par = len(units)
    else:
        total_par = rng.randint(100, 200) if survey else rng.randint(60, 150)
    wsum = sum(u.weight for u in units if not u.silent)
    body: list[dict[str, Any]] = []
    ref_entries: dict[str, dict[str, str]] = {}
    proofy = not t.cs
    rnd = rng.random
    for u, unit in enumerate(units):
        if unit.silent:
            continue
        n_par = 1 if small else max(1, round(total_par * unit.weight / wsum))
        per_par: list[list[str]] = [[] for _ in range(n_par)]
        for rid in unit_cites[u]:
            per_par[int(rnd() * n_par)].append(rid)
        for cites in per_par:
            pieces: list[str] = []
            cspans: list[dict[str, Any]] = []
            rspans: list[dict[str, Any]] = []
            off = 0
            if small:
                picked = [tsent[int(rnd() * 24)]] if rnd() < 0.3 else []
                picked.append(chunks[int(rnd() * n_chunks)])
            else:
                picked = [tsent[int(rnd() * 24)]] if rnd() < 0.5 else []
                picked += [chunks[int(rnd() * n_chunks)] for _ in range(1 + int(rnd() * 3))]
            n_slots = len(picked)
            slots: list[list[str]] = [[] for _ in picked]
            for rid in cites:
                slots[int(rnd() * n_slots)].append(rid)
            for ch, slot in zip(picked, slots, strict=True):
                pieces.append(ch.text)
                for s, e, txt, ref in ch.spans:
                    rspans.append({"start": s + off, "end": e + off, "text": txt, "ref_id": ref})
                if ch.entries:
                    ref_entries.update(ch.entries)
                off += ch.n
                if slot:
                    pieces.append(" ")
                    off += 1
                    for rid in slot:
                        marker = f"{{{{cite:{rid}}}}}"
                        cspans.append(
                            {"start": off, "end": off + 49, "text": marker, "ref_id": rid}
                        )
                        pieces.append(marker)
                        off += 49
                pieces.append(". ")
                off += 2
            pieces[-1] = ".\n"
            content = "paragraph" if rnd() > 0.04 else ("proof" if proofy else "list")
            body.append(
                {
                    "section": unit.heading,
                    "sec_number": unit.number,
                    "sec_type": unit.sec_type,
                    "content_type": content,
                    "text": "".join(pieces),
                    "cite_spans": cspans,
                    "ref_spans": rspans,
                }
            )
    return body, ref_entries


def _abstract(rng: random.Random, p: _Paper, t: _Topic) -> str:
    topic, fam = t.name.lower(), p.family.lower()
    sents = [ch.text for ch in rng.sample(_topic_sentences(p.topic), 2)]
    trap = TRAPS[p.trap][2] if p.trap >= 0 else ""
    if p.kind == "survey":
        lead = [
            f"{t.name} has attracted growing attention in recent years",
            f"In this survey, we review {rng.randint(40, 300)} papers on {topic} and organise them by the role of {fam}",
            "We summarise datasets, evaluation protocols and open challenges, and outline directions for future research",
        ]
        if "Systematic" in p.title:
            lead.insert(
                1,
                "Following established guidelines, this systematic literature review selects primary studies from five digital libraries",
            )
    elif p.kind == "review":
        lead = [
            f"We review recent progress in {topic}",
            f"In this review, we survey {fam} and their impact on {topic}",
        ]
    elif trap == "questionnaire":
        lead = [
            f"We conducted a questionnaire survey of {rng.randint(80, 900)} professional developers about their testing practices",
            "The responses show that unit testing dominates while test review is rare",
        ]
    elif trap == "survey_propagation":
        lead = [
            "Survey propagation is a message-passing algorithm for random constraint satisfaction problems",
            "We analyse its convergence for random k-SAT close to the satisfiability threshold",
        ]
    elif trap == "code_review":
        lead = [
            f"Code review is a costly step of software development; we automate it with {fam}",
            "Our model generates review comments for submitted changes",
        ]
    elif trap == "peer_review":
        lead = [
            f"We predict the outcome of scientific peer review from the submitted manuscript using {fam}"
        ]
    elif trap == "review_rec":
        lead = [f"User reviews carry rich signals for recommendation; we exploit them with {fam}"]
    elif trap == "litreview_gen":
        lead = [
            "We study how large language models can generate the related-work section of a paper",
            "Generated literature reviews are compared with human-written ones",
        ]
    elif t.cs:
        lead = [
            f"In this paper, we propose a {rng.choice(ADJECTIVES).lower()} approach to {topic} based on {fam}",
            "Experiments on standard benchmarks show consistent improvements over strong baselines",
        ]
    else:
        lead = [
            f"We study {topic} using {fam}",
            "We show that the main estimate holds under mild assumptions",
        ]
    text = ". ".join(lead[:1] + sents[:1] + lead[1:] + sents[1:]) + "."
    return "  " + _wrap(text, sep="\n") + "\n"


def _created(d: datetime) -> str:
    return f"{DAY_NAMES[d.weekday()]}, {d.day} {MONTH_NAMES[d.month - 1]} {d.year} {d:%H:%M:%S} GMT"


def _metadata(rng: random.Random, p: _Paper, t: _Topic) -> dict[str, Any]:
    tex = rng.random() < 0.6
    full = [f"{first} {last}" for first, last in p.authors]
    authors = ", ".join(_tex(a) if tex else a for a in full)
    if len(full) > 1 and rng.random() < 0.4:
        head, _, tail = authors.rpartition(", ")
        authors = f"{head} and {tail}"
    versions = [p.when]
    for _ in range(rng.choices((0, 1, 2, 3), weights=(60, 25, 10, 5))[0]):
        nxt = versions[-1] + timedelta(days=rng.randint(1, 200), seconds=rng.randrange(86_400))
        if nxt > LAST_DAY:
            break
        versions.append(nxt)
    r = int(rng.random() * 1_000_000)
    comments = (
        None,
        f"{4 + r % 37} pages",
        f"{4 + r % 37} pages, {1 + r % 12} figures",
        f"{4 + r % 37} pages, {1 + r % 12} figures, {1 + r % 6} tables",
        "Accepted at the main conference",
    )[int(rng.random() * 5)]
    journal = None
    if p.doi and rng.random() < 0.7:
        journal = f"{p.work.venue if p.work else ''} {rng.randint(1, 120)} ({p.when.year})".strip()
    license_ = rng.choices([lic for lic, _ in LICENSES], weights=[w for _, w in LICENSES])[0]
    update = min(versions[-1] + timedelta(days=1), datetime(2025, 12, 31))
    return {
        "id": p.arxiv_id,
        "submitter": full[0] if rng.random() < 0.8 else full[-1],
        "authors": _wrap(authors),
        "title": _wrap(p.title, width=72),
        "comments": comments,
        "journal-ref": journal,
        "doi": p.doi or None,
        "report-no": None if rng.random() < 0.97 else f"MIT-CTP/{rng.randint(4000, 5999)}",
        "categories": p.categories,
        "license": license_,
        "abstract": _abstract(rng, p, t),
        "versions": [
            {"version": f"v{i}", "created": _created(v)} for i, v in enumerate(versions, 1)
        ],
        "update_date": update.date().isoformat(),
        "authors_parsed": [[last, first, ""] for first, last in p.authors],
    }


# ---------------------------------------------------------------------- output
def _dumps(record: dict[str, Any], salt: str) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": ")).replace(SALT, salt)


def _malformed_line(
    kind: str, corpus: _Corpus, rng: random.Random, layout: str, serial: int
) -> bytes:
    """A broken line built from a fresh small paper that is not part of the corpus."""
    p = corpus._plan_paper(10_000_000 + serial, 0.0, 1.0, rng)
    p.kind, p.trap = "regular", -1
    # Ids past anything the corpus numbering reaches, so rejects never shadow a real paper.
    p.arxiv_id = f"{p.when.year % 100:02d}{p.when.month:02d}.{95_000 + serial % 5_000:05d}"
    p.stamp = 0
    p.work = None
    record = _build_record(corpus, p, rng, small=True)
    if layout == "2024":
        record = to_2024_layout(record)
    salt = f"{rng.getrandbits(32):08x}"
    if kind == "no_metadata":
        record = {k: v for k, v in record.items() if k != "metadata"}
    elif kind == "null_categories":
        record = dict(record, metadata=dict(record["metadata"], categories=None))
    line = _dumps(record, salt).encode("utf-8")
    if kind == "truncated":
        return line[: len(line) // 3]
    if kind == "invalid_utf8":
        at = line.index(b'"title": "') + len(b'"title": "') + 3
        return line[:at] + b"\xff\xfe\xc3\x28" + line[at:]
    return line
