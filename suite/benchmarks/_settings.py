"""What the environment asks of the asv suite: which suite and timing, extra overrides, samples kept, where
device ceilings are read, read at import so that discovery and every benchmark process agree.

  TIERBENCH_ASV_SUITE      suite to benchmark: a suite name or `nightly` (default: nightly with a GPU, smoke
                           without)
  TIERBENCH_ASV_TIMING     conf/timing name (default: default with a GPU, quick without)
  TIERBENCH_ASV_OVERRIDES  extra Hydra overrides, shell-quoted, e.g. "providers=[eager] matmul.square=[128]"
  TIERBENCH_ASV_MAX_SAMPLES  samples kept per benchmark and run, evenly over the rounds (default 200)
  TIERBENCH_CEILINGS_DIR   the one folder of measured device ceilings (default: as `tierbench run`: the user's
                           cache, $XDG_CACHE_HOME/tierbench/ceilings, and a tierbench checkout's committed ones)
  TIERBENCH_ASV_BUILD      set by offline history runs: the folder the measured build must be imported from
"""

from __future__ import annotations

import functools
import os
import shlex
from pathlib import Path

SUITE_ENV = "TIERBENCH_ASV_SUITE"
TIMING_ENV = "TIERBENCH_ASV_TIMING"
OVERRIDES_ENV = "TIERBENCH_ASV_OVERRIDES"
MAX_SAMPLES_ENV = "TIERBENCH_ASV_MAX_SAMPLES"
CEILINGS_ENV = "TIERBENCH_CEILINGS_DIR"
BUILD_ENV = "TIERBENCH_ASV_BUILD"
DEFAULT_MAX_SAMPLES = 200
# asv's cap on one setup_cache (a whole family) and on each benchmark process.
TIMEOUT_S = 900

# conf/suite/nightly.yaml as overrides, for builds of commits older than that file (asv runs this suite
# against old builds, whose installed config tree lacks it): the same cases, so the same history series.
# test_history_suite checks that both give identical case ids.
NIGHTLY_OVERRIDES = (
    "suite=all",
    "matmul.dtypes=[bf16]",
    "matmul.square=[4096]",
    "matmul.tokens=[16384]",
    "matmul.models=[{name:llama3-8b,hidden:4096,ffn:14336}]",
    "norm.dtypes=[bf16]",
    "norm.rows=[16384]",
    "norm.hidden=[4096]",
    "attention.dtypes=[bf16]",
    "attention.seq_lens=[2048,8192]",
    "attention.head_dims=[128]",
    "attention.causal=null",
)


@functools.lru_cache(maxsize=1)
def decide_interpreter() -> None:
    """As `tierbench run` decides it, before any Triton kernel (tierbench's or a plugin's) is defined: on a
    CPU, Triton's kernels run through its interpreter (checked, never timed), not into "0 active drivers"."""
    from tierbench.suite.commands.run_command import decide_interpreter as decide

    decide(overrides())


@functools.lru_cache(maxsize=1)
def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def conf_dir() -> str:
    """The installed build's config tree (package tierbench.conf): its YAML defines the cases."""
    import tierbench.conf

    return str(Path(tierbench.conf.__file__).resolve().parent)


def overrides() -> list[str]:
    """Hydra overrides of the asv suite: suite and timing from the environment, then the extra ones."""
    suite = os.environ.get(SUITE_ENV) or ("nightly" if _on_gpu() else "smoke")
    timing = os.environ.get(TIMING_ENV) or ("default" if _on_gpu() else "quick")
    if suite == "nightly" and not (Path(conf_dir()) / "suite" / "nightly.yaml").exists():
        chosen = list(NIGHTLY_OVERRIDES)
    else:
        chosen = [f"suite={suite}"]
    return [*chosen, f"timing={timing}", *shlex.split(os.environ.get(OVERRIDES_ENV, ""))]


def max_samples() -> int:
    raw = os.environ.get(MAX_SAMPLES_ENV, str(DEFAULT_MAX_SAMPLES))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_SAMPLES_ENV}={raw!r} is not a whole number") from None
    return max(3, value)


def ceilings_dir() -> Path | None:
    """The folder of TIERBENCH_CEILINGS_DIR, else None: the folders `tierbench run` uses (suite/ceilings.py),
    where a new measurement goes to the user's cache, never into a checkout."""
    value = os.environ.get(CEILINGS_ENV)
    return Path(value) if value else None
