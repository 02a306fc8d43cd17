"""The `view` subcommand of `python -m parity`: its options, and the run that writes the page."""

from __future__ import annotations

import sys
import time

from minitensor.compat import NotInMinitensor
from transformer_np.cliutil import SEED_MAX, integer

from .. import compare_options
from ..compare import MinitensorFailed
from ..gpt.report import MODELS
from . import AGAINST, ViewConfig, build, check, doc_href, page


def add_parser(sub, presets: list, formatter) -> None:
    p = sub.add_parser(
        "view",
        formatter_class=formatter,
        help="a web page of one step's backward graph, each gradient against PyTorch",
        description="One self-contained HTML file: the backward graph of one training step grouped by module (folded, "
        "searchable, pan and zoom), every node's op, shapes, value and gradient statistics, saved arrays and times, "
        "and every module output's and parameter's gradient against the PyTorch twin (or finite differences), with "
        "the first module where they part (docs/parity-view.md).",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", choices=presets, help="a preset whose fresh model is shown (default: copy-reverse)")
    src.add_argument("--checkpoint", help="a transformer_np run directory or checkpoint file (e.g. runs/demo)")
    src.add_argument("--model", choices=MODELS, help="the decoder-only GPT in this shape, at nanoGPT's baby size")
    src.add_argument(
        "--file",
        metavar="FILE.py:CLASS",
        type=compare_options.TARGET,
        help="a PyTorch model file's class, built and fed as `python -m parity compare` builds and feeds it (in eval "
        "mode), with the options below",
    )
    compare_options.add_model_options(
        p.add_argument_group("a model file (--file; --input-shape required)"), shape_required=False
    )
    p.add_argument(
        "--dtype",
        default="float64",
        choices=("float32", "float64"),
        help="floating-point type of both sides (default: %(default)s)",
    )
    p.add_argument(
        "--against",
        default="torch",
        choices=AGAINST,
        help="the reference: the PyTorch twin, or finite differences along one direction per tensor (float64 only, "
        "for a model without a twin) (default: %(default)s)",
    )
    p.add_argument(
        "--plant",
        metavar="OP",
        help="scale every gradient OP's backward returns by 1.001 (e.g. Softmax, LayerNorm): a fault to find on the "
        "page",
    )
    p.add_argument(
        "--modules",
        metavar="PATTERN",
        help="draw only the module calls whose key matches this shell pattern, with what is inside them "
        "(e.g. 'decoder.layers.0*') (default: all)",
    )
    p.add_argument("--seed", type=integer(0, SEED_MAX), default=0, help="weights and batch (default: %(default)s)")
    p.add_argument(
        "--batch-size",
        type=integer(1),
        default=None,
        help="sentences (sequences, for a GPT) per batch (default: the preset's reference batch; 16 for a checkpoint; "
        "12 for a GPT)",
    )
    p.add_argument("--out", default="parity-view.html", help="the HTML file written (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def _file(args):
    """The CompareConfig of --file and its options (dtype and seed: the view's), or None; refuses those options
    without --file."""
    flags = compare_options.given(args)
    if args.file is None:
        if flags:
            raise ValueError(f"{flags[0]} describes a model file: give it with --file FILE.py:CLASS")
        return None
    if args.input_shape is None:
        raise ValueError("--file needs --input-shape (e.g. --input-shape 2,16)")
    return compare_options.compare_config(args, args.file, dtype=args.dtype, seed=args.seed)


def run(args) -> int:
    vc = ViewConfig(
        config=args.config,
        checkpoint=args.checkpoint,
        model=args.model,
        file=_file(args),
        dtype=args.dtype,
        against=args.against,
        plant=args.plant,
        modules=args.modules,
        seed=args.seed,
        batch_size=args.batch_size,
    )
    check(vc)
    page.check_out(args.out, args.overwrite)  # before any work
    t0 = time.perf_counter()
    try:
        text, data = build(vc, doc_href(args.out))
    except (NotInMinitensor, MinitensorFailed) as e:  # the file runs on torch and not on minitensor, as compare says
        print(f"python -m parity view: FAIL: {e}", file=sys.stderr)
        return 1
    page.write(text, args.out)
    meta = data["meta"]
    print(
        f"wrote {args.out}: {meta['nodes']} nodes, {len(text.encode()) / 2**20:.2f} MB, "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    if meta["divergence_key"] is not None:
        print(f"first divergence along the backward: {meta['divergence_key']}")
    elif meta["failing"]:
        print(f"{meta['failing']} checks over the tolerance")
    else:
        print(f"every module output and parameter gradient agrees with {meta['reference']}")
    return 0
