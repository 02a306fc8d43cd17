"""transformer_np/decode.py: greedy and beam search, with and without the key/value cache.

The model is untrained (random weights), so its outputs are arbitrary but deterministic; a bias
on the EOS logit makes rows stop at different steps so the stopping and padding logic runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.testing import OP_RTOL, PARITY_RTOL, assert_close
from transformer_np.data import BOS_ID, EOS_ID, PAD_ID
from transformer_np.decode import beam_search, greedy_decode, length_penalty_gnmt
from transformer_np.masks import causal_mask, padding_mask
from transformer_np.model import Transformer

V = 12


def _model(eos_bias=0.0, **kw) -> Transformer:
    cfg = dict(
        src_vocab_size=V,
        tgt_vocab_size=V,
        d_model=16,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=32,
        dropout=0.1,
        max_len=24,
    )
    cfg.update(kw)
    model = Transformer(**cfg)
    model.generator.bias.data[EOS_ID] += eos_bias
    return model


def _src(rng, B=4, S=7):
    src = rng.integers(4, V, size=(B, S))
    src[1 % B, 5:] = PAD_ID
    src[B - 1, 3:] = PAD_ID
    return src


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cached_logits_equal_full_recomputation(rng, dtype):
    mt.set_default_dtype(mt.float64 if dtype == "float64" else mt.float32)
    for norm_first, positional in [(False, "sinusoidal"), (True, "learned")]:
        model = _model(norm_first=norm_first, final_norm=norm_first, positional=positional)
        model.eval()
        src = _src(rng)
        tgt = np.concatenate([np.full((4, 1), BOS_ID), rng.integers(3, V, size=(4, 8))], axis=1)
        with mt.no_grad():
            src_mask = padding_mask(src)
            memory = model.encode(src, src_mask)
            full = model.decode(tgt, memory, src_mask, causal_mask(tgt.shape[1])).numpy()
            cache = model.init_cache()
            steps = [
                model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache).numpy() for t in range(tgt.shape[1])
            ]
            # a multi-token chunk after a prefix uses the offset causal mask
            cache2 = model.init_cache()
            head = model.decode(tgt[:, :3], memory, src_mask, cache=cache2).numpy()
            tail = model.decode(tgt[:, 3:], memory, src_mask, cache=cache2).numpy()
        assert cache.offset == tgt.shape[1]
        assert_close(np.concatenate(steps, axis=1), full, OP_RTOL[dtype], "cached logits")
        assert_close(np.concatenate([head, tail], axis=1), full, OP_RTOL[dtype], "chunked cached logits")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_greedy_cached_equals_uncached(rng, dtype):
    mt.set_default_dtype(mt.float64 if dtype == "float64" else mt.float32)
    model = _model(eos_bias=2.0)
    src = _src(rng)
    fast = greedy_decode(model, src, max_len=15, use_cache=True)
    slow = greedy_decode(model, src, max_len=15, use_cache=False)
    assert fast.dtype == np.int64
    np.testing.assert_array_equal(fast, slow)


def test_greedy_stops_and_pads_after_eos(rng):
    model = _model(eos_bias=2.5)
    src = _src(rng, B=6)
    out = greedy_decode(model, src, max_len=20)
    assert out.ndim == 2 and out.shape[0] == 6 and 1 <= out.shape[1] <= 20
    assert BOS_ID not in out[:, :1]
    ended = []
    for row in out:
        eos = np.flatnonzero(row == EOS_ID)
        if len(eos):
            assert (row[eos[0] + 1 :] == PAD_ID).all()
            ended.append(eos[0])
    if out.shape[1] < 20:  # stopped early: every row produced EOS, the longest at the last step
        assert len(ended) == 6 and max(ended) == out.shape[1] - 1
    # each token is the argmax of the model given the prefix (teacher-forced check)
    model.eval()
    with mt.no_grad():
        tgt = np.concatenate([np.full((6, 1), BOS_ID), out[:, :-1]], axis=1)
        logits = model.decode(tgt, model.encode(src), padding_mask(src), causal_mask(tgt.shape[1])).numpy()
    for b in range(6):
        n = np.flatnonzero(out[b] == EOS_ID)[0] + 1 if EOS_ID in out[b] else out.shape[1]
        np.testing.assert_array_equal(logits[b, :n].argmax(-1), out[b, :n])


def test_greedy_runs_to_max_len_without_eos(rng):
    model = _model(eos_bias=-100.0)
    out = greedy_decode(model, _src(rng), max_len=9)
    assert out.shape == (4, 9) and EOS_ID not in out


def test_decoding_restores_training_mode_and_builds_no_graph(rng):
    model = _model()
    assert model.training
    greedy_decode(model, _src(rng), max_len=4)
    beam_search(model, _src(rng), beam_size=2, max_len=4)
    assert model.training and mt.is_grad_enabled()
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("eos_bias", [0.0, 2.0])
def test_beam_size_one_is_greedy(rng, eos_bias, float64_default):
    model = _model(eos_bias=eos_bias)
    src = _src(rng, B=5)
    greedy = greedy_decode(model, src, max_len=12)
    beams = beam_search(model, src, beam_size=1, max_len=12, length_penalty=0.6)
    assert len(beams) == 5
    for b, hyps in enumerate(beams):
        assert len(hyps) == 1
        tokens, _ = hyps[0]
        row = greedy[b]
        n = np.flatnonzero(row == EOS_ID)[0] + 1 if EOS_ID in row else 12
        np.testing.assert_array_equal(tokens, row[:n])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_beam_cached_equals_uncached(rng, dtype):
    mt.set_default_dtype(mt.float64 if dtype == "float64" else mt.float32)
    model = _model(eos_bias=1.5)
    src = _src(rng)
    fast = beam_search(model, src, beam_size=3, max_len=10, n_best=3, use_cache=True)
    slow = beam_search(model, src, beam_size=3, max_len=10, n_best=3, use_cache=False)
    for hf, hs in zip(fast, slow):
        assert len(hf) == len(hs) == 3
        for (tf, sf), (ts, ss) in zip(hf, hs):
            np.testing.assert_array_equal(tf, ts)
            assert_close(np.array(sf), np.array(ss), PARITY_RTOL[dtype], "beam score, cached vs not")


def test_beam_scores_are_penalized_log_probabilities(rng, float64_default):
    model = _model(eos_bias=1.5)
    src = _src(rng)
    alpha = 0.6
    beams = beam_search(model, src, beam_size=4, max_len=10, length_penalty=alpha, n_best=4)
    model.eval()
    with mt.no_grad():
        memory = model.encode(src)
        for b, hyps in enumerate(beams):
            scores = [s for _, s in hyps]
            assert scores == sorted(scores, reverse=True)
            for tokens, score in hyps:
                tgt = np.concatenate([[BOS_ID], tokens[:-1]])[None]
                logits = model.decode(
                    tgt, memory[b : b + 1], padding_mask(src[b : b + 1]), causal_mask(len(tokens))
                ).numpy()[0]
                logp = (
                    logits
                    - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
                    - logits.max(-1, keepdims=True)
                )
                total = logp[np.arange(len(tokens)), tokens].sum()
                assert_close(
                    np.array(score),
                    np.array(total / length_penalty_gnmt(len(tokens), alpha)),
                    OP_RTOL["float64"],
                    "beam score vs teacher-forced log P / lp",
                )


def test_beam_search_finds_the_exhaustive_optimum_with_a_wide_beam(rng, float64_default):
    # With beam_size >= V^(L-1), no prefix is ever pruned: beam search is exhaustive over length-L outputs.
    model = _model(tgt_vocab_size=4, src_vocab_size=V, eos_bias=-100.0)  # EOS (id 2) never wins
    src = _src(rng, B=2)
    L = 3
    beams = beam_search(model, src, beam_size=16, max_len=L, length_penalty=0.0)
    model.eval()
    with mt.no_grad():
        memory = model.encode(src)
        for b in range(2):
            best, best_seq = -np.inf, None
            for seq in np.ndindex(4, 4, 4):
                tgt = np.array([[BOS_ID, seq[0], seq[1]]])
                logits = model.decode(tgt, memory[b : b + 1], padding_mask(src[b : b + 1]), causal_mask(L)).numpy()[0]
                m = logits.max(-1, keepdims=True)
                logp = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
                total = logp[np.arange(L), list(seq)].sum()
                if total > best:
                    best, best_seq = total, seq
            tokens, score = beams[b][0]
            np.testing.assert_array_equal(tokens, best_seq)
            assert_close(np.array(score), np.array(best), OP_RTOL["float64"], "best score vs exhaustive")


def test_decode_argument_errors(rng):
    model = _model()
    src = _src(rng)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=0)
    with pytest.raises(ValueError, match="max_len=25"):
        greedy_decode(model, src, max_len=25)  # the model's max_len is 24
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, src, beam_size=2, n_best=3, max_len=5)
    with pytest.raises(TypeError, match="beam_size"):
        beam_search(model, src, beam_size=2.0, max_len=5)
    with pytest.raises(TypeError, match="integer"):
        greedy_decode(model, src.astype(np.float64), max_len=5)
