"""mt.func against torch.func: jvp, vjp, grad, grad_and_value, jacfwd, jacrev, hessian, functional_call.

Same functions, same seeded inputs on both sides, random tangents and cotangents (never all ones), the
same return structures (tuples for tuple argnums, dicts for dict inputs, (result, aux) with has_aux), and
jacfwd == jacrev == torch's on functions of several inputs. Also autograd.functional's forward-mode
routes (jvp, hvp by forward over reverse, jacobian and hessian with strategy "forward-mode"), and every
bad input the issue names, refused with what was expected and what came.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

RTOL = OP_RTOL["float64"]
MF, TF = mt.autograd.functional, torch.autograd.functional


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x.detach().numpy())


def same(ours, ref, what="result", rtol=RTOL):
    """Equal structure (Tensor, tuple, list, dict) and values."""
    if isinstance(ref, torch.Tensor):
        assert isinstance(ours, mt.Tensor), f"{what}: expected a Tensor, got {type(ours).__name__}"
        assert tuple(ours.shape) == tuple(ref.shape), f"{what}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}"
        assert_close(_np(ours), _np(ref), rtol, what)
    elif isinstance(ref, dict):
        assert isinstance(ours, dict) and ours.keys() == ref.keys(), f"{what}: {ours!r} vs keys {list(ref)}"
        for k in ref:
            same(ours[k], ref[k], f"{what}[{k!r}]", rtol)
    else:
        assert type(ours) is type(ref) and len(ours) == len(ref), f"{what}: {type(ours).__name__} vs {ref!r}"
        for i, (a, b) in enumerate(zip(ours, ref)):
            same(a, b, f"{what}[{i}]", rtol)


# Functions built from primitives with forward-mode rules: several inputs, a matrix product, exp.
def tall(a, x, b):  # (4, 3), (3, 2), (2, 5) -> (4, 5)
    h = a @ x
    return (h.exp() * h) @ b


def scalar(a, x, b):
    y = tall(a, x, b)
    return (y * y * 0.01).sum()


def elementwise(x, y):  # a Hessian whose backward needs only elementwise rules
    return (x.exp() * y * x + y * y * y).sum()


SHAPES = [(4, 3), (3, 2), (2, 5)]


@pytest.fixture
def inputs(rng):
    arrays = [rng.standard_normal(s) for s in SHAPES]
    return tuple(mt.tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays)


@pytest.mark.parametrize("argnums", [0, 1, -1, (0, 2), (2, 0, 1)])
def test_jacfwd_equals_jacrev_equals_torch_on_several_inputs(inputs, argnums):
    ours, ref = inputs
    expected = torch.func.jacrev(tall, argnums=argnums)(*ref)
    same(mt.func.jacrev(tall, argnums=argnums)(*ours), expected, "jacrev")
    same(mt.func.jacfwd(tall, argnums=argnums)(*ours), expected, "jacfwd")
    if argnums != -1:  # torch 2.13's jacfwd(argnums=-1) differs from its own jacrev and jacfwd(argnums=2)
        same(mt.func.jacfwd(tall, argnums=argnums)(*ours), torch.func.jacfwd(tall, argnums=argnums)(*ref), "jacfwd")


def test_jacobians_of_a_tuple_output_with_aux(inputs):
    ours, ref = inputs

    def two(a, x, b):
        y = tall(a, x, b)
        return (y, (a * x.sum()).exp()), y.sum()

    for ours_fn, torch_fn in ((mt.func.jacrev, torch.func.jacrev), (mt.func.jacfwd, torch.func.jacfwd)):
        same(ours_fn(two, argnums=(0, 1), has_aux=True)(*ours), torch_fn(two, argnums=(0, 1), has_aux=True)(*ref))


def test_jacobians_in_float32_to_its_tolerance(inputs):
    ours = tuple(x.float() for x in inputs[0])
    ref = tuple(x.float() for x in inputs[1])
    expected = torch.func.jacrev(tall, argnums=(0, 1))(*ref)
    for fn in (mt.func.jacrev, mt.func.jacfwd):
        out = fn(tall, argnums=(0, 1))(*ours)
        assert out[0].dtype == mt.float32
        same(out, expected, fn.__name__, rtol=OP_RTOL["float32"] * 10)  # a sum of 3 products of exp(h) h


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_hessian_equals_torch(rng, argnums):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours = mt.func.hessian(elementwise, argnums=argnums)(mt.tensor(x), mt.tensor(y))
    same(ours, torch.func.hessian(elementwise, argnums=argnums)(torch.tensor(x), torch.tensor(y)), "hessian")


def test_hessian_through_a_matrix_product_with_a_constant(rng):
    a, x = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))

    def f(lib, x):
        h = lib.tensor(a) @ x
        return (h.exp() * h).sum()

    same(
        mt.func.hessian(lambda x: f(mt, x))(mt.tensor(x)),
        torch.func.hessian(lambda x: f(torch, x))(torch.tensor(x)),
        "hessian",
    )


def test_grad_and_value_with_aux_and_argnums(inputs):
    ours, ref = inputs

    def f(a, x, b):
        return scalar(a, x, b), {"mean": a.mean() if hasattr(a, "mean") else a, "x": x * 2.0}

    for argnums in (1, (0, 2)):
        got = mt.func.grad_and_value(f, argnums=argnums, has_aux=True)(*ours)
        same(got, torch.func.grad_and_value(f, argnums=argnums, has_aux=True)(*ref), f"grad_and_value {argnums}")
        g, aux = mt.func.grad(f, argnums=argnums, has_aux=True)(*ours)
        same((g, aux), torch.func.grad(f, argnums=argnums, has_aux=True)(*ref), f"grad {argnums}")
        assert not aux["x"].requires_grad, "aux comes back detached at the top level, as torch's"


def test_grad_over_a_dict_of_parameters(inputs):
    ours, ref = inputs
    d_ours, d_ref = {"a": ours[0], "x": ours[1]}, {"a": ref[0], "x": ref[1]}
    same(
        mt.func.grad(lambda p, b: scalar(p["a"], p["x"], b))(d_ours, ours[2]),
        torch.func.grad(lambda p, b: scalar(p["a"], p["x"], b))(d_ref, ref[2]),
        "grad over a dict",
    )


def test_vjp_with_a_random_cotangent_twice_and_with_aux(inputs, rng):
    ours, ref = inputs
    out, vjp_fn = mt.func.vjp(tall, *ours)
    t_out, t_vjp_fn = torch.func.vjp(tall, *ref)
    same(out, t_out, "vjp output")
    for _ in range(2):  # vjp_fn may be called again
        c = rng.standard_normal(tuple(out.shape))
        same(vjp_fn(mt.tensor(c)), t_vjp_fn(torch.tensor(c)), "vjp_fn")
    _, _, aux = mt.func.vjp(lambda a: (a.exp(), a * 3.0), ours[0], has_aux=True)
    same(aux, ref[0] * 3.0, "aux")


def test_vjp_fn_takes_retain_graph_and_create_graph_as_torch_func(rng):
    """vjp_fn(cotangents, retain_graph=True, create_graph=None): on primals that require grad the product has a
    graph (it is differentiated again to torch's second derivative), not with create_graph=False; retain_graph=False
    frees the graph, and a second call raises as torch's does; a flag that is not a bool is refused."""
    x0, c0, v0 = (rng.standard_normal(4) for _ in range(3))

    def f(a):
        return a.exp() * a

    ours, ref = mt.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    (g,) = mt.func.vjp(f, ours)[1](mt.tensor(c0))
    (tg,) = torch.func.vjp(f, ref)[1](torch.tensor(c0))
    assert g.requires_grad and tg.requires_grad
    same(mt.autograd.grad(g, ours, mt.tensor(v0))[0], torch.autograd.grad(tg, ref, torch.tensor(v0))[0], "d(vjp)")
    (g,) = mt.func.vjp(f, ours)[1](mt.tensor(c0), create_graph=False)
    (tg,) = torch.func.vjp(f, ref)[1](torch.tensor(c0), create_graph=False)
    assert not g.requires_grad and not tg.requires_grad
    same(g, tg, "vjp, create_graph=False")
    _, vjp_fn = mt.func.vjp(f, mt.tensor(x0))
    same(vjp_fn(mt.tensor(c0), retain_graph=False)[0], tg, "vjp, retain_graph=False")
    with pytest.raises(RuntimeError, match="a second time"):
        vjp_fn(mt.tensor(c0))
    for bad in ({"retain_graph": None}, {"create_graph": "yes"}):
        with pytest.raises(TypeError, match="vjp_fn: expected .* to be a bool"):
            mt.func.vjp(f, mt.tensor(x0))[1](mt.tensor(c0), **bad)


def test_jvp_with_random_tangents_and_aux(inputs, rng):
    ours, ref = inputs
    tangents = [rng.standard_normal(s) for s in SHAPES]
    got = mt.func.jvp(tall, ours, tuple(mt.tensor(t) for t in tangents))
    same(got, torch.func.jvp(tall, ref, tuple(torch.tensor(t) for t in tangents)), "jvp")
    got = mt.func.jvp(
        lambda a, x, b: (tall(a, x, b), a.sum()), ours, tuple(mt.tensor(t) for t in tangents), has_aux=True
    )
    assert len(got) == 3
    same(got[2], ref[0].sum(), "aux")


def test_transforms_compose(rng):
    x0 = rng.standard_normal((3, 4))
    y0 = rng.standard_normal((3, 4))
    x, y, tx, ty = mt.tensor(x0), mt.tensor(y0), torch.tensor(x0), torch.tensor(y0)
    expected = torch.func.hessian(elementwise)(tx, ty)
    same(mt.func.jacrev(mt.func.jacrev(elementwise))(x, y), expected, "jacrev of jacrev")
    same(mt.func.jacrev(mt.func.jacfwd(elementwise))(x, y), expected, "jacrev of jacfwd (reverse over forward)")
    same(mt.func.jacfwd(mt.func.grad(elementwise))(x, y), expected, "jacfwd of grad (forward over reverse)")
    # grad of grad, with y closed over by the inner function
    same(
        mt.func.grad(lambda a: mt.func.grad(lambda b: elementwise(a, b))(y).sum())(x),
        torch.func.grad(lambda a: torch.func.grad(lambda b: elementwise(a, b))(ty).sum())(tx),
        "grad of grad",
    )


def test_functional_call_as_torch_func(rng):
    ours, ref = mt.nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    params = {k: rng.standard_normal(tuple(v.shape)) for k, v in ref.named_parameters()}
    x = rng.standard_normal((5, 3))

    def loss(lib, model, p, x):
        fc = mt.func.functional_call if lib is mt else torch.func.functional_call
        return (fc(model, p, (x,)) ** 2).sum()

    same(
        mt.func.grad(lambda p: loss(mt, ours, p, mt.tensor(x)))({k: mt.tensor(v) for k, v in params.items()}),
        torch.func.grad(lambda p: loss(torch, ref, p, torch.tensor(x)))(
            {k: torch.tensor(v) for k, v in params.items()}
        ),
        "grad through functional_call",
    )
    split = ({"weight": mt.tensor(params["weight"])}, {"bias": mt.tensor(params["bias"])})
    out = mt.func.functional_call(ours, split, mt.tensor(x), strict=True)
    same(out, torch.func.functional_call(ref, {k: torch.tensor(v) for k, v in params.items()}, torch.tensor(x)))
    with pytest.raises(RuntimeError, match=r"missing keys \['bias'\]"):
        mt.func.functional_call(ours, split[:1], mt.tensor(x), strict=True)
    with pytest.raises(ValueError, match="'bias' appeared in more than one"):
        mt.func.functional_call(ours, (split[1], split[1]), mt.tensor(x))


def _linear(T, weight, bias):
    lin = T.nn.Linear(2, 2).double()
    with T.no_grad():
        lin.weight.copy_(T.tensor(weight, dtype=T.float64))
        lin.bias.copy_(T.tensor(bias, dtype=T.float64))
    return lin


def _shared(T):
    """Sequential(a, a): one Linear under the names 0 and 1."""
    a = _linear(T, [[0.1, -0.2], [0.3, 0.4]], [0.05, 0.1])
    return T.nn.Sequential(a, a)


def _tied(T):
    """Two Linears whose weights are one Parameter (a tied embedding and projection, in small)."""
    e, d = _linear(T, [[0.1, -0.2], [0.3, 0.4]], [0.05, 0.1]), _linear(T, [[9.0, 9.0], [9.0, 9.0]], [-0.3, 0.2])
    d.weight = e.weight
    return T.nn.Sequential(e, d)


W, W2, B = [[1.0, 2.0], [3.0, -4.0]], [[0.5, 0.0], [-1.0, 2.0]], [0.25, -0.5]
TIED_CALLS = {  # name: (model, {name: values}, keyword arguments); "W*" names one tensor given twice
    "second name": (_shared, {"1.weight": W}, {}),
    "first name": (_shared, {"0.weight": W}, {}),
    "both names, one tensor": (_shared, {"0.weight": W, "1.weight": "W*"}, {}),
    "both names, two tensors": (_shared, {"0.weight": W, "1.weight": W}, {}),
    "untied, second name": (_shared, {"1.weight": W}, {"tie_weights": False}),
    "untied, both names": (_shared, {"0.weight": W, "1.weight": W2}, {"tie_weights": False}),
    "strict, second names": (_shared, {"1.weight": W, "1.bias": B}, {"strict": True}),
    "strict untied, first names": (_shared, {"0.weight": W, "0.bias": B}, {"strict": True, "tie_weights": False}),
    "tied, second name": (_tied, {"1.weight": W}, {}),
    "tied untied, second name": (_tied, {"1.weight": W}, {"tie_weights": False}),
    "tied, two tensors": (_tied, {"0.weight": W, "1.weight": W2}, {}),
    "tied untied, two tensors": (_tied, {"0.weight": W, "1.weight": W2}, {"tie_weights": False}),
    "tied strict": (_tied, {"1.weight": W, "0.bias": B, "1.bias": B}, {"strict": True}),
}

# torch 2.13 swaps tensors' contents in and out of the module (torch.utils.swap_tensors): a slot given twice leaves the
# module holding the first tensor's values and the gradient on the wrong object. Its reference is then the same call
# with the name that takes effect given once.
TORCH_REFERENCE = {"untied, both names": {"1.weight": W2}}


@pytest.mark.parametrize("name", list(TIED_CALLS))
def test_functional_call_with_tied_and_shared_parameters_as_torch(name):
    """Any of a tied tensor's names (state_dict's) replaces it (tie_weights=True), or only that name's slot
    (tie_weights=False); two tensors for one tied tensor, and strict's missing names, are refused as torch."""
    make, given, kwargs = TIED_CALLS[name]
    outcome = {}
    for T, fc in ((mt, mt.func.functional_call), (torch, torch.func.functional_call)):
        model, params, first = make(T), {}, None
        for k, v in (TORCH_REFERENCE.get(name, given) if T is torch else given).items():
            params[k] = first if v == "W*" else T.tensor(v, dtype=T.float64, requires_grad=True)
            first = first if first is not None else params[k]
        x = T.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=T.float64)
        try:
            out = fc(model, params, (x,), **kwargs)
        except (ValueError, RuntimeError) as e:
            outcome[T.__name__] = type(e).__name__, str(e)
            continue
        (out * out).sum().backward()
        # one tensor given twice is read once (torch 2.13 swaps it in and out twice and loses its .grad and the
        # module's own Parameter on the way; minitensor gives both back)
        grads = [p.grad for k, p in params.items() if given.get(k) != "W*" and p.grad is not None]
        outcome[T.__name__] = _np(out), [_np(g) for g in grads]
        assert dict(model.named_parameters()).keys() == {"0.weight", "0.bias", "1.bias"} - (
            {"1.bias"} if make is _shared else set()
        )  # the model's own parameters are back
    ours, ref = outcome["minitensor"], outcome["torch"]
    if isinstance(ref[0], str):
        assert ours[0] == ref[0], (ours, ref)
        if ref[0] == "ValueError":
            assert ours[1] == ref[1]  # torch's words
        else:
            assert "missing keys ['1.bias', '1.weight']" in ours[1] and "Missing key(s): '1.bias', '1.weight'" in ref[1]
        return
    assert_close(ours[0], ref[0], RTOL, "output")
    assert len(ours[1]) == len(ref[1])
    for a, b in zip(ours[1], ref[1]):
        assert_close(a, b, RTOL, "gradient")


# ------------------------------------------------------------------ autograd.functional's forward-mode routes
def test_functional_jvp_hvp_and_forward_mode_jacobians_equal_torch(inputs, rng):
    ours, ref = inputs
    vs = [rng.standard_normal(s) for s in SHAPES]
    v_ours, v_ref = tuple(mt.tensor(v) for v in vs), tuple(torch.tensor(v) for v in vs)
    same(MF.jvp(tall, ours, v_ours), TF.jvp(tall, ref, v_ref), "jvp")
    same(
        MF.jacobian(tall, ours, strategy="forward-mode"),
        tuple(TF.jacobian(tall, ref, strategy="forward-mode", vectorize=True)),  # torch gives a list here
        "jacobian forward-mode",
    )
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    v, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    pair, t_pair = (mt.tensor(x), mt.tensor(y)), (torch.tensor(x), torch.tensor(y))
    vw, t_vw = (mt.tensor(v), mt.tensor(w)), (torch.tensor(v), torch.tensor(w))
    same(MF.hvp(elementwise, pair, vw), TF.hvp(elementwise, t_pair, t_vw), "hvp")
    same(MF.vhp(elementwise, pair, vw), TF.vhp(elementwise, t_pair, t_vw), "vhp")
    for strategy in ("forward-mode", "reverse-mode"):
        same(
            MF.hessian(elementwise, pair, outer_jacobian_strategy=strategy),
            TF.hessian(elementwise, t_pair),
            f"hessian {strategy}",
        )


def test_functional_hvp_with_create_graph_differentiates_again(rng):
    x0, v0 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    y = rng.standard_normal((3, 4))
    x, tx = mt.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    _, hv = MF.hvp(lambda a: elementwise(a, mt.tensor(y)), x, mt.tensor(v0), create_graph=True)
    _, t_hv = TF.hvp(lambda a: elementwise(a, torch.tensor(y)), tx, torch.tensor(v0), create_graph=True)
    c = rng.standard_normal((3, 4))
    same(mt.autograd.grad((hv * mt.tensor(c)).sum(), x), torch.autograd.grad((t_hv * torch.tensor(c)).sum(), tx))


def test_tangent_grad_is_unrecorded_forward_over_reverse(rng):
    """autograd.tangent_grad: the gradient's tangent is H v, and nothing of the backward is recorded."""
    x0, v0, y0 = (rng.standard_normal((3, 4)) for _ in range(3))
    x = mt.tensor(x0, requires_grad=True)
    with mt.autograd.forward_ad.dual_level():
        xd = mt.autograd.forward_ad.make_dual(x, mt.tensor(v0))
        (g,) = mt.autograd.tangent_grad(elementwise(xd, mt.tensor(y0)), xd)
        hv = mt.autograd.forward_ad.unpack_dual(g).tangent
    assert not g.requires_grad and g.grad_fn is None and not hv.requires_grad
    ref = torch.func.jvp(
        torch.func.grad(lambda a: elementwise(a, torch.tensor(y0))), (torch.tensor(x0),), (torch.tensor(v0),)
    )
    same(g, ref[0], "gradient")
    same(hv, ref[1], "H v")


# ------------------------------------------------------------------ bad input
def test_bad_input_is_refused_naming_expected_and_got(inputs):
    ours, _ = inputs
    ints = mt.tensor(np.arange(3))
    with pytest.raises(TypeError, match="jacfwd.*argument 0.*floating-point.*got dtype int64"):
        mt.func.jacfwd(lambda x: x * 2)(ints)
    with pytest.raises(TypeError, match="jacrev.*floating-point.*got dtype int64"):
        mt.func.jacrev(lambda x: x * 2)(ints)
    with pytest.raises(RuntimeError, match=r"argnums 3 is out of range: .* 3 positional inputs \(from -3 to 2\)"):
        mt.func.jacrev(tall, argnums=3)(*ours)
    with pytest.raises(RuntimeError, match="argnums -4 is out of range"):
        mt.func.grad(scalar, argnums=(0, -4))(*ours)
    with pytest.raises(RuntimeError, match="argnums must be unique"):
        mt.func.jacfwd(tall, argnums=(0, -3))(*ours)
    with pytest.raises(
        RuntimeError, match=r"has_aux=True, expected the function to return a pair \(output, aux\), got Tensor"
    ):
        mt.func.grad(scalar, has_aux=True)(*ours)
    with pytest.raises(RuntimeError, match="has_aux=True.*got a tuple of length 3"):
        mt.func.jacfwd(lambda a: (a, a, a), has_aux=True)(ours[0])
    with pytest.raises(
        RuntimeError,
        match=r"hessian: expected the function to return a scalar Tensor \(one element\), got a tensor of shape "
        r"\(4, 5\)",
    ):
        mt.func.hessian(tall)(*ours)
    with pytest.raises(
        RuntimeError,
        match=r"expected the function to return a scalar Tensor \(0 dims\), got a tensor of shape \(4, 5\)",
    ):
        mt.func.grad(tall)(*ours)
    with pytest.raises(RuntimeError, match="expected primals to be a tuple.*got Tensor"):
        mt.func.jvp(tall, ours[0], ours[0])
    with pytest.raises(
        RuntimeError, match=r"tangent 1 to have its primal's shape \(3, 2\) and dtype float64, got shape \(2, 3\)"
    ):
        mt.func.jvp(tall, ours, (ours[0], mt.zeros(2, 3, dtype=mt.float64), ours[2]))
    with pytest.raises(RuntimeError, match=r"cotangent 0 of shape \(4, 5\).*got shape \(5, 4\)"):
        mt.func.vjp(tall, *ours)[1](mt.zeros(5, 4, dtype=mt.float64))
    with pytest.raises(RuntimeError, match="nested dual levels"):
        mt.func.jacfwd(mt.func.jacfwd(lambda a: a.exp()))(ours[0])
    with pytest.raises(TypeError, match=r"expected argument 0 \(argnums\) \(leaf 0\) to be a Tensor, got float"):
        mt.func.grad(lambda a: a)([1.0])


def test_rules_unrecorded_leaves_the_primal_recorded_and_the_tangent_without_a_graph(rng):
    from minitensor.autograd.tangents import rules_unrecorded

    x0, v0 = rng.standard_normal(5), rng.standard_normal(5)
    for unrecorded in (False, True):
        x = mt.tensor(x0, requires_grad=True)
        with mt.autograd.forward_ad.dual_level(), rules_unrecorded() if unrecorded else mt.enable_grad():
            y = mt.autograd.forward_ad.make_dual(x, mt.tensor(v0)).exp()
            tangent = mt.autograd.forward_ad.unpack_dual(y).tangent
        assert y.requires_grad  # the primal is recorded either way: its backward is the reverse part
        assert tangent.requires_grad is (not unrecorded)
        same(tangent, torch.tensor(np.exp(x0) * v0), "tangent")
