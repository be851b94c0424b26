"""The host library TileLang writes for each compiled kernel into its cache (``executable.so``, the
file the measuring worker loads), with the device code embedded by the assembler, not as C.

Why: TVM embeds a kernel's device modules (its cubin, serialized) in the host library as a C
array of hex literals (``devc.c``), which the host compiler then parses. For a GEMM kernel that is
1.4 MB of text for a 270 KB blob: 0.30 s of the 0.46 s the host library took per configuration
on the CPU machine, more than NVRTC spends on the device code with its headers kept (0.3-0.5 s).
The assembler's ``.incbin`` takes the same bytes from a file in a few milliseconds.

The library holds the same bytes under the same exported symbol (``__tvm_ffi__library_bin``,
where TVM-FFI looks for them when it loads the library), as read-only data: the kernels are the
same (``tests/test_library.py`` compares the symbol's bytes, byte for byte, and loads both).
Where the C array carries more than the bytes (a system library, a symbol prefix) or the
platform is not Linux, TVM's own C array is written, as before.

And the host code is compiled as what it is, C. TVM's "c" host target writes ``lib0.c`` (C, with
``extern "C"`` guards for a C++ compiler), and TVM hands it to its default compiler, ``g++``, which
parses it and TVM's runtime headers as C++: 0.20 s a configuration on the CPU machine, against
0.07 s for ``gcc`` with the same file (2026-12-05), a seventh of a configuration's whole compile
there. The library exports the same symbols and links the same libraries (``tests/test_library.py``
compares them and calls the host function of both on the CPU). :func:`c_compiler` picks it; where
there is none, TVM's compiler as before.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from typing import Any

SYMBOL = "__tvm_ffi__library_bin"


def pack_imports(module: Any, is_system_lib: bool, prefix: str, workspace_dir: str) -> str:
    """``export_library``'s ``fpack_imports``: the file holding ``module``'s imports for the
    host compiler, an assembler file around their bytes (see the module docstring)."""
    from tvm.runtime import _ffi_api

    if is_system_lib or prefix or not sys.platform.startswith("linux"):  # TVM's own way
        path = os.path.join(workspace_dir, f"{prefix}devc.c")
        with open(path, "w") as f:
            f.write(_ffi_api.ModulePackImportsToC(module, is_system_lib, prefix))
        return path
    blob = os.path.join(workspace_dir, "devc.bin")
    with open(blob, "wb") as f:
        f.write(_ffi_api.ModulePackImportsToTensor(module).numpy().tobytes())
    path = os.path.join(workspace_dir, "devc.S")
    quoted = blob.replace("\\", "\\\\").replace('"', '\\"')
    with open(path, "w") as f:
        f.write(f'\t.section .rodata\n\t.globl {SYMBOL}\n\t.type {SYMBOL}, @object\n\t.balign 16\n'
                f'{SYMBOL}:\n\t.incbin "{quoted}"\n\t.size {SYMBOL}, . - {SYMBOL}\n'
                '\t.section .note.GNU-stack,"",@progbits\n')
    return path


@functools.cache
def c_compiler() -> str | None:
    """The C compiler for a host library's C code: the first of ``$CC``, ``gcc``, ``clang`` and ``cc``
    found on the ``PATH``; None off Linux or where there is none (TVM's own compiler then)."""
    if not sys.platform.startswith("linux"):
        return None
    names = [os.environ["CC"]] if os.environ.get("CC") else []
    return next((found for name in (*names, "gcc", "clang", "cc") if (found := shutil.which(name))), None)


@functools.cache
def install() -> None:
    """Makes TileLang's kernel cache write host libraries this way in this process (the cache is
    where a compiled kernel's library is made; an export links its own, TVM's way), its C host
    code compiled by :func:`c_compiler`."""
    from tilelang.cache.kernel_cache import KernelCache
    from tilelang.jit.adapter.kernel_cache import TVMFFIKernelCache

    own = TVMFFIKernelCache._get_export_kwargs
    own_source = KernelCache._get_source_compile_args  # TileLang's arguments for a C host code

    def export_kwargs(kernel: Any) -> dict[str, Any]:
        return {"fpack_imports": pack_imports, **own(kernel)}

    def source_compile_args() -> dict[str, Any]:
        args = own_source()
        cc = c_compiler()  # None off Linux, where TileLang's own arguments name another compiler
        return {**args, "cc": cc} if cc else args

    TVMFFIKernelCache._get_export_kwargs = staticmethod(export_kwargs)
    KernelCache._get_source_compile_args = staticmethod(source_compile_args)
