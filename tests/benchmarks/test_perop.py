"""benchmarks/perop.py: the chain it times is the same computation in bare NumPy and through the engine, and the
section and targets read its results. (Its timings are measured by the benchmark, never here.)"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import minitensor as mt
from benchmarks import perop
from benchmarks.targets import evaluate_targets
from tests.support import ROOT

pytestmark = pytest.mark.full


def _inputs(shape=(4, 4), seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.uniform(0.0, 0.5, shape).astype(np.float32),
        rng.uniform(0.9, 1.0, shape).astype(np.float32),
        np.full(shape, -1.05, dtype=np.float32),
    )


def test_the_bare_numpy_calls_compute_what_the_engine_computes():
    a, c, d = _inputs()
    outs, total = perop.bare_chain(a, c, d, 66)
    x = mt.tensor(a, requires_grad=True)
    y = x
    for _ in range(66):
        y = (y * mt.tensor(c) + mt.tensor(d)).exp()
    s = y.sum()
    s.backward()
    np.testing.assert_array_equal(s.detach().numpy(), total)  # the same calls in the same order: bitwise
    np.testing.assert_array_equal(x.grad.numpy(), perop.bare_fwd_bwd(a, c, d, 66))
    # the chain's values and gradients stay normal floats (no denormals, no overflow): what the docstring promises
    g = x.grad.numpy()
    assert np.all(np.isfinite(outs[-1])) and np.all(np.abs(g) > np.finfo(np.float32).tiny)


def test_section_and_targets_read_a_result():
    sample = {"bare_forward": 1e-4, "bare_fwd_bwd": 2e-4, "untracked": 3e-4, "recorded": 5e-4, "fwd_bwd": 9e-4}
    ops = 199
    rows = {mode: {"median_us": perop.per_op_us(sample, mode, ops), "q1_us": 0.0, "q3_us": 1.0} for mode in perop.MODES}
    assert rows["recorded"]["median_us"] == pytest.approx((5e-4 - 1e-4) / ops * 1e6)
    assert rows["fwd_bwd"]["median_us"] == pytest.approx((9e-4 - 2e-4) / ops * 1e6)
    res = {
        "ops": ops,
        "shape": [4, 4],
        "rounds": 1,
        "frameworks": {f: {**rows, "bare_numpy_us": 0.5, "kept_objects_per_op": 9.0} for f in ("minitensor", "torch")},
    }
    md = perop.markdown(res)
    assert "| forward, graph recorded | 2.01 us [0.00-1.00] |" in md
    assert "a recorded op keeps 9.0 objects" in md
    met = {t["target"]: t["met"] for t in evaluate_targets({"perop": res})}
    assert met["the engine's cost per op, forward, graph recorded, us <= 10"] is True
    assert met["the engine's cost per op, forward + backward, us <= 10"] is True
    assert {t["target"]: t["met"] for t in evaluate_targets({})}[
        "the engine's cost per op, forward + backward, us <= 10"
    ] is None  # not run: not measured


def test_bad_input_is_one_line_exit_2():
    root = ROOT
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "benchmarks.perop", "--steps", "0"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--steps" in proc.stderr


def test_the_timed_calls_pause_the_collector_and_count_what_a_graph_keeps():
    import gc

    sample = perop.child("minitensor", steps=4, shape=(2, 2), calls=2)
    assert gc.isenabled()  # restored after the timed calls
    # a recorded step keeps each op's node, context and output alive: more than nothing, far less than 100 an op
    assert 3 * 4 < sample["kept_objects"] < 100 * (3 * 4 + 1)
