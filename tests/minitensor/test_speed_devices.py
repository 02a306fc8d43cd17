"""The speed devices of the training step give the numbers of the plain formulas they stand beside.

Each device is a named helper chosen on arrays (a blocked optimizer update, an array-only fast path of
a fused op); here each is run against the readable formula on the same inputs: bitwise where the
device only reorders work (blocks of an elementwise update), else to OP_RTOL.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.optim import Adam, AdamW
from minitensor.optim import optimizer as optmod


def _adam_run(monkeypatch, block: int, cls=Adam, shape=(3 * 1000 + 7,), transposed=False, **kw):
    monkeypatch.setattr(optmod, "BLOCK_NUMEL", block)
    rng = np.random.default_rng(0)
    data = rng.standard_normal(shape, dtype=np.float32)
    p = mt.tensor(data.T if transposed else data, requires_grad=True)
    opt = cls([p], lr=1e-2, **kw)
    for _ in range(3):
        g = rng.standard_normal(shape, dtype=np.float32)
        p.grad = mt.tensor(g.T if transposed else g)
        opt.step()
    return p.data.copy(), {k: v.copy() for k, v in opt.state[p].items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize(
    "cls, kw",
    [
        (Adam, {}),
        (Adam, dict(amsgrad=True)),
        (Adam, dict(weight_decay=0.1, maximize=True)),
        (AdamW, dict(weight_decay=0.1)),
    ],
)
@pytest.mark.parametrize("shape, transposed", [((3007,), False), ((70, 50), False), ((70, 50), True)])
def test_adam_in_blocks_is_bitwise_the_single_pass(monkeypatch, cls, kw, shape, transposed):
    """Blocks of 1,000 entries (several blocks, a short last one; a transposed, non-contiguous parameter
    comes whole) give exactly the parameter and state of one pass over the whole arrays."""
    whole, whole_state = _adam_run(monkeypatch, 10**9, cls, shape, transposed, **kw)
    blocked, blocked_state = _adam_run(monkeypatch, 1000, cls, shape, transposed, **kw)
    np.testing.assert_array_equal(blocked, whole)
    for k in whole_state:
        np.testing.assert_array_equal(blocked_state[k], whole_state[k])


def test_in_blocks_covers_every_entry_once():
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    seen = []
    old = optmod.BLOCK_NUMEL
    try:
        optmod.BLOCK_NUMEL = 4
        for (block,), scratch in optmod.in_blocks(a):
            assert scratch.shape == block.shape and not np.shares_memory(scratch, a)
            seen.extend(block.tolist())
            block += 100  # views: writes land in a
    finally:
        optmod.BLOCK_NUMEL = old
    assert seen == list(range(10)) and (a >= 100).all()


def _allocator_state_after(code: str, **env_extra) -> str:
    """Run `code` in a fresh interpreter and print whether the allocator tuning was applied (None: never asked)."""
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), **env_extra}
    code += "\nimport sys, minitensor.allocator as a; sys.__stdout__.write(f'{a._applied}\\n')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=300)
    return out.stdout.strip().splitlines()[-1]


def test_reuse_freed_memory_is_opt_in_applied_once_and_can_be_declined():
    """`import minitensor` leaves malloc alone; the call applies it once (glibc here); MINITENSOR_MALLOC=default
    declines."""
    assert _allocator_state_after("import minitensor, transformer_np, parity") == "None"
    assert _allocator_state_after("import minitensor as mt; mt.reuse_freed_memory(); mt.reuse_freed_memory()") == "True"
    declined = _allocator_state_after("import minitensor as mt; mt.reuse_freed_memory()", MINITENSOR_MALLOC="default")
    assert declined == "False"


@pytest.mark.parametrize(
    "entry",
    [  # a real command that does its work (and here fails on its input) after the tuning is on
        "from transformer_np.cli import main; main(['decode', '--checkpoint', '/nonexistent', '--input', 'a'])",
        "from benchmarks.worker import main; import sys; sys.stdin = open('/dev/null'); main(['--side', 'numpy'])",
    ],
    ids=["transformer_np-cli", "benchmarks-worker"],
)
def test_the_training_command_line_and_the_benchmark_workers_turn_it_on(entry):
    assert _allocator_state_after(f"try:\n    {entry}\nexcept SystemExit:\n    pass") == "True"


def test_train_and_fit_turn_it_on(monkeypatch, tmp_path):
    import minitensor as mt
    from transformer_np.data import get_task
    from transformer_np.training import default_configs, fit, train

    calls = []
    monkeypatch.setattr(mt, "reuse_freed_memory", lambda: calls.append(1) or True)
    m, t = default_configs("copy")
    m = m.replace(d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=8)
    t = t.replace(steps=1, batch_size=4, train_size=8, eval_size=4, eval_every=1, checkpoint_every=1)
    fit(m, t, get_task("copy").splits(8, 4, 0)[0], steps=1)
    assert calls == [1]
    train(m, t, str(tmp_path / "run"), progress=False)
    assert calls == [1, 1]


def test_dropout_with_a_bool_mask_is_bitwise_x_times_the_float_mask():
    """Dropout keeps `keep` (bool) and scale, not keep * scale: the same output and gradient, bit for bit,
    signed zeros, inf and NaN included."""
    from minitensor.ops import Dropout

    rng = np.random.default_rng(0)
    x = rng.standard_normal(200).astype(np.float32)
    x[:4] = [-0.0, np.inf, -np.inf, np.nan]
    keep = rng.random(200) > 0.5
    keep[:4] = [False, False, True, True]
    g = rng.standard_normal(200).astype(np.float32)
    for scale in (np.float32(1 / 0.9), np.float32(0)):
        xt = mt.tensor(x, requires_grad=True)
        y = Dropout.apply(xt, mt.tensor(keep), scale=scale)
        y.backward(g)
        m = keep * scale
        with np.errstate(invalid="ignore"):  # inf * 0 = NaN, on both sides
            ref = x * m
        np.testing.assert_array_equal(np.signbit(y.data), np.signbit(ref))
        np.testing.assert_array_equal(y.data, ref)
        np.testing.assert_array_equal(xt.grad.data, g * m)
        assert y.dtype == np.float32 and xt.grad.dtype == np.float32


def _f16_case(op: str, rng):
    """(inputs as float16 arrays, the function of Tensors, the upstream gradient) of a fused op."""
    F = mt.nn.functional
    x = (rng.standard_normal((3, 5, 12)) * 4).astype(np.float16)
    g = rng.standard_normal((3, 5, 12)).astype(np.float16)
    if op == "layer_norm":
        w, b = rng.standard_normal(12).astype(np.float16), rng.standard_normal(12).astype(np.float16)
        return (x, w, b), lambda x, w, b: F.layer_norm(x, (12,), w, b), g
    if op == "attention_weights":
        k = rng.standard_normal((3, 7, 12)).astype(np.float16)
        return (x, k), lambda q, k: F.attention_weights(q, k, None, scale=0.3), g[..., :7]
    return (x,), lambda x: getattr(F, op)(x, dim=-1), g


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "attention_weights"])
def test_float16_fused_ops_are_the_float32_formula_rounded_once(op):
    """The float16 device of the fused ops (reductions.opmath_dtype, in_opmath, to_dtype): the forward is the
    float32 op on the float16 inputs, rounded once; the backward is the plain float32 formula on the float16
    inputs, g and saved output, rounded once. Bit for bit."""
    from minitensor.ops.fused import softmax_grad
    from minitensor.ops.namespace import ARRAYS as xp

    arrays, fn, g = _f16_case(op, np.random.default_rng(3))

    def run(dtype):
        ts = [mt.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
        y = fn(*ts)
        y.backward(mt.tensor(g.astype(dtype)))
        return y.data, [t.grad.data for t in ts]

    y16, grads16 = run(np.float16)
    y32, grads32 = run(np.float32)
    assert y16.dtype == np.float16 and all(d.dtype == np.float16 for d in grads16)
    np.testing.assert_array_equal(y16, y32.astype(np.float16))
    g32, out = g.astype(np.float32), y16.astype(np.float32)  # the backward reads the rounded output
    if op == "layer_norm":  # saves its input and row statistics, not its output: the float32 gradients, rounded
        expected = [d.astype(np.float16) for d in grads32]
    elif op == "softmax":
        expected = [softmax_grad(xp, g32, out, -1)]
    elif op == "log_softmax":
        expected = [g32 - xp.exp(out) * xp.sum(g32, axis=-1, keepdims=True)]
    else:
        q, k = (a.astype(np.float32) for a in arrays)
        ds = softmax_grad(xp, g32, out)
        expected = [(ds @ k) * np.float32(0.3), (np.swapaxes(ds, -1, -2) @ q) * np.float32(0.3)]
    for got, want in zip(grads16, expected):
        np.testing.assert_array_equal(got, want.astype(np.float16))


def test_no_op_calls_an_in_place_namespace_device():
    """Every backward is its formula: the namespaces define no in-place device (sub_, mul_, sub_at_, ...) and no
    op in minitensor/ops/ calls one."""
    import re
    from pathlib import Path

    from minitensor.ops.namespace import ARRAYS, TENSORS

    for ns in (ARRAYS, TENSORS):
        assert [n for n in dir(ns) if n.endswith("_") and not n.startswith("_")] == []
    ops_dir = Path(mt.__file__).parent / "ops"
    calls = {p.name: re.findall(r"xp\.\w+_\(", p.read_text()) for p in ops_dir.glob("*.py")}
    assert {name: c for name, c in calls.items() if c} == {}


def _erf_fit_with_where(x):
    """erf's float32 fit as it was first written (np.full_like, then Horner, then np.where): the reference."""
    from minitensor.ops.elementwise import _ERFC_COEFFS

    z = np.abs(x)
    t = 1 / (1 + z * x.dtype.type(0.5))
    poly = np.full_like(t, _ERFC_COEFFS[-1])
    for c in reversed(_ERFC_COEFFS[:-1]):
        poly = poly * t + x.dtype.type(c)
    poly = np.exp(poly - z * z) * t
    return np.where(x >= 0, 1 - poly, poly - 1)


def test_erf_fit_and_sigmoid_pair_are_bitwise_their_plain_formulas():
    """erf's float32 fit (in place, its select branch-free) gives the plain fit's bits; sigmoid_pair (the tanh
    GELU's two halves from one exponential) gives stable_sigmoid(v) and stable_sigmoid(-v)."""
    from minitensor.ops.elementwise import _erf_float32_fit, sigmoid_pair, stable_sigmoid

    rng = np.random.default_rng(2)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -50.0, -800.0, 800.0]
    x = np.concatenate([specials, rng.standard_normal(20000) * 4]).astype(np.float32)
    with np.errstate(all="ignore"):
        got, want = _erf_float32_fit(x), _erf_fit_with_where(x)
        np.testing.assert_array_equal(got, want)
        for dtype in (np.float16, np.float32, np.float64):
            v = x.astype(dtype)
            for got, want in zip(sigmoid_pair(v), (stable_sigmoid(v), stable_sigmoid(-v))):
                assert got.dtype == want.dtype == dtype
                np.testing.assert_array_equal(got, want)


def test_branch_free_selections_are_bitwise_np_where():
    """erf's fit ends with np.where(x >= 0, 1 - c, c - 1) and stable_sigmoid selects 1 or e^-|a| as numerator:
    both are written without np.where (50x slower on a random sign pattern); the numbers are np.where's, signed
    zeros, inf and NaN included (a NaN's sign bit aside)."""
    from minitensor.ops.elementwise import _plus_minus, stable_sigmoid

    rng = np.random.default_rng(0)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -50.0, -800.0, 800.0]
    for dtype in (np.float16, np.float32, np.float64):
        a = np.concatenate([specials, rng.standard_normal(5000) * 6]).astype(dtype)
        with np.errstate(all="ignore"):
            e = np.exp(-np.abs(a))
            want = np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(dtype, copy=False)
            got = stable_sigmoid(a)
        c = np.concatenate([[1.0, 1.0, np.nan], rng.random(a.size - 3) * 2]).astype(dtype)
        want_pm, got_pm = np.where(a >= 0, 1 - c, c - 1), _plus_minus(a, c.copy())
        for w, g in ((want, got), (want_pm, got_pm)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
            real = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[real]), np.signbit(w[real]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_where_with_a_zero_branch_is_np_where(dtype):
    """selection.select (a product by the mask for a 0-d zero branch) gives np.where's values: with inf and NaN
    in the other branch (the plain np.where then), broadcast masks, either branch zero, a non-bool condition."""
    from minitensor.ops.selection import select

    rng = np.random.default_rng(0)
    b = rng.standard_normal((3, 4, 5)).astype(dtype)
    zero = np.zeros((), dtype)
    for cond in (rng.random((3, 4, 5)) < 0.5, rng.random((4, 1)) < 0.5, rng.random((2, 3, 4, 5)) < 0.5):
        for x in (b, np.where(b > 1, np.inf, b), np.where(b > 1, np.nan, b)):
            for args in ((cond, zero, x), (cond, x, zero), (cond.astype(np.int8), zero, x)):
                with np.errstate(all="ignore"):  # as forwards run (Function.apply): 0 * inf quietly, then np.where
                    got, want = select(*args), np.where(*args)
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_array_equal(got, want)  # equal values (-0.0 == 0.0), NaN where NaN
