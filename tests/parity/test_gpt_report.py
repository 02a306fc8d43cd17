"""`python -m parity report --model gpt2|llama` (parity/gpt/report.py): the GPT against its twin, layer by layer, on
small models: the report passes in float64 and float32, covers every parameter, every called submodule, the AdamW
steps and cached generation, fails when one side is wrong, and its command line refuses bad input in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parity import results
from parity.__main__ import main
from parity.gpt import report as gpt_report
from parity.gpt.report import GptReportConfig, greedy_row, run_gpt_report
from parity.results import Report
from transformer_np.gpt import gpt2_shape, llama_shape

SMALL = dict(n_layer=2, n_head=4, n_embd=16, block_size=8)
CONFIGS = {"gpt2": gpt2_shape(11, **SMALL), "llama": llama_shape(11, **SMALL)}


def small_report(model: str, dtype: str = "float64", steps: int = 2):
    cfg = GptReportConfig(model, dtype, "cpu", steps, batch_size=3, gpt_config=CONFIGS[model])
    return run_gpt_report(cfg)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_the_report_passes_and_covers_every_parameter_module_step_and_generation(model, dtype):
    report = small_report(model, dtype)
    assert report.passed, [r for r in report.rows if not r.ok]
    ours, twin = gpt_report.build_gpt_models(CONFIGS[model], dtype, "cpu", 0)
    params = {name for name, _ in twin.named_parameters()}
    assert params == report.names("param.grad") and params <= report.names("param")
    called = {name for name, m in twin.named_modules() if name and not isinstance(m, torch.nn.ModuleList)}
    called.discard("pos_emb")  # indexed by position, never called: its gradient row covers it
    assert called <= {name.split("#")[0] for name in report.names("forward")}
    assert report.names("grad") == report.names("forward")
    assert {"loss step 2", "grad norm step 2", "param grads step 2"} <= report.names("step")
    assert len(report.names("cache")) == 1 and len(report.names("tokens")) == 1
    zero = {r.name for r in report.rows if r.rule == "zero" and r.kind == "param.grad"}
    # The GPT-2 shape's key biases have an identically zero gradient; Llama has no biases.
    assert zero == ({f"blocks.{i}.attn.k_proj.bias" for i in range(2)} if model == "gpt2" else set())
    assert {r.group for r in report.rows} == set(results.GPT_GROUPS)
    assert report.meta["trajectory"] == ("free" if dtype == "float64" else "lockstep")


def test_a_wrong_side_fails_the_rows_it_reaches(monkeypatch):
    build = gpt_report.build_gpt_models

    def one_weight_off(*args):
        ours, twin = build(*args)
        ours.blocks[1].mlp.fc.weight.data[0, 0] += 1e-6  # far below any visible effect, far above round-off
        return ours, twin

    monkeypatch.setattr(gpt_report, "build_gpt_models", one_weight_off)
    report = small_report("gpt2")
    forward = {r.name for r in report.failures() if r.kind == "forward"}
    assert "blocks.1.mlp.fc" in forward and "blocks.0.mlp.fc" not in forward  # the first output it changes
    assert "blocks.1.mlp.fc.weight" in {r.name for r in report.failures() if r.kind == "param"}
    assert not report.passed


def _twin_with_logits(logits: np.ndarray):
    """A stand-in twin whose next-token logits are always `logits` (V,)."""

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
            self.config = CONFIGS["gpt2"]

        def forward(self, idx):
            return torch.as_tensor(logits).expand(idx.shape[0], idx.shape[1], -1)

    return Twin()


def test_greedy_tokens_that_part_only_at_a_round_off_tie_pass_and_say_so():
    ref = np.array([[1, 2, 3, 4, 5]])
    ours = np.array([[1, 2, 3, 6, 6]])
    logits = np.zeros(11)
    logits[4] = 2.0
    logits[6] = 2.0 - 1e-12  # a tie to float64 round-off: either pick is right
    report = Report(meta={})
    greedy_row(report, ours, ref, _twin_with_logits(logits), 1e-9)
    (row,) = report.rows
    assert row.ok and row.shape == (1, 3) and "near-tie" in row.note
    logits[6] = 1.9  # a real difference
    report = Report(meta={})
    greedy_row(report, ours, ref, _twin_with_logits(logits), 1e-9)
    (row,) = report.rows
    assert not row.ok and row.value == 2 and "position 3" in row.note


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--model", "gpt3"], "argument --model: invalid choice: 'gpt3'"),
        (["--model", "gpt2", "--norm-first"], "--norm-first shapes the encoder-decoder; --model gpt2 takes none"),
        (["--model", "llama", "--config", "copy"], "--config shapes the encoder-decoder; --model llama takes none"),
        (["--model", "llama", "--np-device", "cuda"], "--np-device shapes the encoder-decoder"),
        (["--model", "gpt2", "--steps", "-1"], "argument --steps: expected an integer >= 0, got -1"),
        (["--model", "gpt2", "--dtype", "float16"], "argument --dtype: invalid choice: 'float16'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    try:
        code = main(["report", *argv, "--device", "cpu"])
    except SystemExit as e:  # argparse's refusals
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_command_prints_the_table_and_writes_both_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(GptReportConfig, "model_config", lambda self: CONFIGS[self.model])
    argv = ["report", "--model", "llama", "--device", "cpu", "--steps", "1", "--batch-size", "2"]
    argv += ["--out", str(tmp_path)]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("parity report: the llama-shaped GPT, float64, transformer_np on cpu against PyTorch on cpu")
    assert "PASS: all" in out and "[generation: 2 checks]" in out
    assert {p.name for p in tmp_path.iterdir()} == {"parity_llama_float64_cpu.json", "parity_llama_float64_cpu.md"}
    assert max(len(line) for line in out.splitlines()) <= 120
