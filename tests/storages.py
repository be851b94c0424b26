"""Storages that several processes can share, for the distributed tests.

PostgreSQL is tested when ``$TILESEARCH_TEST_POSTGRES`` holds a server's URL (``.ci/postgres.sh``
starts one); otherwise those cases skip.
"""

import os
import uuid

import pytest

POSTGRES = os.environ.get("TILESEARCH_TEST_POSTGRES")

SHARED = [
    "sqlite",
    "journal",
    pytest.param("postgres", marks=pytest.mark.skipif(not POSTGRES, reason="TILESEARCH_TEST_POSTGRES not set")),
]


def url(kind, tmp_path):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    if kind == "journal":
        return f"journal:{tmp_path / 'shared.journal'}"
    return POSTGRES


def study(prefix="study"):
    """A study name no other test run uses (PostgreSQL databases outlive the test)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
