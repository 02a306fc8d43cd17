"""Training on the fake CUDA device (minitensor/fakecuda.py): init, dropout, optimizers, clipping,
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
from minitensor import devices, fakecuda, nn
from minitensor.nn.parallel import run_ranks
from minitensor.testing import OP_RTOL, PARITY_RTOL, assert_close
from tests.support import ROOT
from tests.transformer_np.test_cli import TINY
from transformer_np.cli import main
from transformer_np.decode import beam_search, greedy_decode
from transformer_np.training import default_configs, load_checkpoint, train
from transformer_np.training.recipe import build_model, build_optimizer, build_scheduler, layer_groups
from transformer_np.training.step import train_step

pytestmark = pytest.mark.full


@pytest.fixture(autouse=True)
def fake():
    """ "cuda" is the fake device in every test here (put back afterwards)."""
    previous = devices.use_fake_cuda(True)
    yield
    devices.use_fake_cuda(previous)


def dev(a, requires_grad: bool = False) -> mt.Tensor:
    """A Tensor on the fake device holding a copy of the host array `a`."""
    t = mt.Tensor.wrap(fakecuda.asarray(a))
    if requires_grad:
        t.requires_grad_(True)
    return t


def host(t) -> np.ndarray:
    """The host copy of a Tensor's (or an array's) data, on any device (tests/minitensor/devices/test_cuda.py runs
    _steps on CuPy)."""
    return devices.to_host(t._data if isinstance(t, mt.Tensor) else t)


def on_fake(t) -> bool:
    return type(t._data) is fakecuda.FakeArray


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

# parameters of several sizes, one of them large
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
        nn.utils.vector_to_parameters(mt.Tensor.wrap(vec._data * 2), params)
    assert c.count == 0 and on_fake(vec)
    assert float(abs(params[0].grad._data).max()) <= 0.5
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
@pytest.mark.xdist_group("mpi")
def test_ddp_on_fake_device_two_ranks():
    """Two ranks, parameters on the fake device: the averaged gradients equal the mean of the ranks' local ones,
    stay on the device, and cost one device -> host transfer per bucket (a `.get()`, counted as a sync)."""
    root = ROOT
    env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    worker = os.path.join(root, "tests", "support", "ddp_fake_device_worker.py")
    done = run_ranks(2, [worker], timeout=240, env=env)
    lines = [l for l in done.stdout.splitlines() if l.startswith("DDP_FAKE ")]
    assert done.returncode == 0 and lines, f"the ranks failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    r = json.loads(lines[0].removeprefix("DDP_FAKE "))
    assert r["world_size"] == 2 and r["start_equal"] and r["on_device"], r
    assert r["grad_max_rel"] <= PARITY_RTOL["float64"], r
    assert min(r["buckets"]) >= 2 and r["syncs"] == r["buckets"], r  # one transfer per bucket, none per parameter


# ----------------------------------------------------------------------------- the Transformer on the fake device

TINY_MODEL = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, dropout=0.1)
TINY_TRAIN = dict(steps=4, batch_size=6, train_size=24, eval_size=6, eval_every=0, checkpoint_every=2, warmup_steps=3)


def _tiny_configs():
    model_cfg, train_cfg = default_configs("copy-reverse")
    return model_cfg.replace(**TINY_MODEL), train_cfg.replace(**TINY_TRAIN)


def _batch(B: int = 4, seed: int = 0):
    """A host batch with PAD tails of different lengths (ids 3.. are tokens, 0 PAD, 1 BOS, 2 EOS)."""
    rng = np.random.default_rng(seed)
    src, tgt = rng.integers(3, 20, (B, 7)), rng.integers(3, 20, (B, 9))
    tgt[:, 0] = 1
    for b in range(B):
        src[b, 7 - b :] = 0 if b else src[b, 7 - b :]
        tgt[b, 9 - b - 1] = 2
        tgt[b, 9 - b :] = 0
    return src, tgt


def _steps(device: str, steps: int = 3, dtype=np.float64):
    """`steps` training steps of a tiny Transformer (dropout on) with the recipe's Adam, schedule and clipping.
    Returns the model, each step's (loss, norm, group norms), its host syncs, and the key biases' Adam step bound."""
    model_cfg, train_cfg = _tiny_configs()
    model = build_model(model_cfg, seed=5).to(dtype).to(device)
    model.train()
    optimizer, groups = build_optimizer(model, train_cfg), layer_groups(model)
    scheduler = build_scheduler(optimizer, model_cfg, train_cfg)
    params = [p for ps in groups.values() for p in ps]
    key_biases = [p for n, p in model.named_parameters() if n.endswith("W_k.bias")]
    mt.manual_seed(9)  # the dropout masks: drawn on the host, the same on both devices
    records, syncs, bound, g_max = [], [], 0.0, 0.0
    for i in range(steps):
        src, tgt = _batch(seed=i)
        lr = optimizer.param_groups[0]["lr"]
        with fakecuda.count_syncs() as c:
            loss, total, sq, _ = train_step(model, optimizer, scheduler, params, src, tgt, train_cfg, groups, step=i)
        records.append((loss, total, sq))
        syncs.append(c.count)
        # parity/report.py's adam_step_bound: how far Adam can move a parameter whose gradient is round-off
        g_max = max([g_max] + [float(np.abs(host(p.grad)).max()) for p in key_biases])
        b1, b2 = train_cfg.betas
        bound += lr * min(max(1.0, (1 - b1) / (1 - b2) ** 0.5), g_max / train_cfg.eps)
    return model, records, syncs, bound


def test_transformer_training_steps_on_device_equal_cpu():
    """Three float64 steps (dropout, label smoothing, clipping, Adam, warmup): the losses, gradient norms and final
    weights equal the CPU run's to PARITY_RTOL. Not bitwise: the CPU's speed devices (blocked norm, row-sum einsum)
    sum in another order than the device's plain formulas. The key biases (W_k.bias) are the exception, as in the
    parity report: their gradient is exactly 0 (softmax ignores a shift of every score in a row), so each side moves
    them by round-off amplified by Adam; both must stay within Adam's step bound for such gradients of each other."""
    cpu, dev = _steps("cpu"), _steps("cuda")
    assert_steps_equal(cpu, dev, lambda a: type(a) is fakecuda.FakeArray)
    for (_, _, csq), (dl, dn, dsq) in zip(cpu[1], dev[1]):
        assert isinstance(dl, float) and isinstance(dn, float)
        assert dsq.keys() == csq.keys()
        for k in csq:
            assert_close(np.float64(dsq[k]), np.float64(csq[k]), PARITY_RTOL["float64"], f"squared norm of {k}")
    assert 0 < cpu[3] < 1e-6 and 0 < dev[3] < 1e-6  # round-off gradients: a tiny bound


def assert_steps_equal(cpu, dev, on_device) -> None:
    """_steps' results on the CPU and on a device (the fake here, CuPy in tests/minitensor/devices/test_cuda.py) equal
    to PARITY_RTOL:
    losses, gradient norms and final weights, each weight's array on the device (on_device(array) is True); the key
    biases within the sum of both runs' Adam bounds of each other."""
    (cpu_model, cpu_records, _, cpu_bound), (dev_model, dev_records, _, dev_bound) = cpu, dev
    tol = PARITY_RTOL["float64"]
    for (cl, cn, _), (dl, dn, _) in zip(cpu_records, dev_records, strict=True):
        assert_close(np.float64(dl), np.float64(cl), tol, "loss")
        assert_close(np.float64(dn), np.float64(cn), tol, "gradient norm")
    for (name, c), (_, d) in zip(cpu_model.state_dict().items(), dev_model.state_dict().items(), strict=True):
        assert on_device(d._data), f"{name}: a {type(d._data).__name__}, not on the device"
        if name.endswith("W_k.bias"):
            assert np.abs(host(d) - host(c)).max() <= cpu_bound + dev_bound, name
        else:
            assert_close(host(d), host(c), tol, name)


def test_transformer_training_step_host_syncs():
    """The exact host syncs of one training step on the device, none of them per parameter:
    1, 2. F.embedding's range check of the ids, encoder and decoder (one read each; torch asserts on the device);
    3.    cross_entropy's range check of the targets (ops/losses.py, one read);
    4, 5. the two embeddings' backward, a deterministic scatter-add of repeated ids: how many passes it takes
          (ops/indexing.py, add_rows_at, one read each);
    6.    the step's one read of the loss, the clipped norm and the per-group squared norms (step.py, _read_once),
          for the log and the non-finite guard.
    clip_grad_norm_, Adam and the schedule read nothing; the batches and masks go over as transfers, not syncs."""
    _, _, syncs, _ = _steps("cuda", steps=2)
    assert syncs == [6, 6]


def test_decoding_on_device_equals_cpu():
    """Greedy (cached and not) and beam search give the same tokens and scores on both devices; greedy reads the
    device twice a step (the newest ids' range check in the embedding, the argmax of the newest logits), plus the
    source ids' check once. (Beam search's bookkeeping is on the host too: its reads also grow with the steps.)"""
    model_cfg, _ = _tiny_configs()
    cpu_model = build_model(model_cfg, seed=4).double()
    dev_model = build_model(model_cfg, seed=4).double().to("cuda")
    src, _ = _batch(B=3)
    for use_cache in (True, False):
        want = greedy_decode(cpu_model, src, max_len=6, use_cache=use_cache)
        with fakecuda.count_syncs() as c:
            got = greedy_decode(dev_model, src, max_len=6, use_cache=use_cache)
        np.testing.assert_array_equal(got, want)
        # the source ids' range check in the encoder's embedding, then per step the new ids' check and the argmax read
        assert c.count == 1 + 2 * got.shape[1], c.count
        assert_beams_equal(cpu_model, dev_model, src, use_cache)


def assert_beams_equal(cpu_model, dev_model, src, use_cache: bool) -> None:
    """Beam search (3 beams, 2 best) gives the same tokens on both devices, and their scores to PARITY_RTOL."""
    want = beam_search(cpu_model, src, beam_size=3, max_len=6, n_best=2, use_cache=use_cache)
    got = beam_search(dev_model, src, beam_size=3, max_len=6, n_best=2, use_cache=use_cache)
    for w, g in zip(want, got, strict=True):
        assert [t.tolist() for t, _ in g] == [t.tolist() for t, _ in w]
        np.testing.assert_allclose([s for _, s in g], [s for _, s in w], rtol=PARITY_RTOL["float64"])


def test_checkpoint_written_on_device_loads_on_cpu_and_resumes_on_device(tmp_path):
    """train(device='cuda') writes a host .npz, which loads on the CPU; a device run resumed from it ends with the
    weights of an uninterrupted device run, bitwise (Adam's moments and the dropout stream came back exactly)."""
    model_cfg, train_cfg = _tiny_configs()
    whole = train(model_cfg, train_cfg, str(tmp_path / "whole"), progress=False, device="cuda")
    train(model_cfg, train_cfg.replace(steps=2), str(tmp_path / "cut"), progress=False, device="cuda")
    resumed = train(model_cfg, train_cfg, str(tmp_path / "cut"), resume=True, progress=False, device="cuda")
    ckpt = load_checkpoint(str(tmp_path / "whole"))
    assert all(v.device == "cpu" for v in ckpt.model.state_dict().values())
    for (name, a), (_, b) in zip(
        ckpt.model.state_dict().items(), load_checkpoint(str(tmp_path / "cut")).model.state_dict().items()
    ):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert whole.step == resumed.step == train_cfg.steps


def test_cli_device_cuda_without_a_device_is_one_line(capsys, tmp_path):
    devices.use_fake_cuda(False)
    if mt.cuda.is_available():
        pytest.skip("a real CUDA device answers here")
    with pytest.raises(SystemExit) as e:
        main(["train", "--out", str(tmp_path / "run"), "--device", "cuda", "--steps", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "--device cuda: no CUDA device is available" in err[0], err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: nn.Linear(5, 3, **kw),
        lambda **kw: nn.Embedding(7, 4, padding_idx=2, **kw),
        lambda **kw: nn.LayerNorm(6, **kw),
    ],
)
def test_module_device_keyword_same_weights(make):
    """torch's device= on a module: initialised on the host from the one stream, then copied."""
    mt.manual_seed(1)
    cpu = make()
    mt.manual_seed(1)
    fake = make(device="cuda")
    for (name, c), (_, f) in zip(cpu.state_dict().items(), fake.state_dict().items()):
        assert type(f._data) is fakecuda.FakeArray, name
        np.testing.assert_array_equal(host(f), host(c), err_msg=name)


def test_cli_train_and_decode_on_the_fake_device(capsys, tmp_path):
    """`train --device cuda` and `decode --device cuda` with "cuda" the fake: the same printed results as on the CPU
    (float32, so the losses to round-off: compared through the decoded text, which round-off does not change here)."""

    outputs = {}
    for device in ("cpu", "cuda"):
        run = str(tmp_path / device)
        assert main(["train", "--out", run, "--steps", "3", "--no-progress", "--device", device, *TINY]) == 0
        capsys.readouterr()
        assert main(["decode", "--checkpoint", run, "--input", "3 4 5", "--beam", "2", "--device", device]) == 0
        outputs[device] = capsys.readouterr().out
    assert outputs["cuda"] == outputs["cpu"]
