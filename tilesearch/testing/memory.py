"""Memory figures of the tuning processes, for leak measurements (``experiments/fault_and_leak.py``).

:func:`probe` runs inside a runner's worker process (``LocalRunner.call``); :func:`rss_mb` and
:func:`gpu_mb_by_pid` read any process from the outside.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
from typing import Any


def rss_mb(pid: int | None = None) -> float | None:
    """Resident memory of a process (default: this one) in MiB, from ``/proc``."""
    try:
        with open(f"/proc/{pid or os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def gpu_mb_by_pid() -> dict[int, float]:
    """GPU memory used by each process that holds a CUDA context, in MiB, from ``nvidia-smi``
    (empty without it; in a container the PIDs may be the host's)."""
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found: dict[int, float] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                found[int(parts[0])] = float(parts[1])
            except ValueError:
                pass
    return found


def probe() -> dict[str, Any]:
    """Inside a runner's worker process: the CUDA memory it holds and its resident memory, after a GC."""
    import torch

    gc.collect()
    free, total = torch.cuda.mem_get_info()
    figures: dict[str, Any] = {
        "pid": os.getpid(),
        "allocated_mb": torch.cuda.memory_allocated() / 2**20,
        "reserved_mb": torch.cuda.memory_reserved() / 2**20,
        "device_used_mb": (total - free) / 2**20,
        "rss_mb": rss_mb(),
    }
    try:
        from tilelang.cache.kernel_cache import KernelCache

        figures["tilelang_kernels_in_memory"] = len(KernelCache()._memory_cache)
    except Exception:  # noqa: BLE001 - a private attribute of TileLang; the figure is optional
        figures["tilelang_kernels_in_memory"] = None
    return figures
