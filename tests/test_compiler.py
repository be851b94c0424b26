"""The device-code compiler: NVRTC where it loads, nvcc otherwise or when TILESEARCH_COMPILER asks, one
per run (its own TileLang cache folder, its own study identity), nvcc where NVRTC cannot."""

import json
import os
import subprocess
import sys

import pytest

from tilesearch import provenance
from tilesearch.builder import LocalBuilder, batch, compiler
from tilesearch.errors import TilesearchError
from tilesearch.records import Candidate
from tilesearch.target import Target

H100 = Target.from_arch("sm_90a")
GEMM = dict(block_m=128, block_n=128, block_k=64, num_stages=3, threads=128, panel_size=0, raster="row",
            warp_policy="full_row", split_k=1, persistent=False, epilogue="direct", tma=True,
            warp_specialize="off", swap_ab=False)


def _nvrtc() -> bool:
    try:
        return compiler._nvrtc_version() >= (12, 8)
    except compiler.CompilerError:
        return False


needs_nvrtc = pytest.mark.skipif(not _nvrtc(), reason="needs cuda-bindings and libnvrtc 12.8+ (the test extra)")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process whose compiler is not installed yet, and is TileLang's own again afterwards."""
    monkeypatch.setattr(compiler, "_installed", None)
    monkeypatch.setattr(compiler, "_headers", {})
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    yield tmp_path / "cache"
    from tilelang.cuda import backend

    batch._register(backend.tilelang_callback_cuda_compile)
    compiler._installed = None


def test_nvrtc_finds_the_toolkit_that_nvcc_runs_from_even_through_a_wrapper(tmp_path, monkeypatch):
    from tilelang.contrib import nvcc

    wrapper = tmp_path / "nvcc"
    wrapper.write_text("#!/bin/sh\necho '#$ TOP=/opt/cuda-99.9/bin/..' >&2\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(nvcc, "get_nvcc_compiler", lambda: str(wrapper))
    compiler.toolkit.cache_clear()
    try:
        assert compiler.toolkit() == "/opt/cuda-99.9"
        wrapper.write_text("#!/bin/sh\nexit 1\n")  # says nothing: the folder above its bin/
        compiler.toolkit.cache_clear()
        assert compiler.toolkit() == str(tmp_path.parent)
    finally:
        compiler.toolkit.cache_clear()


def test_nvrtc_where_it_loads_unless_asked_and_a_bad_name_is_a_users_error(monkeypatch):
    monkeypatch.delenv(compiler.VARIABLE, raising=False)
    assert compiler.chosen() == ("nvrtc" if _nvrtc() else "nvcc")
    monkeypatch.setattr(compiler, "available", lambda: False)  # no cuda-bindings, or no libnvrtc
    assert compiler.chosen() == "nvcc" == compiler.describe()
    monkeypatch.setattr(compiler, "available", lambda: True)
    assert compiler.chosen() == "nvrtc"
    monkeypatch.setenv(compiler.VARIABLE, " NVCC ")
    assert compiler.chosen() == "nvcc"
    monkeypatch.setenv(compiler.VARIABLE, " NVRTC ")
    assert compiler.chosen() == "nvrtc"
    monkeypatch.setenv(compiler.VARIABLE, "clang")
    with pytest.raises(TilesearchError, match="'clang' names no compiler; use one of nvcc, nvrtc"):
        compiler.chosen()


def test_tune_refuses_a_bad_compiler_before_starting():
    env = dict(os.environ, **{compiler.VARIABLE: "clang"})
    out = subprocess.run([sys.executable, "-m", "tilesearch.cli", "tune", "op=gemm", "m=64", "n=64", "k=64"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2, out
    assert out.stderr.strip() == ("tilesearch: error: TILESEARCH_COMPILER='clang' names no compiler; "
                                  "use one of nvcc, nvrtc")


def test_an_nvrtc_study_has_an_identity_of_its_own_and_nvccs_keeps_the_old_one():
    from search_spaces.gemm import GemmOp

    op, versions = GemmOp(), {"tilelang": "0.1.15", "torch": "2.13.0", "nvcc": "13.0"}
    before = provenance.identity(op, versions)  # as recorded before the compiler was a choice
    assert provenance.identity(op, dict(versions, compiler="nvcc")) == before
    theirs = provenance.identity(op, dict(versions, compiler="nvrtc-13.0"))
    assert provenance.tag(theirs) != provenance.tag(before)
    assert provenance.differences(before, theirs) == ["device-code compiler (TILESEARCH_COMPILER): absent -> nvrtc-13.0"]


@pytest.mark.nvcc
@needs_nvrtc
def test_nvrtc_compiles_the_kernels_into_a_cache_of_its_own(fresh, monkeypatch, caplog):
    from search_spaces.gemm import GemmOp

    monkeypatch.setenv(compiler.VARIABLE, "nvrtc")
    problem = GemmOp().problem(m=1000, n=3000, k=500, dtype="bfloat16", layout="nt")
    candidate = Candidate("gemm", problem.to_dict(), GEMM, H100)
    before = compiler.spent()
    with caplog.at_level("WARNING", logger=compiler.__name__):
        kernel = candidate.build()
    assert not caplog.records  # NVRTC compiled it: nvcc did not step in
    assert os.environ["TILELANG_CACHE_DIR"] == str(fresh / "nvrtc")
    assert compiler.spent() > before  # NVRTC compiled it, in this process
    assert "__global__" in kernel.get_kernel_source()
    assert any(name == "kernel.cubin" for _, _, files in os.walk(fresh / "nvrtc") for name in files)
    compiler.install()  # again: the same folder, not nvrtc/nvrtc
    assert os.environ["TILELANG_CACHE_DIR"] == str(fresh / "nvrtc")
    assert compiler.describe().startswith("nvrtc-")


@pytest.mark.nvcc
@needs_nvrtc
def test_what_nvrtc_rejects_or_asks_options_of_its_own_goes_to_nvcc(fresh, monkeypatch, caplog):
    import tilelang  # noqa: F401 - before tvm
    from tilelang.cuda import backend

    from search_spaces.gemm import GemmOp

    op = GemmOp()
    problem = op.problem(m=256, n=256, k=256)
    codes = []
    monkeypatch.setattr(backend, "tilelang_callback_cuda_compile",
                        lambda code, target, config=None: codes.append(config) or bytearray(b"nvcc's"))
    program_code = {}

    def catch(code, target, config=None):
        program_code["code"], program_code["target"] = str(code), target
        return bytearray(b"caught")

    batch._register(catch)
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    try:
        op.build(problem, GEMM, H100)
    except Exception:  # noqa: BLE001 - the caught bytes are no cubin; only the code was wanted
        pass
    code, target = program_code["code"], program_code["target"]

    assert compiler.compile_device_code(code, target, {"tl.enable_fast_math": True}) == b"nvcc's"
    monkeypatch.setattr(compiler, "nvrtc_cubin", lambda *a: (_ for _ in ()).throw(RuntimeError("error: no such thing")))
    with caplog.at_level("WARNING", logger=compiler.__name__):
        assert compiler.compile_device_code(code, target) == b"nvcc's"
        assert compiler.compile_device_code(code, target) == b"nvcc's"
    assert [r.getMessage() for r in caplog.records] == ["NVRTC did not compile a kernel, nvcc does (error: no such thing)"]
    assert len(codes) == 3


@pytest.mark.nvcc
@needs_nvrtc
def test_the_compile_pool_compiles_by_nvrtc_one_at_a_time(fresh, monkeypatch):
    from search_spaces.gemm import GemmOp

    monkeypatch.setenv(compiler.VARIABLE, "nvrtc")
    compiler.warm_up()
    compiler.make_header("sm_90a").result()  # raises where NVRTC cannot compile TileLang's headers here
    problem = GemmOp().problem(m=512, n=512, k=512)
    candidates = [Candidate("gemm", problem.to_dict(), dict(GEMM, num_stages=s), H100) for s in (2, 3)]
    with LocalBuilder(workers=1, timeout=600) as builder:
        assert builder.batch == 1  # NVRTC keeps the headers: no shared translation units
        results = [f.result() for f in [builder.submit(c) for c in candidates]]
    assert all(r.ok for r in results), [r.error for r in results]
    assert all(r.tools_s > 0 for r in results)  # NVRTC's seconds, counted as the compiler's
    cubins = [folder for folder, _, files in os.walk(fresh) for name in files if name == "kernel.cubin"]
    assert len(cubins) >= 2 and all(c.startswith(str(fresh / "nvrtc")) for c in cubins)  # none in nvcc's folder


def _device_codes(configs):
    """The device code of each (problem, config), as TileLang hands it to its compile hook."""
    import tilelang  # noqa: F401 - before tvm

    from search_spaces.gemm import GemmOp

    op, codes = GemmOp(), []

    def catch(code, target, config=None):
        codes.append(str(code))
        raise RuntimeError("caught")  # the code is all that is wanted

    batch._register(catch)
    for problem, config in configs:
        with pytest.raises(Exception, match="caught"):
            op.build(op.problem(**problem), config, H100)
    return codes


@pytest.mark.nvcc
@needs_nvrtc
def test_codes_given_the_shared_headers_start_alike_and_compile_to_the_same_kernels(fresh, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    square, tall = dict(m=1024, n=1024, k=1024), dict(m=784, n=4096, k=4096, dtype="bfloat16", layout="nt")
    codes = _device_codes([(square, GEMM), (square, dict(GEMM, tma=False)),
                           (tall, dict(GEMM, warp_specialize="role_based", num_stages=4)),
                           (tall, dict(GEMM, block_m=224, swap_ab=True, epilogue="smem"))])
    own = {batch.split(code)[0] for code in codes}
    assert len(own) > 1  # the codes include different headers
    shared = [compiler.shared_includes(code) for code in codes]
    assert len({batch.split(code)[0] for code in shared}) == 1
    options = compiler.options_for("sm_90a")
    for code, given in zip(codes, shared):
        alone = batch.code_sections(compiler.nvrtc_cubin(code, options))
        assert any(name.startswith(".text.") for name in alone)
        assert batch.code_sections(compiler.nvrtc_cubin(given, options)) == alone


@pytest.mark.nvcc
@needs_nvrtc
def test_a_worker_makes_nvrtcs_header_as_it_starts_only_when_nvrtc_is_chosen(fresh, monkeypatch):
    monkeypatch.setenv(compiler.VARIABLE, "nvcc")
    compiler.warm_up()
    assert compiler._headers == {} and compiler._installed is None
    monkeypatch.setenv(compiler.VARIABLE, "nvrtc")
    before = compiler.spent()
    compiler.warm_up()
    made = compiler.make_header("sm_90a")
    assert made.result() and compiler._installed == "nvrtc"  # made in a thread, while the worker lowers
    # its first candidate; its seconds are no candidate's: counted, a compile that began beside it
    # reported more compiler seconds than its wall time (test_builder, under a fork server that had none)
    assert compiler.spent() == before


def test_the_header_is_made_in_a_thread_and_a_kernel_waits_for_it(fresh, monkeypatch):
    # a compile-pool worker lowers its first candidate meanwhile; NVRTC would not use a header half made
    import threading

    gate, compiled = threading.Event(), []

    def nvrtc(code, options, counted=True):
        if code == "HEADER":
            gate.wait(30)
        compiled.append(code)
        return b"cubin"

    monkeypatch.setattr(compiler, "nvrtc_cubin", nvrtc)
    monkeypatch.setattr(compiler, "header_code", lambda arch: "HEADER")
    made = compiler.make_header("sm_90a")
    assert not made.done() and compiler.make_header("sm_90a") is made  # started once, in the background
    waiting = threading.Thread(target=compiler.wait_for_header, args=("sm_90a",))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # a kernel's compile waits
    gate.set()
    waiting.join(30)
    assert not waiting.is_alive() and made.result() == b"cubin" and compiled == ["HEADER"]


@pytest.mark.gpu
@needs_nvrtc
def test_a_run_under_nvrtc_tunes_exports_and_loads_its_own_kernels_whoever_exports_them(tmp_path):
    import torch

    import tilesearch

    storage = f"sqlite:///{tmp_path / 'nvrtc.db'}"
    problem = ["op=gemm", "m=1000", "n=3000", "k=500", "dtype=bfloat16", "layout=nt"]
    nvrtc = dict(os.environ, **{compiler.VARIABLE: "nvrtc"}, TILELANG_CACHE_DIR=str(tmp_path / "cache"))

    def cli(*args, env):
        return subprocess.run([sys.executable, "-m", "tilesearch.cli", *args, f"storage={storage}"],
                              capture_output=True, text=True, timeout=600, env=env)

    tuned = cli("tune", *problem, "trials=6", "progress=false", env=nvrtc)
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    exported = cli("export", *problem, f"out={tmp_path / 'art'}", env=nvrtc)
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert any(name == "kernel.cubin" for _, _, files in os.walk(tmp_path / "cache" / "nvrtc") for name in files)
    # exported again from a process that would compile with nvcc: still the kernel the study measured
    nvcc = dict(nvrtc, **{compiler.VARIABLE: "nvcc"})
    again = cli("export", *problem, f"out={tmp_path / 'again'}", env=nvcc)
    assert again.returncode == 0, again.stderr[-2000:]
    cubins = [folder for folder, _, files in os.walk(tmp_path / "cache") for name in files if name == "kernel.cubin"]
    assert cubins and all(c.startswith(str(tmp_path / "cache" / "nvrtc")) for c in cubins)  # none by nvcc
    for art in ("art", "again"):
        metadata = json.loads((tmp_path / art / "metadata.json").read_text())
        assert metadata["versions"]["compiler"].startswith("nvrtc-"), metadata["versions"]

    kernel = tilesearch.load(str(tmp_path / "art"))
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(1000, 500, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(3000, 500, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = a.double() @ b.double().T
    got = kernel(a, b).double()
    assert ((got - want).norm() / want.norm()).item() < 4e-3


def test_a_studys_compiler_is_read_from_its_identity():
    assert compiler.of_identity(None) == "nvcc" == compiler.of_identity({"nvcc": "13.0"})
    assert compiler.of_identity({"compiler": "nvrtc-13.0"}) == "nvrtc"


@needs_nvrtc
def test_using_a_compiler_switches_this_process_and_puts_it_back(fresh, monkeypatch):
    monkeypatch.setenv(compiler.VARIABLE, "nvcc")
    compiler.install()
    with compiler.using("nvrtc"):
        assert compiler._installed == "nvrtc" and os.environ["TILELANG_CACHE_DIR"] == str(fresh / "nvrtc")
    assert compiler._installed == "nvcc" and os.environ["TILELANG_CACHE_DIR"] == str(fresh)
    assert os.environ[compiler.VARIABLE] == "nvcc"  # as it was
    monkeypatch.delenv("TILELANG_CACHE_DIR")
    with compiler.using("nvrtc"):
        assert os.environ["TILELANG_CACHE_DIR"] == os.path.expanduser("~/.tilelang/cache/nvrtc")
    assert "TILELANG_CACHE_DIR" not in os.environ  # unset again, as it was
    # a compile worker, started by an NVRTC run: its folder comes from its parent, nvcc's is the one above
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(fresh / "nvrtc"))
    monkeypatch.setenv(compiler.VARIABLE, "nvrtc")
    compiler.install()
    assert os.environ["TILELANG_CACHE_DIR"] == str(fresh / "nvrtc")
    with compiler.using("nvcc"):
        assert os.environ["TILELANG_CACHE_DIR"] == str(fresh)
    assert os.environ["TILELANG_CACHE_DIR"] == str(fresh / "nvrtc")


@needs_nvrtc
def test_an_export_builds_with_the_compiler_its_study_measured_with(fresh, monkeypatch):
    from search_spaces.gemm import GemmOp
    from tilesearch.database import TrialRecord
    from tilesearch.deploy import exporter

    monkeypatch.setenv(compiler.VARIABLE, "nvcc")
    op = GemmOp()
    problem = op.problem(m=256, n=256, k=256)
    seen = []

    def build(self, op=None):
        seen.append(compiler.chosen())
        compiler.install()
        seen.append(os.environ["TILELANG_CACHE_DIR"])
        raise RuntimeError("built")

    monkeypatch.setattr(Candidate, "build", build)
    record = TrialRecord(number=0, key="k", config=GEMM, status="ok")
    for identity, want in (({"compiler": "nvrtc-13.0"}, ["nvrtc", str(fresh / "nvrtc")]),
                           ({"nvcc": "13.0"}, ["nvcc", str(fresh)])):
        seen.clear()
        choice = exporter.Choice("study", record, {"target": H100.to_dict(), "identity": identity})
        with pytest.raises(RuntimeError, match="built"):
            exporter.write(fresh / "art", op, problem, choice)
        assert seen == want
    assert compiler.chosen() == "nvcc"  # this process's own choice, back


@pytest.mark.nvcc
@needs_nvrtc
def test_a_kernel_built_before_a_switch_is_built_again_by_the_other_compiler(fresh, monkeypatch):
    from search_spaces.gemm import GemmOp

    monkeypatch.setenv(compiler.VARIABLE, "nvcc")
    op = GemmOp()
    problem = op.problem(m=640, n=640, k=640)
    op.build(problem, GEMM, H100)  # by nvcc, and kept in TileLang's memory, keyed by the program alone
    before = compiler.spent()
    with compiler.using("nvrtc"):
        Candidate("gemm", problem.to_dict(), GEMM, H100).build()
    assert compiler.spent() > before


@pytest.fixture
def recorded(fresh, monkeypatch):
    """NVRTC replaced by a recorder of what it compiled, and a stamp that needs no NVRTC."""
    compiled = []
    monkeypatch.setattr(compiler, "_early", {})
    monkeypatch.setattr(compiler, "nvrtc_cubin", lambda code, options, counted=True: compiled.append(code) or b"cubin")
    monkeypatch.setattr(compiler, "_nvrtc_version", lambda: (13, 0))
    monkeypatch.setattr(compiler, "options_for", lambda arch: ["-pch", f"--gpu-architecture={arch}"])
    return compiled


def test_a_header_made_records_its_code_and_the_next_process_begins_from_it(recorded, monkeypatch):
    monkeypatch.setattr(compiler, "header_code", lambda arch: "HEADER")
    assert compiler.early_header("sm_90a") is None  # nothing recorded yet: made after the import
    compiler.make_header("sm_90a", background=False).result()
    data = json.loads(open(compiler.header_file("sm_90a")).read())
    assert (data["code"], data["options"]) == ("HEADER", ["-pch", "--gpu-architecture=sm_90a"])
    assert compiler.header_file("sm_90a").startswith(compiler.nvrtc_folder())
    # the next process: begun from the record, then kept, since a tiny program still lowers to it
    monkeypatch.setattr(compiler, "_headers", {})
    early = compiler.early_header("sm_90a")
    assert early is not None and compiler.make_header("sm_90a", background=False) is early
    assert recorded == ["HEADER", "HEADER"] and early.result() == b"cubin"


def test_a_recorded_header_that_no_longer_matches_is_made_again_and_recorded_anew(recorded, monkeypatch):
    monkeypatch.setattr(compiler, "header_code", lambda arch: "OLD")
    compiler.make_header("sm_90a", background=False).result()
    monkeypatch.setattr(compiler, "_headers", {})
    monkeypatch.setattr(compiler, "header_code", lambda arch: "NEW")  # TileLang lowers otherwise now
    early = compiler.early_header("sm_90a")
    made = compiler.make_header("sm_90a", background=False)
    assert made is not early and made.result() == b"cubin" and recorded == ["OLD", "OLD", "NEW"]
    assert json.loads(open(compiler.header_file("sm_90a")).read())["code"] == "NEW"


def test_a_damaged_or_foreign_header_record_is_ignored(recorded, monkeypatch):
    path = compiler.header_file("sm_90a")
    os.makedirs(os.path.dirname(path))
    for text in ("{not json", json.dumps({"code": "X"}), json.dumps([1, 2])):
        open(path, "w").write(text)
        assert compiler.early_header("sm_90a") is None
    monkeypatch.setattr(compiler, "header_code", lambda arch: "HEADER")
    compiler.make_header("sm_90a", background=False).result()
    monkeypatch.setattr(compiler, "_headers", {})
    monkeypatch.setattr(compiler, "_nvrtc_version", lambda: (13, 1))  # another NVRTC since
    assert compiler.early_header("sm_90a") is None and recorded == ["HEADER"]


def test_the_fork_server_begins_a_recorded_header_before_it_imports_tilelang(tmp_path):
    # what tilesearch.builder.warm does in the process the compile pool forks from, NVRTC stubbed:
    # the header's compile must start while TileLang is not imported yet, and be over before any fork
    script = """
import json, sys, threading
from tilesearch.builder import compiler
seen = []
def nvrtc(code, options, counted=True):
    seen.append((code, "tilelang" in sys.modules, threading.current_thread() is threading.main_thread()))
    return b"cubin"
compiler.nvrtc_cubin = nvrtc
compiler._nvrtc_version = lambda: (13, 0)
compiler.options_for = lambda arch: ["-pch"]
compiler.header_code = lambda arch: "HEADER"
import tilesearch.builder.warm
assert "tilelang" in sys.modules and compiler._headers["sm_90a"].done()
assert [t for t in threading.enumerate() if t.name.startswith("nvrtc-header")] == []
print(json.dumps(seen))
"""
    env = dict(os.environ, TILESEARCH_COMPILER="nvrtc", TILELANG_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    first, second = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert first == [["HEADER", True, True]]  # nothing recorded: made after the import, as before
    assert second == [["HEADER", False, False]]  # begun from the record, in a thread, before the import


def test_a_header_record_that_cannot_be_written_leaves_nothing_behind(recorded, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compiler, "header_code", lambda arch: "HEADER")
    monkeypatch.setattr(compiler.json, "dump", full)
    assert compiler.make_header("sm_90a", background=False).result() == b"cubin"  # the header is made all the same
    assert os.listdir(compiler.nvrtc_folder()) == []
