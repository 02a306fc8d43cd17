"""The command line of `python -m benchmarks run`: its flags, their defaults, and the settings they resolve to.

`build_parser()` is the parser (every flag shows its default and its allowed values);
`resolve_settings(args)` turns parsed flags into the settings dict that benchmarks/run.py
and benchmarks/measure.py read (and results.json records), --quick's defaults filled in.
"""

from __future__ import annotations

import argparse

from benchmarks.attention import LENGTHS as ATTENTION_LENGTHS
from benchmarks.attention import MEMORY_GIB, QUICK_LENGTHS
from benchmarks.env import WAIT_POLICIES
from benchmarks.gpt_recipe import add_parser as add_recipe_parser
from benchmarks.gpu import add_parser as add_gpu_parser
from benchmarks.results_page import DEFAULT_IN as DEFAULT_RESULTS_IN
from benchmarks.results_page import DEFAULT_OUT as DEFAULT_RESULTS_OUT
from benchmarks.workloads import CONFIGS
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer, number
from transformer_np.config import PRESETS

GPT_CONFIGS = ["gpt2-baby", "llama-baby"]  # decoder-only (benchmarks/gpt_workloads.py)
FULL_CONFIGS = ["copy", "copy-reverse", "base", "long", *GPT_CONFIGS]
QUICK_CONFIGS = ["copy", "copy-reverse"]
# "nn": the torch.nn.Transformer side (benchmarks/nn_side.py); "decode": greedy and beam decoding
SKIPPABLE = ["memory", "scaling", "ops", "profile", "decode", "hvp", "attention", "gpu", "perop", "nn"]
HVP_CONFIGS = ["copy-reverse", "base"]
SETTLE_MAX = 60.0  # seconds; a pause longer than this between two rounds is a typo, not a setting
BUDGET_MAX = 3600.0  # seconds per workload and config


def thread_list(text: str) -> list[int]:
    """'1,2' -> [1, 2]: positive, distinct thread counts."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts like 2 or 1,2, got {text!r}") from None
    if not counts or min(counts) < 1 or max(counts) > THREADS_MAX or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(
            f"expected distinct thread counts in [1, {THREADS_MAX}] like 1,2, got {text!r}"
        )
    return counts


def build_parser() -> argparse.ArgumentParser:
    names = sorted(CONFIGS)
    ap = OneLineParser(
        prog="python -m benchmarks",
        description="transformer_np (NumPy) vs PyTorch benchmarks, each framework timed in its own process",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="{run,results,ranks,gpu,gpt-recipe}")
    r = sub.add_parser(
        "run",
        help="run the benchmarks and write results.md / results.json / PNGs",
        description="Time transformer_np against PyTorch, each in its own process, A B A B.",
    )
    r.add_argument(
        "--quick",
        action="store_true",
        help="copy and copy-reverse only, fewer rounds, short scaling series (about 3 min at 2 threads)",
    )
    r.add_argument(
        "--configs",
        nargs="+",
        default=None,
        choices=names,
        metavar="CONFIG",
        help=f"configs to time, from {{{', '.join(names)}}} ('tiny' is a smoke-test model) "
        f"(default: {' '.join(FULL_CONFIGS)}; with --quick: {' '.join(QUICK_CONFIGS)})",
    )
    r.add_argument(
        "--threads",
        type=thread_list,
        default="2",
        metavar="N[,N...]",
        help="thread counts for both sides (BLAS, OpenMP, torch); a list such as 1,2 runs everything "
        "at each and gives the report a section per count (default: 2)",
    )
    r.add_argument(
        "--in-process",
        action="store_true",
        help="time both frameworks in one process instead of one process each (labelled in the report: "
        "PyTorch's times can be inflated by NumPy's spinning BLAS threads)",
    )
    r.add_argument(
        "--settle",
        type=number(0.0, SETTLE_MAX),
        default=0.2,
        help="seconds to pause before handing the cores to the other side's process, so that the idle "
        f"BLAS/OpenMP threads of the last one stop spinning, at most {SETTLE_MAX:g} (default: 0.2)",
    )
    r.add_argument(
        "--device",
        default="auto",
        choices=["cpu", "cuda", "auto"],
        help="cuda/auto: add PyTorch CUDA rows when a GPU is present; the NumPy side is CPU only (default: auto)",
    )
    r.add_argument(
        "--wait-policy",
        default="default",
        choices=sorted(WAIT_POLICIES),
        help="idle BLAS/OpenMP workers: library default (spin) or sleep at once (for a shared, loaded "
        "machine) (default: default)",
    )
    r.add_argument("--out", default="benchmarks/results", help="folder for the report (default: benchmarks/results)")
    r.add_argument(
        "--repeats", type=integer(1), default=None, help="most rounds per workload (default: 15; with --quick: 5)"
    )
    r.add_argument(
        "--calls",
        type=integer(1),
        default=None,
        help="timed calls per round; the round's figure is their median (default: 3; with --quick: 2; "
        "1 for a workload whose round would eat much of the budget)",
    )
    r.add_argument(
        "--budget",
        type=number(0.0, BUDGET_MAX, low_open=True),
        default=None,
        help=f"seconds per workload and config that bound the rounds, at most {BUDGET_MAX:g} "
        "(default: 25; with --quick: 4)",
    )
    r.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=SKIPPABLE,
        metavar="PART",
        help=f"parts to leave out, from {{{', '.join(SKIPPABLE)}}} (default: none)",
    )
    r.add_argument(
        "--scaling-base",
        default="long",
        choices=names,
        metavar="CONFIG",
        help="config whose model the scaling series varies (default: long)",
    )
    r.add_argument(
        "--scaling-lengths",
        type=integer(1),
        nargs="+",
        default=None,
        metavar="L",
        help="sequence lengths S = T of the length series (default: 32 64 128 256 512; with --quick: 32 64 128)",
    )
    r.add_argument(
        "--scaling-dims",
        type=integer(1),
        nargs="+",
        default=None,
        metavar="D",
        help="d_model values of the width series (default: 64 128 256 512; with --quick: 64 128 256)",
    )
    r.add_argument(
        "--scaling-dims-len",
        type=integer(1),
        default=None,
        help="sequence length of the d_model series (default: 128; with --quick: 32)",
    )
    r.add_argument(
        "--memory-steps",
        type=integer(1),
        default=None,
        help="training steps per peak-memory child (default: 3; with --quick: 2)",
    )
    r.add_argument(
        "--attention-lengths",
        type=integer(1),
        nargs="+",
        default=None,
        metavar="T",
        help="sequence lengths of the attention memory/time section, long model at batch 1 (default: "
        f"{' '.join(map(str, ATTENTION_LENGTHS))}; with --quick: {' '.join(map(str, QUICK_LENGTHS))})",
    )
    r.add_argument(
        "--attention-memory-gib",
        type=number(0.0, 1024.0, low_open=True),
        default=MEMORY_GIB,
        help="address space a point of the attention section may use beyond its floor; more: 'does not fit' "
        "(default: %(default)s)",
    )
    r.add_argument(
        "--ops-sizes",
        nargs="+",
        default=["small", "large"],
        choices=["small", "large"],
        help="op microbenchmark size classes (default: small, large)",
    )
    r.add_argument(
        "--hvp-configs",
        nargs="+",
        default=None,
        choices=names,
        metavar="CONFIG",
        help=f"configs whose Hessian-vector product is timed beside one gradient "
        f"(default: those of {' '.join(HVP_CONFIGS)} among --configs; with --quick: not base)",
    )
    _add_results_parser(sub)
    _add_ranks_parser(sub)
    add_gpu_parser(sub)  # `gpu`: the GPU section alone (benchmarks/gpu.py)
    add_recipe_parser(sub)  # `gpt-recipe`: the baby GPT recipe on both sides (benchmarks/gpt_recipe.py)
    return ap


def _add_results_parser(sub) -> None:
    """`results`: the committed headline page rendered from a run's results.json (benchmarks/results_page.py)."""
    k = sub.add_parser(
        "results",
        help="render benchmarks/RESULTS.md, the committed headline, from a run's results.json",
        description="Render the headline page (machine, training step, decoding, memory) from a results.json.",
    )
    k.add_argument(
        "--in",
        dest="input",
        nargs="+",
        default=[DEFAULT_RESULTS_IN],
        metavar="PATH",
        help=f"the results.json a run wrote, or several (each under its command) (default: {DEFAULT_RESULTS_IN})",
    )
    k.add_argument(
        "--out", dest="output", default=DEFAULT_RESULTS_OUT, metavar="PATH", help="the page (default: %(default)s)"
    )


def _add_ranks_parser(sub) -> None:
    """`ranks`: data-parallel throughput over MPI ranks, minitensor's DDP beside torch's (benchmarks/ranks.py)."""
    k = sub.add_parser(
        "ranks",
        help="data-parallel throughput for 1, 2, 4 ranks (1 thread each), minitensor DDP beside torch DDP",
        description="Time data-parallel training over MPI ranks, each framework in its own processes, A B A B.",
    )
    k.add_argument("--quick", action="store_true", help="ranks 1 and 2, 2 steps, 1 round (a smoke test)")
    k.add_argument(
        "--ranks",
        type=thread_list,
        default=None,
        metavar="N[,N...]",
        help="rank counts; each must divide --batch-size (default: 1,2,4; with --quick: 1,2)",
    )
    k.add_argument("--preset", default="copy-reverse", choices=sorted(PRESETS), help="model (default: %(default)s)")
    k.add_argument("--batch-size", type=integer(1), default=16, help="the global batch (default: %(default)s)")
    k.add_argument("--steps", type=integer(1), default=10, help="timed steps per launch (default: %(default)s)")
    k.add_argument("--rounds", type=integer(1), default=2, help="rounds per framework (default: %(default)s)")
    k.add_argument("--out", default="benchmarks/results/ranks", help="folder for ranks.md (default: %(default)s)")


def resolve_settings(args) -> dict:
    q = args.quick
    return {
        "configs": args.configs or (QUICK_CONFIGS if q else FULL_CONFIGS),
        "threads": args.threads,
        "in_process": args.in_process,
        "settle_s": 0.0 if args.in_process else args.settle,
        "repeats": args.repeats or (5 if q else 15),
        "min_repeats": 3 if q else 5,
        "calls": args.calls or (2 if q else 3),
        "warmup": 1 if q else 2,
        "budget_s": args.budget or (4.0 if q else 25.0),
        "interference_calls": 3 if q else 7,
        "gemm_rounds": 3 if q else 5,
        "gemm_reference_n": 512 if q else 1024,
        "scaling_base": args.scaling_base,
        "scaling_lengths": args.scaling_lengths or ([32, 64, 128] if q else [32, 64, 128, 256, 512]),
        "scaling_dims": args.scaling_dims or ([64, 128, 256] if q else [64, 128, 256, 512]),
        "scaling_dims_len": args.scaling_dims_len or (32 if q else 128),
        "memory_steps": args.memory_steps or (2 if q else 3),
        "ops_sizes": args.ops_sizes,
        "attention_lengths": args.attention_lengths or (QUICK_LENGTHS if q else ATTENTION_LENGTHS),
        "attention_steps": 1 if q else 2,
        "attention_memory_gib": args.attention_memory_gib,
        "hvp_configs": args.hvp_configs
        or [c for c in HVP_CONFIGS if c in (args.configs or FULL_CONFIGS) and not (q and c == "base")],
        "ops_repeats": 3 if q else 11,
        "ops_target_ms": 2.0 if q else 5.0,
        "wait_policy": args.wait_policy,
        "device": args.device,
        "skip": list(args.skip),
        "quick": q,
    }
