"""One error convention: expected failures are ``PipelineError``s (exit 2, one line); any
other exception is a bug (exit 1, one line, the traceback under ``-v``)."""

from __future__ import annotations

import ast
import errno
import logging
import os
from pathlib import Path

import pytest

import pipeline
from pipeline.cli import app
from pipeline.core.config import ConfigError
from pipeline.core.errors import StageError, UsageError, user_message
from pipeline.corpus.sources import InputError
from pipeline.evaluate.systems.runs import RunError

ROOT = Path(pipeline.__file__).parent


def test_expected_failures_have_a_message_and_bugs_do_not() -> None:
    for exc in (InputError("x: bad"), ConfigError("y"), RunError("z"), StageError("s")):
        assert user_message(exc) is not None
    assert user_message(UsageError("u")) == "u"
    # a library's ValueError, a failed invariant: bugs, whatever their type
    assert user_message(ValueError("shapes differ")) is None
    assert user_message(RuntimeError("a unit was neither read nor drained")) is None
    assert user_message(KeyError("k")) is None


def test_an_os_error_is_its_paths_and_the_systems_words_without_a_class() -> None:
    enotempty = OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), "/w/.x.tmp-1", None, "/w/x")
    assert user_message(enotempty) == "/w/.x.tmp-1 -> /w/x: Directory not empty"
    assert user_message(OSError(errno.EIO, os.strerror(errno.EIO))) == "Input/output error"
    assert (
        user_message(PermissionError(13, "Permission denied", "/w/a")) == "/w/a: Permission denied"
    )


def test_every_error_class_of_the_package_is_an_expected_failure_or_says_why_not() -> None:
    """A class named ``...Error`` in the package derives from PipelineError, except the
    contract violations that are bugs by definition."""
    bugs = {"StageContractError"}  # a stage reading what it does not declare
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                bases = {ast.unparse(b) for b in node.bases}
                expected = bases & {"PipelineError", "UsageError", "StageError", "InputError"}
                if not expected and node.name not in bugs and node.name != "PipelineError":
                    wrong.append(f"{path.relative_to(ROOT)}: {node.name}({', '.join(bases)})")
    assert wrong == []


@pytest.mark.parametrize(
    ("raised", "code"),
    [(InputError("bad input"), 2), (StageError("upstream not done"), 2), (ValueError("bug"), 1)],
)
def test_main_exits_2_for_expected_failures_and_1_for_bugs(
    raised: Exception, code: int, monkeypatch: pytest.MonkeyPatch, caplog, tmp_path: Path
) -> None:
    def status(out, config=None):
        raise raised

    monkeypatch.setattr(app.api, "status", status)  # what the status command calls
    with caplog.at_level(logging.ERROR, logger="pipeline"):
        assert app.main(["status", "--out", str(tmp_path)]) == code
    line = caplog.records[-1].getMessage()
    assert ("unexpected" in line) == (code == 1) and str(raised) in line
