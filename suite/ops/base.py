"""What every op is, declared once in its own module: signature, cases, inputs, reference, work, view.

An op module (suite/ops/<family>.py, or a plugin's module) defines a `Family`: its config section (a
dataclass, the schema of `<family>.*` keys), how its cases are made from that section, how its results are
shown, and its ops. An `Op` is one operation of the family with one signature, `fn(*tensors, **options)`,
through which every tier calls: eager calls `formula`, the compiler compiles it, the triton tier calls the
tierbench.kernels function named `kernel`. Nothing here is registered at import: the catalog
(suite/catalog.py) collects the families of the modules that exist and of the plugins asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from ..show.presentation import View
from ..store.reading import DEFAULT_BASELINE

DTYPES: dict[str, torch.dtype] = {
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp32": torch.float32,
    # The operands' format of an FP8 product (its output dtype is the case's `out_dtype`).
    "fp8_e4m3": torch.float8_e4m3fn,
}


class DType(Enum):
    """The dtypes a config section may choose (`<family>.dtypes`); a case names one in params["dtype"]."""

    fp16 = "fp16"
    bf16 = "bf16"
    fp32 = "fp32"


class Mode(Enum):
    """Which pass is measured: the forward, the backward alone (its forward run outside the timed
    region), or both."""

    fwd = "fwd"
    bwd = "bwd"
    fwd_bwd = "fwd_bwd"


MODES = tuple(m.value for m in Mode)
# The name of each output an op's check compares: the forward's result, and one gradient per input.
OUT = "out"


def grad_name(input_name: str) -> str:
    return f"d{input_name}"


@dataclass(frozen=True)
class Case:
    """One point of a sweep: an op at one shape, dtype and mode."""

    op: str
    family: str
    params: dict[str, Any]
    label: str  # short human name of the shape, e.g. "4096x4096x4096" or "llama3-8b.up"
    x: float  # where the case sits on its family's chart axis (size or sequence length)

    @property
    def case_id(self) -> str:
        """Stable identity of the case across runs and commits."""
        return f"{self.op}/" + ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))

    @property
    def dtype(self) -> torch.dtype:
        """The operands' dtype (params["dtype"])."""
        return DTYPES[self.params["dtype"]]

    @property
    def out_dtype(self) -> torch.dtype:
        """The outputs' dtype, which the check's tolerance is chosen by: params["out_dtype"] where the op's
        output differs from its operands (an FP8 product's bf16), else the operands' dtype."""
        return DTYPES[self.params.get("out_dtype", self.params["dtype"])]

    @property
    def mode(self) -> str:
        return str(self.params.get("mode", "fwd"))

    def seed(self, base_seed: int) -> int:
        digest = hashlib.sha256(f"{base_seed}:{self.case_id}".encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.params))


@dataclass(frozen=True)
class WorkModel:
    """The least work a case needs: FLOPs done and bytes moved through device memory (for its mode)."""

    flops: float
    min_bytes: float


def per_pass(case: Case, fwd: WorkModel, bwd: WorkModel) -> WorkModel:
    """The work of the case's pass: the forward's, the backward's, or both (fwd_bwd: each at its minimum)."""
    if case.mode == "fwd":
        return fwd
    if case.mode == "bwd":
        return bwd
    return WorkModel(fwd.flops + bwd.flops, fwd.min_bytes + bwd.min_bytes)


@dataclass(frozen=True)
class Part:
    """One op of a composite op's chain (a model's block): its name in the chain (`qkv`, `attention`), the case
    of the op it runs at the composite's shapes, and what the whole composite's own formula runs for it:
    `formula` (the op's eager formula, compiled with the whole when the compiler tier compiles it) or
    `baseline` (the op's baseline provider: attention's SDPA, which a compiled whole keeps as one call)."""

    name: str
    case: Case
    in_whole: str = "formula"


@dataclass(frozen=True)
class Op:
    """One operation with one signature: `fn(*[inputs[n] for n in tensors], **options(case))`.

    reference: the same signature on float64 (CPU) / float32 (GPU) tensors, differentiable by autograd, so
    gradients for the backward modes come from it too. formula: the eager formulation in the inputs' own
    dtype: the compiler tier compiles it, and the vendor tier runs it as `eager` unless `eager` is False
    (attention, whose vendor providers are SDPA's backends). grads: the inputs that get gradients in the
    backward modes ((): no backward). kernel: the tierbench.kernels function the triton tier calls.
    baseline: providers the speedups are quoted against, in order of preference (the first that ran).
    dynamic_dims: per input, the dims a `compiler.dynamic=true` compile makes symbolic.
    case(**params, dtype=..., mode=...): one case of this op from its parameters (the library API's way in).
    why_unavailable(case, device): why no provider of any tier can run a case here (a precision the device's
    hardware lacks), or None; it comes before each provider's own rule (suite/providers/base.py).
    results: the forward's outputs by name, in the order formula, reference and kernels return them: one (a
    tensor), or several (a tuple: the fused residual add + RMSNorm returns the normalized rows and the sum).
    parts(case): a composite op's chain, each part a case of another op at the composite's shapes, measured
    through that op's family; the plan measures them before the composite (suite/measure/compose.py).
    chain(functions): the composite as a function of its signature, each part computed by functions[name]
    (a function of that part's op's signature, its options bound): what a composed strategy runs.
    writes: inputs the op writes by design (a decode step's new keys and values go into its KV cache): the
    runner restores them after each provider without calling that a fault.
    tolerance: per output dtype, (norm-wise, elementwise) bounds in place of suite/measure/checking.py's, where the
    op is a chain whose roundings add up (a model's block); the op's module says why.
    """

    name: str
    family: str
    tensors: tuple[str, ...]
    make_inputs: Callable[[Case, torch.device, torch.Generator], dict[str, torch.Tensor]]
    reference: Callable[..., torch.Tensor]
    work: Callable[[Case], WorkModel]
    formula: Callable[..., torch.Tensor] | None = None
    eager: bool = True
    options: Callable[[Case], dict[str, Any]] = field(default=lambda case: {})
    grads: tuple[str, ...] = ()
    kernel: str | None = None
    baseline: tuple[str, ...] = DEFAULT_BASELINE
    dynamic_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)
    case: Callable[..., Case] | None = None
    why_unavailable: Callable[[Case, torch.device], str | None] | None = None
    # Per output dtype, an elementwise bound for the gradients in place of suite/measure/checking.py's (None: that
    # one), where the computation itself is ill-conditioned in 16 bits; the op's module says why.
    gradient_element_tolerance: dict[torch.dtype, float] | None = None
    results: tuple[str, ...] = (OUT,)
    parts: Callable[[Case], tuple[Part, ...]] | None = None
    chain: Callable[[Mapping[str, Callable[..., Any]]], Callable[..., Any]] | None = None
    writes: tuple[str, ...] = ()
    tolerance: dict[torch.dtype, tuple[float, float]] | None = None
    # The FLOPs the `kernel` executes for a case where that differs from `work` (a backward that recomputes
    # more than the work model counts); None: the model's count.
    kernel_flops: Callable[[Case], float | None] | None = None

    def args(self, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """The tensors in call order."""
        return [inputs[name] for name in self.tensors]

    def outputs(self, mode: str) -> tuple[str, ...]:
        """The names a case of this mode checks: the output, the gradients, or both."""
        grads = tuple(grad_name(n) for n in self.grads)
        return {"fwd": self.results, "bwd": grads, "fwd_bwd": (*self.results, *grads)}[mode]

    def named_results(self, value: Any) -> dict[str, Any]:
        """A forward's return value by output name (a tensor for one output, a tuple for several)."""
        if len(self.results) == 1:
            return {self.results[0]: value}
        if not isinstance(value, (tuple, list)) or len(value) != len(self.results):
            names = ", ".join(self.results)
            raise TypeError(f"{self.name} returns {len(self.results)} outputs ({names}), got {type(value).__name__}")
        return dict(zip(self.results, value))


@dataclass(frozen=True)
class FamilySuite:
    """A family's own `suite=<family>`, declared by the family instead of a file of conf/suite/: for a
    built-in family, its shapes (conf/shapes/<family>.yaml) alone; for a plugin's, its section's defaults.
    The three lines are what `tierbench run --help` shows of it, as a suite file's header says them."""

    help: str  # what it measures
    on_cpu: str = "GPU-sized"  # how long it takes on the main job's 2 cores (README), or GPU-sized
    # How long it took in the committed H200 runs, naming the run (a test holds each named run committed).
    on_h200: str = "not yet measured"


@dataclass(frozen=True)
class Family:
    """Ops that share a config section (`<name>.*`), a case generator and a view.

    schema: a dataclass with an `enabled: bool` field; its defaults are the section's defaults.
    cases(section): the cases of the section, in a stable order.
    validate(section): what is wrong with a section's values, each message naming its key; [] if fine.
    providers(ops): the family's own providers of these ops (those of its ops that a run has), beyond what
    each tier's adapter makes of an op: special entry points such as decode's SDPA over a KV cache. From a
    plugin's family they join the plugin's PROVIDERS and are checked as those are.
    suite: its own `suite=<family>` and that suite's help (FamilySuite); a file conf/suite/<family>.yaml,
    where one exists, is that suite instead. A plugin's family gets one without declaring it.
    """

    name: str
    ops: tuple[Op, ...]
    schema: type
    cases: Callable[[Any], list[Case]]
    view: View
    validate: Callable[[Any], list[str]] = field(default=lambda section: [])
    order: int = 100  # where the family comes in a suite, on a page and in the config (lower first)
    providers: Callable[[list[Op]], list[Any]] | None = None
    suite: FamilySuite | None = None


def randn(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    gen: torch.Generator,
    scale: float = 1.0,
    shift: float = 0.0,
) -> torch.Tensor:
    """Seeded normal values drawn in float32 on the generator's device, then cast: never zeros."""
    t = torch.randn(shape, generator=gen, device=gen.device, dtype=torch.float32)
    if scale != 1.0 or shift != 0.0:
        t = t * scale + shift
    return t.to(device=device, dtype=dtype)


def element_size(case: Case) -> int:
    """Bytes per element of the case's operands (params["dtype"]): the unit of a work model's least bytes."""
    return torch.empty((), dtype=case.dtype).element_size()


def choice_name(value: Any) -> str:
    """The plain string of a config choice (an Enum member from the schema, or a string)."""
    return value.value if hasattr(value, "value") else str(value)


def hi_precision(device: torch.device) -> torch.dtype:
    """The reference's dtype: float64 on the CPU, float32 on the GPU (float64 is slow there, and float32 is
    ample against 16-bit outputs)."""
    return torch.float64 if device.type == "cpu" else torch.float32


def positive(section: str, values: dict[str, Any]) -> list[str]:
    """Messages for sizes that are not positive whole numbers: `values` maps a key to an int or a list."""
    out = []
    for key, value in values.items():
        many = isinstance(value, Sequence) and not isinstance(value, str)
        items = list(value) if many else [value]
        bad = [v for v in items if isinstance(v, bool) or not isinstance(v, int) or v < 1]
        if bad:
            out.append(f"{section}.{key}={items if many else value}: sizes must be whole numbers >= 1")
    return out
