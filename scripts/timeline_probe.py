"""When each thing happens in one ``tune`` (fast-tuning issue): ``tune``'s phases add up seconds,
but the first measured trial comes after 13-15 s from an empty cache, and only a timeline says
what it waits for. Runs ``tilesearch tune ARGS`` in this process with its stages wrapped, and
writes, relative to this process's start:

- each compile-pool worker's warm-up end, the measuring worker's and the spares';
- each candidate's submit, build end (with its compile seconds) and measurement start and end
  (the runner's ``run``);
- each proposal round;
- the share of the host's CPU busy, sampled every 0.25 s (/proc/stat), and the load it had.

Prints the first events and a per-second summary last; ``out=DIR`` also writes ``timeline.json``.

usage: python scripts/timeline_probe.py [out=DIR] [round=N] [deeper=N] -- tune op=gemm m=8192 ... (the CLI's
arguments); round=N proposes N at a time (the tuner's ROUND), deeper=N keeps N more trials in flight."""
from __future__ import annotations

import json
import os
import sys
import threading
import time

T0 = time.perf_counter()
EVENTS: list[tuple[float, str, str]] = []
LOCK = threading.Lock()


def mark(kind: str, what: str = "") -> None:
    with LOCK:
        EVENTS.append((time.perf_counter() - T0, kind, what))


def cpu_sampler(samples: list[tuple[float, float]], stop: threading.Event) -> None:
    def read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            parts = [int(x) for x in f.readline().split()[1:]]
        idle = parts[3] + parts[4]
        return sum(parts) - idle, sum(parts)

    busy0, total0 = read()
    while not stop.wait(0.25):
        busy, total = read()
        if total > total0:
            samples.append((time.perf_counter() - T0, (busy - busy0) / (total - total0)))
        busy0, total0 = busy, total


def wrap(owner: type, name: str, before: str | None = None, after: str | None = None, what=None) -> None:
    fn = getattr(owner, name)

    def call(self, *args, **kwargs):
        label = what(self, *args) if what else ""
        if before:
            mark(before, label)
        try:
            return fn(self, *args, **kwargs)
        finally:
            if after:
                mark(after, label)

    setattr(owner, name, call)


def main() -> int:
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    opts = dict(a.split("=", 1) for a in argv[:cut])
    cli_args = argv[cut + 1:]
    mark("probe start")
    import tilesearch
    from tilesearch import cli, tuner
    from tilesearch.builder import local
    from tilesearch.runner import local as rlocal

    mark("imported tilesearch", tilesearch.__file__)
    print("tilesearch from", tilesearch.__file__, flush=True)

    def submit(self, candidate):
        key = candidate.key[:10]
        mark("submit", key)
        future = orig_submit(self, candidate)
        future.add_done_callback(lambda f: mark("built", f"{key} {f.result().compile_s:.2f}s" if not f.cancelled() else key))
        return future

    orig_submit = local.LocalBuilder.submit
    local.LocalBuilder.submit = submit
    wrap(local.LocalBuilder, "_warm", after="builder warm")
    wrap(rlocal._Warming, "_warm_up", before="worker warm start", after="worker warm end",
         what=lambda self, *a: self.worker.name)
    wrap(tuner._Loop, "run", before="loop start", after="loop end")
    wrap(tuner._Loop, "_record", after="recorded", what=lambda self, trial, *a: str(trial.number))
    wrap(rlocal.LocalRunner, "run", before="to runner", after="measured", what=lambda self, candidate, *a: candidate.key[:10])
    wrap(rlocal.LocalRunner, "start", after="runner started")
    wrap(rlocal.LocalRunner, "retime", before="retime start", after="retime end")
    # experiments with the pipeline's shape: round=N proposals at a time, deeper=N more in flight
    if "round" in opts:
        tuner.ROUND = int(opts["round"])
    if "deeper" in opts:
        tuner.DEEPER = int(opts["deeper"])
    orig_propose = tuner._Loop._fill

    def fill(self):
        n = self.launched
        out = orig_propose(self)
        if self.launched > n:
            mark("launched", f"{self.launched - n} (total {self.launched})")
        return out

    tuner._Loop._fill = fill
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=cpu_sampler, args=(samples, stop), daemon=True)
    sampler.start()
    mark("cli start")
    try:
        rc = cli.main(cli_args)
    finally:
        stop.set()
        mark("cli end")
    firsts: dict[str, float] = {}
    for t, kind, _ in EVENTS:
        firsts.setdefault(kind, t)
    print("\nfirst of each event (s since process start):")
    for kind, t in sorted(firsts.items(), key=lambda kv: kv[1]):
        count = sum(1 for _, k, _ in EVENTS if k == kind)
        last = max(t2 for t2, k, _ in EVENTS if k == kind)
        print(f"  {t:7.2f}  {kind:20s} x{count:<3d} last {last:7.2f}")
    print("\nper second: events and CPU busy share")
    end = int(EVENTS[-1][0]) + 1
    for s in range(end):
        evs = [k for t, k, _ in EVENTS if s <= t < s + 1]
        cpu = [b for t, b in samples if s <= t < s + 1]
        counts = {k: evs.count(k) for k in dict.fromkeys(evs)}
        print(f"  {s:3d}s cpu {100 * (sum(cpu) / len(cpu) if cpu else 0):3.0f}%  "
              + " ".join(f"{k}x{v}" for k, v in counts.items()))
    if "out" in opts:
        os.makedirs(opts["out"], exist_ok=True)
        with open(os.path.join(opts["out"], "timeline.json"), "w") as f:
            json.dump({"events": EVENTS, "cpu": samples, "args": cli_args}, f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
