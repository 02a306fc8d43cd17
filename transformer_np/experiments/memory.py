"""Where a training step's memory goes, node by node, and how checkpointing and tiled attention cut it.

For the long preset's model (D 128, H 4, 2 + 2 layers, dropout 0.1) at batch 1 and S = T = each length, one
training loss is built four ways: {dense, tiled} attention x {plain, checkpointed} layers. For each it reads
    saved     what the graph keeps for the backward (mt.autograd.graph.saved_tensors(loss).held_bytes: each
              buffer once, the parameters included)
    peak      the traced peak of the forward and backward together (tracemalloc counts NumPy's buffers)
    step      the time of that forward and backward
and, for the largest length, the listing by node kind (which ops keep the bytes). Nothing is trained.
"""

from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F

from .. import plots
from ..config import ModelConfig, get_preset
from ..masks import padding_mask, target_mask
from ..model import Transformer
from .results import write_result

MEMORY_LENGTHS = (128, 256, 512, 1024)
TINY_LENGTHS = (16, 32)
MEMORY_VARIANTS = (("dense", False), ("tiled", False), ("dense", True), ("tiled", True))


def variant_name(attention: str, checkpointed: bool) -> str:
    return attention + (" + checkpointing" if checkpointed else "")


def memory_model(seq_len: int, attention: str, checkpointed: bool, tiny: bool = False) -> ModelConfig:
    """The long preset's model (tiny: D 32, 1 + 1 layers) covering seq_len positions, as the variant says."""
    cfg = get_preset("long").model
    if tiny:
        cfg = cfg.replace(d_model=32, num_heads=2, d_ff=64, num_encoder_layers=1, num_decoder_layers=1)
    return cfg.replace(
        max_len=max(cfg.max_len, seq_len + 1), attention=attention, activation_checkpointing=checkpointed
    )


def measure_step(cfg: ModelConfig, seq_len: int, seed: int = 0) -> dict:
    """One training loss at batch 1, S = T = seq_len: the listing of what its graph keeps, the traced peak of its
    forward and backward, their time."""
    mt.manual_seed(seed)
    model = Transformer.from_config(cfg)
    rng = np.random.default_rng(seed)
    src = rng.integers(4, cfg.src_vocab_size, (1, seq_len))
    tgt = rng.integers(4, cfg.tgt_vocab_size, (1, seq_len + 1))
    tgt_in, tgt_out = tgt[:, :-1], mt.tensor(tgt[:, 1:].reshape(-1))
    tracemalloc.start()
    try:
        floor = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        logits = model(src, tgt_in, padding_mask(src), target_mask(tgt_in))  # (1, T, V)
        loss = F.cross_entropy(logits.reshape(-1, cfg.tgt_vocab_size), tgt_out)
        listing = mt.autograd.graph.saved_tensors(loss)
        loss.backward()
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] - floor
    finally:
        tracemalloc.stop()
    return {"listing": listing, "saved_mib": listing.held_bytes / 2**20, "peak_mib": peak / 2**20, "step_s": seconds}


def _by_node(listing, top: int = 6) -> str:
    """The node kinds listing the most bytes, as 'AttentionWeightsBackward 12.0 MiB, ...'."""
    kinds = sorted(listing.by_node().items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} {mt.autograd.graph.format_bytes(nbytes)}" for name, nbytes in kinds)


def exp_memory(out_dir: str, steps: int = 0, progress: bool = True, tiny: bool = False, lengths=None) -> dict:
    """Saved bytes, traced peak and step time at each length for the four variants; `steps` is unused."""
    lengths = tuple(lengths or (TINY_LENGTHS if tiny else MEMORY_LENGTHS))
    rows, listings = [], {}
    for seq_len in lengths:
        for attention, checkpointed in MEMORY_VARIANTS:
            m = measure_step(memory_model(seq_len, attention, checkpointed, tiny), seq_len)
            name = variant_name(attention, checkpointed)
            listings[name] = m["listing"]  # the largest length's, kept for the note
            rows.append(
                {
                    "T": seq_len,
                    "variant": name,
                    "saved MiB": m["saved_mib"],
                    "peak MiB": m["peak_mib"],
                    "step s": m["step_s"],
                }
            )
            if progress:
                print(f"memory: T={seq_len} {name}: saved {m['saved_mib']:.1f} MiB, peak {m['peak_mib']:.1f} MiB")
    names = [variant_name(*v) for v in MEMORY_VARIANTS]
    series = {n: [r["saved MiB"] for r in rows if r["variant"] == n] for n in names}
    peaks = {n: [r["peak MiB"] for r in rows if r["variant"] == n] for n in names}
    fig = plots.plot_lines(
        list(lengths),
        series,
        os.path.join(out_dir, "memory.png"),
        "sequence length T (= S), batch 1",
        "kept for the backward (MiB)",
        "Where a training step's memory goes: dense vs tiled attention, plain vs checkpointed",
        logx=True,
        logy=True,
        lower=peaks,
        lower_ylabel="traced peak (MiB)",
    )
    top = lengths[-1]
    note = (
        f"The long preset's model{' (tiny: D 32, 1 + 1 layers)' if tiny else ''} at batch 1, S = T, dropout 0.1, "
        "one forward and backward per row (nothing trained). 'saved': what the graph keeps for the backward "
        "(mt.autograd.graph.saved_tensors(loss).held_bytes, each buffer once, parameters included); 'peak': "
        "tracemalloc's peak over the forward and backward (NumPy's buffers). At T = "
        f"{top}, the node kinds that list the most bytes, by variant (under checkpointing the recomputed "
        "layers' nodes are still listed, but what they keep is dropped after the forward and rebuilt in the "
        "backward: 'saved' counts only what is held):\n\n"
        + "\n".join(f"- {name}: {_by_node(listings[name])}" for name in names)
        + "\n\nDense attention keeps its (B, H, T, T) weights (AttentionWeightsBackward, MatMulBackward, "
        "DropoutBackward's mask): O(T^2). Tiled attention keeps q, k, v, its output and one log-sum-exp per row: "
        "O(T). Checkpointing keeps only each layer's input and recomputes the layer in the backward."
    )
    meta = {"lengths": list(lengths), "tiny": tiny, "by_node": {n: listings[n].by_node() for n in names}}
    return write_result(
        out_dir,
        "memory",
        "Memory of a training step",
        note,
        rows,
        ["T", "variant", "saved MiB", "peak MiB", "step s"],
        [fig],
        meta,
    )
