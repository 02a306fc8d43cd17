"""benchmarks/crossover.py and benchmarks/anomaly.py: the crossover read off the ratios, and bad input refused
with one line and exit 2 (the timed runs themselves are benchmarks, not tests)."""

from __future__ import annotations

import pytest

from benchmarks import anomaly, crossover

pytestmark = pytest.mark.full


def test_the_crossover_is_where_jacfwd_stays_the_cheaper():
    ms = [2, 4, 8, 16]
    assert crossover.crossover(ms, [0.5, 1.2, 0.8, 0.4]) == "jacfwd the cheaper from m = 8 on"  # not m = 2
    assert crossover.crossover(ms, [3.0, 2.0, 1.5, 1.0]) == "jacfwd never the cheaper in this range"


@pytest.mark.parametrize(
    "module, argv, message",
    [
        (crossover, ["--inputs", "0"], "--inputs and --rounds must be >= 1"),
        (anomaly, ["--steps", "0"], "--rounds and --steps must be >= 1"),
        (anomaly, ["--baseline", "/nonexistent"], "--baseline: expected the root of a checkout"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(module, argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        module.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
