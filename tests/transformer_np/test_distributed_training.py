"""transformer_np's train() data-parallel over MPI (`mpiexec -n 2`), against one process, in float64.

The two ranks run tests/support/ddp_train_worker.py (20 Adam steps, dropout 0.1, global-norm clipping at 0.5, a
checkpoint every 5 steps); rank 0's checkpoint is compared with one process training in this test: * one process
computing both ranks' shards in turn with the ranks' dropout streams (DataParallel(2) without a
    communicator): the same masks, the same step; bitwise equal, since 2 and 1/2 are exact;
  * without dropout, plain one-process training on the full batch: equal within PARITY_RTOL (reordered sums), but
    for the key biases: their gradient is identically 0, so each side's is round-off of its own summation order,
    which Adam turns into steps of up to lr; each side must stay within Adam's step bound of its initial value, the
    exact trajectory (parity/report.py's drift rule).
Also: exact resume with the same N, resume with another N (the streams restart by the documented rule), every
rank's stream in the checkpoint, a killed rank, Ctrl-C, and the refusals of the command line.
Each launch is bounded by a timeout after which mpiexec's process group is killed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import minitensor as mt
from minitensor.nn.parallel import mpiexec_command, run_process_group, run_ranks
from minitensor.testing import PARITY_RTOL, assert_close
from parity.report import adam_step_bound, drift_limit
from parity.results import structurally_zero_grad
from tests.support import ROOT, runs_ranks
from tests.support.ddp_train_worker import configs, key_bias_record
from transformer_np.parallel import DataParallel
from transformer_np.training import train

ENV = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
TOL = PARITY_RTOL["float64"]
pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("mpi4py") is None,
        reason="needs the distributed extra: pip install -e '.[distributed]'",
    ),
]


def ranks(out: str, steps: int, dropout: float, *flags: str, nproc: int = 2) -> subprocess.CompletedProcess:
    argv = [os.path.join(ROOT, "tests", "support", "ddp_train_worker.py"), out, str(steps), str(dropout), *flags]
    return run_ranks(nproc, argv, timeout=240, env=ENV)


def model_state(out: str) -> dict:
    return mt.load(os.path.join(out, "checkpoint.npz"))["model"]


def one_process(out: str, steps: int, dropout: float, parallel=None, resume: bool = False):
    model_cfg, train_cfg = configs(steps, dropout)
    return train(model_cfg, train_cfg, out, resume=resume, progress=False, parallel=parallel, dtype="float64")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("ddp") / "run")
    done = ranks(out, 20, 0.1)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@runs_ranks
def test_two_ranks_equal_one_process_with_their_dropout_streams_bitwise(two_ranks, tmp_path, capsys):
    res = one_process(str(tmp_path / "one"), 20, 0.1, parallel=DataParallel(2))
    ours, ref = model_state(two_ranks), res.model.state_dict()
    assert ours.keys() == ref.keys() and ours["generator.weight"].dtype == np.float64
    for k in ref:
        assert np.array_equal(ours[k], ref[k]), k


def assert_trained_alike(ours: dict, ref: dict, ours_record: dict, ref_record: dict, steps: int) -> None:
    """Two trainings without dropout, of one global batch, equal to round-off; a key projection's bias (exact gradient
    0) moved by no more than Adam's bound on round-off gradients allows, on each side (its records: key_bias_record)."""
    _, train_cfg = configs(steps, 0.0)
    eps = float(np.finfo(np.float64).eps)
    assert 0 < max(ref_record["grad_maxes"]) < 1e-12 and 0 < max(ours_record["grad_maxes"]) < 1e-12  # round-off
    for k in ref:
        if not structurally_zero_grad(k):
            assert_close(ours[k], ref[k], TOL, what=k)
            continue
        init = ref_record["init"][k]
        for side, params, rec in (("ours", ours, ours_record), ("one process", ref, ref_record)):
            bound = adam_step_bound(rec["lrs"], rec["grad_maxes"], train_cfg.betas, train_cfg.eps)
            drift = float(np.abs(params[k] - init).max())
            limit = drift_limit(init, bound, len(rec["lrs"]), eps)
            assert drift <= limit, f"{k} ({side}): moved {drift:.3e} from init, Adam's bound {bound:.3e}"


def test_emulated_ranks_without_dropout_equal_one_process_on_the_full_batch(tmp_path, capsys):
    """DataParallel(2) without a communicator (this process computes both shards in turn, each loss weighted by the
    global token count) trains as one process on the full batch: the path `--nproc` takes, without MPI."""
    with key_bias_record({}) as one:
        ref = one_process(str(tmp_path / "one"), 6, 0.0).model.state_dict()
    with key_bias_record({}) as two:
        ours = one_process(str(tmp_path / "two"), 6, 0.0, parallel=DataParallel(2)).model.state_dict()
    assert_trained_alike(ours, ref, two, one, 6)


@runs_ranks
def test_without_dropout_two_ranks_equal_one_process_on_the_full_batch(tmp_path, capsys):
    record_path = str(tmp_path / "key_biases.json")
    done = ranks(str(tmp_path / "two"), 20, 0.0, "--key-bias-record", record_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with key_bias_record({}) as one:
        ref = one_process(str(tmp_path / "one"), 20, 0.0).model.state_dict()
    with open(record_path) as f:
        two = json.load(f)
    assert_trained_alike(model_state(str(tmp_path / "two")), ref, two, one, 20)


@runs_ranks
def test_dropout_streams_differ_per_rank_and_all_are_saved(two_ranks):
    state = mt.load(os.path.join(two_ranks, "checkpoint.npz"))
    assert state["data"]["world_size"] == 2 and len(state["rank_rngs"]) == 2
    assert state["rank_rngs"][0] == state["rng"] and state["rank_rngs"][1] != state["rng"]
    assert sorted(os.listdir(two_ranks)) == ["checkpoint.npz", "history.json"]  # rank 0 alone wrote


@runs_ranks
def test_resume_with_the_same_ranks_is_exact(two_ranks, tmp_path):
    out = str(tmp_path / "resumed")
    for steps, flags in ((10, ()), (20, ("--resume",))):
        done = ranks(out, steps, 0.1, *flags)
        assert done.returncode == 0, done.stderr[-3000:]
    straight, resumed = model_state(two_ranks), model_state(out)
    assert all(np.array_equal(straight[k], resumed[k]) for k in straight)


@runs_ranks
def test_resume_with_other_ranks_restarts_the_streams_by_the_rule(tmp_path, capsys):
    out = str(tmp_path / "run")
    assert ranks(out, 10, 0.1).returncode == 0
    saved = mt.load(os.path.join(out, "checkpoint.npz"))["rank_rngs"]
    res = one_process(out, 20, 0.1, parallel=DataParallel(4), resume=True)
    assert "the dropout streams restart from its rank 0 stream" in capsys.readouterr().out
    state = mt.load(os.path.join(out, "checkpoint.npz"))
    assert res.step == 20 and state["data"]["world_size"] == 4 and len(state["rank_rngs"]) == 4
    assert state["rank_rngs"][0] != saved[0]  # rank 0 went on from its saved stream


@runs_ranks
def test_a_killed_rank_stops_the_others_and_the_last_checkpoint_stays(tmp_path):
    out = str(tmp_path / "run")
    t0 = time.perf_counter()
    done = ranks(out, 20, 0.1, "--kill-rank-1-at-step", "7")
    assert done.returncode != 0 and time.perf_counter() - t0 < 60
    assert "BAD TERMINATION" in done.stdout + done.stderr  # hydra's report naming the dead rank's signal
    assert int(mt.load(os.path.join(out, "checkpoint.npz"))["step"]) == 5


@runs_ranks
def test_ctrl_c_stops_every_rank_after_one_step_with_a_complete_checkpoint(tmp_path):
    out = str(tmp_path / "run")
    argv = [os.path.join(ROOT, "tests", "support", "ddp_train_worker.py"), out, "100000", "0.1"]
    proc = subprocess.Popen(
        mpiexec_command(2, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(out, "checkpoint.npz")) and time.time() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # mpiexec forwards it to every rank
        text, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert "interrupted: checkpoint of step" in text
    state = mt.load(os.path.join(out, "checkpoint.npz"))
    assert len(state["rank_rngs"]) == 2 and int(state["step"]) > 0
    assert mt.load(os.path.join(out, "checkpoint.npz"))["data"]["world_size"] == 2


@runs_ranks
@pytest.mark.parametrize("how", [(), ("--as-another-error",)], ids=["KeyboardInterrupt", "raised-as-another-error"])
def test_a_callback_stopping_one_rank_stops_all_after_the_same_step(tmp_path, how):
    out = str(tmp_path / "run")
    done = ranks(out, 20, 0.1, "--stop-rank-1-at-step", "7", *how)
    assert done.returncode != 0 and "interrupted: checkpoint of step 7" in done.stdout, done.stderr[-2000:]
    state = mt.load(os.path.join(out, "checkpoint.npz"))
    assert int(state["step"]) == 7 and len(state["rank_rngs"]) == 2


@runs_ranks
def test_an_error_on_one_rank_stops_every_rank_instead_of_leaving_them_waiting(tmp_path):
    out = str(tmp_path / "run")
    done = ranks(out, 20, 0.1, "--fail-rank-1-at-step", "7")  # before: rank 0 waited for rank 1 until the timeout
    assert done.returncode != 0
    assert "ValueError: rank 1's callback failed at step 7" in done.stderr, done.stderr[-2000:]
    assert (
        "OtherRankFailed: data parallelism: rank 1 failed after step 7, so every rank stops: ValueError: rank 1's "
        "callback failed at step 7" in done.stderr
    ), done.stderr[-2000:]
    assert int(mt.load(os.path.join(out, "checkpoint.npz"))["step"]) == 5  # the last save (every 5 steps) stays


# ---- the command line's refusals: one line, exit 2, nothing written ---------------------------------------------

TINY = (
    "--d-model 16 --num-heads 2 --num-encoder-layers 1 --num-decoder-layers 1 --d-ff 32 --steps 4 "
    "--batch-size 8 --train-size 40 --eval-size 8 --no-progress"
).split()


def cli(*args: str, prefix=()) -> subprocess.CompletedProcess:
    cmd = [*prefix, sys.executable, "-m", "transformer_np", "train", *TINY, *args]
    return run_process_group(cmd, timeout=120, env=ENV)  # --nproc starts mpiexec: the group is killed on timeout


def assert_refused(done, message: str, out: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr
    assert not os.path.exists(out)


@pytest.mark.parametrize(
    "nproc, message",
    [("16", "fewer than the 16 ranks"), ("3", "does not divide into 3 equal shards")],
)
def test_nproc_that_the_global_batch_cannot_share_is_refused(tmp_path, nproc, message):
    out = str(tmp_path / "run")
    assert_refused(cli("--out", out, "--nproc", nproc), message, out)


@runs_ranks
def test_ranks_started_with_different_configs_are_refused(tmp_path):
    out = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "transformer_np", "train", *TINY, "--out", out]
    mpmd = [*mpiexec_command(1, [])[:3], *cmd[0:], "--lr", "1.0", ":", "-n", "1", *cmd, "--lr", "0.5"]
    done = run_process_group(mpmd, timeout=120, env=ENV)
    assert_refused(done, "rank 1 was started with another configuration: lr: rank 0 1.0 vs rank 1 0.5", out)


@runs_ranks
def test_a_resume_with_another_global_batch_is_refused(tmp_path):
    out = str(tmp_path / "run")
    assert cli("--out", out, "--nproc", "2").returncode == 0
    done = cli("--out", out, "--resume", "--batch-size", "4", "--nproc", "2")
    assert done.returncode == 2 and "batch_size: checkpoint 8 vs requested 4" in done.stderr, done.stderr


def test_nproc_without_mpi_is_one_line_before_any_work(tmp_path):
    out = str(tmp_path / "run")
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"  # as if the distributed extra were not installed
        "from transformer_np.cli import main; sys.exit(main(sys.argv[1:]))\n"
    )
    cmd = [sys.executable, "-c", code, "train", *TINY, "--out", out, "--nproc", "2"]
    done = run_process_group(cmd, timeout=120, env=ENV)
    assert_refused(done, "mpi4py is not installed: install the distributed extra", out)


@pytest.mark.parametrize("rank", [0, 1])
def test_the_command_line_reports_another_ranks_failure_on_rank_0_in_one_line(rank, tmp_path, monkeypatch, capsys):
    """What `train --nproc N` does on a rank that gets OtherRankFailed: rank 0 says it in one line (exit 1; the
    failing rank's own error is on its stderr), any other rank exits 2 without a word, as for a shared error."""
    from transformer_np import cli, commands
    from transformer_np.parallel import OtherRankFailed

    class Rank:
        writes, world_size, failed = rank == 0, 2, False

    def failed(*args):
        raise OtherRankFailed("data parallelism: rank 1 failed after step 7, so every rank stops: ValueError: x")

    monkeypatch.setattr(commands, "_data_parallel", lambda args: Rank())
    monkeypatch.setattr(commands, "_train_and_report", failed)
    assert cli.main(["train", "--task", "copy-reverse", "--out", str(tmp_path / "run")]) == (1 if rank == 0 else 2)
    err = capsys.readouterr().err
    expected = "python -m transformer_np train: error: data parallelism: rank 1 failed after step 7, so every rank "
    assert err == (expected + "stops: ValueError: x\n" if rank == 0 else "")


@pytest.mark.parametrize("rank", [0, 1])
def test_the_command_line_ends_a_rank_that_failed_alone_in_one_line_without_finalizing(
    rank, tmp_path, monkeypatch, capsys
):
    """A rank whose step raised (a MemoryError) and told the others: rank 0 says its error in one line (exit 1),
    another rank's error is on rank 0's line (it exits 2 quietly); either ends at once (os._exit: MPI_Finalize would
    wait on the collectives the failure abandoned), never with a traceback, but only once every rank's report is out
    (finish: mpiexec kills the other ranks when one exits with an error)."""
    from transformer_np import cli, commands

    events = []

    class Rank:
        writes, world_size, failed = rank == 0, 2, True

        def finish(self):
            events.append(("finish", capsys.readouterr().err))

    def failed(*args):
        raise MemoryError("the optimizer step ran out of memory")

    def exit_now(code):
        events.append(("exit", code))
        raise SystemExit(code)

    monkeypatch.setattr(commands, "_data_parallel", lambda args: Rank())
    monkeypatch.setattr(commands, "_train_and_report", failed)
    monkeypatch.setattr(commands.os, "_exit", exit_now)
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "--task", "copy-reverse", "--out", str(tmp_path / "run")])
    expected = "python -m transformer_np train: error: MemoryError: the optimizer step ran out of memory\n"
    assert events == [("finish", expected if rank == 0 else ""), ("exit", 1 if rank == 0 else 2)]
    assert e.value.code == (1 if rank == 0 else 2) and capsys.readouterr().err == ""


# ---- no rank waits for ever on one that failed ---------------------------------------------------------------


def _stop_times(done) -> tuple[float, float]:
    """(the fault's time, the last rank's exit) from the worker's FAULT and EXIT lines."""
    fault = [float(t) for t in re.findall(r"FAULT ([\d.]+)", done.stdout)]
    exits = [float(t) for t in re.findall(r"EXIT \d+ ([\d.]+) ", done.stdout)]
    assert len(fault) == 1 and len(exits) == 2, done.stdout[-2000:] + done.stderr[-2000:]
    return fault[0], max(exits)


@runs_ranks
@pytest.mark.parametrize(
    "fault, words",
    [
        (("--memory-error-rank-1-in-forward-at-step", "4"), "MemoryError: rank 1's forward ran out of memory"),
        (("--memory-error-rank-1-in-backward-at-step", "4"), "MemoryError: rank 1's backward ran out of memory"),
        (("--memory-error-rank-1-in-optimizer-step-at-step", "4"), "MemoryError: rank 1's optimizer step ran out"),
        (("--unused-rank-1-from-step", "4"), "generator.bias"),
        (("--memory-error-rank-1-in-forward-at-step", "4", "--rank-0-behind-at-step", "4", "1.0"), "forward ran out"),
    ],
    ids=["in-the-forward", "in-the-backward", "in-the-optimizer-step", "a-parameter-unused", "while-rank-0-computes"],
)
def test_a_fault_inside_one_ranks_step_stops_every_rank_within_seconds(tmp_path, fault, words):
    """Before: the other rank waited in the gradients' all-reduce (or the loss's) for ever. And rank 0, still
    computing when the failing rank ended, was killed by mpiexec before it heard of the failure: no line said it."""
    out = str(tmp_path / "run")
    done = ranks(out, 20, 0.0, *fault)
    fault_at, last_exit = _stop_times(done)
    assert last_exit - fault_at < 10, f"every rank stopped {last_exit - fault_at:.1f} s after the fault"
    rank0 = re.search(r"EXIT 0 [\d.]+ (.*?)(?=EXIT \d+ |FAULT |\n|$)", done.stdout).group(1)
    assert "OtherRankFailed: data parallelism: rank 1 failed in step 4, so every rank stops" in rank0, rank0
    assert words in rank0, rank0


@runs_ranks
def test_a_world_size_that_disagrees_with_nproc_is_one_line_and_2(tmp_path):
    out = str(tmp_path / "run")
    done = cli("--out", out, "--nproc", "4", prefix=mpiexec_command(2, [])[:3])
    assert_refused(done, "--nproc 4 under mpiexec with 2 ranks", out)
