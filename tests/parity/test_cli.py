"""`python -m parity`: the report and summary commands, their outputs and their errors."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

import minitensor as mt
from parity.__main__ import main
from tests.support import ROOT
from tests.support.cli_help import lazy_import_interrupted


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
    groups = {"embeddings", "encoder", "decoder", "logits", "loss", "grads", "hvp", "forward-mode", "after-steps"}
    assert set(data["summary"]) == groups
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
    from tests.support.cli_help import undocumented_flags

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
    """A two-step transformer_np run of a small copy-reverse model (the format of transformer_np/training/)."""
    from transformer_np.training import default_configs, train

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
    for group in ("embeddings", "encoder", "decoder", "logits", "loss", "grads", "hvp", "forward-mode", "after-steps"):
        assert group in out
    assert "PASS: all" in out and "after-steps" in out


def test_summary_names_the_keys_of_a_mismatched_checkpoint(checkpoint_dir, tmp_path, capsys):
    """A checkpoint whose weights lack a key the config implies: the error lists it."""
    state = mt.load(os.path.join(checkpoint_dir, "checkpoint.npz"))
    del state["model"]["encoder.layers.0.norm2.bias"]
    mt.save(state, str(tmp_path / "checkpoint.npz"))
    assert main(["summary", "--checkpoint", str(tmp_path), "--device", "cpu"]) == 2
    assert "encoder.layers.0.norm2.bias" in capsys.readouterr().err


# ---- Ctrl-C: one line, exit 130, no report file, as `transformer_np train` ---------
def interrupt_after_ready(cmd, ready: str, out_dir, wait_s: float = 1.0):
    """Start `cmd`, wait for a line starting with `ready` on its stdout, let it work `wait_s` more, send
    SIGINT; returns (exit code, stderr). The run must still be working then (asserted: no exit yet)."""
    import signal
    import threading
    import time

    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(300, p.kill)  # a command that never says `ready` ends the loop below, killed
    watchdog.start()
    try:
        for line in p.stdout:
            if line.startswith(ready):
                break
        time.sleep(wait_s)
        assert p.poll() is None, "the command ended before it could be interrupted"
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=120)
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not os.path.exists(out_dir) or os.listdir(out_dir) == [], os.listdir(out_dir)
    return p.returncode, err


# main() in a child process after its imports (a SIGINT during `import torch` lands before main); the
# 'ready' line marks that point. The report and summary take 40-90 s here, so 1 s in is mid-work.
_READY = "import sys, parity.__main__ as m; print('ready', flush=True); sys.exit(m.main(sys.argv[1:]))"


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--config", "copy-reverse", "--device", "cpu"],
        ["summary", "--config", "copy-reverse", "--device", "cpu"],
    ],
    ids=["report", "summary"],
)
def test_ctrl_c_is_one_line_exit_130_and_writes_nothing(tmp_path, argv):
    out = tmp_path / "out"
    code, err = interrupt_after_ready([sys.executable, "-c", _READY, *argv, "--out", str(out)], "ready", out)
    assert code == 130, err
    assert err == f"python -m parity {argv[0]}: interrupted\n"


def test_report_files_are_written_whole_when_ctrl_c_comes_while_writing(tmp_path, monkeypatch):
    """A SIGINT between the JSON and the Markdown waits for the Markdown: both files, then KeyboardInterrupt."""
    import signal

    from parity import render

    class FakeReport:
        meta = {"config": "copy", "dtype": "float64", "device": "cpu"}

        def to_dict(self):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the JSON is being written
            return {"rows": []}

    monkeypatch.setattr(render, "markdown", lambda report: "# report\n")
    with pytest.raises(KeyboardInterrupt):
        render.write(FakeReport(), str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["parity_copy_float64_cpu.json", "parity_copy_float64_cpu.md"]
    assert json.load(open(tmp_path / "parity_copy_float64_cpu.json")) == {"rows": []}


def test_an_interrupt_python_raised_as_another_error_is_still_one_line_exit_130(monkeypatch, capsys):
    from transformer_np.cliutil import interrupts_as_such

    with pytest.raises(KeyboardInterrupt), interrupts_as_such():
        lazy_import_interrupted()
    with pytest.raises(ValueError), interrupts_as_such():  # any other error passes as it is
        raise ValueError("not an interrupt")
    monkeypatch.setattr("parity.__main__.cmd_summary", lazy_import_interrupted)
    # interrupted() would ignore SIGINT in this process from then on, and the later tests' child processes would
    # inherit that: it is kept from doing so here
    monkeypatch.setattr(signal, "signal", lambda *a: None)
    assert main(["summary", "--config", "copy-reverse", "--device", "cpu"]) == 130
    assert capsys.readouterr().err == "python -m parity summary: interrupted\n"
