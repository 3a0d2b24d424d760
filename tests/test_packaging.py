"""The distribution installs tierbench.kernels and tierbench.suite, and never a top-level kernels or suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PROBE = """
import importlib, sys
for name in ("tierbench.kernels", "tierbench.suite", "tierbench.suite.measure.runner", "tierbench.conf"):
    importlib.import_module(name)
importlib.import_module("tierbench.suite.show.site.build")  # the site's pages are a package of their own
for name in ("kernels", "suite", "conf"):
    try:
        importlib.import_module(name)
    except ImportError:
        continue
    sys.exit(f"top-level {name!r} is importable: it would clash with other distributions")
print("ok")
"""


def _probe(cwd: Path, extra_path: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"}
    if extra_path:
        env["PYTHONPATH"] = extra_path
    return subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_current_install_from_outside_the_repo(tmp_path):
    """The install the tests run against (editable in development and CI)."""
    result = _probe(tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


@pytest.mark.slow
def test_regular_install_from_a_built_wheel(tmp_path):
    target = tmp_path / "site"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--verbose",  # the build backend's own output: setuptools' warnings are in it
            "--target",
            str(target),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    warned = [line for line in (build.stdout + build.stderr).splitlines() if "BuildBackendWarning" in line]
    assert not warned, warned  # license as an SPDX string, every data folder listed: a quiet install
    shipped = {
        str(p.relative_to(target / "tierbench" / "conf")) for p in (target / "tierbench" / "conf").rglob("*.yaml")
    }
    assert shipped == {str(p.relative_to(REPO / "conf")) for p in (REPO / "conf").rglob("*.yaml")}
    assert (target / "tierbench" / "kernels").is_dir() and (target / "tierbench" / "conf" / "config.yaml").exists()
    mojo = target / "tierbench" / "kernels" / "mojo"  # the portable tier's Mojo source package, compiled where run
    assert {p.name for p in mojo.glob("*.mojo")} == {p.name for p in (REPO / "kernels" / "mojo").glob("*.mojo")}
    assert not (target / "kernels").exists() and not (target / "suite").exists()
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    result = _probe(workdir, extra_path=str(target))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_editable_install_maps_the_folders(tmp_path):
    """An editable install resolves tierbench.kernels to the repo's kernels/ folder, without exposing it."""
    code = "import tierbench.suite, tierbench.conf; print(tierbench.suite.__file__); print(tierbench.conf.__file__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    suite_file, conf_file = result.stdout.split()
    if Path(suite_file).resolve().is_relative_to(REPO):
        assert Path(suite_file).resolve() == REPO / "suite" / "__init__.py"
        assert Path(conf_file).resolve() == REPO / "conf" / "__init__.py"
    else:
        pytest.skip("tierbench is not installed in editable mode here")
