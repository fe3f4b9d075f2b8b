"""Which papers are literature surveys: cue phrases in the title and abstract.

One public decision function, :func:`survey_reason`. It works in three steps:

1. **Mask** the senses of "review"/"survey"/"overview" that are not a literature
   survey (:data:`MASKS`): code review, peer review, reviewers, product/user/app
   reviews, review-based recommendation, survey propagation, sky surveys,
   questionnaire surveys of people ("online survey", "we surveyed 300
   developers"), shared-task overviews, and systems that *write* surveys or
   reviews ("automatic literature review generation", "LLMs can write surveys",
   "a toolkit for literature review", "to help researchers conduct a systematic
   review"). Masked text is replaced by a separator, so
   a cue left elsewhere still counts: "Modern Code Review: A Survey" is a survey
   (of code review), "Automating Code Review Activities" is not.
2. **Title cues** (:data:`TITLE_CUES`, first match wins): systematic review,
   mapping study, meta-analysis (not "meta-analysis with/via/methods"), literature
   review, survey, review, overview, tutorial, primer, "the state of the art" (as a
   noun, not the adjective in "State-of-the-Art Natural Language Processing"),
   "recent advances/trends", taxonomy (not "taxonomy expansion/induction/...", and not
   a taxonomy of artefacts built by an empirical study, :data:`TAXONOMY_OF_ARTEFACTS`:
   "Taxonomy of Real Faults in Deep Learning Systems"), "Foundations and Trends in"
   (a series of survey monographs).
3. **Abstract cues** (:data:`ABSTRACT_CUES`, when ``surveys.use_abstract_cues``), on
   the whitespace-collapsed abstract. *Strong* cues describe the paper itself as a
   survey and always count: "in this survey/review" (the noun, not "in this paper we
   review"), "this paper surveys", "this article provides a comprehensive review",
   "we present a comprehensive review/overview", "we survey the ...", "this survey",
   "we conducted a systematic literature review", "a meta-analysis of the literature",
   "we provide a comprehensive introduction to".
   *Weak* cues also occur in passing in papers that propose their own method ("in
   this paper we review recent advances ... and propose a new method", "based on a
   literature review, we propose a framework", "we present a brief review of ...",
   a bare mention of "systematic reviews", "this paper provides an overview of",
   "a systematic set of open problems"), so they count only when the abstract
   makes no contribution claim (:data:`CONTRIBUTION`: "we propose/present/introduce a
   (new/novel) method|model|framework|approach|algorithm|system|dataset|benchmark|...",
   "we propose X, a novel ...", "our method outperforms", "outperforms the
   state of the art", "achieves state-of-the-art"). A framework "to categorize/unify/
   describe" existing work and a taxonomy are a survey's own, not claims.

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

from pipeline.core.config import SurveysConfig

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
        r"|screening|forms?|reading|comprehension)\b",
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
        rf"|\b(?:generation|generating|writing|synthesis|screening)\s+(?:[\w-]+\s+){{0,2}}?(?:for|in|of)\s+(?:(?:scientific|systematic|automatic|automated|academic)\s+)?{_WRITTEN}"
        rf"|\b(?:toolkits?|tools?|systems?|frameworks?|assistants?|agents?|pipelines?|platforms?|datasets?"
        rf"|benchmarks?|corpus|models?)\s+for\s+(?:[\w-]+\s+){{0,3}}?{_WRITTEN}"
        rf"|\b(?:help|helps|helping|support|supports|supporting|assist|assists|assisting|aid|aids"
        rf"|facilitate|facilitates|accelerate|accelerates|speed up|speeds up|streamline|streamlines)"
        rf"\s+(?:[\w-]+\s+){{0,3}}?(?:conduct|perform|write|carry out|complete)\w*\s+"
        rf"(?:(?:a|an|the|their)\s+)?(?:{_WRITTEN}|meta[- ]?analy(?:sis|ses))\b"
        rf"|\bautomat\w*\s+(?:the\s+)?(?:creation|writing|generation|production|drafting)\s+of\s+(?:[\w-]+\s+){{0,2}}?{_WRITTEN}",
    ),
)

# (name, pattern), first match wins; run on the masked title.
TITLE_CUES: tuple[tuple[str, str], ...] = (
    ("systematic review", r"\bsystematic (?:literature )?reviews?\b|\bscoping reviews?\b"),
    ("mapping study", r"\b(?:systematic )?mapping stud(?:y|ies)\b"),
    (
        "meta-analysis",
        r"\bmeta[- ]?analy(?:sis|ses)\b(?!\s+(?:with|via|using|methods?|models?|estimators?"
        r"|frameworks?|algorithms?)\b)|\bmeta[- ]stud(?:y|ies)\b",
    ),
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
    # "Foundations and Trends in ..." is the name of a series of survey monographs
    ("series", r"\bfoundations and trends\b"),
)

# A taxonomy of artefacts (faults, bugs, failures) built by an empirical study is not a
# literature survey: "Taxonomy of Real Faults in Deep Learning Systems" classifies 1,059
# commits, issues and posts. Vetoes a "title:taxonomy" cue (title or abstract).
TAXONOMY_OF_ARTEFACTS = (
    r"\btaxonom(?:y|ies) of (?:(?:real|real-world|common|software|[\w-]+) ){0,2}?(?:faults|bugs|defects"
    r"|errors|failures|crashes|incidents|misconfigurations|code smells|smells|flaky tests)\b"
    r"|\b(?:manually |we )?(?:analy[sz]ed|inspected|labell?ed|examined|collected|mined) "
    r"(?:\d[\d,]*|over \d[\d,]*|more than \d[\d,]*) (?:[\w-]+ ){0,3}?(?:artefacts|artifacts|commits"
    r"|issues|bug reports|posts|questions|repositories|projects|apps|incidents|failures|faults|bugs)\b"
)

_ADJ = (
    r"(?:(?:comprehensive|systematic|extensive|thorough|broad|detailed|critical|brief|concise"
    r"|structured|up-to-date|in-depth|holistic|unified|exhaustive|rigorous|focused|timely"
    r"|first|novel|new|literature|narrative|scoping|large-scale|multivocal|conceptual|general"
    r"|short|selective|gentle)\s+)*"
)
# Adjectives that make "a review/overview" a survey's own description of itself.
_STRONG_ADJ = (
    r"(?:comprehensive|systematic|extensive|thorough|exhaustive|in-depth|broad|up-to-date"
    r"|holistic|critical|literature|narrative|scoping|multivocal|large-scale)"
)
_ADV = r"(?:(?:\w+ly|then|also|first|further|finally|next|here|now|thus|therefore|hence) )?"
_VERB = (
    r"(?:present|presents|provide|provides|give|gives|offer|offers|conduct|conducts|conducted"
    r"|perform|performs|performed|carry out|carried out|undertake|undertook|report|write)"
)
_SHOW = r"(?:present|presents|provide|provides|give|gives|offer|offers)"
_DOC = r"(?:paper|article|work|chapter|manuscript|report|study|review|survey|tutorial)"
# What a survey walks through: "we review recent advances in ...", "an overview of existing methods".
_BODY = (
    r"(?:literature|advances|advancements|progress|works|approaches|methods|techniques|research"
    r"|studies|papers|developments|findings|efforts|solutions|models|algorithms|architectures"
    r"|applications|state of the art|state-of-the-art)"
)
_SCOPE = (
    r"(?:current|existing|recent|prior|previous|the state|main|major|key|representative|popular"
    r"|various|different|available|most|many|related|relevant|emerging|classical)"
)
_SR = r"(?:systematic (?:literature )?reviews?|scoping reviews?|SLRs?)"
_MS = r"(?:(?:systematic )?mapping stud(?:y|ies))"
# (name, pattern, strong), first match wins; run on the masked abstract. A weak cue
# ("we review recent advances", "in this paper we review", "based on a literature review")
# also appears in papers that propose their own method, so it counts only when the
# abstract claims no contribution of its own (CONTRIBUTION); a strong cue always counts.
ABSTRACT_CUES: tuple[tuple[str, str, bool], ...] = (
    # "we conducted a systematic literature review", "this mapping study", "an SLR of 80
    # papers" describe the paper itself; a bare mention may be the domain of a screening tool
    (
        "systematic review",
        rf"\b(?:we|this|our|the present) {_ADV}(?:{_VERB} )?(?:(?:a|an|the) )?{_ADJ}{_SR}\b"
        rf"|\b{_SR} (?:of|on|covering|including|analy[sz]ing) (?:\w+ )?(?:\d|over |more than )",
        True,
    ),
    (
        "mapping study",
        rf"\b(?:we|this|our|the present) {_ADV}(?:{_VERB} )?(?:(?:a|an|the) )?{_ADJ}{_MS}\b"
        rf"|\b{_MS} (?:of|on|covering|including|analy[sz]ing) (?:\w+ )?(?:\d|over |more than )",
        True,
    ),
    ("systematic review", rf"\b{_SR}\b", False),
    ("mapping study", rf"\b{_MS}\b", False),
    (
        "meta-analysis",
        r"\bmeta[- ]?analy(?:sis|ses)\s+(?:of|on)\s+(?:the\s+)?(?:[\w-]+\s+){0,2}?"
        r"(?:literature|\d[\d,]*\s+(?:[\w-]+\s+)?(?:papers|studies|articles|publications))\b",
        True,
    ),
    ("meta-analysis", r"\bmeta[- ]?analy(?:sis|ses)\b", False),
    # the noun, not "in this paper we review/survey ..." (that is "we review"/"we survey")
    (
        "in this survey",
        r"\bin this (?:(?!(?:paper|work|article|chapter|study|report|thesis|manuscript|we)\b)"
        r"[\w-]+\s+){0,2}?survey\b",
        True,
    ),
    (
        "in this review",
        r"\bin this (?:(?!(?:paper|work|article|chapter|study|report|thesis|manuscript|we)\b)"
        r"[\w-]+\s+){0,2}?review\b",
        True,
    ),
    (
        "this paper surveys",
        rf"\b(?:this|our|the present) {_DOC} (?:\w+ly )?surveys\b"
        rf"|\b(?:this|our|the present) (?:paper|article|work|chapter|manuscript|report) {_ADV}"
        rf"{_SHOW} (?:a|an) {_ADJ}survey\b"
        rf"|\b(?:this|our|the present) (?:paper|article|work|chapter|manuscript|report) {_ADV}"
        rf"{_SHOW} (?:a|an) {_ADJ}{_STRONG_ADJ} (?:{_ADJ})?(?:review|overview)\b",
        True,
    ),
    (
        "this paper surveys",
        rf"\b(?:this|our|the present) {_DOC} (?:\w+ly )?(?:reviews|summari[sz]es the (?:literature"
        rf"|state|research|recent))\b"
        rf"|\b(?:this|our|the present) (?:paper|article|work|chapter|manuscript|report) {_ADV}"
        rf"{_SHOW} (?:a|an) {_ADJ}review\b"
        rf"|\b(?:this|the present) (?:paper|article|chapter|report) (?:\w+ly )?(?:discusses"
        rf"|summari[sz]es|reviews|presents|describes) (?:the )?(?:most )?recent (?:advances"
        rf"|advancements|progress|developments|trends)\b"
        rf"|\b(?:purpose|aim|goal|objective) of this (?:paper|article|chapter|work) is to"
        rf" (?:\w+ )?(?:overview|review|survey)\b",
        False,
    ),
    (
        "we present a review",
        rf"\bwe {_ADV}{_VERB} (?:a|an) {_ADJ}{_STRONG_ADJ} (?:{_ADJ})?(?:survey|review)\b",
        True,
    ),
    ("we present a review", rf"\bwe {_ADV}{_VERB} (?:a|an) {_ADJ}(?:survey|review)\b", False),
    (
        "we present an overview",
        rf"\bwe {_ADV}{_VERB} (?:a|an) {_ADJ}{_STRONG_ADJ} (?:{_ADJ})?overview\b"
        r"(?! of (?:the |our )?(?:proposed|our|this)\b)",
        True,
    ),
    (
        "we present an overview",
        rf"\b(?:provide|provides|providing|present|presents|presenting|give|gives|giving|offer"
        rf"|offers|offering) (?:a|an) {_ADJ}(?:overview|review|survey) of (?:the )?{_SCOPE}\b",
        False,
    ),
    (
        "we survey",
        rf"\bwe {_ADV}survey (?:the |recent |existing |current |prior |previous |state|a wide"
        r"|a broad|over |more than |\d)",
        True,
    ),
    (
        "we review",
        rf"\bwe {_ADV}review (?:the |recent |existing |current |prior |previous |a wide |a broad"
        rf" |over |more than |\d+ )?(?:[\w-]+ ){{0,3}}?{_BODY}\b",
        False,
    ),
    (
        "this survey",
        r"\bthis (?:(?!(?:paper|work|article|chapter|study|report|thesis|manuscript|we)\b)"
        r"[\w-]+\s+){0,2}?survey\b",
        True,
    ),
    ("literature review", r"\bliterature (?:reviews?|surveys?)\b", False),
    # surveys whose title has no cue word: "In this paper we provide a comprehensive
    # introduction to knowledge graphs" (2003.02320), "this paper provides an overview of
    # the computational and theoretical foundations of multimodal machine learning"
    # (2209.03430), "this paper aims to establish a systematic set of open problems and
    # application successes" (2307.10169)
    (
        "introduction to",
        rf"\b{_SHOW} (?:a|an) {_ADJ}(?:comprehensive|thorough|extensive|broad|self-contained"
        rf"|gentle|accessible|in-depth) (?:{_ADJ})?(?:introduction|tutorial introduction) to\b",
        True,
    ),
    (
        "this paper gives an overview",
        rf"\b(?:this|our|the present) (?:paper|article|work|chapter|monograph|report) {_ADV}"
        rf"(?:provides|presents|gives|offers) (?:a|an) {_ADJ}overview of\b",
        False,
    ),
    (
        "open problems",
        r"\b(?:systematic|comprehensive|structured) (?:set|list|catalog(?:ue)?|account|map)"
        r" of (?:the (?:field's |most )?)?open (?:problems|challenges|questions)\b",
        False,
    ),
)
BARE_SURVEY_CUES = frozenset(
    {"title:survey", "abstract:in this survey", "abstract:this survey", "abstract:we survey"}
)

# What a paper that proposes its own method says about itself; vetoes a weak abstract cue.
_CLAIM = (
    r"(?:methods?|models?|frameworks?|approach(?:es)?|algorithms?|systems?|datasets?|benchmarks?"
    r"|architectures?|techniques?|networks?|toolkits?|tools?|library|libraries|corpus|corpora"
    r"|metrics?|loss(?:es)?|pipelines?|paradigms?|strategy|strategies)"
)
# words between "we propose a" and the noun: not a survey's own object ("a review of ... models")
_MODIFIERS = (
    r"(?:(?!(?:of|on|for|in|to|from|with|and|review|survey|overview|taxonomy|categori[sz]ation"
    r"|classification|perspective|summary)\b)[\w-]+,?\s+){0,4}?"
)
# "we propose a unified framework to categorize existing methods" is a survey's own framework
_NOT_A_CLAIM = (
    r"(?!\s+(?:to|for|that|which|under which|in which|with which)\s+(?:[\w-]+\s+){0,2}?"
    r"(?:categori|classif|organi|systemati|structur|unif|understand|compar|analy|describ|review"
    r"|survey|summari|taxonom|characteri|position|situate|relate))"
)
_MAKE = (
    r"(?:propose[sd]?|present(?:s|ed)?|introduce[sd]?|develop(?:s|ed)?|design(?:s|ed)?|devise[sd]?"
    r"|build|builds|built|construct(?:s|ed)?|release[sd]?|contribute[sd]?|create[sd]?"
    r"|implement(?:s|ed)?)"
)
CONTRIBUTION = (
    rf"\b(?:we|this (?:paper|work|article)|the (?:paper|work)) {_ADV}{_MAKE}\s+(?:a|an|our|two|three"
    rf"|several|the first|the proposed)\s+{_MODIFIERS}{_CLAIM}\b{_NOT_A_CLAIM}"
    rf"|\bwe {_ADV}{_MAKE}\s+[\w-]+"
    rf"(?:\s+\([\w-]+\))?,\s+(?:a|an)\s+{_MODIFIERS}{_CLAIM}\b{_NOT_A_CLAIM}"
    rf"|\b{_MAKE}\s+(?:a|an|the first)\s+(?:novel|new)\s+{_MODIFIERS}{_CLAIM}\b{_NOT_A_CLAIM}"
    rf"|\b(?:our|the proposed|our proposed|the resulting)\s+(?:[\w-]+\s+){{0,3}}?{_CLAIM}"
    r"\s+(?:\w+ly\s+)?(?:outperforms?|outperformed|achieves?|achieved|surpass(?:es|ed)?|beats?"
    r"|improves?|improved|yields?|sets?)\b"
    r"|\b(?:outperforms|outperforming|surpasses|surpassing|beats|beating)\s+(?:\w+\s+){0,4}?"
    r"(?:state[- ]of[- ]the[- ]art|sota|baselines?|existing|previous|prior|competing|strong)\b"
    r"|\b(?:achieves|sets|establishes)\s+(?:a\s+)?(?:new\s+)?(?:state[- ]of[- ]the[- ]art|sota)\b"
    r"|\bnew state[- ]of[- ]the[- ]art\b"
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
    r"|\bSLRs?\b|introduction to|overview of|open problems|open challenges|open questions"
    r"|foundations and trends"
)


class _Rules:
    def __init__(self, extra_title_cues: tuple[str, ...], extra_exclusions: tuple[str, ...]):
        masks = [p for _, p in MASKS] + list(extra_exclusions)
        self.mask = regex.compile("|".join(f"(?:{p})" for p in masks), _F)
        self.title = [(f"title:{n}", regex.compile(p, _F)) for n, p in TITLE_CUES]
        self.title += [("title:extra", regex.compile(p, _F)) for p in extra_title_cues]
        self.abstract = [
            (f"abstract:{n}", regex.compile(p, _F), strong) for n, p, strong in ABSTRACT_CUES
        ]
        self.questionnaire = regex.compile(QUESTIONNAIRE, _F)
        self.contribution = regex.compile(CONTRIBUTION, _F)
        self.artefacts = regex.compile(TAXONOMY_OF_ARTEFACTS, _F)


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
            if name == "title:taxonomy" and (
                rules.artefacts.search(t) or rules.artefacts.search(_clean(abstract or ""))
            ):
                continue
            return name
    if a:
        masked_abstract = rules.mask.sub(_SEP, a)
        claims = None  # whether the abstract claims a method of its own, computed when needed
        for name, pattern, strong in rules.abstract:
            if not pattern.search(masked_abstract) or (people and name in BARE_SURVEY_CUES):
                continue
            if not strong:
                if claims is None:
                    claims = bool(rules.contribution.search(a))
                if claims:
                    continue
            return name
    return None


def prefilter_pattern(cfg: SurveysConfig | None = None) -> str | None:
    """A Polars regex every title/abstract with a cue matches; None when extra title cues
    are configured (they may match anything, so no row may be skipped)."""
    cfg = cfg or SurveysConfig()
    if cfg.extra_title_cues:
        return None
    return _PREFILTER
