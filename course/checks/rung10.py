"""Rung 10's checks, against the project's decoder-only family (transformer_np.gpt) in float64: the causal mask
against causal_keep; the rotation against the project's RotaryEmbedding (output and gradient, random upstream
gradient); the learner's attention, block and GPT against the project's, the learner's weights copied in by name
(output, input gradient, every parameter's gradient, within PARITY_RTOL); the sampling filter against
next_token_probs and the draws against draw from the same seed. Both sides run on minitensor."""

from __future__ import annotations

import numpy as np

import minitensor as mt
from transformer_np.gpt import generate as ref_gen
from transformer_np.gpt import model as ref_model
from transformer_np.gpt.config import GPTConfig

from ..runner import Exercise
from .common import CheckFailed, as_array, case, compare, expect_array, rng
from .modules import RTOL, float64

REFERENCE = "transformer_np.gpt"
B, T, V = 2, 6, 11
CONFIG = GPTConfig(vocab_size=V, block_size=16, n_layer=2, n_head=2, n_embd=8, positions="rope", rope_theta=100.0)


def _mask_hint(got: np.ndarray, want: np.ndarray) -> str:
    t = want.shape[0]
    ones = np.ones((t, t), dtype=bool)
    if np.array_equal(got, np.tril(ones, -1)):
        return (
            "The diagonal is masked: position i must see itself (keep j <= i, not j < i); with the diagonal masked, "
            "position 0 sees no key at all and its softmax row is 0/0."
        )
    if np.array_equal(got, np.tril(ones, 1)):
        return (
            "Position i sees position i + 1: the future is visible (keep j <= i, not j <= i + 1), and a model "
            "trained with it learns to copy the next token instead of predicting it."
        )
    if np.array_equal(got, want.T):
        return "Yours is the expected transposed: rows are the queries (i), columns the keys (j)."
    if np.array_equal(got, ~want):
        return "Yours is the expected inverted: True means 'may attend' (the attention masks where it is False)."
    return ""


def _check_mask(mod):
    for t in (1, 4, 7):
        where = f"causal_mask({t})"
        with case(where):
            want = ref_model.causal_keep(t, t)
            got = expect_array(where, mod.causal_mask(t), want.shape, np.bool_)
            if not np.array_equal(got, want):
                i, j = (int(n) for n in np.argwhere(got != want)[0])
                hint = _mask_hint(got, want)
                raise CheckFailed(
                    f"{where}: at element ({i}, {j}) (query {i}, key {j}) expected {bool(want[i, j])} "
                    f"({REFERENCE}'s causal_keep), got {bool(got[i, j])}" + (f". {hint}" if hint else "")
                )


def _rotations(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> list:
    """The known wrong rotations, as (array, sentence) pairs for diagnose()."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    neighbours = np.empty_like(x)
    neighbours[..., 0::2], neighbours[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return [
        (
            x * cos - np.concatenate([-x2, x1], axis=-1) * sin,
            "Yours turns each pair by minus its angle: rotate_half(x) is cat(-x2, x1), the second half negated and "
            "moved first (x * cos + rotate_half(x) * sin); check the sign.",
        ),
        (
            x * cos + np.concatenate([x2, x1], axis=-1) * sin,
            "Your rotate_half swaps the halves without negating one: it is cat(-x2, x1); check the sign.",
        ),
        (
            x * cos + neighbours * sin,
            "You rotate neighbouring pairs (x[2i], x[2i + 1]), the interleaved layout; this rung's tables are "
            "rotate-half: pair i is (x[i], x[i + Dh/2]).",
        ),
    ]


def _check_rope(mod):
    r = rng(30)
    for shape, offset, theta in (((B, 2, T, 4), 0, 10000.0), ((B, 3, 5, 8), 3, 100.0)):
        where = f"apply_rope on x {shape}, positions {offset}..{offset + shape[2] - 1}, theta {theta:g}"
        with case(where):
            a, G = r.standard_normal(shape), r.standard_normal(shape)
            cos, sin = ref_model.rope_tables(shape[-1], np.arange(offset, offset + shape[2]), theta)
            x, x_ref = mt.tensor(a, requires_grad=True), mt.tensor(a, requires_grad=True)
            got = mod.apply_rope(x, cos, sin)
            want = ref_model.RotaryEmbedding(shape[-1], theta)(x_ref, offset)
            if not isinstance(got, mt.Tensor):
                raise CheckFailed(
                    f"{where}: returned a {type(got).__name__}; expected a Tensor, built from the engine's ops (a "
                    "slice, mt.cat, *, +) so that the gradient flows through it"
                )
            expect_array(f"{where}: output", got.detach().numpy(), want.shape, np.float64)
            compare(f"{where}: output", got, want, RTOL, REFERENCE, known=_rotations(a, cos, sin))
            if not got.requires_grad:
                raise CheckFailed(f"{where}: no gradient reaches x: build the rotation from the engine's ops")
            got.backward(mt.tensor(G))
            want.backward(mt.tensor(G))
            if x.grad is None:
                raise CheckFailed(f"{where}: no gradient reached x")
            compare(f"{where}: gradient of x", x.grad, x_ref.grad, RTOL, REFERENCE)


def _build(mod):
    """The learner's GPT and the project's, both float64, the learner's weights copied into the project's."""
    with float64():
        mt.manual_seed(0)
        ours, ref = mod.GPT(CONFIG), ref_model.GPT(CONFIG)
    mine, theirs = dict(ours.named_parameters()), dict(ref.named_parameters())
    if set(mine) != set(theirs):
        raise CheckFailed(
            f"GPT: your parameters must carry the project's names, so that they copy into its GPT: only yours "
            f"{sorted(set(mine) - set(theirs))}, only the project's {sorted(set(theirs) - set(mine))}"
        )
    for name, p in mine.items():
        if p.shape != theirs[name].shape:
            raise CheckFailed(f"GPT: {name} has shape {p.shape}; the project's has {theirs[name].shape}")
        theirs[name].data[...] = p.detach().numpy()
    return ours, ref


def _future_leaks(where: str, ours, x, changed) -> None:
    """The earlier positions' outputs must not change when only the last position's input does (`changed`)."""
    with mt.no_grad():
        y1, y2 = as_array(ours(x)), as_array(ours(changed))
    if y1.shape != y2.shape or y1.ndim < 2 or not np.array_equal(y1[:, :-1], y2[:, :-1]):
        raise CheckFailed(
            f"{where}: the outputs at positions 0..{x.shape[1] - 2} change when only the last position's input "
            "does: the future is visible. Pass your causal mask (10.1) to the attention."
        )


def _compare_pair(where: str, ours, ref, x: np.ndarray, differentiable: bool, known=()) -> None:
    """ours(x) against ref(x): the output, then x's gradient (when x is a float input) and every parameter's."""
    with case(where):
        xs = [mt.tensor(x, requires_grad=True) for _ in range(2)] if differentiable else [x, x.copy()]
        y, y_ref = ours(xs[0]), ref(xs[1])
        if not isinstance(y, mt.Tensor):
            raise CheckFailed(f"{where}: forward returned {type(y).__name__}, expected a Tensor")
        expect_array(f"{where}: output", y.detach().numpy(), y_ref.shape, np.float64)
        compare(f"{where}: output", y, y_ref, RTOL, REFERENCE, known=known)
        G = rng(31).standard_normal(y_ref.shape)
        y.backward(mt.tensor(G))
        y_ref.backward(mt.tensor(G))
        if differentiable:
            if xs[0].grad is None:
                raise CheckFailed(f"{where}: no gradient reached the input")
            compare(f"{where}: gradient of the input", xs[0].grad, xs[1].grad, RTOL, REFERENCE)
        theirs = dict(ref.named_parameters())
        for name, p in ours.named_parameters():
            if p.grad is None:
                raise CheckFailed(f"{where}: no gradient reached parameter {name}")
            compare(f"{where}: gradient of {name}", p.grad, theirs[name].grad, RTOL, REFERENCE)


def _check_gpt(mod):
    r = rng(32)
    x = r.standard_normal((B, T, CONFIG.n_embd))
    x_changed = x.copy()
    x_changed[:, -1] += 1.0
    # The attention, then the block, then the model: the first that differs is the one to fix.
    ours, ref = _build(mod)
    attn, attn_ref = ours.blocks[0].attn, ref.blocks[0].attn
    where = f"blocks.0.attn (CausalSelfAttention, H={CONFIG.n_head}, D={CONFIG.n_embd}) on x {x.shape}"
    with case(where):
        _future_leaks(where, attn, mt.tensor(x), mt.tensor(x_changed))
    with mt.no_grad():
        rotary, attn_ref.rotary = attn_ref.rotary, None
        unrotated = attn_ref(mt.tensor(x)).detach().numpy()  # the project's attention without the rotation
        attn_ref.rotary = rotary
    no_rope = [(unrotated, "Yours is the project's attention without the rotation: rotate q and k (your apply_rope).")]
    _compare_pair(where, attn, attn_ref, x, True, known=no_rope)
    ours, ref = _build(mod)
    block = ref.blocks[0]
    with mt.no_grad():
        h = block.norm1(mt.tensor(x) + block.attn(mt.tensor(x)))
        post_norm = block.norm2(h + block.mlp(h)).detach().numpy()
    post = [(post_norm, "Yours is the post-norm block of rung 6, norm(x + f(x)); GPT's is pre-norm: x + f(norm(x)).")]
    where = "blocks.0 (Block: x + attn(norm1 x), then x + mlp(norm2 x))"
    _compare_pair(where, ours.blocks[0], block, x, True, known=post)
    ours, ref = _build(mod)
    idx = r.integers(0, V, (B, T))
    idx_changed = idx.copy()
    idx_changed[:, -1] = (idx[:, -1] + 1) % V
    where = f"GPT on token ids {idx.shape}: the logits"
    with case(where):
        _future_leaks(where, ours, idx, idx_changed)
    _compare_pair(where, ours, ref, idx, False)


def _check_sampling(mod):
    r = rng(33)
    logits = 3.0 * r.standard_normal((5, V))  # no two equal: top-k keeps exactly k
    for temperature, top_k in ((1.0, None), (0.5, None), (2.0, None), (1.0, 3), (0.7, 5), (1.5, 1), (1.0, V)):
        where = f"next_token_probs(logits {logits.shape}, temperature={temperature:g}, top_k={top_k})"
        with case(where):
            given = logits.copy()
            got = mod.next_token_probs(given, temperature, top_k)
            if not np.array_equal(given, logits):
                raise CheckFailed(f"{where}: your function changed the logits it was given; leave them as they came")
            want = ref_gen.next_token_probs(logits, temperature, top_k)
            expect_array(where, got, want.shape, np.float64)
            at_one = ref_gen.next_token_probs(logits, 1.0, top_k)
            known = []
            if temperature != 1.0:
                after = (
                    "The temperature was applied after the softmax: it divides the logits before it, softmax(z / T) "
                    "(T < 1 sharpens, T > 1 flattens); dividing the probabilities changes nothing once they are "
                    "renormalised, and leaves rows that do not sum to 1 when they are not."
                )
                known += [(at_one / temperature, after), (at_one, after)]
            if top_k is not None and top_k < V:
                known.append(
                    (
                        ref_gen.next_token_probs(logits, temperature, top_k + 1),
                        f"Yours keeps k + 1 = {top_k + 1} tokens per row: keep the logits >= the k-th largest, "
                        "sort(z)[-k] (an off-by-one in the index?).",
                    )
                )
            if top_k is not None and top_k > 1:
                known.append(
                    (
                        ref_gen.next_token_probs(logits, temperature, top_k - 1),
                        f"Yours keeps k - 1 = {top_k - 1} tokens per row: the k-th largest logit is kept too.",
                    )
                )
            compare(where, got, want, RTOL, f"{REFERENCE}.generate", known=known)
    probs = np.concatenate([ref_gen.next_token_probs(logits, t, k) for t, k in ((1.0, None), (0.5, 3), (2.0, 1))] * 20)
    n = probs.shape[0]
    where = f"draw(probs {probs.shape}, np.random.default_rng(7))"
    with case(where):
        mine, theirs = np.random.default_rng(7), np.random.default_rng(7)
        got = mod.draw(probs.copy(), mine)
        want = ref_gen.draw(probs, theirs)
        got = expect_array(where, got, want.shape, np.int64)
        if not np.array_equal(got, want):
            row = int(np.argwhere(got != want)[0][0])
            u = float(np.random.default_rng(7).random((n, 1))[row, 0])
            cdf = np.cumsum(probs[row])
            raise CheckFailed(
                f"{where}: row {row} drew token {int(got[row])}, expected {int(want[row])} ({REFERENCE}.generate.draw"
                f" from the same seed; that row's u = {u:.4f}, its cumulative probabilities "
                f"{np.round(cdf, 4).tolist()}). "
                f"Draw one uniform number per row, u = rng.random(({n}, 1)) times the row's total, and take the "
                "first token whose cumulative probability exceeds u."
            )
        if mine.random() != theirs.random():
            raise CheckFailed(
                f"{where}: the tokens agree, but your draw took a different count of numbers from the generator than "
                f"the {n} due (one per row): the draws after it would differ"
            )


EXERCISES = [
    Exercise("10.1", "causal_mask", _check_mask),
    Exercise("10.2", "apply_rope (rotate-half)", _check_rope),
    Exercise("10.3", "GPT: attention, block, forward", _check_gpt, needs=("5.1", "10.1", "10.2")),
    Exercise("10.4", "next_token_probs and draw", _check_sampling),
]
