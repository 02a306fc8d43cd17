"""mt.optim against torch.optim: 20 training steps of a small MLP, parameter for parameter.

The MLP (Linear-LayerNorm-ReLU-Dropout(0)-Linear, cross-entropy) starts from the same float64
weights on both sides and sees the same batches; every step clips the gradient norm and steps
a scheduler. After 20 steps the parameters must agree within TRAINING_ATOL_FLOAT64. Also:
state_dict round trips resume bit for bit, parameter groups, skipped parameters, validation,
and a 1,000-step run that must not grow memory.
"""

from __future__ import annotations

import gc
import math
import tracemalloc

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import nn
from minitensor.nn import functional as F
from minitensor.optim import SGD, Adam, AdamW, lr_scheduler
from minitensor.testing import OP_RTOL, TRAINING_ATOL_FLOAT64, assert_close

D_IN, D_HID, N_CLS, BATCH, STEPS = 6, 16, 5, 12, 20
MAX_NORM = 0.5
WARMUP, D_MODEL = 5, 16


def mlp_ours():
    return nn.Sequential(
        nn.Linear(D_IN, D_HID), nn.LayerNorm(D_HID), nn.ReLU(), nn.Dropout(0.0), nn.Linear(D_HID, N_CLS)
    )


def mlp_torch():
    return torch.nn.Sequential(
        torch.nn.Linear(D_IN, D_HID),
        torch.nn.LayerNorm(D_HID),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.0),
        torch.nn.Linear(D_HID, N_CLS),
    ).double()


def make_pair(seed=0):
    mt.manual_seed(seed)
    mt.set_default_dtype(mt.float64)
    ours = mlp_ours()
    rng = np.random.default_rng(seed + 1)
    for p in ours.parameters():  # LayerNorm off its ones/zeros so its gradients matter
        p.data[...] = rng.standard_normal(p.shape) * 0.5
    theirs = mlp_torch()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def batches(n=STEPS, seed=2, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, D_IN)).astype(dtype), rng.integers(0, N_CLS, BATCH)) for _ in range(n)]


OPTIMIZERS = {
    "sgd": (lambda p: SGD(p, lr=0.2), lambda p: torch.optim.SGD(p, lr=0.2, foreach=False)),
    "sgd-momentum-wd": (
        lambda p: SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2, foreach=False),
    ),
    "sgd-dampening": (
        lambda p: SGD(p, lr=0.1, momentum=0.8, dampening=0.3),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.8, dampening=0.3, foreach=False),
    ),
    "sgd-nesterov": (
        lambda p: SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=False),
    ),
    "adam": (lambda p: Adam(p, lr=0.02), lambda p: torch.optim.Adam(p, lr=0.02, foreach=False)),
    "adam-wd": (
        lambda p: Adam(p, lr=0.02, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-2),
        lambda p: torch.optim.Adam(p, lr=0.02, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-2, foreach=False),
    ),
    "adam-amsgrad": (
        lambda p: Adam(p, lr=0.02, amsgrad=True),
        lambda p: torch.optim.Adam(p, lr=0.02, amsgrad=True, foreach=False),
    ),
    "adamw": (
        lambda p: AdamW(p, lr=0.02, weight_decay=0.1),
        lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.1, foreach=False),
    ),
    "adamw-fused-foreach": (  # torch's kernel choices, accepted: the same numbers as torch's single-tensor loop
        lambda p: AdamW(p, lr=0.02, weight_decay=0.1, fused=True, foreach=False),
        lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.1, foreach=False),
    ),
    "adagrad": (lambda p: mt.optim.Adagrad(p, lr=0.1), lambda p: torch.optim.Adagrad(p, lr=0.1, foreach=False)),
    "adagrad-decay-wd": (
        lambda p: mt.optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=1e-2, initial_accumulator_value=0.1),
        lambda p: torch.optim.Adagrad(
            p, lr=0.1, lr_decay=0.05, weight_decay=1e-2, initial_accumulator_value=0.1, foreach=False
        ),
    ),
    "rmsprop": (lambda p: mt.optim.RMSprop(p, lr=0.01), lambda p: torch.optim.RMSprop(p, lr=0.01, foreach=False)),
    "rmsprop-centered-momentum-wd": (
        lambda p: mt.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.8, centered=True, weight_decay=1e-2),
        lambda p: torch.optim.RMSprop(
            p, lr=0.01, alpha=0.9, momentum=0.8, centered=True, weight_decay=1e-2, foreach=False
        ),
    ),
    "adadelta": (lambda p: mt.optim.Adadelta(p), lambda p: torch.optim.Adadelta(p, foreach=False)),
    "adadelta-wd": (
        lambda p: mt.optim.Adadelta(p, lr=2.0, rho=0.8, eps=1e-5, weight_decay=1e-2),
        lambda p: torch.optim.Adadelta(p, lr=2.0, rho=0.8, eps=1e-5, weight_decay=1e-2, foreach=False),
    ),
}


def _warmup_lambda(e):
    n = e + 1
    return 1.0 * D_MODEL**-0.5 * min(n**-0.5, n * WARMUP**-1.5)


SCHEDULERS = {
    "none": (None, None),
    "step": (
        lambda o: lr_scheduler.StepLR(o, step_size=4, gamma=0.5),
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=4, gamma=0.5),
    ),
    "lambda": (
        lambda o: lr_scheduler.LambdaLR(o, lambda e: 0.9**e),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9**e),
    ),
    "warmup": (
        lambda o: lr_scheduler.WarmupInverseSqrt(o, d_model=D_MODEL, warmup_steps=WARMUP),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, _warmup_lambda),
    ),
}


def train_ours(model, opt, sched, data):
    losses, norms, lrs = [], [], []
    for x, y in data:
        opt.zero_grad()
        loss = F.cross_entropy(model(mt.tensor(x)), mt.tensor(y))
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM))
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return losses, norms, lrs


def train_torch(model, opt, sched, data):
    losses, norms, lrs = [], [], []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM, foreach=False)))
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return losses, norms, lrs


@pytest.mark.parametrize("sched_name", list(SCHEDULERS))
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_training_matches_torch(opt_name, sched_name):
    ours, theirs = make_pair()
    make_opt, make_topt = OPTIMIZERS[opt_name]
    make_sched, make_tsched = SCHEDULERS[sched_name]
    opt, topt = make_opt(ours.parameters()), make_topt(theirs.parameters())
    sched = make_sched(opt) if make_sched else None
    tsched = make_tsched(topt) if make_tsched else None
    data = batches()
    losses, norms, lrs = train_ours(ours, opt, sched, data)
    tlosses, tnorms, tlrs = train_torch(theirs, topt, tsched, data)

    assert_close(np.array(lrs), np.array(tlrs), OP_RTOL["float64"], "learning rates")
    if sched is not None:
        assert_close(np.array(sched.get_last_lr()), np.array(tsched.get_last_lr()), OP_RTOL["float64"], "last lr")
    assert any(n > MAX_NORM for n in tnorms), "the test must exercise clipping"
    assert_close(np.array(norms[:1]), np.array(tnorms[:1]), OP_RTOL["float64"], "first grad norm")
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        diff = np.abs(p.detach().numpy() - tp.detach().numpy()).max()
        assert diff <= TRAINING_ATOL_FLOAT64, (
            f"{opt_name}/{sched_name}: {name} differs by {diff:.3e} after {STEPS} steps"
        )
    assert losses[-1] < losses[0]


def test_param_groups_match_torch():
    ours, theirs = make_pair()
    decay = [p for n, p in ours.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in ours.named_parameters() if not n.endswith("weight")]
    tdecay = [p for n, p in theirs.named_parameters() if n.endswith("weight")]
    tno_decay = [p for n, p in theirs.named_parameters() if not n.endswith("weight")]
    opt = AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0, "lr": 0.005}], lr=0.02
    )
    topt = torch.optim.AdamW(
        [{"params": tdecay, "weight_decay": 0.1}, {"params": tno_decay, "weight_decay": 0.0, "lr": 0.005}],
        lr=0.02,
        foreach=False,
    )
    sched = lr_scheduler.StepLR(opt, 3, 0.7)
    tsched = torch.optim.lr_scheduler.StepLR(topt, 3, 0.7)
    data = batches()
    train_ours(ours, opt, sched, data)
    train_torch(theirs, topt, tsched, data)
    assert sched.get_last_lr() == pytest.approx(tsched.get_last_lr(), rel=1e-15)
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert np.abs(p.detach().numpy() - tp.detach().numpy()).max() <= TRAINING_ATOL_FLOAT64, name


@pytest.mark.parametrize(
    "opt_name,sched_name",
    [("adam-wd", "warmup"), ("sgd-momentum-wd", "step"), ("adam-amsgrad", "lambda"), ("sgd-nesterov", "none")],
)
def test_state_dict_round_trip_resumes_exactly(tmp_path, opt_name, sched_name):
    """10 steps, save model/optimizer/scheduler to disk, rebuild everything, 10 more == 20 straight."""
    make_opt, _ = OPTIMIZERS[opt_name]
    make_sched, _ = SCHEDULERS[sched_name]
    data = batches()

    ref, _ = make_pair()
    ref_opt = make_opt(ref.parameters())
    ref_sched = make_sched(ref_opt) if make_sched else None
    ref_losses, _, _ = train_ours(ref, ref_opt, ref_sched, data)

    model, _ = make_pair()
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched else None
    losses, _, _ = train_ours(model, opt, sched, data[:10])
    path = tmp_path / "ckpt.npz"
    mt.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict() if sched else {}},
        path,
    )
    opt.step()  # a stale update after saving must not leak into the checkpoint

    ckpt = mt.load(path)
    model2, _ = make_pair(seed=5)  # different initial weights: everything must come from the file
    model2.load_state_dict(ckpt["model"])
    opt2 = make_opt(model2.parameters())
    opt2.load_state_dict(ckpt["optimizer"])
    sched2 = None
    if make_sched:
        sched2 = make_sched(opt2)
        sched2.load_state_dict(ckpt["scheduler"])
    more, _, _ = train_ours(model2, opt2, sched2, data[10:])
    assert losses + more == ref_losses
    for p, q in zip(model2.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    if sched2:
        assert sched2.get_last_lr() == ref_sched.get_last_lr() and sched2.last_epoch == ref_sched.last_epoch


def test_state_dict_layout_follows_torch():
    ours, theirs = make_pair()
    opt, topt = Adam(ours.parameters()), torch.optim.Adam(theirs.parameters(), foreach=False)
    data = batches(1)
    train_ours(ours, opt, None, data)
    train_torch(theirs, topt, None, data)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert list(sd["state"]) == list(tsd["state"])
    assert set(sd["state"][0]) == set(tsd["state"][0])
    assert sd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
    assert isinstance(sd["state"][0]["exp_avg"], mt.Tensor) and isinstance(tsd["state"][0]["exp_avg"], torch.Tensor)
    exp_avg = opt.state[ours[0].weight]["exp_avg"]
    assert not np.shares_memory(exp_avg, sd["state"][0]["exp_avg"].numpy())  # a copy (torch's: the live state)
    np.testing.assert_array_equal(exp_avg, sd["state"][0]["exp_avg"].numpy())
    Adam(ours.parameters()).load_state_dict(sd)  # Tensors load, as arrays do


def test_load_state_dict_validates():
    ours, _ = make_pair()
    opt = Adam(ours.parameters())
    train_ours(ours, opt, None, batches(1))
    sd = opt.state_dict()
    other = Adam(list(ours.parameters())[:2])
    with pytest.raises(ValueError, match="parameters"):
        other.load_state_dict(sd)
    sd["state"][0]["exp_avg"] = sd["state"][0]["exp_avg"].float()
    with pytest.raises(TypeError, match="dtype float32"):
        Adam(ours.parameters()).load_state_dict(sd)
    sd["state"][0]["exp_avg"] = np.zeros((2, 2))
    with pytest.raises(ValueError, match="shape"):
        Adam(ours.parameters()).load_state_dict(sd)


def test_scheduler_state_dict_round_trip():
    p = nn.Parameter(np.zeros(2))
    opt = SGD([p], lr=2.0)
    s = lr_scheduler.WarmupInverseSqrt(opt, d_model=64, warmup_steps=10, factor=3.0)
    for _ in range(7):
        s.step()
    sd = s.state_dict()
    opt2 = SGD([p], lr=2.0)
    s2 = lr_scheduler.WarmupInverseSqrt(opt2, d_model=64, warmup_steps=10, factor=3.0)
    s2.load_state_dict(sd)
    opt2.load_state_dict(opt.state_dict())
    for _ in range(5):
        s.step(), s2.step()
        assert s.get_last_lr() == s2.get_last_lr() == [opt2.param_groups[0]["lr"]]


def test_warmup_schedule_shape():
    p = nn.Parameter(np.zeros(1))
    opt = SGD([p], lr=1.0)
    s = lr_scheduler.WarmupInverseSqrt(opt, d_model=512, warmup_steps=4000)
    lrs = [s.get_last_lr()[0]]
    for _ in range(9999):
        s.step()
        lrs.append(s.get_last_lr()[0])
    assert lrs[0] == pytest.approx(512**-0.5 * 4000**-1.5)  # first update: step_num 1
    peak = int(np.argmax(lrs))
    assert peak == 3999 and lrs[peak] == pytest.approx((512 * 4000) ** -0.5)
    assert lrs[9999] == pytest.approx(512**-0.5 * 10000**-0.5)
    assert all(np.diff(lrs[:4000]) > 0) and all(np.diff(lrs[4000:]) < 0)


def test_params_without_grad_are_skipped(rng):
    a = nn.Parameter(rng.standard_normal(3))
    b = nn.Parameter(rng.standard_normal(3))
    b_before = b.detach().numpy().copy()
    for opt in (SGD([a, b], lr=0.1, momentum=0.9), Adam([a, b]), AdamW([a, b])):
        a.grad = mt.tensor(rng.standard_normal(3))
        b.grad = None
        opt.step()
        np.testing.assert_array_equal(b.detach().numpy(), b_before)
        assert b not in opt.state and a in opt.state


def test_updates_are_in_place_and_keep_dtype(rng):
    for make in (
        lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1),
        lambda ps: Adam(ps, weight_decay=0.1),
        lambda ps: AdamW(ps, amsgrad=True),
    ):
        p = nn.Parameter(rng.standard_normal((4, 3)).astype(np.float32))
        arr = p.detach().numpy()
        p.grad = mt.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        g_before = p.grad.numpy().copy()
        opt = make([p])
        opt.step()
        assert p._data is arr and p.dtype == np.float32
        np.testing.assert_array_equal(p.grad._data, g_before)  # the gradient is never modified
        for v in opt.state[p].values():
            if isinstance(v, np.ndarray):
                assert v.dtype == np.float32


def test_zero_grad():
    p = nn.Parameter(np.ones(2))
    opt = SGD([p], lr=0.1)
    p.grad = mt.tensor(np.ones(2))
    opt.zero_grad(set_to_none=False)
    assert np.all(p.grad.numpy() == 0)
    opt.zero_grad()
    assert p.grad is None


def test_scheduler_writes_lr_read_by_optimizer():
    p = nn.Parameter(np.zeros(1))
    opt = SGD([p], lr=1.0)
    s = lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    seen = []
    for _ in range(5):
        p.grad = mt.tensor(np.ones(1))
        before = p.detach().numpy().copy()
        opt.step()
        seen.append(float(before[0] - p.detach().numpy()[0]))
        s.step()
    assert seen == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01])


def test_validation_errors():
    p = nn.Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta"):
        Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([])
    with pytest.raises(TypeError, match="single Tensor"):
        Adam(p)
    with pytest.raises(ValueError, match="more than one"):
        Adam([{"params": [p]}, {"params": [p]}])
    with pytest.raises(ValueError, match="non-leaf"):
        Adam([p * 2])
    with pytest.raises(TypeError, match="Tensors"):
        Adam([np.zeros(2)])
    opt = SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="step_size"):
        lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        lr_scheduler.WarmupInverseSqrt(opt, d_model=8, warmup_steps=0)
    with pytest.raises(TypeError, match="Optimizer"):
        lr_scheduler.LambdaLR("opt", lambda e: 1.0)


# Every hyperparameter of every optimizer and scheduler, at the edge values: (class name, argument, value).
# The outcome (raise or accept) must be torch's, except that every non-finite value is refused here,
# also where torch takes it (flagged in optimizer.check_hyperparameter): SGD takes lr=nan, everyone lr=inf.
_NONFINITE = (math.nan, math.inf, -math.inf)
_EDGES = _NONFINITE + (-1.0, 0.0, 0.5)
HPARAM_CASES = (
    [("SGD", a, v) for a in ("lr", "momentum", "weight_decay") for v in _EDGES]
    + [(o, a, v) for o in ("Adam", "AdamW") for a in ("lr", "eps", "weight_decay") for v in _EDGES]
    + [(o, f"betas[{i}]", v) for o in ("Adam", "AdamW") for i in (0, 1) for v in _EDGES + (1.0,)]
    + [("StepLR", "gamma", v) for v in _NONFINITE + (0.0, 0.5)]
)


def _build(lib, cls_name, arg, value):
    """The optimizer (or a scheduler over SGD) of `lib` with `arg` set to `value`."""
    p = [torch.nn.Parameter(torch.zeros(2))] if lib is torch else [nn.Parameter(np.zeros(2))]
    optim = torch.optim if lib is torch else mt.optim
    if cls_name == "StepLR":
        return optim.lr_scheduler.StepLR(optim.SGD(p, lr=0.1), step_size=2, gamma=value)
    kw = {"lr": 0.1}
    if arg.startswith("betas"):
        betas = [0.9, 0.999]
        betas[int(arg[6])] = value
        kw["betas"] = tuple(betas)
    else:
        kw[arg] = value
    return getattr(optim, cls_name)(p, **kw)


@pytest.mark.parametrize("cls_name,arg,value", HPARAM_CASES)
def test_hyperparameter_checks_follow_torch(cls_name, arg, value):
    try:
        _build(torch, cls_name, arg, value)
        torch_error = None
    except ValueError as e:
        torch_error = str(e)
    if torch_error is None and math.isfinite(value):
        _build(mt, cls_name, arg, value)  # torch accepts it: so do we
        return
    with pytest.raises(ValueError) as info:
        _build(mt, cls_name, arg, value)
    if torch_error is not None:  # torch's wording, after our "Adam: " prefix
        assert torch_error in str(info.value)
    else:
        assert f"{value} (expected a finite number" in str(info.value)


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_hyperparameters_are_checked_in_every_group_and_at_every_step(opt_name):
    """A group's own value, a loaded state_dict and a hand edit of group['lr'] are checked too."""
    cls = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW}[opt_name]
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="Invalid learning rate: nan"):
        cls([{"params": [a]}, {"params": [b], "lr": math.nan}], lr=0.1)
    opt = cls([a], lr=0.1)
    with pytest.raises(ValueError, match="Invalid weight_decay value: inf"):
        opt.add_param_group({"params": [b], "weight_decay": math.inf})
    state = opt.state_dict()
    state["param_groups"][0]["lr"] = math.inf
    with pytest.raises(ValueError, match="Invalid learning rate: inf"):
        opt.load_state_dict(state)
    assert opt.param_groups[0]["lr"] == 0.1  # a refused state changes nothing
    a.grad = mt.tensor(np.ones(2))
    opt.param_groups[0]["lr"] = math.nan
    with pytest.raises(ValueError, match="Invalid learning rate: nan"):
        opt.step()
    assert np.array_equal(a.detach().numpy(), np.zeros(2))  # no parameter was touched


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_a_schedule_giving_a_bad_lr_is_refused(bad):
    """torch writes whatever a LambdaLR returns; here the step that would write it raises, naming it."""
    p = nn.Parameter(np.zeros(2))
    opt = SGD([p], lr=0.1)
    sched = lr_scheduler.LambdaLR(opt, lambda e: bad if e == 2 else 1.0)
    sched.step()
    with pytest.raises(ValueError, match=f"lr={0.1 * bad} for param group 0 at last_epoch=2"):
        sched.step()
    assert sched.last_epoch == 1 and opt.param_groups[0]["lr"] == 0.1
    for factor in (math.nan, math.inf, 0.0, -1.0):
        with pytest.raises(ValueError, match="Invalid factor value"):
            lr_scheduler.WarmupInverseSqrt(opt, d_model=8, warmup_steps=4, factor=factor)


def _live_tensors() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) in (mt.Tensor, nn.Parameter))


def test_training_does_not_grow_memory():
    """1,000 float32 steps: live Tensors stay constant and traced memory does not grow."""
    mt.manual_seed(0)
    model = mlp_ours()
    opt = Adam(model.parameters(), lr=1e-3)
    sched = lr_scheduler.WarmupInverseSqrt(opt, d_model=D_HID, warmup_steps=100)
    data = batches(8, dtype=np.float32)
    xs = [(mt.tensor(x), mt.tensor(y)) for x, y in data]

    def step(i):
        x, y = xs[i % len(xs)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss.item()

    for i in range(20):
        step(i)
    tracemalloc.start()
    try:
        counts = []
        for i in range(20, 1000):
            step(i)
            if i in (100, 500, 999):
                counts.append(_live_tensors())
                if i == 100:
                    base, _ = tracemalloc.get_traced_memory()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts[0] == counts[1] == counts[2], f"live Tensors grew: {counts}"
    assert end - base < 512 * 1024, f"traced memory grew by {(end - base) / 1024:.0f} KiB over 900 steps"
    assert all(p.dtype == np.float32 for p in model.parameters())
    assert math.isfinite(step(0))


@pytest.mark.parametrize(
    "ours_cls,torch_cls,kw",
    [
        (SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
        (Adam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.01)),
        (AdamW, torch.optim.AdamW, dict(lr=0.01, amsgrad=True)),
    ],
    ids=["sgd", "adam", "adamw"],
)
def test_maximize_matches_torch(rng, ours_cls, torch_cls, kw):
    p = nn.Parameter(rng.standard_normal((3, 4)))
    tp = torch.nn.Parameter(torch.from_numpy(p.detach().numpy().copy()))
    opt, topt = ours_cls([p], maximize=True, **kw), torch_cls([tp], maximize=True, foreach=False, **kw)
    for _ in range(3):
        g = rng.standard_normal((3, 4))
        p.grad, tp.grad = mt.tensor(g), torch.from_numpy(g.copy())
        opt.step(), topt.step()
    assert np.abs(p.detach().numpy() - tp.detach().numpy()).max() <= TRAINING_ATOL_FLOAT64


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_float32_steps_match_torch(rng, opt_name):
    """float32 end to end: state in float32, three updates equal torch's to float32 precision."""
    make_opt, make_topt = OPTIMIZERS[opt_name]
    p = nn.Parameter(rng.standard_normal((5, 4)).astype(np.float32))
    tp = torch.nn.Parameter(torch.from_numpy(p.detach().numpy().copy()))
    opt, topt = make_opt([p]), make_topt([tp])
    for _ in range(3):
        g = rng.standard_normal((5, 4)).astype(np.float32)
        p.grad, tp.grad = mt.tensor(g), torch.from_numpy(g.copy())
        opt.step(), topt.step()
    assert p.dtype == np.float32
    assert_close(p.detach().numpy(), tp.detach().numpy(), OP_RTOL["float32"], f"{opt_name} float32 parameters")
