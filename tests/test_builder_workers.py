"""How many compile workers a builder starts by default."""

import os

import pytest

from tilesearch.builder import local


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs CPU affinity (Linux)")
def test_default_workers_follow_the_cpu_set_not_the_hosts_count(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(48, 64)))  # taskset -c 48-63
    assert local.usable_cores() == 16 and local.default_workers() == 15


def test_default_workers_fall_back_on_the_hosts_count_without_affinity(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert local.default_workers() == 7
