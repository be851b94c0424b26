"""How many invalid configurations TPE proposes before it has measured a search's worth, with
Optuna's split of good trials (pruned ones counted), with tilesearch's (complete ones only,
:class:`tilesearch.strategy.sampler.CompleteGamma`), and with that split and the constraints
told (:class:`tilesearch.strategy.sampler.ValidTPE`, what ``strategy=tpe`` runs). CPU only: no
GPU, no compilation.

The README's 8192^3 TPE command once proposed 207 invalid configurations on an H100 (the first
measured trial after 33.6 s) where an earlier run proposed 19. This replays the search's sampling
as ``tune`` drives it: the op's space and constraints, a rejected configuration told as pruned,
eight valid ones in flight (the constant liar sees them running), each valid one's objective the
op's analytic estimate (a stand-in for a measured latency: the GPU is not needed to count
proposals), until ``trials`` valid ones are measured. Prints, per seed, the invalid proposals
under each split, then their median and worst.

With ``replay=tune`` it replays README's main command through ``tune`` instead, TPE told the
constraints and not: invalid proposals, the tuning process's seconds, the best found.

usage: python experiments/tpe_invalid.py [seeds=10] [trials=42] [raster=column] [m=8192 n=8192 k=8192 dtype=float16 layout=nn]
       python experiments/tpe_invalid.py replay=tune [seeds=16]
"""

import sys

from tilesearch.experiment.tpe_invalid import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
