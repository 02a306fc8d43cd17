"""The training loop: `train()` (checkpoints, history, evaluation, exact resume, Ctrl-C) and the bare `fit()`.

- `train(model_cfg, train_cfg, out_dir, resume=False, progress=True, callback=None)`: the paper's
  recipe (training/recipe.py) on a task from `transformer_np.data.TASKS`, one `train_step`
  (training/step.py) at a time, with progress (loss, lr, tokens/s; transformer_np/progress.py), held-out
  evaluation (training/evaluation.py) and checkpoints (training/checkpoint.py, history.py). A folder
  that holds a run is refused unless resume=True or overwrite=True (training/checks.py). Ctrl-C lets the
  step in progress finish, saves a checkpoint and re-raises (training/interrupt.py). Resuming a run
  already at its step count changes nothing (TrainResult.nothing_to_do).
- `fit(...)`: a bare loop for experiments: no checkpoints, history file or evaluation.
- `Run`: one call's state: model, optimizer, scheduler, data position, history and the time spent.

Why resume is exact: the data order of epoch e is a permutation seeded by (seed, e) only, so
(epoch, batch index) fully determines the next batch; dropout draws from the one minitensor
generator, whose state is saved; Adam's moments and step counts and the scheduler's step are
saved. Nothing else carries state across steps.

Data parallelism (`parallel=`, transformer_np/parallel.py; docs/distributed.md): every rank runs this loop on the
same global batches, backpropagates its shard and gets the averaged gradient, so every rank takes the same step.
Rank 0 alone evaluates, prints and writes; a save gathers every rank's dropout stream into the checkpoint; a
Ctrl-C seen by any rank stops all of them after the same step, with a complete checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass

import numpy as np

import minitensor as mt
from minitensor.nn.parallel import DistributedDataParallel, OtherRankFailed
from minitensor.random import get_rng_state

from ..cliutil import interrupts_as_such
from ..config import ModelConfig, TrainConfig
from ..data import PAD_ID, Task, check_lengths, iterate_forever
from ..parallel import shard_rows
from ..progress import progress as progress_bar
from .checkpoint import (
    CHECKPOINT_NAME,
    kept_checkpoint,
    nonfinite_update_error,
    read_checkpoint,
    restore_state,
    save_checkpoint,
)
from .checks import check_run
from .evaluation import evaluate
from .history import HISTORY_NAME, PER_STEP_KEYS, history_at, new_history, write_history
from .interrupt import InterruptGuard
from .recipe import build_model, build_optimizer, build_scheduler, layer_groups
from .step import NonFiniteError, train_step


@dataclass
class TrainResult:
    model: object
    task: Task
    history: dict
    metrics: dict  # final held-out metrics (evaluate); with nothing to do, the run's last ones (or {})
    out_dir: str
    step: int
    wall_time: float  # seconds this call spent (training, evaluations, checkpoints)
    start_step: int = 0  # the step this call started from (the checkpoint's with resume)
    total_wall_time: float = 0.0  # seconds over every call that worked on this run (history's wall_time)
    runs: int = 1  # how many calls worked on this run (history's segments)
    nothing_to_do: bool = False  # resume found the run already at (or past) train_cfg.steps: nothing written


class Run:
    """One call of train(): the model, optimizer, scheduler, data position (epoch, batch index),
    history and this call's time, and the steps train() takes on them.

    Outside a step (and a save) they all describe the same completed step, so a checkpoint may be
    saved there at any moment.
    """

    def __init__(
        self, model_cfg: ModelConfig, train_cfg: TrainConfig, task: Task, out_dir: str, allow_nonfinite,
        parallel=None, dtype=None, device=None,
    ):  # fmt: skip
        self.model_cfg, self.train_cfg, self.task, self.out_dir = model_cfg, train_cfg, task, out_dir
        self.allow_nonfinite, self.parallel = allow_nonfinite, parallel
        self.writes = parallel is None or parallel.writes  # rank 0 alone writes files and prints
        self.model = build_model(model_cfg, train_cfg.seed)
        if dtype is not None:  # float64 for the equality tests; the optimizer is built on the converted model
            self.model.to(dtype=dtype)  # by keyword: Module.to reads a bare string as a device
        if device is not None:  # "cuda": the model moves before the optimizer and DDP see its parameters, as in torch
            self.model.to(device=device)
        self.model.train()
        self.train_model = self.model  # what the step's forward goes through: DDP's wrapper under MPI (start_parallel)
        self.optimizer = build_optimizer(self.model, train_cfg)
        self.scheduler = build_scheduler(self.optimizer, model_cfg, train_cfg)
        self.groups = layer_groups(self.model)
        self.params = [p for ps in self.groups.values() for p in ps]
        self.history = new_history(self.groups)
        self.step, self.epoch, self.batch_index = 0, 0, 0
        self.saved_step = None  # the step of the checkpoint on disk (None: none yet)
        self.nonfinite_steps = 0  # steps with a non-finite loss or gradient norm (allow_nonfinite)

    def restore(self) -> None:
        """Continue from out_dir's checkpoint and the history beside it (cut back to the checkpoint's step)."""
        self.step, self.epoch, self.batch_index = restore_state(
            self.out_dir, self.model, self.optimizer, self.scheduler
        )
        self.saved_step = self.step
        self.history = history_at(self.out_dir, self.step, self.groups) or self.history
        if self.parallel is not None:
            state, _, _ = read_checkpoint(self.out_dir)
            own = self.parallel.start_streams(get_rng_state(), state.get("rank_rngs"))
            if not own and self.writes:
                saved = state["data"].get("world_size", 1)
                print(
                    f"resume: the checkpoint was saved by {saved} rank(s), this run has {self.parallel.world_size}: "
                    "the dropout streams restart from its rank 0 stream, rank r's advanced r jumps "
                    "(docs/distributed.md)"
                )

    def start_parallel(self) -> None:
        """Fresh run: each rank's dropout stream from the one-process stream (rank r: r jumps ahead); under MPI,
        the DDP wrapper that averages the gradients (it also checks that every rank built the same model)."""
        if self.parallel is None:
            return
        if not self.parallel.streams:
            self.parallel.start_streams(get_rng_state())
        if self.parallel.comm is not None:
            self.train_model = DistributedDataParallel(self.model, self.parallel.comm)

    def finished(self) -> TrainResult | None:
        """The result of a resumed run already at (or past) the requested step with its final evaluation
        recorded: done as asked, nothing to write. None otherwise (without that evaluation, a Ctrl-C
        during it, the run goes on to evaluate and save)."""
        evals = [e for e in self.history["eval"] if e["step"] == self.step]
        if not (self.step > self.train_cfg.steps or (self.step == self.train_cfg.steps and evals)):
            return None
        segments = self.history.get("segments", [])
        return TrainResult(
            self.model, self.task, self.history, dict(evals[-1]) if evals else {}, self.out_dir, self.step, 0.0,
            self.step, self.history.get("wall_time", 0.0), len(segments), nothing_to_do=True,
        )  # fmt: skip

    def begin(self) -> None:
        """Start this call's share of the run: steps and seconds, updated at each save (so an interrupted or
        diverged call's time reaches history.json too); history's wall_time is the sum over every call."""
        self.start_step, self.t_start = self.step, time.perf_counter()
        self.segment = {"start_step": self.step, "end_step": self.step, "wall_time": 0.0, "end": "running"}
        self.history.setdefault("segments", []).append(self.segment)
        self.history.setdefault("wall_time", 0.0)

    def record_time(self, end: str) -> None:
        spent = time.perf_counter() - self.t_start
        self.history["wall_time"] += spent - self.segment["wall_time"]
        self.segment.update(end_step=self.step, wall_time=spent, end=end)

    def train_one_step(self, batches) -> dict:
        """One optimizer step on the next batch, recorded in the history; returns the step's record."""
        t0 = time.perf_counter()
        epoch, index, (src, tgt) = next(batches)
        lr = self.optimizer.param_groups[0]["lr"]
        try:
            loss, total, sq, labels = train_step(
                self.train_model, self.optimizer, self.scheduler, self.params, src, tgt, self.train_cfg, self.groups,
                self.allow_nonfinite, self.step + 1, self.parallel,
            )  # fmt: skip
        except NonFiniteError as e:
            self._record_divergence(e, lr)
            raise
        self.nonfinite_steps += not (math.isfinite(loss) and math.isfinite(total))
        self.step += 1
        self.epoch, self.batch_index = epoch, index + 1  # the next batch's position
        n_tokens = int(np.count_nonzero(src != PAD_ID) + np.count_nonzero(labels != PAD_ID))
        dt = time.perf_counter() - t0
        record = {
            "step": self.step,
            "loss": loss,
            "lr": float(lr),
            "grad_norm": total,
            "tokens_per_s": n_tokens / dt if dt > 0 else 0.0,
        }
        self._append(record, sq)
        return record

    def _append(self, record: dict, sq: dict) -> None:
        for k in PER_STEP_KEYS:
            self.history[k].append(record[k])
        for k, v in sq.items():
            self.history["layer_grad_norms"][k].append(math.sqrt(v))

    def _record_divergence(self, e: NonFiniteError, lr) -> None:
        """The step is not applied; the history records it (what happened), the checkpoint stays."""
        e.detail += f"; {kept_checkpoint(self.saved_step)}, {HISTORY_NAME} records the steps up to it"
        e.args = (e.message("allow_nonfinite=True"),)
        record = dict(zip(PER_STEP_KEYS, (self.step + 1, e.loss, float(lr), e.grad_norm, 0.0)))
        self._append(record, e.sq)
        self.record_time("diverged")
        if self.writes:
            write_history(self.out_dir, self.history)

    def evaluate(self, eval_pairs) -> dict:
        """Held-out metrics of the model as it is now, recorded in the history."""
        m = evaluate(self.model, eval_pairs, label_smoothing=self.train_cfg.label_smoothing)
        self.history["eval"].append({"step": self.step, **m})
        return m

    def save(self, end: str = "running") -> str:
        """history.json and checkpoint.npz of the current step, unless an update made the state non-finite."""
        self.record_time(end)
        if not self.allow_nonfinite:
            error = nonfinite_update_error(self.model, self.optimizer, self.step, self.history, self.saved_step)
            if error is not None:  # (the same on every rank: their parameters are equal)
                self.segment["end"] = "diverged"
                if self.writes:  # what happened, up to this step; the checkpoint stays
                    write_history(self.out_dir, self.history)
                raise error
        self.saved_step = self.step
        data = {"epoch": self.epoch, "batch_index": self.batch_index}
        streams = None if self.parallel is None else self.parallel.all_streams()  # every rank takes part
        path = os.path.join(self.out_dir, CHECKPOINT_NAME)
        if not self.writes:
            return path
        if streams is not None:
            data["world_size"] = self.parallel.world_size
        return save_checkpoint(
            self.out_dir, self.model, self.optimizer, self.scheduler, self.step,
            get_rng_state() if streams is None else streams[0], data,
            self.model_cfg, self.train_cfg, self.task, self.history, streams,
        )  # fmt: skip

    def result(self, metrics: dict) -> TrainResult:
        return TrainResult(
            self.model, self.task, self.history, metrics, self.out_dir, self.step, self.segment["wall_time"],
            self.start_step, self.history["wall_time"], len(self.history["segments"]),
        )  # fmt: skip


@contextlib.contextmanager
def _progress(show: bool, run: Run):
    """The progress bar (or None), closed on the way out however the block ends."""
    bar = progress_bar(total=run.train_cfg.steps, initial=run.step, desc=f"train {run.task.name}") if show else None
    try:
        yield bar
    finally:
        if bar is not None:
            bar.close()


def _show_step(bar, record: dict) -> None:
    if bar is not None:
        # refresh=False: shown at the bar's next redraw (or progress line), not redrawn now
        lr, tok_s = f"{record['lr']:.2e}", f"{record['tokens_per_s']:.0f}"
        bar.set_postfix(loss=f"{record['loss']:.3f}", lr=lr, tok_s=tok_s, refresh=False)
        bar.update(1)


def _show_eval(bar, step: int, m: dict) -> None:
    if bar is not None:
        bar.write(
            f"step {step}: held-out loss {m['loss']:.4f}, token acc {m['token_acc']:.4f}, exact {m['exact_acc']:.4f}"
        )


@contextlib.contextmanager
def _checkpoint_on_interrupt(run: Run, guard: InterruptGuard, bar, resume_hint: str):
    """A KeyboardInterrupt in the block saves a checkpoint (of the last completed step) and goes on up; so does a
    Ctrl-C that Python raised as another error (cliutil.interrupts_as_such: one in a lazy import's __set_name__
    during evaluation or the callback would otherwise pass this by, and the run would end without its save)."""
    try:
        with interrupts_as_such():
            yield
    except KeyboardInterrupt:
        guard.stopping = True  # from here on every Ctrl-C is dropped: the save below runs in full
        path = run.save("interrupted")
        if bar is not None:
            bar.close()
        if run.writes:
            print(f"\ninterrupted: checkpoint of step {run.step} saved to {path}; continue with {resume_hint}")
        raise


def _due(every: int, step: int) -> bool:
    return bool(every) and step % every == 0


def train(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str,
    resume: bool = False,
    progress: bool = True,
    callback=None,
    overwrite: bool = False,
    on_start=None,
    allow_nonfinite: bool = False,
    resume_hint: str = "train(..., resume=True)",
    parallel=None,
    dtype=None,
    device=None,
) -> TrainResult:
    """Train a Transformer on `train_cfg.task` for `train_cfg.steps` optimizer steps; see the module docstring.

    `callback(step, record)` runs after every completed step with that step's record (loss, lr,
    grad norm, ...); it may raise KeyboardInterrupt to stop the run (a checkpoint is saved first).
    With resume=True the run continues from `out_dir/checkpoint.npz`; its configuration must
    equal the requested one except for RESUMABLE_FIELDS, else ValueError names the differences.
    Resuming a run already at (or past) `train_cfg.steps` writes nothing and returns with
    nothing_to_do=True. A directory already holding a run is refused unless resume=True or overwrite=True.
    `on_start()` runs once every check has passed and a resumed state is restored, before the
    first step or file write (the command line prints the configuration there).

    Divergence: a step whose loss or gradient norm is NaN or infinite raises NonFiniteError before
    its update is applied. The checkpoint on disk (the last one saved, all finite) is left as it
    is; history.json records the steps up to the failing one, whose loss and norm show what
    happened. allow_nonfinite=True trains on regardless (and may save non-finite parameters).
    `resume_hint` is how the interrupt message tells to continue (the command line gives its own).

    `parallel`: a transformer_np.parallel.DataParallel, for data parallelism over its ranks (see the module
    docstring); every check is then made on every rank and a failure on one is an error on all. `dtype`: the
    parameters' dtype (None: the model's own, float32); the equality tests train in float64. `device`: where the
    model trains ("cpu" or "cuda"; None: the CPU); the data stays on the host and each batch is copied over.
    """
    if parallel is None:
        task, train_pairs, eval_pairs = check_run(model_cfg, train_cfg, out_dir, resume, overwrite, allow_nonfinite)
    else:
        task, train_pairs, eval_pairs = _check_parallel_run(
            parallel, model_cfg, train_cfg, out_dir, resume, overwrite, allow_nonfinite
        )
    mt.reuse_freed_memory()  # a training process: freed activations are reused by the next step
    run = Run(model_cfg, train_cfg, task, out_dir, allow_nonfinite, parallel, dtype, device)
    if resume:
        run.restore()
        if (done := run.finished()) is not None:
            return done
    run.start_parallel()
    if on_start is not None and run.writes:
        on_start()
    if run.writes:
        os.makedirs(out_dir, exist_ok=True)
    batches = iterate_forever(train_pairs, train_cfg.batch_size, train_cfg.seed, run.epoch, run.batch_index)
    run.begin()
    collective_stop = parallel is not None and parallel.comm is not None
    # Inside guard.atomic() a Ctrl-C waits for the block's end: a step or a save is never cut in half.
    with (
        _progress(progress and run.writes, run) as bar,
        InterruptGuard(defer=collective_stop) as guard,
        _checkpoint_on_interrupt(run, guard, bar, resume_hint),
    ):
        while run.step < train_cfg.steps:
            with guard.atomic():
                try:
                    record = run.train_one_step(batches)
                except OtherRankFailed:
                    raise
                except Exception as error:  # this rank alone (its forward, backward or optimizer step): tell the
                    if collective_stop:  # others, waiting for it in a collective, before raising
                        parallel.announce(error, f" in step {run.step + 1}")
                    raise
            failure = None  # data parallelism: an error on this rank alone (its save, its callback), agreed below
            try:
                _show_step(bar, record)
                if _due(train_cfg.eval_every, run.step) and run.step < train_cfg.steps and run.writes:
                    _show_eval(bar, run.step, run.evaluate(eval_pairs))
                if _due(train_cfg.checkpoint_every, run.step):
                    with guard.atomic():
                        run.save()
                if callback is not None and collective_stop:
                    try:
                        with interrupts_as_such():  # a Ctrl-C raised as another error is one too
                            callback(run.step, record)
                    except KeyboardInterrupt:  # this rank alone: it stops with the others, by the agreement below
                        guard.pending = True
                elif callback is not None:
                    callback(run.step, record)
            except Exception as error:
                if not collective_stop:
                    raise
                failure = error
            # all ranks stop after this same step, or all raise (no rank waits in a collective for one that is gone)
            if collective_stop and parallel.stop_together(guard.pending, failure, run.step):
                guard.stopping = True
                raise KeyboardInterrupt
        metrics = evaluate(run.model, eval_pairs, label_smoothing=train_cfg.label_smoothing) if run.writes else None
        metrics = metrics if parallel is None else parallel.bcast(metrics)
        with guard.atomic():
            run.history["eval"].append({"step": run.step, **metrics})
            run.save("done")
    if run.nonfinite_steps and run.writes:
        print(f"warning: {run.nonfinite_steps} steps had a non-finite loss or gradient norm (allow_nonfinite)")
    return run.result(metrics)


def _check_parallel_run(parallel, model_cfg, train_cfg, out_dir, resume, overwrite, allow_nonfinite):
    """check_run on every rank, plus: every rank started alike, and a global batch the ranks can share."""
    started = {"out": os.path.abspath(out_dir), "resume": resume, "overwrite": overwrite}
    parallel.check_same_everywhere("configuration", {**model_cfg.to_dict(), **train_cfg.to_dict(), **started})
    parallel.all_succeed(lambda: shard_rows(train_cfg.batch_size, parallel.world_size, 0))
    return parallel.all_succeed(lambda: check_run(model_cfg, train_cfg, out_dir, resume, overwrite, allow_nonfinite))


def fit(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    train_pairs,
    steps: int | None = None,
    progress: bool = False,
    desc: str = "fit",
    allow_nonfinite: bool = False,
):
    """A bare training loop for experiments: no checkpoints, history file or evaluation.

    Returns (model in eval mode, per-step losses, wall seconds). A diverging step raises
    NonFiniteError (see train_step) unless allow_nonfinite=True.
    """
    steps = train_cfg.steps if steps is None else steps
    check_lengths(train_pairs, model_cfg.max_len, "fit")
    mt.reuse_freed_memory()  # a training process: freed activations are reused by the next step
    model = build_model(model_cfg, train_cfg.seed)
    model.train()
    optimizer = build_optimizer(model, train_cfg)
    scheduler = build_scheduler(optimizer, model_cfg, train_cfg)
    params = list(model.parameters())
    batches = iterate_forever(train_pairs, train_cfg.batch_size, train_cfg.seed)
    losses = []
    it = progress_bar(range(steps), desc=desc, leave=False) if progress else range(steps)
    t0 = time.perf_counter()
    for i in it:
        _, _, (src, tgt) = next(batches)
        losses.append(
            train_step(model, optimizer, scheduler, params, src, tgt, train_cfg, None, allow_nonfinite, i + 1)[0]
        )
    wall = time.perf_counter() - t0
    model.eval()
    return model, losses, wall
