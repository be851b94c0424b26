from tilesearch.testing.strategies import StrategySuite


class TestGrid(StrategySuite):
    strategy = "grid"


class TestRandom(StrategySuite):
    strategy = "random"


class TestTPE(StrategySuite):
    strategy = "tpe"


class TestXGB(StrategySuite):
    strategy = "xgb"
