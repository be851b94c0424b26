"""The kernel artifact on disk: a directory with the compiled library and ``metadata.json``.

``kernel.so`` is TVM-FFI's exported library (host launcher plus the embedded CUDA binary), which
loads with ``tvm_ffi.load_module`` and no compiler; ``kernel.cu`` is the CUDA source it was built
from, kept for reading. A composite program (:mod:`tilesearch.composite`: split-K with its
workspace, a reduce kernel then a GEMM) has one library per launch, ``kernel.so``,
``kernel-1.so``..., and its metadata lists the launches with their arguments and the
workspaces. A dimension that is a run-time value (``M`` of a kernel compiled for a range of M)
is written as its symbol's name (``"m"``) in a shape; a workspace dimension that follows it, as
``"m:128"`` (``m`` rounded up to a multiple of 128). ``metadata.json`` says what the kernel computes, for which GPU, with which
software, how fast it was measured, and the SHA-256 of every file; its ``content_hash`` covers
those digests and every other metadata field, so a changed byte anywhere is caught at load.

Nothing here imports torch or TileLang.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tilesearch.errors import TilesearchError

FORMAT = "tilesearch-kernel/2"
READABLE = ("tilesearch-kernel/1", FORMAT)  # /1: one kernel, no launches or workspaces listed
METADATA = "metadata.json"
LIBRARY = "kernel.so"
SOURCE = "kernel.cu"
MEMORY_LAYOUT = "row-major contiguous"
KEPT = ("latency_ms", "baseline_ms", "speedup", "tflops")  # the Figures that metadata.json keeps (formats 1 and 2)


class ArtifactError(TilesearchError, RuntimeError):
    """An artifact that cannot be written or used."""


class CorruptArtifactError(ArtifactError):
    """An artifact whose files do not match the hashes in its metadata, or are missing."""


class ArchitectureError(ArtifactError):
    """An artifact compiled for another GPU architecture than the device it would run on."""


class BadTensorError(ValueError):
    """A tensor argument that the kernel was not built for (shape, dtype, device or layout)."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the kernel: its name, shape and torch dtype name (``float16``). A dimension
    that is a run-time value is its symbol's name (``"m"``, or ``"m:128"`` in a workspace).
    ``zeroed``: a workspace allocated as zeros (:class:`tilesearch.composite.Workspace`); written
    to ``metadata.json`` only where true, so the artifacts before it hash as they did."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    zeroed: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TensorSpec:
        shape = tuple(d if isinstance(d, str) else int(d) for d in data["shape"])
        return cls(str(data["name"]), shape, str(data["dtype"]), bool(data.get("zeroed", False)))

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        return data | {"zeroed": True} if self.zeroed else data


@dataclass(frozen=True)
class LaunchSpec:
    """One kernel launch of the artifact: its library file, its function, its arguments by name
    (inputs, outputs and workspaces)."""

    library: str
    entry: str
    args: tuple[str, ...]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchSpec:
        return cls(str(data["library"]), str(data["entry"]), tuple(str(a) for a in data["args"]))


@dataclass(frozen=True)
class Metadata:
    """Everything ``metadata.json`` holds.

    Attributes:
        op: operator name (``gemm``).
        params: the problem's parameters (``m``, ``n``, ``k``, ``dtype``, ``layout``).
        dtype: the problem's ``dtype`` parameter, if it has one.
        layout: the problem's ``layout`` parameter (``nn``/``nt`` for GEMM), if it has one.
        memory_layout: how tensors must be laid out in memory.
        config: the knob values of the tuned configuration.
        arch: CUDA architecture the kernel was compiled for (``sm_90a``).
        entry: the first launch's function name (in ``kernel.so``).
        inputs: tensors the caller passes, in order.
        outputs: tensors the kernel writes, after the inputs in the launch.
        launches: the kernels in launch order (one, for a single kernel).
        workspaces: scratch tensors of a composite program, allocated once per device.
        sizes: run-time dimension symbol -> ``[input name, axis]`` that gives its size.
        versions: software the artifact was built with (TileLang, TVM, TVM-FFI, torch, CUDA...).
        tuned_with: software versions of the tuning study.
        gpu: GPU the configuration was measured on.
        latency_ms, baseline_ms, speedup, tflops: its figures in the study (:data:`KEPT`, as
            :class:`tilesearch.records.Figures` defines them: median latency, the op's PyTorch
            baseline timed beside it, their ratio, achieved throughput).
        study: the Optuna study the trial comes from.
        trial: the trial's number in that study.
        trial_key: the trial's content key (op, problem, config, arch).
        replayed: the study's figures were served from a recorded dataset, not measured by it.
        synthetic: the figures are made up (a test), not measurements at all.
        exported_at: local time of the export.
        files: file name -> SHA-256 of every file in the artifact but this one.
        content_hash: SHA-256 over all fields above (see :func:`content_hash`).
    """

    op: str
    params: dict[str, Any]
    config: dict[str, Any]
    arch: str
    entry: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    launches: tuple[LaunchSpec, ...] = ()
    workspaces: tuple[TensorSpec, ...] = ()
    sizes: dict[str, list[Any]] = field(default_factory=dict)
    dtype: str | None = None
    layout: str | None = None
    memory_layout: str = MEMORY_LAYOUT
    versions: dict[str, str] = field(default_factory=dict)
    tuned_with: dict[str, str] = field(default_factory=dict)
    gpu: str | None = None
    latency_ms: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    tflops: float | None = None
    study: str | None = None
    trial: int | None = None
    trial_key: str | None = None
    replayed: bool = False
    synthetic: bool = False
    exported_at: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    content_hash: str = ""
    format: str = FORMAT

    @property
    def problem_key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def kernel_id(self) -> str:
        """Short name of this exact kernel: op and the first 16 hex digits of its hash."""
        return f"{self.op}-{self.content_hash[:16]}"

    @property
    def launch_list(self) -> tuple[LaunchSpec, ...]:
        """The launches; a format-1 artifact's one kernel takes the inputs, then the outputs."""
        if self.launches:
            return self.launches
        return (LaunchSpec(LIBRARY, self.entry, tuple(t.name for t in (*self.inputs, *self.outputs))),)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("inputs", "outputs", "workspaces"):
            data[key] = [t.to_dict() for t in getattr(self, key)]
        data["launches"] = [asdict(launch) | {"args": list(launch.args)} for launch in self.launches]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Metadata:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("inputs", "outputs", "workspaces"):
            values[key] = tuple(TensorSpec.from_dict(t) for t in data.get(key, ()))
        values["launches"] = tuple(LaunchSpec.from_dict(launch) for launch in data.get("launches", ()))
        return cls(**values)


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def content_hash(metadata: Metadata) -> str:
    """SHA-256 of the metadata's canonical JSON, ``content_hash`` itself left out."""
    data = metadata.to_dict()
    data.pop("content_hash")
    if metadata.format == READABLE[0]:  # the fields format 2 added were not there to hash
        for key in ("launches", "workspaces", "sizes"):
            data.pop(key)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(directory: str | Path, metadata: Metadata) -> Metadata:
    """Hashes every file in ``directory``, then writes ``metadata.json`` with the digests."""
    directory = Path(directory)
    files = {
        p.name: file_digest(p) for p in sorted(directory.iterdir()) if p.is_file() and p.name != METADATA
    }
    sealed = replace(metadata, files=files, content_hash="")
    sealed = replace(sealed, content_hash=content_hash(sealed))
    (directory / METADATA).write_text(json.dumps(sealed.to_dict(), indent=2) + "\n")
    return sealed


def read(directory: str | Path) -> Metadata:
    """Reads and verifies an artifact. Raises :class:`CorruptArtifactError` if any file is
    missing or differs from its recorded hash, or the metadata was edited."""
    directory = Path(directory)
    path = directory / METADATA
    if not directory.is_dir():
        raise ArtifactError(f"{directory} is not a directory; export a kernel there with tilesearch export")
    if not path.is_file():
        raise CorruptArtifactError(f"{directory} has no {METADATA}: not a tilesearch kernel artifact")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ArtifactError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise CorruptArtifactError(f"{path} is not JSON ({exc}); export the kernel again") from None
    problem = _shape_problem(data)
    if problem:
        raise CorruptArtifactError(f"{path}: {problem}; export the kernel again")
    try:
        metadata = Metadata.from_dict(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptArtifactError(f"{path} is unreadable: {exc!r}; export the kernel again") from None
    if metadata.format not in READABLE:
        raise ArtifactError(f"{directory} has format {metadata.format!r}; this tilesearch reads {', '.join(READABLE)}")
    for launch in metadata.launch_list:
        if launch.library not in metadata.files:
            raise CorruptArtifactError(f"{path} lists no {launch.library}")
    for name, expected in metadata.files.items():
        file = directory / name
        if not file.is_file():
            raise CorruptArtifactError(f"{directory} is missing {name}; export the kernel again")
        if file_digest(file) != expected:
            raise CorruptArtifactError(
                f"{file} does not match its SHA-256 in {METADATA} (corrupted or modified); export the kernel again"
            )
    if content_hash(metadata) != metadata.content_hash:
        raise CorruptArtifactError(f"{path} was modified after export (content hash mismatch); export the kernel again")
    return metadata


def _shape_problem(data: Any) -> str | None:
    """What is wrong with the shape of a parsed ``metadata.json``, or ``None``."""
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not an object"
    files = data.get("files")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return '"files" must map file names to SHA-256 digests'
    if any(Path(name).name != name or name in ("", ".", "..") for name in files):
        return '"files" may name only files inside the artifact'
    for name in ("inputs", "outputs"):
        if not isinstance(data.get(name), list) or not all(isinstance(t, dict) for t in data[name]):
            return f'"{name}" must be a list of tensor objects'
    for name in ("op", "arch", "entry", "content_hash"):
        if not isinstance(data.get(name), str):
            return f'"{name}" must be text'
    for name in ("params", "config"):
        if not isinstance(data.get(name), dict):
            return f'"{name}" must be an object'
    return None


def capability(arch: str) -> tuple[int, int]:
    """``sm_90a`` -> ``(9, 0)``; ``sm_120`` -> ``(12, 0)``."""
    match = re.fullmatch(r"sm_(\d+)(\d)[a-z]?", arch)
    if not match:
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected e.g. sm_90a)")
    return int(match.group(1)), int(match.group(2))


def check_arch(metadata: Metadata, device_arch: str, where: str = "this device") -> None:
    """Raises :class:`ArchitectureError` unless the kernel's binary runs on ``device_arch``.

    TileLang embeds a cubin (no PTX), which runs only on the compute capability it was built for.
    """
    if capability(metadata.arch) != capability(device_arch):
        measured = f", tuned on {metadata.gpu}" if metadata.gpu else ""
        raise ArchitectureError(
            f"kernel {metadata.kernel_id} was compiled for {metadata.arch}{measured}, but {where} is "
            f"{device_arch}; tune and export {metadata.op} {metadata.problem_key} on this GPU"
        )
