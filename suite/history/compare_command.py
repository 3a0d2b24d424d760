"""`tierbench compare`: the regression report between two commits' asv results; learning the noise model.

    tierbench compare BASE HEAD [--machine M] [--floor 0.03] [--md FILE] [--html FILE] ...
    tierbench compare --learn-noise COMMIT [--runs 3] [--machine M]

BASE and HEAD are commits (refs or hash prefixes) with results in results/asv/<machine>/, or paths of
asv result files (e.g. two A/A runs). Exit status: 0 no confirmed regression, 1 a confirmed regression,
2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from . import asvresults, noise, render
from .asvresults import ResultFile, ResultsError
from .asvtool import (
    AsvConfig,
    AsvError,
    find_config,
    installed_commit,
    machine_name,
    register_machine,
    require_commit,
    resolve_commit,
    run_asv,
)
from .compare import OWN_PROVIDERS, compare_results
from .stats import Settings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierbench compare",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("base", nargs="?", help="base commit, or an asv result file")
    p.add_argument("head", nargs="?", help="head commit, or an asv result file")
    p.add_argument(
        "--learn-noise",
        metavar="COMMIT",
        help="measure COMMIT (the installed build) --runs times and learn the A/A noise model",
    )
    p.add_argument("--runs", type=int, default=3, help="A/A runs to add with --learn-noise (0: only relearn)")
    p.add_argument("--machine", help="asv machine name (default: the only one with results, or this one's)")
    p.add_argument("--env", help="asv environment name, when a commit has results in several")
    p.add_argument("--config", help="asv config (default: asv.conf.json of this checkout)")
    p.add_argument("--noise", help="noise model file, or 'none' (default: results/noise/<machine>.json)")
    p.add_argument("--floor", type=float, default=Settings.floor, help="smallest change called (0.03 = 3%%)")
    p.add_argument("--alpha", type=float, default=Settings.alpha, help="significance level")
    p.add_argument("--confidence", type=float, default=Settings.confidence, help="of the ratio interval")
    p.add_argument(
        "--noise-factor",
        type=float,
        default=Settings.noise_factor,
        help="a change must exceed this many times the benchmark's A/A noise",
    )
    p.add_argument("--bench", help="only benchmarks whose name matches this regex")
    p.add_argument(
        "--own",
        default=",".join(OWN_PROVIDERS),
        help="providers built by this project, comma-separated; every other provider's series is a "
        "control for machine drift (default: %(default)s)",
    )
    p.add_argument("--md", help="write the Markdown here (default: results/compare/<base>-<head>.md)")
    p.add_argument("--html", help="write the HTML here (default: results/compare/<base>-<head>.html)")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    for name, low, high in (
        ("floor", 0.0, 10.0),
        ("alpha", 0.0, 1.0),
        ("confidence", 0.0, 1.0),
        ("noise_factor", 0.0, 100.0),
    ):
        value = getattr(args, name)
        if not low <= value <= high or (name in ("alpha", "confidence") and value in (low, high)):
            raise AsvError(f"--{name.replace('_', '-')}={value} is outside {low}..{high}")
    return Settings(floor=args.floor, alpha=args.alpha, confidence=args.confidence, noise_factor=args.noise_factor)


def _noise_root(config: AsvConfig) -> Path:
    return config.root / "results" / "noise"


def _load_side(config: AsvConfig, machine: str | None, ref: str, env: str | None) -> ResultFile:
    path = Path(ref)
    if ref.endswith(".json") or path.is_file():
        return asvresults.load(path)
    results = config.results_dir
    machine = asvresults.pick_machine(results, machine)
    sha = resolve_commit(config.repo, ref) or ref
    return asvresults.find(results, machine, sha, env)


def compare(args: argparse.Namespace, config: AsvConfig) -> int:
    settings = _settings(args)
    base = _load_side(config, args.machine, args.base, args.env)
    head = _load_side(config, args.machine, args.head, args.env)
    if base.machine != head.machine:
        print(
            f"tierbench compare: warning: base is from {base.machine}, head from {head.machine}: "
            "timings of different machines are not comparable",
            file=sys.stderr,
        )
    model, source = None, "none (pass --noise FILE or learn one with --learn-noise)"
    if args.noise != "none":
        path = Path(args.noise) if args.noise else noise.noise_file(_noise_root(config), head.machine)
        if args.noise or path.exists():
            model, source = noise.load_model(path), noise.shown_path(path, config.root)
        else:
            source = f"none: {noise.shown_path(path, config.root)} does not exist (learn it with --learn-noise COMMIT)"
    own = tuple(p.strip() for p in args.own.split(",") if p.strip())
    if not own:
        raise AsvError("--own needs at least one provider name, e.g. --own triton")
    report = compare_results(base, head, model, settings, source, args.bench, own)
    if not report.rows:
        raise ResultsError(
            f"no benchmarks to compare{' matching ' + args.bench if args.bench else ''} in {base.path} and {head.path}"
        )
    text = render.markdown(report)
    print(text, end="")
    stem = f"{base.label}-{head.label}"
    out = config.root / "results" / "compare"
    for content, target in (
        (text, args.md or out / f"{stem}.md"),
        (render.html_page(report), args.html or out / f"{stem}.html"),
    ):
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    return 1 if report.regressions else 0


def learn_noise(args: argparse.Namespace, config: AsvConfig) -> int:
    sha = require_commit(config.repo, args.learn_noise)
    root = _noise_root(config)
    if args.runs < 0:
        raise AsvError(f"--runs={args.runs}: give 0 (relearn from stored runs) or more")
    if args.runs:
        machine = args.machine or machine_name()
        have, where = installed_commit()
        if have != sha:
            raise AsvError(
                f"--learn-noise {args.learn_noise}: the tierbench this Python imports is "
                f"{(have or 'unknown')[:8]} ({where}), not {sha[:8]}; check that commit out and "
                "install it, or use `tierbench nightly --commits ... --existing-env --aa N`"
            )
        with tempfile.TemporaryDirectory(prefix="tierbench-aa-") as tmp:
            register_machine(machine, config.variant(Path(tmp)))
            for _ in range(args.runs):
                record_aa_run(config, machine, sha, args.bench)
    else:
        machine = args.machine or _only_noise_machine(root)
    runs = noise.load_aa_runs(root, machine)
    model = noise.learn(runs, machine)
    path = noise.save(model, noise.noise_file(root, machine))
    print(
        f"noise model of {machine}: {len(model.noise)} benchmarks from A/A runs of "
        f"{', '.join(c[:8] for c in model.commits)} -> {path}"
    )
    for key, value in sorted(model.noise.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {value:7.2%}  {key}  ({model.runs[key]} runs)")
    return 0


def record_aa_run(
    config: AsvConfig, machine: str, sha: str, bench: str | None = None, env: dict[str, str] | None = None
) -> Path:
    """One more A/A run of `sha` into results/noise/<machine>/runs/<sha8>-<n>/ (a results folder of its own)."""
    runs = noise.runs_dir(_noise_root(config), machine)
    n = 1
    while (runs / f"{sha[:8]}-{n}").exists():
        n += 1
    dest = runs / f"{sha[:8]}-{n}"
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="tierbench-aa-") as tmp:
        variant = config.variant(Path(tmp), results_dir=str(dest))
        args = ["run", "--python=same", "--set-commit-hash", sha, "--machine", machine, "--record-samples"]
        code = run_asv(args + (["--bench", bench] if bench else []), variant, env)
    if code not in (0, 2):  # 2: some benchmarks failed, the others are still results
        raise AsvError(f"asv run for the A/A run {dest} failed (exit {code})")
    return dest


def _only_noise_machine(root: Path) -> str:
    known = sorted(p.name for p in root.iterdir() if (p / "runs").is_dir()) if root.is_dir() else []
    if len(known) == 1:
        return known[0]
    raise AsvError(f"choose the machine with --machine; machines with A/A runs in {root}: {', '.join(known) or 'none'}")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        config = find_config(args.config)
        if args.learn_noise:
            if args.base or args.head:
                raise AsvError("--learn-noise takes no BASE/HEAD")
            return learn_noise(args, config)
        if not (args.base and args.head):
            raise AsvError("give BASE and HEAD (commits or asv result files), or --learn-noise COMMIT")
        return compare(args, config)
    except (AsvError, ResultsError) as exc:
        print(f"tierbench compare: {exc}", file=sys.stderr)
        return 2
