"""Shared fixtures: the repo's sample data and fresh stores."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_data"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"
