"""experiments/gemm_suite.py end to end without a GPU: a made-up runner stands in for it, so this
checks the plumbing (search, flips, ablation, table), not any figure."""

import json
import sys
from pathlib import Path

from tilesearch.builder import NullBuilder
from tilesearch.records import RunResult, Status
from tilesearch.runner import Runner
from tilesearch.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import gemm_suite  # noqa: E402


def made_up_ms(c):
    """Faster with split-K and an smem epilogue, slower persistent; torch takes 1 ms."""
    ms = 1.0 + c["block_k"] / 640 + c["num_stages"] / 100
    ms *= 0.8 if c.get("split_k", 1) > 1 else 1.0
    ms *= 0.9 if c.get("epilogue", "direct") == "smem" else 1.0
    ms *= 1.1 if c.get("persistent", False) else 1.0
    return ms


class MadeUpRunner(Runner):
    def __init__(self, **_):
        self.target = Target.from_arch("sm_90a", gpu="made-up")

    def start(self):
        return self.target

    def run(self, candidate):
        ms = made_up_ms(candidate.config)
        return RunResult(Status.OK, latency_ms=ms, tflops=1.0 / ms, baseline_ms=1.0, speedup=1.0 / ms)


def test_suite_searches_flips_and_tabulates(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gemm_suite, "LocalRunner", MadeUpRunner)
    monkeypatch.setattr(gemm_suite, "LocalBuilder", lambda *a, **kw: NullBuilder())
    assert gemm_suite.main(["--out", str(tmp_path), "--shapes", "longk,odd4097", "--trials", "12",
                            "--budget-s", "300"]) == 0
    rows = json.loads((tmp_path / "gemm_suite.json").read_text())["shapes"]
    assert [r["shape"] for r in rows] == ["longk", "odd4097"]
    for row in rows:
        best = row["best_config"]
        assert row["ratio"] == 1.0 / made_up_ms(best)
        for entry in row["ablation"].values():
            if entry["flip"] == "measure":
                assert entry["flip_status"] == "ok"
                assert entry["flip_gain"] > 0
            else:
                assert entry["flip_gain"] == 1.0
        if best.get("split_k", 1) > 1:
            assert abs(row["ablation"]["split_k"]["flip_gain"] - 1.25) < 1e-9
    assert rows[1]["ablation"]["split_k"]["flip"] == "same"  # K = 129: no split-K offered
    out = capsys.readouterr().out
    assert "geometric mean tuned/torch over 2 shapes" in out.splitlines()[-1]


def test_flips_follow_same_kernel_equivalences_on_unaligned_rows():
    """4097x4095x129 has no 16-byte aligned rows: tma=True and warp_specialize=on compile the kernel
    of tma=False and off, so resetting every new knob of a best with an smem epilogue must still
    measure the plain epilogue, and resetting the TMA switches alone is the best itself."""
    from search_spaces.gemm import GemmOp

    op = GemmOp()
    problem = op.problem(m=4097, n=4095, k=129, dtype="bfloat16", layout="nn")
    space = op.space(problem, Target.from_arch("sm_90a"))
    best = dict(block_m=128, block_n=256, block_k=32, num_stages=5, threads=256, panel_size=4,
                warp_policy="full_col", split_k=1, persistent=False, epilogue="smem", tma=False,
                warp_specialize="off")
    assert space.why_invalid(best) is None
    plan = gemm_suite.flips(best, space)
    assert plan["tma_ws"][0] == "same kernel" and plan["tma_ws"][1] == best
    how, config, _ = plan["all_new"]
    assert how == "measure"
    assert config == {**best, "epilogue": "direct"}
    assert plan["epilogue"] == ("measure", config, None)
    assert plan["split_k"][0] == "same"


def test_records_without_a_group_count_equivalent_configurations():
    from types import SimpleNamespace

    from search_spaces.gemm import GemmOp

    op = GemmOp()
    problem = op.problem(m=4097, n=4095, k=129, dtype="bfloat16", layout="nn")
    space = op.space(problem, Target.from_arch("sm_90a"))
    base = dict(block_m=128, block_n=128, block_k=32, num_stages=3, threads=128, panel_size=0,
                warp_policy="square", split_k=1, persistent=False, tma=False, warp_specialize="off")
    plain, staged = {**base, "epilogue": "direct"}, {**base, "epilogue": "smem"}
    records = [SimpleNamespace(config=plain), SimpleNamespace(config=staged)]
    assert gemm_suite.without(records, gemm_suite.DEFAULTS, space) == records[:1]
    assert gemm_suite.without(records, gemm_suite.GROUPS["tma_ws"], space) == records
