"""The loaded-kernel callable without a GPU: argument checks and the custom op's shape inference."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tilesearch.deploy import BadTensorError
from tilesearch.deploy.artifact import ArtifactError, TensorSpec, content_hash
from tilesearch.deploy.kernel import Kernel
from tilesearch.deploy.torch_op import lookup
from tilesearch.testing.artifacts import gemm_metadata

M, N, K = 256, 192, 128


def _kernel(**kwargs):
    meta = gemm_metadata(m=M, n=N, k=K, **kwargs)
    from dataclasses import replace

    return Kernel(replace(meta, content_hash=content_hash(meta)), launch=None)


@pytest.fixture(scope="module")
def kernel():
    return _kernel()


def meta(*shape, dtype=torch.float16):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_meta_tensors_give_output_shape_and_dtype(kernel):
    out = kernel(meta(M, K), meta(K, N))
    assert out.shape == (M, N) and out.dtype == torch.float16 and out.is_meta


def test_registered_as_torch_op(kernel):
    assert kernel.op is torch.ops.tilesearch.gemm
    assert lookup(kernel.id) is kernel
    out = torch.ops.tilesearch.gemm(meta(M, K), meta(K, N), kernel.id)
    assert out.shape == (M, N)


def test_fake_cuda_tensors_without_a_gpu(kernel):
    with FakeTensorMode():
        a = torch.empty(M, K, dtype=torch.float16, device="cuda")
        b = torch.empty(K, N, dtype=torch.float16, device="cuda")
        out = torch.ops.tilesearch.gemm(a, b, kernel.id)
    assert out.shape == (M, N) and out.device.type == "cuda"


class Model(torch.nn.Module):
    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel
        self.weight = torch.nn.Parameter(meta(K, N), requires_grad=False)

    def forward(self, x):
        return torch.relu(self.kernel(x, self.weight)) * 2


def test_torch_compile_fullgraph_traces_the_op(kernel):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    model = torch.compile(Model(kernel), fullgraph=True, backend=backend)
    out = model(meta(M, K))
    assert out.shape == (M, N)
    assert len(graphs) == 1
    targets = [node.target for node in graphs[0].graph.nodes if node.op == "call_function"]
    assert torch.ops.tilesearch.gemm in targets


def test_torch_compile_reports_wrong_dtype(kernel):
    model = torch.compile(Model(kernel), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="dtype torch.float32"):
        model(meta(M, K, dtype=torch.float32))


def test_opcheck(kernel):
    torch.library.opcheck(kernel.op.default, (meta(M, K), meta(K, N), kernel.id))
    torch.library.opcheck(kernel.op_out.default, (meta(M, K), meta(K, N), kernel.id, meta(M, N)))


def test_out_variant_on_meta(kernel):
    c = meta(M, N)
    assert kernel(meta(M, K), meta(K, N), out=c) is c
    with pytest.raises(BadTensorError, match="output C has shape"):
        kernel(meta(M, K), meta(K, N), out=meta(M, K))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((meta(M, K),), "takes 2 input tensors \\(A, B\\), got 1"),
        ((meta(M, K), 3), "input B must be a torch.Tensor, got int"),
        ((meta(M + 1, K), meta(K, N)), "input A has shape \\(257, 128\\); .* tuned for \\(256, 128\\)"),
        ((meta(M, K), meta(K, N, dtype=torch.bfloat16)), "input B has dtype torch.bfloat16"),
        ((meta(K, M).t(), meta(K, N)), "input A is not contiguous"),
    ],
)
def test_bad_arguments_are_named(kernel, args, message):
    with pytest.raises(BadTensorError, match=message):
        kernel(*args)


def test_cpu_tensors_are_refused(kernel):
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    with pytest.raises(BadTensorError, match="input A is on cpu; the kernel runs on CUDA"):
        kernel(a, b)
    with pytest.raises(BadTensorError, match="on cpu"):
        torch.ops.tilesearch.gemm(a, b, kernel.id)


def test_mixed_devices_are_refused(kernel):
    with pytest.raises(BadTensorError, match="input B is on cpu, the first input on meta"):
        kernel.check((meta(M, K), torch.empty(K, N, dtype=torch.float16)), None, fake=True)


def test_unknown_kernel_id():
    with pytest.raises(ArtifactError, match="not loaded in this process"):
        torch.ops.tilesearch.gemm(meta(M, K), meta(K, N), "gemm-0000000000000000")


def test_same_op_with_other_arguments_is_refused():
    from dataclasses import replace

    odd = replace(gemm_metadata(), inputs=(TensorSpec("X", (M, K), "float16"),), content_hash="f" * 64)
    _kernel()  # makes sure gemm is registered with (A, B)
    with pytest.raises(ArtifactError, match="already registered"):
        Kernel(odd, launch=None)
