"""The history experiment for a GPU machine with no network: real per-commit history, an A/A check, and a
deliberately slowed commit whose slowdown a paired A/B must confirm (and nothing else).

    python experiments/gpu_history.py [--steps history,aa,slow] [--commits 3] [--aa-runs 3]

Steps (each can run in its own command; results accumulate under results/):
  history  the last --commits commits of the current branch, each built offline (pip --target, no deps)
           and measured by asv in this Python: `tierbench nightly --commits ... --existing-env`
  aa       --aa-runs more runs of HEAD, the noise model learned from them, then HEAD's history result
           compared with a fresh run of HEAD, suspects re-measured A/B: must confirm no regression
  slow     a commit on top of HEAD whose Triton matmul uses one small tile config (branch asv-slowed),
           measured, compared with HEAD, suspects re-measured A/B: the Triton matmul series must be
           `confirmed` slower by about the ratio this script measures directly for that config, every other
           series not confirmed

Set TIERBENCH_ASV_OVERRIDES to shrink the suite (e.g. "providers=[eager,triton]") and pass --bench to select
families; both change nothing about the benchmarks' names or versions.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tierbench.suite.history import asvresults, publish
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
from tierbench.suite.history.compare import compare_results, default_own_providers
from tierbench.suite.history.compare_command import confirm, learn_model, record_aa_run
from tierbench.suite.history.nightly_command import main as nightly_main
from tierbench.suite.history.render import markdown
from tierbench.suite.history.stats import Settings

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


def _report(config: AsvConfig, machine: str, base: asvresults.ResultFile, head: asvresults.ResultFile):
    own = default_own_providers()
    model = learn_model(config, machine, own)
    source = f"learned from {model.files} stored result files" if model else "none"
    report = compare_results(base, head, model, Settings(), source)
    confirm(config, report, DEFAULT_ROUNDS, Settings(), own, model)  # only an A/B in this session confirms
    print(markdown(report))
    return report


def step_aa(config: AsvConfig, machine: str, runs: int, bench: str | None) -> bool:
    head = require_commit(config.repo, "HEAD")
    print(f"== A/A: {runs} runs of {head[:8]}, noise model, then HEAD vs a fresh run of HEAD", flush=True)
    _nightly(config, machine, [head], bench, aa=runs)
    fresh = record_aa_run(config, machine, head, bench, _build_env(config, head))
    stored = asvresults.find(config.results_dir, machine, head)
    (again,) = [asvresults.load(p) for p in (fresh / machine).glob("*.json") if p.name != "machine.json"]
    report = _report(config, machine, stored, again)
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
    with tempfile.TemporaryDirectory() as tmp:
        patched = Path(tmp) / "matmul.py"
        patched.write_text(source + SLOW_PATCH)
        blob = git(["hash-object", "-w", str(patched)], repo).strip()
        env_index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git_env(["read-tree", base], repo, env_index)
        _git_env(["update-index", "--cacheinfo", f"100644,{blob},{MATMUL_FILE}"], repo, env_index)
        tree = _git_env(["write-tree"], repo, env_index).strip()
    message = f"asv experiment: Triton matmul pinned to {SLOW_CONFIG} (deliberately slow)"
    sha = _git_env(["commit-tree", tree, "-p", base, "-m", message], repo, {}).strip()
    git(["update-ref", f"refs/heads/{SLOW_BRANCH}", sha], repo)
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


def expected_slowdowns() -> dict[str, float]:
    """The Triton matmul's slowdown under the slow tile, per asv case label, timed directly (harness timer)."""
    import torch

    from tierbench.suite.benchmarks import _cases
    from tierbench.timing import TimingSettings, bring_to_steady_state, make_timer

    mm = importlib.import_module("tierbench.kernels.matmul")  # the module: the package exports a function of that name
    cfg, device, entries = _cases.planned_suite()
    if device.type != "cuda":
        return {}
    settings = TimingSettings.from_config(cfg.timing)
    bring_to_steady_state(device, settings.steady_state_s)
    timer = make_timer(settings, device)
    slow = mm._cfg(*SLOW_ARGS)  # the config the slowed commit pins
    out = {}
    for case, label, _ in entries:
        if case.op != "matmul":
            continue
        p = case.params
        a = torch.randn(p["m"], p["k"], device=device, dtype=case.dtype)
        b = torch.randn(p["k"], p["n"], device=device, dtype=case.dtype)
        samples = timer.measure(
            {"tuned": lambda a=a, b=b: mm.matmul(a, b), "slow": lambda a=a, b=b: mm._matmul_forward(a, b, config=slow)}
        )
        out[label] = statistics.median(samples["slow"]) / statistics.median(samples["tuned"])
    return out


def step_slow(config: AsvConfig, machine: str, bench: str | None) -> bool:
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
    )
    ok = True
    for row in report.rows:
        is_triton_matmul = row.key.startswith("matmul.Matmul.track_triton(")
        label = row.key.split("('", 1)[-1].rstrip("')")
        want = expected.get(label)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python experiments/gpu_history.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", default="history,aa,slow", help="comma-separated: history, aa, slow")
    p.add_argument("--commits", type=int, default=3, help="history: this many commits up to HEAD")
    p.add_argument("--aa-runs", type=int, default=3, help="aa: A/A runs behind the noise model")
    p.add_argument("--machine", help="asv machine name (default: <gpu>-<host>)")
    p.add_argument("--config", help="asv config (default: asv.conf.json of this checkout)")
    p.add_argument("--bench", help="asv --bench regex for every step")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = [s for s in steps if s not in ("history", "aa", "slow")]
    try:
        if unknown:
            raise AsvError(f"unknown steps {unknown}; valid choices: history, aa, slow")
        config = find_config(args.config)
        machine = args.machine or machine_name()
        ok = True
        if "history" in steps:
            step_history(config, machine, args.commits, args.bench)
        if "aa" in steps:
            ok = step_aa(config, machine, args.aa_runs, args.bench) and ok
        if "slow" in steps:
            ok = step_slow(config, machine, args.bench) and ok
        publish.publish(config)
    except (AsvError, asvresults.ResultsError) as exc:
        print(f"gpu_history: {exc}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
