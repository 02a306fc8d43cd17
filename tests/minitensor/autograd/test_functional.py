"""mt.autograd.functional against torch.autograd.functional, float64: a small MLP with LayerNorm, a tiny Transformer.

Each test calls the same function on both libraries with the same seeded arrays (random vectors v,
never all ones) and compares every returned tensor, in the same structure (a Tensor where the
inputs were a Tensor, a tuple where they were a tuple), to OP_RTOL (the MLP) or PARITY_RTOL (the
whole Transformer). Also: create_graph (a result differentiated once more), strict mode and the
argument errors, with PyTorch's behaviour; and Hessians through cross_entropy / nll_loss with weight= and
class-probability targets.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF
import torch.nn.functional as tF

import minitensor as mt
import minitensor.nn.functional as mF
from minitensor.autograd.functional import functional_call
from minitensor.testing import GRADCHECK, OP_RTOL, PARITY_RTOL, assert_close

MF = mt.autograd.functional
RTOL = OP_RTOL["float64"]


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x.detach().numpy())


def _assert_same(ours, ref, rtol, what="result"):
    """Equal structure (Tensor / nested tuples) and values."""
    if isinstance(ref, torch.Tensor):
        assert isinstance(ours, mt.Tensor), f"{what}: expected a Tensor, got {type(ours).__name__}"
        assert tuple(ours.shape) == tuple(ref.shape), f"{what}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}"
        assert_close(_np(ours), _np(ref), rtol, what)
        return
    assert isinstance(ours, tuple) and len(ours) == len(ref), f"{what}: expected a tuple of {len(ref)}, got {ours!r}"
    for i, (a, b) in enumerate(zip(ours, ref)):
        _assert_same(a, b, rtol, f"{what}[{i}]")


# --------------------------------------------------------------------------------------------
# A small MLP with LayerNorm: f(x, W1, b1, gamma, beta, W2) = tanh(LN(x W1 + b1)) W2
# --------------------------------------------------------------------------------------------
SHAPES = [(3, 4), (4, 5), (5,), (5,), (5,), (5, 2)]


def _mlp(lib, F, layer_norm=None):
    layer_norm = layer_norm or F.layer_norm

    def f(x, w1, b1, gamma, beta, w2):
        h = layer_norm(x @ w1 + b1, (5,), gamma, beta)
        return h.tanh() @ w2  # (3, 2)

    return f


def _scalar(f, lib, weights):
    """A scalar loss of f's output: sum(out^2 * C) with a fixed random C."""
    c = lib(weights)
    return lambda *a: (f(*a) ** 2 * c).sum()


def _arrays(rng, shapes):
    return [rng.standard_normal(s) for s in shapes]


def _sides(arrays):
    return tuple(mt.tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays)


@pytest.fixture
def mlp(rng):
    xs = _arrays(rng, SHAPES)
    xs[3] += 1.0  # gamma around 1, as initialised
    vec_f = (_mlp(mt, mF), _mlp(torch, tF))
    c = rng.standard_normal((3, 2))
    scalar_f = (_scalar(vec_f[0], mt.tensor, c), _scalar(vec_f[1], torch.tensor, c))
    return dict(
        inputs=_sides(xs),
        vec=vec_f,
        scalar=scalar_f,
        c=c,
        v_out=_sides([rng.standard_normal((3, 2))]),
        v_in=_sides(_arrays(rng, SHAPES)),
    )


@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp_and_jvp_equal_torch_on_tuple_inputs(mlp, create_graph):
    (ours_in, ref_in), (f, g) = mlp["inputs"], mlp["vec"]
    v, tv = mlp["v_out"][0][0], mlp["v_out"][1][0]
    _assert_same(
        MF.vjp(f, ours_in, v, create_graph=create_graph), TF.vjp(g, ref_in, tv, create_graph=create_graph), RTOL, "vjp"
    )
    _assert_same(
        MF.jvp(f, ours_in, mlp["v_in"][0], create_graph=create_graph),
        TF.jvp(g, ref_in, mlp["v_in"][1], create_graph=create_graph),
        RTOL,
        "jvp",
    )


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_hvp_and_vhp_equal_torch_on_tuple_inputs(mlp, name):
    (ours_in, ref_in), (f, g) = mlp["inputs"], mlp["scalar"]
    _assert_same(
        getattr(MF, name)(f, ours_in, mlp["v_in"][0]), getattr(TF, name)(g, ref_in, mlp["v_in"][1]), RTOL, name
    )


def test_jacobian_and_hessian_equal_torch_on_tuple_inputs(mlp):
    (ours_in, ref_in) = mlp["inputs"]
    _assert_same(MF.jacobian(mlp["vec"][0], ours_in), TF.jacobian(mlp["vec"][1], ref_in), RTOL, "jacobian")
    _assert_same(MF.hessian(mlp["scalar"][0], ours_in), TF.hessian(mlp["scalar"][1], ref_in), RTOL, "hessian")


# The class losses' new forms (weight=, class-probability targets): Hessians of a loss of an MLP's logits, which
# differentiate the hand-derived backwards of ops.CrossEntropy / CrossEntropyProbs / NLLLoss once more.
TARGETS = np.array([0, 1, -100])  # (3,) class indices of the (3, 2) logits, one ignored


def _class_loss(lib, F, form):
    w = lib.tensor(np.array([0.7, 1.6]))

    def loss(x, w1, b1, gamma, beta, w2, *p):
        z = _mlp(lib, F)(x, w1, b1, gamma, beta, w2)  # (3, 2)
        if form == "weight":
            return F.cross_entropy(z, lib.tensor(TARGETS), w, label_smoothing=0.2)
        if form == "nll weight":
            return F.nll_loss(F.log_softmax(z, dim=-1), lib.tensor(TARGETS), w, reduction="sum")
        return F.cross_entropy(z, p[0], p[1], label_smoothing=0.1)  # probabilities, weight: both differentiated

    return loss


@pytest.mark.parametrize("form", ["weight", "nll weight", "probabilities"])
def test_hvp_and_hessian_of_the_class_losses_equal_torch(mlp, rng, form):
    (ours_in, ref_in), (v_ours, v_ref) = mlp["inputs"], mlp["v_in"]
    if form == "probabilities":
        extra = [rng.uniform(0.0, 1.0, (3, 2)), rng.uniform(0.5, 2.0, 2)]  # target, weight
        more, more_v = _sides(extra), _sides(_arrays(rng, [(3, 2), (2,)]))
        ours_in, ref_in, v_ours, v_ref = ours_in + more[0], ref_in + more[1], v_ours + more_v[0], v_ref + more_v[1]
    f, g = _class_loss(mt, mF, form), _class_loss(torch, tF, form)
    _assert_same(MF.hvp(f, ours_in, v_ours), TF.hvp(g, ref_in, v_ref), RTOL, f"hvp {form}")
    last_two = (lambda *a: f(*ours_in[:-2], *a), lambda *a: g(*ref_in[:-2], *a))  # a full Hessian of a few inputs
    _assert_same(MF.hessian(last_two[0], ours_in[-2:]), TF.hessian(last_two[1], ref_in[-2:]), RTOL, f"hessian {form}")


def _one_input(fs, inputs, k=1):
    """fs as functions of input k alone (the others fixed): the single-Tensor form of the API."""
    (f, g), (ours, ref) = fs, inputs
    return ((lambda x: f(*ours[:k], x, *ours[k + 1 :]), lambda x: g(*ref[:k], x, *ref[k + 1 :])), (ours[k], ref[k]))


def test_single_tensor_inputs_give_single_tensors(mlp):
    (f, g), (x, tx) = _one_input(mlp["vec"], mlp["inputs"])
    (s, ts), _ = _one_input(mlp["scalar"], mlp["inputs"])
    v, tv = mlp["v_in"][0][1], mlp["v_in"][1][1]
    u, tu = mlp["v_out"][0][0], mlp["v_out"][1][0]
    _assert_same(MF.vjp(f, x, u), TF.vjp(g, tx, tu), RTOL, "vjp")
    _assert_same(MF.jvp(f, x, v), TF.jvp(g, tx, tv), RTOL, "jvp")
    _assert_same(MF.jacobian(f, x), TF.jacobian(g, tx), RTOL, "jacobian")
    _assert_same(MF.hessian(s, x), TF.hessian(ts, tx), RTOL, "hessian")
    _assert_same(MF.hvp(s, x, v), TF.hvp(ts, tx, tv), RTOL, "hvp")
    _assert_same(MF.vhp(s, x, v), TF.vhp(ts, tx, tv), RTOL, "vhp")
    # a tuple of outputs and one input: the jacobian is a tuple with one entry per output
    _assert_same(
        MF.jacobian(lambda a: (f(a), f(a).exp()), x),
        TF.jacobian(lambda a: (g(a), g(a).exp()), tx),
        RTOL,
        "jacobian of two outputs",
    )


def test_vectorize_is_accepted_with_the_same_values(mlp):
    (f, g), (x, tx) = _one_input(mlp["vec"], mlp["inputs"])
    _assert_same(MF.jacobian(f, x, vectorize=True), TF.jacobian(g, tx, vectorize=True), RTOL, "jacobian")


def _composite_layer_norm(x, shape, gamma, beta, eps=1e-5):
    """torch's layer norm from primitives: F.layer_norm's third derivative is wrong in torch 2.13 (its double
    backward treats the saved mean and 1/std as constants; pytorch/pytorch#175754), the composite's is right."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + eps).sqrt() * gamma + beta


def test_create_graph_results_differentiate_again_into_the_callers_graph(mlp, rng):
    """hvp(create_graph=True) of an input that requires grad: d<Hv, w>/dx is a third derivative, equal to
    torch's (its layer norm written from primitives, see _composite_layer_norm) and to finite differences."""
    (s, _), (x, tx) = _one_input(mlp["scalar"], mlp["inputs"], k=0)
    c = mlp["c"]
    f = lambda x0: _scalar(_mlp(torch, None, _composite_layer_norm), torch.tensor, c)(x0, *mlp["inputs"][1][1:])
    x, tx = x.detach().requires_grad_(), tx.detach().requires_grad_()
    v, tv = mlp["v_in"][0][0], mlp["v_in"][1][0]
    w = rng.standard_normal(tuple(x.shape))
    results = []
    for lib, fn, inp, vec in ((MF, s, x, v), (TF, f, tx, tv)):
        _, h = lib.hvp(fn, inp, vec, create_graph=True)
        assert h.requires_grad
        (h * (mt.tensor(w) if lib is MF else torch.tensor(w))).sum().backward()
        results.append(inp.grad)
    _assert_same(results[0], results[1], RTOL, "third derivative")
    _, plain = MF.hvp(s, x.detach(), v)
    assert not plain.requires_grad
    eps, numerical = GRADCHECK["eps"], np.empty(tuple(x.shape))
    for i in np.ndindex(*x.shape):
        step = np.zeros(tuple(x.shape))
        step[i] = eps
        along = [
            float((MF.hvp(s, mt.tensor(x.data + sign * step), v)[1].detach().numpy() * w).sum()) for sign in (1, -1)
        ]
        numerical[i] = (along[0] - along[1]) / (2 * eps)
    np.testing.assert_allclose(results[0].detach().numpy(), numerical, rtol=GRADCHECK["rtol"], atol=GRADCHECK["atol"])


def test_an_unused_input_gives_zeros_or_a_strict_error_as_in_torch(mlp):
    (x, tx) = mlp["inputs"][0][0], mlp["inputs"][1][0]
    y, ty = mt.tensor(np.ones(2)), torch.tensor(np.ones(2))
    for name in ("vjp", "vhp", "hvp"):
        ours = getattr(MF, name)(
            lambda a, b: (a.tanh() ** 2).sum(), (x, y), (mt.ones_like(x), mt.ones_like(y)) if name != "vjp" else None
        )
        ref = getattr(TF, name)(
            lambda a, b: (a.tanh() ** 2).sum(),
            (tx, ty),
            (torch.ones_like(tx), torch.ones_like(ty)) if name != "vjp" else None,
        )
        _assert_same(ours, ref, RTOL, name)
        with pytest.raises(RuntimeError, match="independent of input 1"):
            getattr(MF, name)(
                lambda a, b: (a.tanh() ** 2).sum(), (x, y), (x, y) if name != "vjp" else None, strict=True
            )
    with pytest.raises(RuntimeError, match="independent of input 1"):
        MF.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    _assert_same(
        MF.jacobian(lambda a, b: a * 2, (x, y)),
        TF.jacobian(lambda a, b: a * 2, (tx, ty)),
        RTOL,
        "jacobian with an unused input",
    )
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function .* independent of the input"):
        MF.hessian(lambda a: (a * 3).sum(), x, strict=True)  # linear: its gradient is a constant


def test_bad_arguments_are_refused_with_torchs_messages(mlp):
    (f, _), (x, _) = _one_input(mlp["vec"], mlp["inputs"])
    (s, _), _ = _one_input(mlp["scalar"], mlp["inputs"])
    with pytest.raises(RuntimeError, match="v can only be None if the user-provided function returns a single"):
        MF.vjp(f, x)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \(3, 2\) but got \(2, 3\)"):
        MF.vjp(f, x, mt.zeros(2, 3))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got 1"):
        MF.hvp(lambda a, b: (a * b).sum(), (x, x), (x,))
    with pytest.raises(TypeError, match="inputs given to hvp must be either a Tensor or a tuple of Tensors"):
        MF.hvp(s, np.ones((4, 5)), x)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        MF.vhp(lambda a: (a.sum(), a.sum()), x, x)
    with pytest.raises(RuntimeError, match="should contain a single element"):
        MF.hessian(f, x)
    with pytest.raises(ValueError, match='Expected strategy to be either "forward-mode" or "reverse-mode"'):
        MF.jacobian(f, x, strategy="sideways")
    with pytest.raises(NotImplementedError, match='`create_graph=True` and `strategy="forward-mode"`'):
        MF.jacobian(f, x, create_graph=True, strategy="forward-mode")


# --------------------------------------------------------------------------------------------
# A tiny Transformer: transformer_np against parity/model.py with the same weights (parity/convert.py)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[False, True], ids=["post-norm", "pre-norm"])
def tiny(request):
    from parity import masks as pm
    from parity.report import build_models, synthetic_batch
    from transformer_np import masks as nm
    from transformer_np.config import ModelConfig
    from transformer_np.data import PAD_ID, shift_targets

    cfg = ModelConfig(
        src_vocab_size=9,
        tgt_vocab_size=9,
        d_model=8,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=12,
        dropout=0.0,
        max_len=16,
        norm_first=request.param,
        activation="gelu",
    )
    ours, ref = build_models(cfg, "float64", "cpu", seed=3)
    ours.eval()
    ref.eval()
    src, tgt = synthetic_batch(np.random.default_rng(1), 2, 4, 4, 9, 9)
    tgt_in, labels = shift_targets(tgt)
    names = [n for n, _ in ours.named_parameters()]
    s, t = mt.tensor(src), mt.tensor(tgt_in)
    ts, tt = torch.tensor(src), torch.tensor(tgt_in)
    np_args = (s, t, nm.padding_mask(s, PAD_ID), nm.target_mask(t, PAD_ID))
    pt_args = (ts, tt, pm.padding_mask(ts, PAD_ID), pm.target_mask(tt, PAD_ID))

    def np_logits(*ps):
        return functional_call(ours, dict(zip(names, ps)), np_args)  # (B, T, V)

    def pt_logits(*ps):
        return torch.func.functional_call(ref, dict(zip(names, ps)), pt_args)

    def np_loss(*ps):
        return mF.cross_entropy(np_logits(*ps).reshape(-1, 9), mt.tensor(labels.reshape(-1)), ignore_index=PAD_ID)

    def pt_loss(*ps):
        return tF.cross_entropy(pt_logits(*ps).reshape(-1, 9), torch.tensor(labels.reshape(-1)), ignore_index=PAD_ID)

    params = ([p.detach() for p in ours.parameters()], [p.detach() for p in ref.parameters()])
    rng = np.random.default_rng(2)
    v = [rng.standard_normal(tuple(p.shape)) for p in params[0]]
    return dict(
        names=names, loss=(np_loss, pt_loss), logits=(np_logits, pt_logits), params=params, v=_sides(v), model=ours
    )


@pytest.mark.parametrize("name", ["vjp", "hvp", "vhp", "jvp"])
def test_functional_api_on_the_whole_transformer_equals_torch(tiny, name):
    ours = getattr(MF, name)(tiny["loss"][0], tuple(tiny["params"][0]), None if name == "vjp" else tiny["v"][0])
    ref = getattr(TF, name)(tiny["loss"][1], tuple(tiny["params"][1]), None if name == "vjp" else tiny["v"][1])
    _assert_same(ours, ref, PARITY_RTOL["float64"], name)


def _partial(fn, params, picked):
    """fn as a function of the parameters at indices `picked`, the others fixed at `params`."""

    def f(*sub):
        ps = list(params)
        for i, p in zip(picked, sub):
            ps[i] = p
        return fn(*ps)

    return f


def test_jacobian_and_hessian_on_part_of_the_transformer_equal_torch(tiny):
    """In the output bias and a LayerNorm gain, the other parameters fixed: the Hessian of the loss and the
    Jacobian of the logits (2 x 3 x 9 of them)."""
    names = tiny["names"]
    picked = [names.index("generator.bias"), next(i for i, n in enumerate(names) if n.endswith("norm1.weight"))]
    for fn_name, key in (("hessian", "loss"), ("jacobian", "logits")):
        ours = getattr(MF, fn_name)(
            _partial(tiny[key][0], tiny["params"][0], picked), tuple(tiny["params"][0][i] for i in picked)
        )
        ref = getattr(TF, fn_name)(
            _partial(tiny[key][1], tiny["params"][1], picked), tuple(tiny["params"][1][i] for i in picked)
        )
        _assert_same(ours, ref, PARITY_RTOL["float64"], fn_name)


def test_functional_call_restores_the_modules_parameters(tiny):
    model = tiny["model"]
    before = {n: p for n, p in model.named_parameters()}
    zeros = {n: mt.zeros(*p.shape, dtype=p.dtype) for n, p in before.items()}
    tiny["loss"][0](*zeros.values())
    assert {n: p for n, p in model.named_parameters()} == before
    with pytest.raises(KeyError, match="no parameter or buffer 'decoder.nope'"):
        functional_call(model, {"decoder.nope": mt.zeros(1)}, ())
    assert {n: p for n, p in model.named_parameters()} == before


def test_functional_call_replaces_a_tied_parameter_everywhere_as_torch_tie_weights():
    """A weight shared by two modules is one entry of named_parameters; replacing it replaces both uses (torch's
    functional_call with tie_weights=True), so the output, and any derivative through it, sees the new tensor."""
    emb = mt.nn.Embedding(5, 3)
    out = mt.nn.Linear(3, 5, bias=False)
    out.weight = emb.weight  # tied
    model = mt.nn.ModuleDict({"emb": emb, "out": out})
    assert [n for n, _ in model.named_parameters()] == ["emb.weight"]
    new = mt.tensor(np.arange(15.0).reshape(5, 3))

    class Both(mt.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids):
            return self.m["out"](self.m["emb"](ids))

    both, ids = Both(), mt.tensor(np.array([0, 3]))
    got = functional_call(both, {"m.emb.weight": new}, (ids,)).numpy()
    assert_close(got, new.numpy()[[0, 3]] @ new.numpy().T, 0.0, "both uses of the tied weight replaced")
    assert out.weight is emb.weight and emb.weight is not new  # restored, still tied
