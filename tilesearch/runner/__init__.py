"""Runners: check and time built candidates."""

from tilesearch.runner.base import NoDeviceError, Runner
from tilesearch.runner.local import LocalRunner
from tilesearch.runner.measure import MeasureSettings

__all__ = ["LocalRunner", "MeasureSettings", "NoDeviceError", "Runner"]
