"""The host library of a compiled kernel with its device code embedded by the assembler: the same
bytes under the same symbol as TVM's C array, loadable the same way."""

import ctypes
import os
import shutil
import subprocess

import pytest

from tilesearch.builder import library
from tilesearch.records import Candidate
from tilesearch.target import Target

H100 = Target.from_arch("sm_90a")
GEMM = dict(block_m=128, block_n=128, block_k=64, num_stages=3, threads=128, panel_size=0, raster="row",
            warp_policy="full_row", split_k=1, persistent=False, epilogue="direct", tma=True,
            warp_specialize="off", swap_ab=False)


def _embedded(path):
    """The module TVM-FFI loads from ``path``, and the bytes of its embedded device code."""
    import tvm_ffi

    module = tvm_ffi.load_module(str(path))  # resolves the library's symbols, so ctypes can open it
    lib = ctypes.CDLL(str(path))
    size = int.from_bytes(bytes((ctypes.c_ubyte * 8).in_dll(lib, library.SYMBOL)), "little")
    return module, bytes((ctypes.c_ubyte * (8 + size)).in_dll(lib, library.SYMBOL))


@pytest.mark.nvcc
def test_the_assemblers_library_holds_the_same_device_code_as_tvms(tmp_path, monkeypatch):
    from search_spaces.gemm import GemmOp

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    op = GemmOp()
    kernel = op.build(op.problem(m=1000, n=3000, k=500, dtype="bfloat16", layout="nt"), GEMM, H100)
    executable = kernel.adapter.get_exportable_executable()
    executable.export_library(str(tmp_path / "c.so"))
    executable.export_library(str(tmp_path / "asm.so"), fpack_imports=library.pack_imports)
    theirs, ours = _embedded(tmp_path / "c.so"), _embedded(tmp_path / "asm.so")
    assert len(ours[1]) > 10_000 and ours[1] == theirs[1]
    assert str(ours[0]) == str(theirs[0])  # the same modules imported: the host's and the CUDA one
    # a system library's registration, or a symbol prefix, only TVM's C array says
    for system, prefix in ((True, ""), (True, "mine_")):
        written = library.pack_imports(executable.mod, system, prefix, str(tmp_path))
        assert written == str(tmp_path / f"{prefix}devc.c") and library.SYMBOL in open(written).read()


@pytest.mark.nvcc
def test_a_build_writes_its_cached_library_by_the_assembler(tmp_path, monkeypatch):
    from search_spaces.gemm import GemmOp

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    packed = []
    own = library.pack_imports
    monkeypatch.setattr(library, "pack_imports", lambda *args: packed.append(own(*args)) or packed[-1])
    import tvm.contrib.cc

    compilers = []
    own_compile = tvm.contrib.cc._linux_compile
    monkeypatch.setattr(tvm.contrib.cc, "_linux_compile", lambda out, objects, options, cmd, *args, **kwargs:
                        compilers.append((cmd, objects)) or own_compile(out, objects, options, cmd, *args, **kwargs))
    problem = GemmOp().problem(m=512, n=512, k=512)
    Candidate("gemm", problem.to_dict(), GEMM, H100).build()
    assert len(packed) == 1 and packed[0].endswith("devc.S")
    # the host code is C, given to the C compiler
    assert [(cmd, sorted(os.path.basename(o) for o in objects)) for cmd, objects in compilers] == [
        (library.c_compiler(), ["devc.S", "lib0.c"])]
    libraries = [os.path.join(folder, name) for folder, _, files in os.walk(tmp_path / "cache")
                 for name in files if name == "executable.so"]
    assert len(libraries) == 1
    assert len(_embedded(libraries[0])[1]) > 10_000


def _exported(path):
    """The library's defined dynamic symbols and the libraries it needs."""
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True)
    needed = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True)
    return ({line.split()[-1] for line in symbols.stdout.splitlines() if line.strip()},
            {line.split()[-1] for line in needed.stdout.splitlines() if "(NEEDED)" in line})


def _refusals(path):
    """What the library's host function says to calls it must refuse on the CPU: its own checks of
    the arguments' count, type, shape and device, in the C code the host compiler compiled."""
    import torch

    module = _embedded(path)[0]
    half = dict(dtype=torch.float16)
    calls = [(), (torch.zeros(4, 4),) * 3, (torch.zeros(3, 5, **half),) * 3,
             (torch.zeros(1000, 500, **half), torch.zeros(500, 3000, **half), torch.zeros(1000, 3000, **half))]
    said = []
    for args in calls:
        with pytest.raises(Exception) as refused:
            module["gemm"](*args)
        said.append(str(refused.value))
    return said


@pytest.mark.nvcc
@pytest.mark.skipif(library.c_compiler() is None or not shutil.which("g++") or not shutil.which("nm")
                    or not shutil.which("readelf"), reason="needs gcc, g++ and binutils")
def test_the_host_code_compiled_as_c_is_the_library_tvms_cxx_compile_makes(tmp_path, monkeypatch):
    """The C compiler's library exports the same symbols, needs the same libraries and refuses the
    same calls, with the same words, as the one g++ makes of the same code (TVM's default)."""
    from search_spaces.gemm import GemmOp

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    op = GemmOp()
    kernel = op.build(op.problem(m=1000, n=3000, k=500, dtype="float16", layout="nn"), GEMM, H100)
    executable = kernel.adapter.get_exportable_executable()
    executable.export_library(str(tmp_path / "c.so"), fpack_imports=library.pack_imports, cc=library.c_compiler())
    executable.export_library(str(tmp_path / "cxx.so"), fpack_imports=library.pack_imports, cc=shutil.which("g++"))
    ours, theirs = _exported(tmp_path / "c.so"), _exported(tmp_path / "cxx.so")
    assert ours == theirs and {"__tvm_ffi_gemm", library.SYMBOL} <= ours[0]
    said = _refusals(tmp_path / "c.so")
    assert said == _refusals(tmp_path / "cxx.so")
    assert len(set(said)) == len(said) and "device" in said[-1].lower()  # four checks of the host code
