"""What the machine was and what the card was doing: recorded with every measurement."""

from __future__ import annotations

import os
import platform
from functools import cache
from typing import Any

import torch

from ..providers.base import package_version
from . import provenance

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


def device_name(device: torch.device) -> str:
    """The device's name as records give it (their env's device_name)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).name
    return platform.processor() or platform.machine()


def device_identity(device: torch.device) -> tuple[int | None, str | None]:
    """The GPU's index in this process and its UUID (as nvidia-smi spells it); (None, None) on a CPU."""
    if device.type != "cuda":
        return None, None
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return index, (f"GPU-{uuid}" if uuid is not None else None)


def environment(device: torch.device) -> dict[str, Any]:
    index, uuid = device_identity(device)
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
        "tierbench_modified": provenance.tierbench_modified(),
        # The repository the run was started in (a plugin user's project), when it is not tierbench's.
        "workdir_commit": provenance.workdir_commit(),
        "device_name": device_name(device),
        "device_index": index,
        "device_uuid": uuid,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(index)
        env.update(
            sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            memory_bytes=props.total_memory,
            cudnn=torch.backends.cudnn.version(),
        )
        nvml = _nvml()
        if nvml is not None:
            env["driver"] = nvml.nvmlSystemGetDriverVersion()
    else:
        env.update(threads=torch.get_num_threads())
    return env


def _handle(nvml, device: torch.device):
    """NVML's handle of the device, found by UUID: NVML numbers GPUs regardless of CUDA_VISIBLE_DEVICES."""
    _, uuid = device_identity(device)
    if uuid is not None:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:  # noqa: BLE001 - an older driver: fall back to the index
            pass
    return nvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def _as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def host_gpus(nvml, own_uuid: str | None) -> dict[str, Any]:
    """What else runs on this host's GPUs: other processes on ours, and every other GPU that is busy."""
    mine = os.getpid()
    others, busy = [], []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        uuid = _as_text(nvml.nvmlDeviceGetUUID(handle))
        pids = [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        if uuid == own_uuid:
            others = [p for p in pids if p != mine]
        elif pids:
            util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            busy.append({"uuid": uuid, "processes": len(pids), "util_pct": util})
    return {"other_processes": others, "busy_gpus": busy}


def telemetry(device: torch.device) -> dict[str, Any]:
    """SM clock, power, temperature and clock-throttle reasons now, and what else runs on the host's GPUs;
    empty where NVML is absent."""
    nvml = _nvml() if device.type == "cuda" else None
    if nvml is None:
        return {}
    try:
        handle = _handle(nvml, device)
        bits = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        state = {
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "temp_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": [name for bit, name in _THROTTLE_REASONS.items() if bits & bit],
        }
    except Exception as exc:  # noqa: BLE001
        return {"telemetry_error": str(exc)}
    try:
        state.update(host_gpus(nvml, device_identity(device)[1]))
    except Exception as exc:  # noqa: BLE001 - a driver without per-process accounting: the rest stands
        state["host_gpus_error"] = str(exc)
    return state
