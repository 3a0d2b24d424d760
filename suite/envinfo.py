"""What the machine was and what the card was doing: recorded with every measurement."""

from __future__ import annotations

import platform
from functools import cache
from typing import Any

import torch

from . import provenance
from .providers.base import package_version

# NVML clock-event (throttle) reason bits, named as nvidia-smi names them.
_THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@cache
def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - telemetry is optional: no NVML, no telemetry fields
        return None


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "device_type": device.type,
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": package_version("triton"),
        "cuda": torch.version.cuda,
        # tierbench's commit; `git_commit` keeps that meaning for the readers of older records.
        "git_commit": provenance.tierbench_commit(),
        "tierbench_version": provenance.version(),
        "tierbench_commit": provenance.tierbench_commit(),
        # The repository the run was started in (a plugin user's project), when it is not tierbench's.
        "workdir_commit": provenance.workdir_commit(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            device_name=props.name,
            sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            memory_bytes=props.total_memory,
            cudnn=torch.backends.cudnn.version(),
        )
        nvml = _nvml()
        if nvml is not None:
            env["driver"] = nvml.nvmlSystemGetDriverVersion()
    else:
        env.update(device_name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return env


def telemetry(device: torch.device) -> dict[str, Any]:
    """SM clock, power, temperature and clock-throttle reasons now; empty where NVML is absent."""
    nvml = _nvml() if device.type == "cuda" else None
    if nvml is None:
        return {}
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        bits = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        return {
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "temp_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": [name for bit, name in _THROTTLE_REASONS.items() if bits & bit],
        }
    except Exception as exc:  # noqa: BLE001
        return {"telemetry_error": str(exc)}
