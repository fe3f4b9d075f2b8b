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
* ``reference_results.md``: nDCG@10 of each model on each task;
* ``PR.md``: the pull request's text (at most 2,000 characters).

The aspects task stays out of the task file: MTEB reads a task from MTEB configs, and the
release keeps aspects as reading lists (:func:`pipeline.integrations.mteb.load_aspects`
builds them in the project). Its reference results are in the bundle all the same.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from pipeline.core.files import atomic_path, write_json
from pipeline.integrations import mteb as M

PR_LIMIT = 2000
TASK_DIR = Path("mteb/tasks/retrieval/eng")
STATS_DIR = Path("mteb/descriptive_stats")
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
        "nDCG@10 from `mteb.evaluate`; for all-MiniLM-L6-v2 the project's own evaluator "
        "gives the same values (to 1e-4, tested). The lite task keeps at most 1,000 surveys "
        "and 250 documents each (judged candidates, then BM25's and a dense model's top). "
        "Descriptive statistics and MTEB's data checks (`checks.json`) are in the bundle.\n"
    )
    if facts.synthetic:
        text += "\nThese numbers are on the synthetic demo release: replace them.\n"
    return text[:PR_LIMIT]


def write_bundle(
    release: str | Path,
    out: str | Path,
    *,
    revision: str | None = None,
    lite: str | Path | None = None,
    models: tuple[str, ...] = M.REFERENCE_MODELS,
) -> dict[str, Any]:
    """Write the upstream bundle of ``release`` into ``out`` (see the module); ``lite``: a
    folder :func:`pipeline.integrations.mteb_lite.build_lite` wrote, whose task joins."""
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
    scores = M.evaluate_reference(everything, out, models=models)
    table = "| model | " + " | ".join(t.metadata.name for t in everything) + " |\n"
    table += "|---|" + "---|" * len(everything) + "\n"
    for model, per_task in scores.items():
        cells = " | ".join(f"{per_task[t.metadata.name]:.5f}" for t in everything)
        table += f"| {model} | {cells} |\n"
    with atomic_path(out / "reference_results.md") as tmp:
        tmp.write_text(f"nDCG@10, split `{M.SPLIT}`, `mteb.evaluate`\n\n{table}", encoding="utf-8")
    with atomic_path(out / "PR.md") as tmp:
        tmp.write_text(pr_text(facts, scores), encoding="utf-8")
    summary = {"task_file": str(task_file), "scores": scores, "checks_passed": {
        name: report["passed"] for name, report in checks.items()}}  # fmt: skip
    write_json(out / "bundle.json", summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.integrations.mteb_bundle")
    parser.add_argument("--release", required=True, help="release folder or Hub dataset repo id")
    parser.add_argument("--out", required=True, help="the bundle's folder")
    parser.add_argument("--revision", default=None, help="the Hub revision of the release")
    parser.add_argument("--no-lite", action="store_true", help="leave the lite task out")
    args = parser.parse_args(argv)
    lite = None
    if not args.no_lite:
        from pipeline.integrations.mteb_lite import build_lite

        lite = Path(args.out) / "lite"
        manifest = build_lite(args.release, lite)
        print(f"lite: {manifest.surveys:,} surveys, {manifest.documents:,} documents ({manifest.seconds} s)")  # fmt: skip
    summary = write_bundle(args.release, args.out, revision=args.revision, lite=lite)
    print(json.dumps(summary, indent=2))
    return 0 if all(summary["checks_passed"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
