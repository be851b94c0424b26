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
