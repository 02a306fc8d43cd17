"""DistributedDataParallel (minitensor/nn/parallel/) under `mpiexec -n 2`: two ranks equal one process.

The ranks run tests/support/ddp_worker.py (one launch for all the scenarios, one for the planted bug), bounded by a
timeout after which mpiexec's whole process group is killed. The figures are relative errors (minitensor/testing.py's
measure) against one process on the full global batch, in float64, held to PARITY_RTOL: the reordered sums of the
all-reduce are the only difference. Also here: the engine's early delivery of leaf gradients and the post-accumulate
hook DDP rests on, and minitensor/transformer_np importing without mpi4py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minitensor as mt
from minitensor.nn.parallel import run_ranks
from minitensor.testing import PARITY_RTOL
from tests.support import ROOT, runs_ranks

TOL = PARITY_RTOL["float64"]
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs the distributed extra: pip install -e '.[distributed]'")


def launch(*args: str, nproc: int = 2, timeout: float = 240) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    done = run_ranks(nproc, [os.path.join(ROOT, "tests", "support", "ddp_worker.py"), *args], timeout=timeout, env=env)
    lines = [l for l in done.stdout.splitlines() if l.startswith("DDP_RESULTS ")]
    assert done.returncode == 0 and lines, f"the ranks failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[0].removeprefix("DDP_RESULTS "))


@pytest.fixture(scope="module")
def results() -> dict:
    return launch()


@pytest.fixture(scope="module")
def planted() -> dict:
    return launch("--planted-bug")


@runs_ranks
@needs_mpi
@pytest.mark.parametrize("case", ["uneven", "even"])
def test_two_ranks_equal_one_process(results, case):
    r = results[case]
    assert r["grad_max_rel"] <= TOL, r
    assert r["param_max_rel"] <= TOL, r  # after 3 Adam steps with global-norm clipping
    assert r["grads_same_on_every_rank"] and r["params_same_on_every_rank"], r


@runs_ranks
@needs_mpi
def test_uneven_token_counts_really_are_uneven(results):
    assert results["uneven"]["tokens_per_rank"] == [9, 6]


@runs_ranks
@needs_mpi
def test_a_pad_only_shard_contributes_zero_not_nan(results):
    r = results["all_pad"]
    assert r["tokens_per_rank"] == [9, 0] and r["loss_finite"] and r["grad_max_rel"] <= TOL, r


@runs_ranks
@needs_mpi
def test_overlap_changes_no_value(results):
    r = results["overlap"]
    assert r["bitwise_equal"], r
    assert r["buckets"][0] > 1 and r["buckets"][1] == 1, r
    # the decoder's buckets were already all-reducing when the backward reached the encoder
    assert r["buckets_started_before_encoder_backward"] > 0, r
    assert r["rebuilt_in_arrival_order"], r  # after the first backward, as torch's DDP rebuilds its buckets


@runs_ranks
@needs_mpi
def test_no_sync_accumulates_then_reduces(results):
    r = results["no_sync"]
    assert r["unsynced_grads_differ"] and r["grad_max_rel"] <= TOL, r


@runs_ranks
@needs_mpi
def test_bad_input_is_refused(results):
    e = results["refusals"]
    assert "does not divide into 2 equal shards" in e["indivisible"]
    assert "fewer than the 2 ranks" in e["too_few_rows"]
    assert "rank 1's parameters differ from rank 0's" in e["different_models"]


@runs_ranks
@needs_mpi
def test_the_equality_test_catches_the_planted_weighting_bug(planted):
    """Averaging the ranks' plain means (no N * n_rank / n_global weighting) is NOT the full-batch gradient."""
    assert planted["planted"] and planted["uneven"]["tokens_per_rank"] == [9, 6]
    assert planted["uneven"]["grad_max_rel"] > 1e3 * TOL, planted
    assert planted["no_sync"]["grad_max_rel"] > 1e3 * TOL, planted


# ---- the engine pieces DDP rests on (one process) ---------------------------------------------------------------


def test_post_accumulate_grad_hook_fires_once_the_leaf_gradient_is_complete():
    """The walk hands a leaf its gradient as soon as no later node feeds it: w1 (used early in the forward, late in
    the backward) is complete only after w2's hook has fired, and each hook sees its final .grad."""
    mt.manual_seed(0)
    w1 = mt.randn(3, 3, dtype=mt.float64, requires_grad=True)
    w2 = mt.randn(3, 3, dtype=mt.float64, requires_grad=True)
    x = mt.randn(2, 3, dtype=mt.float64)
    seen = []
    for name, w in (("w1", w1), ("w2", w2)):
        w.register_post_accumulate_grad_hook(lambda t, name=name: seen.append((name, t.grad.numpy().copy())))
    h = (x @ w1).tanh()
    loss = ((h @ w2) * (h @ w2)).sum() + (x @ w1).sum()  # w1 feeds two nodes, w2 two as well
    loss.backward()
    assert [n for n, _ in seen] == ["w2", "w1"]
    np.testing.assert_array_equal(seen[0][1], w2.grad.numpy())
    np.testing.assert_array_equal(seen[1][1], w1.grad.numpy())


def test_leaves_one_node_completes_together_arrive_in_input_order_not_address_order():
    """A Linear's weight and bias are complete at the same node: they are handed over in its input order, whatever
    their memory addresses. Data parallelism rests on it: each rank's arrival order must be rank 0's (the buckets are
    rebuilt in rank 0's, and a rank that ordered by address could differ). The two leaves are made in either order,
    with other allocations between, so that their addresses come in both orders."""
    rng = np.random.default_rng(0)
    addresses_seen = set()
    for trial in range(40):
        first_weight = trial % 2 == 0
        made = {}
        for name in ("weight", "bias") if first_weight else ("bias", "weight"):
            made[name] = mt.tensor(rng.standard_normal((2, 3) if name == "weight" else 2), requires_grad=True)
            _ = [mt.zeros(int(rng.integers(1, 50))) for _ in range(int(rng.integers(0, 3)))]
        weight, bias = made["weight"], made["bias"]
        addresses_seen.add(id(weight) < id(bias))
        seen = []
        weight.register_post_accumulate_grad_hook(lambda t, seen=seen: seen.append("weight"))
        bias.register_post_accumulate_grad_hook(lambda t, seen=seen: seen.append("bias"))
        x = mt.tensor(rng.standard_normal((4, 3)), requires_grad=True) * 2  # the walk goes on past the Linear node:
        mt.nn.functional.linear(x, weight, bias).sum().backward()  # its leaves are handed over mid-walk
        assert seen == ["weight", "bias"], (trial, seen)
    assert addresses_seen == {True, False}  # both address orders occurred: the order above is not theirs


def test_post_accumulate_grad_hook_refuses_a_non_leaf_and_can_be_removed():
    w = mt.randn(2, dtype=mt.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    calls = []
    handle = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    (w * 2).sum().backward()
    handle.remove()
    (w * 2).sum().backward()
    assert calls == [1]


def test_one_rank_ddp_is_the_module_itself():
    """world size 1 (a plain `python`, MPI's singleton): the wrap changes no value, and state_dict has torch's
    'module.' prefix."""
    if not HAVE_MPI:
        pytest.skip("needs the distributed extra: pip install -e '.[distributed]'")
    code = (
        "import minitensor as mt, numpy as np\n"
        "m = mt.nn.Linear(3, 2).double(); d = mt.nn.parallel.DistributedDataParallel(m)\n"
        "x = mt.randn(4, 3, dtype=mt.float64); d(x).sum().backward(); g = m.weight.grad.numpy().copy()\n"
        "m.zero_grad(); m(x).sum().backward(); assert np.array_equal(g, m.weight.grad.numpy())\n"
        "assert d.module is m and list(d.state_dict()) == ['module.weight', 'module.bias']\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.stdout.strip() == "ok", done.stderr


def test_imports_without_mpi4py_and_asking_for_it_gives_one_line():
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"  # as if the distributed extra were not installed
        "import minitensor as mt, transformer_np\n"
        "try:\n"
        "    mt.nn.parallel.DistributedDataParallel(mt.nn.Linear(2, 2))\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "data parallelism needs MPI, and mpi4py is not installed: "
        "install the distributed extra: pip install -e '.[distributed]' (mpi4py and mpich)"
    )


def test_an_early_leaf_gradient_never_shares_an_array_still_flowing():
    """x + w sends one array to the leaf w and to the non-leaf x; w's gradient is complete (and its hooks run)
    before x's node has run. Scaling w.grad in place in the hook must not change what flows on to v."""
    v = mt.randn(3, dtype=mt.float64, requires_grad=True)
    w = mt.randn(3, dtype=mt.float64, requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: t.grad.numpy().__imul__(0.0))  # a hook that scales in place
    c = mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64)
    (((v * 2) + w) * c).sum().backward()  # the add's gradient, c, is one owned array sent to both inputs
    np.testing.assert_array_equal(v.grad.numpy(), 2 * c.detach().numpy())


# ---- ranks that disagree: refused at wrap time, or stopped together ----------------------------------------------


def _exits(scenario: str) -> dict:
    """{rank: what it raised} from tests/support/ddp_fault_worker.py (a hang fails by run_ranks' timeout)."""
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    done = run_ranks(2, [os.path.join(ROOT, "tests", "support", "ddp_fault_worker.py"), scenario], timeout=120, env=env)
    # the two ranks' lines may reach mpiexec's output in one piece: split at each "EXIT <rank> <time> "
    lines = re.findall(r"EXIT (\d+) [\d.]+ (.*?)(?=EXIT \d+ [\d.]+ |\n|$)", done.stdout)
    assert len(lines) == 2, done.stdout[-2000:] + done.stderr[-2000:]
    return {int(r): what.strip() for r, what in lines}


@runs_ranks
@pytest.mark.parametrize(
    "scenario, words",
    [
        ("extra-buffer", "rank 1's buffers differ from rank 0's ('running_mean' is there only)"),
        ("missing-buffer", "rank 1's buffers differ from rank 0's ('scale' is missing there)"),
        ("buffer-shape", "rank 1's buffers differ from rank 0's ('scale': shape (4,) float32 there, (3,) float32 on"),
        ("buffer-dtype", "rank 1's buffers differ from rank 0's ('scale': shape (3,) float64 there, (3,) float32 on"),
        ("extra-parameter", "rank 1's parameters differ from rank 0's ('c.bias' is there only)"),
        ("parameter-shape", "rank 1's parameters differ from rank 0's ('b.bias': shape (4,) float32 there, (3,) "),
        ("parameter-dtype", "rank 1's parameters differ from rank 0's ('b.bias': shape (3,) float64 there, (3,) "),
    ],
)
@needs_mpi
def test_models_that_differ_are_refused_at_wrap_time_on_every_rank_naming_the_tensor(scenario, words):
    said = _exits(scenario)
    assert all(
        what.startswith("RuntimeError: DistributedDataParallel: ") and words in what for what in said.values()
    ), said


@runs_ranks
@needs_mpi
def test_a_parameter_one_rank_leaves_unused_stops_every_rank():
    """Before: rank 1 raised at its next forward, as documented, and rank 0 waited in the all-reduce for ever."""
    said = _exits("unused-parameter")
    assert "parameter(s) b.weight, b.bias got no gradient" in said[1], said
    assert said[0].startswith("OtherRankFailed: data parallelism: rank 1 failed, so every rank stops"), said
    assert "b.weight, b.bias" in said[0], said
