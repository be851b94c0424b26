"""Composite programs (several kernels, workspaces) through export and load.

Without a GPU: the :class:`Composite` callable's bookkeeping on CPU tensors, and (marked nvcc)
real exports of a split-K GEMM and of einsum-sum's ``reduce_first`` for sm_90a, opened again
without compiling. On a Hopper GPU: the loaded programs equal the tuned ones, in eager mode,
under ``torch.compile`` and in a CUDA graph.
"""

import pytest
import torch

from tilesearch import registry
from tilesearch.composite import Composite, Dim, Launch, Workspace
from tilesearch.deploy import export, load
from tilesearch.deploy.artifact import LIBRARY, read
from tilesearch.space import Categorical, Space
from tilesearch.target import Target
from tilesearch.testing.deployed import matches_tuned
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.tuner import tune

SM90 = Target.from_arch("sm_90a", gpu="synthetic")


class Recorder:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __call__(self, *tensors):
        self.log.append((self.name, tensors))

    def get_kernel_source(self):
        return f"// {self.name}\n"


def test_composite_runs_launches_in_order_with_one_workspace_per_device():
    log = []
    program = Composite(
        [Launch(Recorder(log, "first"), ("Q", "Hi")), Launch(Recorder(log, "second"), ("Hi", "K", "S"))],
        inputs=("Q", "K"), outputs=("S",), workspaces=[Workspace("Hi", (4, 8), "bfloat16")],
    )
    q, k, s = torch.ones(2), torch.ones(3), torch.zeros(4)
    program(q, k, s)
    program(q, k, s)
    (n1, (q1, hi1)), (n2, (hi2, k2, s2)), (_, (_, hi3)), _ = log
    assert (n1, n2) == ("first", "second") and q1 is q and k2 is k and s2 is s
    assert hi1 is not hi2 or hi1.data_ptr() == hi2.data_ptr()
    assert hi1.data_ptr() == hi3.data_ptr() and hi1.shape == (4, 8) and hi1.dtype == torch.bfloat16
    assert program.get_kernel_source() == "// first\n\n// second\n"


def test_run_time_workspace_grows_once_and_is_a_contiguous_view():
    log = []
    program = Composite([Launch(Recorder(log, "gemm"), ("A", "W", "C"))], inputs=("A",), outputs=("C",),
                        workspaces=[Workspace("W", (2, Dim("m", 64), 16), "float32")], sizes={"m": ("A", 0)})
    for m in (100, 10, 300, 200):
        program(torch.ones(m, 3), torch.zeros(m, 16))
    shapes = [call[1][1].shape for call in log]
    assert shapes == [(2, 128, 16), (2, 64, 16), (2, 320, 16), (2, 256, 16)]
    pointers = [call[1][1].data_ptr() for call in log]
    assert pointers[0] == pointers[1] and pointers[2] == pointers[3]  # grown once, for m=300
    assert all(call[1][1].is_contiguous() for call in log)


def test_composite_refuses_unknown_argument_names():
    with pytest.raises(ValueError, match="'W', which is no input, output or workspace"):
        Composite([Launch(Recorder([], "x"), ("A", "W"))], inputs=("A",), outputs=())


def test_composite_counts_its_tensors():
    program = Composite([Launch(Recorder([], "x"), ("A", "C"))], inputs=("A",), outputs=("C",))
    with pytest.raises(TypeError, match="takes 2 tensors \\(A, C\\), got 1"):
        program(torch.ones(1))


# --- with nvcc: split-K GEMM and reduce_first einsum-sum, exported and opened again ---------------

SPLIT_K = {"block_m": 64, "block_n": 128, "block_k": 64, "num_stages": 3, "threads": 128, "panel_size": 0,
           "warp_policy": "square", "split_k": 4}
SPLIT_K_PROBLEM = {"m": 16, "n": 1024, "k": 4096, "dtype": "bfloat16", "layout": "nt"}


def one_config_study(storage, op, problem, config):
    """A synthetic study whose only (and so best) trial is ``config``."""
    space = Space([Categorical(k, (v,)) for k, v in config.items()])
    return tune(op, problem, runner=SyntheticRunner(lambda c: 1.0, SM90), storage=storage, space=space,
                strategy="grid", trials=1, progress=False)


def reduce_first_config(problem):
    op = registry.load("einsum_sum")
    return next(c for c in op.space(op.problem(**problem), SM90).enumerate() if c["algorithm"] == "reduce_first")


EINSUM_PROBLEM = {"t": 256, "k": 512, "h": 4, "d": 64}


@pytest.fixture(scope="module")
def composites(tmp_path_factory):
    root = tmp_path_factory.mktemp("composite")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_CACHE_DIR", str(root / "tilelang-cache"))
        storage = f"sqlite:///{root / 'db.sqlite'}"
        one_config_study(storage, "gemm", SPLIT_K_PROBLEM, SPLIT_K)
        config = reduce_first_config(EINSUM_PROBLEM)
        one_config_study(storage, "einsum_sum", EINSUM_PROBLEM, config)
        split = export("gemm", out=root / "split_k", storage=storage, arch="sm_90a", **SPLIT_K_PROBLEM)
        reduce = export("einsum_sum", out=root / "reduce_first", storage=storage, arch="sm_90a", **EINSUM_PROBLEM)
    return root, storage, split, reduce, config


@pytest.mark.nvcc
def test_split_k_exports_its_workspace_and_one_library(composites):
    root, _, meta, _, _ = composites
    assert meta.config == SPLIT_K and read(root / "split_k") == meta
    assert [(launch.library, launch.args) for launch in meta.launches] == [(LIBRARY, ("A", "B", "W", "C"))]
    assert [(w.name, w.shape, w.dtype) for w in meta.workspaces] == [("W", (4, 64, 1024), "float32")]
    assert [t.name for t in meta.inputs] == ["A", "B"] and [t.name for t in meta.outputs] == ["C"]


@pytest.mark.nvcc
def test_reduce_first_exports_two_libraries_and_its_hi_lo_workspaces(composites):
    root, _, _, meta, config = composites
    assert meta.config == config and meta.files.keys() >= {"kernel.so", "kernel-1.so", "kernel.cu"}
    assert [(launch.library, launch.args) for launch in meta.launches] == [
        ("kernel.so", ("Q", "Hi", "Lo")), ("kernel-1.so", ("Hi", "Lo", "K", "S"))]
    assert [w.name for w in meta.workspaces] == ["Hi", "Lo"]
    assert [(t.name, t.shape) for t in meta.inputs] == [("Q", (256, 4, 64)), ("K", (512, 64))]


@pytest.mark.nvcc
def test_composites_load_without_compiling_and_infer_shapes(composites, monkeypatch):
    root = composites[0]
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "empty-cache"))
    gemm = load(root / "split_k", arch="sm_90a")
    assert len(gemm._launch.launches) == 1 and gemm._launch.workspaces.specs[0].shape == (4, 64, 1024)
    a = torch.empty(16, 4096, dtype=torch.bfloat16, device="meta")
    b = torch.empty(1024, 4096, dtype=torch.bfloat16, device="meta")
    assert gemm(a, b).shape == (16, 1024)
    einsum = load(root / "reduce_first", arch="sm_90a")
    assert len(einsum._launch.launches) == 2
    q = torch.empty(256, 4, 64, dtype=torch.bfloat16, device="meta")
    k = torch.empty(512, 64, dtype=torch.bfloat16, device="meta")
    traced = torch.compile(lambda x, y: einsum(x, y) * 2, fullgraph=True, backend="eager")(q, k)
    assert traced.shape == (256, 512) and traced.dtype == torch.float32
    assert not (root / "empty-cache").exists()


# --- on a Hopper GPU ----------------------------------------------------------------------------


def _hopper():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the test artifacts are compiled for sm_90a")


@pytest.mark.gpu
@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["split_k", "reduce_first"])
def test_gpu_loaded_composite_equals_the_tuned_program(composites, name):
    _hopper()
    root, _, split, reduce, _ = composites
    meta = split if name == "split_k" else reduce
    op = registry.load(meta.op)
    found = matches_tuned(op, op.problem(**meta.params), load(root / name), meta.config, Target.from_arch("sm_90a"))
    assert found["eager"] and found["compile"] and found["graph"], found


def test_format_1_artifacts_still_read_as_one_launch(tmp_path):
    """An artifact exported before composites (format 1: no launches, workspaces or sizes)."""
    import hashlib
    import json

    from tilesearch.deploy.artifact import METADATA, SOURCE, file_digest
    from tilesearch.testing.artifacts import gemm_metadata

    (tmp_path / LIBRARY).write_bytes(b"placeholder")
    (tmp_path / SOURCE).write_text("// placeholder\n")
    data = gemm_metadata().to_dict()
    for key in ("launches", "workspaces", "sizes"):
        del data[key]
    data.update(format="tilesearch-kernel/1", files={n: file_digest(tmp_path / n) for n in (LIBRARY, SOURCE)})
    data.pop("content_hash")
    data["content_hash"] = hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    (tmp_path / METADATA).write_text(json.dumps(data))
    meta = read(tmp_path)
    [launch] = meta.launch_list
    assert (launch.library, launch.entry, launch.args) == (LIBRARY, "gemm", ("A", "B", "C"))
    assert meta.workspaces == () and meta.sizes == {}
