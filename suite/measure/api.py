"""The library API: measure your own callable beside the tiers, from a notebook or a test.

    import tierbench
    records = tierbench.measure(my_rms_norm, op="rms_norm", params={"rows": 4096, "hidden": 1024})
    for r in records:
        print(r.provider, r.status, r.median_ms, r.rel_error)

Your callable takes the op's signature (`fn(*tensors, **options)`: for rms_norm `fn(x, weight, eps=...)`),
and is checked against the op's reference on fresh random inputs before it is timed with its peers, exactly
as `tierbench run` does it (same checker, timer, ceilings and records). The op is a built-in one, one of a
plugin (by name once the plugin is named in `plugins=` or installed under the entry points), or an `Op`
object of your own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tierbench.timing import TimingSettings

from ..catalog import Catalog, build
from ..ops.base import Op
from ..providers import builtin_providers
from ..providers.base import Provider, call_provider, with_op_rule
from ..store.records import Measurement
from ..tiers import plugin_tier
from .plan import PlanError, PlannedCase, resolve_device
from .session import Measurer


def timing_named(name: str) -> TimingSettings:
    """A timing preset of the config tree (quick, default, precise)."""
    import tierbench.conf

    path = Path(tierbench.conf.__file__).parent / "timing" / f"{name}.yaml"
    if not path.is_file():
        presets = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise PlanError(f"timing={name!r} is not a preset; valid choices: {', '.join(presets)}")
    return TimingSettings(**OmegaConf.to_container(OmegaConf.load(path)))


def measure(
    fn: Callable[..., Any],
    op: str | Op,
    params: dict[str, Any],
    *,
    dtype: str = "bf16",
    mode: str = "fwd",
    name: str = "mine",
    tier: str = "mine",
    peers: Iterable[str] = ("eager", "compile"),
    device: str = "auto",
    timing: str | TimingSettings = "quick",
    seed: int = 0,
    ceilings_dir: str | Path | None = None,
    triton: bool = False,
    plugins: Iterable[str] = (),
    catalog: Catalog | None = None,
) -> list[Measurement]:
    """Check and time `fn` as provider `name` of tier `tier` (your own code unless `tier` is a built-in one)
    on one case of `op`, beside the `peers` (other providers of that op); returns every record.

    op: an op's name (built-in, or of a plugin that `plugins` names or that is installed under the
    `tierbench.plugins` entry points) or an `Op` object; an op of your own gets eager and compile (from its
    `formula`) as peers. params: the op's case parameters (matmul m, n, k; norms rows, hidden; attention
    batch, heads, seq, head_dim, causal, and kv_heads, kv_seq where they differ; decode batch, heads,
    kv_heads, q_len, kv_len, head_dim, causal, lengths, and for decode_paged page_size; a plugin's op: what
    its `case` takes). triton: your callable runs Triton kernels, so under Triton's CPU interpreter it is
    checked but not timed, like the triton tier (on a CPU, set TRITON_INTERPRET=1 before your kernels are
    defined; plugins named here are loaded after it is set). peers: providers of the op, a plugin's among
    them. catalog: a catalog built already (`tierbench.suite.catalog.build`), in place of `plugins`.
    """
    plugins = list(plugins)
    if plugins and catalog is not None:
        raise PlanError("plugins= and catalog= both given: a catalog has its plugins already; name one of them")
    where = resolve_device(device)
    if where.type == "cpu":  # before a plugin defines its Triton kernels: triton.jit reads it then
        os.environ.setdefault("TRITON_INTERPRET", "1")
    catalog = catalog or build(plugins)
    op = _op(op, catalog)
    if op.case is None:
        raise PlanError(f"op {op.name} declares no case(**params): it cannot be measured one case at a time")
    try:
        case = op.case(**params, dtype=dtype, mode=mode)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"params={params} do not make a case of {op.name}: {exc}") from None
    tiers = dict(catalog.tiers)
    if tier not in tiers:
        tiers[tier] = plugin_tier(tier, "your own code", own_code=True, interpreted_triton=triton)
    wanted = list(peers)
    known = {p.name: p for p in _providers_of(op, catalog)}
    unknown = [p for p in wanted if p not in known]
    if unknown:
        raise PlanError(
            f"peers={unknown} are not providers of {op.name}; valid choices: {', '.join(known) or '(none)'}"
        )
    if name in wanted:
        raise PlanError(f"name={name!r} is one of the peers; give your callable a name of its own")
    providers = (with_op_rule(call_provider(name, tier, op, fn), op), *(known[p] for p in wanted))
    settings = timing if isinstance(timing, TimingSettings) else timing_named(timing)
    bad = settings.problems()
    if bad:
        raise PlanError("; ".join(bad))
    measurer = Measurer.open(where, settings, ceilings_dir, run_id="api", seed=seed, tiers=tiers)
    return list(measurer.measure(PlannedCase(case, op, providers)))


def _op(op: str | Op, catalog: Catalog) -> Op:
    """The op named, from the catalog; an `Op` object as it is, unless the catalog holds another of its name."""
    if isinstance(op, Op):
        if op.name in catalog.ops and catalog.ops[op.name] is not op:
            raise PlanError(f"op {op.name!r} is defined already (by tierbench or a plugin); give yours another name")
        return op
    if isinstance(op, str) and op in catalog.ops:
        return catalog.ops[op]
    named = ", ".join(p.name for p in catalog.plugins) or "none"
    raise PlanError(
        f"op={op!r} is not known; valid choices: {', '.join(catalog.ops)} (plugins loaded: {named}; name a "
        "plugin's module in plugins=[...] to measure its ops)"
    )


def _providers_of(op: Op, catalog: Catalog) -> list[Provider]:
    """Every provider of the op: the catalog's, or for an op of the caller's own the built-in tiers' adapters
    over it (eager and compile of its formula, the triton tier's where it names a kernel)."""
    if op.name in catalog.ops:
        return [p for p in catalog.providers() if p.op == op.name]
    return [with_op_rule(p, op) for p in builtin_providers([op])]
