"""The MTEB bundle's reference results beside the project's evaluator's
(:mod:`pipeline.integrations.mteb_agreement`), and their section on the release's card
(:func:`pipeline.hub.card.with_mteb_section`): hand-made inputs, no MTEB needed. The bundle
end to end on the demo release is in ``tests/test_mteb_integration.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.hub.card import MTEB_END, MTEB_START, mteb_section, with_mteb_section
from pipeline.integrations.mteb_agreement import agreement, prediction_run


def test_a_prediction_file_is_read_in_pytrec_evals_order(tmp_path: Path) -> None:
    """Equal scores rank by document id, descending (pytrec_eval's rule, which MTEB's
    scores follow); the run's scores are minus the ranks, so no tie is left."""
    path = tmp_path / "TaskPredictions.json"
    ranked = {"q1": {"d1": 0.5, "d3": 0.5, "d2": 0.9, "d0": 0.1}, "q2": {"x": 0.0, "y": 0.0}}
    path.write_text(json.dumps({"mteb_model_meta": {}, "default": {"test": ranked}}))
    run = prediction_run(path)
    assert run.rows() == [
        ("q1", "d2", -1.0), ("q1", "d3", -2.0), ("q1", "d1", -3.0), ("q1", "d0", -4.0),
        ("q2", "y", -1.0), ("q2", "x", -2.0),
    ]  # fmt: skip


def test_agreement_is_within_the_tolerance() -> None:
    assert agreement("m", "t", 0.12345, 0.123449).agree
    assert not agreement("m", "t", 0.1235, 0.1233).agree


CARD = "# Name\n\n## Evaluate your model\n\n| a | b |\n\n## What is in it\n\nrows\n"


def test_the_card_section_is_inserted_once_and_replaced() -> None:
    first = with_mteb_section(CARD, "### MTEB\n\n| 0.10000 |")
    assert first.index("| a | b |") < first.index(MTEB_START) < first.index("## What is in it")
    assert mteb_section(first) == "### MTEB\n\n| 0.10000 |"
    second = with_mteb_section(first, "### MTEB\n\n| 0.20000 |")
    assert second.count(MTEB_START) == second.count(MTEB_END) == 1
    assert "0.10000" not in second and mteb_section(second) == "### MTEB\n\n| 0.20000 |"
    assert with_mteb_section(second, "### MTEB\n\n| 0.10000 |") == first
    # nothing else of the card changes: without its section it is the card it was
    start, end = first.index(MTEB_START), first.index(MTEB_END) + len(MTEB_END) + 2
    assert first[:start] + first[end:] == CARD
    assert mteb_section(CARD) is None


def test_the_bundle_exits_1_and_names_a_figure_that_disagrees(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.integrations import mteb_bundle

    rows = [agreement("mteb/baseline-bm25s", "XRetrieval", 0.5, 0.4), agreement("m", "t", 0.1, 0.1)]
    seen: dict = {}

    def write_bundle(release: str, out: str, **options: object) -> dict:
        seen.update(options)
        return {"checks_passed": {"XRetrieval": True}, "reference": [r.as_dict() for r in rows],
                "agree": False, "card": None}  # fmt: skip

    monkeypatch.setattr(mteb_bundle, "write_bundle", write_bundle)
    argv = ["--release", "r", "--out", "o", "--no-lite", "--card", "--no-own-run"]
    assert mteb_bundle.main(argv) == 1
    assert seen["card"] is True and seen["own_runs"] is False
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "mteb_bundle: mteb/baseline-bm25s on XRetrieval: MTEB's nDCG@10 0.50000, the project's "
        "0.40000 for the same ranking",
        "mteb_bundle: the card is not written: a figure disagrees",
    ]


def test_card_that_is_no_text_ends_in_one_line(tmp_path) -> None:
    """A release card that is binary, or missing, is named in one MtebError; nothing is
    written and the release's record is left as it was."""
    import pytest

    from pipeline.engine import workdir as W
    from pipeline.integrations import mteb as M
    from pipeline.integrations.mteb_bundle import CARD_FILE, write_card

    release = tmp_path / "out" / W.RELEASE
    release.mkdir(parents=True)
    (release / CARD_FILE).write_bytes(b"\xff\xfe\x00binary card")
    record = {"files": {CARD_FILE: {"bytes": 15}}}
    (release / W.SUCCESS).write_text(json.dumps(record))
    assert W.release_records(release) is not None  # past the folder check
    before = (release / W.SUCCESS).read_bytes()
    with pytest.raises(M.MtebError, match="cannot read the card .*README.md"):
        write_card(release, "| a | b |")
    assert (release / CARD_FILE).read_bytes() == b"\xff\xfe\x00binary card"
    assert (release / W.SUCCESS).read_bytes() == before
    (release / CARD_FILE).unlink()
    with pytest.raises(M.MtebError, match="cannot read the card"):
        write_card(release, "| a | b |")
