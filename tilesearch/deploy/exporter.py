"""Export: best correct trial of a problem -> compiled kernel -> artifact directory.

Call order: :func:`best_trial` reads the study (or studies) of the problem, :func:`export`
compiles the winning configuration with TileLang (its disk cache makes this cheap after tuning
on the same machine) and writes the library, the CUDA source and ``metadata.json`` through a
staging directory, so an interrupted export never leaves a half-written artifact.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilesearch import registry, versions
from tilesearch.database import (
    MissingStorageError,
    TrialRecord,
    TuningDatabase,
    check_study_name,
    find_studies,
    open_storage,
    storage_url,
)
from tilesearch.deploy.artifact import (
    LIBRARY,
    METADATA,
    SOURCE,
    ArtifactError,
    Metadata,
    TensorSpec,
    capability,
    seal,
)
from tilesearch.op import Operator, Problem
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
    import optuna

    if arch is not None:
        capability(arch)  # a bad name fails here, before any lookup
    where = storage_url(storage)
    if study is not None and (reason := check_study_name(study)):
        raise NoTrialError(reason)  # the claims side study holds tickets, not measurements
    try:
        opened = open_storage(storage, read_only=True)  # export reads the study and writes nothing to it
    except MissingStorageError as exc:
        raise NoTrialError(f"no study for {op.name} {problem.key} in {where} ({exc})") from None
    if study is not None:
        if study not in optuna.study.get_all_study_names(opened):
            raise NoTrialError(f"no study named {study!r} in {where}")
        names = [study]
    else:
        names = find_studies(opened, op.name, problem)
    if not names:
        raise NoTrialError(f"no study for {op.name} {problem.key} in {where}; run tilesearch tune first")
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
    operator = registry.load(op) if isinstance(op, str) else op
    if problem is None:
        problem = operator.problem(**params)
    elif not isinstance(problem, Problem):
        problem = operator.problem(**{**problem, **params})
    out = Path(out)
    _check_destination(out)
    choice = best_trial(operator, problem, storage=storage, study=study, arch=arch or _device_arch())
    kernel = operator.build(problem, choice.record.config, choice.target)
    if not hasattr(kernel, "export_library"):
        raise ArtifactError(
            f"{operator.name} {problem.key}: the best trial ({choice.record.config}) builds a "
            f"{type(kernel).__name__}, not one compiled kernel; export handles single kernels"
        )

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    staging.chmod(0o755)
    try:
        kernel.export_library(str(staging / LIBRARY))
        (staging / SOURCE).write_text(kernel.get_kernel_source())
        metadata = seal(staging, _metadata(operator, problem, choice, kernel))
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return metadata


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


def tensor_specs(operator: Operator, problem: Problem, kernel: Any) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Input and output specs of a compiled kernel launched as ``kernel(*inputs, *outputs)``.

    Shapes and dtypes come from the kernel's parameters; the split between inputs and outputs
    from the operator's ``make_outputs`` on the meta device, which must agree with them.
    """
    import torch

    prim = kernel.prim_func
    specs = []
    for var, param in zip(prim.params, kernel.params):
        buffer = prim.buffer_map.get(var)
        name = buffer.name if buffer is not None else str(var.name)
        try:
            shape = tuple(int(d) for d in param.shape)
        except TypeError:
            raise ArtifactError(f"{operator.name}: parameter {name} has a symbolic shape; only static shapes export") from None
        if not shape:
            raise ArtifactError(f"{operator.name}: parameter {name} is a scalar; only tensor arguments export")
        specs.append(TensorSpec(name, shape, str(param.torch_dtype()).removeprefix("torch.")))
    outputs = operator.make_outputs(problem, torch.device("meta"))
    n_in = len(specs) - len(outputs)
    expected = [(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in outputs]
    if n_in < 0 or [(s.shape, s.dtype) for s in specs[n_in:]] != expected:
        raise ArtifactError(
            f"{operator.name}: the kernel's last parameters {specs[max(n_in, 0):]} do not match "
            f"make_outputs {expected}"
        )
    return tuple(specs[:n_in]), tuple(specs[n_in:])


def _metadata(operator: Operator, problem: Problem, choice: Choice, kernel: Any) -> Metadata:
    import tilelang  # noqa: F401  (before tvm)
    import torch
    import tvm
    import tvm_ffi

    inputs, outputs = tensor_specs(operator, problem, kernel)
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
        entry=str(kernel.prim_func.attrs["global_symbol"]),
        inputs=inputs,
        outputs=outputs,
        versions=found,
        tuned_with=dict(choice.attrs.get("versions", {})),
        gpu=choice.attrs["target"].get("gpu"),
        latency_ms=record.latency_ms,
        baseline_ms=record.baseline_ms,
        speedup=record.speedup,
        tflops=record.tflops,
        study=choice.study,
        trial=record.number,
        trial_key=record.key,
        replayed=bool(record.replayed or choice.attrs.get("replayed")),
        synthetic=bool(record.attrs.get("synthetic")),
        exported_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
