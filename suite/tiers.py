"""The tiers of the tool ladder, as records: what a tier means is asked of its record, never of its name.

Torch-free, so the views (site, tables, compare) can read it without loading a tier. A plugin may declare a
tier of its own (see suite/plugins.py); a tier no record describes is shown after the known ones, in grey.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field


def interpreted() -> bool:
    """True when Triton runs kernels through its CPU interpreter: checked, never timed as comparable.

    The one place the suite reads TRITON_INTERPRET (tierbench.kernels reads it once, at import, as Triton does).
    """
    return os.environ.get("TRITON_INTERPRET") == "1"


def _interpreter_rule(device_type: str) -> str | None:
    if interpreted():
        return (
            "correct, not timed: TRITON_INTERPRET=1 runs the kernel through Triton's CPU interpreter, "
            "whose speed means nothing"
        )
    return None


@dataclass(frozen=True)
class Tier:
    """One rung of the ladder: its name, place, color and label, whether it is own code, and why its timings
    are not comparable on a device type (`plugin_tier` makes one for a plugin).

    own_code: the project's (or the plugin author's) own kernels: their history series are judged, while
    the series of the other tiers (pinned libraries) are controls for machine drift.
    not_comparable(device_type) says why timings of this tier mean nothing here (None: they do).
    """

    name: str
    order: int
    color: str
    label: str
    own_code: bool = False
    not_comparable: Callable[[str], str | None] = field(default=lambda device_type: None, compare=False)
    # What the tier means and what its packages need, for the docs and `tierbench run --help` readers.
    description: str = ""
    # A rung of the tool ladder (the site's legend shows every rung); False for a composition of rungs (mix).
    rung: bool = True


# Okabe-Ito colors (color-blind safe). The order is the ladder's: vendor libraries, graph compilers, a kernel
# DSL, hand-written CUDA, and the portable stacks that aim at one kernel codebase across vendors.
VENDOR = Tier("vendor", 0, "#56B4E9", "vendor libraries behind PyTorch eager")
COMPILER = Tier(
    "compiler",
    1,
    "#E69F00",
    "graph compilers (torch.compile, XLA, TVM)",
    description=(
        "Each op's formula handed to a graph compiler: torch.compile (Inductor), XLA (the formula written in "
        "jax.numpy, jitted; the `xla` extra, jax), TVM (the same torch formula exported and compiled by "
        "Apache TVM's Relax pipeline; the `tvm` extra, apache-tvm)."
    ),
)
TRITON = Tier("triton", 2, "#009E73", "tierbench's own Triton kernels", own_code=True, not_comparable=_interpreter_rule)
CUDA = Tier("cuda", 3, "#CC79A7", "hand-written CUDA / CuTe DSL packages")
PORTABLE = Tier(
    "portable",
    4,
    "#D55E00",
    "portable stacks: one kernel codebase across vendors (Mojo/MAX, IREE)",
    description=(
        "Portable here means one source that its toolchain compiles for CPUs and for several GPU vendors "
        "(NVIDIA, AMD; Apple's through IREE's Metal target) without a vendor's own language. `mojo`: "
        "tierbench's own Mojo kernels (kernels/mojo/), compiled by MAX and called through its PyTorch "
        "custom-op route (the `mojo` extra, max; Linux x86-64 or arm64, glibc 2.34+, on a GPU an NVIDIA "
        "card of compute capability 8.0+ or a supported AMD one). `iree`: each op's formula compiled by "
        "IREE, an MLIR stack, as a torch.compile backend (the `iree` extra: iree-turbine, "
        "iree-base-compiler, iree-base-runtime; its CPU target everywhere, its CUDA target on an NVIDIA GPU)."
    ),
)

# Not a rung of the ladder: a composite op (a model's block) run with the fastest correct provider of each of
# its parts, whichever tier each comes from (suite/measure/compose.py).
MIX = Tier("mix", 5, "#0072B2", "the fastest correct provider of each part, composed (model blocks)", rung=False)

BUILTIN: dict[str, Tier] = {t.name: t for t in (VENDOR, COMPILER, TRITON, CUDA, PORTABLE, MIX)}
OTHER_COLOR = "#999999"
_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{6}")


def plugin_tier(name: str, label: str = "", own_code: bool = True, interpreted_triton: bool = False) -> Tier:
    """A tier of a plugin's own (its kernels, shown as such); `interpreted_triton`: its kernels are Triton's,
    so under the interpreter they are checked but not timed, like the triton tier's."""
    return Tier(
        name,
        100,
        OTHER_COLOR,
        label or f"{name} (plugin)",
        own_code=own_code,
        not_comparable=_interpreter_rule if interpreted_triton else (lambda device_type: None),
    )


def is_color(value: object) -> bool:
    """A hex color #rrggbb: the only form a tier's color is written into pages and charts in."""
    return isinstance(value, str) and bool(_HEX_COLOR.fullmatch(value))


def rank(name: str, known: dict[str, Tier] | None = None) -> tuple[int, str]:
    """Sort key of a tier by name: the known ones in ladder order, then the others by name."""
    tier = (known or BUILTIN).get(name)
    return (tier.order if tier else 1000, name)


def color(name: str, known: dict[str, Tier] | None = None) -> str:
    """The tier's color; grey for a tier no record describes, or one whose color is no hex color."""
    tier = (known or BUILTIN).get(name)
    return tier.color if tier and is_color(tier.color) else OTHER_COLOR
