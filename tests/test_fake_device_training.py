"""Training on the fake CUDA device (minitensor/fakecuda.py, issue 24): init, dropout, optimizers, clipping,
the profiler and data-parallel buckets, each equal to the same run on the CPU, and the host syncs they cost.

The fake is NumPy underneath, so where the same formula runs on both sides the results are bitwise equal;
where a CPU speed device is bypassed on the device (clip_grad_norm_'s blocked float64 dots) they agree to
minitensor/testing.py's tolerances. Every host read on the fake counts as a sync (fakecuda.count_syncs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import types

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import fakecuda, nn
from minitensor.nn.parallel import run_ranks
from minitensor.testing import OP_RTOL, PARITY_RTOL, assert_close


def dev(a, requires_grad: bool = False) -> mt.Tensor:
    """A Tensor on the fake device holding a copy of the host array `a`."""
    t = mt.Tensor.wrap(fakecuda.asarray(a))
    if requires_grad:
        t.requires_grad_(True)
    return t


def host(t) -> np.ndarray:
    """The host copy of a Tensor's (or an array's) data, on either device."""
    a = getattr(t, "data", t)
    return a if isinstance(a, np.ndarray) else fakecuda.asnumpy(a)


def on_fake(t) -> bool:
    return type(t.data) is fakecuda.FakeArray


# ----------------------------------------------------------------------------- randomness: drawn on the host


@pytest.mark.parametrize(
    "init",
    [
        lambda t: nn.init.uniform_(t, -0.3, 0.7),
        lambda t: nn.init.normal_(t, 0.1, 2.0),
        lambda t: nn.init.trunc_normal_(t, 0.0, 1.0, -1.0, 1.0),
        lambda t: nn.init.xavier_uniform_(t),
        lambda t: nn.init.xavier_normal_(t),
        lambda t: nn.init.kaiming_uniform_(t, a=5**0.5),
        lambda t: nn.init.kaiming_normal_(t),
        lambda t: nn.init.eye_(t),
        lambda t: nn.init.constant_(t, 0.25),
    ],
)
def test_init_same_seed_same_weights(init):
    mt.manual_seed(7)
    cpu = init(mt.Tensor.wrap(np.zeros((5, 6), dtype=np.float32)))
    mt.manual_seed(7)
    fake = init(dev(np.zeros((5, 6), dtype=np.float32)))
    assert on_fake(fake) and fake.dtype == np.float32
    np.testing.assert_array_equal(host(fake), host(cpu))


def test_dropout_same_seed_same_mask():
    x = np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32)
    mt.manual_seed(3)
    cpu = F.dropout(mt.tensor(x), 0.3)
    mt.manual_seed(3)
    fake = F.dropout(dev(x), 0.3)
    assert on_fake(fake)
    np.testing.assert_array_equal(host(fake), host(cpu))
    # a host mask (the parity checks' mask_fn) is copied to the input's device
    keep = np.random.default_rng(1).random(x.shape) > 0.5
    np.testing.assert_array_equal(
        host(F.dropout(dev(x), 0.5, mask=keep)), host(F.dropout(mt.tensor(x), 0.5, mask=keep))
    )


# ----------------------------------------------------------------------------- optimizers on device parameters

# one parameter larger than optimizer.BLOCK_NUMEL: the CPU updates it block by block, the device whole
SHAPES = [(300, 200), (17,), (3, 4)]


def _params(make, dtype=np.float32):
    rng = np.random.default_rng(11)
    return [make(rng.standard_normal(s).astype(dtype), True) for s in SHAPES]


def _grads(step: int, dtype=np.float32) -> list:
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


OPTIMIZERS = {
    "sgd": lambda ps: mt.optim.SGD(ps, lr=0.1),
    "sgd_momentum_nesterov_wd": lambda ps: mt.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd_dampening_maximize": lambda ps: mt.optim.SGD(ps, lr=0.05, momentum=0.5, dampening=0.3, maximize=True),
    "adam": lambda ps: mt.optim.Adam(ps, lr=1e-2),
    "adam_l2_amsgrad": lambda ps: mt.optim.Adam(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "adamw": lambda ps: mt.optim.AdamW(ps, lr=1e-2, betas=(0.8, 0.99)),
}


def _run(make, name: str, steps: int = 4):
    params = _params(make)
    opt = OPTIMIZERS[name](params)
    sched = mt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    syncs = []
    for step in range(steps):
        for p, g in zip(params, _grads(step)):
            p.grad = make(g, False)
        with fakecuda.count_syncs() as c:
            opt.step()
            sched.step()
        syncs.append(c.count)
    return params, opt, syncs


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_on_device_equals_cpu_bitwise(name):
    """The same formulas, whole arrays on the device, blocks on the CPU: elementwise, so bitwise equal. No syncs."""
    cpu, _, _ = _run(lambda a, rg: mt.Tensor.wrap(a).requires_grad_(rg), name)
    fake, opt, syncs = _run(dev, name)
    assert syncs == [0] * len(syncs)
    for c, f in zip(cpu, fake):
        assert on_fake(f)
        np.testing.assert_array_equal(host(f), host(c))
    for st in opt.state.values():
        assert all(on_fake(mt.Tensor.wrap(v)) for v in st.values() if not isinstance(v, int))


def test_optimizer_state_dict_round_trip_to_device():
    """A state dict (host arrays, as a checkpoint stores them) loads onto device parameters: onto their device."""
    cpu, cpu_opt, _ = _run(lambda a, rg: mt.Tensor.wrap(a).requires_grad_(rg), "adam_l2_amsgrad", steps=2)
    fake = _params(dev)
    fake_opt = OPTIMIZERS["adam_l2_amsgrad"](fake)
    for f, c in zip(fake, cpu):
        f.data[...] = fakecuda.asarray(host(c))
    fake_opt.load_state_dict(cpu_opt.state_dict())
    for st in fake_opt.state.values():
        for k, v in st.items():
            assert k == "step" or type(v) is fakecuda.FakeArray, k
    for ps, opt in ((cpu, cpu_opt), (fake, fake_opt)):
        for p, g in zip(ps, _grads(9)):
            p.grad = mt.Tensor.wrap(g) if opt is cpu_opt else dev(g)
        opt.step()
    for c, f in zip(cpu, fake):
        np.testing.assert_array_equal(host(f), host(c))
    # and back: a device optimizer's state dict holds device arrays, which load onto the CPU's parameters
    again = _params(lambda a, rg: mt.Tensor.wrap(a).requires_grad_(rg))
    back = OPTIMIZERS["adam_l2_amsgrad"](again)
    back.load_state_dict(fake_opt.state_dict())
    assert all(isinstance(v, (int, np.ndarray)) for st in back.state.values() for v in st.values())


# ----------------------------------------------------------------------------- clip_grad_norm_: no sync per parameter


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])  # clipping, and a factor that stays 1
def test_clip_grad_norm_on_device(norm_type, max_norm):
    grads = _grads(0)

    def clip(make):
        params = _params(make)
        for p, g in zip(params, grads):
            p.grad = make(g.copy(), False)  # the CPU's Tensor.wrap shares the array that clipping scales
        with fakecuda.count_syncs() as c:
            total = nn.utils.clip_grad_norm_(params, max_norm, norm_type)
        return params, total, c.count

    cpu, cpu_total, _ = clip(lambda a, rg: mt.Tensor.wrap(a).requires_grad_(rg))
    fake, fake_total, syncs = clip(dev)
    assert syncs == 0  # the norm, the factor and the scaling stay on the device
    assert isinstance(fake_total, mt.Tensor) and on_fake(fake_total) and fake_total.shape == ()  # torch's 0-d tensor
    # 2-norm: the CPU sums squares in blocked float32 dots, the device in one float64 sum: round-off apart.
    # The other norms run the same formula: bitwise.
    rtol = 0.0 if norm_type != 2.0 else OP_RTOL["float32"]
    assert_close(np.float64(host(fake_total)), np.float64(cpu_total), rtol or 1e-300, "total norm")
    for c, f in zip(cpu, fake):
        if rtol:
            assert_close(host(f.grad), host(c.grad), rtol, "clipped gradient")
        else:
            np.testing.assert_array_equal(host(f.grad), host(c.grad))


def test_clip_grad_norm_on_device_nonfinite():
    params = _params(dev)
    grads = _grads(0)
    grads[1][3] = np.inf
    for p, g in zip(params, grads):
        p.grad = dev(g)
    with fakecuda.count_syncs() as c, pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert c.count == 1  # error_if_nonfinite reads the norm once, not once per parameter
    # without the check: the factor 0 as on the CPU, no sync, and the guard of the caller sees the inf
    cpu = _params(lambda a, rg: mt.Tensor.wrap(a).requires_grad_(rg))
    for p, g in zip(cpu, grads):
        p.grad = mt.Tensor.wrap(g.copy())
    with np.errstate(invalid="ignore"):  # inf * 0 (the CPU path warns; the training step silences it)
        assert nn.utils.clip_grad_norm_(cpu, 1.0) == np.inf
    assert float(nn.utils.clip_grad_norm_(params, 1.0)) == np.inf
    for c, f in zip(cpu, params):
        np.testing.assert_array_equal(host(f.grad), host(c.grad))


def test_clip_grad_value_and_vectors_on_device():
    params = _params(dev)
    for p, g in zip(params, _grads(0)):
        p.grad = dev(g)
    with fakecuda.count_syncs() as c:
        nn.utils.clip_grad_value_(params, 0.5)
        vec = nn.utils.parameters_to_vector(params)
        nn.utils.vector_to_parameters(mt.Tensor.wrap(vec.data * 2), params)
    assert c.count == 0 and on_fake(vec)
    assert float(abs(params[0].grad.data).max()) <= 0.5
    np.testing.assert_array_equal(host(params[2]), 2 * host(vec)[-12:].reshape(3, 4))


# ----------------------------------------------------------------------------- the profiler waits for the device


def test_profiler_synchronises_a_device(monkeypatch):
    """On a GPU every op is timed between two device synchronisations. The fake computes eagerly and has nothing
    to wait for, so a stand-in CuPy module counts the synchronisations the profiler asks for."""
    waits = []

    class Device:
        def synchronize(self):
            waits.append(1)

    cupy_like = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device))
    monkeypatch.setattr(mt.profiler, "array_module", lambda a: cupy_like)
    x = dev(np.ones((2, 3), dtype=np.float32))
    with mt.profiler.profile() as prof:
        y = x * x + x  # two primitives
    assert on_fake(y) and prof.stats["Mul"][0] == 1 and prof.stats["Add"][0] == 1
    assert len(waits) == 2 * 2 + 1  # before and after each op, and once before the block's wall clock stops
    waits.clear()
    with mt.profiler.profile():
        mt.tensor(np.ones(3)) * 2.0  # on the host: nothing to wait for
    assert waits == []


# ----------------------------------------------------------------------------- data parallel: host buckets

HAVE_MPI = importlib.util.find_spec("mpi4py") is not None


@pytest.mark.skipif(not HAVE_MPI, reason="needs the distributed extra: pip install -e '.[distributed]'")
def test_ddp_on_fake_device_two_ranks():
    """Two ranks, parameters on the fake device: the averaged gradients equal the mean of the ranks' local ones,
    stay on the device, and cost one device -> host transfer per bucket (a `.get()`, counted as a sync)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    worker = os.path.join(root, "tests", "ddp_fake_device_worker.py")
    done = run_ranks(2, [worker], timeout=240, env=env)
    lines = [l for l in done.stdout.splitlines() if l.startswith("DDP_FAKE ")]
    assert done.returncode == 0 and lines, f"the ranks failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    r = json.loads(lines[0].removeprefix("DDP_FAKE "))
    assert r["world_size"] == 2 and r["start_equal"] and r["on_device"], r
    assert r["grad_max_rel"] <= PARITY_RTOL["float64"], r
    assert min(r["buckets"]) >= 2 and r["syncs"] == r["buckets"], r  # one transfer per bucket, none per parameter
