"""`tierbench spread RUN_A RUN_B`: how far the medians of two runs of one suite lie apart (an A/A check).

Each side is a run folder, a run id, or a sweep id (its shard runs as one run).

For every (case, provider) timed in both runs: the relative difference of the medians. Reported overall and
for kernels of at least --min-us microseconds, where launch jitter no longer dominates.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from ..store.reading import RUNS_ROOT, find_runs, read_records, timed
from ..store.records import Measurement
from ..text import plain, warnings_as_lines


def pair_spreads(a: list[Measurement], b: list[Measurement]) -> list[tuple[Measurement, Measurement, float]]:
    """(record A, record B, |median A - median B| / mean of both) for every pair timed in both runs."""
    ok_b = {r.key: r for r in b if timed(r)}
    out = []
    for ra in a:
        rb = ok_b.get(ra.key)
        if timed(ra) and rb:
            out.append((ra, rb, abs(ra.median_ms - rb.median_ms) / ((ra.median_ms + rb.median_ms) / 2)))
    return out


def _summary(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return (
        f"n={len(values)} median {100 * statistics.median(values):.2f}%  p90 {100 * p(0.9):.2f}%  "
        f"max {100 * ordered[-1]:.2f}%"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tierbench spread", description=__doc__.splitlines()[0])
    parser.add_argument("run_a", help=f"run folder ({RUNS_ROOT}/<id>), run id, or sweep id (its shards as one run)")
    parser.add_argument("run_b")
    parser.add_argument("--runs", type=Path, default=Path(RUNS_ROOT), help="where run and sweep ids are looked up")
    parser.add_argument("--min-us", type=float, default=50.0, help="kernel duration for the second summary")
    parser.add_argument("--top", type=int, default=10, help="list this many of the widest spreads")
    args = parser.parse_args(argv)
    if not 0 <= args.min_us < math.inf or args.top < 0:  # NaN fails the first too
        print(f"tierbench spread: --min-us {args.min_us:g} and --top {args.top} must be 0 or more", file=sys.stderr)
        return 2
    sides = []
    for given in (args.run_a, args.run_b):
        folders = find_runs(given, args.runs)
        if not folders:
            print(f"tierbench spread: {plain(given)} is not a run folder, run id or sweep id", file=sys.stderr)
            return 2
        with warnings_as_lines("tierbench spread"):
            sides.append(sorted((r for folder in folders for r in read_records(folder)), key=lambda r: r.time))
    pairs = pair_spreads(*sides)
    if not pairs:
        print("tierbench spread: the two runs have no timed (case, provider) in common", file=sys.stderr)
        return 2
    long = [s for ra, rb, s in pairs if min(ra.median_ms, rb.median_ms) * 1e3 >= args.min_us]
    print(f"all pairs:            {_summary([s for _, _, s in pairs])}")
    print(f"kernels >= {args.min_us:g} us:    {_summary(long)}")
    print("widest:")
    for ra, rb, s in sorted(pairs, key=lambda t: -t[2])[: args.top]:
        print(
            plain(
                f"  {100 * s:6.2f}%  {ra.op} {ra.label} ({ra.case.get('dtype', '')}, {ra.mode}) {ra.provider}: "
                f"{ra.median_ms:.4f} vs {rb.median_ms:.4f} ms"
            )
        )
    return 0
