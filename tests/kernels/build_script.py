"""Runs one of this folder's build scripts (the kernels compiled ahead of time for sm_90, no GPU needed) in a
fresh process without Triton's interpreter, which the test session has on and which compiles nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_build_script(name: str, timeout: int = 300) -> dict:
    """The JSON report the script prints; fails the test with its stderr if it fails."""
    script = Path(__file__).with_name(name)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
