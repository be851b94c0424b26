"""Builders: compile candidate configurations."""

from tilesearch.builder.base import Builder, NullBuilder
from tilesearch.builder.local import LocalBuilder, compile_candidate

__all__ = ["Builder", "LocalBuilder", "NullBuilder", "compile_candidate"]
