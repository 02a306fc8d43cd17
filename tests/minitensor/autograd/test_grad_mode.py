"""Grad mode: per thread (threads record, restore and train independently), and every form of the helpers
(plain call, context manager, decorator with and without parentheses, on generator functions) against torch."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, assert_close

RTOL = OP_RTOL["float64"]


@pytest.fixture(autouse=True)
def _grad_mode_on_after():
    """A failing form must not leave grad mode off for the next test (in either library)."""
    yield
    mt.autograd.set_grad_enabled(True)
    torch.set_grad_enabled(True)


@pytest.fixture
def fast_switching():
    """Threads hand over the GIL every microsecond, so their ops interleave finely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _run_threads(*targets):
    """Run each target in its own thread; re-raise the first exception a thread raised."""
    errors = []

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # handed to the main thread
                errors.append(e)

        return run

    threads = [threading.Thread(target=guarded(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


# ----------------------------------------------------------------------------- threads
def test_one_thread_in_no_grad_does_not_stop_another_recording(rng):
    x_np, g_np = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    entered, recorded = threading.Event(), threading.Event()
    seen = {}

    def idle_in_no_grad():
        with mt.no_grad():
            entered.set()
            assert recorded.wait(10)
            seen["idle"] = mt.is_grad_enabled()

    def train():
        assert entered.wait(10)
        x = mt.tensor(x_np, requires_grad=True)
        y = (x.tanh() * mt.tensor(g_np)).sum()
        seen["requires_grad"] = y.requires_grad
        y.backward()
        seen["grad"] = x.grad.numpy()
        recorded.set()

    _run_threads(idle_in_no_grad, train)
    xt = torch.tensor(x_np, requires_grad=True)
    (xt.tanh() * torch.tensor(g_np)).sum().backward()
    assert seen["idle"] is False and seen["requires_grad"] is True
    assert_close(seen["grad"], xt.grad.numpy(), RTOL, "gradient recorded beside a no_grad thread")
    assert mt.is_grad_enabled()


@pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])
def test_overlapping_no_grad_in_two_threads_restores_each(lib):
    """A enters, B enters, A leaves, B leaves (not nested): each thread sees its own mode throughout."""
    steps = [threading.Event() for _ in range(4)]
    seen = []

    def a():
        with lib.no_grad():
            seen.append(("A in", lib.is_grad_enabled()))
            steps[0].set()
            assert steps[1].wait(10)
        seen.append(("A out", lib.is_grad_enabled()))
        steps[2].set()

    def b():
        assert steps[0].wait(10)
        seen.append(("B before", lib.is_grad_enabled()))
        with lib.no_grad():
            steps[1].set()
            assert steps[2].wait(10)
            seen.append(("B in, A gone", lib.is_grad_enabled()))
        seen.append(("B out", lib.is_grad_enabled()))

    _run_threads(a, b)
    assert seen == [("A in", False), ("B before", True), ("A out", True), ("B in, A gone", False), ("B out", True)]
    assert lib.is_grad_enabled()


@pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])
def test_a_new_thread_starts_with_grad_mode_on(lib):
    seen = []
    with lib.no_grad():
        _run_threads(lambda: seen.append(lib.is_grad_enabled()))
        seen.append(lib.is_grad_enabled())
    assert seen == [True, False]


def _mlp_and_data(seed: int):
    mt.manual_seed(seed)
    model = mt.nn.Sequential(mt.nn.Linear(6, 16), mt.nn.Tanh(), mt.nn.Linear(16, 3))
    model.to(mt.float64)
    rng = np.random.default_rng(seed)
    batches = [(mt.tensor(rng.standard_normal((8, 6))), mt.tensor(rng.standard_normal((8, 3)))) for _ in range(30)]
    return model, batches


def _train(model, batches, record: list) -> None:
    """Adam steps; each step also evaluates under no_grad, so the threads flip their grad mode all along."""
    opt = mt.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in batches:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with mt.no_grad():
            record.append(float(((model(x) - y) ** 2).mean().item()))


def test_two_models_trained_in_two_threads_match_one_after_the_other(fast_switching):
    serial, threaded = {}, {}
    for name, seed in (("a", 1), ("b", 2)):
        model, batches = _mlp_and_data(seed)
        losses = []
        _train(model, batches, losses)
        serial[name] = ([p.detach().numpy().copy() for p in model.parameters()], losses)
    built = {name: _mlp_and_data(seed) for name, seed in (("a", 1), ("b", 2))}  # drawn in the main thread
    logs = {"a": [], "b": []}
    _run_threads(*(lambda n=n: _train(*built[n], logs[n]) for n in ("a", "b")))
    for name in ("a", "b"):
        threaded[name] = ([p.detach().numpy() for p in built[name][0].parameters()], logs[name])
        assert threaded[name][1] == serial[name][1], f"model {name}: losses differ when trained beside another"
        for p_thread, p_serial in zip(threaded[name][0], serial[name][0]):
            np.testing.assert_array_equal(p_thread, p_serial)


def test_two_transformers_trained_in_two_threads_match_one_after_the_other(fast_switching):
    from transformer_np.model import Transformer

    def build(seed):
        mt.manual_seed(seed)
        # no dropout: the runs must not draw from the one shared random stream
        model = Transformer(
            11, 11, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16, dropout=0.0
        )
        model.to(mt.float64)
        rng = np.random.default_rng(seed)
        src = mt.tensor(rng.integers(3, 11, (2, 5)))
        tgt = mt.tensor(rng.integers(3, 11, (2, 6)))
        return model, src, tgt

    def train(model, src, tgt, losses):
        opt = mt.optim.Adam(model.parameters(), lr=1e-3)
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        for _ in range(4):
            logits = model(src, tgt_in)  # masks from PAD=0 (the tokens are >= 3)
            loss = mt.nn.functional.cross_entropy(logits.reshape(-1, 11), tgt_out.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())

    serial = {}
    for seed in (3, 4):
        model, src, tgt = build(seed)
        losses = []
        train(model, src, tgt, losses)
        serial[seed] = ([p.detach().numpy().copy() for p in model.parameters()], losses)
    built = {seed: build(seed) for seed in (3, 4)}
    logs = {3: [], 4: []}
    _run_threads(*(lambda s=s: train(*built[s], logs[s]) for s in (3, 4)))
    for seed in (3, 4):
        assert logs[seed] == serial[seed][1]
        for p, q in zip(built[seed][0].parameters(), serial[seed][0]):
            np.testing.assert_array_equal(p.detach().numpy(), q)


def test_a_profile_records_only_its_own_thread_and_overlapping_profiles_restore():
    """Profiles in two threads, closed in the order they opened (not nested): each counts its own ops, and
    neither leaves a timing hook installed afterwards."""
    steps = [threading.Event() for _ in range(3)]
    profs = {}

    def a():
        with mt.profiler.profile() as prof:
            profs["a"] = prof
            mt.ones(3).exp()
            steps[0].set()
            assert steps[1].wait(10)
        steps[2].set()
        mt.ones(3).exp()  # after the block: not recorded anywhere
        profs["a after"] = type(mt.autograd.set_op_calls(mt.autograd.OpCalls()))

    def b():
        assert steps[0].wait(10)
        with mt.profiler.profile() as prof:
            profs["b"] = prof
            mt.ones(3).tanh()
            steps[1].set()
            assert steps[2].wait(10)
            mt.ones(3).tanh()
        profs["b after"] = type(mt.autograd.set_op_calls(mt.autograd.OpCalls()))

    _run_threads(a, b)
    assert {r["op"]: r["calls"] for r in profs["a"].rows()} == {"Exp": 1}
    assert {r["op"]: r["calls"] for r in profs["b"].rows()} == {"Tanh": 2}
    assert profs["a after"] is mt.autograd.OpCalls and profs["b after"] is mt.autograd.OpCalls


# ----------------------------------------------------------------------------- the forms, against torch
def _forms(lib) -> list:
    """Grad mode as seen after/inside each form of the helpers; the same script runs on both libraries."""
    seen = []
    lib.set_grad_enabled(False)  # a plain call switches the mode
    seen.append(lib.is_grad_enabled())
    lib.set_grad_enabled(True)
    seen.append(lib.is_grad_enabled())
    with lib.set_grad_enabled(False):
        seen.append(lib.is_grad_enabled())
    seen.append(lib.is_grad_enabled())
    with lib.no_grad():
        with lib.set_grad_enabled(True):
            seen.append(lib.is_grad_enabled())
        seen.append(lib.is_grad_enabled())
        with lib.enable_grad():
            seen.append(lib.is_grad_enabled())

    def probe():
        return lib.is_grad_enabled()

    decorated = [
        lib.no_grad()(probe),
        lib.no_grad(probe),  # without parentheses
        lib.set_grad_enabled(False)(probe),
    ]
    seen.append(lib.is_grad_enabled())  # decorating with set_grad_enabled(False) did not switch the mode
    seen += [f() for f in decorated]
    with lib.no_grad():
        seen += [lib.enable_grad()(probe)(), lib.enable_grad(probe)(), lib.set_grad_enabled(True)(probe)()]
    try:
        with lib.no_grad():
            raise KeyError("inside")
    except KeyError:
        seen.append(lib.is_grad_enabled())
    seen.append(lib.no_grad(probe).__name__)
    return seen


def test_every_form_of_the_grad_mode_helpers_matches_torch():
    ours = _forms(mt)
    assert ours == _forms(torch)
    assert ours[:2] == [False, True]


def _generator_forms(lib) -> list:
    """Each decorated generator logs the mode inside at each step; the caller logs its own between steps."""
    log = []

    def make(decorator):
        @decorator
        def gen(n):
            for i in range(n):
                log.append(("in", i, lib.is_grad_enabled()))
                got = yield i
                log.append(("sent", got, lib.is_grad_enabled()))
            return "done"

        return gen

    for name, decorator in (
        ("no_grad()", lib.no_grad()),
        ("no_grad", lib.no_grad),
        ("set_grad_enabled(False)", lib.set_grad_enabled(False)),
    ):
        log.append(("form", name))
        g = make(decorator)(2)
        log.append(("caller", next(g), lib.is_grad_enabled()))
        log.append(("caller", g.send("s"), lib.is_grad_enabled()))
        try:
            g.send("t")
        except StopIteration as e:
            log.append(("returned", e.value, lib.is_grad_enabled()))
    with lib.no_grad():  # enable_grad inside a generator, called under no_grad
        for name, decorator in (("enable_grad()", lib.enable_grad()), ("enable_grad", lib.enable_grad)):
            log.append(("form", name))
            for i in make(decorator)(2):
                log.append(("caller", i, lib.is_grad_enabled()))

    @lib.no_grad()
    def catcher():
        try:
            yield 1
        except ValueError:
            log.append(("caught", lib.is_grad_enabled()))
            yield 2
        finally:
            log.append(("closed", lib.is_grad_enabled()))

    g = catcher()
    next(g)
    log.append(("thrown", g.throw(ValueError("x")), lib.is_grad_enabled()))
    g.close()
    log.append(("after close", lib.is_grad_enabled()))
    return log


def test_decorated_generators_match_torch():
    ours = _generator_forms(mt)
    assert ours == _generator_forms(torch)
    assert ("in", 0, False) in ours and ("caller", 0, True) in ours  # the mode applies inside, not outside


def test_grad_mode_decorated_generator_records_nothing_inside(rng):
    x = mt.tensor(rng.standard_normal(3), requires_grad=True)

    @mt.no_grad()
    def outputs():
        yield x * 2
        yield x * 3

    ys = list(outputs())
    assert [y.requires_grad for y in ys] == [False, False]
    assert (x * 4).requires_grad


@pytest.mark.parametrize("bad", [0, 1, None, "no", np.bool_(False)])
def test_set_grad_enabled_refuses_a_non_bool_as_torch(bad):
    with pytest.raises(TypeError):
        torch.set_grad_enabled(bad)
    with pytest.raises(TypeError, match="must be a bool"):
        mt.set_grad_enabled(bad)
    assert mt.is_grad_enabled() and torch.is_grad_enabled()


@pytest.mark.parametrize("lib", [mt, torch], ids=["minitensor", "torch"])
def test_inference_mode_is_no_grad_as_context_and_decorator(lib):
    """Inside, no graph; the mode found is back after; inference_mode(False) turns grad mode on, as torch's does;
    both decorator forms."""
    x = lib.ones(2, requires_grad=True)
    with lib.inference_mode():
        assert not lib.is_grad_enabled() and not (x * 2).requires_grad
    assert lib.is_grad_enabled()
    with lib.no_grad(), lib.inference_mode(False):
        assert lib.is_grad_enabled()
    assert lib.is_grad_enabled()
    with lib.inference_mode(False):
        assert lib.is_grad_enabled()

    @lib.inference_mode
    def bare():
        return (x * 2).requires_grad

    @lib.inference_mode()
    def called():
        return (x * 2).requires_grad

    assert bare() is False and called() is False and lib.is_grad_enabled()


def test_inference_mode_refuses_a_non_bool():
    with pytest.raises(TypeError, match="must be a bool"):
        mt.inference_mode(1)
