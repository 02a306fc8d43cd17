"""`python -m parity view`: the page's data on a small model (a planted fault found, a clean step clean), each op's link
to its derivation, the bad-input table and Ctrl-C; in a real browser (tier full): loading, counts, folding, search,
the highlighted fault and the ready mark."""

from __future__ import annotations

import os
import re

import pytest

import minitensor as mt
from minitensor.testing import PARITY_RTOL
from parity.__main__ import main
from parity.view import MAX_NODES, ViewConfig, build, primitive_names
from parity.view.capture import PLANT_FACTOR
from parity.view.compare import against_finite_differences, against_twin, first_divergence
from parity.view.formulas import anchor, anchors_in
from parity.view.layout import TooLarge, page_data, walk_positions
from parity.view.subject import from_preset
from tests.support import ROOT


def _step(plant=None, dtype="float64"):
    """The copy preset's step on two sentences, recorded and compared with the twin: (graph, comparison)."""
    return against_twin(from_preset("copy", dtype, 0, 2), dtype, 0, plant)


def _page(graph, comparison, pattern=None, limit=MAX_NODES):
    divergence = first_divergence(graph, comparison, walk_positions(graph)[0])
    meta = {"title": "t", "subtitle": "s", "doc": "docs/backprop.md", "plant": None, "plant_factor": PLANT_FACTOR}
    return page_data(graph, comparison, divergence, meta, pattern, limit)


@pytest.fixture(scope="module")
def planted():
    return _step("LayerNorm")


@pytest.mark.parametrize(
    "op, culprit, bad_param",
    [
        # found by its own parameters' gradients
        ("LayerNorm", "decoder.layers.1.norm3", "decoder.layers.1.norm3.weight"),
        # no parameters: found by the output gradients of the projections inside the call
        ("AttentionWeights", "decoder.layers.1.cross_attn", "decoder.layers.1.cross_attn.W_q.weight"),
    ],
)
def test_a_planted_fault_is_found_in_the_module_that_runs_it(planted, op, culprit, bad_param):
    """op's backward x 1.001: the first divergence named is the call holding the first such node the backward reaches,
    the node itself is marked, and the call's own output gradient agrees."""
    graph, comparison = planted if op == "LayerNorm" else _step(op)
    data = _page(graph, comparison)
    items, meta = data["items"], data["meta"]
    first = min((it["i"], row) for row, it in enumerate(items) if it.get("pl"))[1]
    assert items[first]["op"] == op
    assert meta["divergence"] == items[first]["p"], "the culprit is the module call that ran the planted node"
    assert items[meta["divergence"]]["culprit"] and items[meta["divergence"]]["key"] == culprit
    assert all(c.ok for c in comparison.calls[culprit]), "its own output gradient agrees"
    assert not comparison.params[bad_param].ok
    worst = max(c.rel for c in comparison.params.values() if c.rule == "rel")
    assert worst > 1e3 * PARITY_RTOL["float64"]  # the fault is 1e-3, far above the tolerance


def test_a_clean_step_agrees_everywhere_and_names_no_module():
    graph, comparison = _step()
    data = _page(graph, comparison)
    assert data["meta"]["divergence"] is None and data["meta"]["failing"] == 0
    checks = [c for cs in comparison.calls.values() for c in cs] + list(comparison.params.values())
    assert checks and all(c.ok for c in checks)
    ulps = [c.ulp for c in checks if c.ulp is not None]
    assert ulps and all(u >= 0 for u in ulps)


@pytest.mark.parametrize("plant", [None, "LayerNorm"])
def test_finite_differences_judge_the_part_drawn_and_find_the_planted_fault(plant):
    """--against finite-differences on one module (--modules): its output's and parameters' gradients along a random
    direction; clean without a fault, the LayerNorm named with one."""
    sub = from_preset("copy", "float64", 0, 2)
    graph, comparison = against_finite_differences(sub, 0, plant, "decoder.layers.1.norm3")
    assert set(comparison.calls) == {"decoder.layers.1.norm3"}
    assert set(comparison.params) == {"decoder.layers.1.norm3.weight", "decoder.layers.1.norm3.bias"}
    checks = comparison.calls["decoder.layers.1.norm3"] + list(comparison.params.values())
    assert all(c.rule == "fd" for c in checks) and all(c.ok for c in comparison.calls["decoder.layers.1.norm3"])
    divergence = first_divergence(graph, comparison, walk_positions(graph)[0])
    if plant is None:
        assert all(c.ok for c in checks) and divergence is None
    else:
        assert not any(c.ok for c in comparison.params.values())
        assert graph.calls[divergence].key == "decoder.layers.1.norm3"


def test_an_output_off_the_losss_path_has_no_gradient_to_compare():
    """A module with two outputs, the loss using the first: the second's gradient is None on both sides, and no check
    is made of it (a missing gradient on one side only would fail)."""
    import numpy as np
    import torch

    from parity.view.subject import Subject

    class Two(mt.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = mt.nn.Linear(3, 3, dtype=mt.float64)

        def forward(self, x):
            y = self.lin(x)
            return y, y * 2

    class TorchTwo(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3, dtype=torch.float64)

        def forward(self, x):
            y = self.lin(x)
            return y, y * 2

    ours, twin = Two(), TorchTwo()
    with torch.no_grad():
        twin.lin.weight.copy_(torch.from_numpy(ours.lin.weight.detach().numpy()))
        twin.lin.bias.copy_(torch.from_numpy(ours.lin.bias.detach().numpy()))
    x = np.random.default_rng(0).standard_normal((2, 3))
    g = np.random.default_rng(1).standard_normal((2, 3))  # a random upstream gradient, not ones
    sub = Subject(
        "two outputs",
        ours,
        twin,
        lambda: (ours(mt.tensor(x))[0] * mt.tensor(g)).sum(),
        lambda: (twin(torch.from_numpy(x))[0] * torch.from_numpy(g)).sum(),
        None,
        False,
        False,
        "B=2",
    )
    graph, comparison = against_twin(sub, "float64", 0)
    checks = comparison.calls["(model)"]
    assert [c.what for c in checks] == ["output 0", "output gradient 0", "output 1"] and all(c.ok for c in checks)
    assert all(c.ok for c in comparison.params.values()) and len(comparison.params) == 2


def test_the_page_data_counts_every_node_once_and_each_row_its_subtree(planted):
    graph, comparison = planted
    data = _page(graph, comparison)
    items = data["items"]
    nodes = [it for it in items if it["k"] == "n"]
    assert len(nodes) == data["meta"]["nodes"] == len(graph.nodes)
    assert sorted(it["i"] for it in nodes) == list(range(len(graph.nodes)))
    assert items[0]["nn"] == len(nodes) and items[0]["end"] == len(items)
    for row, it in enumerate(items):  # DFS order: a row's subtree is the rows up to its end
        assert row < it["end"] <= items[it["p"]]["end"] if it["p"] >= 0 else True
    for it in nodes:  # statistics, not dumps
        assert set(it["v"]) >= {"min", "max", "mean", "norm", "hist"} and len(it["v"]["hist"]) == 12
        assert it["g"] is not None and it["tb"] is not None
    assert all(a != b for a, b, _ in data["edges"])


def test_modules_draws_only_the_matching_part(planted):
    graph, comparison = planted
    data = _page(graph, comparison, "decoder.layers.1.self_attn*")
    keys = {it["key"] for it in data["items"] if it["k"] == "g"}
    assert "decoder.layers.1.self_attn.W_q" in keys and "decoder" in keys  # the part, and its containers
    assert not any(k.startswith("encoder.") for k in keys)
    assert 0 < data["meta"]["nodes"] < len(graph.nodes)
    # the fault (in decoder.layers.1.norm3) is outside the part drawn: named, not drawn
    assert data["meta"]["divergence"] is None and data["meta"]["divergence_key"] == "decoder.layers.1.norm3"
    with pytest.raises(ValueError, match="matches no module call"):
        _page(graph, comparison, "no.such.module")


def test_a_graph_over_the_limit_says_so_and_suggests_modules(planted):
    graph, comparison = planted
    with pytest.raises(TooLarge, match=r"has \d+ nodes, more than the page's limit of 10: pick a part with --modules"):
        _page(graph, comparison, limit=10)


def test_every_op_links_to_its_derivation_in_backprop_md():
    with open(os.path.join(ROOT, "docs", "backprop.md"), encoding="utf-8") as f:
        found = anchors_in(f.read())
    missing = sorted(op for op in primitive_names() if anchor(op) not in found)
    assert not missing, f"ops without their anchor in docs/backprop.md: {missing}"


def test_the_page_is_one_file_that_needs_no_network(tmp_path, capsys):
    out = tmp_path / "view.html"
    code = main(["view", "--config", "copy", "--batch-size", "2", "--plant", "Linear", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    assert "first divergence along the backward:" in capsys.readouterr().out
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|https?://|@import", text)
    assert 'id="data"' in text and 'performance.mark("ready")' in text
    assert '"planted_rows":[' in text and '"pl":true' in text


# ---- bad input: one line on stderr, exit 2, nothing written ---------------------------------------------------------
def _gpt_checkpoint(folder) -> str:
    """A checkpoint of another model (a GPT run's file)."""
    from transformer_np.gpt.config import GPTConfig
    from transformer_np.gpt.model import GPT

    model = GPT(GPTConfig(vocab_size=11, n_layer=1, n_head=1, n_embd=8, block_size=4))
    mt.save({"model": model.state_dict(), "optimizer": {}, "meta": {"step": 0}}, os.path.join(folder, "checkpoint.npz"))
    return str(folder)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--out", "{tmp}/missing/view.html"], "the folder"),
        (["--out", "{tmp}/exists.html"], "the file exists; pass --overwrite"),
        (["--out", "{tmp}"], "is a folder"),
        (["--dtype", "float32", "--against", "finite-differences"], "needs --dtype float64"),
        (["--plant", "softmax"], "names no primitive (did you mean Softmax?)"),
        (["--plant", "Conv", "--batch-size", "1"], "no Conv node in this graph"),
        (["--checkpoint", "{gpt}"], "is not a transformer_np checkpoint"),
        (["--config", "copy", "--modules", "nothing*", "--batch-size", "1"], "matches no module call"),
    ],
    ids=["missing-folder", "exists", "folder", "float32-fd", "unknown-op", "op-not-in-graph", "gpt-ckpt", "modules"],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, args, message):
    (tmp_path / "exists.html").write_text("keep")
    (tmp_path / "gpt").mkdir()
    gpt = _gpt_checkpoint(tmp_path / "gpt") if "{gpt}" in args else ""
    args = [a.format(tmp=tmp_path, gpt=gpt) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "view.html")]
    if "--config" not in args and "--checkpoint" not in args:
        args += ["--config", "copy"]
    before = sorted(os.listdir(tmp_path))
    assert main(["view", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m parity view: error: ") and message in err, err
    assert sorted(os.listdir(tmp_path)) == before and (tmp_path / "exists.html").read_text() == "keep"


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
    import parity.view.cli as cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build", interrupted)
    assert main(["view", "--out", str(tmp_path / "v.html")]) == 130
    assert capsys.readouterr().err == "python -m parity view: interrupted\n"
    assert os.listdir(tmp_path) == []


def test_view_config_refuses_two_sources():
    with pytest.raises(ValueError, match="one of --config, --checkpoint, --model or --file"):
        build(ViewConfig(config="copy", model="gpt2"))


# ---- a PyTorch model file (--file), built as `python -m parity compare` builds it ------------------------------------
GPT_FILE = os.path.join(ROOT, "tests", "support", "programs", "gpt.py")
GPT_ARGS = ["--file", f"{GPT_FILE}:GPT", "--kwargs", '{"n_layer": 1}', "--input-shape", "2,6", "--input-dtype", "long"]


def _file_config(loss="random"):
    from parity.compare import CompareConfig

    return CompareConfig(GPT_FILE, "GPT", {"n_layer": 1}, (2, 6), "long", loss=loss)


@pytest.mark.parametrize("loss", ["random", "model"])
def test_a_model_file_gives_a_clean_page_grouped_by_its_own_modules(tmp_path, capsys, loss):
    """The test programs' GPT (nn.Dropout inside, run in eval mode): every check agrees, and the rows are its modules,
    named as its file names them."""
    out = tmp_path / "view.html"
    assert main(["view", *GPT_ARGS, "--loss", loss, "--out", str(out)]) == 0, capsys.readouterr().err
    assert "every module output and parameter gradient agrees with the PyTorch twin" in capsys.readouterr().out
    text, data = build(ViewConfig(file=_file_config(loss)))
    assert data["meta"]["divergence"] is None and data["meta"]["failing"] == 0
    keys = {it["key"] for it in data["items"] if it["k"] == "g"}
    assert {"blocks.0.attn", "blocks.0.attn.qkv", "blocks.0.mlp.0", "ln_f", "wte", "lm_head"} <= keys
    assert "gpt.py:GPT" in data["meta"]["title"] and "eval mode" in data["meta"]["subtitle"]


def test_the_random_loss_of_a_model_file_is_one_scalar_with_random_upstream_gradients():
    """--loss random: sum(logits * g) on both sides, g compare's seeded random array (not ones) of the logits' shape."""
    import numpy as np
    import torch

    from parity.compare import make_inputs, upstream_gradients
    from parity.view.subject import from_file

    cc = _file_config()
    sub = from_file(cc)
    x, _ = make_inputs(cc, sub.pt_model)
    logits = sub.pt_model(torch.from_numpy(x))[0]
    g = upstream_gradients((logits, None), cc.seed)["[0]"]
    assert g.shape == tuple(logits.shape) and np.std(g) > 0.5
    want = float((logits.detach().numpy() * g).sum())
    for got in (float(sub.np_loss().detach().numpy()), float(sub.pt_loss().detach())):
        assert abs(got - want) <= 1e-12 * abs(want)


@pytest.mark.parametrize(
    "op, culprit, runner",
    [
        ("Softmax", "blocks.0.attn", "blocks.0.attn"),
        ("LayerNorm", "ln_f", "ln_f"),
        # GELU has no parameters and nothing inside: its output gradient agrees, its input's is not compared (the
        # module docstring of parity/view/compare.py), so the call that holds it is named, by mlp.0's output gradient
        ("Gelu", "blocks.0.mlp", "blocks.0.mlp.1"),
    ],
)
def test_a_planted_fault_in_a_model_file_names_the_module_that_runs_it(op, culprit, runner):
    text, data = build(ViewConfig(file=_file_config(), plant=op))
    items, meta = data["items"], data["meta"]
    assert meta["divergence_key"] == culprit and meta["failing"] > 0
    first = min((it["i"], row) for row, it in enumerate(items) if it.get("pl"))[1]
    assert items[first]["op"] == op and items[items[first]["p"]]["key"] == runner


@pytest.mark.parametrize(
    "args, message",
    [
        (["--file", "no_such_file.py:GPT", "--input-shape", "2,3"], "no such file: no_such_file.py"),
        (["--file", "{gpt}", "--input-shape", "2,3"], "expected FILE.py:CLASS"),
        (["--file", "{gpt}:NoSuchClass", "--input-shape", "2,3"], "has no class NoSuchClass"),
        (["--file", "{gpt}:GPT"], "--file needs --input-shape"),
        (["--file", "{gpt}:GPT", "--input-shape", "2,3"], "the forward fails on torch"),  # float tokens
        (["--file", "{gpt}:GPT", "--input-shape", "2,x"], "expected positive integers separated by commas"),
        (["--file", "{gpt}:GPT", "--kwargs", "[1]", "--input-shape", "2,3"], "expected a JSON object, got list"),
        (["--file", "{gpt}:GPT", "--input-shape", "2,3", "--batch-size", "2"], "--batch-size does not apply"),
        (["--file", "{gpt}:GPT", "--input-shape", "2,3", "--config", "copy"], "not allowed with argument"),
        (["--config", "copy", "--input-shape", "2,3"], "--input-shape describes a model file: give it with --file"),
        (["--kwargs", "{}"], "--kwargs describes a model file"),
        (["--loss", "model"], "--loss describes a model file"),
    ],
    ids=[
        "missing-file",
        "no-class-given",
        "no-such-class",
        "no-shape",
        "input-refused",
        "bad-shape",
        "bad-kwargs",
        "batch-size",
        "two-sources",
        "shape-without-file",
        "kwargs-without-file",
        "loss-without-file",
    ],
)
def test_bad_file_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, args, message):
    args = [a.replace("{gpt}", GPT_FILE) for a in args] + ["--out", str(tmp_path / "view.html")]
    try:
        code = main(["view", *args])
    except SystemExit as e:  # argparse's refusals
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and message in err, err
    assert os.listdir(tmp_path) == []


def test_a_model_file_that_runs_on_torch_only_fails_in_one_line(tmp_path, capsys):
    """torch ran it, minitensor did not: a failed comparison, exit 1, as `parity compare` says it; nothing written."""
    path = tmp_path / "model.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(3, 3)\n\n    def forward(self, x):\n"
        "        return torch.fft.rfft(self.fc(x)).real\n"
    )
    out = tmp_path / "view.html"
    assert main(["view", "--file", f"{path}:Net", "--input-shape", "2,3", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m parity view: FAIL: ") and "torch.fft" in err, err
    assert not out.exists()


@pytest.mark.full
@pytest.mark.parametrize(
    "source",
    [
        ["--model", "gpt2"],
        ["--model", "llama", "--dtype", "float32"],
        ["--config", "copy-reverse", "--dtype", "float32"],
        ["--checkpoint", "{run}"],
    ],
    ids=["gpt2", "llama-float32", "copy-reverse-float32", "checkpoint"],
)
def test_every_source_gives_a_clean_page(tmp_path_factory, capsys, source):
    """The GPT family, float32 and a trained run: every check within its tolerance, no module named."""
    run = ""
    if "{run}" in source:
        from transformer_np.training import default_configs, train

        model_cfg, train_cfg = default_configs("copy-reverse")
        model_cfg = model_cfg.replace(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
        train_cfg = train_cfg.replace(steps=2, batch_size=8, train_size=64, eval_size=8, eval_every=1000)
        run = str(tmp_path_factory.mktemp("run"))
        previous = mt.get_default_dtype()
        try:
            train(model_cfg, train_cfg, run, progress=False)
        finally:
            mt.set_default_dtype(previous)
    out = tmp_path_factory.mktemp("page") / "view.html"
    args = [a.format(run=run) for a in source]
    assert main(["view", *args, "--batch-size", "4", "--out", str(out)]) == 0, capsys.readouterr().err
    assert "every module output and parameter gradient agrees" in capsys.readouterr().out
    assert out.stat().st_size > 0


# ---- in a real browser (headless Chromium, `make browser`) -----------------------------------------------------------
@pytest.mark.full
def test_the_page_in_a_real_browser(tmp_path):
    """The copy preset's page with a planted LayerNorm fault, in headless Chromium: no console error, the node count
    shown is the graph's, a module folds and unfolds with a click, the search finds every LayerNorm, the planted fault's
    module is the highlighted one, and the ready mark comes within 3 s of navigation start."""
    from tests.support.browser import chromium, missing, open_page

    why = missing()
    if why:
        pytest.skip(why)
    text, data = build(ViewConfig(config="copy", plant="LayerNorm"))
    page = tmp_path / "view.html"
    page.write_text(text)
    items, meta = data["items"], data["meta"]
    driver = chromium()
    try:
        ready = open_page(driver, str(page))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors and driver.execute_script("return window.__errors") == [], errors
        assert ready < 3000
        assert driver.execute_script("return performance.getEntriesByName('ready').length") == 1

        rows = lambda css="": driver.find_elements("css selector", ".row" + css)
        assert driver.find_element("id", "node-count").text == str(meta["nodes"])
        driver.find_element("id", "expand-all").click()
        assert len(rows(".n")) == meta["nodes"] == sum(it["k"] == "n" for it in items)

        # the planted fault: its module is the highlighted row, and the first planted node sits in it
        culprit = rows(".culprit")
        assert len(culprit) == 1 and int(culprit[0].get_attribute("data-i")) == meta["divergence"]
        assert items[meta["divergence"]]["key"] in culprit[0].text
        first = min(meta["planted_rows"], key=lambda r: items[r]["i"])
        assert items[first]["p"] == meta["divergence"]
        assert first in [int(r.get_attribute("data-i")) for r in rows(".planted")]
        assert "first divergence" in driver.find_element("id", "divergence").text.lower()

        # folding: a module's row folds and unfolds its contents with a click
        driver.find_element("id", "collapse-all").click()
        shown = len(rows())
        encoder = next(r for r in rows(".g") if r.text.split()[1] == "encoder")
        encoder.click()
        unfolded = len(rows())
        assert unfolded > shown
        next(r for r in rows(".g") if r.text.split()[1] == "encoder").click()
        assert len(rows()) == shown

        # search: every LayerNorm (the op's nodes and the modules of that type) is shown and marked
        driver.find_element("id", "search").send_keys("LayerNorm")
        want = sum(
            ("layernorm" in (it["op"] if it["k"] == "n" else it.get("key", "") + " " + it.get("type", "")).lower())
            if it["k"] != "p"
            else "layernorm" in it["name"].lower()
            for it in items
        )
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(driver, 5).until(lambda d: d.find_element("id", "search-count").text == f"{want} matches")
        assert len(rows(".match")) == want > 0
    finally:
        driver.quit()
