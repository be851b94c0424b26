"""Which compiler turns a kernel's device code into a cubin: NVRTC with precompiled headers where
NVRTC for Python loads (the default), else nvcc (TileLang's own); ``TILESEARCH_COMPILER=nvcc`` or
``=nvrtc`` chooses for a whole run.

Why NVRTC: nvcc parses TileLang's headers (CUTLASS and CuTe, some 115,000 preprocessed lines) again
for every kernel and has no precompiled headers. NVRTC keeps them in the process (``-pch``), so a
compile-pool worker, which compiles one kernel after another, parses them once. On the CPU machine
a GEMM kernel's device code took a median 0.41 s with NVRTC against 1.92 s with nvcc
(``scripts/nvrtc_probe.py``, RESULTS "NVRTC with precompiled headers"); on the H200 host README's
main command compiled its 48 kernels in 1.8-2.4 s each against 3.4-4.2 s with nvcc.

Why that is a choice and not a silent swap: the kernels are not the same. TileLang's NVRTC prelude
(``nvrtc_std.h``) and its ``__CUDACC_RTC__`` branches change the code (no cubin of 12 sampled was
identical); on an H200 the 12 kernels ran 0.983-1.058x as fast as nvcc's, 1.007x by geometric
mean, with the same results to the bit (``scripts/nvrtc_probe.py gpu=1``): not slower, so the
default, but other kernels. So a run measures, and hands back, the kernels of one
compiler only:

- the choice is part of a study's identity (:func:`describe`, recorded by
  :mod:`tilesearch.versions`), so an NVRTC study is never resumed under nvcc, and its export builds
  with NVRTC whatever the exporting process chose (:func:`using`, :func:`of_identity`);
- TileLang's caches (kernels and cubins, keyed by the program, not by the compiler) live in a
  folder of their own, ``$TILELANG_CACHE_DIR/nvrtc``;
- every process that compiles installs the same choice (:func:`install`, called by
  :meth:`tilesearch.records.Candidate.build`); its children inherit the variable.

A device code with compile options of its own (fast math, a ptxas register level, extra flags) or
for several architectures goes to nvcc, as does a code NVRTC rejects (logged once per process).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, wait
from typing import Any

from tilesearch.builder import pch
from tilesearch.builder.batch import _OWN_OPTIONS, _arch, _register, split
from tilesearch.errors import TilesearchError

VARIABLE = "TILESEARCH_COMPILER"
COMPILERS = ("nvcc", "nvrtc")
log = logging.getLogger(__name__)
# The TileLang headers a GEMM's or einsum-sum's device code includes (TileLang 0.1.15), every code a
# few of them. NVRTC keeps one precompiled header per distinct run of leading includes, so each code
# is given all of these (and any other it includes, once seen), in one order: one header for all.
COMMON_HEADERS = ("instruction/wgmma.h", "intrin.h", "barrier.h", "copy.h", "copy_sm90.h", "reduce.h", "scan.h",
                  "ldsm.h", "threadblock_swizzle.h", "debug.h")
_HEADER = re.compile(r"\s*#\s*include\s*<(tl_templates/[^>]+)>\s*$")

_installed: str | None = None
_base_cache: str | None = None  # TILELANG_CACHE_DIR before NVRTC's folder was chosen (None: unset)
_lock = threading.Lock()
_spent = [0.0]  # seconds inside NVRTC in this process
_warned: set[str] = set()
_shared: list[str] = []  # the headers every code is given in this process, in order
_headers: dict[str, Future[bytes]] = {}  # arch -> the compile that makes its precompiled header
_early: dict[str, tuple[str, list[str]]] = {}  # arch -> the recorded code and options its header began from


class CompilerError(TilesearchError):
    """``TILESEARCH_COMPILER`` names no compiler, or one this machine cannot run."""


def chosen() -> str:
    """The compiler ``TILESEARCH_COMPILER`` names; unset, NVRTC where it loads (:func:`available`),
    else nvcc."""
    name = os.environ.get(VARIABLE, "").strip().lower()
    if not name:
        return "nvrtc" if available() else "nvcc"
    if name not in COMPILERS:
        raise CompilerError(f"{VARIABLE}={name!r} names no compiler; use one of {', '.join(COMPILERS)}")
    return name


@functools.cache
def available() -> bool:
    """Whether NVRTC for Python loads here, in a version with precompiled headers (12.8 or later)."""
    try:
        _nvrtc_version()
    except CompilerError:
        return False
    return True


def describe() -> str:
    """The chosen compiler as a study's identity records it: ``nvcc``, or ``nvrtc-13.0`` with
    the NVRTC library's version (which decides the kernels as nvcc's version does)."""
    if chosen() == "nvcc":
        return "nvcc"
    major, minor = _nvrtc_version()
    return f"nvrtc-{major}.{minor}"


def install() -> None:
    """Makes this process compile device code with the chosen compiler, from its own TileLang
    cache folder. Idempotent; cheap after the first call."""
    global _installed, _base_cache
    name = chosen()
    if _installed == name:
        return
    with _lock:
        if _installed == name:
            return
        if name != (_installed or "nvcc"):
            _forget_compiled()
        if name == "nvrtc":
            _nvrtc_version()  # fails here, with a clear error, where NVRTC cannot load
            if _in_nvrtc_folder():  # a child has it from its parent
                _base_cache = os.path.dirname(os.path.normpath(os.environ["TILELANG_CACHE_DIR"]))
            else:
                _base_cache = os.environ.get("TILELANG_CACHE_DIR")
                os.environ["TILELANG_CACHE_DIR"] = nvrtc_folder()
            _register(compile_device_code)
        elif _installed == "nvrtc":  # back to nvcc in this process: TileLang's own hook and folder
            from tilelang.cuda import backend

            if _base_cache is None:
                os.environ.pop("TILELANG_CACHE_DIR", None)
            else:
                os.environ["TILELANG_CACHE_DIR"] = _base_cache
            _register(backend.tilelang_callback_cuda_compile)
        _installed = name


@contextlib.contextmanager
def using(name: str) -> Iterator[None]:
    """This process compiles with ``name`` inside, whatever ``TILESEARCH_COMPILER`` says outside:
    an export builds the kernel its study measured."""
    before = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = name
    try:
        install()
        yield
    finally:
        if before is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = before
        install()


def of_identity(identity: dict[str, Any] | None) -> str:
    """The compiler a study's identity records (``nvcc`` where it records none)."""
    return str((identity or {}).get("compiler", "nvcc")).split("-")[0]


def spent() -> float:
    """Seconds this process has spent inside NVRTC (in-process, so no subprocess timing sees it)."""
    return _spent[0]


def compile_device_code(code: Any, target: Any, pass_config: Any = None) -> bytearray:
    """TileLang's device-code compile hook, by NVRTC where it can (see the module docstring)."""
    from tilelang.cache.cuda_binary_cache import CUDABinaryCache
    from tilelang.cuda import backend

    config = dict(pass_config or {})
    arch = _arch(target)  # None: a code for several architectures
    if arch is None or any(config.get(key) for key in _OWN_OPTIONS):
        return backend.tilelang_callback_cuda_compile(code, target, pass_config)
    code = str(code)
    options = options_for(arch)
    key = CUDABinaryCache.make_key(code=code, target_kind=target.kind.name, target_arch=arch[3:],
                                   target_code=[arch], compile_format="cubin", options=options)
    cached = CUDABinaryCache.load(key, "cubin")
    if cached is not None:
        return bytearray(cached)
    wait_for_header(arch)
    try:
        try:
            cubin = nvrtc_cubin(shared_includes(code), options)
        except RuntimeError:  # a header of another's that this code cannot take: its own alone
            cubin = nvrtc_cubin(code, options)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "no log"
        if first not in _warned:
            _warned.add(first)
            log.warning("NVRTC did not compile a kernel, nvcc does (%s)", first[:200])
        return backend.tilelang_callback_cuda_compile(code, target, pass_config)
    CUDABinaryCache.save(key, "cubin", cubin)
    return bytearray(cubin)


def warm_up(arch: str = "sm_90a") -> None:
    """With NVRTC chosen, makes sure its precompiled header for ``arch`` is made or being made in
    this process (:func:`make_header`, in a thread): a compile-pool worker calls this as it
    starts, so that its first candidate does not pay for it (about 2 s of a 2.5 s compile on the CPU
    machine). A worker forked from :mod:`tilesearch.builder.warm` has the ``sm_90a`` header made;
    for another arch it lowers its first candidate while the header is made, and that
    candidate's device code waits for it. ``arch``: the architecture the run will compile for."""
    if chosen() != "nvrtc":
        return
    install()
    make_header(arch)


def make_header(arch: str, background: bool = True) -> Future[bytes]:
    """Makes NVRTC's precompiled header for ``arch`` in this process, whichever compiler is
    installed, in a thread of its own (NVRTC runs without Python's lock) or, not ``background``,
    now; the future of that compile (its error, where NVRTC cannot take TileLang's headers here).
    The header must follow the same lines as the kernels' own, so its code is that of a tiny
    TileLang program (:func:`header_code`). The process the compile pool is forked from makes it
    now (:mod:`tilesearch.builder.warm`): no thread may run where it forks."""
    with _lock:
        early = _early.pop(arch, None)
        if early is not None:  # begun from the recorded code: kept if that is still the code
            wait([_headers[arch]])
            if early == (header_code(arch), options_for(arch)):
                return _headers[arch]
            del _headers[arch]  # TileLang or the toolkit changed since: made again, recorded anew
        if arch not in _headers:
            _headers[arch] = _start_header(arch, header_code(arch), options_for(arch), background)
        return _headers[arch]


def early_header(arch: str) -> Future[bytes] | None:
    """Begins NVRTC's precompiled header for ``arch`` in a thread, before TileLang is imported,
    from the code and options the last process that made it here recorded (:func:`header_file`);
    None where none is recorded for this TileLang and NVRTC. The process the compile pool is forked
    from calls it first (:mod:`tilesearch.builder.warm`), so the header's 3 s run beside the 3.5 s
    of ``import tilelang`` instead of after it; :func:`make_header` then waits for it and keeps it
    if that is still the code a tiny program lowers to, or makes it again."""
    recorded = _recorded_header(arch)
    if recorded is None:
        return None
    with _lock:
        if arch not in _headers:
            _headers[arch] = _start_header(arch, *recorded, background=True, record=False)
            _early[arch] = recorded
        return _headers[arch]


def _start_header(arch: str, code: str, options: list[str], background: bool, record: bool = True) -> Future[bytes]:
    made: Future[bytes] = Future()
    made.set_running_or_notify_cancel()

    def compile_header() -> None:
        try:
            made.set_result(nvrtc_cubin(code, options, counted=False))
        except BaseException as exc:  # noqa: BLE001 - the kernel's own compile meets it again
            made.set_exception(exc)
            return
        if record:
            _record_header(arch, code, options)

    if background:
        threading.Thread(target=compile_header, name=f"nvrtc-header-{arch}", daemon=True).start()
    else:
        compile_header()
    return made


def nvrtc_folder() -> str:
    """NVRTC's TileLang cache folder: ``nvrtc`` under ``$TILELANG_CACHE_DIR`` (or TileLang's default),
    that folder itself in a process that has it from a parent that installed NVRTC."""
    base = os.environ.get("TILELANG_CACHE_DIR") or os.path.expanduser("~/.tilelang/cache")
    return os.path.normpath(base) if _in_nvrtc_folder() else os.path.join(base, "nvrtc")


def _in_nvrtc_folder() -> bool:
    base = os.environ.get("TILELANG_CACHE_DIR")
    return bool(base) and os.path.basename(os.path.normpath(base)) == "nvrtc"


def header_file(arch: str) -> str:
    """Where the header's code and options for ``arch`` are recorded (:func:`early_header`), beside
    the NVRTC kernels they serve."""
    return os.path.join(nvrtc_folder(), f"tilesearch-header-{arch}.json")


def _header_stamp() -> dict[str, Any]:
    """What the recorded header's code and options follow from, learnt without importing TileLang."""
    spec = importlib.util.find_spec("tilelang")
    return {"tilelang": importlib.metadata.version("tilelang"), "at": spec.origin if spec else None,
            "nvrtc": list(_nvrtc_version()), "headers": list(COMMON_HEADERS)}


def _recorded_header(arch: str) -> tuple[str, list[str]] | None:
    try:
        with open(header_file(arch)) as f:
            data = json.load(f)
        if data.get("stamp") != _header_stamp():
            return None
        code, options = data["code"], data["options"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, CompilerError,
            importlib.metadata.PackageNotFoundError):
        return None  # none yet, damaged or for another TileLang: the header is made after the import
    if not isinstance(code, str) or not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        return None
    return code, options


def _record_header(arch: str, code: str, options: list[str]) -> None:
    """Records what the header was made from for the next process (:func:`early_header`): written
    whole to a file beside it and renamed over the old, so a reader never sees half of one."""
    if _recorded_header(arch) == (code, options):
        return
    path, written = header_file(arch), None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), suffix=".tmp", delete=False) as f:
            written = f.name
            json.dump({"stamp": _header_stamp(), "code": code, "options": options}, f)
        os.replace(written, path)
    except (OSError, CompilerError, importlib.metadata.PackageNotFoundError) as exc:
        log.debug("NVRTC's header was not recorded at %s: %s", path, exc)
        if written is not None:
            with contextlib.suppress(OSError):
                os.unlink(written)


def wait_for_header(arch: str) -> None:
    """Waits for :func:`make_header`'s compile for ``arch``, if one was started: NVRTC uses a header
    only once it is made, and makes none while another is being made."""
    made = _headers.get(arch)
    if made is not None:
        wait([made])


@functools.cache
def header_code(arch: str) -> str:
    """The device code NVRTC's precompiled header is made from: a tiny TileLang program's,
    lowered and never compiled, its includes those every code is given (:func:`shared_includes`).
    The process the compile pool is forked from lowers it once (:mod:`tilesearch.builder.warm`)."""
    import tilelang
    import tilelang.language as T
    from tilelang.engine.lower import lower

    from tilesearch.target import Target

    @T.prim_func
    def copy(a: T.Tensor((128,), "float32"), b: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                b[i] = a[i]

    del tilelang  # imported first, for TVM
    target = Target.from_arch(arch).tvm()
    with target:
        return shared_includes(lower(copy, target=target).kernel_source)


def shared_includes(code: str) -> str:
    """``code`` with its unconditional TileLang includes replaced by the process's shared list
    (:data:`COMMON_HEADERS` and those codes have brought since), so that every code starts alike
    and NVRTC parses the headers once. The headers guard themselves (``#pragma once``); a code's
    kernels come out the same (``tests/test_compiler.py`` compares the cubins)."""
    if not _shared:
        from tilelang.env import TILELANG_TEMPLATE_PATH

        _shared.extend(f"tl_templates/cuda/{h}" for h in COMMON_HEADERS
                       if os.path.exists(os.path.join(TILELANG_TEMPLATE_PATH, "tl_templates", "cuda", h)))
    prefix, body = split(code)
    kept, at, depth = [], None, 0
    for line in prefix.splitlines(keepends=True):
        word = line.strip()
        depth += word.startswith("#if") - word.startswith("#endif")
        header = _HEADER.match(line)
        if header is None or depth:
            kept.append(line)
            continue
        if header.group(1) not in _shared:
            _shared.append(header.group(1))
        at = len(kept) if at is None else at
    if at is None:
        return code
    return "".join(kept[:at]) + "".join(f"#include <{h}>\n" for h in _shared) + "".join(kept[at:]) + body


def options_for(arch: str) -> list[str]:
    """NVRTC's options: those of TileLang's nvcc compile (C++20, line info, its include folders)
    and of its NVRTC backend (device functions by default, the CUDA headers' folders), with
    automatic precompiled headers."""
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH
    from tilelang.jit.adapter.nvrtc.include_paths import discover_cuda_include_paths

    includes = [TILELANG_TEMPLATE_PATH, CUTLASS_INCLUDE_DIR, *discover_cuda_include_paths(toolkit())]
    return [f"--gpu-architecture={arch}", "-std=c++20", "-lineinfo", "-default-device", "-pch",
            *("-I" + path for path in includes)]


@functools.cache
def toolkit() -> str:
    """The CUDA toolkit's folder, whose headers NVRTC needs: where the nvcc that TileLang runs
    says it is (``TOP`` in its ``--dryrun``), since that nvcc may be a wrapper script elsewhere
    (``/usr/local/bin/nvcc`` on the CI machines runs ``/usr/local/cuda-13.0/bin/nvcc``)."""
    from tilelang.contrib.nvcc import get_nvcc_compiler

    nvcc = get_nvcc_compiler()
    try:
        said = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                              capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        said = ""
    top = re.search(r"^#\$ TOP=(.+)$", said, re.M)
    return os.path.normpath(top.group(1).strip()) if top else os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))


def nvrtc_cubin(code: str, options: list[str], counted: bool = True) -> bytes:
    """``code`` compiled by NVRTC with ``options`` after TileLang's NVRTC prelude; RuntimeError
    with NVRTC's log if it fails. ``counted``: its seconds go to :func:`spent`, which a compile
    takes the difference of; the header's, made in a thread beside a candidate's lowering, are
    no candidate's (counted, they made a compile's compiler seconds exceed its wall time)."""
    import cuda.bindings.nvrtc as nvrtc

    source = ("#include <tl_templates/cuda/nvrtc_std.h>\n" + code).encode()
    options = pch.options(options)  # its headers in a folder that is cleaned, not NVRTC's own
    began = time.perf_counter()
    _, program = nvrtc.nvrtcCreateProgram(source, b"kernel.cu", 0, [], [])
    try:
        status = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])[0]
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            text = bytes(size)
            nvrtc.nvrtcGetProgramLog(program, text)
            raise RuntimeError(text.decode(errors="replace").strip()[-2000:])
        _, size = nvrtc.nvrtcGetCUBINSize(program)
        cubin = bytes(size)
        nvrtc.nvrtcGetCUBIN(program, cubin)
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(program)
        if counted:
            _spent[0] += time.perf_counter() - began


def _forget_compiled() -> None:
    """Empties TileLang's in-memory kernel caches: keyed by the program alone, they hold the other
    compiler's kernels after a switch (its disk caches are apart, see :func:`install`)."""
    from tilelang.cache.kernel_cache import KernelCache

    classes = [KernelCache]
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        instance = cls.__dict__.get("_instance")
        if instance is not None:
            instance._memory_cache.clear()


def _nvrtc_version() -> tuple[int, int]:
    try:
        import cuda.bindings.nvrtc as nvrtc

        status, major, minor = nvrtc.nvrtcVersion()
    except (ImportError, RuntimeError, OSError) as exc:
        raise CompilerError(f"{VARIABLE}=nvrtc needs NVRTC for Python: pip install 'cuda-bindings==<your CUDA "
                            f"major>.*' (and libnvrtc on the library path); it failed with: {exc}") from exc
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS or (major, minor) < (12, 8):
        raise CompilerError(f"{VARIABLE}=nvrtc needs NVRTC 12.8 or later (precompiled headers); found {major}.{minor}")
    return major, minor

