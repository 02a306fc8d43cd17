"""The benchmark harness: its parts checked quickly, then the whole report on the 'tiny' config.

Fast tests: the FLOP count against torch's own FLOP counter, the alternation order and settle
pauses, the per-round ratio summary, real worker processes on 'tiny', the command line's help and
its refusals, and the wheel's package list. The slow test runs `python -m benchmarks run --quick
--configs tiny --threads 1,2` in a subprocess writing into a temporary folder and checks the
report's format: a section per thread count, the headline from separate processes, the GEMM-rate
columns, the interference line, the JSON keys and the PNGs. Timings themselves are never
asserted: they depend on the machine and its neighbours.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from benchmarks import attention, cli, flops, measure, run
from benchmarks import workloads as W
from benchmarks.timing import alternate, ratio_stats, round_medians
from tests.support import ROOT
from tests.support.cli_help import undocumented_flags

pytestmark = pytest.mark.full

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WORKLOADS = ("forward", "fwd_bwd", "train", "greedy_nocache", "greedy_cache", "beam_cache")


# ------------------------------------------------------------------------------------ FLOP count
@pytest.mark.parametrize("name", ["tiny", "copy-reverse"])
def test_forward_flops_match_torch_flop_counter(name):
    """benchmarks/flops.py's formula equals what torch counts in parity's model: forward, and 2x more in backward."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    cfg = W.get_config(name)
    batch = W.make_batch(cfg)
    model = W.copy_to_torch(W.build_numpy_model(cfg), cfg)
    model.eval()  # no dropout: the count is the same, the run deterministic
    args = [torch.from_numpy(a) for a in (batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)]
    with FlopCounterMode(display=False) as fwd:
        out = model(*args)
    with FlopCounterMode(display=False) as bwd:
        out.backward(torch.randn_like(out))
    assert fwd.get_total_flops() == flops.forward_flops(cfg)
    assert bwd.get_total_flops() == 2 * flops.forward_flops(cfg)
    assert flops.workload_flops(cfg, "train") == 3 * flops.forward_flops(cfg)
    assert flops.workload_flops(cfg, "greedy_cache") is None


def test_base_step_is_about_106_gflop_and_dominated_by_the_feed_forward():
    base = W.get_config("base")
    assert round(flops.workload_flops(base, "train") / 1e9) == 106
    assert flops.dominant_gemm(base) == (16 * 25, 512, 2048)


def test_copy_reverse_step_is_the_4_63_gflop_that_flops_docstring_states():
    assert round(flops.workload_flops(W.get_config("copy-reverse"), "train") / 1e7) == 463


# ------------------------------------------------------------------------------------ alternation
class FakeWorker:
    """Stands in for benchmarks.worker.Worker: records the order of requests, answers fixed samples."""

    def __init__(self, log, ms):
        self.log, self.ms = log, ms

    def request(self, req):
        self.log.append((req["side"], __import__("time").perf_counter()))
        return {"samples_ms": list(self.ms)}


def test_alternate_takes_turns_and_settles_only_between_processes():
    log = []
    a, b = FakeWorker(log, [1.0, 3.0, 2.0]), FakeWorker(log, [4.0])
    replies = alternate({"numpy": a, "torch": b}, {"op": "time"}, rounds=3, settle_s=0.05)
    assert [side for side, _ in log] == ["numpy", "torch"] * 3
    gaps = [t1 - t0 for (_, t0), (_, t1) in zip(log, log[1:])]
    assert min(gaps) >= 0.05
    assert round_medians(replies["numpy"]) == [2.0] * 3
    log.clear()
    same = FakeWorker(log, [1.0])  # in-process: one worker hosts both sides, nothing to settle
    alternate({"numpy": same, "torch": same}, {"op": "time"}, rounds=2, settle_s=10.0)
    assert [side for side, _ in log] == ["numpy", "torch"] * 2


def test_ratio_stats_summarize_per_round_ratios():
    st = ratio_stats([2.0, 4.0, 3.0, 10.0], [2.0, 2.0, 2.0, 2.0])
    assert st["per_round"] == [1.0, 2.0, 1.5, 5.0]
    assert st["median"] == 1.75 and st["min"] == 1.0 and st["max"] == 5.0 and st["rounds"] == 4
    assert st["q1"] <= st["median"] <= st["q3"]
    with pytest.raises(ValueError, match="equally long"):
        ratio_stats([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    "after, verdict", [([70.0, 71.0, 69.0], "INTERFERENCE"), ([35.5, 34.9, 35.2], "no interference")]
)
def test_interference_line_states_both_times_and_the_factor(after, verdict):
    from benchmarks.report import interference_markdown

    it = measure.interference_summary(
        {"interference": {"torch_alone_ms": [35.0, 36.0, 34.0], "torch_after_numpy_ms": after}}
    )
    assert it["differs"] == (verdict == "INTERFERENCE")
    line = interference_markdown({"configs": {"copy": {"interference": it}}})
    assert line.startswith("- Interference check, copy: ") and verdict in line
    assert "35.00 ms alone" in line and f"{sorted(after)[1]:.2f} ms right after a NumPy step" in line
    assert f"(x{it['factor']:.2f})" in line


def test_real_workers_time_tiny_each_in_its_own_process():
    """A numpy worker and the two torch workers (twin, nn.Transformer) on 'tiny': samples come back, the numpy
    process never loads torch, and the headline ratio is the one against the faster PyTorch side."""
    from benchmarks.worker import Worker

    settings = cli.resolve_settings(
        cli.build_parser().parse_args(
            ["run", "--quick", "--calls", "2", "--repeats", "3", "--budget", "0.5", "--settle", "0"]
        )
    )
    timed = {"numpy": Worker("numpy", 1), "torch": Worker("torch", 1), "torch-nn": Worker("torch-nn", 1)}
    try:
        m = measure.time_workload(timed, {"name": "tiny"}, "train", settings)
        rate = measure.gemm_rate(timed, (64, 64, 64), settings)
        beam = measure.time_workload(timed, {"name": "tiny"}, "beam_cache", settings)
    finally:
        for w in timed.values():
            w.close()
    for side in ("numpy", "torch"):
        assert m[side]["n"] == m["ratio_spread"]["rounds"] >= 3
        assert len(m[side]["all_samples_ms"]) == m[side]["n"] * m[side]["calls_per_round"]
        assert rate[side] > 0
    assert m["ratio"] == m["ratio_spread"]["median"] > 0
    fastest = min(("torch", "torch-nn"), key=lambda s: m[s]["median_ms"])
    assert m["torch_fastest"] == fastest and m["ratio_spread"] == m["ratio_by_side"][fastest]
    assert m["ratio_by_side"]["torch-nn"]["rounds"] == m["torch-nn"]["n"] >= 3
    # nn.Transformer has no incremental decoder: beam search is timed on the twin only
    assert "torch-nn" not in beam and beam["torch_fastest"] == "torch" and beam["ratio"] > 0


# ------------------------------------------------------------------------------------ command line
def test_every_flag_has_help_and_shows_its_default():
    from benchmarks import memory, ops, worker

    for parser in (cli.build_parser(), ops.build_parser(), memory.build_parser(), worker.build_parser()):
        assert undocumented_flags(parser) == []


def test_threads_takes_a_list():
    args = cli.build_parser().parse_args(["run", "--threads", "1,2"])
    assert cli.resolve_settings(args)["threads"] == [1, 2]
    assert cli.build_parser().parse_args(["run"]).threads == [2]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--threads", "0"], "--threads"),
        (["--threads", "1,1"], "--threads"),
        (["--threads", "two"], "--threads"),
        (["--configs", "bogus"], "--configs"),
        (["--repeats", "0"], "--repeats"),
        (["--budget", "-1"], "--budget"),
        (["--settle", "-0.1"], "--settle"),
        (["--scaling-lengths", "0", "8"], "--scaling-lengths"),
    ],
)
def test_bad_flags_are_refused_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        run.main(["run", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)


# ------------------------------------------------------------------------------------ packaging
def test_wheel_leaves_benchmarks_out(tmp_path):
    """`pip install .` must not put a top-level `benchmarks` package into site-packages."""
    # Built from a clean copy: a stale build/ folder in the checkout would leak old files into the wheel.
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "runs", "results", "__pycache__", ".*_cache"
        ),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            ".",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist() if "dist-info" not in name}
    assert {"minitensor", "transformer_np", "parity"} <= tops
    assert "benchmarks" not in tops and "tests" not in tops


# ------------------------------------------------------------------------------------ whole report
# The tests that read tiny_run's report share one xdist group, so that the report (over a minute) is made once, on one
# worker. Its scope is the whole run (pytest's "session"): the worker may run another file's tests between the readers,
# and a module-scoped fixture would then be made again.
ONE_REPORT = pytest.mark.xdist_group("tiny-benchmark-report")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cmd = [
        sys.executable,
        "-m",
        "benchmarks",
        "run",
        "--quick",
        "--configs",
        "tiny",
        "--threads",
        "1,2",
        "--out",
        str(out),
        "--repeats",
        "3",
        "--budget",
        "1",
        "--settle",
        "0.05",
        "--scaling-base",
        "tiny",
        "--scaling-lengths",
        "8",
        "16",
        "--scaling-dims",
        "16",
        "32",
        "--scaling-dims-len",
        "8",
        "--memory-steps",
        "1",
        "--ops-sizes",
        "small",
        "--hvp-configs",
        "tiny",
        "--skip",
        "attention",  # its own test below (test_attention_section_in_the_report)
    ]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"benchmark run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return out, proc.stdout


@ONE_REPORT
def test_json_is_well_formed(tiny_run):
    out, _ = tiny_run
    res = json.loads((out / "results.json").read_text())
    for key in ("command", "method", "settings", "threads", "elapsed_s"):
        assert key in res, f"results.json lacks {key!r}"
    assert res["method"] == "separate processes" and list(res["threads"]) == ["1", "2"]
    for n, section in res["threads"].items():
        m = section["machine"]
        for key in (
            "cpu_model",
            "logical_cores",
            "threads",
            "numpy",
            "numpy_blas",
            "numpy_blas_runtime",
            "env",
            "torch",
            "python",
        ):
            assert key in m, f"machine facts lack {key!r}"
        assert m["threads"] == int(n) and m["env"]["OPENBLAS_NUM_THREADS"] == n and m["torch_threads"] == int(n)
        assert section["gemm_reference"]["numpy"] > 0 and section["gemm_reference"]["torch"] > 0
        tiny = section["configs"]["tiny"]
        assert tiny["parity"]["ok"], f"eval logits of the two sides differ: {tiny['parity']}"
        assert tiny["parity_nn"]["ok"], f"nn.Transformer's eval logits differ: {tiny['parity_nn']}"
        it = tiny["interference"]
        assert it["factor"] > 0 and it["torch_alone_ms"]["n"] == it["torch_after_numpy_ms"]["n"] == 3
        for w in WORKLOADS:
            m = tiny["measurements"][w]
            for side in ("numpy", "torch"):
                st = m[side]
                assert st["n"] >= 1 and st["min_ms"] <= st["median_ms"] <= st["max_ms"]
                assert st["q1_ms"] <= st["median_ms"] <= st["q3_ms"]
                assert m["tokens_per_s"][side] > 0
            sp = m["ratio_spread"]
            assert sp["min"] <= sp["q1"] <= m["ratio"] == sp["median"] <= sp["q3"] <= sp["max"]
            assert sp["rounds"] == m["numpy"]["n"] == m["torch"]["n"]
            assert ("gemm_fraction" in m) == (w in ("forward", "fwd_bwd", "train"))
            assert ("torch-nn" in m) == (w in W.NN_WORKLOADS) and m["torch_fastest"] in m
            assert m["ratio_spread"] == m["ratio_by_side"][m["torch_fastest"]]
        assert 0 < tiny["measurements"]["train"]["gemm_fraction"]["numpy"] < 1
        assert tiny["cache_speedup"]["numpy"] > 0
        assert (
            set(tiny["phases"]["numpy"])
            == set(tiny["phases"]["torch"])
            == {"zero_grad", "forward+loss", "backward", "clip", "optimizer"}
        )
        assert tiny["profile_numpy"]["rows"] and tiny["profile_torch"]["rows"]
        mem = section["memory"]["tiny"]
        for side in ("numpy", "torch"):
            assert mem[side]["peak_kib"] >= mem[side]["baseline_kib"] > 0
        assert mem["ratio_peak"] > 0
        assert [p["seq_len"] for p in section["scaling"]["seq_len"]] == [8, 16]
        assert [p["d_model"] for p in section["scaling"]["d_model"]] == [16, 32]
        assert all("gemm_fraction" in p and "ratio_spread" in p for p in section["scaling"]["seq_len"])
        assert {r["op"] for r in section["ops"]} >= {
            "matmul",
            "linear",
            "softmax",
            "layer_norm",
            "cross_entropy",
            "attention (model's)",
        }
        assert all(r["size"] == "small" and r["ratio_fb"] > 0 and r["fwd_ok"] for r in section["ops"])
        assert len(section["targets"]) == 24  # 20, and per GPT config its training step and cached generation
        perop = section["perop"]["frameworks"]  # benchmarks/perop.py: the engine's cost per op, torch beside it
        assert all(perop[f][mode]["median_us"] > 0 for f in ("minitensor", "torch") for mode in ("recorded", "fwd_bwd"))
        hvp = section["hvp"]["tiny"]
        assert hvp["parity"]["ok"], f"H v of the two sides differ: {hvp['parity']}"
        assert hvp["parity"]["relu_branches"]["seen"] > 0  # the ReLU inputs were compared (and any flip aligned)
        for key in ("grad", "hvp", "hvp_functional", "hvp_fwd_rev", "hvp_retained"):
            assert hvp[key]["numpy"]["median_ms"] > 0 and hvp[key]["torch"]["median_ms"] > 0 and hvp[key]["ratio"] > 0
        for kind in ("tall", "wide"):
            jac = section["jacobians"][kind]
            for key in (f"jac_{kind}_fwd", f"jac_{kind}_rev"):
                assert all(jac["cost_in_gradients"][key][side] > 0 for side in ("numpy", "torch"))
        for key in ("hvp", "hvp_functional", "hvp_fwd_rev", "hvp_retained"):
            for side in ("numpy", "torch"):
                cost = hvp["cost_in_gradients"][key][side]
                assert cost == hvp[key][side]["median_ms"] / hvp["grad"][side]["median_ms"] > 0


@ONE_REPORT
def test_markdown_report_format(tiny_run):
    out, stdout = tiny_run
    md = (out / "results.md").read_text()
    assert "method: **separate processes**" in md
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections == ["## 1 thread", "## 2 threads"]
    for part in md.split("\n## ")[1:]:
        lines = part.splitlines()
        # The headline: the training step measured with a process per side, with the GEMM-rate columns.
        i = lines.index("### Training step, separate processes")
        head = lines[i + 2]
        for col in (
            "PyTorch twin ms",
            "nn.Transformer ms",
            "ratio against the faster PyTorch [IQR; min-max of per-round ratios]",
            "ratio vs twin",
            "ratio vs nn.Transformer",
            "minitensor % of GEMM rate",
            "PyTorch twin % of GEMM rate",
            "peak memory ratio",
        ):
            assert col in head, head
        assert lines[i + 4].startswith("| tiny | ")
        inter = [x for x in lines if x.startswith("- Interference check, tiny: ")]
        assert len(inter) == 1 and " ms alone and " in inter[0] and "right after a NumPy step (x" in inter[0]
        assert "#### tiny" in lines and "### Op microbenchmarks" in lines and "### Targets" in lines
        i = lines.index("### Hessian-vector product beside one gradient")
        head = next(x for x in lines[i:] if x.startswith("| config | workload |"))
        assert "minitensor cost in gradients" in head and "PyTorch cost in gradients" in head
        for label in (
            "one gradient (the unit)",
            "HVP, double backward",
            "HVP, autograd.functional.hvp",
            "HVP, forward over reverse: func.jvp(func.grad)",
        ):
            assert any(x.startswith(f"| tiny | {label} | ") for x in lines), label
        assert any(
            x.startswith("H v of the two sides, compared in one process") and "tiny: max rel" in x for x in lines
        )
        assert "### jacfwd and jacrev beside one gradient" in lines
        assert any(x.startswith("| tall (16 -> 256) | jacfwd | ") for x in lines)
        rows = [x for x in lines if x.startswith("| ")]
        for label in (
            "forward (eval, no_grad)",
            "forward + backward",
            "training step",
            "greedy decode, no cache",
            "greedy decode, KV cache",
            "beam search, KV cache",
        ):
            row = next((r for r in rows if r.startswith(f"| {label} |")), None)
            assert row is not None, f"no table row for {label!r}"
            assert row.count("|") == 12, row
    # Every table row has as many cells as its header.
    width, fenced = None, False
    for line in md.splitlines() + [""]:
        if line.startswith("```"):
            fenced = not fenced  # the profiler's own text table is quoted verbatim
            continue
        if fenced:
            continue
        if line.startswith("|"):
            if width is None:
                width = line.count("|")
            assert line.count("|") == width, f"ragged table row: {line}"
        else:
            width = None
    assert "## 2 threads" in stdout  # the report is printed too


@ONE_REPORT
def test_pngs_non_empty(tiny_run):
    out, _ = tiny_run
    for n in (1, 2):
        for name in ("ratios", "scaling_length", "scaling_dmodel", "ops"):
            p = out / f"{name}_t{n}.png"
            assert p.exists(), f"{p.name} not written"
            data = p.read_bytes()
            assert len(data) > 1000 and data.startswith(PNG_MAGIC), f"{p.name} is not a non-empty PNG"


# The sections a test of one other part of `run` leaves out (--skip): each has a test of its own, and together they
# cost a minute of the suite (perop, memory and scaling start processes of their own, hvp times second order).
BESIDE_THE_POINT = ["memory", "scaling", "ops", "profile", "decode", "hvp", "perop", "gpu"]


def test_in_process_mode_is_labelled(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "benchmarks",
        "run",
        "--in-process",
        "--quick",
        "--configs",
        "tiny",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
        "--repeats",
        "3",
        "--budget",
        "0.5",
        "--skip",
        *BESIDE_THE_POINT,
        "attention",
    ]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "results.md").read_text()
    assert "method: **in-process**" in md and "not the headline method" in md
    assert "### Training step, both frameworks in ONE process (in-process mode)" in md
    assert json.loads((tmp_path / "results.json").read_text())["method"] == "in-process"


def test_hvp_configs_default_to_those_run_and_the_table_format():
    """The HVP part follows --configs (copy-reverse and base among them; not base with --quick), and its table
    has a row per config and workload with each side's cost in gradients."""
    settings = lambda argv: cli.resolve_settings(cli.build_parser().parse_args(["run", *argv]))
    assert settings([])["hvp_configs"] == ["copy-reverse", "base"]
    assert settings(["--quick"])["hvp_configs"] == ["copy-reverse"]
    assert settings(["--configs", "tiny"])["hvp_configs"] == []
    assert settings(["--configs", "tiny", "--hvp-configs", "tiny"])["hvp_configs"] == ["tiny"]
    from benchmarks.report import hvp_markdown

    stat = lambda ms: {"median_ms": ms, "iqr_ms": 0.1}
    res = {
        key: {
            "numpy": stat(ms),
            "torch": stat(ms / 2),
            "ratio": 2.0,
            "ratio_spread": {"median": 2.0, "q1": 1.9, "q3": 2.1, "min": 1.8, "max": 2.2},
        }
        for key, ms in (("grad", 10.0), ("hvp", 30.0), ("hvp_functional", 40.0))
    }
    res["cost_in_gradients"] = {"hvp": {"numpy": 3.0, "torch": 3.0}, "hvp_functional": {"numpy": 4.0, "torch": 4.0}}
    lines = hvp_markdown({"copy-reverse": res}).splitlines()
    assert len(lines) == 2 + 3 and len({line.count("|") for line in lines}) == 1
    res["parity"] = {"max_rel": 2e-6, "ok": True, "relu_branches": {"aligned": 1, "seen": 1310720}}
    check = hvp_markdown({"copy-reverse": res}).splitlines()[-1]
    assert check.endswith("copy-reverse: max rel 2.00e-06 (ok; ReLU branches aligned: 1 of 1,310,720 inputs).")
    assert lines[3] == (
        "| copy-reverse | HVP, double backward | 30.00 (0.10) | 15.00 (0.10) | 2.00 [1.90-2.10; "
        "1.80-2.20] | 3.00 | 3.00 |"
    )


# ------------------------------------------------------------------------------------ Ctrl-C
def test_ctrl_c_is_one_line_exit_130_and_writes_nothing(tmp_path):
    """The real `python -m benchmarks run`, interrupted once its workers are timing: one line on stderr,
    exit 130, no output folder, and the workers stopped with it (the run returns within seconds)."""
    from tests.parity.test_cli import interrupt_after_ready

    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "benchmarks", "run", "--quick", "--configs", "tiny", "--threads", "1"]
    cmd += ["--skip", *cli.SKIPPABLE, "--budget", "1", "--settle", "0", "--out", str(out)]
    code, err = interrupt_after_ready(cmd, "[", out, wait_s=1.5)
    assert code == 130, err
    assert err == "python -m benchmarks run: interrupted\n"
    assert not out.exists()


def test_output_files_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """results.md, results.json and the PNGs are written atomically: a failure halfway through a PNG
    leaves the earlier files whole and no temporary behind."""
    from benchmarks import report

    def failing_savefig(self, f, **kwargs):
        f.write(b"\x89PNG half")
        raise KeyboardInterrupt

    import matplotlib.figure

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", failing_savefig)
    with pytest.raises(KeyboardInterrupt):
        report.plot_ratios({}, str(tmp_path / "ratios.png"), "title")
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------- attention memory/time
def test_attention_table_states_ratios_and_what_does_not_fit():
    """The section's table from a made-up result: the targets' ratios, and 'does not fit' where dense did not."""

    def point(peak, step):
        return {"fits": True, "peak_mib": peak, "step_s": step}

    big = {"fits": False, "error": "does not fit in 6 GiB"}
    rows = []
    for (att, ck), numpy_side, torch_side in [
        (("dense", False), big, point(800.0, 2.0)),
        (("tiled", False), point(100.0, 3.0), point(50.0, 1.0)),
        (("dense", True), big, point(400.0, 3.0)),
        (("tiled", True), point(60.0, 3.9), point(30.0, 1.3)),
    ]:
        rows.append({"seq_len": 4096, "attention": att, "checkpointed": ck, "numpy": numpy_side, "torch": torch_side})
    md = attention.markdown({"lengths": [4096], "steps": 2, "threads": 1, "memory_gib": 6.0, "rows": rows})
    assert "| 4096 | dense | does not fit in 6 GiB |" in md
    assert "| 4096 | - | 0.06 | - | 1.50 | 1.30 | 1.30 |" in md  # tiled/dense peak, then checkpointed/plain steps


def test_attention_section_in_the_report(tmp_path):
    """`run` with the attention section alone at T = 16: every point measured on both sides, table and PNG written."""
    cmd = [sys.executable, "-m", "benchmarks", "run", "--quick", "--configs", "tiny", "--threads", "1"]
    cmd += ["--skip", *BESIDE_THE_POINT, "--attention-lengths", "16"]
    cmd += ["--budget", "0.5", "--settle", "0", "--out", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = json.loads((tmp_path / "results.json").read_text())["threads"]["1"]["attention"]
    assert len(section["rows"]) == 4
    for row in section["rows"]:
        for side in ("numpy", "torch"):
            assert row[side]["fits"] and row[side]["peak_mib"] > 0 and row[side]["step_s"] > 0, row
    assert section["rows"][1]["torch"]["backend"] == "FLASH_ATTENTION"
    assert "### Attention memory and time" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "attention_t1.png").stat().st_size > 10_000


def test_a_gelu_variant_of_a_config_changes_the_activation_only():
    from benchmarks.workloads import get_config

    plain, gelu = get_config("tiny"), get_config("tiny+gelu")
    assert gelu.model.activation == "gelu" and gelu.model.replace(activation=plain.model.activation) == plain.model
    assert gelu.batch_size == plain.batch_size and gelu.name == "tiny+gelu"
    with pytest.raises(ValueError, match="unknown config variant 'relu6'"):
        get_config("tiny+relu6")
    with pytest.raises(ValueError, match="unknown config 'nope'"):
        get_config("nope+gelu")
