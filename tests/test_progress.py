"""Progress: bars on a terminal, periodic plain lines elsewhere, logs that do not tear bars."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipeline.cli.app import _log_to_stderr
from pipeline.core import progress
from tests.test_negatives import _cfg, build_handmade, run_stage
from tests.test_works import extract_sample, run_stages

log = logging.getLogger("pipeline")


@pytest.fixture
def plain_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal, and a plain progress line after every step."""
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.0)


def test_plain_lines_are_periodic(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    with caplog.at_level(logging.INFO, "pipeline"):
        assert list(progress.steps([1, 2, 3], "quick")) == [1, 2, 3]
        assert not caplog.records  # a quick loop prints nothing
        assert list(progress.steps("ab", "slow", every=0.0)) == ["a", "b"]
    lines = [r.getMessage() for r in caplog.records]
    assert [line.rsplit(",", 1)[0] for line in lines] == ["slow: 1 of 2 done", "slow: 2 of 2 done"]


def test_a_bar_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    assert list(progress.steps(range(3), "stage: files", unit="file")) == [0, 1, 2]
    assert "stage: files" in capsys.readouterr().err


def test_log_lines_go_above_the_bar_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a terminal the CLI's handler is swapped for tqdm's; a nested command (demo runs
    run) still finds it, so a line is printed once, through tqdm.write."""
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    with _log_to_stderr(logging.INFO):
        handlers = list(log.handlers)
        assert [type(h).__name__ for h in handlers if getattr(h, "pipeline_cli", False)] == [
            "_TqdmLoggingHandler"
        ]
        with _log_to_stderr(logging.INFO):
            assert log.handlers == handlers
            for _ in progress.steps(range(2), "bar"):
                log.info("a line while a bar runs")
    assert capsys.readouterr().err.count("a line while a bar runs") == 2
    assert not any(getattr(h, "pipeline_cli", False) for h in log.handlers)


def test_negatives_reports_each_survey_batch(
    tmp_path: Path, plain_every_step: None, caplog: pytest.LogCaptureFixture
) -> None:
    build_handmade(tmp_path)
    with caplog.at_level(logging.INFO, "pipeline"):
        run_stage(tmp_path, "negatives", _cfg(survey_batch_size=1))
    lines = [r.getMessage().rsplit(",", 1)[0] for r in caplog.records]
    batches = [line for line in lines if line.startswith("negatives: survey batches:")]
    assert len(batches) == 4 and batches[-1] == "negatives: survey batches: 4 of 4 done"


def test_reduce_stages_say_when_they_start_and_end_and_works_reports_each_file(
    tmp_path: Path, plain_every_step: None, caplog: pytest.LogCaptureFixture
) -> None:
    extract_sample(tmp_path)
    with caplog.at_level(logging.INFO, "pipeline"):
        run_stages(tmp_path, "works")
    lines = [r.getMessage() for r in caplog.records]
    assert "works: running (reads extract)" in lines
    assert any(line.startswith("works: done in ") for line in lines)
    for n in (1, 2, 3):
        assert any(
            line.startswith(f"works: pass {n}/3 ") and "1 of 1 done" in line for line in lines
        )


def test_the_progress_channel_reaches_the_bar_in_process_and_from_a_worker() -> None:
    """In the process that holds the bar a call updates it; the channel a worker is handed
    (``to_parent``, pickled into the worker as it starts) holds no bar and puts on the
    queue, which the parent drains into the bar."""
    import queue

    from pipeline.engine.progress import ProgressChannel

    class Bar:
        def __init__(self) -> None:
            self.updates: list[tuple[int, int, int]] = []

        def update(self, papers: int, nbytes: int, rejects: int) -> None:
            self.updates.append((papers, nbytes, rejects))

    bar = Bar()
    ProgressChannel(bar)(3, 100, 1)  # type: ignore[arg-type]
    assert bar.updates == [(3, 100, 1)]
    channel = ProgressChannel(bar, queue.Queue())  # type: ignore[arg-type]
    worker = channel.to_parent()
    assert worker.bar is None
    worker(2, 50, 0)
    worker(1, 10, 2)
    assert bar.updates == [(3, 100, 1)]  # nothing reaches the bar until it is drained
    channel.drain()
    assert bar.updates == [(3, 100, 1), (2, 50, 0), (1, 10, 2)]
    ProgressChannel(None)(1, 1, 1)  # a channel with neither reports nowhere, silently
