"""The curvature experiment with a PyTorch column: `python -m parity.curvature --out DIR [--tiny] [--steps N]`.

transformer_np's curvature experiment (transformer_np/experiments/curvature.py, `exp_curvature`) finds the
top eigenvalue of the loss Hessian by power iteration on minitensor's Hessian-vector products. Here each
measurement is repeated on the PyTorch twin: the weights are copied into parity/model.py by name
(parity/convert.py), the same batch's loss (parity.loss.compute_loss) is differentiated twice by the same
helper with torch.autograd.grad (transformer_np/hessian.py), and the power iteration runs for as many
iterations from the same start vector.
The table and JSON gain a `torch eig` column per norm placement.
"""

from __future__ import annotations

import argparse
import sys

import torch

from transformer_np.cli import OneLineParser
from transformer_np.cliutil import integer, interrupted, interrupts_as_such
from transformer_np.experiments import check_experiment, run_experiment
from transformer_np.hessian import hessian_vector_products

from .convert import np_to_torch
from .hooks import to_numpy
from .loss import compute_loss
from .model import Transformer


def torch_hvp(np_model, cfg, src, tgt, label_smoothing: float):
    """v -> H v (lists of NumPy arrays) of the PyTorch twin of `np_model`, for its loss on (src, tgt).

    transformer_np.experiments.curvature.loss_hvp is the same on minitensor; both go through
    hessian_vector_products.
    """
    model = np_to_torch(np_model, Transformer.from_config(cfg))
    model.train(np_model.training)
    loss = compute_loss(model, src, tgt, label_smoothing)[0]
    _, hvp = hessian_vector_products(torch.autograd.grad, loss, list(model.parameters()))
    return lambda vs: [to_numpy(h) for h in hvp([torch.from_numpy(v) for v in vs])]


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m parity.curvature", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for curvature.md, curvature.json and curvature.png")
    ap.add_argument(
        "--steps",
        type=integer(1),
        default=None,
        help="training steps (default: the experiment's, 1000; with --tiny: 4)",
    )
    ap.add_argument("--tiny", action="store_true", help="a tiny model and 4 steps, in seconds (CI)")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier curvature result in --out")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        check_experiment("curvature", args.out, args.steps, args.overwrite, args.tiny)
    except ValueError as e:
        ap.error(str(e))
    try:
        with interrupts_as_such():
            res = run_experiment(
                "curvature", args.out, args.steps, not args.no_progress, args.overwrite, args.tiny, reference=torch_hvp
            )
    except KeyboardInterrupt:
        return interrupted("python -m parity.curvature")
    print(res["markdown"])
    print(f"wrote {', '.join(res['files'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
