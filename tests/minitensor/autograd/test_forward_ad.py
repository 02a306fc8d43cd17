"""Forward mode (mt.autograd.forward_ad) against torch.autograd.forward_ad: every op-table case, and the API.

The op table (tests/support/op_cases.py) runs again here in forward mode: each input it differentiates gets a random
tangent, and `unpack_dual(f(make_dual(x, v)))` must give torch's primal and tangent, float64 to round-off and
float32 to its precision (minitensor/testing.py's OP_RTOL, with the case's own reasoned override where it has
one). At second order, both ways of combining the modes meet torch's Hessian-vector product.

NO_RULE_YET lists the primitives that have no JVP rule yet (neither `jvp` nor `jvp_kind`). A case that reaches
one raises NotImplementedError naming it; every other case must agree with torch. The list must shrink to
empty: a primitive listed that has a rule fails `test_every_primitive_has_a_rule`, and so does one that has
none and is not listed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import minitensor as mt
from minitensor.autograd import forward_ad as fw
from minitensor.testing import OP_RTOL, assert_close, error_stats
from tests.minitensor.ops.test_op_table import EDGES, ZERO_OVER_ZERO
from tests.support.op_cases import (
    CASES,
    FIRST_ORDER_ONLY_CASES,
    MT,
    TORCH,
    as_list,
    case_seed,
    compare_forward,
    make_inputs,
    samples,
    torch_dtype_name,
)

# Primitives without a forward-mode rule yet: none left. A new primitive without one goes here until its rule lands;
# the tests below then hold every case that reaches it to torch.
NO_RULE_YET: set[str] = set()

KINDS = ("elementwise", "linear")

# Torch's reverse over forward of layer_norm (and of batch_norm in training) is not its Hessian-vector product: it
# differs from its own forward over reverse (torch 2.13; test_torch_reverse_over_forward_of_layer_norm_is_off keeps the
# list honest). Ours agrees with the latter, which is the reference for these cases.
TORCH_REV_OVER_FWD_OFF = {
    "F.layer_norm_last",
    "F.layer_norm_noaffine",
    "F.layer_norm_last2",
    "F.layer_norm_last2_noaffine",
    "F.layer_norm_eps",
    "F.layer_norm_constant_row",
    "layer_norm_transposed",
    "model_layer_norm",
    "F.batch_norm_train",
    "F.batch_norm_train_running",
    "F.batch_norm_train_noaffine",
    "F.batch_norm_train_two_values",
}


# ----------------------------------------------------------------------------- the op table in forward mode
def random_tangents(case, xs, dtype_name: str) -> list:
    """A random tangent (standard normal, seeded by the case) for each float input the table differentiates. Not for
    the float inputs it holds constant (grad=False: a class weight, a pos_weight): torch's forward mode ignores a
    tangent there, and minitensor's losses refuse one."""
    rng = np.random.default_rng(case_seed(case.name) + 2)
    return [np.asarray(rng.standard_normal(x.shape), dtype=dtype_name) if x.requires_grad else None for x in xs]


def forward_mt(case, xs, tangents) -> tuple[list, list]:
    """(primals, tangents as arrays or None) of the case's outputs, minitensor in forward mode."""
    with fw.dual_level():
        duals = [x if v is None else fw.make_dual(x, mt.tensor(v.copy())) for x, v in zip(xs, tangents)]
        outs = as_list(case.fn(MT, *duals, **case.kwargs))
        unpacked = [fw.unpack_dual(o) for o in outs]
        return [p for p, _ in unpacked], [None if t is None else t.detach().numpy().copy() for _, t in unpacked]


def forward_torch(case, xs, tangents) -> tuple[list, list]:
    """The same in torch.autograd.forward_ad."""
    with tfw.dual_level():
        duals = [x if v is None else tfw.make_dual(x, torch.tensor(v.copy())) for x, v in zip(xs, tangents)]
        outs = as_list((case.ref or case.fn)(TORCH, *duals, **case.kwargs))
        unpacked = [tfw.unpack_dual(o) for o in outs]
        return [p for p, _ in unpacked], [None if t is None else t.detach().numpy().copy() for _, t in unpacked]


def compare_tangents(case, got: list, want: list, dtype_name: str) -> None:
    for i, (a, b) in enumerate(zip(got, want)):
        what = f"{case} [{dtype_name}] tangent of output {i}"
        if a is None or b is None:  # no tangent on one side: the other's must be zero
            other = b if a is None else a
            assert other is None or not np.any(other), f"{what}: {'ours' if a is None else 'torch'} has none"
            continue
        assert a.shape == b.shape, f"{what}: shape {a.shape} vs torch {b.shape}"
        assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs torch {b.dtype}"
        assert_close(a, b, case.tol(dtype_name), what=what)


def run_forward_case(case, dtype_name: str) -> None:
    """Primal and tangent of one case in one dtype, minitensor against torch."""
    xs_mt, xs_t, _ = make_inputs(case, dtype_name)
    tangents = random_tangents(case, xs_mt, dtype_name)
    primals_mt, tangents_mt = forward_mt(case, xs_mt, tangents)
    primals_t, tangents_t = forward_torch(case, xs_t, tangents)
    compare_forward(case, primals_mt, primals_t, dtype_name)
    compare_tangents(case, tangents_mt, tangents_t, dtype_name)


def missing_rule(err: NotImplementedError) -> str | None:
    """The primitive a forward-mode NotImplementedError names (tangents.run_rule's message), or None."""
    msg = str(err)
    prefix = "forward-mode AD through "
    return msg[len(prefix) :].split(":")[0] if msg.startswith(prefix) else None


def blocked(fn, *args):
    """(fn(*args), None), or (None, the primitive) where it raised NotImplementedError naming one of NO_RULE_YET;
    any other error goes through. The caller xfails outside the except block: an xfail chained to the error would
    have pytest format the error's whole traceback (about a second each)."""
    try:
        return fn(*args), None
    except NotImplementedError as err:
        if missing_rule(err) not in NO_RULE_YET:
            raise
        return None, missing_rule(err)


def xfail_no_rule_yet(name: str) -> None:
    pytest.xfail(f"{name} has no forward-mode rule yet (NO_RULE_YET)")


@pytest.mark.parametrize("case, dtype_name", samples(CASES))
def test_op_forward_mode(case, dtype_name):
    _, name = blocked(run_forward_case, case, dtype_name)
    if name:
        xfail_no_rule_yet(name)


# ----------------------------------------------------------------------------- the op table, second order
# A rule is written over ctx.xp so that reverse mode can differentiate the tangent it makes (reverse over forward),
# and a backward under create_graph carries tangents through its own primitives (forward over reverse). Both run
# here for every case, float64, against torch; the cotangent is random too.
def cotangents(case, outs) -> list:
    rng = np.random.default_rng(case_seed(case.name) + 3)
    names = [o.dtype.name if isinstance(o.dtype, np.dtype) else torch_dtype_name(o) for o in outs]
    return [np.asarray(rng.standard_normal(tuple(o.shape)) + 0.5, dtype=name) for o, name in zip(outs, names)]


class Side:
    """What second_order needs of one library."""

    def __init__(self, lib, forward_ad, tensor, autograd, is_float, to_array):
        self.lib, self.fw, self.tensor, self.autograd = lib, forward_ad, tensor, autograd
        self.is_float, self.to_array = is_float, to_array


MT_SIDE = Side(MT, fw, mt.tensor, mt.autograd, lambda o: o.dtype.kind == "f", lambda t: t.detach().numpy().copy())


def torch_array(t) -> np.ndarray:
    """A torch result as an array; torch's forward mode may give its "efficient zero" tensor, which .numpy() refuses."""
    return np.zeros(tuple(t.shape), torch_dtype_name(t)) if t._is_zerotensor() else t.detach().numpy().copy()


TORCH_SIDE = Side(TORCH, tfw, torch.tensor, torch.autograd, lambda o: o.dtype.is_floating_point, torch_array)


def second_order(side, case, xs, tangents, mode):
    """For the inputs that require grad: the gradients of <tangent of f, c> (mode 'rev_over_fwd'), or the tangents
    of the gradients of <f, c> (mode 'fwd_over_rev'), as arrays (None where there is none)."""
    fn = case.ref if side is TORCH_SIDE and case.ref else case.fn
    wanted = [i for i, x in enumerate(xs) if x.requires_grad]
    with side.fw.dual_level():
        duals = [x if v is None else side.fw.make_dual(x, side.tensor(v.copy())) for x, v in zip(xs, tangents)]
        outs = [o for o in as_list(fn(side.lib, *duals, **case.kwargs)) if side.is_float(o)]
        cots = [side.tensor(c) for c in cotangents(case, outs)]
        if mode == "rev_over_fwd":
            dots = [(side.fw.unpack_dual(o).tangent, c) for o, c in zip(outs, cots)]
            terms = [(t * c).sum() for t, c in dots if t is not None and t.requires_grad]
            inputs = [xs[i] for i in wanted]
        else:
            terms = [(o * c).sum() for o, c in zip(outs, cots) if o.requires_grad]
            inputs = [duals[i] for i in wanted]
        if not terms:
            return [None] * len(wanted)
        grads = side.autograd.grad(sum(terms), inputs, create_graph=mode == "fwd_over_rev", allow_unused=True)
        if mode == "fwd_over_rev":
            grads = [None if g is None else side.fw.unpack_dual(g).tangent for g in grads]
        return [None if g is None else side.to_array(g) for g in grads]


@pytest.mark.parametrize("mode", ["rev_over_fwd", "fwd_over_rev"])
@pytest.mark.parametrize("case", samples([c for c in CASES if c.grad and c.name not in FIRST_ORDER_ONLY_CASES], None))
def test_op_second_order(case, mode):
    xs_mt, xs_t, _ = make_inputs(case, "float64")
    tangents = random_tangents(case, xs_mt, "float64")
    if not any(x.requires_grad for x in xs_mt) or all(v is None for v in tangents):
        pytest.skip("nothing to differentiate")
    got, name = blocked(second_order, MT_SIDE, case, xs_mt, tangents, mode)
    if name:
        xfail_no_rule_yet(name)
    # Both modes compute one product, the Hessian of <f, c> times the tangent (at a kink each mode has its own
    # convention: the reference is torch's same mode). Where torch cannot do reverse over forward (its JVP formulas of
    # logsumexp, abs and the 1- and inf-norms write in place into a value their graph saved), or gets it wrong
    # (TORCH_REV_OVER_FWD_OFF), its forward over reverse is the reference.
    same = mode == "fwd_over_rev" or case.name not in TORCH_REV_OVER_FWD_OFF
    try:
        want = second_order(TORCH_SIDE, case, xs_t, tangents, mode if same else "fwd_over_rev")
    except RuntimeError as err:
        if mode != "rev_over_fwd" or "modified by an inplace operation" not in str(err):
            raise
        want = second_order(TORCH_SIDE, case, make_inputs(case, "float64")[1], tangents, "fwd_over_rev")
    compare_tangents(case, got, want, "float64")


@pytest.mark.parametrize("name", sorted(TORCH_REV_OVER_FWD_OFF))
def test_torch_reverse_over_forward_of_layer_norm_is_off(name):
    """Each case of TORCH_REV_OVER_FWD_OFF: torch's two second-order routes disagree (if torch fixes its reverse over
    forward, remove the case from the list)."""
    (case,) = [c for c in CASES if c.name == name]
    xs, tangents = make_inputs(case, "float64")[1], random_tangents(case, make_inputs(case, "float64")[0], "float64")
    rev = second_order(TORCH_SIDE, case, xs, tangents, "rev_over_fwd")
    fwd = second_order(TORCH_SIDE, case, make_inputs(case, "float64")[1], tangents, "fwd_over_rev")
    assert any(a is not None and error_stats(a, b)[1] > OP_RTOL["float64"] for a, b in zip(rev, fwd)), (
        f"{name}: torch's reverse over forward now equals its forward over reverse"
    )


# ----------------------------------------------------------------------------- every primitive has a rule
def test_every_primitive_has_a_rule():
    """Each primitive has a written jvp or a jvp_kind (one of the two), except those NO_RULE_YET lists, which have
    neither: adding a rule means removing its name, so the list only shrinks."""
    bad_kind = {n: c.jvp_kind for n, c in mt.ops.PRIMITIVES.items() if c.jvp_kind not in (None, *KINDS)}
    assert not bad_kind, f"jvp_kind must be one of {KINDS}: {bad_kind}"
    both = sorted(n for n, c in mt.ops.PRIMITIVES.items() if c.jvp is not None and c.jvp_kind is not None)
    assert not both, f"a written jvp and a jvp_kind: say one: {both}"
    ruled = {n for n, c in mt.ops.PRIMITIVES.items() if c.jvp is not None or c.jvp_kind is not None}
    missing = sorted(set(mt.ops.PRIMITIVES) - ruled - NO_RULE_YET)
    assert not missing, f"primitives without a forward-mode rule (write one, or declare jvp_kind): {missing}"
    stale = sorted(NO_RULE_YET & ruled)
    assert not stale, f"NO_RULE_YET lists primitives that now have a rule: remove {stale}"
    unknown = sorted(NO_RULE_YET - set(mt.ops.PRIMITIVES))
    assert not unknown, f"NO_RULE_YET names no primitive: {unknown}"


def test_every_declared_kind_is_exercised_against_torch():
    """A declared kind is a claim (a diagonal Jacobian; linearity) that only the torch comparison checks: each
    primitive with a rule must run, with a tangent, in some case of the table that reaches no primitive without
    one. While NO_RULE_YET is not empty, a primitive that only such blocked cases reach is let through."""
    declared = {n for n, c in mt.ops.PRIMITIVES.items() if c.jvp_kind is not None or c.jvp is not None}
    exercised, blocked = set(), set()
    for case in CASES:
        xs, _, _ = make_inputs(case, "float64")
        tangents = random_tangents(case, xs, "float64")
        if all(v is None for v in tangents):
            continue
        with mt.profiler.profile() as prof:
            try:
                forward_mt(case, xs, tangents)
            except NotImplementedError as err:
                if missing_rule(err) not in NO_RULE_YET:
                    raise
                with mt.profiler.profile() as prof:  # every primitive the blocked case reaches, without tangents
                    case.fn(MT, *xs, **case.kwargs)
                blocked |= set(prof.stats)
                continue
        exercised |= set(prof.stats)
    unexercised = sorted(declared - exercised - blocked)
    assert not unexercised, f"primitives with a rule that no op-table case runs in forward mode: {unexercised}"


# ----------------------------------------------------------------------------- the API
def _pair(shape, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


def test_make_dual_outside_a_level_is_refused():
    with pytest.raises(RuntimeError, match="no forward-mode level is open"):
        fw.make_dual(mt.ones(3), mt.ones(3))


@pytest.mark.parametrize(
    "tangent, words",
    [
        (mt.ones(4), ["(3,)", "(4,)"]),
        (mt.ones(3, dtype=mt.float32), ["float64", "float32"]),
    ],
    ids=["shape", "dtype"],
)
def test_tangent_of_another_shape_or_dtype_is_refused_naming_both(tangent, words):
    with fw.dual_level(), pytest.raises(RuntimeError) as info:
        fw.make_dual(mt.ones(3, dtype=mt.float64), tangent)
    for word in words:
        assert word in str(info.value), f"{word!r} not named in: {info.value}"


def test_make_dual_of_an_integer_primal_is_refused():
    with fw.dual_level(), pytest.raises(TypeError, match="floating-point"):
        fw.make_dual(mt.tensor([1, 2]), mt.tensor([1, 2]))


def test_tangents_vanish_when_the_level_closes():
    x, v = _pair((3,), 1)
    with fw.dual_level():
        y = fw.make_dual(mt.tensor(x), mt.tensor(v)) * 2.0
        assert fw.unpack_dual(y).tangent is not None
    assert fw.unpack_dual(y).tangent is None
    with fw.dual_level():  # nor do they come back in a new level
        assert fw.unpack_dual(y).tangent is None
        assert fw.unpack_dual(y.exp()).tangent is None


def test_forward_mode_works_under_no_grad():
    """Grad mode governs reverse-mode recording only: tangents flow under no_grad, as in PyTorch."""
    x, v = _pair((3, 4), 2)
    with mt.no_grad(), fw.dual_level():
        y = (fw.make_dual(mt.tensor(x), mt.tensor(v)) * 3.0).exp().sum()
        primal, tangent = fw.unpack_dual(y)
        assert y.grad_fn is None
    assert_close(primal.numpy(), np.exp(3 * x).sum(), OP_RTOL["float64"], "primal")
    assert_close(tangent.numpy(), (3 * np.exp(3 * x) * v).sum(), OP_RTOL["float64"], "tangent")


def test_nested_levels_are_refused():
    with fw.dual_level():
        with pytest.raises(RuntimeError, match="already open"):
            fw.enter_dual_level()
    with pytest.raises(RuntimeError, match="no forward-mode level is open"):
        fw.exit_dual_level()


def test_unpack_dual_of_a_plain_tensor_has_no_tangent():
    x = mt.ones(2)
    with fw.dual_level():
        primal, tangent = fw.unpack_dual(x)
    assert primal is x and tangent is None


class Cube(mt.autograd.Function):
    """out = a^3;  da = g * 3 a^2;  ȧ -> 3 a^2 ȧ (a written jvp)"""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a**3

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g * 3 * a * a,)

    @staticmethod
    def jvp(ctx, ta):
        (a,) = ctx.saved_arrays
        return ta * 3 * a * a


class CubeWithoutJvp(mt.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a**3

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        return (g * 3 * a * a,)


def test_custom_function_without_jvp_raises_naming_it():
    with fw.dual_level(), pytest.raises(NotImplementedError, match="CubeWithoutJvp"):
        CubeWithoutJvp.apply(fw.make_dual(mt.ones(2), mt.ones(2)))
    with fw.dual_level():  # without a tangent on its inputs it runs: no rule is needed
        assert fw.unpack_dual(CubeWithoutJvp.apply(mt.ones(2))).tangent is None


def test_custom_function_with_jvp():
    x, v = _pair((5,), 3)
    with fw.dual_level():
        tangent = fw.unpack_dual(Cube.apply(fw.make_dual(mt.tensor(x), mt.tensor(v)))).tangent.numpy()
    assert_close(tangent, 3 * x * x * v, OP_RTOL["float64"], "Cube's tangent")


def test_in_place_change_of_a_dual_tensor_is_refused():
    x, v = _pair((3,), 4)
    with fw.dual_level():
        d = fw.make_dual(mt.tensor(x), mt.tensor(v)) * 1.0
        with pytest.raises(RuntimeError, match="dual tensor"):
            d.add_(1.0)
        plain = mt.zeros(3)
        with pytest.raises(RuntimeError, match="dual tensor"):
            plain.add_(d)


# ----------------------------------------------------------------------------- forward and reverse, combined
def small_function(t, x, w):
    """A few kinds of op at once: elementwise, reductions, a broadcast."""
    h = (x * w).tanh() * x.sigmoid().sum(dim=-1, keepdim=True)
    return (h * h).mean() + (x.exp() / (1.5 + w.sum())).sum() + (x - w).abs().pow(1.5).sum()


def with_matmul(t, x, w):  # no logsumexp: torch cannot differentiate its tangent (see test_op_second_order)
    return ((x @ w.mT).tanh() * x.sum(dim=-1, keepdim=True)).sigmoid().sum()


@pytest.mark.parametrize("fn", [small_function, with_matmul], ids=lambda f: f.__name__)
def test_reverse_over_forward_matches_torch(fn):
    """The gradient (reverse mode) of a tangent (forward mode): d/dx <∇f(x), v>, the Hessian times v."""
    (x, v), (w, u) = _pair((3, 4), 5), _pair((3, 4), 6)
    with fw.dual_level():
        xm, wm = mt.tensor(x, requires_grad=True), mt.tensor(w, requires_grad=True)
        out, name = blocked(fn, mt, fw.make_dual(xm, mt.tensor(v)), fw.make_dual(wm, mt.tensor(u)))
        if name:
            xfail_no_rule_yet(name)
        tangent = fw.unpack_dual(out).tangent
        gx, gw = mt.autograd.grad(tangent, (xm, wm))
    with tfw.dual_level():
        xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        dual = fn(torch, tfw.make_dual(xt, torch.tensor(v)), tfw.make_dual(wt, torch.tensor(u)))
        rx, rw = torch.autograd.grad(tfw.unpack_dual(dual).tangent, (xt, wt))
    assert_close(gx.numpy(), rx.numpy(), OP_RTOL["float64"], "d tangent / dx")
    assert_close(gw.numpy(), rw.numpy(), OP_RTOL["float64"], "d tangent / dw")


@pytest.mark.parametrize("fn", [small_function, with_matmul], ids=lambda f: f.__name__)
def test_forward_over_reverse_matches_torch(fn):
    """The tangent (forward mode) of a create_graph gradient (reverse mode): the Hessian-vector product."""
    (x, v), (w, u) = _pair((3, 4), 7), _pair((3, 4), 8)
    with fw.dual_level():
        xm, wm = fw.make_dual(mt.tensor(x, requires_grad=True), mt.tensor(v)), mt.tensor(w, requires_grad=True)
        wm = fw.make_dual(wm, mt.tensor(u))
        grads, name = blocked(lambda: mt.autograd.grad(fn(mt, xm, wm), (xm, wm), create_graph=True))
        if name:
            xfail_no_rule_yet(name)
        got = [fw.unpack_dual(g).tangent.detach().numpy().copy() for g in grads]
    with tfw.dual_level():
        xt = tfw.make_dual(torch.tensor(x, requires_grad=True), torch.tensor(v))
        wt = tfw.make_dual(torch.tensor(w, requires_grad=True), torch.tensor(u))
        grads_t = torch.autograd.grad(fn(torch, xt, wt), (xt, wt), create_graph=True)
        want = [tfw.unpack_dual(g).tangent.detach().numpy().copy() for g in grads_t]
    for name, a, b in zip(("x", "w"), got, want):
        assert_close(a, b, OP_RTOL["float64"], f"Hessian-vector product, {name}")


# ----------------------------------------------------------------------------- the SVD's rules, directly
@pytest.mark.parametrize("shape", [(4, 3), (2, 5), (3, 3), (2, 3, 4)], ids=str)
def test_svd_rules_match_torch(shape):
    """SVDVals' ṡ and SingularVectors' U̇, V̇ against torch.linalg.svd's forward mode. The table reaches them through
    the nuclear norm (a transpose first); here they run alone. A singular vector's sign is LAPACK's choice on each
    side: each column of ours is compared after taking torch's sign, and so is its tangent."""
    a, v = _pair(shape, 9)
    with fw.dual_level():
        dual = fw.make_dual(mt.tensor(a), mt.tensor(v))
        got = {
            "S": fw.unpack_dual(mt.ops.SVDVals.apply(dual)),
            "U": fw.unpack_dual(mt.ops.SingularVectors.apply(dual, which="U")),
            "V": fw.unpack_dual(mt.ops.SingularVectors.apply(dual, which="V")),
        }
        got = {k: (p.numpy().copy(), t.numpy().copy()) for k, (p, t) in got.items()}
    with tfw.dual_level():
        u, s, vh = torch.linalg.svd(tfw.make_dual(torch.tensor(a), torch.tensor(v)), full_matrices=False)
        want = {k: tuple(x.numpy().copy() for x in tfw.unpack_dual(t)) for k, t in (("S", s), ("U", u), ("V", vh.mT))}
    for k in "SUV":
        (p, t), (pw, tw) = got[k], want[k]
        if k != "S":  # each column's sign to torch's
            sign = np.sign((p * pw).sum(axis=-2, keepdims=True))
            p, t = p * sign, t * sign
        assert_close(p, pw, OP_RTOL["float64"], f"{k}")
        assert_close(t, tw, OP_RTOL["float64"], f"tangent of {k}")


# ----------------------------------------------------------------------------- edges: kinks, ties, NaN, 0/0
def compare_at(fn, arrays, tangents, what):
    """fn's primal and tangent in both libraries at given points (None: an input without tangent), float64."""
    with fw.dual_level():
        xs = [mt.tensor(a) if t is None else fw.make_dual(mt.tensor(a), mt.tensor(t)) for a, t in zip(arrays, tangents)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # IEEE edges give inf and NaN silently, as in torch
            out, name = blocked(fn, mt, *xs)
        if name:
            xfail_no_rule_yet(name)
        p, t = fw.unpack_dual(out)
        got = p.numpy().copy(), None if t is None else t.numpy().copy()
    with tfw.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns on std with n <= correction
        xs = [
            torch.tensor(a) if t is None else tfw.make_dual(torch.tensor(a), torch.tensor(t))
            for a, t in zip(arrays, tangents)
        ]
        p, t = tfw.unpack_dual(fn(torch, *xs))
        want = p.detach().numpy().copy(), None if t is None else t.detach().numpy().copy()
    assert_close(got[0], want[0], OP_RTOL["float64"], f"{what} primal")
    if got[1] is None or want[1] is None:
        other = got[1] if want[1] is None else want[1]
        assert other is None or not np.any(other), f"{what}: a tangent on one side only"
        return
    assert_close(got[1], want[1], OP_RTOL["float64"], f"{what} tangent")


@pytest.mark.parametrize("name", list(EDGES))
def test_ieee_edges_match_torch(name):
    compare_at(EDGES[name], [np.array([0.0, -1.0, 2.0])], [np.array([0.7, -1.3, 0.4])], name)


@pytest.mark.parametrize("name", list(ZERO_OVER_ZERO))
def test_zero_over_zero_matches_torch(name):
    fn, z = ZERO_OVER_ZERO[name]
    z = np.array(z)
    compare_at(fn, [z], [np.random.default_rng(6).standard_normal(z.shape) + 0.5], name)


nan, inf = float("nan"), float("inf")
X4 = np.array([1.0, 2.0, 3.0, 2.0])  # ties with the bounds below
T4 = np.array([10.0, 20.0, 30.0, 40.0])
LO, T_LO = np.array([1.0, 1.0, 5.0, 0.0]), np.array([100.0, 200.0, 300.0, 400.0])
HI, T_HI = np.array([3.0, 2.0, 4.0, -1.0]), np.array([1000.0, 2000.0, 3000.0, 4000.0])
A_NAN, B_NAN = np.array([1.0, 2.0, nan, 3.0]), np.array([1.0, 3.0, 1.0, nan])
TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
T23 = np.array([[1.0, 2.0, 4.0], [8.0, 16.0, 32.0]])
# name: (fn, arrays, tangents)
SELECTION_EDGES = {
    "clamp tensor bounds (ties, crossed)": (lambda t, x, lo, hi: t.clamp(x, lo, hi), [X4, LO, HI], [T4, T_LO, T_HI]),
    "clamp lone tensor min (tie: the bound's)": (lambda t, x, lo: t.clamp(x, min=lo), [X4, LO], [T4, T_LO]),
    "clamp lone tensor min without tangent": (lambda t, x, lo: t.clamp(x, min=lo), [X4, LO], [T4, None]),
    "clamp lone tensor max (tie: the bound's)": (lambda t, x, hi: t.clamp(x, max=hi), [X4, HI], [T4, T_HI]),
    "clamp number min (tie: the input's)": (lambda t, x: t.clamp(x, min=2.0), [X4], [T4]),
    "clamp number max": (lambda t, x: t.clamp(x, max=2.0), [X4], [T4]),
    "clamp number bounds tied": (lambda t, x: t.clamp(x, 2.0, 2.0), [X4], [T4]),
    "clamp number bounds crossed": (lambda t, x: t.clamp(x, 3.0, 2.0), [X4], [T4]),
    "clamp NaN input, tensor bounds": (lambda t, x, lo, hi: t.clamp(x, lo, hi), [A_NAN, LO, HI + 5], [T4, T_LO, T_HI]),
    "clamp NaN input, number bounds": (lambda t, x: t.clamp(x, 0.0, 2.5), [A_NAN], [T4]),
    "maximum (tie, NaN)": (lambda t, a, b: t.maximum(a, b), [A_NAN, B_NAN], [T4, T_LO]),
    "minimum (tie, NaN)": (lambda t, a, b: t.minimum(a, b), [A_NAN, B_NAN], [T4, T_LO]),
    "maximum, one tangent": (lambda t, a, b: t.maximum(a, b), [A_NAN, B_NAN], [T4, None]),
    "max() of ties": (lambda t, x: x.max(), [TIES], [T23]),
    "min() of ties": (lambda t, x: x.min(), [-TIES], [T23]),
    "max() of NaN": (lambda t, x: x.max(), [np.array([1.0, nan, nan])], [np.array([1.0, 2.0, 4.0])]),
    "max(dim) of ties": (lambda t, x: x.max(dim=1).values, [TIES], [T23]),
    "max(dim) of NaN": (lambda t, x: x.max(dim=0).values, [np.array([1.0, nan, nan])], [np.array([1.0, 2.0, 4.0])]),
    "amax(dim) of ties": (lambda t, x: x.amax(dim=1), [TIES], [T23]),
    "amin() of NaN": (lambda t, x: x.amin(), [np.array([1.0, nan, nan])], [np.array([1.0, 2.0, 4.0])]),
    "norm(inf) of ties, NaN": (
        lambda t, x: x.norm(p=float("inf"), dim=1),
        [np.array([[1.0, -3.0, 3.0], [nan, 2.0, -2.0]])],
        [T23],
    ),
    "norm(-inf) of ties": (lambda t, x: x.norm(p=-float("inf"), dim=1), [np.array([[1.0, -1.0, 3.0]])], [T23[:1]]),
    "clone (no op-table case reaches Clone without a transpose yet)": (
        lambda t, x: x.clone() * 2,
        [np.array([1.0, -2.0])],
        [np.array([0.5, 3.0])],
    ),
    "relu, abs at 0": (lambda t, x: x.relu() + x.abs() * 3, [np.array([0.0, -0.0, 1.0])], [np.array([1.0, 2.0, 3.0])]),
    "pow(tensor, tensor) at 0": (
        lambda t, a, b: a**b,
        [np.array([0.0, 0.0, -1.0]), np.array([0.0, 2.0, 2.0])],
        [np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])],
    ),
    "where, masked_fill with inf tangents": (
        lambda t, a, b: t.where(a > 0, a, b).masked_fill(b > 1, 2.0),
        [np.array([1.0, -1.0, 2.0]), np.array([0.5, 3.0, -1.0])],
        [np.array([1.0, inf, 3.0]), np.array([inf, 1.0, 2.0])],
    ),
}


@pytest.mark.parametrize("name", list(SELECTION_EDGES))
def test_selection_edges_match_torch(name):
    """Ties, crossed bounds and NaN, where torch's forward-mode formulas fix a value (checked against 2.13)."""
    fn, arrays, tangents = SELECTION_EDGES[name]
    compare_at(fn, arrays, tangents, name)
