"""Interrupting a real GPU run: Ctrl-C (SIGINT to the whole process group, as a terminal sends it),
SIGTERM to the main process, and SIGKILL of the group, each at a moment inside compilation and
measurement; after each, the same command again. Checks the exit code (130, 143), that stderr is
one line, that no builder or runner process outlives the run, and that the reruns complete the
study exactly (each configuration measured once, nothing RUNNING or WAITING). The work of
``experiments/interrupt_check.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from optuna.trial import TrialState

from tilesearch.database import TrialRecord, TuningDatabase

TRIALS = 16
CASES = [("ctrl-c", signal.SIGINT, True, 130), ("sigterm", signal.SIGTERM, False, 143), ("sigkill", signal.SIGKILL, True, None)]


def command(storage: str) -> list[str]:
    return [sys.executable, "-m", "tilesearch.cli", "tune", "op=gemm", "m=2048", "n=2048", "k=2048",
            "dtype=float16", "strategy=random", f"trials={TRIALS}", f"storage={storage}", "study=interrupt",
            "progress=false"]


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out if int(p) != pid]


def drill(args: Any) -> int:
    """The three interrupts, then the rerun; writes ``interrupt_check.{json,log}`` under ``args.out``."""
    storage = f"sqlite:///{os.path.join(args.out, 'interrupt.db')}"
    log = open(os.path.join(args.out, "interrupt_check.log"), "w")
    rows = []
    for name, signum, group, expected in CASES:
        proc = subprocess.Popen(command(storage), stdout=log, stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(25)  # compiling and measuring by now
        if group:
            os.killpg(proc.pid, signum)  # what a terminal's Ctrl-C does: every process of the group
        else:
            os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=300)
        time.sleep(2)
        left = children_of(proc.pid)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        log.write(f"--- {name}: rc {proc.returncode}\n{err}\n")
        lines = err.strip().splitlines()
        ok = (proc.returncode == expected and len(lines) == 1) if expected else proc.returncode == -signal.SIGKILL
        rows.append({"case": name, "rc": proc.returncode, "stderr_lines": len(lines), "leftover_processes": len(left),
                     "ok": ok and not left})
    rerun = subprocess.run(command(storage), stdout=log, stderr=subprocess.PIPE, text=True, timeout=900)
    db = TuningDatabase(storage, "interrupt", read_only=True)
    trials = db.trials()
    records = [TrialRecord.from_trial(t) for t in trials if "key" in t.user_attrs]
    done = [r for r in records if r.duplicate_of is None and r.status not in ("invalid", "interrupted", "skipped")]
    exact = (rerun.returncode == 0 and len(done) == len({r.key for r in done}) == TRIALS
             and not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)])
    rows.append({"case": "rerun", "rc": rerun.returncode, "measured": len(done), "interrupted":
                 sum(r.status == "interrupted" for r in records), "ok": exact})
    with open(os.path.join(args.out, "interrupt_check.json"), "w") as f:
        json.dump(rows, f, indent=2)
    print(f"{'case':10} {'rc':>5} {'ok':>5}  details")
    for row in rows:
        details = ", ".join(f"{k}={v}" for k, v in row.items() if k not in ("case", "rc", "ok"))
        print(f"{row['case']:10} {row['rc']:>5} {str(row['ok']):>5}  {details}")
    return 0 if all(row["ok"] for row in rows) else 1

