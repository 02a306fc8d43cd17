"""`python -m parity view`: one self-contained web page of a training step's backward graph, each module boundary's
and parameter's gradient against the PyTorch twin (or finite differences), and the first module where they part.

    subject.py   what is shown: a preset's model, a checkpoint's, a GPT shape, or a PyTorch model file's class (built
                 as `python -m parity compare` builds it), with its twin and a seeded batch
    capture.py   the step, recorded: every node (op, shapes, value and gradient statistics, saved arrays, times) and
                 every module call (nested, its boundary tensors); a planted fault (--plant OP)
    compare.py   each boundary and parameter against the twin or finite differences; the first divergence
    formulas.py  each op's anchor in docs/backprop.md
    layout.py    the rows, depths and edge lanes (computed here; the page only draws)
    page.py      the HTML file, with page.js and page.css inline

docs/parity-view.md is the reference, with a planted fault found on the page.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from minitensor.core.function import Function

from ..compare import CompareConfig
from . import page, subject
from .capture import PLANT_FACTOR
from .compare import against_finite_differences, against_twin, first_divergence
from .formulas import DOC
from .layout import page_data, walk_positions

AGAINST = ("torch", "finite-differences")
MAX_NODES = 20000  # beyond this the page draws slowly: --modules picks a part
MAX_BYTES = 20 * 2**20


@dataclass(frozen=True)
class ViewConfig:
    """What one page shows. Validated by `check`, before any model is built."""

    config: str | None = None  # a preset (default copy-reverse when no other source is given)
    checkpoint: str | None = None  # a transformer_np run directory or checkpoint file
    model: str | None = None  # a GPT shape: 'gpt2' or 'llama'
    file: CompareConfig | None = None  # a PyTorch model file's class, its input and loss (its dtype and seed: these)
    dtype: str = "float64"
    against: str = "torch"  # or 'finite-differences' (float64 only)
    plant: str | None = None  # an op whose backward is scaled by PLANT_FACTOR
    modules: str | None = None  # fnmatch pattern of the module calls drawn
    seed: int = 0
    batch_size: int | None = None
    max_nodes: int = MAX_NODES


def primitive_names() -> set:
    """The names of every primitive (Function subclass) the engine has (not those a program or a test defines)."""
    names, stack = set(), [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            if not sub.__name__.startswith("_") and sub.__module__.startswith("minitensor."):
                names.add(sub.__name__)
            stack.append(sub)
    return names


def check(vc: ViewConfig) -> None:
    """ValueError naming the first option that cannot work together with the others."""
    if sum(x is not None for x in (vc.config, vc.checkpoint, vc.model, vc.file)) > 1:
        raise ValueError("give one of --config, --checkpoint, --model or --file")
    if vc.file is not None and not isinstance(vc.file, CompareConfig):
        raise ValueError(f"file must be a parity.compare.CompareConfig, got {type(vc.file).__name__}")
    if vc.file is not None and vc.batch_size is not None:
        raise ValueError("--batch-size does not apply to --file: the batch is --input-shape's first size")
    if vc.dtype not in ("float32", "float64"):
        raise ValueError(f"unsupported dtype {vc.dtype!r}: expected one of ['float32', 'float64']")
    if vc.against not in AGAINST:
        raise ValueError(f"unknown reference {vc.against!r}: expected one of {list(AGAINST)}")
    if vc.against == "finite-differences" and vc.dtype != "float64":
        raise ValueError(
            f"--against finite-differences needs --dtype float64 (got {vc.dtype}): a difference quotient in "
            "float32 carries errors far above any gradient's"
        )
    if vc.plant is not None and vc.plant not in primitive_names():
        close = sorted(n for n in primitive_names() if n.lower() == vc.plant.lower())
        hint = f" (did you mean {close[0]}?)" if close else " (an op's name as the page shows it, e.g. Softmax, Linear)"
        raise ValueError(f"--plant {vc.plant!r} names no primitive{hint}")


def _subject(vc: ViewConfig):
    if vc.checkpoint is not None:
        return subject.from_checkpoint(vc.checkpoint, vc.dtype, vc.seed, vc.batch_size)
    if vc.file is not None:
        return subject.from_file(replace(vc.file, dtype=vc.dtype, seed=vc.seed))
    if vc.model is not None:
        return subject.from_gpt(vc.model, vc.dtype, vc.seed, vc.batch_size)
    return subject.from_preset(vc.config or "copy-reverse", vc.dtype, vc.seed, vc.batch_size)


def build(vc: ViewConfig, doc_href: str = DOC) -> tuple[str, dict]:
    """(the page's HTML, its data) for `vc`; doc_href: where the page's formula links point (docs/backprop.md)."""
    check(vc)
    sub = _subject(vc)
    if vc.against == "torch":  # every call is compared; --modules only limits what is drawn
        graph, comparison = against_twin(sub, vc.dtype, vc.seed, vc.plant)
    else:  # two forwards per tensor: only the part drawn
        graph, comparison = against_finite_differences(sub, vc.seed, vc.plant, vc.modules)
    if vc.plant is not None and not any(n.get("planted") for n in graph.nodes):
        ops = sorted({n["op"] for n in graph.nodes})
        raise ValueError(f"--plant {vc.plant}: no {vc.plant} node in this graph (its ops: {', '.join(ops)})")
    first, _ = walk_positions(graph)
    divergence = first_divergence(graph, comparison, first)
    reference = "the PyTorch twin" if vc.against == "torch" else "finite differences"
    meta = {
        "title": f"Backward graph of {sub.what}, {vc.dtype}, against {reference}",
        "subtitle": (
            f"one training step's forward and backward, seed {vc.seed}, batch {sub.batch}"
            + ("" if sub.train_mode else ", eval mode (dropout off, as parity compare runs)")
            + "; "
            f"tolerance: {comparison.tolerance}"
            + (f"; planted fault: {vc.plant}'s backward x {PLANT_FACTOR}" if vc.plant else "")
            + (f"; modules drawn: {vc.modules}" if vc.modules else "")
        ),
        "doc": doc_href,
        "plant": vc.plant,
        "plant_factor": PLANT_FACTOR,
        "dtype": vc.dtype,
    }
    data = page_data(graph, comparison, divergence, meta, vc.modules, vc.max_nodes)
    text = page.render(data)
    if len(text.encode()) > MAX_BYTES:
        raise ValueError(
            f"the page would be {len(text.encode()) / 2**20:.1f} MB, more than its limit of {MAX_BYTES // 2**20} MB: "
            "pick a part with --modules PATTERN"
        )
    return text, data


def doc_href(out: str) -> str:
    """docs/backprop.md relative to the page's folder (the checkout the page was made in)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.path.join(root, DOC)
    return os.path.relpath(target, os.path.dirname(os.path.abspath(out))).replace(os.sep, "/")
