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
"""

from __future__ import annotations

import functools
import os
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
def install() -> None:
    """Makes TileLang's kernel cache write host libraries this way in this process (the cache is
    where a compiled kernel's library is made; an export links its own, TVM's way)."""
    from tilelang.jit.adapter.kernel_cache import TVMFFIKernelCache

    own = TVMFFIKernelCache._get_export_kwargs

    def export_kwargs(kernel: Any) -> dict[str, Any]:
        return {"fpack_imports": pack_imports, **own(kernel)}

    TVMFFIKernelCache._get_export_kwargs = staticmethod(export_kwargs)
