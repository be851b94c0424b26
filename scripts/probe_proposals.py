"""What a range's probe search (``range_tuner.PROBE_SEARCH``) would propose at one size, offline.

Reads a range storage (``.db`` or ``.db.xz``, as ``scripts/range_call.sh`` returns it), copied to
a scratch file, and asks ``xgb`` (which learns from the op's other studies there, held-out ones
excepted) for its first proposals at the size's study, for a few seeds. The storage as it ended
holds more than a probe knew when it ran (later rounds' probes and refits), so this shows what
the search is drawn to, not what a run would have measured. Times nothing; no GPU.

usage: python scripts/probe_proposals.py storage=PATH m=192 n=4096 k=4096 [gpu="NVIDIA H200"] [count=4] [seeds=0,1,2]
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    missing = [k for k in ("storage", "m", "n", "k") if k not in args]
    if missing or not Path(args["storage"]).is_file():
        print(f"probe_proposals: {'missing ' + ', '.join(missing) if missing else 'no such file: ' + args['storage']};"
              " give storage=PATH m=M n=N k=K", file=sys.stderr)
        return 2
    import tilelang  # noqa: F401  (TileLang before TVM)

    from tilesearch import registry
    from tilesearch.database import TuningDatabase
    from tilesearch.experiment.probe_refits import short
    from tilesearch.strategy import create
    from tilesearch.strategy.base import SearchContext
    from tilesearch.target import Target

    m, n, k = (int(args[key]) for key in ("m", "n", "k"))
    with tempfile.TemporaryDirectory(prefix="tilesearch-proposals-") as scratch:
        path = Path(scratch) / "copy.db"
        with (lzma.open if args["storage"].endswith(".xz") else open)(args["storage"], "rb") as src, open(path, "wb") as out:
            shutil.copyfileobj(src, out)
        with sqlite3.connect(path) as db:
            found = db.execute("select study_name from studies where study_name like ? and study_name not like '%#%'"
                               " and study_name not like '%/dispatched'", (f"gemm[m={m},n={n},k={k},%",)).fetchone()
        if found is None:
            print(f"probe_proposals: no study of m={m} n={n} k={k} in {args['storage']}", file=sys.stderr)
            return 2
        op = registry.load("gemm")
        target = Target.from_arch("sm_90a", gpu=args.get("gpu", "NVIDIA H200"))
        problem = op.problem(m=m, n=n, k=k, dtype="bfloat16", layout="nt")
        study = TuningDatabase(f"sqlite:///{path}", found[0])
        context = SearchContext(op, problem, op.space(problem, target), target, study)
        print(f"{found[0]}: {len(study.records())} trials")
        for seed in (int(s) for s in args.get("seeds", "0,1,2").split(",")):
            proposals = create("xgb", seed).propose(context, int(args.get("count", 4)))
            print(f"  seed {seed}: " + " | ".join(
                f"{short(p.config)} {p.config['num_stages']} deep, {p.config['warp_specialize']}" for p in proposals))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
