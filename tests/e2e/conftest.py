"""End-to-end fixtures: a bare git repository on disk as the forge's remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.support import origin
from tests.tools.conftest import Remote


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return origin(tmp_path)
