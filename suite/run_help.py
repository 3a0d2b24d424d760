"""`tierbench run --help`: the config groups and keys with one line each, the suites, and examples.

The keys and their lines come from the schema itself (suite/config.py and each family's dataclass, plugins'
included): a field's line is the comment above it or beside it, else its type and choices.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import io
import tokenize
import typing
from pathlib import Path
from typing import Any

# What each built-in suite measures, and how long it takes: on the H200 from the committed runs (each
# names its run: run.json's first to last record, timing=quick compiler.dynamic=true unless said), on a
# CPU from the main job on 2 cores (README). A test holds every suite with a committed H200 run to a figure.
SUITES = {
    "smoke": (
        "small shapes of every op and a tiny model's block: the whole product on a CPU",
        "about 7 min",
        "not yet measured",
    ),
    "matmul": ("squares 512-8192 and Llama-3 8B/70B projections at 16k tokens", "GPU-sized", "under 1 min"),
    "norm": (
        "LayerNorm, RMSNorm, fused bias+GELU+LayerNorm at 4k/16k rows x 1k-16k",
        "GPU-sized",
        "2 min (h200-norm-7, default timing)",
    ),
    "attention": (
        "seq 512-16384 at 16k tokens, head_dim 64/128, causal and not, fp16/bf16; Llama-3 GQA",
        "GPU-sized",
        "3-5 min MHA; GQA cases 7 min (h200-gqa-1)",
    ),
    "decode": (
        "Llama-3 8B/70B decode steps over 1k-128k-key KV caches, contiguous and paged",
        "GPU-sized",
        "7 min (h200-decode-1)",
    ),
    "all": (
        "matmul, norm, attention, decode and pointwise suites together",
        "GPU-sized",
        "4 min before decode and GQA joined (h200-all); today's suite not yet measured",
    ),
    "model": (
        "a model's block (model=llama3-8b): each op at its shapes, the whole per strategy, 3 phases",
        "GPU-sized",
        "not yet measured",
    ),
    "training": (
        "fwd, bwd and fwd_bwd of matmul, norm and attention at training shapes",
        "GPU-sized",
        "3 min for fwd and bwd (h200-training-1); with fwd_bwd not yet measured",
    ),
    "nightly": (
        "one shape per family and pass that matters most: what asv tracks per commit",
        "GPU-sized",
        "not yet measured as a run (asv measures it: docs/asv.md)",
    ),
}

EXAMPLES = (
    ("the small suite on this machine, quickly", "tierbench run suite=smoke timing=quick"),
    (
        "causal attention of the vendor and cuda tiers only (GPU-sized)",
        "tierbench run suite=attention attention.causal=true tiers=[vendor,cuda]",
    ),
    ("a model's block: which op to move down the ladder (GPU-sized)", "tierbench run suite=model model=llama3-8b"),
    (
        "a sweep, one run per value; CPU-sized shapes",
        "tierbench run --multirun suite=smoke matmul.square=[128],[256] tiers=[vendor]",
    ),
)


def field_notes(cls: type) -> dict[str, str]:
    """Per field of a dataclass, the comment on the lines just above it or at the end of its line."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):
        return {}
    lines = source.splitlines()
    names = {f.name for f in dataclasses.fields(cls)}
    notes: dict[str, str] = {}
    above: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if text.startswith("#"):
            above.append(comments.get(number, ""))
            continue
        name = text.split(":", 1)[0].strip()
        if name in names and ":" in text:
            beside = comments.get(number)
            notes[name] = beside or " ".join(above)
        above = []
    return notes


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable annotation: its text is shown instead
        return {f.name: f.type for f in dataclasses.fields(cls)}


def _type_text(kind: Any) -> str:
    if kind is Any:
        return "value"
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    origin = typing.get_origin(kind)
    if origin in (list, tuple):
        return f"[{_type_text(args[0])}, ...]" if args else "[...]"
    if args and origin is not None and len(args) < len(typing.get_args(kind)):  # Optional
        return f"{_type_text(args[0])} or null"
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "|".join(m.name for m in kind)
    if kind is bool:
        return "true|false"
    if isinstance(kind, type):
        return kind.__name__
    return str(kind)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, list):
        return "[" + ",".join(v.name if isinstance(v, enum.Enum) else str(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return value


def key_lines(cls: type, prefix: str = "", skip: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """(key, one line) for every field of a schema dataclass, nested sections spelled out."""
    notes, hints = field_notes(cls), _hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        kind = hints.get(f.name, f.type)
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            out += key_lines(kind, f"{prefix}{f.name}.")
            continue
        default = _default(f)
        shown = "" if default in (None, "???", "") else f" (default {default})"
        note = _first_sentence(notes.get(f.name, ""))
        out.append((f"{prefix}{f.name}", f"{_type_text(kind)}{shown}" + (f": {note}" if note else "")))
    return out


def _first_sentence(text: str) -> str:
    """One line: a note up to its first full stop."""
    end = text.find(". ")
    return (text[:end] if end > 0 else text).rstrip(".")


def _groups(conf_dir: Path) -> dict[str, list[str]]:
    return {
        group: sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))
        for group in ("suite", "timing", "model")
        if (conf_dir / group).is_dir()
    }


def render(conf_dir: Path, catalog: Any) -> str:
    from .config import RunBase, family_suites

    lines = [
        "usage: tierbench run [KEY=VALUE ...]            one run",
        "       tierbench run --multirun KEY=A,B ...     a sweep: one run per combination",
        "",
        "Measures a suite: every case of its op families through the providers of the chosen tiers, each",
        "output checked against a reference before it is timed. Records go to <results_dir>/<run-id>/;",
        "`tierbench summary RUN`, `tierbench export RUN` and `tierbench report` read them.",
        "",
        "Suites (suite=NAME)   on a CPU     on an H200",
    ]
    groups = _groups(conf_dir)
    found = groups.get("suite", [])
    for name in [*(n for n in SUITES if n in found), *(n for n in found if n not in SUITES)]:
        what, cpu, gpu = SUITES.get(name, ("a suite of this install", "", ""))
        lines += [f"  {name:<19} {cpu:<12} {gpu}", f"      {what}"]
    for family in family_suites(catalog.families):
        lines += [f"  {family.name}", f"      the plugins' {family.name} family alone (its section's shapes)"]
    lines += [
        "  Times: H200 from the committed runs' records; CPU: the main job on 2 cores with nothing else running,",
        "  mostly compilers compiling each shape. A GPU-sized suite does not finish on a CPU in useful time:",
        "  give it CPU-sized shapes, e.g.",
        "  suite=attention attention.seq_lens=[256] attention.tokens=512 attention.model_dim=128",
        "",
        "Config groups",
        "  suite=   " + ", ".join([*groups.get("suite", []), *(f.name for f in family_suites(catalog.families))]),
        "  timing=  "
        + ", ".join(groups.get("timing", []))
        + "   (quick: a fast look; default; precise: numbers to publish)",
        "  model=   "
        + ", ".join(groups.get("model", []))
        + "   (a model's block for the model family; none by default)",
        "",
        "Keys",
    ]
    lines += [f"  {key:<24} {text}" for key, text in key_lines(RunBase, skip=frozenset({"timing"}))]
    lines += ["", "Timing (timing.KEY=VALUE; a group above sets them together)"]
    lines += [f"  {key:<24} {text}" for key, text in key_lines(_timing_schema(), "timing.")]
    for family in catalog.families:
        lines += ["", f"Family {family.name} ({family.name}.KEY=VALUE; ops: {', '.join(op.name for op in family.ops)})"]
        lines += [f"  {key:<24} {text}" for key, text in key_lines(family.schema, f"{family.name}.")]
    lines += ["", "Examples"]
    for what, command in EXAMPLES:
        lines += [f"  # {what}", f"  {command}"]
    lines += [
        "",
        "A wrong group, key or value exits 2 naming the valid choices. Hydra's own options:",
        "`tierbench run --hydra-help`; the composed config without running: `tierbench run --cfg job`.",
    ]
    return "\n".join(lines) + "\n"


def _timing_schema() -> type:
    from tierbench.timing import TimingSettings

    return TimingSettings
