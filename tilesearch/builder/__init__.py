"""Builders: compile candidate configurations."""

from tilesearch.builder.base import Builder, NullBuilder, compile_ahead
from tilesearch.builder.local import LocalBuilder, compile_candidate

__all__ = ["Builder", "LocalBuilder", "NullBuilder", "compile_ahead", "compile_candidate"]
