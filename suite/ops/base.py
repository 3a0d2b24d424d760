"""What every op is: cases from config, seeded inputs, a high-precision reference, a FLOP/byte model."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


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
        return DTYPES[self.params["dtype"]]

    def seed(self, base_seed: int) -> int:
        digest = hashlib.sha256(f"{base_seed}:{self.case_id}".encode()).digest()
        return int.from_bytes(digest[:4], "little")

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.params))


@dataclass(frozen=True)
class WorkModel:
    """The least work a case needs: FLOPs done and bytes moved through device memory."""

    flops: float
    min_bytes: float


@dataclass
class Op:
    """An op is data plus functions; providers for it are listed by the tiers, not here."""

    name: str
    family: str
    make_inputs: Callable[[Case, torch.device, torch.Generator], dict[str, torch.Tensor]]
    reference: Callable[[dict[str, torch.Tensor], Case], torch.Tensor]
    work: Callable[[Case], WorkModel]
    # Extra options a provider may need beyond the tensors (causal, eps...), derived from the case.
    options: Callable[[Case], dict[str, Any]] = field(default=lambda case: {})


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
    return torch.empty((), dtype=case.dtype).element_size()


def choice_name(value: Any) -> str:
    """The plain string of a config choice (an Enum member from the schema, or a string)."""
    return value.value if hasattr(value, "value") else str(value)
