"""experiments/trust_gpu.py's verdicts on two searches' finals, through the experiment runner on the CPU."""

import runpy
from pathlib import Path

from tilesearch.experiment import Experiment, run
from tilesearch.testing.cpu import CpuRunner
from tilesearch.testing.faulty import FAULTY_CPU_OP

SCRIPT = Path(__file__).resolve().parents[1] / "experiments/trust_gpu.py"


def final(speedup, half, entries):
    return {"speedup": speedup, "speedup_low": speedup - half, "speedup_high": speedup + half,
            "entries": [{"config": {"block": b}, "speedup": s, "speedup_low": s - half, "speedup_high": s + half}
                        for b, s in entries]}


def test_a_miss_says_whether_the_configurations_both_re_timed_agree():
    verdicts = runpy.run_path(str(SCRIPT))["verdicts"]
    # as at 4096^3: the second search found a faster configuration, the shared ones agree
    a = final(0.961, 0.0015, [(128, 0.961), (256, 0.961)])
    b = final(0.967, 0.0025, [(64, 0.967), (256, 0.963), (128, 0.9606)])
    c = final(0.970, 0.0015, [(128, 0.970)])  # a shared configuration that moved: measurement
    result = {"problems": [{"key": "x", "searches": [{"final": a}, {"final": b}]},
                           {"key": "y", "searches": [{"final": a}, {"final": c}]}]}
    x, y = verdicts(result).splitlines()
    assert x == "x: intervals overlap False; both within +-1% True; re-timed by both: 2, their intervals overlap for 2"
    assert y == "y: intervals overlap False; both within +-1% True; re-timed by both: 1, their intervals overlap for 0"


def test_the_runner_records_every_configuration_of_each_final(tmp_path):
    experiment = Experiment(
        name="finals", op=FAULTY_CPU_OP, problems=({"n": 1 << 12},), strategies=("grid",), trials=2, repeats=2,
        knobs={"fault": ("none",), "block": (256, 512), "threads": (128,)}, top=0, settings={"retime": 2, "retime_margin": 1},
        runner=lambda problem: CpuRunner(timeout=60), out=str(tmp_path))
    (prob,) = run(experiment)["problems"]
    for search in prob["searches"]:
        entries = search["final"]["entries"]
        assert len(entries) == 2 and {e["config"]["block"] for e in entries} == {256, 512}
        assert entries[0]["config"] == search["final"]["config"]
