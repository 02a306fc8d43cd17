"""benchmarks/bare_ops.py and benchmarks/fused_floor.py: the bare formulas compute the ops (forward and every
gradient, against PyTorch), a wrong one is refused before timing, the verdict follows the floor, a real run, bad flags.

Timings are never asserted (they depend on the machine).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from benchmarks import bare_ops, fused_floor
from benchmarks.op_cases import CASES, case_runner, selected_cases
from minitensor.testing import OP_RTOL, error_stats
from tests.support import ROOT
from tests.support.cli_help import one_line_refusal, undocumented_flags

pytestmark = pytest.mark.full

FUSED = selected_cases(["large"], list(bare_ops.BARE))


def test_every_fused_op_of_the_table_has_a_bare_formula():
    assert sorted(CASES[i].name for i in FUSED) == sorted(bare_ops.BARE)


@pytest.mark.parametrize("index", FUSED, ids=[CASES[i].name for i in FUSED])
def test_bare_formula_equals_torch_forward_and_gradients(index):
    """The op case's own inputs and upstream gradient (case_runner's seeded draws), on both libraries."""
    import torch

    from benchmarks.op_cases import Index, _arrays

    case = CASES[index]
    rng = np.random.default_rng(1000 + index)  # case_runner's draws, in its order
    arrays = _arrays(case, rng)
    forward, _, value = case_runner("bare", index)
    out = value()
    upstream = np.asarray(rng.standard_normal(out.shape), dtype=np.float32)
    grads = bare_ops.gradients(case.name, arrays, upstream)

    leaves = [torch.from_numpy(a.copy()) for a in arrays]
    for spec, t in zip(case.inputs, leaves):
        t.requires_grad_(not isinstance(spec, Index))
    ref = case.fn(torch, torch.nn.functional, *leaves)
    ref.backward(torch.from_numpy(upstream))
    assert error_stats(out, ref.detach().numpy())[1] <= OP_RTOL["float32"]
    for spec, grad, t in zip(case.inputs, grads, leaves):
        if isinstance(spec, Index):
            assert grad is None
            continue
        assert grad.shape == tuple(t.shape) and grad.dtype == np.float32
        assert error_stats(grad, t.grad.numpy(), scale_free=True)[1] <= OP_RTOL["float32"], spec


def test_a_bare_formula_that_differs_is_refused_before_timing():
    softmax, layer_norm = (str(i) for i in selected_cases(["large"], ["softmax", "layer_norm"]))
    fused_floor.refuse_wrong({softmax: 3e-7, layer_norm: 1e-7})  # within float32's tolerance: timed
    with pytest.raises(fused_floor.FloorError, match=r"expected at most 1e-05: layer_norm \(max rel 2\.0e-03\)"):
        fused_floor.refuse_wrong({softmax: 3e-7, layer_norm: 2e-3})
    with pytest.raises(fused_floor.FloorError, match="softmax"):
        fused_floor.refuse_wrong({softmax: float("nan")})


def fake_op(name, engine, bare, torch_ms=1.0, rounds=4):
    one = {"numpy": {"fb_ms": engine * torch_ms}, "bare": {"fb_ms": bare * torch_ms}, "torch": {"fb_ms": torch_ms}}
    return {"op": name, "shapes": "16x8x32x32", "fwd_max_rel_bare": 0.0, "rounds": [one] * rounds}


def test_the_verdict_follows_the_floor_and_the_threads():
    ops = [fake_op("softmax", 2.0, 1.2), fake_op("gelu", 4.0, 3.6)]
    one = fused_floor.markdown({"threads": 1, "rounds": 4, "target_ms": 5.0, "target": 1.5, "ops": ops})
    assert "| softmax | 16x8x32x32 | 1000 | 2.00 [2.00-2.00] | 1.20 [1.20-1.20] | 1.20 [1.20-1.20] | within" in one
    assert "| gelu | 16x8x32x32 | 1000 | 4.00 [4.00-4.00] | 3.60 [3.60-3.60] | 3.60 [3.60-3.60] | out of reach |" in one
    # at 2 threads the floor is the bare time over 2: a bare 2.8x becomes 1.4x, within the target
    two = fused_floor.markdown(
        {"threads": 2, "rounds": 4, "target_ms": 5.0, "target": 1.5, "ops": [fake_op("layer_norm", 3.5, 2.8)]}
    )
    assert "| 2.80 [2.80-2.80] | 1.40 [1.40-1.40] | within the floor |" in two


def test_real_run_prints_the_table():
    cmd = [sys.executable, "-m", "benchmarks.fused_floor", "--rounds", "1", "--target-ms", "0.2", "--ops", "softmax"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| softmax | 16x8x32x32 |" in out.stdout and "floor = bare / PyTorch / 1" in out.stdout


def test_every_flag_has_help_and_shows_its_default():
    assert undocumented_flags(fused_floor.build_parser()) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rounds", "0"], "--rounds: expected an integer >= 1, got 0"),
        (["--ops", "relu"], "invalid choice: 'relu'"),
        (["--target-ms", "0"], "--target-ms: expected a finite number >= 0.1, got 0"),
        (["--config", "base"], "unrecognized arguments: --config base"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv, message, capsys):
    assert message in one_line_refusal(fused_floor.main, argv, capsys)
