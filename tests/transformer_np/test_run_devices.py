"""A run folder across devices: a run trained on the (fake) CUDA device decodes, plots, resumes and goes through
parity's summary on the CPU with no CUDA at all, and a CPU run resumes on the device (transformer_np/training/
checkpoint.py's readers load onto the CPU; load_state_dict copies to the parameters' device). Also mt.load's
map_location in each of torch's forms, the callable among them.

"cuda" is the fake device (minitensor/fakecuda.py) while a run is trained on it; each reader then runs with the
fake off, so that an array still meant for the device would be refused ("attempting to deserialize ...").
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import minitensor as mt
from minitensor import devices, fakecuda
from minitensor.testing import PARITY_RTOL, assert_close
from tests.minitensor.devices.test_fake_device_training import TINY_MODEL, TINY_TRAIN
from transformer_np.cli import main
from transformer_np.training import default_configs, load_checkpoint, train


@pytest.fixture(autouse=True)
def no_cuda():
    """No CUDA unless a test turns the fake on (put back afterwards)."""
    previous = devices.use_fake_cuda(False)
    yield
    devices.use_fake_cuda(previous)


def configs():
    model_cfg, train_cfg = default_configs("copy-reverse")
    return model_cfg.replace(**TINY_MODEL), train_cfg.replace(**TINY_TRAIN)


def trained(out, device: str, steps: int | None = None, resume: bool = False, dtype=None):
    """train() of the tiny run in `out` on `device` ("cuda": the fake, on for this call only)."""
    model_cfg, train_cfg = configs()
    if steps is not None:
        train_cfg = train_cfg.replace(steps=steps)
    previous = devices.use_fake_cuda(device == "cuda")
    try:
        return train(model_cfg, train_cfg, str(out), resume=resume, progress=False, device=device, dtype=dtype)
    finally:
        devices.use_fake_cuda(previous)


def weights(run) -> dict:
    """The model's arrays of a run folder, read on the CPU."""
    return mt.load(str(run / "checkpoint.npz"), map_location="cpu")["model"]


def assert_same_weights(a: dict, b: dict, run) -> None:
    """float64 round-off: the fake is NumPy underneath, but a few CPU speed devices are not used on a device. The key
    biases (W_k.bias) are the exception, as in tests/minitensor/devices/test_fake_device_training.py: their gradient is
    0 in exact arithmetic (softmax ignores a shift of a whole row), so Adam moves them by round-off it amplifies, at
    most lr a step on each side (`run`'s history.json holds the learning rates)."""
    assert a.keys() == b.keys()
    adam_bound = 2 * sum(json.loads((run / "history.json").read_text())["lr"])
    for name in a:
        assert a[name].dtype == np.float64, name
        if name.endswith("W_k.bias"):
            assert np.abs(a[name] - b[name]).max() <= adam_bound, name
        else:
            assert_close(a[name], b[name], PARITY_RTOL["float64"], what=name)


@pytest.fixture(scope="module")
def device_run(tmp_path_factory):
    """A tiny run trained on the fake device: its folder."""
    out = tmp_path_factory.mktemp("device_run") / "run"
    trained(out, "cuda")
    raw = mt.load(str(out / "checkpoint.npz"), map_location=lambda array, saved: array)
    assert raw["model"], "the run saved no model"
    return out


def test_a_device_run_saves_its_arrays_as_device_arrays(device_run):
    """The premise: the file records the device (mt.load without map_location wants CUDA back)."""
    with pytest.raises(RuntimeError, match=r"attempting to deserialize an array on cuda:0 .*map_location='cpu'"):
        mt.load(str(device_run / "checkpoint.npz"))


def test_a_device_run_loads_on_the_cpu(device_run):
    ckpt = load_checkpoint(str(device_run))
    assert all(v.device == "cpu" for v in ckpt.model.state_dict().values())
    assert all(type(v) is np.ndarray for v in ckpt.state["model"].values())
    moments = [v for s in ckpt.state["optimizer"]["state"].values() for v in s.values() if devices.is_array(v)]
    assert moments and all(type(v) is np.ndarray for v in moments)


def test_a_device_run_decodes_and_plots_on_the_cpu(device_run, capsys, tmp_path):
    assert main(["decode", "--checkpoint", str(device_run), "--input", "3 4 5", "--beam", "2"]) == 0
    on_cpu = capsys.readouterr().out
    devices.use_fake_cuda(True)
    assert main(["decode", "--checkpoint", str(device_run), "--input", "3 4 5", "--beam", "2", "--device", "cuda"]) == 0
    assert capsys.readouterr().out == on_cpu
    devices.use_fake_cuda(False)
    assert main(["plot", "--checkpoint", str(device_run), "--out", str(tmp_path / "plots")]) == 0
    assert sorted(p.name for p in (tmp_path / "plots").iterdir())  # the figures were written


def test_a_device_run_loads_onto_the_device_asked_for(device_run):
    devices.use_fake_cuda(True)
    ckpt = load_checkpoint(str(device_run), device="cuda")
    assert all(v.device.type == "cuda" for v in ckpt.model.state_dict().values())
    for name, v in ckpt.model.state_dict().items():
        np.testing.assert_array_equal(v.cpu().numpy(), ckpt.state["model"][name], err_msg=name)


def test_a_device_run_resumes_on_the_cpu(tmp_path):
    """Cut after 2 of 4 steps on the device, resumed on the CPU: the weights of the whole run on the device, to
    round-off (Adam's moments and the dropout stream came back)."""
    whole = trained(tmp_path / "whole", "cuda", dtype=np.float64)
    trained(tmp_path / "cut", "cuda", steps=2, dtype=np.float64)
    resumed = trained(tmp_path / "cut", "cpu", resume=True, dtype=np.float64)
    assert resumed.step == whole.step == TINY_TRAIN["steps"] and resumed.start_step == 2
    assert_same_weights(weights(tmp_path / "cut"), weights(tmp_path / "whole"), tmp_path / "whole")


def test_a_cpu_run_resumes_on_the_device(tmp_path):
    whole = trained(tmp_path / "whole", "cpu", dtype=np.float64)
    trained(tmp_path / "cut", "cpu", steps=2, dtype=np.float64)
    resumed = trained(tmp_path / "cut", "cuda", resume=True, dtype=np.float64)
    assert resumed.step == whole.step and resumed.start_step == 2
    assert_same_weights(weights(tmp_path / "cut"), weights(tmp_path / "whole"), tmp_path / "whole")
    with pytest.raises(RuntimeError, match="deserialize an array on cuda:0"):  # the device wrote the last save
        mt.load(str(tmp_path / "cut" / "checkpoint.npz"))


def test_a_device_run_goes_through_parity_summary_on_the_cpu(device_run):
    from parity.report import run_summary

    report, source = run_summary(checkpoint=str(device_run), steps=1, device="cpu")
    assert source.startswith(f"checkpoint {device_run / 'checkpoint.npz'} (step {TINY_TRAIN['steps']}")
    assert report.meta["checkpoint_step"] == TINY_TRAIN["steps"]


# ----------------------------------------------------------------------------- mt.load's map_location, as torch's
def test_map_location_callable_as_torch(tmp_path):
    """torch calls map_location(storage, location) with the storage read on the CPU and the saved location's name;
    its result is kept, None means the saved device. Here the same with arrays."""
    devices.use_fake_cuda(True)
    path = tmp_path / "mixed.npz"
    mt.save({"w": mt.ones(2, device="cuda"), "h": np.arange(3.0)}, path)
    seen = []

    def record(array, location):
        seen.append((type(array), location))
        return array

    assert all(type(v) is np.ndarray for v in mt.load(path, map_location=record).values())
    assert sorted(seen, key=lambda s: s[1]) == [(np.ndarray, "cpu"), (np.ndarray, "cuda:0")]
    back = mt.load(path, map_location=lambda array, location: None)  # None: where it was saved
    assert type(back["w"]) is fakecuda.FakeArray and type(back["h"]) is np.ndarray
    devices.use_fake_cuda(False)
    assert type(mt.load(path, map_location=lambda storage, loc: storage)["w"]) is np.ndarray  # torch's idiom
    with pytest.raises(TypeError, match=r"map_location returned list for the array at .*expected an array"):
        mt.load(path, map_location=lambda array, location: [1.0])
    with pytest.raises(TypeError, match="map_location must be None, a device"):
        mt.load(path, map_location=3.5)
