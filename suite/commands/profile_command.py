"""`tierbench profile RUN CASE PROVIDER`: one measurement of a run again, under PyTorch's profiler.

CASE is a case id as the records name it (`rms_norm/dtype=bf16,hidden=1024,mode=fwd,rows=512`) or
selectors `key=value` over the case's parameters and `op` (`op=rms_norm rows=512`) that match one case.
The case is rebuilt from the run's own config.yaml (its plugins loaded), as `tierbench run resume=` does,
with the run's seeded inputs; the provider's first call (compilation, autotuning) is not profiled. Writes
`<run>/profiles/<case>-<provider>.trace.json` (Chrome's trace format: chrome://tracing, Perfetto) and, with
--ncu, an Nsight Compute report beside it; prints what the call launched and where the files are.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..naming import slug
from ..store.reading import RUNS_ROOT, find_run, read_records
from ..store.records import CONFIG_FILE
from ..text import plain

PROFILES_DIR = "profiles"


class SelectionError(ValueError):
    """A case or provider the run does not have; the message names the valid choices."""


def _fields(case: Any) -> dict[str, str]:
    return {"op": str(case.op), **{k: _text(v) for k, v in case.params.items()}}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _choices(cases: Sequence[Any], keys: Sequence[str] | None = None) -> str:
    """Per key, the values these cases take ("op: layer_norm, rms_norm; rows: 512")."""
    values: dict[str, list[str]] = {}
    for case in cases:
        for k, v in _fields(case).items():
            values.setdefault(k, [])
            if v not in values[k]:
                values[k].append(v)
    shown = [k for k in dict.fromkeys(keys or values) if k in values]
    return "; ".join(f"{k}: {', '.join(values[k])}" for k in shown)


def pick_case(plan: Sequence[Any], terms: Sequence[str]) -> Any:
    """The planned case a case id or `key=value` selectors name; SelectionError naming the choices."""
    cases = [pc.case for pc in plan]
    ids = [t for t in terms if "/" in t]
    if ids:
        if len(terms) != 1:
            raise SelectionError(f"give a case id alone or selectors, not both: {' '.join(terms)}")
        found = [pc for pc in plan if pc.case.case_id == ids[0]]
        if not found:
            listed = ", ".join(c.case_id for c in cases[:20]) + (", ..." if len(cases) > 20 else "")
            raise SelectionError(f"the run has no case {ids[0]!r}; valid choices: {listed}")
        return found[0]
    wanted: dict[str, str] = {}
    for term in terms:
        key, sep, value = term.partition("=")
        if not sep or not key:
            keys = ", ".join(_keys(cases))
            raise SelectionError(f"{term!r} is neither a case id nor a selector key=value; keys: {keys}")
        wanted[key] = value.lower() if value.lower() in ("true", "false") else value
    found = [pc for pc in plan if all(_fields(pc.case).get(k) == v for k, v in wanted.items())]
    if not found:
        raise SelectionError(
            f"no case of the run matches {' '.join(terms)}; valid choices: {_choices(cases, [*wanted, *_keys(cases)])}"
        )
    if len(found) > 1:
        differing = [k for k in _keys([pc.case for pc in found]) if len({_fields(pc.case).get(k) for pc in found}) > 1]
        raise SelectionError(
            f"{len(found)} cases match {' '.join(terms)}; narrow it with one of: "
            f"{_choices([pc.case for pc in found], differing)}"
        )
    return found[0]


def _keys(cases: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(k for case in cases for k in _fields(case)))


def pick_provider(planned: Any, name: str, run_dir: Path | None = None) -> Any:
    found = [p for p in planned.providers if p.name == name]
    if not found:
        names = ", ".join(p.name for p in planned.providers) or "none"
        raise SelectionError(f"provider {name!r} is not planned for {planned.case.case_id}; valid choices: {names}")
    provider = found[0]
    if provider.from_results is not None and run_dir is not None:
        # A composite's best mix: composed again from the run's own records, as the run composed it.
        results: dict[str, dict[str, Any]] = {}
        for r in read_records(run_dir):
            results.setdefault(r.case_id, {})[r.provider] = r
        made = provider.from_results(planned.case, results)
        if isinstance(made, str):
            raise SelectionError(f"{name} of {planned.case.case_id}: {made}")
        provider = made
    return provider


def profile_path(run_dir: Path, case_id: str, provider: str) -> Path:
    return Path(run_dir) / PROFILES_DIR / f"{slug(case_id, 'case')}-{slug(provider, 'provider')}"


def load_plan(run_dir: Path):
    """The run's device, catalog and plan, rebuilt from its config.yaml."""
    from omegaconf import OmegaConf

    from ..catalog import build
    from ..config import run_schema
    from ..measure.plan import make_plan, resolve_device

    path = Path(run_dir) / CONFIG_FILE
    try:
        saved = OmegaConf.load(path)
    except Exception as exc:  # noqa: BLE001 - unreadable or not YAML: the message says which file
        raise SelectionError(f"{path} cannot be read ({type(exc).__name__}): no run config to rebuild") from None
    if not OmegaConf.is_dict(saved) or "suite" not in saved:
        raise SelectionError(f"{path} holds no run config (no `suite`): nothing to rebuild")
    device = resolve_device(saved.get("device", "auto"))
    if device.type == "cpu":  # before any Triton kernel is defined: triton.jit reads it then
        os.environ.setdefault("TRITON_INTERPRET", "1")
    catalog = build([str(p) for p in saved.get("plugins") or []])
    schema = OmegaConf.structured(run_schema(catalog.families))
    OmegaConf.set_struct(schema, False)  # keys the run was given with `+key=...`
    try:
        cfg = OmegaConf.merge(schema, saved)
    except Exception as exc:  # noqa: BLE001 - a value of the wrong type for the schema
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SelectionError(f"{path} does not fit the config schema ({first})") from None
    return device, make_plan(cfg, catalog), int(cfg.seed)


def warmed_pass(planned: Any, provider: Any, device: Any, seed: int):
    """The provider's pass of the case on the run's seeded inputs, its first call made (unprofiled)."""
    import torch

    from ..measure.passes import Pass, leaf_inputs, reference_outputs

    case, op = planned.case, planned.op
    gen = torch.Generator(device=device).manual_seed(case.seed(seed))
    options = op.options(case)
    inputs = op.make_inputs(case, device, gen)
    _, dy = reference_outputs(op, case, inputs, options, device, gen)
    inputs = leaf_inputs(op, case, inputs)
    pass_ = Pass(op, case, provider, provider.prepare(inputs, options, case), inputs, dy)
    pass_.setup()
    pass_.run()
    pass_.release()
    return pass_


def _under_ncu(pass_: Any, device: Any) -> None:
    """The pass once more inside the NVTX range that ncu profiles."""
    import torch

    from ..measure.traffic import NVTX_RANGE

    pass_.setup()
    torch.cuda.synchronize(device)
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    pass_.run()
    torch.cuda.synchronize(device)
    torch.cuda.nvtx.range_pop()
    pass_.release()


def _show(profile: Any) -> str:
    if profile.launches is None:
        return f"launches: not counted ({profile.reason})"
    lines = [f"{profile.launches} launch{'es' if profile.launches != 1 else ''} ({profile.counted}):"]
    lines += [f"  {k.us:>11.1f} us  {k.kind:<13} {k.name}" for k in profile.kernels]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tierbench profile", description=__doc__.splitlines()[0])
    p.add_argument("run", help=f"run folder ({RUNS_ROOT}/<id>) or run id")
    p.add_argument(
        "rest", nargs="+", metavar="CASE... PROVIDER", help="a case id or key=value selectors, then a provider"
    )
    p.add_argument("--runs", type=Path, default=Path(RUNS_ROOT), help="where run ids are looked up")
    p.add_argument("--ncu", action="store_true", help="also write an Nsight Compute report (ncu's full set)")
    p.add_argument("--under-ncu", action="store_true", help=argparse.SUPPRESS)  # the child ncu profiles
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if len(args.rest) < 2:
        print("tierbench profile: give a case (id or key=value selectors) and a provider", file=sys.stderr)
        return 2
    terms, name = args.rest[:-1], args.rest[-1]
    folder = find_run(args.run, args.runs)
    if folder is None or not (folder / CONFIG_FILE).exists():
        print(f"tierbench profile: {plain(args.run)} is no run folder with a {CONFIG_FILE}", file=sys.stderr)
        return 2
    from ..measure.plan import PlanError
    from ..plugins import PluginError

    try:
        device, plan, seed = load_plan(folder)
        planned = pick_case(plan, terms)
        provider = pick_provider(planned, name, folder)
    except (SelectionError, PlanError, PluginError) as exc:
        print(f"tierbench profile: {plain(str(exc))}", file=sys.stderr)
        return 2
    case_id = planned.case.case_id
    why = provider.why_unavailable(planned.case, device)
    if why:
        print(plain(f"tierbench profile: {provider.name} cannot run {case_id} here: {why}"), file=sys.stderr)
        return 1
    pass_ = warmed_pass(planned, provider, device, seed)
    if args.under_ncu:
        if device.type == "cuda":
            _under_ncu(pass_, device)
        return 0
    from ..measure import profiling, traffic

    base = profile_path(folder, case_id, provider.name)
    trace = base.with_name(base.name + ".trace.json")
    profile = profiling.profile_pass(pass_, device, trace)
    print(plain(f"{case_id} · {provider.name} on {device.type}"))
    print(plain(_show(profile)))
    print(f"trace: {trace}" if trace.exists() else "trace: not written (profiling failed)")
    if not args.ncu:
        return 0 if trace.exists() else 1
    report, reason = traffic.write_report(folder, case_id, provider.name, base)
    print(f"ncu report: {report}" if report else f"ncu report: not written: {reason}")
    return 0 if report and trace.exists() else 1
