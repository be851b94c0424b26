"""The peers an experiment can name: other ways of computing the op, timed beside our kernels.

Each maker follows :class:`tilesearch.runner.peer.Peer`'s contract,
``make(op, problem, inputs, target, **options) -> callable``, and runs inside the measuring
worker. Triton and TileLang's autotuner exist only on the GPU host, so they are imported inside
the makers: naming a peer on a machine without its library gives that peer a ``runtime_error``
result, not an import error here.
"""

from __future__ import annotations

from typing import Any

from tilesearch.experiment.config import ExperimentError
from tilesearch.runner.peer import Peer

PEERS: dict[str, Peer] = {
    "torch": Peer("torch", "tilesearch.experiment.peers:torch_baseline", gated=False),
    "triton": Peer("triton autotune", "tilesearch.experiment.peers:triton_gemm"),
    "tilelang": Peer("tilelang autotune", "tilesearch.experiment.peers:tilelang_gemm"),
    "copy": Peer("copy", "tilesearch.experiment.peers:copy_outputs", checked=False),
    "memset": Peer("memset", "tilesearch.experiment.peers:memset_outputs", checked=False),
}


def resolve(peer: str | Peer) -> Peer:
    """A registered peer by name (or the record itself); :class:`ExperimentError` names the
    registered ones otherwise."""
    if isinstance(peer, Peer):
        return peer
    if peer not in PEERS:
        raise ExperimentError(f"unknown peer {peer!r}; use one of {', '.join(sorted(PEERS))} or a Peer record")
    return PEERS[peer]


def torch_baseline(op: Any, problem: Any, inputs: Any, target: Any) -> Any:
    """The op's own PyTorch baseline as a peer: a row of its own in the table, with its interval."""
    fn = op.baseline(problem, inputs)
    if fn is None:
        raise ExperimentError(f"{op.name} has no PyTorch baseline")
    return fn


def _gemm_operands(op: Any, problem: Any, inputs: Any) -> tuple[Any, Any]:
    if op.name != "gemm":
        raise ExperimentError(f"this peer computes gemm, not {op.name}")
    a, b = inputs
    return a, (b.t() if problem.to_dict().get("layout", "nn") == "nt" else b)


TRITON_CONFIGS = (  # (BM, BN, BK, stages, warps): Triton's tutorial matmul list for Hopper-class GPUs
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
    (64, 256, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 256, 128, 3, 8),
)


def triton_gemm(op: Any, problem: Any, inputs: Any, target: Any, configs: Any = TRITON_CONFIGS) -> Any:
    """A Triton matmul with ``@triton.autotune`` over ``configs``, tuned on its first call (here,
    so that the re-time's rounds time the tuned kernel)."""
    import torch
    import triton
    import triton.language as tl

    a, b = _gemm_operands(op, problem, inputs)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    listed = [triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_stages=s, num_warps=w)
              for bm, bn, bk, s, w in configs]

    @triton.autotune(configs=listed, key=["M", "N", "K"])
    @triton.jit
    def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(N, BN)
        first = pid // (G * tiles_n) * G
        rows = min(tl.cdiv(M, BM) - first, G)
        pm = first + (pid % (G * tiles_n)) % rows
        pn = (pid % (G * tiles_n)) // rows
        om, on, ok = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BK)):
            x = tl.load(a + om[:, None] * sam + (ok[None, :] + kk * BK) * sak,
                        mask=(om[:, None] < M) & (ok[None, :] + kk * BK < K), other=0.0)
            y = tl.load(b + (ok[:, None] + kk * BK) * sbk + on[None, :] * sbn,
                        mask=(ok[:, None] + kk * BK < K) & (on[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
        tl.store(c + om[:, None] * scm + on[None, :] * scn, acc.to(c.dtype.element_ty),
                 mask=(om[:, None] < M) & (on[None, :] < N))

    c = torch.empty((m, n), device=a.device, dtype=a.dtype)

    def run() -> Any:
        grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)  # noqa: E731
        mm[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        return c

    run()  # autotunes
    return run


def tilelang_gemm(op: Any, problem: Any, inputs: Any, target: Any, configs: Any = None, knobs: Any = None) -> Any:
    """TileLang's own autotuner (``tilelang.autotuner.autotune``) over ``configs`` of our GEMM
    template, or the sub-space ``knobs`` (``{knob: values}``), or else the op's whole space for
    this problem (which may be large); tuned here, with its correctness check off (the re-time
    checks what it picked)."""
    import tilelang
    from tilelang.autotuner import autotune

    a, b = inputs
    _gemm_operands(op, problem, inputs)
    p = problem.to_dict()
    m, n, k, dtype, layout = p["m"], p["n"], p["k"], p["dtype"], p.get("layout", "nn")
    if configs is None:
        from tilesearch.dataset import sweep

        space = op.space(problem, target)
        configs = list((sweep(space, knobs) if knobs else space).enumerate())

    @autotune(configs=configs, warmup=25, rep=100)
    @tilelang.jit(out_idx=[-1])
    def kernel(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=8, warp_policy="square"):
        # imported here: TileLang's autotuner refuses closures over anything but plain values
        from search_spaces.gemm import gemm_program

        return gemm_program(m, n, k, dtype, layout, block_m=block_m, block_n=block_n, block_k=block_k,
                            num_stages=num_stages, threads=threads, panel_size=panel_size, warp_policy=warp_policy)

    tuned = kernel()
    return lambda: tuned(a, b)


def pytorch_way(op: Any, problem: Any, inputs: Any, target: Any, fn: str = "") -> Any:
    """Another PyTorch way of computing the op, ``fn(problem, inputs)`` named by import path (a
    plugin's ``torch._grouped_mm`` wrapper, say); ``None`` from it means this torch lacks it."""
    from tilesearch.workers import resolve

    made = resolve(fn)(problem, inputs)
    if made is None:
        raise ExperimentError(f"{fn} is not available with this torch or these inputs")
    return made


def copy_outputs(op: Any, problem: Any, inputs: Any, target: Any) -> Any:
    """A device-to-device copy of the op's outputs' bytes: it reads and writes them once, so half
    its time is the floor of writing the outputs (unchecked: it computes nothing)."""
    import torch

    pairs = [(torch.empty_like(o).normal_() if o.is_floating_point() else torch.zeros_like(o), torch.empty_like(o))
             for o in op.make_outputs(problem, inputs[0].device)]
    return lambda: [dst.copy_(src) for src, dst in pairs]


def memset_outputs(op: Any, problem: Any, inputs: Any, target: Any) -> Any:
    """Zeroing the op's outputs: a write of their bytes (unchecked: it computes nothing)."""
    outputs = op.make_outputs(problem, inputs[0].device)
    return lambda: [o.zero_() for o in outputs]
