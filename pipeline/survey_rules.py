"""Which papers are literature surveys: cue phrases in the title and abstract.

One public decision function, :func:`survey_reason`. It works in three steps:

1. **Mask** the senses of "review"/"survey"/"overview" that are not a literature
   survey (:data:`MASKS`): code review, peer review, reviewers, product/user/app
   reviews, review-based recommendation, survey propagation, sky surveys,
   questionnaire surveys of people ("online survey", "we surveyed 300
   developers"), shared-task overviews, and systems that *write* surveys or
   reviews ("automatic literature review generation", "LLMs can write surveys",
   "a toolkit for literature review"). Masked text is replaced by a separator, so
   a cue left elsewhere still counts: "Modern Code Review: A Survey" is a survey
   (of code review), "Automating Code Review Activities" is not.
2. **Title cues** (:data:`TITLE_CUES`, first match wins): systematic review,
   mapping study, meta-analysis, literature review, survey, review, overview,
   tutorial, primer, "the state of the art" (as a noun, not the adjective in
   "State-of-the-Art Natural Language Processing"), "recent advances/trends",
   taxonomy (not "taxonomy expansion/induction/...").
3. **Abstract cues** (:data:`ABSTRACT_CUES`, when ``surveys.use_abstract_cues``):
   "in this survey", "this paper surveys", "we review the literature", "we present
   a comprehensive review", "we conducted a systematic literature review", ...

A bare *survey* cue ("title:survey", "abstract:this survey", "abstract:we survey") is
vetoed when the title or abstract reports a questionnaire study
(:data:`QUESTIONNAIRE`: "we conducted a survey with 410 developers",
"respondents", "we distributed a questionnaire"; the abstract is read for this even
when abstract cues are off); the other cues are not (a systematic review may well
add interviews).

The reason string names the cue: ``"title:survey"``, ``"abstract:in this survey"``,
``"title:extra"`` for ``surveys.extra_title_cues``. ``surveys.extra_exclusions``
are extra masks. All patterns are case-insensitive ``regex`` patterns.

:func:`prefilter_pattern` is a cheap Polars (Rust regex) pattern that every
title or abstract with a cue matches, so stages run :func:`survey_reason` only on
the few rows that can have one.
"""

from __future__ import annotations

import functools

import regex

from pipeline.config import SurveysConfig

_F = regex.IGNORECASE
_SEP = " | "

_PEOPLE = (
    r"(?:developers|practitioners|users|students|participants|respondents|engineers|people"
    r"|teachers|employees|professionals|experts|programmers|researchers|scientists|workers"
    r"|consumers|citizens|residents|patients|clinicians|physicians|nurses|children|parents"
    r"|adults|stakeholders|managers|testers|contributors|maintainers|educators|instructors"
    r"|learners|designers|analysts|data scientists|companies|organi[sz]ations|individuals)"
)
_NUMBER = r"(?:\d[\d,]*|over \d[\d,]*|more than \d[\d,]*|nearly \d[\d,]*|hundreds of|thousands of)"
_WRITTEN = (
    r"(?:literature reviews?|literature surveys?|systematic (?:literature )?reviews?|surveys?"
    r"|related[- ]work(?: sections?)?|reviews?)"
)

# (name, pattern): text matching these is not a literature-survey cue.
MASKS: tuple[tuple[str, str], ...] = (
    (
        "non-literature review",
        r"\b(?:code|peer|product|customer|consumer|user|online|app|mobile app|movie|film"
        r"|restaurant|hotel|amazon|yelp|tripadvisor|imdb|book|game|fake|spam|opinion|paper"
        r"|manuscript|conference|security|design|post[- ]?mortem|pull[- ]request|patch|commit"
        r"|e-?commerce|business|open)\s+reviews?\b",
    ),
    ("reviewer", r"\breviewers?\b|\breviewing\b|\bmeta[- ]reviews?\b"),
    ("review-x", r"\breview-\w+"),
    (
        "review as object",
        r"\breviews?\s+(?:texts?|ratings?|helpfulness|spam|generation|generator|summari[sz]ation"
        r"|comments?|scores?|process|processes|assignment|mining|sentiment|data|datasets?|corpus"
        r"|corpora|quality|writing|composition|synthesis|responses?|feedback|requests?|bots?"
        r"|tools?|platforms?|systems?|activities|practices?|effort|outcomes?|decisions?|time"
        r"|participation|coverage|changes?|workload|recommendation|classification|automation"
        r"|screening|forms?)\b",
    ),
    (
        "user reviews",
        r"\b(?:using|from|with|in|on|of|leveraging|exploiting|mining|modeling|modelling)"
        r"\s+(?:\w+\s+)?reviews\b"
        r"|\b(?:recommend\w*|ratings?|sentiment|opinions?|helpful\w*|aspects?)\W+(?:\w+\W+){0,3}?reviews\b"
        r"|\breviews\W+(?:\w+\W+){0,3}?(?:recommend\w*|ratings?|sentiment|opinions?|helpful\w*)",
    ),
    ("survey propagation", r"\bsurvey[- ]propagation\b|\bsurvey[- ]inspired\b|\bsurvey descent\b"),
    (
        "non-literature survey",
        r"\b(?:sky|photometric|spectroscopic|redshift|galaxy|imaging|radio|legacy|census"
        r"|household|national|health|labou?r[- ]force|social|online|web|user|developer"
        r"|practitioner|industry|industrial|questionnaire|telephone|panel|field|site|geological"
        r"|seismic|bathymetric|aerial|land|road|traffic|species|biodiversity|exploratory"
        r"|pilot|follow-up)\s+surveys?\b",
    ),
    (
        "survey of people",
        r"\bsurvey(?:ed|ing|s)?\s+(?:of\s+|with\s+|among\s+|amongst\s+)?(?:the\s+)?"
        rf"(?:{_NUMBER}\s+)?(?:[\w'-]+\s+){{0,2}}?{_PEOPLE}\b",
    ),
    (
        "survey instrument",
        r"\bsurvey\s+(?:data|responses?|respondents|questions?|questionnaires?|instruments?"
        r"|sampling|weights?|participants|design|items?|answers?)\b",
    ),
    (
        "shared-task overview",
        r"(?:^|:\s*)overview of the\s+(?:[\w'-]+\s+){0,8}?(?:shared[- ]tasks?|tracks?|tasks?"
        r"|challenges?|competitions?|labs?|workshops?|evaluation campaigns?|bake-?offs?)\b",
    ),
    (
        "written by a system",
        rf"\b(?:automatic(?:ally)?|automated|automating|automation of|auto)\s+(?:(?:the|scientific|academic|full)\s+)?{_WRITTEN}"
        rf"|\b(?:writ(?:e|es|ing|ten)|generat(?:e|es|ing|ed)|generation of|compos(?:e|es|ing)"
        rf"|draft(?:s|ing)?|produc(?:e|es|ing))\s+(?:(?:a|an|the|full|complete|scientific|academic"
        rf"|comprehensive|high-quality|long|coherent|[\w-]+-like)\s+){{0,3}}{_WRITTEN}"
        rf"|\b{_WRITTEN}\s+(?:generation|generator|writing|composition|synthesis|automation|screening|assistants?)\b"
        rf"|\b(?:generation|generating|writing|synthesis|screening)\s+(?:[\w-]+\s+){{0,2}}?for\s+(?:(?:scientific|systematic|automatic|automated|academic)\s+)?{_WRITTEN}"
        rf"|\b(?:toolkits?|tools?|systems?|frameworks?|assistants?|agents?|pipelines?|platforms?|datasets?"
        rf"|benchmarks?|corpus|models?)\s+for\s+(?:[\w-]+\s+){{0,2}}?{_WRITTEN}"
        rf"|\bautomat\w*\s+(?:the\s+)?(?:creation|writing|generation|production|drafting)\s+of\s+(?:[\w-]+\s+){{0,2}}?{_WRITTEN}",
    ),
)

# (name, pattern), first match wins; run on the masked title.
TITLE_CUES: tuple[tuple[str, str], ...] = (
    ("systematic review", r"\bsystematic (?:literature )?reviews?\b|\bscoping reviews?\b"),
    ("mapping study", r"\b(?:systematic )?mapping stud(?:y|ies)\b"),
    ("meta-analysis", r"\bmeta[- ]?analy(?:sis|ses)\b|\bmeta[- ]stud(?:y|ies)\b"),
    (
        "literature review",
        r"\bliterature (?:reviews?|surveys?)\b|\b(?:survey|review) of (?:the )?literature\b",
    ),
    ("survey", r"\bsurveys?\b"),
    ("review", r"\breviews?\b"),
    ("overview", r"\boverview\b"),
    ("tutorial", r"\btutorials?\b"),
    ("primer", r"\bprimer\b"),
    (
        "state of the art",
        r"\bthe state[- ]of[- ]the[- ]art\b(?!-)(?!\s+[a-z]+(?<!and|in|of|on|for|to)\b)"
        r"|\bstate[- ]of[- ]the[- ]art(?=\s*(?:$|[:;,.?!)]|and\b|in\b|on\b|of\b|for\b))",
    ),
    ("recent advances", r"\brecent (?:advances|advancements|progress|developments|trends)\b"),
    (
        "taxonomy",
        r"\btaxonom(?:y|ies)\b(?!-)(?!\s+(?:induction|expansion|completion|construction|learning"
        r"|generation|enrichment|extraction|alignment|matching|inference|embedding)\b)",
    ),
)

_ADJ = (
    r"(?:(?:comprehensive|systematic|extensive|thorough|broad|detailed|critical|brief|concise"
    r"|structured|up-to-date|in-depth|holistic|unified|exhaustive|rigorous|focused|timely"
    r"|first|novel|new|literature|narrative|scoping|large-scale|multivocal)\s+)*"
)
_VERB = (
    r"(?:present|presents|provide|provides|give|gives|offer|offers|conduct|conducts|conducted"
    r"|perform|performs|performed|carry out|carried out|undertake|undertook|report|write)"
)
# (name, pattern), first match wins; run on the masked abstract.
ABSTRACT_CUES: tuple[tuple[str, str], ...] = (
    ("systematic review", r"\bsystematic (?:literature )?reviews?\b|\bscoping reviews?\b"),
    ("mapping study", r"\b(?:systematic )?mapping stud(?:y|ies)\b"),
    ("meta-analysis", r"\bmeta[- ]?analy(?:sis|ses)\b"),
    ("in this survey", r"\bin this (?:\w+\s+){0,2}?survey\b"),
    ("in this review", r"\bin this (?:\w+\s+){0,2}?review\b"),
    (
        "this paper surveys",
        r"\b(?:this|our|the present) (?:paper|article|work|chapter|manuscript|study|review)"
        r" (?:\w+ly )?(?:surveys|reviews|summari[sz]es the (?:literature|state|research|recent))\b",
    ),
    ("we present a review", rf"\bwe (?:\w+ly )?{_VERB} (?:a|an) {_ADJ}(?:survey|review)\b"),
    (
        "we present an overview",
        r"\bwe (?:\w+ly )?(?:present|provide|give|offer) (?:a|an) (?:comprehensive|systematic"
        r"|extensive|thorough|broad|in-depth|up-to-date|structured|detailed) overview\b",
    ),
    (
        "we survey",
        r"\bwe (?:\w+ly )?survey (?:the |recent |existing |current |state|a wide|a broad|over |more than |\d)",
    ),
    (
        "we review",
        r"\bwe (?:\w+ly )?review (?:the |recent |existing |current |a wide |a broad |over |more than |\d+ )?"
        r"(?:[\w-]+ ){0,3}?(?:literature|advances|progress|works|approaches|methods|techniques|research"
        r"|studies|papers|developments|state of the art|state-of-the-art)\b",
    ),
    ("this survey", r"\bthis (?:\w+\s+){0,2}?survey\b"),
    ("literature review", r"\bliterature (?:reviews?|surveys?)\b"),
)
BARE_SURVEY_CUES = frozenset(
    {"title:survey", "abstract:in this survey", "abstract:this survey", "abstract:we survey"}
)

# A questionnaire study of people: vetoes a bare "survey" cue.
QUESTIONNAIRE = (
    r"\brespondents\b|\bsurvey (?:participants|responses)\b|\bquestionnaire (?:surveys?|study|responses)\b"
    r"|\bwe (?:\w+ly )?(?:conducted|ran|distributed|administered|sent out|deployed|designed)"
    r"\s+(?:a|an)\s+(?:[\w-]+\s+){0,3}?questionnaires?\b"
    rf"|\bsurvey(?:ed|ing)?\s+(?:of\s+|with\s+|among\s+)?(?:{_NUMBER}\s+)(?:[\w'-]+\s+){{0,2}}?{_PEOPLE}\b"
    rf"|\bwe (?:\w+ly )?surveyed\s+(?:{_NUMBER}\s+)?(?:[\w'-]+\s+){{0,2}}?{_PEOPLE}\b"
    rf"|\b(?:online|web|developer|practitioner|industry|industrial)\s+survey\b"
)

# Every cue above contains one of these words; stages use it to skip rows cheaply.
_PREFILTER = (
    r"(?i)survey|review|overview|tutorial|primer|meta[- ]?analy|meta[- ]stud|mapping stud"
    r"|state[- ]of[- ]|recent (advances|advancements|progress|developments|trends)|taxonom"
)


class _Rules:
    def __init__(self, extra_title_cues: tuple[str, ...], extra_exclusions: tuple[str, ...]):
        masks = [p for _, p in MASKS] + list(extra_exclusions)
        self.mask = regex.compile("|".join(f"(?:{p})" for p in masks), _F)
        self.title = [(f"title:{n}", regex.compile(p, _F)) for n, p in TITLE_CUES]
        self.title += [("title:extra", regex.compile(p, _F)) for p in extra_title_cues]
        self.abstract = [(f"abstract:{n}", regex.compile(p, _F)) for n, p in ABSTRACT_CUES]
        self.questionnaire = regex.compile(QUESTIONNAIRE, _F)


@functools.lru_cache(maxsize=8)
def _rules(extra_title_cues: tuple[str, ...], extra_exclusions: tuple[str, ...]) -> _Rules:
    return _Rules(extra_title_cues, extra_exclusions)


def _clean(text: str) -> str:
    return " ".join(text.replace("$", " ").split())


def survey_reason(
    title: str | None, abstract: str | None, cfg: SurveysConfig | None = None
) -> str | None:
    """The cue that makes a paper a literature survey, or None.

    Args:
        title: paper title.
        abstract: paper abstract (ignored when ``cfg.use_abstract_cues`` is false).
        cfg: the ``surveys`` config (defaults when None).

    Returns:
        ``"title:<cue>"`` or ``"abstract:<cue>"`` (see the module docstring), or None.
    """
    cfg = cfg or SurveysConfig()
    rules = _rules(tuple(cfg.extra_title_cues), tuple(cfg.extra_exclusions))
    t = _clean(title or "")
    a = _clean(abstract or "") if cfg.use_abstract_cues else ""
    people = bool(
        rules.questionnaire.search(t) or rules.questionnaire.search(_clean(abstract or ""))
    )
    masked_title = rules.mask.sub(_SEP, t)
    for name, pattern in rules.title:
        if pattern.search(masked_title) and not (people and name in BARE_SURVEY_CUES):
            return name
    if a:
        masked_abstract = rules.mask.sub(_SEP, a)
        for name, pattern in rules.abstract:
            if pattern.search(masked_abstract) and not (people and name in BARE_SURVEY_CUES):
                return name
    return None


def prefilter_pattern(cfg: SurveysConfig | None = None) -> str | None:
    """A Polars regex every title/abstract with a cue matches; None when extra title cues
    are configured (they may match anything, so no row may be skipped)."""
    cfg = cfg or SurveysConfig()
    if cfg.extra_title_cues:
        return None
    return _PREFILTER
