"""One CLI grammar: every subcommand's ``--out DIR`` is the directory it writes (nothing is
written next to it or inside a release), and ``--release DIR`` names the release a command
reads (``--eval-file`` is the same option)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pipeline.cli import build_parser, main
from pipeline.stages import STAGES
from tests.conftest import PREVIEW_2024, SAMPLE_2022
from tests.test_negatives import synthetic_release_dir

FAST_EVAL = "[evaluate]\nbootstrap_samples = 20\nrandom_seeds = 1\n"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture
def synthetic_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory)


def _ok_at_default_verbosity(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``argv`` exits 0 at the default verbosity, where its info lines are formatted (a
    format error in one is an exit 1 that ``-q`` hides), says something, and logs no error."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, (argv, err)
    assert " ERROR " not in err and (out + err).strip(), (argv, out, err)


def test_every_command_that_writes_takes_out_and_writes_there_only(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    synthetic_work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fast.toml").write_text(FAST_EVAL)
    release = str(synthetic_work / "release")
    before_release = _tree(synthetic_work / "release")
    real = [str(SAMPLE_2022.parent), str(PREVIEW_2024.parent)]
    # each command, run with --out OUT, and a file it must have written inside OUT
    recipes: list[tuple[str, list[str], str]] = [
        ("synth", ["--papers", "5", "--small"], "synth_2022_0_000.jsonl"),
        ("extract", ["--input", real[0], "--workers", "1"], "extract/_summary.json"),
        ("job", ["--step", "shard", "--shard", "0/1", "--input", real[1], "--workers", "1"],
         "extract/_summary.json"),
        ("run", ["--input", real[0], "--input", real[1], "--workers", "1"], "release/README.md"),
        ("evaluate", ["--release", release, "--no-learned", "--config", "fast.toml"],
         "eval_results.json"),
        ("features", ["--release", release], "features.json"),
        ("train", ["--release", release], "model.txt"),
        ("export", ["--release", release], "corpus.jsonl"),
    ]  # fmt: skip
    covered = set()
    for name, args, wrote in recipes:
        out = tmp_path / f"{name}_out"
        before = _tree(tmp_path)
        _ok_at_default_verbosity([name, *args, "--out", str(out)], capsys)
        assert (out / wrote).is_file(), (name, wrote)
        new = _tree(tmp_path) - before
        assert all(p == out.name or p.startswith(f"{out.name}/") for p in new), (name, new)
        covered.add(name)
    # the reduce stages write into the work directory OUT, one stage each
    work = tmp_path / "extract_out"
    for stage in [s.name for s in STAGES if s.kind == "reduce"]:
        _ok_at_default_verbosity([stage, "--out", str(work)], capsys)
        assert (work / stage / "_SUCCESS.json").is_file(), stage
        covered.add(stage)
    # the evaluation writes into OUT itself, not OUT/eval, and never into the release
    evaluated = tmp_path / "evaluate_out"
    assert not (evaluated / "eval").exists()
    assert {"eval_results.json", "per_survey.parquet", "report.md"} <= _tree(evaluated)
    assert _tree(synthetic_work / "release") == before_release
    # demo writes its corpus, stages and evaluation into OUT
    demo = tmp_path / "demo_out"
    _ok_at_default_verbosity(
        ["demo", "--out", str(demo), "--workers", "1", "--config", "fast.toml"], capsys
    )
    assert {"corpus", "extract", "release", "eval"} <= {p.name for p in demo.iterdir()}
    covered.add("demo")
    # status reads a work directory: it writes nothing into it
    state = _tree(work)
    assert main(["status", "--out", str(work)]) == 0
    assert _tree(work) == state
    covered.add("status")
    # so does roles, which reads its headings there
    _ok_at_default_verbosity(["roles", "--out", str(work)], capsys)
    assert _tree(work) == state
    covered.add("roles")
    # every subcommand with --out is one of the above
    with_out = {name for name, p in _subparsers().items() if "--out" in _options(p)}
    assert with_out == covered, with_out ^ covered
    # and the others run at the default verbosity too (push, which needs a release whose
    # card names its repo: tests/test_hub.py, test_push_dry_run_lists_exactly_the_release_files)
    _ok_at_default_verbosity(["config"], capsys)
    (tmp_path / "my.toml").write_text(
        "[release]\nrepo_id = 'someone/survey-reading-lists'\nauthors = ['Doe, Jane']\n"
        "year = 2026\n"
    )
    # the dry run lists the input where it can: here it cannot (nothing leaves the machine)
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    constraints = str(Path(__file__).resolve().parents[1] / "constraints.txt")
    _ok_at_default_verbosity(
        ["submit", "--dry-run", "--namespace", "someone", "--config", "my.toml",
         "--constraints", constraints],
        capsys,
    )  # fmt: skip
    covered |= {"config", "submit", "push"}
    assert covered == set(_subparsers()), set(_subparsers()) ^ covered


def test_release_is_one_option_wherever_a_release_is_read() -> None:
    parsers = _subparsers()
    for name in ("evaluate", "features", "train", "push"):
        (action,) = [a for a in parsers[name]._actions if "--release" in a.option_strings]
        # evaluate also reads an eval file: there --eval-file is the same option
        names = ["--release", "--eval-file"] if name == "evaluate" else ["--release"]
        assert action.option_strings == names, name
        assert action.dest == "release" and action.metavar == "DIR"
    # no other spelling of a release folder anywhere
    for name, parser in parsers.items():
        assert not {"--release-dir", "--eval-dir"} & _options(parser), name


@pytest.mark.parametrize(
    ("old", "new", "warning"),
    [
        (["export", "{tmp}/beir", "--release", "{release}"],
         ["export", "--out", "{tmp}/beir", "--release", "{release}"],
         "export DIR is deprecated"),
        (["features", "--eval-file", "{release}", "--out", "{tmp}/f"],
         ["features", "--release", "{release}", "--out", "{tmp}/f"],
         "--eval-file is deprecated"),
        (["roles", "--from-out", "{work}"], ["roles", "--out", "{work}"],
         "--from-out is deprecated"),
    ],
)  # fmt: skip
def test_old_spellings_still_work_with_a_warning(
    old: list[str],
    new: list[str],
    warning: str,
    tmp_path: Path,
    synthetic_work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``export DIR``, ``roles --from-out`` and ``--eval-file`` for a release folder break
    the one grammar (``--out DIR`` writes or, for status and roles, reads a work directory;
    ``--release DIR`` names a release): the new spelling works, the old one still does,
    with one warning line."""
    values = {"tmp": str(tmp_path), "release": str(synthetic_work / "release")}
    values["work"] = str(synthetic_work)
    outputs = []
    for argv, warns in ((new, False), (old, True)):
        assert main([a.format(**values) for a in argv]) == 0, argv
        out, err = capsys.readouterr()
        assert (warning in err) is warns and " ERROR " not in err, err
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_help_texts_say_what_the_commands_do() -> None:
    """Metavars name what an option takes (not argparse's INPUT_REPO), a default is stated
    once, ``--shard`` tells how archives are shared, and the baselines evaluate lists are
    the ones that run."""
    from pipeline.evaluate.systems.baselines import BASELINES
    from pipeline.evaluate.systems.dense import DENSE
    from pipeline.evaluate.systems.learned import LEARNED_BASELINES

    parsers = _subparsers()
    for name, parser in parsers.items():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0 and action.choices is None:
                assert action.metavar, (name, action.option_strings)
            if action.help:
                assert action.help.count("(default") <= 1, (name, action.help)
    (shard,) = [a for a in parsers["extract"]._actions if "--shard" in a.option_strings]
    assert "sorted(files)[I::N]" in shard.help and "units" in shard.help
    description = " ".join(parsers["evaluate"].description.split())
    for baseline in (*BASELINES, *LEARNED_BASELINES, DENSE):
        assert baseline in description, baseline


def test_every_option_of_every_command_has_a_help_text() -> None:
    for name, parser in _subparsers().items():
        assert parser.description, name
        for action in parser._actions:
            assert action.help and len(action.help) >= 12, (name, action.option_strings)
        out = [a for a in parser._actions if "--out" in a.option_strings]
        for action in out:  # the directory the command writes (status and roles: read)
            assert "this command writes" in action.help or name in ("status", "roles"), name


def test_train_logs_like_every_other_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--release", str(tmp_path / "nowhere"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "error:" not in err and " ERROR " in err and "nowhere" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
