"""The dataset card: its YAML read by huggingface_hub's card tools (offline), what a
Hugging Face user looks for first, no placeholder once configured, no judgment among the
inputs, the results table equal to ``eval_results.json``, every number traced to the
metadata, and an evaluation command that works on the downloaded dataset."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import DatasetCard, DatasetCardData

from pipeline.cli import main
from pipeline.core import schema as S
from pipeline.hub import card as C
from pipeline.hub.card import SOURCE_DATASET, card_values, render_card, size_category
from pipeline.hub.publish import release_files
from tests.test_negatives import synthetic_release_dir


@pytest.fixture
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory)


@pytest.fixture
def release(work: Path) -> Path:
    return work / "release"


def _meta(release: Path) -> dict[str, Any]:
    return json.loads((release / "eval_metadata.json").read_text())


def _card(release: Path) -> str:
    return (release / "README.md").read_text(encoding="utf-8")


def _body(card: str) -> str:
    """The card after its YAML front matter: what the Hub shows."""
    return card.split("\n---\n", 1)[1]


def test_card_yaml_is_valid_for_the_hub(release: Path) -> None:
    card = DatasetCard(_card(release))
    data = card.data
    assert isinstance(data, DatasetCardData)
    assert data.pretty_name == "survey-reading-lists"
    assert data.license == "cc-by-sa-4.0"
    assert data.source_datasets == [SOURCE_DATASET] == ["ines-besrour/unarxive_2024"]
    assert data.annotations_creators == ["machine-generated"]
    assert data.language == ["en"] and data.multilinguality == ["monolingual"]
    assert {"text-retrieval", "text-ranking"} <= set(data.task_categories)
    assert "synthetic" in data.tags  # this release is built from synth's corpus
    meta = _meta(release)
    rows = sum(meta["splits"][s]["rows"] for s in S.SPLIT_NAMES)
    assert data.size_categories == [size_category(rows)]
    configs = {c["config_name"]: c for c in data.configs}
    assert set(configs) == {name for name, _, _ in C.CARD_CONFIGS}
    assert [c for c in configs if configs[c].get("default")] == ["qrels"]
    for config in configs.values():
        for files in config["data_files"]:
            assert (release / files["path"]).is_file()
    # the card data round-trips through huggingface_hub's own YAML writer
    again = DatasetCardData(**data.to_dict())
    assert again.to_dict() == data.to_dict()
    assert DatasetCard(f"---\n{again.to_yaml()}\n---\n").data.to_dict() == data.to_dict()


def test_a_synthetic_release_says_so_at_the_top(release: Path) -> None:
    meta = _meta(release)
    prov = meta["provenance"]
    assert prov["verdict"] == "synthetic" and prov["synthetic_papers"] == prov["papers"] > 0
    assert prov["generators"] == {"pipeline.synth": prov["papers"]}
    body = _body(_card(release)).strip().splitlines()
    assert body[0].startswith("# ") and body[1] == ""
    assert body[2].startswith("> **SYNTHETIC DATA. NOT A BENCHMARK OF REAL PAPERS.**")
    assert f"{prov['synthetic_papers']:,} of the {prov['papers']:,} papers" in body[2]
    card = _card(release)
    assert "mined from the full text of arXiv" not in card
    assert "Mined from the Full Text of arXiv" not in card  # nor its citation


def test_card_has_what_hub_users_look_for(release: Path) -> None:
    card = _card(release)
    body = _body(card)
    assert 'load_dataset("OWNER/survey-reading-lists", "candidates", split="eval")' in card
    # the load_dataset snippet, then the evaluate command, come first
    assert body.index("load_dataset(") < body.index("python -m pipeline evaluate --release")
    assert body.index("python -m pipeline evaluate --release") < body.index("## What is in it")
    # the example row is valid JSON with every reading_lists column, showing a judgment and text
    example = card.split("```json\n", 1)[1].split("\n```", 1)[0]
    row = json.loads(example)
    assert list(row) == [f.name for f in S.READING_LISTS]
    assert row[S.LABEL] >= 3
    for column in (S.SURVEY_TITLE, S.SURVEY_ABSTRACT, S.CANDIDATE_TITLE, S.CANDIDATE_ABSTRACT):
        assert row[column], column
    for heading in ("## Uses", "## Limitations and biases", "## Personal data", "## Licence",
                    "## Citation", "## Contact", "## Dates", "## Labels"):  # fmt: skip
        assert f"\n{heading}\n" in card, heading
    assert card.count("## Dates") == 1 and "first version date" not in card
    assert "leakage audit" not in card.lower()  # one section is the leak audit (METHODS.md)
    assert "@misc{survey_reading_lists" in card and "Saier" in card and "Besrour" in card
    assert "huggingface.co/datasets/ines-besrour/unarxive_2024" in card
    assert "`survey_license`, `candidate_license`" in card
    # the reference detail is in collapsed sections and in METHODS.md beside the card
    assert card.count("<details>") == card.count("</details>") >= 4
    methods = (release / C.METHODS_FILE).read_text(encoding="utf-8")
    for needle in ("Appendices are back matter", "2024 layout", "Threats to validity"):
        assert needle in methods
    assert "## Leak audit" in methods and "## Split and date checks" in methods
    assert C.METHODS_FILE in [rel for rel, _ in release_files(release)]  # push publishes it


def test_no_judgment_column_among_the_inputs(release: Path) -> None:
    """The field table marks every column, and no column of a view a system reads is a
    judgment: not in the schema, not in the written files, not on the card."""
    import pyarrow.parquet as pq

    from pipeline.core.release_files import beir_file

    inputs = {"candidates": S.CANDIDATES_VIEW, "queries": S.BEIR_QUERIES, "corpus": S.BEIR_CORPUS}
    for name, schema in inputs.items():
        assert not set(schema.names) & (S.JUDGMENT_COLUMNS | S.LICENSE_COLUMNS), name
        for split in _meta(release)["splits_written"]:
            path = release / (
                beir_file(name, split) if name != "candidates" else f"{name}/{split}.parquet"
            )
            assert pq.read_schema(path).names == schema.names, path
    assert (
        S.HAS_NEGATIVES not in S.BEIR_QUERIES.names
        and S.FIRST_VERSION_DATE not in S.BEIR_QUERIES.names
    )
    table = C.field_table().splitlines()[2:]
    seen: dict[str, set[str]] = {}
    for line in table:
        configs, column, _type, role, doc = (c.strip() for c in line.strip("|").split(" | "))
        assert doc, line  # every column says what it holds
        for config in re.findall(r"`([a-z_]+)`", configs):
            seen.setdefault(config, set()).add(column.strip("`"))
            if config in inputs:
                assert role == "input", line
        name = column.strip("`")
        assert role == ("**judgment**" if name in S.JUDGMENT_COLUMNS else
                        "licence" if name in S.LICENSE_COLUMNS else "input"), line  # fmt: skip
    for config, _, schema_name in C.CARD_CONFIGS:
        assert seen[config] == set(getattr(S, schema_name).names), config
    assert "\n".join(table) in _card(release)


def test_no_placeholder_once_the_config_names_repo_authors_and_year(release: Path) -> None:
    meta = _meta(release)
    card = _card(release)
    problem = C.publish_problem(card, meta, "someone/reading-lists")
    assert problem is not None
    assert "OWNER/" in problem and "{AUTHORS}" in problem and "{YEAR}" in problem
    assert "[release] repo_id, [release] authors, [release] year" in problem
    meta["config"]["release"].update(
        repo_id="someone/reading-lists", authors=["Doe, Jane", "Roe, Richard"], year=2026,
        contact="https://example.org/contact", code_url="https://example.org/code",
    )  # fmt: skip
    text = C.card_text(meta, meta["splits_written"], release, None)
    assert C.publish_problem(text, meta, "someone/reading-lists") is None
    for placeholder in C.PLACEHOLDERS:
        assert placeholder not in text
    assert 'load_dataset("someone/reading-lists", "candidates"' in text
    assert "python -m pipeline evaluate --release someone/reading-lists --run" in text
    assert "author       = {Doe, Jane and Roe, Richard}," in text
    assert "year         = {2026}," in text
    assert "<https://example.org/contact>" in text
    assert (
        "<https://example.org/code>" in text and "url          = {https://example.org/code}" in text
    )
    # a card for one repo is not pushed to another
    other = C.publish_problem(text, meta, "someone/else")
    assert other is not None and "someone/reading-lists" in other and "someone/else" in other


def _table_rows(text: str, header_start: str) -> list[list[str]]:
    lines = text[text.index(header_start) :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return [lines[0].strip("|").split(" | "), *rows]


def test_results_table_equals_eval_results(work: Path, release: Path) -> None:
    results = json.loads((work / "eval" / "eval_results.json").read_text())
    header, *rows = _table_rows(_card(release), "| system |")
    metrics = [h.strip().strip("`") for h in header[1:]]
    assert metrics == results["main_metrics"]
    systems = list(dict.fromkeys(results["baselines"] + results["upper_bounds"]))
    assert [r[0].split("`")[1] for r in rows] == systems
    for row in rows:
        name = row[0].split("`")[1]
        for metric, cell in zip(metrics, row[1:], strict=True):
            s = results["systems"][name][metric]
            mean, lo, hi = (float(x) for x in re.findall(r"[\d.]+", cell))
            assert (mean, lo, hi) == (round(s["mean"], 3), round(s["ci_low"], 3),
                                      round(s["ci_high"], 3)), (name, metric)  # fmt: skip
    assert "(best)" in dict((r[0].split("`")[1], r[0]) for r in rows)[results["best_baseline"]]
    # the results of another eval file are never shown
    meta = _meta(release)
    assert C.read_eval_results(work / "eval" / "eval_results.json", meta) == results
    meta["files"][S.SPLIT_NAMES[-1] + "_survey_reading_lists.parquet"]["sha256"] = "0" * 64
    assert C.read_eval_results(work / "eval" / "eval_results.json", meta) is None
    assert "Not evaluated yet" in C.results_table(None, meta)


# Names with digits in them (a licence, a corpus, the corpus's published citation), not
# figures: masked before the card's numbers are traced.
NAMES = ("unarXive 2024", "unarXive 2022", "CC BY-SA 4.0", "unarxive_2024", "2023 ACM/IEEE",
         "saier2023unarxive", "besrour2024unarxive", "year      = {2023}", "year   = {2024}",
         "by-sa/4.0")  # fmt: skip
_NUMBER = re.compile(r"(?<![\w@.>=<:/+-])\d+(?:,\d{3})*(?:\.\d+)?(?![\w%])")


def _numbers(value: Any) -> set[str]:
    """Every number of a JSON value, in the forms the card writes them."""
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out |= _numbers(k) | _numbers(v)
    elif isinstance(value, list):
        for v in value:
            out |= _numbers(v)
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        out |= {str(value), f"{value:,}"}
    elif isinstance(value, float):
        out |= {str(value), f"{value:.3f}"}
    elif isinstance(value, str):
        out |= set(_NUMBER.findall(value)) | {value}
    return out


def test_every_number_on_the_card_traces_to_the_metadata(work: Path, release: Path) -> None:
    meta = _meta(release)
    results = json.loads((work / "eval" / "eval_results.json").read_text())
    known = _numbers(meta) | _numbers(results) | {str(k) for k in S.LABEL_NAMES}
    for name in ("README.md", C.METHODS_FILE):
        text = (release / name).read_text(encoding="utf-8")
        text = re.sub(r"```json\n.*?\n```", "", text, flags=re.S)  # a row of the data
        # inline code is a name or a literal example (a heading "`2.1`", a rule "`3+ mentions`",
        # a sha256), never a figure
        text = re.sub(r"`[^`\n]*`", "", text)
        for fixed in NAMES:
            text = text.replace(fixed, "")
        for date in re.findall(r"\d{4}-\d{2}-\d{2}", text):
            assert date in known, (name, date)
        text = re.sub(r"\d{4}-\d{2}-\d{2}", "", text)
        stray = sorted(n for n in set(_NUMBER.findall(text)) if n not in known)
        assert stray == [], (name, stray)


def test_card_links_its_tier_distribution_figure(release: Path, tmp_path: Path) -> None:
    from pipeline.hub.card import TIER_FIGURE, tier_distribution_figure

    card = _card(release)
    assert f"]({TIER_FIGURE})" in card
    png = release / TIER_FIGURE
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert TIER_FIGURE in [rel for rel, _ in release_files(release)]  # push publishes it
    # drawn from eval_metadata.json alone: the same metadata gives the same bytes
    tier_distribution_figure(_meta(release), tmp_path / "again.png")
    assert (tmp_path / "again.png").read_bytes() == png.read_bytes()


def test_the_template_names_only_values_it_is_given(release: Path) -> None:
    meta = _meta(release)
    values = card_values(meta, meta["splits_written"])
    values |= {"example_row": "{}", "results_table": "", "example_aspect": "{}"}
    for template in (C.CARD_TEMPLATE, C.METHODS_TEMPLATE):
        render_card((C.data_cards_dir() / template).read_text(encoding="utf-8"), values)
    with pytest.raises(KeyError, match="has no value"):
        render_card("{not_a_value}", values)


def test_the_card_command_works_on_the_downloaded_dataset(release: Path, tmp_path: Path) -> None:
    """`hf download` gives the publishable files; evaluate reads that folder as the card says."""
    download = tmp_path / "survey-reading-lists"
    for rel, path in release_files(release):
        (download / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, download / rel)
    config = tmp_path / "fast.toml"
    config.write_text("[evaluate]\nbootstrap_samples = 20\nrandom_seeds = 1\n", encoding="utf-8")
    rc = main(["evaluate", "-q", "--release", str(download), "--config", str(config)])
    assert rc == 0
    # written next to the downloaded folder, never into it (it is what push publishes)
    assert (tmp_path / "eval" / "report.md").is_file()
    assert not (download / "eval").exists()


def _tiny_release(folder: Path, value: int) -> None:
    """A folder named ``release`` whose every config file holds one row ``x = value``, and
    a card with the configs the release stage writes for an eval split."""
    import hashlib

    import polars as pl

    from pipeline.core.release_files import (
        CANDIDATES_FILE,
        READING_LISTS_FILE,
        RETRIEVAL_SPLITS,
        beir_file,
    )

    paths = [beir_file(view, "eval") for view in ("qrels", "corpus", "queries", "top_ranked")]
    paths += [CANDIDATES_FILE.format(split="eval"), READING_LISTS_FILE.format(split="eval")]
    files = {}
    for path in paths:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"x": [value]}).write_parquet(folder / path)
        files[path] = {"sha256": hashlib.sha256((folder / path).read_bytes()).hexdigest()}
    assert RETRIEVAL_SPLITS["eval"] == "test"
    yaml = C._configs_yaml(["eval"], [], files)
    (folder / "README.md").write_text(f"---\n{yaml}\n---\n# tiny\n", encoding="utf-8")


def test_two_release_folders_never_share_a_datasets_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``datasets`` keys a local folder's cache by its name and its card's configs: two
    folders named ``release`` (or one rebuilt in place) got the rows of the first one
    loaded, unless the card's configs tell their files apart."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    cache = str(tmp_path / "hf-cache")
    first, second = tmp_path / "a" / "release", tmp_path / "b" / "release"
    _tiny_release(first, 1)
    _tiny_release(second, 2)
    for folder, value in ((first, 1), (second, 2), (first, 1)):
        for config, split in (("candidates", "eval"), ("queries", "test")):
            rows = datasets.load_dataset(str(folder), config, split=split, cache_dir=cache)
            assert rows["x"] == [value], (folder, config)
    _tiny_release(first, 3)  # rebuilt in place
    rows = datasets.load_dataset(str(first), "candidates", split="eval", cache_dir=cache)
    assert rows["x"] == [3]


def test_reason_table_gives_each_reasons_share_per_split(release: Path) -> None:
    meta = _meta(release)
    header, *rows = _table_rows(_body(_card(release)), "| label_reason |")
    assert [h.strip() for h in header[1:]] == [x for s in S.SPLIT_NAMES for x in (s, "share")]
    for i, split in enumerate(S.SPLIT_NAMES):
        reasons = meta["splits"][split]["label_reasons"]
        total = meta["splits"][split]["rows"]
        got = {r[0].strip("`"): (r[1 + 2 * i], r[2 + 2 * i]) for r in rows}
        for reason, n in reasons.items():
            assert got[reason] == (f"{n:,}", f"{n / total:.3f}"), (split, reason)
        assert sum(float(v[1]) for v in got.values() if v[1]) == pytest.approx(1, abs=0.01)


def test_limitations_name_the_textless_section_rate(release: Path) -> None:
    meta = _meta(release)
    limitations = _body(_card(release)).split("## Limitations and biases", 1)[1].split("\n## ")[0]
    textless = meta["roles"]["textless_top_sections"]
    # measured on real records, with its source; and this release's own count (its
    # synthetic records have the 2022 layout)
    assert len(textless["measured"]) == 2
    for c in [*textless["measured"], textless["surveys"], textless["all_papers"]]:
        assert c["top_sections"] > 0
        assert f"{c['textless']:,} of {c['top_sections']:,} (share {c['share']:.3f})" in limitations
    for m in textless["measured"]:
        assert m["source"] in limitations
    assert "has no text of its own" in limitations
    # a release of 2024-layout records says it cannot count its own
    textless = dict(textless, surveys={"top_sections": 0, "textless": 0, "share": None})
    textless["all_papers"] = textless["surveys"]
    line = C.textless_sections(textless)
    assert "2024 layout" in line and "31 of 288" in line
