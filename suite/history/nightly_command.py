"""`tierbench nightly`: benchmark new commits with asv, publish asv's site, regenerate the comparison site.

    tierbench nightly                      asv run NEW: asv builds each new commit in its own virtualenv
    tierbench nightly --head               HEAD, measured in this Python (the installed tierbench)
    tierbench nightly --commits A..B       those commits through asv's own builds (needs a package index)
    tierbench nightly --commits A..B --existing-env
                                           offline: each commit installed with pip --target (no deps, no
                                           network) into .asv/builds/<sha>/, put first on PYTHONPATH, and
                                           measured by asv in this Python (--python=same --set-commit-hash)
    ... --aa N                             then N A/A runs of the last commit, and relearn the noise model
    tierbench nightly --publish-only       measure nothing: publish every machine's results (those copied in
                                           from other hosts' results/asv/<machine>/ too) as one history

Then each measured commit is compared with the commit before it that has results on this machine: across
sessions, which only nominates the project's series that look slower (noise learned from the stored
history); each suspect is re-measured in a paired A/B here (both commits built, alternating rounds in this
one session), and only a slowdown that A/B confirms is a regression (--no-confirm: suspects are reported,
nothing is confirmed). Controls (code this project does not build) report machine drift and never fail.
Reports go to results/compare/<machine>-<base>-<head>.{md,html,json}. Another machine's results,
definitions and graphs are never rewritten or deleted (publish.py), and published files are rewritten only
where their content changed in meaning. Exit status: 0 fine, 1 a confirmed regression or failed
benchmarks, 2 bad input (checked before anything is measured or written).

The machine is named after the GPU (h200-<host>) or cpu-<host> unless --machine says otherwise. Run in a
plugin's own repository (its asv.conf.json), the commits are the plugin's, measured by the installed tierbench
(suite/history/plugin_history.py).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import tempfile
from pathlib import Path

from . import asvresults, noise, plugin_history, publish, render
from .ab import DEFAULT_ROUNDS
from .asvtool import (
    BUILD_ENV,
    AsvConfig,
    AsvError,
    build_commit,
    commit_list,
    env_with_build,
    find_config,
    git,
    installed_commit,
    machine_name,
    register_machine,
    require_commit,
    run_asv,
)
from .compare import bench_regex, compare_results, default_own_providers
from .compare_command import confirm, learn_model, not_confirmed, record_aa_run
from .inputs import at_least, commits_spec, write_text
from .inputs import machine_name as machine_arg
from .stats import Settings

SITE_MODULE = "tierbench.suite.show.site.command"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierbench nightly",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--head", action="store_true", help="measure HEAD with the installed tierbench")
    mode.add_argument(
        "--commits", metavar="SPEC", type=commits_spec, help="a range A..B or a comma-separated list of commits"
    )
    mode.add_argument(
        "--publish-only", action="store_true", help="measure nothing: publish every machine's results, rebuild the site"
    )
    p.add_argument(
        "--existing-env",
        action="store_true",
        help="with --commits: offline builds measured in this Python (no virtualenvs, no network)",
    )
    p.add_argument(
        "--aa",
        type=at_least(0),
        default=0,
        metavar="N",
        help="after --head or --existing-env: N A/A runs of the last commit, then relearn noise",
    )
    p.add_argument("--skip-existing", action="store_true", help="skip commits that already have results")
    p.add_argument("--machine", type=machine_arg, help="asv machine name (default: <gpu model>-<host> or cpu-<host>)")
    p.add_argument("--config", help="asv config (default: asv.conf.json of this checkout)")
    p.add_argument("--bench", type=bench_regex, help="only benchmarks matching this regex (asv --bench)")
    p.add_argument("--no-publish", action="store_true", help="skip asv publish")
    p.add_argument("--no-report", action="store_true", help="skip `tierbench report`")
    p.add_argument("--no-compare", action="store_true", help="skip the verdicts on the measured commits")
    p.add_argument("--no-confirm", action="store_true", help="report suspects without re-measuring them A/B")
    p.add_argument(
        "--rounds",
        type=at_least(Settings.min_rounds),
        default=DEFAULT_ROUNDS,
        help=f"A/B rounds of a confirmation, {Settings.min_rounds} or more (default: %(default)s)",
    )
    p.add_argument("--own", help="providers built by this project (default: those of the own-code tiers)")
    return p


def measured_run(config: AsvConfig, machine: str, args: list[str], env: dict[str, str] | None = None) -> int:
    """`asv run` into results/asv, with every machine's benchmark definitions kept (publish.py)."""
    previous = publish.snapshot(config.results_dir)
    try:
        return run_asv(args, config.path, env)
    finally:
        publish.record_definitions(config.results_dir, machine, previous)


def _has_result(config: AsvConfig, machine: str, sha: str) -> bool:
    folder = config.results_dir / machine
    return any(p.name.startswith(sha[:8]) for p in folder.glob("*.json")) if folder.is_dir() else False


def _run_args(machine: str, bench: str | None) -> list[str]:
    return ["--machine", machine, "--record-samples", *(["--bench", bench] if bench else [])]


def run_offline(
    config: AsvConfig, machine: str, shas: list[str], args: argparse.Namespace
) -> tuple[int, str, list[str]]:
    """Measure each commit from its own pip --target build; returns (worst asv exit code, last build, measured)."""
    worst, build, measured = 0, "", []
    for sha in shas:
        if args.skip_existing and _has_result(config, machine, sha):
            print(f"tierbench nightly: {sha[:8]} has results on {machine}; skipped")
            continue
        measured.append(sha)
        print(f"tierbench nightly: building {sha[:8]} (pip --target, no dependencies, no network)", flush=True)
        folder, env = offline_build(config, sha)
        code = measured_run(
            config, machine, ["run", "--python=same", "--set-commit-hash", sha, *_run_args(machine, args.bench)], env
        )
        worst, build = max(worst, code), str(folder)
    return worst, build, measured


def offline_build(config: AsvConfig, sha: str) -> tuple[Path, dict[str, str]]:
    """A commit's offline build and the environment that measures it. tierbench's own commit is the build's
    tierbench (the suite refuses modules from elsewhere: TIERBENCH_ASV_BUILD); a plugin's commit is the plugin
    alone, measured by the installed tierbench."""
    if not plugin_history.is_tierbench(config.repo):
        folder = plugin_history.build(config, sha)
        return folder, env_with_build(folder)
    folder = build_commit(config.repo, sha, config.root / ".asv" / "builds" / sha[:12])
    env = env_with_build(folder)
    env[BUILD_ENV] = str(folder)
    return folder, env


def check_installed(sha: str) -> None:
    have, where = installed_commit()
    if have != sha:
        raise AsvError(
            f"the tierbench this Python imports is at {(have or 'an unknown commit')[:8]} ({where}), "
            f"not HEAD {sha[:8]}: install this checkout (pip install -e .) or use "
            f"--commits {sha[:8]} --existing-env"
        )
    if "uncommitted" in where:
        print(f"tierbench nightly: warning: {where}: results are stored as {sha[:8]}", file=sys.stderr)


def regenerate_report(config: AsvConfig) -> int:
    """`tierbench report` (the comparison site beside asv's), when its module exists in this build.

    Paths come from the asv config, so the site reads the history that was just published. The site is built
    into a staging folder and only pages changed in meaning are written (publish.sync_tree)."""
    try:
        found = importlib.util.find_spec(SITE_MODULE) is not None
    except ImportError:
        found = False
    if not found:
        print(f"tierbench nightly: {SITE_MODULE} is not available; comparison report skipped")
        return 0
    root = config.root / "results"
    site = config.html_dir.parent
    with tempfile.TemporaryDirectory(prefix="tierbench-site-") as tmp:
        staged = Path(tmp) / "site"
        staged.mkdir()
        if config.html_dir.is_dir():  # the site links asv's pages where they exist
            (staged / config.html_dir.name).symlink_to(config.html_dir, target_is_directory=True)
        # The published site: the committed runs only (a checkout's own runs go to `tierbench report`'s site).
        argv = ["--runs", str(root / "runs"), "--asv", str(config.results_dir), "--out", str(staged), "--publish"]
        print("+ tierbench report " + " ".join(argv), flush=True)
        try:
            code = int(importlib.import_module(SITE_MODULE).main(argv) or 0)
        except SystemExit as exc:  # its argument parser refused these options
            print(f"tierbench nightly: tierbench report {' '.join(argv)} exited with {exc.code}", file=sys.stderr)
            return 1
        if code == 0:
            written = publish.sync_tree(staged, site, skip=(config.html_dir.name,))
            print(f"tierbench nightly: comparison site in {site} ({len(written)} files changed)")
        return code


def publish_only(args: argparse.Namespace, config: AsvConfig) -> int:
    """One history from every machine's results in results/asv/ (each machine's own definitions merged)."""
    found = asvresults.machines(config.results_dir)
    if not found:
        raise AsvError(f"no machine's results under {config.results_dir} to publish")
    publish.publish(config)
    print(f"tierbench nightly: asv site in {config.html_dir} ({len(found)} machines: {', '.join(found)})")
    return 0 if args.no_report else (1 if regenerate_report(config) else 0)


def nightly(args: argparse.Namespace, config: AsvConfig) -> int:
    if args.publish_only:
        return publish_only(args, config)
    if args.existing_env and not args.commits:
        raise AsvError("--existing-env goes with --commits SPEC (use --head for the installed build)")
    if args.aa and not (args.head or args.existing_env):
        raise AsvError("--aa needs --head or --commits ... --existing-env (A/A runs use this Python)")
    if not (args.head or args.existing_env) and config.data.get("environment_type") == "existing":
        raise AsvError(  # asv's own builds need an environment per commit; this config has only this Python's
            f'{config.path} measures in this Python ("environment_type": "existing"), so asv builds no '
            "commit: give --head (the installed build of HEAD) or --commits A..B --existing-env (each commit "
            "built offline)"
        )
    machine = args.machine or machine_name()
    plugins = plugin_history.overrides_plugins()
    shas: list[str] = []  # the commits measured, when known
    if args.head:  # checked before asv registers anything
        sha = require_commit(config.repo, "HEAD")
        if plugin_history.is_tierbench(config.repo):
            check_installed(sha)
        else:  # a plugin's repository: its plugin must be HEAD, tierbench is whatever is installed
            plugin_history.check_plugin_head(config.repo, sha, plugins)
    with tempfile.TemporaryDirectory(prefix="tierbench-nightly-") as tmp:
        register_machine(machine, config.variant(Path(tmp)))
        if args.head:
            if args.skip_existing and _has_result(config, machine, sha):
                print(f"tierbench nightly: {sha[:8]} has results on {machine}; skipped")
                code, shas = 0, []
            else:
                shas = [sha]
                code = measured_run(
                    config, machine, ["run", "--python=same", "--set-commit-hash", sha, *_run_args(machine, args.bench)]
                )
            aa_env, last = None, sha
        elif args.commits and args.existing_env:
            wanted = commit_list(config.repo, args.commits)
            code, build, shas = run_offline(config, machine, wanted, args)
            last = wanted[-1]
            aa_env = offline_build(config, last)[1] if args.aa else None
        else:
            spec = "NEW"
            if args.commits:
                hashes = Path(tmp) / "commits.txt"
                shas = commit_list(config.repo, args.commits)
                hashes.write_text("\n".join(shas) + "\n")
                spec = f"HASHFILE:{hashes}"
            skip = ["--skip-existing-commits"] if args.skip_existing else []
            code = measured_run(config, machine, ["run", spec, *skip, *_run_args(machine, args.bench)])
            aa_env, last = None, ""
        if code not in (0, 2):
            raise AsvError(f"asv run failed (exit {code})")
        if not plugin_history.is_tierbench(config.repo):  # the results are the plugin's: name who measured them
            for sha in shas:
                plugin_history.stamp(config.results_dir, machine, sha)
        for _ in range(args.aa):
            record_aa_run(config, machine, last, args.bench, aa_env)
    if shas and not plugin_history.is_tierbench(config.repo):  # the verdicts need the plugin's providers
        plugin_history.make_importable(config, shas[-1], plugins)
    own = tuple(p.strip() for p in (args.own or "").split(",") if p.strip()) or default_own_providers(plugins)
    if args.aa:
        root = config.root / "results" / "noise"
        model = learn_model(config, machine, own, plugins=plugins)
        if model is not None:
            path = noise.save(model, noise.noise_file(root, machine))
            print(f"tierbench nightly: noise model {path} ({len(model.series)} series)")
    regressions = 0
    if not args.no_compare:
        measured = [sha for sha in shas if _has_result(config, machine, sha)]
        regressions = verdicts(config, machine, measured, args, own)
    if not args.no_publish and asvresults.machines(config.results_dir):
        publish.publish(config)
        print(f"tierbench nightly: asv site in {config.html_dir}")
    report = 0 if args.no_report else regenerate_report(config)
    if code == 2:
        print("tierbench nightly: some benchmarks failed (see asv's output above)", file=sys.stderr)
    return 1 if code or report or regressions else 0


def previous_with_results(config: AsvConfig, machine: str, sha: str) -> str | None:
    """The nearest ancestor of `sha` with results on this machine."""
    try:
        ancestors = git(["rev-list", "--max-count=500", f"{sha}^"], config.repo).split()
    except AsvError:
        return None
    return next((a for a in ancestors if _has_result(config, machine, a)), None)


def verdicts(config: AsvConfig, machine: str, shas: list[str], args: argparse.Namespace, own: tuple[str, ...]) -> int:
    """Each measured commit against its predecessor: suspects nominated across sessions, re-measured A/B.
    Returns how many commits have a confirmed regression."""
    settings = Settings()
    regressed = 0
    for sha in shas:
        base_sha = previous_with_results(config, machine, sha)
        if base_sha is None:
            print(f"tierbench nightly: {sha[:8]} has no earlier commit with results on {machine}: no verdict")
            continue
        base = asvresults.find(config.results_dir, machine, base_sha)
        head = asvresults.find(config.results_dir, machine, sha)
        model = learn_model(config, machine, own, plugins=plugin_history.overrides_plugins())
        source = f"learned from {model.files} stored result files of {machine}" if model else "none"
        report = compare_results(base, head, model, settings, source, args.bench, own)
        if args.no_confirm:
            not_confirmed(report)
        else:
            confirm(config, report, args.rounds, settings, own, model)
        stem = f"{machine}-{base.label}-{head.label}"
        out = config.root / "results" / "compare"
        for suffix, text in (
            ("md", render.markdown(report)),
            ("html", render.html_page(report)),
            ("json", render.json_text(report)),
        ):
            write_text(out / f"{stem}.{suffix}", text, "report")
        print(f"tierbench nightly: {base.label} -> {head.label}: {render.summary(report)} ({out / stem}.md)")
        drift = render.drift_line(report)
        if drift:
            print(f"tierbench nightly: {drift}")
        regressed += bool(report.regressions)
    return regressed


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return nightly(args, find_config(args.config))
    except (AsvError, asvresults.ResultsError) as exc:
        print(f"tierbench nightly: {exc}", file=sys.stderr)
        return 2
