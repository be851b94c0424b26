"""The GPU's facts read without torch: what the measuring worker will report, known seconds sooner.

Starting the measuring worker (a process that imports torch and makes a CUDA context) took 5-8 s
on the H100 host, and ``tune`` waited for it before it proposed or compiled anything: the study's
name, its space and every compile need the GPU's facts. Two readers here need neither torch nor a
CUDA context:

- :func:`probe`: the GPU's name and arch through NVML, and the versions the worker would report
  (torch's CUDA version read from its ``version.py``). Enough to name a study: a finished one is
  served without any worker (:mod:`tilesearch.served`).
- :func:`facts`: the whole :class:`~tilesearch.target.Target` through the CUDA driver API
  (``cuDeviceGetAttribute`` needs no context), read in a child process with the worker's
  environment, so that ``CUDA_VISIBLE_DEVICES`` picks the same device as in the worker and the
  tuning process itself never initializes CUDA. The runner starts its worker meanwhile and checks
  its report against these facts before it measures (:meth:`~tilesearch.runner.local.LocalRunner.start`).

Anything either cannot tell for sure gives ``None``, and the caller takes the slow path; where
neither tells, :func:`absent` says whether there is surely no GPU at all.

The module imports nothing outside the standard library at its top: :func:`facts` runs this very
file as a script in the child (about 0.1 s, where importing the package would add optuna's).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FACTS_TIMEOUT = 30.0  # seconds the child may take (cuInit on a busy host)


@dataclass(frozen=True)
class Probe:
    """What the runner's worker would report, read without CUDA: GPU name, arch and versions."""

    gpu: str
    arch: str
    versions: dict[str, Any]


def probe() -> Probe | None:
    """The GPUs' name and arch (``None`` unless every GPU of the host is of one kind) and the
    versions of :func:`tilesearch.versions.collect` with ``torch_cuda`` and ``driver``."""
    from tilesearch import versions
    from tilesearch.target import compile_arch

    try:
        import pynvml

        pynvml.nvmlInit()
        kinds = set()
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            kinds.add((name.decode() if isinstance(name, bytes) else str(name),
                       tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))))
        driver = pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - no NVML, no driver: the usual path finds out
        return None
    cuda = torch_cuda()
    if len(kinds) != 1 or cuda is None:
        return None
    (gpu, (major, minor)), = kinds
    arch = compile_arch(major, minor)
    found = {**versions.collect(), "torch_cuda": cuda,
             "driver": driver.decode() if isinstance(driver, bytes) else str(driver)}
    return Probe(gpu, arch, found)


def torch_cuda() -> str | None:
    """``torch.version.cuda`` read from torch's ``version.py`` (importing torch takes seconds, and
    so did ``importlib.util.find_spec("torch")`` on the GPU host's long path: 0.5-0.8 s); ``None``
    if it cannot be read."""
    for entry in sys.path:
        path = Path(entry or ".") / "torch" / "version.py"
        try:
            text = path.read_text()
        except OSError:
            continue
        match = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*(?:(['\"])(.*?)\1|None)\s*$", text, re.M)
        if match is None:
            return None
        return match.group(2) if match.group(1) else "none"
    return None


def facts(env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The :func:`tilesearch.runner.measure.device_facts` of a worker started with ``env``: the
    target of its CUDA device 0 and the versions, or ``None`` where they cannot be read for sure
    (no driver, a CPU build of torch, GPUs of several kinds, a child that fails)."""
    from tilesearch.target import Target, compile_arch

    found = probe()
    if found is None or found.versions.get("torch_cuda") in (None, "none"):
        return None
    try:
        done = subprocess.run([sys.executable, "-I", "-S", __file__], env={**os.environ, **(env or {})}, capture_output=True,
                              text=True, timeout=FACTS_TIMEOUT)
        device = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not isinstance(device, dict) or device.get("name") != found.gpu:
        return None
    target = Target(arch=compile_arch(device["major"], device["minor"]), smem_per_block=device["smem_optin"],
                    num_sms=device["sms"], l2_bytes=device["l2"], gpu=device["name"])
    return {**target.to_dict(), "versions": found.versions}


def absent(env: dict[str, str] | None = None) -> str | None:
    """Why a worker started with ``env`` surely finds no CUDA GPU: the driver library does not load,
    or the driver counts no device (``CUDA_ERROR_NO_DEVICE``, as with ``CUDA_VISIBLE_DEVICES=""``).
    ``None`` where that is not sure. Read in a child, as :func:`facts` is, so that ``tune`` on a
    machine without a GPU says so in a fraction of a second, not after the measuring worker has
    imported torch (5-8 s on the CPU machine)."""
    try:
        done = subprocess.run([sys.executable, "-I", "-S", __file__, "absent"], env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=FACTS_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def _why_absent() -> str:
    """Runs in the child: :func:`absent`'s reason, or nothing."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver here: libcuda.so.1 does not load"
    if cuda.cuInit(0) == 100:  # CUDA_ERROR_NO_DEVICE
        return "the CUDA driver finds no GPU (CUDA_ERROR_NO_DEVICE; see CUDA_VISIBLE_DEVICES)"
    return ""


# CUdevice_attribute values (cuda.h)
_ATTRIBUTES = {"sms": 16, "l2": 38, "major": 75, "minor": 76, "smem_optin": 97}


def _device_zero() -> dict[str, Any]:
    """Runs in the child: device 0's name and attributes through ``libcuda``."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")

    def check(code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"{what} returned CUDA error {code}")

    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    name = ctypes.create_string_buffer(256)
    check(cuda.cuDeviceGetName(name, 256, device), "cuDeviceGetName")
    out: dict[str, Any] = {"name": name.value.decode()}
    for key, attribute in _ATTRIBUTES.items():
        value = ctypes.c_int()
        check(cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device), f"cuDeviceGetAttribute({key})")
        out[key] = value.value
    return out


if __name__ == "__main__":
    print(_why_absent() if sys.argv[1:] == ["absent"] else json.dumps(_device_zero()))
