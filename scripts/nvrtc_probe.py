"""Whether NVRTC could compile the search's kernels faster than nvcc, and to the same kernels
(fast-tuning issue: "compile with a faster backend where the kernels are identical"). CPU only.

Samples ``configs`` valid GEMM configurations at two shapes (8192^3 float16 nn, 784x4096x4096
bfloat16 nt), lowers each with TileLang and catches its device code where TileLang asks nvcc for
a cubin. Each code is then compiled twice in this process: by nvcc as TileLang does, and by NVRTC
as TileLang's own NVRTC backend does (its ``nvrtc_std.h`` prelude, ``-default-device``) with
automatic precompiled headers (``-pch``), which NVRTC keeps in the process and reuses for the next
code with the same includes. Prints the seconds of each, and whether the cubins' code
(``.text``) and everything else but debug data and notes (:func:`tilesearch.builder.batch.code_sections`)
agree. NVRTC compiles as the compile pool does under ``TILESEARCH_COMPILER=nvrtc``
(:mod:`tilesearch.builder.compiler`: every code given the same TileLang headers, so that one
precompiled header serves all; the cubins are those of each code alone).

Needs nvcc, and NVRTC for Python (the test extra: ``pip install -e .[test]``). On the GPU host,
whose toolkit has its own NVRTC (``$CUDA_HOME/lib64``), the bundle brings the bindings.

With ``gpu=1`` (on the GPU host) it also answers what the CPU cannot: each sampled configuration
is built twice, its device code compiled by nvcc and by NVRTC (TileLang's kernel cache off, so each
build compiles), both kernels are checked against float64, and they are timed interleaved by the runner's own rounds
(:func:`tilesearch.runner.measure.rounds`: CUDA events, L2 flushed before every call, warm-up,
rounds added until the ratio's interval is within ``precision``). It prints the ratio of
nvcc's median to NVRTC's with its 95% interval (paired bootstrap over rounds): above 1, NVRTC's kernel
is faster. On an H200 (2026-11-29, ``experiments/results/fast/nvrtc_probe_gpu_h200_b4314f0.txt``)
the 12 kernels ran 0.983-1.058x as fast as nvcc's, with the same results to the bit.

usage: python scripts/nvrtc_probe.py [configs=6] [seed=0] [gpu=1 [precision=0.005]]
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time

SHAPES = (dict(m=8192, n=8192, k=8192, dtype="float16", layout="nn"),
          dict(m=784, n=4096, k=4096, dtype="bfloat16", layout="nt"))


def device_codes(configs: int, seed: int) -> list[str]:
    """The device code of each sampled configuration, as TileLang hands it to its compile hook."""
    from tilelang.cuda import backend

    from tilesearch import registry
    from tilesearch.target import Target

    op, target = registry.load("gemm"), Target.from_arch("sm_90a")
    codes: list[str] = []

    def hook(code, tvm_target, pass_config=None):
        codes.append(str(code))
        return backend.tilelang_callback_cuda_compile(code, tvm_target, pass_config)

    rng = random.Random(seed)
    with compiling_with(hook):
        for shape in SHAPES:
            problem = op.problem(**shape)
            space = op.space(problem, target)
            for _ in range(configs):
                op.build(problem, space.sample(rng), target)
    return codes


@contextlib.contextmanager
def compiling_with(hook):
    """TileLang's device-code compile hook replaced by ``hook`` for the builds inside."""
    from tilelang.cuda import backend

    from tilesearch.builder import batch

    batch._register(hook)
    try:
        yield
    finally:
        batch._register(backend.tilelang_callback_cuda_compile)


def by_nvcc(code: str, includes: list[str]) -> tuple[bytes, float]:
    from tilelang.contrib.cc import get_cplus_compiler
    from tilelang.contrib.nvcc import get_nvcc_compiler

    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "k.cu")
        with open(source, "w") as f:
            f.write(code)
        began = time.perf_counter()
        subprocess.run([get_nvcc_compiler(), f"-ccbin={get_cplus_compiler()}", "--cubin", "-O3", "-lineinfo",
                        "-arch=sm_90a", "-std=c++20", *includes, source, "-o", source + ".cubin"],
                       check=True, capture_output=True)
        spent = time.perf_counter() - began
        with open(source + ".cubin", "rb") as f:
            return f.read(), spent


def by_nvrtc(code: str) -> tuple[bytes, float]:
    """NVRTC's cubin of ``code`` as the compile pool makes it under ``TILESEARCH_COMPILER=nvrtc``
    (:mod:`tilesearch.builder.compiler`), and the seconds it took."""
    from tilesearch.builder import compiler

    before = compiler.spent()
    cubin = compiler.nvrtc_cubin(compiler.shared_includes(code), compiler.options_for("sm_90a"))
    return cubin, compiler.spent() - before


def main(argv: list[str]) -> int:
    import tilelang  # noqa: F401 - before tvm
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    from tilesearch.builder.batch import code_sections

    args = dict(arg.split("=", 1) for arg in argv)
    includes = ["-I" + TILELANG_TEMPLATE_PATH, "-I" + CUTLASS_INCLUDE_DIR]
    if args.get("gpu") == "1":
        return on_gpu(int(args.get("configs", 6)), int(args.get("seed", 0)), float(args.get("precision", 0.005)))
    codes = device_codes(int(args.get("configs", 6)), int(args.get("seed", 0)))
    print(f"{'code':>4} {'nvcc s':>7} {'nvrtc s':>8}  text  rest")
    rows = []
    for i, code in enumerate(codes):
        a, nvcc_s = by_nvcc(code, includes)
        b, nvrtc_s = by_nvrtc(code)
        mine, theirs = code_sections(a), code_sections(b)
        names = set(mine) | set(theirs)
        text = all(mine.get(n) == theirs.get(n) for n in names if n.startswith(".text"))
        rest = all(mine.get(n) == theirs.get(n) for n in names if not n.startswith(".text"))
        rows.append((nvcc_s, nvrtc_s, text, rest))
        print(f"{i:4d} {nvcc_s:7.2f} {nvrtc_s:8.2f}  {'same' if text else 'DIFF'}  {'same' if rest else 'DIFF'}", flush=True)
    later = rows[1:]
    if later:
        nvcc_all = sorted(r[0] for r in later)
        nvrtc_all = sorted(r[1] for r in later)
        print(f"after the first code: median nvcc {nvcc_all[len(later) // 2]:.2f} s, nvrtc {nvrtc_all[len(later) // 2]:.2f} s; "
              f"identical code in {sum(r[2] for r in rows)} of {len(rows)}, identical otherwise in {sum(r[3] for r in rows)}")
    return 0


def on_gpu(configs: int, seed: int, precision: float) -> int:
    """Each sampled configuration built with either compiler, checked and timed (module docstring)."""
    import statistics

    import torch
    from tilelang.cuda import backend
    from tilelang.env import env

    from tilesearch import registry
    from tilesearch.builder import compiler
    from tilesearch.runner.measure import MeasureSettings, rounds
    from tilesearch.runner.stats import ratio
    from tilesearch.target import detect

    env.disable_cache()  # the kernel cache is keyed by the program, not by the compiler
    op, target = registry.load("gemm"), detect()
    settings = MeasureSettings(precision=precision)
    rng = random.Random(seed)
    rows = []
    for shape in SHAPES:
        problem = op.problem(**shape)
        space = op.space(problem, target)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed + 1)
        inputs = op.make_inputs(problem, torch.device("cuda"), gen)
        reference = op.reference(problem, inputs)[0]
        for _ in range(configs):
            config = space.sample(rng)
            calls, errors = {}, {}
            for name, hook in (("nvcc", backend.tilelang_callback_cuda_compile), ("nvrtc", compiler.compile_device_code)):
                with compiling_with(hook):
                    kernel = op.build(problem, config, target)
                out = torch.full_like(reference, float("nan"), dtype=inputs[0].dtype)
                kernel(*inputs, out)
                torch.cuda.synchronize()
                errors[name] = ((out.double() - reference).norm() / reference.norm()).item()
                calls[name] = (lambda kernel=kernel, out=out, inputs=inputs: kernel(*inputs, out))
            # the runner's own interleaved rounds (L2 flushed, warm-up, rounds until the ratio is precise),
            # NVRTC's kernel first and nvcc's last, as a candidate and its baseline
            nvrtc_ms, nvcc_ms = rounds([calls["nvrtc"], calls["nvcc"]], settings, target.l2_bytes)
            times = {"nvcc": nvcc_ms, "nvrtc": nvrtc_ms}
            r = ratio(times["nvcc"], times["nvrtc"])
            rows.append((problem.key, config, statistics.median(times["nvcc"]) * 1e3,
                         statistics.median(times["nvrtc"]) * 1e3, r, errors))
            print(f"{problem.key} {config}: nvcc {rows[-1][2]:.1f} us, nvrtc {rows[-1][3]:.1f} us, "
                  f"nvcc/nvrtc {r.value:.3f} [{r.low:.3f}, {r.high:.3f}], rel err {errors}", flush=True)
    print("\nnvcc us | nvrtc us | nvcc / nvrtc [95%] | rel err nvcc, nvrtc")
    for _, _, nvcc_us, nvrtc_us, r, errors in rows:
        print(f"{nvcc_us:.1f} | {nvrtc_us:.1f} | {r.value:.3f} [{r.low:.3f}, {r.high:.3f}] | "
              f"{errors['nvcc']:.1e}, {errors['nvrtc']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
