"""mt.viz: the DOT text of a small graph, parameter names, and render() with and without Graphviz."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import minitensor as mt
from minitensor import nn, viz


def _small_graph():
    mt.manual_seed(0)
    lin = nn.Linear(3, 2)
    x = mt.randn(4, 3)
    loss = lin(x).tanh().sum()
    return lin, loss


def test_to_dot_lists_ops_shapes_dtypes():
    lin, loss = _small_graph()
    dot = viz.to_dot(loss)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    for needle in ("Linear", "(4, 2) float32", "Tanh", "Sum", "() float32", "(2, 3) float32", "(2,) float32"):
        assert needle in dot, needle
    # every edge names two declared nodes
    declared = set(re.findall(r"^\s+(\w+) \[label=", dot, flags=re.M))
    for a, b in re.findall(r"^\s+(\w+) -> (\w+);", dot, flags=re.M):
        assert a in declared and b in declared
    # x does not require grad: not part of the recorded graph
    assert "(4, 3)" not in dot


def test_to_dot_names_parameters():
    lin, loss = _small_graph()
    dot = viz.to_dot(loss, params=dict(lin.named_parameters()))
    assert "weight\\n(2, 3) float32" in dot and "bias\\n(2,) float32" in dot
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    dot = viz.to_dot(model(mt.randn(2, 3)).mean(), params=dict(model.named_parameters()))
    for name in ("0.weight", "0.bias", "2.weight", "2.bias", "Relu", "Mean"):
        assert name in dot


def test_shared_subgraph_drawn_once_and_deep_graph():
    a = mt.randn(3, requires_grad=True)
    b = a * 2
    c = (b + b).sum()
    dot = viz.to_dot(c, params={"a": a})
    assert dot.count('label="Mul') == 1 and dot.count("a\\n(3,) float32") == 1
    h = a
    for _ in range(3000):  # deeper than Python's recursion limit: the walk is iterative
        h = h * 1.0
    assert viz.to_dot(h.sum()).count("Mul") == 3000


def test_leaf_and_errors():
    w = nn.Parameter(np.ones((2, 2), dtype=np.float32))
    assert "w\\n(2, 2) float32" in viz.to_dot(w, params={"w": w})
    with pytest.raises(TypeError, match="Tensor"):
        viz.to_dot(np.ones(3))
    with pytest.raises(TypeError, match="params"):
        viz.to_dot(w, params={"w": np.ones(2)})


def test_render_without_dot_gives_clear_error(monkeypatch, tmp_path):
    _, loss = _small_graph()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Graphviz 'dot' not found; install graphviz or use to_dot\\(\\) text"):
        viz.render(loss, tmp_path / "g.svg")
    with pytest.raises(ValueError, match="format"):
        viz.render(loss, tmp_path / "g.gif", format="gif")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_render_with_dot(tmp_path, fmt):
    _, loss = _small_graph()
    path = tmp_path / f"g.{fmt}"
    assert viz.render(loss, path, format=fmt) == str(path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in data


def _fake_dot(tmp_path, body: str):
    script = tmp_path / "dot"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_render_calls_dot_with_format_and_path(monkeypatch, tmp_path):
    """Without Graphviz installed, a stand-in `dot` checks the command line and the DOT text piped in."""
    _, loss = _small_graph()
    fake = _fake_dot(tmp_path, 'echo "$@" > "$3.args"; cat > "$3"\n')
    monkeypatch.setattr(shutil, "which", lambda name: fake if name == "dot" else None)
    out = tmp_path / "graph.png"
    viz.render(loss, out, format="png")
    assert (tmp_path / "graph.png.args").read_text().split() == ["-Tpng", "-o", str(out)]
    assert out.read_text() == viz.to_dot(loss)


def test_render_reports_dot_failure(monkeypatch, tmp_path):
    _, loss = _small_graph()
    fake = _fake_dot(tmp_path, 'echo "syntax error in line 3" >&2; exit 2\n')
    monkeypatch.setattr(shutil, "which", lambda name: fake if name == "dot" else None)
    with pytest.raises(RuntimeError, match="exit code 2: syntax error in line 3"):
        viz.render(loss, tmp_path / "g.svg")


def test_values_and_gradients_in_the_labels():
    a = mt.tensor([1.0, -2.0], requires_grad=True)
    h = a * 3.0
    h.retain_grad()
    loss = h.tanh().sum()
    loss.backward(retain_graph=True)
    dot = viz.to_dot(loss, params={"a": a, "h": h}, name="L", values=True)
    assert "a\\n(2,) float32\\ndata [ 1., -2.]\\ngrad [" in dot
    assert "h = Mul" in dot and "data [ 3., -6.]" in dot  # a named intermediate: its value and its gradient
    assert dot.count("grad [") == 2  # a and h (L keeps no gradient: a non-leaf without retain_grad)
    assert "data" not in viz.to_dot(loss, params={"a": a})  # values only when asked


def test_draw_without_graphviz_writes_a_png(monkeypatch, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    lin, loss = _small_graph()
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no Graphviz: draw() does not need it
    fig = viz.draw(loss, tmp_path / "g.png", params=dict(lin.named_parameters()))
    assert (tmp_path / "g.png").read_bytes().startswith(b"\x89PNG")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any(t.startswith("weight\n(2, 3) float32\ndata") for t in texts) and any("Tanh" in t for t in texts)
    assert viz._layers(*viz._walk(loss, None, "L", False))["out"] == 0
    h = mt.randn(2, requires_grad=True)
    for _ in range(200):
        h = h * 1.0
    with pytest.raises(ValueError, match="to_dot"):
        viz.draw(h.sum())
