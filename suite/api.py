"""The library API: measure your own callable beside the tiers, from a notebook or a test.

    import tierbench
    records = tierbench.measure(my_rms_norm, op="rms_norm", params={"rows": 4096, "hidden": 1024})
    for r in records:
        print(r.provider, r.status, r.median_ms, r.rel_error)

Your callable takes the op's signature (`fn(*tensors, **options)`: for rms_norm `fn(x, weight, eps=...)`),
and is checked against the op's reference on fresh random inputs before it is timed with its peers, exactly
as `tierbench run` does it (same checker, timer, ceilings and records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tierbench.timing import TimingSettings

from .catalog import Catalog, build
from .ops.base import Op
from .plan import PlanError, PlannedCase, resolve_device
from .providers.base import call_provider, with_op_rule
from .records import Measurement
from .session import Measurer
from .tiers import plugin_tier


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
    catalog: Catalog | None = None,
) -> list[Measurement]:
    """Check and time `fn` as provider `name` of tier `tier` (your own code unless `tier` is a built-in one)
    on one case of `op`, beside the `peers` (built-in providers of that op); returns every record.

    params: the op's case parameters (matmul m, n, k; norms rows, hidden; attention batch, heads, seq,
    head_dim, causal, and kv_heads, kv_seq where they differ; decode batch, heads, kv_heads, q_len, kv_len,
    head_dim, causal, lengths, and for decode_paged page_size). triton: your callable runs Triton kernels, so
    under Triton's CPU interpreter it is checked but not timed, like the triton tier.
    """
    catalog = catalog or build()
    op = catalog.ops[op] if isinstance(op, str) and op in catalog.ops else op
    if not isinstance(op, Op):
        raise PlanError(f"op={op!r} is not known; valid choices: {', '.join(catalog.ops)}")
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
    known = {p.name: p for p in catalog.providers() if p.op == op.name}
    unknown = [p for p in wanted if p not in known]
    if unknown:
        raise PlanError(f"peers={unknown} are not providers of {op.name}; valid choices: {', '.join(known)}")
    providers = (with_op_rule(call_provider(name, tier, op, fn), op), *(known[p] for p in wanted))
    settings = timing if isinstance(timing, TimingSettings) else timing_named(timing)
    bad = settings.problems()
    if bad:
        raise PlanError("; ".join(bad))
    measurer = Measurer.open(resolve_device(device), settings, ceilings_dir, run_id="api", seed=seed, tiers=tiers)
    return list(measurer.measure(PlannedCase(case, op, providers)))
