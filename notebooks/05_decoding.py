# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. Decoding: greedy, beam search, and the KV cache
#
# **What you will learn**
# - how a trained model generates a target one token at a time (autoregressive decoding);
# - greedy decoding, and beam search with its score: log-probability divided by the GNMT length penalty;
# - the KV cache: why keeping the keys and values of earlier positions gives exactly the same result as
#   recomputing everything, and how much time it saves.
#
# At full size about a minute (a small copy-reverse model is trained first); with `MT_NOTEBOOK_TINY=1`,
# seconds (the model is barely trained, so its outputs are wrong, but every comparison still holds).
# Next: `06_parity.py`.

# %%
import time

import numpy as np
from nbutil import sized

import minitensor as mt
from transformer_np.config import ModelConfig, TrainConfig
from transformer_np.data import BOS_ID, EOS_ID, get_task, make_batches
from transformer_np.decode import beam_search, greedy_decode, length_penalty_gnmt
from transformer_np.masks import causal_mask, padding_mask
from transformer_np.training import config_for_task, fit

# %% [markdown]
# ## A model to decode with
# A small copy-reverse model (width 64, 4 heads, 2+2 layers), trained with a step schedule that converges fast.

# %%
task = get_task("copy-reverse")
model_cfg = config_for_task(
    ModelConfig(
        src_vocab_size=1,
        tgt_vocab_size=1,
        d_model=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=128,
        dropout=0.0,
        max_len=64,
    ),
    task,
)
steps = sized(800, 20)
train_cfg = TrainConfig(
    task="copy-reverse",
    steps=steps,
    batch_size=32,
    lr=2e-3,
    schedule="step",
    step_size=max(1, steps // 4),
    gamma=0.5,
    label_smoothing=0.0,
)
train_pairs, held_out = task.splits(sized(20000, 1000), sized(100, 8), seed=0)
model, losses, wall = fit(model_cfg, train_cfg, train_pairs, steps)
print(f"trained {steps} steps in {wall:.1f} s; last loss {np.mean(losses[-10:]):.3f}")

# %% [markdown]
# ## Greedy decoding
# The encoder reads the source once. The decoder starts from `<bos>`; at each step it outputs a distribution over
# the next token; greedy takes the most probable one, appends it, and goes on until `<eos>`.

# %%
examples = ["3 4 5", "15 0 7 7 2", "1 2 3 4 5 6 7 8"]
srcs = [task.encode_source(text) for text in examples]
src = mt.tensor(make_batches([(s, [BOS_ID, EOS_ID]) for s in srcs], len(srcs))[0][0])  # (B, S), padded
max_len = task.max_tgt_len + 2
greedy = greedy_decode(model, src, max_len=max_len)  # (B, L) token ids, <eos> then padding
for text, row in zip(examples, greedy):
    expected = " ".join(text.split() + text.split()[::-1])
    got = task.decode_target(row.tolist())
    print(f"{text:<18} -> {got:<36} {'ok' if got == expected else 'wrong (expected ' + expected + ')'}")

# %% [markdown]
# ## Beam search and its score
# Greedy can commit to a token that looks best now and leads to a worse sequence. Beam search keeps the K best
# prefixes at each step (by total log-probability) and returns finished hypotheses ranked by
#
#     score = log P(y | x) / lp(|y|),    lp(L) = ((5 + L) / 6) ** alpha     (GNMT's length penalty)
#
# Without the penalty (alpha = 0) longer sequences are at a disadvantage: every token multiplies in a probability
# below 1, so a hypothesis only gets less likely as it grows, and a long one wins only if its tokens are likely
# enough to make up for their number.
# alpha = 0.6 is the common setting.

# %%
for L in (3, 10, 20):
    print(f"lp({L:>2}) = {length_penalty_gnmt(L, 0.6):.3f}")
hyps = beam_search(model, src[:1], beam_size=4, max_len=max_len, length_penalty=0.6, n_best=4)[0]
print(f"\nbeam 4 for '{examples[0]}', every finished hypothesis:")
for tokens, score in hyps:
    print(f"  score {score:8.4f}  {task.decode_target(tokens.tolist())}")
best_beam1 = beam_search(model, src, beam_size=1, max_len=max_len)
same = all(np.array_equal(b[0][0], g[: len(b[0][0])]) for b, g in zip(best_beam1, greedy))
print("\nbeam size 1 gives greedy's tokens:", same)

# %% [markdown]
# ## The KV cache, and why it is exact
# Decoding step t needs the decoder's output at the newest position only. Without a cache the decoder is run on
# the whole prefix at every step (O(t) positions, so O(L^2) work in total). But under the causal mask, position
# i's keys and values depend only on tokens 0..i: they are the same at every later step. The cache keeps them
# (per layer, per attention) and each step feeds only the newest token, whose query attends to the cached keys.
# Same inputs, same arithmetic: the logits agree to round-off (float32 summation order), and the tokens exactly.

# %%
memory = model.encode(src, padding_mask(src))  # (B, S, D)
src_mask = padding_mask(src)
cache = model.init_cache()
ys = np.full((len(srcs), 1), BOS_ID)
worst = 0.0
with mt.no_grad():
    for t in range(8):
        cached = model.decode(ys[:, -1:], memory, src_mask, cache=cache).numpy()[:, -1]  # newest token only
        full = model.decode(ys, memory, src_mask, causal_mask(t + 1)).numpy()[:, -1]  # whole prefix again
        worst = max(worst, float(np.abs(cached - full).max() / np.abs(full).max()))
        ys = np.concatenate([ys, full.argmax(-1)[:, None]], axis=1)
print(f"8 steps: cached vs recomputed logits, max relative difference {worst:.1e} (float32 round-off)")
assert worst < 1e-5

held_src = mt.tensor(make_batches(held_out, len(held_out))[0][0])  # every held-out source, one batch
timings = {}
for use_cache in (True, False):
    t0 = time.perf_counter()
    out = greedy_decode(model, held_src, max_len=max_len, use_cache=use_cache)
    timings[use_cache] = (time.perf_counter() - t0, out)
print(f"{len(held_out)} held-out sources, outputs of up to {timings[True][1].shape[1]} tokens:")
print("  tokens identical with and without the cache:", np.array_equal(timings[True][1], timings[False][1]))
print(f"  greedy decoding: {timings[True][0] * 1e3:.0f} ms with the cache, {timings[False][0] * 1e3:.0f} ms without")

# %% [markdown]
# The saving grows with the output length: without the cache step t recomputes t positions in every layer.
#
# **Recap.** Greedy picks the argmax at each step; beam search keeps K prefixes and ranks finished ones by
# length-normalised log-probability; the KV cache saves recomputing the prefix and changes nothing but the time.
# `python -m transformer_np decode --checkpoint DIR --input "3 4 5" --beam 5` does this from the command line;
# `python -m transformer_np experiment beam` measures quality and time against the beam size.
