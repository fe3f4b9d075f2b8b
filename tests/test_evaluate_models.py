"""Evaluate a model, not a file: --encoder, --scorer, --sentence-transformer, evaluate_scores,
the embedding and baseline caches, names, the one-line -q summary."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig
from pipeline.core.release_files import CANDIDATES_FILE
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.evaluate.examples import hashed_words, word_overlap
from pipeline.evaluate.systems.models import ModelError, model_texts
from pipeline.evaluate.systems.runs import RunError
from tests.test_negatives import synthetic_release_dir

CONFIG = Config(evaluate=EvaluateConfig(bootstrap_samples=50, random_seeds=2))
ENCODER_SOURCE = '''
"""A user's encoder, shaped like SentenceTransformer.encode: texts in, vectors out."""
import numpy as np

CALLS = []


def encode(texts):
    CALLS.append(len(texts))
    out = np.zeros((len(texts), 32))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, sum(map(ord, word)) % 32] += 1.0
    return out


def wrong_shape(texts):
    return np.zeros(len(texts))


def broken(texts):
    raise RuntimeError("CUDA out of memory")


def score(query, texts):
    return [float(len(set(query.split()) & set(t.split()))) for t in texts]
'''


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory) / "release"


@pytest.fixture
def user_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``my_encoder.py`` in the current directory, as a user would have it."""
    (tmp_path / "my_encoder.py").write_text(textwrap.dedent(ENCODER_SOURCE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_encoder", raising=False)
    return tmp_path


def _view(release: Path) -> pl.DataFrame:
    return pl.read_parquet(release / CANDIDATES_FILE.format(split="eval")).sort(
        SURVEY_ID, CANDIDATE_ID
    )


def _cosine_scores(release: Path, encode) -> dict[str, dict[str, float]]:
    """The encoder's scores computed here, independently of the pipeline."""
    texts = model_texts(_view(release))
    out: dict[str, dict[str, float]] = {}
    for survey, candidate, query, doc in texts.iter_rows():
        q, d = encode([query])[0], encode([doc])[0]
        nq, nd = np.linalg.norm(q), np.linalg.norm(d)
        out.setdefault(survey, {})[candidate] = float(q @ d / (nq * nd)) if nq and nd else 0.0
    return out


def test_an_encoder_in_one_command(
    release: Path, user_code: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    out = user_code / "out"
    argv = ["evaluate", "--eval-file", str(release), "--encoder", "my_encoder:encode"]
    argv += ["--name", "mine", "--out", str(out), "--no-learned", "-q"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and printed[0].startswith("evaluate: nDCG@10 over ")
    assert "mine " in printed[0] and str(out / "report.md") in printed[0]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["submitted"] == ["mine"] and results["kinds"]["mine"] == "encoder"
    assert results["models"]["mine"]["target"] == "my_encoder:encode"
    assert results["models"]["mine"]["embedding_size"] == 32
    # an embedding system gets PRISM's coverage measure; the others do not
    assert results["systems"]["mine"]["chv_ratio"]["n"] > 0
    assert results["systems"]["bm25"]["chv_ratio"]["mean"] is None
    # the scores are the cosines computed by hand, and the numbers those of these scores
    my_encoder = sys.modules["my_encoder"]

    again = api.evaluate(
        release, out=out, encoders=[("my_encoder:encode", "mine")], config=CONFIG, learned=False
    )
    scores = again.model_runs[0].scores
    by_hand = _cosine_scores(release, my_encoder.encode)
    assert scores.height == sum(len(v) for v in by_hand.values())
    for survey, candidate, score in scores.iter_rows():
        assert score == pytest.approx(by_hand[survey][candidate], abs=1e-12)
    direct = api.evaluate_scores(scores, release, name="mine", config=CONFIG)
    for metric in ("nDCG@10", "AP", "hard_negative_auc"):
        # (means: the command ran with the default bootstrap resamples, this with 50)
        assert results["systems"]["mine"][metric]["mean"] == direct.mean("mine", metric)


def test_embedding_cache_is_keyed_by_text_and_model(release: Path, user_code: Path) -> None:
    shared = user_code / "cache"  # runs written to different folders share it when told
    first = api.evaluate(
        release, out=user_code / "a", encoders=["my_encoder:encode"], config=CONFIG,
        learned=False, cache_dir=shared,
    )  # fmt: skip
    my_encoder = sys.modules["my_encoder"]  # loaded by the evaluation, from the current dir
    encoded = first.model_runs[0].texts_encoded
    assert encoded == first.results["models"]["encode"]["texts"] > 0
    assert max(my_encoder.CALLS) <= 64 and sum(my_encoder.CALLS) == encoded  # batched
    my_encoder.CALLS.clear()
    second = api.evaluate(
        release, out=user_code / "b", encoders=["my_encoder:encode"], config=CONFIG,
        learned=False, cache_dir=shared,
    )  # fmt: skip
    assert second.model_runs[0].texts_encoded == 0 and my_encoder.CALLS == []
    assert second.results["systems"]["encode"] == first.results["systems"]["encode"]
    cache = shared / "embeddings"
    assert len(list(cache.glob("encode-*.parquet"))) == 1
    # a changed model file is another model: encoded again
    (user_code / "my_encoder.py").write_text(
        textwrap.dedent(ENCODER_SOURCE) + "\n# edited\n", encoding="utf-8"
    )
    third = api.evaluate(
        release,
        out=user_code / "c",
        encoders=["my_encoder:encode"],
        config=CONFIG,
        learned=False,
        batch_size=7,
        cache_dir=shared,
    )
    assert third.model_runs[0].texts_encoded == encoded
    assert len(list(cache.glob("encode-*.parquet"))) == 2


def test_a_scorer_and_an_example_encoder(release: Path, tmp_path: Path) -> None:
    result = api.evaluate(
        release,
        out=tmp_path,
        scorers=[("pipeline.evaluate.examples:word_overlap", "overlap")],
        encoders=["pipeline.evaluate.examples:hashed_words"],
        config=CONFIG,
        learned=False,
        cache=False,
    )
    assert result.results["submitted"] == ["hashed_words", "overlap"]  # encoders, then scorers
    assert result.results["kinds"] == result.results["kinds"] | {
        "overlap": "scorer",
        "hashed_words": "encoder",
    }
    texts = model_texts(_view(release))
    by_hand = {
        s: {} for s in texts[SURVEY_ID].unique().to_list()
    }  # word_overlap, one call per candidate
    for survey, candidate, query, doc in texts.iter_rows():
        by_hand[survey][candidate] = word_overlap(query, [doc])[0]
    direct = api.evaluate_scores(by_hand, release, config=CONFIG)
    assert result.results["systems"]["overlap"]["nDCG@10"] == pytest.approx(
        direct.results["systems"]["scores"]["nDCG@10"]
    )
    # two submitted systems: a pairwise comparison in the report
    assert len({(t["system"], t["other"]) for t in result.results["pairwise"]}) == 1
    assert "## Submitted systems against each other (nDCG@10)" in result.report
    assert hashed_words(["a b", ""]).shape == (2, 256)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("my_encoder", "--encoder 'my_encoder': expected PKG.MODULE:CALLABLE"),
        ("no_such_module:encode", "cannot import no_such_module"),
        ("my_encoder:missing", "has no attribute 'missing'"),
        ("my_encoder:CALLS", "not callable"),
        ("my_encoder:wrong_shape", "expected (64, d), one vector per text"),
    ],
)
def test_model_errors_name_the_flag(release: Path, user_code: Path, spec: str, fragment) -> None:
    with pytest.raises(ModelError) as info:
        api.evaluate(release, out=user_code, encoders=[spec], config=CONFIG, learned=False)
    assert fragment in str(info.value) and "--encoder" in str(info.value)


@pytest.mark.parametrize(
    ("flag", "spec", "fragment"),
    [
        ("--encoder", "my_encoder:broken", "raised RuntimeError (CUDA out of memory)"),
        ("--scorer", "my_encoder:broken", "raised TypeError"),
        ("--encoder", "my_encoder:score", "(a scorer goes with --scorer)"),
        ("--scorer", "my_encoder:encode", "(an encoder goes with --encoder)"),
    ],
)
def test_a_model_that_raises_is_one_line_naming_it(
    release: Path,
    user_code: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    spec: str,
    fragment: str,
) -> None:
    """The user's model failing is the user's to fix: exit 2, one line naming the model."""
    from pipeline.cli import main

    argv = ["evaluate", "--release", str(release), "--out", str(user_code), "--no-learned"]
    assert main([*argv, flag, spec]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{flag} {spec}: the model raised" in line and fragment in line, line
    assert "unexpected" not in line


def test_cli_errors_are_one_line_naming_the_flag(
    release: Path, user_code: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    base = ["evaluate", "--eval-file", str(release), "--out", str(user_code), "--no-learned"]
    assert main([*base, "--encoder", "no_such_module:encode"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--encoder" in err[0]
    assert main([*base, "--name", "orphan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--name 'orphan' must follow the --run" in err[0]


def test_two_runs_with_one_tag_need_and_take_names(release: Path, tmp_path: Path) -> None:
    view = _view(release)
    lines = [
        f"{s} Q0 {c} 0 {i} same"
        for i, (s, c) in enumerate(view.select(SURVEY_ID, CANDIDATE_ID).rows())
    ]
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    a.write_text("\n".join(lines) + "\n")
    b.write_text("\n".join(lines[::-1]) + "\n")
    with pytest.raises(RunError, match="already used.*--name"):
        api.evaluate(release, out=tmp_path, runs=[a, b], config=CONFIG, learned=False)
    result = api.evaluate(
        release, out=tmp_path, runs=[(a, "forward"), (b, "backward")], config=CONFIG, learned=False
    )
    assert result.results["submitted"] == ["forward", "backward"]


def test_evaluate_scores_equals_the_file_and_writes_nothing(release: Path, tmp_path: Path) -> None:
    view = _view(release)
    rng = np.random.default_rng(3)
    frame = view.select(SURVEY_ID, CANDIDATE_ID).with_columns(
        pl.Series(SCORE, rng.permutation(view.height) / view.height)
    )
    scores: dict[str, dict[str, float]] = {}
    for survey, candidate, score in frame.iter_rows():
        scores.setdefault(survey, {})[candidate] = score
    run = tmp_path / "files" / "mine.csv"
    run.parent.mkdir()
    frame.write_csv(run)
    from_file = api.evaluate(
        release, out=tmp_path / "out", runs=[run], config=CONFIG, learned=False
    )

    def snapshot() -> dict[str, int]:
        roots = [tmp_path, release.parent]
        return {str(p): p.stat().st_mtime_ns for r in roots for p in r.rglob("*")}

    before = snapshot()
    in_memory = api.evaluate_scores(scores, release, name="mine", config=CONFIG)
    as_frame = api.evaluate_scores(
        frame.rename({SCORE: "score"}), release, name="mine", config=CONFIG
    )
    assert snapshot() == before  # no file written or touched
    assert in_memory.out is None and in_memory.results["baselines"] == []  # nothing trained
    with pytest.raises(ValueError, match="nothing was written"):
        _ = in_memory.report_file
    for result in (in_memory, as_frame):
        for subset in ("ALL", "IN", "OUT"):
            assert (
                result.results["subsets"][subset]["mine"]
                == (from_file.results["subsets"][subset]["mine"])
            )
    assert in_memory.mean("mine", "ndcg@10") == from_file.mean("mine", "nDCG@10")  # an alias
    # asked for, the baselines come along (from the cache the file evaluation filled)
    with_baselines = api.evaluate_scores(
        scores, release, name="mine", config=CONFIG, baselines=True, learned=False, cache=True,
        cache_dir=tmp_path / "out" / "cache",
    )  # fmt: skip
    assert {t["baseline"] for t in with_baselines.results["tests"]} == {
        "random",
        "popularity",
        "bm25",
    }


def test_baselines_are_computed_once_per_release(
    release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "cache"
    first = api.evaluate(release, out=tmp_path / "a", config=CONFIG, cache_dir=shared)
    assert "lgbm" in first.results["baselines"]
    cache = shared / "baselines"
    assert len(list(cache.glob("*.parquet"))) >= 1

    def no_training(*args, **kwargs):
        raise AssertionError("the learned baselines were trained again")

    monkeypatch.setattr(
        "pipeline.evaluate.systems.baseline_values.learned_baseline_scores", no_training
    )
    monkeypatch.setattr(
        "pipeline.evaluate.systems.baseline_values.baseline_per_survey", no_training
    )
    # another --out, the same cache folder
    second = api.evaluate(release, out=tmp_path / "b", config=CONFIG, cache_dir=shared)
    assert second.results == first.results
    assert (tmp_path / "a" / "per_survey.parquet").read_bytes() == (
        tmp_path / "b" / "per_survey.parquet"
    ).read_bytes()
    # another config is another entry: computed, not read
    with pytest.raises(AssertionError, match="trained again"):
        api.evaluate(
            release,
            out=tmp_path / "c",
            config=Config(evaluate=EvaluateConfig(bootstrap_samples=50, random_seeds=3)),
            cache_dir=shared,
        )


def test_sentence_transformer_folder(release: Path, tmp_path: Path) -> None:
    """A local sentence-transformers model (a tiny static-embedding one built here)."""
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    words = sorted(
        {w for t in model_texts(_view(release))["_candidate_text"] for w in t.lower().split()}
    )
    tokenizer = Tokenizer(
        WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]")
    )
    tokenizer.pre_tokenizer = Whitespace()
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_dim=16)])
    folder = tmp_path / "tiny-st"
    model.save(str(folder))
    result = api.evaluate(
        release, out=tmp_path, sentence_transformers=[folder], config=CONFIG, learned=False
    )
    assert result.results["kinds"]["tiny-st"] == "sentence-transformer"
    assert result.results["systems"]["tiny-st"]["nDCG@10"]["n"] > 0
    assert result.results["models"]["tiny-st"]["embedding_size"] == 16
    with pytest.raises(ModelError, match="--sentence-transformer .*no such model folder"):
        api.evaluate(
            release, out=tmp_path, sentence_transformers=[tmp_path / "nope"], learned=False
        )


def test_hub_offline_is_scoped_to_the_model_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model is loaded offline, and the process can reach the Hub afterwards (push the
    release it has just evaluated): the variable and huggingface_hub's constant, which it
    reads once at import, are both restored."""
    from huggingface_hub import constants

    from pipeline.evaluate.systems.models import hub_offline

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with hub_offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.HF_HUB_OFFLINE is True
    assert "HF_HUB_OFFLINE" not in os.environ and constants.HF_HUB_OFFLINE is False
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(RuntimeError), hub_offline():
        raise RuntimeError("a model that fails to load")
    assert os.environ["HF_HUB_OFFLINE"] == "0" and constants.HF_HUB_OFFLINE is False


def test_dense_baseline_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """PIPELINE_DENSE=0 skips the dense baseline whether or not the extra is installed (the
    test suite sets it in conftest.py); without it, the answer is the install's."""
    from pipeline.evaluate.systems.dense import DENSE_SWITCH, dense_unavailable

    switched_off = f"switched off ({DENSE_SWITCH}=0)"
    assert os.environ[DENSE_SWITCH] == "0"
    assert dense_unavailable() == switched_off
    monkeypatch.delenv(DENSE_SWITCH)
    assert dense_unavailable() != switched_off
