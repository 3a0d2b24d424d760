"""The history experiment for a GPU machine with no network: real per-commit history, an A/A check, and a
deliberately slowed commit whose slowdown a paired A/B must confirm (and nothing else).

    python experiments/gpu_history.py [--steps history,aa,slow] [--commits 3] [--aa-runs 3]

Steps (each can run in its own command; results accumulate under results/):
  history  the last --commits commits of the current branch, each built offline (pip --target, no deps)
           and measured by asv in this Python: `tierbench nightly --commits ... --existing-env`
  aa       --aa-runs more runs of --at (default HEAD), the noise model learned from them, then its history
           result compared with a fresh run of it, suspects re-measured A/B: must confirm no regression.
           Across sessions (machine starts, days) pin --at to one commit: its runs then pile up as the
           cross-session A/A data of results/noise
  slow     a commit on top of HEAD whose Triton matmul uses one small tile config (branch asv-slowed),
           measured, compared with HEAD, suspects re-measured A/B: the Triton matmul series must be
           `confirmed` slower by about the ratio this script measures directly for that config, every other
           series not confirmed
  plant    for each P of --plant (default 3,5,10): a commit on top of HEAD whose Triton norm forward does P%
           more work (the same kernel again over the first P% of rows, its output dropped; branch
           asv-planted-P), measured with HEAD in one session (`--bench`, default the norm forward). Then
           the gate end to end (nominated across the two stored runs, suspects confirmed A/B), and the A/B
           alone on the planted series with eager's series of the same cases as controls,
           nominated or not: the planted series must be `confirmed` with an excess within half of what this
           script times directly (HEAD's kernel against the planted pair), nothing else confirmed. Prints
           each verdict, interval and the A/B's cost (seconds per series)
  ab       the A/B alone, without the nightly before it: for each P of --plant, HEAD against its planted
           commit (P = 0: against a copy of HEAD whose code is unchanged, branch asv-unchanged), the Triton
           and eager norm forward series over --rounds rounds. A planted series must be `confirmed` near the
           slowdown timed directly, nothing else confirmed; with P = 0 nothing may be confirmed. Each A/B is
           saved round by round in results/compare/ab, so a command's time limit keeps the finished rounds
  gate     the gate as a nightly runs it, for each P of --plant: HEAD and its planted commit measured in one
           session (`--bench`, default the norm forward), then `tierbench compare HEAD PLANTED --confirm
           --rounds N` itself: its exit status (1 = a confirmed regression), what it confirmed and what it
           called machine drift, its report in results/compare/<machine>-<head>-<planted>.{md,json}. PASS
           needs exit 1 with every planted series confirmed and nothing else confirmed

On a machine without the repository's history (a copy of the checkout): make a bundle where the history is,
`git bundle create .gitbundle/main.bundle main` (.gitbundle is ignored), carry it, and there run
`git clone -q .gitbundle/main.bundle /tmp/repo && cd /tmp/repo && python experiments/gpu_history.py ...`;
bring back /tmp/repo/results/asv, results/noise and results/compare.

Set TIERBENCH_ASV_OVERRIDES to shrink the suite (e.g. "providers=[eager,triton]") and pass --bench to select
families; both change nothing about the benchmarks' names or versions.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tierbench.suite.history import ab, asvresults, publish
from tierbench.suite.history import keys as series_keys
from tierbench.suite.history.ab import DEFAULT_ROUNDS
from tierbench.suite.history.asvtool import (
    BUILD_ENV,
    AsvConfig,
    AsvError,
    build_commit,
    env_with_build,
    find_config,
    git,
    machine_name,
    require_commit,
)
from tierbench.suite.history.compare import Report, compare_results, default_own_providers
from tierbench.suite.history.compare_command import confirm, learn_model, record_aa_run
from tierbench.suite.history.compare_command import main as compare_main
from tierbench.suite.history.nightly_command import main as nightly_main
from tierbench.suite.history.render import markdown
from tierbench.suite.history.stats import Settings, Verdict

STEPS = ("history", "aa", "slow", "plant", "ab", "gate")
SLOW_BRANCH = "asv-slowed"
# The small tile every Triton matmul of the slowed commit uses: kernels/matmul.py's _cfg(bm, bn, bk, warps, stages).
SLOW_ARGS = (64, 64, 32, 4, 2)
SLOW_CONFIG = f"_cfg{SLOW_ARGS}"
SLOW_PATCH = f"""

# --- asv history experiment (experiments/gpu_history.py): a deliberate slowdown ------------------
_matmul_tma_tuned = triton.autotune(configs=[{SLOW_CONFIG}], key=["M", "N", "K"])(_matmul_tma_kernel)
_matmul_ptr_tuned = triton.autotune(configs=[{SLOW_CONFIG}], key=["M", "N", "K"])(_matmul_ptr_kernel)
"""
MATMUL_FILE = "kernels/matmul.py"
NORM_FILE = "kernels/norm.py"
PLANT_BRANCH = "asv-planted-{pct}"
UNCHANGED_BRANCH = "asv-unchanged"
PLANT_BENCH = r"norm\.Norm\."
AB_BENCH = r"^norm\.Norm\.track_(triton|eager)\("  # the planted series and their controls, every case
PLANTED_OPS = ("layer_norm", "rms_norm", "bias_gelu_layer_norm")  # the ops _norm_forward launches
# The planted work: kernels/norm.py's launcher runs its kernel again over the first PCT% of the rows.
PLANT_PATCH = """

# --- asv history experiment (experiments/gpu_history.py): {pct}% more work in the norm forward ------------
_unplanted_norm_forward = _norm_forward


def _norm_forward(x, *args, mean=None, rstd=None, **kwargs):
    y = _unplanted_norm_forward(x, *args, mean=mean, rstd=rstd, **kwargs)
    rows = x.reshape(-1, x.shape[-1])
    _unplanted_norm_forward(rows[: max(1, rows.shape[0] * {pct} // 100)], *args, **kwargs)
    return y
"""


def _nightly(config: AsvConfig, machine: str, commits: list[str], bench: str | None, aa: int = 0) -> None:
    args = [
        "--config",
        str(config.path),
        "--machine",
        machine,
        "--commits",
        ",".join(commits),
        "--existing-env",
        "--skip-existing",
        "--no-publish",
        "--no-report",
        "--no-compare",
        *(["--bench", bench] if bench else []),
    ]
    code = nightly_main(args + (["--aa", str(aa)] if aa else []))
    if code not in (0, 1):
        raise AsvError(f"tierbench nightly {' '.join(args)} failed (exit {code})")


def step_history(config: AsvConfig, machine: str, count: int, bench: str | None) -> list[str]:
    shas = git(["rev-list", f"--max-count={count}", "--reverse", "HEAD"], config.repo).split()
    print(f"== history: {', '.join(s[:8] for s in shas)} on {machine}", flush=True)
    _nightly(config, machine, shas, bench)
    return shas


def _report(config: AsvConfig, machine: str, base: asvresults.ResultFile, head: asvresults.ResultFile, rounds: int):
    own = default_own_providers()
    model = learn_model(config, machine, own)
    source = f"learned from {model.files} stored result files" if model else "none"
    report = compare_results(base, head, model, Settings(), source)
    confirm(config, report, rounds, Settings(), own, model)  # only an A/B in this session confirms
    print(markdown(report))
    return report


def step_aa(config: AsvConfig, machine: str, runs: int, bench: str | None, rounds: int, at: str = "HEAD") -> bool:
    head = require_commit(config.repo, at)
    print(f"== A/A: {runs} runs of {head[:8]}, noise model, then it vs a fresh run of it", flush=True)
    _nightly(config, machine, [head], bench, aa=runs)
    fresh = record_aa_run(config, machine, head, bench, _build_env(config, head))
    stored = asvresults.find(config.results_dir, machine, head)
    (again,) = [asvresults.load(p) for p in (fresh / machine).glob("*.json") if p.name != "machine.json"]
    report = _report(config, machine, stored, again, rounds)
    ok = not report.regressions
    print(f"A/A: {'PASS: no regression' if ok else 'FAIL: a regression between two runs of one commit'}")
    return ok


def _build_env(config: AsvConfig, sha: str) -> dict[str, str]:
    build = build_commit(config.repo, sha, config.root / ".asv" / "builds" / sha[:12])
    env = env_with_build(build)
    env[BUILD_ENV] = str(build)
    return env


def make_slowed_commit(repo: Path, base: str) -> str:
    """A commit on top of `base` with the slow tile patched into kernels/matmul.py; the working tree is
    untouched (the commit is written through a temporary index) and branch asv-slowed points to it."""
    source = git(["show", f"{base}:{MATMUL_FILE}"], repo)
    for needed in ("def _cfg(", "_matmul_tma_kernel", "_matmul_ptr_kernel", "import triton"):
        if needed not in source:
            raise AsvError(f"{MATMUL_FILE} at {base[:8]} has no {needed!r}: update SLOW_PATCH in {__file__}")
    message = f"asv experiment: Triton matmul pinned to {SLOW_CONFIG} (deliberately slow)"
    return _patched_commit(repo, base, MATMUL_FILE, source + SLOW_PATCH, message, SLOW_BRANCH)


def make_planted_commit(repo: Path, base: str, pct: int) -> str:
    """A commit on top of `base` whose norm forward does `pct`% more work; branch asv-planted-<pct>."""
    source = git(["show", f"{base}:{NORM_FILE}"], repo)
    if "def _norm_forward(" not in source:
        raise AsvError(f"{NORM_FILE} at {base[:8]} has no _norm_forward: update PLANT_PATCH in {__file__}")
    message = f"asv experiment: the Triton norm forward does {pct}% more work (a planted slowdown)"
    return _patched_commit(
        repo, base, NORM_FILE, source + PLANT_PATCH.format(pct=pct), message, PLANT_BRANCH.format(pct=pct)
    )


def make_unchanged_commit(repo: Path, base: str) -> str:
    """A commit on top of `base` that changes no code (a comment at the end of the norm kernels' file)."""
    source = git(["show", f"{base}:{NORM_FILE}"], repo)
    note = "\n# asv experiment (experiments/gpu_history.py): a copy of its parent, no code changed\n"
    message = "asv experiment: a copy of its parent (no code changed)"
    return _patched_commit(repo, base, NORM_FILE, source + note, message, UNCHANGED_BRANCH)


def _patched_commit(repo: Path, base: str, path: str, text: str, message: str, branch: str) -> str:
    # Written through a temporary index: the working tree and the real index are untouched.
    with tempfile.TemporaryDirectory() as tmp:
        patched = Path(tmp) / "patched.py"
        patched.write_text(text)
        blob = git(["hash-object", "-w", str(patched)], repo).strip()
        env_index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git_env(["read-tree", base], repo, env_index)
        _git_env(["update-index", "--cacheinfo", f"100644,{blob},{path}"], repo, env_index)
        tree = _git_env(["write-tree"], repo, env_index).strip()
    sha = _git_env(["commit-tree", tree, "-p", base, "-m", message], repo, {}).strip()
    git(["update-ref", f"refs/heads/{branch}", sha], repo)
    return sha


def _git_env(args: list[str], repo: Path, extra: dict[str, str]) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": os.environ.get("GIT_AUTHOR_NAME", "tierbench"),
        "GIT_AUTHOR_EMAIL": os.environ.get("GIT_AUTHOR_EMAIL", "tierbench@localhost"),
        "GIT_COMMITTER_NAME": os.environ.get("GIT_COMMITTER_NAME", "tierbench"),
        "GIT_COMMITTER_EMAIL": os.environ.get("GIT_COMMITTER_EMAIL", "tierbench@localhost"),
        **extra,
    }
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    if out.returncode:
        raise AsvError(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def _timed_directly(pair: Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]] | None]) -> dict[str, float]:
    """Per asv case label of the suite here, the changed code's median time over HEAD's, both timed by the
    harness's timer; `pair(case, device)` gives (head, changed) calls for a case, or None to leave it out.
    Nothing on a CPU, where Triton is checked, never timed."""
    from tierbench.suite.benchmarks import _cases
    from tierbench.suite.measure.plan import timing_settings
    from tierbench.timing import bring_to_steady_state, make_timer

    cfg, device, entries = _cases.planned_suite()
    if device.type != "cuda":
        return {}
    settings = timing_settings(cfg.timing)
    bring_to_steady_state(device, settings.steady_state_s)
    timer = make_timer(settings, device)
    out = {}
    for case, label, _ in entries:
        calls = pair(case, device)
        if calls is not None:
            samples = timer.measure(dict(zip(("head", "changed"), calls)))
            out[label] = statistics.median(samples["changed"]) / statistics.median(samples["head"])
    return out


def expected_slowdowns() -> dict[str, float]:
    """The Triton matmul's slowdown under the slow tile, per asv case label."""
    import torch

    mm = importlib.import_module("tierbench.kernels.matmul")  # the module: the package exports a function of that name
    slow = mm._cfg(*SLOW_ARGS)  # the config the slowed commit pins

    def pair(case, device):
        if case.op != "matmul":
            return None
        p = case.params
        a = torch.randn(p["m"], p["k"], device=device, dtype=case.dtype)
        b = torch.randn(p["k"], p["n"], device=device, dtype=case.dtype)
        return (lambda: mm.matmul(a, b)), (lambda: mm._matmul_forward(a, b, config=slow))

    return _timed_directly(pair)


def _label(key: str) -> str:
    """The case label of an asv series key, `class.track_provider('label')`."""
    return key.split("('", 1)[-1].rstrip("')")


def step_slow(config: AsvConfig, machine: str, bench: str | None, rounds: int) -> bool:
    head = require_commit(config.repo, "HEAD")
    slowed = make_slowed_commit(config.repo, head)
    print(f"== slowed commit {slowed[:8]} (branch {SLOW_BRANCH}) on top of {head[:8]}", flush=True)
    expected = expected_slowdowns()
    _nightly(config, machine, [head, slowed], bench)
    report = _report(
        config,
        machine,
        asvresults.find(config.results_dir, machine, head),
        asvresults.find(config.results_dir, machine, slowed),
        rounds,
    )
    ok = True
    for row in report.rows:
        is_triton_matmul = row.key.startswith("matmul.Matmul.track_triton(")
        want = expected.get(_label(row.key))
        ratio = row.verdict.ratio if row.verdict else float("nan")
        if is_triton_matmul:
            close = want is None or abs(ratio / want - 1) < 0.25
            good = row.state == "confirmed" and close
            print(
                f"{'PASS' if good else 'FAIL'} {row.key}: {row.state}, ratio {ratio:.2f}"
                + (f" (measured directly: {want:.2f})" if want else "")
            )
        else:
            good = row.state not in ("confirmed", "failed")
            if not good:
                print(f"FAIL {row.key}: {row.state} (only the Triton matmul changed)")
        ok = ok and good
    print(f"slowed commit: {'PASS' if ok else 'FAIL'}")
    return ok


def expected_planted(pct: int) -> dict[str, float]:
    """The Triton norm forward's slowdown under the planted work, per asv case label."""
    import torch

    norm = importlib.import_module("tierbench.kernels.norm")

    def pair(case, device):
        if case.params.get("mode") != "fwd" or case.op not in PLANTED_OPS:
            return None
        p = case.params
        x = torch.randn(p["rows"], p["hidden"], device=device, dtype=case.dtype)
        w, b, xb = (torch.randn(p["hidden"], device=device, dtype=case.dtype) for _ in range(3))
        args = {
            "layer_norm": (w, b, None, 1e-5, False),
            "rms_norm": (w, None, None, 1e-6, True),
            "bias_gelu_layer_norm": (w, b, xb, 1e-5, False),
        }[case.op]
        extra = x[: max(1, x.shape[0] * pct // 100)]

        def planted():
            norm._norm_forward(x, *args)
            norm._norm_forward(extra, *args)

        return (lambda: norm._norm_forward(x, *args)), planted

    return _timed_directly(pair)


def _said(key: str, state: str, v: Verdict | None, decided_by: str = "") -> str:
    """A row as the plant step prints it: key, state, the ratio with its interval, how it was decided."""
    said = f"{key}: {state}" + (f", ratio {v.ratio:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}]" if v else "")
    return said + (f" ({decided_by})" if decided_by else "")


def _planted_series(key: str) -> bool:
    # add_rms_norm, in the norm class too, has a kernel of its own (kernels/residual.py): not planted.
    return key.startswith("norm.Norm.track_triton(") and _label(key).split()[0] in PLANTED_OPS


def _ab_alone(config: AsvConfig, machine: str, head: str, planted: str, keys: list[str], rounds: int) -> Report:
    """The confirmation step by itself: a paired A/B of the planted series and, as controls, eager's series of
    the same cases (their code is unchanged: they must not move), whether or not the nomination suspected them."""
    names = set(keys) | {k.replace(".track_triton(", ".track_eager(") for k in keys}
    run = ab.run_ab(config, machine, head, planted, rounds, series_keys.exact_bench(names))
    return ab.compare_ab(run, Settings(), None, default_own_providers())


def _judge_ab(alone: Report, planted_keys: set[str], expected: dict[str, float]) -> bool:
    """Prints each row of an A/B alone with PASS or FAIL: a planted series must be confirmed within half of
    the slowdown timed directly; any other series must not be confirmed."""
    ok = True
    for row in alone.rows:
        v = row.ab
        said = _said(row.key, row.state, v)
        if row.key in planted_keys:
            want = expected.get(_label(row.key))
            close = want is None or (v is not None and abs((v.ratio - 1) / (want - 1) - 1) <= 0.5)
            good = row.state == "confirmed" and close
            said += f" (timed directly: {want:.3f})" if want else ""
        else:
            good = row.state != "confirmed"
        print(f"{'PASS' if good else 'FAIL'} A/B alone {said}")
        ok = ok and good
    return ok


def step_ab(config: AsvConfig, machine: str, pcts: list[int], rounds: int) -> bool:
    """Per P of `pcts`, the A/B alone of HEAD against its P% planted commit (0: an unchanged copy): the
    verdicts, intervals and cost the gate's confirmation gives when it is handed these series."""
    head = require_commit(config.repo, "HEAD")
    ok = True
    for pct in pcts:
        other = make_planted_commit(config.repo, head, pct) if pct else make_unchanged_commit(config.repo, head)
        what = f"planted {pct}%" if pct else "unchanged copy"
        print(f"== A/B alone, {what}: {head[:8]} against {other[:8]}, {rounds} rounds", flush=True)
        expected = expected_planted(pct) if pct else {}
        run = ab.run_ab(config, machine, head, other, rounds, AB_BENCH)
        alone = ab.compare_ab(run, Settings(), None, default_own_providers())
        planted = {r.key for r in alone.rows if pct and _planted_series(r.key) and r.state != "skipped"}
        if pct and not planted:
            print(f"{what}: no planted series timed on this device, nothing to judge")
            continue
        ok = _judge_ab(alone, planted, expected) and ok
        print(f"{what}: A/B alone {alone.noise_source}")
    print(f"A/B alone: {'PASS' if ok else 'FAIL'}")
    return ok


def step_plant(config: AsvConfig, machine: str, pcts: list[int], bench: str | None, rounds: int) -> bool:
    """Per planted size: the gate end to end (nominated across the two stored runs, suspects confirmed A/B),
    then the A/B alone on the planted series. PASS needs the A/B alone to confirm every planted series within
    half of the slowdown timed directly, and nothing else confirmed anywhere; the end-to-end verdict is
    reported (a miss there is the nomination's, whose noise on a machine with no history is the prior)."""
    head = require_commit(config.repo, "HEAD")
    ok, judged_planted = True, 0
    for pct in pcts:
        planted = make_planted_commit(config.repo, head, pct)
        print(f"== planted {pct}%: commit {planted[:8]} on top of {head[:8]}", flush=True)
        expected = expected_planted(pct)
        _nightly(config, machine, [head, planted], bench or PLANT_BENCH)
        started = time.monotonic()
        report = _report(
            config,
            machine,
            asvresults.find(config.results_dir, machine, head),
            asvresults.find(config.results_dir, machine, planted),
            rounds,
        )
        spent = time.monotonic() - started
        planted_keys = []
        for row in report.rows:
            said = _said(row.key, row.state, row.verdict, row.decided_by)
            if _planted_series(row.key) and row.state != "skipped":
                planted_keys.append(row.key)
                print(f"end to end {said}")
            elif row.state == "confirmed":
                print(f"FAIL end to end {said} (its code is unchanged)")
                ok = False
        print(f"planted {pct}%: end to end, judging and A/B {spent:.0f} s")
        if not planted_keys:
            print(f"planted {pct}%: no planted series timed on this device, nothing to judge")
            continue
        judged_planted += len(planted_keys)
        alone = _ab_alone(config, machine, head, planted, planted_keys, rounds)
        ok = _judge_ab(alone, set(planted_keys), expected) and ok
        print(f"planted {pct}%: A/B alone {alone.noise_source}")
    if not judged_planted:
        print("planted slowdowns: no planted series timed on this device, nothing to judge")
        return ok
    print(f"planted slowdowns: {'PASS' if ok else 'FAIL'}")
    return ok


def step_gate(config: AsvConfig, machine: str, pcts: list[int], bench: str | None, rounds: int) -> bool:
    """Per planted size: both commits measured, then the nightly's own verdict command on the pair."""
    head = require_commit(config.repo, "HEAD")
    ok = True
    for pct in pcts:
        planted = make_planted_commit(config.repo, head, pct)
        print(f"== gate, planted {pct}%: {head[:8]} then {planted[:8]}, {rounds} confirmation rounds", flush=True)
        _nightly(config, machine, [head, planted], bench or PLANT_BENCH)
        stem = config.root / "results" / "compare" / f"{machine}-{head[:8]}-{planted[:8]}"
        stem.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        args = ["--config", str(config.path), "--machine", machine, head, planted, "--confirm"]
        args += ["--rounds", str(rounds), "--json", f"{stem}.json", "--md", f"{stem}.md"]
        code = compare_main(args)
        spent = time.monotonic() - started
        report = json.loads(Path(f"{stem}.json").read_text())
        verdicts = {r["benchmark"]: r["verdict"] for r in report["series"]}
        planted_keys = [k for k, v in verdicts.items() if _planted_series(k) and v != "skipped"]
        confirmed = sorted(k for k, v in verdicts.items() if v == "confirmed")
        drift = sorted(k for k, v in verdicts.items() if v == "drift")
        said = f"exit {code}; confirmed {confirmed or 'nothing'}; drift {drift or 'none'}"
        if not planted_keys:
            print(f"gate, planted {pct}%: {said}; no planted series timed on this device, nothing to judge")
            continue
        good = code == 1 and set(confirmed) == set(planted_keys)
        print(f"{'PASS' if good else 'FAIL'} gate, planted {pct}%: {said}; {len(planted_keys)} planted series; "
              f"judging and A/B {spent:.0f} s")  # fmt: skip
        ok = ok and good
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python experiments/gpu_history.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", default="history,aa,slow", help="comma-separated: history, aa, slow, plant, ab, gate")
    p.add_argument(
        "--plant",
        default="3,5,10",
        help="plant, ab, gate: the extra work of each planted commit, in percent (ab: 0 is an unchanged copy)",
    )
    p.add_argument("--commits", type=int, default=3, help="history: this many commits up to HEAD")
    p.add_argument("--aa-runs", type=int, default=3, help="aa: A/A runs behind the noise model")
    p.add_argument(
        "--at",
        default="HEAD",
        help="aa: the commit measured (default HEAD); pin one across sessions so their A/A runs share code",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help="rounds of every A/B it runs (the gate's confirmation, the plant step's A/B alone); fewer fit a "
        "command with a time limit",
    )
    p.add_argument("--machine", help="asv machine name (default: <gpu>-<host>)")
    p.add_argument("--config", help="asv config (default: asv.conf.json of this checkout)")
    p.add_argument("--bench", help="asv --bench regex for every step")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = [s for s in steps if s not in STEPS]
    try:
        if unknown:
            raise AsvError(f"unknown steps {unknown}; valid choices: {', '.join(STEPS)}")
        given = [p.strip() for p in args.plant.split(",") if p.strip()]
        pcts = [int(p) for p in given if p.isdigit()]
        if len(pcts) != len(given) or ({"plant", "gate"} & set(steps) and 0 in pcts):
            raise AsvError(f"--plant={args.plant}: whole percentages (0, an unchanged copy, only with --steps ab)")
        config = find_config(args.config)
        machine = args.machine or machine_name()
        ok = True
        if "history" in steps:
            step_history(config, machine, args.commits, args.bench)
        if "aa" in steps:
            ok = step_aa(config, machine, args.aa_runs, args.bench, args.rounds, args.at) and ok
        if "slow" in steps:
            ok = step_slow(config, machine, args.bench, args.rounds) and ok
        if "plant" in steps:
            ok = step_plant(config, machine, pcts, args.bench, args.rounds) and ok
        if "ab" in steps:
            ok = step_ab(config, machine, pcts, args.rounds) and ok
        if "gate" in steps:
            ok = step_gate(config, machine, pcts, args.bench, args.rounds) and ok
        if set(steps) - {"ab"}:  # the A/B alone stores no asv results: nothing new to publish
            publish.publish(config)
    except (AsvError, asvresults.ResultsError) as exc:
        print(f"gpu_history: {exc}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
