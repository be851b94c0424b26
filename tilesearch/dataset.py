"""Replay datasets: every configuration of a (sub-)space measured once, kept as a file.

A dataset is one sweep of one problem of one op on one GPU, written as JSON lines, gzip'd when
the file name ends in ``.gz`` (``experiments/data/*.jsonl.gz``). The first line is the header,
every further line one configuration::

    {"type": "header", "format": "tilesearch-sweep", "version": 2, "op": "gemm",
     "problem": {"m": 8192, ...}, "problem_key": "m=8192,...", "target": {"arch": "sm_90a", ...},
     "gpu": "NVIDIA H100 80GB HBM3", "date": "2025-...Z", "tilesearch_commit": "8211927...",
     "versions": {"tilelang": "0.1.15", ...}, "knobs": {"block_m": [64, 128, 256], ...},
     "valid_configs": 504, "complete": true, "measure": {...}, "notes": "...", "sample": null}
    {"type": "row", "config": {"block_m": 128, ...}, "status": "ok", "error": null,
     "latency_ms": 1.23, "tflops": 893.1, "baseline_ms": 1.31, "speedup": 1.06,
     "rel_err": 0.0004, "compile_s": 4.1, "measure_s": 0.9}

``status`` is a :class:`~tilesearch.records.Status` value; figures a configuration does not have
(a compile error has no latency) are ``null``. ``error`` is cut to :data:`ERROR_CHARS` characters.
``knobs`` lists the values swept per knob; rows are the configurations of their product that
the op's constraints accept (``valid_configs`` of them; ``complete`` says whether all were
recorded). Version 2 adds ``sample``: ``null`` for such a sweep, else how the rows were chosen
from the valid configurations (``method``, ``seed``, ``uniform``: configurations drawn
uniformly, ``neighbours_of``: the best of those whose one-knob neighbours were added,
``planned``: rows planned in all; ``complete`` then compares with ``planned``); the space of a
sampled dataset is its rows (:meth:`Dataset.restrict`). Version-1 files (no ``sample``) are
read as sweeps. ``experiments/data/README.md`` describes the same format for readers of the data.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tilesearch.errors import TilesearchError
from tilesearch.records import Figures, Status, figures, has_result, is_correct
from tilesearch.space import Categorical, Config, IntRange, Knob, PowerOfTwo, Space, config_key

FORMAT = "tilesearch-sweep"
VERSION = 2  # 2 added ``sample``: how the rows were chosen when they are not every valid configuration
READABLE = (1, 2)
ERROR_CHARS = 300
# the figures (:class:`~tilesearch.records.Figures`, declared there once) that a row keeps in the
# file, then the row's own compile and measure times; the intervals and GPU readings are not kept
# (format versions 1 and 2)
KEPT = ("latency_ms", "tflops", "baseline_ms", "speedup", "rel_err")
FIGURES = (*KEPT, "compile_s", "measure_s")


class DatasetError(TilesearchError, ValueError):
    """A file that is not a tilesearch sweep, or a row that does not fit its header."""


@dataclass(frozen=True)
class Row(Figures):
    """One configuration's outcome: its status and error, its :class:`~tilesearch.records.Figures`
    (those of :data:`KEPT` are written; the others are ``None`` when read back) and the times it
    took to compile and measure."""

    config: Config
    status: str
    error: str | None = None
    compile_s: float | None = None
    measure_s: float | None = None

    @property
    def ok(self) -> bool:
        """Measured correct (:func:`tilesearch.records.is_correct`)."""
        return is_correct(self)

    def to_json(self) -> dict[str, Any]:
        error = self.error if self.error is None else short_error(self.error)
        return {"type": "row", "config": self.config, "status": self.status, "error": error,
                **{name: getattr(self, name) for name in FIGURES}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Row:
        return cls(config=dict(data["config"]), status=str(data["status"]), error=data.get("error"),
                   **{name: data.get(name) for name in FIGURES})


@dataclass(frozen=True)
class Dataset:
    """A header (``meta``) and its rows; rows are looked up by configuration."""

    meta: dict[str, Any]
    rows: tuple[Row, ...]
    path: str | None = None
    _index: dict[str, Row] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({config_key(r.config): r for r in self.rows})

    @property
    def op(self) -> str:
        return self.meta["op"]

    @property
    def problem(self) -> dict[str, Any]:
        return dict(self.meta["problem"])

    @property
    def knobs(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in self.meta["knobs"].items()}

    @property
    def name(self) -> str:
        return Path(self.path).name.split(".")[0] if self.path else self.meta.get("problem_key", "dataset")

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, config: Mapping[str, Any]) -> Row | None:
        return self._index.get(config_key(config))

    def ok_rows(self) -> list[Row]:
        return [r for r in self.rows if r.ok]

    def best(self) -> Row:
        ok = self.ok_rows()
        if not ok:
            raise DatasetError(f"{self.path or 'dataset'} has no correct configuration")
        return min(ok, key=lambda r: r.latency_ms)

    def restrict(self, space: Space) -> Space:
        """``space`` with each knob narrowed to the values this dataset swept (constraints kept).

        Knobs of ``space`` that the dataset does not sweep are left out: the op's template runs
        them at their defaults, as it did when the dataset was recorded (an op adds knobs with
        defaults that reproduce its earlier kernels)."""
        knobs = self.knobs
        if not set(knobs) <= set(space.names):
            raise DatasetError(f"{self.name} sweeps knobs {sorted(knobs)}; the space has {sorted(space.names)}")
        common = {name: [v for v in space[name].values() if v in values] for name, values in knobs.items()}
        empty = [name for name, values in common.items() if not values]
        if empty:
            raise DatasetError(f"{self.name} has no value of {empty} that the space allows")
        swept = sweep(space, common)
        if not self.sampled:
            return swept
        # a sample: the space is the recorded configurations, so that a search can only ask for
        # what the file can answer (and its best is the best of that space)
        recorded = self._index

        def in_sample(config: Mapping[str, Any]) -> str | None:
            return None if config_key(config) in recorded else "not in the dataset's sample"

        return Space(swept.knobs, (in_sample, *swept.constraints))  # the cheap check first: it rejects most

    @property
    def sampled(self) -> bool:
        """Whether the rows are a sample of the valid configurations (header ``sample``, version 2)."""
        return bool(self.meta.get("sample"))


def project(space: Space, names: Iterable[str]) -> Space:
    """The sub-space of ``space`` with only the knobs ``names`` (constraints kept); the template's
    defaults stand in for the knobs left out."""
    keep = set(names)
    unknown = sorted(keep - set(space.names))
    if unknown:
        raise DatasetError(f"knobs {unknown} are not in the space {list(space.names)}")
    return Space([k for k in space.knobs if k.name in keep], space.constraints)


def sweep(space: Space, knobs: Mapping[str, Sequence[Any]]) -> Space:
    """The sub-space that sweeps exactly ``knobs`` over their listed values: :func:`project` then
    :func:`narrow`."""
    return narrow(project(space, knobs), knobs)


def narrow(space: Space, knobs: Mapping[str, Sequence[Any]]) -> Space:
    """The sub-space of ``space`` whose knobs take only the listed values (constraints kept);
    a knob not listed keeps all its values."""
    unknown = sorted(set(knobs) - set(space.names))
    if unknown:
        raise DatasetError(f"knobs {unknown} are not in the space {list(space.names)}")
    narrowed = []
    for knob in space.knobs:
        if knob.name not in knobs:
            narrowed.append(knob)
            continue
        extra = [v for v in knobs[knob.name] if v not in knob.values()]
        if extra:
            raise DatasetError(f"values {extra} of {knob.name} are not in the space ({knob.describe()})")
        narrowed.append(_subset(knob, tuple(v for v in knob.values() if v in knobs[knob.name])))
    return Space(narrowed, space.constraints)


def _subset(knob: Knob, values: tuple[Any, ...]) -> Knob:
    """A knob of the same kind over ``values`` where they still form one (so that samplers see
    ordered knobs as ordered), else a categorical one."""
    if isinstance(knob, PowerOfTwo) and values == PowerOfTwo(knob.name, values[0], values[-1]).values():
        return PowerOfTwo(knob.name, values[0], values[-1])
    if isinstance(knob, IntRange):
        step = values[1] - values[0] if len(values) > 1 else 1
        if values == tuple(range(values[0], values[-1] + 1, step)):
            return IntRange(knob.name, values[0], values[-1], step)
    return Categorical(knob.name, values)


def short_error(text: str, limit: int = ERROR_CHARS) -> str:
    """The first line of an error that says what went wrong, cut to ``limit`` characters."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    head = next((ln for ln in lines if not ln.startswith(("Traceback", "File ", "^"))), lines[0] if lines else "")
    return head[:limit]


def header(
    *,
    op: str,
    problem: Mapping[str, Any],
    problem_key: str,
    target: Mapping[str, Any],
    knobs: Mapping[str, Sequence[Any]],
    valid_configs: int,
    versions: Mapping[str, Any],
    date: str,
    commit: str,
    measure: Mapping[str, Any] | None = None,
    notes: str = "",
    sample: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A header record (see the module docstring); ``complete`` is filled in by :func:`write`."""
    return {
        "type": "header", "format": FORMAT, "version": VERSION, "op": op, "problem": dict(problem),
        "problem_key": problem_key, "target": dict(target), "gpu": target.get("gpu", "none"),
        "date": date, "tilesearch_commit": commit, "versions": dict(versions),
        "knobs": {k: list(v) for k, v in knobs.items()}, "valid_configs": valid_configs,
        "measure": dict(measure or {}), "notes": notes, "sample": dict(sample) if sample else None,
    }


def _open(path: str | Path, mode: str) -> IO[str]:
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def write(path: str | Path, meta: Mapping[str, Any], rows: Iterable[Row]) -> Dataset:
    """Writes a dataset (gzip'd if ``path`` ends in ``.gz``), rows sorted by configuration."""
    rows = sorted(rows, key=lambda r: config_key(r.config))
    keys = [config_key(r.config) for r in rows]
    if len(set(keys)) != len(keys):
        raise DatasetError("a configuration appears twice")
    planned = (meta.get("sample") or {}).get("planned", meta.get("valid_configs", 0))
    meta = {**meta, "rows": len(rows), "complete": len(rows) >= int(planned)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with _open(path, "w") as f:
        f.write(json.dumps(meta, sort_keys=True) + "\n")
        for row in rows:
            f.write(json.dumps(row.to_json(), sort_keys=True) + "\n")
    return Dataset(dict(meta), tuple(rows), str(path))


HEADER_FIELDS = {"op": str, "problem": dict, "target": dict, "knobs": dict}


def _lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; a file that cannot be read, is not
    gzip (or is cut short) when named ``.gz``, or is not UTF-8 JSON raises :class:`DatasetError`."""
    number = 0
    try:
        with _open(path, "r") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield number, json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DatasetError(f"{path}:{number}: not JSON ({exc})") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}:{number + 1}: not UTF-8 text; is this a dataset?") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DatasetError(f"{path}: damaged or cut-short gzip after line {number} ({exc}); record it again") from None
    except OSError as exc:
        raise DatasetError(f"cannot read dataset {path}: {exc.strerror or exc}") from None


def _check_header(path: str | Path, meta: Any) -> dict[str, Any]:
    if not isinstance(meta, dict) or meta.get("type") != "header" or meta.get("format") != FORMAT:
        raise DatasetError(f"{path} is not a {FORMAT} file (its first line is not a header)")
    if meta.get("version") not in READABLE:
        raise DatasetError(f"{path} has format version {meta.get('version')}; this reader knows "
                           f"{', '.join(map(str, READABLE))}")
    missing = [name for name, kind in HEADER_FIELDS.items() if not isinstance(meta.get(name), kind)]
    if missing:
        raise DatasetError(f"{path}: the header lacks {', '.join(missing)} (or has the wrong type); record the dataset again")
    return meta


def _check_row(path: str | Path, number: int, data: Any) -> Row:
    """A row of line ``number``, its fields checked: a dataset feeds the search as if measured, so
    a latency of ``"fast"`` or an unknown status must not pass for one."""
    where = f"{path}:{number}"
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: a row must be a JSON object")
    if not isinstance(data.get("config"), dict):
        raise DatasetError(f"{where}: the row has no config object")
    statuses = [s.value for s in Status]
    if data.get("status") not in statuses:
        raise DatasetError(f"{where}: status {data.get('status')!r} is not one of {', '.join(statuses)}")
    for name in FIGURES:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value != value):
            raise DatasetError(f"{where}: {name}={value!r} is not a number (or null)")
    if data.get("error") is not None and not isinstance(data["error"], str):
        raise DatasetError(f"{where}: error must be text or null")
    if data["status"] == Status.OK.value and data.get("latency_ms") is None:
        raise DatasetError(f"{where}: an ok row needs latency_ms")
    return Row.from_json(data)


def load(path: str | Path) -> Dataset:
    """Reads a dataset written by :func:`write`; anything else raises :class:`DatasetError`
    naming the file and line."""
    if not Path(path).exists():
        raise DatasetError(f"no dataset at {path}")
    if Path(path).is_dir():
        raise DatasetError(f"{path} is a directory; name a dataset file (.jsonl or .jsonl.gz)")
    lines = _lines(path)
    first = next(lines, None)
    meta = _check_header(path, first[1] if first else None)
    rows = []
    for number, data in lines:
        if isinstance(data, dict) and data.get("type") not in (None, "row"):
            raise DatasetError(f"{path}:{number}: unknown record type {data.get('type')!r}")
        rows.append(_check_row(path, number, data))
    return Dataset(meta, tuple(rows), str(path))


def rows_from_records(records: Iterable[Any]) -> list[Row]:
    """Dataset rows from a study's :class:`~tilesearch.database.TrialRecord`s: the first record of
    each configuration that has a result (:func:`tilesearch.records.has_result`)."""
    rows: dict[str, Row] = {}
    for rec in records:
        if not has_result(rec):
            continue
        key = config_key(rec.config)
        if key not in rows:
            rows[key] = Row(config=rec.config, status=rec.status, error=rec.error, compile_s=rec.compile_s,
                            measure_s=rec.measure_s, **figures(rec, KEPT))
    return list(rows.values())


def load_dir(directory: str | Path, pattern: str = "*.jsonl*") -> list[Dataset]:
    """Every dataset in ``directory``, sorted by file name."""
    return [load(p) for p in sorted(Path(directory).glob(pattern))]
