"""What tests/transformer_np/test_distributed_training.py runs on every rank under `mpiexec -n N`: transformer_np's
train() in float64, data-parallel over MPI. Rank 0 writes the run folder (checkpoint.npz holds the parameters compared).

    python tests/support/ddp_train_worker.py OUT STEPS DROPOUT [--resume] [--kill-rank-1-at-step K]
    [--stop-rank-1-at-step K]

--stop-rank-1-at-step K: rank 1's callback raises KeyboardInterrupt after step K (train()'s way to stop a run);
every rank must stop after that same step, with a complete checkpoint; the ranks exit with status 130. With
--as-another-error the interrupt comes as Python raises one in a class's __set_name__: a RuntimeError from it.
--fail-rank-1-at-step K: rank 1's callback raises ValueError after step K: every rank must raise (that one its own
error, the others OtherRankFailed) instead of waiting for it.
--memory-error-rank-1-in-{forward,backward,optimizer-step}-at-step K: rank 1 raises MemoryError there in step K
(an error inside a step): every rank must stop within seconds, rank 0 with OtherRankFailed naming it.
--unused-rank-1-from-step K: from step K rank 1's forward leaves the generator's bias out (a parameter it does not
use): every rank stops the same way. --rank-0-behind-at-step K S: rank 0 starts step K S seconds late (still
computing when rank 1 fails).
Each rank prints `EXIT <rank> <time.time()>` as it leaves, and the failing rank `FAULT <time.time()>`.
--key-bias-record PATH: rank 0 writes, as JSON, each step's lr and the largest |gradient| of the key biases (their
gradient is identically 0, so what is computed is round-off: the test judges them by Adam's step bound).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time

import numpy as np

from transformer_np.parallel import DataParallel
from transformer_np.training import default_configs, loop, train

TINY_MODEL = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
TINY_TRAIN = dict(
    batch_size=8, train_size=40, eval_size=8, eval_every=0, checkpoint_every=5, schedule="constant", lr=3e-3,
    clip_grad_norm=0.5,
)  # fmt: skip


def configs(steps: int, dropout: float):
    model_cfg, train_cfg = default_configs("copy-reverse")
    return model_cfg.replace(dropout=dropout, **TINY_MODEL), train_cfg.replace(steps=steps, **TINY_TRAIN)


def is_key_bias(name: str) -> bool:
    """parity.results.structurally_zero_grad's rule (a key projection's bias, whose exact gradient is 0), written here
    because importing parity loads torch into every MPI rank."""
    return name.endswith("W_k.bias")


@contextlib.contextmanager
def key_bias_record(record: dict):
    """While open, every training step of train() appends to record["lrs"] the lr it used and to
    record["grad_maxes"] the largest |entry| of the key biases' gradient (as Adam saw it: averaged over the ranks
    and clipped), and record["init"] holds the key biases before the first step."""
    step = loop.train_step
    record.update(lrs=[], grad_maxes=[], init={})

    def recorded(model, optimizer, *args, **kwargs):
        keys = [(n, p) for n, p in model.named_parameters() if is_key_bias(n)]
        if not record["lrs"]:
            record["init"] = {n: p.detach().numpy().copy() for n, p in keys}
        record["lrs"].append(float(optimizer.param_groups[0]["lr"]))
        out = step(model, optimizer, *args, **kwargs)
        record["grad_maxes"].append(max(float(np.abs(p.grad.numpy()).max()) for _, p in keys))
        return out

    loop.train_step = recorded
    try:
        yield record
    finally:
        loop.train_step = step


@contextlib.contextmanager
def failing_step(k: int, where: str):
    """train()'s step K raises MemoryError on this rank `where`: in its forward (before any collective of the step),
    in its backward (a gradient hook, while the buckets' all-reduce runs) or in its optimizer step (after it)."""
    step, calls = loop.train_step, [0]

    def no_memory(*args, **kwargs):
        print(f"FAULT {time.time()}", flush=True)
        raise MemoryError(f"rank 1's {where} ran out of memory")

    def failing(model, optimizer, *args, **kwargs):
        calls[0] += 1
        if calls[0] == k:
            inner = model.module if hasattr(model, "module") else model
            if where == "forward":
                inner.forward = no_memory
            elif where == "backward":
                inner.generator.weight.register_hook(no_memory)
            else:
                optimizer.step = no_memory
        return step(model, optimizer, *args, **kwargs)

    loop.train_step = failing
    try:
        yield
    finally:
        loop.train_step = step


@contextlib.contextmanager
def behind_at_step(k: int, seconds: float):
    """train()'s step K starts `seconds` late on this rank: still computing when another rank fails."""
    step, calls = loop.train_step, [0]

    def late(model, optimizer, *args, **kwargs):
        calls[0] += 1
        if calls[0] == k:
            time.sleep(seconds)
        return step(model, optimizer, *args, **kwargs)

    loop.train_step = late
    try:
        yield
    finally:
        loop.train_step = step


@contextlib.contextmanager
def unused_generator_bias(k: int):
    """From train()'s step K, the model's output layer runs without its bias on this rank: a parameter unused."""
    step, calls = loop.train_step, [0]

    def skipping(model, optimizer, *args, **kwargs):
        calls[0] += 1
        if calls[0] == k:
            gen = model.module.generator if hasattr(model, "module") else model.generator
            gen.forward = lambda x: x @ gen.weight.transpose(-2, -1)
            print(f"FAULT {time.time()}", flush=True)
        return step(model, optimizer, *args, **kwargs)

    loop.train_step = skipping
    try:
        yield
    finally:
        loop.train_step = step


class InterruptedWhileNamed:
    """A class attribute whose __set_name__ gets the Ctrl-C: Python 3.11 raises it as RuntimeError from it (as
    tests/support/cli_help.py's lazy_import_interrupted does; this file runs as a script under mpiexec, outside the
    package)."""

    def __set_name__(self, owner, name):
        raise KeyboardInterrupt


def main() -> None:
    out, steps, dropout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    from mpi4py import MPI  # here, not at the top: the test file imports `configs` without needing MPI

    comm = MPI.COMM_WORLD
    callback = None
    if "--kill-rank-1-at-step" in sys.argv:  # a rank that dies mid-run: SIGKILL, no goodbye
        k = int(sys.argv[sys.argv.index("--kill-rank-1-at-step") + 1])

        def callback(step, record):
            if step == k and comm.Get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)

    if "--stop-rank-1-at-step" in sys.argv:
        k = int(sys.argv[sys.argv.index("--stop-rank-1-at-step") + 1])

        def callback(step, record):
            if step == k and comm.Get_rank() == 1:
                if "--as-another-error" in sys.argv:  # as a Ctrl-C in a lazy import's __set_name__: a RuntimeError

                    class Imported:
                        field = InterruptedWhileNamed()

                raise KeyboardInterrupt

    if "--fail-rank-1-at-step" in sys.argv:  # an error on one rank alone (a callback's; a checkpoint write's)
        k = int(sys.argv[sys.argv.index("--fail-rank-1-at-step") + 1])

        def callback(step, record):
            if step == k and comm.Get_rank() == 1:
                raise ValueError(f"rank 1's callback failed at step {step}")

    faults = contextlib.ExitStack()
    for where in ("forward", "backward", "optimizer step"):
        flag = f"--memory-error-rank-1-in-{where.replace(' ', '-')}-at-step"
        if flag in sys.argv and comm.Get_rank() == 1:
            faults.enter_context(failing_step(int(sys.argv[sys.argv.index(flag) + 1]), where))
    if "--rank-0-behind-at-step" in sys.argv and comm.Get_rank() == 0:
        i = sys.argv.index("--rank-0-behind-at-step")
        faults.enter_context(behind_at_step(int(sys.argv[i + 1]), float(sys.argv[i + 2])))
    if "--unused-rank-1-from-step" in sys.argv and comm.Get_rank() == 1:
        faults.enter_context(unused_generator_bias(int(sys.argv[sys.argv.index("--unused-rank-1-from-step") + 1])))
    model_cfg, train_cfg = configs(steps, dropout)
    record_path = sys.argv[sys.argv.index("--key-bias-record") + 1] if "--key-bias-record" in sys.argv else None
    record = {}
    parallel = DataParallel(comm=comm)
    try:
        with key_bias_record(record) if record_path else contextlib.nullcontext():
            train(
                model_cfg, train_cfg, out, resume="--resume" in sys.argv, progress=False, callback=callback,
                parallel=parallel, dtype="float64",
            )  # fmt: skip
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:
        if not any(f.startswith(("--memory-error-rank-1-", "--unused-rank-1-")) for f in sys.argv):
            raise
        print(f"EXIT {comm.Get_rank()} {time.time()} {type(e).__name__}: {e}", flush=True)
        parallel.finish()  # as the command line ends: every rank's line out before any exits, then at once (the
        os._exit(1)  # abandoned collectives would hold MPI_Finalize)
    if record_path and comm.Get_rank() == 0:
        with open(record_path, "w") as f:
            json.dump({"lrs": record["lrs"], "grad_maxes": record["grad_maxes"]}, f)


if __name__ == "__main__":
    main()
