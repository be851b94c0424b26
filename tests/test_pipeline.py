from tilesearch import tune
from tilesearch.builder import NullBuilder
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.testing.toy import TOY_OP


class _Measuring(SyntheticRunner):
    replayed = False


def test_tune_reports_compile_throughput_and_gpu_idle_share():
    result = tune(TOY_OP, {"size": 64}, runner=_Measuring(), builder=NullBuilder(), strategy="random",
                  trials=12, storage=":memory:", progress=False)
    assert result.measured_now == 12
    assert result.compile_per_min > 0
    assert 0.0 <= result.gpu_idle <= 1.0

