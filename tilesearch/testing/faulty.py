"""An operator that fails on purpose, to test that a tuning run survives every kind of bad kernel.

``y = 2 x + 1`` over ``n`` float32 elements. Its ``fault`` knob picks how a configuration fails:

- ``none``: correct;
- ``hang``: never returns (spins on an atomic add) -> ``run_timeout``;
- ``out_of_bounds``: writes far outside ``y`` -> illegal address, ``runtime_error``;
- ``wrong_result``: adds 1.5 instead of 1 -> ``wrong_result``;
- ``compile_error``: calls a device function that does not exist -> nvcc fails, ``compile_error``.

The knobs ``block`` and ``threads`` make several good configurations of different speeds, so
that a run over the whole space must also pick a correct best. Used only by tests and
experiments; named by import path, never registered as an entry point:
``tilesearch.testing.faulty:FaultyOp`` (real TileLang kernels, for a GPU) and
``tilesearch.testing.faulty:FaultyCpuOp`` (the same faults as Python kernels on the CPU, for CI
with :class:`tilesearch.testing.cpu.CpuRunner`; its hang sleeps and its out-of-bounds write
crashes the worker process with SIGSEGV).
"""

# no "from __future__ import annotations": TileLang reads the kernel signature's annotations as objects

from collections.abc import Sequence
from typing import Any

from tilesearch.op import Operator, Param, Problem, Tolerance
from tilesearch.space import Categorical, Config, Space
from tilesearch.target import Target

FAULTY_OP = "tilesearch.testing.faulty:FaultyOp"
FAULTY_CPU_OP = "tilesearch.testing.faulty:FaultyCpuOp"
FAULTS = ("none", "hang", "out_of_bounds", "wrong_result", "compile_error")
EXPECTED_STATUS = {
    "none": "ok",
    "hang": "run_timeout",
    "out_of_bounds": "runtime_error",
    "wrong_result": "wrong_result",
    "compile_error": "compile_error",
}
OUT_OF_BOUNDS = 1 << 36  # elements past the end of y: 256 GiB, never mapped


class FaultyOp(Operator):
    name = "faulty"
    description = "y = 2x + 1 with a knob that makes kernels hang, crash, lie or not compile (tests only)"
    params = (Param("n", int, default=1 << 20, minimum=1, help="elements"),)
    examples = ({"n": 1000},)

    def space(self, problem: Problem, target: Target) -> Space:
        def divides(c: dict) -> str | None:
            return None if c["block"] % c["threads"] == 0 else f"block {c['block']} % threads {c['threads']} != 0"

        return Space(
            [
                Categorical("fault", FAULTS),
                Categorical("block", (256, 512, 1024)),
                Categorical("threads", (128, 256)),
            ],
            [divides],
        )

    def program(self, problem: Problem, config: Config, target: Target) -> Any:
        return faulty_program(problem["n"], **config)

    def pass_configs(self, problem: Problem, config: Config) -> dict[str, Any]:
        # TileLang guards global accesses it cannot prove in bounds, which would drop the bad store
        return {"tl.disable_safe_memory_legalize": True} if config["fault"] == "out_of_bounds" else {}

    def make_inputs(self, problem: Problem, device: Any, generator: Any) -> tuple[Any, ...]:
        import torch

        return (torch.randn(problem["n"], device=device, generator=generator, dtype=torch.float32),)

    def make_outputs(self, problem: Problem, device: Any) -> tuple[Any, ...]:
        import torch

        return (torch.empty(problem["n"], device=device, dtype=torch.float32),)

    def reference(self, problem: Problem, inputs: Sequence[Any]) -> tuple[Any, ...]:
        import torch

        return (inputs[0].to(torch.float64) * 2 + 1,)

    def flops(self, problem: Problem) -> float:
        return 2.0 * problem["n"]

    def bytes(self, problem: Problem) -> float:
        return 8.0 * problem["n"]

    def tolerance(self, problem: Problem, config: Config) -> Tolerance:
        return Tolerance(rel_fro=1e-6, max_rel=1e-6)


def faulty_program(n: int, *, fault: str = "none", block: int = 256, threads: int = 128) -> Any:
    """The tile program of one configuration (a TileLang ``PrimFunc``)."""
    import tilelang.language as T

    per_thread = block // threads

    @T.prim_func
    def faulty(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            tx = T.get_thread_binding(0)
            for j in T.serial(per_thread):
                i = bx * block + j * threads + tx
                if i < n:
                    if fault == "hang":
                        Y[i] = X[i] * 2.0 + 1.0
                        while X[i] == X[i]:
                            T.atomic_add(Y[i], 1.0)
                    elif fault == "out_of_bounds":
                        Y[T.Cast("int64", i) + T.int64(OUT_OF_BOUNDS)] = X[i] * 2.0 + 1.0
                    elif fault == "wrong_result":
                        Y[i] = X[i] * 2.0 + 1.5
                    elif fault == "compile_error":
                        Y[i] = T.call_extern("float32", "tilesearch_no_such_device_function", X[i])
                    else:
                        Y[i] = X[i] * 2.0 + 1.0

    return faulty


class FaultyCpuOp(FaultyOp):
    """The same space and faults, as Python kernels on CPU tensors."""

    name = "faulty_cpu"

    def build(self, problem: Problem, config: Config, target: Target) -> Any:
        fault = config["fault"]
        if fault == "compile_error":
            raise RuntimeError("error: identifier \"tilesearch_no_such_device_function\" is undefined (simulated)")
        return _cpu_kernel(fault, config["block"])


def _cpu_kernel(fault: str, block: int) -> Any:
    def kernel(x: Any, y: Any) -> None:
        import ctypes
        import time

        if fault == "hang":
            while True:
                time.sleep(0.05)
        if fault == "out_of_bounds":
            ctypes.memset(y.data_ptr() + OUT_OF_BOUNDS * 4, 0, 4)  # SIGSEGV
        for start in range(0, x.numel(), block * 64):
            part = slice(start, start + block * 64)
            y[part] = x[part] * 2 + (1.5 if fault == "wrong_result" else 1)

    return kernel
