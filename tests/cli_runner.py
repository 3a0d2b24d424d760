"""Runs the installed `tierbench` console command in a subprocess, as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def tierbench_cli(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None):
    """Runs the installed console command, as a user would."""
    exe = shutil.which("tierbench") or str(Path(sys.executable).parent / "tierbench")
    # A package imported from its source folder (PYTHONPATH, no install) has no console script: its module.
    command = [exe] if Path(exe).exists() else [sys.executable, "-m", "tierbench.suite.cli"]
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
