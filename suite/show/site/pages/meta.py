"""The lines a page states about where its records came from: the commit, the ceilings SOL is read against."""

from __future__ import annotations

from typing import Any

from ....ceilings import Limits


def commit_text(env: dict[str, Any], digits: int = 12) -> str:
    """The commit a record names, and whether its files were that commit's (older records do not say)."""
    text = str(env["git_commit"])[:digits]
    return f"{text} (with uncommitted changes)" if env.get("tierbench_modified") else text


def ceilings_meta(c: Limits | None) -> tuple[str, str]:
    """The ceilings SOL is read against, each with what set it: measured, or a checked measurement above it."""
    if c is None:
        return ("ceilings", "none measured for this device: SOL figures are the records' own")
    return ("ceilings", "; ".join(c.lines()))
