"""The host library of a compiled kernel with its device code embedded by the assembler: the same
bytes under the same symbol as TVM's C array, loadable the same way."""

import ctypes
import os

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
    problem = GemmOp().problem(m=512, n=512, k=512)
    Candidate("gemm", problem.to_dict(), GEMM, H100).build()
    assert len(packed) == 1 and packed[0].endswith("devc.S")
    libraries = [os.path.join(folder, name) for folder, _, files in os.walk(tmp_path / "cache")
                 for name in files if name == "executable.so"]
    assert len(libraries) == 1
    assert len(_embedded(libraries[0])[1]) > 10_000

