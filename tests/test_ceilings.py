"""Ceilings: measured on the device, cached per device, measured again when stale or asked."""

from __future__ import annotations

import json

import torch

from tierbench.suite import ceilings
from tierbench.suite.naming import slug


def test_measured_once_then_served_from_the_cache(tmp_path, monkeypatch):
    cpu = torch.device("cpu")
    first = ceilings.load_or_measure(cpu, tmp_path)
    assert first.copy_gbps > 0.1 and first.matmul_tflops["fp32"] > 0.001
    (cached,) = list(tmp_path.glob("*.json"))
    assert json.loads(cached.read_text())["copy_gbps"] == first.copy_gbps

    def must_not_measure(device):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(ceilings, "measure", must_not_measure)
    assert ceilings.load_or_measure(cpu, tmp_path) == first


def test_stale_or_damaged_cache_is_measured_again(tmp_path, monkeypatch):
    cpu = torch.device("cpu")
    fake = ceilings.Ceilings(device_name="x", copy_gbps=1.0, matmul_tflops={"fp32": 2.0})
    monkeypatch.setattr(ceilings, "measure", lambda device: fake)
    path = tmp_path / f"{slug(ceilings.device_name(cpu))}.json"
    path.write_text(json.dumps({"version": 0, "copy_gbps": 9}))
    assert ceilings.load_or_measure(cpu, tmp_path) == fake
    path.write_text("{not json")
    assert ceilings.load_or_measure(cpu, tmp_path) == fake
    assert ceilings.load_or_measure(cpu, tmp_path, remeasure=True) == fake


def test_peak_falls_back_to_the_best_known_dtype_but_fp8_only_to_an_fp8_rate():
    c = ceilings.Ceilings(device_name="x", copy_gbps=1.0, matmul_tflops={"fp32": 50.0, "bf16": 700.0})
    assert c.peak_tflops("bf16") == 700.0 and c.peak_tflops("fp16") == 700.0
    assert c.peak_tflops("fp8_e4m3") is None  # a 16-bit peak would overstate an FP8 case's SOL
    c.matmul_tflops["fp8_e4m3"] = 1300.0
    assert c.peak_tflops("fp8_e4m3") == 1300.0


def test_committed_ceilings_of_an_older_version_still_read(tmp_path):
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "results" / "ceilings" / "nvidia-h200.json"
    c = ceilings.Ceilings(**json.loads(committed.read_text()))
    assert c.peak_tflops("bf16") > 100 and c.version < ceilings.CEILINGS_VERSION
    assert c.peak_tflops(ceilings.FP8) is None  # measured before the FP8 rate: no FP8 SOL, no crash
