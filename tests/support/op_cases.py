"""The one table of op cases, and the one helper that runs a case against PyTorch.

Each case is one line: a name, a function applied identically to minitensor and torch
(`fn(t, *inputs, **kwargs)`, where `t` is the library namespace: `t.maximum`, `t.F.softmax`,
`t.float64`), the input specs (a shape tuple means standard-normal floats; `Pos`, `Away`,
`Int`, `Bool`, `Const`, `NegInf` say otherwise), the kwargs, and, rarely, a tolerance
override with the reason or a torch-side spelling (`ref`) where torch has no such syntax.

`run_case` builds both libraries' inputs from the same seeded NumPy arrays, compares the
forward (values, shape, dtype), backpropagates the same random upstream gradient (never all
ones: it would hide swapped axes) and compares every input's gradient. tests/minitensor/ops/test_op_table.py runs
the table in float64 and float32; tests/minitensor/autograd/test_gradcheck.py runs its differentiable cases
through minitensor's finite-difference gradcheck.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close


# ----------------------------------------------------------------------------- namespaces
class Lib:
    """What a case's function receives: the library's namespace plus `F` (its functional)."""

    def __init__(self, module, functional, is_torch: bool):
        self._module = module
        self.F = functional
        self.is_torch = is_torch

    def __getattr__(self, name):
        return getattr(self._module, name)


MT = Lib(mt, mt.nn.functional, is_torch=False)
TORCH = Lib(torch, torch.nn.functional, is_torch=True)


# ----------------------------------------------------------------------------- input specs
@dataclass(frozen=True)
class Arg:
    """One input: `kind` picks the distribution; float inputs require grad unless grad=False."""

    shape: tuple
    kind: str = "normal"  # normal | pos | away | ties | neginf | int | bool | const
    high: int = 0  # for kind='int': values in [0, high)
    value: Any = None  # for kind='const'
    grad: bool = True

    @property
    def is_float(self) -> bool:
        if self.kind == "const":
            return np.asarray(self.value).dtype.kind == "f"
        return self.kind not in ("int", "bool")

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """A float64 (or int64/bool) master array; cast to the test dtype by the caller."""
        shape = self.shape
        if self.kind == "normal":
            return rng.standard_normal(shape)
        if self.kind == "pos":  # log, sqrt, non-integer powers: stay well inside the domain
            return rng.uniform(0.5, 2.0, shape)
        if self.kind == "away":  # divisors and kinks (abs): |x| >= 0.5
            return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        if self.kind == "ties":  # small integers as floats: == and != see equal pairs
            return rng.integers(-2, 3, shape).astype(np.float64)
        if self.kind == "neginf":
            # -inf where the index sum is 0 mod 3: every line of length >= 2 keeps a finite entry,
            # so softmax along any dim has something to normalise.
            x = rng.standard_normal(shape)
            x[np.indices(shape).sum(axis=0) % 3 == 0] = -np.inf
            return x
        if self.kind == "int":
            return rng.integers(0, self.high, shape).astype(np.int64)
        if self.kind == "bool":
            return rng.random(shape) < 0.5
        if self.kind == "const":
            return np.array(self.value)
        raise ValueError(f"unknown Arg kind {self.kind!r}")


def Pos(*shape):
    return Arg(shape, "pos")


def Away(*shape):
    return Arg(shape, "away")


def Ties(*shape):
    return Arg(shape, "ties")


def NegInf(*shape):
    return Arg(shape, "neginf")


def Int(shape, high):
    return Arg(tuple(shape), "int", high=high, grad=False)


def Bool(*shape):
    return Arg(shape, "bool", grad=False)


def Const(value, grad=False):
    return Arg(np.shape(value), "const", value=value, grad=grad)


def NoGrad(*shape):
    return Arg(shape, "normal", grad=False)


def _spec(a) -> Arg:
    return a if isinstance(a, Arg) else Arg(tuple(a))


# ----------------------------------------------------------------------------- the case
@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable  # fn(t, *inputs, **kwargs), same code for both libraries
    args: tuple  # input specs (shape tuples or Arg)
    kwargs: dict = field(default_factory=dict)
    rtol: dict = field(default_factory=dict)  # override per dtype name: ONLY with a reason in `why`
    why: str = ""
    ref: Callable | None = None  # torch-side function where torch spells it differently
    grad: bool = True  # compare gradients (False: forward-only op)
    gradcheck: bool = True  # run finite differences in float64 (False: why in `why`)

    @property
    def specs(self) -> list[Arg]:
        return [_spec(a) for a in self.args]

    def tol(self, dtype_name: str) -> float:
        return self.rtol.get(dtype_name, OP_RTOL[dtype_name])

    def __str__(self):
        return self.name


def C(name, fn, args, kwargs=None, **opts) -> Case:
    """Shorthand so each table entry fits on one line."""
    return Case(name, fn, tuple(args), dict(kwargs or {}), **opts)


# ----------------------------------------------------------------------------- the helper
def case_seed(name: str) -> int:
    """A stable per-case seed (Python's hash() is salted per process; crc32 is not)."""
    return zlib.crc32(name.encode())


def make_inputs(case: Case, dtype_name: str):
    """(mt inputs, torch inputs, master arrays) built from the same seeded NumPy arrays."""
    rng = np.random.default_rng(case_seed(case.name))
    dtype = np.dtype(dtype_name)
    xs_mt, xs_t, arrays = [], [], []
    for spec in case.specs:
        a = spec.sample(rng)
        if spec.is_float:
            a = a.astype(dtype)
        arrays.append(a)
        req = spec.grad and spec.is_float
        xs_mt.append(mt.tensor(a.copy(), requires_grad=req))
        xs_t.append(torch.tensor(a.copy(), requires_grad=req))
    return xs_mt, xs_t, arrays


def as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def torch_dtype_name(x: torch.Tensor) -> str:
    return str(x.dtype).removeprefix("torch.")


def is_float_name(name: str) -> bool:
    return name.startswith("float")


def compare_forward(case: Case, outs_mt: list, outs_t: list, dtype_name: str) -> None:
    assert len(outs_mt) == len(outs_t), f"{case}: {len(outs_mt)} outputs vs torch's {len(outs_t)}"
    for i, (o, r) in enumerate(zip(outs_mt, outs_t)):
        assert isinstance(o, mt.Tensor), f"{case}: output {i} is {type(o).__name__}, expected mt.Tensor"
        assert o.shape == tuple(r.shape), f"{case}: output {i} shape {o.shape} vs torch {tuple(r.shape)}"
        assert o.dtype.name == torch_dtype_name(r), (
            f"{case}: output {i} dtype {o.dtype.name} vs torch {torch_dtype_name(r)}"
        )
        ref = r.detach().numpy()
        if is_float_name(o.dtype.name):
            assert_close(o.detach().numpy(), ref, case.tol(dtype_name), what=f"{case} [{dtype_name}] forward {i}")
        else:
            np.testing.assert_array_equal(o.numpy(), ref, err_msg=f"{case} [{dtype_name}] forward {i}")


def backward_both(outs_mt: list, outs_t: list, seed: int) -> None:
    """Send the same random upstream gradient into both graphs."""
    rng = np.random.default_rng(seed + 1)
    pairs = [(o, r) for o, r in zip(outs_mt, outs_t) if r.requires_grad]
    # shifted off zero mean so sums of the gradient do not cancel; dtype of each output
    gs = [np.asarray(rng.standard_normal(r.shape) + 0.5, dtype=o.dtype) for o, r in pairs]
    if len(pairs) == 1:
        (o, r), g = pairs[0], gs[0]
        g_mt = mt.tensor(g.copy())
        o.backward(g_mt)
        r.backward(torch.tensor(g.copy()))
        assert np.array_equal(g_mt.numpy(), g), "backward wrote into the caller's gradient array"
        return
    # several outputs (split, chunk): one scalar sum_i <out_i, g_i> in each library
    loss_mt = sum((o * mt.tensor(g.copy())).sum() for (o, _), g in zip(pairs, gs))
    loss_t = sum((r * torch.tensor(g.copy())).sum() for (_, r), g in zip(pairs, gs))
    loss_mt.backward()
    loss_t.backward()


def run_case(case: Case, dtype_name: str) -> tuple[list, list]:
    """Forward and backward of one case in one dtype, minitensor against torch. Returns minitensor's inputs and
    outputs (for the properties that take the recorded forward's outputs as their reference)."""
    xs_mt, xs_t, arrays = make_inputs(case, dtype_name)
    mt.manual_seed(0)  # ops that draw (dropout) draw what a later forward from the same seed draws
    outs_mt = as_list(case.fn(MT, *xs_mt, **case.kwargs))
    outs_t = as_list((case.ref or case.fn)(TORCH, *xs_t, **case.kwargs))
    compare_forward(case, outs_mt, outs_t, dtype_name)
    if case.grad and any(r.requires_grad for r in outs_t):
        before = [o.detach().numpy().copy() for o in outs_mt]
        backward_both(outs_mt, outs_t, case_seed(case.name))
        for i, (o, b) in enumerate(zip(outs_mt, before)):  # a backward must not scribble on saved outputs
            assert np.array_equal(o.detach().numpy(), b, equal_nan=True), (
                f"{case} [{dtype_name}]: backward changed output {i}"
            )
        compare_grads(case, xs_mt, xs_t, dtype_name)
    for i, (x, a) in enumerate(zip(xs_mt, arrays)):  # nor forward or backward on inputs
        assert np.array_equal(x.detach().numpy(), a, equal_nan=a.dtype.kind == "f"), (
            f"{case} [{dtype_name}]: input {i} was modified"
        )
    return xs_mt, outs_mt


def compare_grads(case: Case, xs_mt: list, xs_t: list, dtype_name: str) -> None:
    for i, (x, r) in enumerate(zip(xs_mt, xs_t)):
        if not r.requires_grad:
            continue
        what = f"{case} [{dtype_name}] grad of input {i}"
        if r.grad is None:
            assert x.grad is None or not np.any(x.grad.numpy()), f"{what}: torch has none, ours is nonzero"
            continue
        assert x.grad is not None, f"{what}: missing (torch has one)"
        assert x.grad.shape == x.shape, f"{what}: shape {x.grad.shape} vs input {x.shape}"
        assert x.grad.dtype == x.dtype, f"{what}: dtype {x.grad.dtype} vs input {x.dtype}"
        assert_close(x.grad.numpy(), r.grad.numpy(), case.tol(dtype_name), what=what)


def fake_cuda_round_trip(x):
    """x copied to the fake CUDA device (minitensor/fakecuda.py) and back: ToDevice twice. The fake is on only
    while the copies are made; the backward sends each gradient back with the library its input came from."""
    previous = mt.devices.use_fake_cuda(True)
    try:
        return x.cuda().cpu()
    finally:
        mt.devices.use_fake_cuda(previous)


# ----------------------------------------------------------------------------- the table
inf = float("inf")
IDX2 = np.array([[0, 2], [2, 2]])  # repeated rows: gradients must accumulate
TOKENS = np.array([[1, 0, 3, 3], [5, 1, 0, 3]])  # repeated ids and padding id 0
ROWS = np.array([0, 2, 0, 1, 0])  # rows of a (3, 4) result, 0 repeated
TARGET = np.array([0, 3, 1, 3, 2])
TARGET_IGN = np.array([0, -100, 1, 3, -100])  # default ignore_index
TARGET_IGN1 = np.array([0, 1, 1, 3, 2])  # with ignore_index=1
TARGET_ND = np.array([[0, 3, -100, 1, 2], [2, 2, 0, -100, 3], [1, 0, 0, 3, 3]])  # (N, d) for (N, C, d)
KEEP = np.random.default_rng(7).random((3, 4, 5)) < 0.7
# Row 0 all -inf: PyTorch's softmax/log_softmax give NaN there (0/0), and nn/functional.py
# documents that minitensor does the same; the other rows must be unaffected.
# Attention masks (True = may attend) over (2, 3 queries, 4 keys): in MASK_EMPTY_ROW query 1 of
# batch 0 keeps no key, the row the fused attention weights give zeros (torch's composite: NaN).
MASK = np.random.default_rng(11).random((2, 3, 4)) < 0.7
MASK[..., 0] = True
MASK_EMPTY_ROW = MASK.copy()
MASK_EMPTY_ROW[0, 1] = False


def attention_weights_ref(t, q, k, m=None, scale=0.5):
    """torch's spelling: masked_fill with the lowest finite value, softmax, empty rows zeroed."""
    s = q @ k.transpose(-2, -1) * scale
    if m is None:
        return torch.softmax(s, dim=-1)
    w = torch.softmax(s.masked_fill(~m, torch.finfo(s.dtype).min), dim=-1)
    return w * m.any(dim=-1, keepdim=True)


ALL_NEGINF_ROW = np.array([[-inf, -inf, -inf, -inf], [0.5, -inf, 1.0, -0.3], [0.1, 0.2, -inf, -1.0]])

CASES: list[Case] = [
    # -------- arithmetic: tensor-tensor, broadcasting, scalars, reflected
    C("add", lambda t, x, y: x + y, [(3, 4), (3, 4)]),
    C("add_broadcast", lambda t, x, y: x + y, [(4, 1, 3), (2, 3)]),
    C("add_scalar", lambda t, x: x + 2.5, [(3, 4)]),
    C("radd_scalar", lambda t, x: 2.5 + x, [(3, 4)]),
    C("sub", lambda t, x, y: x - y, [(3, 4), (3, 4)]),
    C("sub_broadcast", lambda t, x, y: x - y, [(3, 1), (1, 4)]),
    C("sub_scalar", lambda t, x: x - 2, [(3, 4)]),
    C("rsub_scalar", lambda t, x: 2 - x, [(3, 4)]),
    C("mul", lambda t, x, y: x * y, [(3, 4), (3, 4)]),
    C("mul_broadcast", lambda t, x, y: x * y, [(2, 3, 4), (4,)]),
    C("mul_scalar", lambda t, x: x * 3, [(3, 4)]),
    C("rmul_scalar", lambda t, x: -1.5 * x, [(3, 4)]),
    C("mul_0d", lambda t, x, y: x * y, [(3, 4), ()]),
    C("div", lambda t, x, y: x / y, [(3, 4), Away(3, 4)]),
    C("div_broadcast", lambda t, x, y: x / y, [(2, 1, 4), Away(3, 1)]),
    C("div_scalar", lambda t, x: x / 4, [(3, 4)]),
    C("rdiv_scalar", lambda t, x: 2 / x, [Away(3, 4)]),
    C("pow_2", lambda t, x: x**2, [(3, 4)]),
    C("pow_3", lambda t, x: x**3, [(3, 4)]),
    C("pow_2.5", lambda t, x: x**2.5, [Pos(3, 4)]),
    C("pow_neg1", lambda t, x: x**-1, [Away(3, 4)]),
    C("pow_0.5", lambda t, x: x**0.5, [Pos(3, 4)]),
    C("rpow_scalar", lambda t, x: 2**x, [(3, 4)]),
    C("pow_tensor", lambda t, x, y: x**y, [Pos(3, 4), (3, 4)]),
    C("pow_tensor_broadcast", lambda t, x, y: x**y, [Pos(2, 3, 4), (3, 1)]),
    C("neg_op", lambda t, x: -x, [(3, 4)]),
    # -------- matmul
    C("matmul_2d", lambda t, x, y: x @ y, [(3, 4), (4, 5)]),
    C("matmul_batched", lambda t, x, y: x @ y, [(2, 3, 4), (2, 4, 5)]),
    C("matmul_broadcast", lambda t, x, y: x @ y, [(2, 1, 3, 4), (5, 4, 6)]),
    C("matmul_2d_3d", lambda t, x, y: x @ y, [(3, 4), (2, 4, 5)]),
    C("matmul_1d_2d", lambda t, x, y: x @ y, [(4,), (4, 5)]),
    C("matmul_2d_1d", lambda t, x, y: x @ y, [(3, 4), (4,)]),
    C("matmul_1d_1d", lambda t, x, y: x @ y, [(4,), (4,)]),
    C("matmul_1d_3d", lambda t, x, y: x @ y, [(4,), (2, 4, 5)]),
    C("matmul_3d_1d", lambda t, x, y: x @ y, [(2, 3, 4), (4,)]),
    C("matmul_fn", lambda t, x, y: t.matmul(x, y), [(2, 3, 4), (4, 5)]),
    C("T_2d", lambda t, x: x.T, [(3, 4)]),
    # -------- elementwise unary (methods and functions)
    C("neg", lambda t, x: x.neg(), [(3, 4)]),
    C("exp", lambda t, x: x.exp(), [(3, 4)]),
    C("exp_fn", lambda t, x: t.exp(x), [(3, 4)]),
    C("log", lambda t, x: x.log(), [Pos(3, 4)]),
    C("log_fn", lambda t, x: t.log(x), [Pos(3, 4)]),
    C("sqrt", lambda t, x: x.sqrt(), [Pos(3, 4)]),
    C("abs", lambda t, x: x.abs(), [Away(3, 4)]),
    C("sin", lambda t, x: (x * 3).sin(), [(3, 4)]),
    C("sin_fn", lambda t, x: t.sin(x), [(3, 4)]),
    C("cos", lambda t, x: (x * 3).cos(), [(3, 4)]),
    C("cos_fn", lambda t, x: t.cos(x), [(3, 4)]),
    C("tanh", lambda t, x: x.tanh(), [(3, 4)]),
    C("tanh_fn", lambda t, x: t.tanh(x), [(3, 4)]),
    C("erf", lambda t, x: x.erf(), [(3, 4)]),
    C("erf_fn", lambda t, x: t.erf(x * 2), [(3, 4)]),
    C("sigmoid", lambda t, x: x.sigmoid(), [(3, 4)]),
    C("sigmoid_fn", lambda t, x: t.sigmoid(x), [(3, 4)]),
    C("sigmoid_large", lambda t, x: (x * 40).sigmoid(), [(3, 4)]),
    C("relu", lambda t, x: x.relu(), [(3, 4)]),
    C("relu_fn", lambda t, x: t.relu(x), [(3, 4)]),
    C("clamp_min", lambda t, x: x.clamp(min=-0.5), [(3, 4)]),
    C("clamp_max", lambda t, x: x.clamp(max=0.3), [(3, 4)]),
    C("clamp_both", lambda t, x: x.clamp(-0.5, 0.5), [(3, 4)]),
    C("clamp_fn", lambda t, x: t.clamp(x, min=-0.2, max=0.7), [(3, 4)]),
    # -------- binary functions, where, masked_fill
    C("maximum", lambda t, x, y: t.maximum(x, y), [(3, 4), (3, 4)]),
    C("maximum_broadcast", lambda t, x, y: t.maximum(x, y), [(3, 1), (1, 4)]),
    C("minimum", lambda t, x, y: t.minimum(x, y), [(3, 4), (3, 4)]),
    C("minimum_broadcast", lambda t, x, y: t.minimum(x, y), [(2, 3, 4), (4,)]),
    C("where", lambda t, c, x, y: t.where(c, x, y), [Bool(3, 4), (3, 4), (3, 4)]),
    C("where_broadcast", lambda t, c, x, y: t.where(c, x, y), [Bool(3, 1), (1, 4), (3, 4)]),
    C("where_from_compare", lambda t, x, y: t.where(x > 0, x, y), [(3, 4), (4,)]),
    C("masked_fill", lambda t, x, m: x.masked_fill(m, -1.5), [(2, 3, 4), Bool(2, 3, 4)]),
    C("masked_fill_broadcast", lambda t, x, m: x.masked_fill(m, -4.0), [(2, 3, 4), Bool(3, 1)]),
    C("masked_fill_mask_grows_input", lambda t, x, m: x.masked_fill(m, 2.5), [(3, 1), Bool(2, 3, 4)]),
    C(
        "masked_fill_-1e9",
        lambda t, x, m: x.masked_fill(m, -1e9),
        [(2, 3, 4), Bool(1, 4)],
        gradcheck=False,
        why="v.f is ~1e9, so round-off in central differences (~1e9 * 1e-16 / eps = 0.1) swamps the gradient",
    ),
    C(
        "masked_fill_neginf",
        lambda t, x, m: x.masked_fill(m, -inf),
        [(2, 3, 4), Bool(1, 4)],
        gradcheck=False,
        why="outputs hold -inf: central differences give inf - inf there",
    ),
    # -------- comparisons and boolean logic (forward only: no gradient exists)
    C("eq", lambda t, x, y: x == y, [Ties(3, 4), Ties(3, 4)], grad=False),
    C("ne", lambda t, x, y: x != y, [Ties(3, 4), Ties(3, 4)], grad=False),
    C("lt", lambda t, x, y: x < y, [Ties(3, 4), Ties(3, 4)], grad=False),
    C(
        "le",
        lambda t, x, y: x <= y,
        [
            Ties(3, 4),
            Ties(
                4,
            ),
        ],
        grad=False,
    ),
    C("gt", lambda t, x, y: x > y, [Ties(3, 1), Ties(3, 4)], grad=False),
    C("ge", lambda t, x, y: x >= y, [Ties(3, 4), Ties(3, 4)], grad=False),
    C("gt_scalar", lambda t, x: x > 0, [(3, 4)], grad=False),
    C("eq_scalar", lambda t, x: x == 1.0, [Ties(3, 4)], grad=False),
    C("and", lambda t, a, b: a & b, [Bool(3, 4), Bool(3, 4)], grad=False),
    C("or", lambda t, a, b: a | b, [Bool(3, 4), Bool(1, 4)], grad=False),
    C("invert", lambda t, a: ~a, [Bool(3, 4)], grad=False),
    # -------- reductions
    C("sum_all", lambda t, x: x.sum(), [(3, 4, 5)]),
    C("sum_dim", lambda t, x, **k: x.sum(**k), [(3, 4, 5)], dict(dim=1)),
    C("sum_dim_keepdim", lambda t, x, **k: x.sum(**k), [(3, 4, 5)], dict(dim=1, keepdim=True)),
    C("sum_negdim", lambda t, x, **k: x.sum(**k), [(3, 4, 5)], dict(dim=-1)),
    C("sum_tuple", lambda t, x, **k: x.sum(**k), [(3, 4, 5)], dict(dim=(0, 2))),
    C("sum_tuple_keepdim", lambda t, x, **k: x.sum(**k), [(3, 4, 5)], dict(dim=(0, -1), keepdim=True)),
    C("sum_fn", lambda t, x: t.sum(x, dim=0), [(3, 4)]),
    C("mean_all", lambda t, x: x.mean(), [(3, 4, 5)]),
    C("mean_dim", lambda t, x, **k: x.mean(**k), [(3, 4, 5)], dict(dim=-2)),
    C("mean_tuple_keepdim", lambda t, x, **k: x.mean(**k), [(3, 4, 5)], dict(dim=(1, 2), keepdim=True)),
    C(
        "mean_none_keepdim",
        lambda t, x, **k: x.mean(**k),
        [(3, 4)],
        dict(dim=None, keepdim=True),
        ref=lambda t, x, **k: x.mean(dim=(0, 1), keepdim=True),
    ),
    C("var_all", lambda t, x: x.var(), [(3, 4, 5)]),
    C("var_all_biased", lambda t, x: x.var(unbiased=False), [(3, 4, 5)]),
    C("var_dim", lambda t, x, **k: x.var(**k), [(3, 4, 5)], dict(dim=1)),
    C("var_dim_biased_keepdim", lambda t, x, **k: x.var(**k), [(3, 4, 5)], dict(dim=-1, unbiased=False, keepdim=True)),
    C("var_tuple", lambda t, x, **k: x.var(**k), [(3, 4, 5)], dict(dim=(0, 2), unbiased=True)),
    C("std_all", lambda t, x: x.std(), [(3, 4, 5)]),
    C("std_dim", lambda t, x, **k: x.std(**k), [(3, 4, 5)], dict(dim=1)),
    C("std_dim_biased_keepdim", lambda t, x, **k: x.std(**k), [(3, 4, 5)], dict(dim=-1, unbiased=False, keepdim=True)),
    C("std_fn_tuple", lambda t, x: t.std(x, dim=(0, 2)), [(3, 4, 5)]),
    C(
        "std_constant_row",
        lambda t, x: x.std(dim=1),
        [Const(np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]), grad=True)],
        gradcheck=False,
        why="a constant row is a kink of std (like |x| at 0): torch's gradient there is 0",
    ),
    C("var_constant_row", lambda t, x: x.var(dim=1), [Const(np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]), grad=True)]),
    C("max_all", lambda t, x: x.max(), [(3, 4, 5)]),
    C("max_dim_values", lambda t, x: x.max(dim=1).values, [(3, 4, 5)]),
    C("max_dim_keepdim", lambda t, x: x.max(dim=-1, keepdim=True)[0], [(3, 4, 5)]),
    C("max_dim_indices", lambda t, x: x.max(dim=1).indices, [(3, 4, 5)], grad=False),
    C("max_dim_tuple_unpack", lambda t, x: tuple(x.max(dim=0)), [(3, 4)]),
    C("min_all", lambda t, x: x.min(), [(3, 4, 5)]),
    C("min_dim_values", lambda t, x: x.min(dim=0).values, [(3, 4, 5)]),
    C("min_dim_indices_keepdim", lambda t, x: x.min(dim=2, keepdim=True).indices, [(3, 4, 5)], grad=False),
    C("logsumexp_dim", lambda t, x, **k: x.logsumexp(**k), [(3, 4, 5)], dict(dim=1)),
    C("logsumexp_negdim_keepdim", lambda t, x, **k: x.logsumexp(**k), [(3, 4, 5)], dict(dim=-1, keepdim=True)),
    C("logsumexp_tuple", lambda t, x, **k: x.logsumexp(**k), [(3, 4, 5)], dict(dim=(0, 2))),
    C("logsumexp_large", lambda t, x: (x * 500).logsumexp(dim=1), [(3, 4)]),
    C("logsumexp_fn", lambda t, x: t.logsumexp(x, dim=0), [(3, 4)]),
    C("amax_all", lambda t, x: x.amax(), [(3, 4, 5)]),
    C("amax_dim", lambda t, x: x.amax(dim=1), [(3, 4, 5)]),
    C("amin_tuple_keepdim", lambda t, x: x.amin(dim=(0, 2), keepdim=True), [(3, 4, 5)]),
    C("amax_fn", lambda t, x: t.amax(x, dim=-1), [(3, 4)]),
    C("amin_fn_all", lambda t, x: t.amin(x), [(3, 4)]),
    C("amax_dim_0", lambda t, x: x.amax(dim=0), [(3, 4)]),
    C("amin_dim_0_keepdim", lambda t, x: t.amin(x, dim=0, keepdim=True), [(3, 4)]),
    C("amax_empty_tuple_is_all", lambda t, x: x.amax(dim=()), [(3, 4)]),
    C("sum_empty_tuple_is_all", lambda t, x: x.sum(dim=()), [(3, 4)]),
    # -------- the dim of a 0-d tensor (0 or -1) is the whole tensor
    C("sum_dim_0_of_0d", lambda t, x: x.sum(dim=0), [()]),
    C("mean_dim_neg1_of_0d_keepdim", lambda t, x: x.mean(dim=-1, keepdim=True), [()]),
    C("logsumexp_dim_0_of_0d", lambda t, x: x.logsumexp(dim=0), [()]),
    C("amax_dim_0_of_0d", lambda t, x: x.amax(dim=0), [()]),
    C("max_dim_0_of_0d", lambda t, x: x.max(dim=0).values, [()]),
    C("softmax_dim_0_of_0d", lambda t, x: x.softmax(0) * x, [()]),
    C("log_softmax_dim_neg1_of_0d", lambda t, x: x.log_softmax(-1) * x, [()]),
    C("transpose_of_0d", lambda t, x: x.transpose(0, -1) * 2.0, [()]),
    C("flatten_of_0d", lambda t, x: x.flatten(0), [()]),
    C("argmax_keepdim_of_0d", lambda t, x: x.argmax(dim=-1, keepdim=True), [()], grad=False),
    C("gelu_of_0d", lambda t, x: t.F.gelu(x), [()]),
    C(
        "amax_ties",
        lambda t, x: x.amax(dim=1),
        [Const(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), grad=True)],
        gradcheck=False,
        why="tied maxima: amax shares the gradient evenly among them (torch's convention)",
    ),
    C(
        "amin_all_ties",
        lambda t, x: x.amin(),
        [Const(np.array([[1.0, -3.0, 3.0], [-3.0, 3.0, -1.0]]), grad=True)],
        gradcheck=False,
        why="tied minima: shared evenly, like torch",
    ),
    C("argmax_all", lambda t, x: x.argmax(), [(3, 4, 5)], grad=False),
    C("argmax_dim", lambda t, x, **k: x.argmax(**k), [(3, 4, 5)], dict(dim=1), grad=False),
    C("argmax_negdim_keepdim", lambda t, x, **k: x.argmax(**k), [(3, 4, 5)], dict(dim=-1, keepdim=True), grad=False),
    C("argmin_dim", lambda t, x, **k: x.argmin(**k), [(3, 4, 5)], dict(dim=0), grad=False),
    C("argmax_fn", lambda t, x: t.argmax(x, dim=1), [(3, 4)], grad=False),
    # -------- shape ops
    C("reshape", lambda t, x: x.reshape(6, 10), [(3, 4, 5)]),
    C("reshape_tuple_infer", lambda t, x: x.reshape((2, -1)), [(3, 4, 5)]),
    C("reshape_flat", lambda t, x: x.reshape(-1), [(3, 4, 5)]),
    C("view", lambda t, x: x.view(3, 2, 10), [(3, 4, 5)]),
    C("transpose", lambda t, x: x.transpose(0, 2), [(3, 4, 5)]),
    C("transpose_neg", lambda t, x: x.transpose(-1, -2), [(3, 4, 5)]),
    C("permute", lambda t, x: x.permute(2, 0, 1), [(3, 4, 5)]),
    C("permute_tuple", lambda t, x: x.permute((1, 2, 0)), [(3, 4, 5)]),
    C("unsqueeze", lambda t, x: x.unsqueeze(1), [(3, 4)]),
    C("unsqueeze_neg", lambda t, x: x.unsqueeze(-1), [(3, 4)]),
    C("squeeze_all", lambda t, x: x.squeeze(), [(3, 1, 4, 1)]),
    C("squeeze_dim", lambda t, x: x.squeeze(1), [(3, 1, 4, 1)]),
    C("squeeze_dim_noop", lambda t, x: x.squeeze(0), [(3, 1, 4)]),
    C("flatten", lambda t, x: x.flatten(), [(2, 3, 4)]),
    C("flatten_start", lambda t, x: x.flatten(1), [(2, 3, 4)]),
    C("flatten_range", lambda t, x: x.flatten(0, 1), [(2, 3, 4, 5)]),
    C("expand", lambda t, x: x.expand(3, 4, 5), [(3, 1, 5)]),
    C("expand_new_dims", lambda t, x: x.expand(2, 4, 3), [(4, 1)]),
    C("expand_minus1", lambda t, x: x.expand(2, -1, -1), [(1, 4, 5)]),
    C("contiguous", lambda t, x: x.transpose(0, 1).contiguous(), [(3, 4)]),
    C("repeat", lambda t, x: x.repeat(2, 1, 3), [(2, 3, 4)]),
    C("repeat_new_dims", lambda t, x: x.repeat(2, 1, 3), [(3, 4)]),
    C("cat_dim0", lambda t, x, y: t.cat([x, y], dim=0), [(2, 4), (3, 4)]),
    C("cat_neg", lambda t, x, y, z: t.cat((x, y, z), dim=-1), [(3, 2), (3, 4), (3, 1)]),
    C("stack_dim0", lambda t, x, y: t.stack([x, y], dim=0), [(3, 4), (3, 4)]),
    C("stack_dim1", lambda t, x, y, z: t.stack([x, y, z], dim=1), [(3, 4), (3, 4), (3, 4)]),
    C("stack_neg", lambda t, x, y: t.stack([x, y], dim=-1), [(3, 4), (3, 4)]),
    C("split_int", lambda t, x: x.split(2, dim=1), [(3, 5)]),
    C("split_sizes", lambda t, x: x.split([1, 3], dim=0), [(4, 3)]),
    C("chunk", lambda t, x: x.chunk(3, dim=1), [(2, 6)]),
    C("chunk_uneven", lambda t, x: x.chunk(2, dim=-1), [(2, 5)]),
    C("tril", lambda t, x: x.tril(), [(4, 5)]),
    C("tril_p1", lambda t, x: x.tril(1), [(4, 4)]),
    C("tril_m1_batched", lambda t, x: x.tril(diagonal=-1), [(2, 4, 4)]),
    C("triu", lambda t, x: x.triu(), [(4, 5)]),
    C("triu_p1", lambda t, x: x.triu(1), [(2, 4, 4)]),
    C("triu_m1", lambda t, x: x.triu(-1), [(5, 4)]),
    # -------- dtype conversions (gradient flows back in the input's dtype)
    C("to_float64", lambda t, x: x.to(t.float64) * 2, [(3, 4)]),
    C("double", lambda t, x: x.double(), [(3, 4)]),
    C(
        "float",
        lambda t, x: x.float(),
        [(3, 4)],
        gradcheck=False,
        why="the output is float32: finite differences need float64 throughout",
    ),
    C("long", lambda t, x: (x * 3).long(), [(3, 4)], grad=False),
    C("bool", lambda t, x: x.bool(), [Ties(3, 4)], grad=False),
    C("type_as", lambda t, x, y: x.double().type_as(y) * y, [(3, 4), (3, 4)]),
    # -------- indexing
    C("getitem_int", lambda t, x: x[1], [(3, 4, 5)]),
    C("getitem_negint", lambda t, x: x[-1, 2], [(3, 4, 5)]),
    C("getitem_slice", lambda t, x: x[1:3], [(3, 4, 5)]),
    C("getitem_slice_step", lambda t, x: x[:, ::2, 1:], [(3, 4, 5)]),
    C("getitem_mixed", lambda t, x: x[1:, :-1, 2], [(3, 4, 5)]),
    C("getitem_none", lambda t, x: x[None, :, 1], [(3, 4, 5)]),
    C("getitem_ellipsis", lambda t, x: x[..., 1], [(3, 4, 5)]),
    C("getitem_ellipsis_none", lambda t, x: x[..., None, 1:3], [(3, 4, 5)]),
    C("getitem_negstep", lambda t, x: x[::-1], [(3, 4)], ref=lambda t, x: x.flip(0)),
    C("getitem_negstep2", lambda t, x: x[:, ::-2], [(3, 5)], ref=lambda t, x: x.flip(1)[:, ::2]),
    C("getitem_list_repeated", lambda t, x: x[[0, 2, 0, 0]], [(3, 4)]),
    C("getitem_tensor_repeated", lambda t, x, i: x[i], [(3, 4), Const(IDX2)]),
    C("getitem_tensor_dim1", lambda t, x: x[:, [1, 1, 3]], [(3, 4)]),
    C("getitem_two_arrays", lambda t, x: x[[0, 1, 0], [2, 2, 2]], [(3, 4)]),
    C("getitem_tensor_and_slice", lambda t, x, i: x[i, 1:3], [(3, 4, 5), Const(np.array([2, 0, 2]))]),
    C("getitem_bool_mask", lambda t, x, m: x[m], [(3, 4), Bool(3, 4)]),
    C("getitem_bool_rows", lambda t, x, m: x[m], [(3, 4), Const(np.array([True, False, True]))]),
    C("getitem_compare_mask", lambda t, x: x[x > 0], [(3, 4)]),
    # the backward of getitem as a primitive (so that indexing is differentiable twice): zeros with v put
    # at a basic index, or added at integer-array indices (repeats accumulate)
    C(
        "index_put_repeated",
        lambda t, v: t.ops.IndexPut.apply(v, shape=(3, 4), index=ROWS, advanced=True),
        [(5, 4)],
        ref=lambda t, v: t.zeros((3, 4), dtype=v.dtype, device=v.device).index_put(
            (t.from_numpy(ROWS),), v, accumulate=True
        ),
    ),
    C(
        "index_put_slice",
        lambda t, v: t.ops.IndexPut.apply(v, shape=(3, 4), index=(slice(None), slice(1, 3)), advanced=False),
        [(3, 2)],
        ref=lambda t, v: t.zeros((3, 4), dtype=v.dtype, device=v.device).slice_scatter(v, dim=1, start=1, end=3),
    ),
    # -------- nn.functional
    C("F.linear", lambda t, x, w, b: t.F.linear(x, w, b), [(3, 4), (5, 4), (5,)]),
    C("F.linear_nobias", lambda t, x, w: t.F.linear(x, w), [(3, 4), (5, 4)]),
    C("F.linear_3d", lambda t, x, w, b: t.F.linear(x, w, b), [(2, 3, 4), (5, 4), (5,)]),
    C("F.linear_1d", lambda t, x, w, b: t.F.linear(x, w, b), [(4,), (5, 4), (5,)]),
    C("F.linear_no_input_features", lambda t, x, w, b: t.F.linear(x, w, b), [(3, 0), (2, 0), (2,)]),
    C("F.linear_no_output_features", lambda t, x, w, b: t.F.linear(x, w, b), [(3, 4), (0, 4), (0,)]),
    C("F.relu", lambda t, x: t.F.relu(x), [(2, 3, 4)]),
    C("F.gelu", lambda t, x: t.F.gelu(x), [(2, 3, 4)]),
    C("F.gelu_none", lambda t, x: t.F.gelu(x * 3, approximate="none"), [(2, 3, 4)]),
    C("F.gelu_tanh", lambda t, x: t.F.gelu(x * 3, approximate="tanh"), [(2, 3, 4)]),
    C("F.softmax_last", lambda t, x: t.F.softmax(x, dim=-1), [(2, 3, 4)]),
    C("F.softmax_dim0", lambda t, x: t.F.softmax(x, dim=0), [(2, 3, 4)]),
    C("F.softmax_dim1", lambda t, x: t.F.softmax(x, dim=1), [(2, 3, 4)]),
    C("F.softmax_large", lambda t, x: t.F.softmax(x * 300, dim=-1), [(3, 4)]),
    C("F.softmax_neginf", lambda t, x: t.F.softmax(x, dim=-1), [NegInf(2, 3, 4)]),
    C("F.softmax_neginf_dim1", lambda t, x: t.F.softmax(x, dim=1), [NegInf(2, 3, 4)]),
    C("F.log_softmax_last", lambda t, x: t.F.log_softmax(x, dim=-1), [(2, 3, 4)]),
    C("F.log_softmax_dim0", lambda t, x: t.F.log_softmax(x, dim=0), [(2, 3, 4)]),
    C("F.log_softmax_dim1", lambda t, x: t.F.log_softmax(x, dim=1), [(2, 3, 4)]),
    C("F.log_softmax_large", lambda t, x: t.F.log_softmax(x * 300, dim=-1), [(3, 4)]),
    C(
        "F.log_softmax_neginf",
        lambda t, x: t.F.log_softmax(x, dim=-1),
        [NegInf(2, 3, 4)],
        gradcheck=False,
        why="inputs and outputs hold -inf",
    ),
    C(
        "F.softmax_all_neginf_row",
        lambda t, x: t.F.softmax(x, dim=-1),
        [Const(ALL_NEGINF_ROW, grad=True)],
        gradcheck=False,
        why="row 0 is all -inf: NaN forward and backward there, exactly as torch",
    ),
    C(
        "F.log_softmax_all_neginf_row",
        lambda t, x: t.F.log_softmax(x, dim=-1),
        [Const(ALL_NEGINF_ROW, grad=True)],
        gradcheck=False,
        why="row 0 is all -inf: NaN forward and backward there, exactly as torch",
    ),
    C("F.dropout_p0", lambda t, x: t.F.dropout(x, p=0.0, training=True), [(3, 4, 5)]),
    C("F.dropout_eval", lambda t, x: t.F.dropout(x, p=0.5, training=False), [(3, 4, 5)]),
    C(
        "F.dropout_mask",
        lambda t, x: t.F.dropout(x, p=0.3, training=True, mask=KEEP),
        [(3, 4, 5)],
        ref=lambda t, x: x * torch.from_numpy(KEEP).to(x.device) / (1 - 0.3),
    ),
    C("F.layer_norm_last", lambda t, x, w, b: t.F.layer_norm(x, (4,), w, b), [(2, 3, 4), (4,), (4,)]),
    C("F.layer_norm_noaffine", lambda t, x: t.F.layer_norm(x, (4,)), [(2, 3, 4)]),
    C("F.layer_norm_last2", lambda t, x, w, b: t.F.layer_norm(x, (3, 4), w, b), [(2, 3, 4), (3, 4), (3, 4)]),
    C("F.layer_norm_last2_noaffine", lambda t, x: t.F.layer_norm(x, (3, 4)), [(2, 3, 4)]),
    C("F.layer_norm_eps", lambda t, x, w, b: t.F.layer_norm(x * 1e-2, (5,), w, b, eps=1e-3), [(3, 5), (5,), (5,)]),
    C("F.embedding", lambda t, i, w: t.F.embedding(i, w), [Const(TOKENS), (6, 4)]),
    C(
        "F.embedding_pad",
        lambda t, i, w: t.F.embedding(i, w, padding_idx=0),
        [Const(TOKENS), (6, 4)],
        gradcheck=False,
        why="padding_idx zeroes the pad row's gradient by definition (torch too) although the output reads it",
    ),
    C(
        "F.embedding_freq",
        lambda t, i, w: t.F.embedding(i, w, scale_grad_by_freq=True),
        [Const(TOKENS), (6, 4)],
        gradcheck=False,
        why="scale_grad_by_freq divides each row's gradient by its id's count: torch's convention, not a derivative",
    ),
    C(
        "F.embedding_max_norm",
        lambda t, i, w: t.F.embedding(i, w * 1.0, max_norm=0.8, norm_type=1.5),
        [Const(TOKENS), (6, 4)],
        gradcheck=False,
        why="max_norm rescales the looked-up rows in place outside the graph, so finite differences see the rescale",
    ),
    C("F.cross_entropy", lambda t, x, y, **k: t.F.cross_entropy(x, y, **k), [(5, 4), Const(TARGET)]),
    C("F.cross_entropy_ignore", lambda t, x, y, **k: t.F.cross_entropy(x, y, **k), [(5, 4), Const(TARGET_IGN)]),
    C(
        "F.cross_entropy_ignore1",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET_IGN1)],
        dict(ignore_index=1),
    ),
    C(
        "F.cross_entropy_sum",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET_IGN)],
        dict(reduction="sum"),
    ),
    C(
        "F.cross_entropy_none",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET_IGN)],
        dict(reduction="none"),
    ),
    C(
        "F.cross_entropy_smooth",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET)],
        dict(label_smoothing=0.1),
    ),
    C(
        "F.cross_entropy_smooth_ignore",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET_IGN)],
        dict(label_smoothing=0.1),
    ),
    C(
        "F.cross_entropy_smooth_sum",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET_IGN)],
        dict(label_smoothing=0.1, reduction="sum"),
    ),
    C(
        "F.cross_entropy_smooth_none",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(5, 4), Const(TARGET_IGN)],
        dict(label_smoothing=0.1, reduction="none"),
    ),
    C("F.nll_loss", lambda t, x, y, **k: t.F.nll_loss(x, y, **k), [(5, 4), Const(TARGET)]),
    C("F.nll_loss_ignore", lambda t, x, y, **k: t.F.nll_loss(x, y, **k), [(5, 4), Const(TARGET_IGN)]),
    C(
        "F.nll_loss_sum",
        lambda t, x, y, **k: t.F.nll_loss(x, y, **k),
        [(5, 4), Const(TARGET_IGN)],
        dict(reduction="sum"),
    ),
    C(
        "F.nll_loss_none",
        lambda t, x, y, **k: t.F.nll_loss(x, y, **k),
        [(5, 4), Const(TARGET_IGN1)],
        dict(reduction="none", ignore_index=1),
    ),
    # -------- ties and kinks: PyTorch's subgradient conventions (no finite differences at a kink)
    C(
        "max_all_ties",
        lambda t, x: x.max(),
        [Const(np.array([[1.0, 3.0, 3.0], [0.0, 3.0, -1.0]]), grad=True)],
        gradcheck=False,
        why="tied maxima: the gradient is split evenly among them (torch's convention), not a derivative",
    ),
    C(
        "min_all_ties",
        lambda t, x: x.min(),
        [Const(np.array([[1.0, -3.0, 3.0], [-3.0, 3.0, -1.0]]), grad=True)],
        gradcheck=False,
        why="tied minima: split evenly, like torch",
    ),
    C(
        "max_dim_ties",
        lambda t, x: tuple(x.max(dim=1)),
        [Const(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]]), grad=True)],
        gradcheck=False,
        why="tied maxima along dim: values and the index torch picks (the first)",
    ),
    C("argmax_ties", lambda t, x: x.argmax(dim=-1), [Ties(4, 6)], grad=False),
    C("argmin_ties_all", lambda t, x: x.argmin(), [Ties(4, 6)], grad=False),
    C(
        "maximum_ties",
        lambda t, x, y: t.maximum(x, y),
        [Ties(3, 4), Ties(3, 4)],
        gradcheck=False,
        why="equal operands: torch splits the gradient half and half",
    ),
    C(
        "minimum_ties",
        lambda t, x, y: t.minimum(x, y),
        [Ties(3, 4), Ties(3, 4)],
        gradcheck=False,
        why="equal operands: torch splits the gradient half and half",
    ),
    C("relu_at_0", lambda t, x: x.relu(), [Ties(3, 4)], gradcheck=False, why="relu'(0) = 0 by convention"),
    C("abs_at_0", lambda t, x: x.abs(), [Ties(3, 4)], gradcheck=False, why="abs'(0) = 0 by convention"),
    C(
        "clamp_at_bounds",
        lambda t, x: x.clamp(-1.0, 1.0),
        [Ties(3, 4)],
        gradcheck=False,
        why="at min or max the gradient passes (torch: min <= x <= max)",
    ),
    # -------- more edges
    C("pow_0", lambda t, x: x**0, [(3, 4)]),
    C("rgt_scalar", lambda t, x: 0.5 < x, [(3, 4)], grad=False),
    C("where_scalar_other", lambda t, c, x: t.where(c, x, 0.0), [Bool(3, 4), (3, 4)]),
    C("where_scalar_input", lambda t, c, x: t.where(c, -1.5, x), [Bool(3, 4), (3, 4)]),
    C("split_partial", lambda t, x: x.split(2, dim=1)[0] * 2, [(3, 5)]),
    C("cat_mixed_grad", lambda t, x, y: t.cat([x, y], dim=1), [(2, 3), NoGrad(2, 2)]),
    C("stack_mixed_grad", lambda t, x, y: t.stack([x, y]), [NoGrad(2, 3), (2, 3)]),
    C("getitem_neg_index_array", lambda t, x: x[[-1, 0, -1]], [(3, 4)]),
    C("getitem_0d_tensor", lambda t, x, i: x[i], [(3, 4), Const(np.array(1))]),
    C("getitem_int32_index", lambda t, x, i: x[i], [(3, 4), Const(np.array([2, 2, 0], dtype=np.int32))]),
    C("F.softmax_1d", lambda t, x: t.F.softmax(x, dim=0), [(5,)]),
    C("F.log_softmax_1d", lambda t, x: t.F.log_softmax(x, dim=-1), [(5,)]),
    C(
        "F.layer_norm_constant_row",
        lambda t, x, w, b: t.F.layer_norm(x, (4,), w, b),
        [Const(np.array([[2.0, 2.0, 2.0, 2.0], [0.1, -0.4, 1.2, 0.3]]), grad=True), (4,), (4,)],
    ),
    C(
        "F.embedding_1d_int32",
        lambda t, i, w: t.F.embedding(i, w),
        [Const(np.array([4, 0, 4], dtype=np.int32)), (6, 3)],
    ),
    C("tril_wide_offset", lambda t, x: x.tril(3), [(3, 5)]),
    C("triu_beyond", lambda t, x: x.triu(-4), [(3, 5)]),
    # -------- graphs, not single ops: an input used twice, a diamond, non-contiguous views flowing on
    C("mul_self", lambda t, x: x * x, [(3, 4)]),
    C("add_self", lambda t, x: x + x, [(3, 4)]),
    C("diamond", lambda t, x, y: (x.exp() + x.tanh() * y) * x, [(3, 4), (4,)]),
    C("exp_transposed", lambda t, x: x.transpose(0, 1).exp(), [(3, 4)]),
    C("matmul_transposed", lambda t, x, y: x.T @ y.transpose(0, 1), [(4, 3), (5, 4)]),
    C("softmax_permuted", lambda t, x: t.F.softmax(x.permute(2, 0, 1), dim=-1), [(2, 3, 4)]),
    C("layer_norm_transposed", lambda t, x, w: t.F.layer_norm(x.transpose(0, 1), (3,), w), [(3, 2), (3,)]),
    C("getitem_of_expand", lambda t, x: x.expand(3, 4)[[0, 2, 2], 1:], [(1, 4)]),
    C("sum_of_getitem_steps", lambda t, x: x[:, ::2].sum(dim=0) * x[0, 1::2], [(3, 4)]),
    C("F.linear_noncontig", lambda t, x, w, b: t.F.linear(x.transpose(0, 1), w.T, b), [(4, 3), (4, 5), (5,)]),
    C(
        "tied_embedding_generator",
        lambda t, i, w: t.F.linear(t.F.embedding(i, w, padding_idx=0) * 2.0, w),
        [Const(TOKENS), (6, 4)],
        gradcheck=False,
        why="padding_idx zeroes the pad row's embedding gradient by definition (torch too)",
    ),
    C("tied_embedding_generator_nopad", lambda t, i, w: t.F.linear(t.F.embedding(i, w), w), [Const(TOKENS), (6, 4)]),
    C(
        "F.attention_weights",
        lambda t, q, k: t.F.attention_weights(q, k, scale=0.5),
        [(2, 3, 5), (2, 4, 5)],
        ref=attention_weights_ref,
    ),
    C(
        "F.attention_weights_mask",
        lambda t, q, k, m: t.F.attention_weights(q, k, m, scale=0.5),
        [(2, 3, 5), (2, 4, 5), Const(MASK)],
        ref=attention_weights_ref,
    ),
    C(
        "F.attention_weights_empty_row",
        lambda t, q, k, m: t.F.attention_weights(q, k, m, scale=0.5),
        [(2, 3, 5), (2, 4, 5), Const(MASK_EMPTY_ROW)],
        ref=attention_weights_ref,
    ),
    C(
        "F.attention_weights_heads_default_scale",
        lambda t, q, k, m: t.F.attention_weights(q, k, m),
        [(2, 2, 3, 4), (2, 2, 5, 4), Const(np.arange(5) < 3)],
        ref=lambda t, q, k, m: attention_weights_ref(t, q, k, m, scale=0.5),
    ),
    C(
        "F.scaled_dot_product_attention",
        lambda t, q, k, v: t.F.scaled_dot_product_attention(q, k, v),
        [(2, 3, 4), (2, 5, 4), (2, 5, 3)],
    ),
    C(
        "F.scaled_dot_product_attention_mask_empty_row",
        lambda t, q, k, v, m: t.F.scaled_dot_product_attention(q, k, v, m, scale=0.3),
        [(2, 1, 3, 4), (2, 2, 4, 4), (1, 2, 4, 4), Const(MASK_EMPTY_ROW[:, None])],
    ),
    C(  # the dense path with a learned additive bias: softmax(q k^T * scale + bias), the bias differentiated
        "F.attention_weights_bias",
        lambda t, q, k, b: t.F.attention_weights(q, k, b, scale=0.5),
        [(2, 2, 3, 4), (2, 2, 5, 4), (1, 2, 3, 5)],
        ref=lambda t, q, k, b: t.F.softmax(q @ k.transpose(-2, -1) * 0.5 + b, dim=-1),
    ),
    C(  # a learned additive bias (relative positions, ALiBi): differentiated, broadcast over the batch and heads
        "F.scaled_dot_product_attention_bias",
        lambda t, q, k, v, b: t.F.scaled_dot_product_attention(q, k, v, b),
        [(2, 3, 4, 4), (2, 3, 5, 4), (2, 3, 5, 3), (4, 5)],
    ),
    C(
        "F.scaled_dot_product_attention_bias_heads",
        lambda t, q, k, v, b: t.F.scaled_dot_product_attention(q, k, v, b, scale=0.4),
        [(2, 3, 4, 4), (2, 3, 5, 4), (2, 3, 5, 3), (1, 3, 4, 5)],
    ),
    C(
        "F.scaled_dot_product_attention_bias_batch",
        lambda t, q, k, v, b: t.F.scaled_dot_product_attention(q, k, v, b),
        [(2, 3, 4, 4), (2, 3, 5, 4), (2, 3, 5, 3), (2, 1, 4, 5)],
    ),
    C(
        "attention_like",
        lambda t, q, k, v: t.F.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1) @ v,
        [(2, 3, 4), (2, 5, 4), (2, 5, 4)],
    ),
    # -------- transformer-sized shapes: float32 must still agree to OP_RTOL with longer sums
    C(
        "model_linear",
        lambda t, x, w, b: t.F.linear(x, w, b),
        [(4, 10, 64), (128, 64), (128,)],
        gradcheck=False,
        why="model-sized: 5k inputs make central differences slow; small shapes of the same op are checked",
    ),
    C(
        "model_layer_norm",
        lambda t, x, w, b: t.F.layer_norm(x, (64,), w, b),
        [(4, 10, 64), (64,), (64,)],
        gradcheck=False,
        why="model-sized: slow; small shapes of the same op are checked",
    ),
    C(
        "model_attention",
        lambda t, q, k, v, m: t.F.softmax((q @ k.transpose(-2, -1) / 4.0).masked_fill(m, -inf), dim=-1) @ v,
        [(2, 4, 10, 16), (2, 4, 12, 16), (2, 4, 12, 16), Const(np.arange(12) >= 9)],
        gradcheck=False,
        why="model-sized: slow; small shapes of the same ops are checked",
    ),
    C(
        "model_cross_entropy",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(40, 100), Int((40,), 100)],
        dict(label_smoothing=0.1),
        gradcheck=False,
        why="model-sized: slow; small shapes of the same op are checked",
    ),
    C(
        "model_sum_mean_var",
        lambda t, x: x.var(dim=-1) + x.mean(dim=(0, 1)).sum(),
        [(8, 50, 64)],
        gradcheck=False,
        why="model-sized: slow; small shapes of the same ops are checked",
    ),
    # the (N, C, d) layout torch accepts for per-position targets, a single (C,) row, all rows ignored
    C("F.cross_entropy_NCd", lambda t, x, y, **k: t.F.cross_entropy(x, y, **k), [(3, 4, 5), Const(TARGET_ND)]),
    C(
        "F.cross_entropy_NCd_smooth_none",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(3, 4, 5), Const(TARGET_ND)],
        dict(label_smoothing=0.1, reduction="none"),
    ),
    C(
        "F.cross_entropy_NCd_smooth_sum",
        lambda t, x, y, **k: t.F.cross_entropy(x, y, **k),
        [(3, 4, 5), Const(TARGET_ND)],
        dict(label_smoothing=0.1, reduction="sum"),
    ),
    C("F.cross_entropy_1d", lambda t, x, y: t.F.cross_entropy(x, y), [(4,), Const(np.array(2))]),
    C(
        "F.cross_entropy_all_ignored",
        lambda t, x, y: t.F.cross_entropy(x, y),
        [(2, 4), Const(np.array([-100, -100]))],
        gradcheck=False,
        why="mean over zero rows is 0/0 = NaN, as in torch",
    ),
    C("F.nll_loss_NCd", lambda t, x, y, **k: t.F.nll_loss(x, y, **k), [(3, 4, 5), Const(TARGET_ND)]),
    C(
        "F.nll_loss_NCd_none",
        lambda t, x, y, **k: t.F.nll_loss(x, y, **k),
        [(3, 4, 5), Const(TARGET_ND)],
        dict(reduction="none"),
    ),
]

# -------- the names a PyTorch user reaches for (tensor.py's and nn/functional.py's last sections):
# mm, bmm, norm (its own primitive: gradient 0 at the origin), gather/sort/topk (integer-array indexing,
# so the gradient scatter-adds), the elementwise losses and the loss and activation modules
GATHER_IDX = np.array([[0, 0, 3], [2, 1, 1], [3, 3, 0]])  # (3, 3) into a (3, 4) input, repeats
GATHER_IDX0 = np.array([[2, 0, 2, 1], [2, 2, 0, 0]])  # (2, 4) along dim 0 of a (3, 4) input
ZERO_ROW = np.array([[0.0, 0.0, 0.0], [0.3, -1.2, 0.4]])  # the 2-norm of row 0 is at its kink
TARGET_NEAR_ZERO = np.array([[0.0, 0.0, 1.0], [0.0, 2.5, -1.0]])  # logits exactly 0: BCE is smooth there

CASES += [
    C("mm", lambda t, x, y: x.mm(y), [(3, 4), (4, 5)]),
    C("mm_fn", lambda t, x, y: t.mm(x, y), [(3, 4), (4, 2)]),
    C("bmm", lambda t, x, y: x.bmm(y), [(2, 3, 4), (2, 4, 5)]),
    C("bmm_fn", lambda t, x, y: t.bmm(x, y), [(3, 2, 4), (3, 4, 2)]),
    C("norm", lambda t, x: x.norm(), [(3, 4)]),
    C("norm_fn_dim", lambda t, x: t.norm(x, dim=1), [(3, 4, 2)]),
    C("norm_dim_keepdim", lambda t, x: x.norm(dim=-1, keepdim=True), [(3, 4)]),
    C("norm_fro_dims", lambda t, x: x.norm(p="fro", dim=(0, 2)), [(3, 4, 2)]),
    C("norm_p2_dim", lambda t, x: x.norm(p=2, dim=0), [(3, 4)]),
    C("norm_p1", lambda t, x: x.norm(p=1, dim=1), [Away(3, 4)]),
    C("norm_inf", lambda t, x: x.norm(p=float("inf"), dim=0), [(3, 4)]),
    C("norm_neg_inf", lambda t, x: x.norm(p=-float("inf")), [Away(3, 4)]),
    C(
        "norm_zero_row",
        lambda t, x: x.norm(dim=1),
        [Const(ZERO_ROW, grad=True)],
        gradcheck=False,
        why="row 0 is the origin, the 2-norm's kink: gradient 0 there and second derivative NaN, as torch",
    ),
    C(
        "norm_all_zero",
        lambda t, x: x.norm(),
        [Const(np.zeros((2, 3)), grad=True)],
        gradcheck=False,
        why="the origin, the 2-norm's kink: gradient 0 there and second derivative NaN, as torch",
    ),
    C("gather_dim1", lambda t, x, i: x.gather(1, i), [(3, 4), Const(GATHER_IDX)]),
    C("gather_dim0_fn", lambda t, x, i: t.gather(x, 0, i), [(3, 4), Const(GATHER_IDX0)]),
    C("gather_3d_smaller", lambda t, x, i: t.gather(x, -1, i), [(2, 3, 5), Const(np.array([[[4, 0], [1, 1]]]))]),
    C("sort_values", lambda t, x: x.sort().values, [(3, 5)]),
    C("sort_dim0_desc", lambda t, x: tuple(x.sort(dim=0, descending=True)), [(4, 3)]),
    C("sort_fn", lambda t, x: t.sort(x, dim=1)[0], [(2, 5, 3)]),
    C("sort_ties_stable", lambda t, x: x.sort(stable=True).indices, [Ties(4, 6)], grad=False),
    C("sort_ties_desc_stable", lambda t, x: x.sort(descending=True, stable=True).indices, [Ties(4, 6)], grad=False),
    C("argsort", lambda t, x: x.argsort(dim=0), [(4, 3)], grad=False),
    C("argsort_desc_fn", lambda t, x: t.argsort(x, descending=True), [(4, 3)], grad=False),
    C("topk", lambda t, x: tuple(x.topk(2)), [(3, 5)]),
    C("topk_smallest_dim0", lambda t, x: x.topk(3, dim=0, largest=False).values, [(4, 3)]),
    C("topk_fn", lambda t, x: t.topk(x, 1, dim=1)[0], [(2, 5, 3)]),
    C("einsum_matmul", lambda t, x, y: t.einsum("ij,jk->ik", x, y), [(3, 4), (4, 5)]),
    C("einsum_batched_attention", lambda t, q, k: t.einsum("bhqd, bhkd -> bhqk", q, k), [(2, 2, 3, 4), (2, 2, 5, 4)]),
    C("einsum_three_operands", lambda t, x, y, z: t.einsum("ij,jk,kl->li", x, y, z), [(2, 3), (3, 4), (4, 2)]),
    C("einsum_outer_implicit", lambda t, x, y: t.einsum("j,i", x, y), [(3,), (4,)]),
    C("einsum_sum_transpose", lambda t, x: t.einsum("ijk->ki", x), [(2, 3, 4)]),
    C("einsum_list_full_sum", lambda t, x, y: t.einsum("ij,ij->", [x, y]), [(3, 4), (3, 4)]),
    C("cpu", lambda t, x: x.cpu() * 2, [(3, 4)]),
    C(
        "type_as_float32",
        lambda t, x, y: x.type_as(y.float()),
        [(3, 4), NoGrad(2)],
        gradcheck=False,
        why="the output is float32: finite differences need float64 throughout",
    ),
    C("F.mse_loss", lambda t, x, y: t.F.mse_loss(x, y), [(3, 4), (3, 4)]),
    C("F.mse_loss_sum", lambda t, x, y: t.F.mse_loss(x, y, reduction="sum"), [(3, 4), NoGrad(3, 4)]),
    C("F.mse_loss_none", lambda t, x, y: t.F.mse_loss(x, y, reduction="none"), [(3, 4), (3, 4)]),
    C("F.l1_loss", lambda t, x, y: t.F.l1_loss(x, y), [(3, 4), (3, 4)]),
    C("F.l1_loss_sum", lambda t, x, y: t.F.l1_loss(x, y, reduction="sum"), [(3, 4), NoGrad(3, 4)]),
    C("F.l1_loss_none", lambda t, x, y: t.F.l1_loss(x, y, reduction="none"), [(3, 4), (3, 4)]),
    C("F.bce_with_logits", lambda t, x, y: t.F.binary_cross_entropy_with_logits(x, y), [(3, 4), (3, 4)]),
    C(
        "F.bce_with_logits_large",
        lambda t, x, y: t.F.binary_cross_entropy_with_logits(x * 40, y, reduction="sum"),
        [(3, 4), Pos(3, 4)],
    ),
    C(
        "F.bce_with_logits_at_0",
        lambda t, x, y: t.F.binary_cross_entropy_with_logits(x, y, reduction="none"),
        [Const(TARGET_NEAR_ZERO, grad=True), (2, 3)],
    ),
    C(
        "F.bce_with_logits_weights",
        lambda t, x, y, w, pw: t.F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
        [(2, 3, 4), (2, 3, 4), Arg((3, 1), "pos", grad=False), Arg((4,), "pos", grad=False)],
    ),
    C(
        "F.bce_with_logits_pos_weight_none",
        lambda t, x, y, pw: t.F.binary_cross_entropy_with_logits(x, y, reduction="none", pos_weight=pw),
        [(2, 3, 4), Pos(2, 3, 4), Arg((4,), "pos", grad=False)],
    ),
    C(
        "F.bce_with_logits_pos_weight_large_sum",
        lambda t, x, y, w, pw: t.F.binary_cross_entropy_with_logits(x * 40, y, w, reduction="sum", pos_weight=pw),
        [(3, 4), (3, 4), Arg((4,), "pos", grad=False), Arg((1,), "pos", grad=False)],
    ),
    C(  # torch refuses gradients for weight and pos_weight: its side is the formula written out
        "F.bce_with_logits_weight_grads",
        lambda t, x, y, w, pw: t.F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
        [(2, 3, 4), (2, 3, 4), Arg((3, 1), "pos"), Arg((4,), "pos")],
        ref=lambda t, x, y, w, pw: (-(pw * y * t.F.logsigmoid(x) + (1 - y) * t.F.logsigmoid(-x)) * w).mean(),
    ),
    C("F.logsigmoid", lambda t, x: t.F.logsigmoid(x), [(3, 4)]),
    C("F.logsigmoid_large", lambda t, x: t.F.logsigmoid(x * 40), [(3, 4)]),
    C("F.logsigmoid_at_0", lambda t, x: t.F.logsigmoid(x), [Const(TARGET_NEAR_ZERO, grad=True)]),
    C("F.one_hot", lambda t, i: t.F.one_hot(i, 5), [Int((2, 3), 5)], grad=False),
    C("F.one_hot_inferred", lambda t, i: t.F.one_hot(i), [Const(np.array([0, 3, 1, 3]))], grad=False),
    C("nn.Tanh", lambda t, x: t.nn.Tanh()(x), [(3, 4)]),
    C("nn.Sigmoid", lambda t, x: t.nn.Sigmoid()(x), [(3, 4)]),
    C("nn.Softmax", lambda t, x: t.nn.Softmax(dim=1)(x), [(2, 3, 4)]),
    C("nn.LogSoftmax", lambda t, x: t.nn.LogSoftmax(dim=-1)(x), [(2, 3, 4)]),
    C(
        "nn.CrossEntropyLoss",
        lambda t, x, y: t.nn.CrossEntropyLoss(label_smoothing=0.1)(x, y),
        [(5, 4), Const(TARGET_IGN)],
    ),
    C(
        "nn.CrossEntropyLoss_sum_ignore1",
        lambda t, x, y: t.nn.CrossEntropyLoss(ignore_index=1, reduction="sum")(x, y),
        [(5, 4), Const(TARGET_IGN1)],
    ),
    C("nn.NLLLoss", lambda t, x, y: t.nn.NLLLoss(reduction="none")(x, y), [(5, 4), Const(TARGET)]),
    C("nn.MSELoss", lambda t, x, y: t.nn.MSELoss()(x, y), [(3, 4), (3, 4)]),
    C("nn.L1Loss", lambda t, x, y: t.nn.L1Loss(reduction="sum")(x, y), [(3, 4), (3, 4)]),
    C(
        "nn.BCEWithLogitsLoss",
        lambda t, x, y, pw: t.nn.BCEWithLogitsLoss(pos_weight=pw)(x, y),
        [(3, 4), (3, 4), Const(np.array([0.5, 1.0, 2.0, 3.0]))],
    ),
]

# -------- tensor arguments PyTorch differentiates (clamp's bounds, masked_fill's value), and the
# spellings users reach for: alpha=, rounding_mode=, einsum diagonals and '...', index_select, gather's 0-d rules
SEL = np.array([2, 0, 2, 3])  # repeated: index_select's gradient accumulates
CASES += [
    C("clamp_tensor_bounds", lambda t, x, lo, hi: t.clamp(x, lo, hi), [(3, 4), (3, 4), (3, 4)]),
    C("clamp_tensor_bounds_method", lambda t, x, lo, hi: x.clamp(min=lo, max=hi), [(2, 3, 4), (3, 1), (4,)]),
    C("clamp_tensor_min", lambda t, x, lo: x.clamp(min=lo), [(3, 4), (4,)]),
    C("clamp_tensor_max", lambda t, x, hi: t.clamp(x, max=hi), [(3, 4), (3, 1)]),
    C(
        "clamp_tensor_min_number_max",
        lambda t, x, lo: x.clamp(lo, 0.4),
        [(3, 4), (3, 4)],
        ref=lambda t, x, lo: x.clamp(lo, t.tensor(0.4, dtype=x.dtype, device=x.device)),
        why="torch takes both bounds as numbers or both as tensors; minitensor also takes one of each",
    ),
    C("clamp_tensor_bounds_grow_input", lambda t, x, lo, hi: t.clamp(x, lo, hi), [(4,), (3, 4), (3, 1)]),
    C("clamp_tensor_int_bound", lambda t, x, hi: t.clamp(x, max=hi), [(3, 4), Int((3, 4), 2)]),
    C(
        "clamp_tensor_bounds_ties",
        lambda t, x, lo, hi: t.clamp(x, lo, hi),
        [Ties(4, 5), Ties(4, 5), Ties(4, 5)],
        gradcheck=False,
        why="ties of x with a bound, and crossed bounds (min > max gives max): torch's conventions, no derivative",
    ),
    C("masked_fill_tensor_value", lambda t, x, m, v: x.masked_fill(m, v), [(2, 3, 4), Bool(2, 3, 4), ()]),
    C("masked_fill_tensor_value_fn", lambda t, x, m, v: t.masked_fill(x, m, v), [(3, 4), Bool(2, 1, 4), ()]),
    C("masked_fill_tensor_value_only", lambda t, x, m, v: x.masked_fill(m, v), [NoGrad(3, 4), Bool(3, 4), ()]),
    C("add_alpha", lambda t, x, y: t.add(x, y, alpha=2.5), [(3, 4), (4,)]),
    C("add_alpha_method_int", lambda t, x, y: x.add(y, alpha=-3), [(3, 4), (3, 4)]),
    C("add_alpha_scalar_other", lambda t, x: t.add(x, 1.5, alpha=2), [(3, 4)]),
    C("sub_alpha", lambda t, x, y: t.sub(x, y, alpha=0.5), [(3, 4), (3, 1)]),
    C("sub_alpha_method", lambda t, x, y: x.sub(y, alpha=-1.25), [(3, 4), (3, 4)]),
    C("add_alpha_int", lambda t, x, y: t.add(x, y, alpha=3), [Int((3, 4), 5), Int((4,), 5)], grad=False),
    C("add_alpha_inplace", lambda t, x, y: x.clone().add_(y, alpha=2.5), [NoGrad(3, 4), NoGrad(3, 4)], grad=False),
    C(
        "sub_alpha_inplace",
        lambda t, x, y: x.clone().sub_(y, alpha=-2),
        [
            NoGrad(3, 4),
            NoGrad(
                4,
            ),
        ],
        grad=False,
    ),
    C("div_trunc", lambda t, x, y: t.div(x * 4, y, rounding_mode="trunc"), [(3, 4), Away(3, 4)]),
    C(
        "div_floor",
        lambda t, x, y: x.mul(4).div(y, rounding_mode="floor"),
        [
            (3, 4),
            Away(
                4,
            ),
        ],
    ),
    C("div_floor_scalar", lambda t, x: t.div(x * 4, -1.5, rounding_mode="floor"), [(3, 4)]),
    C("div_none", lambda t, x, y: t.div(x, y, rounding_mode=None), [(3, 4), Away(3, 4)]),
    C("div_trunc_int", lambda t, x, y: t.div(x - 5, y + 1, rounding_mode="trunc"), [Int((3, 4), 10), Int((4,), 4)]),
    C(
        "div_floor_int",
        lambda t, x, y: t.div(x - 5, y - 5, rounding_mode="floor"),
        [Int((3, 4), 10), Const(np.array([-3, -1, 2, 4]))],
    ),
    C(
        "div_floor_inplace",
        lambda t, x, y: x.clone().div_(y, rounding_mode="floor"),
        [
            NoGrad(3, 4),
            NoGrad(
                4,
            ),
        ],
        grad=False,
    ),
    C("einsum_diagonal", lambda t, x: t.einsum("ii->i", x), [(4, 4)]),
    C("einsum_trace", lambda t, x: t.einsum("ii->", x), [(4, 4)]),
    C("einsum_trace_implicit", lambda t, x: t.einsum("ii", x), [(3, 3)]),
    C("einsum_diagonal_sum", lambda t, x: t.einsum("iij->j", x), [(3, 3, 2)]),
    C("einsum_diagonal_batched", lambda t, x, y: t.einsum("bii,bj->bij", x, y), [(2, 3, 3), (2, 4)]),
    C("einsum_diagonal_apart", lambda t, x: t.einsum("iji->ij", x), [(3, 2, 3)]),
    C("einsum_ellipsis_matmul", lambda t, x, y: t.einsum("...ij,...jk->...ik", x, y), [(2, 3, 4), (4, 5)]),
    C("einsum_ellipsis_implicit", lambda t, x, y: t.einsum("i...,i", x, y), [(3, 2, 4), (3,)]),
    C("einsum_ellipsis_summed", lambda t, x: t.einsum("i...->", x), [(3, 2)]),
    C("einsum_size1_broadcast", lambda t, x, y: t.einsum("ij,jk->ik", x, y), [(2, 1), (3, 4)]),
    C("index_select", lambda t, x, i: x.index_select(1, i), [(3, 4), Const(SEL)]),
    C("index_select_fn_dim0", lambda t, x, i: t.index_select(x, 0, i), [(4, 2, 3), Const(SEL)]),
    C("index_select_0d_index", lambda t, x, i: t.index_select(x, -1, i), [(3, 4), Const(np.array(2))]),
    C("index_select_0d_input", lambda t, x, i: x.index_select(0, i), [(), Const(np.array([0]))]),
    C("gather_0d_input", lambda t, x, i: t.gather(x, 0, i), [(), Const(np.array([0, 0, 0]))]),
    C("gather_0d_index", lambda t, x, i: x.gather(0, i), [(5,), Const(np.array(3))]),
    C("gather_0d_both", lambda t, x, i: t.gather(x, 0, i), [(), Const(np.array(0))]),
    C("gather_empty_index", lambda t, x, i: t.gather(x, 0, i), [(5,), Const(np.zeros((2, 0), dtype=np.int64))]),
    C("cat_legacy_empty", lambda t, x, y: t.cat([x, y], dim=1), [(0,), (3, 2)]),
]

# -------- per-class weight= on cross_entropy / nll_loss, and cross_entropy with class-probability targets.
# Class indices: weight is a constant of the input's dtype (torch does not differentiate it), and 'mean' divides
# by the sum of w[target] over the rows not ignored. Probabilities (a float target of the input's shape, here
# unnormalised, as torch allows): the target and the weight are differentiated, and 'mean' divides by the rows.
W4 = Arg((4,), "pos", grad=False)  # one weight per class of a (., 4, ...) input, in [0.5, 2)
PROBS = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 1.0, 0.0], [0.25] * 4, [0.5, 0.0, 0.0, 0.5]])


def _ce(t, x, y, *w, **k):
    return t.F.cross_entropy(x, y, *w, **k)


def _nll(t, x, y, *w, **k):
    return t.F.nll_loss(x, y, *w, **k)


CASES += [
    C("F.cross_entropy_weight", _ce, [(5, 4), Const(TARGET_IGN), W4]),
    C("F.cross_entropy_weight_sum", _ce, [(5, 4), Const(TARGET_IGN), W4], dict(reduction="sum")),
    C("F.cross_entropy_weight_none", _ce, [(5, 4), Const(TARGET_IGN), W4], dict(reduction="none")),
    C("F.cross_entropy_weight_ignore1", _ce, [(5, 4), Const(TARGET_IGN1), W4], dict(ignore_index=1)),
    C("F.cross_entropy_weight_smooth", _ce, [(5, 4), Const(TARGET_IGN), W4], dict(label_smoothing=0.2)),
    C(
        "F.cross_entropy_weight_smooth_none",
        _ce,
        [(5, 4), Const(TARGET_IGN), W4],
        dict(label_smoothing=0.2, reduction="none"),
    ),
    C("F.cross_entropy_weight_smooth_all", _ce, [(5, 4), Const(TARGET), W4], dict(label_smoothing=1.0)),
    C("F.cross_entropy_weight_NCd_smooth", _ce, [(3, 4, 5), Const(TARGET_ND), W4], dict(label_smoothing=0.1)),
    C("F.cross_entropy_weight_NCd_none", _ce, [(3, 4, 5), Const(TARGET_ND), W4], dict(reduction="none")),
    C("F.cross_entropy_weight_1d", _ce, [(4,), Const(np.array(2)), W4], dict(label_smoothing=0.1)),
    C("F.cross_entropy_probs", _ce, [(5, 4), Const(PROBS, grad=True)]),
    C("F.cross_entropy_probs_unnormalised", _ce, [(5, 4), Pos(5, 4)], dict(reduction="sum")),
    C("F.cross_entropy_probs_none", _ce, [(5, 4), Pos(5, 4)], dict(reduction="none")),
    C("F.cross_entropy_probs_smooth", _ce, [(5, 4), Const(PROBS, grad=True)], dict(label_smoothing=0.2)),
    C("F.cross_entropy_probs_weight", _ce, [(5, 4), Pos(5, 4), Pos(4)]),
    C("F.cross_entropy_probs_weight_sum", _ce, [(5, 4), Pos(5, 4), Pos(4)], dict(reduction="sum")),
    C(
        "F.cross_entropy_probs_weight_smooth_none",
        _ce,
        [(5, 4), Pos(5, 4), Pos(4)],
        dict(label_smoothing=0.3, reduction="none"),
    ),
    C("F.cross_entropy_probs_NCd_weight_smooth", _ce, [(3, 4, 5), Pos(3, 4, 5), Pos(4)], dict(label_smoothing=0.1)),
    C("F.cross_entropy_probs_NCd_none", _ce, [(3, 4, 5), Pos(3, 4, 5)], dict(reduction="none")),
    C("F.cross_entropy_probs_1d_weight", _ce, [(4,), Pos(4), Pos(4)], dict(reduction="none")),
    C("F.cross_entropy_probs_ignore_negative", _ce, [(5, 4), Pos(5, 4)], dict(ignore_index=-1)),
    C("F.nll_loss_weight", _nll, [(5, 4), Const(TARGET_IGN), W4]),
    C("F.nll_loss_weight_sum", _nll, [(5, 4), Const(TARGET_IGN), W4], dict(reduction="sum")),
    C("F.nll_loss_weight_none_ignore1", _nll, [(5, 4), Const(TARGET_IGN1), W4], dict(reduction="none", ignore_index=1)),
    C("F.nll_loss_weight_NCd", _nll, [(3, 4, 5), Const(TARGET_ND), W4]),
    C("F.nll_loss_weight_1d", _nll, [(4,), Const(np.array(1)), W4], dict(reduction="none")),
    C(
        "nn.CrossEntropyLoss_weight",
        lambda t, x, y, w: t.nn.CrossEntropyLoss(weight=w, ignore_index=1, label_smoothing=0.1)(x, y),
        [(5, 4), Const(TARGET_IGN1), W4],
    ),
    C(
        "nn.CrossEntropyLoss_probs_weight",
        lambda t, x, y, w: t.nn.CrossEntropyLoss(weight=w)(x, y),
        [(5, 4), Pos(5, 4), Pos(4)],
    ),
    C(
        "nn.NLLLoss_weight",
        lambda t, x, y, w: t.nn.NLLLoss(weight=w, reduction="sum")(x, y),
        [(5, 4), Const(TARGET_IGN), W4],
    ),
]

# -------- the other p-norms and the nuclear norm (torch.norm / Tensor.norm): PNorm for every finite p but 1 and 2
# (p = 0 counts the nonzeros: no gradient, as torch), and SVDVals with its SingularVectors for 'nuc'
ZERO_ENTRY = np.array([[0.0, 0.7, -1.3], [0.0, 0.0, 0.0], [1.1, -0.6, 0.9]])  # a zero entry, and a zero row
RANK_ONE = np.array([[1.0, 2.0], [2.0, 4.0]])  # singular values 5 and 0
CASES += [
    C("norm_p3_dim", lambda t, x: x.norm(p=3, dim=1), [(3, 4)]),
    C("norm_p3_all", lambda t, x: t.norm(x, 3), [(2, 3, 2)]),
    C("norm_p1_5_keepdim", lambda t, x: t.norm(x, 1.5, -1, True), [Away(2, 3, 4)]),
    C("norm_p2_5_dims", lambda t, x: x.norm(p=2.5, dim=(0, 2)), [(3, 2, 4)]),
    C("norm_p0_5", lambda t, x: x.norm(p=0.5), [Away(3, 4)]),
    C("norm_neg1_dim", lambda t, x: x.norm(p=-1, dim=0), [Away(3, 4)]),
    C("norm_neg2_keepdim", lambda t, x: t.norm(x, -2, 1, True), [Away(3, 4)]),
    C("norm_neg0_5", lambda t, x: x.norm(p=-0.5), [Away(2, 3)]),
    C("norm_p3_0d", lambda t, x: t.norm(x, 3, 0, True), [Away()]),
    C("norm_p0", lambda t, x: t.norm(x, 0, 1), [Const(ZERO_ENTRY, grad=True)]),
    C("norm_p0_dtype", lambda t, x: x.norm(p=0, dtype=t.float64), [Const(ZERO_ENTRY, grad=True)]),
    C(
        "norm_p3_zero_entries",
        lambda t, x: x.norm(p=3, dim=1),
        [Const(ZERO_ENTRY, grad=True)],
        gradcheck=False,
        why="row 1 is the origin, the p-norm's kink: gradient 0 there (and its derivative NaN), as torch",
    ),
    C(
        "norm_p1_5_zero_entries",
        lambda t, x: x.norm(p=1.5, dim=1),
        [Const(ZERO_ENTRY, grad=True)],
        gradcheck=False,
        why="|x|^0.5 at a zero entry: gradient 0 there, second derivative infinite, as torch",
    ),
    C(
        "norm_p0_5_zero_entries",
        lambda t, x: x.norm(p=0.5, dim=1),
        [Const(ZERO_ENTRY, grad=True)],
        gradcheck=False,
        why="p < 1 at a zero entry: torch's gradient 0 there (the derivative is infinite)",
    ),
    C(
        "norm_neg1_zero_entries",
        lambda t, x: x.norm(p=-1, dim=1),
        [Const(ZERO_ENTRY, grad=True)],
        gradcheck=False,
        why="a zero entry makes a negative-p norm 0, and its gradient 0 everywhere (torch's): not differentiable there",
    ),
    C("norm_nuc", lambda t, x: x.norm(p="nuc"), [(4, 3)]),
    C("norm_nuc_wide", lambda t, x: t.norm(x, "nuc"), [(2, 5)]),
    C("norm_nuc_dims_keepdim", lambda t, x: t.norm(x, "nuc", (2, 0), True), [(3, 2, 4)]),
    C("norm_nuc_batched", lambda t, x: x.norm(p="nuc", dim=(-2, -1)), [(2, 3, 3)]),
    # the nuclear norm's gradient U V^T as the output: its own gradient is the norm's second derivative, which runs
    # through SingularVectors (the one spelling that reaches it)
    C(
        "norm_nuc_gradient",
        lambda t, x: t.autograd.grad(x.norm(p="nuc"), x, create_graph=True)[0],
        [(3, 4)],
        gradcheck=False,
        why="finite differences run without grad mode, where autograd.grad has no graph; norm_nuc's gradgradcheck "
        "checks this derivative",
    ),
    C(
        "norm_nuc_rank_one",
        lambda t, x: x.norm(p="nuc"),
        [Const(RANK_ONE, grad=True)],
        gradcheck=False,
        why="a zero singular value: the gradient U V^T is a subgradient (LAPACK's null-space vectors; NumPy's and "
        "torch's agree here), and the norm is not differentiable there",
    ),
    # memory formats (layout.py): a layout only, values and gradients pass unchanged
    C("to_channels_last", lambda t, x: x.to(memory_format=t.channels_last) * 2, [(2, 3, 4, 5)]),
    C("to_channels_last_3d_double", lambda t, x: x.double(memory_format=t.channels_last_3d).exp(), [(2, 3, 2, 2, 3)]),
    C("to_copy_contiguous", lambda t, x: x.mT.to(x, False, True, memory_format=t.contiguous_format), [(3, 4)]),
    # devices (ops/device.py): a round trip through the fake CUDA device, beside x itself, so two paths reach x
    C("to_fake_cuda_and_back", lambda t, x: fake_cuda_round_trip(x) * x, [(3, 4)], ref=lambda t, x: x * x),
]

# -------- convolution and pooling (ops/convolution.py, ops/pooling.py): conv as im2col and a product, its linear pair
# unfold/fold, max pooling's argmax routing, average pooling's divisors; torch's argument spellings
CASES += [
    C(
        "F.conv2d",
        lambda t, x, w, b: t.F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
        [(2, 4, 7, 6), (6, 2, 3, 2), (6,)],
    ),
    C("F.conv2d_same_nobias", lambda t, x, w: t.F.conv2d(x, w, padding="same"), [(2, 3, 5, 6), (4, 3, 2, 3)]),
    C("F.conv2d_unbatched", lambda t, x, w, b: t.F.conv2d(x, w, b, stride=2), [(3, 6, 5), (2, 3, 3, 3), (2,)]),
    C(
        "F.conv1d",
        lambda t, x, w, b: t.F.conv1d(x, w, b, padding=2, dilation=2, groups=3),
        [(2, 3, 9), (6, 1, 3), (6,)],
    ),
    C("F.conv1d_valid_stride", lambda t, x, w: t.F.conv1d(x, w, stride=3, padding="valid"), [(2, 4, 11), (5, 4, 2)]),
    C("F.max_pool2d", lambda t, x: t.F.max_pool2d(x, 3, stride=2, padding=1), [(2, 3, 7, 6)]),
    C("F.max_pool2d_ceil_dilation", lambda t, x: t.F.max_pool2d(x, (2, 3), (2, 1), (1, 1), 2, True), [(2, 2, 8, 7)]),
    C("F.max_pool2d_unbatched", lambda t, x: t.F.max_pool2d(x, 2), [(3, 5, 4)]),
    C(
        "F.max_pool2d_ties",
        lambda t, x: t.F.max_pool2d(x, 2, stride=1),
        [Ties(2, 2, 4, 5)],
        gradcheck=False,
        why="tied maxima: the gradient goes to the first maximum of each window (torch's choice), a subgradient",
    ),
    C("F.max_pool1d", lambda t, x: t.F.max_pool1d(x, 3, stride=2, padding=1, ceil_mode=True), [(2, 3, 8)]),
    C("F.avg_pool2d", lambda t, x: t.F.avg_pool2d(x, 3, stride=2, padding=1), [(2, 3, 7, 6)]),
    C(
        "F.avg_pool2d_ceil_exclude_pad",
        lambda t, x: t.F.avg_pool2d(x, (3, 2), 2, (1, 1), ceil_mode=True, count_include_pad=False),
        [(2, 2, 8, 7)],
    ),
    C("F.avg_pool2d_ceil_include_pad", lambda t, x: t.F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [(2, 2, 8, 7)]),
    C("F.avg_pool2d_divisor", lambda t, x: t.F.avg_pool2d(x, 2, 1, divisor_override=3), [(2, 3, 5, 4)]),
    C("F.avg_pool1d", lambda t, x: t.F.avg_pool1d(x, 4, 3, 2, count_include_pad=False), [(2, 3, 10)]),
    C("F.unfold", lambda t, x: t.F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), [(2, 3, 6, 7)]),
    C("F.fold", lambda t, x: t.F.fold(x, (5, 6), 2, padding=1, stride=(2, 1)), [(2, 8, 21)]),
]


# -------- the recurrent layers' time loops (ops/recurrent.py: LSTMLayer, GRULayer, RNNLayer) through nn.LSTM, nn.GRU
# and nn.RNN with the case's weights (functional_call, by torch's parameter names in order): the output and the final
# states in one vector, so that every one gets a gradient
def recurrent_outputs(t, kind, x, *state_and_weights, **kw):
    module = getattr(t.nn, kind)(3, 4, dtype=x.dtype, **kw)
    names = [name for name, _ in module.named_parameters()]
    state, weights = state_and_weights[: -len(names)], state_and_weights[-len(names) :]
    y, final = t.func.functional_call(module, dict(zip(names, weights)), (x, state if kind == "LSTM" else state[0]))
    return t.cat([y.reshape(-1), *(s.reshape(-1) for s in (final if kind == "LSTM" else (final,)))])


def recurrent_outputs_native(t, *args, **kw):
    """recurrent_outputs on torch with oneDNN off: its float32 LSTM (mkldnn_rnn_layer) has no forward-mode AD."""
    with torch.backends.mkldnn.flags(enabled=False):
        return recurrent_outputs(t, *args, **kw)


_NATIVE = "torch's float32 LSTM runs oneDNN, which has no forward-mode AD: the reference runs torch's native kernel"


def _layer(G, width, bias=True):
    """One layer and direction's weight_ih, weight_hh (and bias_ih, bias_hh) shapes, G gates of 4 units."""
    return [(G * 4, width), (G * 4, 4), *([(G * 4,)] * 2 if bias else [])]


CASES += [
    C(
        "nn.LSTM",
        lambda t, *a: recurrent_outputs(t, "LSTM", *a),
        [(5, 2, 3), (1, 2, 4), (1, 2, 4), *_layer(4, 3)],
        ref=lambda t, *a: recurrent_outputs_native(t, "LSTM", *a),
        why=_NATIVE,
    ),
    C(
        "nn.LSTM_two_layers_bidirectional_batch_first",
        lambda t, *a: recurrent_outputs(t, "LSTM", *a, num_layers=2, bidirectional=True, batch_first=True),
        [(2, 4, 3), (4, 2, 4), (4, 2, 4), *_layer(4, 3) * 2, *_layer(4, 8) * 2],
        ref=lambda t, *a: recurrent_outputs_native(t, "LSTM", *a, num_layers=2, bidirectional=True, batch_first=True),
        why=_NATIVE,
    ),
    C(
        "nn.LSTM_no_bias",
        lambda t, *a: recurrent_outputs(t, "LSTM", *a, bias=False),
        [(4, 2, 3), (1, 2, 4), (1, 2, 4), *_layer(4, 3, False)],
        ref=lambda t, *a: recurrent_outputs_native(t, "LSTM", *a, bias=False),
        why=_NATIVE,
    ),
    C("nn.GRU", lambda t, *a: recurrent_outputs(t, "GRU", *a), [(5, 2, 3), (1, 2, 4), *_layer(3, 3)]),
    C(
        "nn.GRU_two_layers_bidirectional_no_bias",
        lambda t, *a: recurrent_outputs(t, "GRU", *a, num_layers=2, bidirectional=True, bias=False),
        [(4, 2, 3), (4, 2, 4), *_layer(3, 3, False) * 2, *_layer(3, 8, False) * 2],
    ),
    C("nn.RNN", lambda t, *a: recurrent_outputs(t, "RNN", *a), [(5, 2, 3), (1, 2, 4), *_layer(1, 3)]),
    C(
        "nn.RNN_relu_bidirectional",
        lambda t, *a: recurrent_outputs(t, "RNN", *a, nonlinearity="relu", bidirectional=True),
        [(5, 2, 3), (2, 2, 4), *_layer(1, 3) * 2],
    ),
]

# The decoder-only models' primitives: RMSNorm (torch's F.rms_norm) and the rotary embedding in Hugging Face Llama's
# rotate-half layout (torch has no function: `ref` writes transformers' apply_rotary_pos_emb). Angle tables for
# positions 0..4 of a head of width 6, as the models build them (each half's angles repeated).
_ROPE_ANGLES = np.arange(5.0)[:, None] * 10000.0 ** (-np.arange(0, 6, 2) / 6)  # (T, Dh/2)
ROPE_COS = np.cos(np.concatenate([_ROPE_ANGLES, _ROPE_ANGLES], axis=-1))  # (T, Dh)
ROPE_SIN = np.sin(np.concatenate([_ROPE_ANGLES, _ROPE_ANGLES], axis=-1))


def rotary_ref(t, x):
    """transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)."""
    cos, sin = (torch.tensor(a, dtype=x.dtype) for a in (ROPE_COS, ROPE_SIN))
    x1, x2 = x[..., :3], x[..., 3:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rotary_mt(t, x):
    return t.F.rotary_embedding(x, ROPE_COS.astype(x.dtype), ROPE_SIN.astype(x.dtype))


CASES += [
    C("F.rms_norm_last", lambda t, x, w: t.F.rms_norm(x, (4,), w, eps=1e-6), [(2, 3, 4), (4,)]),
    C("F.rms_norm_noaffine", lambda t, x: t.F.rms_norm(x, (4,)), [(2, 3, 4)]),
    C("F.rms_norm_last2", lambda t, x, w: t.F.rms_norm(x, (3, 4), w, eps=1e-5), [(2, 3, 4), (3, 4)]),
    C("F.rms_norm_small", lambda t, x, w: t.F.rms_norm(x * 1e-2, (5,), w, eps=1e-3), [(3, 5), (5,)]),
    C("F.rotary_embedding", rotary_mt, [(2, 3, 5, 6)], ref=rotary_ref),
    C(
        "F.rotary_embedding_then_square",
        lambda t, x: rotary_mt(t, x) ** 2,
        [(5, 6)],
        ref=lambda t, x: rotary_ref(t, x) ** 2,
    ),
    C("F.silu", lambda t, x: t.F.silu(x), [(3, 4)]),
]

# Batch normalisation (ops/batch_norm.py): the batch's statistics per channel in training (with and without the running
# statistics to update, an input of (N, C), two values per channel: the normalisation's short form), and the running
# statistics' affine map in evaluation.
RUNNING_MEAN = np.array([0.3, -0.2, 0.1])
RUNNING_VAR = np.array([0.5, 1.5, 2.0])
CASES += [
    C(
        "F.batch_norm_train",
        lambda t, x, w, b: t.F.batch_norm(x, None, None, w, b, training=True),
        [(4, 3, 2, 2), (3,), (3,)],
    ),
    C(
        "F.batch_norm_train_running",
        lambda t, x, m, v, w, b: t.F.batch_norm(x, m.clone(), v.clone(), w, b, True, 0.3, 1e-3),  # updates copies
        [(5, 3), Const(RUNNING_MEAN), Const(RUNNING_VAR), (3,), (3,)],
    ),
    C("F.batch_norm_train_noaffine", lambda t, x: t.F.batch_norm(x, None, None, training=True), [(4, 3, 5)]),
    C(
        "F.batch_norm_train_two_values",  # a large eps: with 1e-5 the second derivative is ill-conditioned in float32
        lambda t, x, w: t.F.batch_norm(x, None, None, w, training=True, eps=0.5),
        [(2, 3), (3,)],
    ),
    C(
        "F.batch_norm_eval",
        lambda t, x, m, v, w, b: t.F.batch_norm(x, m, v, w, b, eps=1e-3),
        [(4, 3, 5), Const(RUNNING_MEAN), Const(RUNNING_VAR), (3,), (3,)],
    ),
]


def remainder_ref(a, b):
    """torch.remainder's values with its derivatives da = 1, db = -floor(a / b) spelled in ops that torch's forward
    mode and number-first forms support (its remainder has neither a forward-mode rule nor a gradient for a number
    a)."""
    value = torch.remainder(a.detach() if torch.is_tensor(a) else a, b.detach() if torch.is_tensor(b) else b)
    quotient = torch.floor(torch.as_tensor(a).detach() / torch.as_tensor(b).detach())
    da = a - a.detach() if torch.is_tensor(a) else 0
    db = (b - b.detach()) * quotient if torch.is_tensor(b) else 0
    return value + da - db


# -------- moving entries along a dim, scans, scatter, remainder (cumprod of zeros: tests/minitensor/ops/test_scan.py)
SCATTER_IDX = np.array([[0, 2, 1], [2, 0, 3]])  # (2, 3) into a (4, 3) input along dim 0: no place named twice
SCATTER_ADD_IDX = np.array([[0, 2, 0, 1], [0, 0, 3, 3]])  # places named twice along dim 1: the values add
CASES += [
    C("roll", lambda t, x: t.roll(x, 2, 1), [(3, 5)]),
    C("roll_dims", lambda t, x: x.roll((1, -4), (0, 2)), [(2, 3, 5)]),
    C("roll_flat", lambda t, x: t.roll(x, -3), [(3, 4)]),
    C("narrow", lambda t, x: x.narrow(1, 1, 3), [(3, 5)]),
    C("narrow_from_end", lambda t, x: t.narrow(x, 0, -2, 2), [(4, 3)]),
    C("flip", lambda t, x: t.flip(x, (0, 2)), [(2, 3, 4)]),
    C("flip_method", lambda t, x: x.flip(1), [(3, 4)]),
    C("cumsum", lambda t, x: t.cumsum(x, 1), [(3, 5)]),
    C("cumsum_method_last", lambda t, x: x.cumsum(-1), [(2, 3, 4)]),
    C("cumsum_int", lambda t, x: t.cumsum(x, 0), [Int((4, 3), 9)]),
    C("cumprod", lambda t, x: t.cumprod(x, 1), [Away(3, 5)]),
    C("cumprod_dim0", lambda t, x: x.cumprod(0), [Away(4, 3)]),
    C("repeat_interleave", lambda t, x: x.repeat_interleave(2, dim=1), [(3, 4)]),
    C("repeat_interleave_counts", lambda t, x: t.repeat_interleave(x, t.tensor([1, 0, 3]), dim=0), [(3, 2)]),
    C("repeat_interleave_flat", lambda t, x: t.repeat_interleave(x, 3), [(2, 2)]),
    C("rsqrt_fn", lambda t, x: t.rsqrt(x), [Pos(3, 4)]),
    C("remainder", lambda t, x, y: x * 3 % y, [(3, 4), Away(3, 4)], ref=lambda t, x, y: remainder_ref(x * 3, y)),
    C(
        "remainder_broadcast",
        lambda t, x, y: t.remainder(x * 3, y),
        [(2, 3, 4), Away(4)],
        ref=lambda t, x, y: remainder_ref(x * 3, y),
    ),
    C("remainder_scalar", lambda t, x: x * 3 % -1.5, [(3, 4)], ref=lambda t, x: remainder_ref(x * 3, -1.5)),
    C("rmod_scalar", lambda t, x: 2.5 % x, [Away(3, 4)], ref=lambda t, x: remainder_ref(2.5, x)),
    C("remainder_int", lambda t, x, y: (x - 5) % (y - 5), [Int((3, 4), 10), Const(np.array([-3, -1, 2, 4]))]),
    C(
        "floordiv",
        lambda t, x, y: x * 4 // y,
        [(3, 4), Away(3, 4)],
        ref=lambda t, x, y: t.div(x * 4, y, rounding_mode="floor"),
    ),
    C("floordiv_int", lambda t, x: (x - 5) // 3, [Int((3, 4), 10)]),
    C("rfloordiv_int", lambda t, x: -7 // (x + 1), [Int((3, 4), 4)]),
    C("scatter", lambda t, x, s, i: t.scatter(x, 0, i, s), [(4, 3), (2, 3), Const(SCATTER_IDX)]),
    C("scatter_method_dim1", lambda t, x, s, i: x.scatter(1, i, s), [(3, 4), (3, 2), Const(SCATTER_IDX.T.copy())]),
    C("scatter_value", lambda t, x, i: t.scatter(x, 0, i, value=-2.0), [(4, 3), Const(SCATTER_IDX)]),
    C("scatter_add", lambda t, x, s, i: t.scatter_add(x, 1, i, s), [(2, 5), (2, 4), Const(SCATTER_ADD_IDX)]),
    C("index_fill", lambda t, x, i: t.index_fill(x, 1, i, -1.5), [(3, 4), Const(np.array([0, 2, 0]))]),
    C("index_fill_tensor_value", lambda t, x, v: x.index_fill(0, t.tensor([1]), v), [(3, 4), ()]),
]

# -------- F.pad in its modes, kl_div
KL_TARGET_ZEROS = np.array([[0.5, 0.0, 0.3, 0.2, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0], [0.2, 0.2, 0.2, 0.2, 0.2]])
CASES += [
    C("F.pad_constant", lambda t, x: t.F.pad(x, (1, 2)), [(2, 3, 4)]),
    C("F.pad_constant_cut_value", lambda t, x: t.F.pad(x, (1, -1, 2, 0), value=1.5), [(2, 3, 4)]),
    C("F.pad_reflect", lambda t, x: t.F.pad(x, (2, 1), mode="reflect"), [(2, 3, 5)]),
    C("F.pad_reflect_2d", lambda t, x: t.F.pad(x, (1, 2, 2, 1), mode="reflect"), [(2, 3, 4, 5)]),
    C("F.pad_replicate", lambda t, x: t.F.pad(x, (3, 1), mode="replicate"), [(2, 3, 4)]),
    C("F.pad_replicate_2d", lambda t, x: t.F.pad(x, (2, 0, 1, 3), mode="replicate"), [(1, 2, 3, 4)]),
    C("F.pad_circular", lambda t, x: t.F.pad(x, (2, 1), mode="circular"), [(2, 3, 4)]),
    C("F.pad_circular_cut", lambda t, x: t.F.pad(x, (-1, 2, 1, -2), mode="circular"), [(1, 2, 4, 5)]),
    C("F.pad_reflect_cut", lambda t, x: t.F.pad(x, (2, -1), mode="reflect"), [(2, 3, 5)]),
    C(
        "F.kl_div_batchmean",
        lambda t, x, y: t.F.kl_div(t.F.log_softmax(x, -1), t.F.softmax(y, -1), reduction="batchmean"),
        [(3, 5), (3, 5)],
    ),
    C("F.kl_div_mean", lambda t, x, y: t.F.kl_div(x, t.F.softmax(y, -1)), [(3, 5), (3, 5)]),
    C("F.kl_div_target_zeros", lambda t, x, y: t.F.kl_div(x, y, reduction="sum"), [(3, 5), Const(KL_TARGET_ZEROS)]),
    C(
        "F.kl_div_log_target",
        lambda t, x, y: t.F.kl_div(x, t.F.log_softmax(y, -1), reduction="none", log_target=True),
        [(3, 5), (3, 5)],
    ),
    C("nn.KLDivLoss", lambda t, x, y: t.nn.KLDivLoss(reduction="sum")(x, t.F.softmax(y, -1)), [(2, 4), (2, 4)]),
]

BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "duplicate case names in the op table"

# Differentiable once only, by design: the tiled attention kernel's backward (and its forward-mode tangent) are
# NumPy tile loops that record nothing, so create_graph and reverse over forward raise instead (ops/attention.py).
# The second-order tables leave these cases out and check the refusal instead.
FIRST_ORDER_ONLY_CASES = {
    "F.scaled_dot_product_attention",
    "F.scaled_dot_product_attention_mask_empty_row",
    "F.scaled_dot_product_attention_bias",
    "F.scaled_dot_product_attention_bias_heads",
    "F.scaled_dot_product_attention_bias_batch",
    "F.embedding_freq",
}
FIRST_ORDER_ONLY_PRIMITIVES = {"ScaledDotProductAttention", "_TiledTangent"}
# Functions that are guards, not math: the tiled kernel's tangent as a node whose backward refuses (reverse over
# forward through it), checked by tests/minitensor/ops/test_attention.py rather than by a case of the table.
GUARD_FUNCTIONS = {"_TiledTangent"}


# ----------------------------------------------------------------------------- the samples of each tier
# The table is one database; each property (values and VJP against torch, JVP, second order, finite differences,
# the core and extended paths, saved tensors, the fake device) is a test family that takes its samples from it through
# `samples`. `make test` takes one sample per primitive and property, in float64; `make test-full` takes the rest.
def primitives_called(case: Case) -> frozenset:
    """The engine's primitives (Function subclasses) the case's forward calls in float64, read off the profiler."""
    return _primitives_called(case.name)


@functools.cache
def _primitives_called(name: str) -> frozenset:
    case = BY_NAME[name]
    xs, _, _ = make_inputs(case, "float64")
    with mt.profiler.profile() as prof:
        case.fn(MT, *xs, **case.kwargs)
    return frozenset(prof.stats)


def fast_cases(cases) -> set:
    """The names of the cases the fast tier takes: walking `cases` in table order, each case that calls a primitive no
    case taken before it calls. Every primitive the family's cases reach is taken once."""
    taken, seen = set(), set()
    for case in cases:
        new = primitives_called(case) - seen
        if new:
            taken.add(case.name)
            seen |= new
    return taken


def samples(cases, dtypes=("float64", "float32")) -> list:
    """pytest parameters for a property family over `cases` (the cases the property applies to): (case, dtype name)
    for each dtype, or (case,) alone when `dtypes` is None. The fast tier's cases (fast_cases) in the first dtype are
    plain parameters; every other sample is marked `full`."""
    cases = list(cases)
    fast = fast_cases(cases)
    out = []
    for case in cases:
        for i, dtype in enumerate(dtypes or (None,)):
            marks = () if case.name in fast and i == 0 else (pytest.mark.full,)
            values = (case,) if dtype is None else (case, dtype)
            out.append(pytest.param(*values, marks=marks, id=case.name if dtype is None else f"{case.name}-{dtype}"))
    return out
