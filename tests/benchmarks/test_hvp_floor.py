"""benchmarks/hvp_floor.py: an H v has three times a gradient's products, the bound and the verdict follow one round's
numbers, a real run on 'tiny', bad flags.

Timings are never asserted (they depend on the machine). What is checked: the multiple the bound rests on, counted by
torch's own FLOP counter on the benchmarks' H v workloads; that each side's bound, costs and cheapest form come from
that side's round; and that the verdict follows them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import flops, hvp_floor
from benchmarks import workloads as W
from tests.support import ROOT
from tests.support.cli_help import one_line_refusal, undocumented_flags

pytestmark = pytest.mark.full


@pytest.mark.parametrize("name", ["tiny", "copy-reverse"])
def test_an_hvp_has_three_times_the_products_of_a_gradient(name):
    """torch's FlopCounterMode over the benchmarks' own closures: a gradient has the step's products, forward over
    reverse and double backward three times as many (the bound's PRODUCT_MULTIPLE), the double-vjp functional.hvp
    five times (why hvp_floor leaves torch's out: it is never torch's cheapest)."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = W.get_config(name)
    model = W.build_numpy_model(cfg)
    side = W.torch_side(cfg, W.copy_to_torch(model, cfg), W.make_batch(cfg))
    unit = flops.workload_flops(cfg, "train")
    expected = {"grad": 1, "hvp_fwd_rev": hvp_floor.PRODUCT_MULTIPLE, "hvp": hvp_floor.PRODUCT_MULTIPLE}
    expected["hvp_functional"] = 5
    for workload, multiple in expected.items():
        with FlopCounterMode(display=False) as counter:
            getattr(side, workload)()
        assert counter.get_total_flops() == multiple * unit, workload


def side_round(grad, products, forms, gemm_ms=None):
    row = {"grad": grad, "products": products, **forms}
    if gemm_ms is not None:
        row["gemm_ms"] = gemm_ms
    return row


def result(rounds):
    """A result of `rounds` (each a (numpy round, torch round) pair), derived as measure() derives them: 1 GFLOP of
    products a gradient, a 0.1 GFLOP dominant product."""
    rows = [{"numpy": hvp_floor.derive(n, 1.0, 0.1), "torch": hvp_floor.derive(t, 1.0, 0.1)} for n, t in rounds]
    return {"config": "base", "threads": 1, "rounds": len(rows), "calls": 2, "grad_gflop": 1.0, "rows": rows}


def numpy_round(grad=100.0, products=80.0, fwd_rev=280.0, gemm_ms=1.0):
    return side_round(grad, products, {"hvp_fwd_rev": fwd_rev, "hvp_functional": fwd_rev + 5, "hvp": 300.0}, gemm_ms)


def torch_round(grad=120.0, products=80.0, fwd_rev=300.0, dbl=310.0):
    return side_round(grad, products, {"hvp_fwd_rev": fwd_rev, "hvp": dbl})


def test_derive_takes_the_lower_reading_of_the_products_and_the_cheapest_form():
    r = hvp_floor.derive(numpy_round(gemm_ms=1.0), 1.0, 0.1)  # 1 GFLOP at 0.1 GFLOP a ms: 10 ms at the best rate
    assert r["products_at_rate"] == pytest.approx(10.0) and r["p"] == pytest.approx(10.0)
    assert r["bound"] == pytest.approx(1 + 2 * 10.0 / 100.0)
    slow_gemm = hvp_floor.derive(numpy_round(gemm_ms=100.0), 1.0, 0.1)  # 1000 ms at that rate: the replay is lower
    assert slow_gemm["p"] == 80.0 and slow_gemm["bound"] == pytest.approx(2.6)
    assert slow_gemm["costs"] == {"hvp_fwd_rev": 2.8, "hvp_functional": 2.85, "hvp": 3.0}
    assert slow_gemm["cheapest"] == 2.8
    torch = hvp_floor.derive(torch_round(), 1.0, 0.1)  # no GEMM reading: the replay alone
    assert torch["p"] == 80.0 and "hvp_functional" not in torch["costs"] and torch["cheapest"] == 2.5


def test_the_verdict_follows_the_bound_against_torchs_cheapest():
    out = hvp_floor.markdown(result([(numpy_round(gemm_ms=100.0), torch_round())] * 4))
    # minitensor: 80 of 100 ms are products, bound 2.6; torch's cheapest 300 / 120 = 2.5
    assert "| bound: 1 + 2 P / G gradients | 2.60 [2.60-2.60] | 2.33 [2.33-2.33] |" in out
    assert "| H v by autograd.functional.hvp, gradients | 2.85 [2.85-2.85] | — |" in out
    assert "out of reach on base: minitensor's bound (2.60 gradients) exceeds PyTorch's cheapest H v (2.50)" in out
    assert "in time: 0.93 [0.93-0.93]" in out  # 280 ms against 300
    met = hvp_floor.markdown(result([(numpy_round(products=40.0, fwd_rev=240.0, gemm_ms=100.0), torch_round())] * 4))
    assert "met on base: 2.40 gradients against 2.50" in met
    within = hvp_floor.markdown(result([(numpy_round(products=40.0, gemm_ms=100.0), torch_round())] * 4))
    assert "within reach on base: the bound (1.80) is under PyTorch's cheapest (2.50), minitensor's cheapest 2.80" in (
        within
    )


def test_real_run_on_tiny_prints_the_table_and_a_verdict():
    cmd = [sys.executable, "-m", "benchmarks.hvp_floor", "--config", "tiny", "--rounds", "1", "--calls", "1"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for label, _, _ in hvp_floor.ROWS:
        assert f"| {label} |" in out.stdout
    assert "over PyTorch's cheapest, in time:" in out.stdout
    assert any(v in out.stdout for v in ("out of reach on tiny", "within reach on tiny", "met on tiny"))


def test_every_flag_has_help_and_shows_its_default():
    assert undocumented_flags(hvp_floor.build_parser()) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rounds", "0"], "--rounds: expected an integer >= 1, got 0"),
        (["--calls", "x"], "--calls: expected an integer >= 1, got 'x'"),
        (["--threads", "0"], "--threads: expected an integer in [1, 1024], got 0"),
        (["--config", "nope"], "invalid choice: 'nope'"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv, message, capsys):
    assert message in one_line_refusal(hvp_floor.main, argv, capsys)
