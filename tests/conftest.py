"""Shared fixtures for the CPU test suite (GPU fixtures live in tests/gpu/conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout under test (SConstruct, site_scons/, rules/, src/)."""
    return REPO_ROOT
