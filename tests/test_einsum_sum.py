"""The einsum_sum operator: its space, its math on CPU, lowering for sm_90a, and (on a GPU) every
algorithm against float64 and against the PyTorch expression's own error."""

import pytest
import torch

from search_spaces import einsum_sum as es
from tilesearch import registry
from tilesearch.op import ProblemError
from tilesearch.target import Target

SM90 = Target.from_arch("sm_90a")
PROBLEMS = [
    dict(t=8192, k=8192, h=16, d=128),
    dict(t=1024, k=1024, h=16, d=128),
    dict(t=1000, k=3000, h=12, d=72),
    dict(t=1, k=1, h=1, d=1),
    dict(t=77, k=5, h=3, d=300),
]
# sizes that are multiples of no tile (and a degenerate one), for the GPU checks
ODD_PROBLEMS = [
    dict(t=1, k=1, h=1, d=1),
    dict(t=1000, k=3000, h=12, d=72),
    dict(t=130, k=67, h=5, d=40),
    dict(t=1000, k=3001, h=3, d=71),  # unaligned rows of K and S: no TMA for them
]


@pytest.fixture(scope="module")
def op():
    return registry.load("einsum_sum")


def effective(config):
    """The knobs that change the kernel of ``config``."""
    return (config["algorithm"], *sorted((k, config[k]) for k in es.USES[config["algorithm"]]))


def test_registered_and_cli_parameters(op):
    assert isinstance(op, es.EinsumSumOp)
    problem = op.problem(t="8192", k="8192", h="16", d="128", dtype="bfloat16")
    assert problem.key == "t=8192,k=8192,h=16,d=128,dtype=bfloat16,out_dtype=float32"
    assert op.problem(t=3, k=4, h=5, d=6, dtype="float16", out_dtype="float16")["out_dtype"] == "float16"


@pytest.mark.parametrize("bad", [dict(t=0), dict(d=-1), dict(dtype="float32"), dict(out_dtype="int8")])
def test_bad_parameters(op, bad):
    with pytest.raises(ProblemError):
        op.problem(**{**dict(t=8, k=8, h=2, d=16), **bad})


def test_16bit_output_must_be_the_input_dtype(op):
    # a bfloat16 output of float16 inputs would be less accurate than the PyTorch expression
    with pytest.raises(ProblemError, match="fewer bits"):
        op.problem(t=8, k=8, h=2, d=16, dtype="float16", out_dtype="bfloat16")


@pytest.mark.parametrize("params", PROBLEMS, ids=lambda p: "x".join(map(str, p.values())))
def test_space_has_no_duplicate_kernels(op, params):
    space = op.space(op.problem(**params), SM90)
    keys = [effective(c) for c in space.enumerate()]
    assert len(keys) == len(set(keys))
    # pinning loses nothing: every kernel that the other constraints allow is there
    others = [check for check in space.constraints if check.__name__ != "irrelevant"]
    allowed = {
        effective(c)
        for c in space.enumerate(valid_only=False)
        if not any(check(c) for check in others)
    }
    assert set(keys) == allowed


@pytest.mark.parametrize("params", PROBLEMS[:4], ids=lambda p: "x".join(map(str, p.values())))
def test_every_algorithm_has_kernels(op, params):
    space = op.space(op.problem(**params), SM90)
    aligned = params["d"] % 8 == 0 and params["k"] % 4 == 0  # reduce_cluster's TMA loads of K and stores of S
    offered = set(es.ALGORITHMS) - (set() if es.SEARCH_REDUCE_CLUSTER and aligned else {"reduce_cluster"})
    assert {c["algorithm"] for c in space.enumerate()} == offered


def test_constraint_reasons(op):
    space = op.space(op.problem(t=8192, k=8192, h=16, d=128), SM90)
    base = dict(
        algorithm="direct", block_t=128, block_k=128, block_d=128, num_stages=2, threads=256, k_split=1, epilogue="fragment",
        q_stages=2, store_buffers=2,
    )
    assert space.why_invalid(base) is None
    assert space.why_invalid({**base, "k_split": 2}).startswith("irrelevant for algorithm direct: k_split")
    fused = {**base, "algorithm": "fused", "block_d": 32, "k_split": 4}
    assert space.why_invalid(fused) is None
    assert space.why_invalid({**fused, "block_d": 64}).startswith("irrelevant for algorithm fused: block_d")
    assert space.why_invalid({**fused, "block_t": 256, "block_k": 256, "num_stages": 4}).startswith("shared memory")
    assert space.why_invalid({**base, "block_t": 256, "block_k": 256, "threads": 128}).startswith("registers")
    wide = op.space(op.problem(t=64, k=64, h=2, d=512), SM90)
    assert "sums of Q per thread" in wide.why_invalid({**fused, "k_split": 1, "block_t": 64, "block_k": 64, "threads": 128, "num_stages": 1})
    assert space.why_invalid({**fused, "epilogue": "async", "block_t": 64}) is None
    assert space.why_invalid({**base, "epilogue": "async"}).startswith("epilogue: async needs a loop")
    unaligned = op.space(op.problem(t=64, k=1001, h=2, d=64), SM90)
    assert unaligned.why_invalid({**fused, "epilogue": "async", "k_split": 1, "block_t": 64}).startswith(
        "epilogue: async stores by TMA"
    )
    assert space.why_invalid({**base, "q_stages": 3}).startswith("irrelevant for algorithm direct: q_stages")
    assert space.why_invalid({**fused, "q_stages": 4}) is None
    assert space.why_invalid({**fused, "store_buffers": 3}).startswith("store_buffers: only the async epilogue")
    assert space.why_invalid({**fused, "epilogue": "async", "block_t": 64, "store_buffers": 4}) is None
    stream = {**fused, "algorithm": "reduce_stream", "epilogue": "async", "block_t": 64, "store_buffers": 3}
    assert space.why_invalid(stream) is None
    assert space.why_invalid({**stream, "q_stages": 3}).startswith("irrelevant for algorithm reduce_stream: q_stages")
    few_heads = op.space(op.problem(t=64, k=64, h=2, d=64), SM90)
    assert few_heads.why_invalid({**fused, "k_split": 1, "block_t": 64, "block_k": 64, "q_stages": 3}).startswith("q_stages")
    small = op.space(op.problem(t=8, k=100, h=2, d=16), SM90)
    assert small.why_invalid({**base, "block_t": 128, "block_d": 32}).startswith("block_t")
    assert small.why_invalid({**base, "block_t": 64, "block_d": 64}).startswith("block_d")
    assert small.why_invalid({**fused, "block_t": 64, "block_k": 64, "k_split": 4}).startswith("k_split")


def test_reduce_first_without_warp_specialization_when_k_rows_are_unaligned(op):
    """Regression: TileLang 0.1.15's warp-specialized reduce_first GEMM released K's tile after the
    hi product while the lo product still read it, when K's rows were not 16-byte aligned
    (relative error 6.5e-4 at t=1000, k=3001, h=3, d=71 on an H100)."""
    config = {"algorithm": "reduce_first"}
    assert op.pass_configs(op.problem(t=8, k=8, h=3, d=71), config) == {"tl.disable_warp_specialized": True}
    assert op.pass_configs(op.problem(t=8, k=8, h=3, d=72), config) == {}
    assert op.pass_configs(op.problem(t=8, k=8, h=3, d=72), {"algorithm": "fused"}) == {"tl.disable_warp_specialized": True}


@pytest.mark.parametrize("algorithm", es.ALGORITHMS)
def test_tolerance_covers_output_rounding_and_stays_below_pytorch(op, algorithm):
    config = {"algorithm": algorithm}
    big = op.tolerance(op.problem(t=8, k=8, h=16, d=128), config)
    assert 1e-5 < big.rel_fro < 4e-5  # PyTorch's bfloat16 expression: about 2.3e-3
    deep = op.tolerance(op.problem(t=8, k=8, h=64, d=256, dtype="float16"), config)
    assert deep.rel_fro < 1.5e-4  # PyTorch's float16 expression: about 2.9e-4
    bf16 = op.tolerance(op.problem(t=8, k=8, h=2, d=16, out_dtype="bfloat16"), config)
    assert bf16.rel_fro > es.UNIT_ROUNDOFF["bfloat16"]


def inputs(t, k, h, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn((t, h, d), generator=g).to(dtype)
    key = torch.randn((k, d), generator=g).to(dtype)
    return q, key


def rel_fro(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("shape", [(5, 7, 3, 4), (1, 1, 1, 1), (33, 17, 6, 72)])
def test_reference_is_the_einsum_in_float64(op, shape):
    t, k, h, d = shape
    q, key = inputs(t, k, h, d, torch.bfloat16)
    want = torch.einsum("thd,kd->thk", q.double(), key.double()).sum(dim=1)
    (got,) = op.reference(op.problem(t=t, k=k, h=h, d=d), (q, key))
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype,bound", [(torch.bfloat16, 2.0**-16), (torch.float16, 2.0**-22)])
def test_hilo_split_keeps_float32_accuracy(dtype, bound):
    x = torch.randn(4096, dtype=torch.float32) * 8
    hi, lo = es.split_hilo(x, dtype)
    assert hi.dtype == lo.dtype == dtype
    residual = (x.double() - hi.double() - lo.double()).abs()
    # plus half a subnormal step: float16's lo of a small sum can be subnormal
    subnormal = torch.finfo(dtype).tiny * torch.finfo(dtype).eps
    assert (residual <= bound * x.double().abs() + subnormal / 2).all()
    # hi alone keeps only 8 (bfloat16) or 11 (float16) bits
    assert (x.double() - hi.double()).abs().max() > 64 * residual.max()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_emulated_algorithms_within_tolerance_and_beat_pytorch(op, dtype):
    """The kernels' arithmetic emulated in torch: float32 sums over h, hi/lo split, products of
    16-bit values accumulated in float32. Both must pass the tolerance and be more accurate than
    the PyTorch expression (whose thk products are rounded to 16 bits)."""
    t, k, h, d = 256, 192, 16, 128
    q, key = inputs(t, k, h, d, getattr(torch, dtype), seed=1)
    problem = op.problem(t=t, k=k, h=h, d=d, dtype=dtype)
    (ref,) = op.reference(problem, (q, key))
    torch_err = rel_fro(es.pytorch_expression(q, key), ref)
    hi, lo = es.split_hilo(q.float().sum(dim=1), getattr(torch, dtype))
    reduce_first = hi.float() @ key.float().T + lo.float() @ key.float().T
    direct = torch.einsum("thd,kd->tk", q.float(), key.float())
    for algorithm, out in (("reduce_first", reduce_first), ("direct", direct)):
        tol = op.tolerance(problem, {"algorithm": algorithm})
        err = rel_fro(out, ref)
        assert err < tol.rel_fro
        assert err < torch_err / 10
    # the same arithmetic with hi alone would not keep float32-class accuracy
    assert rel_fro(hi.float() @ key.float().T, ref) > 20 * rel_fro(reduce_first, ref)


def test_16bit_output_emulated_beats_pytorch(op):
    t, k, h, d = 256, 192, 16, 128
    q, key = inputs(t, k, h, d, torch.bfloat16, seed=2)
    problem = op.problem(t=t, k=k, h=h, d=d, out_dtype="bfloat16")
    (ref,) = op.reference(problem, (q, key))
    hi, lo = es.split_hilo(q.float().sum(dim=1), torch.bfloat16)
    out = (hi.float() @ key.float().T + lo.float() @ key.float().T).to(torch.bfloat16)
    assert rel_fro(out, ref) < op.tolerance(problem, {"algorithm": "fused"}).rel_fro
    assert rel_fro(out, ref) < rel_fro(es.pytorch_expression(q, key), ref)


COMPILE_CASES = [
    ("direct", dict(t=1000, k=3000, h=12, d=72), dict(block_t=64, block_k=128, block_d=64, num_stages=2, threads=128)),
    ("reduce_first", dict(t=1000, k=3000, h=12, d=72), dict(block_t=128, block_k=128, block_d=64, num_stages=2, threads=256, epilogue="shared")),
    ("fused", dict(t=1000, k=3000, h=12, d=72), dict(block_t=64, block_k=128, num_stages=2, threads=128, k_split=2)),
    ("fused", dict(t=8192, k=8192, h=16, d=128, dtype="float16", out_dtype="float16"), dict(block_t=64, block_k=128, num_stages=2, threads=128, k_split=2, epilogue="async")),
    ("reduce_stream", dict(t=8192, k=8192, h=16, d=128), dict(block_t=64, block_k=64, num_stages=2, threads=128, k_split=2, epilogue="async", store_buffers=3)),
]


def full_config(algorithm, tiles):
    config = {knob.name: knob.values()[0] for knob in es.knobs()}
    return {**config, "algorithm": algorithm, **tiles}


@pytest.mark.nvcc
@pytest.mark.parametrize("algorithm,params,tiles", COMPILE_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_lowers_and_compiles_for_sm90a(op, algorithm, params, tiles):
    problem = op.problem(**params)
    config = full_config(algorithm, tiles)
    assert op.space(problem, SM90).why_invalid(config) is None
    kernel = op.build(problem, config, SM90)
    source = kernel.get_kernel_source()
    assert "wgmma" in source  # tensor cores
    if tiles.get("epilogue") in ("shared", "async") and params["k"] % 4 == 0:
        assert "tma_store" in source  # S's rows are 16-byte aligned: one bulk copy per tile
    if tiles.get("epilogue") == "async":
        # a tile's store is waited for when its buffer comes round again
        assert f"tma_store_wait<{tiles.get('store_buffers', 2) - 1}" in source
    if algorithm in es.TWO_KERNELS:
        assert len(kernel.launches) == 2 and "einsum_sum_reduce_kernel" in source


def default_configs(op, problem, epilogue=None):
    """The first valid configuration of each algorithm (with ``epilogue``, if given)."""
    found = {}
    for config in op.space(problem, SM90).enumerate():
        if epilogue is None or config["epilogue"] == epilogue:
            found.setdefault(config["algorithm"], config)
    return found


@pytest.mark.gpu
@pytest.mark.parametrize("params", ODD_PROBLEMS, ids=lambda p: "x".join(map(str, p.values())))
@pytest.mark.parametrize("epilogue", es.EPILOGUES)
@pytest.mark.parametrize("algorithm", es.ALGORITHMS)
def test_gpu_correct_on_sizes_that_are_multiples_of_no_tile(op, params, algorithm, epilogue):
    from tilesearch.runner.measure import compare
    from tilesearch.target import detect

    target = detect()
    problem = op.problem(**params)
    config = default_configs(op, problem, epilogue).get(algorithm)
    if config is None:
        pytest.skip(f"no {algorithm} kernel with epilogue {epilogue} for this size")
    kernel = op.build(problem, config, target)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, key = op.make_inputs(problem, "cuda", g)
    (s,) = op.make_outputs(problem, "cuda")
    s.fill_(float("nan"))
    kernel(q, key, s)
    (ref,) = op.reference(problem, (q, key))
    err, max_err, why = compare([s], [ref], op.tolerance(problem, config))
    assert why is None, why
    if params["t"] * params["k"] >= 4096:  # enough elements for a stable error statistic
        torch_err, _, _ = compare([es.pytorch_expression(q, key)], [ref], op.tolerance(problem, config))
        assert err < torch_err


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["bfloat16"])
@pytest.mark.parametrize("algorithm", es.ALGORITHMS)
def test_gpu_16bit_output_at_least_as_accurate_as_pytorch(op, algorithm, out_dtype):
    from tilesearch.runner.measure import compare
    from tilesearch.target import detect

    problem = op.problem(t=1000, k=3000, h=12, d=72, out_dtype=out_dtype)
    config = default_configs(op, problem)[algorithm]
    kernel = op.build(problem, config, detect())
    g = torch.Generator(device="cuda").manual_seed(1)
    q, key = op.make_inputs(problem, "cuda", g)
    (s,) = op.make_outputs(problem, "cuda")
    kernel(q, key, s)
    (ref,) = op.reference(problem, (q, key))
    tol = op.tolerance(problem, config)
    err, _, why = compare([s], [ref], tol)
    assert why is None, why
    torch_err, _, _ = compare([es.pytorch_expression(q, key)], [ref], tol)
    assert err <= torch_err


@pytest.mark.gpu
def test_gpu_tune_measures_every_algorithm_through_the_runner(tmp_path):
    from tilesearch.space import Space
    from tilesearch.tuner import tune

    op = registry.load("einsum_sum")
    problem = op.problem(t=300, k=500, h=4, d=64)
    picks = list(default_configs(op, problem).values())
    full = op.space(problem, SM90)
    space = Space(full.knobs, [*full.constraints, lambda c: None if c in picks else "not picked"])
    result = tune(op, problem, space=space, strategy="grid", trials=len(picks), progress=False, build_workers=2)
    assert result.statuses.get("ok") == len(picks), result.statuses
    assert all(r.speedup and r.speedup > 0 for r in result.best)
