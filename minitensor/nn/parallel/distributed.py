"""DistributedDataParallel: one replica of a module per MPI rank, its gradients averaged across ranks.

The rule it implements: each rank backpropagates its shard of the global batch, then every parameter's gradient
becomes the mean over ranks, grad = (1/N) * sum_r grad_r, as torch's DDP (N = comm size). When each rank's loss is
the global loss restricted to its shard and multiplied by N, the mean of the N shard gradients IS the full-batch
gradient (the gradient is linear in the loss), so N ranks take the same step as one process on the whole batch.
For a mean over tokens this means scaling rank r's loss by N * n_r / n_global (n_r its non-PAD tokens): that
weighting lives in the loss (transformer_np/loss.py: `shard_loss`), never here, exactly as with torch's DDP.

How the averaging overlaps the backward (PyTorch's Reducer, torch/csrc/distributed/c10d/reducer.cpp):
  * at wrap time the parameters and buffers are broadcast from rank 0 (every replica starts equal), and their
    names, shapes and dtypes are compared across ranks (a rank built from another config is refused);
  * the parameters are grouped into buckets of about `bucket_cap_mb`, in reverse registration order, roughly
    the order in which the backward produces their gradients; after the first synchronised backward they are
    rebuilt once in the order the gradients really arrived (rank 0's, broadcast: every rank the same), as torch;
  * each parameter has a post-accumulate-grad hook; the graph walk fires it as soon as that gradient is complete
    (minitensor/autograd/leaf_delivery.py). When every gradient of a bucket is in, the bucket is packed
    into one flat buffer, each gradient times 1/N on the way in (as torch's Reducer does), and a non-blocking
    all-reduce (MPI Iallreduce, sum) is started on it, while the walk goes on with the earlier layers.
    Buckets start in index order on every rank, so all ranks issue their collectives in the same order;
  * when the last bucket has started, the hook waits for all of them and writes the averaged gradients back
    into each parameter's .grad. After `loss.backward()` returns, .grad holds the averaged gradient.
With MPICH an Iallreduce progresses only while some MPI call runs, so each hook also tests the pending requests
(a cheap MPI_Testall) to push them on; how much the overlap hides: docs/decisions/018-data-parallel-buckets.md.

On a device (the module moved there before it is wrapped, as with torch) MPI still works on host memory:
each bucket also has a flat buffer on the device. The gradients are packed into it there (times 1/N), copied to the
host buffer in one transfer, all-reduced, and copied back in one transfer: two copies per bucket and step, never one
per parameter. (A CUDA-aware MPI could reduce the device buffer directly; mpi4py's pip MPICH is not one.)

`no_sync()`: a forward and backward run inside it skip the reduction, so gradients accumulate locally; the first
backward after it reduces the accumulated .grad, as in torch.

Deviations from PyTorch, flagged:
  * the communicator is an mpi4py one (`comm`, default MPI.COMM_WORLD) instead of a torch.distributed group;
  * buffers are broadcast at wrap time only (torch's broadcast_buffers=True repeats it before every forward;
    this project's buffers, the sinusoidal table, never change);
  * no find_unused_parameters: a parameter that gets no gradient leaves its bucket unreduced, and the next
    forward raises (as torch does without find_unused_parameters) instead of silently using unreduced gradients;
  * no rank waits for ever on one that failed: a rank whose step raises tells the others on a communicator of their
    own (`FailureChannel`), and every wait of the reduction watches it, raising OtherRankFailed with that rank's
    error (torch leaves the other ranks in the collective until a timeout).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from ...autograd import is_grad_enabled
from ...devices import array_module, is_host
from ..modules.module import Module
from .launch import require_mpi


class OtherRankFailed(RuntimeError):
    """Raised on every other rank when one rank of a data-parallel run fails on its own: that rank reports its
    error, the others stop with this one, which names it. The collectives in flight are abandoned: end the
    process (MPI cannot be finalized cleanly with them)."""


class FailureChannel:
    """A communicator of its own (a Dup of the ranks'), on which a failing rank tells every other rank its error,
    and `wait`, which waits for requests while watching it. One per communicator (`failure_channel`): Dup is a
    collective, so every rank makes it at the same point (wrap time)."""

    TAG = 7071
    DONE_TAG = 7072

    def __init__(self, comm):
        MPI = require_mpi()
        self.MPI, self.comm = MPI, comm.Dup()
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.sent = []  # this rank's announcements in flight (small: sent eagerly, never waited for)
        self.failed = False  # this rank announced, or heard, a failure: its collectives are abandoned

    def announce(self, message: str, where: str = "") -> None:
        """Tell every other rank that this one failed (`where`: " in step 3", say), with `message`; once."""
        if self.failed:
            return
        self.failed = True
        said = (where, message)
        self.sent = [self.comm.isend(said, dest=r, tag=self.TAG) for r in range(self.size) if r != self.rank]

    def check(self) -> None:
        """Raise OtherRankFailed if another rank has announced a failure."""
        status = self.MPI.Status()
        if self.comm.Iprobe(source=self.MPI.ANY_SOURCE, tag=self.TAG, status=status):
            source = status.Get_source()
            where, message = self.comm.recv(source=source, tag=self.TAG)
            self.failed = True
            raise OtherRankFailed(f"data parallelism: rank {source} failed{where}, so every rank stops: {message}")

    def wait(self, requests: list) -> None:
        """MPI_Waitall, watching for another rank's failure (which would leave these requests waiting for ever)."""
        while not self.MPI.Request.Testall(requests):
            self.check()
            time.sleep(0)  # yield: a rank waits here only when another is behind

    def finish(self, timeout: float = 10.0) -> None:
        """After a failure, before this rank ends: say "done" to every other rank and wait until each has said it
        too, or `timeout` seconds. mpiexec kills every rank as soon as one ends without finalizing (as a failed
        rank must), so a failing rank that ended at once could kill rank 0 while it was still computing, before it
        heard of the failure and printed it. Call it once this rank's report is out; the timeout bounds a rank that
        never hears."""
        others = [r for r in range(self.size) if r != self.rank]
        sent = [self.comm.isend(None, dest=r, tag=self.DONE_TAG) for r in others]
        heard, deadline = set(), time.monotonic() + timeout
        while len(heard) < len(others) and time.monotonic() < deadline:
            status = self.MPI.Status()
            if self.comm.Iprobe(source=self.MPI.ANY_SOURCE, tag=self.DONE_TAG, status=status):
                self.comm.recv(source=status.Get_source(), tag=self.DONE_TAG)
                heard.add(status.Get_source())
            else:
                time.sleep(0.001)  # the others are still computing: do not take a core from them
        self.sent += sent


_CHANNELS: dict = {}


def failure_channel(comm) -> FailureChannel:
    """The FailureChannel of `comm`, made on first use (a collective: every rank asks at the same point)."""
    key = comm.py2f()
    if key not in _CHANNELS:
        _CHANNELS[key] = FailureChannel(comm)
    return _CHANNELS[key]


class _Bucket:
    """Parameters whose gradients travel in one flat buffer, and the request of its all-reduce in flight."""

    def __init__(self, params: list):
        self.params = params
        self.buffer = np.zeros(sum(p._data.size for p in params), dtype=params[0].dtype)  # on the host: MPI's
        # On a device: the flat buffer there, where the gradients are packed and unpacked; on the host: the same one.
        xp = array_module(params[0]._data)
        self.packed = self.buffer if xp is np else xp.zeros(self.buffer.shape, dtype=self.buffer.dtype)
        self.views, offset = [], 0  # each parameter's slice of the packed buffer, in its shape
        for p in params:
            self.views.append(self.packed[offset : offset + p._data.size].reshape(p.shape))
            offset += p._data.size
        self.pending = len(params)  # gradients still to come in this backward
        self.request = None

    @property
    def nbytes(self) -> int:
        return self.buffer.nbytes


class DistributedDataParallel(Module):
    """torch.nn.parallel.DistributedDataParallel over MPI: wraps `module`; forward passes through; after each
    backward every parameter's .grad is the mean over the ranks of `comm` of the ranks' gradients."""

    def __init__(self, module: Module, comm=None, bucket_cap_mb: float = 25.0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a Module to wrap, got {type(module).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: expected bucket_cap_mb > 0, got {bucket_cap_mb}")
        MPI = require_mpi()
        self.module = module
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.MPI = MPI
        self.world_size, self.rank = self.comm.Get_size(), self.comm.Get_rank()
        self.require_backward_grad_sync = True  # False inside no_sync()
        self.params = [p for p in module.parameters() if p.requires_grad]
        self._check_same_model_on_every_rank()
        self.channel = failure_channel(self.comm)
        self._broadcast_from_rank0()
        self.cap_bytes = int(bucket_cap_mb * 2**20)
        self._set_buckets(self.params[::-1])
        self.index_of = {id(p): i for i, p in enumerate(self.params)}
        self.arrival = []  # the first synchronised backward's gradient order (indices), to rebuild the buckets
        self.rebuilt = False
        self.hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in self.params]
        self.expect_hooks = False  # True between a synchronised forward and the end of its reduction
        self.delivered = set()
        self.next_bucket = 0  # the next bucket to start, in index order
        self.timeline = []  # this step's events as (name, time.perf_counter()): the notebook draws them

    # ---- wrap time ----------------------------------------------------------------------------
    def _check_same_model_on_every_rank(self) -> None:
        """Every rank the same parameters and buffers (names, shapes, dtypes), refused on every rank together:
        the wrap-time broadcast and every step's reduction read them in one order on all ranks."""
        params = [(n, p.shape, str(p.dtype)) for n, p in self.module.named_parameters() if p.requires_grad]
        buffers = [(n, b.shape, str(b.dtype)) for n, b in self.module.named_buffers()]
        everyone = self.comm.allgather((params, buffers))
        for kind, k in (("parameters", 0), ("buffers", 1)):
            for r, theirs in enumerate(e[k] for e in everyone):
                first = everyone[0][k]
                if theirs != first:
                    diff = _first_difference(first, theirs)
                    raise RuntimeError(
                        f"DistributedDataParallel: rank {r}'s {kind} differ from rank 0's ({diff}): every rank must "
                        "build the same model"
                    )

    def _broadcast_from_rank0(self) -> None:
        for t in [*self.module.parameters(), *self.module.buffers()]:
            if not is_host(t._data):  # on a device: through the host, once, at wrap time
                staged = t._data.get()
                self.comm.Bcast(staged, root=0)
                t._data[...] = array_module(t._data).asarray(staged)  # in place, as below
                continue
            if not t._data.flags.c_contiguous:
                t._data = np.ascontiguousarray(t._data)
            self.comm.Bcast(t._data, root=0)  # in place: an optimizer holding the tensors keeps them

    def _set_buckets(self, params: list) -> None:
        self.buckets = _make_buckets(params, self.cap_bytes)
        self.bucket_of = {id(p): b for b in self.buckets for p in b.params}

    def _rebuild_buckets(self) -> None:
        """Once: the buckets in the order the first backward delivered the gradients, rank 0's order on all."""
        order = self.comm.bcast(self.arrival, root=0)
        if sorted(order) == list(range(len(self.params))):  # every parameter seen once (else keep the first)
            self._set_buckets([self.params[i] for i in order])
        self.rebuilt = True

    # ---- the step -----------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        if self.expect_hooks:
            error = RuntimeError(
                f"DistributedDataParallel: the previous backward did not finish reducing gradients on rank "
                f"{self.rank}: {self.missing_gradients()} got no gradient (unused in the forward, or backward not "
                "called); every parameter must take part"
            )
            self.channel.announce(f"RuntimeError: {error}")  # the other ranks wait in that reduction: let them out
            raise error
        if self.require_backward_grad_sync and self.world_size > 1 and is_grad_enabled():  # no_grad: no backward
            self.expect_hooks, self.next_bucket, self.timeline = True, 0, []
            for b in self.buckets:
                b.pending, b.request = len(b.params), None
            self.delivered = set()  # ids of the parameters whose gradient this backward delivered
        return self.module(*args, **kwargs)

    def _grad_ready(self, p) -> None:
        """Post-accumulate-grad hook: count p in; start every complete bucket, in index order; finish at the end."""
        if not self.expect_hooks:  # inside no_sync, one process, or a backward that did not go through forward
            return
        if not self.timeline:
            self.timeline.append(("first gradient", time.perf_counter()))
        if not self.rebuilt:
            self.arrival.append(self.index_of[id(p)])
        self.delivered.add(id(p))
        self.bucket_of[id(p)].pending -= 1
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            self._start(self.buckets[self.next_bucket])
            self.next_bucket += 1
        started = [b.request for b in self.buckets[: self.next_bucket]]
        if self.next_bucket == len(self.buckets):
            self._finish()
        elif started:
            self.MPI.Request.Testall(started)  # lets MPICH progress the all-reduces in flight

    def _start(self, b: _Bucket) -> None:
        for p, view in zip(b.params, b.views):
            np.multiply(p.grad._data, 1.0 / self.world_size, out=view)  # torch's Reducer: 1/N on the way in
        if b.packed is not b.buffer:
            b.buffer[...] = b.packed.get()  # device -> host, one transfer for the bucket
        b.request = self.comm.Iallreduce(self.MPI.IN_PLACE, b.buffer, op=self.MPI.SUM)
        self.timeline.append((f"bucket {self.buckets.index(b)} started", time.perf_counter()))

    def missing_gradients(self) -> str:
        """The parameters whose gradient this backward has not delivered, named (for the unused-parameter error)."""
        waiting = [n for n, p in self.module.named_parameters() if p.requires_grad and id(p) not in self.delivered]
        shown = ", ".join(waiting[:4]) + (f" and {len(waiting) - 4} more" if len(waiting) > 4 else "")
        return f"parameter(s) {shown}" if waiting else "some parameter"

    def _finish(self) -> None:
        self.timeline.append(("wait", time.perf_counter()))
        self.channel.wait([b.request for b in self.buckets])
        self.timeline.append(("all reduced", time.perf_counter()))
        for b in self.buckets:
            if b.packed is not b.buffer:
                b.packed[...] = array_module(b.packed).asarray(b.buffer)  # host -> device, one transfer
            for p, view in zip(b.params, b.views):
                p.grad._data = view.copy()  # a fresh array: the bucket buffer is reused next step
        self.expect_hooks = False
        if not self.rebuilt:
            self._rebuild_buckets()

    @contextlib.contextmanager
    def no_sync(self):
        """Inside: forwards and backwards skip the all-reduce, so .grad accumulates on each rank alone. The first
        synchronised backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def communication_bytes(self) -> int:
        """Bytes of gradient each rank hands to the all-reduce per synchronised step."""
        return sum(b.nbytes for b in self.buckets)


def _first_difference(a: list, b: list) -> str:
    """The first (name, shape, dtype) entry where two ranks' lists differ, or the names one of them lacks."""
    mine, theirs = dict((n, rest) for n, *rest in a), dict((n, rest) for n, *rest in b)
    for n in sorted(set(mine) | set(theirs)):
        if n not in theirs:
            return f"{n!r} is missing there"
        if n not in mine:
            return f"{n!r} is there only"
        if mine[n] != theirs[n]:
            (s0, d0), (s1, d1) = mine[n], theirs[n]
            return f"{n!r}: shape {s1} {d1} there, {s0} {d0} on rank 0"
    return "the same names in another order"


def _make_buckets(params: list, cap_bytes: int) -> list:
    """Consecutive runs of `params` of one dtype, each closed once it holds at least cap_bytes."""
    buckets, current = [], []
    for p in params:
        if current and (p.dtype != current[0].dtype or sum(q._data.nbytes for q in current) >= cap_bytes):
            buckets.append(_Bucket(current))
            current = []
        current.append(p)
    if current:
        buckets.append(_Bucket(current))
    return buckets
