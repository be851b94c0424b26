"""GEMM on a real GPU: correctness for awkward shapes, both layouts and dtypes; tuning end to end."""

import pytest

from tilesearch.builder import LocalBuilder
from tilesearch.records import Candidate, Status
from tilesearch.runner import LocalRunner
from tilesearch.space import Categorical, Space
from tilesearch.tuner import tune

pytestmark = pytest.mark.gpu

SHAPES = [(1000, 3000, 500), (1, 4096, 4096), (4097, 4095, 129), (17, 33, 65)]
CONFIGS = [
    dict(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=8, warp_policy="square"),
    dict(block_m=64, block_n=256, block_k=64, num_stages=4, threads=256, panel_size=0, warp_policy="full_col"),
]


def test_gemm_is_correct_for_awkward_shapes_layouts_and_dtypes():
    runner = LocalRunner(timeout=120)
    target = runner.start()
    candidates = [
        Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), config, target)
        for (m, n, k) in SHAPES
        for dtype in ("float16", "bfloat16")
        for layout in ("nn", "nt")
        for config in CONFIGS
    ]
    failures = []
    with LocalBuilder(timeout=600) as builder:
        futures = [builder.submit(c) for c in candidates]
        for future in futures:
            build = future.result()
            assert build.ok, build.error
            result = runner.run(build.candidate)
            if result.status != Status.OK:
                failures.append((build.candidate.problem, build.candidate.config, result.status, result.error))
            else:
                assert result.rel_err < 2e-2 and result.latency_ms > 0 and result.baseline_ms > 0
    runner.close()
    assert not failures, failures


KNOB_BASE = dict(block_m=128, block_n=128, block_k=64, num_stages=3, threads=256, panel_size=8, warp_policy="square")
KNOB_CONFIGS = [  # one per knob beyond the tile shape, on shapes the constraints would not always allow
    dict(KNOB_BASE, split_k=4),
    dict(KNOB_BASE, persistent=True, epilogue="smem"),
    dict(KNOB_BASE, tma=False, warp_specialize="off", epilogue="smem"),
    dict(KNOB_BASE, block_n=256, warp_specialize="role_based"),
    dict(KNOB_BASE, warp_specialize="off", epilogue="smem"),
    dict(KNOB_BASE, raster="column"),
    dict(KNOB_BASE, persistent=True, raster="column"),
]


def test_new_knobs_are_correct_for_awkward_shapes_layouts_and_dtypes():
    runner = LocalRunner(timeout=120)
    target = runner.start()
    candidates = [
        Candidate("gemm", dict(m=m, n=n, k=k, dtype=dtype, layout=layout), config, target)
        for (m, n, k) in SHAPES + [(4100, 4000, 1032)]
        for dtype in ("float16", "bfloat16")
        for layout in ("nn", "nt")
        for config in KNOB_CONFIGS
    ]
    failures = []
    with LocalBuilder(timeout=600) as builder:
        for future in [builder.submit(c) for c in candidates]:
            build = future.result()
            result = runner.run(build.candidate) if build.ok else None
            if result is None or result.status != Status.OK:
                failures.append((build.candidate.problem, build.candidate.config, build.error or result.error))
    runner.close()
    assert not failures, failures


def test_split_k_rewrites_its_output_and_workspace_on_every_call():
    import torch

    from search_spaces.gemm import GemmOp
    from tilesearch.target import detect

    op = GemmOp()
    problem = op.problem(m=256, n=512, k=8192)
    kernel = op.build(problem, dict(KNOB_BASE, split_k=4), detect())
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = op.make_outputs(problem, "cuda")[0]
    for _ in range(2):
        a, b = op.make_inputs(problem, "cuda", gen)
        out.fill_(float("nan"))
        kernel(a, b, out)
        ref = a.double() @ b.double()
        assert ((out.double() - ref).norm() / ref.norm()).item() < 2e-3


def test_tune_small_gemm_end_to_end(tmp_path):
    storage = f"sqlite:///{tmp_path / 'gpu.db'}"
    space = Space(
        [
            Categorical("block_m", (64, 128)),
            Categorical("block_n", (128,)),
            Categorical("block_k", (32, 64)),
            Categorical("num_stages", (2, 3)),
            Categorical("threads", (128,)),
            Categorical("panel_size", (0, 8)),
            Categorical("warp_policy", ("square",)),
        ]
    )
    result = tune("gemm", {"m": 2048, "n": 2048, "k": 2048}, space=space, strategy="grid", trials=16,
                  storage=storage, progress=False)
    assert result.statuses == {"ok": 16}
    best = result.best[0]
    assert best.tflops > 50 and best.speedup > 0.3
    again = tune("gemm", {"m": 2048, "n": 2048, "k": 2048}, space=space, strategy="grid", trials=16,
                 storage=storage, progress=False)
    assert again.measured_now == 0


def test_placements_are_copies_at_other_addresses_that_a_round_cycles_through():
    torch = pytest.importorskip("torch")
    from tilesearch.runner.measure import Placements

    a = torch.randn(256, 256, device="cuda")
    placed = Placements((a, 7), seed=3, count=4)
    assert len(placed.inputs) == 4 and all(own[1] == 7 for own in placed.inputs)
    assert len({own[0].data_ptr() for own in placed.inputs}) == 4
    assert all(torch.equal(own[0], a) for own in placed.inputs)
    seen = []
    kernel = placed.cycle(lambda own: lambda: seen.append(own[0].data_ptr()))
    baseline = placed.cycle(lambda own: lambda: seen.append(-own[0].data_ptr()))
    for _ in range(8):  # rounds: the kernel, then the baseline, on the same copy
        kernel()
        baseline()
    pairs = list(zip(seen[::2], seen[1::2]))
    assert all(k == -b for k, b in pairs) and [k for k, _ in pairs[:4]] == [own[0].data_ptr() for own in placed.inputs]


def test_edge_tiles_shifted_inside_the_tensor_compute_what_clipped_tiles_do():
    # the tile at M's and N's edge starts a tile before the edge (tile_start) and writes some of
    # its neighbour's rows again; with M at run time, on both sides of tile-row boundaries
    import tilelang
    import tilelang.language as T
    import torch

    from search_spaces.gemm import GemmOp, gemm_program
    from tilesearch.target import detect

    op, target = GemmOp(), detect()
    config = dict(block_m=256, block_n=128, block_k=64, num_stages=4, threads=256, panel_size=16,
                  warp_policy="full_row", epilogue="smem", split_k=1, persistent=False, tma=True, swap_ab=False,
                  raster="row", warp_specialize="on")
    problem = op.problem(m=784, n=4000, k=1032, dtype="bfloat16", layout="nt")
    shifted = op.build(problem, config, target, runtime=("m",))
    knobs = {k: v for k, v in config.items() if k != "warp_specialize"}
    clipped = tilelang.compile(gemm_program(T.dynamic("m"), 4000, 1032, "bfloat16", "nt", **knobs,
                                            num_sms=target.num_sms, shift_edges=False), target=target.tvm())
    gen = torch.Generator(device="cuda").manual_seed(0)
    for m in (100, 255, 257, 784, 999, 1024, 1300):
        a = torch.randn(m, 1032, device="cuda", generator=gen).bfloat16()
        b = torch.randn(4000, 1032, device="cuda", generator=gen).bfloat16()
        out, ref_out = (torch.full((m, 4000), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(2))
        shifted(a, b, out)
        clipped(a, b, ref_out)
        ref = a.double() @ b.double().T
        assert ((out.double() - ref).norm() / ref.norm()).item() < 2e-3, m
        assert torch.equal(out, ref_out), m
