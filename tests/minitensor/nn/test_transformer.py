"""nn.Transformer, nn.TransformerEncoder(Layer) and nn.TransformerDecoder(Layer) against torch.nn's: torch's
state_dict keys in torch's order, weights moved both ways (torch's into ours, then ours, changed, into torch's), the
same inputs and masks; the output, the inputs' gradients and every parameter's gradient (random upstream gradient)
compared in float64 (round-off) and float32 (its precision), in training mode with dropout 0 and in evaluation mode.
A single layer is held to OP_RTOL; the stacks (encoder, decoder, Transformer: up to 4 layers and 2 final norms) to
PARITY_RTOL, the whole-model tolerance: float32 round-off compounds through the layers, in both libraries (a
Transformer's float32 gradients are up to 6e-5 from the float64 ones in torch and in ours alike).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, PARITY_RTOL, assert_close

# torch's own warnings: its evaluation fast path off (norm_first, batch_first=False), its nested tensors' prototype,
# masks of two kinds (bool padding, float causal) merged
pytestmark = [
    pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning"),
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning"),
    pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning"),
]
DT = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}
S, T, N, E, H, FF = 5, 4, 2, 8, 2, 12


def both(kind: str, dtype_name: str, **kw):
    """The same module in both libraries: torch's weights loaded into ours, then ours (shifted) loaded into torch's."""
    np_dt, t_dt = DT[dtype_name]
    lib_kw = dict(kw)
    theirs = build(torch.nn, kind, t_dt, **lib_kw)
    ours = build(mt.nn, kind, np_dt, **lib_kw)
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd), "torch's names, in torch's order"
    ours.load_state_dict({k: v.numpy() for k, v in sd.items()})
    rng = np.random.default_rng(1)  # then ours moves, and torch takes ours: the other direction
    shifted = {
        k: (np.asarray(v) + 0.1 * rng.standard_normal(np.shape(v))).astype(np_dt) for k, v in ours.state_dict().items()
    }
    ours.load_state_dict(shifted)
    theirs.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in ours.state_dict().items()})
    return ours, theirs


def build(nn, kind: str, dtype, layers: int = 2, **kw):
    common = dict(d_model=E, nhead=H, dim_feedforward=FF, dropout=0.0, dtype=dtype)
    common.update(kw)
    if kind == "Transformer":
        return nn.Transformer(num_encoder_layers=layers, num_decoder_layers=layers, **common)
    if kind in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
        return getattr(nn, kind)(**common)
    layer = getattr(nn, kind + "Layer")(**common)
    norm = nn.LayerNorm(E, dtype=dtype)
    return (
        getattr(nn, kind)(layer, layers, norm=norm)
        if kind == "TransformerDecoder"
        else nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False)
    )


def inputs(kind: str, dtype, batch_first: bool, rng, masks: bool):
    """(args, kwargs) as arrays: src and/or tgt and memory, with a causal tgt mask and key padding masks."""
    seq = (lambda L: (N, L, E)) if batch_first else (lambda L: (L, N, E))
    src, tgt = rng.standard_normal(seq(S)).astype(dtype), rng.standard_normal(seq(T)).astype(dtype)
    pad_src = np.zeros((N, S), dtype=bool)
    pad_src[1, -2:] = True
    pad_tgt = np.zeros((N, T), dtype=bool)
    pad_tgt[0, -1] = True
    causal = np.triu(np.full((T, T), -np.inf), 1).astype(dtype)
    if kind in ("TransformerEncoder", "TransformerEncoderLayer"):
        return [src], (dict(src_key_padding_mask=pad_src) if masks else {})
    if kind in ("TransformerDecoder", "TransformerDecoderLayer"):
        kw = dict(tgt_mask=causal, tgt_key_padding_mask=pad_tgt, memory_key_padding_mask=pad_src) if masks else {}
        return [tgt, src], kw
    kw = dict(tgt_mask=causal, src_key_padding_mask=pad_src, tgt_key_padding_mask=pad_tgt) if masks else {}
    return [src, tgt], (kw | dict(memory_key_padding_mask=pad_src) if masks else kw)


def run(kind, dtype_name, masks=True, train=True, seed=0, **kw):
    np_dt, _ = DT[dtype_name]
    rtol = (OP_RTOL if kind.endswith("Layer") else PARITY_RTOL)[dtype_name]
    rng = np.random.default_rng(seed)
    ours, theirs = both(kind, dtype_name, **kw)
    if not train:
        ours.eval(), theirs.eval()
    args, kwargs = inputs(kind, np_dt, kw.get("batch_first", False), rng, masks)
    a_m = [mt.tensor(a, requires_grad=True) for a in args]
    a_t = [torch.tensor(a, requires_grad=True) for a in args]
    out_m = ours(*a_m, **{k: mt.tensor(v) for k, v in kwargs.items()})
    out_t = theirs(*a_t, **{k: torch.tensor(v) for k, v in kwargs.items()})
    assert_close(out_m.detach().numpy(), out_t.detach().numpy(), rtol, "output")
    g = rng.standard_normal(tuple(out_t.shape)).astype(np_dt)
    (out_m * mt.tensor(g)).sum().backward()
    (out_t * torch.tensor(g)).sum().backward()
    for k, (a, b) in enumerate(zip(a_m, a_t)):
        assert_close(a.grad.numpy(), b.grad.numpy(), rtol, f"gradient of input {k}")
    theirs_params = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(theirs_params)
    for name, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol, f"gradient of {name}")


KINDS = [
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Transformer",
]
CONFIGS = [
    dict(),
    dict(norm_first=True, batch_first=True),
    dict(activation="gelu", bias=False, layer_norm_eps=1e-3),
]


def _id(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "default"


@pytest.mark.parametrize("kind", KINDS)
def test_each_module_equals_torch(kind):
    run(kind, "float64", **CONFIGS[1])


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_transformer_configurations_equal_torch(config):
    run("Transformer", "float64", **config)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
def test_transformer_in_evaluation_mode_equals_torch(dtype_name):
    run("Transformer", dtype_name, train=False, dropout=0.3, batch_first=True)


def test_transformer_float32_equals_torch():
    run("Transformer", "float32", norm_first=True)


def test_a_callable_activation_equals_torch():
    """A function for `activation`, given to each library in its own spelling."""
    rng = np.random.default_rng(2)
    ours, theirs = (
        lib.nn.TransformerEncoderLayer(E, H, FF, 0.0, activation=lib.nn.functional.silu, dtype=dt)
        for lib, dt in ((mt, np.float64), (torch, torch.float64))
    )
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = rng.standard_normal((S, N, E))
    assert_close(ours(mt.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), OP_RTOL["float64"])


@pytest.mark.full
@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("masks", [True, False])
@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("kind", KINDS)
def test_sweep_equals_torch(kind, config, masks, train, dtype_name):
    run(kind, dtype_name, masks=masks, train=train, **config)


def test_generate_square_subsequent_mask_is_torchs():
    for dtype, t_dtype in ((None, None), (np.float64, torch.float64)):
        ours = mt.nn.Transformer.generate_square_subsequent_mask(4, dtype=dtype)
        theirs = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=t_dtype)
        assert ours.dtype == theirs.numpy().dtype and np.array_equal(ours.numpy(), theirs.numpy())


def test_evaluation_fast_path_differs_only_at_padded_positions():
    """Deviation, flagged in modules/transformer.py: torch's encoder under no_grad in evaluation runs on nested tensors
    and gives 0 at a padded position (here the final norm's output of 0: its bias); ours keeps the math's value there.
    The other positions are equal."""
    ours, theirs = both("TransformerEncoder", "float64", batch_first=True)
    ours.eval(), theirs.eval()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((N, S, E))
    pad = np.zeros((N, S), dtype=bool)
    pad[1, -2:] = True
    with torch.no_grad():
        theirs.use_nested_tensor = True  # build() turned it off (it warns for norm_first and odd heads)
        t = theirs(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).numpy()
    o = ours(mt.tensor(x), src_key_padding_mask=mt.tensor(pad)).detach().numpy()
    assert_close(o[~pad], t[~pad], PARITY_RTOL["float64"])
    assert (t[pad] == theirs.norm.bias.detach().numpy()).all()
    assert np.isfinite(o[pad]).all() and not np.allclose(o[pad], t[pad])


def test_is_causal_without_a_mask_is_refused_as_torch():
    layer = mt.nn.TransformerDecoderLayer(E, H, FF)
    with pytest.raises(RuntimeError, match="is_causal is a hint"):
        layer(mt.randn(T, N, E), mt.randn(S, N, E), tgt_is_causal=True)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda: mt.nn.TransformerEncoderLayer(E, H, activation="tanh"),
            ValueError,
            "activation must be 'relu', 'gelu'",
        ),
        (lambda: mt.nn.TransformerEncoderLayer(E, H, activation=3), TypeError, "activation must be 'relu', 'gelu'"),
        (lambda: mt.nn.TransformerEncoderLayer(E, 3), ValueError, "divisible by num_heads"),
        (lambda: mt.nn.TransformerDecoderLayer(E, H, dropout=1.0), ValueError, "dropout must be a probability"),
        (lambda: mt.nn.TransformerEncoder(mt.nn.TransformerEncoderLayer(E, H), 0), ValueError, "num_layers"),
        (lambda: mt.nn.TransformerDecoder("layer", 2), TypeError, "expected a layer Module"),
        (lambda: mt.nn.Transformer(E, H, 1, 1, FF)(mt.randn(S, N, E), mt.randn(T, 3, E)), ValueError, "batch size"),
        (lambda: mt.nn.Transformer(E, H, 1, 1, FF)(mt.randn(S, N, 4), mt.randn(T, N, 4)), ValueError, "d_model = 8"),
    ],
)
def test_bad_arguments_are_refused(make, error, match):
    with pytest.raises(error, match=match):
        make()
