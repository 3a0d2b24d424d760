"""Checks of the history commands' input, made before anything is measured or written: a wrong value is exit 2
with a message naming it, never a traceback, and never half a run."""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

from .asvtool import AsvError

# An asv machine name becomes a folder under results/asv/ and a key of ~/.asv-machine.json: a plain name.
_MACHINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def at_least(minimum: int, what: str = "a whole number"):
    """argparse type: an int of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    return parse


def machine_name(text: str) -> str:
    """argparse type of --machine: letters, digits, '.', '_' and '-' only (no path, no '..')."""
    if not _MACHINE.match(text) or text in (".", "..") or ".." in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a machine name: use letters, digits, '.', '_' and '-' (e.g. h200-node7)"
        )
    return text


def commits_spec(text: str) -> str:
    """argparse type of --commits: a range A..B or a comma-separated list, not empty."""
    if not text.strip() or not [part for part in text.split(",") if part.strip()]:
        raise argparse.ArgumentTypeError("give a range A..B or a comma-separated list of commits (it was empty)")
    return text


def writable_file(path: str | Path, option: str) -> Path:
    """A file path that can be written: its nearest existing folder takes a new file (a probe, removed at once;
    permission bits say too little to root), and the file itself, if it exists, is writable. An AsvError naming
    the option otherwise; nothing is left behind."""
    path = Path(path)
    if path.is_dir():
        raise AsvError(f"{option} {path}: is a folder, not a file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise AsvError(f"{option} {path}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".tierbench-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise AsvError(f"{option} {path}: not writable ({exc.strerror or exc})") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise AsvError(f"{option} {path}: not writable")
    return path


def write_text(path: Path, content: str, option: str) -> bool:
    """Write a report unless the file already says exactly this (a committed report stays untouched); a
    failure (full disk, a folder that vanished) is an AsvError naming the option. Returns whether it wrote."""
    try:
        if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == content:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise AsvError(f"{option} {path}: cannot write ({exc.strerror or exc})") from None
    return True
