import os

import pytest


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_storage(tmp_path, monkeypatch):
    """Tests never write to the user's tilesearch.db."""
    monkeypatch.setenv("TILESEARCH_STORAGE", f"sqlite:///{tmp_path / 'tilesearch.db'}")
    if "TILELANG_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path.parent / "tilelang-cache"))
