"""The parity report and the reference's decoding on a CUDA GPU (float32).

Marked `cuda`: tests/conftest.py skips them, with the reason, when torch.cuda.is_available() is
False. transformer_np always runs on the CPU; only the PyTorch reference moves to the GPU, so
these check that the reference (masks, dropout masks, KV cache, weight transfer) is device-clean
and that the report's float32 tolerances hold against cuBLAS's summation orders too.
"""

from __future__ import annotations

import numpy as np
import pytest

from parity import decode as pt_decode
from parity import render
from parity.report import ReportConfig, build_models, run_report, synthetic_batch
from transformer_np import decode as np_decode
from transformer_np.config import get_preset

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")], ids=["post-relu", "pre-gelu"])
@pytest.mark.parametrize("config", ["copy", "copy-reverse"])
def test_report_passes_on_cuda_float32(config, norm_first, activation):
    report = run_report(
        ReportConfig(config, "float32", "cuda", steps=2, norm_first=norm_first, activation=activation, batch_size=4)
    )
    assert report.meta["device"] == "cuda"
    assert report.passed, "\n" + render.table(report, failures_only=True)


def test_auto_device_picks_cuda():
    report = run_report(ReportConfig("copy", "float32", "auto", steps=1, batch_size=2))
    assert report.meta["device"] == "cuda"


def test_greedy_decoding_on_cuda_matches_cpu():
    cfg = get_preset("copy").model.replace(num_encoder_layers=1, num_decoder_layers=1)
    np_model, pt_model = build_models(cfg, "float64", "cuda", seed=2)
    assert pt_model.device.type == "cuda"
    src, _ = synthetic_batch(np.random.default_rng(0), 2, 6, 6, cfg.src_vocab_size, cfg.tgt_vocab_size)
    for use_cache in (True, False):
        a = np_decode.greedy_decode(np_model, src, max_len=8, use_cache=use_cache)
        b = pt_decode.greedy_decode(pt_model, src, max_len=8, use_cache=use_cache)
        np.testing.assert_array_equal(a, b)
