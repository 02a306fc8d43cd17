"""The names a PyTorch user reaches for in the first hour, beyond the op table.

Values and gradients of every differentiable name are compared with PyTorch in the op table (tests/support/op_cases.py,
the section "the names a PyTorch user reaches for", run by tests/minitensor/ops/test_op_table.py,
tests/minitensor/autograd/test_gradcheck.py and tests/minitensor/autograd/test_higher_order.py). Here: that every name
exists where torch has it, the device story on the CPU, the factories `new_*`, the modules' construction and state, a
first training step written the PyTorch way, and the clear errors for what is refused."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

F = mt.nn.functional
HAS_CUPY = importlib.util.find_spec("cupy") is not None

NAMES = {
    "Tensor": [
        "device",
        "is_cuda",
        "cpu",
        "cuda",
        "mm",
        "bmm",
        "norm",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "type_as",
        "topk",
        "sort",
        "argsort",
        "gather",
        "index_select",
    ],
    "mt": [
        *("device", "cuda", "mm", "bmm", "norm", "topk", "sort", "argsort", "gather", "einsum", "index_select"),
        *("memory_format", "contiguous_format", "preserve_format", "channels_last", "channels_last_3d"),
    ],
    "nn": [
        "Tanh",
        "Sigmoid",
        "Softmax",
        "LogSoftmax",
        "CrossEntropyLoss",
        "MSELoss",
        "NLLLoss",
        "L1Loss",
        "BCEWithLogitsLoss",
    ],
    "F": ["mse_loss", "l1_loss", "one_hot", "binary_cross_entropy_with_logits", "logsigmoid"],
}
NAMESPACES = {
    "Tensor": (mt.Tensor, torch.Tensor),
    "mt": (mt, torch),
    "nn": (mt.nn, torch.nn),
    "F": (F, torch.nn.functional),
}


@pytest.mark.parametrize("where", sorted(NAMES))
def test_every_name_exists_as_in_torch(where):
    ours, theirs = NAMESPACES[where]
    for name in NAMES[where]:
        assert hasattr(theirs, name), f"torch has no {where}.{name}: the list is wrong"
        assert hasattr(ours, name), f"minitensor lacks {where}.{name}"
    public = getattr(ours, "__all__", None)
    if public is not None:
        assert set(NAMES[where]) <= set(public), f"{where}.__all__ misses {set(NAMES[where]) - set(public)}"


# ----------------------------------------------------------------------------- one device
def test_device_reads_as_torch_cpu():
    x, xt = mt.randn(2, 3), torch.randn(2, 3)
    for a in (x, xt):
        assert a.device.type == "cpu" and str(a.device) == "cpu" and a.device.index is None
        assert not a.is_cuda
    assert repr(x.device) == repr(xt.device) == "device(type='cpu')"
    assert x.device == "cpu" and x.device == mt.device("cpu")
    assert x.to(x.device) is x and x.to(mt.device("cpu")) is x and x.cpu() is x
    assert repr(mt.device("cuda", 1)) == repr(torch.device("cuda", 1)) == "device(type='cuda', index=1)"
    assert str(mt.device("cuda:1")) == str(torch.device("cuda:1")) == "cuda:1"
    if not HAS_CUPY and not mt.devices.fake_cuda_enabled():
        assert mt.cuda.is_available() is False and mt.cuda.device_count() == 0


def test_the_usual_device_line_runs_on_the_cpu():
    device = "cuda" if mt.cuda.is_available() else "cpu"
    model = mt.nn.Linear(3, 2)
    x = mt.randn(4, 3).to(device)
    assert model(x).device == device


# ----------------------------------------------------------------------------- memory formats
@pytest.mark.parametrize("fmt", ["channels_last", "contiguous_format", "preserve_format"])
def test_memory_formats_lay_out_the_array_as_torch(fmt):
    """The strides (in elements) of x.to(memory_format=...) and of what ops make of it are torch's."""
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    x, xt = mt.tensor(a).to(memory_format=getattr(mt, fmt)), torch.tensor(a).to(memory_format=getattr(torch, fmt))
    assert repr(getattr(mt, fmt)) == repr(getattr(torch, fmt)).replace("torch.", "minitensor.")
    for ours, ref in ((x, xt), (x.float(), xt.float()), (x.exp(), xt.exp()), (x.contiguous(), xt.contiguous())):
        assert tuple(s // ours._data.itemsize for s in ours._data.strides) == ref.stride()
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-15)  # exp: NumPy's and torch's, to an ulp
    x5 = mt.zeros(2, 3, 4, 5, 6).to(memory_format=mt.channels_last_3d)
    x5t = torch.zeros(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)
    assert tuple(s // 4 for s in x5._data.strides) == x5t.stride()


def test_to_and_the_dtype_methods_take_torch_arguments():
    x = mt.randn(2, 3, 4, 5, dtype=mt.float64, requires_grad=True)
    assert x.to(x) is x and x.to("cpu", mt.float64, False, False) is x and x.to(mt.float64, False) is x
    assert x.to(mt.float64, copy=True) is not x and x.to(x, False, True) is not x
    assert x.to("cpu", mt.float32, True, True).dtype == mt.float32 and x.to(mt.float32, "cpu").dtype == mt.float32
    y = x.to(memory_format=mt.channels_last)
    assert y.to(memory_format=mt.channels_last) is y  # already laid out so: itself, as torch
    (y * mt.tensor(np.arange(120.0).reshape(2, 3, 4, 5))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(120.0).reshape(2, 3, 4, 5))
    for method, dtype in (("float", mt.float32), ("double", mt.float64), ("long", mt.int64), ("int", mt.int32)):
        assert getattr(x, method)(memory_format=mt.contiguous_format).dtype == dtype
    b = x.bool(memory_format=mt.channels_last)
    assert b.dtype == mt.bool and b._data.strides == (60, 1, 15, 3)  # one byte an element: torch's stride()


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed: 'cuda' may be there (tests/minitensor/devices/test_cuda.py)")
def test_cuda_and_other_devices_are_refused_clearly():
    """Without CuPy and with the fake device off, 'cuda' is one error naming both remedies
    (tests/minitensor/devices/test_device_api.py
    has the device story itself)."""
    x = mt.randn(2)
    previous = mt.devices.use_fake_cuda(False)
    try:
        remedies = r"CUDA is not available here: CuPy is not installed.*pip install '\.\[gpu\]'.*MINITENSOR_FAKE_CUDA=1"
        with pytest.raises(RuntimeError, match=remedies):
            x.cuda()
        for where in ("cuda", "cuda:0", mt.device("cuda")):
            with pytest.raises(RuntimeError, match=remedies):
                x.to(where)
            with pytest.raises(RuntimeError, match=remedies):
                x.to(device=where)
            with pytest.raises(RuntimeError, match=remedies):
                mt.zeros(2, device=where)
    finally:
        mt.devices.use_fake_cuda(previous)
    with pytest.raises(RuntimeError, match="runs on 'cpu' and 'cuda' only, got device 'mps'"):
        x.to("mps")
    for bad in (2.5, "", "cuda:x", "2cpu"):
        with pytest.raises(ValueError, match="device:"):
            mt.device(bad)
    with pytest.raises(ValueError, match="already names an index"):
        mt.device("cuda:0", 1)
    assert mt.device(1) == "cuda:1" == str(torch.device("cuda", 1))  # torch.device(1) asks for the accelerator


# ----------------------------------------------------------------------------- factories
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_new_factories_match_torch(dtype):
    x, xt = mt.zeros(2, dtype=getattr(mt, dtype)), torch.zeros(2, dtype=getattr(torch, dtype))
    pairs = [
        (x.new_zeros(2, 3), xt.new_zeros(2, 3)),
        (x.new_zeros((3,)), xt.new_zeros((3,))),
        (x.new_ones(2, 1), xt.new_ones(2, 1)),
        (x.new_full((2, 2), 7), xt.new_full((2, 2), 7)),
        (x.new_tensor([1, 2.5]), xt.new_tensor([1, 2.5])),
        (x.new_tensor([[1, 2]], dtype=mt.float64), xt.new_tensor([[1, 2]], dtype=torch.float64)),
        (x.new_empty(4).zero_(), xt.new_empty(4).zero_()),
    ]
    for i, (a, b) in enumerate(pairs):
        assert a.dtype.name == str(b.dtype).removeprefix("torch."), f"factory {i}: dtype {a.dtype} vs {b.dtype}"
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"factory {i}")
    y = mt.randn(2).new_zeros(3, requires_grad=True)
    assert y.requires_grad and y.is_leaf


def test_new_tensor_copies():
    data = np.array([1.0, 2.0])
    src = mt.tensor(data)
    y = src.new_tensor(src)
    y.data[0] = 9.0
    assert src.numpy().tolist() == [1.0, 2.0]


def test_type_as_matches_torch():
    a, b = mt.tensor([1.7, -2.2]), mt.tensor([1], dtype=mt.int64)
    at, bt = torch.tensor([1.7, -2.2]), torch.tensor([1])
    assert a.type_as(b).numpy().tolist() == at.type_as(bt).tolist()


# ----------------------------------------------------------------------------- values the op table cannot hold
def test_sort_topk_return_named_values_and_indices_as_torch():
    z = np.random.default_rng(0).standard_normal((3, 5))
    x, xt = mt.tensor(z), torch.tensor(z)
    for ours, theirs in (
        (x.sort(dim=1), xt.sort(dim=1)),
        (mt.topk(x, 2), torch.topk(xt, 2)),
        (x.sort(descending=True), xt.sort(descending=True)),
    ):
        values, indices = ours
        assert values is ours.values and indices is ours.indices
        np.testing.assert_array_equal(values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(indices.numpy(), theirs.indices.numpy())
        assert indices.dtype == mt.int64


def test_sort_puts_nan_where_torch_does():
    z = np.array([[1.0, np.nan, -2.0, 0.5, np.nan]])
    for descending in (False, True):
        ours = mt.tensor(z).sort(descending=descending, stable=True)
        theirs = torch.tensor(z).sort(descending=descending, stable=True)
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())


def test_sort_of_integers_and_of_a_0d_tensor():
    z = np.array([[3, 1, 2], [0, 5, 5]])
    for ours, theirs in (
        (mt.tensor(z).sort(dim=1, stable=True), torch.tensor(z).sort(dim=1, stable=True)),
        (mt.tensor(2.5).sort(), torch.tensor(2.5).sort()),
    ):
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())


def test_topk_k0_and_k_all():
    z = np.random.default_rng(1).standard_normal((2, 4))
    for k in (0, 4):
        ours, theirs = mt.tensor(z).topk(k), torch.tensor(z).topk(k)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        assert ours.indices.shape == tuple(theirs.indices.shape)


def test_one_hot_matches_torch():
    ids = np.array([[0, 4], [2, 2]])
    for n in (-1, 6):
        ours, theirs = F.one_hot(mt.tensor(ids), n), torch.nn.functional.one_hot(torch.tensor(ids), n)
        assert ours.dtype == mt.int64
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_norm_of_float32_keeps_float32_and_dtype_converts():
    x = mt.randn(3, 4, dtype=mt.float32)
    assert x.norm().dtype == mt.float32
    assert x.norm(dtype=mt.float64).dtype == mt.float64


def test_modules_repr_and_state_as_torch():
    pw = np.array([1.0, 2.0])
    ours = mt.nn.BCEWithLogitsLoss(pos_weight=mt.tensor(pw))
    theirs = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pw))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["pos_weight"]
    assert list(mt.nn.CrossEntropyLoss().parameters()) == []
    assert repr(mt.nn.Softmax(dim=-1)) == repr(torch.nn.Softmax(dim=-1)) == "Softmax(dim=-1)"
    assert repr(mt.nn.Tanh()) == repr(torch.nn.Tanh()) == "Tanh()"


def test_a_first_training_step_written_the_pytorch_way_matches_torch():
    """nn.Sequential(Linear, Tanh, Linear), nn.CrossEntropyLoss, SGD: the loss and the updated weights."""
    rng = np.random.default_rng(3)
    z, y = rng.standard_normal((8, 5)), rng.integers(0, 3, 8)
    results = []
    for lib in (mt, torch):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(5, 4), lib.nn.Tanh(), lib.nn.Linear(4, 3)).double()
        if lib is torch:  # the same starting weights
            with torch.no_grad():
                for p, q in zip(model.parameters(), results[0][2]):
                    p.copy_(torch.tensor(q))
        start = [p.detach().numpy().copy() for p in model.parameters()]
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        loss = lib.nn.CrossEntropyLoss()(model(lib.tensor(z)), lib.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        results.append((loss.item(), [p.detach().numpy().copy() for p in model.parameters()], start))
    (loss_mt, after_mt, _), (loss_t, after_t, _) = results
    assert_close(np.array(loss_mt), np.array(loss_t), OP_RTOL["float64"], "loss")
    for i, (a, b) in enumerate(zip(after_mt, after_t)):
        assert_close(a, b, OP_RTOL["float64"], f"parameter {i} after one step")


# ----------------------------------------------------------------------------- refused inputs
def _v():
    return mt.ones(3, requires_grad=True)


REFUSED = [
    (lambda: mt.randn(2, 3, 4).mm(mt.randn(4, 2)), ValueError, r"mm: input must be a 2-D matrix, got shape \(2, 3,"),
    (lambda: mt.mm(mt.randn(2, 3), [[1.0]]), TypeError, "mm: mat2 must be a Tensor, got list"),
    (lambda: mt.randn(3, 4).mm(mt.randn(5, 2)), ValueError, "matmul: shapes .* are not aligned"),
    (lambda: mt.bmm(mt.randn(2, 3, 4), mt.randn(4, 5)), ValueError, r"bmm: mat2 must be a 3-D batch .* \(4, 5\)"),
    (lambda: mt.bmm(mt.randn(2, 3, 4), mt.randn(1, 4, 5)), ValueError, "bmm: batch sizes differ.*does not broadcast"),
    (lambda: mt.randn(3).norm(p="bad"), ValueError, "norm: p must be a number, 'fro' or 'nuc', got 'bad'"),
    (lambda: mt.randn(3).norm(p=float("nan")), ValueError, "norm: p must be a number, 'fro' or 'nuc', got nan"),
    (lambda: mt.randn(2, 3, 4).norm(p="nuc"), ValueError, r"norm: p='nuc' takes the matrices over a pair of dims"),
    (lambda: mt.randn(3, 4).norm(p="nuc", dim=0), ValueError, r"norm: p='nuc' takes the matrices over a pair"),
    (lambda: mt.zeros(0, 3).norm(p=-1, dim=0), ValueError, r"norm\(\) with p=-1.0: cannot reduce an empty tensor"),
    (lambda: mt.tensor([1, 2]).norm(), TypeError, "norm: expected a floating tensor, got int64"),
    (lambda: mt.randn(3).to(memory_format=mt.channels_last), ValueError, "to: memory_format=minitensor.channels_last"),
    (lambda: mt.randn(3).to(memory_format="channels_last"), TypeError, "to: memory_format must be mt.contiguous"),
    (lambda: mt.randn(3).float(memory_format=mt.channels_last_3d), ValueError, "needs a tensor of 5 dims"),
    (lambda: mt.randn(3).to(mt.float32, False, False, True), TypeError, "to: too many positional arguments"),
    (lambda: mt.randn(3, 4).norm(dim=2), IndexError, "norm: dim 2 out of range"),
    (lambda: mt.randn(3, 4).gather(1, mt.tensor([[0.0]])), TypeError, "gather: index must be an integer tensor"),
    (lambda: mt.randn(3, 4).gather(1, [[0]]), TypeError, "gather: index must be an integer tensor, got list"),
    (lambda: mt.randn(3, 4).gather(1, mt.tensor([0, 1])), ValueError, "gather: index must have as many dimensions"),
    (lambda: mt.randn(3, 4).gather(1, mt.tensor([[4]])), IndexError, "gather: index 4 is out of range for dim 1 "),
    (lambda: mt.randn(3, 4).gather(1, mt.tensor([[-1]])), IndexError, "gather: index -1 is out of range"),
    (lambda: mt.randn(3, 4).gather(0, mt.zeros(2, 5, dtype=mt.int64)), ValueError, "larger than input .* dim 0"),
    (lambda: mt.randn(3, 4).topk(5), ValueError, r"topk: k must be an integer in \[0, 4\]"),
    (lambda: mt.randn(3, 4).topk(1.0), ValueError, "topk: k must be an integer"),
    (lambda: mt.randn(3, 4).sort(dim=2), IndexError, "sort: dim 2 out of range"),
    (lambda: mt.einsum("ii->i", mt.randn(3, 4)), ValueError, r"letter 'i' is repeated in operand 0 .* sizes \[3, 4\]"),
    (lambda: mt.einsum("i..j", mt.randn(3, 3)), ValueError, "'.' only as one '...' per operand"),
    (lambda: mt.einsum("...ijk", mt.randn(3, 3)), ValueError, "operand 0 has 2 dimensions, fewer than '...ijk' names"),
    (lambda: mt.einsum(3, mt.randn(3, 3)), TypeError, "einsum: expected an equation string"),
    (lambda: mt.randn(3, 4).index_select(1, mt.tensor([[0]])), ValueError, "index_select: index must be a 1-D"),
    (lambda: mt.randn(3, 4).index_select(1, mt.tensor([0.0])), TypeError, "index_select: index must be an integer"),
    (lambda: mt.randn(3, 4).index_select(1, mt.tensor([4])), IndexError, r"index_select: index \[4\] is out of range"),
    (lambda: mt.randn(3, 4).index_select(1, mt.tensor([-1])), IndexError, "index_select: index .* out of range"),
    (lambda: mt.tensor(2.0).index_select(0, mt.tensor([0, 0])), IndexError, "index_select: index .* out of range"),
    (lambda: mt.randn(3, 4).index_select(2, mt.tensor([0])), IndexError, "index_select: dim 2 out of range"),
    (lambda: mt.randn(3).gather(0, mt.zeros(2, 2, dtype=mt.int64)), ValueError, "as many dimensions as input"),
    (lambda: mt.div(mt.randn(3), 2.0, rounding_mode="round"), ValueError, "rounding_mode must be None, 'trunc' or"),
    (lambda: mt.div(mt.tensor([3, 4]), mt.tensor([1, 0]), rounding_mode="floor"), ZeroDivisionError, "by zero"),
    (lambda: mt.add(mt.tensor([1, 2]), mt.tensor([1, 2]), alpha=0.5), TypeError, "alpha must not be a float"),
    (lambda: mt.randn(3).sub(mt.randn(3), alpha="2"), TypeError, "sub: alpha must be a number, got str"),
    (lambda: mt.randn(3).add(mt.randn(3), 2), TypeError, "positional argument"),
    (lambda: mt.randn(3).clamp(mt.randn(4)), ValueError, "clamp: shapes .* do not broadcast"),
    (lambda: mt.randn(3).clamp("0"), TypeError, "clamp: min and max must be numbers or tensors, got str"),
    (lambda: mt.randn(3).masked_fill(mt.ones(3).bool(), mt.ones(1)), ValueError, "value must be a number or a 0-d"),
    (lambda: mt.randn(3).masked_fill(mt.ones(3).bool(), "x"), TypeError, "value must be a number or a 0-d tensor"),
    # in-place ops write outside the graph: an operand that requires grad is refused, never taken as a constant
    (lambda: mt.zeros(3).__setitem__(0, _v()[0]), RuntimeError, "__setitem__: an operand requires grad"),
    (lambda: mt.zeros(3).copy_(_v()), RuntimeError, "copy_: an operand requires grad"),
    (lambda: mt.zeros(3).fill_(_v().sum()), RuntimeError, "fill_: an operand requires grad"),
    (lambda: mt.zeros(3).add_(_v(), alpha=2), RuntimeError, "add_: an operand requires grad"),
    (lambda: mt.zeros(3).sub_(_v()), RuntimeError, "sub_: an operand requires grad"),
    (lambda: mt.zeros(3).mul_(_v()), RuntimeError, "mul_: an operand requires grad"),
    (lambda: mt.zeros(3).div_(_v(), rounding_mode="trunc"), RuntimeError, "div_: an operand requires grad"),
    (
        lambda: mt.zeros(3).masked_fill_(mt.ones(3).bool(), _v().sum()),
        RuntimeError,
        "masked_fill_: an operand requires",
    ),
    (lambda: mt.zeros(3).clamp_(max=_v()), RuntimeError, "clamp_: an operand requires grad"),
    (lambda: mt.einsum("ij,jk->ik", mt.randn(3, 4), mt.randn(5, 2)), ValueError, "letter 'j' is size 4 .* and 5"),
    (lambda: mt.einsum("ij,jk->ik", mt.randn(3, 4)), ValueError, "names 2 operands, got 1"),
    (lambda: mt.einsum("ijk->i", mt.randn(3, 4)), ValueError, "operand 0 has 2 dimensions but subscripts 'ijk'"),
    (lambda: mt.einsum("ij->iz", mt.randn(3, 4)), ValueError, "the output 'iz' must name distinct letters"),
    (lambda: mt.einsum("i1->i", mt.randn(3, 4)), ValueError, "subscripts must be letters"),
    (lambda: F.one_hot(mt.tensor([0.0, 1.0])), TypeError, "one_hot: expected an integer tensor .* float"),
    (lambda: F.one_hot(mt.tensor([0, 3]), 3), ValueError, "one_hot: class index 3 is out of range for num_classes=3"),
    (lambda: F.one_hot(mt.tensor([0, -1])), ValueError, "one_hot: class index -1 is out of range"),
    (lambda: F.one_hot(mt.zeros(0, dtype=mt.int64)), ValueError, "cannot infer num_classes from an empty tensor"),
    (lambda: F.l1_loss(mt.randn(3, 4), mt.randn(4)), ValueError, r"l1_loss: target of shape \(4,\) differs"),
    (lambda: F.l1_loss(mt.randn(3), mt.tensor([1, 2, 3])), TypeError, "l1_loss: target must be floating"),
    (lambda: F.l1_loss(mt.randn(3), mt.randn(3), reduction="avg"), ValueError, "reduction must be 'mean', 'sum' or"),
    (lambda: F.binary_cross_entropy_with_logits(mt.randn(3, 2), mt.rand(3)), ValueError, "target of shape"),
    (lambda: F.logsigmoid(mt.tensor([1, 2])), TypeError, "logsigmoid: expected a floating tensor, got int64"),
    (
        lambda: F.binary_cross_entropy_with_logits(mt.randn(3, 2), mt.rand(3, 2), pos_weight=mt.ones(3)),
        ValueError,
        r"pos_weight must be a Tensor that broadcasts to \(2,\), got \(3,\)",
    ),
    (
        lambda: mt.nn.CrossEntropyLoss(weight=mt.ones(3))(mt.randn(2, 4), mt.tensor([0, 1])),
        ValueError,
        r"cross_entropy: weight must hold one entry per class, shape \(4,\), got shape \(3,\)",
    ),
    (lambda: mt.nn.NLLLoss(weight=[1.0, 2.0]), TypeError, "cannot assign list as buffer 'weight'"),
    (
        lambda: mt.nn.CrossEntropyLoss(reduction="avg")(mt.randn(2, 3), mt.tensor([0, 1])),
        ValueError,
        "cross_entropy: reduction must be",
    ),
    (lambda: mt.nn.MSELoss(reduction="avg")(mt.randn(2), mt.randn(2)), ValueError, "mse_loss: reduction must be"),
    (lambda: mt.nn.Softmax()(mt.randn(2, 3)), ValueError, r"Softmax: dim is None; .* nn.Softmax\(dim=-1\)"),
    (lambda: mt.nn.LogSoftmax()(mt.randn(2, 3)), ValueError, "LogSoftmax: dim is None"),
]


@pytest.mark.parametrize(
    "call,error,message", REFUSED, ids=[m.split(":")[0] + f"-{i}" for i, (_, _, m) in enumerate(REFUSED)]
)
def test_refused_inputs_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_inplace_ops_take_a_requires_grad_operand_under_no_grad_as_a_constant():
    x = mt.zeros(3)
    with mt.no_grad():
        x.copy_(_v())
        x[0] = _v()[1] * 2
        x.add_(_v(), alpha=0.5)
        x.clamp_(max=_v() * 1.75)
    np.testing.assert_array_equal(x.numpy(), [1.75, 1.5, 1.5])
