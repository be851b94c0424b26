"""A grouped GEMM operator for tilesearch (mixture-of-experts layers), as an out-of-tree plugin:
registered only through the ``tilesearch.ops`` entry point in this package's ``pyproject.toml``."""

from tilesearch_grouped_gemm.op import GroupedGemmOp, expert_rows

__all__ = ["GroupedGemmOp", "expert_rows"]
