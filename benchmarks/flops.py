"""Matrix-product FLOPs of one step, counted from the model's shapes, and the GEMM that dominates them.

A product of an (M, K) by a (K, N) matrix costs 2 M K N floating-point operations (one multiply and
one add per term). With B the batch, S and T the source and target lengths, D = d_model,
F = d_ff, V the target vocabulary, Ns = B S and Nt = B T the source and target positions:

    encoder layer   Ns (4 * 2 D D)            Q, K, V and output projections of self-attention
                  + Ns (2 * 2 D F)            the two feed-forward linears
                  + 2 * 2 B S S D             scores q k^T and weights @ v (all heads together)
    decoder layer   Nt (4 * 2 D D) + 2 * 2 B T T D            masked self-attention
                  + Nt (2 * 2 D D) + Ns (2 * 2 D D)           cross-attention: Q, O on the target,
                  + 2 * 2 B T S D                              K, V on the encoder output
                  + Nt (2 * 2 D F)                             feed-forward
    generator       Nt (2 D V)

    forward = layers summed; forward + backward = 3 x forward (backward multiplies each
    product's gradient by both operands: two products of the forward's size).

Padded positions and masked attention entries count: both sides compute them. Embedding lookups,
softmax, layer norm and the optimizer are not matrix products and are left out, so the fraction
of the GEMM rate a step reaches is an upper bound on how much of its time is spent in GEMMs.
The copy-reverse preset (3+3 layers, D 128, B 32, S 12, T 22, V 20) comes to 4.63 GFLOP a
training step; the base preset (6+6, D 512, F 2048, V 10,000, B 16, S 25, T 20) to 106 GFLOP. The decoder-only
configs are counted by benchmarks/gpt_workloads.py (forward_flops, dominant_gemm).
"""

from __future__ import annotations

from benchmarks import gpt_workloads
from benchmarks.gpt_workloads import GptBenchConfig


def forward_flops(cfg) -> int:
    """Matrix-product FLOPs of one forward pass of `cfg` (a benchmarks.workloads.BenchConfig or GptBenchConfig)."""
    if isinstance(cfg, GptBenchConfig):
        return gpt_workloads.forward_flops(cfg)
    m = cfg.model
    B, S, T, D, F, V = cfg.batch_size, cfg.src_len, cfg.tgt_len, m.d_model, m.d_ff, m.tgt_vocab_size
    Ns, Nt = B * S, B * T
    encoder = Ns * 8 * D * D + Ns * 4 * D * F + 4 * B * S * S * D
    decoder = Nt * 8 * D * D + 4 * B * T * T * D + Nt * 4 * D * D + Ns * 4 * D * D + 4 * B * T * S * D + Nt * 4 * D * F
    return m.num_encoder_layers * encoder + m.num_decoder_layers * decoder + Nt * 2 * D * V


def workload_flops(cfg, workload: str) -> int | None:
    """FLOPs of one call of a timed workload; None for decoding (matrix-vector work, not GEMM-bound)."""
    if workload == "forward":
        return forward_flops(cfg)
    if workload in ("fwd_bwd", "train"):
        return 3 * forward_flops(cfg)
    return None


def dominant_gemm(cfg) -> tuple[int, int, int]:
    """(M, K, N) of the product shape that carries the most FLOPs: the feed-forward's first linear or the generator."""
    if isinstance(cfg, GptBenchConfig):
        return gpt_workloads.dominant_gemm(cfg)
    m = cfg.model
    Ns, Nt = cfg.batch_size * cfg.src_len, cfg.batch_size * cfg.tgt_len
    ffn = 4 * m.d_model * m.d_ff * (m.num_encoder_layers * Ns + m.num_decoder_layers * Nt)
    generator = 2 * Nt * m.d_model * m.tgt_vocab_size
    if generator > ffn:
        return (Nt, m.d_model, m.tgt_vocab_size)
    return (Ns if m.num_encoder_layers and Ns >= Nt else Nt, m.d_model, m.d_ff)


def step_products(cfg) -> list[tuple[int, int, int, int]]:
    """The matrix products of one training step as (batch, M, K, N): each forward product of forward_flops, then
    the two of its backward ((M, N) @ (N, K) for the left operand's gradient, (K, M) @ (M, N) for the right's).
    Summed, 2 batch M K N over the list is workload_flops(cfg, "train"). benchmarks/budget.py replays them."""
    m = cfg.model
    B, S, T, D, F, V, H = cfg.batch_size, cfg.src_len, cfg.tgt_len, m.d_model, m.d_ff, m.tgt_vocab_size, m.num_heads
    Ns, Nt, dk = B * S, B * T, D // H

    def attention(q_len, k_len):  # scores q k^T and weights @ v, all heads at once
        return [(B * H, q_len, dk, k_len), (B * H, q_len, k_len, dk)]

    encoder = [(1, Ns, D, D)] * 4 + [(1, Ns, D, F), (1, Ns, F, D)] + attention(S, S)
    decoder = (
        [(1, Nt, D, D)] * 4
        + attention(T, T)
        + [(1, Nt, D, D)] * 2  # cross-attention's Q and output projections
        + [(1, Ns, D, D)] * 2  # its K and V, of the encoder output
        + attention(T, S)
        + [(1, Nt, D, F), (1, Nt, F, D)]
    )
    forward = encoder * m.num_encoder_layers + decoder * m.num_decoder_layers + [(1, Nt, D, V)]
    backward = [p for b, M, K, N in forward for p in ((b, M, N, K), (b, K, M, N))]
    return forward + backward
