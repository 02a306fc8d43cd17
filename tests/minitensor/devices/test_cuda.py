"""minitensor on CUDA: the op table against torch on CUDA, and the parity report's three pairings (docs/gpu.md).

Two kinds of test:

- On a real GPU with CuPy (marked `cuda`, skipped with the reason otherwise): every case of tests/support/op_cases.py,
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
from tests.support import ROOT
from tests.support.op_cases import CASES, MT, TORCH, as_list, case_seed, is_float_name, make_inputs, torch_dtype_name

HAVE_CUPY = importlib.util.find_spec("cupy") is not None
needs_cupy = pytest.mark.skipif(
    not HAVE_CUPY, reason="needs CuPy for minitensor on CUDA: `make gpu` installs the gpu extra"
)

pytestmark = pytest.mark.full


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
    """Both libraries' inputs on CUDA, from the same seeded host arrays as tests/support/op_cases.py's make_inputs."""
    xs_mt, xs_t, arrays = make_inputs(case, dtype_name)
    on_mt = [mt.tensor(a.copy(), requires_grad=x.requires_grad, device="cuda") for a, x in zip(arrays, xs_mt)]
    on_t = [torch.tensor(a.copy(), requires_grad=x.requires_grad, device="cuda") for a, x in zip(arrays, xs_t)]
    return on_mt, on_t


# Cases that only make sense on a host input, each with the reason.
HOST_ONLY = {"to_fake_cuda_and_back": "it moves its input to the fake device and back to the CPU (a host-input case)"}


def assert_nuclear_subgradient(x: np.ndarray, g: np.ndarray, rtol: float, what: str) -> None:
    """g is a subgradient of the nuclear norm at x: g = U1 V1^T + W with U1^T W = 0, W V1 = 0 and ||W||_2 <= 1,
    where U1, V1 are x's singular vectors of nonzero singular values (Watson, 1992). At a rank-deficient x any such
    W will do, and the one a backward returns comes from the SVD's choice of null-space vectors."""
    u, s, vt = np.linalg.svd(x)
    rank = int(np.sum(s > s[0] * 1e3 * np.finfo(x.dtype).eps))
    u1, v1 = u[:, :rank], vt[:rank].T
    w = g - u1 @ v1.T
    scale = max(1.0, float(np.abs(g).max()))
    for name, part in (("U1^T W", u1.T @ w), ("W V1", w @ v1)):
        worst = float(np.abs(part).max())
        assert worst <= rtol * scale, f"{what}: not a subgradient of the nuclear norm: |{name}| reaches {worst:.3e}"
    spectral = float(np.linalg.norm(w, 2))
    assert spectral <= 1 + rtol * scale, f"{what}: not a subgradient of the nuclear norm: ||W||_2 = {spectral:.6f} > 1"


# Gradients that are one subgradient among many, picked by the SVD's null-space vectors. cuSOLVER through CuPy and
# through torch pick different ones (the H200 run of norm_nuc_rank_one: ours U V^T = I, torch's the other sign of
# u2 v2^T, -0.6 at (0, 0)), so on CUDA the test checks ours against the definition instead of against torch's.
SUBGRADIENT = {"norm_nuc_rank_one": assert_nuclear_subgradient}


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
        if case.name in SUBGRADIENT:  # one scalar output: its upstream gradient gs[0] scales the subgradient
            SUBGRADIENT[case.name](host(x), host(x.grad) / gs[0], case.tol(dtype_name), what)
            continue
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


def test_the_subgradient_check_takes_either_null_space_sign_and_refuses_what_is_not_one():
    """The check that stands in for torch's answer on CUDA can fail: it passes the two subgradients that LAPACK and
    cuSOLVER return at the rank-one case, and refuses a gradient off the subdifferential."""
    x = np.array([[1.0, 2.0], [2.0, 4.0]])  # op_cases.RANK_ONE: singular values 5 and 0, u1 = v1 = (1, 2) / sqrt 5
    u1, u2 = np.array([1.0, 2.0]) / 5**0.5, np.array([2.0, -1.0]) / 5**0.5
    for sign in (1.0, -1.0):
        assert_nuclear_subgradient(x, np.outer(u1, u1) + sign * np.outer(u2, u2), 1e-10, "either sign")
    assert_nuclear_subgradient(x, np.outer(u1, u1) + 0.5 * np.outer(u2, u2), 1e-10, "inside the ball")
    with pytest.raises(AssertionError, match=r"\|\|W\|\|_2 = 2\.0"):
        assert_nuclear_subgradient(x, np.outer(u1, u1) + 2.0 * np.outer(u2, u2), 1e-10, "outside the ball")
    with pytest.raises(AssertionError, match="U1\\^T W"):
        assert_nuclear_subgradient(x, 2.0 * np.outer(u1, u1), 1e-10, "off the singular direction")


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
    if subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=300).returncode == 0:
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


# ------------------------------------------------------------------ training, decoding, files and bad input on CUDA
# The fake device's guarantees (tests/minitensor/devices/test_fake_device_training.py,
# tests/minitensor/devices/test_device_api.py), once more on CuPy: its own kernels (cuBLAS, CUB reductions) sum in other
# orders than NumPy, which the fake cannot show.
def _cupy_array(t) -> bool:
    return type(t._data).__module__.startswith("cupy")


@on_gpu
def test_same_seed_same_weights_and_dropout_masks_on_cuda(real_cuda):
    mt.manual_seed(7)
    cpu = mt.nn.init.xavier_uniform_(mt.zeros(5, 6))
    mt.manual_seed(7)
    gpu = mt.nn.init.xavier_uniform_(mt.zeros(5, 6, device="cuda"))
    assert _cupy_array(gpu)
    np.testing.assert_array_equal(host(gpu), host(cpu))
    x = np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32)
    mt.manual_seed(3)
    cpu = mt.nn.functional.dropout(mt.tensor(x), 0.3)
    mt.manual_seed(3)
    gpu = mt.nn.functional.dropout(mt.tensor(x, device="cuda"), 0.3)
    np.testing.assert_array_equal(host(gpu), host(cpu))


@on_gpu
def test_transformer_training_steps_on_cuda_equal_cpu(real_cuda):
    """Three float64 steps of the tiny Transformer (dropout, clipping, Adam, warmup) on CuPy equal the CPU's to
    PARITY_RTOL: losses, gradient norms and weights (the key biases within Adam's bound, as on the fake device)."""
    from tests.minitensor.devices.test_fake_device_training import _steps, assert_steps_equal

    assert_steps_equal(_steps("cpu"), _steps("cuda"), lambda a: type(a).__module__.startswith("cupy"))


@on_gpu
def test_decoding_on_cuda_equals_cpu(real_cuda):
    from tests.minitensor.devices.test_fake_device_training import _batch, _tiny_configs, assert_beams_equal
    from transformer_np.decode import greedy_decode
    from transformer_np.training.recipe import build_model

    model_cfg, _ = _tiny_configs()
    cpu_model = build_model(model_cfg, seed=4).double()
    gpu_model = build_model(model_cfg, seed=4).double().to("cuda")
    src, _ = _batch(B=3)
    for use_cache in (True, False):
        np.testing.assert_array_equal(
            greedy_decode(gpu_model, src, max_len=6, use_cache=use_cache),
            greedy_decode(cpu_model, src, max_len=6, use_cache=use_cache),
        )
        assert_beams_equal(cpu_model, gpu_model, src, use_cache)


@on_gpu
def test_a_checkpoint_written_on_cuda_loads_on_the_cpu_and_resumes_on_cuda(real_cuda, tmp_path):
    from tests.minitensor.devices.test_fake_device_training import _tiny_configs
    from transformer_np.training import load_checkpoint, train

    model_cfg, train_cfg = _tiny_configs()
    train(model_cfg, train_cfg, str(tmp_path / "whole"), progress=False, device="cuda")
    train(model_cfg, train_cfg.replace(steps=2), str(tmp_path / "cut"), progress=False, device="cuda")
    train(model_cfg, train_cfg, str(tmp_path / "cut"), resume=True, progress=False, device="cuda")
    whole, cut = load_checkpoint(str(tmp_path / "whole")), load_checkpoint(str(tmp_path / "cut"))
    for (name, a), (_, b) in zip(whole.model.state_dict().items(), cut.model.state_dict().items()):
        assert type(a._data) is np.ndarray, name
        # resumed on the GPU: bitwise the uninterrupted run
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


@on_gpu
def test_an_embedding_gradient_of_often_repeated_ids_on_cuda_is_deterministic(real_cuda):
    """The long preset's case: one id 965 times among 4000 others over 100 rows. On CuPy the scatter-add sums each
    row as a tree (fast/indexing.py, add_runs_in_tree): np.add.at's sums to round-off, bitwise the same twice."""
    import cupy

    from minitensor.ops.indexing import index_put
    from minitensor.testing import sum_roundoff_limit

    rng = np.random.default_rng(8)
    ids = np.concatenate([np.full(965, 3), rng.integers(0, 100, 4000)])
    values = rng.standard_normal((ids.size, 128)).astype(np.float32)
    exact = np.zeros((100, 128))
    np.add.at(exact, ids, values.astype(np.float64))
    got = [index_put((100, 128), cupy.asarray(ids), cupy.asarray(values), advanced=True).get() for _ in range(2)]
    np.testing.assert_array_equal(got[0], got[1], strict=True)
    for r in range(100):
        assert np.all(np.abs(got[0][r] - exact[r]) <= sum_roundoff_limit(values[ids == r], np.float32)), r


@on_gpu
def test_bad_input_on_cuda_names_the_devices(real_cuda, tmp_path):
    """Mixed devices, a device index out of range, a CUDA index past the device count and a checkpoint mapped onto
    a device that is not there: each one clear error, nothing moved."""
    x, y = mt.randn(3), mt.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cpu"):
        y + x
    xd = mt.randn(3, 4, device="cuda")
    with pytest.raises(IndexError) as cpu_error:
        mt.randn(3, 4)[mt.tensor([0, 3])]
    with pytest.raises(IndexError) as gpu_error:
        xd[mt.tensor([0, 3], device="cuda")]
    assert str(gpu_error.value) == str(cpu_error.value)
    count = mt.cuda.device_count()
    with pytest.raises(RuntimeError, match=f"CUDA device index {count} is out of range"):
        mt.zeros(2, device=f"cuda:{count}")
    path = tmp_path / "gpu.npz"
    mt.save({"w": mt.ones(2, device="cuda")}, path)
    assert type(mt.load(path, map_location="cpu")["w"]) is np.ndarray
    assert _cupy_array(mt.Tensor.wrap(mt.load(path)["w"]))
    with pytest.raises(RuntimeError, match=f"onto cuda:{count}.*out of range"):
        mt.load(path, map_location=f"cuda:{count}")


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
