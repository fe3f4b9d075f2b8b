"""Every command and Python snippet README.md and docs/*.md tell a user to run, run as
written on the demo release, in a folder laid out as the docs assume (a checkout with
``demo_out/``, ``work/``, ``corpus/``, ``my.toml`` and the run files they name).

What is extracted: every line of a fenced ``bash`` block, every fenced ``python`` block,
and the inline code spans that are a ``python -m pipeline ...`` command or a
``load_dataset(...)`` call. A new doc or a new command is covered without a change here.

What is substituted, because a doc writes a placeholder where a user writes their own:
``python`` and ``.venv/bin/python`` are this interpreter; optional parts ``[...]`` are
included; ``OWNER``, ``NAME``, ``DIR``, ``BRANCH``, ``TEXT``, ``path/to/...`` and ``...``
name things the sandbox holds (:data:`PLACEHOLDERS`). Nothing reaches the network: the
Hub endpoint is a closed local port and the Hub clients are offline, so a command that
needs the Hub runs with its ``--dry-run`` or is marked in its doc as not run, with the
reason, by a comment ``<!-- not run by the docs test: `REGEX` REASON -->`` (the regular
expression is searched for in each command of that doc).

Each must exit as the doc says: 0, except a command the demo release makes refuse, as
the README says it does (:data:`REFUSED`: ``push`` of a synthetic release).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
NOT_RUN = re.compile(r"<!-- not run by the docs test: `([^`]+)` ([^>]+?) -->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`((?:python -m pipeline|load_dataset\()[^`]*)`")
# placeholder -> what the sandbox holds, longest first
PLACEHOLDERS = (
    ("OWNER/NAME", "someone/survey-reading-lists"),
    ("--namespace OWNER", "--namespace someone"),
    ("path/to/folder-with-the-parts", "corpus"),
    ("path/to/model", "tiny-model"),
    ("--input ...", "--input corpus"),
    ("BRANCH", "main"),
    ("TEXT", "docs-test"),
    ("DIR", "out_dir"),
    ("NAME", "mine"),
)
# a command the demo release makes refuse, as the docs say it does, and its message
REFUSED = {"push": "synthetic"}
TIMEOUT = 600


@dataclass(frozen=True)
class Documented:
    """One command or snippet: where it is, its kind (``shell`` or ``python``) and text."""

    where: str
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text.splitlines()[0][:90]}"


def documented() -> tuple[list[Documented], list[tuple[Documented, str]]]:
    """Every command and snippet of the docs, and those their docs mark as not run."""
    found: list[Documented] = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        for match in FENCE.finditer(text):
            lang, body = match.group(1), match.group(2)
            line = text[: match.start()].count("\n") + 1
            if lang == "bash":
                for i, command in enumerate(body.splitlines(), start=1):
                    command = re.sub(r"\s+#.*$", "", command).strip()
                    if command and not command.startswith("#"):
                        found.append(Documented(f"{name}:{line + i}", "shell", command))
            elif lang == "python":
                found.append(Documented(f"{name}:{line + 1}", "python", body))
        prose = FENCE.sub("", text)
        for match in INLINE.finditer(prose):
            span = " ".join(match.group(1).split())
            kind = "shell" if span.startswith("python") else "python"
            if kind == "python":
                span = f"from datasets import load_dataset\n\nprint({span})\n"
            found.append(Documented(f"{name} (inline)", kind, span))
    marks = [
        (path.relative_to(ROOT).as_posix(), pattern, reason.strip())
        for path in DOC_FILES
        for pattern, reason in NOT_RUN.findall(path.read_text(encoding="utf-8"))
    ]
    run, skipped = [], []
    for item in found:
        reason = next(
            (r for doc, p, r in marks if item.where.startswith(doc) and re.search(p, item.text)),
            None,
        )
        if reason is None:
            run.append(item)
        else:
            skipped.append((item, reason))
    return run, skipped


def _argv(command: str) -> list[str]:
    for placeholder, value in PLACEHOLDERS:
        command = re.sub(rf"(?<![\w/.-]){re.escape(placeholder)}(?![\w/.-])", value, command)
    words = [w for w in shlex.split(command.replace("[", " ").replace("]", " ")) if w != "..."]
    if words[0] in ("python", ".venv/bin/python"):
        words[0] = sys.executable
    return words


# ----------------------------------------------------------------- the sandbox
ENCODER_MODULE = '''
"""The user's models the docs name: my_pkg.models:encode and my_pkg.models:score."""
from pipeline.evaluate.examples import hashed_words, word_overlap


def encode(texts):
    return hashed_words(texts)


def score(query, texts):
    return word_overlap(query, texts)
'''


def _score(query: str, doc: str) -> float:
    digest = hashlib.blake2b(f"{query}\0{doc}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") / 2**32


def _write_run(path: Path, pairs: list[tuple[str, str]]) -> None:
    lines = [f"{q} Q0 {d} 0 {_score(q, d):.9f} docs" for q, d in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _tiny_model(folder: Path) -> None:
    """A local sentence-transformers model folder (static embeddings, no download)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tokenizer = Tokenizer(WordLevel({"[UNK]": 0, "survey": 1, "learning": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_dim=8)]).save(str(folder))


def _write_passage_run(path: Path, release: Path, surveys: list[str]) -> None:
    """A run over the passage corpus of ``export --passages``: every section's passage
    (``<doc>#<order>``) and every other document's ``<doc>#abstract``, for every eval survey."""
    sections = pl.read_parquet(release / "corpus_sections" / "test.parquet")
    ids = [f"{doc}#{order}" for doc, order in sections.select("corpus-id", "section_order").rows()]
    with_text = set(sections["corpus-id"].to_list())
    corpus = pl.read_parquet(release / "corpus" / "test.parquet")["_id"].to_list()
    ids += [f"{doc}#abstract" for doc in corpus if doc not in with_text]
    _write_run(path, [(q, p) for q in surveys for p in ids])


def _write_bibliography(path: Path, release: Path) -> None:
    """A generated survey's bibliography as evaluating one would: the titles of the first
    eval survey's listed works, in list order, and a reference to no known work."""
    import json

    rows = pl.read_parquet(release / "eval_survey_reading_lists.parquet")
    first = rows.filter(pl.col("survey_id") == rows["survey_id"].min())
    titles = first.filter(pl.col("label") >= 1).sort("label", descending=True)["candidate_title"]
    refs = [*titles.to_list(), "A. Nobody. An invented work. Journal of Nothing, 2031."]
    line = {"survey_id": first["survey_id"][0], "references": refs}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout as the docs assume it: the demo built, its work directory as ``work``."""
    home = tmp_path_factory.mktemp("user")
    fast = Config(evaluate=EvaluateConfig(bootstrap_samples=50, random_seeds=2))
    api.demo(home / "demo_out", workers=1, config=fast)
    (home / "work").symlink_to("demo_out")
    (home / "corpus").symlink_to("demo_out/corpus")
    (home / "constraints.txt").symlink_to(ROOT / "constraints.txt")
    (home / "my.toml").write_text(
        "[release]\nrepo_id = 'someone/survey-reading-lists'\nauthors = ['Doe, Jane']\n"
        "year = 2026\n\n[evaluate]\nbootstrap_samples = 50\nrandom_seeds = 2\n",
        encoding="utf-8",
    )
    (home / "my_pkg").mkdir()
    (home / "my_pkg" / "__init__.py").write_text("")
    (home / "my_pkg" / "models.py").write_text(ENCODER_MODULE, encoding="utf-8")
    release = home / "demo_out" / "release"
    view = pl.read_parquet(release / "candidates" / "eval.parquet")
    pairs = list(view.select("survey_id", "candidate_id").iter_rows())
    for name in ("my_run.trec", "my_system.trec"):
        _write_run(home / name, pairs)
    corpus = pl.read_parquet(release / "corpus" / "test.parquet")["_id"].to_list()
    surveys = sorted({q for q, _ in pairs})
    _write_run(home / "full_corpus.trec", [(q, d) for q in surveys for d in corpus])
    aspects = pl.read_parquet(release / "aspects" / "candidates" / "eval.parquet")
    _write_run(home / "my_aspects.trec", list(aspects.select("aspect_id", "candidate_id").iter_rows()))  # fmt: skip
    _write_passage_run(home / "my_passages.trec", release, surveys)
    _write_bibliography(home / "generated.jsonl", release)
    _qdrant_index(home, release)
    _owner_model(home, release)
    pytest.importorskip("sentence_transformers")
    _tiny_model(home / "tiny-model")
    return home


def _qdrant_index(home: Path, release: Path) -> None:
    """The user's own index the docs name: ``my_index``, qdrant-client's local mode, whose
    collection ``mine`` holds the corpus's vectors by ``my_pkg.models:encode`` (each point's
    document id in payload ``_id``), and ``my_queries.parquet``, the surveys' vectors."""
    from qdrant_client import QdrantClient, models

    from pipeline.evaluate.examples import hashed_words

    corpus = pl.read_parquet(release / "corpus" / "test.parquet")
    texts = [f"{t} {a}".strip() for t, a in zip(corpus["title"], corpus["text"], strict=True)]
    vectors = hashed_words(texts)
    client = QdrantClient(path=str(home / "my_index"))
    try:
        client.create_collection(
            "mine", vectors_config=models.VectorParams(size=vectors.shape[1], distance=models.Distance.COSINE)
        )  # fmt: skip
        client.upload_collection("mine", vectors=vectors.tolist(), ids=list(range(len(texts))),
                                 payload=[{"_id": d} for d in corpus["_id"].to_list()])  # fmt: skip
    finally:
        client.close()
    queries = pl.read_parquet(release / "queries" / "test.parquet")
    vectors = hashed_words(queries["text"].to_list())
    pl.DataFrame({"_id": queries["_id"], "vector": vectors.tolist()}).write_parquet(
        home / "my_queries.parquet"
    )


def _owner_model(home: Path, release: Path) -> None:
    """The model docs/evaluation.md evaluates as its owner has it: a LightGBM text model
    trained outside ``train`` (``production_model/reranker_v2.txt``, features
    ``citation_count``, ``cosine``, ``bm25``; ``citations_v1.txt`` without ``bm25``, for
    retrieval mode) and ``features.db``, a local libSQL database
    whose table ``papers`` gives each paper's citation count by its bare arXiv id."""
    import libsql
    import lightgbm as lgb
    import numpy as np

    rng = np.random.default_rng(0)
    names = ["citation_count", "cosine", "bm25"]
    data = lgb.Dataset(rng.random((200, 3)), label=rng.integers(0, 5, 200), group=[20] * 10,
                       feature_name=names)  # fmt: skip
    params = {"objective": "lambdarank", "verbosity": -1, "num_threads": 1, "seed": 1,
              "min_data_in_leaf": 5}  # fmt: skip
    (home / "production_model").mkdir()
    lgb.train(params, data, num_boost_round=5).save_model(
        str(home / "production_model" / "reranker_v2.txt")
    )
    # the retrieval-mode example: no release feature (refused there), features of every paper
    data = lgb.Dataset(rng.random((200, 2)), label=rng.integers(0, 5, 200), group=[20] * 10,
                       feature_name=names[:2])  # fmt: skip
    lgb.train(params, data, num_boost_round=5).save_model(
        str(home / "production_model" / "citations_v1.txt")
    )
    papers = pl.read_parquet(release / "eval_survey_reading_lists.parquet").unique("candidate_id")
    connection = libsql.connect(str(home / "features.db"))
    connection.execute("CREATE TABLE papers (id TEXT PRIMARY KEY, citation_count INTEGER)")
    connection.executemany(
        "INSERT INTO papers VALUES (?, ?)",
        [(c.removeprefix("arxiv:"), int(n))
         for c, n in papers.select("candidate_id", "candidate_prior_citations").iter_rows()],
    )  # fmt: skip
    connection.commit()


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_ENDPOINT="http://127.0.0.1:9",  # nothing listens there: no request leaves
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(home / ".hf"),
        HF_DATASETS_CACHE=str(home / ".hf" / "datasets"),
        # the checkout under test, not whichever copy the interpreter has installed (a
        # git worktree's editable install points at another checkout)
        PYTHONPATH=os.pathsep.join([str(home), str(ROOT)]),
    )
    env.pop("HF_TOKEN", None)
    return env


def _run(item: Documented, home: Path) -> subprocess.CompletedProcess[str]:
    if item.kind == "python":
        script = home / "snippet.py"
        script.write_text(item.text, encoding="utf-8")
        argv = [sys.executable, str(script)]
    else:
        argv = _argv(item.text)
    return subprocess.run(
        argv, cwd=home, env=_env(home), capture_output=True, text=True, timeout=TIMEOUT
    )


def test_the_docs_hold_commands_and_mark_what_is_not_run() -> None:
    run, skipped = documented()
    assert len(run) >= 20, [str(x) for x in run]  # a floor: the extraction still finds them
    kinds = {x.kind for x in run}
    assert kinds == {"shell", "python"}
    # every mark names its reason, and matches something (a stale mark is an error)
    for item, reason in skipped:
        assert len(reason) > 15, (str(item), reason)
    marks = [
        pattern for path in DOC_FILES for pattern, _ in NOT_RUN.findall(path.read_text("utf-8"))
    ]
    for pattern in marks:
        assert any(re.search(pattern, x.text) for x, _ in skipped), f"{pattern!r} matches nothing"


def test_every_documented_command_runs_as_written(sandbox: Path) -> None:
    run, skipped = documented()
    failures = []
    start = time.perf_counter()
    for item in run:
        proc = _run(item, sandbox)
        words = item.text.split()
        refusal = next((m for c, m in REFUSED.items() if c in words or f"api.{c}(" in item.text), None)  # fmt: skip
        output = proc.stdout + proc.stderr
        if refusal is not None:
            ok = proc.returncode != 0 and refusal in output
        else:
            ok = proc.returncode == 0
        if not ok:
            failures.append(f"{item} -> rc {proc.returncode}: {output.strip()[-600:]}")
    seconds = time.perf_counter() - start
    print(f"docs test: ran {len(run)} commands and snippets in {seconds:.0f} s; "
          f"{len(skipped)} marked not run")  # fmt: skip
    assert not failures, "\n".join(failures)
