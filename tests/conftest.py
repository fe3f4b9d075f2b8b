"""Shared fixtures: real unarXive records copied into tests/fixtures (see SOURCE.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE_2022 = FIXTURES / "unarxive-2022-sample" / "arXiv_src_2212_086.jsonl.gz"
PREVIEW_2024 = FIXTURES / "unarxive-2024-preview" / "preview.jsonl"
SURVEY_ID = "2212.11774"


@pytest.fixture(scope="session")
def sample_lines() -> list[bytes]:
    """The 49 real 2022-layout records, one JSON line each."""
    with gzip.open(SAMPLE_2022, "rb") as f:
        return [line.rstrip(b"\n") for line in f if line.strip()]


@pytest.fixture(scope="session")
def sample_records(sample_lines: list[bytes]) -> list[dict]:
    return [json.loads(line) for line in sample_lines]
