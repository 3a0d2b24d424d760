"""What measuring in a worker process costs: a run's wall time per measurement with isolation=process and
isolation=none, the worker's start, and the cost of one step message (not collected by pytest).

    python experiments/isolation_cost.py [--cases 40] [--repeats 3] [--messages 20000]

The runs measure `--cases` tiny RMSNorm cases (eager only, one timed repetition each, no cache flush), so
that a measurement's own work is small and the harness's share shows; isolation=process and isolation=none
alternate `--repeats` times. Per measurement: the time between the first and the last record of a run over
the records in between (the worker's start is before the first record: it is reported apart, as the run
logs it). The step messages are timed apart: a process sends `--messages` of them over the socket a worker
uses and another receives them, as the run does between steps (never inside a timed repetition).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path


def run_once(isolation: str, cases: int, root: Path) -> tuple[float, float | None]:
    """(seconds per measurement between the first and last record, the worker's start in s or None)."""
    rows = ",".join(str(8 + i) for i in range(cases))
    results = root / f"runs-{isolation}-{time.monotonic_ns()}"
    args = [
        "suite=smoke",
        "tiers=[vendor]",
        "providers=[eager]",
        "matmul.enabled=false",
        "attention.enabled=false",
        "decode.enabled=false",
        "norm.kinds=[rms_norm]",
        "norm.modes=[fwd]",
        f"norm.rows=[{rows}]",
        "norm.hidden=[64]",
        "timing.warmup_ms=0",
        "timing.rep_ms=0",
        "timing.rounds=1",
        "timing.min_reps=1",
        "timing.max_reps=1",
        "timing.flush_l2=false",
        "timing.steady_state_s=0",
        f"isolation={isolation}",
        f"results_dir={results}",
        f"ceilings_dir={root}/ceilings",
        "html=false",
        "table=false",
    ]
    exe = Path(sys.executable).parent / "tierbench"
    done = subprocess.run([str(exe), "run", *args], capture_output=True, text=True, check=True)
    (folder,) = list(results.iterdir())
    times = [json.loads(line)["time"] for line in (folder / "measurements.jsonl").read_text().splitlines()]
    said = done.stdout + done.stderr  # the run logs to standard output (Hydra's job logging)
    started = re.search(r"measuring process: started 1 time\(s\), ([0-9.]+) s to be ready", said)
    return (times[-1] - times[0]) / (len(times) - 1), float(started.group(1)) if started else None


def message_cost(count: int) -> float:
    """Microseconds per step message, sent by this process and received by another."""
    ours, theirs = socket.socketpair()
    code = (
        "import sys; from multiprocessing.connection import Connection; c = Connection(int(sys.argv[1]));"
        "[c.recv() for _ in range(int(sys.argv[2]))]; c.send(('done',))"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(theirs.fileno()), str(count)], pass_fds=(theirs.fileno(),)
    )
    theirs.close()
    conn = Connection(ours.detach())
    start = time.perf_counter()
    for i in range(count):
        conn.send(("step", "some-provider", f"timed round {i % 5 + 1} of 5"))
    conn.recv()
    elapsed = time.perf_counter() - start
    child.wait()
    return elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args()
    per: dict[str, list[float]] = {"process": [], "none": []}
    starts: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for isolation in per:
                seconds, start = run_once(isolation, args.cases, Path(tmp))
                per[isolation].append(seconds)
                if start is not None:
                    starts.append(start)
    for isolation, values in per.items():
        shown = ", ".join(f"{v * 1e3:.1f}" for v in values)
        print(f"isolation={isolation}: ms per measurement {shown} (median {statistics.median(values) * 1e3:.1f})")
    extra = statistics.median(per["process"]) - statistics.median(per["none"])
    print(f"difference of the medians: {extra * 1e3:+.1f} ms per measurement")
    print(f"worker start to ready: {', '.join(f'{s:.1f}' for s in starts)} s")
    print(f"one step message: {message_cost(args.messages):.1f} us")


if __name__ == "__main__":
    main()
