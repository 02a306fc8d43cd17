"""Sampling text from a GPT with a key/value cache: greedy, temperature, top-k, top-p (nucleus), multinomial.

Each step feeds only the newest token: the blocks' keys and values of the earlier positions wait in the model's
GPTCache, so a step costs O(t) instead of the O(t^2) of running the whole prefix again (the cached logits equal the
recomputed ones up to round-off: tests/parity/test_gpt.py). Beyond the context (block_size) the window slides as
nanoGPT's sampler crops: the last block_size tokens are fed afresh into an empty cache (their positions have
changed, so no key can be kept), then single steps resume until the cache is full again.

The draws come from minitensor's seeded generator (mt.manual_seed; `seed` reseeds it): one uniform number per row
and step, turned into a token by the inverse of the distribution's cumulative sum (a multinomial draw of one).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import minitensor as mt
from minitensor.random import generator
from transformer_np.device import to_host
from transformer_np.model import check_tokens


def check_sampling(temperature, top_k, top_p, vocab_size: int) -> None:
    """ValueError naming the argument for a temperature that is not finite and > 0, a top_k outside [1, V], a top_p
    outside (0, 1]."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"generate: temperature must be a number, got {type(temperature).__name__} {temperature!r}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"generate: temperature must be finite and > 0, got {temperature}")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= vocab_size:
            raise ValueError(f"generate: top_k must be an int in [1, {vocab_size}] (the vocabulary), got {top_k!r}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1:
            raise ValueError(f"generate: top_p must be in (0, 1], got {top_p!r}")


def next_token_probs(logits: np.ndarray, temperature: float = 1.0, top_k=None, top_p=None) -> np.ndarray:
    """(B, V) float64 probabilities of the next token from its logits (B, V): softmax(logits / temperature), then
    only the top_k largest kept (ties with the k-th kept, as nanoGPT), then only the smallest set of the most likely
    tokens whose mass reaches top_p (the most likely token always), renormalised."""
    z = logits.astype(np.float64) / temperature
    if top_k is not None:
        kth = np.sort(z, axis=-1)[:, -top_k][:, None]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1:
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        before = np.cumsum(sorted_p, axis=-1) - sorted_p  # the mass of the tokens more likely than this one
        keep = np.zeros_like(p, dtype=bool)
        np.put_along_axis(keep, order, before < top_p, axis=-1)
        p = np.where(keep, p, 0.0)
        p /= p.sum(axis=-1, keepdims=True)
    return p


def draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(B,) int64: one multinomial draw per row of probs (B, V), by the inverse of its cumulative sum."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), probs.shape[1] - 1).astype(np.int64)  # u < cdf[-1] picks a real row


def generate(
    model,
    idx,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    seed: int | None = None,
    use_cache: bool = True,
) -> np.ndarray:
    """idx (B, T) prompt ids -> (B, T + max_new_tokens) int64: the prompt and the sampled continuation.

    greedy: the most likely token each step (temperature, top_k, top_p then play no part). use_cache=False runs
    the whole window each step (nanoGPT's sampler), for comparison. The model runs in eval mode under no_grad, and
    is put back in the mode it was in."""
    cfg = model.config
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    check_sampling(temperature, top_k, top_p, cfg.vocab_size)
    idx = np.asarray(to_host(check_tokens(idx, cfg.vocab_size, math.inf, "generate: prompt")), dtype=np.int64)
    if seed is not None:
        mt.manual_seed(seed)
    rng = generator("generate")
    was_training, bs = model.training, cfg.block_size
    model.eval()
    try:
        # one quiet block around the whole generation: each op finds NumPy's error state quiet and leaves it so
        # (fast/quiet.py), as transformer_np.decode does
        with mt.no_grad(), mt.autograd.ieee_quiet():
            cache = None
            for _ in range(max_new_tokens):
                if not use_cache:
                    logits = model(idx[:, -bs:])
                elif cache is None or cache.length >= bs:  # first step, or the window slides: afresh
                    cache = model.init_cache(bs)
                    logits = model(idx[:, -bs:], cache=cache)
                else:
                    logits = model(idx[:, -1:], cache=cache)
                last = to_host(logits[:, -1])  # (B, V), from the model's device (one copy per step)
                if greedy:
                    nxt = last.argmax(axis=-1)
                else:
                    nxt = draw(next_token_probs(last, temperature, top_k, top_p), rng)
                idx = np.concatenate([idx, nxt[:, None].astype(np.int64)], axis=1)
    finally:
        model.train(was_training)
    return idx
