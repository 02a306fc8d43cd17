"""Higher-order gradients: the backward of every op differentiated again, against PyTorch.

For each case of the op table (tests/support/op_cases.py) with a gradient, the first derivative
b(x, g) = g . d out / d x is built with create_graph=True for a random upstream g; then the gradient
of <b(x, g), v>, for a random v, with respect to x and to g must equal torch.autograd.grad's, in
float64 to OP_RTOL['float64'] and in float32 to OP_RTOL['float32']. gradgradcheck runs the
differentiable cases in float64 (finite differences of the first derivative). The elementwise ops
go one order further. The engine's entry points (grad, backward(create_graph=True)) and their
errors are tested below the table, and a tiny Transformer's Hessian-vector product against torch's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import GRADCHECK, OP_RTOL, PARITY_RTOL, assert_close
from tests.minitensor.autograd.test_gradcheck import DIFFERENTIABLE, _wrapped
from tests.minitensor.ops.test_op_table import _subclasses
from tests.support import ROOT
from tests.support.op_cases import (
    CASES,
    FIRST_ORDER_ONLY_CASES,
    FIRST_ORDER_ONLY_PRIMITIVES,
    MT,
    TORCH,
    as_list,
    case_seed,
    make_inputs,
    samples,
    torch_dtype_name,
)

WITH_GRAD = [
    c for c in CASES if c.grad and any(s.is_float and s.grad for s in c.specs) and c.name not in FIRST_ORDER_ONLY_CASES
]


def _random(shape, dtype_name: str, rng) -> np.ndarray:
    # shifted off zero mean so that sums of it do not cancel (as the first-order table does)
    return np.asarray(rng.standard_normal(shape) + 0.5, dtype=dtype_name)


def _grad(lib, outputs, inputs, grad_outputs=None, create_graph=False):
    """lib's autograd.grad with allow_unused, a None result as zeros (both libraries may give either)."""
    found = lib.autograd.grad(outputs, inputs, grad_outputs, create_graph=create_graph, allow_unused=True)
    zeros = (lambda x: mt.zeros(x.shape, dtype=x.dtype)) if lib is mt else torch.zeros_like
    return [zeros(x) if g is None else g for g, x in zip(found, inputs)]


def _as_numpy(t) -> np.ndarray:
    return t.detach().numpy(force=True) if isinstance(t, torch.Tensor) else t.detach().numpy()


def derivatives(case, dtype_name: str, order: int):
    """Per library, the gradients of order 1..`order` of the case with random upstream gradients, each
    order's result paired with torch's: [(what, ours, torch's), ...]."""
    xs_mt, xs_t, _ = make_inputs(case, dtype_name)
    outs_mt = as_list(case.fn(MT, *xs_mt, **case.kwargs))
    outs_t = as_list((case.ref or case.fn)(TORCH, *xs_t, **case.kwargs))
    pairs = [(o, r) for o, r in zip(outs_mt, outs_t) if r.requires_grad]
    rng = np.random.default_rng(case_seed(case.name) + 2)
    ys_mt, ys_t = [o for o, _ in pairs], [r for _, r in pairs]
    wrt_mt, wrt_t = [x for x in xs_mt if x.requires_grad], [x for x in xs_t if x.requires_grad]
    results = []
    for k in range(1, order + 1):
        vs = [_random(y.shape, torch_dtype_name(y), rng) for y in ys_t]
        vs_mt = [mt.tensor(v.copy(), requires_grad=True) for v in vs]
        vs_t = [torch.tensor(v.copy(), requires_grad=True) for v in vs]
        if k > 1:  # <previous derivative, v>, one scalar each
            ys_mt = [sum((y * v).sum() for y, v in zip(ys_mt, vs_mt))]
            ys_t = [sum((y * v).sum() for y, v in zip(ys_t, vs_t))]
            vs_mt, vs_t = [None], [None]
        wrt_mt, wrt_t = wrt_mt + [v for v in vs_mt if v is not None], wrt_t + [v for v in vs_t if v is not None]
        ys_mt = _grad(mt, ys_mt, wrt_mt, vs_mt, create_graph=k < order)
        ys_t = _grad(torch, ys_t, wrt_t, vs_t, create_graph=k < order)
        results += [(f"order {k}, wrt {i}", a, b) for i, (a, b) in enumerate(zip(ys_mt, ys_t))]
        keep = [i for i, y in enumerate(ys_t) if y.requires_grad]  # what depends on something further
        if k < order and not keep:
            break
        ys_mt, ys_t = [ys_mt[i] for i in keep], [ys_t[i] for i in keep]
    return results


def _check(case, dtype_name, order):
    for what, ours, ref in derivatives(case, dtype_name, order):
        assert ours.shape == tuple(ref.shape), f"{case} [{dtype_name}] {what}: shape {ours.shape} vs {tuple(ref.shape)}"
        assert_close(_as_numpy(ours), _as_numpy(ref), case.tol(dtype_name), what=f"{case} [{dtype_name}] {what}")


# Cases whose second derivative float32 cannot resolve, in either library: there float32 is judged
# against float64 (each library's float32 result is off torch's float64 one by more than OP_RTOL).
FLOAT32_ILL_CONDITIONED = {
    "F.log_softmax_large": "a row of log_softmax(300 x) is one-hot to 1 - p = 4e-5; the second derivative is "
    "proportional to 1 - p, which float32 (p rounded to 6e-8) resolves to 1e-3 only: torch's "
    "float32 misses its own float64 value by 7e-5, ours by 4e-4",
}


@pytest.mark.parametrize("case, dtype_name", samples(WITH_GRAD))
def test_second_derivative_matches_torch(case, dtype_name):
    """d<b(x, g), v>/dx and d<b(x, g), v>/dg, b the backward, for random g and v."""
    if dtype_name == "float32" and case.name in FLOAT32_ILL_CONDITIONED:
        pytest.skip(FLOAT32_ILL_CONDITIONED[case.name])
    _check(case, dtype_name, order=2)


class _BackwardsOnTensors(mt.autograd.OpCalls):
    """Records the primitives whose backward ran on Tensors (under create_graph)."""

    def __init__(self):
        self.names = set()

    def backward(self, fn, ctx, g):
        if ctx.create_graph:
            self.names.add(fn.__name__)
        return super().backward(fn, ctx, g)


@pytest.mark.parametrize("name", sorted(FIRST_ORDER_ONLY_CASES))
def test_first_order_only_cases_refuse_create_graph(name):
    """The cases left out of the table above: their second derivative is an error, never a silent value."""
    (case,) = [c for c in CASES if c.name == name]
    with pytest.raises(RuntimeError, match="differentiable once only"):
        derivatives(case, "float64", order=2)


def test_every_primitive_is_differentiated_twice():
    """No Function of the engine escapes the second-order table: the backward of every one runs on
    Tensors (create_graph=True) in some case of it, and is then differentiated."""
    primitives = {
        c.__name__ for c in _subclasses(mt.autograd.Function) if c.__module__.startswith("minitensor.")
    } - FIRST_ORDER_ONLY_PRIMITIVES
    calls = _BackwardsOnTensors()
    previous = mt.autograd.set_op_calls(calls)
    try:
        for case in WITH_GRAD:
            derivatives(case, "float64", order=2)
    finally:
        mt.autograd.set_op_calls(previous)
    missing = sorted(primitives - calls.names)
    assert not missing, f"primitives whose backward the table never differentiates: {missing}"


ELEMENTWISE = [
    c
    for c in WITH_GRAD
    if c.name
    in {
        "add",
        "sub",
        "mul",
        "div",
        "div_broadcast",
        "rdiv_scalar",
        "pow_2",
        "pow_3",
        "pow_2.5",
        "pow_neg1",
        "pow_0.5",
        "rpow_scalar",
        "pow_tensor",
        "neg",
        "exp",
        "log",
        "sqrt",
        "abs",
        "tanh",
        "sigmoid",
        "relu",
        "erf",
        "clamp_both",
        "maximum",
        "minimum",
        "where",
        "masked_fill",
        "F.gelu_none",
        "F.gelu_tanh",
        "double",
        "mul_self",
        "diamond",
    }
]


@pytest.mark.parametrize("case", samples(ELEMENTWISE, None))
def test_third_derivative_of_elementwise_ops_matches_torch(case):
    _check(case, "float64", order=3)


def test_elementwise_third_order_names_are_cases():
    assert len(ELEMENTWISE) == 32, "a name in ELEMENTWISE is not (or no longer) a case of the op table"


@pytest.mark.parametrize("case", samples([c for c in DIFFERENTIABLE if c.name not in FIRST_ORDER_ONLY_CASES], None))
def test_gradgradcheck(case):
    xs, _, _ = make_inputs(case, "float64")
    f, inputs = _wrapped(case, xs)
    assert mt.autograd.gradgradcheck(f, inputs, **GRADCHECK)


# ----------------------------------------------------------------------------- the entry points
def _pair(z):
    return mt.tensor(z.copy(), requires_grad=True), torch.tensor(z.copy(), requires_grad=True)


def test_grad_of_several_outputs_and_inputs_leaf_and_not_matches_torch():
    rng = np.random.default_rng(0)
    x, xt = _pair(rng.standard_normal((3, 4)))
    w, wt = _pair(rng.standard_normal((4, 2)))
    g1, g2 = rng.standard_normal((3, 2)), rng.standard_normal(4)
    outs = []
    for lib, a, b in ((mt, x, w), (torch, xt, wt)):
        h = (a @ b).tanh()  # a non-leaf input
        outs.append((lib, [h * 2, (a * a).sum(0)], [a, h, b], [lib.tensor(g1), lib.tensor(g2)]))
    (_, ys, xs, gs), (_, yts, xts, gts) = outs
    ours = mt.autograd.grad(ys, xs, gs)
    ref = torch.autograd.grad(yts, xts, gts)
    for i, (a, b) in enumerate(zip(ours, ref)):
        assert_close(a.numpy(), b.numpy(), OP_RTOL["float64"], f"input {i}")
    assert x.grad is None and w.grad is None, "grad() must not touch .grad"


@pytest.mark.filterwarnings(r"ignore:Using backward\(\) with create_graph=True")  # torch warns of its own .grad cycle
def test_backward_create_graph_gives_a_differentiable_grad_as_torch():
    z = np.random.default_rng(1).standard_normal(5)
    x, xt = _pair(z)
    for a in (x, xt):
        (a.sigmoid() * a.exp()).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    gx, gxt = x.grad, xt.grad
    x.grad = None
    xt.grad = None
    (gx * gx).sum().backward()
    (gxt * gxt).sum().backward()
    assert_close(x.grad.numpy(), xt.grad.numpy(), OP_RTOL["float64"], "d|grad|^2/dx")


def test_hessian_vector_product_of_an_mlp_with_layer_norm_matches_torch():
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s) for s in ((6, 5), (4, 5), (4,), (4,), (4,), (3, 4))]
    v = [rng.standard_normal(a.shape) for a in arrays[1:]]
    hvps = []
    for lib in (mt, torch):
        x, *params = [lib.tensor(a.copy(), requires_grad=i > 0) for i, a in enumerate(arrays)]
        w1, b1, ln_w, ln_b, w2 = params
        h = lib.nn.functional.layer_norm(lib.nn.functional.gelu(x @ w1.T + b1), (4,), ln_w, ln_b)
        loss = lib.nn.functional.cross_entropy(h @ w2.T, lib.tensor(np.array([0, 2, 1, 1, 0, 2])))
        grads = lib.autograd.grad(loss, params, create_graph=True)
        gv = sum((g * lib.tensor(d)).sum() for g, d in zip(grads, v))
        hvps.append([t.detach().numpy() for t in lib.autograd.grad(gv, params)])
    for i, (a, b) in enumerate(zip(*hvps)):
        assert_close(a, b, OP_RTOL["float64"], f"HVP, parameter {i}")


def test_retain_graph_defaults_to_create_graph():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    mt.autograd.grad(y, x, create_graph=True)
    mt.autograd.grad(y, x)  # kept by create_graph=True
    with pytest.raises(RuntimeError, match="a second time"):
        mt.autograd.grad(y, x)  # freed by the plain grad just before


def test_autograd_backward_takes_several_tensors_as_torch():
    z = np.array([0.2, -0.7, 1.5])
    grads = []
    for lib in (mt, torch):
        x = lib.tensor(z.copy(), requires_grad=True)
        lib.autograd.backward([x.exp(), (x * x).sum()], [lib.tensor(z[::-1].copy()), None])
        grads.append(x.grad.numpy())
    assert_close(grads[0], grads[1], OP_RTOL["float64"], "grad of two roots")


def test_grad_results_own_their_arrays():
    x, y = mt.tensor([1.0, 2.0], requires_grad=True), mt.tensor([3.0, 4.0], requires_grad=True)
    g = np.array([1.0, -1.0], dtype=np.float32)
    gx, gy = mt.autograd.grad(x + y, [x, y], g)  # Add hands the same array to both
    (gs,) = mt.autograd.grad(x.sum(), x)  # Sum's gradient is a broadcast view
    gx.mul_(2)
    assert gy.numpy().tolist() == [1.0, -1.0] and g.tolist() == [1.0, -1.0]
    assert gs._data.flags.writeable


def test_allow_unused_gives_none():
    x, z = mt.tensor([1.0], requires_grad=True), mt.tensor([2.0], requires_grad=True)
    gx, gz = mt.autograd.grad((x * 3).sum(), [x, z], allow_unused=True)
    assert gz is None and gx.numpy().tolist() == [3.0]


def test_version_counters_hold_under_create_graph():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    (g,) = mt.autograd.grad((x * x * x).sum(), x, create_graph=True)  # its graph saved x
    with mt.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        g.sum().backward()


def test_hooks_see_and_replace_tensors_under_create_graph():
    z = np.array([0.3, -1.2, 2.0])
    results = []
    for lib in (mt, torch):
        x = lib.tensor(z.copy(), requires_grad=True)
        h = x.tanh()
        h.register_hook(lambda g: g * 3)
        (gx,) = lib.autograd.grad((h * h).sum(), x, create_graph=True)
        results.append(lib.autograd.grad(gx.sum(), x)[0].detach().numpy())
    assert_close(results[0], results[1], OP_RTOL["float64"], "second derivative through a hook")


# ----------------------------------------------------------------------------- errors
def test_create_graph_through_a_freed_graph_names_the_problem():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"backward through \w+ a second time.*retain_graph=True"):
        y.backward(create_graph=True)
    with pytest.raises(RuntimeError, match="a second time"):
        mt.autograd.grad(y, x, create_graph=True)


def test_grad_of_an_unused_input_names_it():
    x, z = mt.tensor([1.0], requires_grad=True), mt.tensor([[2.0]], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"input 1 \(shape \(1, 1\)\) was not used.*allow_unused=True"):
        mt.autograd.grad((x * 3).sum(), [x, z])


def test_non_scalar_output_without_grad_outputs_names_the_shape():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"only for scalar outputs.*shape \(2,\)"):
        mt.autograd.grad(x * 2, x)
    with pytest.raises(RuntimeError, match=r"only for scalar outputs.*shape \(2,\)"):
        (x * 2).backward(create_graph=True)


def test_grad_outputs_of_the_wrong_shape_or_number_are_refused():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"grad_output\[0\] has a shape of \(3,\) and output\[0\] has a shape"):
        mt.autograd.grad(x * 2, x, mt.ones(3))
    with pytest.raises(ValueError, match="2 gradients given for 1 outputs"):
        mt.autograd.grad(x * 2, x, [mt.ones(2), mt.ones(2)])


def test_grad_wrt_a_tensor_without_requires_grad_is_refused():
    x, c = mt.tensor([1.0], requires_grad=True), mt.tensor([2.0])
    with pytest.raises(RuntimeError, match="input 1 .* does not require grad"):
        mt.autograd.grad((x * c).sum(), [x, c])


def test_a_custom_function_with_a_numpy_backward_refuses_create_graph():
    class NumpyExp(mt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.out = np.exp(a)
            return ctx.out

        @staticmethod
        def backward(ctx, g):
            return (np.asarray(g.numpy() if isinstance(g, mt.Tensor) else g) * ctx.out,)

    x = mt.tensor([0.5], requires_grad=True)
    NumpyExp.apply(x).sum().backward()  # first order: fine
    with pytest.raises(RuntimeError, match="NumpyExpBackward returned a NumPy array .* create_graph=True"):
        mt.autograd.grad(NumpyExp.apply(x).sum(), x, create_graph=True)


def test_gradgradcheck_catches_a_wrong_second_derivative():
    """y = x^3 with a backward whose value is right (3 x^2 g) but which hides one x from the graph:
    gradcheck passes, gradgradcheck must not."""

    class Cube(mt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_arrays
            hidden = a.detach() if isinstance(a, mt.Tensor) else a
            return (g * 3 * a * hidden,)

    x = mt.tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    assert mt.autograd.gradcheck(Cube.apply, [x], **GRADCHECK)
    with pytest.raises(mt.autograd.GradcheckError, match="gradcheck failed for input 0"):
        mt.autograd.gradgradcheck(Cube.apply, [x], **GRADCHECK)


# ----------------------------------------------------------------------------- a whole Transformer
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_hvp_matches_the_parity_model(norm_first, activation):
    """The Hessian-vector product of a tiny transformer_np model's training loss, in a random direction,
    equals the parity PyTorch model's (float64, PARITY_RTOL): every fused op twice differentiated at once."""
    from parity.loss import compute_loss as torch_loss
    from parity.report import build_models, synthetic_batch
    from transformer_np.config import ModelConfig
    from transformer_np.loss import compute_loss

    cfg = ModelConfig(
        src_vocab_size=11,
        tgt_vocab_size=13,
        d_model=8,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=16,
        dropout=0.0,
        max_len=16,
        norm_first=norm_first,
        activation=activation,
    )
    np_model, pt_model = build_models(cfg, "float64", "cpu", seed=0)
    src, tgt = synthetic_batch(np.random.default_rng(0), 3, 5, 6, 11, 13)
    names = [n for n, _ in np_model.named_parameters()]
    rng = np.random.default_rng(1)
    direction = {n: rng.standard_normal(p.shape) for n, p in np_model.named_parameters()}
    hvps = []
    for lib, model, loss_fn in ((mt, np_model, compute_loss), (torch, pt_model, torch_loss)):
        params = dict(model.named_parameters())
        loss = loss_fn(model, src, tgt, 0.1)[0]
        grads = lib.autograd.grad(loss, [params[n] for n in names], create_graph=True)
        gv = sum((g * lib.tensor(direction[n])).sum() for n, g in zip(names, grads))
        hvps.append(lib.autograd.grad(gv, [params[n] for n in names]))
    for n, a, b in zip(names, *hvps):
        assert_close(a.numpy(), b.detach().numpy(), PARITY_RTOL["float64"], f"HVP of {n}")


# ----------------------------------------------------------------------------- the documentation
# The worked examples of docs/higher_order.md quote these lines: they must still be the code's.
DOC_QUOTES = [
    ("minitensor/ops/elementwise.py", "return (g * (1 - out * out),)"),
    ("minitensor/ops/fused.py", "dx = softmax_grad(ctx.xp, g, y, ctx.dim)"),
    ("minitensor/ops/fused.py", "gy = g * y"),
    ("minitensor/ops/fused.py", "return gy - y * xp.sum(gy, axis=dim, keepdims=True)"),
    ("minitensor/ops/elementwise.py", "cdf = ctx.intermediate(ctx.cdf, _gelu_cdf, a)"),
]


@pytest.mark.parametrize("path,line", DOC_QUOTES)
def test_worked_examples_quote_the_code(path, line):
    from pathlib import Path

    root = Path(ROOT)
    assert line in (root / "docs" / "higher_order.md").read_text(), f"docs/higher_order.md no longer quotes {line!r}"
    assert line in (root / path).read_text(), f"{path} no longer has the line the docs quote: {line!r}"
