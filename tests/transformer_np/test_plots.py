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
        lambda p: plots.plot_positional_encoding(_pe()[None], p),  # (1, L, D) buffer
        lambda p: plots.plot_positional_curves(_pe(), p),
        lambda p: plots.plot_causal_mask(np.tril(np.ones((7, 7), bool))[None, None], p),
        lambda p: plots.plot_attention(_attn(rng, 7, 5), p, src, tgt, "cross", "source", "target"),
        lambda p: plots.plot_attention(_attn(rng, 5, 5), p),
        lambda p: plots.plot_attention_heads(_attn(rng, 8, 5, 5), p, src, src),
        lambda p: plots.plot_attention_heads(_attn(rng, 3, 7, 5), p, src, tgt),  # grid with an empty cell
        lambda p: plots.plot_attention_layers([_attn(rng, 4, 7, 7) for _ in range(3)], p, tgt, tgt),
        lambda p: plots.plot_loss(steps, 3 * np.exp(-steps / 50) + 0.1, p, [100, 200], [0.5, 0.3]),
        lambda p: plots.plot_lr(steps, 64**-0.5 * np.minimum(steps**-0.5, steps * 40**-1.5), p),
        lambda p: plots.plot_grad_norms(
            steps,
            {
                "encoder.layers.0": rng.random(200) + 1,
                "encoder.layers.1": rng.random(200) + 1,
                "decoder.layers.0": rng.random(200) + 1,
                "generator": rng.random(200) + 1,
            },
            p,
        ),
        lambda p: plots.plot_lines([1, 2, 4], {"a": [0.1, 0.2, 0.3], "b": [1, 2, 3]}, p, "x", "y", "t", logx=True),
    ]
    for i, call in enumerate(calls):
        path = str(tmp_path / "sub" / f"fig{i}.png")  # directories are created
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


# ----------------------------------------------------------------------------------------------
# What a newcomer reads: axes, tick labels, numbering. Each figure is caught at _save.
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def saved(monkeypatch):
    """The Figure objects the plot functions save, in order."""
    figures = []
    real = plots._save

    def keep(fig, path):
        figures.append(fig)
        return real(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def _data_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def _texts(labels):
    return [t.get_text() for t in labels]


def _overlap(labels, renderer) -> bool:
    boxes = [t.get_window_extent(renderer) for t in labels if t.get_text()]
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def test_a_second_unit_gets_its_own_axis(tmp_path, saved):
    """The beam experiment: decode time (ms) below, not flat at 0 on the accuracy axis."""
    plots.plot_lines(
        [1, 2, 3, 5, 10, 20],
        {"exact match": [0.5, 0.6, 0.6, 0.7, 0.7, 0.7]},
        str(tmp_path / "b.png"),
        "beam size",
        "exact match",
        "t",
        logx=True,
        lower={"decode time": [1.6, 1.9, 2.0, 2.5, 3.3, 4.9]},
        lower_ylabel="milliseconds per sentence",
    )
    top, bottom = _data_axes(saved[0])
    assert top.get_ylabel() == "exact match" and bottom.get_ylabel() == "milliseconds per sentence"
    assert [ln.get_label() for ln in top.get_lines()] == ["exact match"]
    assert [ln.get_label() for ln in bottom.get_lines()] == ["decode time"]
    assert bottom.get_ylim()[0] > 1.0  # the time axis is scaled to the times
    assert _texts(bottom.get_xticklabels()) == ["1", "2", "3", "5", "10", "20"]


def test_log_x_axis_shows_the_values_themselves(tmp_path, saved):
    plots.plot_lines([1, 2, 4, 8, 16], {"a": [1, 2, 3, 4, 5]}, str(tmp_path / "h.png"), "heads", "y", "t", logx=True)
    ax = _data_axes(saved[0])[0]
    assert ax.get_xscale() == "log"
    assert _texts(ax.get_xticklabels()) == ["1", "2", "4", "8", "16"]
    assert not ax.xaxis.get_minor_locator()()  # no unlabeled minor ticks between


def test_narrow_log_y_axis_has_plain_numbers(tmp_path, saved):
    steps = np.arange(1, 101)
    plots.plot_grad_norms(steps, {"encoder.layers.0": np.linspace(0.2, 3, 100)}, str(tmp_path / "g.png"))
    fig = saved[0]
    fig.canvas.draw()
    ax = _data_axes(fig)[0]
    labels = [t for t in _texts(ax.get_yticklabels()) if t]
    assert labels and not any("^" in t for t in labels)  # no mathtext powers of ten
    assert {"0.5", "1", "2"} <= set(labels)


def test_length_buckets_are_named_categories(tmp_path, saved):
    names = ["lengths 3-10 (trained)", "lengths 11-14 (longer)", "lengths 15-20 (longer)"]
    plots.plot_lines(
        names,
        {"sinusoidal": [1.0, 0.4, 0.1], "learned": [1.0, 0.0, 0.0]},
        str(tmp_path / "p.png"),
        "test sequences, by source length",
        "exact match",
        "t",
    )
    ax = _data_axes(saved[0])[0]
    assert list(ax.get_xticks()) == [0, 1, 2]
    assert _texts(ax.get_xticklabels()) == names
    with pytest.raises(ValueError, match="log axis needs numbers"):
        plots.plot_lines(names, {"a": [1, 2, 3]}, str(tmp_path / "q.png"), "x", "y", "t", logx=True)


def test_decoder_rows_say_what_they_predict(tmp_path, saved, rng):
    tgt_in = ["<bos>", "3", "4", "4"]
    nxt = ["3", "4", "4", "3"]
    src = ["<bos>", "3", "4", "<eos>"]
    plots.plot_attention(
        _attn(rng, 4, 4), str(tmp_path / "a.png"), src, tgt_in, "cross", "source key", "target query", predicts=nxt
    )
    ax = _data_axes(saved[0])[0]
    assert _texts(ax.get_yticklabels()) == ["<bos> -> 3", "3 -> 4", "4 -> 4", "4 -> 3"]
    assert "predicts token t+1" in ax.get_ylabel()
    with pytest.raises(ValueError, match="3 predicts labels for an axis of length 4"):
        plots.plot_attention(_attn(rng, 4, 4), str(tmp_path / "b.png"), predicts=nxt[:3])


def test_layers_and_heads_are_numbered_from_one(tmp_path, saved, rng):
    plots.plot_attention_layers(
        [_attn(rng, 4, 6, 6) for _ in range(3)], str(tmp_path / "l.png"), layer_name="encoder layer"
    )
    plots.plot_attention_heads(_attn(rng, 8, 5, 5), str(tmp_path / "h.png"))
    assert [ax.get_title() for ax in _data_axes(saved[0])] == [f"encoder layer {i} of 3" for i in (1, 2, 3)]
    assert [ax.get_title() for ax in _data_axes(saved[1])] == [f"head {h} of 8" for h in range(1, 9)]


def test_mean_attention_scale_shows_structure(tmp_path, saved):
    """Head means are flat: the colour scale ends at the largest free weight, not at 1. The causal
    first row (one key allowed, weight exactly 1) saturates instead of setting the scale."""
    m = np.array(
        [
            [1.0, 0.0, 0.0],  # <bos>: the only key it may see
            [0.6, 0.4, 0.0],
            [0.3, 0.3, 0.4],
        ]
    )
    m = np.stack([m, np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]])  # head 2: uniform over the prefix
    plots.plot_attention_layers([m, m], str(tmp_path / "m.png"))
    im = _data_axes(saved[0])[0].images[0]
    assert im.norm.vmin == 0 and im.norm.vmax == pytest.approx((0.6 + 0.5) / 2)  # row 2's largest mean weight
    assert "scale 0 to 0.55" in saved[0].axes[-1].get_ylabel()


def test_tick_labels_never_overlap(tmp_path, saved, rng):
    T = 60
    labels = [f"tok{i}" for i in range(T)]
    plots.plot_attention(_attn(rng, T, T), str(tmp_path / "a.png"), labels, labels)
    plots.plot_attention_layers([_attn(rng, 2, T, T)] * 3, str(tmp_path / "l.png"), labels, labels)
    plots.plot_attention_heads(_attn(rng, 8, T, T), str(tmp_path / "h.png"), labels, labels)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for fig in saved:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in _data_axes(fig):
            for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
                assert not _overlap(ticks, renderer), ax.get_title()
                assert all(t.get_fontsize() >= 5 for t in ticks)
