"""benchmarks/budget.py: the step's products listed right, the table and its verdict, a real run on 'tiny', bad flags.

Timings are never asserted (they depend on the machine); what is checked is that the products replayed are the
step's (their FLOPs are flops.workload_flops's, which tests/benchmarks/test_harness.py checks against torch's counter),
that the floor and the budget are computed from the same round, and that the verdict follows the numbers.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import budget, flops
from benchmarks import workloads as W
from tests.support import ROOT
from tests.support.cli_help import one_line_refusal, undocumented_flags

pytestmark = pytest.mark.full


@pytest.mark.parametrize("name", ["tiny", "copy-reverse", "base"])
def test_step_products_are_the_forward_then_two_backward_products_each(name):
    cfg = W.get_config(name)
    products = flops.step_products(cfg)
    assert sum(2 * b * m * k * n for b, m, k, n in products) == flops.workload_flops(cfg, "train")
    n_fwd = len(products) // 3
    forward, backward = products[:n_fwd], products[n_fwd:]
    for (b, m, k, n), left, right in zip(forward, backward[0::2], backward[1::2]):
        assert left == (b, m, n, k) and right == (b, k, m, n)  # dA = g B^T, dB = A^T g
    assert max(forward, key=lambda p: p[0] * p[1] * p[2] * p[3])[1:] in (
        flops.dominant_gemm(cfg),
        (cfg.batch_size * cfg.tgt_len, cfg.model.d_model, cfg.model.tgt_vocab_size),
    )


def fake_round(torch_ms, products, optimizer, clip=1.0, at_rate=None):
    phases = {"zero_grad": 0.1, "forward+loss": 10.0, "backward": 20.0, "clip": clip, "optimizer": optimizer}
    gemm_ms = 1.0
    return {
        "phases": phases,
        "step": sum(phases.values()),
        "products": products,
        "gemm_ms": gemm_ms,
        "torch": torch_ms,
        "torch-nn": torch_ms + 5,
        "torch_products": products,
        "rate_gflops": 2.0,
        "products_at_rate": products if at_rate is None else at_rate,
        "torch_step": torch_ms,
        "floor": min(products, products if at_rate is None else at_rate) + optimizer + clip,
    }


def result(rows, target=0.9):
    for r in rows:
        r["floor_ratio"], r["step_ratio"] = r["floor"] / r["torch_step"], r["step"] / r["torch_step"]
    return {
        "config": "base",
        "threads": 2,
        "rounds": len(rows),
        "steps": 3,
        "target": target,
        "train_gflop": 106.0,
        "gemm_shape": [400, 512, 2048],
        "rows": rows,
    }


def test_the_verdict_follows_the_floor_against_the_budget():
    out_of_reach = budget.markdown(result([fake_round(100.0, 85.0, 10.0) for _ in range(4)]))
    assert "0.9x is out of reach" in out_of_reach
    assert "| floor: products + optimizer + clip | 96.0 [96.0-96.0] |" in out_of_reach
    assert "| budget: 0.9 x the faster PyTorch step | 90.0 [90.0-90.0] |" in out_of_reach
    within = budget.markdown(result([fake_round(100.0, 50.0, 10.0) for _ in range(4)]))
    assert "0.9x is within reach: the floor leaves 29 ms for the rest" in within
    # the lower reading of the products makes the floor: a slow replay does not inflate the bound
    low = budget.markdown(result([fake_round(100.0, 85.0, 10.0, at_rate=40.0) for _ in range(4)]))
    assert "| floor: products + optimizer + clip | 51.0 [51.0-51.0] |" in low and "within reach" in low
    # a target of 1.0: the same numbers, another budget
    assert "1x is within reach" in budget.markdown(result([fake_round(100.0, 85.0, 10.0) for _ in range(4)], 1.0))


def test_real_run_on_tiny_prints_the_table_and_a_verdict():
    cmd = [sys.executable, "-m", "benchmarks.budget", "--config", "tiny", "--threads", "1", "--rounds", "2"]
    out = subprocess.run(cmd + ["--steps", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for label, _ in budget.ROWS:
        assert f"| {label} |" in out.stdout
    assert "floor / faster PyTorch step:" in out.stdout
    assert any(v in out.stdout for v in ("out of reach", "within reach", "at the floor itself"))


def test_ctrl_c_is_one_line_exit_130_and_stops_the_workers(tmp_path):
    """Interrupted while its workers time 'tiny': one line on stderr, exit 130, and no worker left waiting (the
    command returns within interrupt_after_ready's timeout because they are killed, not waited for)."""
    from tests.parity.test_cli import interrupt_after_ready

    ready = "import sys, benchmarks.budget as m; print('ready', flush=True); sys.exit(m.main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", ready, "--config", "tiny", "--threads", "1", "--rounds", "500"]
    code, err = interrupt_after_ready(cmd, "ready", tmp_path / "nothing written", wait_s=3.0)
    assert code == 130, err
    assert err == "python -m benchmarks.budget: interrupted\n"


def test_every_flag_has_help_and_shows_its_default():
    assert undocumented_flags(budget.build_parser()) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rounds", "0"], "--rounds: expected an integer >= 1, got 0"),
        (["--threads", "0"], "--threads: expected an integer in [1, 1024], got 0"),
        (["--config", "nope"], "invalid choice: 'nope'"),
        (["--target", "-1"], "--target: expected a ratio > 0, got -1.0"),
        (["--target", "nan"], "--target: expected a ratio > 0, got nan"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv, message, capsys):
    assert message in one_line_refusal(budget.main, argv, capsys)
