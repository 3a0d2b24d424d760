"""`tierbench compare` of what a user measured, through the verdicts and report of `compare` of two commits:

    tierbench compare RUN_A RUN_B                       two runs (ids under --runs-dir, or folders): across sessions
    tierbench compare RUN --providers A B               two providers of one run, paired by the run's rounds
    tierbench compare --providers A B [OVERRIDE ...]    two providers measured A/B here, in one process
    tierbench compare --plugin-versions OLD NEW [--plugin MODULE] [OVERRIDE ...]
                                                        two versions of a plugin measured A/B here

OVERRIDEs are `tierbench run`'s (suite=..., <family>.<key>=..., providers=[...], timing=..., device=...):
they choose the cases, as a run would. The report goes to stdout (Markdown, or JSON with --json -) and to
--md, --html and --json files where given. Exit status: 0 nothing confirmed slower, 1 the head side confirmed
slower by a paired A/B, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ..text import plain
from . import compare_runs, measured_ab
from .asvresults import ResultsError
from .asvtool import AsvError
from .compare import Report
from .inputs import writable_file
from .measured_ab import ABError
from .noise import load_model


def is_override(arg: str) -> bool:
    """A Hydra override (key=value, +key=value, ~key), never a run folder that happens to hold '='."""
    return ("=" in arg or arg.startswith("~")) and not Path(arg).exists()


def wanted(args: argparse.Namespace) -> bool:
    """Whether the command line asks for one of these forms rather than for two commits' asv results."""
    refs = [r for r in args.refs if not is_override(r)]
    return bool(args.providers or args.plugin_versions or args.plugin) or (
        len(refs) == 2 and any(compare_runs.is_run(r, args.runs_dir) for r in refs)
    )


def check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(refs, overrides) of a valid command line; AsvError (exit 2) saying what is valid otherwise."""
    overrides = [r for r in args.refs if is_override(r)]
    refs = [r for r in args.refs if not is_override(r)]
    modes = [f"--{m.replace('_', '-')}" for m in ("ab", "validate", "confirm") if getattr(args, m)]
    if args.learn_noise is not None:
        modes.append("--learn-noise")
    if args.plugin_versions and args.providers:
        raise AsvError(
            "--plugin-versions and --providers are two forms: give one (the versions' providers: providers=[...])"
        )
    if (args.plugin_versions or args.providers) and modes:
        raise AsvError(f"{', '.join(modes)} go with commits, not with --providers or --plugin-versions")
    if args.plugin and not args.plugin_versions:
        raise AsvError("--plugin names the module of --plugin-versions OLD NEW")
    measured_here = args.plugin_versions or (args.providers and not refs)
    if overrides and not measured_here:
        raise AsvError(
            f"{' '.join(plain(o) for o in overrides)}: overrides choose the cases of an A/B measured here "
            "(--providers A B or --plugin-versions OLD NEW without a run)"
        )
    if args.plugin_versions and refs:
        raise AsvError(f"--plugin-versions takes no run or commit ({', '.join(plain(r) for r in refs)})")
    if args.providers and len(refs) > 1:
        raise AsvError("--providers A B compares two providers of one run (RUN --providers A B) or measures them here")
    if not (args.plugin_versions or args.providers):
        runs = [compare_runs.is_run(r, args.runs_dir) for r in refs]
        if modes and any(runs):
            raise AsvError(f"{', '.join(modes)} go with commits; two runs are compared as they were recorded")
        if len(refs) == 2 and runs != [True, True]:
            odd = refs[runs.index(False)]
            raise AsvError(
                f"{plain(odd)} is not a run while {plain(refs[runs.index(True)])} is: give two runs (ids under "
                f"{args.runs_dir} or folders) or two commits; {compare_runs.known_runs(args.runs_dir)}"
            )
    return refs, overrides


def targets(args: argparse.Namespace) -> list[tuple[str, str, Path]]:
    """The report files asked for (none by default: these comparisons print their report), checked writable."""
    found = [(kind, f"--{kind}", getattr(args, kind)) for kind in ("md", "html", "json")]
    return [(kind, option, writable_file(path, option)) for kind, option, path in found if path and path != "-"]


def main(args: argparse.Namespace, settings, write_outputs) -> int:
    """Dispatch to the form the command line names; bad input exits 2."""
    try:
        refs, overrides = check(args)
        files = targets(args)
        if args.plugin_versions:
            report = versions(args, overrides, settings)
        elif args.providers and refs:
            report = compare_runs.compare_providers(
                compare_runs.load_run(refs[0], args.runs_dir), *args.providers, settings
            )
        elif args.providers:
            report = providers_here(args, overrides, settings)
        else:
            report = runs(args, refs, settings)
        if not report.rows:
            raise ResultsError(f"nothing to compare: {report.what}")
    except (AsvError, ResultsError, ABError) as exc:
        print(f"tierbench compare: {exc}", file=sys.stderr)
        return 2
    write_outputs(args, report, files)
    return 1 if report.regressions else 0


def runs(args: argparse.Namespace, refs: list[str], settings) -> Report:
    base, head = (compare_runs.load_run(r, args.runs_dir) for r in refs)
    if args.noise and args.noise != "none":
        model = load_model(Path(args.noise))
        source = f"the priors of {plain(args.noise)} (per provider within a family, else per family)"
    else:
        model, source = None, "none: the prior of a machine without history"
    noise = compare_runs.RunNoise(model, source)
    if base.device != head.device:
        print(
            f"tierbench compare: warning: {base.label} ran on {base.device}, {head.label} on {head.device}: "
            "timings of different devices are not comparable",
            file=sys.stderr,
        )
    return compare_runs.compare_runs(base, head, settings, compare_runs.own_code, noise)


def _start(overrides: list[str]) -> None:
    from ..commands.run_command import decide_interpreter

    decide_interpreter(overrides)  # before any plugin defines a Triton kernel, as `tierbench run` decides it


def providers_here(args: argparse.Namespace, overrides: list[str], settings) -> Report:
    """Two providers of the plan's cases measured A/B here (the plugins the overrides name, and installed ones)."""
    from ..catalog import build
    from ..commands.run_command import plugin_names
    from ..plugins import PluginError

    base, head = args.providers
    if base == head:
        raise ABError(f"--providers names {plain(base)} twice: give two providers")
    _start(overrides)
    try:
        catalog = build(plugin_names(overrides))
    except PluginError as exc:
        raise ABError(str(exc)) from None
    if not any(o.lstrip("+").startswith("providers=") for o in overrides):
        overrides = [*overrides, f"providers=[{base},{head}]"]
    cfg, device, planned = measured_ab.plan(overrides, catalog)
    pairs = measured_ab.provider_pairs(planned, base, head)
    if not pairs:
        raise ABError(
            f"no planned case is run by both {plain(base)} and {plain(head)} (suite={cfg.suite}, {len(planned)} "
            "cases): choose a suite and providers of one op"
        )
    what = f"providers {plain(base)} → {plain(head)}, measured A/B here on {len(pairs)} cases (suite {cfg.suite})"
    sides = measured_ab.Sides(plain(base), plain(head), plain(base), plain(head), what)
    return _measure(pairs, cfg, device, catalog.tiers, args.rounds, settings, sides)


def versions(args: argparse.Namespace, overrides: list[str], settings) -> Report:
    """Two versions of a plugin measured A/B here: the base version's cases, each plugin provider of both."""
    from . import plugin_versions

    _start(overrides)
    old, new = args.plugin_versions
    base, head = plugin_versions.load_pair(old, new, args.plugin)
    cfg, device, planned = measured_ab.plan(overrides, base.catalog)
    pairs, unmatched = plugin_versions.version_pairs(planned, base, head)
    for line in unmatched:
        print(f"tierbench compare: warning: {plain(line)}: not compared", file=sys.stderr)
    if not pairs:
        mine = ", ".join(sorted({p.name for p in base.providers})) or "none"
        raise ABError(
            f"no planned case (suite={cfg.suite}, {len(planned)} cases) has a provider of the plugin "
            f"{', '.join(base.modules)} (its providers: {mine}); choose its family's suite (suite=<family>) or "
            "providers=[...] of it"
        )
    modules = ", ".join(base.modules)
    what = (
        f"two versions of the plugin {modules}, measured A/B here on {len(pairs)} (case, provider) pairs "
        f"(suite {cfg.suite}; the base version's cases and reference): {base.label} = {base.identity} "
        f"({base.folder}) → {head.label} = {head.identity} ({head.folder})"
    )
    sides = measured_ab.Sides(base.label, head.label, base.identity, head.identity, plain(what))
    tiers = {**head.catalog.tiers, **base.catalog.tiers}
    return _measure(pairs, cfg, device, tiers, args.rounds, settings, sides)


def _measure(pairs, cfg, device, tiers, rounds: int, settings, sides: measured_ab.Sides) -> Report:
    with tempfile.TemporaryDirectory(prefix="tierbench-ab-") as tmp:
        measurer = measured_ab.open_measurer(cfg, device, tiers, Path(tmp))
        return measured_ab.run(pairs, measurer, rounds, settings, sides, measured_ab.machine_of(measurer))
