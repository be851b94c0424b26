"""Export and load by problem. Studies are filled by a synthetic runner (no GPU); the tests marked
nvcc compile the chosen GEMM configuration for sm_90a, once for the module."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tilesearch import registry
from tilesearch.cli import main
from tilesearch.deploy import ArtifactError, NoTrialError, best_trial, export, load
from tilesearch.deploy.artifact import LIBRARY, METADATA, SOURCE, read
from tilesearch.space import Categorical, Space
from tilesearch.target import Target
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.tuner import tune

PROBLEM = {"m": 256, "n": 256, "k": 128}
SMALL = {"block_m": 64, "block_n": 64, "block_k": 32, "num_stages": 2, "threads": 128, "panel_size": 0,
         "warp_policy": "square"}


def favour_small(config):
    """Synthetic latency, lowest for SMALL (a quick compile)."""
    return 1.0 + sum(config[k] != v for k, v in SMALL.items())


def fill(storage, latency=favour_small, arch="sm_90a", gpu="synthetic", **problem):
    """A synthetic study of two configurations: SMALL, and SMALL with panel_size=8."""
    knobs = [Categorical(k, (v, 8) if k == "panel_size" else (v,)) for k, v in SMALL.items()]
    runner = SyntheticRunner(latency, Target.from_arch(arch, gpu=gpu))
    return tune("gemm", {**PROBLEM, **problem}, runner=runner, storage=storage, space=Space(knobs),
                strategy="grid", trials=2, progress=False)


def gemm_problem(**params):
    op = registry.load("gemm")
    return op, op.problem(**{**PROBLEM, **params})


def test_no_study(tmp_path):
    op, problem = gemm_problem()
    with pytest.raises(NoTrialError, match="no study for gemm m=256,n=256,k=128.*run tilesearch tune first"):
        best_trial(op, problem, storage=f"sqlite:///{tmp_path / 'db.sqlite'}")


def test_no_correct_trial(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    fill(storage, latency=lambda config: None)
    with pytest.raises(NoTrialError, match="no correct trial"):
        export("gemm", out=tmp_path / "kernel", storage=storage, **PROBLEM)
    assert not (tmp_path / "kernel").exists()


def test_best_trial_is_the_fastest_correct_one(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = fill(storage)
    op, problem = gemm_problem()
    choice = best_trial(op, problem, storage=storage)
    assert choice.record.config == SMALL and choice.record.latency_ms == 1.0
    assert choice.study == result.study and choice.target.arch == "sm_90a"


def test_studies_of_other_gpus(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    fill(storage, arch="sm_80", gpu="synthetic-a100")
    op, problem = gemm_problem()
    with pytest.raises(NoTrialError, match="tuned only for sm_80.*not for sm_90a"):
        best_trial(op, problem, storage=storage, arch="sm_90a")
    fill(storage)
    with pytest.raises(NoTrialError, match="several GPU architectures \\(sm_80, sm_90a\\); pass arch"):
        best_trial(op, problem, storage=storage)
    assert best_trial(op, problem, storage=storage, arch="sm_90a").target.gpu == "synthetic"
    assert best_trial(op, problem, storage=storage, arch="sm_80").target.gpu == "synthetic-a100"


def test_measured_study_wins_over_a_faster_replayed_one(tmp_path):
    from tilesearch.builder import NullBuilder

    class Measuring(SyntheticRunner):
        replayed = False  # stands for a GPU runner; NullBuilder keeps nvcc out of it

    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    knobs = [Categorical(k, (v,)) for k, v in SMALL.items()]
    tune("gemm", PROBLEM, runner=Measuring(lambda c: 5.0), builder=NullBuilder(), storage=storage,
         space=Space(knobs), strategy="grid", trials=1, progress=False)
    fill(storage)  # replayed, 1.0 ms
    op, problem = gemm_problem()
    choice = best_trial(op, problem, storage=storage)
    assert choice.record.latency_ms == 5.0 and not choice.attrs["replayed"]


def test_named_study_must_exist_and_match(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    other = fill(storage, k=256)
    op, problem = gemm_problem()
    with pytest.raises(NoTrialError, match="no study named 'nope'"):
        best_trial(op, problem, storage=storage, study="nope")
    with pytest.raises(NoTrialError, match="is for gemm .*k=256"):
        best_trial(op, problem, storage=storage, study=other.study)


def test_refuses_to_overwrite_other_directories(tmp_path):
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    fill(storage)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(ArtifactError, match="not a kernel artifact"):
        export("gemm", out=tmp_path / "notes", storage=storage, **PROBLEM)
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"


def test_cli_without_study_exits_2_with_one_line(tmp_path, capsys):
    code = main(["export", "op=gemm", "m=256", "n=256", "k=128", f"out={tmp_path / 'k'}",
                 f"storage=sqlite:///{tmp_path / 'db.sqlite'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("tilesearch: error: no study for gemm")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["op=gemm", "m=256", "n=256", "k=128"], "out=DIR is required"),
        (["op=gemm", "m=256", "n=256", "k=128", "out=x", "color=red"], "unknown key 'color'"),
        (["m=256", "out=x"], "op=NAME is required"),
        (["op=gemm", "m=256", "n=256", "k=128", "out=x", "arch=hopper"], "not a CUDA architecture"),
    ],
)
def test_cli_usage_errors(args, message, capsys):
    assert main(["export", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# --- with nvcc: one real compile for sm_90a --------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_CACHE_DIR", str(root / "tilelang-cache"))
        storage = f"sqlite:///{root / 'db.sqlite'}"
        result = fill(storage)
        meta = export("gemm", out=root / "kernel", storage=storage, **PROBLEM)
    return root, storage, result, meta


@pytest.mark.nvcc
def test_export_writes_library_source_and_metadata(exported):
    root, _, result, meta = exported
    directory = root / "kernel"
    assert {p.name for p in directory.iterdir()} == {LIBRARY, SOURCE, METADATA}
    assert read(directory) == meta
    assert "__global__" in (directory / SOURCE).read_text()
    assert meta.op == "gemm" and meta.params == {**PROBLEM, "dtype": "float16", "layout": "nn"}
    assert meta.dtype == "float16" and meta.layout == "nn" and meta.arch == "sm_90a"
    assert meta.config == SMALL and meta.study == result.study and meta.trial == result.best[0].number
    assert meta.latency_ms == 1.0 and meta.synthetic and meta.replayed  # made-up figures say so
    assert [(s.name, s.shape) for s in meta.inputs] == [("A", (256, 128)), ("B", (128, 256))]
    assert [(s.name, s.shape, s.dtype) for s in meta.outputs] == [("C", (256, 256), "float16")]
    for name in ("tilelang", "tvm", "tvm_ffi", "torch", "nvcc"):
        assert meta.versions[name] not in ("", None)


@pytest.mark.nvcc
def test_fresh_process_loads_without_tilelang_and_traces(exported):
    root = exported[0]
    script = textwrap.dedent(
        f"""
        import json, sys
        import torch
        import tilesearch
        from tilesearch.deploy import loader
        kernel = tilesearch.load({str(root / "kernel")!r})
        a = torch.empty(256, 128, dtype=torch.float16, device="meta")
        b = torch.empty(128, 256, dtype=torch.float16, device="meta")
        traced = torch.compile(lambda x, y: kernel(x, y) + 1, fullgraph=True, backend="eager")(a, b)
        print(json.dumps({{"tilelang": "tilelang" in sys.modules, "runtime": loader.RUNTIME["loaded_by"],
                          "shape": list(traced.shape), "id": kernel.id}}))
        """
    )
    env = {**os.environ, "TILELANG_CACHE_DIR": str(root / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"tilelang": False, "runtime": "runtime-library", "shape": [256, 256], "id": exported[3].kernel_id}
    assert not (root / "empty-cache").exists()  # nothing compiled, nothing cached


@pytest.mark.nvcc
def test_corrupted_library_is_refused(exported, tmp_path):
    import shutil

    from tilesearch.deploy import CorruptArtifactError

    copy = tmp_path / "kernel"
    shutil.copytree(exported[0] / "kernel", copy)
    data = bytearray((copy / LIBRARY).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / LIBRARY).write_bytes(bytes(data))
    with pytest.raises(CorruptArtifactError):
        load(copy)


@pytest.mark.nvcc
def test_load_by_problem_exports_once_into_the_cache(exported, tmp_path, monkeypatch):
    root, storage, _, meta = exported
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "tilelang-cache"))  # the compile is cached there
    first = load(op="gemm", storage=storage, cache_dir=tmp_path, arch="sm_90a", **PROBLEM)
    assert first.metadata.trial_key == meta.trial_key and first.path.parent == tmp_path

    from tilesearch.deploy import exporter

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(exporter, "export", no_export)
    again = load(op="gemm", storage=storage, cache_dir=tmp_path, arch="sm_90a", **PROBLEM)
    assert again.path == first.path and again.id == first.id


@pytest.mark.nvcc
def test_cli_export(exported, tmp_path, capsys, monkeypatch):
    root, storage, _, meta = exported
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "tilelang-cache"))
    code = main(["export", "op=gemm", "m=256", "n=256", "k=128", f"out={tmp_path / 'k'}", f"storage={storage}"])
    out = capsys.readouterr().out
    assert code == 0 and "exported gemm" in out and "synthetic" in out
    assert read(tmp_path / "k").config == meta.config


# --- on a Hopper GPU: the exported kernel computes, in place, and inside a CUDA graph --------------


@pytest.fixture(scope="module")
def on_gpu(exported):
    import torch

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the test artifact is compiled for sm_90a")
    root = exported[0]
    kernel = load(root / "kernel")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 128, device="cuda", generator=g).half()
    b = torch.randn(128, 256, device="cuda", generator=g).half()
    return kernel, a, b


@pytest.mark.gpu
@pytest.mark.nvcc
def test_gpu_result_matches_tilelang_and_matmul(on_gpu, exported):
    import torch

    kernel, a, b = on_gpu
    c = kernel(a, b)
    op, problem = gemm_problem()
    jit = op.build(problem, exported[3].config, Target.from_arch("sm_90a"))
    c_tl = torch.empty_like(c)
    jit(a, b, c_tl)
    assert torch.equal(c, c_tl)
    torch.testing.assert_close(c, (a.double() @ b.double()).half(), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.nvcc
def test_gpu_out_is_written_in_place_and_graph_capturable(on_gpu):
    import torch

    kernel, a, b = on_gpu
    expected = kernel(a, b)
    c = torch.full_like(expected, float("nan"))
    assert kernel(a, b, out=c) is c and torch.equal(c, expected)
    static_a, static_c = a.clone(), torch.empty_like(expected)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kernel(static_a, b, out=static_c)
    static_a.copy_(a * 2)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_c, kernel(a * 2, b))
