"""The dataset card: its YAML read by huggingface_hub's card tools (offline), what a
Hugging Face user looks for first, and an evaluation command that works on the
downloaded dataset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard, DatasetCardData

from pipeline import schema as S
from pipeline.card import SOURCE_DATASET, card_values, render_card, size_category
from pipeline.cli import main
from pipeline.publish import release_files
from tests.test_negatives import synthetic_release_dir


@pytest.fixture
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory) / "release"


def test_card_yaml_is_valid_for_the_hub(release: Path) -> None:
    card = DatasetCard((release / "README.md").read_text(encoding="utf-8"))
    data = card.data
    assert isinstance(data, DatasetCardData)
    assert data.pretty_name == "survey-reading-lists"
    assert data.license == "cc-by-sa-4.0"
    assert data.source_datasets == [SOURCE_DATASET] == ["ines-besrour/unarxive_2024"]
    assert data.annotations_creators == ["machine-generated"]
    assert data.language == ["en"] and data.multilinguality == ["monolingual"]
    assert {"text-retrieval", "text-ranking"} <= set(data.task_categories)
    meta = json.loads((release / "eval_metadata.json").read_text())
    rows = sum(meta["splits"][s]["rows"] for s in S.SPLIT_NAMES)
    assert data.size_categories == [size_category(rows)]
    configs = {c["config_name"]: c for c in data.configs}
    assert set(configs) == {
        "reading_lists",
        "candidates",
        "queries",
        "corpus",
        "qrels",
        "top_ranked",
    }
    for config in configs.values():
        for files in config["data_files"]:
            assert (release / files["path"]).is_file()
    # the card data round-trips through huggingface_hub's own YAML writer
    again = DatasetCardData(**data.to_dict())
    assert again.to_dict() == data.to_dict()
    assert DatasetCard(f"---\n{again.to_yaml()}\n---\n").data.to_dict() == data.to_dict()


def test_card_has_what_hub_users_look_for(release: Path) -> None:
    card = (release / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("OWNER/survey-reading-lists", "candidates", split="eval")' in card
    # the example row is valid JSON with every reading_lists column, showing a judgment
    example = card.split("```json\n", 1)[1].split("\n```", 1)[0]
    row = json.loads(example)
    assert list(row) == [f.name for f in S.READING_LISTS]
    assert row[S.LABEL] >= 3
    # the field table, generated from the schema, with types and input/judgment marks
    for f in S.CANDIDATES_VIEW:
        assert f"| `candidates` | `{f.name}` | {f.type} | input |" in card
    assert "## Evaluation protocol" in card
    assert "python -m pipeline evaluate --eval-file survey-reading-lists --run" in card
    assert "@misc{survey_reading_lists" in card and "Saier" in card and "Besrour" in card
    assert "huggingface.co/datasets/ines-besrour/unarxive_2024" in card
    # section structure and roles, spliced from the issue-11 notes, without measured figures
    for needle in ("Appendices are back matter", "2024 layout", "Threats to validity"):
        assert needle in card
    assert "label_reason" in card


def test_card_links_its_tier_distribution_figure(release: Path, tmp_path: Path) -> None:
    from pipeline.card import TIER_FIGURE, tier_distribution_figure

    card = (release / "README.md").read_text(encoding="utf-8")
    assert f"]({TIER_FIGURE})" in card
    png = release / TIER_FIGURE
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert TIER_FIGURE in [rel for rel, _ in release_files(release)]  # push publishes it
    # drawn from eval_metadata.json alone: the same metadata gives the same bytes
    meta = json.loads((release / "eval_metadata.json").read_text())
    tier_distribution_figure(meta, tmp_path / "again.png")
    assert (tmp_path / "again.png").read_bytes() == png.read_bytes()


def test_repo_id_and_code_url_come_from_the_config(release: Path) -> None:
    meta = json.loads((release / "eval_metadata.json").read_text())
    meta["config"]["release"]["repo_id"] = "someone/reading-lists"
    meta["config"]["release"]["code_url"] = "https://example.org/code"
    values = card_values(meta, ["train", "eval"])
    values["example_row"] = "{}"
    from pipeline.card import CARD_TEMPLATE, data_cards_dir

    card = render_card((data_cards_dir() / CARD_TEMPLATE).read_text(encoding="utf-8"), values)
    assert 'load_dataset("someone/reading-lists", "candidates"' in card
    assert "hf download someone/reading-lists --repo-type dataset" in card
    assert (
        "<https://example.org/code>" in card and "url          = {https://example.org/code}" in card
    )
    assert "OWNER/" not in card


def test_the_card_command_works_on_the_downloaded_dataset(release: Path, tmp_path: Path) -> None:
    """`hf download` gives the publishable files; evaluate reads that folder as the card says."""
    download = tmp_path / "survey-reading-lists"
    for rel, path in release_files(release):
        (download / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, download / rel)
    config = tmp_path / "fast.toml"
    config.write_text("[evaluate]\nbootstrap_samples = 20\nrandom_seeds = 1\n", encoding="utf-8")
    rc = main(["evaluate", "-q", "--eval-file", str(download), "--config", str(config)])
    assert rc == 0
    # written next to the downloaded folder, never into it (it is what push publishes)
    assert (tmp_path / "eval" / "report.md").is_file()
    assert not (download / "eval").exists()
