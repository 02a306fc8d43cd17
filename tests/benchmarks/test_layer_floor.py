"""benchmarks/bare_layers.py and benchmarks/layer_floor.py: the bare layers compute nn.LSTM and conv2d (forward and
every gradient, against PyTorch in float64 from the same float32 inputs), the verdict follows the engine's ratio to the
floor, a real run, bad flags.

Timings are never asserted (they depend on the machine).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from benchmarks import layer_floor
from benchmarks.bare_layers import BARE_LAYERS
from benchmarks.op_cases import CASES, _arrays, case_runner, selected_cases
from minitensor.testing import OP_RTOL, error_stats
from tests.support import ROOT
from tests.support.cli_help import one_line_refusal, undocumented_flags

pytestmark = pytest.mark.full

LAYERS = selected_cases(["layer"])


def test_every_layer_case_has_a_bare_formula():
    assert sorted(CASES[i].name for i in LAYERS) == sorted(BARE_LAYERS)


@pytest.mark.parametrize("index", LAYERS, ids=[CASES[i].name for i in LAYERS])
def test_bare_layer_equals_torch_forward_and_gradients(index):
    """The case's own inputs and upstream gradient (case_runner's seeded draws). The reference is torch in float64 on
    the same float32 numbers: a sum over 50 000 products (conv2d's weight gradient) rounds differently in float32 on
    each side by more than float32's OP_RTOL, so neither float32 result is the other's reference."""
    import torch

    case = CASES[index]
    rng = np.random.default_rng(1000 + index)  # case_runner's draws, in its order
    arrays = _arrays(case, rng)
    out = case_runner("bare", index)[2]()
    upstream = np.asarray(rng.standard_normal(out.shape), dtype=np.float32)
    forward, backward = BARE_LAYERS[case.name]
    grads = backward(forward(*arrays)[1], upstream)

    leaves = [torch.from_numpy(a.astype(np.float64)).requires_grad_() for a in arrays]
    ref = case.fn(torch, torch.nn.functional, *leaves)
    ref.backward(torch.from_numpy(upstream.astype(np.float64)))
    assert error_stats(out, ref.detach().numpy().astype(np.float32))[1] <= OP_RTOL["float32"]
    assert len(grads) == len(leaves)
    for i, (grad, t) in enumerate(zip(grads, leaves)):
        assert grad.shape == tuple(t.shape) and grad.dtype == np.float32, i
        assert error_stats(grad, t.grad.numpy().astype(np.float32), scale_free=True)[1] <= OP_RTOL["float32"], i


def fake_layer(name, engine, bare, torch_ms=10.0, rounds=4):
    one = {s: {"fwd_ms": k * torch_ms, "fb_ms": k * torch_ms} for s, k in (("numpy", engine), ("bare", bare))}
    one["torch"] = {"fwd_ms": torch_ms, "fb_ms": torch_ms}
    return {"layer": name, "input": "64x32x256", "fwd_max_rel_bare": 0.0, "rounds": [one] * rounds}


def test_the_verdict_follows_the_ratio_to_the_floor():
    res = {"threads": 1, "rounds": 4, "target_ms": 5.0, "target": 1.1}
    table = layer_floor.markdown({**res, "layers": [fake_layer("lstm", 2.2, 2.0), fake_layer("conv2d", 3.0, 2.5)]})
    lstm = "| lstm | 64x32x256 | forward+backward | 20.0 | 22.0 | 10.0 | 1.10 [1.10-1.10] | 2.20 [2.20-2.20] | "
    assert lstm + "2.00 [2.00-2.00] | met |" in table
    assert "| conv2d | 64x32x256 | forward+backward | 25.0 | 30.0 | 10.0 | 1.20 [1.20-1.20] |" in table
    assert table.count("| missed |") == 1


def test_real_run_prints_the_table():
    cmd = [sys.executable, "-m", "benchmarks.layer_floor", "--rounds", "1", "--target-ms", "0.2", "--layers", "conv2d"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| conv2d | 64x32x28x28 | forward+backward |" in out.stdout


def test_every_flag_has_help_and_shows_its_default():
    assert undocumented_flags(layer_floor.build_parser()) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rounds", "0"], "--rounds: expected an integer >= 1, got 0"),
        (["--layers", "gru"], "invalid choice: 'gru'"),
        (["--target-ms", "0"], "--target-ms: expected a finite number >= 0.1, got 0"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv, message, capsys):
    assert message in one_line_refusal(layer_floor.main, argv, capsys)
