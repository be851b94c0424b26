"""experiments/probe_refits.py: what the probes of a range measured, the refits against the tuned
sizes' winners, read from a storage the H100 returned (a range cut short mid-probe)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORAGE = ROOT / "experiments/results/deploy/ranges_2026-11-27_h100_refits/call1/4096x4096.db.xz"


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "experiments/probe_refits.py"), *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_each_probed_size_compares_the_fastest_refit_with_the_fastest_winner(tmp_path):
    done = run(f"storages={STORAGE}", f"out={tmp_path}")
    assert done.returncode == 0, done.stderr
    rows = {r["size"]: r for r in json.loads((tmp_path / "probe_refits.json").read_text())}
    assert sorted(rows) == [6, 39, 48, 215, 250]  # the probes this call finished
    at = rows[215]  # one wave of 64x128 tiles on the 132 SMs (128 blocks), where the winners' 128x128 fill half
    assert at["refit"] == "64x128x128" and at["winner"] == "128x128x128"
    assert at["gain"] == at["winners_ms"] / at["refit_ms"] - 1 > 0.05
    assert rows[39]["gain"] < 0 and rows[39]["refit"].startswith("swapped")  # a refit may lose; it is reported
    # 48 rows: ahead by 0.4%, which one search figure does not resolve
    assert "more than 3% (what one search figure resolves) at 2 of 5 probed sizes" in done.stdout.strip().splitlines()[-1]


def test_a_missing_storage_is_exit_2_and_one_line(tmp_path):
    done = run(f"storages={tmp_path / 'none.db.xz'}", f"out={tmp_path}")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "no such file" in done.stderr and not (tmp_path / "probe_refits.json").exists()
