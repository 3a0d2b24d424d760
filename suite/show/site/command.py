"""`tierbench report`: build the static comparison site (and, with --screenshot, a PNG of its index).

Two sites, so that a user's runs never rewrite what the project publishes:
- by default, your site, `results/site/` (git ignores it): every run under --runs, yours and the
  committed ones;
- with --publish, the published site, `results/html/`: the committed runs only (the run folders git
  tracks under --runs; every run there where the checkout is not a git work tree). The same records build
  the same bytes, so rebuilding it from unchanged records changes no file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ...store.reading import RUNS_ROOT
from ...text import plain, warnings_as_lines
from . import browser
from .build import build
from .runs import SelectionError, committed_runs

LOCAL_SITE = Path("results/site")
PUBLISHED_SITE = Path("results/html")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierbench report",
        description="Turn run records and asv history into a static site: an index of the fastest correct "
        "provider per tier, a page per op family and device, all runs, history over commits.",
    )
    p.add_argument("--runs", type=Path, default=Path(RUNS_ROOT), help="folder of run folders")
    p.add_argument(
        "--run",
        action="append",
        dest="run_ids",
        metavar="ID",
        help="show these runs (repeatable) instead of each device's newest complete run of each case",
    )
    p.add_argument("--asv", type=Path, default=Path("results/asv"), help="asv's results folder")
    p.add_argument(
        "--ceilings",
        type=Path,
        default=None,
        help="measured ceilings folder (default: ceilings/ beside the runs folder)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"site folder (default {LOCAL_SITE}, or {PUBLISHED_SITE} with --publish; its history/ is asv's and "
        "is never touched)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help=f"build the published site ({PUBLISHED_SITE}) from the committed runs only (those git tracks)",
    )
    p.add_argument(
        "--screenshot", type=Path, metavar="PNG", help="also save a PNG of the index page, taken by headless Chromium"
    )
    return p


def _writable_folder(path: Path, flag: str) -> str:
    """Why `path` cannot be a folder to write into ('' when it can): made where missing, then tried."""
    if path.exists() and not path.is_dir():
        return f"{flag} {path} is a file, not a folder"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{flag} {path} cannot be made: {exc.strerror or exc}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{flag} {path} is not writable"
    return ""


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    ceilings = args.ceilings or args.runs.parent / "ceilings"
    args.out = args.out or (PUBLISHED_SITE if args.publish else LOCAL_SITE)
    only = committed_runs(args.runs) if args.publish else None
    problem = _writable_folder(args.out, "--out")
    if not problem and args.screenshot:
        if args.screenshot.is_dir():
            problem = f"--screenshot {args.screenshot} is a folder: give a file name (index.png)"
        else:
            problem = _writable_folder(args.screenshot.parent, "--screenshot's folder")
    if problem:
        print(f"tierbench report: {plain(problem)}", file=sys.stderr)
        return 2
    try:
        with warnings_as_lines("tierbench report"):
            result = build(args.runs, args.out, args.asv, ceilings, args.run_ids, only)
    except SelectionError as exc:
        print(f"tierbench report: {plain(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = exc.filename or args.out
        print(f"tierbench report: cannot write the site: {plain(str(where))}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not result.devices:
        which = "committed runs (--publish shows only those git tracks)" if args.publish else "runs"
        print(f"tierbench report: no {which} under {args.runs}: the site shows asv's history only", file=sys.stderr)
    pages = [p for p in result.written if p.suffix == ".html"]
    # Runs' own report.html files are copied as they are: the size that matters is the site's pages'.
    own = [p for p in pages if p.relative_to(args.out).parts[0] != "runs"]
    biggest = max(own, key=lambda p: p.stat().st_size)
    print(
        f"site: {result.index} ({len(pages)} pages; {len(result.devices)} device(s); "
        f"{result.benchmarks} asv benchmark(s); largest page {biggest.relative_to(args.out)} "
        f"{biggest.stat().st_size / 1024:.0f} KiB)"
    )
    if args.screenshot:
        try:
            load = browser.screenshot(result.index.resolve().as_uri(), args.screenshot)
        except browser.BrowserError as exc:
            print(f"tierbench report: no screenshot: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(
                f"tierbench report: cannot write --screenshot {args.screenshot}: {exc.strerror or exc}", file=sys.stderr
            )
            return 2
        for error in load.errors:
            print(f"tierbench report: the index logged an error: {error}", file=sys.stderr)
        print(f"screenshot: {args.screenshot}")
    return 0
