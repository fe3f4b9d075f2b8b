"""Evaluate the model you already have (issue 49): a LightGBM model trained outside ``train``,
its features in a libSQL database, a Parquet file and a Qdrant collection, evaluated by the
one evaluator; the popularity section; bad input in one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig
from pipeline.core.errors import PipelineError
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SUBSET, SURVEY_ID, SYSTEM
from pipeline.evaluate.external import ExternalOptions
from pipeline.evaluate.scoring.ties import tie_key
from pipeline.rank.features import compute_features
from tests.test_negatives import synthetic_release_dir
from tests.trec_reference import pytrec_eval_many

libsql = pytest.importorskip("libsql")
lgb = pytest.importorskip("lightgbm")

ROOT = Path(__file__).resolve().parents[1]
FAST = Config(evaluate=EvaluateConfig(bootstrap_samples=50, random_seeds=2))
FEATURES = ("citation_count", "noise", "bm25")  # the owner's names, one the release's own
SECRET = "turso-secret-token-0123456789abcdef"


def _split(release: Path, split: str) -> pl.DataFrame:
    """A split's reading lists with the release's bm25, in (survey, candidate) order."""
    lists = pl.read_parquet(release / f"{split}_survey_reading_lists.parquet").sort(
        SURVEY_ID, CANDIDATE_ID
    )
    view = pl.read_parquet(release / "candidates" / f"{split}.parquet")
    bm25 = compute_features(view, ("bm25",)).select(SURVEY_ID, CANDIDATE_ID, "bm25")
    return lists.join(bm25, on=[SURVEY_ID, CANDIDATE_ID], how="left", maintain_order="left")


def _train(frame: pl.DataFrame, names: tuple[str, ...], label: pl.Series) -> lgb.Booster:
    groups = frame.group_by(SURVEY_ID, maintain_order=True).len()["len"].to_numpy()
    data = lgb.Dataset(
        frame.select(names).to_numpy().astype(np.float64),
        label=label.to_numpy(),
        group=groups,
        feature_name=list(names),
    )
    params = {"objective": "lambdarank", "verbosity": -1, "num_threads": 1, "seed": 3,
              "deterministic": True, "min_data_in_leaf": 5}  # fmt: skip
    return lgb.train(params, data, num_boost_round=15)


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The owner's world: a model trained outside ``train`` on their own feature names, a
    libSQL database keyed by bare arXiv ids, the same features in Parquet keyed by
    ``arxiv:`` ids, and a model that learned to count citations."""
    release = synthetic_release_dir(tmp_path_factory) / "release"
    home = tmp_path_factory.mktemp("owner")
    train, evaluation = _split(release, "train"), _split(release, "eval")
    papers = (
        pl.concat([train, evaluation])
        .select(CANDIDATE_ID, pl.col("candidate_prior_citations").alias("citation_count"))
        .unique(CANDIDATE_ID)
        .sort(CANDIDATE_ID)
    )
    papers = papers.with_columns(pl.Series("noise", np.random.default_rng(0).random(papers.height)))
    train = train.join(papers, on=CANDIDATE_ID, how="left", maintain_order="left")
    _train(train, FEATURES, train[LABEL]).save_model(str(home / "reranker_v2.txt"))
    # a model that learned popularity: its labels are the citation count's quintile
    quintile = (train["citation_count"].rank("ordinal") * 5 / (train.height + 1)).floor()
    counter = _train(train, ("citation_count", "noise"), quintile.cast(pl.Int32))
    counter.save_model(str(home / "counter.txt"))
    database = home / "features.db"
    connection = libsql.connect(str(database))
    connection.execute("CREATE TABLE papers (id TEXT PRIMARY KEY, citation_count INTEGER, "
                       "noise REAL, venue TEXT, legacy_id TEXT)")  # fmt: skip
    rows = [(c.removeprefix("arxiv:"), int(n), float(z), "NeurIPS", f"P{i}")
            for i, (c, n, z) in enumerate(papers.iter_rows())]  # fmt: skip
    connection.executemany("INSERT INTO papers VALUES (?, ?, ?, ?, ?)", rows)
    connection.commit()
    papers.write_parquet(home / "features.parquet")
    return {"release": release, "home": home, "database": database}


def _evaluate(owner: dict[str, Path], out: Path, model: str = "reranker_v2.txt", **kwargs):
    return api.evaluate(
        owner["release"],
        out=out,
        model_files=[owner["home"] / model],
        learned=False,
        config=FAST,
        cache=False,
        **kwargs,
    )


def _own_scores(owner: dict[str, Path], model: str, names: tuple[str, ...]) -> pl.DataFrame:
    """The test's own scores of the eval pairs: its own join of its own features."""
    evaluation = _split(owner["release"], "eval")
    papers = pl.read_parquet(owner["home"] / "features.parquet")
    frame = evaluation.join(papers, on=CANDIDATE_ID, how="left", maintain_order="left")
    booster = lgb.Booster(model_file=str(owner["home"] / model))
    scores = booster.predict(frame.select(names).to_numpy().astype(np.float64), num_threads=1)
    return frame.select(SURVEY_ID, CANDIDATE_ID, LABEL).with_columns(pl.Series("score", scores))


def _trec_values(scored: pl.DataFrame) -> dict[str, dict[str, float]]:
    """pytrec_eval's nDCG@10/20 and AP of the scores, ties put in the evaluator's documented
    order (score, then tie key, then id) as distinct scores trec_eval cannot reorder."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for survey, rows in scored.group_by(SURVEY_ID, maintain_order=True):
        ranked = sorted(
            rows.iter_rows(named=True),
            key=lambda r: (-r["score"], tie_key(survey[0], r[CANDIDATE_ID]), r[CANDIDATE_ID]),
        )
        qrels[survey[0]] = {r[CANDIDATE_ID]: int(r[LABEL]) for r in ranked}
        run[survey[0]] = {r[CANDIDATE_ID]: float(len(ranked) - i) for i, r in enumerate(ranked)}
    (values,) = pytrec_eval_many(qrels, run, [({"ndcg_cut.10,20", "map"}, 1)])
    return values


def _per_survey(result: api.EvalResult, system: str) -> pl.DataFrame:
    return pl.read_parquet(result.per_survey_file).filter(
        (pl.col(SYSTEM) == system) & (pl.col(SUBSET) == "ALL")
    )


def test_libsql_and_parquet_sources_give_pytrec_evals_metrics(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    from_db = _evaluate(owner, tmp_path / "db", external=ExternalOptions(
        turso_url=str(owner["database"])))  # fmt: skip
    from_file = _evaluate(owner, tmp_path / "file", external=ExternalOptions(
        features=(owner["home"] / "features.parquet",)))  # fmt: skip
    db, parquet = _per_survey(from_db, "reranker_v2"), _per_survey(from_file, "reranker_v2")
    assert db.height > 5 and db.equals(parquet)
    expected = _trec_values(_own_scores(owner, "reranker_v2.txt", FEATURES))
    checked = 0
    for row in db.iter_rows(named=True):
        for mine, theirs in (("nDCG@10", "ndcg_cut_10"), ("nDCG@20", "ndcg_cut_20"),
                             ("AP", "map")):  # fmt: skip
            if row[mine] is not None:
                assert row[mine] == pytest.approx(expected[row[SURVEY_ID]][theirs], abs=1e-9)
                checked += 1
    assert checked >= db.height
    facts = from_db.results["models"]["reranker_v2"]
    assert from_db.results["kinds"]["reranker_v2"] == "foreign model"
    assert {f: facts["features"][f]["coverage"] for f in FEATURES} == dict.fromkeys(FEATURES, 1.0)
    source = next(s for s in facts["sources"].values() if s["source"] == "turso")
    assert source["rows_read"] > source["rows_matched"] > 0
    text = (from_db.out / "eval_results.json").read_text()
    assert str(owner["home"]) not in text  # names, never local paths


def test_a_feature_covering_some_candidates_is_missing_for_the_others(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    papers = pl.read_parquet(owner["home"] / "features.parquet")
    half = tmp_path / "half.csv"
    papers.filter(pl.int_range(pl.len()) % 2 == 0).write_csv(half)
    result = _evaluate(owner, tmp_path / "out", external=ExternalOptions(features=(half,)))
    coverage = {
        f: v["coverage"] for f, v in result.results["models"]["reranker_v2"]["features"].items()
    }
    assert coverage["bm25"] == 1.0 and 0.3 < coverage["citation_count"] < 0.7
    assert "| coverage |" in result.report


def test_the_vector_feature_is_the_cosine_of_the_collection(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    pytest.importorskip("qdrant_client")
    from qdrant_client import QdrantClient, models

    release, home = owner["release"], owner["home"]
    evaluation = _split(release, "eval")
    candidates = sorted(evaluation[CANDIDATE_ID].unique().to_list())
    surveys = sorted(evaluation[SURVEY_ID].unique().to_list())
    rng = np.random.default_rng(5)
    # float32 values (what the collection stores), and a dot-product collection (a cosine
    # one stores the vectors normalised): the points give back exactly these vectors
    vectors = {c: rng.normal(size=8).astype(np.float32).astype(np.float64)
               for c in candidates[1:]}  # the first has no point  # fmt: skip
    queries = {s: rng.normal(size=8) for s in surveys}
    folder = tmp_path / "index"
    client = QdrantClient(path=str(folder))
    try:
        client.create_collection("papers", vectors_config=models.VectorParams(
            size=8, distance=models.Distance.DOT))  # fmt: skip
        ids = list(vectors)
        client.upload_collection("papers", vectors=[vectors[c].tolist() for c in ids],
                                 ids=list(range(len(ids))), payload=[{"_id": c} for c in ids])  # fmt: skip
    finally:
        client.close()
    query_file = tmp_path / "queries.parquet"
    pl.DataFrame({"_id": surveys, "vector": [queries[s].tolist() for s in surveys]}).write_parquet(
        query_file
    )

    def cosine(s: str, c: str) -> float | None:
        if c not in vectors:
            return None
        # a survey that is a point of the collection (a paper others cite) has its vector
        a, b = vectors.get(f"arxiv:{s}", queries[s]), vectors[c]
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    own = evaluation.with_columns(
        pl.Series("cosine", [cosine(s, c) for s, c in evaluation.select(SURVEY_ID, CANDIDATE_ID).iter_rows()],
                  dtype=pl.Float64)  # fmt: skip
    ).join(pl.read_parquet(home / "features.parquet"), on=CANDIDATE_ID, how="left",
           maintain_order="left")  # fmt: skip
    names = ("cosine", "citation_count")
    _train(own, names, own[LABEL]).save_model(str(home / "with_vectors.txt"))
    booster = lgb.Booster(model_file=str(home / "with_vectors.txt"))
    mine = own.select(SURVEY_ID, CANDIDATE_ID).with_columns(
        pl.Series(
            "score", booster.predict(own.select(names).to_numpy().astype(np.float64), num_threads=1)
        )  # fmt: skip
    )
    result = _evaluate(
        owner, tmp_path / "out", model="with_vectors.txt", qdrant=str(folder),
        collection="papers", query_vectors=query_file,
        external=ExternalOptions(turso_url=f"file:{owner['database']}"),
    )  # fmt: skip
    reference = api.evaluate_scores(mine, release, name="with_vectors", config=FAST)
    theirs = reference.per_survey.filter(pl.col(SYSTEM) == "with_vectors")
    ours = result.per_survey.filter(pl.col(SYSTEM) == "with_vectors").select(theirs.columns)
    assert ours.height > 0 and ours.equals(theirs)
    facts = result.results["models"]["with_vectors"]
    assert facts["features"]["cosine"]["coverage"] < 1.0  # the candidate without a point
    qdrant = next(s for s in facts["sources"].values() if s["source"] == "qdrant")
    in_collection = sum(f"arxiv:{s}" in vectors for s in surveys)
    assert qdrant["surveys_from_query_vectors"] == len(surveys) - in_collection
    assert qdrant["surveys_with_vector"] == len(surveys)


def _mann_whitney(scores: pl.DataFrame, column: str) -> float:
    """The pooled AUC of ``column`` for positives against hard negatives, ties half."""
    positives = scores.filter(pl.col(LABEL) >= 1)[column].to_numpy()
    negatives = scores.filter(pl.col(LABEL) == 0)[column].to_numpy()
    above = (positives[:, None] > negatives[None, :]).sum()
    tied = (positives[:, None] == negatives[None, :]).sum()
    return float((above + 0.5 * tied) / (len(positives) * len(negatives)))


def test_a_citation_counter_shows_its_feature_auc_and_the_popularity_baseline(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    result = _evaluate(owner, tmp_path / "out", model="counter.txt",
                       external=ExternalOptions(turso_url=str(owner["database"]),
                                                features_as_of=__import__("datetime").date(2026, 1, 1)))  # fmt: skip
    facts = result.results["models"]["counter"]["features"]
    top = max(facts, key=lambda f: facts[f]["gain"])
    assert top == "citation_count" and facts[top]["gain_share"] > 0.5
    scored = _split(owner["release"], "eval").join(
        pl.read_parquet(owner["home"] / "features.parquet"), on=CANDIDATE_ID, how="left"
    )
    assert facts[top]["auc"]["pooled"] == pytest.approx(_mann_whitney(scored, top), abs=1e-4)
    assert facts[top]["auc"]["pooled_chance"] > 0
    report = result.report
    section = report[report.index("Is it a citation counter?") :]
    assert f"Top feature by gain: `{top}`" in section
    assert f"{facts[top]['auc']['pooled']:.3f}" in section
    overall = result.results["systems"]
    for metric in ("nDCG@10", "hard_negative_auc"):
        row = next(line for line in section.splitlines() if line.startswith(f"| {metric} |"))
        assert f"{overall['counter'][metric]['mean']:.3f}" in row
        assert f"{overall['popularity'][metric]['mean']:.3f}" in row
    assert "Features as of 2026-01-01" in section and "time leakage" in section


# ------------------------------------------------------------------ bad input, one line each
def _error(
    owner: dict[str, Path], tmp_path: Path, model: str = "reranker_v2.txt", **options
) -> str:
    with pytest.raises(PipelineError) as info:
        _evaluate(owner, tmp_path / "out", model=model, external=ExternalOptions(**options))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_bad_input_is_one_line_each(owner: dict[str, Path], tmp_path: Path) -> None:
    database = str(owner["database"])
    message = _error(owner, tmp_path)  # no source has the owner's columns
    assert (
        "citation_count" in message and "model's features: citation_count, noise, bm25" in message
    )
    assert "columns offered:" in message and "bm25_title" in message
    assert "no table 'nowhere'" in _error(
        owner, tmp_path, turso_url=database, features_table="nowhere"
    )
    assert "no column 'paper'" in _error(owner, tmp_path, turso_url=database, features_key="paper")
    message = _error(owner, tmp_path, turso_url=database, features_key="legacy_id")
    assert (
        "matches no eval candidate" in message
        and "0 matched" in message
        and "row(s) read" in message
    )
    mapping = tmp_path / "map.toml"
    mapping.write_text('noise = "venue"\n')
    message = _error(owner, tmp_path, turso_url=database, feature_map=mapping)
    assert "'venue' is not numeric" in message
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("my reranker, version 2\n")
    assert "not a LightGBM text model" in _error(owner, tmp_path, model=str(not_a_model))
    missing = _error(owner, tmp_path, turso_url=str(tmp_path / "nowhere.db"))
    assert "no such database file" in missing
    assert not (tmp_path / "nowhere.db").exists()  # the client did not create one


def test_an_unreachable_turso_names_the_url_never_the_token(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    message = _error(owner, tmp_path, turso_url="libsql://127.0.0.1:9", turso_token=SECRET)
    assert "libsql://127.0.0.1:9" in message and "cannot be reached" in message
    assert SECRET not in message
    cmd = [sys.executable, "-m", "pipeline", "evaluate", "--eval-file", str(owner["release"]),
           "--model-file", str(owner["home"] / "reranker_v2.txt"), "--no-learned", "--no-cache",
           "--turso-url", f"https://127.0.0.1:9/?authToken={SECRET}", "--out", str(tmp_path / "o")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TURSO_DB_TOKEN": SECRET[::-1]}
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "cannot be reached" in line and SECRET not in line and SECRET[::-1] not in line
    assert not any(
        SECRET in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
    )


# ------------------------------------------------------------------ retrieval mode
def _first_stage(release: Path, path: Path, depth: int) -> pl.DataFrame:
    """A first-stage run over the eval corpus: per survey ``depth`` documents, judged ones
    favoured a little, the others judged for another survey only; distinct scores."""
    evaluation = _split(release, "eval")
    docs = pl.read_parquet(release / "corpus" / "test.parquet")["_id"].sort().to_list()
    rng = np.random.default_rng(11)
    rows = []
    for (survey,), group in evaluation.group_by(SURVEY_ID, maintain_order=True):
        judged = set(group[CANDIDATE_ID].to_list())
        noise = rng.random(len(docs)) + np.array([0.03 * (d in judged) for d in docs])
        for rank, j in enumerate(np.argsort(-noise, kind="stable")[:depth]):
            rows.append((survey, docs[j], float(depth - rank)))
    run = pl.DataFrame(rows, schema=[SURVEY_ID, CANDIDATE_ID, "score"], orient="row")
    path.write_text("".join(f"{s} Q0 {d} {i % depth + 1} {v!r} first\n"
                            for i, (s, d, v) in enumerate(run.iter_rows())))  # fmt: skip
    return run


def _trec_retrieval(scored: pl.DataFrame, judged: pl.DataFrame) -> dict[str, dict[str, float]]:
    """pytrec_eval over what was retrieved (``scored``: survey, candidate, score), every
    judged candidate in the qrels; ties put in the evaluator's order as distinct scores."""
    qrels: dict[str, dict[str, int]] = {}
    for (survey,), rows in judged.group_by(SURVEY_ID, maintain_order=True):
        qrels[survey] = dict(zip(rows[CANDIDATE_ID].to_list(), rows[LABEL].to_list(), strict=True))
    run: dict[str, dict[str, float]] = {}
    for (survey,), rows in scored.group_by(SURVEY_ID, maintain_order=True):
        ranked = sorted(
            rows.iter_rows(named=True),
            key=lambda r: (-r["score"], tie_key(survey, r[CANDIDATE_ID]), r[CANDIDATE_ID]),
        )
        run[survey] = {r[CANDIDATE_ID]: float(len(ranked) - i) for i, r in enumerate(ranked)}
    (values,) = pytrec_eval_many(qrels, run, [({"ndcg_cut.10,20", "map", "recall.20"}, 1)])
    return values


def test_retrieval_mode_reranks_the_first_stages_top_k(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    release, home = owner["release"], owner["home"]
    first = _first_stage(release, tmp_path / "first.trec", depth=30)
    top_k = 20
    result = _evaluate(
        owner, tmp_path / "out", model="counter.txt", mode="retrieval",
        first_stage=str(tmp_path / "first.trec"), top_k=top_k,
        external=ExternalOptions(features=(home / "features.parquet",)),
    )  # fmt: skip
    # the test's own: each survey's top 20 of the first stage, its own join, the model
    top = (
        first.sort([SURVEY_ID, "score"], descending=[False, True])
        .group_by(SURVEY_ID, maintain_order=True)
        .head(top_k)
    )
    frame = top.drop("score").join(pl.read_parquet(home / "features.parquet"), on=CANDIDATE_ID,
                                   how="left", maintain_order="left")  # fmt: skip
    booster = lgb.Booster(model_file=str(home / "counter.txt"))
    names = ("citation_count", "noise")
    scores = booster.predict(frame.select(names).to_numpy().astype(np.float64), num_threads=1)
    mine = frame.select(SURVEY_ID, CANDIDATE_ID).with_columns(pl.Series("score", scores))
    judged = _split(release, "eval").select(SURVEY_ID, CANDIDATE_ID, LABEL)
    assert mine.join(judged, on=[SURVEY_ID, CANDIDATE_ID], how="anti").height > 0  # unjudged too
    expected = _trec_retrieval(mine, judged)
    ours = _per_survey(result, "counter")
    assert ours.height == len(expected) > 5
    for row in ours.iter_rows(named=True):
        for metric, theirs in (("nDCG@10", "ndcg_cut_10"), ("nDCG@20", "ndcg_cut_20"),
                               ("AP", "map"), ("R@20", "recall_20")):  # fmt: skip
            assert row[metric] == pytest.approx(expected[row[SURVEY_ID]][theirs], abs=1e-9)
    facts = result.results["models"]["counter"]
    assert facts["first_stage"] == "first" and facts["pairs_scored"] == mine.height
    assert facts["features"]["citation_count"]["coverage"] == 1.0
    assert result.results["kinds"]["counter"] == "foreign model"


def test_retrieval_mode_offers_no_release_feature_and_refuses_trains_models(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    _first_stage(owner["release"], tmp_path / "first.trec", depth=10)
    with pytest.raises(PipelineError) as info:  # reranker_v2 reads the release's bm25
        _evaluate(owner, tmp_path / "out", mode="retrieval", first_stage=str(tmp_path / "first.trec"),
                  external=ExternalOptions(features=(owner["home"] / "features.parquet",)))  # fmt: skip
    message = str(info.value)
    assert "no source has feature(s) bm25" in message and "judged candidates only" in message
    assert "\n" not in message


def test_survey_vectors_the_collection_lacks_come_from_query_vectors_then_the_encoder(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    """Re-ranking mode, as retrieval mode's --qdrant: a survey not in the collection takes
    its --query-vectors row, else its text encoded by the command's --encoder."""
    pytest.importorskip("qdrant_client")
    from qdrant_client import QdrantClient, models

    from pipeline.evaluate.examples import HASHED_DIMENSION, hashed_words
    from pipeline.rules.text_match import survey_text

    release, home = owner["release"], owner["home"]
    evaluation = _split(release, "eval")
    candidates = sorted(evaluation[CANDIDATE_ID].unique().to_list())
    texts = dict(evaluation.select(SURVEY_ID, survey_text()).unique(SURVEY_ID).iter_rows())
    surveys = sorted(texts)
    rng = np.random.default_rng(6)
    vectors = {c: rng.normal(size=HASHED_DIMENSION).astype(np.float32).astype(np.float64)
               for c in candidates}  # fmt: skip
    given = surveys[::2]  # the others: the encoder
    queries = {s: rng.normal(size=HASHED_DIMENSION) for s in given}
    folder = tmp_path / "index"
    client = QdrantClient(path=str(folder))
    try:
        client.create_collection("papers", vectors_config=models.VectorParams(
            size=HASHED_DIMENSION, distance=models.Distance.DOT))  # fmt: skip
        client.upload_collection("papers", vectors=[vectors[c].tolist() for c in candidates],
                                 ids=list(range(len(candidates))),
                                 payload=[{"_id": c} for c in candidates])  # fmt: skip
    finally:
        client.close()
    query_file = tmp_path / "queries.parquet"
    pl.DataFrame({"_id": given, "vector": [queries[s].tolist() for s in given]}).write_parquet(
        query_file
    )

    def survey_vector(s: str) -> np.ndarray:
        if f"arxiv:{s}" in vectors:  # a survey that is a point of the collection
            return vectors[f"arxiv:{s}"]
        return queries[s] if s in queries else hashed_words([texts[s]])[0]

    def cosine(s: str, c: str) -> float:
        a, b = survey_vector(s), vectors[c]
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    pairs = evaluation.select(SURVEY_ID, CANDIDATE_ID).iter_rows()
    own = evaluation.with_columns(
        pl.Series("cosine", [cosine(s, c) for s, c in pairs], dtype=pl.Float64)
    ).join(pl.read_parquet(home / "features.parquet"), on=CANDIDATE_ID, how="left",
           maintain_order="left")  # fmt: skip
    names = ("cosine", "citation_count")
    _train(own, names, own[LABEL]).save_model(str(home / "encoded.txt"))
    booster = lgb.Booster(model_file=str(home / "encoded.txt"))
    scores = booster.predict(own.select(names).to_numpy().astype(np.float64), num_threads=1)
    mine = own.select(SURVEY_ID, CANDIDATE_ID).with_columns(pl.Series("score", scores))
    result = _evaluate(
        owner, tmp_path / "out", model="encoded.txt", qdrant=str(folder), collection="papers",
        query_vectors=query_file, encoders=["pipeline.evaluate.examples:hashed_words"],
        external=ExternalOptions(features=(home / "features.parquet",)),
    )  # fmt: skip
    reference = api.evaluate_scores(mine, release, name="encoded", config=FAST)
    theirs = reference.per_survey.filter(pl.col(SYSTEM) == "encoded")
    ours = result.per_survey.filter(pl.col(SYSTEM) == "encoded").select(theirs.columns)
    assert ours.height > 0 and ours.equals(theirs)
    qdrant = next(
        s for s in result.results["models"]["encoded"]["sources"].values()
        if s["source"] == "qdrant"
    )  # fmt: skip
    in_collection = {s for s in surveys if f"arxiv:{s}" in vectors}
    assert qdrant["surveys_from_query_vectors"] == len(set(given) - in_collection)
    assert qdrant["surveys_from_encoder"] == len(set(surveys) - set(given) - in_collection) > 0
    assert qdrant["surveys_with_vector"] == len(surveys)


def test_pair_features_join_per_survey_and_candidate(
    owner: dict[str, Path], tmp_path: Path
) -> None:
    """A --features file with survey_id: a value per (survey, candidate), so one candidate
    of two surveys has two values; the surveys spelt in other id forms still match."""
    release, home = owner["release"], owner["home"]
    evaluation = _split(release, "eval")
    rng = np.random.default_rng(9)
    affinity = rng.random(evaluation.height) + evaluation[LABEL].to_numpy() * 0.1  # learnable
    pair = evaluation.select(SURVEY_ID, CANDIDATE_ID).with_columns(pl.Series("affinity", affinity))
    shared = pair.group_by(CANDIDATE_ID).agg(pl.col("affinity").n_unique().alias("n"))
    assert shared.filter(pl.col("n") > 1).height > 0  # one candidate, two surveys, two values
    spelt = pair.with_columns(  # the user's own survey forms, and a row of no eval survey
        pl.when(pl.int_range(pl.len()) % 2 == 0)
        .then(pl.lit("arXiv:") + pl.col(SURVEY_ID) + pl.lit("v2"))
        .otherwise(pl.col(SURVEY_ID))
        .alias(SURVEY_ID)
    )
    stray = pl.DataFrame({SURVEY_ID: ["9999.99999"], CANDIDATE_ID: [pair[CANDIDATE_ID][0]],
                          "affinity": [0.5]})  # fmt: skip
    pl.concat([spelt, stray]).write_parquet(tmp_path / "pairs.parquet")
    own = evaluation.join(pair, on=[SURVEY_ID, CANDIDATE_ID], how="left", maintain_order="left")
    own = own.join(pl.read_parquet(home / "features.parquet"), on=CANDIDATE_ID, how="left",
                   maintain_order="left")  # fmt: skip
    names = ("affinity", "citation_count")
    _train(own, names, own[LABEL]).save_model(str(home / "pairs.txt"))
    booster = lgb.Booster(model_file=str(home / "pairs.txt"))
    scores = booster.predict(own.select(names).to_numpy().astype(np.float64), num_threads=1)
    mine = own.select(SURVEY_ID, CANDIDATE_ID, LABEL).with_columns(pl.Series("score", scores))
    result = _evaluate(owner, tmp_path / "out", model="pairs.txt", external=ExternalOptions(
        features=(tmp_path / "pairs.parquet", home / "features.parquet")))  # fmt: skip
    expected = _trec_values(mine)
    ours = _per_survey(result, "pairs")
    assert ours.height == len(expected) > 5
    for row in ours.iter_rows(named=True):
        for metric, theirs in (("nDCG@10", "ndcg_cut_10"), ("AP", "map")):
            assert row[metric] == pytest.approx(expected[row[SURVEY_ID]][theirs], abs=1e-9)
    facts = result.results["models"]["pairs"]
    assert facts["features"]["affinity"]["coverage"] == 1.0
    source = facts["sources"]["file pairs.parquet"]
    assert source["pair_features"] and source["pair_rows_survey_unmatched"] == 1
