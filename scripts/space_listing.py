"""How long listing a space's valid configurations takes by walking its knobs
(:mod:`tilesearch.walk`, what ``Space.enumerate`` does) against checking each configuration of the
product, and that both give the same list in the same order. CPU only, no GPU.

usage: python scripts/space_listing.py [op=gemm] m=255 n=1024 k=2048 layout=nt
(set TILESEARCH_CLUSTER=1 or TILESEARCH_STREAM_K=1 for those knobs)
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    from tilesearch.registry import load
    from tilesearch.target import Target

    params = dict(arg.split("=", 1) for arg in argv)
    op = load(params.pop("op", "gemm"))
    space = op.space(op.problem(**params), Target.from_arch("sm_90a"))
    began = time.perf_counter()
    walked = list(space.enumerate())
    walk_s = time.perf_counter() - began
    began = time.perf_counter()
    checked = [c for c in space.enumerate(valid_only=False) if space.why_invalid(c) is None]
    check_s = time.perf_counter() - began
    same = walked == checked and all(list(a) == list(b) for a, b in zip(walked, checked))
    print(f"{op.name} {params}: {space.size} configurations, {len(walked)} valid; walk {walk_s:.2f} s, "
          f"each checked {check_s:.2f} s ({check_s / walk_s:.1f}x); {'same list' if same else 'DIFFERENT LISTS'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
