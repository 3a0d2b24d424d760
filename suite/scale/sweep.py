"""A sweep: one suite spread over devices, each shard a job of a Hydra multirun with a run folder of its own.

Inside the runs folder the user named, in <results_dir>/.sweeps/<sweep id>/ (shared by every job of the
sweep; a run id never starts with a dot, and readers take only folders holding records as runs):

    sweep.json          what was launched: the devices asked for, how many shards, when
    config.yaml         the composed config of the first launch (what a resume finishes)
    launch-<n>.json     launch n's assignment of cases to shards, written once by whichever job comes first
    shards/<n>-<i>.json shard i of launch n: host, pid, device, run id, last heartbeat, exit code

Every shard's run.json and every record name the sweep; readers merge a sweep's runs into one logical run
(suite/store/reading.py finds a sweep by its id, or by a shard's run id, and its runs).
"""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..store.reading import SWEEP_FILE, sweeps_root
from ..store.reading import valid_sweep_id as valid_id

BEAT_S = 5.0  # a running shard rewrites its heartbeat this often
STALE_S = 30.0  # a heartbeat older than this is a shard that died without saying so


class SweepError(ValueError):
    """A sweep that does not exist, a shard key out of range, a device in use: the message says which."""


def new_sweep_id() -> str:
    return "sweep-" + time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def sweep_dir(results_dir: str | Path, sweep_id: str) -> Path:
    if not valid_id(sweep_id):
        raise SweepError(f"shard.sweep={sweep_id!r} is not a valid sweep id (letters, digits, '.', '_', '-')")
    return sweeps_root(results_dir) / sweep_id


def host() -> str:
    return platform.node() or "unknown-host"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def write_once_text(path: Path, text: str) -> str:
    """Write `text` to `path` unless another job wrote it first; returns what the file holds (the first
    writer's text). A hard link is created or fails atomically, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.once.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text(encoding="utf-8")


def write_once(path: Path, data: Any) -> Any:
    """write_once_text of a JSON document; returns the first writer's data."""
    text = write_once_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    try:
        return json.loads(text)
    except ValueError:
        raise SweepError(f"{path} is unreadable") from None


# -- the sweep itself -----------------------------------------------------------------------------------


def create(results_dir: str | Path, devices: Any, count: int, sweep_id: str | None = None) -> tuple[str, Path]:
    """A new sweep folder (made exclusively) and its sweep.json."""
    for _ in range(100):
        sid = sweep_id or new_sweep_id()
        folder = sweep_dir(results_dir, sid)
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir()
        except FileExistsError:
            if sweep_id:
                raise SweepError(f"sweep {sweep_id} exists already: resume it with resume={sweep_id}") from None
            continue
        _write_json(folder / SWEEP_FILE, {"sweep": sid, "devices": devices, "count": count, "created": time.time()})
        return sid, folder
    raise SweepError(f"could not create a new sweep folder under {sweeps_root(results_dir)}")


def info(folder: Path) -> dict[str, Any] | None:
    data = _read_json(folder / SWEEP_FILE)
    return data if isinstance(data, dict) else None


def launch_file(folder: Path, launch: int) -> Path:
    return folder / f"launch-{launch}.json"


def launches(folder: Path) -> list[int]:
    found = (re.fullmatch(r"launch-(\d+)\.json", p.name) for p in folder.glob("launch-*.json"))
    return sorted(int(m.group(1)) for m in found if m)


def read_launch(folder: Path, launch: int) -> dict[str, Any] | None:
    data = _read_json(launch_file(folder, launch))
    return data if isinstance(data, dict) else None


# -- heartbeats -------------------------------------------------------------------------------------------


@dataclass
class Beat:
    """A shard as it tells the others about itself."""

    sweep: str
    launch: int
    index: int
    count: int
    host: str = field(default_factory=host)
    pid: int = field(default_factory=os.getpid)
    run_id: str | None = None
    device: str = ""  # cuda or cpu
    device_index: int | None = None
    device_uuid: str | None = None
    started: float = field(default_factory=time.time)
    beat: float = field(default_factory=time.time)
    finished: float | None = None
    code: int | None = None  # the job's exit code once it ended
    error: str = ""

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def alive(self, now: float | None = None) -> bool:
        """Running: not finished, beat lately, and (on this host) its process still exists."""
        if self.finished is not None or (now or time.time()) - self.beat > STALE_S:
            return False
        return self.host != host() or _pid_exists(self.pid)

    def as_neighbour(self) -> dict[str, Any]:
        return {
            "shard": self.label,
            "launch": self.launch,
            "run_id": self.run_id,
            "device_index": self.device_index,
            "device_uuid": self.device_uuid,
        }


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def beat_file(folder: Path, launch: int, index: int) -> Path:
    return folder / "shards" / f"{launch}-{index}.json"


def beats(folder: Path) -> list[Beat]:
    out = []
    for path in sorted((folder / "shards").glob("*.json")):
        data = _read_json(path)
        if isinstance(data, dict):
            try:
                out.append(Beat(**{k: v for k, v in data.items() if k in Beat.__dataclass_fields__}))
            except TypeError:
                continue
    return out


def neighbours(folder: Path, me: Beat) -> list[dict[str, Any]]:
    """The sweep's other shards running on this host now (they share its power, cooling and CPUs)."""
    now = time.time()
    return [
        b.as_neighbour()
        for b in beats(folder)
        if (b.launch, b.index) != (me.launch, me.index) and b.host == me.host and b.alive(now)
    ]


class Heartbeat:
    """Keeps a shard's beat file fresh from a daemon thread until stop()."""

    def __init__(self, folder: Path, beat: Beat) -> None:
        self.folder, self.beat = folder, beat
        self.path = beat_file(folder, beat.launch, beat.index)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._write()
        self._thread = threading.Thread(target=self._loop, name="tierbench-heartbeat", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        with self._lock:
            self.beat.beat = time.time()
            _write_json(self.path, asdict(self.beat))

    def _loop(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                self._write()
            except OSError:
                pass  # a full or vanished disk: the shard's records say more than its heartbeat

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self.beat, key, value)
        self._write()

    def stop(self, code: int, error: str = "") -> None:
        self._stop.set()
        self._thread.join(timeout=BEAT_S)
        self.update(finished=time.time(), code=code, error=error)


def record_failure(results_dir: str | Path, shard: Any, error: str) -> None:
    """A shard that could not start still says so, for the command that launched it (shard: its config keys)."""
    if not shard.sweep or not valid_id(str(shard.sweep)):
        return
    launch, index, count = int(shard.launch), int(shard.index), int(shard.count)
    beat = Beat(str(shard.sweep), launch, index, count, finished=time.time(), code=2, error=error)
    _write_json(beat_file(sweep_dir(results_dir, str(shard.sweep)), launch, index), asdict(beat))


# -- device claims ----------------------------------------------------------------------------------------


class DeviceBusy(SweepError):
    pass


def claims_dir() -> Path:
    """Where GPUs are claimed: one folder per host (the system's temporary folder), so that no two jobs
    share a GPU whatever sweep or results folder they belong to. TIERBENCH_CLAIMS moves it."""
    import tempfile

    return Path(os.environ.get("TIERBENCH_CLAIMS") or Path(tempfile.gettempdir()) / "tierbench-device-claims")


def _claim_path(folder: Path, key: str) -> Path:
    return folder / (re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".json")


def claim(folder: Path, key: str, owner: dict[str, Any]) -> None:
    """Claim a device for this process; DeviceBusy, naming the owner, while another live process holds it.

    The claim file is created exclusively; one left by a process that no longer exists is taken over."""
    folder.mkdir(parents=True, exist_ok=True)
    path = _claim_path(folder, key)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            held = _read_json(path)
            if isinstance(held, dict) and held.get("pid") != os.getpid() and _claim_alive(held):
                raise DeviceBusy(f"{key} is in use by {_describe(held)}") from None
            path.unlink(missing_ok=True)  # a dead process's claim, or our own from an earlier job
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**owner, "host": host(), "pid": os.getpid(), "claimed": time.time()}, f)
        return
    raise DeviceBusy(f"{key}: could not claim it ({path} keeps reappearing)")


def release(folder: Path, key: str) -> None:
    path = _claim_path(folder, key)
    held = _read_json(path)
    if isinstance(held, dict) and held.get("pid") == os.getpid() and held.get("host") == host():
        path.unlink(missing_ok=True)


def _claim_alive(held: dict[str, Any]) -> bool:
    if held.get("host") != host():
        return True  # another host's claim cannot be checked from here: it stands
    pid = held.get("pid")
    return isinstance(pid, int) and _pid_exists(pid)


def _describe(held: dict[str, Any]) -> str:
    what = f"shard {held.get('shard')} of sweep {held.get('sweep')}" if held.get("sweep") else "another job"
    return f"{what} (pid {held.get('pid')} on {held.get('host')})"
