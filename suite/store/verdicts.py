"""A record's correctness verdict, judged again under the bounds in force when it is read.

A record keeps every output's norm-wise error (`errors`) and, since records carry them, each output's
elementwise error and the bound it was held to (`element_errors`, `element_tolerances`). When a bound of
suite/bounds.py changes, a record made under the old one would otherwise keep a verdict that today's check
would not give. Every reader (reading.read_records) passes records through `rejudge`: where today's bounds
decide otherwise, the record's status and reason become today's and `verdict_note` says what changed and why.

- Judged incorrect then, correct now: the record was never timed, so it becomes `skipped` with a reason that
  starts "correct, not timed" (as a check-only tier's records do) and asks for a re-measure. It is never
  ranked: there is no timing to rank.
- Judged correct then, incorrect now: `incorrect`; its timings stay in the record, and no view ranks them.
- Records that failed for another reason (a wrong shape, NaN, an error) are not the bounds' to change.
- Called incorrect where nothing wrong was seen (an older harness's verdict when the check of the last timed
  output could not run, or that call raised): `oom` or `error`, as today's harness records them, with a
  `verdict_note` saying so. Never timed either way.

A record made before per-output elementwise errors were kept has only the largest one (`element_error`):
it is judged again where that one number decides (below every output's bound, or above all of them).
Torch-free: the site and compare read records without loading torch.
"""

from __future__ import annotations

import dataclasses
import math

from .. import bounds
from .records import LAST_CALL_RAISED, LAST_OUTPUT_UNCHECKED, Measurement, reads_as_oom

CORRECT_NOT_TIMED = "correct, not timed"


def checked_correct(r: Measurement) -> bool:
    """Passed its check but was not timed (a check-only tier, or a record judged correct again)."""
    return r.status == "skipped" and r.reason.startswith(CORRECT_NOT_TIMED)


def verdict(r: Measurement) -> str:
    """The record's outcome in words: its status, or "correct, not timed" for a record checked but not timed."""
    return CORRECT_NOT_TIMED if checked_correct(r) else r.status


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _element_bound(r: Measurement, output: str, table: float) -> float:
    """Today's elementwise bound for one output: a built-in op's own bound for its gradients, else (a plugin
    op that stated its own) the bound the record was held to where it differs from the table's, else the
    table's."""
    if output == "out":
        return table
    dtype = str(r.case.get("out_dtype", r.case.get("dtype", "")))
    own = bounds.own_gradient_bound(r.op, dtype)
    if own is not None:
        return own
    if r.op not in bounds.OWN_GRADIENT_ELEMENT_TOLERANCE and r.op not in bounds.OWN_TOLERANCE:
        held = r.element_tolerances.get(output)
        if _finite(held) and held != bounds.ELEMENT_TOLERANCE.get(dtype):
            return float(held)
    return table


def _judge(r: Measurement) -> tuple[bool, str] | None:
    """(correct under today's bounds, why) from the stored errors, or None where they cannot decide."""
    dtype = str(r.case.get("out_dtype", r.case.get("dtype", "")))
    operands = str(r.case.get("dtype", ""))
    # rel_error is the worst over every output: not finite where one could not be compared at all (a NaN, a
    # wrong shape or dtype), which no bound can change; `errors` then holds only the others.
    if not bounds.known(dtype) or not _finite(r.rel_error) or not r.errors:
        return None
    if not all(_finite(e) for e in r.errors.values()):
        return None
    tol, elem_tol = bounds.tolerances(dtype, operands, r.op)
    if r.op not in bounds.OWN_TOLERANCE and _finite(r.tolerance) and r.tolerance > tol:
        tol = float(r.tolerance)  # a plugin op's own norm-wise bound, as its record keeps it
    named = bounds.describe(dtype, operands)
    for output, err in r.errors.items():
        if err > tol:
            return False, f"{output}: relative error {err:.3g} exceeds today's {named} tolerance {tol:g}"
    limits = {output: _element_bound(r, output, elem_tol) for output in r.errors}
    if r.element_errors:
        if set(r.element_errors) != set(r.errors) or not all(_finite(e) for e in r.element_errors.values()):
            return None
        for output, err in r.element_errors.items():
            if err > limits[output]:
                return False, f"{output}: elementwise error {err:.3g} exceeds today's {named} bound {limits[output]:g}"
        worst = max(r.element_errors, key=lambda o: r.element_errors[o] / limits[o])
        return True, f"{worst}: elementwise error {r.element_errors[worst]:.3g} within today's bound {limits[worst]:g}"
    # An older record: only the largest elementwise error over its outputs.
    largest = r.element_error
    if not _finite(largest):
        return None
    if largest <= min(limits.values()):
        return True, f"largest elementwise error {largest:.3g} within today's bound {min(limits.values()):g}"
    if largest > max(limits.values()):
        return False, f"largest elementwise error {largest:.3g} exceeds today's bound {max(limits.values()):g}"
    return None


# Reasons an older harness gave with `incorrect` although no output was seen wrong (suite/measure/runner.py's
# _recheck now records these as oom or error).
_NOT_SEEN_WRONG = (LAST_OUTPUT_UNCHECKED, LAST_CALL_RAISED)


def _not_seen_wrong(r: Measurement) -> Measurement:
    status = "oom" if reads_as_oom(r.reason) else "error"
    note = "recorded incorrect by the harness of its day although no output was seen wrong; " + status + " today"
    return dataclasses.replace(r, status=status, verdict_note=note)


def rejudge(r: Measurement) -> Measurement:
    """The record under today's bounds: itself where they agree with its verdict, else a changed copy."""
    if r.status == "incorrect" and r.reason.startswith(_NOT_SEEN_WRONG):
        return _not_seen_wrong(r)
    if r.status == "ok" or checked_correct(r):
        recorded_correct = True
    elif r.status == "incorrect":
        recorded_correct = False
    else:
        return r
    judged = _judge(r)
    if judged is None or judged[0] == recorded_correct:
        return r
    correct, why = judged
    if correct:
        note = f"judged incorrect under the bounds in force when measured; correct under today's ({why})"
        reason = f"{CORRECT_NOT_TIMED}: {note}, so never timed: re-measure to time it. When measured: {r.reason}"
        return dataclasses.replace(r, status="skipped", reason=reason, verdict_note=note)
    note = f"judged correct under the bounds in force when measured; incorrect under today's ({why})"
    return dataclasses.replace(r, status="incorrect", reason=note, verdict_note=note)
