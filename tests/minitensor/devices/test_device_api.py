"""The device API (minitensor/devices.py, ops/device.py, the factories' device=, Tensor.to/.cuda/.cpu,
Module.to, mt.save/mt.load's map_location), run on the strict fake CUDA device (minitensor/fakecuda.py).

Every test here runs with the fake on (the `fake` fixture, put back afterwards). The fake is NumPy underneath,
so a result on it must equal the CPU's bit for bit where the same formula runs; and it refuses NumPy operands,
so an op that quietly met a host array would raise here rather than pass.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor import devices, fakecuda
from minitensor.arguments import normalize_index


@pytest.fixture(autouse=True)
def fake():
    previous = devices.use_fake_cuda(True)
    yield
    devices.use_fake_cuda(previous)


def on_fake(t) -> bool:
    return type(t._data) is fakecuda.FakeArray


# ----------------------------------------------------------------------------- devices and mt.cuda
def test_cuda_namespace_reflects_the_fake():
    assert mt.cuda.is_available() is True and mt.cuda.device_count() == 1 and mt.cuda.current_device() == 0
    with fakecuda.count_syncs() as c:
        mt.cuda.synchronize()
    assert c.count == 0  # the fake runs everything at once: nothing to wait for, no value read
    assert devices.module_for("cuda") is fakecuda and devices.module_for("cuda:0") is fakecuda
    assert devices.module_for("cpu") is np and devices.module_for(mt.device("cpu")) is np
    assert devices.resolve("cuda") == "cuda:0" and devices.resolve(0) == "cuda:0"


def test_cuda_index_out_of_range_names_the_index_and_the_count():
    for bad in ("cuda:1", mt.device("cuda", 3), 2):
        with pytest.raises(RuntimeError, match=r"CUDA device index \d is out of range: this machine has 1 CUDA device"):
            mt.zeros(2, device=bad)
    with pytest.raises(RuntimeError, match="cuda:1"):
        mt.randn(2).to("cuda:1")
    with pytest.raises(RuntimeError, match="out of range"):
        mt.randn(2).cuda(1)


def test_cuda_without_cupy_or_fake_is_one_error_naming_both_remedies():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: 'cuda' may be there (tests/minitensor/devices/test_cuda.py)")
    devices.use_fake_cuda(False)
    for attempt in (lambda: mt.zeros(2, device="cuda"), lambda: mt.randn(2).cuda(), lambda: mt.cuda.current_device()):
        with pytest.raises(RuntimeError, match=r"CuPy is not installed.*pip install '\.\[gpu\]'.*MINITENSOR_FAKE_CUDA"):
            attempt()
    assert mt.cuda.is_available() is False and mt.cuda.device_count() == 0


def test_is_array_array_module_and_the_two_transfers():
    host = np.arange(6.0).reshape(2, 3)
    dev = devices.to_device(host, "cuda")
    assert type(dev) is fakecuda.FakeArray and devices.is_array(dev) and devices.is_array(host)
    assert not devices.is_array([1.0]) and not devices.is_array(mt.tensor([1.0]))
    assert devices.array_module(dev) is fakecuda and devices.array_module(host) is np
    assert devices.device_of(dev) == "cuda:0" and devices.device_of(host) == "cpu"
    assert devices.to_device(dev, "cuda") is dev and devices.to_device(host, "cpu") is host
    with fakecuda.count_syncs() as c:
        back = devices.to_host(dev)
    assert c.count == 1 and type(back) is np.ndarray and np.array_equal(back, host)


# ----------------------------------------------------------------------------- Tensor.device, .to, .cuda, .cpu
def test_device_is_read_from_the_array():
    x = mt.randn(2, 3)
    y = x.cuda()
    assert x.device == "cpu" and not x.is_cuda
    assert y.device == "cuda:0" and y.is_cuda and repr(y.device) == "device(type='cuda', index=0)"
    assert y.device == mt.device("cuda", 0) and y.device.type == "cuda" and y.device.index == 0
    y.data = y.cpu()  # the device follows the array: no field beside it to drift
    assert y.device == "cpu"


def test_to_forms_and_already_there_returns_itself():
    x = mt.randn(2, 3, dtype=mt.float32)
    y = x.to("cuda")
    assert on_fake(y) and np.array_equal(devices.to_host(y._data), x.numpy())
    assert y.to("cuda") is y and y.to("cuda:0") is y and y.cuda() is y and y.to(y.device) is y
    assert x.cpu() is x and x.to("cpu") is x
    z = x.to("cuda", mt.float64)
    assert on_fake(z) and z.dtype == mt.float64
    w = x.to(device="cuda", dtype=mt.float64)
    assert on_fake(w) and w.dtype == mt.float64
    other = mt.zeros(1, dtype=mt.float64, device="cuda")
    v = x.to(other)
    assert on_fake(v) and v.dtype == mt.float64
    assert x.to("cuda", copy=True) is not x and x.to("cpu", copy=True) is not x
    assert y.cpu().device == "cpu" and np.array_equal(y.cpu().numpy(), x.numpy())


def test_to_is_differentiable_both_ways_and_twice():
    """The gradient through the copies equals the CPU's, bit for bit (the same formulas run on the fake)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4))
    x, ref = mt.tensor(a, requires_grad=True), mt.tensor(a, requires_grad=True)
    y = x.cuda()
    assert y.grad_fn is not None and y.grad_fn.name() == "ToDeviceBackward"
    ((y * y).cpu() * 3.0).backward(mt.tensor(g))
    ((ref * ref) * 3.0).backward(mt.tensor(g))
    assert x.grad.device == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), ref.grad.numpy())
    # a device leaf gets a device gradient
    d = mt.tensor(a, device="cuda", requires_grad=True)
    (d.cpu() * 2.0).backward(mt.tensor(g))
    assert on_fake(d.grad) and np.array_equal(devices.to_host(d.grad._data), 2.0 * g)
    # twice: the gradient of the gradient goes through the copies too
    x2, ref2 = mt.tensor(a, requires_grad=True), mt.tensor(a, requires_grad=True)
    (gx,) = mt.autograd.grad((x2.cuda() * x2.cuda() * x2.cuda()).cpu().sum(), x2, create_graph=True)
    (gr,) = mt.autograd.grad((ref2 * ref2 * ref2).sum(), ref2, create_graph=True)
    assert gx.device == "cpu" and gx.grad_fn is not None
    (gx * mt.tensor(g)).sum().backward()
    (gr * mt.tensor(g)).sum().backward()
    np.testing.assert_array_equal(x2.grad.numpy(), ref2.grad.numpy())


def test_forward_mode_moves_the_tangent():
    import minitensor.autograd.forward_ad as fwAD

    a, t = np.arange(4.0), np.linspace(-1.0, 1.0, 4)
    with fwAD.dual_level():
        x = fwAD.make_dual(mt.tensor(a), mt.tensor(t))
        y = x.cuda()
        primal, tangent = fwAD.unpack_dual(y)
        assert on_fake(primal) and on_fake(tangent)
        np.testing.assert_array_equal(devices.to_host(tangent._data), t)


def test_host_reads_of_a_device_tensor():
    y = mt.tensor([[1.5, -2.0]], device="cuda")
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"):
        y.numpy()
    with pytest.raises(TypeError, match="can't convert cuda:0"):
        np.asarray(y)
    with fakecuda.count_syncs() as c:
        assert y.tolist() == [[1.5, -2.0]]
    assert c.count == 1
    with fakecuda.count_syncs() as c:
        assert y[0, 1].item() == -2.0 and float(y[0, 0]) == 1.5 and int(y[0, 0]) == 1 and bool(y[0, 0])
    assert c.count == 4
    with fakecuda.count_syncs() as c:
        text = repr(y)
    assert c.count == 1 and text == repr(y.cpu())[:-1] + ", device='cuda:0')"
    assert repr(mt.tensor([1, 2], device="cuda")) == "tensor([1, 2], device='cuda:0')"
    assert repr(mt.tensor([1.0], device="cuda", dtype=mt.float64)) == "tensor([1.], device='cuda:0', dtype=float64)"


def test_grad_setter_refuses_another_device():
    x = mt.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="assigned grad is on device cuda:0, but the tensor is on cpu"):
        x.grad = mt.ones(3, device="cuda")
    x.grad = mt.ones(3)
    y = mt.zeros(3, device="cuda", requires_grad=True)
    y.grad = mt.ones(3, device="cuda")
    assert on_fake(y.grad)


def test_in_place_writers_across_devices():
    y = mt.zeros(2, 3, device="cuda")
    y.fill_(2.5)
    y.copy_(mt.ones(2, 3))  # copy_ takes its source from any device, as torch's
    assert on_fake(y) and np.array_equal(devices.to_host(y._data), np.ones((2, 3)))
    y[0] = mt.tensor([7.0, 8.0, 9.0], device="cuda")
    y[1, 0] = mt.tensor(5.0)  # a 0-d CPU tensor: a scalar, allowed as in torch
    y[1, 1:] = 4.0
    assert devices.to_host(y._data).tolist() == [[7.0, 8.0, 9.0], [5.0, 4.0, 4.0]]
    y.add_(mt.ones(2, 3, device="cuda"))
    y.mul_(mt.tensor(2.0))
    assert devices.to_host(y._data).tolist() == [[16.0, 18.0, 20.0], [12.0, 10.0, 10.0]]
    y.masked_fill_(mt.tensor([[True, False, False], [False, False, True]], device="cuda"), 0.0)
    assert devices.to_host(y._data).tolist() == [[0.0, 18.0, 20.0], [12.0, 10.0, 0.0]]
    y.uniform_(0.0, 1.0)
    y.normal_()
    assert on_fake(y)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cuda:0 and cpu"):
        y[0] = mt.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cuda:0 and cpu"):
        y.add_(mt.ones(2, 3))
    x = mt.zeros(3)
    x.copy_(mt.ones(3, device="cuda"))
    assert x.device == "cpu" and x.numpy().tolist() == [1.0, 1.0, 1.0]
    x.fill_(mt.tensor(4.0, device="cuda"))  # a 0-d value from any device, as torch's fill_
    y.fill_(mt.tensor(3.0))
    assert x.numpy().tolist() == [4.0] * 3 and devices.to_host(y._data).tolist() == [[3.0] * 3] * 2


def test_new_factories_keep_the_device():
    y = mt.zeros(2, device="cuda", dtype=mt.float64)
    for t in (y.new_zeros(2, 3), y.new_ones(3), y.new_full((2,), 7.0), y.new_tensor([1.0, 2.0]), y.new_empty(2)):
        assert on_fake(t) and t.dtype == mt.float64


# ----------------------------------------------------------------------------- factories
FACTORIES = {
    "tensor": lambda **k: mt.tensor([[1.0, 2.0], [3.0, 4.0]], **k),
    "as_tensor": lambda **k: mt.as_tensor(np.arange(4.0), **k),
    "zeros": lambda **k: mt.zeros(2, 3, **k),
    "ones": lambda **k: mt.ones(2, 3, **k),
    "empty": lambda **k: mt.empty(2, 3, **k).zero_(),
    "full": lambda **k: mt.full((2, 3), 1.5, **k),
    "arange": lambda **k: mt.arange(0, 2, 0.25, **k),
    "linspace": lambda **k: mt.linspace(-1, 1, 7, **k),
    "eye": lambda **k: mt.eye(3, 4, **k),
    "rand": lambda **k: mt.rand(3, 4, **k),
    "randn": lambda **k: mt.randn(3, 4, **k),
    "randint": lambda **k: mt.randint(0, 10, (3, 4), **k),
    "randperm": lambda **k: mt.randperm(9, **k),
    "normal": lambda **k: mt.normal(1.0, 2.0, (3, 4), **k),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_factory_takes_device_and_gives_the_cpu_numbers(name):
    """Random factories draw on the host stream and copy: the same seed gives the same numbers on both devices."""
    mt.manual_seed(5)
    cpu = FACTORIES[name]()
    mt.manual_seed(5)
    dev = FACTORIES[name](device="cuda")
    assert cpu.device == "cpu" and dev.device == "cuda:0" and on_fake(dev)
    assert dev.dtype == cpu.dtype and dev.shape == cpu.shape
    np.testing.assert_array_equal(devices.to_host(dev._data), cpu.numpy())
    assert FACTORIES[name](device="cpu").device == "cpu"


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"])
def test_like_factories_keep_the_input_device_unless_given(name):
    x = mt.randn(2, 3, device="cuda")
    fn = getattr(mt, name)
    args = (x, 2.0) if name == "full_like" else (x,)
    assert on_fake(fn(*args)) and fn(*args).shape == (2, 3)
    assert fn(*args, device="cpu").device == "cpu"
    assert on_fake(fn(*args, dtype=mt.float64)) and fn(*args, dtype=mt.float64).dtype == mt.float64


def test_tensor_of_a_device_tensor_stays_there_and_copies():
    y = mt.arange(3.0, device="cuda")
    z = mt.tensor(y)
    assert on_fake(z) and z._data is not y._data
    assert mt.as_tensor(y) is y and on_fake(mt.as_tensor(y, dtype=mt.float64))
    assert mt.tensor(y, device="cpu").device == "cpu"


# ----------------------------------------------------------------------------- mixed devices
def test_mixed_devices_are_torchs_error():
    x, y = mt.randn(3), mt.randn(3, device="cuda")
    msg = r"Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    for op in (lambda: y + x, lambda: y * x, lambda: y - x.reshape(3, 1), lambda: mt.maximum(y, x)):
        with pytest.raises(RuntimeError, match=msg):
            op()
    with pytest.raises(RuntimeError, match="found at least two devices, cpu and cuda:0"):
        x @ y
    with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
        mt.nn.functional.linear(mt.randn(2, 3, device="cuda"), mt.randn(4, 3))


def test_python_numbers_and_0d_cpu_tensors_mix_with_device_tensors():
    a = np.array([1.0, -2.0, 3.0])
    y = mt.tensor(a, device="cuda", requires_grad=True)
    s = mt.tensor(2.0, dtype=mt.float64)  # 0-d, CPU: allowed beside CUDA tensors, as in torch
    out = y * s + 1.5 - 2
    assert on_fake(out)
    np.testing.assert_array_equal(devices.to_host(out._data), a * 2.0 - 0.5)
    out.cpu().backward(mt.tensor([0.5, 1.0, -1.0], dtype=mt.float64))
    assert on_fake(y.grad)
    np.testing.assert_array_equal(devices.to_host(y.grad._data), [1.0, 2.0, -2.0])


def test_a_0d_cpu_tensor_that_requires_grad_gets_its_gradient_on_the_cpu():
    a = np.array([1.0, -2.0, 3.0])
    y = mt.tensor(a, device="cuda", requires_grad=True)
    s = mt.tensor(2.0, dtype=mt.float64, requires_grad=True)
    (y * s).cpu().backward(mt.tensor([0.5, 1.0, -1.0], dtype=mt.float64))
    assert s.grad.device == "cpu"  # moved over by a ToDevice, so its gradient comes back
    assert s.grad.item() == 0.5 * 1.0 + 1.0 * -2.0 + -1.0 * 3.0


def test_same_device_is_a_type_comparison_on_the_common_path():
    """Function.apply's check: arrays of one type give back the very tuple (no device lookup); a NumPy scalar
    beside an array is the CPU twice, not a mix."""
    x, y = mt.randn(3), mt.randn(3)
    tensors, arrays = (x, y), [x._data, y._data]
    assert devices.same_device(tensors, arrays, "Add") is tensors
    s = mt.Tensor.wrap(np.float64(2.0))
    assert devices.same_device((x, s), [x._data, s._data], "Mul") == (x, s)
    d = mt.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0! \(the operands of Add"):
        devices.same_device((x, d), [x._data, d._data], mt.ops.Add)


def test_a_0d_device_tensor_beside_a_cpu_tensor_is_refused():
    with pytest.raises(RuntimeError, match="cpu and cuda:0"):
        mt.randn(3) + mt.tensor(1.0, device="cuda")


# ----------------------------------------------------------------------------- indexing
def test_a_device_index_array_is_an_advanced_index():
    """A silent wrong gradient, found once: a device index array taken for a basic index would make the backward
    write the repeated entries' gradients over each other instead of adding them."""
    data = devices.to_device(np.zeros((4, 3)), "cuda")
    idx = devices.to_device(np.array([0, 2, 0]), "cuda")
    for index in (idx, (idx, slice(None)), (Ellipsis, idx[:2]), mt.tensor([0, 2, 0], device="cuda")):
        normalized, advanced = normalize_index(index, data)
        assert advanced, f"{index!r}: a device index array must be an advanced index"
    moved, advanced = normalize_index(mt.tensor([1, 1]), data)  # a CPU index meets a device tensor: copied over
    assert advanced and type(moved) is fakecuda.FakeArray


def test_a_device_index_accumulates_repeated_indices():
    rng = np.random.default_rng(3)
    a, g = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    idx = np.array([0, 2, 0, 3, 0])
    x = mt.tensor(a, requires_grad=True)
    x[mt.tensor(idx)].backward(mt.tensor(g))
    assert x.grad.numpy()[0].tolist() == (g[0] + g[2] + g[4]).tolist()
    xd = mt.tensor(a, device="cuda", requires_grad=True)
    out = xd[mt.tensor(idx, device="cuda")]
    assert on_fake(out)
    out.backward(mt.tensor(g, device="cuda"))
    np.testing.assert_array_equal(devices.to_host(xd.grad._data), x.grad.numpy())
    # a CPU index tensor may index a device tensor (as in torch), with the same gradient
    xc = mt.tensor(a, device="cuda", requires_grad=True)
    xc[mt.tensor(idx), 1:].backward(mt.tensor(g[:, 1:], device="cuda"))
    np.testing.assert_array_equal(devices.to_host(xc.grad._data)[:, 1:], x.grad.numpy()[:, 1:])


def test_device_index_out_of_range_is_the_cpus_error():
    x, xd = mt.randn(3, 4), mt.randn(3, 4, device="cuda")
    for idx in ([0, 3], [-4], [[1, 5]]):  # the same IndexError text as the CPU's, for __getitem__ and __setitem__
        with pytest.raises(IndexError) as cpu_error:
            x[mt.tensor(idx)]
        with fakecuda.count_syncs() as c, pytest.raises(IndexError) as dev_error:
            xd[mt.tensor(idx, device="cuda")]
        assert str(dev_error.value) == str(cpu_error.value)
        assert c.count >= 1
        with pytest.raises(IndexError) as cpu_error:
            x[mt.tensor(idx)] = 0.0
        with pytest.raises(IndexError) as dev_error:
            xd[mt.tensor(idx, device="cuda")] = 0.0
        assert str(dev_error.value) == str(cpu_error.value)
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        xd[:, mt.tensor([4], device="cuda")]
    with fakecuda.count_syncs() as c:
        xd[mt.tensor([0, 2], device="cuda")]
    assert c.count == 1  # the bound check: one host sync per device index array


def test_a_device_index_into_a_cpu_tensor_is_refused():
    with pytest.raises(IndexError, match=r"indices should be either on cpu or on the same device"):
        mt.randn(3)[mt.tensor([0], device="cuda")]


# ----------------------------------------------------------------------------- modules
def test_module_to_moves_parameters_buffers_and_grads_in_place():
    mt.manual_seed(0)
    model = mt.nn.Sequential(mt.nn.Linear(3, 4), mt.nn.LayerNorm(4))
    model.register_buffer("steps", mt.tensor([3]))
    params = list(model.parameters())
    before = [p.detach().numpy().copy() for p in params]
    params[0].grad = mt.ones_like(params[0])
    assert model.cuda() is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]  # the same Parameter objects
    assert all(on_fake(p) for p in model.parameters()) and on_fake(model.steps) and on_fake(params[0].grad)
    for p, b in zip(params, before):
        np.testing.assert_array_equal(devices.to_host(p._data), b)
    assert model.to("cuda", mt.float64) is model and params[0].dtype == mt.float64 and model.steps.dtype == mt.int64
    model.cpu()
    assert all(p.device == "cpu" for p in model.parameters()) and model.steps.device == "cpu"
    model.to(mt.zeros(1, device="cuda", dtype=mt.float32))
    assert on_fake(params[1]) and params[1].dtype == mt.float32
    with pytest.raises(RuntimeError, match="out of range"):
        model.to("cuda:1")


def test_module_state_dict_loads_across_devices():
    mt.manual_seed(1)
    src = mt.nn.Linear(3, 2).cuda()
    dst = mt.nn.Linear(3, 2)
    dst.load_state_dict(src.state_dict())  # device arrays into CPU parameters: copied, as torch's
    assert all(p.device == "cpu" for p in dst.parameters())
    np.testing.assert_array_equal(dst.weight.detach().numpy(), devices.to_host(src.weight._data))
    back = mt.nn.Linear(3, 2).cuda()
    back.load_state_dict(dst.state_dict())
    assert on_fake(back.weight)
    np.testing.assert_array_equal(devices.to_host(back.weight._data), dst.weight.detach().numpy())


# ----------------------------------------------------------------------------- save and load
def test_a_checkpoint_from_the_device_loads_on_the_cpu_and_back_bitwise(tmp_path):
    mt.manual_seed(2)
    model = mt.nn.Linear(4, 3).cuda()
    state = {"model": model.state_dict(), "step": 7, "lr": [mt.tensor(0.5, device="cuda")], "host": np.arange(3)}
    path = tmp_path / "ckpt.npz"
    mt.save(state, path)
    with np.load(path) as raw:  # host .npz always: NumPy reads it without minitensor
        assert np.array_equal(raw["model/weight"], devices.to_host(model.weight._data))
    back = mt.load(path)  # default: each array where it was saved
    assert type(back["model"]["weight"]) is fakecuda.FakeArray and type(back["host"]) is np.ndarray
    assert back["step"] == 7 and type(back["lr"][0]) is fakecuda.FakeArray
    cpu = mt.load(path, map_location="cpu")
    assert all(type(v) is np.ndarray for v in cpu["model"].values())
    for k, v in cpu["model"].items():
        np.testing.assert_array_equal(v, model.state_dict()[k].cpu().numpy())
        assert v.dtype == model.state_dict()[k].cpu().numpy().dtype
    # CPU -> save -> device: bitwise again
    cpu_model = mt.nn.Linear(4, 3)
    cpu_model.load_state_dict(cpu["model"])
    mt.save(cpu_model.state_dict(), tmp_path / "cpu.npz")
    on_device = mt.load(tmp_path / "cpu.npz", map_location="cuda")
    assert all(type(v) is fakecuda.FakeArray for v in on_device.values())
    for k, v in on_device.items():
        assert devices.to_host(v).tobytes() == model.state_dict()[k].cpu().numpy().tobytes()
    remapped = mt.load(path, map_location={"cuda:0": "cpu"})
    assert type(remapped["model"]["bias"]) is np.ndarray
    assert type(mt.load(path, map_location=mt.device("cpu"))["lr"][0]) is np.ndarray
    assert type(mt.load(tmp_path / "cpu.npz", map_location={"cpu": "cuda"})["weight"]) is fakecuda.FakeArray


def test_loading_onto_a_device_that_is_not_there_names_it(tmp_path):
    path = tmp_path / "gpu.npz"
    mt.save({"w": mt.ones(2, device="cuda")}, path)
    devices.use_fake_cuda(False)
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(RuntimeError, match=r"deserialize an array on cuda:0 .*map_location='cpu'"):
            mt.load(path)
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            mt.load(path, map_location="cuda")
    assert type(mt.load(path, map_location="cpu")["w"]) is np.ndarray
    devices.use_fake_cuda(True)
    with pytest.raises(RuntimeError, match=r"deserialize an array on cuda:0 .*onto cuda:1.*out of range"):
        mt.load(path, map_location="cuda:1")
    assert type(mt.load(path, map_location=lambda storage, loc: storage)["w"]) is np.ndarray  # torch's CPU idiom


def test_a_host_only_checkpoint_stays_format_version_1(tmp_path):
    import json

    mt.save({"w": np.ones(2)}, tmp_path / "host.npz")
    mt.save({"w": mt.ones(2, device="cuda")}, tmp_path / "dev.npz")
    with np.load(tmp_path / "host.npz") as host, np.load(tmp_path / "dev.npz") as dev:
        assert json.loads(str(host["__minitensor__"]))["version"] == 1
        assert json.loads(str(dev["__minitensor__"]))["version"] == 2


def test_mixed_devices_are_refused_under_no_grad_too():
    """The inference path (Function.apply under no_grad) checks devices as the recorded path does."""
    with mt.no_grad(), pytest.raises(RuntimeError, match="cpu and cuda:0"):
        mt.randn(3) + mt.randn(3, device="cuda")


def test_cuda_helpers_answer_as_torch_without_a_gpu():
    """The helpers CPU programs call anyway: seeding and emptying the cache are accepted, choosing a device or
    synchronising raises (as torch does without a GPU)."""
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU")
    previous = mt.devices.use_fake_cuda(False)
    try:
        if mt.cuda.is_available():
            pytest.skip("minitensor sees a GPU")
        for lib in (mt, torch):
            assert lib.cuda.manual_seed_all(3) is None and lib.cuda.manual_seed(3) is None
            assert lib.cuda.empty_cache() is None
            assert lib.cuda.is_available() is False and lib.cuda.device_count() == 0
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            mt.cuda.set_device(0)
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            mt.cuda.synchronize()
        with pytest.raises(ValueError, match="expected a cuda device"):
            mt.cuda.set_device("cpu")
        with pytest.raises(TypeError, match="expects an int"):
            mt.cuda.manual_seed_all(1.5)
    finally:
        mt.devices.use_fake_cuda(previous)


def test_cuda_set_device_on_the_fake_device():
    previous = mt.devices.use_fake_cuda(True)
    try:
        mt.cuda.set_device(0)
        mt.cuda.set_device("cuda:0")
        with pytest.raises(ValueError, match="index 0"):
            mt.cuda.set_device(1)
    finally:
        mt.devices.use_fake_cuda(previous)
