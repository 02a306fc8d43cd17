"""`python -m parity`: the report and summary commands, their outputs and their errors."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

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
    code, out, err = _run(
        "report",
        "--config",
        "copy",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--steps",
        "1",
        "--batch-size",
        "2",
        "--norm-first",
        "--activation",
        "gelu",
        "--dropout",
        "0.2",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out[-3000:] + err[-3000:]
    assert "PASS: all" in out and "decoder.layers.1.cross_attn.attn_weights" in out
    assert "ReLU branches: none aligned (the activation is not ReLU)" in out
    assert max(len(line) for line in out.splitlines() if not line.startswith("wrote ")) <= 120  # not the paths
    with open(tmp_path / "parity_copy_float32_cpu.json") as f:
        data = json.load(f)
    assert data["passed"] is True
    assert data["meta"]["model"]["norm_first"] is True and data["meta"]["model"]["activation"] == "gelu"
    assert data["meta"]["model"]["dropout"] == 0.2
    assert set(data["summary"]) == {"embeddings", "encoder", "decoder", "logits", "loss", "grads", "hvp", "after-steps"}
    names = {r["name"] for r in data["rows"]}
    assert "generator.weight" in names and "loss" in names
    md = (tmp_path / "parity_copy_float32_cpu.md").read_text()
    assert "Result: **PASS: all" in md and "| after-steps |" in md
    assert "gradient clipping: the total norm is accumulated in float64" in md
    zero = [r for r in data["rows"] if r["rule"] == "zero"]
    assert zero and all(0 < r["limit"] < 1e-5 and r["value"] <= r["limit"] for r in zero)


def _exit_code(argv) -> int:
    """main's exit status, whether argparse refused the flags (SystemExit) or the command did (return)."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize(
    "args,message",
    [
        (["report", "--config", "nope"], "argument --config: invalid choice: 'nope' (choose from 'base', 'copy'"),
        (["report", "--dtype", "float16"], "argument --dtype: invalid choice: 'float16' (choose from 'float32', "),
        (["summary", "--config", "copy", "--dtype", "int64"], "argument --dtype: invalid choice: 'int64'"),
        (["report", "--steps", "-1", "--device", "cpu"], "argument --steps: expected an integer >= 0, got -1"),
        (["report", "--batch-size", "0"], "argument --batch-size: expected an integer >= 1, got 0"),
        (["report", "--dropout", "1.5"], "argument --dropout: expected a finite number in [0, 1), got 1.5"),
        (["report", "--trajectory", "sideways"], "argument --trajectory: invalid choice: 'sideways'"),
        (["report", "--activation", "tanh"], "argument --activation: invalid choice: 'tanh'"),
        (["report", "--positional", "rope"], "argument --positional: invalid choice: 'rope'"),
        (["report", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["summary", "--checkpoint", "/nonexistent/run"], "no checkpoint at '/nonexistent/run'"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args, message, capsys):
    assert _exit_code(args) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("python -m parity")


def test_every_flag_documented_with_default_and_choices():
    from parity.__main__ import build_parser
    from tests.cli_help import undocumented_flags

    parser = build_parser()
    assert undocumented_flags(parser) == []
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for command, flags in {
        "report": ("--config", "--dtype", "--device", "--trajectory", "--activation", "--positional"),
        "summary": ("--config", "--dtype", "--device", "--trajectory"),
    }.items():
        actions = {a.option_strings[-1]: a for a in subs[command]._actions if a.option_strings}
        assert all(actions[f].choices for f in flags), command
        help_text = subs[command].format_help()
        assert "free: each side trains on its own gradients" in help_text and "(default: auto)" in help_text


def test_import_without_torch_says_to_install_the_extra():
    """A simulated missing torch (sys.modules['torch'] = None): `import parity` fails with one line naming the extra."""
    code = "import sys; sys.modules['torch'] = None\ntry:\n    import parity\nexcept ImportError as e:\n    print(e)"
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["parity needs PyTorch: install the torch extra, pip install '.[torch]'"]


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
    train_cfg = train_cfg.replace(
        steps=2, batch_size=8, train_size=64, eval_size=8, eval_every=1000, checkpoint_every=1000
    )
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
    for group in ("embeddings", "encoder", "decoder", "logits", "loss", "grads", "hvp", "after-steps"):
        assert group in out
    assert "PASS: all" in out and "after-steps" in out


def test_summary_names_the_keys_of_a_mismatched_checkpoint(checkpoint_dir, tmp_path, capsys):
    """A checkpoint whose weights lack a key the config implies: the error lists it."""
    state = mt.load(os.path.join(checkpoint_dir, "checkpoint.npz"))
    del state["model"]["encoder.layers.0.norm2.bias"]
    mt.save(state, str(tmp_path / "checkpoint.npz"))
    assert main(["summary", "--checkpoint", str(tmp_path), "--device", "cpu"]) == 2
    assert "encoder.layers.0.norm2.bias" in capsys.readouterr().err
