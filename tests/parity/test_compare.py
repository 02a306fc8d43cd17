"""`python -m parity compare`: the table for a model file, exit 1 on a difference, one line and exit 2 on bad input."""

from __future__ import annotations

import os
import textwrap

import pytest

from parity import compare
from parity.__main__ import build_parser, main
from tests.support import ROOT
from tests.support.cli_help import one_line_refusal, undocumented_flags

GPT = os.path.join(ROOT, "tests", "support", "programs", "gpt.py")


def _model_file(tmp_path, body: str) -> str:
    """A model file: torch imported, then `body` (a class Net)."""
    path = tmp_path / "model.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return str(path)


# A model whose computation depends on which library runs it: minitensor's version is not torch's 2.x.
PLANTED = """
class Net(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.first = nn.Linear(3, width)
        self.second = nn.Linear(width, 2)

    def forward(self, x):
        h = torch.tanh(self.first(x))
        if not torch.__version__.startswith("2."):
            h = h * (1 + 1e-6)
        return self.second(h)
"""


def test_compare_prints_the_table_and_exits_0_when_everything_matches(capsys):
    code = main(
        ["compare", f"{GPT}:GPT", "--kwargs", '{"n_layer": 1}', "--input-shape", "2,6"]
        + ["--input-dtype", "long", "--steps", "2", "--loss", "model"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASS: all" in out and "first difference: none" in out
    for row in ("forward     blocks.0.attn.qkv", "param.grad  wte.weight", "param       lm_head.weight", "(model)[1]"):
        assert row in out, row
    assert max(len(line) for line in out.splitlines()) <= 120


def test_compare_builds_a_model_that_takes_a_config_object(tmp_path, capsys):
    path = _model_file(
        tmp_path,
        """
        from dataclasses import dataclass

        @dataclass
        class Config:
            width: int = 4
            classes: int = 3

        class Net(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.fc = nn.Linear(config.width, config.classes)

            def forward(self, x):
                return torch.log_softmax(self.fc(x), dim=-1)
        """,
    )
    argv = ["compare", f"{path}:Net", "--config-class", "Config", "--kwargs", '{"width": 5}', "--input-shape", "2,5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert 'kwargs {"width": 5} through Config' in out and "param.grad  fc.weight  " in out
    argv[3] = "NoConfig"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "model.py has no class NoConfig" in err, err


def test_compare_exits_1_and_names_the_first_module_that_differs(tmp_path, capsys):
    path = _model_file(tmp_path, PLANTED)
    assert main(["compare", f"{path}:Net", "--input-shape", "5,3", "--steps", "1"]) == 1
    out = capsys.readouterr().out
    assert "first difference: forward second " in out and "FAIL:" in out
    first = next(line for line in out.splitlines() if line.startswith("forward     first"))
    assert first.endswith("ok")  # the module before the planted change still matches


def test_compare_exits_1_in_one_line_when_minitensor_lacks_an_api(tmp_path, capsys):
    path = _model_file(
        tmp_path,
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)

            def forward(self, x):
                return torch.fft.rfft(self.fc(x)).real  # torch.fft: not in minitensor
        """,
    )
    assert main(["compare", f"{path}:Net", "--input-shape", "2,3"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "torch.fft is not in minitensor" in err
    assert f"{path}:11)" in err  # the forward's return line


def test_compare_exits_1_in_one_line_when_the_file_imports_on_torch_only(tmp_path, capsys):
    path = _model_file(tmp_path, "pool = torch.nn.functional.fractional_max_pool2d  # not in minitensor\n")
    assert main(["compare", f"{path}:Net", "--input-shape", "2,3"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"python -m parity compare: FAIL: torch.nn.functional.fractional_max_pool2d is not in minitensor (used at "
        f"{path}:4); minitensor.compat maps only what minitensor has"
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["{gpt}:NoSuchClass", "--input-shape", "2,3"], "has no class NoSuchClass"),
        (["{gpt}", "--input-shape", "2,3"], "expected FILE.py:CLASS"),
        (["{gpt}:GPT", "--kwargs", '{"n_layer": 1', "--input-shape", "2,3"], "expected a JSON object"),
        (["{gpt}:GPT", "--kwargs", "[1, 2]", "--input-shape", "2,3"], "expected a JSON object, got list"),
        (["{gpt}:GPT", "--input-shape", "2,x"], "expected positive integers separated by commas"),
        (["{gpt}:GPT", "--input-shape", "2,0"], "expected positive integers separated by commas"),
        (["{gpt}:GPT", "--kwargs", '{"no_such_argument": 1}', "--input-shape", "2,3"], "does not build with torch"),
        (["{gpt}:GPT", "--input-shape", "2,3"], "the forward fails on torch"),  # float tokens into an embedding
        (["{gpt}:GPT", "--input-shape", "2,30", "--input-dtype", "long"], "the forward fails on torch"),
        (["no_such_file.py:GPT", "--input-shape", "2,3"], "no such file: no_such_file.py"),
        (["{names}:Net", "--input-shape", "2,3"], "parameter names differ between the two runs"),
        (["{planted}:Net", "--input-shape", "2,3", "--input-dtype", "long"], "long inputs and targets need"),
        (["{broken}:Net", "--input-shape", "2,3"], "cannot import"),
    ],
)
def test_compare_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    names = _model_file(
        tmp_path,
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                # a name that depends on the library that builds the model
                self.register_parameter("scale_v" + torch.__version__[0], nn.Parameter(torch.ones(3)))

            def forward(self, x):
                return self.fc(x)
        """,
    )
    planted = tmp_path / "planted.py"
    planted.write_text("import torch\nimport torch.nn as nn\n" + PLANTED)
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\nclass Net(torch.nn.Module)\n")  # a syntax error: no colon
    argv = ["compare"] + [
        a.replace("{gpt}", GPT)
        .replace("{names}", names)
        .replace("{planted}", str(planted))
        .replace("{broken}", str(broken))
        for a in args
    ]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's refusals
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert message in err, err


def test_compare_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted(cc):
        raise KeyboardInterrupt

    monkeypatch.setattr(compare, "run_compare", interrupted)
    assert main(["compare", f"{GPT}:GPT", "--input-shape", "2,3"]) == 130
    assert capsys.readouterr().err == "python -m parity compare: interrupted\n"


def test_compare_flags_explain_themselves(capsys):
    assert undocumented_flags(build_parser()) == []
    one_line_refusal(main, ["compare", f"{GPT}:GPT", "--input-shape", "2,3", "--dtype", "float16"], capsys)
