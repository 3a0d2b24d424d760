"""A composite op's best mix: the fastest correct provider of each of its parts, composed into one call.

A composite op (a model's block, suite/ops/model.py) declares its parts (cases of other ops at its shapes)
and its chain (the composite as a function of one function per part). The plan measures the parts before
the composite; when the composite's case comes, its `best-mix` provider looks at the records of this run so
far and takes, per part, the correct timed provider with the least median time among those that can be
called as plain functions (Provider.function). A part whose providers all failed, were not timed here
(Triton under its CPU interpreter) or were not measured in this run gives no mix: the best mix is then
`skipped` with that reason. A broken provider (incorrect, error, oom) has no timed record, so it never
enters the mix. The mix itself is then checked against the composite's reference like any provider.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from ..ops.base import Case, Op, Part
from ..providers.base import Inputs, Provider, Unavailable
from ..store.reading import fastest, timed
from ..store.records import Measurement

MIX_TIER = "mix"
BEST_MIX = "best-mix"

# case id -> provider -> its record (this run's, so far).
Results = Mapping[str, Mapping[str, Measurement]]


def compositions(planned: list[Any]) -> dict[str, dict[str, Any]]:
    """run.json's account of a plan's composite cases: per case id, its op, label and params and its parts in
    chain order."""
    out = {}
    for pc in planned:
        if pc.op.parts is None:
            continue
        parts = [
            {
                "name": part.name,
                "op": part.case.op,
                "family": part.case.family,
                "case_id": part.case.case_id,
                "in_whole": part.in_whole,
            }
            for part in pc.op.parts(pc.case)
        ]
        out[pc.case.case_id] = {"op": pc.op.name, "label": pc.case.label, "params": pc.case.to_json(), "parts": parts}
    return out


def mix_providers(ops: Mapping[str, Op], providers: list[Provider]) -> list[Provider]:
    """One best-mix provider per composite op, choosing among `providers` (every provider of the catalog)."""
    callable_by_key = {(p.op, p.name): p for p in providers if p.function is not None}
    return [
        Provider(
            BEST_MIX,
            MIX_TIER,
            op.name,
            _not_resolved,
            from_results=functools.partial(_resolve, op, ops, callable_by_key),
        )
        for op in ops.values()
        if op.parts is not None and op.chain is not None
    ]


def _not_resolved(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
    raise Unavailable(
        "the best mix is chosen from the run's own records of the composite's parts: `tierbench run` (and asv's "
        "Model class) measure the parts first"
    )


def fastest_composable(
    part: Part, results: Results, composable: Mapping[tuple[str, str], Provider]
) -> Measurement | str:
    """The part's fastest correct timed record whose provider can be composed, or why there is none."""
    records = results.get(part.case.case_id, {})
    if not records:
        return f"part {part.name} ({part.case.case_id}) was not measured in this run"
    usable = fastest(r for r in records.values() if (part.case.op, r.provider) in composable)
    if usable is not None:
        return usable
    if any(map(timed, records.values())):
        names = ", ".join(sorted(r.provider for r in records.values() if timed(r)))
        return f"part {part.name}: its timed providers ({names}) cannot be called as plain functions in a chain"
    outcomes = ", ".join(f"{r.provider} {r.status}" for r in sorted(records.values(), key=lambda r: r.provider))
    return f"part {part.name} ({part.case.op}): no correct timed provider in this run ({outcomes})"


def _resolve(
    op: Op, ops: Mapping[str, Op], composable: Mapping[tuple[str, str], Provider], case: Case, results: Results
) -> Provider | str:
    chosen: list[tuple[Part, Provider]] = []
    for part in op.parts(case):
        best = fastest_composable(part, results, composable)
        if isinstance(best, str):
            return f"no best mix: {best}"
        chosen.append((part, composable[(part.case.op, best.provider)]))
    return composed(op, ops, chosen)


def composed(op: Op, ops: Mapping[str, Op], chosen: list[tuple[Part, Provider]]) -> Provider:
    """The composite computed by one given provider per part (each through its plain function)."""
    composition = tuple((part.name, provider.name) for part, provider in chosen)

    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
        functions = {}
        for part, provider in chosen:
            part_op = ops[part.case.op]
            fn = provider.function(part.case)
            functions[part.name] = functools.partial(fn, **part_op.options(part.case))
        chain = op.chain(functions)
        args = op.args(inputs)
        return lambda: chain(*args, **options)

    described = "; ".join(f"{part}: {name}" for part, name in composition)
    return Provider(
        BEST_MIX,
        MIX_TIER,
        op.name,
        prepare,
        package="torch",
        describe_launch=lambda: described,
        composition=composition,
    )
