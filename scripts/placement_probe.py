"""Is the between-process spread of a tuned GEMM's ratio to torch.matmul a matter of where its
operands lie in memory? Each of ``procs`` fresh processes times one kernel and torch.matmul on
``placements`` copies of the same inputs (each behind a spacer allocation of random size), all
interleaved in the same rounds after a 1.5 s settling warm-up, and prints the ratio per copy.
usage: python scripts/placement_probe.py [procs=4] [placements=3]"""
import json
import statistics
import subprocess
import sys

CASES = {
    "16x4096x4096 bf16 nt": ({"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
                            {"block_k": 128, "block_m": 64, "block_n": 256, "epilogue": "smem", "num_stages": 2,
                             "panel_size": 4, "persistent": False, "split_k": 8, "threads": 128, "tma": True,
                             "warp_policy": "square", "warp_specialize": "off"}),
    "2048x14336x4096 bf16 nt": ({"m": 2048, "n": 14336, "k": 4096, "dtype": "bfloat16", "layout": "nt"},
                               {"block_k": 64, "block_m": 128, "block_n": 256, "epilogue": "smem", "num_stages": 3,
                                "panel_size": 8, "persistent": False, "split_k": 1, "threads": 256, "tma": True,
                                "warp_policy": "full_row", "warp_specialize": "role_based"}),
}


def child(placements: int, seed: int) -> None:
    import random

    import tilelang  # noqa: F401
    import torch

    from tilesearch import registry
    from tilesearch.runner.measure import MeasureSettings, device_info, rounds
    from tilesearch.target import Target

    info = device_info()
    target = Target.from_dict({k: v for k, v in info.items() if k != "versions"})
    op = registry.load("gemm")
    rng = random.Random(seed)
    out = {}
    for name, (params, config) in CASES.items():
        problem = op.problem(**params)
        kernel = op.build(problem, config, target)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1234)
        base_inputs = op.make_inputs(problem, torch.device("cuda"), gen)
        keep, fns, bases = [], [], []
        for _ in range(placements):
            keep.append(torch.empty(rng.randrange(1, 64) * 2**20 + rng.randrange(0, 2**20, 256), dtype=torch.int8, device="cuda"))
            inputs = tuple(t.clone() for t in base_inputs)
            outputs = op.make_outputs(problem, torch.device("cuda"))
            fns.append(lambda kernel=kernel, inputs=inputs, outputs=outputs: kernel(*inputs, *outputs))
            bases.append(op.baseline(problem, inputs))
            keep.append((inputs, outputs))
        settings = MeasureSettings(warmup_ms=1500.0, precision=0.002, max_ms=4000.0)
        samples = rounds(fns + bases, settings, target.l2_bytes)
        med = [statistics.median(s) for s in samples]
        out[name] = {"kernel_ms": med[:placements], "torch_ms": med[placements:],
                     "ratio": [b / k for k, b in zip(med[:placements], med[placements:])], "rounds": len(samples[0])}
    print("RESULT " + json.dumps(out), flush=True)


def main(procs: int, placements: int) -> None:
    rows = []
    for p in range(procs):
        done = subprocess.run([sys.executable, __file__, "child", str(placements), str(p)], capture_output=True, text=True)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(done.stdout[-2000:], done.stderr[-3000:])
            continue
        rows.append(json.loads(line[7:]))
    print(json.dumps(rows))
    for name in CASES:
        print(name)
        for p, row in enumerate(rows):
            r = row[name]
            print(f"  proc {p}: ratio per placement " + " ".join(f"{x:.4f}" for x in r["ratio"]) +
                  "   kernel us " + " ".join(f"{1e3 * x:.2f}" for x in r["kernel_ms"]) +
                  "   torch us " + " ".join(f"{1e3 * x:.2f}" for x in r["torch_ms"]) + f"   rounds {r['rounds']}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        kv = dict(a.split("=") for a in sys.argv[1:])
        main(int(kv.get("procs", 4)), int(kv.get("placements", 3)))
