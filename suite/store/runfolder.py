"""Run folders: plain names under a writable results_dir, and one process at a time in each.

A run folder is written by the process that holds its lock (the folder's own `run.lock`, an flock held
from the moment the folder is made or resumed until that process ends, however it ends: the kernel
drops the lock of a killed process). A second `tierbench run` or `resume=` of the same folder is
refused with the holder's pid, host and start time, so two processes never append the same
measurements to one file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import time
from pathlib import Path

from ..text import plain

LOCK_FILE = "run.lock"
# A new run's name: a plain file name (no separators, no leading dot), so it can only name a folder
# directly under results_dir.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


class RunFolderError(ValueError):
    """A run folder that cannot be used: a bad name, a results_dir that is not writable, a folder in use."""


def check_run_id(run_id: str, key: str = "run_id") -> str:
    """The name of a new run folder, or RunFolderError saying what a run id may be."""
    if not _RUN_ID.fullmatch(run_id):
        raise RunFolderError(
            f"{key}={run_id!r} is not a plain name: use letters, digits, '.', '_', '+' and '-', starting with "
            "a letter or digit (at most 100 characters); the folder is made under results_dir"
        )
    return run_id


def check_existing_name(name: str, key: str = "resume") -> str:
    """The name of an existing run folder: one path component, never a path out of results_dir."""
    bad = not name or name in (".", "..") or name.startswith(".") or any(c in name for c in "/\\\0")
    if bad or Path(name).is_absolute() or len(name) > 255:
        raise RunFolderError(f"{key}={name!r} is not a run id: give the name of a folder under results_dir")
    return name


def check_writable_dir(path: str, key: str) -> Path:
    """The folder (made if missing), or RunFolderError: "<key>=... is not a writable directory (why)"."""
    if not str(path).strip():
        raise RunFolderError(f"{key} is empty: give a folder")
    folder = Path(path)
    what = f"{key}={path} is not a writable directory"
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"{what}: it is a file")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".tierbench-probe-{os.getpid()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, b"probe\n")  # a full disk refuses data, not always the empty file
            os.fsync(fd)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                probe.unlink()
    except OSError as exc:
        raise RunFolderError(f"{what}: {exc.strerror or exc}") from None
    return folder


class RunInUse(RunFolderError):
    """Another process holds the run folder's lock."""


class RunLock:
    """The lock of one run folder, held by this process from acquire() until release() (or its end)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl  # POSIX only; imported here so that the readers of records never need it

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RunInUse(
                f"run folder {self.path.parent} is in use by another process ({self.holder()}); one process "
                "at a time writes a run: wait for it to end, or stop it, then resume"
            ) from None
        self._fd = fd
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        with contextlib.suppress(OSError):  # who holds it is a courtesy to the refused; the flock decides
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(info) + "\n").encode())
        return self

    def holder(self) -> str:
        """Who holds the lock, as its file says: pid, host and since when."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info["started"])))
            return plain(f"pid {int(info['pid'])} on {info['host']}, since {since}")
        except (OSError, ValueError, KeyError, TypeError):
            return "its holder has not written its name yet"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
