"""Run folders under failure and concurrency: one process per run, plain names, writable folders checked
before anything is made, a full disk mid-run, resumes of damaged configs. In-process through
`run_command.execute` (what each `tierbench run` job calls), with one real second process where the
point is two processes."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from cpu_run import RUN_TIMING

from tierbench.suite.ceilings import Ceilings, device_name
from tierbench.suite.commands import run_command
from tierbench.suite.naming import slug
from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import RECORDS_FILE
from tierbench.suite.store.runfolder import LOCK_FILE, RunInUse, RunLock

# Two measurements (eager LayerNorm and RMSNorm, 512 x 1024), a second or two on a CPU.
SMALL = [
    "suite=smoke",
    "tiers=[vendor]",
    *RUN_TIMING,
    "matmul.enabled=false",
    "attention.enabled=false",
    "norm.kinds=[layer_norm,rms_norm]",
    "norm.modes=[fwd]",
    "decode.enabled=false",
    "pointwise.enabled=false",
    "model.enabled=false",
    "html=false",
    "table=false",
]


@pytest.fixture
def dirs(tmp_path):
    """results_dir and a ceilings_dir that already holds this CPU's ceilings (nothing is measured)."""
    ceilings = tmp_path / "ceilings"
    ceilings.mkdir()
    cpu = torch.device("cpu")
    data = asdict(Ceilings(device_name(cpu), copy_gbps=10.0, matmul_tflops={"bf16": 0.1, "fp32": 0.1}))
    (ceilings / f"{slug(device_name(cpu))}.json").write_text(json.dumps(data))
    return tmp_path / "runs", ceilings


@pytest.fixture
def run(compose, catalog, dirs, capsys):
    """run(*overrides) -> (exit code, stderr) of one `tierbench run` job, in this process."""
    results, ceilings = dirs

    def _run(*overrides: str) -> tuple[int, str]:
        cfg = compose([*SMALL, f"results_dir={results}", f"ceilings_dir={ceilings}", *overrides])
        code = run_command.execute(cfg, catalog)
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return code, err

    return _run


def _keys(run_dir: Path) -> list[tuple[str, str]]:
    lines = (run_dir / RECORDS_FILE).read_text().splitlines()
    return [(json.loads(line)["case_id"], json.loads(line)["provider"]) for line in lines]


def test_a_run_folder_held_by_another_process_is_refused_naming_it(run, dirs):
    results, _ = dirs
    assert run("run_id=held")[0] == 0
    (results / "held" / RECORDS_FILE).unlink()  # so that a resume has work to do
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from tierbench.suite.store.runfolder import RunLock; "
         "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)", str(results / "held")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        code, err = run("resume=held")
        assert code == 2 and f"is in use by another process (pid {holder.pid} on " in err, err
        assert not (results / "held" / RECORDS_FILE).exists()  # the refused process wrote nothing
    finally:
        holder.send_signal(signal.SIGKILL)  # a killed holder's lock goes with it
        holder.wait(timeout=60)
    code, err = run("resume=held")
    assert code == 0, err
    assert len(_keys(results / "held")) == 2


@pytest.mark.slow
def test_a_run_in_progress_holds_its_folder_to_the_end(dirs, tmp_path):
    """A real `tierbench run` holds its folder while it runs, and lets go when it ends."""
    results, ceilings = dirs
    exe = Path(sys.executable).parent / "tierbench"
    args = [
        *SMALL,
        "timing.rounds=100",
        "timing.flush_l2=false",
        f"results_dir={results}",
        f"ceilings_dir={ceilings}",
        "run_id=busy",
    ]
    proc = subprocess.Popen([str(exe), "run", *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lock = results / "busy" / LOCK_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (lock.exists() and str(proc.pid) in lock.read_text()):
        time.sleep(0.02)
    try:
        with pytest.raises(RunInUse, match=rf"pid {proc.pid} on .*, since "):
            RunLock(results / "busy").acquire()
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert len(_keys(results / "busy")) == 2
    RunLock(results / "busy").acquire().release()  # free again once the run ended


@pytest.mark.parametrize(
    "saved, message",
    [
        ("suite: [unclosed\n  : : :\n", "cannot be read (ParserError)"),
        ("", "holds no run config (empty, or no `suite`)"),
        ("42\n", "holds no run config"),
        ("suite: smoke\nseed: abc\n", "does not fit the config schema"),
    ],
)
def test_resume_of_a_damaged_config_is_refused(run, dirs, saved, message):
    results, _ = dirs
    (results / "damaged").mkdir(parents=True)
    (results / "damaged" / "config.yaml").write_text(saved)
    code, err = run("resume=damaged")
    assert code == 2 and message in err and "the run cannot be resumed" in err, err
    assert sorted(p.name for p in (results / "damaged").iterdir()) == ["config.yaml", LOCK_FILE]


@pytest.mark.slow
def test_a_run_started_with_an_added_key_can_be_resumed(run, dirs):
    results, _ = dirs
    assert run("+note=baseline", "run_id=plus")[0] == 0
    first = _keys(results / "plus")
    (results / "plus" / RECORDS_FILE).write_text((results / "plus" / RECORDS_FILE).read_text().splitlines()[0] + "\n")
    code, err = run("resume=plus")
    assert code == 0, err
    assert _keys(results / "plus") == first


@pytest.mark.parametrize(
    "override, message",
    [
        ("run_id=../../escape", "run_id='../../escape' is not a plain name"),
        ("run_id=/tmp/elsewhere", "run_id='/tmp/elsewhere' is not a plain name"),
        ("resume=../escape", "resume='../escape' is not a run id"),
        ("resume=/tmp", "resume='/tmp' is not a run id"),
    ],
)
def test_run_ids_name_folders_under_results_dir_only(run, dirs, tmp_path, override, message):
    code, err = run(override)
    assert code == 2 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ceilings"]


def _fail_writes_under(monkeypatch, folder: Path, error: int) -> None:
    """Every file created (EACCES: read-only) or written (ENOSPC: full) under `folder` fails."""
    real_open, real_write = os.open, os.write
    inside = lambda path: str(Path(path).resolve()).startswith(str(folder.resolve()))  # noqa: E731

    def opening(path, flags, *args, **kwargs):
        if error == errno.EACCES and flags & os.O_CREAT and inside(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    def writing(fd, data):
        if error == errno.ENOSPC and inside(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", opening)
    monkeypatch.setattr(os, "write", writing)


@pytest.mark.parametrize("key", ["results_dir", "ceilings_dir"])
@pytest.mark.parametrize("problem", ["a file", "empty", "read-only", "full"])
def test_a_folder_that_cannot_be_written_is_one_clear_line_and_no_run_folder(
    run, dirs, tmp_path, monkeypatch, key, problem
):
    results, ceilings = dirs
    target = results if key == "results_dir" else ceilings
    value = str(target)
    if problem == "a file":
        if target.exists():
            target.rename(tmp_path / "moved")
        target.write_text("not a folder")
    elif problem == "empty":
        value = ""
    else:
        target.mkdir(parents=True, exist_ok=True)
        _fail_writes_under(monkeypatch, target, errno.EACCES if problem == "read-only" else errno.ENOSPC)
    code, err = run(f"{key}={value}")
    expected = f"{key} is empty" if problem == "empty" else f"{key}={value} is not a writable directory"
    assert code == 2 and expected in err, err
    assert len(err.strip().splitlines()) == 1
    assert not results.is_dir() or not any(p.is_dir() for p in results.iterdir()), "no run folder"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write a read-only folder")
def test_a_read_only_results_dir_is_refused(run, dirs):
    results, _ = dirs
    results.mkdir()
    results.chmod(0o555)
    try:
        code, err = run()
    finally:
        results.chmod(0o755)
    assert code == 2 and "is not a writable directory: Permission denied" in err and not any(results.iterdir())


def test_a_full_disk_when_the_run_folder_is_made_leaves_no_folder(run, dirs, monkeypatch):
    results, _ = dirs
    write_text = Path.write_text

    def full(self, *args, **kwargs):
        if self.name == "config.yaml":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    code, err = run("run_id=full")
    assert code == 2 and "results_dir=" in err and "is not a writable directory: No space left on device" in err
    assert not (results / "full").exists()


def test_a_full_disk_mid_run_says_which_records_are_safe_and_how_to_resume(run, dirs, monkeypatch):
    results, _ = dirs
    real_write = os.write
    appended = {"n": 0}

    def fills_up(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(RECORDS_FILE):
            appended["n"] += 1
            if appended["n"] == 2:  # the second record: half of it goes in, then the disk is full
                real_write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", fills_up)
    code, err = run("run_id=filled")
    monkeypatch.undo()
    assert code == 1, err
    assert "could not write to" in err and "No space left on device" in err
    assert f"1 records are safe in {results / 'filled'}" in err and "tierbench run resume=filled" in err
    assert len(_keys(results / "filled")) == 1  # one whole record, no half of the next
    code, err = run("resume=filled")
    assert code == 0, err
    keys = _keys(results / "filled")
    assert len(keys) == len(set(keys)) == 2 and len(read_records(results / "filled")) == 2


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["norm.enabled=false"], "every op family is disabled, so there is nothing to measure; enable one of: "),
        (
            ["norm.enabled=false", "decode.enabled=true", "decode.batches=[1]", "decode.lengths=[ragged]"],
            "make no case from these values (decode: ragged lengths need batches above 1)",
        ),
        (["resume=''"], "resume is empty: give the run (or sweep) to finish"),
        (["resume="], "resume is empty"),
    ],
)
def test_a_config_that_measures_nothing_exits_2_before_any_folder(run, dirs, overrides, message):
    results, _ = dirs
    code, err = run(*overrides)
    assert code == 2 and message in err, err
    assert not results.exists() or not any(results.iterdir())


def test_a_run_with_no_work_writes_no_report(compose, catalog, dirs, capsys):
    """A shard dealt nothing (more shards than cases) finishes with no records: no report, no error."""
    from tierbench.suite.measure.session import RunSession

    results, ceilings = dirs
    cfg = compose([*SMALL, f"results_dir={results}", f"ceilings_dir={ceilings}", "html=true"])
    session = RunSession.open(cfg, torch.device("cpu"), catalog)
    session.plan = []
    try:
        session.run()
        session.finish()
    finally:
        session.close()
    assert not (session.run_dir / "report.html").exists() and not (session.run_dir / RECORDS_FILE).exists()
