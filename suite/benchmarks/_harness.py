"""Builds asv benchmarks from the same Hydra config, plan, runner and timer as `tierbench run`.

One class per op family, or per part of one (`where`: attention's causal and non-causal cases are two
classes, so each keeps a history series of its own). Its `setup_cache` (one process per class) measures
every runnable (case, provider) pair through `runner.measure_case`, providers interleaved as in `tierbench run`, and
hands asv the per-repetition timer samples in seconds. Each provider is one `track_<provider>` method
whose params are only the cases it can run here, so asv never starts a process for a combination that
does not apply.

Why a table file: with launch_method "spawn", asv starts one process per parameter combination and each
imports this module to learn the params. Working them out needs torch and the plan (seconds per process),
so `setup_cache` leaves the table in asv's cache folder, the working folder of those processes, and they
read it instead of importing torch.

Environment (read at import, so discovery and every run agree):
  TIERBENCH_ASV_SUITE      suite to benchmark: a conf/suite name or `nightly` (default: nightly with a
                           GPU, smoke without)
  TIERBENCH_ASV_TIMING     conf/timing name (default: default with a GPU, quick without)
  TIERBENCH_ASV_OVERRIDES  extra Hydra overrides, shell-quoted, e.g. "providers=[eager] matmul.square=[128]"
  TIERBENCH_ASV_MAX_SAMPLES  samples kept per benchmark and run, evenly over the rounds (default 200)
  TIERBENCH_CEILINGS_DIR   the one folder of measured device ceilings (default: as `tierbench run`: the user's
                           cache, $XDG_CACHE_HOME/tierbench/ceilings, and a tierbench checkout's committed ones)
  TIERBENCH_ASV_BUILD      set by offline history runs: the folder the measured build must be imported from
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Bump when what a stored sample means changes (unit, thinning, timer semantics): asv then starts a new
# history series instead of mixing old and new numbers.
SCHEMA = "tierbench-asv-1"
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

TABLE_FILE = "tierbench-asv-{name}.json"


@dataclass
class FamilyTable:
    """What asv needs at import: per provider, the labels of the cases it runs here; the version."""

    family: str
    version: str
    labels: dict[str, list[str]]
    fingerprint: str


@functools.lru_cache(maxsize=1)
def decide_interpreter() -> None:
    """As `tierbench run` decides it, before any Triton kernel (tierbench's or a plugin's) is defined: on a
    CPU, Triton's kernels run through its interpreter (checked, never timed), not into "0 active drivers"."""
    from tierbench.suite.run_command import decide_interpreter as decide

    decide(overrides())


def _fingerprint() -> str:
    """Identifies the settings a table was computed under (interpreter, variables that change the plan)."""
    decide_interpreter()
    env = {
        k: v
        for k, v in os.environ.items()
        if k.startswith("TIERBENCH_") or k in ("PYTHONPATH", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES")
    }
    return hashlib.sha256(json.dumps([sys.executable, sorted(env.items())]).encode()).hexdigest()[:16]


def method_name(provider: str) -> str:
    """asv benchmark method of a provider: `track_` plus the name with every non-identifier char as `_`."""
    return "track_" + re.sub(r"\W", "_", provider)


def case_label(case: Any, with_op: bool = False) -> str:
    """A case's asv parameter value: op (when the family has several, or `with_op`), shape label, dtype, mode."""
    parts = [] if case.op == case.family and not with_op else [case.op]
    return " ".join([*parts, case.label, case.params["dtype"], case.params.get("mode", "fwd")])


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


@functools.lru_cache(maxsize=1)
def catalog() -> Any:
    """The catalog of `tierbench run`: built-in families and providers, and the plugins the overrides name."""
    from tierbench.suite.catalog import build
    from tierbench.suite.run_command import plugin_names

    decide_interpreter()
    return build(plugin_names(overrides()))


@functools.lru_cache(maxsize=1)
def compose_config() -> Any:
    """The run config, composed by Hydra's compose API as `tierbench run` would with these overrides."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tierbench.suite.config import register_configs

    register_configs(catalog().families)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        return compose(config_name="config", overrides=overrides())


@functools.lru_cache(maxsize=1)
def _plan() -> tuple[Any, Any, list[tuple[Any, str, Any]]]:
    """(config, device, [(case, label, planned case of its runnable providers)]) of the whole asv suite here.

    A provider whose tier is not comparable here (Triton under its CPU interpreter) is measured as
    `tierbench run` measures it: checked, never timed; its benchmark is an asv skip that says so when its
    result is correct, and a failure naming the error when it is not."""
    from tierbench.suite.plan import PlannedCase, make_plan, resolve_device

    cfg = compose_config()
    device = resolve_device(cfg.device)
    check_build()
    entries = []
    seen: dict[str, str] = {}
    for planned in make_plan(cfg, catalog()):
        case = planned.case
        label = case_label(case, with_op=case.family not in builtin_family_names())
        if label in seen and seen[label] != case.case_id:
            raise ValueError(f"two cases share the asv label {label!r}: {seen[label]} and {case.case_id}")
        seen[label] = case.case_id
        runnable = tuple(p for p in planned.providers if _available(p, case, device))
        # A build older than composite ops plans no parts (and its PlannedCase has no part_of).
        part_of = getattr(planned, "part_of", "")
        entries.append((case, label, PlannedCase(case, planned.op, runnable, *([part_of] if part_of else []))))
    return cfg, device, entries


def _available(provider: Any, case: Any, device: Any) -> bool:
    """The provider's own rule; a rule that raises leaves only that provider out (as `tierbench run` does)."""
    try:
        return provider.why_unavailable(case, device) is None
    except Exception:  # noqa: BLE001 - a broken rule must not take the whole suite down at import
        return False


def selection_name(family: str, where: Mapping[str, Any] | None = None) -> str:
    """Names a class's cases: the family, then each case parameter it is restricted to (`attention-causal-False`)."""
    return "-".join([family, *(f"{k}-{v}" for k, v in sorted((where or {}).items()))])


# The family name of the class that measures every family the plugins add (benchmarks/plugins.py).
PLUGINS = "plugins"


@functools.lru_cache(maxsize=1)
def builtin_family_names() -> frozenset[str]:
    from tierbench.suite.ops import builtin_families

    return frozenset(f.name for f in builtin_families())


def _in_family(case: Any, family: str) -> bool:
    return case.family not in builtin_family_names() if family == PLUGINS else case.family == family


# What a case parameter is when a build's cases lack it: builds from before the passes measured the forward.
PARAM_DEFAULTS = {"mode": "fwd"}


def selects(case: Any, where: Mapping[str, Any] | None) -> bool:
    """Whether a case holds the `where` values: its parameters (a parameter its build lacks at its default),
    and `op` its op's name."""
    return all(
        (case.op if k == "op" else case.params.get(k, PARAM_DEFAULTS.get(k))) == v for k, v in (where or {}).items()
    )


def _family_entries(family: str, where: Mapping[str, Any] | None = None) -> list[tuple[Any, str, Any]]:
    """The family's planned cases that hold the `where` values (PLUGINS: the plugins' families). A model
    block's parts are measured for its class (they make its best mix), never series of their own families'
    classes: a model named in the suite leaves those classes' cases and versions as they were."""
    return [
        e for e in _plan()[2] if not getattr(e[2], "part_of", "") and _in_family(e[0], family) and selects(e[0], where)
    ]


def _part_entries(entries: list[tuple[Any, str, Any]]) -> list[tuple[Any, str, Any]]:
    """The planned parts of these entries' composite cases (measured first, tracked by no class)."""
    composites = [pc for _, _, pc in entries if getattr(pc.op, "parts", None)]
    wanted = {part.case.case_id for pc in composites for part in pc.op.parts(pc.case)}
    return [e for e in _plan()[2] if e[0].case_id in wanted]


def max_samples() -> int:
    raw = os.environ.get(MAX_SAMPLES_ENV, str(DEFAULT_MAX_SAMPLES))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_SAMPLES_ENV}={raw!r} is not a whole number") from None
    return max(3, value)


def compute_table(family: str, where: Mapping[str, Any] | None = None) -> FamilyTable:
    cfg, device, _ = _plan()
    entries = _family_entries(family, where)
    labels: dict[str, list[str]] = {}
    for _, label, planned in entries:
        for provider in planned.providers:
            labels.setdefault(provider.name, []).append(label)
    version = series_version([case.case_id for case, _, _ in entries], cfg, device.type)
    return FamilyTable(selection_name(family, where), version, labels, _fingerprint())


def series_version(case_ids: list[str], cfg: Any, device_type: str) -> str:
    """A class's asv version: what the source hash cannot see (the cases from YAML, the timing settings,
    the seed, the device type, the samples kept), so a series restarts exactly when its measurement changes."""
    identity = {
        "schema": SCHEMA,
        "cases": sorted(case_ids),
        "timing": {k: v for k, v in dict(cfg.timing).items() if k != "name"},
        "seed": int(cfg.seed),
        "device": device_type,
        "max_samples": max_samples(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def family_table(family: str, where: Mapping[str, Any] | None = None) -> FamilyTable:
    """The table, from asv's cache folder in a benchmark process, else computed from the plan."""
    name = selection_name(family, where)
    path = Path.cwd() / TABLE_FILE.format(name=name)
    if path.exists() and (Path.cwd() / "cache.pickle").exists():
        try:
            table = FamilyTable(**json.loads(path.read_text()))
            if table.fingerprint == _fingerprint() and table.family == name:
                return table
        except (json.JSONDecodeError, TypeError):
            pass  # a damaged table is computed again
    return compute_table(family, where)


def _thin(values: list[float], keep: int) -> list[float]:
    """At most `keep` values, evenly spaced over the time-ordered list, so every round stays represented."""
    if len(values) <= keep:
        return list(values)
    step = (len(values) - 1) / (keep - 1)
    return [values[round(i * step)] for i in range(keep)]


def ceilings_dir() -> Path | None:
    """The folder of TIERBENCH_CEILINGS_DIR, else None: the folders `tierbench run` uses (suite/ceilings.py),
    where a new measurement goes to the user's cache, never into a checkout."""
    value = os.environ.get(CEILINGS_ENV)
    return Path(value) if value else None


def check_build() -> None:
    """With TIERBENCH_ASV_BUILD set (offline history runs), every tierbench module must come from there.

    A build of an old commit lacks newer modules; an editable install elsewhere on the path would then
    supply them silently and the history would measure a mix of two commits.
    """
    build = os.environ.get(BUILD_ENV)
    if not build:
        return
    root = Path(build).resolve()
    strays = sorted(
        (name, module.__file__)
        for name, module in list(sys.modules.items())
        if name.startswith("tierbench.")
        and getattr(module, "__file__", None)
        and not Path(module.__file__).resolve().is_relative_to(root)
    )
    if strays:
        listed = ", ".join(f"{name} ({path})" for name, path in strays[:5])
        raise ImportError(
            f"{BUILD_ENV}={build} but tierbench modules come from elsewhere: {listed}"
            f"{' ...' if len(strays) > 5 else ''}; the build lacks them or another install shadows it"
        )


def measure_family(family: str, where: Mapping[str, Any] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Measure every runnable (case, provider) of a family (of its `where` cases) through the session-level
    `Measurer` of `tierbench run`: {(label, provider): status, reason, samples_s}."""
    import torch

    from tierbench.suite.plan import timing_settings
    from tierbench.suite.session import Measurer

    cfg, device, _ = _plan()
    check_build()
    table = compute_table(family, where)
    (Path.cwd() / TABLE_FILE.format(name=table.family)).write_text(json.dumps(asdict(table)))
    entries = [(label, planned) for _, label, planned in _family_entries(family, where) if planned.providers]
    if not entries:
        return {}
    measurer = Measurer.open(
        device,
        timing_settings(cfg.timing),
        ceilings_dir(),
        run_id="asv",
        run_dir=Path.cwd(),
        seed=int(cfg.seed),
        suite=str(cfg.suite),
        tiers=catalog().tiers,
    )
    keep = max_samples()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    # A model block's parts first, through the same session: its best mix is chosen from their records.
    for _, _, planned in _part_entries(_family_entries(family, where)):
        for _ in measurer.measure(planned):
            pass
    for label, planned in entries:
        for record in measurer.measure(planned):
            out[(label, record.provider)] = {
                "status": record.status,
                "reason": record.reason,
                "samples_s": _thin([ms * 1e-3 for ms in record.samples_ms], keep),
            }
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return out


class FamilyBenchmark:
    """Base of the per-family classes; `finish_class` adds one track method per provider."""

    family = ""
    # Only the family's cases whose parameters (and `op`, the op's name) hold these values; all when empty.
    where: dict[str, Any] = {}
    unit = "seconds"
    param_names = ["case"]
    timeout = TIMEOUT_S
    version = ""


def _track(provider: str, labels: list[str]):
    def track(self: FamilyBenchmark, cache: dict[tuple[str, str], dict[str, Any]], label: str) -> dict:
        from asv_runner.benchmarks.mark import SkipNotImplemented

        entry = cache.get((label, provider))
        if entry is None:
            raise RuntimeError(f"{provider} on {label}: not measured (the setup_cache plan differs)")
        if entry["status"] == "skipped":
            raise SkipNotImplemented(entry["reason"])
        if entry["status"] != "ok":
            raise RuntimeError(f"{provider} on {label}: {entry['status']}: {entry['reason']}")
        return {"samples": entry["samples_s"], "number": 1}

    track.__name__ = method_name(provider)
    track.params = [labels]
    track.param_names = ["case"]
    return track


def finish_class(cls: type[FamilyBenchmark]) -> type[FamilyBenchmark]:
    """Set the version and add `track_<provider>` for each provider of the catalog (built-in or a plugin's)
    with runnable cases here: a provider that joins the catalog joins the history, with no list to edit, and
    the series of the others keep their names and versions (a version is the cases', not the providers')."""
    table = family_table(cls.family, cls.where)
    cls.version = table.version
    for provider, labels in table.labels.items():
        name = method_name(provider)
        if hasattr(cls, name):
            raise ValueError(f"{cls.__name__}: two providers map to the method {name}")
        setattr(cls, name, _track(provider, labels))
    return cls
