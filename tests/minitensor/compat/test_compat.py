"""minitensor.compat: torch's names mapped to minitensor's, the one error for what is missing, sys.modules restored,
and `python -m minitensor.compat run`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.compat import (
    MissingAttribute,
    MissingModule,
    NotInMinitensor,
    TorchModule,
    as_torch,
    import_file,
    load_file,
)
from minitensor.compat.__main__ import main
from minitensor.compat.names import TORCH_MODULES, resolve
from minitensor.testing import PARITY_RTOL, assert_close
from tests.support import ROOT

PROGRAMS = os.path.join(ROOT, "tests", "support", "programs")


def _line_of(text: str) -> int:
    """The line of this file that holds `text` (the call sites the errors must name)."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _write(tmp_path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_torch_and_its_submodules_are_minitensors():
    with as_torch():
        import torch as t
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.optim.lr_scheduler as sched
        import torch.utils.data as data
        from torch.nn.utils.rnn import pad_sequence

    assert isinstance(t, TorchModule) and t is not torch
    assert t.nn is nn and t.nn.functional is F and t.optim.lr_scheduler is sched
    assert nn.Linear is mt.nn.Linear and F.relu is mt.nn.functional.relu and t.Tensor is mt.Tensor
    assert data.DataLoader is mt.utils.data.DataLoader and pad_sequence is mt.nn.utils.rnn.pad_sequence
    assert t.float is mt.float32 and t.cuda.is_available() is False and t.backends.cudnn.is_available() is False
    # the model code computes with minitensor
    x = t.ones(2, 3)
    assert isinstance(nn.Linear(3, 2)(x), mt.Tensor)


def test_every_table_entry_resolves_to_a_part_of_minitensor():
    for name, target in TORCH_MODULES.items():
        assert resolve(target) is not None, name
    with as_torch() as t:
        assert {"nn", "optim", "utils", "cuda", "amp", "backends", "autograd"} <= set(dir(t))


def test_a_missing_attribute_names_the_api_and_the_line_and_is_an_attribute_error():
    with as_torch() as t:
        assert not hasattr(t, "distributed") and hasattr(t, "compile")  # hasattr probes answer as usual
        with pytest.raises(MissingAttribute) as e:
            _ = t.nn.NoSuchLayer  # the line named
    message = str(e.value)
    assert message.startswith("torch.nn.NoSuchLayer is not in minitensor")
    assert f"{__file__}:{_line_of('_ = t.nn.NoSuchLayer  # the line named')}" in message
    assert isinstance(e.value, AttributeError) and isinstance(e.value, NotInMinitensor)


def test_a_missing_import_names_the_api_and_the_line():
    with as_torch():
        with pytest.raises(MissingModule) as e:
            from torch.nn import NoSuchLayer  # noqa: F401 (the import is the test)
        line = _line_of("from torch.nn import NoSuchLayer")
        assert str(e.value).startswith("torch.nn.NoSuchLayer is not in minitensor") and f":{line})" in str(e.value)
        with pytest.raises(ImportError) as e:  # `except ImportError` probes catch it
            import torch.distributed  # the import is the test
        assert str(e.value).startswith("torch.distributed is not in minitensor")
        assert f"{__file__}:{_line_of('import torch.distributed  # the import')}" in str(e.value)
        with pytest.raises(MissingModule, match=r"^torch\.testing is not in minitensor"):
            import torch.testing  # noqa: F401 (minitensor.testing is the project's tolerances, not torch's API)


def test_sys_modules_is_restored_exactly_with_real_torch_imported_before(tmp_path):
    user = _write(
        tmp_path,
        "compat_user_model.py",
        """
        import json
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)

            def forward(self, x):
                return torch.tanh(self.fc(x))
        """,
    )
    sys.path.insert(0, str(tmp_path))
    before = dict(sys.modules)
    try:
        with as_torch():
            import compat_user_model

            assert sys.modules["torch"] is not torch and "compat_user_model" in sys.modules
    finally:
        sys.path.remove(str(tmp_path))
    after = dict(sys.modules)
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    assert sys.modules["torch"] is torch and sys.modules["torch.nn"] is torch.nn
    # the module the program holds keeps minitensor: its model still computes there
    out = compat_user_model.Net()(mt.ones(1, 3))
    assert isinstance(out, mt.Tensor) and out.shape == (1, 2)
    del user


def test_sys_modules_is_restored_when_the_block_raises():
    before = dict(sys.modules)
    with pytest.raises(RuntimeError, match="inside"):
        with as_torch():
            import torch.nn as _nn  # noqa: F401 (imported inside the block)

            raise RuntimeError("inside")
    assert dict(sys.modules).keys() == before.keys() and sys.modules["torch"] is torch


def test_without_real_torch_before_the_block_none_is_left_after_it():
    # A fresh process (this one has torch imported): after the block `torch` is absent, and the import system finds
    # real torch again (found, not imported: that is the slow part and the in-process test shows it works).
    code = textwrap.dedent(
        """
        import sys
        from minitensor.compat import as_torch
        with as_torch():
            import torch
            assert type(torch).__name__ == "TorchModule"
        assert not [n for n in sys.modules if n == "torch" or n.startswith("torch.")], "torch left behind"
        import importlib.util
        assert importlib.util.find_spec("torch").origin.endswith("torch/__init__.py")
        print("ok")
        """
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_load_file_leaves_nothing_in_sys_modules(tmp_path):
    path = _write(tmp_path, "loaded.py", "import torch\nVALUE = torch.ones(2)\n")
    before = set(sys.modules)
    module = load_file(path, "compat_loaded_once")
    assert isinstance(module.VALUE, mt.Tensor) and set(sys.modules) == before
    with pytest.raises(ValueError, match="already imported"):
        load_file(path, "json")


def test_run_command_runs_a_script_as_main_with_its_arguments(tmp_path, capsys):
    script = _write(
        tmp_path,
        "script.py",
        """
        import sys
        import torch
        print("argv", sys.argv[1:], __name__, type(torch.zeros(1)).__module__)
        sys.exit(int(sys.argv[1]))
        """,
    )
    before = dict(sys.modules)
    with pytest.raises(SystemExit) as e:
        main(["run", script, "3", "--flag"])
    assert e.value.code == 3
    assert capsys.readouterr().out == "argv ['3', '--flag'] __main__ minitensor.tensor\n"
    assert dict(sys.modules).keys() == before.keys() and sys.modules["torch"] is torch


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "expected the command 'run', got nothing"),
        (["go", "x.py"], "expected the command 'run', got 'go'"),
        (["run"], "expected a script to run"),
        (["run", "no_such_script.py"], "no such script: no_such_script.py"),
    ],
)
def test_run_command_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_run_command_missing_api_is_one_line_and_exit_1(tmp_path, capsys):
    script = _write(tmp_path, "uses_missing.py", "import torch\n\nx = torch.zeros(2)\ny = torch.no_such_function(x)\n")
    assert main(["run", script]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"python -m minitensor.compat run: torch.no_such_function is not in minitensor (used at {script}:4); "
        "minitensor.compat maps only what minitensor has"
    ]


def test_run_command_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys):
    script = _write(tmp_path, "interrupted.py", "raise KeyboardInterrupt\n")
    assert main(["run", script]) == 130
    assert capsys.readouterr().err == "python -m minitensor.compat run: interrupted\n"


def test_a_training_script_prints_the_same_losses_on_torch_and_on_minitensor(capsys):
    script = os.path.join(PROGRAMS, "convnet.py")
    losses = lambda text: np.array([float(line.split()[-1]) for line in text.splitlines()])
    previous = torch.get_default_dtype()
    try:  # torch's run in this process (the script sets torch's default dtype), minitensor's in a child
        import_file(script, "compat_convnet_on_torch").main(4)
    finally:
        torch.set_default_dtype(previous)
        sys.modules.pop("compat_convnet_on_torch")
    on_torch = losses(capsys.readouterr().out)
    p = subprocess.run(
        [sys.executable, "-m", "minitensor.compat", "run", script, "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    on_minitensor = losses(p.stdout)
    assert on_torch.shape == (4,)
    assert_close(on_minitensor, on_torch, PARITY_RTOL["float64"], "convnet.py losses, float64")


def test_nested_blocks_restore_each_level():
    with as_torch() as outer:
        with as_torch() as inner:
            assert inner is outer and sys.modules["torch"] is inner
        assert sys.modules["torch"] is outer
    assert sys.modules["torch"] is torch


def test_a_flag_set_through_the_mapping_stays_on_the_torch_module():
    with as_torch() as t:
        t.backends.cudnn.benchmark = True
        assert t.backends.cudnn.benchmark is True
    assert mt.backends.cudnn.benchmark is False  # minitensor's own flag, read by code outside the mapping
    del t.backends.cudnn.benchmark


def test_torch_cuda_amp_and_the_layers_module_paths_are_torchs():
    # programs import torch.cuda.amp's deprecated spellings and layers from their torch.nn.modules files
    with as_torch():
        import torch as t
        from torch.cuda.amp import GradScaler, autocast
        from torch.nn.modules.activation import MultiheadAttention
        from torch.nn.modules.batchnorm import BatchNorm1d
        from torch.nn.modules.transformer import TransformerEncoderLayer

        assert t.nn.Linear is mt.nn.Linear
    assert (autocast, GradScaler) == (mt.cuda.amp.autocast, mt.cuda.amp.GradScaler)
    assert (MultiheadAttention, BatchNorm1d) == (mt.nn.MultiheadAttention, mt.nn.BatchNorm1d)
    assert TransformerEncoderLayer is mt.nn.TransformerEncoderLayer
