"""Early delivery of leaf gradients: a leaf's .grad is set as soon as its gradient is complete, not at the walk's end.

A leaf's gradient is complete once the walk has passed the last node that takes the leaf as an input (`plan`):
nothing more can flow into it. Delivering it there lets a post-accumulate-grad hook (data parallelism's all-reduce)
start while the rest of the backward still runs, as PyTorch's AccumulateGrad node fires when its inputs are done.
The sums are the same either way. Installed at the core's walk (points.leaf_sink) only while some leaf has a
post-accumulate-grad hook (`hook_added`, `hook_removed`: Tensor.register_post_accumulate_grad_hook).
"""

from __future__ import annotations

from ..core import points
from ..core.engine import LeafGrads, array_of

_hooked = 0  # how many post-accumulate-grad hooks are registered


class EarlyLeafGrads(LeafGrads):
    """The core's leaf sums, each handed over once the last node feeding its leaf has run."""

    def __init__(self, caller_gradients: list):
        super().__init__(caller_gradients)
        self.done_after = []  # (index of the last node feeding the leaf, its input slot there, id(leaf)), latest first

    def plan(self, order: list) -> None:
        # The slot orders the leaves one node hands over together (a Linear's weight, then its bias) by the graph
        # alone, not by memory addresses: every process running the same model gets the same order (data
        # parallelism's ranks rebuild their buckets in rank 0's arrival order, and compare it with their own)
        last = {}
        for k, node in enumerate(order):
            for slot, t in enumerate(node.inputs):
                if t is not None and t.grad_fn is None:
                    last[id(t)] = (k, slot)
        self.done_after = sorted(((k, slot, i) for i, (k, slot) in last.items()), reverse=True)

    def deliver_ready(self, k: int, pending: dict) -> None:
        """Hand over the leaves whose last feeding node comes before position k of the walk. `pending`: the
        gradients still to flow; a leaf must not take one of their arrays (x + y sends one array both ways), since a
        hook may scale .grad in place while the walk goes on."""
        busy = None
        while self.done_after and self.done_after[-1][0] < k:
            entry = self.sums.pop(self.done_after.pop()[2], None)
            if entry is not None:  # None: nothing flowed into this leaf
                busy = {id(array_of(g)) for g in pending.values()} if busy is None else busy
                self.give(*entry, busy=busy)


def hook_added() -> None:
    global _hooked
    _hooked += 1
    points.leaf_sink = EarlyLeafGrads


def hook_removed() -> None:
    global _hooked
    _hooked -= 1
    if _hooked == 0:
        points.leaf_sink = None
