"""PyTorch's own op test inputs (OpInfo sample inputs) run through every op minitensor spells like torch.

For each entry of `torch.testing._internal.common_methods_invocations.op_db` that minitensor spells
the same way, each sample input is taken in float64 on the CPU with requires_grad=True, converted
(every tensor, also inside args, kwargs and lists, becomes an mt tensor of the same values, dtype and
requires_grad), run forward in both libraries, and backpropagated with the same random upstream
gradient (never all ones). Each sample is then

    agree    every output (values, shape, dtype) and the gradient of every tensor argument that
             requires grad agree within the project's float64 tolerance (minitensor.testing.OP_RTOL);
    refused  minitensor raised a clear error (TypeError, ValueError, IndexError, NotImplementedError,
             RuntimeError), forward or backward;
    wrong    anything else: a silent mismatch of a value or a gradient, a tensor argument that gets a
             gradient in torch but none here (or one where torch has none), or another exception.

The mapping of names (what "spelled like torch" means here):
    torch.X(...)                 -> mt.X(...)                  (op.op is torch.X itself)
    Tensor.X(...)                -> mt.Tensor.X(...)           (op.method_variant is torch.Tensor.X)
    torch.nn.functional.X(...)   -> mt.nn.functional.X(...)
    an OpInfo wrapper that only calls methods of its arguments (`lambda x, shape: x.expand(shape)`,
    `lambda x: x.T`) runs unchanged on mt tensors; the wrappers that call a torch function (einsum,
    where, embedding) have the mt twin written out in WRAPPERS below.
An entry with both a function and a method spelling runs both; each is a "spelling". Left out (LEFT_OUT,
with the reason): ops torch has no float64 for (`__rand__`, `__ror__`, one_hot), in-place ops (minitensor
refuses in-place changes of tensors that require grad), factories (zeros_like, linspace, new_full, ...:
nothing to differentiate) and ops whose values are random (dropout, randn_like, ...).

Forward mode runs the same way over the entries torch marks supports_forward_ad: every floating tensor argument
(also a class weight or a target torch made without grad) becomes a dual tensor with a random tangent
(torch.autograd.forward_ad and minitensor's, the same tangent), and each output's tangent is compared (a missing
tangent counts as zeros on either side). Where torch cannot take that many tangents, only the arguments that
require grad get one; a sample torch itself has no formula for is skipped. Both modes also run the samples torch
gives only without grad (embedding's max_norm, which rescales the weight in place), marked "(no grad)": reverse
mode their forward only.

The test fails on any 'wrong'. Refusals are listed, each with its reason, in tests/support/opinfo_refusals.py and
checked exactly: a new refusal fails, and so does a listed one that now agrees (remove it from the list),
so the list can only shrink. The whole sweep takes a few seconds, so every sample runs by default.

    python -m tests.minitensor.ops.test_torch_opinfo              # the counts (agree / refused / wrong), both modes
    python -m tests.minitensor.ops.test_torch_opinfo --refusals   # the refusals of both modes, in the list's format
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import re
import sys
import warnings
import zlib

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import OP_RTOL, error_stats

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
except ImportError as e:  # expecttest missing: the dev extra installs it
    pytest.skip(f"torch's OpInfo database needs expecttest: {e}", allow_module_level=True)

from tests.support.opinfo_refusals import FORWARD_REFUSALS, REFUSALS

pytestmark = pytest.mark.full

F = torch.nn.functional
RTOL = OP_RTOL["float64"]
CLEAR_ERRORS = (TypeError, ValueError, IndexError, NotImplementedError, RuntimeError)

# ops whose values are random, or that create tensors from sizes (no tensor input to differentiate)
LEFT_OUT = {
    "nn.functional.dropout": "random values",
    "randn": "random values",
    "randn_like": "random values",
    "rand_like": "random values",
    "randint": "random values",
    "multinomial": "random values (tests/minitensor/functions/test_sampling.py checks the distribution)",
    "bernoulli": "random values (tests/minitensor/test_random.py checks its forms against torch's)",
    "floor_divide": "torch has no derivative for it; minitensor's is 0, div(rounding_mode='floor')'s, against which "
    "the op table checks it",
    "empty": "uninitialised values",
    "empty_like": "uninitialised values",
    "new_empty": "uninitialised values",
    "item": "torch's wrapper sets a seed; .item() returns a Python number",
    "zero_": "in place (minitensor refuses in-place changes of a tensor that requires grad)",
}
for _factory in ("arange", "linspace", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full"):
    LEFT_OUT[_factory] = "a factory: makes a tensor from sizes or values, nothing to differentiate"

# OpInfo wrappers that call a torch function, and their minitensor twins
WRAPPERS = {
    "einsum": lambda tensors, equation: mt.einsum(equation, tensors),
    "where": lambda self, condition, other, **kw: mt.where(condition, self, other, **kw),
    "nn.functional.embedding": lambda weight, idx, **kw: mt.nn.functional.embedding(idx, weight, **kw),
}


def _entry_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _calls_only_methods(fn) -> bool:
    """An OpInfo wrapper lambda that calls only methods of its arguments (no `torch.` inside)."""
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return "lambda" in src and "torch." not in src.split("lambda", 1)[1]


def variants(op) -> list[tuple[str, object, object]]:
    """(variant name, torch callable, mt callable) for each spelling minitensor shares with torch."""
    name = op.name
    if name in LEFT_OUT or torch.float64 not in op.supported_dtypes("cpu"):
        return []
    out = []
    if name.startswith("nn.functional."):
        short = name.removeprefix("nn.functional.")
        if name in WRAPPERS:
            out.append(("fn", op.op, WRAPPERS[name]))
        elif op.op is getattr(F, short, None) and hasattr(mt.nn.functional, short):
            out.append(("fn", op.op, getattr(mt.nn.functional, short)))
        return out
    if name in WRAPPERS:
        out.append(("fn", op.op, WRAPPERS[name]))
    elif op.op is getattr(torch, name, None) and callable(getattr(mt, name, None)):
        out.append(("fn", op.op, getattr(mt, name)))
    elif hasattr(mt.Tensor, name) and op.op is not op.method_variant and _calls_only_methods(op.op):
        out.append(("wrapper", op.op, op.op))
    mv = getattr(torch.Tensor, name, None)
    if op.method_variant is not None and op.method_variant is mv:
        # defined by Tensor or one of its mixins (tensor_math.py, devices.py), not inherited from object
        mine = next((c.__dict__[name] for c in mt.Tensor.__mro__[:-1] if name in c.__dict__), None)
        if callable(mine):
            out.append(("method", mv, getattr(mt.Tensor, name)))
    return out


def _has_tensor_input(sample) -> bool:
    x = sample.input
    return isinstance(x, torch.Tensor) or (isinstance(x, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in x))


# ----------------------------------------------------------------------------- conversion
def _map(x, fn):
    """x with every torch tensor t replaced by fn(t), through lists, tuples and dicts."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _map(v, fn) for k, v in x.items()}
    return x


def _to_mt_value(x):
    """torch's non-tensor values in minitensor's spelling: dtypes, devices and memory formats."""
    if isinstance(x, torch.dtype):
        return np.dtype(str(x).removeprefix("torch."))
    if isinstance(x, torch.memory_format):  # torch.channels_last -> mt.channels_last
        return getattr(mt, str(x).removeprefix("torch."))
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_mt_value(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_mt_value(v) for k, v in x.items()}
    return x


def describe(x) -> str:
    """A sample's arguments with every tensor written as its shape and dtype (values left out)."""
    if isinstance(x, torch.Tensor):
        return f"T{tuple(x.shape)}:{str(x.dtype).removeprefix('torch.')}"
    if isinstance(x, torch.Size):
        return repr(tuple(x))
    if isinstance(x, (list, tuple)):
        body = ", ".join(describe(v) for v in x)
        return f"[{body}]" if isinstance(x, list) else f"({body}{',' if len(x) == 1 else ''})"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}={describe(v)}" for k, v in x.items()) + "}"
    if callable(x):
        return getattr(x, "__name__", type(x).__name__)
    return repr(x)


def _reason(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: " + re.sub(r"0x[0-9a-f]+", "0x..", msg)


# ----------------------------------------------------------------------------- one sample
def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_sample(torch_fn, mt_fn, sample, seed: int, mode: str = "reverse", every_float: bool = True) -> tuple[str, str]:
    """('agree' | 'refused' | 'wrong' | 'skipped', detail) for one sample, in reverse mode (a random upstream
    gradient) or in forward mode (a random tangent on every floating tensor argument, or with every_float=False
    only on those that require grad)."""
    fwd_t = torch.autograd.forward_ad
    fwd_m = mt.autograd.forward_ad
    rng = np.random.default_rng(seed)
    tangents: dict = {}  # id(torch tensor) -> its tangent (forward mode)

    def differentiable(t) -> bool:
        return t.requires_grad and t.is_floating_point()

    def dual(t) -> bool:  # forward mode: a tangent on every floating tensor argument, also one torch made without grad
        return mode == "forward" and t.is_floating_point() and (every_float or t.requires_grad)

    def tangent_of(t) -> np.ndarray:
        if id(t) not in tangents:
            tangents[id(t)] = rng.standard_normal(tuple(t.shape)) + 0.5
        return tangents[id(t)]

    # fresh leaves on both sides from the same values: every tensor argument that requires grad is a leaf (a dual
    # tensor in forward mode)
    memo_t: dict = {}

    def leaf_t(t):
        if id(t) not in memo_t:
            x = t.detach().clone()
            if dual(t):
                x = fwd_t.make_dual(x, torch.tensor(tangent_of(t), dtype=t.dtype))
            else:
                x.requires_grad_(differentiable(t))
            memo_t[id(t)] = (t, x)
        return memo_t[id(t)][1]

    memo_m: dict = {}

    def leaf_m(t):
        if id(t) not in memo_m:
            x = mt.tensor(t.detach().numpy().copy())
            if dual(t):
                x = fwd_m.make_dual(x, mt.tensor(tangent_of(t).astype(x.dtype)))
            else:
                x.requires_grad_(differentiable(t))
            memo_m[id(t)] = x
        return memo_m[id(t)]

    with contextlib.ExitStack() as levels:
        if mode == "forward":
            levels.enter_context(fwd_t.dual_level())
            levels.enter_context(fwd_m.dual_level())
        args_t = (_map(sample.input, leaf_t), *_map(tuple(sample.args), leaf_t))
        kwargs_t = _map(dict(sample.kwargs), leaf_t)
        args_m = _to_mt_value((_map(sample.input, leaf_m), *_map(tuple(sample.args), leaf_m)))
        kwargs_m = _to_mt_value(_map(dict(sample.kwargs), leaf_m))
        pairs = [(memo_t[k][1], memo_m[k]) for k in memo_t if differentiable(memo_t[k][0])]

        try:
            outs_t = _outputs(torch_fn(*args_t, **kwargs_t))
        except (NotImplementedError, RuntimeError) as e:
            if mode == "forward":  # torch itself has no forward-mode formula for this sample: nothing to compare
                return "skipped", _reason(e)
            raise
        try:
            outs_m = _outputs(mt_fn(*args_m, **kwargs_m))
        except CLEAR_ERRORS as e:
            return "refused", _reason(e)
        except Exception as e:  # a crash, not a clear error
            return "wrong", f"forward crashed: {_reason(e)}"
        problem = _compare_values(outs_m, outs_t)
        if problem:
            return "wrong", problem
        if mode == "forward":
            return _compare_tangents(outs_m, outs_t, fwd_m, fwd_t)
    return _compare_gradients(outs_m, outs_t, pairs, rng)


def _compare_values(outs_m, outs_t) -> str:
    """'' when the outputs agree in values, shapes and dtypes, else what differs."""
    if len(outs_m) != len(outs_t):
        return f"{len(outs_m)} outputs, torch has {len(outs_t)}"
    for i, (o, r) in enumerate(zip(outs_m, outs_t)):
        if not isinstance(r, torch.Tensor):
            if isinstance(o, mt.Tensor) or o != r:
                return f"output {i}: {o!r} vs torch {r!r}"
            continue
        if not isinstance(o, mt.Tensor):
            return f"output {i} is {type(o).__name__}, torch gives a tensor"
        if o.shape != tuple(r.shape) or o.dtype.name != str(r.dtype).removeprefix("torch."):
            return f"output {i}: {o.dtype.name} {o.shape} vs torch {r.dtype} {tuple(r.shape)}"
        ref = r.detach().numpy()
        if ref.dtype.kind == "f":
            _, rel = error_stats(o.detach().numpy(), ref)
            if not rel <= RTOL:
                return f"output {i}: max relative error {rel:.2e}"
        elif not np.array_equal(o.detach().numpy(), ref):
            return f"output {i}: values differ"
    return ""


def _compare_tangents(outs_m, outs_t, fwd_m, fwd_t) -> tuple[str, str]:
    """Each floating output's tangent against torch's (a missing tangent counts as zeros on either side)."""
    for i, (o, r) in enumerate(zip(outs_m, outs_t)):
        if not isinstance(r, torch.Tensor) or not r.is_floating_point():
            continue
        tt = fwd_t.unpack_dual(r).tangent
        try:
            tm = fwd_m.unpack_dual(o).tangent
        except CLEAR_ERRORS as e:
            return "refused", "tangent: " + _reason(e)
        want = np.zeros(tuple(r.shape)) if tt is None else tt.detach().numpy()
        got = np.zeros(o.shape) if tm is None else tm.detach().numpy()
        if got.shape != want.shape:
            return "wrong", f"tangent of output {i}: shape {got.shape} vs torch {want.shape}"
        _, rel = error_stats(got, want)
        if not rel <= RTOL:
            what = "missing" if tm is None else f"max relative error {rel:.2e}"
            return "wrong", f"tangent of output {i} {got.shape}: {what}"
    return "agree", ""


def _compare_gradients(outs_m, outs_t, pairs, rng) -> tuple[str, str]:
    """The same random upstream gradient into both graphs; every tensor argument's gradient compared."""
    diff = [(o, r) for o, r in zip(outs_m, outs_t) if isinstance(r, torch.Tensor) and r.requires_grad]
    if not diff or not pairs:
        return "agree", ""
    gs = [rng.standard_normal(r.shape) + 0.5 for _, r in diff]
    grads_t = torch.autograd.grad(
        [r for _, r in diff], [t for t, _ in pairs], [torch.tensor(g) for g in gs], allow_unused=True
    )
    ours = [(o, g) for (o, _), g in zip(diff, gs) if o.requires_grad]
    try:
        if ours:
            mt.autograd.backward([o for o, _ in ours], [mt.tensor(g.astype(o.dtype)) for o, g in ours])
    except CLEAR_ERRORS as e:
        return "refused", "backward: " + _reason(e)
    except Exception as e:
        return "wrong", f"backward crashed: {_reason(e)}"
    for k, ((_, x), gt) in enumerate(zip(pairs, grads_t)):
        g = None if x.grad is None else x.grad.numpy()
        if gt is None or not gt.any():
            if g is not None and np.any(g):
                return "wrong", f"gradient of tensor argument {k}: torch has none (or zeros), ours is nonzero"
            continue
        if g is None:
            return "wrong", f"gradient of tensor argument {k} {tuple(gt.shape)}: missing (torch has one)"
        if g.shape != tuple(gt.shape):
            return "wrong", f"gradient of tensor argument {k}: shape {g.shape} vs torch {tuple(gt.shape)}"
        _, rel = error_stats(g, gt.numpy())
        if not rel <= RTOL:
            return "wrong", f"gradient of tensor argument {k} {g.shape}: max relative error {rel:.2e}"
    return "agree", ""


# ----------------------------------------------------------------------------- the sweep
def _entries():
    return [op for op in op_db if variants(op)]


def samples_of(op, requires_grad: bool = True) -> list:
    """The op's float64 sample inputs with a tensor input, drawn from a seed of its own (stable descriptions)."""
    torch.manual_seed(zlib.crc32(_entry_id(op).encode()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = [
            s for s in op.sample_inputs("cpu", torch.float64, requires_grad=requires_grad) if _has_tensor_input(s)
        ]
    return samples


def _describe_sample(s) -> str:
    return f"{describe(s.input)}, args={describe(tuple(s.args))}, kwargs={describe(dict(s.kwargs))}"


def sweep_entry(op, mode: str = "reverse") -> list[tuple[tuple, str, str]]:
    """[((entry, variant, description), verdict, detail)] for each of the op's samples and spellings.

    Both modes also run the samples torch gives only without grad (embedding's max_norm, which changes the weight
    in place): reverse mode their forward only. Forward mode runs the entries torch marks supports_forward_ad."""
    eid = _entry_id(op)
    if mode == "forward" and not op.supports_forward_ad:
        return []
    samples = [(s, "") for s in samples_of(op)]
    with_grad = {_describe_sample(s) for s, _ in samples}
    samples += [(s, " (no grad)") for s in samples_of(op, False) if _describe_sample(s) not in with_grad]
    out = []
    for variant, torch_fn, mt_fn in variants(op):
        seen: collections.Counter = collections.Counter()
        for s, note in samples:
            desc = _describe_sample(s) + note
            seen[desc] += 1
            if seen[desc] > 1:  # the same shapes twice: numbered, so each key names one sample
                desc += f" #{seen[desc]}"
            key = (eid, variant, desc)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                seed = zlib.crc32(repr(key).encode())
                verdict, detail = run_sample(torch_fn, mt_fn, s, seed, mode)
                if verdict == "skipped":  # torch cannot take a tangent on every float (a weight it reads twice)
                    verdict, detail = run_sample(torch_fn, mt_fn, s, seed, mode, every_float=False)
            out.append((key, verdict, detail))
    return out


ENTRIES = _entries()


def _check(results, mode: str = "reverse") -> None:
    listed = REFUSALS if mode == "reverse" else FORWARD_REFUSALS
    name = "REFUSALS" if mode == "reverse" else "FORWARD_REFUSALS"
    wrong = [f"{k}: {d}" for k, v, d in results if v == "wrong"]
    assert not wrong, f"silently wrong (or crashed), {mode} mode:\n" + "\n".join(wrong)
    for key, verdict, detail in results:
        if verdict == "refused":
            assert key in listed, (
                f"a new refusal, not in tests/support/opinfo_refusals.py's {name}: {key!r}: {detail!r}. Support it, "
                "or, where the refusal is right, add it to the list with its reason"
            )
            assert listed[key] == detail, f"{key}: refused for another reason: {detail!r}, listed {listed[key]!r}"
        else:
            assert key not in listed, (
                f"{key} now agrees ({mode} mode): remove it from tests/support/opinfo_refusals.py's {name}"
            )


@pytest.mark.parametrize("op", ENTRIES, ids=_entry_id)
def test_opinfo_samples(op):
    _check(sweep_entry(op))


FORWARD_ENTRIES = [op for op in ENTRIES if op.supports_forward_ad]


@pytest.mark.parametrize("op", FORWARD_ENTRIES, ids=_entry_id)
def test_opinfo_samples_forward_mode(op):
    _check(sweep_entry(op, "forward"), "forward")


def test_refusal_list_names_only_swept_entries():
    swept = {(_entry_id(op), v) for op in ENTRIES for v, _, _ in variants(op)}
    stale = sorted({(e, v) for e, v, _ in REFUSALS} - swept)
    assert not stale, f"tests/support/opinfo_refusals.py lists entries the sweep does not run: {stale}"
    swept_forward = {(_entry_id(op), v) for op in FORWARD_ENTRIES for v, _, _ in variants(op)}
    stale = sorted({(e, v) for e, v, _ in FORWARD_REFUSALS} - swept_forward)
    assert not stale, (
        f"tests/support/opinfo_refusals.py's FORWARD_REFUSALS lists entries forward mode does not run: {stale}"
    )


def test_a_wrong_gradient_is_caught(monkeypatch):
    """The sweep can fail: with Mul's gradient for b doubled, a mul sample is classified wrong."""
    from minitensor import ops

    backward = ops.Mul.backward
    monkeypatch.setattr(
        ops.Mul, "backward", staticmethod(lambda ctx, g: tuple(None if x is None else 2 * x for x in backward(ctx, g)))
    )
    (op,) = [op for op in ENTRIES if _entry_id(op) == "mul"]
    verdicts = {v for _, v, _ in sweep_entry(op)}
    assert "wrong" in verdicts


def test_a_wrong_tangent_is_caught(monkeypatch):
    """The forward sweep can fail: with Mul's gradient for b doubled (its JVP is that formula applied to the tangents:
    jvp_kind 'elementwise'), a mul sample is classified wrong in forward mode."""
    from minitensor import ops

    backward = ops.Mul.backward
    monkeypatch.setattr(
        ops.Mul, "backward", staticmethod(lambda ctx, g: tuple(None if x is None else 2 * x for x in backward(ctx, g)))
    )
    (op,) = [op for op in ENTRIES if _entry_id(op) == "mul"]
    verdicts = {v for _, v, _ in sweep_entry(op, "forward")}
    assert "wrong" in verdicts


def test_the_refusal_list_only_shrinks(monkeypatch):
    """A refusal not listed fails, a listed one for another reason fails, and a listed one that agrees fails."""
    key = ("add", "fn", "a sample")
    monkeypatch.setattr(sys.modules[__name__], "REFUSALS", {})
    with pytest.raises(AssertionError, match="a new refusal"):
        _check([(key, "refused", "TypeError: no")])
    monkeypatch.setattr(sys.modules[__name__], "REFUSALS", {key: "TypeError: no"})
    _check([(key, "refused", "TypeError: no")])
    with pytest.raises(AssertionError, match="for another reason"):
        _check([(key, "refused", "ValueError: other")])
    with pytest.raises(AssertionError, match="now agrees .reverse mode.: remove it"):
        _check([(key, "agree", "")])
    with pytest.raises(AssertionError, match="silently wrong"):
        _check([(key, "wrong", "gradient of tensor argument 1: missing")])
    monkeypatch.setattr(sys.modules[__name__], "FORWARD_REFUSALS", {})  # forward mode has its own list
    with pytest.raises(
        AssertionError, match="a new refusal, not in tests/support/opinfo_refusals.py's FORWARD_REFUSALS"
    ):
        _check([(key, "refused", "TypeError: no")], "forward")


def main(argv) -> int:
    for mode, name in (("reverse", "REFUSALS"), ("forward", "FORWARD_REFUSALS")):
        entries = ENTRIES if mode == "reverse" else FORWARD_ENTRIES
        results = [r for op in entries for r in sweep_entry(op, mode)]
        if "--refusals" in argv:
            print(f"{name} = {{")
            for key, verdict, detail in sorted(results):
                if verdict == "refused":
                    print(f"    {key!r}: {detail!r},")
            print("}")
            continue
        counts = collections.Counter(v for _, v, _ in results)
        names = {k[0] for k, _, _ in results}
        variants_run = {k[:2] for k, _, _ in results}
        print(
            f"OpInfo sweep, {mode} mode: {len(results)} samples over {len(names)} op_db entries "
            f"({len(variants_run)} spellings): {counts['agree']} agree, {counts['refused']} refused, "
            f"{counts['wrong']} wrong, {counts['skipped']} skipped (torch has no formula)"
        )
        first = {}  # one spelling per entry (the function where there is one), as the issue counted
        for key, _, _ in results:
            first.setdefault(key[0], key[1])
        one = collections.Counter(v for k, v, _ in results if first[k[0]] == k[1])
        print(
            f"  one spelling per entry: {sum(one.values())} samples: "
            f"{one['agree']} agree, {one['refused']} refused, {one['wrong']} wrong"
        )
        by_reason = collections.Counter(f"{k[0]:<28} {d[:100]}" for k, v, d in results if v == "refused")
        for reason, n in by_reason.most_common():
            print(f"  refused {n:4d}  {reason}")
        for key, verdict, detail in results:
            if verdict == "wrong":
                print(f"  WRONG  {key}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
