"""One artifact for a whole size range: a kernel per bucket with M a run-time value, and the
dispatch table that picks one by the size of the call.

Layout: ``metadata.json`` (format ``tilesearch-dispatch/1``: the range, the buckets with their
configurations and sub-artifacts, the held-out regrets, and the SHA-256 of every sub-artifact's
``metadata.json``, which in turn covers its libraries) and one kernel artifact per distinct
configuration, ``bucket-0/``, ``bucket-1/``... Loading verifies everything, opens each
sub-artifact like a single kernel, and returns a :class:`Dispatch`: one callable for every size
in the range, registered as the op's ``torch.library`` op like any kernel, so under
``torch.compile(dynamic=True)`` the bucket is chosen at run time and a new M does not recompile.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from tilesearch.deploy.artifact import (
    METADATA,
    ArtifactError,
    BadTensorError,
    CorruptArtifactError,
    file_digest,
)
from tilesearch.deploy.kernel import Kernel

FORMAT = "tilesearch-dispatch/1"


def is_dispatch(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a dispatch artifact (rather than a single kernel)."""
    file = Path(path) / METADATA
    try:
        return json.loads(file.read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def export_range(result: Any, out: str | os.PathLike[str]) -> dict[str, Any]:
    """Writes a tuned range (:class:`~tilesearch.range_tuner.RangeResult`) as one artifact: each
    bucket's configuration compiled with the range's parameter as a run-time value. Returns the
    top-level metadata written."""
    from tilesearch import registry
    from tilesearch.buckets import config_key
    from tilesearch.database import TuningDatabase
    from tilesearch.deploy.exporter import Choice, staged, write
    from tilesearch.range_tuner import summary

    operator = registry.load(result.op)
    kernels: dict[str, tuple[Any, Choice]] = {}  # one kernel a distinct configuration, at its first tuned size
    for bucket in result.buckets:
        key = config_key(bucket.config)
        if key not in kernels:
            size = bucket.tuned[0]
            db = TuningDatabase(result.storage, result.studies[size])
            record = next(r for r in db.best(10**6) if config_key(r.config) == key)
            choice = Choice(db.name, record, dict(db.study.user_attrs))
            kernels[key] = (operator.problem(**{**result.params, result.name: size}), choice)
    if len(kernels) > 1:
        _compile_ahead(result, kernels.values())
    with staged(out) as staging:
        artifacts: dict[str, str] = {}
        table = []
        for bucket in result.buckets:
            key = config_key(bucket.config)
            if key not in artifacts:
                problem, choice = kernels[key]
                name = f"bucket-{len(artifacts)}"
                write(staging / name, operator, problem, choice, runtime=(result.name,))
                artifacts[key] = name
            table.append({**bucket.to_dict(), "artifact": artifacts[key]})
        metadata = {
            "format": FORMAT, "op": result.op, "name": result.name, "lo": result.lo, "hi": result.hi,
            "params": result.params, "key": result.key, "arch": result.arch, "gpu": result.gpu,
            "tolerance": result.tolerance, "replayed": result.replayed, "buckets": table,
            "heldout": [_regret_dict(r) for r in result.heldout], "summary": summary(result.heldout),
            "files": {f"{name}/{METADATA}": file_digest(staging / name / METADATA) for name in artifacts.values()},
        }
        metadata["content_hash"] = _content_hash(metadata)
        (staging / METADATA).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return metadata


def _compile_ahead(result: Any, kernels: Any) -> None:
    """Compiles the buckets' run-time kernels side by side in a compile pool, so that the export
    then finds them in TileLang's cache (:func:`~tilesearch.builder.compile_ahead`)."""
    from tilesearch.builder import LocalBuilder, compile_ahead
    from tilesearch.builder.local import default_workers
    from tilesearch.records import Candidate

    candidates = [Candidate(result.op, problem.to_dict(), dict(choice.record.config), choice.target,
                            runtime=(result.name,)) for problem, choice in kernels]
    with LocalBuilder(min(len(candidates), default_workers())) as builder:
        compile_ahead(builder, candidates)


def _regret_dict(regret: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {**asdict(regret), "regret": regret.regret, "vs_baseline": regret.vs_baseline}


def _content_hash(metadata: dict[str, Any]) -> str:
    data = {k: v for k, v in metadata.items() if k != "content_hash"}
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def read(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads and verifies a dispatch artifact's own metadata and its sub-artifacts' digests."""
    path = Path(path)
    try:
        metadata = json.loads((path / METADATA).read_text())
    except (OSError, ValueError) as exc:
        raise CorruptArtifactError(f"{path / METADATA} is unreadable: {exc}") from None
    if metadata.get("format") != FORMAT:
        raise ArtifactError(f"{path} is not a dispatch artifact (format {metadata.get('format')!r})")
    if _content_hash(metadata) != metadata.get("content_hash"):
        raise CorruptArtifactError(f"{path / METADATA} was modified after export (content hash mismatch); export again")
    for name, digest in metadata["files"].items():
        file = path / name
        if not file.is_file():
            raise CorruptArtifactError(f"{path} is missing {name}; export the range again")
        if file_digest(file) != digest:
            raise CorruptArtifactError(f"{file} does not match its SHA-256 in {METADATA}; export the range again")
    return metadata


def open_dispatch(path: str | os.PathLike[str], arch: str | None = None) -> Dispatch:
    """Verifies and opens a dispatch artifact (see :func:`tilesearch.load`)."""
    from tilesearch.deploy.loader import open_artifact

    path = Path(path)
    metadata = read(path)
    kernels = {name: open_artifact(path / name, arch=arch) for name in sorted({b["artifact"] for b in metadata["buckets"]})}
    return Dispatch(metadata, [kernels[b["artifact"]] for b in metadata["buckets"]], path)


class Dispatch(Kernel):
    """A kernel for every size of a range: the bucket's kernel holding the call's size runs.

    Checks and shape inference are the bucket kernels' (they share their tensor specs, with the
    range's parameter a run-time dimension); a size outside the range is refused.

    Attributes:
        table: the dispatch metadata (``buckets``, ``heldout``, ``summary``...).
        kernels: the bucket kernels, in bucket order.
    """

    def __init__(self, table: dict[str, Any], kernels: list[Any], path: Path | None = None) -> None:
        first = kernels[0].metadata
        if any(k.metadata.inputs != first.inputs or k.metadata.outputs != first.outputs for k in kernels):
            raise ArtifactError(f"{path}: the bucket kernels take different tensors; export the range again")
        self.table, self.kernels = table, kernels
        self._starts = [b["lo"] for b in table["buckets"]]
        self._symbol, self._where = table["name"], _where(first, table["name"])
        identity = replace(first, content_hash=table["content_hash"])
        super().__init__(identity, self._dispatch, path)

    def __repr__(self) -> str:
        t = self.table
        return f"Dispatch({t['op']} {t['key']}, {len(t['buckets'])} buckets, {t['arch']}, {self.id})"

    def bucket(self, size: int) -> int:
        """Index of the bucket holding ``size``."""
        lo, hi = self.table["lo"], self.table["hi"]
        if not lo <= size <= hi:
            raise BadTensorError(
                f"{self._symbol}={size} is outside the range {lo}..{hi} this kernel was tuned for; "
                f"tune and export a range that holds it"
            )
        return bisect.bisect_right(self._starts, size) - 1

    def _dispatch(self, *tensors: Any) -> None:
        index, axis = self._where
        self.kernels[self.bucket(int(tensors[index].shape[axis]))]._launch(*tensors)


def _where(metadata: Any, symbol: str) -> tuple[int, int]:
    """The input (index) and axis that give the size of ``symbol``."""
    for i, spec in enumerate(metadata.inputs):
        if symbol in spec.shape:
            return i, spec.shape.index(symbol)
    raise ArtifactError(f"no input of kernel {metadata.kernel_id} has the run-time dimension {symbol!r}")
