"""The attention softmax's speed devices (minitensor/fast/softmax.py) against their formulas (ops/fused.py): blocks
of attention scores, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor import fast
from minitensor.fast import softmax
from minitensor.ops import fused
from minitensor.ops.namespace import ARRAYS
from tests.support.fast_devices import assert_bitwise, devices_on  # noqa: F401 (devices_on: the devices in slots)

BIG = (1031, 1019)  # odd sizes, past 1M entries: several score blocks


def big(rng, dtype, scale=3.0):
    return (rng.standard_normal(BIG) * scale).astype(dtype)


# ----------------------------------------------------------------------------- attention's score blocks


@pytest.mark.parametrize("keep_shape", [None, (2, 1, 1, 40), (2, 1, 24, 40), (24, 40)])
def test_attention_in_score_blocks_is_bitwise_the_whole_array(monkeypatch, keep_shape):
    """AttentionWeights forward and backward over blocks of 100 scores (several rows of each (b, h), a short
    last block, masks broadcast over heads or batch) give exactly the formulas' numbers (attention_softmax and
    attention_softmax_grad in their slots), and so does the device of softmax_grad called alone."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 24, 8), dtype=np.float32), rng.standard_normal((2, 3, 40, 8), dtype=np.float32)
    keep = None if keep_shape is None else rng.random(keep_shape) > 0.3
    g = rng.standard_normal((2, 3, 24, 40), dtype=np.float32)

    def run():
        qt, kt = mt.tensor(q, requires_grad=True), mt.tensor(k, requires_grad=True)
        w = mt.nn.functional.attention_weights(qt, kt, None if keep is None else mt.tensor(keep), scale=0.3)
        w.backward(g)
        return [w._data, qt.grad._data, kt.grad._data]

    assert len(softmax.score_blocks(np.empty((2, 3, 24, 40), np.float32))) == 1
    monkeypatch.setattr(softmax, "SCORE_BLOCK_NUMEL", 100)
    assert len(softmax.score_blocks(np.empty((2, 3, 24, 40), np.float32))) == 2 * 3 * 12
    blocks, real = [], softmax.score_blocks
    monkeypatch.setattr(softmax, "score_blocks", lambda w: blocks.append(1) or real(w))
    with monkeypatch.context() as plain:
        plain.setattr(fast.use, "attention_softmax", fused.masked_softmax_)
        plain.setattr(fast.use, "attention_softmax_grad", fused.softmax_grad)
        whole = run()
    assert not blocks
    blocked = run()
    assert blocks
    assert_bitwise(blocked, whole, "attention weights, dq, dk")
    w = whole[0]
    assert_bitwise([softmax.softmax_grad_in_score_blocks(ARRAYS, g, w)], [fused.softmax_grad(ARRAYS, g, w)], "dS")
    scores = rng.standard_normal((2, 3, 24, 40)).astype(np.float32)[..., ::-1]  # strided: blocks are views too
    mask = None if keep is None else np.broadcast_to(keep, scores.shape)
    by_blocks, by_formula = scores.copy(), scores.copy()
    softmax.masked_softmax_in_score_blocks_(by_blocks, mask)
    fused.masked_softmax_(by_formula, mask)
    assert_bitwise([by_blocks], [by_formula], "the masked softmax in place")


def test_attention_devices_hand_a_device_array_and_tensors_to_the_formula():
    """On Tensors (create_graph) and on a device array the score devices run the formula whole."""
    from minitensor import fakecuda

    rng = np.random.default_rng(2)
    g, w = (rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(2))
    gd, wd = fakecuda.asarray(g), fakecuda.asarray(w)
    np.testing.assert_array_equal(
        fakecuda.asnumpy(softmax.softmax_grad_in_score_blocks(ARRAYS, gd, wd)),
        fakecuda.asnumpy(fused.softmax_grad(ARRAYS, gd, wd)),
    )
    gt, wt = mt.tensor(g), mt.tensor(w)
    from minitensor.ops.namespace import TENSORS

    got = softmax.softmax_grad_in_score_blocks(TENSORS, gt, wt)
    assert isinstance(got, mt.Tensor)
    np.testing.assert_array_equal(got.numpy(), fused.softmax_grad(TENSORS, gt, wt).numpy())
