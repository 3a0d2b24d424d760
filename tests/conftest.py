"""Shared fixtures: Hydra composition of the real config tree, and a CPU run context."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent

if not torch.cuda.is_available():
    # Triton kernels run through the interpreter on a CPU; set before anything imports tierbench.kernels.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible to PyTorch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cpu_ctx(tmp_path):
    """A run context on the CPU writing into tmp_path, with the tests' fast timing (tests/cpu_run.py, whose
    cpu_context builds one with other fields)."""
    from cpu_run import cpu_context

    return cpu_context(tmp_path)


@pytest.fixture(scope="session")
def catalog():
    """The built-in catalog (no plugins): every family, tier and provider tierbench ships."""
    from tierbench.suite.catalog import build

    return build(entry_points=False)


@pytest.fixture
def providers(catalog):
    """providers(op, name=None): the built-in providers of an op (default compile modes), or one by name."""

    def find(op: str, name: str | None = None):
        found = [p for p in catalog.providers() if p.op == op and (name is None or p.name == name)]
        return found[0] if name is not None else found

    return find


@pytest.fixture
def compose(catalog):
    """compose(overrides) -> the run config exactly as `tierbench run` would build it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tierbench.suite.commands.run_command import conf_dir
    from tierbench.suite.config import register_configs

    register_configs(catalog.families)

    def _compose(overrides: list[str] | None = None):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=overrides or [])

    yield _compose
    GlobalHydra.instance().clear()
