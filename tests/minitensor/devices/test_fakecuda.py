"""The fake CUDA device (minitensor/fakecuda.py) is the wall CI's device tests stand on: each refusal it
promises is checked here, and so is what it must let through (NumPy's dispatch, as CuPy's)."""

import copy
import pickle

import numpy as np
import pytest

from minitensor import devices, fakecuda


def dev(a):
    return fakecuda.asarray(np.asarray(a, dtype=float))


def test_not_an_ndarray_and_no_implicit_conversion():
    a = dev([1.0, 2.0])
    assert not isinstance(a, np.ndarray)
    with pytest.raises(TypeError, match="implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="implicit conversion"):
        np.array([a, a])


@pytest.mark.parametrize(
    "mix",
    [
        lambda a: a + np.ones(2),
        lambda a: np.ones(2) * a,
        lambda a: np.add(a, np.ones(2)),
        lambda a: np.where(a > 1, a, np.zeros(2)),
        lambda a: np.concatenate([a, np.zeros(2)]),
        lambda a: a[np.array([0, 1])],
        lambda a: a.__setitem__(0, np.ones(())),
    ],
)
def test_host_operands_are_refused(mix):
    with pytest.raises(TypeError, match="NumPy array"):
        mix(dev([1.0, 2.0]))


@pytest.mark.parametrize(
    "reduce",
    [
        lambda a: a.max(axis=0, keepdims=True),
        lambda a: a.sum(0),
        lambda a: a.mean(axis=-1),
        lambda a: np.sum(a, axis=0),
        lambda a: np.amax(a, -1, keepdims=True),
        lambda a: np.add.reduce(a, axis=0),
    ],
)
def test_an_axis_of_a_0d_array_is_refused_as_cupy_refuses_it(reduce):
    """NumPy reduces a 0-d array over axis 0 or -1; CuPy raises AxisError (softmax of a 0-d tensor met it on an
    H200), so the fake raises too, while axis=None and () stay fine and a 1-d array keeps its axis 0."""
    with pytest.raises(np.exceptions.AxisError, match="0-d array"):
        reduce(dev(3.0))
    assert float(dev(3.0).max(axis=None, keepdims=True)) == 3.0
    assert float(dev(3.0).sum(axis=())) == 3.0
    assert reduce(dev([3.0])).get().reshape(-1).tolist() == [3.0]


def test_numpy_dispatches_and_results_stay_on_the_device():
    a = dev([[1.0, 2.0], [3.0, 4.0]])
    for r in (np.exp(a), a @ a.T, np.einsum("ij,ij->i", a, a), a.sum(), np.sum(a, axis=0), a[dev([0, 0]).astype(int)]):
        assert type(r) is fakecuda.FakeArray
    assert a.sum().shape == ()  # a 0-d device array, never a NumPy scalar
    np.testing.assert_array_equal(np.exp(a).get(), np.exp(a.get()))
    assert type(fakecuda.zeros((2, 3))) is fakecuda.FakeArray and fakecuda.float32 is np.float32


def test_scatter_add_accumulates_repeated_indices():
    c = fakecuda.zeros(3)
    np.add.at(c, dev([0, 0, 2]).astype(np.int64), 1.0)
    np.testing.assert_array_equal(c.get(), [2.0, 0.0, 1.0])


def test_in_place_operators_write_the_same_array():
    a = dev([1.0, 2.0])
    b = a
    a += 1
    assert a is b
    np.testing.assert_array_equal(b.get(), [2.0, 3.0])


def test_host_reads_are_counted():
    a = dev([1.0, 2.0])
    with fakecuda.count_syncs() as c:
        s = a.sum()  # stays on the device
        y = a * 2
    assert c.count == 0
    with fakecuda.count_syncs() as c:
        float(s), bool(y[0] > 0), a.item(0), a.get(), fakecuda.asnumpy(a), repr(a)
    assert c.count == 6


def test_copies_and_pickles_stay_on_the_device():
    a = dev([1.0, 2.0])
    for b in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert type(b) is fakecuda.FakeArray
        np.testing.assert_array_equal(b.get(), a.get())


def test_no_random_module():
    with pytest.raises(AttributeError):
        fakecuda.random  # noqa: B018 (draws come from the host stream, then are copied over)


def test_array_module_and_is_host():
    assert devices.array_module(np.ones(2)) is np and devices.array_module(1.5) is np
    assert devices.array_module(dev([1.0])) is fakecuda
    assert devices.is_host(np.ones(2)) and not devices.is_host(dev([1.0]))
    with pytest.raises(TypeError, match="expected a NumPy or CuPy array"):
        devices.array_module([1.0])
