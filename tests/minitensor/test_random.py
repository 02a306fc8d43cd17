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
