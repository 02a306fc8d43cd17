"""The command line's bad-input table: every flag's bad values, every subcommand on missing and malformed files.

Each case runs `main(argv)` in-process and checks what a user sees: exit status 2, exactly one line on
stderr naming the problem (never a traceback), nothing on stdout, and no file created, changed or removed
anywhere under the test's directory (the trained run, the damaged files, the would-be outputs).
A few cases run as real subprocesses (`python -m transformer_np`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

import minitensor as mt
from tests.support import ROOT
from tests.transformer_np.test_cli import TINY
from transformer_np.cli import main


def _damaged_files(root: str, run: str) -> None:
    """Files that look like checkpoints and are not, each also as DIR/checkpoint.npz for `train --resume`."""
    ckpt = os.path.join(run, "checkpoint.npz")
    good = mt.load(ckpt)
    raw = open(ckpt, "rb").read()
    files = {"empty": b"", "text": b"d_model = 16\n", "truncated": raw[: len(raw) // 2]}
    for name, data in files.items():
        with open(os.path.join(root, f"{name}.npz"), "wb") as f:
            f.write(data)
    mt.save({"weights": np.zeros(3)}, os.path.join(root, "other.npz"))  # an .npz, not ours
    np.save(os.path.join(root, "array.npy"), np.zeros(3))
    os.replace(os.path.join(root, "array.npy"), os.path.join(root, "array.npz"))  # a bare .npy
    mt.save({**good, "model_config": {**good["model_config"], "d_model": -16}}, os.path.join(root, "badcfg.npz"))
    mt.save({**good, "model_config": {**good["model_config"], "colour": 1}}, os.path.join(root, "extracfg.npz"))
    mt.save(
        {**good, "model_config": {**good["model_config"], "d_model": 32, "num_heads": 2}},
        os.path.join(root, "shapes.npz"),
    )  # weights of another model
    mt.save({k: v for k, v in good.items() if k != "tgt_vocab"}, os.path.join(root, "novocab.npz"))
    mt.save({k: v for k, v in good.items() if k != "optimizer"}, os.path.join(root, "noopt.npz"))
    for name in ("empty", "text", "truncated", "other", "array", "badcfg", "extracfg", "shapes", "noopt"):
        os.makedirs(os.path.join(root, f"run_{name}"))
        with (
            open(os.path.join(root, f"{name}.npz"), "rb") as src,
            open(os.path.join(root, f"run_{name}", "checkpoint.npz"), "wb") as dst,
        ):
            dst.write(src.read())
    os.makedirs(os.path.join(root, "emptydir"))
    with open(os.path.join(root, "afile"), "w") as f:
        f.write("not a directory\n")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("bad_input"))
    run = os.path.join(root, "run")
    assert main(["train", "--out", run, "--steps", "2", "--eval-every", "0", *TINY]) == 0
    assert main(["experiment", "residual", "--out", os.path.join(root, "exp"), "--no-progress"]) == 0
    _damaged_files(root, run)
    return root


def _snapshot(root: str) -> dict:
    """Every file and directory under root, with a hash of each file's bytes and its modification time."""
    out = {}
    for d, _dirs, files in os.walk(root):
        out[d] = "dir"
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[p] = (hashlib.sha256(fh.read()).hexdigest(), os.stat(p).st_mtime_ns)
    return out


DECODE = ["decode", "--checkpoint", "{run}", "--input", "3 4 5"]
PLOT = ["plot", "--checkpoint", "{run}", "--out", "{new}"]
TRAIN = ["train", "--out", "{new}", "--steps", "2", *TINY]

# (argv, a fragment the one-line message must contain). {run}: the trained run, {new}: a path that must
# not come to exist, {root}: the test's directory holding the damaged files.
FLAG_CASES = [
    # train: one or more bad values for every flag
    (TRAIN + ["--d-model", "0"], "expected d_model >= 1, got d_model=0"),
    (TRAIN + ["--d-model", "-8"], "d_model >= 1"),
    (TRAIN + ["--d-model", "abc"], "invalid int value: 'abc'"),
    (TRAIN + ["--d-model", "1.5"], "invalid int value: '1.5'"),
    (TRAIN + ["--num-heads", "0"], "num_heads >= 1"),
    (TRAIN + ["--num-heads", "3"], "d_model must be divisible by num_heads, got d_model=16 and num_heads=3"),
    (TRAIN + ["--num-encoder-layers", "-1"], "num_encoder_layers >= 1"),
    (TRAIN + ["--num-encoder-layers", "0"], "num_encoder_layers >= 1"),
    (TRAIN + ["--num-decoder-layers", "-2"], "num_decoder_layers >= 1"),
    (TRAIN + ["--d-ff", "0"], "d_ff >= 1"),
    (TRAIN + ["--dropout", "1.0"], "dropout in [0, 1)"),
    (TRAIN + ["--dropout", "-0.1"], "dropout in [0, 1)"),
    (TRAIN + ["--dropout", "nan"], "dropout in [0, 1)"),
    (TRAIN + ["--max-len", "0"], "max_len >= 1"),
    (TRAIN + ["--max-len", "8"], "longer than the model's max_len=8"),
    (TRAIN + ["--src-vocab-size", "0"], "src_vocab_size >= 1"),
    (TRAIN + ["--src-vocab-size", "10"], "needs src/tgt vocabularies of 20/20"),
    (TRAIN + ["--tgt-vocab-size", "-1"], "tgt_vocab_size >= 1"),
    (TRAIN + ["--activation", "tanh"], "invalid choice: 'tanh'"),
    (TRAIN + ["--positional", "rope"], "invalid choice: 'rope'"),
    (TRAIN + ["--attention", "flash"], "invalid choice: 'flash'"),
    (TRAIN + ["--norm-first=yes"], "ignored explicit argument"),
    (TRAIN + ["--task", "nope"], "invalid choice: 'nope'"),
    (TRAIN + ["--steps", "-1"], "steps >= 0"),
    (TRAIN + ["--steps", "ten"], "invalid int value"),
    (TRAIN + ["--batch-size", "0"], "batch_size >= 1"),
    (TRAIN + ["--lr", "0"], "lr in (0, inf)"),
    (TRAIN + ["--lr=-1e-3"], "lr in (0, inf)"),
    (TRAIN + ["--lr", "nan"], "lr in (0, inf)"),
    (TRAIN + ["--lr", "inf"], "lr in (0, inf)"),
    (TRAIN + ["--schedule", "cosine"], "invalid choice: 'cosine'"),
    (TRAIN + ["--warmup-steps", "0"], "warmup_steps >= 1"),
    (TRAIN + ["--step-size", "0"], "step_size >= 1"),
    (TRAIN + ["--gamma", "0"], "gamma in (0, inf)"),
    (TRAIN + ["--betas", "1.0", "0.9"], "betas[0] in [0, 1)"),
    (TRAIN + ["--betas", "0.9", "-0.1"], "betas[1] in [0, 1)"),
    (TRAIN + ["--betas", "0.9"], "expected 2 arguments"),
    (TRAIN + ["--eps", "-1"], "eps in [0, inf)"),
    (TRAIN + ["--weight-decay", "-0.1"], "weight_decay in [0, inf)"),
    (TRAIN + ["--label-smoothing", "1"], "label_smoothing in [0, 1)"),
    (TRAIN + ["--label-smoothing", "-0.5"], "label_smoothing in [0, 1)"),
    (TRAIN + ["--clip-grad-norm", "-1"], "clip_grad_norm in [0, inf)"),
    (TRAIN + ["--train-size", "0"], "train_size >= 1"),
    (TRAIN + ["--eval-size", "0"], "eval_size >= 1"),
    (TRAIN + ["--seed", "-1"], "seed >= 0"),
    (TRAIN + ["--eval-every", "-1"], "eval_every >= 0"),
    (TRAIN + ["--checkpoint-every", "-5"], "checkpoint_every >= 0"),
    (TRAIN + ["--nproc", "0"], "--nproc: expected an integer"),
    (TRAIN + ["--nproc", "1000"], "fewer than the 1000 ranks"),
    (TRAIN + ["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (TRAIN + ["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["train", "--steps", "2"], "the following arguments are required: --out"),
    (["train", "--out", "{root}/afile", "--steps", "2"], "is a file, expected a directory"),
    (["train", "--out", "{run}", "--steps", "2"], "already holds a run"),
    (["train", "--out", "{run}", "--resume", "--overwrite"], "not allowed with argument"),
    (["train", "--out", "{run}", "--resume", "--task", "copy"], "trained task 'copy-reverse', not 'copy'"),
    (["train", "--out", "{run}", "--resume", "--d-model", "32"], "d_model: checkpoint 16 vs requested 32"),
    (["train", "--out", "{run}", "--resume", "--lr", "-1"], "lr in (0, inf)"),
    (["train", "--out", "{new}", "--resume"], "no checkpoint"),
    (["train", "--out", "{root}/emptydir", "--resume"], "no checkpoint"),
    # decode
    (DECODE + ["--beam", "-1"], "--beam must be >= 0"),
    (DECODE + ["--beam", "x"], "invalid int value: 'x'"),
    (DECODE + ["--n-best", "0"], "--n-best >= 1"),
    (DECODE + ["--n-best", "2"], "--n-best > 1 needs --beam > 1"),
    (DECODE + ["--beam", "3", "--n-best", "5"], "--n-best (5) cannot exceed --beam (3)"),
    (DECODE + ["--max-len", "0"], "--max-len must be >= 1"),
    (DECODE + ["--device", "gpu"], "argument --device: invalid choice: 'gpu'"),
    (DECODE + ["--max-len", "1000"], "--max-len 1000 exceeds the model's max_len 50"),
    (DECODE + ["--length-penalty", "-1"], "--length-penalty must be a finite number >= 0"),
    (DECODE + ["--length-penalty", "nan"], "--length-penalty must be a finite number >= 0"),
    (["decode", "--checkpoint", "{run}", "--input", ""], "the input is empty"),
    (["decode", "--checkpoint", "{run}", "--input", "   "], "the input is empty"),
    (["decode", "--checkpoint", "{run}", "--input", "3 <unk>"], "special tokens ['<unk>'] cannot be typed"),
    (["decode", "--checkpoint", "{run}", "--input", "<bos> 3"], "special tokens ['<bos>']"),
    (["decode", "--checkpoint", "{run}", "--input", "3 99"], "unknown source tokens ['99']"),
    (["decode", "--checkpoint", "{run}", "--input", " ".join(["3"] * 60)], "the model's max_len is 50"),
    (["decode", "--checkpoint", "{run}"], "the following arguments are required: --input"),
    (["decode", "--input", "3"], "the following arguments are required: --checkpoint"),
    # plot
    (["plot", "--checkpoint", "{run}", "--out", "{root}/afile"], "is a file, expected a directory"),
    (PLOT + ["--input", ""], "the input is empty"),
    (PLOT + ["--input", "3 <unk>"], "special tokens"),
    (PLOT + ["--input", "99"], "unknown source tokens ['99']"),
    (PLOT + ["--input", " ".join(["3"] * 60)], "the model's max_len is 50"),
    # experiment
    (["experiment", "nope", "--out", "{new}"], "invalid choice: 'nope'"),
    (["experiment", "heads", "--out", "{new}", "--steps", "0"], "--steps must be >= 1"),
    (["experiment", "heads", "--out", "{new}", "--steps", "x"], "invalid int value"),
    (["experiment", "heads", "--out", "{root}/afile", "--steps", "1"], "is a file, expected a directory"),
    (["experiment", "residual", "--out", "{root}/exp"], "already holds a result"),
    (["experiment", "all", "--out", "{root}/exp", "--steps", "1"], "already holds a result"),
    # demo
    (["demo", "--out", "{new}", "--steps", "-1"], "steps >= 0"),
    (["demo", "--out", "{new}", "--steps", "x"], "invalid int value"),
    (["demo", "--out", "{root}/afile"], "is a file, expected a directory"),
    (["demo", "--out", "{run}"], "already holds a run"),
    # the top level
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]

# Every subcommand that reads a checkpoint, on every missing or malformed file.
BAD_FILES = [
    ("{new}", "no checkpoint"),
    ("{root}/emptydir", "no checkpoint"),
    ("{root}/empty.npz", "not a readable .npz"),
    ("{root}/text.npz", "not a readable .npz"),
    ("{root}/truncated.npz", "not a readable .npz"),
    ("{root}/array.npz", "single .npy array"),
    ("{root}/other.npz", "is not a transformer_np checkpoint: missing 'model'"),
    ("{root}/badcfg.npz", "damaged configuration: ModelConfig: expected d_model >= 1"),
    ("{root}/extracfg.npz", "damaged configuration"),
    ("{root}/shapes.npz", "does not hold the model its configuration describes"),
    ("{root}/novocab.npz", "missing 'tgt_vocab'"),
]
READERS = [["decode", "--checkpoint", "{file}", "--input", "3 4"], ["plot", "--checkpoint", "{file}", "--out", "{new}"]]
FILE_CASES = [([arg.replace("{file}", path) for arg in argv], match) for argv in READERS for path, match in BAD_FILES]
# train --resume reads OUT/checkpoint.npz
RESUME_BAD = [
    ("empty", "not a readable .npz"),
    ("text", "not a readable .npz"),
    ("truncated", "not a readable .npz"),
    ("array", "single .npy array"),
    ("other", "missing 'model'"),
    ("badcfg", "damaged configuration"),
    ("extracfg", "damaged configuration"),
    ("noopt", "missing 'optimizer'"),
    ("shapes", "does not hold a run of its own configuration"),
]
FILE_CASES += [(["train", "--out", f"{{root}}/run_{name}", "--resume"], match) for name, match in RESUME_BAD]

CASES = FLAG_CASES + FILE_CASES


def _argv(argv, root):
    paths = {"{run}": os.path.join(root, "run"), "{new}": os.path.join(root, "new", "out"), "{root}": root}
    out = []
    for arg in argv:
        for k, v in paths.items():
            arg = arg.replace(k, v)
        out.append(arg)
    return out


def _case_id(argv) -> str:
    return " ".join(a for a in argv if a not in TINY or a.startswith("--d-model"))


@pytest.mark.parametrize("argv, match", CASES, ids=[_case_id(a) for a, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_touches_nothing(root, argv, match, capsys):
    before = _snapshot(root)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(_argv(argv, root))
    out, err = capsys.readouterr()
    assert e.value.code == 2, (e.value.code, err)
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    assert err.startswith("python -m transformer_np"), err
    assert match in err, err
    assert out == "", out
    assert _snapshot(root) == before


def test_the_table_covers_every_flag_of_every_command():
    from tests.support.cli_help import _subparsers
    from transformer_np.cli import build_parser

    named = {arg for argv, _ in CASES for arg in argv if arg.startswith("--")}
    named |= {a.split("=")[0] for a in named}
    for cmd, sub in _subparsers(build_parser()):
        for action in sub._actions:
            flags = [f for f in action.option_strings if f.startswith("--") and f != "--help"]
            if flags and not any(f in named for f in flags) and action.nargs != 0:
                pytest.fail(f"{cmd} {flags[0]}: no bad value in the table")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["train", "--out", "{new}", "--schedule", "cosine"], "invalid choice: 'cosine'"),
        (["train", "--out", "{new}", "--eval-size", "0"], "eval_size >= 1"),
        (["train", "--out", "{root}/run_other", "--resume"], "missing 'model'"),
        (["decode", "--checkpoint", "{run}", "--input", ""], "the input is empty"),
        (["plot", "--checkpoint", "{root}/text.npz", "--out", "{new}"], "not a readable .npz"),
    ],
)
def test_bad_input_in_a_real_process(root, argv, match):
    before = _snapshot(root)
    r = subprocess.run(
        [sys.executable, "-m", "transformer_np", *_argv(argv, root)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and match in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert _snapshot(root) == before


# ---- every numeric flag of every `python -m` entry point ---------------------------------------------
# transformer_np's numeric flags: NaN, infinity and values past their range, each refused in one line.
FLOAT_FLAGS = ["--dropout", "--lr", "--gamma", "--eps", "--weight-decay", "--label-smoothing", "--clip-grad-norm"]
NONFINITE = ["nan", "inf", "-inf", "1e400"]  # 1e400: float() reads it as inf
NUMERIC_CASES = [(TRAIN + [f"{flag}={v}"], "") for flag in FLOAT_FLAGS for v in NONFINITE]
NUMERIC_CASES += [(TRAIN + ["--betas", a, b], "betas") for a, b in [("nan", "0.9"), ("0.9", "inf"), ("1e400", "0.9")]]
NUMERIC_CASES += [(DECODE + [f"--length-penalty={v}"], "--length-penalty") for v in ("inf", "-inf", "1e400")]
NUMERIC_CASES += [
    (TRAIN + ["--seed", "nan"], "invalid int value"),
    (TRAIN + ["--steps", "inf"], "invalid int value"),
]


@pytest.mark.parametrize("argv, match", NUMERIC_CASES, ids=[_case_id(a) for a, _ in NUMERIC_CASES])
def test_transformer_np_numeric_flags_refuse_nonfinite_and_out_of_range(root, argv, match, capsys):
    test_bad_input_is_one_line_exit_2_and_touches_nothing(root, argv, match, capsys)


def _entry_points():
    """(prog, build_parser, main) of every `python -m` entry point but transformer_np (the table above)."""
    import benchmarks.memory
    import benchmarks.ops
    import benchmarks.run
    import benchmarks.worker
    import parity.__main__
    import parity.curvature

    return {
        "python -m parity": (parity.__main__.build_parser, parity.__main__.main),
        "python -m parity.curvature": (parity.curvature.build_parser, parity.curvature.main),
        "python -m benchmarks": (benchmarks.run.build_parser, benchmarks.run.main),
        "python -m benchmarks.ops": (benchmarks.ops.build_parser, benchmarks.ops.main),
        "python -m benchmarks.memory": (benchmarks.memory.build_parser, benchmarks.memory.main),
        "python -m benchmarks.worker": (benchmarks.worker.build_parser, benchmarks.worker.main),
    }


def _typed_flags(parser, prefix=()):
    """(subcommand argv, flag, action) of every flag of `parser` and its subcommands that converts its value."""
    from tests.support.cli_help import _subparsers

    for action in parser._actions:
        if action.type is not None and action.option_strings:
            yield list(prefix), action.option_strings[-1], action
    for name, sub in _subparsers(parser):
        yield from _typed_flags(sub, (*prefix, name))


# (entry point, argv, fragment of the one-line message): the other command lines' bad numbers.
OTHER_CASES = [
    (
        "python -m parity",
        ["report", "--seed", "-1"],
        "--seed: expected an integer in [0, 18446744073709551615], got -1",
    ),
    ("python -m parity", ["report", "--seed", str(2**64)], "--seed: expected an integer in [0, 18446744073709551615]"),
    ("python -m parity", ["summary", "--config", "copy", "--seed", "-5"], "--seed: expected an integer in [0,"),
    ("python -m parity", ["summary", "--config", "copy", "--seed", "1e3"], "--seed: expected an integer"),
    ("python -m parity", ["report", "--dropout", "nan"], "--dropout: expected a finite number in [0, 1), got 'nan'"),
    ("python -m parity", ["report", "--dropout", "inf"], "--dropout: expected a finite number in [0, 1)"),
    ("python -m parity", ["report", "--dropout", "1"], "--dropout: expected a finite number in [0, 1), got 1"),
    ("python -m parity", ["report", "--steps", "inf"], "--steps: expected an integer >= 0, got 'inf'"),
    (
        "python -m parity",
        ["summary", "--config", "copy", "--batch-size", "0"],
        "--batch-size: expected an integer >= 1",
    ),
    ("python -m parity.curvature", ["--out", "{new}", "--steps", "0"], "--steps: expected an integer >= 1, got 0"),
    ("python -m parity.curvature", ["--out", "{new}", "--steps", "nan"], "--steps: expected an integer >= 1"),
    ("python -m benchmarks", ["run", "--settle", "nan"], "--settle: expected a finite number in [0, 60], got 'nan'"),
    ("python -m benchmarks", ["run", "--settle", "inf"], "--settle: expected a finite number in [0, 60]"),
    ("python -m benchmarks", ["run", "--settle", "1e400"], "--settle: expected a finite number in [0, 60]"),
    ("python -m benchmarks", ["run", "--settle", "61"], "--settle: expected a finite number in [0, 60], got 61"),
    ("python -m benchmarks", ["run", "--budget", "nan"], "--budget: expected a finite number in (0, 3600], got 'nan'"),
    ("python -m benchmarks", ["run", "--budget=-inf"], "--budget: expected a finite number in (0, 3600]"),
    ("python -m benchmarks", ["run", "--budget", "0"], "--budget: expected a finite number in (0, 3600], got 0"),
    ("python -m benchmarks", ["run", "--threads", "nan"], "--threads: expected thread counts like 2 or 1,2"),
    ("python -m benchmarks", ["run", "--threads", "1,4096"], "--threads: expected distinct thread counts in [1, 1024]"),
    ("python -m benchmarks", ["run", "--repeats", "inf"], "--repeats: expected an integer >= 1, got 'inf'"),
    ("python -m benchmarks", ["run", "--calls", "-1"], "--calls: expected an integer >= 1, got -1"),
    ("python -m benchmarks", ["run", "--scaling-lengths", "8", "nan"], "--scaling-lengths: expected an integer >= 1"),
    ("python -m benchmarks", ["run", "--scaling-dims", "0"], "--scaling-dims: expected an integer >= 1, got 0"),
    ("python -m benchmarks", ["run", "--scaling-dims-len", "-3"], "--scaling-dims-len: expected an integer >= 1"),
    ("python -m benchmarks", ["run", "--memory-steps", "0"], "--memory-steps: expected an integer >= 1, got 0"),
    ("python -m benchmarks", ["run", "--out", "{root}/afile"], "--out '{root}/afile' is a file, expected a directory"),
    ("python -m benchmarks.ops", ["--settle", "nan"], "--settle: expected a finite number in [0, 60], got 'nan'"),
    ("python -m benchmarks.ops", ["--threads", "0"], "--threads: expected an integer in [1, 1024], got 0"),
    ("python -m benchmarks.ops", ["--out", "{root}/afile"], "is a file, expected a directory"),
    (
        "python -m benchmarks.memory",
        ["--side", "numpy", "--config", "tiny", "--steps", "0"],
        "--steps: expected an integer >= 1",
    ),
    ("python -m benchmarks.memory", ["--side", "numpy", "--config", "tiny", "--threads", "inf"], "--threads"),
    ("python -m benchmarks.worker", ["--side", "numpy", "--threads", "5000"], "--threads: expected an integer in [1,"),
]


def _run_main(main_fn, argv, capsys) -> tuple[int, str, str]:
    """main(argv) in-process: (exit status, stdout, stderr); a SystemExit's code, or main's return value."""
    capsys.readouterr()
    try:
        code = main_fn(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("prog, argv, match", OTHER_CASES, ids=[f"{p} {' '.join(a)}" for p, a, _ in OTHER_CASES])
def test_other_command_lines_refuse_bad_numbers_in_one_line(root, prog, argv, match, capsys):
    before = _snapshot(root)
    code, out, err = _run_main(_entry_points()[prog][1], _argv(argv, root), capsys)
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith(prog), err
    assert match.replace("{root}", root) in err, err
    assert out == ""
    assert _snapshot(root) == before


def test_every_numeric_flag_of_the_other_command_lines_has_a_validating_type():
    """A walk over every parser: no flag converts with bare int/float (which take nan, inf and any sign), and
    each flag's type refuses nan, inf, -inf and 1e400 itself, so a flag added later is caught here."""
    import argparse

    seen = 0
    for prog, (build, _main) in _entry_points().items():
        for sub, flag, action in _typed_flags(build()):
            where = " ".join([prog, *sub, flag])
            assert action.type not in (int, float), f"{where}: type={action.type.__name__} takes nan/inf/any sign"
            for text in NONFINITE:
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(text)
                    pytest.fail(f"{where} accepted {text!r}")
            seen += 1
    assert seen >= 20  # the walk reached the subcommands


def test_every_numeric_flag_of_every_entry_point_refuses_nan_in_one_line(root, capsys):
    """Behaviour rather than types, so transformer_np (validated after parsing, in its configs) is covered
    too: each flag that converts its value, given 'nan', 'inf' and '-inf', exits 2 with one line."""
    from transformer_np.cli import build_parser

    bases = {("train",): TRAIN, ("decode",): DECODE, ("experiment",): ["experiment", "heads", "--out", "{new}"]}
    bases[("demo",)] = ["demo", "--out", "{new}"]
    mains = {"python -m transformer_np": (build_parser, main), **_entry_points()}
    failures = []
    before = _snapshot(root)
    for prog, (build, main_fn) in mains.items():
        for sub, flag, action in _typed_flags(build()):
            base = bases.get(tuple(sub), sub)
            for text in ("nan", "inf", "-inf"):
                # --flag=-inf: as two words argparse would take '-inf' for an unknown option
                given = [flag, *[text] * action.nargs] if isinstance(action.nargs, int) else [f"{flag}={text}"]
                code, out, err = _run_main(main_fn, _argv(base + given, root), capsys)
                if code != 2 or err.count("\n") != 1 or "Traceback" in err or out:
                    failures.append(f"{prog} {' '.join(sub)} {flag} {text}: exit {code}, {err.strip()[:200]!r}")
    assert failures == []
    assert _snapshot(root) == before
