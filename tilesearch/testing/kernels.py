"""Checks that tests of hand-written kernel programs share (GEMM's cluster program, einsum-sum's
specialized walk): every case compiled for sm_90a at once, what ptxas says of a kernel's
registers (a spill there costs more than the pipeline gains), and on a GPU every case against
the float64 reference, a hang bounded."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from typing import Any


def compile_all(make: Callable[[str, Any], Any], names: Iterable[str], target: Any) -> None:
    """Compiles ``make(name, target)`` (a :class:`~tilesearch.records.Candidate`) for every name
    in the compile pool, two at a time, into TileLang's cache; raises with the errors of those
    that fail. Installs the pool's compiler in this process too (its hook and cache folder), so
    that the caller's own ``op.build`` of those candidates finds them there: without it, under
    NVRTC, the cluster test compiled each of its nine kernels again with nvcc, one after another
    (from an empty cache on the 2-core CPU machine: 209 s, against 75 s with it and 86 s under nvcc)."""
    from tilesearch.builder import LocalBuilder, compiler

    compiler.install()

    with LocalBuilder(workers=2, timeout=900) as builder:
        futures = {name: builder.submit(make(name, target)) for name in names}
        results = {name: future.result() for name, future in futures.items()}
    failed = {name: r.error for name, r in results.items() if not r.ok}
    if failed:
        raise AssertionError(f"not compiled: {failed}")


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


def failures_against_float64(make: Callable[[str, Any], Any], names: Iterable[str], timeout: float = 30.0) -> list:
    """Builds ``make(name, target)`` (a :class:`~tilesearch.records.Candidate`) for every name,
    all at once in the compile pool, then checks each on this machine's GPU against the float64
    reference; returns ``(name, status, error)`` of each that did not pass. ``timeout`` bounds
    one check: a fault in a pipeline's barriers hangs its kernel, and a correct one checks and
    times in about 2 s."""
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Status
    from tilesearch.runner import LocalRunner

    runner = LocalRunner(timeout=timeout)
    failures = []
    try:
        target = runner.start()
        with LocalBuilder(timeout=900) as builder:
            futures = {name: builder.submit(make(name, target)) for name in names}
            for name, future in futures.items():
                build = future.result()
                if not build.ok:
                    failures.append((name, "build", build.error))
                    continue
                result = runner.run(build.candidate)
                if result.status != Status.OK:
                    failures.append((name, result.status, result.error))
    finally:
        runner.close()
    return failures
