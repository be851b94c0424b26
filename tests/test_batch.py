"""Device code of many configurations compiled in one compiler run (tilesearch.builder.batch)."""

import pytest

from tilesearch.builder import LocalBuilder, batch
from tilesearch.records import Candidate
from tilesearch.target import Target
from tilesearch.testing.faulty import FAULTY_OP

H100 = Target.from_arch("sm_90a")
BASE = dict(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=8, warp_policy="square")

CODE = """#include <tl_templates/cuda/common.h>
#ifdef ENABLE_BF16
#include <tl_templates/cuda/cuda_bf16_fallbacks.cuh>
#endif

extern "C" __global__ void main_kernel(float* x);
extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(float* x) {
#pragma unroll
  x[threadIdx.x] = 1.0f;
}
"""

PTX = """.version 9.0
.target sm_90a
.address_size 64

\t// .globl\tmain_kernel__tsb0
.extern .shared .align 16 .b8 _ZN4tsb013buf_dyn_shmemE[];
.func _ZN4tsb06helperEv
(
)
{
\tret;
}
.func _ZN5tsb106helperEv
(
)
{
\tret;
}
.visible .entry main_kernel__tsb0(
\t.param .u64 main_kernel__tsb0_param_0
)
.maxntid 128, 1, 1
{
\tcall _ZN4tsb06helperEv;
\tret;
}
.visible .entry main_kernel__tsb10(
\t.param .u64 main_kernel__tsb10_param_0
)
{
\tret;
}
"""


def test_a_code_splits_into_its_includes_and_its_kernels():
    prefix, body = batch.split(CODE)
    assert prefix.endswith("#endif\n\n") and body.startswith('extern "C" __global__ void main_kernel(float* x);')
    assert "#pragma unroll" in body and prefix + body == CODE


def test_a_body_keeps_its_own_entries_and_functions_under_their_names():
    blocks = batch.ptx_blocks(PTX)
    assert "".join(blocks) == PTX
    mine = batch.own_module(blocks, 0, ["main_kernel"])
    assert ".visible .entry main_kernel(" in mine and "main_kernel_param_0" in mine
    assert "_ZN4tsb06helperEv" in mine and "_ZN5tsb106helperEv" not in mine and "tsb10" not in mine
    theirs = batch.own_module(blocks, 10, ["main_kernel"])
    assert ".entry main_kernel(" in theirs and "_ZN4tsb06helperEv" not in theirs and "maxntid" not in theirs


@pytest.mark.nvcc
def test_kernels_compiled_together_are_the_ones_nvcc_makes_of_each_alone(tmp_path, monkeypatch):
    # the claim that makes batches safe: the same cubins (but debug line tables and notes),
    # across tile shapes, a split-K pair of kernels, dtypes and layouts
    from tilelang.cuda import backend

    from search_spaces.gemm import GemmOp

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # every build asks for its device code

    op = GemmOp()
    builds = [(op.problem(m=1024, n=1024, k=1024), BASE),
              (op.problem(m=1024, n=1024, k=1024), dict(BASE, block_n=256, threads=256, num_stages=2)),
              (op.problem(m=512, n=1024, k=4096), dict(BASE, split_k=2)),
              (op.problem(m=1000, n=3000, k=500, dtype="bfloat16", layout="nt"), dict(BASE, block_k=64)),
              (op.problem(m=4096, n=1024, k=256, dtype="bfloat16", layout="nt"), dict(BASE, block_m=64)),
              (op.problem(m=1000, n=3000, k=500, layout="nt"), dict(BASE, num_stages=2)),
              (op.problem(m=8192, n=8192, k=8192), dict(BASE, block_k=128)),
              (op.problem(m=8192, n=8192, k=8192), dict(BASE, tma=False, warp_specialize="off"))]
    seen = []

    def compile_together(codes):
        seen.append((codes, *batch_compile_together(codes)))
        return seen[-1][1:]

    batch_compile_together = batch.compile_together
    monkeypatch.setattr(batch, "compile_together", compile_together)
    outcomes = batch.compile_batch([lambda p=p, c=c: op.build(p, c, H100) for p, c in builds])
    assert [error for _, _, error in outcomes] == [None] * len(builds)
    ((codes, together, spent),) = seen
    assert len(codes) == len(builds)
    assert len({batch.split(code)[0] for code, _, _ in codes}) > 1  # includes of their own
    assert all(cubin is not None for cubin in together) and spent > 0
    assert batch.code_sections(together[0]) != batch.code_sections(together[1])  # the comparison can tell
    for (code, target, pass_config), cubin in zip(codes, together):
        if cubin is None:
            continue
        alone = bytes(backend.tilelang_callback_cuda_compile(code, target, pass_config))
        assert any(name.startswith(".text.") for name in batch.code_sections(alone))
        assert batch.code_sections(cubin) == batch.code_sections(alone)


@pytest.mark.nvcc
def test_a_queue_compiles_in_batches_and_a_failure_stays_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILESEARCH_COMPILER", "nvcc")  # batches are nvcc's: NVRTC keeps the headers parsed instead
    good = [Candidate("faulty", {"n": 1 << 12}, {"fault": "none", "block": b, "threads": 128}, H100, FAULTY_OP)
            for b in (128, 256, 512)]
    bad = Candidate("faulty", {"n": 1 << 12}, {"fault": "compile_error", "block": 256, "threads": 128}, H100, FAULTY_OP)
    calls = []
    with LocalBuilder(workers=1, timeout=600) as builder:
        real = builder._together
        monkeypatch.setattr(builder, "_together", lambda w, cs: calls.append(len(cs)) or real(w, cs))
        results = [f.result() for f in [builder.submit(c) for c in [*good, bad]]]
    assert calls and sum(calls) >= 3  # one worker, four waiting: taken together
    assert [r.ok for r in results] == [True, True, True, False]
    assert "error" in results[-1].error.lower() and all(r.compile_s > 0 for r in results[:3])
    assert all(0 < r.tools_s for r in results[:3])
