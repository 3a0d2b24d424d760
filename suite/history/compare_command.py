"""`tierbench compare`: regression verdicts between two commits' asv results, paired A/B runs, the noise
model and the replay that validates them.

    tierbench compare BASE HEAD [--confirm] [--json FILE|-] [--md FILE] [--html FILE] [--machine M] ...
    tierbench compare --ab BASE HEAD [--rounds 8]      both commits measured here, alternating round by round
    tierbench compare --validate [--machine M]         replay the stored history: false alarms and power
    tierbench compare --learn-noise [COMMIT] [--runs 1]

BASE and HEAD are commits (refs or hash prefixes) with results in results/asv/<machine>/, or paths of
asv result files. Exit status: 0 no regression, 1 a regression, 2 bad input (a result that is missing,
empty or malformed, an unknown commit, no asv).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from ..text import warnings_as_lines
from . import ab, asvresults, noise, render, validate
from .asvresults import ResultFile, ResultsError
from .asvtool import (
    AsvConfig,
    AsvError,
    code_tree,
    find_config,
    installed_commit,
    machine_name,
    register_machine,
    require_commit,
    resolve_commit,
    run_asv,
)
from .compare import Report, bench_regex, compare_results, default_own_providers, own_test, sort_rows
from .stats import Settings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierbench compare",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("base", nargs="?", help="base commit, or an asv result file")
    p.add_argument("head", nargs="?", help="head commit, or an asv result file")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--ab", action="store_true", help="measure BASE and HEAD here, alternating (paired A/B)")
    mode.add_argument("--validate", action="store_true", help="replay the machine's history through the verdicts")
    mode.add_argument(
        "--learn-noise",
        nargs="?",
        const="",
        metavar="COMMIT",
        help="add --runs A/A runs of COMMIT (the installed build), then learn the noise model from the history",
    )
    p.add_argument("--confirm", action="store_true", help="re-measure suspect series A/B before calling them")
    p.add_argument(
        "--ab-run",
        metavar="FILE",
        help="with --validate: replay a stored A/B run of one commit against itself (results/compare/ab/...)",
    )
    p.add_argument("--rounds", type=int, default=ab.DEFAULT_ROUNDS, help="A/B rounds (default: %(default)s)")
    p.add_argument("--runs", type=int, default=1, help="A/A runs to add with --learn-noise COMMIT")
    p.add_argument("--machine", help="asv machine name (default: the only one with results, or this one's)")
    p.add_argument("--env", help="asv environment name, when a commit has results in several")
    p.add_argument("--config", help="asv config (default: asv.conf.json of this checkout)")
    p.add_argument(
        "--noise", help="noise model file, or 'none' (default: learned now from the machine's stored history)"
    )
    p.add_argument("--floor", type=float, default=Settings.floor, help="smallest change called (0.02 = 2%%)")
    p.add_argument("--alpha", type=float, default=Settings.alpha, help="two-sided significance level")
    p.add_argument("--bench", type=bench_regex, help="only benchmarks whose name matches this regex")
    p.add_argument(
        "--own",
        help="providers built by this project, comma-separated; every other provider's series is a "
        "control (default: the providers of the own-code tiers, e.g. triton)",
    )
    p.add_argument("--plugins", help="plugin modules whose own-code providers are judged too, comma-separated")
    p.add_argument("--json", help="write the verdicts as JSON here ('-': on stdout instead of Markdown)")
    p.add_argument("--md", help="write the Markdown here (default: results/compare/<machine>-<base>-<head>.md)")
    p.add_argument("--html", help="write the HTML here (default: results/compare/<machine>-<base>-<head>.html)")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    if not 0.0 <= args.floor <= 10.0:
        raise AsvError(f"--floor={args.floor} is outside 0.0..10.0")
    if not 0.0 < args.alpha < 1.0:
        raise AsvError(f"--alpha={args.alpha} is outside 0..1")
    return Settings(floor=args.floor, alpha=args.alpha)


def _own(args: argparse.Namespace) -> tuple[str, ...]:
    if args.own is None:
        return default_own_providers(tuple(p for p in (args.plugins or "").split(",") if p))
    own = tuple(p.strip() for p in args.own.split(",") if p.strip())
    if not own:
        raise AsvError("--own needs at least one provider name, e.g. --own triton")
    return own


def _noise_root(config: AsvConfig) -> Path:
    return config.root / "results" / "noise"


def _load_side(config: AsvConfig, machine: str | None, ref: str, env: str | None) -> ResultFile:
    path = Path(ref)
    if ref.endswith(".json") or path.is_file():
        return asvresults.require_results(asvresults.load(path))
    results = config.results_dir
    machine = asvresults.pick_machine(results, machine)
    sha = resolve_commit(config.repo, ref) or ref
    return asvresults.require_results(asvresults.find(results, machine, sha, env))


def history_files(config: AsvConfig, machine: str) -> list[ResultFile]:
    """The machine's stored nightly results and A/A runs (unreadable files are left out with a warning)."""
    paths = asvresults.result_files(config.results_dir, machine) + noise.aa_result_files(_noise_root(config), machine)
    files = []
    for path in paths:
        try:
            files.append(asvresults.load(path))
        except ResultsError as exc:
            print(f"tierbench compare: warning: {exc}; left out of the noise model", file=sys.stderr)
    return files


def code_ids(config: AsvConfig):
    """Commit -> the tree of the project's own code at it (commits with equal trees ran the same code)."""
    cache: dict[str, str] = {}

    def code_id(sha: str) -> str:
        if sha not in cache:
            cache[sha] = code_tree(config.repo, sha)
        return cache[sha]

    return code_id


def learn_model(
    config: AsvConfig, machine: str, own: tuple[str, ...], leave_out: tuple[Path, ...] = ()
) -> noise.NoiseModel | None:
    files = [f for f in history_files(config, machine) if f.path.resolve() not in {p.resolve() for p in leave_out}]
    files = [f for f in files if f.machine == machine]
    if not files:
        return None
    return noise.learn(files, machine, own_test(own), code_ids(config))


def _noise_for(args: argparse.Namespace, config: AsvConfig, machine: str, own: tuple[str, ...]):
    if args.noise == "none":
        return None, "none: the prior of a machine without history"
    if args.noise:
        path = Path(args.noise)
        return noise.load_model(path), noise.shown_path(path, config.root)
    model = learn_model(config, machine, own)
    if model is None:
        return None, f"none: no stored history of {machine} (the prior of a machine without history)"
    return model, f"learned from {model.files} stored result files of {machine} (results/asv, results/noise)"


def write_outputs(args: argparse.Namespace, config: AsvConfig, report: Report, stem: str) -> None:
    text = render.markdown(report)
    as_json = render.json_text(report)
    print(as_json if args.json == "-" else text, end="")
    out = config.root / "results" / "compare"
    targets = [
        (text, args.md or out / f"{stem}.md"),
        (render.html_page(report), args.html or out / f"{stem}.html"),
    ]
    if args.json and args.json != "-":
        targets.append((as_json, args.json))
    for content, target in targets:
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)


def attach_confirmations(report: Report, confirmation: Report) -> None:
    """Give each re-measured row of `report` its A/B verdict."""
    by_key = {r.key: r for r in confirmation.rows}
    for row in report.rows:
        again = by_key.get(row.key)
        if again is not None and again.verdict is not None and row.suspect:
            row.confirmation = again.verdict
    sort_rows(report.rows)


def suspects_regex(report: Report) -> str | None:
    """An asv --bench regex of the benchmarks whose own series look slower, or None when none do."""
    names = sorted({r.key.split("(", 1)[0] for r in report.rows if r.own and r.suspect})
    return "^(" + "|".join(re.escape(n) for n in names) + ")" if names else None


def confirm(config: AsvConfig, report: Report, rounds: int, settings: Settings, own: tuple[str, ...]) -> None:
    """Re-measure the suspect own series A/B (both commits built, alternating) and attach the verdicts."""
    bench = suspects_regex(report)
    if bench is None or not (report.base_commit and report.head_commit):
        return
    run = ab.run_ab(config, report.machine, report.base_commit, report.head_commit, rounds, bench)
    attach_confirmations(report, ab.compare_ab(run, settings, None, own))
    report.noise_source += f"; suspects re-measured A/B ({rounds} rounds, {run.seconds:.0f} s)"


def compare(args: argparse.Namespace, config: AsvConfig) -> int:
    settings, own = _settings(args), _own(args)
    base = _load_side(config, args.machine, args.base, args.env)
    head = _load_side(config, args.machine, args.head, args.env)
    if base.machine != head.machine:
        print(
            f"tierbench compare: warning: base is from {base.machine}, head from {head.machine}: "
            "timings of different machines are not comparable",
            file=sys.stderr,
        )
    if not set(base.results) & set(head.results):
        raise ResultsError(f"{base.path} and {head.path} have no benchmark in common")
    model, source = _noise_for(args, config, head.machine, own)
    report = compare_results(base, head, model, settings, source, args.bench, own)
    if not report.rows:
        raise ResultsError(f"no benchmarks matching {args.bench} in {base.path} and {head.path}")
    if args.confirm:
        confirm(config, report, args.rounds, settings, own)
    write_outputs(args, config, report, f"{head.machine}-{base.label}-{head.label}")
    return 1 if report.regressions else 0


def compare_ab_command(args: argparse.Namespace, config: AsvConfig) -> int:
    settings, own = _settings(args), _own(args)
    base, head = require_commit(config.repo, args.base), require_commit(config.repo, args.head)
    machine = args.machine or machine_name()
    with tempfile.TemporaryDirectory(prefix="tierbench-ab-") as tmp:
        register_machine(machine, config.variant(Path(tmp)))
    run = ab.run_ab(config, machine, base, head, args.rounds, args.bench)
    report = ab.compare_ab(run, settings, None, own)
    if not report.rows:
        raise ResultsError(f"the A/B run measured nothing{' matching ' + args.bench if args.bench else ''}")
    write_outputs(args, config, report, f"{machine}-ab-{base[:8]}-{head[:8]}")
    return 1 if report.regressions else 0


def validate_command(args: argparse.Namespace, config: AsvConfig) -> int:
    settings, own = _settings(args), _own(args)
    if args.ab_run:
        run = ab.load(Path(args.ab_run))
        if run.base != run.head:
            raise ResultsError(f"{args.ab_run}: an A/B run of {run.base[:8]} against {run.head[:8]}, not A/A")
        keys = {k for r in run.rounds for k in r.base if r.base[k].samples and r.head.get(k) and r.head[k].samples}
        both = {
            k: [r for r in run.rounds if r.base.get(k) and r.base[k].samples and r.head.get(k) and r.head[k].samples]
            for k in keys
        }
        base = {k: [r.base[k].samples for r in rounds] for k, rounds in both.items()}
        head = {k: [r.head[k].samples for r in rounds] for k, rounds in both.items()}
        tally = validate.ab_replay(base, head, settings)
        label = f"paired A/A run of {run.base[:8]} on {run.machine} ({len(run.rounds)} rounds)"
        print(validate.ab_table(tally, label), end="")
        return 0
    machine = asvresults.pick_machine(config.results_dir, args.machine)
    files = history_files(config, machine)
    result = validate.validate(files, machine, own_test(own), code_ids(config), settings, args.rounds)
    if args.json:
        data = {
            "machine": machine,
            "table": validate.table(result),
            "series": validate.series_table(result),
            "summary": validate.summary(result),
        }
        print(json.dumps(data, indent=1))
    else:
        print(validate.summary(result))
        print(validate.table(result))
        print(validate.series_table(result), end="")
    return 0


def learn_noise(args: argparse.Namespace, config: AsvConfig) -> int:
    own = _own(args)
    if args.learn_noise:
        sha = require_commit(config.repo, args.learn_noise)
        if args.runs < 1:
            raise AsvError(f"--runs={args.runs}: give 1 or more with a COMMIT (or no COMMIT to relearn only)")
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
        machine = args.machine or asvresults.pick_machine(config.results_dir, None)
    model = learn_model(config, machine, own)
    if model is None:
        raise ResultsError(f"no stored results of {machine} to learn its noise from")
    path = noise.save(model, noise.noise_file(_noise_root(config), machine))
    print(f"noise model of {machine}: {len(model.series)} series from {model.files} result files -> {path}")
    for family, prior in sorted(model.priors.items()):
        print(f"  prior {family}: {prior.source}")
    return 0


def record_aa_run(
    config: AsvConfig, machine: str, sha: str, bench: str | None = None, env: dict[str, str] | None = None
) -> Path:
    """One more A/A run of `sha` into results/noise/<machine>/runs/<sha8>-<n>/ (a results folder of its own).

    Runs closer than noise.MIN_SESSION_GAP_S to each other count as one session: spread them over sessions."""
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


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    with warnings_as_lines("tierbench compare"):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        config = find_config(args.config)
        if args.learn_noise is not None or args.validate:
            if args.base or args.head:
                raise AsvError(f"--{'validate' if args.validate else 'learn-noise'} takes no BASE/HEAD")
            return validate_command(args, config) if args.validate else learn_noise(args, config)
        if not (args.base and args.head):
            raise AsvError("give BASE and HEAD (commits or asv result files), or --validate, or --learn-noise")
        return compare_ab_command(args, config) if args.ab else compare(args, config)
    except (AsvError, ResultsError) as exc:
        print(f"tierbench compare: {exc}", file=sys.stderr)
        return 2
