"""minitensor on CUDA: the op table against torch on CUDA, and the parity report's three pairings (docs/gpu.md).

Two kinds of test:

- On a real GPU with CuPy (marked `cuda`, skipped with the reason otherwise): every case of tests/op_cases.py,
  forward and backward with a random upstream gradient, minitensor on CuPy against torch on CUDA, float64 and
  float32 at minitensor/testing.py's tolerances; and `parity report` with transformer_np on the GPU against
  torch on the GPU and against itself on the CPU.
- On the fake device (minitensor/fakecuda.py, NumPy behind a strict wall), which runs everywhere: the parity report
  with `--np-device cuda`, against torch and against transformer_np on the CPU, in process and from the command line.
  The fake is NumPy underneath, so the report must pass, and the device really held the model (host syncs counted).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import minitensor as mt
from benchmarks import gpu as gpu_bench
from minitensor import devices, fakecuda
from minitensor.testing import assert_close
from parity import render
from parity.placement import host
from parity.report import ReportConfig, run_report

from .op_cases import CASES, MT, TORCH, as_list, case_seed, is_float_name, make_inputs, torch_dtype_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAVE_CUPY = importlib.util.find_spec("cupy") is not None
needs_cupy = pytest.mark.skipif(
    not HAVE_CUPY, reason="needs CuPy for minitensor on CUDA: `make gpu` installs the gpu extra"
)


def on_gpu(test):
    """Marked `cuda` (tests/conftest.py skips it, with the reason, when torch sees no GPU) and skipped without CuPy."""
    return pytest.mark.cuda(needs_cupy(test))


@pytest.fixture
def real_cuda():
    """ "cuda" is CuPy for the test (not the fake, whatever MINITENSOR_FAKE_CUDA says)."""
    previous = devices.use_fake_cuda(False)
    yield
    devices.use_fake_cuda(previous)


@pytest.fixture
def fake_cuda():
    """ "cuda" is the fake device for the test."""
    previous = devices.use_fake_cuda(True)
    yield
    devices.use_fake_cuda(previous)


# ------------------------------------------------------------------------------------- the op table on a GPU
def inputs_on_cuda(case, dtype_name: str):
    """Both libraries' inputs on CUDA, from the same seeded host arrays as tests/op_cases.py's make_inputs."""
    xs_mt, xs_t, arrays = make_inputs(case, dtype_name)
    on_mt = [mt.tensor(a.copy(), requires_grad=x.requires_grad, device="cuda") for a, x in zip(arrays, xs_mt)]
    on_t = [torch.tensor(a.copy(), requires_grad=x.requires_grad, device="cuda") for a, x in zip(arrays, xs_t)]
    return on_mt, on_t


# Cases that only make sense on a host input, each with the reason.
HOST_ONLY = {"to_fake_cuda_and_back": "it moves its input to the fake device and back to the CPU (a host-input case)"}


def run_case_on_cuda(case, dtype_name: str) -> None:
    """run_case's comparison with both sides on CUDA: forward values, shapes, dtypes, devices, then the gradients
    of every input under the same random upstream gradient."""
    if case.name in HOST_ONLY:
        pytest.skip(HOST_ONLY[case.name])
    xs_mt, xs_t = inputs_on_cuda(case, dtype_name)
    try:
        outs_t = as_list((case.ref or case.fn)(TORCH, *xs_t, **case.kwargs))
    except (RuntimeError, TypeError) as e:  # the case itself builds host tensors: nothing to compare against
        pytest.skip(f"torch refuses this case on CUDA ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
    outs_mt = as_list(case.fn(MT, *xs_mt, **case.kwargs))
    assert len(outs_mt) == len(outs_t), f"{case}: {len(outs_mt)} outputs vs torch's {len(outs_t)}"
    for i, (o, r) in enumerate(zip(outs_mt, outs_t)):
        what = f"{case} [{dtype_name}] forward {i}"
        assert o.device.type == r.device.type, f"{what}: on {o.device}, torch's on {r.device}"
        assert o.shape == tuple(r.shape) and o.dtype.name == torch_dtype_name(r), what
        if is_float_name(o.dtype.name):
            assert_close(host(o), r.detach().cpu().numpy(), case.tol(dtype_name), what=what)
        else:
            np.testing.assert_array_equal(host(o), r.detach().cpu().numpy(), err_msg=what)
    pairs = [(o, r) for o, r in zip(outs_mt, outs_t) if r.requires_grad]
    if not (case.grad and pairs):
        return
    rng = np.random.default_rng(case_seed(case.name) + 1)
    gs = [np.asarray(rng.standard_normal(r.shape) + 0.5, dtype=o.dtype) for o, r in pairs]
    # one scalar sum_i <out_i, g_i> in each library: one backward for any number of outputs
    loss_mt = sum((o * mt.tensor(g, device=o.device)).sum() for (o, _), g in zip(pairs, gs))
    loss_t = sum((r * torch.tensor(g, device=r.device)).sum() for (_, r), g in zip(pairs, gs))
    loss_mt.backward()
    loss_t.backward()
    for i, (x, r) in enumerate(zip(xs_mt, xs_t)):
        if not r.requires_grad:
            continue
        what = f"{case} [{dtype_name}] grad of input {i}"
        if r.grad is None:
            assert x.grad is None or not np.any(host(x.grad)), f"{what}: torch has none, ours is nonzero"
            continue
        assert x.grad is not None and x.grad.device.type == "cuda", f"{what}: missing or not on CUDA"
        assert_close(host(x.grad), r.grad.cpu().numpy(), case.tol(dtype_name), what=what)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=str)
@on_gpu
def test_op_on_cuda_against_torch_on_cuda(case, dtype_name, real_cuda):
    run_case_on_cuda(case, dtype_name)


# ----------------------------------------------------------------------------- the parity report's pairings
def _report(dtype: str, device: str, against: str, **kw):
    return run_report(
        ReportConfig("copy", dtype, device, steps=2, batch_size=3, np_device="cuda", against=against, **kw)
    )


@on_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_parity_minitensor_gpu_against_torch_gpu(dtype, real_cuda):
    report = _report(dtype, "cuda", "torch", dropout=0.1)
    assert report.meta["np_device"] == report.meta["device"] == "cuda"
    assert report.passed, "\n" + render.table(report, failures_only=True)


@on_gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_parity_minitensor_gpu_against_minitensor_cpu(dtype, real_cuda):
    report = _report(dtype, "cpu", "np-cpu", dropout=0.1)
    assert report.meta["pairing"] == "transformer_np on cuda against transformer_np on cpu"
    assert report.passed, "\n" + render.table(report, failures_only=True)


@pytest.mark.parametrize("against", ["torch", "np-cpu"])
def test_parity_report_on_the_fake_device(against, fake_cuda):
    """transformer_np on the fake device against torch on the CPU, and against itself on the CPU: both pass, and
    the model was really on the device (its values reached the host through counted syncs)."""
    with fakecuda.count_syncs() as syncs:
        report = _report("float64", "cpu", against, dropout=0.1)
    assert report.meta["np_device"] == "cuda" and report.meta["against"] == against
    assert report.passed, "\n" + render.table(report, failures_only=True)
    assert syncs.count > 0, "nothing was read back from the fake device: the model did not move"


def test_parity_report_command_on_the_fake_device(tmp_path):
    """`MINITENSOR_FAKE_CUDA=1 python -m parity report --np-device cuda`: passes, and writes its own files."""
    env = dict(os.environ, MINITENSOR_FAKE_CUDA="1")
    args = ["report", "--config", "copy", "--steps", "1", "--batch-size", "2", "--np-device", "cuda"]
    p = subprocess.run(
        [sys.executable, "-m", "parity", *args, "--device", "cpu", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "transformer_np on cuda against PyTorch on cpu" in p.stdout and "PASS: all" in p.stdout
    assert (tmp_path / "parity_copy_float64_cpu_np-cuda.json").exists()


def test_np_device_cuda_without_a_device_is_one_clear_line():
    """Without CuPy and a GPU, and without the fake: exit 2, one line naming what to do."""
    env = {k: v for k, v in os.environ.items() if k != "MINITENSOR_FAKE_CUDA"}
    code = "import minitensor as mt, sys; sys.exit(0 if mt.cuda.is_available() else 1)"
    if subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env).returncode == 0:
        pytest.skip("this machine has a CUDA device for minitensor")
    p = subprocess.run(
        [sys.executable, "-m", "parity", "report", "--np-device", "cuda"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "--np-device cuda requested but minitensor sees no CUDA device" in p.stderr


def test_against_np_cpu_needs_a_device_subject():
    with pytest.raises(ValueError, match="add --np-device cuda"):
        ReportConfig("copy", against="np-cpu")


# ----------------------------------------------------------------------------------- the GPU benchmark section
def _benchmarks(*args, env=None):
    env = dict(env or os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_gpu_benchmark_without_a_gpu_is_one_line(tmp_path):
    if torch.cuda.is_available() and HAVE_CUPY:
        pytest.skip("this machine has a GPU and CuPy: the section runs")
    p = _benchmarks("gpu", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stderr == "" and p.stdout.count("\n") == 1 and p.stdout.startswith("GPU section skipped: ")
    assert not (tmp_path / "gpu.md").exists()


def test_gpu_benchmark_harness_on_the_fake_device(tmp_path):
    """`--fake`: minitensor on the fake device, torch on the CPU, the tiny config: every part of the harness runs
    (processes, alternation, ratio, files), labelled as a smoke test."""
    p = _benchmarks("gpu", "--fake", "--configs", "tiny", "--rounds", "2", "--calls", "1", "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    md = (tmp_path / "gpu.md").read_text()
    assert "a smoke test of the harness, not a GPU figure" in md and "| tiny |" in md
    assert "fake CUDA device (NumPy)" in md


def test_gpu_benchmark_markdown_names_versions_and_spread():
    stats = lambda ms: {"median_ms": ms}
    ratio = {"median": 2.5, "q1": 2.4, "q3": 2.6, "min": 2.3, "max": 2.7, "rounds": 7}
    facts = {
        "minitensor": {"device": "NVIDIA H100", "cupy": "14.2.0", "cuda_runtime": 13000, "numpy": "2.4.6"},
        "torch": {"torch": "2.11.0+cu130", "torch_cuda": "13.0", "device": "NVIDIA H100"},
    }
    result = {"fake": False, "configs": {"base": {"minitensor": stats(50.0), "torch": stats(20.0), "ratio": ratio}}}
    result["configs"]["base"].update(facts=facts, rounds=7, calls=5, warmup=3)
    md = gpu_bench.markdown(result)
    assert "| base | 50.0 | 20.0 | 2.50 (2.40-2.60, 2.30-2.70) | 7 |" in md
    assert "CuPy 14.2.0" in md and "torch 2.11.0+cu130 (CUDA 13.0) on NVIDIA H100" in md
    assert gpu_bench.markdown({"skipped": "no CUDA GPU"}).endswith("Skipped: no CUDA GPU.\n")
