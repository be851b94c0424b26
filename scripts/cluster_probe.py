"""The GEMM cluster program beside the template and cuBLAS, variant by variant, in one process.

The model-shape searches with ``cluster`` on (2026-11-26, H200) found the cluster program 10-25%
behind the template at the same tiles where K is long, and Nsight Compute put half its warps'
stall samples in barrier waits. This times the cluster program at the template's best tile of
each problem and at deeper or taller tiles beside that template kernel and ``torch.matmul``:
each built here, checked against float64,
then all timed interleaved in the same rounds (the runner's rounds: L2 flushed, CUDA events, the host
kept ahead of the GPU), one problem after
another. Prints each variant's median ratio to ``torch.matmul`` with the quartiles of the
per-round ratios, and writes ``cluster_probe.json`` under ``out``. A probe of the program, not a
result of the search.

``set=short_k``: where K is a few tiles deep, the problems whose time is as much C's stores as the
MMAs, the persistent programs at one base tile and its neighbours: the template under TileLang's
warp specializations, the cluster program paired either way, cooperative and ping-pong. At
8192x8192x256 a search's clustered persistent kernel was 4.6% ahead of the template's of the same
tile (H200, 2026-11-26); this asks how far that holds in K and across shapes.

usage: python scripts/cluster_probe.py out=$OUT [rounds=200] [waits=tl,test] [set=short_k|long_k|single|single_parts|chunked]
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

TILE = dict(split_k=1, swap_ab=False, tma=True, warp_specialize="on", raster="row", schedule="cooperative",
            persistent=False)
PROBLEMS = [  # (problem, the template's tile there: each search's best of 2026-11-26)
    (dict(m=2048, n=28672, k=4096, dtype="bfloat16", layout="nt"),
     dict(block_m=128, block_n=224, block_k=64, num_stages=3, threads=256, epilogue="smem", panel_size=8,
          warp_policy="square")),
    (dict(m=2048, n=4096, k=4096, dtype="bfloat16", layout="nt"),
     dict(block_m=128, block_n=256, block_k=64, num_stages=3, threads=256, epilogue="smem", panel_size=16,
          warp_policy="full_row")),
    (dict(m=8192, n=8192, k=256, dtype="float16", layout="nt"),
     dict(block_m=128, block_n=256, block_k=64, num_stages=3, threads=256, epilogue="smem", panel_size=0,
          warp_policy="full_row", persistent=True)),
]
VARIANTS = [  # (label, knobs over the template's tile); a variant the space forbids is a row saying why
    ("template", {"cluster": "off"}),
    ("m2", {"cluster": "m2"}),
    ("n2", {"cluster": "n2"}),
    ("m2 s4 direct", {"cluster": "m2", "num_stages": 4, "epilogue": "direct"}),
    ("n2 s4 direct", {"cluster": "n2", "num_stages": 4, "epilogue": "direct"}),
    ("m2 256x128 s4 direct", {"cluster": "m2", "block_m": 256, "block_n": 128, "num_stages": 4,
                              "epilogue": "direct", "warp_policy": "full_row"}),
    ("n2 256x128 s4 direct", {"cluster": "n2", "block_m": 256, "block_n": 128, "num_stages": 4,
                              "epilogue": "direct", "warp_policy": "full_row"}),
    ("m2 persistent", {"cluster": "m2", "persistent": True}),
]

# set=short_k: (problem, base tile); every variant below is persistent at that base
SHORT_K_TILE = dict(block_m=128, block_n=128, block_k=64, num_stages=4, threads=256, epilogue="smem", panel_size=4,
                    warp_policy="full_row", persistent=True)
SHORT_K_PROBLEMS = [(dict(m=m, n=n, k=k, dtype=dtype, layout=layout), SHORT_K_TILE) for m, n, k, dtype, layout in (
    (8192, 8192, 256, "bfloat16", "nt"), (8192, 8192, 128, "float16", "nt"), (4096, 8192, 512, "bfloat16", "nt"),
    (2048, 14336, 512, "float16", "nt"),
    (16384, 4096, 256, "float16", "nn"), (8192, 8192, 1024, "bfloat16", "nt"), (4096, 4096, 2048, "bfloat16", "nt"))]
SHORT_K_VARIANTS = [
    ("template ws", {"cluster": "off"}),
    ("template role", {"cluster": "off", "warp_specialize": "role_based"}),
    ("template 128x256 s3 role", {"cluster": "off", "warp_specialize": "role_based", "block_n": 256,
                                  "num_stages": 3}),
    ("m2", {"cluster": "m2"}),
    ("n2", {"cluster": "n2"}),
    ("m2 pingpong", {"cluster": "m2", "schedule": "pingpong"}),
    ("n2 pingpong", {"cluster": "n2", "schedule": "pingpong"}),
    ("n2 128x256 s3", {"cluster": "n2", "block_n": 256, "num_stages": 3}),
    ("m2 256x128 s3", {"cluster": "m2", "block_m": 256, "num_stages": 3}),
    ("n2 s3", {"cluster": "n2", "num_stages": 3}),
]
# set=long_k: the model-shape suite's shapes with K of 3584 and more, where the template's best
# (128x256x64, 4 stages, not persistent) stays 1-5% behind cuBLAS (H200, 2026-12-04), beside the
# persistent programs at the same width and the ping-pong cluster program, which was 2% behind the
# template at K=2048 before (set=short_k) and has not been timed further in K since its fix
LONG_K_TILE = dict(block_m=128, block_n=256, block_k=64, num_stages=4, threads=256, epilogue="smem", panel_size=8,
                   warp_policy="full_row", persistent=False)
LONG_K_PROBLEMS = [(dict(m=m, n=n, k=k, dtype=dtype, layout="nt"), LONG_K_TILE) for m, n, k, dtype in (
    (2048, 28672, 4096, "bfloat16"), (2048, 4096, 4096, "bfloat16"), (2048, 4096, 14336, "bfloat16"),
    (512, 4608, 3584, "float16"))]
LONG_K_VARIANTS = [
    ("template", {"cluster": "off"}),
    ("template persistent s3", {"cluster": "off", "persistent": True, "num_stages": 3}),
    ("template persistent direct", {"cluster": "off", "persistent": True, "epilogue": "direct"}),
    ("n2 persistent s3", {"cluster": "n2", "persistent": True, "num_stages": 3}),
    ("n2 persistent direct", {"cluster": "n2", "persistent": True, "epilogue": "direct"}),
    ("m2 persistent s3", {"cluster": "m2", "persistent": True, "num_stages": 3}),
    ("n2 pingpong 128x128 s4", {"cluster": "n2", "persistent": True, "schedule": "pingpong", "block_n": 128}),
    ("n2 pingpong 128x128 s5", {"cluster": "n2", "persistent": True, "schedule": "pingpong", "block_n": 128,
                                "num_stages": 5}),
    ("m2 pingpong 128x128 s5", {"cluster": "m2", "persistent": True, "schedule": "pingpong", "block_n": 128,
                                "num_stages": 5}),
]
# set=single: the same shapes and README's 8192^3, the program's written-out pipeline in one block
# (cluster="single": one stage of MMAs left in flight, no partner) beside the template (whose
# consumers wait for each stage's MMAs: TileLang declines an MMA in flight under its automatic
# warp specialization) and beside the same pipeline paired (n2): which of the two costs at long K
SINGLE_PROBLEMS = LONG_K_PROBLEMS + [(dict(m=8192, n=8192, k=8192, dtype="float16", layout="nn"), LONG_K_TILE)]
# set=single_parts: where the single-block pipeline loses to the template (H100, 2026-12-06: 4-9% at
# the long-K shapes), each of its differences undone in its generated CUDA (:data:`REWRITES`)
PARTS_PROBLEMS = [(dict(m=m, n=n, k=k, dtype=dtype, layout=layout), LONG_K_TILE) for m, n, k, dtype, layout in (
    (2048, 4096, 4096, "bfloat16", "nt"), (2048, 4096, 14336, "bfloat16", "nt"), (8192, 8192, 8192, "float16", "nn"))]
SINGLE_DIRECT = {"cluster": "single", "epilogue": "direct"}
PARTS_VARIANTS = [
    ("template", {"cluster": "off"}),
    ("template direct", {"cluster": "off", "epilogue": "direct"}),
    ("single direct", SINGLE_DIRECT),
    ("single direct tl waits", {**SINGLE_DIRECT, "rewrite": "tl_waits"}),
    ("single direct one arrive", {**SINGLE_DIRECT, "rewrite": "one_arrive"}),
    ("single direct release now", {**SINGLE_DIRECT, "rewrite": "release_now"}),
    ("single direct all three", {**SINGLE_DIRECT, "rewrite": "tl_waits+one_arrive+release_now"}),
]
SINGLE_VARIANTS = [
    ("template", {"cluster": "off"}),
    ("template s3", {"cluster": "off", "num_stages": 3}),
    ("single s4 direct", {"cluster": "single", "epilogue": "direct"}),
    ("single s3", {"cluster": "single", "num_stages": 3}),
    ("n2 s3", {"cluster": "n2", "num_stages": 3}),
    ("single persistent s4 direct", {"cluster": "single", "persistent": True, "epilogue": "direct"}),
    ("single persistent s3", {"cluster": "single", "persistent": True, "num_stages": 3}),
    ("single pingpong 128x128 s5", {"cluster": "single", "persistent": True, "schedule": "pingpong",
                                    "block_n": 128, "num_stages": 5}),
    ("single pingpong 128x128 s4", {"cluster": "single", "persistent": True, "schedule": "pingpong",
                                    "block_n": 128}),
]
# set=chunked: the cluster program's epilogue that stores 64 columns at a time through two small staging
# buffers (epilogue="chunked"), so that at 128x256 four stages fit and the persistent loop's stores overlap
# the next tile's loads: the template's lead at long K is its shared-memory epilogue (set=single_parts)
CHUNKED_PROBLEMS = SINGLE_PROBLEMS + [(dict(m=8192, n=8192, k=256, dtype="bfloat16", layout="nt"), LONG_K_TILE)]
CHUNKED = {"epilogue": "chunked"}
CHUNKED_VARIANTS = [
    ("template", {"cluster": "off"}),
    ("single persistent", {"cluster": "single", "persistent": True, **CHUNKED}),
    ("single", {"cluster": "single", **CHUNKED}),
    ("n2 persistent", {"cluster": "n2", "persistent": True, **CHUNKED}),
    ("m2 persistent", {"cluster": "m2", "persistent": True, **CHUNKED}),
    ("single pingpong 128x128 s5", {"cluster": "single", "persistent": True, "schedule": "pingpong",
                                    "block_n": 128, "num_stages": 5, **CHUNKED}),
    ("n2 pingpong 128x128 s5", {"cluster": "n2", "persistent": True, "schedule": "pingpong", "block_n": 128,
                                "num_stages": 5, **CHUNKED}),
    ("n2 pingpong 128x128 s4 smem", {"cluster": "n2", "persistent": True, "schedule": "pingpong", "block_n": 128,
                                     "panel_size": 4}),
]
SETS = {"cluster": (PROBLEMS, VARIANTS), "short_k": (SHORT_K_PROBLEMS, SHORT_K_VARIANTS),
        "long_k": (LONG_K_PROBLEMS, LONG_K_VARIANTS), "single": (SINGLE_PROBLEMS, SINGLE_VARIANTS),
        "single_parts": (PARTS_PROBLEMS, PARTS_VARIANTS), "chunked": (CHUNKED_PROBLEMS, CHUNKED_VARIANTS)}


# ``waits=tl,test``: the cluster program's stage-barrier waits rewritten in its generated CUDA (a
# probe of why its consumers starve: Nsight Compute put half its warps' samples in the sleeps of
# TileLang's Barrier::wait, a try-wait with a 10 ms suspend hint, where cuBLAS's sleeps hint 50
# us). The program spins on a try-wait with the hardware's own hint (gemm_cluster.SPIN_WAIT);
# "tl" puts TileLang's wait back, "test" spins on a test-wait, which never suspends
WAITS = {
    "test": "__device__ __forceinline__ void ts_wait(const Barrier& b, uint32_t phase) { while (!b.test_wait(phase)) {} }",
}


def rewrite_waits(code: str, wait: str) -> str:
    """``code`` (a cluster kernel's CUDA) with every stage barrier's ``.wait(phase)`` calling
    :data:`WAITS`'s ``wait`` instead; other kernels as they are."""

    if "gemm_cluster" not in code:
        return code
    stage = r"(\b(?:full|empty)\[[^\]]*\])"
    if wait == "tl":
        return re.sub(r"ts_spin_wait\(" + stage + ", ", r"\1.wait(", code)
    code = re.sub(r"ts_spin_wait\(" + stage + ", ", r"ts_wait(\1, ", code)
    kernel = code.index("__global__")
    start = code.rfind("\n", 0, kernel) + 1  # the kernel's line (its `extern "C"` with it)
    return code[:start] + WAITS[wait] + "\n\n" + code[start:]


def one_arrive(code: str) -> str:
    """The producer's stage barriers counting one arrival, the elected thread's after its loads (as
    the template's), instead of all 128 threads'."""
    code, inits = re.subn(r"(full\[\d+\]\.init\()128\)", r"\g<1>1)", code)
    code, moved = re.subn(r"\}\n(\s*)(full\[[^\]]+\]\.arrive\(\);)", r"  \2\n\1}", code)
    if not inits or moved != 1:
        raise ValueError(f"one_arrive: {inits} inits and {moved} arrives rewritten")
    return code


def release_now(code: str) -> str:
    """The consumers wait for all of a stage's MMAs and free that stage at once (as the template's
    do), instead of leaving one stage's MMAs in flight and freeing the stage before."""
    pattern = (r"tl::wait_wgmma<1>\(\);\s*if \(0 < (\w+)\) \{\s*if \(tl::tl_shuffle_elect<32>\(\)\) \{\s*"
               r"empty\[\(\(\1 \+ 3\) & 3\)\]\.arrive\(\);\s*\}\s*\}(\s*)\}\s*tl::wait_wgmma<0>\(\);\s*"
               r"if \(tl::tl_shuffle_elect<32>\(\)\) \{\s*empty\[3\]\.arrive\(\);\s*\}")
    code, n = re.subn(pattern, r"tl::wait_wgmma<0>();\n      if (tl::tl_shuffle_elect<32>()) {\n"
                      r"        empty[(\1 & 3)].arrive();\n      }\2}", code)
    if n != 1:
        raise ValueError(f"release_now: {n} loops rewritten (a 4-stage single-block kernel expected)")
    return code


REWRITES = {"tl_waits": lambda code: rewrite_waits(code, "tl"), "one_arrive": one_arrive, "release_now": release_now}


def rewrite(code: str, names: str) -> str:
    for name in names.split("+"):
        code = REWRITES[name](code)
    return code


def rewritten(op: Any, problem: Any, config: dict[str, Any], target: Any, wait: str, how: Any = None) -> Any:
    """The configuration's kernel compiled again with :func:`rewrite_waits` (or ``how``, a
    function of the code; TileLang's caches off, so that the rewritten code is what runs)."""
    import tilelang
    from tilelang.engine.callback import register_cuda_postproc

    tilelang.disable_cache()
    register_cuda_postproc(lambda code, _target: how(code) if how else rewrite_waits(code, wait))
    try:
        return op.build(problem, config, target)
    finally:
        register_cuda_postproc(lambda code, _target: code)
        tilelang.enable_cache()


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv)
    out = Path(opts.get("out") or os.environ.get("OUT") or "cluster-probe-out")
    out.mkdir(parents=True, exist_ok=True)
    n_rounds = int(opts.get("rounds", 200))
    problems, variants = SETS[opts.get("set", "cluster")]
    import tilelang  # noqa: F401  (before tvm)
    import torch

    from search_spaces import gemm
    from tilesearch.runner.measure import MeasureSettings, check, rounds
    from tilesearch.target import detect

    target = detect()
    op = gemm.GemmOp()
    # every variant compiled at once in the compile pool, into TileLang's cache the builds below read
    from tilesearch.builder import LocalBuilder
    from tilesearch.records import Candidate

    with LocalBuilder(workers=15, timeout=600) as builder:
        configs = [{**TILE, **tile, **{k: v for k, v in knobs.items() if k != "rewrite"}}
                   for prob, tile in problems for _, knobs in variants]
        probs = [prob for prob, tile in problems for _ in variants]
        futures = [builder.submit(Candidate("gemm", prob, config, target)) for prob, config in zip(probs, configs)
                   if op.space(op.problem(**prob), target).unmet(config) is None]
        for future in futures:
            future.result()
    waits = [w for w in opts.get("waits", "").split(",") if w]
    report = []
    for prob, tile in problems:
        problem = op.problem(**prob)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1)
        inputs = op.make_inputs(problem, torch.device("cuda"), gen)
        references = op.reference(problem, inputs)
        fns, labels, rows = [], [], []
        for label, knobs in variants:
            knobs = dict(knobs)
            how = knobs.pop("rewrite", None)
            config = {**TILE, **tile, **knobs}
            why = op.space(problem, target).unmet(config)
            if why:
                rows.append({"label": label, "status": "invalid", "error": why})
                continue
            try:
                if how:
                    kernel = rewritten(op, problem, config, target, "", lambda code, how=how: rewrite(code, how))
                else:
                    kernel = op.build(problem, config, target)
            except Exception as e:  # noqa: BLE001 - a variant that does not build is a row
                rows.append({"label": label, "status": "compile_error", "error": str(e)[-300:]})
                continue
            kernels = [(label, kernel)]
            if knobs.get("cluster", "off") != "off" and label in ("m2", "n2"):
                kernels += [(f"{label} wait={w}", rewritten(op, problem, config, target, w)) for w in waits]
            for label, kernel in kernels:
                outputs = op.make_outputs(problem, torch.device("cuda"))
                rel, _, bad = check(kernel, inputs, outputs, references, op.tolerance(problem, config))
                rows.append({"label": label, "config": config, "status": "wrong_result" if bad else "ok",
                             "rel_err": rel, "error": bad})
                if not bad:
                    fns.append(lambda kernel=kernel, inputs=inputs, outputs=outputs: kernel(*inputs, *outputs))
                    labels.append(label)

        fns.append(op.baseline(problem, inputs))
        labels.append("torch")
        # the runner's own interleaved rounds (warmed up, L2 flushed, the host kept ahead of the GPU
        # by a spin kernel), exactly n_rounds of them. The probe's own loop, until 2026-12-04,
        # recorded each kernel's start event right after a flush, with the host behind
        # the GPU after every round's synchronize: a kernel whose Python launch outlasts the flush
        # was probably charged the gap (the first variant of each round: at 2048x4096x4096, 0.72x
        # cuBLAS against 0.97x in the model-shape suite for the same kernel, H200, 2026-12-04)
        settings = MeasureSettings(rep_ms=0.0, min_reps=n_rounds, max_reps=n_rounds, max_ms=1e9)
        ms = rounds(fns, settings, target.l2_bytes, enough=lambda got: len(got[0]) >= n_rounds)
        base = ms[-1]
        print(f"== {prob} (template tile {tile})", flush=True)
        for label, samples in zip(labels, ms):
            ratios = sorted(b / s for b, s in zip(base, samples))
            q1, med, q3 = (ratios[int(q * (len(ratios) - 1))] for q in (0.25, 0.5, 0.75))
            row = next((r for r in rows if r["label"] == label), None)
            entry = {"label": label, "ms": statistics.median(samples), "ratio": med, "q1": q1, "q3": q3}
            if row is None:
                rows.append({**entry, "status": "ok"})
            else:
                row.update(entry)
            print(f"  {label:18s} {statistics.median(samples):.4f} ms  x torch {med:.3f} [{q1:.3f}, {q3:.3f}]", flush=True)
        for row in rows:
            if row["status"] != "ok":
                print(f"  {row['label']:18s} {row['status']}: {row['error']}", flush=True)
        report.append({"problem": prob, "tile": tile, "rows": rows})
        (out / "cluster_probe.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
