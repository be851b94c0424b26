"""A study's trials as a table: one row per configuration, for CSV files and DataFrames.

Optuna's own ``trials_dataframe`` shows every Optuna trial, including the re-proposals of a
configuration already measured (answered from its first record) and the pruned copies of one in
flight; this table keeps the first finished record of each configuration, with its knobs as
columns and the measured figures by their :class:`~tilesearch.records.RunResult` names.
"""

from __future__ import annotations

import csv
import io
from typing import IO, Any

from tilesearch.database import RECORD_FIGURES, NoStudyError, TuningDatabase  # noqa: F401 - NoStudyError: the error trials() raises

LEADING = ("study", "trial", "status", "replayed")


def trials(op: str, problem: Any = None, *, storage: str | None = None, study: str | None = None,
           **params: Any) -> list[dict[str, Any]]:
    """The rows of :func:`rows` for every study of ``problem`` in ``storage`` (or ``study``);
    :class:`~tilesearch.database.NoStudyError` if there is none."""
    from tilesearch import registry
    from tilesearch.database import open_storage, studies_of

    operator = registry.load(op)
    problem = operator.problem(**{**(dict(problem) if problem else {}), **params})
    opened = open_storage(storage)
    names = studies_of(opened, operator.name, problem, study)
    return [row for name in names for row in rows(TuningDatabase(opened, name))]


def rows(db: TuningDatabase) -> list[dict[str, Any]]:
    """One row per configuration of the study (its first finished record; unfinished ones too)."""
    seen: set[str] = set()
    out = []
    for record in db.records():
        if record.duplicate_of is not None or record.key in seen:
            continue
        seen.add(record.key)
        row: dict[str, Any] = {"study": db.name, "trial": record.number, "status": record.status,
                               "replayed": record.replayed}
        row.update({f"config.{k}": v for k, v in record.config.items()})
        row.update({name: getattr(record, name) for name in RECORD_FIGURES})
        row["raced"] = bool(record.attrs.get("raced", False))  # timed until clearly slower, not to +-1%
        out.append(row)
    return out


def to_csv(table: list[dict[str, Any]], out: IO[str] | None = None) -> str:
    """Writes ``table`` as CSV to ``out`` (and returns it as text); columns: the leading ones,
    the knobs, then the figures."""
    columns: dict[str, None] = dict.fromkeys(LEADING)
    for row in table:
        columns.update(dict.fromkeys(k for k in row if k.startswith("config.")))
    for row in table:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    text = buffer.getvalue()
    if out is not None:
        out.write(text)
    return text


def to_dataframe(table: list[dict[str, Any]]) -> Any:
    """``table`` as a pandas DataFrame (pandas is optional: ImportError says how to get it)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("trials as a DataFrame need pandas: pip install pandas (or use the CSV export)") from None
    return pd.DataFrame(table)
