"""Did the refits win where a range probed? Reads range storages (``.db`` or ``.db.xz``, finished
or cut short) and compares, at each probed size, the fastest of the op's refits with the fastest
of the tuned sizes' winners. Times nothing; no GPU.

    python experiments/probe_refits.py storages=A.db.xz,B.db.xz out=$OUT

The work is in :mod:`tilesearch.experiment.probe_refits`.
"""

import sys

from tilesearch.experiment.checks import Check, main

PROBE_REFITS = Check(name="probe_refits", work="tilesearch.experiment.probe_refits:report",
                     options={"storages": ""})

if __name__ == "__main__":
    sys.exit(main(PROBE_REFITS))
