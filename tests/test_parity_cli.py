"""`python -m parity`: the report and summary commands, their outputs and their errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import minitensor as mt
from parity.__main__ import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    """The real command in a child process: (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "parity", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_report_command_passes_and_writes_json_and_markdown(tmp_path):
    code, out, err = _run("report", "--config", "copy", "--dtype", "float32", "--device", "cpu", "--steps", "1",
                          "--batch-size", "2", "--norm-first", "--activation", "gelu", "--dropout", "0.2",
                          "--out", str(tmp_path))
    assert code == 0, out[-3000:] + err[-3000:]
    assert "PASS" in out and "decoder.layers.1.cross_attn.attn_weights" in out
    with open(tmp_path / "parity_copy_float32_cpu.json") as f:
        data = json.load(f)
    assert data["passed"] is True
    assert data["meta"]["model"]["norm_first"] is True and data["meta"]["model"]["activation"] == "gelu"
    assert data["meta"]["model"]["dropout"] == 0.2
    assert set(data["summary"]) == {"embeddings", "encoder", "decoder", "logits", "loss", "grads", "after-steps"}
    names = {r["name"] for r in data["rows"]}
    assert "generator.weight" in names and "loss" in names
    md = (tmp_path / "parity_copy_float32_cpu.md").read_text()
    assert "Result: **PASS**" in md and "| after-steps |" in md


@pytest.mark.parametrize("args,message", [
    (["report", "--config", "nope"], "unknown config 'nope': expected one of ['base', 'copy', 'copy-reverse'"),
    (["report", "--dtype", "float16"], "unsupported dtype 'float16': expected one of ['float32', 'float64']"),
    (["summary", "--config", "copy", "--dtype", "int64"], "unsupported dtype 'int64'"),
    (["report", "--steps", "-1", "--device", "cpu"], "steps must be a non-negative int"),
    (["summary", "--checkpoint", "/nonexistent/run"], "no checkpoint at '/nonexistent/run'"),
])
def test_bad_input_exits_nonzero_with_a_clear_message(args, message, capsys):
    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the error cannot happen")
def test_cuda_without_a_gpu_is_a_clear_error():
    code, out, err = _run("report", "--config", "copy", "--device", "cuda")
    assert code == 2
    assert "cuda requested but no GPU: use --device cpu" in err


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """A two-step transformer_np run of a small copy-reverse model (the format of transformer_np/train.py)."""
    from transformer_np.train import default_configs, train
    model_cfg, train_cfg = default_configs("copy-reverse")
    model_cfg = model_cfg.replace(d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
    train_cfg = train_cfg.replace(steps=2, batch_size=8, train_size=64, eval_size=8, eval_every=1000,
                                  checkpoint_every=1000)
    out = str(tmp_path_factory.mktemp("run"))
    previous = mt.get_default_dtype()
    try:
        train(model_cfg, train_cfg, out, progress=False)
    finally:
        mt.set_default_dtype(previous)
    return out


def test_summary_of_a_checkpoint(checkpoint_dir, capsys):
    code = main(["summary", "--checkpoint", checkpoint_dir, "--device", "cpu", "--steps", "2", "--batch-size", "4"])
    out = capsys.readouterr().out
    assert code == 0, out
    for group in ("embeddings", "encoder", "decoder", "logits", "loss", "grads", "after-steps"):
        assert group in out
    assert "PASS" in out and "step 2" in out


def test_summary_names_the_keys_of_a_mismatched_checkpoint(checkpoint_dir, tmp_path, capsys):
    """A checkpoint whose weights lack a key the config implies: the error lists it."""
    state = mt.load(os.path.join(checkpoint_dir, "checkpoint.npz"))
    del state["model"]["encoder.layers.0.norm2.bias"]
    mt.save(state, str(tmp_path / "checkpoint.npz"))
    assert main(["summary", "--checkpoint", str(tmp_path), "--device", "cpu"]) == 2
    assert "encoder.layers.0.norm2.bias" in capsys.readouterr().err
