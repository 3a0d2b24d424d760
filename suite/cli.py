"""The `tierbench` command: one subcommand per job."""

from __future__ import annotations

import importlib
import os
import sys

# subcommand -> (module with main(argv) -> int, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("tierbench.suite.commands.run_command", "measure a suite (Hydra app: overrides, --multirun sweeps)"),
    "summary": ("tierbench.suite.show.markdown", "a run as Markdown tables per op family"),
    "profile": (
        "tierbench.suite.commands.profile_command",
        "one measurement of a run again under the profiler: a trace",
    ),
    "spread": ("tierbench.suite.scale.spread", "how far the medians of two runs differ (an A/A check)"),
    "report": (
        "tierbench.suite.show.site.command",
        "build the comparison site (results/site/; --publish: results/html/)",
    ),
    "export": ("tierbench.suite.show.export", "runs' records as one CSV, Parquet or JSON-lines table"),
    "compare": ("tierbench.suite.history.compare_command", "regression report between two commits (asv)"),
    "nightly": ("tierbench.suite.history.nightly_command", "benchmark new commits with asv, publish the site"),
}

USAGE = (
    "usage: tierbench {"
    + ",".join(COMMANDS)
    + "} [args...]\n       tierbench --version\n\n"
    + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items())
    + "\n\n`tierbench COMMAND --help` says more about each."
)


def main(argv: list[str] | None = None) -> int:
    """The subcommand's main(argv) of the command line's first word; its exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if not args or args[0] in ("-h", "--help"):
            print(USAGE)
            return 0
        if args[0] in ("-V", "--version"):
            from .measure.provenance import describe

            print(describe())
            return 0
        name, rest = args[0], args[1:]
        if name not in COMMANDS:
            print(
                f"tierbench: unknown command {name!r}; valid choices: {', '.join(COMMANDS)}\n\n{USAGE}", file=sys.stderr
            )
            return 2
        module = importlib.import_module(COMMANDS[name][0])
        return int(module.main(rest) or 0)
    except BrokenPipeError:  # the reader went away (`tierbench --help | grep -q`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at exit, when stdout flushes
        return 141  # as a process killed by SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
