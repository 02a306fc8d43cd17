"""benchmarks/gpt_workloads.py: the decoder-only configs in the harness. Their FLOP count against torch's counter,
the workloads each side has, both sides computing the same logits and greedy tokens, and real workers timing them
through benchmarks/measure.py. Timings themselves are never asserted."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import cli, flops, measure, targets
from benchmarks import gpt_workloads as G
from benchmarks import workloads as W
from benchmarks.worker import Worker
from minitensor.testing import PARITY_RTOL, error_stats

pytestmark = pytest.mark.full


@pytest.mark.parametrize("name", ["gpt2-baby", "llama-baby"])
def test_forward_flops_match_torch_flop_counter(name):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    cfg = W.get_config(name)
    x, _ = G.make_batch(cfg)
    twin = G.copy_to_torch(G.build_numpy_model(cfg))
    with FlopCounterMode(display=False) as fwd:
        out = twin(torch.from_numpy(x))
    with FlopCounterMode(display=False) as bwd:
        out.backward(torch.randn_like(out))
    assert fwd.get_total_flops() == flops.forward_flops(cfg)
    assert bwd.get_total_flops() == 2 * flops.forward_flops(cfg)
    assert flops.dominant_gemm(cfg) == (12 * 64, 128, cfg.model.ff_dim)


def test_the_configs_are_the_baby_sizes_in_both_shapes_and_only_have_their_workloads():
    gpt2, llama = W.get_config("gpt2-baby"), W.get_config("llama-baby")
    for cfg in (gpt2, llama):
        m = cfg.model
        assert (m.n_layer, m.n_head, m.n_embd, m.block_size, m.dropout, cfg.batch_size) == (4, 4, 128, 64, 0.0, 12)
    assert (llama.model.positions, llama.model.norm, llama.model.mlp, llama.model.kv_heads) == (
        "rope",
        "rms",
        "swiglu",
        2,
    )
    assert set(cli.GPT_CONFIGS) <= set(cli.FULL_CONFIGS)
    for workload in ("forward", "fwd_bwd", "train", "greedy_cache"):
        assert W.has_workload("numpy", workload, "gpt2-baby") and W.has_workload("torch", workload, "gpt2-baby")
        assert not W.has_workload("torch-nn", workload, "gpt2-baby")  # no torch.nn.Transformer of a GPT
    assert not W.has_workload("numpy", "beam_cache", "llama-baby")
    assert not W.has_workload("numpy", "greedy_nocache", "llama-baby")
    assert W.has_workload("torch-nn", "train", "copy")  # the encoder-decoder's sides unchanged
    with pytest.raises(ValueError, match="no scaling series"):
        W.config_from_spec({"name": "gpt2-baby", "seq_len": 32})
    # generation is at batch 1: its tokens per second count one row
    assert measure.tokens(gpt2, "greedy_cache") == G.DECODE_TOKENS
    assert measure.tokens(gpt2, "train") == 12 * 64


def test_the_targets_name_both_decoder_only_configs_at_one():
    cfgs = {
        "gpt2-baby": {"measurements": {"train": {"ratio": 0.8}, "greedy_cache": {"ratio": 1.2}}},
    }
    rows = {t["target"]: t for t in targets.evaluate_targets({"configs": cfgs})}
    assert rows["training step on gpt2-baby, NumPy/PyTorch <= 1.0"]["met"] is True
    gen = "cached greedy generation on gpt2-baby, batch 1, NumPy/PyTorch time <= 1.0 (tokens/s >= 1.0x)"
    assert rows[gen]["met"] is False
    assert rows["training step on llama-baby, NumPy/PyTorch <= 1.0"]["met"] is None  # not run
    assert not any("peak memory on gpt2-baby" in t for t in rows)


@pytest.mark.parametrize("name", ["gpt2-baby", "llama-baby"])
def test_both_sides_compute_the_same_logits_loss_and_tokens(name):
    """The same weights on both sides: the eval logits to float32's parity tolerance, the greedy tokens equal, and
    one training step's loss and the step after it equal (the same AdamW and clipping)."""
    from benchmarks.worker import _Host

    host = _Host("both", 1)
    sides = host.load({"name": name})
    assert set(sides) == {"numpy", "torch"}
    a, b = sides["numpy"], sides["torch"]
    assert error_stats(a.eval_logits(), b.eval_logits())[1] <= PARITY_RTOL["float32"]
    np.testing.assert_array_equal(a.greedy_cache(), b.greedy_cache())
    assert a.greedy_cache().shape == (1, 1 + G.DECODE_TOKENS)
    for _ in range(2):
        la, lb = float(a.train().item()), float(b.train().item())
        assert la == pytest.approx(lb, rel=1e-5)
    assert error_stats(a.eval_logits(), b.eval_logits())[1] <= PARITY_RTOL["float32"]
    assert set(a.train_phases()) == set(W.PHASES) == set(b.train_phases())


def test_real_workers_time_a_decoder_only_config_without_the_nn_side():
    settings = cli.resolve_settings(
        cli.build_parser().parse_args(["run", "--calls", "1", "--repeats", "3", "--budget", "0.1", "--settle", "0"])
    )
    timed = {"numpy": Worker("numpy", 1), "torch": Worker("torch", 1), "torch-nn": Worker("torch-nn", 1)}
    try:
        m = measure.time_workload(timed, {"name": "gpt2-baby"}, "forward", settings)
    finally:
        for w in timed.values():
            w.close()
    assert "torch-nn" not in m and m["torch_fastest"] == "torch" and m["ratio"] > 0
    assert m["numpy"]["n"] == m["ratio_spread"]["rounds"] >= 3
