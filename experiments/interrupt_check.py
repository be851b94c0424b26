"""Interrupting a real GPU run: Ctrl-C (SIGINT to the whole process group, as a terminal sends it),
SIGTERM to the main process, and SIGKILL of the group, each at a moment inside compilation and
measurement; after each, the same command again. Checks the exit code (130, 143), that stderr is
one line, that no builder or runner process outlives the run, and that the reruns complete the
study exactly (each configuration measured once, nothing RUNNING or WAITING).

    python experiments/interrupt_check.py out=$OUT     # about 5 minutes on an H100
"""

import sys

from tilesearch.experiment.checks import Check, main

INTERRUPTS = Check(name="interrupt_check", work="tilesearch.experiment.interrupts:drill")

if __name__ == "__main__":
    sys.exit(main(INTERRUPTS))
