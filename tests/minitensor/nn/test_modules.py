"""mt.nn against torch.nn: each layer's forward and backward, the Module API, init and grad utilities.

Layers are built on both sides with the same weights (copied by state_dict key, which must
match torch's names), run on the same input, and backpropagated from the same random upstream
gradient; outputs, input gradients and every parameter gradient are compared with the
tolerances of minitensor/testing.py in float64 and float32.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import nn
from minitensor.nn import functional as F
from minitensor.testing import OP_RTOL, assert_close

DT = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}


def _build(make_ours, make_torch, dtype_name):
    """The same layer on both sides, ours initialised by our init, copied into torch's by key."""
    np_dt, t_dt = DT[dtype_name]
    mt.set_default_dtype(np.dtype(np_dt))
    ours, theirs = make_ours(), make_torch().to(t_dt)
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict()), "state_dict keys must match torch's names and order"
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in sd.items()})
    return ours, theirs


def _check(ours, theirs, x, dtype_name, rng, randomize=True):
    """Forward + backward with a random upstream gradient; compare out, dx and every dparam."""
    np_dt, _ = DT[dtype_name]
    rtol = OP_RTOL[dtype_name]
    if randomize:  # move every parameter off its init (LayerNorm's ones/zeros would hide bugs)
        with torch.no_grad():
            for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
                assert name == tname
                p.data[...] = rng.standard_normal(p.shape).astype(np_dt)
                tp.copy_(torch.from_numpy(p.detach().numpy().copy()))
    floating = x.dtype.kind == "f"
    xo = mt.tensor(x, requires_grad=floating)
    xt = torch.tensor(x, requires_grad=floating)
    out = ours(xo)
    tout = theirs(xt)
    assert out.dtype == np.dtype(np_dt)
    assert_close(out.detach().numpy(), tout.detach().numpy(), rtol, "forward")
    g = rng.standard_normal(out.shape).astype(np_dt)
    out.backward(mt.tensor(g))
    tout.backward(torch.from_numpy(g))
    if floating:
        assert_close(xo.grad.numpy(), xt.grad.numpy(), rtol, "input grad")
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert p.grad is not None, name
        assert p.grad.dtype == p.dtype, name
        assert_close(p.grad.numpy(), tp.grad.numpy(), rtol, f"grad of {name}")
    return xo, out


# ============================================================================ layers vs torch


@pytest.mark.parametrize("bias", [True, False])
def test_linear(dtype_name, rng, bias):
    ours, theirs = _build(lambda: nn.Linear(7, 5, bias=bias), lambda: torch.nn.Linear(7, 5, bias=bias), dtype_name)
    _check(ours, theirs, rng.standard_normal((2, 3, 7)).astype(DT[dtype_name][0]), dtype_name, rng)


@pytest.mark.parametrize("padding_idx", [None, 0, -1])
def test_embedding(dtype_name, rng, padding_idx):
    ours, theirs = _build(
        lambda: nn.Embedding(10, 6, padding_idx=padding_idx),
        lambda: torch.nn.Embedding(10, 6, padding_idx=padding_idx),
        dtype_name,
    )
    ids = np.array([[0, 1, 1, 9], [3, 0, 9, 9], [2, 2, 2, 5]], dtype=np.int64)  # repeats and padding
    _check(ours, theirs, ids, dtype_name, rng, randomize=False)
    if padding_idx is not None:
        row = padding_idx % 10
        assert np.all(ours.weight.grad.numpy()[row] == 0), "no gradient may reach the padding row"
        assert np.all(ours.weight.detach().numpy()[row] == 0), "the padding row starts at zero"
    assert np.all(ours.weight.grad.numpy()[[4, 6, 7, 8]] == 0)  # rows never looked up


def test_embedding_padding_row_initialised_to_zero():
    e = nn.Embedding(5, 3, padding_idx=2)
    assert np.all(e.weight.detach().numpy()[2] == 0) and np.all(e.weight.detach().numpy()[[0, 1, 3, 4]] != 0)


@pytest.mark.parametrize("shape", [6, (3, 6)])
def test_layer_norm(dtype_name, rng, shape):
    ours, theirs = _build(lambda: nn.LayerNorm(shape), lambda: torch.nn.LayerNorm(shape), dtype_name)
    x = (rng.standard_normal((2, 3, 6)) * 3 + 1).astype(DT[dtype_name][0])
    _check(ours, theirs, x, dtype_name, rng)


def test_layer_norm_without_affine(dtype_name, rng):
    ours, theirs = _build(
        lambda: nn.LayerNorm(6, eps=1e-6, elementwise_affine=False),
        lambda: torch.nn.LayerNorm(6, eps=1e-6, elementwise_affine=False),
        dtype_name,
    )
    assert list(ours.named_parameters()) == []
    _check(ours, theirs, rng.standard_normal((4, 6)).astype(DT[dtype_name][0]), dtype_name, rng)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (nn.ReLU(), torch.nn.ReLU()),
        lambda: (nn.GELU(), torch.nn.GELU()),
        lambda: (nn.GELU("tanh"), torch.nn.GELU("tanh")),
        lambda: (nn.Identity(3, x=1), torch.nn.Identity(3, x=1)),
        lambda: (nn.SiLU(), torch.nn.SiLU()),
    ],
    ids=["relu", "gelu", "gelu-tanh", "identity", "silu"],
)
def test_activations(dtype_name, rng, make):
    ours, theirs = make()
    _check(ours, theirs, rng.standard_normal((3, 5)).astype(DT[dtype_name][0]), dtype_name, rng, randomize=False)


def test_sequential_mlp(dtype_name, rng):
    def ours():
        return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 3))

    def theirs():
        return torch.nn.Sequential(
            torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.ReLU(), torch.nn.Dropout(0.0), torch.nn.Linear(8, 3)
        )

    o, t = _build(ours, theirs, dtype_name)
    _check(o, t, rng.standard_normal((6, 4)).astype(DT[dtype_name][0]), dtype_name, rng)


# ============================================================================ dropout


def test_dropout_p0_and_eval_are_identity(rng):
    x = mt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    d = nn.Dropout(0.0)
    assert d(x) is x
    d = nn.Dropout(0.7).eval()
    assert d(x) is x


def test_dropout_mask_fn_equals_masked_scaling(dtype_name, rng):
    np_dt, t_dt = DT[dtype_name]
    p = 0.3
    x_np = rng.standard_normal((2, 3, 5)).astype(np_dt)
    keep = rng.random((2, 3, 5)) >= p
    calls = []
    d = nn.Dropout(p)
    d.mask_fn = lambda shape: (calls.append(shape), keep)[1]
    x = mt.tensor(x_np, requires_grad=True)
    y = d(x)
    assert calls == [(2, 3, 5)]
    xt = torch.tensor(x_np, requires_grad=True)
    yt = xt * torch.from_numpy(keep) / (1 - p)  # what torch's dropout does with this mask
    assert_close(y.detach().numpy(), yt.detach().numpy(), OP_RTOL[dtype_name], "dropout forward")
    g = rng.standard_normal(y.shape).astype(np_dt)
    y.backward(mt.tensor(g))
    yt.backward(torch.from_numpy(g))
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL[dtype_name], "dropout grad")
    assert np.all(y.detach().numpy()[~keep] == 0) and np.all(x.grad.numpy()[~keep] == 0)


def test_dropout_mask_fn_is_validated():
    d = nn.Dropout(0.5)
    d.mask_fn = lambda shape: np.ones(shape)  # float, not bool
    with pytest.raises(ValueError, match="bool array of shape"):
        d(mt.ones(2, 3))
    d.mask_fn = lambda shape: np.ones((3, 2), dtype=bool)
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        d(mt.ones(2, 3))


def test_dropout_random_mask_statistics():
    d = nn.Dropout(0.25)
    y = d(mt.ones(200, 200)).detach().numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert np.all(nn.Dropout(1.0)(mt.ones(3, 3)).detach().numpy() == 0)


def test_dropout_keep_mask_keeps_1_minus_p_from_32_bits_per_entry():
    from minitensor.nn.functional import keep_mask

    for p in (0.1, 0.5, 0.9, 1 / 3, 0.999):
        keep = keep_mask((1001, 999), p)  # an odd count: the last 64-bit draw is partly used
        assert keep.shape == (1001, 999) and keep.dtype == np.bool_
        sigma = np.sqrt(p * (1 - p) / keep.size)
        assert abs(keep.mean() - (1 - p)) < 5 * sigma, (p, keep.mean())
    assert not keep_mask((5, 7), 1.0).any() and keep_mask((5, 7), 0.0).all()
    assert keep_mask((0, 3), 0.5).shape == (0, 3)


@pytest.mark.parametrize("p", [0.1, 0.5, 1 / 3])
def test_dropout_keep_mask_is_the_32_bit_rule_drawn_a_byte_at_a_time(p):
    """Rebuilt from the seeded PCG64: an entry's top byte against t's, and the 24 low bits where they tie."""
    from minitensor.nn.functional import keep_mask

    n, t = 100_003, round(p * 2**32)
    mt.manual_seed(3)
    keep = keep_mask((n,), p)
    after = mt.random.generator().bit_generator.random_raw(2)
    ref = np.random.PCG64(3)
    hi = ref.random_raw((n + 7) // 8).view(np.uint8)[:n]
    tied = np.flatnonzero(hi == t >> 24)
    assert 0 < tied.size < n // 100  # about n / 256: the low bits really decide some entries
    low = ref.random_raw((4 * tied.size + 7) // 8).view(np.uint8)[: 4 * tied.size].view(np.uint32) & 0xFFFFFF
    u = (hi.astype(np.uint64) << 24) + np.uint64(2**24 - 1)  # an untied entry: any low bits give the same answer
    u[tied] = (np.uint64(t >> 24) << 24) + low
    np.testing.assert_array_equal(keep, u >= t)
    np.testing.assert_array_equal(after, ref.random_raw(2))  # and the generator continues from there


# ============================================================================ Module API


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.register_buffer("scale", mt.ones(d))
        self.register_buffer("table", mt.zeros(4, d), persistent=False)
        self.register_buffer("counts", mt.zeros(2, dtype=mt.int64))

    def forward(self, x):
        return self.norm(self.proj(x)) * self.scale


class Net(nn.Module):
    def __init__(self, d=4, v=7, tie=True):
        super().__init__()
        self.embed = nn.Embedding(v, d, padding_idx=0)
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = nn.Linear(d, v, bias=False)
        if tie:
            self.head.weight = self.embed.weight
        self.drop = nn.Dropout(0.1)

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = self.drop(b(h))
        return self.head(h)


class TBlock(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
        self.register_buffer("scale", torch.ones(d))
        self.register_buffer("table", torch.zeros(4, d), persistent=False)
        self.register_buffer("counts", torch.zeros(2, dtype=torch.int64))


class TNet(torch.nn.Module):
    def __init__(self, d=4, v=7, tie=True):
        super().__init__()
        self.embed = torch.nn.Embedding(v, d, padding_idx=0)
        self.blocks = torch.nn.ModuleList([TBlock(d) for _ in range(2)])
        self.head = torch.nn.Linear(d, v, bias=False)
        if tie:
            self.head.weight = self.embed.weight
        self.drop = torch.nn.Dropout(0.1)


def test_names_and_order_match_torch():
    ours, theirs = Net(), TNet()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())  # tied weight under both names
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert "blocks.0.table" not in ours.state_dict()
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 9
    assert ours.head.weight is ours.embed.weight


def test_state_dict_shares_storage_and_round_trips(rng):
    a, b = Net(), Net()
    sd = a.state_dict()
    assert all(isinstance(v, mt.Tensor) and not v.requires_grad and v.grad_fn is None for v in sd.values())
    before = sd["blocks.0.proj.weight"].numpy().copy()
    with mt.no_grad():
        a.blocks[0].proj.weight.add_(1.0)  # training after state_dict(): the dict sees it, as torch's
    np.testing.assert_array_equal(sd["blocks.0.proj.weight"].numpy(), before + 1.0)
    weight_obj = b.blocks[1].proj.weight
    arr = weight_obj.detach().numpy()
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b.blocks[1].proj.weight is weight_obj and b.blocks[1].proj.weight.detach().numpy() is arr  # copied in place
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v, sd[k])
    a.eval(), b.eval()
    ids = mt.tensor([[1, 2, 0, 6]])
    np.testing.assert_array_equal(a(ids).detach().numpy(), b(ids).detach().numpy())
    kv = a.state_dict(keep_vars=True)
    assert kv["embed.weight"] is a.embed.weight


def test_load_state_dict_reports_all_problems_at_once():
    m = Net()
    sd = m.state_dict()
    del sd["blocks.0.norm.bias"]
    sd["blocks.5.proj.weight"] = np.zeros((4, 4), dtype=np.float32)
    sd["blocks.1.proj.weight"] = np.zeros((4, 5), dtype=np.float32)
    before = m.blocks[0].proj.weight.detach().numpy().copy()
    sd["blocks.0.proj.weight"] = before + 1
    with pytest.raises(ValueError) as e:
        m.load_state_dict(sd)
    msg = str(e.value)
    assert "missing keys: blocks.0.norm.bias" in msg
    assert "unexpected keys: blocks.5.proj.weight" in msg
    assert "blocks.1.proj.weight: expected shape (4, 4), got (4, 5)" in msg
    np.testing.assert_array_equal(m.blocks[0].proj.weight.detach().numpy(), before)  # nothing written


def test_load_state_dict_non_strict_and_dtype():
    m = Net()
    sd = m.state_dict()
    del sd["head.weight"]
    sd["extra"] = np.zeros(1)
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["head.weight"] and res.unexpected_keys == ["extra"]
    sd = m.state_dict()
    sd["blocks.0.proj.bias"] = sd["blocks.0.proj.bias"].double()
    with pytest.raises(TypeError, match=r"blocks\.0\.proj\.bias: expected dtype float32, got float64"):
        m.load_state_dict(sd)
    sd = m.state_dict()
    sd["blocks.0.counts"] = sd["blocks.0.counts"].numpy().astype(np.int32)  # an array: accepted too
    with pytest.raises(TypeError, match="int64"):
        m.load_state_dict(sd)
    with pytest.raises(TypeError, match="list"):
        m.load_state_dict({**m.state_dict(), "head.weight": [[1.0]]})


def test_load_from_torch_state_dict_by_name():
    ours, theirs = Net(tie=False), TNet(tie=False)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    for (_k, v), (_tk, tv) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        np.testing.assert_array_equal(v, tv.numpy())


def test_train_eval_propagate():
    m = Net()
    assert all(x.training for x in m.modules())
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.blocks.train()
    assert m.blocks[1].proj.training and not m.training
    with pytest.raises(ValueError, match="bool"):
        m.train("yes")


def test_forward_hooks():
    m = nn.Linear(3, 2)
    seen = []
    h1 = m.register_forward_hook(lambda mod, inputs, out: seen.append((mod, inputs, out)))
    x = mt.randn(4, 3)
    y = m(x)
    assert len(seen) == 1 and seen[0][0] is m and seen[0][1][0] is x and seen[0][2] is y
    h2 = m.register_forward_hook(lambda mod, inputs, out: out * 0)
    assert np.all(m(x).detach().numpy() == 0)
    h1.remove(), h2.remove()
    m(x)
    assert len(seen) == 2
    assert np.any(m(x).detach().numpy() != 0)


def test_forward_pre_hooks_as_torch():
    """A pre-hook sees the positional inputs before forward; a tuple it returns replaces them, any other value is
    the one input; None keeps them. The same program on torch gives the same outputs."""
    w = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    results = []
    for lib in (mt, torch):
        m = (nn.Linear if lib is mt else torch.nn.Linear)(3, 2, bias=False)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
        seen = []
        h1 = m.register_forward_pre_hook(lambda mod, inputs, seen=seen: seen.append((mod, inputs)))
        h2 = m.register_forward_pre_hook(lambda mod, inputs: inputs[0] * 2)  # one value: the one input
        h3 = m.register_forward_pre_hook(lambda mod, inputs: (inputs[0] + 1,))  # a tuple: the inputs
        t = lib.tensor(x)
        out = m(t)
        assert seen[0][0] is m and seen[0][1][0] is t
        h2.remove(), h3.remove()
        plain = m(t)
        h1.remove()
        m(t)
        assert len(seen) == 2
        results.append((out.detach().numpy(), plain.detach().numpy()))
    for ours, ref in zip(results[0], results[1]):
        assert_close(ours, ref, OP_RTOL["float32"])
    assert_close(results[0][0], (2 * x + 1) @ w.T, OP_RTOL["float32"])


def test_containers_indexing_and_iteration():
    layers = [nn.Linear(2, 2) for _ in range(4)]
    ml = nn.ModuleList(layers[:3])
    assert len(ml) == 3 and ml[-1] is layers[2] and list(ml) == layers[:3]
    assert isinstance(ml[1:], nn.ModuleList) and list(ml[1:]) == layers[1:3]
    ml.append(layers[3])
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3"]
    del ml[0]
    assert list(ml) == layers[1:] and [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    ml.insert(0, layers[0])
    assert list(ml) == layers
    with pytest.raises(IndexError, match="out of range"):
        ml[4]
    with pytest.raises(TypeError, match="Module"):
        ml.append(3)

    seq = nn.Sequential(*layers)
    assert seq[0] is layers[0] and seq[-1] is layers[3] and len(seq) == 4 and list(seq) == layers
    assert isinstance(seq[1:3], nn.Sequential) and list(seq[1:3]) == layers[1:3]
    named = nn.Sequential(OrderedDict(a=layers[0], b=layers[1]))
    assert [n for n, _ in named.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    with pytest.raises(IndexError):
        seq[10]
    with pytest.raises(TypeError, match="Module"):
        nn.Sequential(nn.ReLU(), "relu")

    md = nn.ModuleDict({"enc": layers[0], "dec": layers[1]})
    assert list(md) == ["enc", "dec"] and md["dec"] is layers[1] and "enc" in md and len(md) == 2
    assert [n for n, _ in md.named_parameters()] == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    with pytest.raises(KeyError, match="keys are"):
        md["nope"]


def test_apply_visits_children_then_self():
    m = Net()
    order = []
    assert m.apply(lambda mod: order.append(type(mod).__name__)) is m
    assert order[-1] == "Net" and order.index("Linear") < order.index("Block")

    def init_linear(mod):
        if isinstance(mod, nn.Linear) and mod.bias is not None:
            nn.init.zeros_(mod.bias)

    m.apply(init_linear)
    assert np.all(m.blocks[0].proj.bias.detach().numpy() == 0)


def test_double_and_float_convert_parameters_and_float_buffers():
    m = Net()
    ids = mt.tensor([[1, 2, 3]])
    m(ids).sum().backward()
    weight = m.embed.weight
    assert m.double() is m
    assert all(p.dtype == np.float64 for p in m.parameters())
    assert all(p.grad.dtype == np.float64 for p in m.parameters() if p.grad is not None)
    assert m.blocks[0].scale.dtype == np.float64 and m.blocks[0].table.dtype == np.float64
    assert m.blocks[0].counts.dtype == np.int64  # integer buffers untouched
    assert m.embed.weight is weight and m.head.weight is weight  # ties survive
    m.eval()
    assert m(ids).dtype == np.float64
    m.float()
    assert all(p.dtype == np.float32 for p in m.parameters())
    with pytest.raises(TypeError, match="floating"):
        m.to(mt.int64)


def test_zero_grad_and_requires_grad():
    m = nn.Linear(3, 2)
    m(mt.randn(2, 3)).sum().backward()
    m.zero_grad(set_to_none=False)
    assert np.all(m.weight.grad.numpy() == 0)
    m.zero_grad()
    assert m.weight.grad is None
    m.requires_grad_(False)
    assert not m.weight.requires_grad


def test_attribute_registration_rules():
    m = nn.Linear(3, 2)
    with pytest.raises(TypeError, match="Parameter or None"):
        m.weight = mt.randn(2, 3)
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    m.bias = nn.Parameter(np.zeros(2, dtype=np.float32))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    m.note = "plain attribute"
    assert m.note == "plain attribute"
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        _ = m.nope

    class Forgot(nn.Module):
        def __init__(self):
            self.lin = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match="super"):
        Forgot()
    with pytest.raises(TypeError, match="Tensor or None"):
        nn.Module().register_buffer("b", np.zeros(2))
    with pytest.raises(TypeError, match="floating"):
        nn.Parameter(np.zeros(2, dtype=np.int64))


def test_constructor_and_input_validation():
    with pytest.raises(ValueError, match="in_features must be positive"):
        nn.Linear(0, 3)
    with pytest.raises(TypeError, match="in_features must be an int"):
        nn.Linear(2.5, 3)
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\]"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(ValueError, match="eps"):
        nn.LayerNorm(4, eps=0)
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")
    with pytest.raises(ValueError, match=r"Linear\(in_features=3\).*\(4, 5\)"):
        nn.Linear(3, 2)(mt.randn(4, 5))
    with pytest.raises(IndexError, match="out of range"):
        nn.Embedding(5, 3)(mt.tensor([1, 5]))


# ============================================================================ init


def test_default_init_ranges_and_dtype(float64_default):
    lin = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    assert lin.weight.dtype == np.float64 and lin.weight.shape == (50, 100)
    assert (
        np.abs(lin.weight.detach().numpy()).max() <= bound and np.abs(lin.weight.detach().numpy()).max() > 0.9 * bound
    )
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    ln = nn.LayerNorm(8)
    assert np.all(ln.weight.detach().numpy() == 1) and np.all(ln.bias.detach().numpy() == 0)
    emb = nn.Embedding(1000, 64)
    assert abs(emb.weight.detach().numpy().std() - 1) < 0.02 and abs(emb.weight.detach().numpy().mean()) < 0.02


def test_init_functions():
    w = nn.Parameter(np.empty((300, 200), dtype=np.float32))
    a = math.sqrt(6 / 500)
    assert nn.init.xavier_uniform_(w) is w
    assert np.abs(w.detach().numpy()).max() <= a and np.abs(w.detach().numpy()).max() > 0.95 * a
    nn.init.xavier_normal_(w, gain=2.0)
    assert abs(w.detach().numpy().std() - 2 * math.sqrt(2 / 500)) < 0.01
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.detach().numpy().std() - math.sqrt(2 / 200)) < 0.01
    nn.init.normal_(w, 3.0, 0.5)
    assert abs(w.detach().numpy().mean() - 3) < 0.01 and abs(w.detach().numpy().std() - 0.5) < 0.01
    nn.init.uniform_(w, -2, -1)
    assert w.detach().numpy().min() >= -2 and w.detach().numpy().max() <= -1
    nn.init.constant_(w, 0.25)
    assert np.all(w.detach().numpy() == 0.25) and w.dtype == np.float32
    nn.init.ones_(w), nn.init.zeros_(w)
    assert np.all(w.detach().numpy() == 0)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(nn.Parameter(np.empty(5, dtype=np.float32)))
    with pytest.raises(TypeError, match="Tensor"):
        nn.init.zeros_(np.zeros(3))
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == torch.nn.init.calculate_gain(
        "leaky_relu", math.sqrt(5)
    )


def test_init_is_reproducible_under_manual_seed():
    mt.manual_seed(123)
    a = nn.Linear(5, 5).weight.detach().numpy().copy()
    mt.manual_seed(123)
    b = nn.Linear(5, 5).weight.detach().numpy().copy()
    np.testing.assert_array_equal(a, b)


# ============================================================================ grad utilities


@pytest.mark.parametrize("max_norm,norm_type", [(0.5, 2.0), (1e3, 2.0), (0.3, math.inf), (0.7, 1.0)])
def test_clip_grad_norm_matches_torch(rng, max_norm, norm_type):
    shapes = [(3, 4), (4,), (2, 2, 2)]
    ours = [nn.Parameter(rng.standard_normal(s)) for s in shapes]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.detach().numpy().copy())) for p in ours]
    for p, tp in zip(ours, theirs):
        g = rng.standard_normal(p.shape)
        p.grad = mt.tensor(g)
        tp.grad = torch.from_numpy(g.copy())
    extra = nn.Parameter(rng.standard_normal(3))  # no grad: skipped
    total = nn.utils.clip_grad_norm_(ours + [extra], max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type, foreach=False)
    assert isinstance(total, mt.Tensor) and total.shape == () and total.dtype == mt.float64  # torch's 0-d tensor
    assert_close(total.numpy(), ttotal.numpy(), OP_RTOL["float64"], "total norm")
    for p, tp in zip(ours, theirs):
        assert_close(p.grad.numpy(), tp.grad.numpy(), OP_RTOL["float64"], "clipped grad")
    assert extra.grad is None


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(np.ones(3))
    assert nn.utils.clip_grad_norm_([p], 1.0) == 0.0
    p.grad = mt.tensor(np.array([np.inf, 0.0, 0.0]))
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="max_norm"):
        nn.utils.clip_grad_norm_(p, -1.0)
    q = nn.Parameter(np.ones(4, dtype=np.float32))
    q.grad = mt.ones(4)
    total = nn.utils.clip_grad_norm_([q], 1.0, foreach=True)  # foreach accepted, as torch's
    assert total.dtype == mt.float32 and total.shape == () and float(total) == 2.0  # the gradients' dtype, as torch
    with pytest.raises(ValueError, match="foreach must be None or a bool"):
        nn.utils.clip_grad_norm_([q], 1.0, foreach="yes")


def test_parameters_to_vector_round_trip(rng):
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    vec = nn.utils.parameters_to_vector(m.parameters())
    assert vec.shape == (3 * 4 + 4 + 4 * 2 + 2,)
    new = rng.standard_normal(vec.shape).astype(np.float32)
    nn.utils.vector_to_parameters(mt.tensor(new), m.parameters())
    np.testing.assert_array_equal(nn.utils.parameters_to_vector(m.parameters()).detach().numpy(), new)
    with pytest.raises(ValueError, match="elements"):
        nn.utils.vector_to_parameters(mt.tensor(new[:-1]), m.parameters())


def test_functional_is_the_leads_module():
    assert nn.functional is F and hasattr(F, "linear")


def test_an_op_on_a_parameter_gives_a_plain_tensor_that_a_module_does_not_register():
    """Ops build their results as mt.Tensor whatever their inputs' class, as torch's: an activation computed from a
    Parameter (an embedding lookup, weight * 2) is no Parameter, so assigning it to a module registers nothing."""
    emb = mt.nn.Embedding(5, 3)
    h, w2 = emb(mt.tensor([[1, 2]])), emb.weight * 2
    assert type(h) is mt.Tensor and type(w2) is mt.Tensor and type(emb.weight) is mt.nn.Parameter
    m = mt.nn.Module()
    m.h = h
    assert list(dict(m.named_parameters())) == []


# ----------------------------------------------------------------------------- state_dict values write through
def test_a_write_into_a_state_dict_value_loads_the_weight_as_torchs():
    """sd[k].copy_(w) under no_grad changes the parameter, and the model's output, on both sides alike; the write
    bumps the parameter's version, so a graph recorded before it refuses to backpropagate on both sides."""
    rng = np.random.default_rng(11)
    w, b, x = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal((4, 3))
    outs = {}
    for lib in (mt, torch):
        m = lib.nn.Linear(3, 2).double()
        before = m(lib.tensor(x, requires_grad=True)).sum()  # recorded with the old weight (saved for d/dx)
        sd, version = m.state_dict(), m.weight._version
        assert not sd["weight"].requires_grad and sd["weight"].grad_fn is None
        with lib.no_grad():
            sd["weight"].copy_(lib.tensor(w))
            sd["bias"].copy_(lib.tensor(b))
        assert m.weight.requires_grad and m.weight._version == version + 1
        assert np.array_equal(m.weight.detach().numpy(), w) and np.array_equal(m.bias.detach().numpy(), b)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            before.backward()
        outs[lib] = m(lib.tensor(x)).detach().numpy()
    assert_close(outs[mt], x @ w.T + b, OP_RTOL["float64"], "the loaded weight's output")
    assert_close(outs[mt], outs[torch], OP_RTOL["float64"], "against torch")


def _tiny_gpt(lib, V=11, D=8, T=5):
    """A GPT-shaped model (token and position embeddings, one MLP, a final norm, a head) with a causal-mask buffer,
    in torch's or minitensor's nn: the same source for both."""

    class TinyGPT(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = lib.nn.Embedding(V, D), lib.nn.Embedding(T, D)
            self.c_fc, self.c_proj = lib.nn.Linear(D, 4 * D), lib.nn.Linear(4 * D, D)
            self.ln_f = lib.nn.LayerNorm(D)
            self.lm_head = lib.nn.Linear(D, V, bias=False)
            self.register_buffer("bias", lib.tril(lib.ones(T, T)))  # a mask, not a weight: no checkpoint has it

        def forward(self, idx):  # (B, T) -> (B, T, V)
            h = self.wte(idx) + self.wpe(lib.arange(idx.shape[1]))
            h = h + self.c_proj(lib.nn.functional.gelu(self.c_fc(h)))
            return self.lm_head(self.ln_f(h))

    return TinyGPT().double()


def _from_pretrained(lib, model, checkpoint: dict):
    """Load a checkpoint whose projection matrices are stored transposed (GPT-2's Conv1D layout) by writing into
    the model's state_dict() values, checking key sets and shapes first."""
    sd = model.state_dict()
    keys = [k for k in sd if k != "bias"]
    assert sorted(keys) == sorted(checkpoint), f"keys differ: {sorted(set(keys) ^ set(checkpoint))}"
    transposed = ("c_fc.weight", "c_proj.weight")
    for k in keys:
        w = checkpoint[k].t() if k in transposed else checkpoint[k]
        assert tuple(w.shape) == tuple(sd[k].shape), f"{k}: {tuple(w.shape)} vs {tuple(sd[k].shape)}"
        with lib.no_grad():
            sd[k].copy_(w)
    return model


def test_a_from_pretrained_written_for_torch_loads_the_same_weights_on_minitensor():
    rng = np.random.default_rng(12)
    shapes = _tiny_gpt(torch).state_dict()
    arrays = {k: rng.standard_normal(tuple(v.shape)[::-1] if k in ("c_fc.weight", "c_proj.weight") else v.shape)
              for k, v in shapes.items() if k != "bias"}  # fmt: skip
    idx = rng.integers(0, 11, size=(2, 5))
    g = rng.standard_normal((2, 5, 11))
    results = {}
    for lib in (mt, torch):
        model = _from_pretrained(lib, _tiny_gpt(lib), {k: lib.tensor(a) for k, a in arrays.items()})
        out = model(lib.tensor(idx))
        out.backward(lib.tensor(g))
        results[lib] = out.detach().numpy(), model.c_fc.weight.grad.numpy(), model.c_fc.weight.detach().numpy()
    assert np.array_equal(results[mt][2], arrays["c_fc.weight"].T)  # loaded, transposed
    for what, ours, theirs in zip(("logits", "d c_fc.weight", "c_fc.weight"), results[mt], results[torch]):
        assert_close(ours, theirs, OP_RTOL["float64"], what)
