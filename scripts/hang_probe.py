"""Which GEMM configurations hang, and how often? One configuration (persistent, TileLang's
role-based warp specialization, 2 stages) got no answer within 60 s in 3 of 7 tunes of README's
main command on an H100 and measured fine in the other 4. Each variant below, one knob away
from it, runs in ``procs`` fresh processes; each process checks the kernel against float64 once,
then launches it ``launches`` times (synchronizing every 50) and prints its progress, and is
killed after ``timeout`` seconds. A hung process shows how many launches it got through.
usage: python scripts/hang_probe.py [procs=3] [launches=2000] [timeout=20]"""
import json
import subprocess
import sys
import time

PROBLEM = {"m": 8192, "n": 8192, "k": 8192, "dtype": "float16", "layout": "nn"}
HUNG = {"block_k": 32, "block_m": 128, "block_n": 256, "epilogue": "direct", "num_stages": 2, "panel_size": 4,
        "persistent": True, "raster": "row", "split_k": 1, "swap_ab": False, "threads": 256, "tma": True,
        "warp_policy": "full_col", "warp_specialize": "role_based"}
VARIANTS = {
    "hung": {},
    "stages=3": {"num_stages": 3},
    "stages=4": {"num_stages": 4},
    "ws=on": {"warp_specialize": "on"},
    "persistent=False": {"persistent": False},
    "epilogue=smem": {"epilogue": "smem"},
    "full_row": {"warp_policy": "full_row"},
    "block_k=64": {"block_k": 64},
}


def child(name: str, launches: int) -> None:
    import tilelang  # noqa: F401
    import torch

    from tilesearch import registry
    from tilesearch.runner.measure import compare, device_info
    from tilesearch.target import Target

    info = device_info()
    target = Target.from_dict({k: v for k, v in info.items() if k != "versions"})
    op = registry.load("gemm")
    problem = op.problem(**PROBLEM)
    config = {**HUNG, **VARIANTS[name]}
    kernel = op.build(problem, config, target)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int(time.time() * 1e6) % 2**31)
    inputs = op.make_inputs(problem, torch.device("cuda"), gen)
    outputs = op.make_outputs(problem, torch.device("cuda"))
    kernel(*inputs, *outputs)
    torch.cuda.synchronize()
    rel, mx, why = compare(outputs, op.reference(problem, inputs), op.tolerance(problem, config))
    print(f"CHECK {rel:.3g} {why or 'ok'}", flush=True)
    for i in range(0, launches, 50):
        for _ in range(50):
            kernel(*inputs, *outputs)
        torch.cuda.synchronize()
        print(f"DONE {i + 50}", flush=True)


def main(procs: int, launches: int, timeout: float) -> None:
    from concurrent.futures import ThreadPoolExecutor

    # compile every variant once, in parallel, before any process times
    def build(name: str) -> None:
        subprocess.run([sys.executable, __file__, "child", name, "0"], capture_output=True, timeout=600)

    with ThreadPoolExecutor(len(VARIANTS)) as pool:
        list(pool.map(build, VARIANTS))
    rows = []
    for name in VARIANTS:
        for _ in range(procs):
            began = time.time()
            try:
                done = subprocess.run([sys.executable, __file__, "child", name, str(launches)], capture_output=True,
                                      text=True, timeout=timeout)
                out, hung = done.stdout, done.returncode != 0
            except subprocess.TimeoutExpired as exc:
                out, hung = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), True
            lines = out.split()
            reached = max([int(lines[i + 1]) for i, w in enumerate(lines) if w == "DONE"] or [0])
            check = out.split("CHECK", 1)[1].splitlines()[0].strip() if "CHECK" in out else "-"
            rows.append({"variant": name, "hung": hung, "launches": reached, "check": check,
                         "seconds": round(time.time() - began, 1)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"{'variant':18} {'processes hung':>15} {'launches done':>14}")
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        print(f"{name:18} {sum(r['hung'] for r in mine):>9} of {len(mine):<3} {sum(r['launches'] for r in mine):>14}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        args = dict(a.split("=", 1) for a in sys.argv[1:])
        main(int(args.get("procs", 3)), int(args.get("launches", 2000)), float(args.get("timeout", 20)))
