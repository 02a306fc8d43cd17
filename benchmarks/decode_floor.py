"""What the engine and the modules add to cached greedy decoding: the same decode written on bare NumPy arrays.

    python -m benchmarks.decode_floor [--config copy-reverse] [--threads 1] [--rounds 9]

transformer_np decodes one token a step through nn modules, nn.functional's checks and one engine primitive per
op (about 80 per token on copy-reverse), each on arrays of a few dozen rows. `bare_greedy` below is the same cached
greedy decode with nothing between the formulas and NumPy: the model's own weights read as arrays, the same
products, softmax and layer norm, the keys and values written into preallocated arrays. It must give the same tokens
as transformer_np.decode.greedy_decode (checked before timing), and its time is a floor for the engine's: the
ratio bare / engine says how much of a decode is the per-op layer rather than the arithmetic, and so whether the
0.7x decoding target is within reach (measured: docs/decisions/010-cached-decoding.md).

The two run in one process, alternating call by call (A B A B), a round is one call each; the ratio is the median of
the per-round ratios with its quartiles. The replica covers the paper's decoder: post-norm, ReLU, sinusoidal
positions, untied embeddings; other configurations are refused.
"""

from __future__ import annotations

import math
import statistics
import sys
import time

from benchmarks.env import thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy loads (benchmarks/env.py loads nothing).
    thread_env_from_argv(sys.argv, default=1)

import numpy as np  # after the thread variables

import minitensor as mt
from benchmarks.workloads import BOS, CONFIGS, EOS, build_numpy_model, make_batch
from transformer_np import decode
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import interrupted, interrupts_as_such


def replicable(cfg) -> str | None:
    """None when bare_greedy replicates this model config, else what it lacks."""
    m = cfg.model
    for ok, what in (
        (not m.norm_first, "norm_first (post-norm only)"),
        (m.activation == "relu", f"activation {m.activation!r} (ReLU only)"),
        (m.positional == "sinusoidal", f"positional {m.positional!r} (sinusoidal only)"),
        (not m.tie_embeddings, "tied embeddings"),
        (not m.final_norm, "a final norm"),
        (m.attention == "dense", f"attention {m.attention!r}"),
    ):
        if not ok:
            return what
    return None


def _layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def _attend(q, k, v, keep):
    """softmax(q k^T / sqrt(Dh), keys where keep) v for one query row per (sentence, head)."""
    s = np.matmul(q * q.dtype.type(1 / math.sqrt(q.shape[-1])), np.swapaxes(k, -1, -2))  # (B, H, 1, t)
    if keep is not None:
        np.copyto(s, np.finfo(s.dtype).min, where=~np.broadcast_to(keep, s.shape))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s @ v  # (B, H, 1, Dh)


def bare_greedy(model, src, src_mask, n_tokens: int) -> np.ndarray:
    """Cached greedy decoding of n_tokens tokens (no early stop) on bare arrays: (B, n_tokens) int64."""
    P = {name: p.detach().numpy() for name, p in model.named_parameters()}
    cfg, D = model.config, model.d_model
    H = cfg.num_heads
    Dh, eps = D // H, model.decoder.layers[0].norm1.eps
    keep = np.asarray(src_mask)  # (B, 1, 1, S)
    with mt.no_grad():
        memory = model.encode(src, src_mask).numpy()  # (B, S, D): the encoder is not what this measures
    B, L = memory.shape[0], len(model.decoder.layers)

    def linear(x, name):
        out = x @ P[name + ".weight"].T
        out += P[name + ".bias"]
        return out

    def heads(x):  # (B, T, D) -> (B, H, T, Dh)
        return x.reshape(x.shape[0], x.shape[1], H, Dh).transpose(0, 2, 1, 3)

    cross = [  # the memory's keys and values, once: (B, H, S, Dh) per layer
        tuple(heads(linear(memory, f"decoder.layers.{i}.cross_attn.{w}")) for w in ("W_k", "W_v")) for i in range(L)
    ]
    k_buf = [np.zeros((B, H, n_tokens, Dh), memory.dtype) for _ in range(L)]
    v_buf = [np.zeros((B, H, n_tokens, Dh), memory.dtype) for _ in range(L)]
    pe, scale = model.pos_encoding.pe.numpy(), memory.dtype.type(math.sqrt(D))  # pe (max_len, D)
    tok, out = np.full(B, BOS, dtype=np.int64), np.empty((B, n_tokens), dtype=np.int64)
    for t in range(n_tokens):
        x = (P["tgt_embed.weight"][tok] * scale + pe[t])[:, None, :]  # (B, 1, D)
        for i in range(L):
            p = f"decoder.layers.{i}."
            q = linear(x, p + "self_attn.W_q").reshape(B, H, 1, Dh)
            k_buf[i][:, :, t] = linear(x, p + "self_attn.W_k").reshape(B, H, Dh)
            v_buf[i][:, :, t] = linear(x, p + "self_attn.W_v").reshape(B, H, Dh)
            a = _attend(q, k_buf[i][:, :, : t + 1], v_buf[i][:, :, : t + 1], None).reshape(B, 1, D)
            x = _layer_norm(x + linear(a, p + "self_attn.W_o"), P[p + "norm1.weight"], P[p + "norm1.bias"], eps)
            q = linear(x, p + "cross_attn.W_q").reshape(B, H, 1, Dh)
            a = _attend(q, *cross[i], keep).reshape(B, 1, D)
            x = _layer_norm(x + linear(a, p + "cross_attn.W_o"), P[p + "norm2.weight"], P[p + "norm2.bias"], eps)
            h = np.maximum(linear(x, p + "feed_forward.linear1"), 0)
            x = _layer_norm(x + linear(h, p + "feed_forward.linear2"), P[p + "norm3.weight"], P[p + "norm3.bias"], eps)
        tok = linear(x[:, 0], "generator").argmax(axis=-1)
        out[:, t] = tok
    return out


def measure(config: str, rounds: int) -> dict:
    """Tokens checked equal, then `rounds` alternating calls of each: times (ms) and the ratio bare / engine."""
    cfg = CONFIGS[config]
    model = build_numpy_model(cfg)  # EOS unreachable: every run generates exactly decode_tokens tokens
    model.eval()
    batch = make_batch(cfg)
    src, src_mask = mt.tensor(batch.src), mt.tensor(batch.src_mask)
    n = cfg.decode_tokens

    def engine():
        return decode.greedy_decode(model, src, n, bos_id=BOS, eos_id=EOS, src_mask=src_mask)

    def bare():
        return bare_greedy(model, src, src_mask, n)

    same = np.array_equal(engine(), bare())
    times = {"bare": [], "engine": []}
    for _ in range(rounds):
        for name, fn in (("bare", bare), ("engine", engine)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    ratios = sorted(b / e for b, e in zip(times["bare"], times["engine"]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "config": config,
        "tokens": n,
        "same_tokens": bool(same),
        "bare_ms": 1e3 * statistics.median(times["bare"]),
        "engine_ms": 1e3 * statistics.median(times["engine"]),
        "ratio": statistics.median(ratios),
        "ratio_q1": q[0],
        "ratio_q3": q[2],
    }


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m benchmarks.decode_floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="copy-reverse", help="a benchmarks config (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=9, help="alternating calls of each (default: %(default)s)")
    args = p.parse_args(argv)
    if args.config not in CONFIGS:
        p.error(f"--config: expected one of {sorted(CONFIGS)}, got {args.config!r}")
    if args.threads < 1 or args.rounds < 1:
        p.error(f"--threads and --rounds must be >= 1, got {args.threads} and {args.rounds}")
    lacks = replicable(CONFIGS[args.config])
    if lacks:
        p.error(f"--config {args.config}: the bare replica has no {lacks}")
    try:
        with interrupts_as_such():
            r = measure(args.config, args.rounds)
    except KeyboardInterrupt:  # Ctrl-C: one line, status 130; nothing is written
        return interrupted("python -m benchmarks.decode_floor")
    if not r["same_tokens"]:
        print(f"decode_floor: the bare replica's tokens differ from greedy_decode's on {args.config}", file=sys.stderr)
        return 1
    print(
        f"{r['config']}, {r['tokens']} tokens, {args.threads} thread(s): bare NumPy {r['bare_ms']:.1f} ms, "
        f"engine {r['engine_ms']:.1f} ms, bare / engine {r['ratio']:.2f} [{r['ratio_q1']:.2f}-{r['ratio_q3']:.2f}] "
        f"(same tokens)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
