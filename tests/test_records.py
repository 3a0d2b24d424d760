"""Run records: appended whole, read back even after a kill in mid-write, folders never shared."""

from __future__ import annotations

import errno
import json
import multiprocessing as mp
import os
import re

import pytest

from tierbench.suite.store.reading import read_records
from tierbench.suite.store.records import RECORDS_FILE, Measurement, RecordWriter, create_run_dir
from tierbench.suite.store.runfolder import RunFolderError


def _record(provider: str, status: str = "ok", **fields) -> Measurement:
    return Measurement(
        run_id="r",
        op="matmul",
        family="matmul",
        case={"m": 1},
        case_id="matmul/m=1",
        label="1",
        x=1.0,
        provider=provider,
        tier="vendor",
        status=status,
        **fields,
    )


def test_append_and_read_back(tmp_path):
    writer = RecordWriter(tmp_path)
    writer.append(_record("a", median_ms=1.5, samples_ms=[1.4, 1.5, 1.6]))
    writer.append(_record("b", status="error", reason="RuntimeError: boom"))
    records = read_records(tmp_path)
    assert [r.provider for r in records] == ["a", "b"]
    assert records[0].samples_ms == [1.4, 1.5, 1.6] and records[1].reason == "RuntimeError: boom"


def test_required_fields_are_in_every_line(tmp_path):
    RecordWriter(tmp_path).append(_record("a", rel_error=float("inf")))
    line = json.loads((tmp_path / RECORDS_FILE).read_text())
    for key in (
        "op",
        "case",
        "provider",
        "tier",
        "status",
        "reason",
        "median_ms",
        "samples_ms",
        "tflops",
        "gbps",
        "sol",
        "rel_error",
        "peak_mem_bytes",
        "env",
        "telemetry",
    ):
        assert key in line
    assert line["rel_error"] is None  # JSON has no Infinity: stored as null


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        _record("a", status="fast")


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    writer = RecordWriter(tmp_path)
    writer.append(_record("a"))
    writer.append(_record("b"))
    path = tmp_path / RECORDS_FILE
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # a kill in the middle of writing "b"
    with pytest.warns(UserWarning, match="truncated last line"):
        records = read_records(tmp_path)
    assert [r.provider for r in records] == ["a"]


def test_resumed_writer_cuts_the_partial_line_before_appending(tmp_path):
    RecordWriter(tmp_path).append(_record("a"))
    path = tmp_path / RECORDS_FILE
    with path.open("ab") as f:
        f.write(b'{"run_id": "r", "op": "mat')
    with pytest.warns(UserWarning, match="cut a truncated last record"):
        writer = RecordWriter(tmp_path)
    writer.append(_record("c"))
    assert [r.provider for r in read_records(tmp_path)] == ["a", "c"]


def test_named_run_folder_is_never_reused(tmp_path):
    rid, path = create_run_dir(tmp_path, "mine")
    assert rid == "mine" and path.is_dir()
    with pytest.raises(FileExistsError, match="resume=mine"):
        create_run_dir(tmp_path, "mine")


def _make_dirs(root: str, n: int, queue) -> None:
    queue.put([create_run_dir(root)[0] for _ in range(n)])


def test_concurrent_runs_get_distinct_folders(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_make_dirs, args=(str(tmp_path), 20, queue)) for _ in range(3)]
    for p in procs:
        p.start()
    ids = [rid for _ in procs for rid in queue.get(timeout=60)]
    for p in procs:
        p.join(timeout=60)
    assert len(ids) == len(set(ids)) == 60


@pytest.mark.parametrize(
    "line, why",
    [
        ("42", "got int"),
        ("null", "got NoneType"),
        ("[1, 2]", "got list"),
        ({"median_ms": "fast"}, "'median_ms' holds str"),
        ({"case": ["m", 1]}, "'case' holds list"),
        ({"quantiles_ms": {"p10": "x"}}, "'quantiles_ms' must map names to numbers"),
        ({"samples_ms": ["a", None]}, "'samples_ms' must be a list of numbers"),
        ({"errors": {"out": [1]}}, "'errors' must map names to numbers"),
        ({"own_code": 1}, "'own_code' holds int"),
    ],
)
def test_a_line_that_is_json_but_not_a_record_is_dropped_with_a_warning(tmp_path, line, why):
    writer = RecordWriter(tmp_path)
    writer.append(_record("a"))
    if isinstance(line, dict):  # a record with one field of the wrong type
        line = json.dumps({**json.loads(_record("b").to_json()), **line})
    with (tmp_path / RECORDS_FILE).open("a") as f:
        f.write(line + "\n")
    writer.append(_record("c"))
    with pytest.warns(UserWarning, match=rf"{RECORDS_FILE}: dropped line 2, not a record: .*{re.escape(why)}"):
        records = read_records(tmp_path)
    assert [r.provider for r in records] == ["a", "c"]


def test_a_key_recorded_twice_is_read_once_the_last_record_winning(tmp_path):
    writer = RecordWriter(tmp_path)
    writer.append(_record("a", median_ms=1.0))
    writer.append(_record("b"))
    writer.append(_record("a", median_ms=2.0))  # what two processes writing one run used to leave
    with pytest.warns(UserWarning, match=r"1 \(case, provider\) pairs recorded more than once.*lines 3"):
        records = read_records(tmp_path)
    assert [(r.provider, r.median_ms) for r in records] == [("a", 2.0), ("b", None)]


def test_a_write_that_fails_leaves_only_whole_records(tmp_path, monkeypatch):
    writer = RecordWriter(tmp_path)
    writer.append(_record("a"))
    real_write = os.write

    def disk_fills_up(fd, data):  # half the line goes in, then the disk is full
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", disk_fills_up)
    with pytest.raises(OSError, match="No space left"):
        writer.append(_record("b"))
    monkeypatch.undo()
    assert (tmp_path / RECORDS_FILE).read_bytes().endswith(b"}\n")
    assert [r.provider for r in read_records(tmp_path)] == ["a"]  # no warning: nothing was left half-written


@pytest.mark.parametrize("run_id", ["../../escape", "/tmp/absolute", "a/b", ".hidden", " ", "x" * 101])
def test_a_run_id_is_a_plain_name(tmp_path, run_id):
    root = tmp_path / "results" / "runs"
    with pytest.raises(RunFolderError, match="is not a plain name"):
        create_run_dir(root, run_id)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == []
