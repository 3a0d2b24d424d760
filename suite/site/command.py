"""`tierbench report`: build the static comparison site (and, with --screenshot, a PNG of its index)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..text import warnings_as_lines
from . import browser
from .build import build
from .runs import SelectionError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tierbench report",
        description="Turn run records and asv history into a static site: an index of the fastest correct "
        "provider per tier, a page per op family and device, all runs, history over commits.",
    )
    p.add_argument("--runs", type=Path, default=Path("results/runs"), help="folder of run folders")
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
        default=Path("results/html"),
        help="site folder (its history/ is asv's and is never touched)",
    )
    p.add_argument(
        "--screenshot", type=Path, metavar="PNG", help="also save a PNG of the index page, taken by headless Chromium"
    )
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    ceilings = args.ceilings or args.runs.parent / "ceilings"
    try:
        with warnings_as_lines("tierbench report"):
            result = build(args.runs, args.out, args.asv, ceilings, args.run_ids)
    except SelectionError as exc:
        print(f"tierbench report: {exc}", file=sys.stderr)
        return 2
    if not result.devices:
        print(f"tierbench report: no runs under {args.runs}: the site shows asv's history only", file=sys.stderr)
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
        for error in load.errors:
            print(f"tierbench report: the index logged an error: {error}", file=sys.stderr)
        print(f"screenshot: {args.screenshot}")
    return 0
