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
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
