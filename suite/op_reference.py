"""Every op's signature as a plugin author needs it, generated from the catalog (docs/plugins.md holds it).

    python -m tierbench.suite.op_reference                          # print the built-in ops' reference
    python -m tierbench.suite.op_reference --plugins my_pkg.bench   # ... and a plugin's ops
    python -m tierbench.suite.op_reference --write docs/plugins.md  # rewrite the page's generated part

Per op: the call every tier makes, `fn(*tensors, **options)`; the tensors of one small case (the smoke
suite's, made by the op's own `make_inputs` on the CPU: dtype, shape, and the strides where the layout is
not contiguous); its options; its output; its gradients; the parameters of `case(...)` (what
`tierbench.measure(params=...)` takes); the built-in providers of it. A test rebuilds the page's part from
this module, so the page cannot go stale.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from .catalog import Catalog, build
from .ops.base import DTYPES, Case, Op, grad_name, hi_precision

# A page's generated parts: the text between `<!-- begin generated: PART ... -->` and `<!-- end generated: PART -->`.
BEGIN = "<!-- begin generated: {part} (python -m tierbench.suite.op_reference --write docs/plugins.md) -->"
END = "<!-- end generated: {part} -->"
# Params every case has (`measure` takes them as its own arguments).
COMMON_PARAMS = ("dtype", "mode", "out_dtype")
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()} | {torch.int32: "int32", torch.int64: "int64"}


def smoke_cases(catalog: Catalog) -> dict[str, Case]:
    """The first forward case of each op in the smoke suite (a plugin family: its section's defaults)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from .commands.run_command import conf_dir
    from .config import register_configs
    from .measure.plan import cases_from_config

    register_configs(catalog.families)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["suite=smoke"])
    finally:
        GlobalHydra.instance().clear()
    found: dict[str, Case] = {}
    for case, _ in cases_from_config(cfg, catalog):
        if case.mode == "fwd":
            found.setdefault(case.op, case)
    return found


def _dtype(t: torch.Tensor) -> str:
    return _DTYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix("torch."))


def _tensor(name: str, t: torch.Tensor) -> str:
    text = f"`{name}` {_dtype(t)} {tuple(t.shape)}"
    return text if t.is_contiguous() else f"{text}, strides {t.stride()}"


def _value(v: Any) -> str:
    return f"{v!r} ({type(v).__name__})"


def _case_params(op: Op, case: Case | None) -> list[str]:
    """The parameters `op.case(...)` takes besides dtype and mode (those of the sample case where it takes any)."""
    if op.case is None:
        return []
    signature = inspect.signature(op.case)
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return [k for k in (case.params if case else {}) if k not in COMMON_PARAMS]
    return [
        name if p.default is p.empty else f"{name}={p.default!r}"
        for name, p in signature.parameters.items()
        if name not in COMMON_PARAMS
    ]


def op_section(op: Op, case: Case | None, providers: list[str], builtin: bool) -> list[str]:
    options = op.options(case) if case else {}
    call = ", ".join([*op.tensors, *(f"{k}=..." for k in options)])
    returns = ", ".join(op.results) if len(op.results) > 1 else "out"
    lines = [f"### `{op.name}` (family `{op.family}`)", "", f"    fn({call}) -> {returns}", ""]
    if builtin:
        lines.append(f'- the op: `tierbench.builtin_op("{op.name}")`')
    if case is None:
        lines.append("- no case of it in the smoke suite: its tensors are not shown")
    else:
        gen = torch.Generator().manual_seed(case.seed(0))
        inputs = op.make_inputs(case, torch.device("cpu"), gen)
        described = ", ".join(f"{k}={v}" for k, v in case.params.items() if k != "mode")
        lines.append(f"- tensors, in call order, for the case {described}:")
        lines += [f"  - {_tensor(name, inputs[name])}" for name in op.tensors]
        hi = {k: (v.to(hi_precision(v.device)) if v.is_floating_point() else v) for k, v in inputs.items()}
        outs = op.named_results(op.reference(*op.args(hi), **options))
        lines.append(f"- options: {', '.join(f'`{k}` = {_value(v)}' for k, v in options.items()) or 'none'}")
        out_dtype = _DTYPE_NAMES.get(case.out_dtype, str(case.out_dtype))
        if len(outs) == 1:
            lines.append(f"- output: {out_dtype} {tuple(next(iter(outs.values())).shape)}")
        else:
            shapes = ", ".join(f"`{name}` {out_dtype} {tuple(t.shape)}" for name, t in outs.items())
            lines.append(f"- outputs, in order: {shapes}")
    grads = ", ".join(f"`{grad_name(n)}`" for n in op.grads)
    lines.append(f"- backward (`bwd`, `fwd_bwd`): {grads} checked" if grads else "- forward only")
    params = _case_params(op, case)
    if params:
        lines.append(f"- `case(...)` parameters (`tierbench.measure(params=...)`): {', '.join(params)}")
    else:
        lines.append("- no `case(...)`: not measurable one case at a time")
    if op.kernel:
        lines.append(f"- the triton tier calls `tierbench.kernels.{op.kernel}`")
    lines.append(f"- providers: {', '.join(providers)}; speedups against: {', '.join(op.baseline)}")
    return [*lines, ""]


def render(catalog: Catalog, ops: Iterable[str] | None = None) -> str:
    """The reference of the catalog's ops (all of them, or those named), as Markdown."""
    cases = smoke_cases(catalog)
    builtin = {op.name for family in build(entry_points=False).families for op in family.ops}
    modes = ("default", "max-autotune")
    providers = catalog.providers(modes)
    wanted = set(ops) if ops is not None else set(catalog.ops)
    lines: list[str] = []
    for op in catalog.ops.values():
        if op.name in wanted:
            names = [p.name for p in providers if p.op == op.name]
            lines += op_section(op, cases.get(op.name), names, op.name in builtin)
    return "\n".join(lines).rstrip() + "\n"


def _parameters(obj: Any) -> str:
    """A function's parameters as a call shows them (no annotations); nothing for a class."""
    if inspect.isclass(obj):
        return ""
    params = inspect.signature(obj).parameters.values()
    shown, star = [], False
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not star:
            shown.append("*")
            star = True
        shown.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"({', '.join(shown)})"


def public_names() -> str:
    """The library's public names (`tierbench.<name>`), each with the first paragraph of its docstring."""
    import tierbench

    lines = ["| name | what it is |", "| --- | --- |"]
    for name in tierbench.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(tierbench, name)
        doc = " ".join(inspect.getdoc(obj).split("\n\n")[0].split()).replace("|", "\\|")
        lines.append(f"| `tierbench.{name}{_parameters(obj)}` | {doc} |")
    return "\n".join(lines) + "\n"


def generated_parts() -> dict[str, str]:
    """What docs/plugins.md holds between its markers: the public names, every built-in op."""
    return {"names": public_names(), "ops": render(build(entry_points=False))}


def replace_part(page: str, part: str, text: str) -> str:
    """The page with the text between the part's markers replaced by `text`."""
    begin, end = BEGIN.format(part=part), END.format(part=part)
    start, stop = page.index(begin) + len(begin), page.index(end)
    return f"{page[:start]}\n\n{text}\n{page[stop:]}"


def part_of(page: str, part: str) -> str:
    """The text between the part's markers, as `replace_part` writes it."""
    begin, end = BEGIN.format(part=part), END.format(part=part)
    return page[page.index(begin) + len(begin) : page.index(end)].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tierbench.suite.op_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--plugins", nargs="*", default=[], help="plugin modules whose ops are listed too")
    parser.add_argument("--write", type=Path, help="a page with the markers whose generated parts are rewritten")
    args = parser.parse_args(argv)
    if args.write:
        page = args.write.read_text()
        for part, text in generated_parts().items():
            begin, end = BEGIN.format(part=part), END.format(part=part)
            if begin not in page or end not in page:
                print(f"{args.write}: no generated part {part!r} (its markers: {begin} ... {end})", file=sys.stderr)
                return 2
            page = replace_part(page, part, text)
        args.write.write_text(page)
        return 0
    print(render(build(args.plugins, entry_points=True)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
