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
# # 3. Attention and one Transformer layer, shape by shape
#
# **What you will learn**
# - scaled dot-product attention, `softmax(Q K^T / sqrt(Dh)) V`, computed step by step with every shape printed;
# - how H heads are one (D, D) projection split into H slices of width Dh = D / H;
# - what the padding mask and the causal (look-ahead) mask do to the weights;
# - how an encoder layer wraps attention and a feed-forward net in residual blocks (post-norm, the paper's
#   wiring, and pre-norm);
# - how to read an attention map: row t is a query, its columns the keys it mixes; in the decoder, row t is
#   the position that predicts token t+1;
# - why the model needs positions: attention alone is permutation-equivariant; the sinusoids fix that;
# - the full model assembled, block by block, with shapes and parameter counts, and the cross-attention maps of a
#   trained copy-reverse model.
#
# Runs in a few seconds. Next: `04_training.py`.
#
# Shape letters: B batch, S source length, T target length, D model width, H heads, Dh = D / H.

# %%
import json
import math
import os

import numpy as np
from nbutil import HERE, figure_path, show

import minitensor as mt
import minitensor.nn.functional as F
from transformer_np import plots
from transformer_np.config import ModelConfig
from transformer_np.data import BOS_ID, EOS_ID, get_task, make_batches
from transformer_np.decode import greedy_decode
from transformer_np.masks import causal_mask, padding_mask
from transformer_np.model import EncoderLayer, MultiHeadAttention, Transformer, sinusoidal_table

mt.manual_seed(0)
B, S, D, H = 1, 7, 16, 2
Dh = D // H

# %% [markdown]
# ## Inputs
# A toy "sentence" of 7 tokens in which token 'a' occurs three times and 'b' twice. Each token gets a random
# embedding (the same vector every time it occurs), so identical tokens have identical rows.

# %%
words = ["a", "b", "a", "c", "b", "a", "<pad>"]
vocab = ["<pad>", "<bos>", "<eos>", "a", "b", "c"]
table = mt.randn(len(vocab), D)  # (V, D) an embedding table
ids = mt.tensor([[vocab.index(w) for w in words]])  # (B, S)
x = F.embedding(ids, table)  # (B, S, D)
print("ids", tuple(ids.shape), "-> x", tuple(x.shape))

# %% [markdown]
# ## Scaled dot-product attention, by hand
# One head, with queries = keys = values = x, so we can predict much of the answer: token i's score against key j is
# x_i . x_j, and against its own key |x_i|^2. By Cauchy-Schwarz x_i . x_j <= |x_i| |x_j|, so a token's own key (and
# the keys of the same word elsewhere, which are the same vector) scores highest unless another key is longer and
# points in nearly the same direction: likely, not guaranteed.

# %%
q = k = v = x  # (B, S, D)
scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, S, S): query i . key j
print("scores", tuple(scores.shape))
weights = F.softmax(scores, dim=-1)  # (B, S, S): each row sums to 1
print("weights", tuple(weights.shape), "row sums", np.round(weights.detach().numpy().sum(-1), 6))
out = weights @ v  # (B, S, D): a weighted mix of values per query
print("out", tuple(out.shape))

# %% [markdown]
# Why divide by sqrt(D)? For random unit-variance vectors a dot product over D terms has variance D; without
# the scale, scores grow with the width and softmax saturates into one-hot rows whose gradients vanish.

# %%
for width in (16, 256):
    a, b_ = np.random.default_rng(1).standard_normal((2, 10000, width))
    print(
        f"width {width:>3}: std of q.k = {np.std((a * b_).sum(-1)):5.1f}, "
        f"after / sqrt(width) = {np.std((a * b_).sum(-1) / math.sqrt(width)):.2f}"
    )

# %% [markdown]
# ## The padding mask
# The last position is padding: no query may attend to it. `padding_mask` marks the real tokens True; masked keys
# get exactly zero weight. Here, by hand, the masked *scores* are set to -inf, so that e^-inf = 0 in the softmax;
# -inf never reaches the weights. (The model's fused attention, `F.attention_weights`, writes the dtype's lowest
# finite number instead of -inf and zeroes a row that has no key at all, where -inf would give 0/0 = NaN: its
# weights and gradients stay finite even then.)

# %%
pad_id = vocab.index("<pad>")
keep = padding_mask(ids, pad_id)  # (B, 1, 1, S): broadcast over heads and queries
print("padding mask", tuple(keep.shape), keep.numpy().astype(int).ravel())
masked = F.softmax(scores.masked_fill(~keep[:, 0], float("-inf")), dim=-1)  # (B, S, S)
print("weight on the <pad> key, every query:", masked.detach().numpy()[0, :, -1])
show(
    plots.plot_attention(
        masked.detach().numpy()[0],
        figure_path("03_one_head.png"),
        words,
        words,
        "one head, queries = keys = values = x, padding masked",
        "key",
        "query",
    )
)

# %% [markdown]
# Read the map row by row: row 0 ('a') spreads its weight over the three 'a' keys (columns 0, 2, 5), row 1 ('b')
# over the two 'b' keys, and the last column is 0 everywhere.

# %% [markdown]
# ## Multi-head attention, shape by shape
# `MultiHeadAttention` projects x with four (D, D) linear maps. The heads are not separate layers: the D
# outputs of `W_q` are reshaped into H slices of Dh. Each head attends on its own slice; the H outputs are
# concatenated back to D and mixed by `W_o`.

# %%
mha = MultiHeadAttention(D, H)
mha.store_attention = True
Q = mha.W_q(x)  # (B, S, D)
Qh = mha.split_heads(Q)  # (B, H, S, Dh)
Kh = mha.split_heads(mha.W_k(x))  # (B, H, S, Dh)
Vh = mha.split_heads(mha.W_v(x))  # (B, H, S, Dh)
scores_h = Qh @ Kh.transpose(-2, -1) / math.sqrt(Dh)  # (B, H, S, S)
weights_h = F.softmax(scores_h.masked_fill(~keep, float("-inf")), dim=-1)
heads = weights_h @ Vh  # (B, H, S, Dh)
merged = mha.merge_heads(heads)  # (B, S, D)
by_hand = mha.W_o(merged)  # (B, S, D)
for name, t in (
    ("x", x),
    ("W_q(x)", Q),
    ("split_heads", Qh),
    ("scores", scores_h),
    ("weights", weights_h),
    ("weights @ V", heads),
    ("merge_heads", merged),
    ("W_o(...)", by_hand),
):
    print(f"{name:<12} {tuple(t.shape)}")

module_out = mha(x, x, x, keep)
print("module == step by step:", np.abs(module_out.detach().numpy() - by_hand.detach().numpy()).max() < 1e-6)
show(
    plots.plot_attention_heads(
        mha.attn_weights[0],
        figure_path("03_heads.png"),
        words,
        words,
        "multi-head self-attention, random projections: every head",
        "key",
        "query",
    )
)

# %% [markdown]
# With random (untrained) projections the heads no longer look for identical tokens: what each head attends to
# is learned in training (the end of this notebook shows a trained model's maps).
#
# ## The causal mask: what the decoder may see
# In the decoder, position t must not look at tokens after t: while predicting token t+1, it only knows tokens
# 0..t. `causal_mask(T)` is lower-triangular.

# %%
target = ["<bos>", "a", "b", "c", "<eos>"]
T = len(target)
cm = causal_mask(T - 1)  # (1, 1, T-1, T-1): the decoder reads target[:-1]
show(plots.plot_causal_mask(cm.numpy(), figure_path("03_causal.png")))
y = F.embedding(mt.tensor([[vocab.index(w) for w in target[:-1]]]), table)  # (B, T-1, D)
self_scores = y @ y.transpose(-2, -1) / math.sqrt(D)
self_weights = F.softmax(self_scores.masked_fill(~cm[0], float("-inf")), dim=-1)  # (B, T-1, T-1)
show(
    plots.plot_attention(
        self_weights.detach().numpy()[0],
        figure_path("03_decoder_self.png"),
        target[:-1],
        target[:-1],
        "decoder self-attention under the causal mask",
        "target key (decoder input)",
        "target query",
        predicts=target[1:],
    )
)

# %% [markdown]
# The rows read "input -> next": row 0 is `<bos>`, which sees only itself while the model predicts 'a'; the last
# row sees the whole prefix while predicting `<eos>`. This is teacher forcing: in training every row is computed
# at once, from the true previous tokens, and the mask keeps each row honest.
#
# ## One encoder layer
# Attention, then a position-wise feed-forward net (D -> d_ff -> D), each inside a residual block. Post-norm (the
# paper): `x = LayerNorm(x + sublayer(x))`. Pre-norm: `x = x + sublayer(LayerNorm(x))`; it keeps an
# un-normalised path from input to output and trains deep stacks without warmup.

# %%
for norm_first in (False, True):
    mt.manual_seed(0)
    layer = EncoderLayer(D, H, d_ff=4 * D, dropout=0.0, norm_first=norm_first)
    h = layer(x, keep)  # (B, S, D) in, (B, S, D) out
    print(
        f"{'pre' if norm_first else 'post'}-norm layer: {tuple(x.shape)} -> {tuple(h.shape)}; "
        f"per-token mean {h.detach().numpy().mean(-1).ravel()[:3].round(3)}, "
        f"std {h.detach().numpy().std(-1).ravel()[:3].round(3)}"
    )

# %% [markdown]
# The post-norm output of every token has mean 0 and std 1 here because it ends with a LayerNorm at its initial
# weights (weight 1, bias 0): LayerNorm's output is xhat * weight + bias, so once training moves weight and bias,
# the mean and std follow them. The pre-norm output has neither (its last operation is the residual sum). A
# pre-norm stack therefore adds a final LayerNorm (`final_norm=True` in `ModelConfig`).
#
# ## Positions: attention alone does not see order
# Nothing above used a token's position: shuffle the tokens and attention's output is shuffled the same way,
# no more (it is *permutation-equivariant*). "a b c" and "c b a" would look alike to the model.

# %%
perm = np.array([3, 0, 5, 1, 4, 2])  # a shuffle of the 6 real tokens (the <pad> is left out)
mt.manual_seed(1)
attn = MultiHeadAttention(D, H, dropout=0.0)
xs = x[:, :6]  # (B, 6, D)
out = attn(xs, xs, xs)  # (B, 6, D)
out_shuffled = attn(xs[:, perm], xs[:, perm], xs[:, perm])
same = np.allclose(out_shuffled.detach().numpy(), out.detach().numpy()[:, perm], atol=1e-5)
print("attention(shuffled tokens) == shuffled attention(tokens):", same)

# %% [markdown]
# The paper adds to every embedding a vector that depends only on its position, PE[pos, 2i] = sin(pos / 10000^(2i/D))
# and PE[pos, 2i+1] = cos(...): each pair of dimensions is a clock at its own frequency, fast in the first
# dimensions, slow in the last. Now a shuffled sentence gets different positions, and the output changes.

# %%
pe = mt.tensor(sinusoidal_table(6, D).astype(np.float32))  # (6, D): position pos's vector in row pos
xp, xp_shuffled = xs + pe, xs[:, perm] + pe  # the positions stay where they are; the tokens move
out_p, out_p_shuffled = attn(xp, xp, xp), attn(xp_shuffled, xp_shuffled, xp_shuffled)
print(
    "with positions added, still just shuffled:",
    np.allclose(out_p_shuffled.detach().numpy(), out_p.detach().numpy()[:, perm], atol=1e-5),
)
a_rows = xp.detach().numpy()[0, [0, 2, 5]]  # the three 'a's, now different vectors
print("the three 'a's differ by", np.round(np.abs(a_rows - a_rows[0]).max(-1), 3))
show(plots.plot_positional_encoding(sinusoidal_table(64, 64), figure_path("03_positional.png")))

# %% [markdown]
# ## The full model, block by block
# `transformer_np.model.Transformer` stacks these pieces: embeddings (times sqrt(D)) plus positions, N encoder
# layers, then N decoder layers, each adding a cross-attention over the encoder's output (the *memory*), and a
# linear *generator* that turns each position into logits over the vocabulary. Here is the small copy-reverse
# model of `notebooks/data/copy_reverse_small.npz` (width 64, 4 heads, 2+2 layers, trained 800 steps by
# `notebooks/data/copy_reverse_small.py`), run on one sentence, with every block's output shape and its
# parameter count.

# %%
ckpt = np.load(os.path.join(HERE, "data", "copy_reverse_small.npz"))
meta = json.loads(str(ckpt["__meta__"]))
model = Transformer.from_config(ModelConfig(**meta["model_config"]))
model.load_state_dict({k: ckpt[k].astype(np.float32) for k in ckpt.files if k != "__meta__"})
model.eval()
task = get_task("copy-reverse")
text = "3 7 1 9 4 12"
src = mt.tensor(make_batches([(task.encode_source(text), [BOS_ID, EOS_ID])], 1)[0][0])  # (1, S)
out_ids = greedy_decode(model, src, max_len=task.max_tgt_len + 2)[0]  # (L,): the output tokens, then <eos>
seq = np.concatenate([[BOS_ID], out_ids[: list(out_ids).index(EOS_ID) + 1]])  # <bos> output <eos>
tgt_in = mt.tensor(seq[None, :-1])  # (1, T): what the decoder reads, <bos> first
print(f"source {text!r} -> {task.decode_target(out_ids.tolist())!r}")
print("the checkpoint on 100 held-out pairs:", {k: round(v, 3) for k, v in meta["held_out"].items()})

blocks = ["src_embed", "pos_encoding", "encoder", "encoder.layers.0", "encoder.layers.1", "tgt_embed",
          "decoder", "decoder.layers.0", "decoder.layers.1", "generator"]  # fmt: skip
modules = dict(model.named_modules())
seen = []
hooks = [modules[b].register_forward_hook(lambda m, i, o, b=b: seen.append((b, tuple(o.shape)))) for b in blocks]
logits = model(src, tgt_in)  # (1, T, V)
for h_ in hooks:
    h_.remove()
print(f"{'block':<20} {'output shape':<16} {'parameters':>10}")
for b, shape in seen:
    n = sum(p.numel() for p in modules[b].parameters())
    print(f"{b:<20} {str(shape):<16} {n:>10,}")
    if b.startswith("decoder.layers.") or b.startswith("encoder.layers."):
        for sub, m in modules[b].named_children():
            if sum(p.numel() for p in m.parameters()):
                print(f"  {sub:<18} {'':<16} {sum(p.numel() for p in m.parameters()):>10,}")
print(f"{'total':<37} {sum(p.numel() for p in model.parameters()):>10,}")

# %% [markdown]
# (`pos_encoding` runs twice, for the source and for the target, and has no parameters: the sinusoids are fixed.
# The encoder's output, (1, S, 64), is the memory every decoder layer's cross-attention reads.)
#
# ## What the trained model attends to: cross-attention maps
# Each decoder position asks the source where to look. For copy-reverse the answer is a pattern a reader can
# predict: while copying, the position that predicts output token t looks at source token t (a diagonal); while
# reversing, at its mirror image (an anti-diagonal). Row t is the decoder position that predicts the token named
# after its arrow. The pattern is sharp in the last decoder layer, in every head but one; the first layer's map is
# blurrier, leaning on the end of the source.

# %%
model.store_attention(True)
model(src, tgt_in)
cross = model.attention_maps()["decoder_cross"]  # per layer: (1, H, T, S)
model.store_attention(False)
src_words = [task.src_vocab.itos[i] for i in src.numpy()[0]]
tgt_words = [task.tgt_vocab.itos[i] for i in seq]
show(
    plots.plot_attention_layers(
        [w[0] for w in cross],
        figure_path("03_cross_attention.png"),
        src_words,
        tgt_words[:-1],
        "decoder cross-attention of the trained copy-reverse model, mean over heads",
        "source key",
        "decoder position",
        layer_name="decoder layer",
        predicts=tgt_words[1:],
    )
)
show(
    plots.plot_attention_heads(
        cross[-1][0],
        figure_path("03_cross_attention_heads.png"),
        src_words,
        tgt_words[:-1],
        "the last decoder layer's cross-attention, head by head",
        "source key",
        "decoder position",
    )
)

# %% [markdown]
# ## Your turn: attention with a mask
# Write `scaled_dot_product_attention` in the next cell (the course's exercise 5.1): the scores q k^T / sqrt(Dh),
# the mask applied to the scores (a masked score set to -inf, so that its weight e^-inf is exactly 0), the softmax
# over the keys, then the weighted sum of the values. Return the output and the weights. The cell after runs the
# course's check (against parity/'s PyTorch twin, no mask, a padding mask, a causal mask) and prints its verdict.


# %%
def scaled_dot_product_attention(q, k, v, mask=None):
    """q (..., T_q, Dh), k (..., T_k, Dh), v (..., T_k, Dv), mask True where a query may see a key
    -> (output (..., T_q, Dv), weights (..., T_q, T_k))"""
    raise NotImplementedError("exercise 5.1")  # your turn: replace this line


# %%
from course.notebook import check_here

check_here("5.1", scaled_dot_product_attention=scaled_dot_product_attention)

# %% [markdown]
# **Recap.** Attention is three matrix products and a softmax; heads are a reshape; masks zero out keys; a layer
# is attention plus a small MLP, each in a residual block with a LayerNorm; positions are added because attention
# itself ignores order. The full model (`transformer_np/model.py`) stacks these: an encoder of N such layers, and a
# decoder whose layers add a cross-attention (queries from the target, keys and values from the encoder's output).
# Your turn: `python -m course check 5` (attention, heads, the feed-forward block), then `check 6` (the whole
# Transformer, its EncoderLayer and DecoderLayer from your layers, compared layer by layer with the PyTorch twin).
