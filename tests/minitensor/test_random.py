"""torch.Generator objects and the `generator=` argument of the random factories; randint's overloads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import minitensor as mt

FACTORIES = {
    "rand": lambda g: mt.rand(3, 4, generator=g),
    "randn": lambda g: mt.randn(3, 4, generator=g),
    "randint": lambda g: mt.randint(0, 100, (3, 4), generator=g),
    "randperm": lambda g: mt.randperm(10, generator=g),
    "normal": lambda g: mt.normal(1.0, 2.0, (3, 4), generator=g),
    "multinomial": lambda g: mt.multinomial(mt.tensor([0.2, 0.3, 0.5]), 8, True, generator=g),
    "bernoulli": lambda g: mt.bernoulli(mt.full((3, 8), 0.5), generator=g),
    "Tensor.bernoulli": lambda g: mt.full((3, 8), 0.5).bernoulli(generator=g),
    "bernoulli_": lambda g: mt.zeros(3, 8).bernoulli_(0.4, generator=g),
    "normal_tensors": lambda g: mt.normal(mt.zeros(3, 4), mt.ones(4), generator=g),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_generator_is_a_stream_of_its_own(name):
    """Same seed, same numbers; the global stream is neither read nor advanced by a draw from a generator."""
    draw = FACTORIES[name]
    mt.manual_seed(5)
    global_state = mt.random.get_rng_state()
    a = draw(mt.Generator().manual_seed(7))
    b = draw(mt.Generator().manual_seed(7))
    assert mt.random.get_rng_state() == global_state
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c = draw(mt.Generator().manual_seed(8))
    assert not np.array_equal(a.numpy(), c.numpy())


def test_generator_state_round_trips_and_seeds_as_torch():
    g = mt.Generator()
    assert g.initial_seed() == torch.Generator().initial_seed()  # the same default seed
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    state = g.get_state()
    a = mt.rand(5, generator=g)
    assert g.set_state(state) is g
    np.testing.assert_array_equal(mt.rand(5, generator=g).numpy(), a.numpy())
    new = g.seed()
    assert isinstance(new, int) and g.initial_seed() == new


def test_generator_refuses_what_it_cannot_be():
    with pytest.raises(TypeError, match="generator must be a minitensor.Generator"):
        mt.rand(3, generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="device='cpu'"):
        mt.Generator("cuda")
    with pytest.raises(ValueError, match="PCG64 state"):
        mt.Generator().set_state({"bit_generator": "MT19937"})
    with pytest.raises(TypeError, match="expects an int"):
        mt.Generator().manual_seed(1.5)


@pytest.mark.parametrize(
    "args, kwargs, low, high",
    [
        ((10, (3, 4)), {}, 0, 10),
        ((8, 10, (3, 4)), {}, 8, 10),
        ((10,), {"size": (3, 4)}, 0, 10),
        ((8, 10), {"size": (3, 4)}, 8, 10),
        ((), {"low": 8, "high": 10, "size": (3, 4)}, 8, 10),
        ((), {"high": 10, "size": (3, 4)}, 0, 10),
        ((10, [5]), {"dtype": mt.int32}, 0, 10),
    ],
)
def test_randint_takes_torchs_overloads(args, kwargs, low, high):
    ref = torch.randint(*args, **{k: (torch.int32 if v is mt.int32 else v) for k, v in kwargs.items()})
    out = mt.randint(*args, **kwargs)
    assert out.shape == tuple(ref.shape) and out.dtype.name == str(ref.dtype).removeprefix("torch.")
    assert (out.numpy() >= low).all() and (out.numpy() < high).all() and len(np.unique(out.numpy())) > 1


@pytest.mark.parametrize(
    "args, match",
    [((), "high and size are required"), ((5,), "high and size are required"), ((5, 2, (3,)), "low < high")],
)
def test_randint_refuses_as_torch(args, match):
    with pytest.raises(TypeError if "required" in match else RuntimeError):
        torch.randint(*args)
    with pytest.raises(TypeError if "required" in match else ValueError, match=match):
        mt.randint(*args)


INIT = ["uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_"]
INIT += ["kaiming_normal_"]


@pytest.mark.parametrize("name", INIT)
def test_init_takes_a_generator_as_torch(name):
    """torch.nn.init's random initialisers take generator= (torch 2.x): the same seed, the same weights; the global
    stream untouched."""
    torch_init = getattr(torch.nn.init, name)
    torch_init(torch.empty(3, 4), generator=torch.Generator().manual_seed(1))  # the spelling torch takes
    state = mt.random.get_rng_state()
    a = getattr(mt.nn.init, name)(mt.empty(3, 4), generator=mt.Generator().manual_seed(1))
    b = getattr(mt.nn.init, name)(mt.empty(3, 4), generator=mt.Generator().manual_seed(1))
    assert mt.random.get_rng_state() == state
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("method", ["uniform_", "normal_"])
def test_in_place_draws_take_a_generator_as_torch(method):
    getattr(torch.empty(3), method)(generator=torch.Generator().manual_seed(1))
    a = getattr(mt.empty(3), method)(generator=mt.Generator().manual_seed(1))
    b = getattr(mt.empty(3), method)(generator=mt.Generator().manual_seed(1))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_bernoulli_draws_its_probabilities_in_torchs_forms():
    """torch.bernoulli(p_tensor), Tensor.bernoulli(), Tensor.bernoulli_(p number or tensor): 0/1 in the tensor's dtype,
    an entry of probability 0 or 1 always its value, the others at their rate."""
    g = mt.Generator().manual_seed(0)
    p = np.array([0.0, 1.0, 0.25, 0.75])
    draws = mt.bernoulli(mt.tensor(np.tile(p, (20_000, 1))), generator=g).numpy()
    assert draws.dtype == np.float64 and set(np.unique(draws)) <= {0.0, 1.0}
    assert (draws[:, 0] == 0).all() and (draws[:, 1] == 1).all()
    np.testing.assert_allclose(draws.mean(axis=0), p, atol=5 * np.sqrt(0.25 / 20_000))
    for lib in (mt, torch):  # the same forms, dtypes and shapes as torch
        x = lib.zeros(4, 3, dtype=lib.int64)
        assert x.bernoulli_(0.5) is x and x.dtype == lib.int64
        y = lib.zeros(2, 3).bernoulli_(lib.tensor([0.0, 1.0, 1.0]))
        assert y.numpy().tolist() == [[0.0, 1.0, 1.0]] * 2
        assert lib.bernoulli(lib.rand(2, 3, dtype=lib.float64), 0.3).dtype == lib.float64


@pytest.mark.parametrize(
    "draw, error, match",
    [
        (lambda: mt.bernoulli(mt.tensor([0.5, 1.5])), ValueError, r"probabilities must be in \[0, 1\], got 1.5"),
        (lambda: mt.bernoulli(mt.tensor([1, 0])), TypeError, "input must be a floating-point tensor"),
        (lambda: mt.zeros(3).bernoulli_(-0.1), ValueError, r"probabilities must be in \[0, 1\]"),
        (lambda: mt.zeros(3).bernoulli_(mt.tensor([0.5, 0.5])), ValueError, "do not broadcast"),
        (lambda: mt.normal(mt.zeros(3), mt.tensor([1.0, -1.0, 1.0])), ValueError, "std must be non-negative"),
        (lambda: mt.normal(mt.zeros(3), 1.0, (3,)), TypeError, "size is given with numbers"),
    ],
)
def test_bernoulli_and_normal_refuse_as_torch(draw, error, match):
    with pytest.raises(error, match=match):
        draw()


def test_normal_takes_torchs_tensor_forms():
    """torch.normal(mean_tensor, std_tensor), (mean_tensor, std number), (mean number, std_tensor): one draw per
    element of the broadcast shape, in the tensor's dtype; the sample moments as asked."""
    for lib in (mt, torch):
        assert lib.normal(lib.zeros(3), lib.ones(3)).shape == (3,)
        assert lib.normal(lib.zeros(2, 3, dtype=lib.float64), 2.0).dtype == lib.float64
        assert lib.normal(1.0, lib.ones(4)).shape == (4,)
    a = mt.normal(mt.full((50_000,), 3.0), mt.full((50_000,), 2.0), generator=mt.Generator().manual_seed(0)).numpy()
    assert abs(a.mean() - 3.0) < 5 * 2.0 / np.sqrt(50_000) and abs(a.std() - 2.0) < 0.05
