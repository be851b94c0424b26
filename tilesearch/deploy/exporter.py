"""Export: best correct trial of a problem -> compiled kernel -> artifact directory.

Call order: :func:`best_trial` reads the study (or studies) of the problem, :func:`write`
compiles the winning configuration with TileLang (its disk cache makes this cheap after tuning
on the same machine) and writes the libraries (one per kernel of a composite program), the CUDA
source and ``metadata.json`` through a staging directory, so an interrupted export never leaves
a half-written artifact.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilesearch import provenance, registry, versions
from tilesearch.builder import compiler
from tilesearch.composite import Composite, Launch, shape_to_json
from tilesearch.database import (
    MissingStorageError,
    NoStudyError,
    TrialRecord,
    TuningDatabase,
    check_study_name,
    open_storage,
    storage_url,
    studies_of,
)
from tilesearch.deploy.artifact import (
    KEPT,
    LIBRARY,
    METADATA,
    SOURCE,
    ArtifactError,
    LaunchSpec,
    Metadata,
    TensorSpec,
    capability,
    seal,
)
from tilesearch.op import Operator, Problem
from tilesearch.records import Candidate, figures
from tilesearch.target import Target


class NoTrialError(LookupError):
    """No study, or no correct trial, for the problem asked for."""


@dataclass(frozen=True)
class Choice:
    """The trial to export: its record, its study's name and the study's attributes."""

    study: str
    record: TrialRecord
    attrs: dict[str, Any]

    @property
    def target(self) -> Target:
        return Target.from_dict(self.attrs["target"])


def best_trial(
    op: Operator,
    problem: Problem,
    *,
    storage: str | None = None,
    study: str | None = None,
    arch: str | None = None,
    gpu: str | None = None,
) -> Choice:
    """The fastest correct trial for ``problem``.

    Looks in ``study`` if given, else in every study of the problem; ``arch`` keeps studies of
    GPUs with that compute capability. Measured studies win over replayed ones, then studies on
    the GPU named ``gpu`` over others of the same architecture, then the lower latency. Raises :class:`NoTrialError` when nothing qualifies, or when studies of
    several architectures qualify and ``arch`` does not say which.
    """

    if arch is not None:
        capability(arch)  # a bad name fails here, before any lookup
    where = storage_url(storage)
    if study is not None and (reason := check_study_name(study)):
        raise NoTrialError(reason)  # the claims side study holds tickets, not measurements
    try:
        opened = open_storage(storage, read_only=True)  # export reads the study and writes nothing to it
    except MissingStorageError as exc:
        raise NoTrialError(f"no study for {op.name} {problem.key} in {where} ({exc})") from None
    try:
        names = studies_of(opened, op.name, problem, study, where)
    except NoStudyError as exc:
        raise NoTrialError(str(exc)) from None
    found: list[Choice] = []
    other_archs: list[str] = []
    for name in names:
        db = TuningDatabase(opened, name, read_only=True)
        attrs = dict(db.study.user_attrs)
        if study is not None and (attrs.get("op"), attrs.get("problem")) != (op.name, problem.key):
            raise NoTrialError(f"study {name!r} is for {attrs.get('op')} {attrs.get('problem')}, not {op.name} {problem.key}")
        if arch is not None and capability(attrs["target"]["arch"]) != capability(arch):
            other_archs.append(attrs["target"]["arch"])
            continue
        best = db.best(1)
        if best:
            found.append(Choice(name, best[0], attrs))
    if not found and len(other_archs) == len(names):
        raise NoTrialError(
            f"{op.name} {problem.key} was tuned only for {', '.join(sorted(set(other_archs)))} in {where}, "
            f"not for {arch}; tune it on this GPU first"
        )
    if not found:
        raise NoTrialError(
            f"no correct trial for {op.name} {problem.key} in {where} (studies: {', '.join(names)}); "
            "tune it (more trials) first"
        )
    archs = sorted({c.attrs["target"]["arch"] for c in found})
    if len(archs) > 1:
        raise NoTrialError(
            f"{op.name} {problem.key} was tuned for several GPU architectures ({', '.join(archs)}); pass arch=..."
        )
    return min(found, key=lambda c: (bool(c.attrs.get("replayed")), c.attrs["target"].get("gpu") != gpu, c.record.latency_ms))


def export(
    op: str | Operator,
    problem: Problem | dict[str, Any] | None = None,
    *,
    out: str | os.PathLike[str],
    storage: str | None = None,
    study: str | None = None,
    arch: str | None = None,
    **params: Any,
) -> Metadata:
    """Compiles the best correct trial of a problem and writes it to the directory ``out``.

    ``params`` are the problem's parameters (``m=4096, n=4096, k=4096, dtype="float16"``), or
    pass ``problem``. ``storage``, ``study`` and ``arch`` pick the trial as in :func:`best_trial`;
    by default ``arch`` is the current CUDA device's, if there is one. An existing artifact in
    ``out`` is replaced; any other existing non-empty directory is refused.

    Returns the metadata written. Raises :class:`NoTrialError` if there is no correct trial.
    """
    operator = registry.load(op) if isinstance(op, str) else registry.check(op)
    if problem is None:
        problem = operator.problem(**params)
    elif not isinstance(problem, Problem):
        problem = operator.problem(**{**problem, **params})
    choice = best_trial(operator, problem, storage=storage, study=study, arch=arch or _device_arch())
    return write(out, operator, problem, choice)


def write(
    out: str | os.PathLike[str], operator: Operator, problem: Problem, choice: Choice, runtime: tuple[str, ...] = ()
) -> Metadata:
    """Compiles ``choice``'s configuration and writes its artifact to ``out``: every kernel of the
    program (one, or a :class:`~tilesearch.composite.Composite`'s several) as a library, their
    sources, and the metadata with the launch list and workspaces. ``runtime`` names problem
    parameters compiled as run-time values (see :attr:`Operator.runtime_params`).

    Writes through a staging directory, so an interrupted export leaves no half-written artifact.
    """
    # the compiler the study measured with, whatever this process would choose (builder/compiler.py)
    with compiler.using(compiler.of_identity(choice.attrs.get(provenance.IDENTITY_ATTR))):
        kernel = Candidate(operator.name, problem.to_dict(), dict(choice.record.config), choice.target,
                           runtime=runtime).build(operator)
        program = as_composite(operator, problem, kernel)
        return _write(out, operator, problem, choice, program)


def _write(out: str | os.PathLike[str], operator: Operator, problem: Problem, choice: Choice, program: Composite) -> Metadata:
    with staged(out) as staging:
        libraries: dict[int, str] = {}
        for launch in program.launches:
            if id(launch.kernel) not in libraries:
                name = LIBRARY if not libraries else f"kernel-{len(libraries)}.so"
                launch.kernel.export_library(str(staging / name))
                libraries[id(launch.kernel)] = name
        (staging / SOURCE).write_text(program.get_kernel_source())
        return seal(staging, _metadata(operator, problem, choice, program, libraries))


@contextlib.contextmanager
def staged(out: str | os.PathLike[str]) -> Iterator[Path]:
    """A staging directory beside ``out`` that replaces ``out`` when the block ends without an
    error, and is removed when it raises: an interrupted export leaves no half-written artifact.
    An existing artifact in ``out`` is replaced; another non-empty directory is refused."""
    out = Path(out)
    _check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    staging.chmod(0o755)
    try:
        yield staging
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def as_composite(operator: Operator, problem: Problem, kernel: Any) -> Composite:
    """``kernel`` as a :class:`Composite`: itself if it is one, else its one launch with the
    parameters' names, the last ``len(make_outputs)`` of them outputs."""
    import torch

    if isinstance(kernel, Composite):
        return kernel
    if not hasattr(kernel, "export_library"):
        raise ArtifactError(
            f"{operator.name} {problem.key}: build returned a {type(kernel).__name__}, which is neither a compiled "
            "TileLang kernel nor a tilesearch.composite.Composite of them; export cannot write it"
        )
    names = tuple(name for name, _, _ in _params(operator, kernel))
    n_out = len(operator.make_outputs(problem, torch.device("meta")))
    return Composite([Launch(kernel, names)], inputs=names[:-n_out], outputs=names[-n_out:])


def _check_destination(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"out={out} is a file; give a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / METADATA).is_file():
        raise ArtifactError(f"out={out} is a non-empty directory that is not a kernel artifact; choose another")


def _device_arch() -> str | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    from tilesearch.target import detect

    return detect().arch


def _params(operator: Operator, kernel: Any) -> list[tuple[str, tuple[int | str, ...], str]]:
    """Name, shape (a run-time dimension as its symbol's name) and torch dtype name of each
    parameter of a compiled kernel."""
    prim = kernel.prim_func
    found = []
    for var, param in zip(prim.params, kernel.params):
        buffer = prim.buffer_map.get(var)
        name = _text(buffer.name if buffer is not None else var.name)
        shape = tuple(int(d) if _is_int(d) else _text(d) for d in param.shape)
        if not shape:
            raise ArtifactError(f"{operator.name}: parameter {name} is a scalar; only tensor arguments export")
        found.append((name, shape, str(param.torch_dtype()).removeprefix("torch.")))
    return found


def _text(value: Any) -> str:
    """A plain ``str``: TVM-FFI's ``String`` (what ``str`` of a TIR variable returns) crashes
    the process when ``dataclasses.asdict`` deep-copies it."""
    return "".join([str(value)])


def _is_int(dim: Any) -> bool:
    try:
        int(dim)
    except TypeError:
        return False
    return True


def tensor_specs(
    operator: Operator, problem: Problem, program: Composite
) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Input and output specs of a program launched as ``program(*inputs, *outputs)``.

    Shapes and dtypes come from the parameters of the kernels that take each tensor, which must
    agree with each other and, where static, with the operator's ``make_outputs`` on the meta
    device.
    """
    import torch

    seen: dict[str, TensorSpec] = {}
    for launch in program.launches:
        for arg, (_, shape, dtype) in zip(launch.args, _params(operator, launch.kernel)):
            spec = TensorSpec(arg, shape, dtype)
            if seen.setdefault(arg, spec) != spec:
                raise ArtifactError(f"{operator.name}: {arg} is {seen[arg]} in one kernel and {spec} in another")
    missing = [n for n in (*program.inputs, *program.outputs) if n not in seen]
    if missing:
        raise ArtifactError(f"{operator.name}: no kernel of the program takes {missing[0]}")
    inputs = tuple(seen[n] for n in program.inputs)
    outputs = tuple(seen[n] for n in program.outputs)
    expected = operator.make_outputs(problem, torch.device("meta"))
    fits = len(expected) == len(outputs) and all(
        str(t.dtype).removeprefix("torch.") == s.dtype
        and len(t.shape) == len(s.shape)
        and all(isinstance(d, str) or d == e for d, e in zip(s.shape, t.shape))
        for t, s in zip(expected, outputs)
    )
    if not fits:
        got = [(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in expected]
        raise ArtifactError(f"{operator.name}: the program's outputs {outputs} do not match make_outputs {got}")
    return inputs, outputs


def _sizes(inputs: tuple[TensorSpec, ...]) -> dict[str, list[Any]]:
    """Run-time dimension symbol -> ``[input name, axis]`` of its first appearance."""
    sizes: dict[str, list[Any]] = {}
    for spec in inputs:
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, str):
                sizes.setdefault(dim, [spec.name, axis])
    return sizes


def _metadata(
    operator: Operator, problem: Problem, choice: Choice, program: Composite, libraries: dict[int, str]
) -> Metadata:
    import tilelang  # noqa: F401  (before tvm)
    import torch
    import tvm
    import tvm_ffi

    inputs, outputs = tensor_specs(operator, problem, program)
    launches = tuple(
        LaunchSpec(libraries[id(launch.kernel)], _text(launch.kernel.prim_func.attrs["global_symbol"]), launch.args)
        for launch in program.launches
    )
    workspaces = tuple(TensorSpec(w.name, tuple(shape_to_json(w.shape)), w.dtype, w.zeroed)
                       for w in program.workspaces.specs)
    record = choice.record
    found = versions.collect()
    found.update(tvm=tvm.__version__, tvm_ffi=tvm_ffi.__version__, torch_cuda=torch.version.cuda or "none")
    return Metadata(
        op=operator.name,
        params=problem.to_dict(),
        dtype=problem.get("dtype"),
        layout=problem.get("layout"),
        config=dict(record.config),
        arch=choice.target.arch,
        entry=launches[0].entry,
        inputs=inputs,
        outputs=outputs,
        launches=launches,
        workspaces=workspaces,
        sizes=_sizes(inputs),
        versions=found,
        tuned_with=dict(choice.attrs.get("versions", {})),
        gpu=choice.attrs["target"].get("gpu"),
        **figures(record, KEPT),
        study=choice.study,
        trial=record.number,
        trial_key=record.key,
        replayed=bool(record.replayed or choice.attrs.get("replayed")),
        synthetic=bool(record.attrs.get("synthetic")),
        exported_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
