"""Fixtures of the site's tests; the fakes themselves are in sitefakes.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sitefakes import CEILINGS


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """An empty results tree: runs, ceilings (with the synthetic H100's), asv, html."""
    paths = {k: tmp_path / k for k in ("runs", "ceilings", "asv", "html")}
    paths["runs"].mkdir()
    paths["ceilings"].mkdir()
    (paths["ceilings"] / "nvidia-h100-80gb-hbm3.json").write_text(json.dumps(CEILINGS))
    return paths
