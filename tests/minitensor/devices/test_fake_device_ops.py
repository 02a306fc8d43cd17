"""The op table (tests/support/op_cases.py) on the fake CUDA device (minitensor/fakecuda.py), equal to itself on the
CPU.

Each case runs from the same seeded arrays on the CPU and with every input on the fake device, whose arrays refuse
any NumPy array beside them: an op that makes a host array where device data meets it raises here. Every output
and gradient must live on the device, and the forward values and the gradients of every input, for the same random
upstream gradient, must EQUAL the CPU's:
  - bitwise (NaN where the CPU has NaN) against the CPU running the same formulas: the fake device is NumPy
    underneath. The CPU speed devices that a device bypasses on these cases, rowwise.last_sum's np.einsum row
    sums (fast/rowwise.py: a device sums by np.sum), the LSTM's in-place time loop (fast/recurrent.py) and the
    convolution's folded products (fast/convolution.py), are turned off for that CPU run (`plain_cpu`);
  - to the op table's tolerance (minitensor/testing.py) against the CPU as it runs by default, einsum row sums and
    all: they round differently (the cases are the softmax, log_softmax, layer norm, attention-weight, var/std over
    the last dim and einsum cases, whose forward or backward sums rows, the LSTM's and the convolutions).
The second-order table does the same for the backward of the backward (create_graph=True): the gradient b(x, g) for
a random g, then the gradient of <b, v> for a random v, with respect to x and g; and forward mode for the primal and
tangent of every case, random tangents beside the inputs. Below the tables: the repeated-index scatter-add on the
device (bitwise np.add.at, one host read), the CPU speed devices stepping aside, and the host reads of each case.

A case that cannot yet run on the device goes into BLOCKED with its reason (a strict xfail: once it passes, the
entry must go). It is empty.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import minitensor as mt
from minitensor import devices, fakecuda, fast
from minitensor.autograd import forward_ad as fw
from minitensor.fast import rowwise
from minitensor.testing import assert_close
from tests.support.op_cases import CASES, FIRST_ORDER_ONLY_CASES, MT, as_list, case_seed

pytestmark = pytest.mark.full

# cases that cannot yet run on the device: name -> why (none today)
BLOCKED: dict[str, str] = {}
# cases that cannot take device inputs, by design (each reason said)
HOST_ONLY = {
    "to_fake_cuda_and_back": "its input goes to the device and back to the CPU, then meets itself: mixed devices",
}
# cases whose outputs leave the device, by design (their inputs' gradients come back to it)
MOVED_TO_THE_CPU = {"cpu"}


@pytest.fixture(autouse=True)
def fake_cuda():
    """'cuda' is the fake device while each test runs (put back afterwards)."""
    previous = devices.use_fake_cuda(True)
    yield
    devices.use_fake_cuda(previous)


# host-only speed devices that a device array steps around to their formulas (fast/recurrent.py: the LSTM's time loop;
# fast/convolution.py: the convolution's products over all samples at once)
HOST_LOOPS = ("lstm_steps", "lstm_backward", "conv_products", "conv_grads")


@contextlib.contextmanager
def plain_cpu():
    """The CPU without the row-sum speed device (rowwise.last_sum sums every row by np.sum, as a device does) and
    with the LSTM's time loop and the convolution's products on their formulas, as on a device."""
    previous, rowwise.SUM_ROW = rowwise.SUM_ROW, 0
    loops = [fast.registered()[name] for name in HOST_LOOPS]
    for entry in loops:
        entry.install(False)
    try:
        yield
    finally:
        rowwise.SUM_ROW = previous
        for entry in loops:
            entry.install(fast.enabled())


def on_device(a: np.ndarray, requires_grad: bool = False):
    """A Tensor on the fake device holding a copy of `a`."""
    return mt.tensor(a.copy(), device="cuda", requires_grad=requires_grad)


def on_cpu(a: np.ndarray, requires_grad: bool = False):
    return mt.tensor(a.copy(), requires_grad=requires_grad)


def beside(t, a: np.ndarray, requires_grad: bool = False):
    """A copy of `a` as a Tensor on t's device (an upstream gradient beside its output)."""
    return mt.tensor(a.copy(), device=t.device, requires_grad=requires_grad)


def case_arrays(case, dtype_name: str) -> list:
    """The case's master arrays and whether each requires grad, as op_cases.make_inputs draws them."""
    rng = np.random.default_rng(case_seed(case.name))
    out = []
    for spec in case.specs:
        a = spec.sample(rng)
        if spec.is_float:
            a = a.astype(dtype_name)
        out.append((a, spec.grad and spec.is_float))
    return out


def host(t) -> np.ndarray | None:
    """A Tensor's values on the host (None stays None)."""
    if t is None:
        return None
    return fakecuda.asnumpy(t._data) if type(t._data) is fakecuda.FakeArray else np.asarray(t._data)


def upstream(outs, seed: int) -> list:
    """The same random upstream gradient for each output that requires grad, as op_cases.backward_both draws it."""
    rng = np.random.default_rng(seed + 1)
    return [beside(o, np.asarray(rng.standard_normal(o.shape) + 0.5, dtype=o.dtype)) for o in outs if o.requires_grad]


def run(case, dtype_name: str, make):
    """Forward and backward of one case with inputs made by `make` (on_cpu or on_device): (outputs, gradients)."""
    xs = [make(a, req) for a, req in case_arrays(case, dtype_name)]
    outs = as_list(case.fn(MT, *xs, **case.kwargs))
    if case.grad:
        live = [o for o in outs if o.requires_grad]
        gs = upstream(outs, case_seed(case.name))
        if len(live) == 1:
            live[0].backward(gs[0])
        elif live:  # several outputs: one scalar sum_i <out_i, g_i>
            sum((o * g).sum() for o, g in zip(live, gs)).backward()
    return outs, [x.grad if x.requires_grad else None for x in xs]


def assert_on_device(what: str, tensors) -> None:
    for i, t in enumerate(tensors):
        if t is not None:
            assert type(t._data) is fakecuda.FakeArray, f"{what} {i} is on the host ({type(t._data).__name__})"


def assert_equal(what: str, ours: list, plain: list, default: list, rtol: float) -> None:
    """The device's results (Tensors) bitwise the plain CPU's, and to rtol the default CPU's (see the docstring)."""
    assert len(ours) == len(plain) == len(default)
    for i, (o, p, d) in enumerate(zip(ours, plain, default)):
        o, p, d = host(o), host(p), host(d)
        assert (o is None) == (p is None), (
            f"{what} {i}: {'no' if o is None else 'a'} value on the device, not on the CPU"
        )
        if o is None:
            continue
        assert o.shape == p.shape and o.dtype == p.dtype, (
            f"{what} {i}: {o.shape} {o.dtype} on the device, {p.shape} {p.dtype} on the CPU"
        )
        np.testing.assert_array_equal(o, p, err_msg=f"{what} {i}: not bitwise the CPU's", strict=True)
        if o.dtype.kind == "f":
            assert_close(o, d, rtol, what=f"{what} {i} against the CPU's speed devices")


def blocked(cases):
    """pytest params of the cases that can take device inputs, the BLOCKED ones as strict xfails naming their owner."""
    return [
        pytest.param(c, marks=pytest.mark.xfail(reason=BLOCKED[c.name], strict=True)) if c.name in BLOCKED else c
        for c in cases
        if c.name not in HOST_ONLY
    ]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", blocked(CASES), ids=str)
def test_op_on_the_fake_device_equals_the_cpu(case, dtype_name):
    outs, grads = run(case, dtype_name, on_device)
    with plain_cpu():
        plain_outs, plain_grads = run(case, dtype_name, on_cpu)
    default_outs, default_grads = run(case, dtype_name, on_cpu)
    rtol = case.tol(dtype_name)
    if case.name not in MOVED_TO_THE_CPU:
        assert_on_device(f"{case} [{dtype_name}] output", outs)
    assert_equal(f"{case} [{dtype_name}] output", outs, plain_outs, default_outs, rtol)
    assert_on_device(f"{case} [{dtype_name}] gradient of input", grads)
    assert_equal(f"{case} [{dtype_name}] gradient of input", grads, plain_grads, default_grads, rtol)


# ----------------------------------------------------------------------------- second order
WITH_GRAD = [
    c for c in CASES if c.grad and any(s.is_float and s.grad for s in c.specs) and c.name not in FIRST_ORDER_ONLY_CASES
]


def second_order(case, dtype_name: str, make) -> list:
    """[(derivative, the tensor it is taken for), ...] of the case, with inputs made by `make`, first order then
    second: b = the gradient of the outputs for random g (create_graph), then the gradient of sum <b_i, v_i> for
    random v, with respect to the inputs and g."""
    xs = [make(a, req) for a, req in case_arrays(case, dtype_name)]
    wrt = [x for x in xs if x.requires_grad]
    ys = [o for o in as_list(case.fn(MT, *xs, **case.kwargs)) if o.requires_grad]
    rng = np.random.default_rng(case_seed(case.name) + 2)
    gs = [beside(y, np.asarray(rng.standard_normal(y.shape) + 0.5, dtype=y.dtype), True) for y in ys]
    first = mt.autograd.grad(ys, wrt + gs, gs, create_graph=True, allow_unused=True)
    live = [b for b in first if b is not None and b.requires_grad]
    if not live:
        return list(zip(first, wrt + gs))
    vs = [beside(b, np.asarray(rng.standard_normal(b.shape) + 0.5, dtype=b.dtype)) for b in live]
    inner = sum((b * v).sum() for b, v in zip(live, vs))
    second = mt.autograd.grad(inner, wrt + gs, allow_unused=True)
    return list(zip(first, wrt + gs)) + list(zip(second, wrt + gs))


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", blocked(WITH_GRAD), ids=str)
def test_second_derivative_on_the_fake_device_equals_the_cpu(case, dtype_name):
    ours = second_order(case, dtype_name, on_device)
    with plain_cpu():
        plain = [d for d, _ in second_order(case, dtype_name, on_cpu)]
    default = [d for d, _ in second_order(case, dtype_name, on_cpu)]
    for i, (d, wrt) in enumerate(ours):  # each derivative where the tensor it is taken for lives
        assert d is None or type(d._data) is type(wrt._data), f"{case} [{dtype_name}] derivative {i}: on {d.device}"
    ours = [d for d, _ in ours]
    assert_equal(f"{case} [{dtype_name}] derivative", ours, plain, default, case.tol(dtype_name))


# ----------------------------------------------------------------------------- forward mode
def forward_mode(case, dtype_name: str, make) -> list:
    """[primals..., tangents...] of the case's outputs in forward mode, each differentiable input given the same
    random tangent (beside it), inputs made by `make`."""
    rng = np.random.default_rng(case_seed(case.name) + 3)
    xs = [make(a, req) for a, req in case_arrays(case, dtype_name)]
    with fw.dual_level():
        duals = [
            fw.make_dual(x, beside(x, rng.standard_normal(x.shape).astype(x.dtype))) if x.requires_grad else x
            for x in xs
        ]
        unpacked = [fw.unpack_dual(o) for o in as_list(case.fn(MT, *duals, **case.kwargs))]
    return [p for p, _ in unpacked] + [t for _, t in unpacked]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", blocked(CASES), ids=str)
def test_forward_mode_on_the_fake_device_equals_the_cpu(case, dtype_name):
    ours = forward_mode(case, dtype_name, on_device)
    with plain_cpu():
        plain = forward_mode(case, dtype_name, on_cpu)
    default = forward_mode(case, dtype_name, on_cpu)
    if case.name not in MOVED_TO_THE_CPU:
        assert_on_device(f"{case} [{dtype_name}] primal or tangent", ours)
    assert_equal(f"{case} [{dtype_name}] primal or tangent", ours, plain, default, case.tol(dtype_name))


# ----------------------------------------------------------------------------- the scatter-add, deterministic
# Values that np.add.at sums in a fixed order (float32, many repeats: another order rounds differently), and the
# advanced indices a[index]'s backward meets: rows (negative ones too), an index array of rows, two arrays, an
# array beside a slice, a mask, and values broadcast over the index.
SCATTERS = {
    "rows": ((7, 3), lambda r: r.integers(-7, 7, 40), (40, 3)),
    "rows_2d_index": ((5, 4), lambda r: r.integers(0, 5, (3, 5)), (3, 5, 4)),
    "two_arrays": ((4, 5), lambda r: (r.integers(0, 4, 30), r.integers(0, 5, 30)), (30,)),
    "array_and_slice": ((6, 4), lambda r: (slice(1, 3), r.integers(0, 4, 15)), (2, 15)),
    "broadcast_values": ((4, 5), lambda r: (r.integers(0, 4, (9, 1)), r.integers(0, 5, (1, 3))), (3,)),
    "mask": ((3, 4), lambda r: r.random((3, 4)) < 0.5, None),
}


@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter_add_on_the_device_adds_as_np_add_at(name):
    """index_put on the device (occurrence passes, no np.add.at) bitwise np.add.at on the host, in one host read.
    (Every case repeats an entry at most RUN_MIN times: beyond, the tree below sums it.)"""
    from minitensor.ops.indexing import index_put

    shape, make_index, values_shape = SCATTERS[name]
    rng = np.random.default_rng(5)
    index = make_index(rng)
    if values_shape is None:  # a mask picks as many as it holds
        values_shape = (int(np.count_nonzero(index)),)
    values = (rng.standard_normal(values_shape) * 10.0 ** rng.integers(-3, 4, values_shape)).astype(np.float32)
    expected = np.zeros(shape, np.float32)
    np.add.at(expected, index, values)
    with fakecuda.count_syncs() as syncs:
        out = index_put(shape, index, fakecuda.asarray(values), advanced=True)
    assert type(out) is fakecuda.FakeArray
    np.testing.assert_array_equal(fakecuda.asnumpy(out), expected, strict=True)
    assert syncs.count == 1, f"{syncs.count} host reads (one expected: how many entries each pass adds)"


HEAVY_SCATTERS = {  # rows repeated far beyond RUN_MIN, beside rows that come once or never
    "rows": ((7, 3), lambda r: np.concatenate([np.full(150, 3), r.integers(0, 5, 150), [6]])),
    "elements": ((2, 3), lambda r: (r.integers(0, 2, 400), np.minimum(r.integers(0, 4, 400), 2))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(HEAVY_SCATTERS))
def test_rows_that_repeat_often_are_summed_as_a_tree_on_the_device(name, dtype):
    """Past RUN_MIN repeats a device sums each row as a tree (add_runs_in_tree), not a pass per repeat: np.add.at's
    sums to round-off (minitensor/testing.py's sum_roundoff_limit for each row's terms), bitwise the same on every
    call (no atomics), in the one host read of the passes."""
    from minitensor.fast.indexing import RUN_MIN
    from minitensor.ops.indexing import index_put
    from minitensor.testing import sum_roundoff_limit

    shape, make_index = HEAVY_SCATTERS[name]
    rng = np.random.default_rng(8)
    index = make_index(rng)
    n = len(index[0]) if isinstance(index, tuple) else len(index)
    values_shape = (n,) + shape[1:] if not isinstance(index, tuple) else (n,)
    values = (rng.standard_normal(values_shape) * 10.0 ** rng.integers(-3, 4, values_shape)).astype(dtype)
    flat = np.ravel_multi_index(index, shape) if isinstance(index, tuple) else index
    assert np.bincount(flat).max() > RUN_MIN
    exact = np.zeros(shape, np.float64)
    np.add.at(exact, index, values.astype(np.float64))
    with fakecuda.count_syncs() as syncs:
        out = index_put(shape, index, fakecuda.asarray(values), advanced=True)
    assert syncs.count == 1
    got = fakecuda.asnumpy(out)
    assert got.dtype == dtype
    target = exact.reshape(-1) if isinstance(index, tuple) else exact
    got_rows = got.reshape(-1) if isinstance(index, tuple) else got
    for r in range(target.shape[0]):
        terms = values[flat == r]
        limit = sum_roundoff_limit(terms, dtype) if terms.size else 0.0
        assert np.all(np.abs(got_rows[r] - target[r]) <= limit), f"row {r}: {got_rows[r]} vs {target[r]}"
    again = fakecuda.asnumpy(index_put(shape, index, fakecuda.asarray(values), advanced=True))
    np.testing.assert_array_equal(again, got, strict=True)


def test_add_rows_at_on_the_cpu_is_np_add_at_bitwise():
    from minitensor.fast.indexing import add_rows_at_fast as add_rows_at

    rng = np.random.default_rng(6)
    rows = rng.integers(0, 6, 200)
    values = (rng.standard_normal((200, 3)) * 10.0 ** rng.integers(-3, 4, (200, 3))).astype(np.float32)
    out, expected = np.zeros((6, 3), np.float32), np.zeros((6, 3), np.float32)
    add_rows_at(out, rows, values)
    np.add.at(expected, rows, values)
    np.testing.assert_array_equal(out, expected, strict=True)


def test_repeated_index_gradient_on_the_device_accumulates():
    """x[idx] with repeated rows, a device index: each row's gradient is the sum of its upstream rows."""
    idx = np.array([0, 2, 0, 0, 1])
    g = np.random.default_rng(7).standard_normal((5, 4))
    x = on_device(np.zeros((3, 4)), requires_grad=True)
    x[on_device(idx)].backward(on_device(g))
    expected = np.zeros((3, 4))
    np.add.at(expected, idx, g)
    np.testing.assert_array_equal(host(x.grad), expected)


# ----------------------------------------------------------------------------- the CPU speed devices step aside
def test_row_speed_devices_take_the_plain_formula_on_a_device():
    from minitensor.ops import reductions

    a = np.random.default_rng(8).standard_normal((5, 7, 30)).astype(np.float32)
    d = fakecuda.asarray(a)
    with fakecuda.count_syncs() as syncs:
        m, s, mean = rowwise.last_max(d), rowwise.last_sum(d, keepdims=False), rowwise.last_mean(d)
        empty = rowwise.last_max(fakecuda.zeros((2, 0)))
    assert syncs.count == 0
    np.testing.assert_array_equal(fakecuda.asnumpy(m), np.max(a, axis=-1, keepdims=True), strict=True)
    np.testing.assert_array_equal(fakecuda.asnumpy(s), reductions.total(a, axis=-1), strict=True)
    np.testing.assert_array_equal(fakecuda.asnumpy(mean), reductions.mean(a, axis=-1, keepdims=True), strict=True)
    np.testing.assert_array_equal(fakecuda.asnumpy(empty), np.full((2, 1), -np.inf))


def test_zero_where_on_a_device_selects_as_on_the_cpu():
    from minitensor.fast.selection import zero_where_by_product as zero_where

    g = np.array([1.5, np.inf, -2.0, np.nan, 3.0, -np.inf])
    drop = np.array([True, True, False, True, False, False])
    with fakecuda.count_syncs() as syncs:
        ours = zero_where(fakecuda.asarray(drop), fakecuda.asarray(g))
    assert syncs.count == 0, "the finiteness test of the CPU's product is a host read"
    with np.errstate(invalid="ignore"):  # the CPU's product meets 0 * inf first (as under the engine's ieee_quiet)
        np.testing.assert_array_equal(fakecuda.asnumpy(ours), zero_where(drop, g))


# ----------------------------------------------------------------------------- host reads
# The op table's forward and backward on the device read nothing back to the host but where an index is checked or
# scattered: one read per integer index array's range check (a[index], gather, index_select, the embedding's ids),
# per scatter-add (how many entries each occurrence pass adds), per class-index loss (its target check), per integer
# division with rounding (its zero-divisor check), and the copy of `cpu`. Measured per case (float64): never more.
# (A boolean mask index reads its count on CuPy too, inside CuPy: the fake cannot count that one.)
HOST_READS = {
    **dict.fromkeys(
        [
            "getitem_bool_mask",
            "getitem_bool_rows",
            "getitem_compare_mask",
            "index_put_repeated",
            "F.max_pool2d",  # its backward's scatter-add (index_put_repeated's read)
            "F.max_pool2d_ceil_dilation",
            "F.max_pool2d_unbatched",
            "F.max_pool2d_ties",
            "F.max_pool1d",
            "F.cross_entropy",
            "F.cross_entropy_ignore",
            "F.cross_entropy_ignore1",
            "F.cross_entropy_sum",
            "F.cross_entropy_none",
            "F.cross_entropy_smooth",
            "F.cross_entropy_smooth_ignore",
            "F.cross_entropy_smooth_sum",
            "F.cross_entropy_smooth_none",
            "F.nll_loss",
            "F.nll_loss_ignore",
            "F.nll_loss_sum",
            "F.nll_loss_none",
            "model_cross_entropy",
            "F.cross_entropy_NCd",
            "F.cross_entropy_NCd_smooth_none",
            "F.cross_entropy_NCd_smooth_sum",
            "F.cross_entropy_1d",
            "F.cross_entropy_all_ignored",
            "F.nll_loss_NCd",
            "F.nll_loss_NCd_none",
            "sort_values",
            "sort_dim0_desc",
            "sort_fn",
            "F.one_hot",  # its range check (torch's one_hot reads the device for it too)
            "topk",
            "topk_smallest_dim0",
            "topk_fn",
            "cpu",
            "nn.CrossEntropyLoss",
            "nn.CrossEntropyLoss_sum_ignore1",
            "nn.NLLLoss",
            "div_trunc_int",
            "div_floor_int",
            "einsum_diagonal",
            "einsum_trace",
            "einsum_trace_implicit",
            "einsum_diagonal_sum",
            "einsum_diagonal_batched",
            "einsum_diagonal_apart",
            "index_select_0d_input",
            "gather_empty_index",
            "F.cross_entropy_weight",
            "F.cross_entropy_weight_sum",
            "F.cross_entropy_weight_none",
            "F.cross_entropy_weight_ignore1",
            "F.cross_entropy_weight_smooth",
            "F.cross_entropy_weight_smooth_none",
            "F.cross_entropy_weight_smooth_all",
            "F.cross_entropy_weight_NCd_smooth",
            "F.cross_entropy_weight_NCd_none",
            "F.cross_entropy_weight_1d",
            "F.nll_loss_weight",
            "F.nll_loss_weight_sum",
            "F.nll_loss_weight_none_ignore1",
            "F.nll_loss_weight_NCd",
            "F.nll_loss_weight_1d",
            "nn.CrossEntropyLoss_weight",
            "nn.NLLLoss_weight",
            "cumprod",  # whether a line holds a zero (the backward's formula differs there)
            "cumprod_dim0",
            "remainder_int",  # the integer division-by-zero check
            "floordiv_int",
            "rfloordiv_int",
            "repeat_interleave_counts",  # the counts: the result's size
            "index_fill",  # the range check
            "index_fill_tensor_value",
            "scatter_value",  # the range check
            "roll",  # the backward's scatter-add of an integer-array index: where indices repeat
            "roll_flat",
            "repeat_interleave",
            "repeat_interleave_flat",
            "F.pad_reflect",  # the backward's scatter-add, once per padded dim
            "F.pad_replicate",
            "F.pad_circular",
            "F.pad_reflect_cut",
        ],
        1,
    ),
    **dict.fromkeys(
        [
            "getitem_list_repeated",
            "getitem_tensor_repeated",
            "getitem_tensor_dim1",
            "getitem_tensor_and_slice",
            "getitem_neg_index_array",
            "getitem_0d_tensor",
            "getitem_int32_index",
            "getitem_of_expand",
            "gather_dim1",
            "gather_dim0_fn",
            "gather_3d_smaller",
            "index_select",
            "index_select_fn_dim0",
            "index_select_0d_index",
            "gather_0d_input",
            "gather_0d_index",
            "gather_0d_both",
            "F.one_hot_inferred",  # its max, then its range check
        ],
        2,
    ),
    **dict.fromkeys(
        [
            "getitem_two_arrays",
            "F.embedding",
            "F.embedding_pad",
            "F.embedding_1d_int32",
            "F.embedding_freq",
            "F.embedding_max_norm",  # the range check, the rows' unique ids and whether any row is over max_norm
            "tied_embedding_generator",
            "tied_embedding_generator_nopad",
            "scatter",  # the range check, whether a place is named twice, and the backward's scatter-add
            "scatter_method_dim1",
        ],
        3,
    ),
    # the range check and the backward's scatter-add; the scatter-adds of the roll along each of two dims
    **dict.fromkeys(["scatter_add", "roll_dims", "F.pad_reflect_2d", "F.pad_replicate_2d", "F.pad_circular_cut"], 2),
}


@pytest.mark.parametrize("case", blocked(CASES), ids=str)
def test_host_reads_of_the_op_table(case):
    with fakecuda.count_syncs() as syncs:
        run(case, "float64", on_device)
    assert syncs.count <= HOST_READS.get(case.name, 0), f"{case}: {syncs.count} host reads"


def test_a_named_tuple_result_stays_on_the_device():
    """np.linalg.svd gives a named tuple (SVDResult): its arrays are device arrays too (the nuclear norm's SVD)."""
    u, s, vh = np.linalg.svd(fakecuda.asarray(np.random.default_rng(9).standard_normal((2, 3, 4))))
    assert all(type(x) is fakecuda.FakeArray for x in (u, s, vh))
