"""nn.MultiheadAttention against torch.nn.MultiheadAttention: torch's parameter names (state_dicts move both ways), the
same weights and inputs, every mask form (attn_mask 2-D and 3-D, bool and float; key_padding_mask bool and float;
both merged), bias_k/bias_v, add_zero_attn, kdim/vdim, batch_first, unbatched inputs, need_weights with and without
averaging; outputs, attention weights and the gradients of the inputs and of every parameter (random upstream
gradients) in float64 (round-off) and float32 (its precision)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

# torch warns where key_padding_mask and attn_mask differ in kind (bool and float); it merges them all the same
pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask:UserWarning")
DT = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}
L, S, N, E, H = 4, 5, 2, 8, 2


def load_both_ways(ours, theirs):
    """torch's key set and order; theirs takes our (random) weights, and ours takes them back from torch."""
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict()), "torch's names, in torch's order"
    theirs.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in sd.items()})
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})


def tensors(lib, arrays):
    """Each array as a tensor of lib; float arrays require grad (masks too, when float: torch differentiates them)."""
    make = mt.tensor if lib is mt else torch.tensor
    return [None if a is None else make(a, requires_grad=a.dtype.kind == "f") for a in arrays]


def compare(ours_out, theirs_out, ours_in, theirs_in, ours, theirs, dtype_name, rng):
    """Outputs (and weights) compared; then one backward of a random linear function of them; every gradient."""
    rtol = OP_RTOL[dtype_name]
    outs = [(o, t) for o, t in zip(ours_out, theirs_out, strict=True) if t is not None]
    assert [o is None for o in ours_out] == [t is None for t in theirs_out]
    for k, (o, t) in enumerate(outs):
        assert_close(o.detach().numpy(), t.detach().numpy(), rtol, f"output {k}")
    grads = [rng.standard_normal(tuple(t.shape)).astype(DT[dtype_name][0]) for _, t in outs]
    sum((o * mt.tensor(g)).sum() for (o, _), g in zip(outs, grads)).backward()
    sum((t * torch.tensor(g)).sum() for (_, t), g in zip(outs, grads)).backward()
    for k, (a, b) in enumerate(zip(ours_in, theirs_in)):
        if b is not None and b.requires_grad:
            assert_close(a.grad.numpy(), b.grad.numpy(), rtol, f"gradient of input {k}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol, f"gradient of {name}")


def random_masks(rng, form: str, dtype):
    """(attn_mask, key_padding_mask) of one form; bool True = masked, every query keeping at least one key."""
    attn = kpm = None
    if form in ("bool2d", "both_bool", "bool_and_float"):
        attn = rng.random((L, S)) < 0.3
        attn[:, 0] = False
    if form == "bool3d":
        attn = rng.random((N * H, L, S)) < 0.3
        attn[..., 0] = False
    if form in ("float2d", "both_float"):
        attn = rng.standard_normal((L, S)).astype(dtype)
    if form == "float3d":
        attn = np.where(rng.random((N * H, L, S)) < 0.3, -np.inf, rng.standard_normal((N * H, L, S))).astype(dtype)
        attn[..., 0] = 0.5
    if form in ("kpm_bool", "both_bool", "bool_and_float"):
        kpm = np.zeros((N, S), dtype=bool)
        kpm[0, -2:] = True
    if form in ("kpm_float", "both_float"):
        kpm = np.zeros((N, S), dtype=dtype)
        kpm[1, -1] = -np.inf
        kpm[0, 1] = 0.25
    if form == "bool_and_float":
        kpm = np.where(kpm, -np.inf, 0.0).astype(dtype)
    return attn, kpm


MASKS = ["none", "bool2d", "bool3d", "float2d", "float3d", "kpm_bool", "kpm_float", "both_bool", "both_float"]
MASKS += ["bool_and_float"]
CONFIGS = [
    dict(),
    dict(batch_first=True),
    dict(add_bias_kv=True),
    dict(add_zero_attn=True),
    dict(add_bias_kv=True, add_zero_attn=True, batch_first=True),
    dict(kdim=3, vdim=6),
    dict(bias=False),
]


def run(config, masks, dtype_name, need_weights=True, average=True, seed=0, train=True):
    np_dt, t_dt = DT[dtype_name]
    rng = np.random.default_rng(seed)
    mt.manual_seed(seed)
    ours = mt.nn.MultiheadAttention(E, H, dtype=np_dt, **config)
    theirs = torch.nn.MultiheadAttention(E, H, dtype=t_dt, **config)
    load_both_ways(ours, theirs)
    if not train:
        ours.eval(), theirs.eval()
    kdim, vdim = config.get("kdim", E), config.get("vdim", E)
    shape = (lambda T, W: (N, T, W)) if config.get("batch_first") else (lambda T, W: (T, N, W))
    q, k, v = (rng.standard_normal(shape(T, W)).astype(np_dt) for T, W in ((L, E), (S, kdim), (S, vdim)))
    attn, kpm = random_masks(rng, masks, np_dt)
    arrays = [q, k, v, attn, kpm]
    ours_in, theirs_in = tensors(mt, arrays), tensors(torch, arrays)

    def call(m, q, k, v, attn, kpm):
        return m(q, k, v, key_padding_mask=kpm, attn_mask=attn, need_weights=need_weights, average_attn_weights=average)

    compare(call(ours, *ours_in), call(theirs, *theirs_in), ours_in, theirs_in, ours, theirs, dtype_name, rng)


@pytest.mark.parametrize("masks", MASKS)
def test_masks_equal_torch(masks):
    run({}, masks, "float64")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_configurations_equal_torch(config):
    run(config, "both_bool", "float64")


@pytest.mark.parametrize("need_weights, average", [(True, False), (False, True)])
def test_weights_per_head_and_no_weights_equal_torch(need_weights, average):
    run({"add_bias_kv": True}, "float3d", "float64", need_weights, average)


def test_evaluation_mode_equals_torch():
    run({"dropout": 0.5, "batch_first": True}, "kpm_bool", "float64", need_weights=False, train=False)


@pytest.mark.full
@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", MASKS)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_sweep_equals_torch(config, masks, need_weights, dtype_name):
    run(config, masks, dtype_name, need_weights)


def test_float32_equals_torch():
    run({"add_bias_kv": True, "batch_first": True}, "both_float", "float32", need_weights=False)


@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched_equals_torch(batch_first):
    rng = np.random.default_rng(3)
    ours = mt.nn.MultiheadAttention(E, H, dtype=np.float64, batch_first=batch_first)
    theirs = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, batch_first=batch_first)
    load_both_ways(ours, theirs)
    x, kpm = rng.standard_normal((L, E)), np.array([False, False, True, False])
    ours_in, theirs_in = tensors(mt, [x, kpm]), tensors(torch, [x, kpm])
    o = ours(ours_in[0], ours_in[0], ours_in[0], key_padding_mask=ours_in[1], average_attn_weights=False)
    t = theirs(theirs_in[0], theirs_in[0], theirs_in[0], key_padding_mask=theirs_in[1], average_attn_weights=False)
    compare(o, t, ours_in, theirs_in, ours, theirs, "float64", rng)


def test_is_causal_is_a_hint_that_needs_the_causal_mask():
    m, x = mt.nn.MultiheadAttention(E, H), mt.randn(L, N, E)
    with pytest.raises(RuntimeError, match="is_causal is a hint that attn_mask is the causal mask"):
        m(x, x, x, is_causal=True)
    causal = mt.nn.Transformer.generate_square_subsequent_mask(L) if hasattr(mt.nn, "Transformer") else None
    if causal is not None:
        a = m(x, x, x, attn_mask=causal, is_causal=True)[0].detach().numpy()
        assert np.array_equal(a, m(x, x, x, attn_mask=causal)[0].detach().numpy())


def test_a_query_with_no_key_gets_zero_weights():
    """Deviation, flagged in modules/attention.py: torch's softmax gives NaN for a query whose keys are all masked."""
    m = mt.nn.MultiheadAttention(E, H)
    x = mt.randn(L, N, E, requires_grad=True)
    kpm = np.ones((N, L), dtype=bool)
    out, w = m(x, x, x, key_padding_mask=kpm)
    assert np.isfinite(out.detach().numpy()).all() and not w.detach().numpy().any()
    out.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda m, x: m(x, x, x, attn_mask=np.ones((L, L), dtype=np.int64)), TypeError, "must be bool or floating"),
        (lambda m, x: m(x, x, x, attn_mask=np.ones((L, L + 1), dtype=bool)), ValueError, r"attn_mask must be of shape"),
        (lambda m, x: m(x, x, x, attn_mask=np.ones((5, L, L), dtype=bool)), ValueError, r"\(4, 4, 4\)"),
        (lambda m, x: m(x, x, x, key_padding_mask=np.ones((3, L), dtype=bool)), ValueError, "key_padding_mask must"),
        (lambda m, x: m(x, x[:, :, :4], x), ValueError, r"widths \(8, 8, 8\)"),
        (lambda m, x: m(x, x[:2], x), ValueError, "must have one length"),
        (lambda m, x: m(x[0], x, x), ValueError, "all be 3-D"),
    ],
)
def test_bad_input_is_refused(call, error, match):
    with pytest.raises(error, match=match):
        call(mt.nn.MultiheadAttention(E, H), mt.randn(L, N, E))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(embed_dim=8, num_heads=3), "divisible by num_heads"),
        (dict(embed_dim=8, num_heads=2, dropout=1.0), r"dropout must be a probability in \[0, 1\)"),
        (dict(embed_dim=8, num_heads=0), "num_heads must be positive"),
    ],
)
def test_bad_constructor_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mt.nn.MultiheadAttention(**kwargs)
