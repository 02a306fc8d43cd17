"""What each command of `python -m transformer_np` does, once cli.py has parsed its flags.

    cmd_train       the task preset's (or the checkpoint's) configs with the flags over them, then training.train
    cmd_decode      greedy or beam decoding of one input with a checkpoint (decode_text)
    cmd_plot        every figure of a checkpoint (figures.write_all_plots)
    cmd_experiment  one experiment or all of them (experiments.py)
    cmd_demo        the copy-reverse demo: train (DEMO_MODEL, DEMO_TRAIN), report, decode, plot

Each checks everything it can before printing or writing anything; a ValueError, TypeError or OSError it
raises is a user error (cli.main turns it into one line and exit status 2).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import numpy as np

import minitensor as mt
from minitensor.nn.parallel import mpiexec_command, require_mpi

from .cliutil import check_out_is_a_directory
from .config import ModelConfig, TrainConfig
from .decode import beam_search, greedy_decode
from .parallel import DataParallel, OtherRankFailed, launched_world_size, shard_rows
from .training import CHECKPOINT_NAME, check_run, default_configs, load_checkpoint, resume_configs, train


def _overrides(args, cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        v = getattr(args, f.name, None)
        if v is not None and f.name != "task":
            out[f.name] = tuple(v) if f.name == "betas" else v
    return out


def _train_configs(args) -> tuple[ModelConfig, TrainConfig]:
    """The configs `train` will run: the task preset's (or the checkpoint's with --resume), then the flags."""
    if args.resume:
        model_cfg, train_cfg = resume_configs(args.out)
        if args.task is not None and args.task != train_cfg.task:
            raise ValueError(
                f"--resume: the checkpoint in {args.out!r} trained task {train_cfg.task!r}, not {args.task!r}"
            )
    else:
        model_cfg, train_cfg = default_configs(args.task or "copy-reverse")
    model_cfg = model_cfg.replace(**_overrides(args, ModelConfig))
    train_cfg = train_cfg.replace(**_overrides(args, TrainConfig))
    return model_cfg, train_cfg


def _resume_command(command: str, out: str) -> str:
    return f"python -m transformer_np {command} --out {shlex.quote(out)} --resume"


def done_line(res) -> str:
    """'done: N steps in T s' for a run in one go; for a resumed run, this call's steps and time and the whole run's."""
    if res.start_step == 0 and res.runs == 1:
        return f"done: {res.step} steps in {res.wall_time:.1f} s"
    return (
        f"done: {res.step} steps (steps {res.start_step + 1}-{res.step} in this run, {res.wall_time:.1f} s; "
        f"{res.total_wall_time:.1f} s over {res.runs} runs)"
    )


def _launch_ranks(args, model_cfg: ModelConfig, train_cfg: TrainConfig) -> int:
    """`train --nproc N`: every check first (one error here, nothing started), then this same command on N ranks
    under the distributed extra's mpiexec; returns mpiexec's exit status. A Ctrl-C reaches the ranks (they save a
    checkpoint and stop together) and this process waits for them."""
    shard_rows(train_cfg.batch_size, args.nproc, 0)
    check_run(model_cfg, train_cfg, args.out, args.resume, args.overwrite, args.allow_nonfinite)
    return run_on_ranks(args.nproc, args.argv)


def run_on_ranks(nproc: int, argv: list) -> int:
    """This command line (`argv`, without `python -m transformer_np`) on `nproc` ranks under the distributed
    extra's mpiexec, --nproc taken out; returns mpiexec's exit status. A Ctrl-C reaches the ranks (they save a
    checkpoint and stop together) and this process waits for them."""
    require_mpi()  # ModuleNotFoundError (the extra is missing): one line, before anything starts
    rest, skip = [], False
    for a in argv:  # the command without --nproc
        if skip or a == "--nproc":
            skip = not skip
        elif not a.startswith("--nproc="):
            rest.append(a)
    proc = subprocess.Popen(mpiexec_command(nproc, ["-m", "transformer_np", *rest]))
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # forwarded (the ranks may have it from the terminal too: they stop once)
            proc.send_signal(signal.SIGINT)


def _data_parallel(args):
    """The DataParallel of a run started under mpiexec with more than one rank, else None."""
    if launched_world_size() == 1:
        return None
    return DataParallel(comm=require_mpi().COMM_WORLD)


def cmd_train(args) -> int:
    model_cfg, train_cfg = _train_configs(args)
    try:
        parallel = _data_parallel(args)
        if parallel is None and args.nproc > 1:
            return _launch_ranks(args, model_cfg, train_cfg)
    except ModuleNotFoundError as e:  # the distributed extra is missing
        raise OSError(str(e)) from None
    if parallel is None:
        return _train_and_report(args, model_cfg, train_cfg, None)
    if args.nproc > 1 and args.nproc != parallel.world_size:  # mpiexec -n 2 ... train --nproc 4: before any work
        if not parallel.writes:
            return 2
        raise ValueError(
            f"--nproc {args.nproc} under mpiexec with {parallel.world_size} ranks: give one of them (--nproc alone "
            f"launches mpiexec itself; under mpiexec -n N, --nproc must be N or left out)"
        )
    try:
        return _train_and_report(args, model_cfg, train_cfg, parallel)
    except OtherRankFailed as e:  # another rank failed alone: rank 0 says so in one line, with that rank's error
        if parallel.writes:
            print(f"python -m transformer_np train: error: {e}", file=sys.stderr)
        return _end_abandoned(parallel, 1 if parallel.writes else 2)
    except Exception as e:
        if parallel.failed:  # this rank failed alone during training (a MemoryError in its step...) and told the
            if parallel.writes:  # others: rank 0's own error is the line; another rank's is on rank 0's line
                print(f"python -m transformer_np train: error: {type(e).__name__}: {e}", file=sys.stderr)
            return _end_abandoned(parallel, 1 if parallel.writes else 2)
        if not isinstance(e, (ValueError, TypeError, OSError)) or parallel.writes:
            raise
        return 2  # every rank raised the same error, or the one rank 0 failed with: rank 0 alone says it


def _end_abandoned(parallel, code: int) -> int:
    """End a rank whose collectives were abandoned by a failure: MPI_Finalize would wait on them (or report them), so
    the process ends here, its output flushed, with `code`."""
    if not parallel.failed:
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    parallel.finish()  # rank 0's line is out before any rank ends (mpiexec then kills the others)
    os._exit(code)


def _train_and_report(args, model_cfg: ModelConfig, train_cfg: TrainConfig, parallel) -> int:
    writes = parallel is None or parallel.writes

    def announce():
        print(f"task {train_cfg.task}: {json.dumps(model_cfg.to_dict())}")
        print(f"recipe: {json.dumps(train_cfg.to_dict())}")

    res = train(
        model_cfg,
        train_cfg,
        args.out,
        resume=args.resume,
        progress=not args.no_progress,
        overwrite=args.overwrite,
        on_start=announce,
        allow_nonfinite=args.allow_nonfinite,
        resume_hint=_resume_command("train", args.out)
        + ("" if parallel is None else f" --nproc {parallel.world_size} (or another N: docs/distributed.md)"),
        parallel=parallel,
        device=check_device(args.device),
    )
    if not writes:
        return 0
    if res.nothing_to_do:
        print(
            f"nothing to do: the run in {args.out!r} is already at step {res.step} (--steps {train_cfg.steps}); "
            "its files are unchanged"
        )
        return 0
    m = res.metrics
    print(
        f"{done_line(res)}; held-out ({m['num_examples']} examples): "
        f"loss {m['loss']:.4f}, token accuracy {m['token_acc']:.4f}, exact match {m['exact_acc']:.4f}"
    )
    print(f"checkpoint: {os.path.join(args.out, CHECKPOINT_NAME)}")
    return 0


def decode_text(
    ckpt,
    text: str,
    beam: int = 0,
    n_best: int = 1,
    length_penalty: float = 0.6,
    max_len: int | None = None,
    use_cache: bool = True,
) -> list[tuple[str, float | None]]:
    """Decode `text` with a loaded Checkpoint: [(output text, score or None for greedy)], best first."""
    task, model = ckpt.task, ckpt.model
    src_ids = task.encode_source(text)
    if len(src_ids) > ckpt.model_cfg.max_len:
        raise ValueError(
            f"decode: the input has {len(src_ids)} tokens, the model's max_len is {ckpt.model_cfg.max_len}"
        )
    if max_len is None:
        max_len = min(task.max_tgt_len + 10, ckpt.model_cfg.max_len)
    src = mt.tensor(np.asarray([src_ids], dtype=np.int64))
    if beam > 1:
        hyps = beam_search(
            model,
            src,
            beam_size=beam,
            max_len=max_len,
            length_penalty=length_penalty,
            n_best=n_best,
            use_cache=use_cache,
        )[0]  # the only source sentence
        return [(task.decode_target(ids), score) for ids, score in hyps]
    out = greedy_decode(model, src, max_len=max_len, use_cache=use_cache)
    return [(task.decode_target(out[0]), None)]


def _check_decode_flags(args) -> None:
    if args.beam < 0 or args.n_best < 1:
        raise ValueError(f"--beam must be >= 0 and --n-best >= 1, got {args.beam} and {args.n_best}")
    if args.beam <= 1 and args.n_best > 1:
        raise ValueError("--n-best > 1 needs --beam > 1")
    if args.beam > 1 and args.n_best > args.beam:
        raise ValueError(f"--n-best ({args.n_best}) cannot exceed --beam ({args.beam})")
    if args.max_len is not None and args.max_len < 1:
        raise ValueError(f"--max-len must be >= 1, got {args.max_len}")
    if not args.length_penalty >= 0 or args.length_penalty == float("inf"):
        raise ValueError(f"--length-penalty must be a finite number >= 0, got {args.length_penalty}")


def check_device(name: str) -> str:
    """--device: "cpu", or "cuda" when a CUDA device answers (CuPy with a GPU, or the fake with MINITENSOR_FAKE_CUDA=1);
    else one clear error before any work."""
    if name == "cuda" and not mt.cuda.is_available():
        raise ValueError(
            "--device cuda: no CUDA device is available (CuPy with a GPU is needed: pip install -e '.[gpu]'; "
            "MINITENSOR_FAKE_CUDA=1 runs on the fake NumPy-backed device instead)"
        )
    return name


def cmd_decode(args) -> int:
    _check_decode_flags(args)
    device = check_device(args.device)
    ckpt = load_checkpoint(args.checkpoint, device)
    if args.max_len is not None and args.max_len > ckpt.model_cfg.max_len:
        raise ValueError(f"--max-len {args.max_len} exceeds the model's max_len {ckpt.model_cfg.max_len}")
    results = decode_text(
        ckpt, args.input, args.beam, args.n_best, args.length_penalty, args.max_len, not args.no_cache
    )
    print(f"input:  {args.input}")
    for i, (text, score) in enumerate(results):
        label = "greedy" if score is None else f"beam {i + 1} (score {score:.4f})"
        print(f"{label}: {text}")
    return 0


def cmd_plot(args) -> int:
    # matplotlib loads on use, not on `import transformer_np.cli` (parity's and the benchmarks' start-up time)
    from .figures import write_all_plots

    check_out_is_a_directory(args.out)
    ckpt = load_checkpoint(args.checkpoint)
    paths = write_all_plots(ckpt, args.out, args.input, args.checkpoint if os.path.isdir(args.checkpoint) else None)
    for p in paths:
        print(p)
    return 0


def cmd_experiment(args) -> int:
    # matplotlib loads on use, not on `import transformer_np.cli` (parity's and the benchmarks' start-up time)
    from .experiments import EXPERIMENTS, check_experiment, run_experiment

    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    check_out_is_a_directory(args.out)
    for name in names:  # every refusal before the first experiment runs
        check_experiment(name, args.out, args.steps, args.overwrite, args.tiny)
    for name in names:
        res = run_experiment(
            name, args.out, steps=args.steps, progress=not args.no_progress, overwrite=args.overwrite, tiny=args.tiny
        )
        print(res["markdown"])
        print(f"wrote {', '.join(res['files'])}")
    return 0


# The demo's recipe: the copy-reverse preset (3+3 layers, d_model 128, 8 heads, d_ff 512) trained
# as in the acceptance test (tests/transformer_np/test_task_trainings.py): StepLR from 1e-3 halved every 400 steps,
# fresh training data, no dropout or label smoothing. Its time: docs/decisions/028-demo-and-experiment-lengths.md.
DEMO_MODEL = dict(dropout=0.0)
DEMO_TRAIN = dict(
    steps=2000,
    batch_size=32,
    schedule="step",
    lr=1e-3,
    step_size=400,
    gamma=0.5,
    train_size=50000,
    eval_size=200,
    eval_every=500,
    checkpoint_every=500,
    label_smoothing=0.0,
)


def cmd_demo(args) -> int:
    # matplotlib loads on use, not on `import transformer_np.cli` (parity's and the benchmarks' start-up time)
    from .figures import write_all_plots

    model_cfg, train_cfg = default_configs("copy-reverse")
    model_cfg = model_cfg.replace(**DEMO_MODEL)
    train_cfg = train_cfg.replace(**DEMO_TRAIN)
    if args.steps is not None:
        train_cfg = train_cfg.replace(steps=args.steps)
    t0 = time.perf_counter()

    def announce():
        print(
            f"demo: training copy-reverse (target = input + reversed input) for {train_cfg.steps} steps; "
            f"model {json.dumps(model_cfg.to_dict())}"
        )

    res = train(
        model_cfg,
        train_cfg,
        args.out,
        resume=args.resume,
        progress=not args.no_progress,
        overwrite=args.overwrite,
        on_start=announce,
        resume_hint=_resume_command("demo", args.out),
    )
    m = res.metrics
    if res.nothing_to_do:
        print(f"demo: the run in {args.out!r} is already trained ({res.step} steps); reporting it again")
    spent = f"{res.total_wall_time:.0f} s of training" + (f" over {res.runs} runs" if res.runs > 1 else "")
    print(
        f"\nheld-out ({m['num_examples']} sequences never seen in training): exact match {m['exact_acc']:.1%}, "
        f"token accuracy {m['token_acc']:.1%}, loss {m['loss']:.4f}  [{spent}]"
    )
    ckpt = load_checkpoint(args.out)
    print("\nexamples (greedy / beam 4):")
    for text in ("3 4 5", "15 0 7 7 2", "1 2 3 4 5 6 7 8 9 10"):
        greedy = decode_text(ckpt, text)[0][0]
        beam = decode_text(ckpt, text, beam=4)[0][0]
        expect = " ".join(text.split() + text.split()[::-1])
        mark = "ok" if greedy == expect else "WRONG"
        print(f"  {text:<22} -> greedy: {greedy}  [{mark}]\n  {'':<22}    beam 4: {beam}")
    plot_dir = os.path.join(args.out, "plots")
    paths = write_all_plots(ckpt, plot_dir, "3 4 5 6 7 8", args.out)
    print(f"\n{len(paths)} plots in {plot_dir}; total {time.perf_counter() - t0:.0f} s")
    return 0
