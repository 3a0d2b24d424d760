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

# A suite's lines in the help: the header of its YAML file (conf/suite/<name>.yaml), below `# @package`:
#   # help: what it measures
#   # on a CPU: how long it takes on the main job's 2 cores (README), or GPU-sized
#   # on an H200: how long it took in the committed runs (each names its run: run.json's first to last
#     record, timing=quick compiler.dynamic=true unless said); a test holds every suite with a committed
#     H200 run to a figure.
SUITE_HEADER = {"help": 0, "on a CPU": 1, "on an H200": 2}
UNDESCRIBED = ("a suite of this install", "", "")


def suite_help(path: Path) -> tuple[str, str, str]:
    """(what, on a CPU, on an H200) from a suite file's leading comments; UNDESCRIBED without them."""
    found = list(UNDESCRIBED)
    described = False
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, colon, value = line.lstrip("#").strip().partition(":")
        if colon and key in SUITE_HEADER:
            found[SUITE_HEADER[key]] = value.strip()
            described = True
    return (found[0], found[1], found[2]) if described else UNDESCRIBED


def suites_help(conf_dir: Path, families: list[Any]) -> dict[str, tuple[str, str, str]]:
    """Every suite with its lines: those of conf/suite and those a built-in family declares (Family.suite);
    the default (smoke) first, then the suites named after a family in the catalog's order, then the others
    by name. A plugin's family's own suite is not among them (`render` says it apart)."""
    from ..config import family_suites, plugin_families

    found = {p.stem: suite_help(p) for p in (conf_dir / "suite").glob("*.yaml")}
    plugins = {f.name for f in plugin_families(families)}
    for family in family_suites(families):
        if family.name not in plugins:
            found[family.name] = declared_help(family)
    rank = {f.name: i for i, f in enumerate(families)}
    order = sorted(found, key=lambda n: (n != "smoke", n not in rank, rank.get(n, 0), n))
    return {name: found[name] for name in order}


def declared_help(family: Any) -> tuple[str, str, str]:
    """(what, on a CPU, on an H200) of a family's declared suite; UNDESCRIBED where it declares none."""
    if family.suite is None:
        return UNDESCRIBED
    return (family.suite.help, family.suite.on_cpu, family.suite.on_h200)


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
        for group in ("timing", "model")  # the suites: suites_help
        if (conf_dir / group).is_dir()
    }


def render(conf_dir: Path, catalog: Any) -> str:
    from ..config import RunBase, family_suites, plugin_families

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
    suites = suites_help(conf_dir, catalog.families)
    for name, (what, cpu, gpu) in suites.items():
        lines += [f"  {name:<19} {cpu:<12} {gpu}", f"      {what}"]
    plugin_names = {f.name for f in plugin_families(catalog.families)}
    plugins = [f for f in family_suites(catalog.families) if f.name in plugin_names]
    for family in plugins:
        if family.suite is None:
            lines += [f"  {family.name}", f"      the plugins' {family.name} family alone (its section's shapes)"]
        else:
            lines += [
                f"  {family.name:<19} {family.suite.on_cpu:<12} {family.suite.on_h200}",
                f"      {family.suite.help}",
            ]
    lines += [
        "  Times: H200 from the committed runs' records; CPU: the main job on 2 cores with nothing else running,",
        "  mostly compilers compiling each shape. A GPU-sized suite does not finish on a CPU in useful time:",
        "  give it CPU-sized shapes, e.g.",
        "  suite=attention attention.seq_lens=[256] attention.tokens=512 attention.model_dim=128",
        "",
        "Config groups",
        "  suite=   " + ", ".join([*sorted(suites), *(f.name for f in plugins)]),
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
