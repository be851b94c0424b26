"""What ptxas says of a kernel's resources, for tests that a hand-written pipeline keeps its
accumulators in registers (a spill there costs more than the pipeline gains)."""

from __future__ import annotations

import re
import subprocess
import tempfile


def ptxas_report(source: str, arch: str = "sm_90a") -> str:
    """ptxas's ``-v`` report of a kernel's CUDA source, compiled with TileLang's headers and
    compiler as TileLang compiles it."""
    from tilelang.contrib.cc import get_cplus_compiler
    from tilelang.contrib.nvcc import get_nvcc_compiler
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/kernel.cu"
        with open(path, "w") as f:
            f.write(source)
        done = subprocess.run([get_nvcc_compiler(), f"-ccbin={get_cplus_compiler()}", "--cubin", "-O3", f"-arch={arch}",
                               "-std=c++17", "-w", "-Xptxas=-v", "-I" + TILELANG_TEMPLATE_PATH,
                               "-I" + CUTLASS_INCLUDE_DIR, "-o", f"{tmp}/kernel.cubin", path],
                              capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"nvcc failed: {done.stderr[-2000:]}")
    return done.stdout + done.stderr


def spills(source: str, arch: str = "sm_90a") -> bool:
    """Whether any function of ``source`` spills registers."""
    report = ptxas_report(source, arch)
    counts = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    if not counts:
        raise RuntimeError(f"no spill figures in ptxas's report: {report[-2000:]}")
    return any(int(a) or int(b) for a, b in counts)
