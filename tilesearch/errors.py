"""The one error type a user can cause and fix: bad input, a missing or damaged file, a storage
that cannot be opened.

Every stage raises its own subclass (``StorageError``, ``DatasetError``, ``ArtifactError``...)
so that callers of the API can tell them apart; the command line catches this base alone and
prints its message as one line with exit code 2. Anything else escaping is a bug in tilesearch,
and keeps its traceback.
"""

from __future__ import annotations


class TilesearchError(Exception):
    """Something the user can fix; the message says what is wrong and how to fix it, in one line."""


def root_cause(exc: BaseException) -> str:
    """The first line of the innermost cause of ``exc``, at most 300 characters.

    Optuna wraps a database driver's error ("could not connect", "database disk image is
    malformed") in a generic one ("An exception is raised during the commit... exceeding max
    length"), and SQLAlchemy adds a background link; the driver's own words say what is wrong."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or getattr(exc, "orig", None)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
