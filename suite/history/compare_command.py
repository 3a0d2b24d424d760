"""`tierbench compare`: regression verdicts between two commits' asv results, two runs, two providers or two
versions of a plugin; paired A/B runs, the noise model and the replay that validates them.

    tierbench compare BASE HEAD [--confirm] [--json FILE|-] [--md FILE] [--html FILE] [--machine M] ...
    tierbench compare --ab BASE HEAD [--rounds 10]     both commits measured here, alternating round by round
    tierbench compare --validate [--machine M]         replay the stored history: suspects, confirmations, power
    tierbench compare --learn-noise [COMMIT] [--runs 1]
    tierbench compare RUN_A RUN_B                      two runs (ids under --runs-dir, or folders), across sessions
    tierbench compare RUN --providers A B              two providers of one run, paired by the run's rounds
    tierbench compare --providers A B [OVERRIDE ...]   two providers measured A/B here (tierbench run's overrides)
    tierbench compare --plugin-versions OLD NEW [--plugin MODULE] [OVERRIDE ...]
                                                       two versions of a plugin (folders, module files), A/B here

BASE and HEAD are commits (refs or hash prefixes) with results in results/asv/<machine>/, or paths of
asv result files. The stored results only nominate suspects (the project's series that look slower across
sessions); --confirm re-measures them in a paired, alternating A/B of both commits here, and only a slowdown
that the A/B confirms is a regression. Controls (series of code this project does not build) report machine
drift and never fail. Exit status: 0 no confirmed regression, 1 a confirmed regression (--confirm, --ab),
2 bad input (a result that is missing, empty or malformed, an unknown commit, an unwritable report path,
no asv). Two runs likewise only nominate; two providers of a run, and the forms measured here, confirm: exit
1 when the head side is confirmed slower. In a plugin's own repository (its asv.conf.json) the commits are
the plugin's, and both commits' builds of the plugin are measured side by side (docs/plugins.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from ..store.reading import RUNS_ROOT
from ..text import plain, warnings_as_lines
from . import ab, asvresults, compare_measured, keys, noise, plugin_history, render, validate
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
from .compare import Report, attach_confirmations, bench_regex, compare_results, default_own_providers, own_test
from .identities import SeriesIdentities
from .inputs import at_least, writable_file, write_text
from .inputs import machine_name as machine_arg
from .stats import Settings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierbench compare",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument(
        "refs",
        nargs="*",
        metavar="ARG",
        help="BASE HEAD: two commits or asv result files, or two runs (ids under --runs-dir, or folders); RUN with "
        "--providers; with --providers or --plugin-versions alone: `tierbench run` overrides choosing the cases",
    )
    p.add_argument(
        "--providers",
        nargs=2,
        metavar=("A", "B"),
        help="provider B against provider A: of the run given, or measured A/B here (paired, alternating)",
    )
    p.add_argument(
        "--plugin-versions",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="two versions of a plugin (folders or module files) measured A/B here, paired and alternating",
    )
    p.add_argument(
        "--plugin", metavar="MODULE", help="the plugin module of --plugin-versions (default: its entry point)"
    )
    p.add_argument("--runs-dir", default=RUNS_ROOT, help="where run ids are looked up (default: %(default)s)")
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
    p.add_argument(
        "--confirm", action="store_true", help="re-measure the suspects A/B here: only a confirmed slowdown exits 1"
    )
    p.add_argument(
        "--ab-run",
        metavar="FILE",
        help="judge a stored A/B run again (results/compare/ab/...; one cut short keeps its finished rounds); with "
        "--validate: replay a stored A/B run of one commit against itself",
    )
    p.add_argument(
        "--same-code",
        action="store_true",
        help="with --validate --ab-run: the run's two commits differ but run the same code (an unchanged copy, "
        "e.g. experiments/gpu_history.py's asv-unchanged): replay it as an A/A run",
    )
    p.add_argument(
        "--rounds",
        type=at_least(Settings.min_rounds),
        default=ab.DEFAULT_ROUNDS,
        help=f"A/B rounds, {Settings.min_rounds} or more (default: %(default)s)",
    )
    p.add_argument("--runs", type=at_least(1), default=1, help="A/A runs to add with --learn-noise COMMIT")
    p.add_argument(
        "--machine", type=machine_arg, help="asv machine name (default: the only one with results, or this one's)"
    )
    p.add_argument("--env", help="asv environment name, when a commit has results in several")
    p.add_argument("--config", help="asv config (default: asv.conf.json of this checkout)")
    p.add_argument(
        "--noise", help="noise model file, or 'none' (default: learned now from the machine's stored history)"
    )
    p.add_argument("--floor", type=float, default=Settings.floor, help="smallest change called (0.02 = 2%%)")
    p.add_argument(
        "--alpha", type=float, default=Settings.alpha, help="two-sided level of an A/B's and a control's verdict"
    )
    p.add_argument(
        "--suspect-alpha",
        type=float,
        default=Settings.suspect_alpha,
        help="one-sided level of a nomination across sessions (default: %(default)s)",
    )
    p.add_argument("--bench", type=bench_regex, help="only benchmarks whose name matches this regex")
    p.add_argument(
        "--own",
        help="providers built by this project, comma-separated; every other provider's series is a "
        "control (default: the providers of the own-code tiers, e.g. triton)",
    )
    p.add_argument("--plugins", help="plugin modules whose own-code providers are judged too, comma-separated")
    p.add_argument("--json", help="write the verdicts (or --validate's tables) as JSON here ('-': on stdout)")
    p.add_argument("--md", help="write the Markdown here (default: results/compare/<machine>-<base>-<head>.md)")
    p.add_argument("--html", help="write the HTML here (default: results/compare/<machine>-<base>-<head>.html)")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    if not 0.0 <= args.floor <= 10.0:
        raise AsvError(f"--floor={args.floor} is outside 0.0..10.0")
    for name, value in (("--alpha", args.alpha), ("--suspect-alpha", args.suspect_alpha)):
        if not 0.0 < value < 0.5:
            raise AsvError(f"{name}={value} is outside 0..0.5")
    return Settings(floor=args.floor, alpha=args.alpha, suspect_alpha=args.suspect_alpha)


def _own(args: argparse.Namespace) -> tuple[str, ...]:
    if args.own is None:
        return default_own_providers(_plugins(args))
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


def code_ids(config: AsvConfig, plugins: tuple[str, ...] = ()) -> SeriesIdentities:
    """(series, commit) -> the code identity of the series' provider at that commit (suite/benchmarks/identity.py):
    commits with equal identities ran the same code for that series. In a plugin's repository the plugin's
    series are identified by its own modules at that commit (plugin_history.py)."""
    if not plugin_history.is_tierbench(config.repo):
        return plugin_history.PluginIdentities(config.repo, plugins=plugins)
    return SeriesIdentities(config.repo, plugins=plugins)


def _plugins(args: argparse.Namespace) -> tuple[str, ...]:
    """The plugins named by --plugins and by TIERBENCH_ASV_OVERRIDES (which the asv suite loads)."""
    named = tuple(p for p in (getattr(args, "plugins", None) or "").split(",") if p)
    return tuple(dict.fromkeys([*named, *plugin_history.overrides_plugins()]))


def learn_model(
    config: AsvConfig,
    machine: str,
    own: tuple[str, ...],
    leave_out: tuple[Path, ...] = (),
    plugins: tuple[str, ...] = (),
) -> noise.NoiseModel | None:
    files = [f for f in history_files(config, machine) if f.path.resolve() not in {p.resolve() for p in leave_out}]
    files = [f for f in files if f.machine == machine]
    if not files:
        return None
    return noise.learn(files, machine, own_test(own), code_ids(config, plugins))


def _noise_for(args: argparse.Namespace, config: AsvConfig, machine: str, own: tuple[str, ...]):
    if args.noise == "none":
        return None, "none: the prior of a machine without history"
    if args.noise:
        path = Path(args.noise)
        return noise.load_model(path), noise.shown_path(path, config.root)
    model = learn_model(config, machine, own, plugins=_plugins(args))
    if model is None:
        return None, f"none: no stored history of {machine} (the prior of a machine without history)"
    return model, (
        f"learned from {model.files} stored result files of {machine} in {model.sessions} sessions "
        "(results/asv, results/noise)"
    )


def output_targets(args: argparse.Namespace, config: AsvConfig, stem: str) -> list[tuple[str, str, Path]]:
    """(kind, option, path) of every report to write, each checked writable before anything is measured."""
    out = config.root / "results" / "compare"
    targets = [
        ("md", "--md", Path(args.md or out / f"{stem}.md")),
        ("html", "--html", Path(args.html or out / f"{stem}.html")),
    ]
    if args.json and args.json != "-":
        targets.append(("json", "--json", Path(args.json)))
    return [(kind, option, writable_file(path, option)) for kind, option, path in targets]


def write_outputs(args: argparse.Namespace, report: Report, targets: list[tuple[str, str, Path]]) -> None:
    """The report on stdout (Markdown, or JSON with --json -) and into its files; a file whose content would not
    change is left as it is."""
    contents = {"md": render.markdown(report), "html": render.html_page(report), "json": render.json_text(report)}
    print(contents["json"] if args.json == "-" else contents["md"], end="")
    for kind, option, target in targets:
        if write_text(target, contents[kind], option):
            print(f"wrote {target}", file=sys.stderr)


def suspects_regex(report: Report, normalisers: dict[str, noise.Normaliser] | None = None) -> str | None:
    """An asv --bench regex of exactly the suspect own series and the control series that normalise them in an
    A/B (asv matches a parameterized benchmark by `name(params)`); None when nothing is suspected. The class's
    process measures its whole class anyway: this selects which series asv records."""
    names = set()
    for row in report.rows:
        if not row.suspect:
            continue
        names.add(row.key)
        parts = keys.parse(row.key)
        normaliser = (normalisers or {}).get(parts.cls) if parts else None
        if normaliser is not None:
            names.add(parts.with_provider(normaliser.control))
    return keys.exact_bench(names) if names else None


def confirm(
    config: AsvConfig,
    report: Report,
    rounds: int,
    settings: Settings,
    own: tuple[str, ...],
    model: noise.NoiseModel | None = None,
) -> None:
    """Re-measure the suspect own series A/B (both commits built, alternating rounds in this one session) and
    give each its paired verdict: only these can confirm a regression. In a plugin's repository both commits'
    builds of the plugin are measured side by side in this process (plugin_history.confirm)."""
    if not plugin_history.is_tierbench(config.repo):
        plugin_history.confirm(config, report, rounds, settings)
        return
    normalisers = model.normalisers if model else {}
    bench = suspects_regex(report, normalisers)
    if bench is None:
        report.confirmation = "nothing suspected: no A/B needed"
        return
    if not (report.base_commit and report.head_commit):
        report.confirmation = "suspects not re-measured: the commits of the two results are unknown"
        return
    run = ab.run_ab(config, report.machine, report.base_commit, report.head_commit, rounds, bench)
    attach_confirmations(report, ab.compare_ab(run, settings, None, own, normalisers))
    suspects = sum(1 for r in report.rows if r.ab is not None)
    report.confirmation = (
        f"{suspects} suspects re-measured in a paired A/B here ({rounds} rounds alternating base and head, "
        f"{run.seconds:.0f} s)"
    )


def not_confirmed(report: Report) -> None:
    if report.suspects:
        report.confirmation = "suspects not re-measured (run with --confirm): nothing is confirmed"


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
    if not set(base.results) & set(head.results):
        raise ResultsError(f"{base.path} and {head.path} have no benchmark in common")
    targets = output_targets(args, config, f"{head.machine}-{base.label}-{head.label}")
    if not plugin_history.is_tierbench(config.repo) and head.commit:  # which series are the plugin's own code
        plugin_history.make_importable(config, head.commit, _plugins(args))
    own = _own(args)
    model, source = _noise_for(args, config, head.machine, own)
    report = compare_results(base, head, model, settings, source, args.bench, own)
    if not report.rows:
        raise ResultsError(f"no benchmarks matching {args.bench} in {base.path} and {head.path}")
    if args.confirm:
        confirm(config, report, args.rounds, settings, own, model)
    else:
        not_confirmed(report)
    write_outputs(args, report, targets)
    return 1 if report.regressions else 0


def compare_ab_command(args: argparse.Namespace, config: AsvConfig) -> int:
    settings, own = _settings(args), _own(args)
    base, head = require_commit(config.repo, args.base), require_commit(config.repo, args.head)
    machine = args.machine or machine_name()
    targets = output_targets(args, config, f"{machine}-ab-{base[:8]}-{head[:8]}")
    if not plugin_history.is_tierbench(config.repo):  # a plugin's two commits, measured side by side here
        report = plugin_history.versions_ab(config, base, head, args.rounds, settings)
        if not report.rows:
            raise ResultsError(f"the A/B measured no provider of the plugin of {config.repo}")
        write_outputs(args, report, targets)
        return 1 if report.regressions else 0
    model = _ab_noise(args, config, machine, own)  # learned before measuring: a bad history fails first
    run = ab.run_ab(config, machine, base, head, args.rounds, args.bench)
    return _judge_ab_run(args, run, targets, settings, own, model, "the A/B run measured nothing", bench=None)


def judge_ab_run_command(args: argparse.Namespace, config: AsvConfig) -> int:
    """The paired verdicts of a stored A/B run, judged as `--ab` judges the run it has just measured."""
    settings, own = _settings(args), _own(args)
    run = ab.load(Path(args.ab_run))
    targets = output_targets(args, config, f"{run.machine}-ab-{run.base[:8]}-{run.head[:8]}")
    model = _ab_noise(args, config, run.machine, own)
    return _judge_ab_run(args, run, targets, settings, own, model, f"{args.ab_run}: no series", bench=args.bench)


def _ab_noise(args: argparse.Namespace, config: AsvConfig, machine: str, own: tuple[str, ...]):
    """The machine's noise model, for its normalisers (none with --noise none)."""
    return learn_model(config, machine, own, plugins=_plugins(args)) if args.noise != "none" else None


def _judge_ab_run(
    args: argparse.Namespace,
    run: ab.ABRun,
    targets: list[tuple[str, str, Path]],
    settings: Settings,
    own: tuple[str, ...],
    model: noise.NoiseModel | None,
    empty: str,
    bench: str | None,
) -> int:
    """An A/B run's paired verdicts (each own series divided by its class's normaliser where the model names
    one), written to the report targets; exit 1 on a confirmed regression."""
    report = ab.compare_ab(run, settings, bench, own, model.normalisers if model else None)
    if not report.rows:
        raise ResultsError(f"{empty}{' matching ' + args.bench if args.bench else ''}")
    write_outputs(args, report, targets)
    return 1 if report.regressions else 0


def validate_command(args: argparse.Namespace, config: AsvConfig) -> int:
    settings, own = _settings(args), _own(args)
    target = writable_file(args.json, "--json") if args.json and args.json != "-" else None
    if args.ab_run:
        run = ab.load(Path(args.ab_run))
        if run.base != run.head and not args.same_code:
            raise ResultsError(
                f"{args.ab_run}: an A/B run of {run.base[:8]} against {run.head[:8]}, not A/A (add --same-code "
                "if the two commits run the same code)"
            )
        tally = validate.ab_replay(run, settings, own_test(own))
        pair = run.base[:8] if run.base == run.head else f"{run.base[:8]} against {run.head[:8]} (the same code)"
        label = f"paired A/A run of {pair} on {run.machine} ({len(run.rounds)} rounds)"
        print(validate.ab_table(tally, label), end="")
        return 0
    machine = asvresults.pick_machine(config.results_dir, args.machine)
    files = history_files(config, machine)
    result = validate.validate(files, machine, own_test(own), code_ids(config, _plugins(args)), settings, args.rounds)
    text = validate.report(result)
    if args.json:
        data = json.dumps(validate.as_json(result), indent=1) + "\n"
        if target is None:
            print(data, end="")
        else:
            write_text(target, data, "--json")
            print(text, end="")
    else:
        print(text, end="")
    return 0


def learn_noise(args: argparse.Namespace, config: AsvConfig) -> int:
    own = _own(args)
    if args.learn_noise:
        sha = require_commit(config.repo, args.learn_noise)
        machine = args.machine or machine_name()
        have, where = installed_commit()
        if not plugin_history.is_tierbench(config.repo):
            plugin_history.check_plugin_at(config.repo, sha, _plugins(args), what="commit")
        elif have != sha:
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
    model = learn_model(config, machine, own, plugins=_plugins(args))
    if model is None:
        raise ResultsError(f"no stored results of {machine} to learn its noise from")
    path = noise.save(model, noise.noise_file(_noise_root(config), machine))
    print(f"noise model of {machine}: {len(model.series)} series from {model.files} result files -> {path}")
    for family, prior in sorted(model.priors.items()):
        print(f"  prior {family}: {prior.source}")
    for cls, normaliser in sorted(model.normalisers.items()):
        print(f"  {cls}: own series {normaliser.source}")
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
        if compare_measured.wanted(args):  # runs, providers, plugin versions: no asv config needed
            try:
                settings = _settings(args)
            except AsvError as exc:
                print(f"tierbench compare: {exc}", file=sys.stderr)
                return 2
            return compare_measured.main(args, settings, write_outputs)
        return _main(args)


def _config_for(args: argparse.Namespace, refs: list[str]) -> AsvConfig:
    """The asv config that commits need; where there is none, the error says the arguments were no runs either."""
    try:
        return find_config(args.config)
    except AsvError as exc:
        if not refs:
            raise
        from .compare_runs import known_runs

        shown = " and ".join(plain(r) for r in refs)
        runs = known_runs(args.runs_dir)
        raise AsvError(f"{exc}; {shown} were taken for commits: no run of that id or folder ({runs})") from None


def _main(args: argparse.Namespace) -> int:
    refs = list(args.refs)
    args.base, args.head = (refs + [None, None])[:2]
    try:
        if len(refs) > 2:
            raise AsvError(f"give two commits (or two runs), not {len(refs)} arguments: {' '.join(refs)}")
        config = _config_for(args, refs)
        if args.same_code and not (args.validate and args.ab_run):
            raise AsvError("--same-code goes with --validate --ab-run FILE (a stored A/B run of two same-code commits)")
        if args.learn_noise is not None or args.validate:
            if args.base or args.head:
                raise AsvError(f"--{'validate' if args.validate else 'learn-noise'} takes no BASE/HEAD")
            return validate_command(args, config) if args.validate else learn_noise(args, config)
        if args.ab_run:
            if args.base or args.head or args.ab:
                raise AsvError("--ab-run judges a stored A/B run: it takes no BASE/HEAD and no --ab")
            return judge_ab_run_command(args, config)
        if not (args.base and args.head):
            raise AsvError(
                "give BASE HEAD (two commits or asv result files, or two runs), RUN --providers A B, "
                "--providers A B or --plugin-versions OLD NEW (measured here), --validate, or --learn-noise"
            )
        return compare_ab_command(args, config) if args.ab else compare(args, config)
    except (AsvError, ResultsError) as exc:
        print(f"tierbench compare: {exc}", file=sys.stderr)
        return 2
