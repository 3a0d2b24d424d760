"""The main job (.ci/main) builds the site every time, and fails when it cannot.

The job runs in a copy of the repository's .ci/ whose setup and tierbench are stand-ins that log what
they are asked: a stand-in `tierbench --help` that keeps writing after its reader has gone dies of a
broken pipe, as the real one does with PYTHONUNBUFFERED=1, so a job that decides whether to build the
site from `--help | grep` would skip it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

TIERBENCH = """#!/usr/bin/env bash
echo "$*" >> "$TB_LOG"
case "$1" in
  --help) echo "usage: tierbench {run,report}"; echo "  report     build the site"; sleep 0.3
          for i in $(seq 1 5000); do echo "more help $i"; done ;;
  report) exit "${REPORT_EXIT:-0}" ;;
esac
"""


@pytest.fixture
def job(tmp_path):
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "main", tmp_path / ".ci" / "main")
    (tmp_path / ".ci" / "setup").write_text("#!/usr/bin/env bash\nexit 0\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("#!/usr/bin/env bash\nexit 1\n")  # no CUDA GPU here
    (bin_dir / "tierbench").write_text(TIERBENCH)
    for stub in ("python", "tierbench"):
        (bin_dir / stub).chmod(0o755)
    log = tmp_path / "calls.log"

    def run(report_exit: int = 0) -> tuple[subprocess.CompletedProcess, list[str]]:
        env = {**os.environ, "TB_LOG": str(log), "REPORT_EXIT": str(report_exit), "PYTHONUNBUFFERED": "1"}
        result = subprocess.run(
            ["bash", str(tmp_path / ".ci" / "main")], capture_output=True, text=True, env=env, timeout=60
        )
        calls = log.read_text().splitlines() if log.exists() else []
        return result, calls

    return run


def test_the_main_job_always_builds_the_site(job):
    result, calls = job()
    assert result.returncode == 0, result.stderr
    assert calls[0] == "run suite=smoke" and "report" in calls, calls


def test_the_main_job_fails_when_the_site_cannot_be_built(job):
    result, calls = job(report_exit=3)
    assert "report" in calls
    assert result.returncode != 0 and "building the site (tierbench report) failed" in result.stderr


def test_a_reader_that_goes_away_is_no_traceback(tmp_path):
    """`tierbench --help | grep -q` with unbuffered output: the reader leaves early, tierbench says nothing."""
    exe = shutil.which("tierbench") or str(Path(sys.executable).parent / "tierbench")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    read, write = os.pipe()
    os.close(read)  # nobody reads: the first write breaks the pipe
    try:
        result = subprocess.run([exe, "--help"], stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    finally:
        os.close(write)
    assert result.returncode == 141 and "Traceback" not in result.stderr and result.stderr == ""
