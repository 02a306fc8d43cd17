"""transformer_np/plots.py: every figure writes a non-empty PNG; bad shapes are clear errors."""
import numpy as np
import pytest

from transformer_np import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pe(L=40, D=16):
    pos = np.arange(L)[:, None]
    div = np.exp(np.arange(0, D, 2) * (-np.log(10000.0) / D))
    pe = np.zeros((L, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * div), np.cos(pos * div)
    return pe


def _attn(rng, *shape):
    w = rng.random(shape)
    return w / w.sum(-1, keepdims=True)


def _check(path):
    with open(path, "rb") as f:
        head = f.read(8)
    assert head == PNG_MAGIC
    import os
    assert os.path.getsize(path) > 1000


def test_every_plot_writes_a_png(tmp_path):
    rng = np.random.default_rng(0)
    src = ["<bos>", "3", "4", "5", "<eos>"]
    tgt = ["<bos>", "3", "4", "5", "5", "4", "3"]
    steps = np.arange(1, 201)
    calls = [
        lambda p: plots.plot_positional_encoding(_pe(), p),
        lambda p: plots.plot_positional_encoding(_pe()[None], p),            # (1, L, D) buffer
        lambda p: plots.plot_positional_curves(_pe(), p),
        lambda p: plots.plot_causal_mask(np.tril(np.ones((7, 7), bool))[None, None], p),
        lambda p: plots.plot_attention(_attn(rng, 7, 5), p, src, tgt, "cross", "source", "target"),
        lambda p: plots.plot_attention(_attn(rng, 5, 5), p),
        lambda p: plots.plot_attention_heads(_attn(rng, 8, 5, 5), p, src, src),
        lambda p: plots.plot_attention_heads(_attn(rng, 3, 7, 5), p, src, tgt),  # grid with an empty cell
        lambda p: plots.plot_attention_layers([_attn(rng, 4, 7, 7) for _ in range(3)], p, tgt, tgt),
        lambda p: plots.plot_loss(steps, 3 * np.exp(-steps / 50) + 0.1, p, [100, 200], [0.5, 0.3]),
        lambda p: plots.plot_lr(steps, 64 ** -0.5 * np.minimum(steps ** -0.5, steps * 40 ** -1.5), p),
        lambda p: plots.plot_grad_norms(steps, {"encoder.layers.0": rng.random(200) + 1,
                                                "encoder.layers.1": rng.random(200) + 1,
                                                "decoder.layers.0": rng.random(200) + 1,
                                                "generator": rng.random(200) + 1}, p),
        lambda p: plots.plot_lines([1, 2, 4], {"a": [0.1, 0.2, 0.3], "b": [1, 2, 3]}, p, "x", "y", "t", logx=True),
    ]
    for i, call in enumerate(calls):
        path = str(tmp_path / "sub" / f"fig{i}.png")                        # directories are created
        assert call(path) == path
        _check(path)


def test_plot_errors_name_the_function_and_shapes(tmp_path):
    p = str(tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"plot_attention: expected a 2-D array, got shape \(2, 3, 3\)"):
        plots.plot_attention(np.ones((2, 3, 3)), p)
    with pytest.raises(ValueError, match="3 x labels for an axis of length 4"):
        plots.plot_attention(np.ones((4, 4)) / 4, p, x_labels=["a", "b", "c"])
    with pytest.raises(ValueError, match="plot_attention_heads: expected a 3-D"):
        plots.plot_attention_heads(np.ones((3, 3)), p)
    with pytest.raises(ValueError, match="different shapes"):
        plots.plot_attention_layers([np.ones((2, 3, 3)), np.ones((2, 4, 4))], p)
    with pytest.raises(ValueError, match="10 steps but 9 losses"):
        plots.plot_loss(np.arange(10), np.ones(9), p)
    with pytest.raises(ValueError, match="empty"):
        plots.plot_lr(np.array([]), np.array([]), p)
    with pytest.raises(ValueError, match="no layer groups"):
        plots.plot_grad_norms(np.arange(3), {}, p)
