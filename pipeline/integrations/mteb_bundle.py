"""The bundle a pull request to MTEB's repository carries (``make mteb``), written into one
folder laid out as MTEB's repositories hold each file:

* ``mteb/tasks/retrieval/eng/<snake name>.py``: the task classes as MTEB's repository
  holds a task, literal ``TaskMetadata`` and nothing imported but MTEB (the full-corpus
  retrieval task, the re-ranking task, and the lite task when it is built);
* ``mteb/descriptive_stats/<type>/<Task>.json``: MTEB's descriptive statistics of each;
* ``results/<model>/<revision>/<Task>.json``: ``mteb.evaluate``'s results files for the
  reference models (MTEB's random encoder, its ``bm25s`` baseline, all-MiniLM-L6-v2), the
  layout of MTEB's results repository;
* ``checks.json``: MTEB's checks of each task (:func:`pipeline.integrations.mteb.check`);
* ``predictions/<model>/<Task>_predictions.json``: each reference model's ranking of each
  task as ``mteb.evaluate`` saves it (not part of the pull request);
* ``reference_results.md``: nDCG@10 of each model on each task, ``mteb.evaluate``'s beside
  this project's evaluator's for the ranking MTEB scored
  (:mod:`pipeline.integrations.mteb_agreement`: equal to 1e-4, ``agree``), and for
  all-MiniLM-L6-v2 the evaluator's own run of the model (``evaluate
  --sentence-transformer``); the same rows in ``bundle.json`` (``reference``);
* ``PR.md``: the pull request's text (at most 2,000 characters).

With ``--card`` the bundle also writes its reference results into the release's card
(``README.md``), between the markers of :data:`pipeline.hub.card.MTEB_START` and
``MTEB_END`` before its "What is in it" section, and records the card's new size and sha256
in the release's ``_SUCCESS.json`` (what ``push`` checks every file against), under the
release stage's lock. Without ``--card`` the release is not touched. A card rendered again
by ``run`` keeps the section (:func:`pipeline.hub.card.add_results`); a rebuilt release has
none until the bundle writes it again. When a figure disagrees the card is not written and
the command exits 1.

The aspects task stays out of the task file: MTEB reads a task from MTEB configs, and the
release keeps aspects as reading lists (:func:`pipeline.integrations.mteb.load_aspects`
builds them in the project). Its reference results are in the bundle all the same.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pipeline.core.files import atomic_path, write_json
from pipeline.core.release_files import CARD_FILE
from pipeline.integrations import mteb as M
from pipeline.integrations import mteb_agreement as A

PR_LIMIT = 2000
TASK_DIR = Path("mteb/tasks/retrieval/eng")
STATS_DIR = Path("mteb/descriptive_stats")
PREDICTIONS_DIR = Path("predictions")
EVALUATOR_DIR = Path("evaluator")  # the project's evaluator's inputs: the lite's eval folder
_FIELDS = (
    "name", "dataset", "description", "reference", "type", "category", "modalities",
    "eval_splits", "eval_langs", "main_score", "date", "domains", "task_subtypes", "license",
    "annotations_creators", "dialect", "sample_creation", "contributed_by",
)  # fmt: skip
_RETRIEVAL_BODY = """
    def dataset_transform(self, num_proc: int | None = None, **kwargs) -> None:
        # the dataset's top_ranked lists are the re-ranking task's: this task searches the
        # split's whole corpus
        for splits in self.dataset.values():
            for split in splits.values():
                split["top_ranked"] = None
"""


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def task_source(task_list: list[Any]) -> str:
    """The Python file of ``task_list``'s classes as MTEB's repository holds a task."""
    lines = [
        "from __future__ import annotations",
        "",
        "from mteb.abstasks.retrieval import AbsTaskRetrieval",
        "from mteb.abstasks.task_metadata import TaskMetadata",
        "",
    ]
    citation = task_list[0].metadata.bibtex_citation
    lines += ["_CITATION = r'''", citation.strip(), "'''"]
    for task in task_list:
        md = task.metadata
        lines += ["", "", f"class {md.name}(AbsTaskRetrieval):", "    metadata = TaskMetadata("]
        for name in _FIELDS:
            value = getattr(md, name)
            if value is None:
                continue
            value = list(value) if isinstance(value, tuple) and name != "date" else value
            lines.append(f"        {name}={value!r},")
        lines += ["        bibtex_citation=_CITATION,", "    )"]
        if md.type == "Retrieval" and md.dataset["path"] == task_list[0].metadata.dataset["path"]:
            lines.append(_RETRIEVAL_BODY.rstrip("\n"))
    return "\n".join(lines) + "\n"


def pr_text(facts: M.ReleaseFacts, scores: dict[str, dict[str, float]]) -> str:
    """The pull request's text: the gap the dataset fills and the reference nDCG@10."""
    rows = "\n".join(
        f"| {task} | "
        + " | ".join(f"{scores[m].get(task, float('nan')):.3f}" for m in scores)
        + " |"
        for task in sorted({t for s in scores.values() for t in s})
    )
    models = " | ".join(m.rsplit("/", 1)[-1] for m in scores)
    text = (
        f"## Add {facts.task_prefix}: survey reading lists (scientific retrieval)\n\n"
        "MTEB's English scientific retrieval tasks (SCIDOCS, SciFact, LitSearch, DORIS-MAE) "
        "have no task built from surveys, none with graded judgments and mined hard "
        "negatives, none split by date. Here a computer-science survey's title and abstract "
        "is the query; the works it cites are graded 1-4 by where the survey cites them, and "
        "hard negatives are works other surveys of its field cite. Eval surveys are posted "
        f"{facts.date[0]} to {facts.date[1]}, after every training survey.\n\n"
        f"| task | {models} |\n|---|{'---|' * len(scores)}\n{rows}\n\n"
        "nDCG@10 from `mteb.evaluate`; the project's own evaluator gives the same values "
        "for the same rankings (to 1e-4, checked for every cell: `reference_results.md`). "
        "The lite task keeps at most 1,000 surveys "
        "and 250 documents each (judged candidates, then BM25's and a dense model's top). "
        "Descriptive statistics and MTEB's data checks (`checks.json`) are in the bundle.\n"
    )
    if facts.synthetic:
        text += "\nThese numbers are on the synthetic demo release: replace them.\n"
    return text[:PR_LIMIT]


def compare_reference(
    release: str | Path,
    prefix: str,
    task_list: list[Any],
    scores: dict[str, dict[str, float]],
    predictions: Path,
    *,
    lite: Path | None = None,
    scratch: Path,
    own_runs: bool = True,
) -> list[A.Agreement]:
    """For each model and task of ``scores``, the project's evaluator's nDCG@10 of the
    ranking MTEB saved under ``predictions``, on ``release`` (what ``evaluate --release``
    takes) whose task names start with ``prefix``; with ``own_runs``, also the evaluator's
    own run of all-MiniLM-L6-v2 (the ``dense`` extra's copy), its embeddings kept in
    ``scratch``."""
    lite_folder = None if lite is None else A.lite_eval_folder(release, lite, scratch / "lite")
    rows = []
    for model, per_task in scores.items():
        for task in task_list:
            name = task.metadata.name
            kind = name.removeprefix(prefix)
            run = A.prediction_run(
                predictions / M.model_folder_name(model) / task.prediction_file_name
            )
            project = A.project_ndcg(kind, release, run, lite_folder)
            own = None
            if own_runs and model == M.MINILM:
                own = A.project_model_ndcg(
                    kind, release, M.minilm_folder(), scratch / "cache", lite_folder
                )
            rows.append(A.agreement(model, name, per_task[name], project, own))
    return rows


def reference_table(rows: list[A.Agreement]) -> str:
    """The reference results as a Markdown table, one row per model and task."""
    lines = [
        "| model | task | MTEB | project | agree | own run |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        own = "" if row.own_run is None else f"{row.own_run:.5f}"
        agree = "yes" if row.agree else "**NO**"
        lines.append(
            f"| {row.model} | {row.task} | {row.mteb:.5f} | {row.project:.5f} | {agree} | {own} |"
        )
    return "\n".join(lines) + "\n"


def reference_text(rows: list[A.Agreement]) -> str:
    """What the bundle says of its reference results (``reference_results.md``, the card)."""
    return (
        f"nDCG@10 on split `{M.SPLIT}`. **MTEB**: `mteb.evaluate`, as in its results files. "
        "**project**: this project's evaluator (`python -m pipeline evaluate`, re-ranking "
        "mode for the re-ranking tasks, retrieval mode for the retrieval ones, `--task "
        "aspects` for the aspects) on the very ranking MTEB scored (its saved predictions, "
        f"equal scores in pytrec_eval's order); **agree**: within {A.TOLERANCE:g}. "
        "**own run**: the evaluator running the model itself (`evaluate "
        "--sentence-transformer`, retrieval: its top 1,000 of the corpus).\n\n"
        + reference_table(rows)
    )


def card_section(rows: list[A.Agreement]) -> str:
    """The release card's section of the reference results (between the card's markers)."""
    return (
        "### The benchmark as MTEB tasks\n\n"
        "`pipeline.integrations.mteb.tasks(release)` reads this release as MTEB tasks; the "
        "upstream bundle (`python -m pipeline.integrations.mteb_bundle`) scored MTEB's "
        "reference models on them.\n\n" + reference_text(rows)
    )


def write_card(release: str | Path, body: str) -> Path:
    """Set the reference-results section of the card of a work directory's release folder
    (``<out>/release``) to ``body`` and record the card's size and sha256 in the release's
    ``_SUCCESS.json``, under the release stage's lock; returns the card's path.

    Raises:
        MtebError: ``release`` is not a work directory's finished release folder.
    """
    from pipeline.engine import locks
    from pipeline.engine import workdir as W
    from pipeline.hub.card import with_mteb_section

    folder = Path(release)
    if folder.name != W.RELEASE or not folder.is_dir() or W.release_records(folder) is None:
        raise M.MtebError(
            f"--card: {release} is not a work directory's release folder (<out>/release with "
            f"its {W.SUCCESS}); the card is written only where its record can be kept"
        )
    out = folder.parent
    with locks.stage_lock(out, W.RELEASE):
        try:
            text = (folder / CARD_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise M.MtebError(
                f"--card: cannot read the card {folder / CARD_FILE} as UTF-8 text "
                f"({type(e).__name__}); it is left as it is"
            ) from None
        W.replace_release_file(out, CARD_FILE, with_mteb_section(text, body).encode("utf-8"))
    return folder / CARD_FILE


def write_bundle(
    release: str | Path,
    out: str | Path,
    *,
    revision: str | None = None,
    lite: str | Path | None = None,
    models: tuple[str, ...] = M.REFERENCE_MODELS,
    own_runs: bool = True,
    card: bool = False,
) -> dict[str, Any]:
    """Write the upstream bundle of ``release`` into ``out`` (see the module); ``lite``: a
    folder :func:`pipeline.integrations.mteb_lite.build_lite` wrote, whose task joins;
    ``own_runs``: also the evaluator's own run of all-MiniLM-L6-v2; ``card``: write the
    reference results into the release's card (:func:`write_card`) when every figure agrees."""
    out = Path(out)
    facts = M.release_facts(release, revision)
    upstream = M.tasks(release, revision, kinds=(M.RETRIEVAL, M.RERANKING))
    if lite is not None:
        from pipeline.integrations.mteb_lite import lite_task

        upstream.append(lite_task(release, lite, revision))
    everything = upstream + M.tasks(release, revision, kinds=(M.ASPECTS,))
    task_file = out / TASK_DIR / f"{snake(facts.task_prefix)}.py"
    with atomic_path(task_file) as tmp:
        tmp.write_text(task_source(upstream), encoding="utf-8")
    checks = {}
    for task in everything:
        report = M.check(task)
        checks[task.metadata.name] = report.as_dict()
        stats = {M.SPLIT: report.statistics}
        write_json(out / STATS_DIR / task.metadata.type / f"{task.metadata.name}.json", stats)
    write_json(out / "checks.json", checks)
    predictions = out / PREDICTIONS_DIR
    scores = M.evaluate_reference(everything, out, models=models, predictions=predictions)
    # evaluate --release reads a Hub release at a revision as OWNER/NAME@REVISION
    evaluated = facts.path if revision is None else f"{release}@{revision}"
    rows = compare_reference(
        evaluated, facts.task_prefix, everything, scores, predictions,
        lite=None if lite is None else Path(lite), scratch=out / EVALUATOR_DIR,
        own_runs=own_runs,
    )  # fmt: skip
    with atomic_path(out / "reference_results.md") as tmp:
        tmp.write_text(reference_text(rows), encoding="utf-8")
    with atomic_path(out / "PR.md") as tmp:
        tmp.write_text(pr_text(facts, scores), encoding="utf-8")
    agree = all(row.agree for row in rows)
    summary = {
        "task_file": str(task_file), "scores": scores,
        "checks_passed": {name: report["passed"] for name, report in checks.items()},
        "reference": [row.as_dict() for row in rows], "agree": agree, "card": None,
    }  # fmt: skip
    if card and agree:
        summary["card"] = str(write_card(release, card_section(rows)))
    write_json(out / "bundle.json", summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.integrations.mteb_bundle")
    parser.add_argument("--release", required=True, help="release folder or Hub dataset repo id")
    parser.add_argument("--out", required=True, help="the bundle's folder")
    parser.add_argument("--revision", default=None, help="the Hub revision of the release")
    parser.add_argument("--no-lite", action="store_true", help="leave the lite task out")
    parser.add_argument(
        "--no-own-run", action="store_true",
        help="skip the evaluator's own run of all-MiniLM-L6-v2 (evaluate --sentence-transformer)",
    )  # fmt: skip
    parser.add_argument(
        "--card", action="store_true",
        help="write the reference results into the release's card (README.md of a work "
        "directory's release folder) and its record in _SUCCESS.json",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        lite = None
        if not args.no_lite:
            from pipeline.integrations.mteb_lite import build_lite

            lite = Path(args.out) / "lite"
            manifest = build_lite(args.release, lite)
            print(f"lite: {manifest.surveys:,} surveys, {manifest.documents:,} documents ({manifest.seconds} s)")  # fmt: skip
        summary = write_bundle(
            args.release, args.out, revision=args.revision, lite=lite,
            own_runs=not args.no_own_run, card=args.card,
        )  # fmt: skip
    except M.MtebError as e:
        print(f"mteb_bundle: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    for row in summary["reference"]:
        if not row["agree"]:
            print(
                f"mteb_bundle: {row['model']} on {row['task']}: MTEB's nDCG@10 {row['mteb']:.5f}, "
                f"the project's {row['project']:.5f} for the same ranking",
                file=sys.stderr,
            )
    if args.card and not summary["agree"]:
        print("mteb_bundle: the card is not written: a figure disagrees", file=sys.stderr)
    return 0 if all(summary["checks_passed"].values()) and summary["agree"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
