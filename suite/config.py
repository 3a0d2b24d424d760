"""Structured-config schema for `tierbench run`.

The dataclasses are registered in Hydra's ConfigStore so that a wrong key, a wrong type or a value
outside an enum fails at composition, with a message that names the valid choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hydra.core.config_store import ConfigStore


class Device(Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


class DType(Enum):
    fp16 = "fp16"
    bf16 = "bf16"
    fp32 = "fp32"


class Mode(Enum):
    """Which pass is measured. Only the forward pass exists today; the dimension is in every case."""

    fwd = "fwd"


class Tier(Enum):
    vendor = "vendor"
    compiler = "compiler"
    triton = "triton"
    cuda = "cuda"


class NormKind(Enum):
    layer_norm = "layer_norm"
    rms_norm = "rms_norm"
    bias_gelu_layer_norm = "bias_gelu_layer_norm"


class CompileMode(Enum):
    default = "default"
    max_autotune = "max-autotune"


@dataclass
class ModelShape:
    """A transformer's projection sizes: matmuls (tokens x hidden) @ (hidden x ffn) and back."""

    name: str = "???"
    hidden: int = 4096
    ffn: int = 14336


@dataclass
class MatmulConf:
    enabled: bool = True
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    square: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    models: list[ModelShape] = field(default_factory=list)


@dataclass
class NormConf:
    enabled: bool = True
    kinds: list[NormKind] = field(default_factory=lambda: list(NormKind))
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    rows: list[int] = field(default_factory=list)
    hidden: list[int] = field(default_factory=list)


@dataclass
class AttentionConf:
    enabled: bool = True
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    # batch x seq_len is held at this many tokens, so every sequence length does comparable work per token.
    tokens: int = 16384
    seq_lens: list[int] = field(default_factory=list)
    head_dims: list[int] = field(default_factory=lambda: [128])
    # heads x head_dim: the model width, held fixed across head_dims.
    model_dim: int = 2048
    # null runs both causal and non-causal; true or false runs one.
    causal: bool | None = None


@dataclass
class TimingConf:
    """How every provider is timed. Units are in the names."""

    name: str = "default"
    warmup_ms: float = 25.0
    rep_ms: float = 40.0  # timed budget of one round of one provider
    rounds: int = 5  # providers of a case take turns this many times
    min_reps: int = 5
    max_reps: int = 500
    flush_l2: bool = True
    # GPU only: seconds of matmul load before the first measurement, so the card is at its power cap.
    steady_state_s: float = 3.0
    # GPU only: replay each provider's call from a CUDA graph, so host launch overhead (Python, dispatch)
    # is not timed; a call that cannot be captured is timed by plain launches (the record's `timer` says).
    cuda_graph: bool = True


@dataclass
class CompilerConf:
    modes: list[CompileMode] = field(default_factory=lambda: [CompileMode.default])
    # Compile once per shape family with symbolic sizes instead of once per shape.
    dynamic: bool = False


@dataclass
class RunConfig:
    suite: str = "???"
    device: Device = Device.auto
    tiers: list[Tier] = field(default_factory=lambda: list(Tier))
    # Optional allow-list of provider names; empty runs every provider of the selected tiers.
    providers: list[str] = field(default_factory=list)
    matmul: MatmulConf = field(default_factory=MatmulConf)
    norm: NormConf = field(default_factory=NormConf)
    attention: AttentionConf = field(default_factory=AttentionConf)
    timing: TimingConf = field(default_factory=TimingConf)
    compiler: CompilerConf = field(default_factory=CompilerConf)
    seed: int = 0
    results_dir: str = "results/runs"
    # Folder for measured device ceilings, cached per device.
    ceilings_dir: str = "results/ceilings"
    remeasure_ceilings: bool = False
    # Finish an interrupted run: the id of its folder under results_dir.
    resume: str | None = None
    # Name the run folder yourself (must not exist yet); default: time stamp plus a random suffix.
    run_id: str | None = None
    # Write report.html and print the terminal table at the end of the run.
    html: bool = True
    table: bool = True


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
