"""Structured-config schema for `tierbench run`.

The schema is the run's own keys plus one section per op family, each family's dataclass (declared in
its op module, or in a plugin's), so that a wrong key, a wrong type or a value outside an enum fails at
composition, with a message that names the valid choices. It is registered in Hydra's ConfigStore as
`run_schema` once the catalog (built-in and plugin families) is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

from tierbench.timing import TimingSettings

from .ops import builtin_families
from .ops.base import Family
from .store.reading import RUNS_ROOT

# Generous enough for a compiler's autotuning of one large shape, short enough that a hung provider costs
# minutes, not the night.
DEFAULT_TIME_LIMIT_S = 600.0


class Device(Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


class CompileMode(Enum):
    default = "default"
    max_autotune = "max-autotune"


class Metric(Enum):
    """Measurements beyond the timed ones, asked for with `metrics=[...]` (the kernels each call launches
    are always counted: one profiled call, outside timing)."""

    # Device-memory bytes per call from Nsight Compute's DRAM counters: replays kernels, so slow; GPU only.
    traffic = "traffic"


class Isolation(Enum):
    """Where providers run while a run measures them (suite/measure/isolation.py)."""

    process = "process"
    none = "none"


@dataclass
class CompilerConf:
    # torch.compile modes, one `compile` provider each (max_autotune: `compile-max-autotune`).
    modes: list[CompileMode] = field(default_factory=lambda: [CompileMode.default])
    # Compile once per shape family with symbolic sizes instead of once per shape.
    dynamic: bool = False


@dataclass
class ShardConf:
    """Which part of a sweep this job measures (composed by `devices=`; or by hand in a --multirun)."""

    index: int = 0
    count: int = 1
    # The id every shard of one sweep shares (their runs form one logical run).
    sweep: str | None = None
    # 0 for the sweep's first launch; each resume of the sweep is the next launch.
    launch: int = 0


@dataclass
class RunBase:
    # Which cases: a config group of conf/suite/ (its family sections set the shapes).
    suite: str = "???"
    # auto: a CUDA GPU where PyTorch sees one, else the CPU (Triton's kernels then checked, never timed).
    device: Device = Device.auto
    # Tier names to run: of the built-in vendor, compiler, triton, cuda, portable and any a plugin declares (checked by
    # the plan); empty runs every tier.
    tiers: list[str] = field(default_factory=list)
    # Optional allow-list of provider names; empty runs every provider of the selected tiers.
    providers: list[str] = field(default_factory=list)
    # Modules that add ops, providers or tiers (suite/plugins.py); installed entry points load anyway.
    plugins: list[str] = field(default_factory=list)
    timing: TimingSettings = field(default_factory=TimingSettings)
    compiler: CompilerConf = field(default_factory=CompilerConf)
    # Measurements beyond the timed ones (traffic: device-memory bytes per call, GPU only, slow).
    metrics: list[Metric] = field(default_factory=list)
    # Where providers run: process (a worker process of the run's, so that a crash, hang or exit costs only
    # that measurement's record) or none (in the run's own process: a debugger reaches them, no time limit).
    isolation: Isolation = Isolation.process
    # Seconds one measurement (availability, preparation and compilation, check, profile and its turns in
    # the timed rounds) may take before it is stopped and recorded as an error (isolation=process).
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    # Seed of every case's random inputs.
    seed: int = 0
    # Where run folders are made (one per run, named by the run id).
    results_dir: str = RUNS_ROOT
    # Folder for measured device ceilings, cached per device; null: the user's cache
    # ($XDG_CACHE_HOME/tierbench/ceilings), and the committed ones of a tierbench checkout.
    ceilings_dir: str | None = None
    # Measure the ceilings again even where they are cached.
    remeasure_ceilings: bool = False
    # Finish an interrupted run: its id (a folder under results_dir) or its folder.
    resume: str | None = None
    # Name the run folder yourself (must not exist yet); default: time stamp plus a random suffix.
    run_id: str | None = None
    # Write report.html beside the records at the end of the run.
    html: bool = True
    # Print the table of ranked providers per case at the end of the run.
    table: bool = True
    # Spread the suite over devices, one job per device (suite/scale/launch.py): all (every visible GPU), a number
    # of jobs (GPUs 0..n-1, or CPU jobs with device=cpu) or a list of GPU indices; null: one job.
    devices: Any = None
    shard: ShardConf = field(default_factory=ShardConf)


# The run's own top-level keys (and Hydra's), which no op family's config section may take.
RESERVED_SECTIONS = frozenset({f.name for f in fields(RunBase)} | {"hydra"})


def run_schema(families: list[Family]) -> type:
    """RunBase with one section per family, named after it, typed by its schema."""
    sections = [(f.name, f.schema, field(default_factory=f.schema)) for f in families]
    return make_dataclass("RunConfig", sections, bases=(RunBase,))


def family_suite(family: Family, families: list[Family]) -> dict[str, Any]:
    """`suite=<family>` for a family with no file in conf/suite/. A built-in family's is its shapes alone, as a
    suite file would say it (conf/shapes/<family>.yaml; the other families' schema defaults make no case). A
    plugin's family's is its section with its defaults, every other family's section disabled."""
    if family.name in {f.name for f in builtin_families()}:
        return {"defaults": [f"/shapes/{family.name}@{family.name}"], "suite": family.name}
    return {"suite": family.name, **{f.name: {"enabled": f is family} for f in families}}


def plugin_families(families: list[Family]) -> list[Family]:
    """The families that no module of tierbench defines: the plugins'."""
    builtin = {f.name for f in builtin_families()}
    return [f for f in families if f.name not in builtin]


def suite_files() -> set[str]:
    """The names of the suites that are files of conf/suite/."""
    import tierbench.conf

    return {p.stem for p in (Path(tierbench.conf.__file__).parent / "suite").glob("*.yaml")}


def family_suites(families: list[Family]) -> list[Family]:
    """The families that get a `suite=<family>` of their own, in the catalog's order: the built-in ones that
    declare it (`Family.suite`) and every plugin's, unless a suite of conf/suite/ has that name (the file is
    that suite)."""
    plugins = {f.name for f in plugin_families(families)}
    files = suite_files()
    return [f for f in families if (f.suite is not None or f.name in plugins) and f.name not in files]


def register_configs(families: list[Family]) -> type:
    """The schema as `run_schema`, and a `suite=<family>` for each family that gets one (family_suites)."""
    schema = run_schema(families)
    store = ConfigStore.instance()
    store.store(name="run_schema", node=schema)
    for family in family_suites(families):
        store.store(group="suite", name=family.name, node=family_suite(family, families), package="_global_")
    return schema
