"""One compiler run for the device code of many configurations.

Why: nvcc spends most of a configuration's compile parsing the same headers. On a 2-core CPU
machine (nvcc 13.0, an 8192^3 float16 GEMM configuration of 3.3 s), a translation unit holding
only TileLang's includes took 2.5 s of it (host-compiler preprocessing 0.7 s, ``cicc`` 1.8 s):
TileLang's templates pull in CUTLASS and CuTe, some 115,000 preprocessed lines, for every kernel.
nvcc has no precompiled headers, so the way to pay for them once is to compile many kernels in
one translation unit.

How, in a compile-pool worker (:func:`compile_batch`):

1. *meet*: each candidate's ``build`` (its operator's own) runs in a thread of its own, as TileLang's
   autotuner compiles, and waits where TileLang asks for its device code to be compiled (the
   ``tilelang_callback_cuda_compile`` hook), until every build has asked or ended (a candidate
   that TileLang's cache holds never asks). Lowering runs once per candidate, as alone.
2. *compile*: codes whose preprocessor prefixes differ at most in what they include go into one
   translation unit after all their prefixes (TileLang's headers have include guards), each
   kernel body in a namespace of its own and its ``__global__`` names suffixed, which
   ``nvcc --ptx`` compiles once; the PTX is cut into one module per candidate (its own entries
   under their own names again, the declarations they share) and each goes through ``ptxas``
   with the flags nvcc itself passes it.
3. *finish*: each waiting build gets its cubin from the hook and goes on (host code, TileLang's
   cache).

The kernels are the ones nvcc makes of each code alone: the tests compare the cubins byte for
byte but for their debug line tables and notes (:func:`code_sections`): code, launch data,
symbols and relocations alike. Whatever cannot go this way compiles as before, by TileLang's own hook:
codes with compile options of their own (fast math, a ptxas register level, extra flags), a
group of one, and a group whose translation unit fails (then its codes compile alone, so that the
error is the code's own).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

HOOK = "tilelang_callback_cuda_compile"
_GLOBAL = re.compile(r'__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(')
_INCLUDE = re.compile(r"\s*#\s*include\b")
_ENTRY = re.compile(r"\.entry\s+(\w+)")
_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.func\b", re.M)
_MANGLED = re.compile(r"(\d+)tsb(\d+)")  # namespace tsbN as C++ mangles it: 4tsb1 (4tsb16helperEv), 5tsb10
_OWN_OPTIONS = ("tl.enable_fast_math", "tl.ptxas_register_usage_level", "tl.device_compile_flags")


def compile_batch(builds: Sequence[Callable[[], Any]]) -> list[tuple[float, float, str | None]]:
    """Runs ``builds`` (each an operator's ``build`` of one candidate) in threads of their own,
    each paused where TileLang asks for its device code, compiles those codes together, and lets
    the builds finish on the cubins (see the module docstring). Per build: its share of the
    wall time, its share of the seconds in compiler processes, and its error, if it failed."""
    from tilelang.cuda import backend

    began = time.perf_counter()
    meeting = _Meeting(len(builds), backend.tilelang_callback_cuda_compile)
    _register(meeting.hook)
    try:
        threads = [threading.Thread(target=meeting.run, args=(i, build), name=f"build-{i}", daemon=True)
                   for i, build in enumerate(builds)]
        for thread in threads:
            thread.start()
        try:
            codes = meeting.codes()
            cubins, tools = compile_together([code for _, code in codes])
            meeting.serve({i: cubin for (i, _), cubin in zip(codes, cubins)})
        finally:
            meeting.serve({})  # no build waits for ever, whatever happened here
        for thread in threads:
            thread.join()
    finally:
        _register(backend.tilelang_callback_cuda_compile)
    share = (time.perf_counter() - began) / max(1, len(builds))
    return [(share, tools / max(1, len(builds)), error) for error in meeting.errors]


class _Meeting:
    """Where the builds of one batch wait with their device code for the shared compile."""

    def __init__(self, count: int, original: Callable[..., Any]) -> None:
        self.errors: list[str | None] = [None] * count
        self._count, self._original = count, original
        self._mine = threading.local()  # the index of the build that runs in this thread
        self._codes: dict[int, tuple[str, Any, Any]] = {}
        self._ended: set[int] = set()
        self._cubins: dict[int, bytes | None] | None = None
        self._changed = threading.Condition()

    def run(self, index: int, build: Callable[[], Any]) -> None:
        self._mine.index = index
        try:
            build()
        except Exception as exc:  # noqa: BLE001 - a failed build is data
            self.errors[index] = f"{type(exc).__name__}: {exc}"
        with self._changed:
            self._ended.add(index)
            self._changed.notify_all()

    def hook(self, code: str, target: Any, pass_config: Any = None) -> Any:
        """TileLang's compile hook while the batch builds: a build's first device code waits for
        the shared compile; any other (a second program of one build, a code left out) compiles
        alone, by TileLang's own hook."""
        index = getattr(self._mine, "index", None)
        with self._changed:
            if index is None or index in self._codes or self._cubins is not None:
                index = None
            else:
                self._codes[index] = (str(code), target, dict(pass_config or {}))
                self._changed.notify_all()
                self._changed.wait_for(lambda: self._cubins is not None)
                assert self._cubins is not None
                cubin = self._cubins.get(index)
                if cubin is not None:
                    return bytearray(cubin)
        return self._original(code, target, pass_config)

    def codes(self) -> list[tuple[int, tuple[str, Any, Any]]]:
        """The device codes, once every build has asked for its own or ended (a build found in
        TileLang's cache, one that failed, one with no device code)."""
        with self._changed:
            self._changed.wait_for(lambda: len(set(self._codes) | self._ended) == self._count)
            return sorted(self._codes.items())

    def serve(self, cubins: dict[int, bytes | None]) -> None:
        """Lets the waiting builds go on, with these cubins (the first call decides)."""
        with self._changed:
            if self._cubins is None:
                self._cubins = cubins
                self._changed.notify_all()


def _register(hook: Callable[..., Any]) -> None:
    import tilelang.cuda.backend  # noqa: F401 - its import registers TileLang's hook, over any set before
    import tvm_ffi

    tvm_ffi.register_global_func(HOOK, f=hook, override=True)


def compile_together(codes: Sequence[tuple[str, Any, Any]]) -> tuple[list[bytes | None], float]:
    """The cubin of each ``(code, target, pass_config)`` from translation units shared by codes
    with the same prefix and options, ``None`` for a code left to TileLang's own hook; and the
    seconds spent in nvcc and ptxas."""
    out: list[bytes | None] = [None] * len(codes)
    parts = [split(code) for code, _, _ in codes]
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (_, target, pass_config) in enumerate(codes):
        arch = _arch(target)
        if arch is None or any(pass_config.get(key) for key in _OWN_OPTIONS):
            continue
        prefix = parts[i][0]
        # prefixes that differ only in what they include share a unit (the headers have guards)
        directives = "".join(line for line in prefix.splitlines(keepends=True) if not _INCLUDE.match(line))
        groups.setdefault((directives, arch), []).append(i)
    spent = 0.0
    for (_, arch), members in groups.items():
        if len(members) < 2:
            continue
        prefixes = list(dict.fromkeys(parts[i][0] for i in members))
        began = time.perf_counter()
        cubins = _unit("".join(prefixes), [parts[i][1] for i in members], arch)
        spent += time.perf_counter() - began
        for i, cubin in zip(members, cubins):
            out[i] = cubin
    return out, spent


def split(code: str) -> tuple[str, str]:
    """A device code's prefix (its leading preprocessor lines and blank lines: the includes) and
    the rest (the kernels)."""
    lines = code.splitlines(keepends=True)
    n = 0
    while n < len(lines) and (not lines[n].strip() or lines[n].lstrip().startswith("#")):
        n += 1
    return "".join(lines[:n]), "".join(lines[n:])


def _arch(target: Any) -> str | None:
    """``sm_XX`` of a target that TileLang compiles to a cubin of one arch, else ``None``."""
    from tilelang.contrib import nvcc

    arch, code = nvcc.get_target_arch_and_code(target)
    if len(nvcc.get_target_code_list(code)) > 1 or nvcc.format_target_code_for_gencode(code) is not None:
        return None
    return f"sm_{arch}"


def _unit(prefix: str, bodies: Sequence[str], arch: str) -> list[bytes | None]:
    """One translation unit of ``bodies`` after ``prefix``, compiled by ``nvcc --ptx`` once and
    cut into one cubin per body; all ``None`` if it fails."""
    from tilelang.contrib.cc import get_cplus_compiler
    from tilelang.contrib.nvcc import get_nvcc_compiler
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH

    unit, names = prefix, []
    for i, body in enumerate(bodies):
        own = sorted(set(_GLOBAL.findall(body)))
        for name in own:
            body = re.sub(rf"\b{name}\b", f"{name}__tsb{i}", body)
        names.append(own)
        unit += f"\nnamespace tsb{i} {{\n{body}\n}}\n"
    nvcc = get_nvcc_compiler()
    beside = os.path.join(os.path.dirname(nvcc), "ptxas")  # the ptxas of that toolkit, as nvcc runs it
    ptxas = beside if os.path.exists(beside) else "ptxas"
    with tempfile.TemporaryDirectory(prefix="tilesearch-batch-") as tmp:
        source, ptx = os.path.join(tmp, "unit.cu"), os.path.join(tmp, "unit.ptx")
        with open(source, "w") as f:
            f.write(unit)
        done = subprocess.run([nvcc, f"-ccbin={get_cplus_compiler()}", "--ptx", "-O3", "-lineinfo",
                               f"-arch={arch}", "-std=c++20", "-w", "-I" + TILELANG_TEMPLATE_PATH,
                               "-I" + CUTLASS_INCLUDE_DIR, source, "-o", ptx], capture_output=True, text=True)
        if done.returncode != 0:
            return [None] * len(bodies)
        with open(ptx) as f:
            blocks = ptx_blocks(f.read())
        out: list[bytes | None] = []
        for i, own in enumerate(names):
            module = own_module(blocks, i, own)
            path = os.path.join(tmp, f"k{i}.ptx")
            with open(path, "w") as f:
                f.write(module)
            # the flags nvcc passes ptxas for --cubin -arch=sm_XX -lineinfo (nvcc --dryrun)
            done = subprocess.run([ptxas, "-w", f"-arch={arch}", "-m64", "--generate-line-info", path,
                                   "-o", path + ".cubin"], capture_output=True, text=True)
            if done.returncode != 0:
                out.append(None)
                continue
            with open(path + ".cubin", "rb") as f:
                out.append(f.read())
        return out


def ptx_blocks(ptx: str) -> list[str]:
    """A PTX module cut into its top-level statements: directives, declarations, and functions
    and entries whole (up to their closing brace)."""
    blocks, current, depth = [], [], 0
    for line in ptx.splitlines(keepends=True):
        current.append(line)
        depth += line.count("{") - line.count("}")
        stripped = line.strip()
        if depth == 0 and (not stripped or stripped.endswith(("}", ";"))
                           or stripped.startswith(("//", ".version", ".target", ".address_size"))):
            blocks.append("".join(current))
            current = []
    if current:
        blocks.append("".join(current))
    return blocks


def own_module(blocks: Sequence[str], index: int, names: Sequence[str]) -> str:
    """The PTX of body ``index`` alone: every block but the other bodies' entries and functions
    (those of their namespaces), its own entries under their names again."""
    kept = []
    for block in blocks:
        entry = _ENTRY.search(block)
        if entry is not None and not entry.group(1).endswith(f"__tsb{index}"):
            continue
        if entry is None and _FUNC.search(block) and _owner(block) not in (None, index):
            continue
        kept.append(block)
    text = "".join(kept)
    for name in names:
        text = re.sub(rf"\b{name}__tsb{index}(?=\b|_param_)", name, text)  # its parameters' names too
    return text


def _owner(block: str) -> int | None:
    """The body whose namespace a PTX function's name is in, if any."""
    for lengths, digits in _MANGLED.findall(block):  # the length runs into the digits before it
        for start in range(len(lengths)):
            own = int(lengths[start:]) - 3  # the digits of N that the name's length leaves
            if 1 <= own <= len(digits):
                return int(digits[:own])
    return None


def code_sections(cubin: bytes) -> dict[str, bytes]:
    """The sections of a cubin (ELF64) by name, all but the debug sections (line tables, which
    name the source file and its lines) and the notes (the toolkit's command line): the kernels'
    code, launch data, symbols and relocations."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]

    def name(offset: int) -> str:
        start = names_at + offset
        return cubin[start:cubin.index(b"\0", start)].decode()

    left_out = (".debug", ".nv_debug", ".rela.debug", ".note")
    return {name(h[0]): cubin[h[4]:h[4] + h[5]] if h[1] != 8 else b"%d" % h[5]  # 8: no bits, a size
            for h in headers if not name(h[0]).startswith(left_out)}
