"""Tune -> export -> load in a fresh process -> use from PyTorch: does the deployed kernel hold up?

One run, on one GPU (< 8 minutes on an H100):

1. tunes a small GEMM with a few trials (or takes ``storage`` with a study already there);
2. exports its best correct trial to ``$OUT/artifact``;
3. in a FRESH subprocess: times ``import tilesearch`` and ``tilesearch.load`` and records whether
   anything compiled (TileLang imported, compiler processes spawned, TileLang cache changed);
   checks the output bitwise against the TileLang kernel that tuning measured (same inputs) and
   against a float64 reference; zero-copy ``out=``; the launch on the current stream;
   ``torch.compile(fullgraph=True)`` (default and ``reduce-overhead``); manual CUDA-graph capture
   and replay on new data; refusal of a wrong architecture, a corrupted artifact and bad tensors;
   the kernel's time (L2 flushed) beside TileLang's and ``torch.matmul``; and the per-launch
   call overhead of each way of calling it, with CUDA events, interleaved rounds;
4. runs ``examples/gemm_in_module.py`` (tune, export, use in an ``nn.Module``, check).

Logs and JSON under ``$OUT``; a short table last. The work of ``experiments/export_check.py``;
the fresh process runs this file by path (:func:`runpy.run_path`), so that it imports nothing of
tilesearch before it times ``import tilesearch``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from tilesearch.experiment.cache import VARIABLE, empty_tilelang_cache

ROOT = Path(__file__).resolve().parents[2]  # the checkout: step 4 runs its examples/
COMPILERS = ("nvcc", "gcc", "g++", "cc", "c++", "clang", "ptxas")


def problem_args(args: Any) -> dict[str, Any]:
    return {"m": args.m, "n": args.n, "k": args.k, "dtype": args.dtype, "layout": args.layout}


# ---------------------------------------------------------------------------------------------------
# parent: tune, export, start the fresh process, run the example, print the table


def parent(args: Any) -> int:
    """Steps 1-4 (the module docstring); exit code 1 if a check failed. TileLang's cache is the
    caller's if set, else an empty one outside ``out`` (it is not a result); the fresh process shares it."""
    with nullcontext() if VARIABLE in os.environ else empty_tilelang_cache("export-check"):
        return _checked(args)


def _checked(args: Any) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"problem": problem_args(args)}

    import tilesearch

    storage = args.storage or f"sqlite:///{out / 'tune.db'}"
    if args.storage is None:
        start = time.perf_counter()
        result = tilesearch.tune("gemm", problem_args(args), storage=storage, trials=args.trials,
                                 strategy="tpe", seed=0, progress=False)
        report["tune"] = {"study": result.study, "wall_s": time.perf_counter() - start,
                          "statuses": result.statuses, "best_ms": result.best[0].latency_ms if result.best else None}
        print(f"tuned {result.study} in {report['tune']['wall_s']:.1f} s: {result.statuses}", flush=True)
    start = time.perf_counter()
    meta = tilesearch.export("gemm", out=out / "artifact", storage=storage, **problem_args(args))
    report["export"] = {"wall_s": time.perf_counter() - start, "kernel_id": meta.kernel_id, "config": meta.config,
                        "latency_ms": meta.latency_ms, "speedup": meta.speedup, "trial": meta.trial}
    print(f"exported {meta.kernel_id} (trial {meta.trial}, {meta.latency_ms} ms) in {report['export']['wall_s']:.1f} s",
          flush=True)

    run_file = f"import runpy; runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
    cmd = [sys.executable, "-c", run_file, "--child", "--out", str(out),
           "--calls", str(args.calls), "--rounds", str(args.rounds)]
    for key, value in problem_args(args).items():
        cmd += [f"--{key}", str(value)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout, cwd=ROOT)
    (out / "child.log").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    report["child_wall_s"] = time.perf_counter() - start
    child = json.loads((out / "child.json").read_text()) if (out / "child.json").is_file() else {}
    if done.returncode != 0:
        child.setdefault("checks", {})["fresh process"] = [False, f"exit {done.returncode}: {done.stderr.strip()[-300:]}"]
    report["child"] = child

    if not args.skip_example:
        sys.path.insert(0, str(ROOT / "examples"))
        try:
            import gemm_in_module

            start = time.perf_counter()
            errors = gemm_in_module.main(out / "example", trials=args.trials)
            report["example"] = {"ok": True, "errors": errors, "wall_s": time.perf_counter() - start}
        except Exception as exc:  # noqa: BLE001 - reported in the table
            report["example"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                 "traceback": traceback.format_exc()}

    (out / "export_check.json").write_text(json.dumps(report, indent=2, default=str))
    print_table(report)
    checks = child.get("checks", {})
    ok = bool(checks) and all(passed for passed, _ in checks.values()) and report.get("example", {"ok": True})["ok"]
    return 0 if ok else 1


def print_table(report: dict[str, Any]) -> None:
    child = report.get("child", {})
    load = child.get("load", {})
    print()
    print(f"problem: gemm {report['problem']}  device: {child.get('device', '?')}")
    if load:
        print(f"fresh process: import torch {load['import_torch_s']:.2f} s, import tilesearch "
              f"{load['import_tilesearch_s']:.2f} s, tilesearch.load {1e3 * load['load_s']:.1f} ms "
              f"(runtime via {load['runtime']}), first call {load['first_call_ms']:.1f} ms; "
              f"TileLang imported: {load['tilelang_imported']}, compiler processes: {len(load['compiler_processes'])}, "
              f"TileLang cache changed: {load['cache_changed']}; for comparison TileLang's own cache load "
              f"{load.get('tilelang_cache_load_s', float('nan')):.2f} s after import tilelang "
              f"{load.get('import_tilelang_s', float('nan')):.2f} s")
    times = child.get("kernel_ms", {})
    if times:
        print("kernel time, L2 flushed, median: "
              + ", ".join(f"{k} {v * 1e3:.2f} us" for k, v in times.items() if v is not None))
    overhead = child.get("overhead", {})
    if overhead:
        print(f"\n{'call (' + str(child.get('overhead_calls')) + ' back-to-back, median of rounds)':62s} {'host us/call':>12s} {'GPU us/call':>12s}")
        for name, row in overhead.items():
            print(f"{name:62s} {row['host_us']:12.2f} {row['gpu_us']:12.2f}")
    print(f"\n{'check':40s} result")
    for name, (passed, detail) in child.get("checks", {}).items():
        print(f"{name:40s} {'PASS' if passed else 'FAIL'}  {detail}")
    example = report.get("example")
    if example is not None:
        detail = ", ".join(f"{k}: {v:.1e}" for k, v in example.get("errors", {}).items()) or example.get("error", "")
        print(f"{'example nn.Module (vs float64)':40s} {'PASS' if example['ok'] else 'FAIL'}  {detail}")


# ---------------------------------------------------------------------------------------------------
# child: a fresh process that loads the artifact and puts it through its paces


def _watch_subprocesses() -> list[str]:
    spawned: list[str] = []
    original = subprocess.Popen.__init__

    def recording(self: Any, cmd: Any, *a: Any, **kw: Any) -> None:
        spawned.append(cmd if isinstance(cmd, str) else " ".join(map(str, cmd)))
        original(self, cmd, *a, **kw)

    subprocess.Popen.__init__ = recording  # type: ignore[method-assign]
    return spawned


def _snapshot(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")} if directory.is_dir() else set()


def child(args: Any) -> int:
    out = Path(args.out)
    report: dict[str, Any] = {"checks": {}}
    try:
        _run_child(args, out, report)
    except Exception as exc:  # noqa: BLE001 - reported in the table
        report["checks"]["fresh process"] = [False, f"{type(exc).__name__}: {str(exc)[:300]}"]
        (out / "child_tracebacks.log").open("a").write(f"== child\n{traceback.format_exc()}\n")
    finally:
        (out / "child.json").write_text(json.dumps(report, indent=2, default=str))
    return 0


def _run_child(args: Any, out: Path, report: dict[str, Any]) -> None:
    spawned = _watch_subprocesses()
    cache = Path(os.environ["TILELANG_CACHE_DIR"])
    cache_before = _snapshot(cache)
    checks = report["checks"]

    t0 = time.perf_counter()
    import torch

    t1 = time.perf_counter()
    import tilesearch
    from tilesearch.deploy import loader

    t2 = time.perf_counter()
    kernel = tilesearch.load(out / "artifact")
    t3 = time.perf_counter()
    tilelang_imported = "tilelang" in sys.modules

    from tilesearch import registry

    op = registry.load("gemm")
    problem = op.problem(**problem_args(args))
    generator = torch.Generator(device="cuda").manual_seed(1234)
    a, b = op.make_inputs(problem, torch.device("cuda"), generator)
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    c0 = kernel(a, b)
    torch.cuda.synchronize()
    t5 = time.perf_counter()
    compilers = [c for c in spawned if Path(c.split()[0]).name in COMPILERS]
    report["device"] = torch.cuda.get_device_name()
    report["load"] = {
        "import_torch_s": t1 - t0, "import_tilesearch_s": t2 - t1, "load_s": t3 - t2,
        "first_call_ms": 1e3 * (t5 - t4), "tilelang_imported": tilelang_imported,
        "runtime": loader.RUNTIME["loaded_by"], "compiler_processes": compilers,
        "cache_changed": _snapshot(cache) != cache_before,
    }
    no_compile = not tilelang_imported and not compilers and not report["load"]["cache_changed"]
    checks["load without compiling"] = [no_compile, f"load {1e3 * (t3 - t2):.1f} ms, first call {1e3 * (t5 - t4):.1f} ms"]

    def check(name: str, fn: Any) -> Any:
        try:
            passed, detail = fn()
        except Exception as exc:  # noqa: BLE001 - a failed check is a row in the table
            passed, detail = False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            (out / "child_tracebacks.log").open("a").write(f"== {name}\n{traceback.format_exc()}\n")
        checks[name] = [bool(passed), detail]
        print(f"{name}: {'PASS' if passed else 'FAIL'} {detail}", flush=True)

    # the kernel tuning measured: TileLang's JITKernel for the same config, from TileLang's cache
    from tilesearch.runner.measure import MeasureSettings, bench, compare
    from tilesearch.target import Target, detect

    t6 = time.perf_counter()
    import tilelang  # noqa: F401

    t7 = time.perf_counter()
    jit = op.build(problem, kernel.metadata.config, Target.from_arch(kernel.metadata.arch))
    t8 = time.perf_counter()
    report["load"].update(import_tilelang_s=t7 - t6, tilelang_cache_load_s=t8 - t7)
    c_tl = torch.full_like(c0, float("nan"))
    jit(a, b, c_tl)
    torch.cuda.synchronize()

    def same_as_tuned() -> tuple[bool, str]:
        diff = (c0.float() - c_tl.float()).abs().max().item()
        return torch.equal(c0, c_tl), f"bitwise equal to TileLang's kernel: {torch.equal(c0, c_tl)} (max diff {diff:g})"

    def reference() -> tuple[bool, str]:
        rel, mx, why = compare((c0,), op.reference(problem, (a, b)), op.tolerance(problem, kernel.metadata.config))
        return why is None, f"rel err {rel:.2e}, max err {mx:.2e}" + (f" ({why})" if why else "")

    check("same output as tuned kernel", same_as_tuned)
    check("float64 reference", reference)

    def zero_copy() -> tuple[bool, str]:
        c = torch.full_like(c0, float("nan"))
        pointer = c.data_ptr()
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        returned = kernel(a, b, out=c)
        torch.cuda.synchronize()
        grew = torch.cuda.memory_allocated() - before
        c2 = torch.full_like(c0, float("nan"))
        torch.ops.tilesearch.gemm_out(a, b, kernel.id, c2)
        ok = returned is c and returned.data_ptr() == pointer and torch.equal(c, c0) and grew == 0 and torch.equal(c2, c0)
        return ok, f"out= is the same tensor (data_ptr equal), {grew} bytes allocated by the call, op out variant equal"

    def current_stream() -> tuple[bool, str]:
        stream = torch.cuda.Stream()
        c = torch.empty_like(c0)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.cuda._sleep(50_000_000)  # holds the side stream for tens of ms
            c.fill_(float("nan"))
            kernel(a, b, out=c)
        stream.synchronize()
        return torch.equal(c, c0), "launch ordered after earlier work on the current (side) stream"

    check("zero-copy out=", zero_copy)
    check("current CUDA stream", current_stream)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernel = kernel
            self.register_buffer("weight", b)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.kernel(x, self.weight)
            return y, torch.relu(y) * 0.5

    with torch.no_grad():
        eager = Block()(a)

        def same(got: tuple[torch.Tensor, torch.Tensor]) -> bool:
            return torch.equal(got[0], c0) and torch.allclose(got[1], eager[1])

        def compiled() -> tuple[bool, str]:
            return same(torch.compile(Block(), fullgraph=True)(a)), "inductor, one graph; GEMM output bitwise equal"

        def reduce_overhead() -> tuple[bool, str]:
            from torch._dynamo.utils import counters

            skips_before = counters["inductor"]["cudagraph_skips"]
            model = torch.compile(Block(), fullgraph=True, mode="reduce-overhead")
            for _ in range(3):
                got = tuple(t.clone() for t in model(a))
            skips = counters["inductor"]["cudagraph_skips"] - skips_before
            return same(got) and skips == 0, f"cudagraph trees replay ({skips} cudagraph skips); GEMM output bitwise equal"

        check("torch.compile(fullgraph=True)", compiled)
        check("torch.compile reduce-overhead", reduce_overhead)

    def cuda_graph() -> tuple[bool, str]:
        static_a = a.clone()
        static_c = torch.empty_like(c0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                kernel(static_a, b, out=static_c)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            kernel(static_a, b, out=static_c)
            allocated = kernel(static_a, b)
        new_a = op.make_inputs(problem, torch.device("cuda"), generator)[0]
        static_a.copy_(new_a)
        graph.replay()
        torch.cuda.synchronize()
        expected = kernel(new_a, b)
        ok = torch.equal(static_c, expected) and torch.equal(allocated, expected) and not torch.equal(expected, c0)
        return ok, "captured (out= and allocating), replayed on new data, equal to eager"

    check("CUDA graph capture + replay", cuda_graph)

    def refusals() -> tuple[bool, str]:
        from tilesearch.deploy import ArchitectureError, BadTensorError, CorruptArtifactError

        refused = []
        other = "sm_80" if kernel.metadata.arch != "sm_80" else "sm_90a"
        try:
            tilesearch.load(out / "artifact", arch=other)
        except ArchitectureError:
            refused.append("arch")
        broken = out / "artifact-corrupted"
        shutil.rmtree(broken, ignore_errors=True)
        shutil.copytree(out / "artifact", broken)
        data = bytearray((broken / "kernel.so").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (broken / "kernel.so").write_bytes(bytes(data))
        try:
            tilesearch.load(broken)
        except CorruptArtifactError:
            refused.append("corrupt")
        bad = {"shape": (a[1:], b), "dtype": (a.float(), b), "device": (a.cpu(), b.cpu()),
               "layout": (a.t().contiguous().t(), b)}
        for name, bad_args in bad.items():
            try:
                kernel(*bad_args)
            except BadTensorError:
                refused.append(name)
        want = ["arch", "corrupt", "shape", "dtype", "device", "layout"]
        return refused == want, f"refused: {', '.join(refused)}"

    check("refuses arch/corrupt/bad tensors", refusals)

    try:
        target = detect()
        base = op.baseline(problem, (a, b))
        c_tl2, c_ts = torch.empty_like(c0), torch.empty_like(c0)
        ms = bench([lambda: kernel(a, b, out=c_ts), lambda: jit(a, b, c_tl2), base], MeasureSettings(), target.l2_bytes)
        report["kernel_ms"] = {"tilesearch.load": ms[0], "TileLang JITKernel": ms[1], "torch.matmul": ms[2],
                               "tuning measured": kernel.metadata.latency_ms}
        report["overhead_calls"] = args.calls
        report["overhead"] = overhead(kernel, jit, a, b, c0, base, problem, args.calls, args.rounds)
    except Exception as exc:  # noqa: BLE001 - keep the checks above
        checks["timing"] = [False, f"{type(exc).__name__}: {exc}"]
        (out / "child_tracebacks.log").open("a").write(f"== timing\n{traceback.format_exc()}\n")


def overhead(kernel: Any, jit: Any, a: Any, b: Any, c0: Any, base: Any, problem: Any, calls: int, rounds: int) -> dict:
    """Host time to issue one call and GPU time per call in a back-to-back stream of ``calls``,
    median over interleaved rounds; a CUDA graph of ``calls`` launches gives the GPU-only floor."""
    import torch

    b_kn = b if problem["layout"] == "nn" else b.t()
    c = torch.empty_like(c0)
    launch = kernel._launch
    compiled = torch.compile(lambda x, y: kernel(x, y), fullgraph=True)
    ways = {
        "torch.matmul(a, b, out=c)": base,
        "torch.matmul(a, b)": lambda: torch.matmul(a, b_kn),
        "TileLang JITKernel(a, b, c)": lambda: jit(a, b, c),
        "TVM-FFI function(a, b, c) (no checks)": lambda: launch(a, b, c),
        "tilesearch kernel(a, b, out=c)": lambda: kernel(a, b, out=c),
        "tilesearch kernel(a, b)": lambda: kernel(a, b),
        "torch.ops.tilesearch.gemm(a, b, id)": lambda: torch.ops.tilesearch.gemm(a, b, kernel.id),
        "torch.compile(fullgraph) fn calling kernel": lambda: compiled(a, b),
    }
    for fn in ways.values():
        for _ in range(20):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            kernel(a, b, out=c)
    ways["CUDA graph replay of the kernel (GPU only)"] = None

    host: dict[str, list[float]] = {name: [] for name in ways}
    gpu: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, fn in ways.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            t = time.perf_counter()
            start.record()
            if fn is None:
                graph.replay()
            else:
                for _ in range(calls):
                    fn()
            end.record()
            host[name].append((time.perf_counter() - t) / calls * 1e6)
            torch.cuda.synchronize()
            gpu[name].append(start.elapsed_time(end) / calls * 1e3)
    return {name: {"host_us": statistics.median(host[name]), "gpu_us": statistics.median(gpu[name])} for name in ways}


def _child_main() -> int:
    """The fresh process's command line (written by :func:`parent`, read nowhere else)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--calls", type=int)
    parser.add_argument("--rounds", type=int)
    for key, kind in (("m", int), ("n", int), ("k", int), ("dtype", str), ("layout", str)):
        parser.add_argument(f"--{key}", type=kind)
    return child(parser.parse_args())


if __name__ == "__main__":
    sys.exit(_child_main())
