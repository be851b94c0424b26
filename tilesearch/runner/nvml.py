"""The GPU's SM clock, temperature and power through NVML, read around each measurement.

``pynvml`` (the ``nvidia-ml-py`` package) is optional: without it, or without a GPU, every
reading is ``None`` and measurements simply carry no clock record. A kernel timed while the SM
clock sat well below the level this worker usually sees (thermal or power capping, another
process's load) is *throttled*: :func:`throttled` says so, and the measure step flags it (and times
it again where no baseline ran beside it, :func:`tilesearch.runner.measure.timed`).
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import Any

THROTTLE_SHARE = 0.9  # a clock below this share of the usual one counts as throttled
_SEEN: list[float] = []  # SM clocks under load read in this process, the "usual level"


@dataclass(frozen=True)
class Reading:
    sm_clock_mhz: float
    temp_c: float
    power_w: float


@functools.cache
def _handle() -> Any:
    """NVML handle of the GPU this process sees as CUDA device 0, or ``None``."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - not installed, no driver: no readings
        return None
    index = 0
    try:  # CUDA_VISIBLE_DEVICES renumbers devices; NVML does not
        import torch

        index = torch.cuda._get_nvml_device_index(0)
    except Exception:  # noqa: BLE001
        pass
    try:
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001
        return None


def read() -> Reading | None:
    """The current SM clock, temperature and power draw, or ``None`` without NVML."""
    handle = _handle()
    if handle is None:
        return None
    import pynvml

    try:
        return Reading(
            float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
            pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        )
    except Exception:  # noqa: BLE001
        return None


def driver_version() -> str:
    """The NVIDIA driver's version, ``none`` without NVML."""
    if _handle() is None:
        return "none"
    import pynvml

    try:
        value = pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001
        return "unknown"
    return value.decode() if isinstance(value, bytes) else str(value)


def throttled(clock_mhz: float | None, usual: list[float] | None = None) -> bool:
    """Whether ``clock_mhz`` (read under load) is well below the usual level, the median of the
    clocks seen before it (at least 3); remembers it as seen."""
    usual = _SEEN if usual is None else usual
    if clock_mhz is None:
        return False
    low = len(usual) >= 3 and clock_mhz < THROTTLE_SHARE * statistics.median(usual)
    usual.append(clock_mhz)
    del usual[:-64]
    return low


def figures(readings: list[Reading | None]) -> dict[str, float]:
    """The record of a measurement: the lowest SM clock, the highest temperature and power."""
    got = [r for r in readings if r is not None]
    if not got:
        return {}
    return {"sm_clock_mhz": min(r.sm_clock_mhz for r in got), "temp_c": max(r.temp_c for r in got),
            "power_w": max(r.power_w for r in got)}
