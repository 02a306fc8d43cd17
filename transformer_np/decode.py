"""Generation with a trained Transformer: batched greedy decoding and beam search.

Both run under mt.no_grad() with the model in eval mode (its training flag is restored after),
encode the source once, and feed the decoder one position per step. With use_cache=True the
decoder gets only the newest token and reuses the keys/values of earlier positions (model.KVCache, or
decoding_cache.py's speed device); with use_cache=False it recomputes the whole prefix under a causal mask. Both
give the same tokens (tests/transformer_np/test_decode.py); the cache turns each step's cost from O(t^2) into O(t).

Conventions: max_len counts generated tokens (BOS excluded, EOS included), so the decoder is fed
at most max_len positions (BOS + max_len - 1 tokens) and max_len must not exceed the model's.
Returned sequences never contain BOS; they end at EOS when one was produced.

On a device (model.to("cuda")) the search's bookkeeping stays on the host, in NumPy: each step copies the newest
position's logits (greedy: their argmax) back, one host sync a step, and the fed tokens go over as host arrays.
"""

from __future__ import annotations

import contextlib

import numpy as np

import minitensor as mt
from minitensor import fast
from transformer_np import decoding_cache  # noqa: F401 (registers the cache's and the one-position step's devices)
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID
from transformer_np.device import array_of, on_device, to_host
from transformer_np.masks import causal_mask, padding_mask


@contextlib.contextmanager
def _inference(model):
    """model.eval(), mt.no_grad() and mt.autograd.ieee_quiet() for the block, then the model's training flag as it
    was. (Every op is quiet anyway; inside one quiet block around the whole decode, each op finds NumPy's error
    state quiet and leaves it as it is, fast/quiet.py.)"""
    was_training = model.training
    model.eval()
    try:
        with mt.no_grad(), mt.autograd.ieee_quiet():
            yield
    finally:
        model.train(was_training)


def _check_int(name: str, value, low: int, high: int | None = None, who: str = "decode") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"{low} <= {name}" + (f" <= {high}" if high is not None else "")
        raise ValueError(f"{who}: expected {bound}, got {name}={value}")
    return int(value)


def _raw(x):
    return array_of(x)


def greedy_decode(
    model,
    src,
    max_len: int,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    pad_id: int = PAD_ID,
    use_cache: bool = True,
    src_mask=None,
) -> np.ndarray:
    """Pick argmax_y p(y | src, y_<t) at every step, for a whole batch at once.

    src: (B, S) int ids; src_mask: None builds padding_mask(src, pad_id).
    Returns an int64 array (B, L), L <= max_len: the generated tokens without BOS, each row up to
    and including its EOS, then PAD. Stops as soon as every row has produced EOS.
    """
    max_len = _check_int("max_len", max_len, 1, model.max_len, "greedy_decode")
    with _inference(model):
        if src_mask is None:
            src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, D)
        src_mask = on_device(src_mask, array_of(memory))  # copied to the model's device once, not every step
        B = memory.shape[0]
        cache = fast.use.kv_cache(model, max_len) if use_cache else None  # max_len positions at most
        ys = np.full((B, 1), bos_id, dtype=np.int64)  # decoder input so far
        out = np.full((B, max_len), pad_id, dtype=np.int64)
        finished = np.zeros(B, dtype=bool)
        for t in range(max_len):
            if use_cache:
                logits = model.decode(ys[:, -1:], memory, src_mask, cache=cache)  # (B, 1, V)
            else:
                # Causal only (no padding mask on the prefix): the cached path cannot see token ids.
                logits = model.decode(ys, memory, src_mask, causal_mask(t + 1))  # (B, t + 1, V)
            next_tok = to_host(array_of(logits)[:, -1].argmax(axis=-1))  # (B,) on the host: one sync a step on a device
            next_tok = np.where(finished, pad_id, next_tok)
            out[:, t] = next_tok
            finished |= next_tok == eos_id
            if finished.all():
                return out[:, : t + 1]
            ys = np.concatenate([ys, next_tok[:, None]], axis=1)  # (B, t + 2)
    return out


def length_penalty_gnmt(length: int, alpha: float) -> float:
    """GNMT's length penalty lp(L) = ((5 + L) / 6)^alpha (Wu et al., 2016); a score is log P / lp."""
    return ((5.0 + length) / 6.0) ** alpha


def _log_softmax64(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis in float64, so beam scores keep float32 logits' order exactly."""
    x = logits.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


def beam_search(
    model,
    src,
    beam_size: int = 5,
    max_len: int = 50,
    length_penalty: float = 0.6,
    n_best: int = 1,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    pad_id: int = PAD_ID,
    use_cache: bool = True,
    src_mask=None,
) -> list[list[tuple[np.ndarray, float]]]:
    """Keep the beam_size best prefixes by log P(y | src); return per source sentence a list of
    n_best (tokens, score) pairs, best first.

    tokens: int64 array without BOS, ending with EOS unless max_len was reached first.
    score: log P(tokens | src) / lp(len(tokens)), lp the GNMT penalty ((5 + L) / 6)^length_penalty
    (length_penalty=0 ranks by plain log-probability).

    Each step ranks the top 2 * beam_size extensions of all live beams of a sentence: an EOS
    extension among the first beam_size is a finished hypothesis; the best beam_size other
    extensions live on (fairseq's rule). A sentence is done once it has beam_size finished
    hypotheses; at max_len its live beams are added unfinished. Done sentences leave the batch.
    beam_size=1 gives exactly greedy_decode's tokens (ties go to the lowest token id in both).
    """
    K = _check_int("beam_size", beam_size, 1, None, "beam_search")
    n_best = _check_int("n_best", n_best, 1, K, "beam_search")
    max_len = _check_int("max_len", max_len, 1, model.max_len, "beam_search")
    if not length_penalty >= 0:
        raise ValueError(f"beam_search: expected length_penalty >= 0, got {length_penalty}")
    with _inference(model):
        if src_mask is None:
            src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, D)
        B = memory.shape[0]
        # Row i * K + k of every per-beam array is beam k of the i-th sentence still searching.
        rows = np.repeat(np.arange(B), K)
        memory_k = mt.Tensor.wrap(array_of(memory)[array_of(on_device(rows, array_of(memory)))])  # (B*K, S, D)
        mask = _raw(on_device(src_mask, array_of(memory)))
        per_sentence_mask = mask.ndim == 4 and mask.shape[0] != 1
        mask_k = mask[array_of(on_device(rows, mask))] if per_sentence_mask else mask  # (B*K, 1, 1, S)
        alive = np.arange(B)  # sentence ids still searching
        tokens = np.full((B * K, 1), bos_id, dtype=np.int64)  # (n*K, t + 1), BOS first
        scores = np.full((B, K), -np.inf)  # cumulative log P, float64
        scores[:, 0] = 0.0  # one live beam at the start
        finished: list[list[tuple[np.ndarray, float]]] = [[] for _ in range(B)]
        cache = fast.use.kv_cache(model, max_len) if use_cache else None  # max_len positions at most

        for t in range(max_len):
            n = len(alive)
            if use_cache:
                logits = model.decode(tokens[:, -1:], memory_k, mask_k, cache=cache)  # (n*K, 1, V)
            else:
                logits = model.decode(tokens, memory_k, mask_k, causal_mask(t + 1))  # (n*K, t + 1, V)
            logp = _log_softmax64(
                to_host(array_of(logits)[:, -1])
            )  # (n*K, V), on the host: one sync a step on a device
            V = logp.shape[-1]
            cand = (scores[:, :, None] + logp.reshape(n, K, V)).reshape(n, K * V)  # (n, K*V)
            n_cand = min(2 * K, K * V)
            order = np.argsort(-cand, axis=1, kind="stable")[:, :n_cand]  # (n, 2K) best first
            cand_scores = np.take_along_axis(cand, order, axis=1)
            new_origin = np.zeros((n, K), dtype=np.int64)
            new_token = np.full((n, K), pad_id, dtype=np.int64)
            new_scores = np.full((n, K), -np.inf)
            done = np.zeros(n, dtype=bool)
            last_step = t == max_len - 1
            for i in range(n):
                b = alive[i]
                live = 0
                for rank in range(n_cand):
                    s = cand_scores[i, rank]
                    if s == -np.inf:
                        break
                    origin, tok = divmod(int(order[i, rank]), V)
                    if tok == eos_id:
                        if rank < K:
                            seq = np.append(tokens[i * K + origin, 1:], eos_id)
                            finished[b].append((seq, float(s) / length_penalty_gnmt(len(seq), length_penalty)))
                        continue
                    new_origin[i, live], new_token[i, live], new_scores[i, live] = origin, tok, s
                    live += 1
                    if live == K:
                        break
                if last_step:
                    for k in range(live):
                        seq = np.append(tokens[i * K + new_origin[i, k], 1:], new_token[i, k])
                        finished[b].append(
                            (seq, float(new_scores[i, k]) / length_penalty_gnmt(len(seq), length_penalty))
                        )
                done[i] = last_step or live == 0 or len(finished[b]) >= K
            if done.all():
                break
            keep = np.flatnonzero(~done)
            rows = (keep[:, None] * K + new_origin[keep]).reshape(-1)  # (n'*K,) rows to continue
            tokens = np.concatenate([tokens[rows], new_token[keep].reshape(-1, 1)], axis=1)
            scores = new_scores[keep]
            alive = alive[keep]
            shrink = len(keep) < n
            if shrink:
                # Sentences left the batch: their memory rows go too (within a sentence they are equal).
                device_rows = array_of(on_device(rows, array_of(memory_k)))
                memory_k = mt.Tensor.wrap(array_of(memory_k)[device_rows])
                if per_sentence_mask:
                    mask_k = mask_k[device_rows]
            if cache is not None:
                cache.reorder(rows, static=shrink)

    return [sorted(hyps, key=lambda h: -h[1])[:n_best] for hyps in finished]
