"""The command-line options that say which model of a PyTorch file is built and what it is fed: one definition for
`python -m parity compare FILE.py:CLASS` and `python -m parity view --file FILE.py:CLASS`.

`add_model_options(parser)` adds --kwargs, --config-class, --input-shape, --input-dtype, --input-high and --loss, each
with no argparse default (None), so that `given(args)` can tell which were typed; `compare_config(args, target, ...)`
builds the CompareConfig, CompareConfig's own defaults standing for those not given.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from transformer_np.cliutil import integer

from .compare import INPUT_DTYPES, LOSSES, CompareConfig, parse_kwargs, parse_shape, parse_target

# the options add_model_options defines, by their attribute on the parsed arguments
MODEL_OPTIONS = ("kwargs", "config_class", "input_shape", "input_dtype", "input_high", "loss")
_DEFAULTS = {f.name: f.default for f in fields(CompareConfig)}


def argument(parse):
    """An argparse type from a parser that raises ValueError: its message becomes argparse's one-line error."""

    def typed(text: str):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    typed.__name__ = parse.__name__
    return typed


TARGET = argument(parse_target)  # FILE.py:CLASS -> (path, class name)


def add_model_options(p: argparse.ArgumentParser, shape_required: bool) -> None:
    """The model file's options. shape_required: --input-shape is required by argparse (compare, where the file is
    the only source); else the caller refuses a missing one beside the file and every one of them without it."""
    p.add_argument(
        "--kwargs",
        type=argument(parse_kwargs),
        help="the constructor's keyword arguments, a JSON object (default: {})",
    )
    p.add_argument(
        "--config-class",
        help="a class of the same file that the model's constructor takes as its one argument, built from --kwargs: "
        "GPT(GPTConfig(**kwargs)) (default: the kwargs go to the model's constructor)",
    )
    p.add_argument(
        "--input-shape",
        type=argument(parse_shape),
        required=shape_required,
        help="the input's shape, positive integers separated by commas (e.g. 2,16)",
    )
    p.add_argument(
        "--input-dtype",
        choices=INPUT_DTYPES,
        help="float: standard normal in --dtype; long: integers in [0, --input-high) "
        f"(default: {_DEFAULTS['input_dtype']})",
    )
    p.add_argument(
        "--input-high",
        type=integer(1),
        help="long inputs and targets are below this (default: the smallest nn.Embedding's num_embeddings)",
    )
    p.add_argument(
        "--loss",
        choices=LOSSES,
        help="random: backward of the outputs against seeded random gradients; model: the model's own loss, "
        f"forward(x, targets), targets of x's shape below --input-high (default: {_DEFAULTS['loss']})",
    )


def given(args) -> list[str]:
    """The model file's options typed on the command line, as flags ('--kwargs', ...)."""
    return ["--" + name.replace("_", "-") for name in MODEL_OPTIONS if getattr(args, name) is not None]


def compare_config(args, target: tuple[str, str], **rest) -> CompareConfig:
    """The CompareConfig of `target` (parse_target's (path, class)) from the model file's options, with `rest`
    (dtype, seed, ...); an option not given takes CompareConfig's default."""
    options = {name: getattr(args, name) for name in MODEL_OPTIONS if getattr(args, name) is not None}
    path, class_name = target
    return CompareConfig(path, class_name, **options, **rest)
