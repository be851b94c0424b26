"""Where a measuring worker's start and exit go on the GPU host (fast-tuning issue): the first
trial of README's main command comes after 7 s, 6 s of it the worker's warm-up, and ``tune``
waits 1.0-1.9 s for its processes to exit. Each variant runs in ``procs`` fresh processes,
alternating, and prints its phases in seconds:

- ``serial``: import torch, make a CUDA context, import TileLang, one cuBLAS GEMM (the order a
  worker warms up in today);
- ``overlap``: the CUDA context made in a thread while TileLang imports;
- ``exit``: a worker's memory (the main command's inputs, copies and L2 flush buffer, about 2 GB)
  and then its exit, timed from the parent: Python's full teardown, or exit handlers and
  ``os._exit`` (:func:`tilesearch.workers._exit`).

usage: python scripts/startup_probe.py [procs=3]"""
import subprocess
import sys
import time

CHILD = r"""
import sys, time, threading, os
t0 = time.perf_counter()
mark = {}
import torch
mark["import torch"] = time.perf_counter() - t0
mode = sys.argv[1]
def context():
    torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
if mode == "overlap":
    th = threading.Thread(target=context); th.start()
    import tilelang
    mark["import tilelang"] = time.perf_counter() - t0
    th.join()
    mark["context"] = time.perf_counter() - t0
else:
    context()
    mark["context"] = time.perf_counter() - t0
    import tilelang
    mark["import tilelang"] = time.perf_counter() - t0
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
(a @ a).sum().item()
mark["first gemm"] = time.perf_counter() - t0
if mode in ("exit", "exit_fast"):
    keep = [torch.randn(8192, 8192, device="cuda", dtype=torch.float16) for _ in range(12)]
    keep.append(torch.empty(200 * 2**20, dtype=torch.int8, device="cuda"))
    torch.cuda.synchronize()
print(" ".join(f"{k}={v:.2f}" for k, v in mark.items()), flush=True)
sys.stdin.readline()
if mode == "exit_fast":
    from tilesearch.workers import _exit
    _exit()
"""


def main() -> None:
    procs = int(dict(a.split("=") for a in sys.argv[1:]).get("procs", 3))
    rows = []
    for i in range(procs):
        for mode in ("serial", "overlap", "exit", "exit_fast"):
            began = time.perf_counter()
            p = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
            line = p.stdout.readline().strip()
            ready = time.perf_counter() - began
            asked = time.perf_counter()
            p.stdin.write("\n")
            p.stdin.flush()
            p.wait()
            rows.append((i, mode, ready, time.perf_counter() - asked, line))
            print(f"{i} {mode:9s} start {ready:5.2f} s  exit {rows[-1][3]:5.2f} s  {line}", flush=True)
    print("\nmode       start (s), median  exit (s), median")
    for mode in ("serial", "overlap", "exit", "exit_fast"):
        starts = sorted(r[2] for r in rows if r[1] == mode)
        exits = sorted(r[3] for r in rows if r[1] == mode)
        print(f"{mode:9s}  {starts[len(starts) // 2]:5.2f}             {exits[len(exits) // 2]:5.2f}")


if __name__ == "__main__":
    main()
