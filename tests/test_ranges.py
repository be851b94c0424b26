"""Shape ranges: parsing and its errors, from Python and on the command line (exit code 2)."""

import pytest

from tilesearch import registry
from tilesearch.cli import main
from tilesearch.ranges import RangeError, SizeRange, parse, range_key

GEMM = registry.load("gemm")


@pytest.mark.parametrize("raw", ["1..16384", " 1 .. 16384 ", (1, 16384), [1, 16384], range(1, 16385)])
def test_a_range_in_any_spelling(raw):
    found, rest = parse(GEMM, {"m": raw, "n": 4096, "k": 4096})
    assert found == SizeRange("m", 1, 16384) and rest == {"n": 4096, "k": 4096}
    assert 1 in found and 16384 in found and 16385 not in found and str(found) == "1..16384"


def test_no_range_leaves_the_parameters_alone():
    assert parse(GEMM, {"m": 16, "n": 4096, "k": 4096}) == (None, {"m": 16, "n": 4096, "k": 4096})


def test_range_key_puts_the_range_in_its_place():
    found, rest = parse(GEMM, {"m": "1..64", "n": 8, "k": 8, "layout": "nt"})
    assert range_key(GEMM, found, rest) == "m=1..64,n=8,k=8,dtype=float16,layout=nt"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"m": "16..1"}, "m=16..1 is reversed; write m=1..16"),
        ({"m": ".."}, "empty range: give both ends"),
        ({"m": "4.."}, "empty range"),
        ({"m": "1..2.5"}, "both ends of a range must be integers"),
        ({"m": "a..b"}, "both ends of a range must be integers"),
        ({"m": "0..8"}, "starts below the smallest m, 1"),
        ({"m": "8..8"}, "holds one size; write m=8"),
        ({"m": (1, 2, 3)}, "a pair of integers"),
        ({"m": (1.0, 2)}, "a pair of integers"),
        ({"m": range(1, 9, 2)}, "step 1"),
        ({"m": range(5, 5)}, "non-empty range"),
        ({"m": 4, "n": "1..8"}, "n cannot be a range: gemm compiles only these parameters as run-time values: m"),
        ({"m": "1..8", "k": "1..8"}, "are both ranges; give a range for one parameter only"),
    ],
)
def test_bad_ranges_say_what_is_wrong(raw, message):
    with pytest.raises(RangeError, match=message.replace("(", "\\(").replace(".", "\\.")):
        parse(GEMM, {"n": 64, "k": 64, **raw})


def test_an_op_without_run_time_parameters_takes_no_range():
    op = registry.load("einsum_sum")
    with pytest.raises(RangeError, match="t cannot be a range: einsum_sum compiles only .*: none"):
        parse(op, {"t": "1..8", "k": 8, "h": 2, "d": 8})


@pytest.mark.parametrize("command", ["tune", "show", "export"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["m=16..1", "n=64", "k=64"], "m=16..1 is reversed"),
        (["m=..", "n=64", "k=64"], "empty range"),
        (["m=1..x", "n=64", "k=64"], "must be integers"),
        (["m=4", "n=1..64", "k=64"], "n cannot be a range"),
        (["m=1..64", "n=64", "k=64", "colour=red"], "unknown key 'colour'"),
        (["m=1..64", "n=64", "k=64", "dtype=float8"], "dtype='float8' is not one of"),
    ],
)
def test_cli_bad_ranges_exit_2_with_one_line(command, args, message, capsys, tmp_path):
    out = [f"out={tmp_path / 'k'}"] if command == "export" else []
    assert main([command, "op=gemm", *args, *out, f"storage=sqlite:///{tmp_path / 'db.sqlite'}"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("tilesearch: error: ")
    assert not (tmp_path / "k").exists()


def test_cli_show_without_a_tuned_range(capsys, tmp_path):
    assert main(["show", "op=gemm", "m=1..64", "n=64", "k=64", f"storage=sqlite:///{tmp_path / 'db.sqlite'}"]) == 2
    assert "no tuned range gemm m=1..64,n=64,k=64" in capsys.readouterr().err
