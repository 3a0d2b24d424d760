"""Fixtures of the history tests: a project folder whose asv config points at results/asv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with an asv.conf.json whose results live in results/asv (no git repository)."""
    config = {
        "version": 1,
        "project": "tierbench",
        "repo": ".",
        "benchmark_dir": "suite/benchmarks",
        "results_dir": "results/asv",
        "html_dir": "results/html/history",
    }
    (tmp_path / "asv.conf.json").write_text(json.dumps(config))
    return tmp_path
